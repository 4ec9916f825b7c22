package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/client"
)

// The examples dial nothing: exampleConn is a connection to an in-process
// coordd (TestMain). An application dials its coordd:
//
//	conn, err := grpc.NewClient("127.0.0.1:7070", grpc.WithTransportCredentials(insecure.NewCredentials()))

func ExampleMutex() {
	ctx := context.Background()
	s, err := client.NewSession(ctx, exampleConn, client.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close() // releases what the session still holds

	m := client.NewMutex(s, "reports/daily", client.HoldOptions{Owner: "worker-1"})
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// Pass m.Fence() with every write the lock guards; stop if the lock is
	// lost.
	select {
	case <-m.Lost():
		log.Fatal(m.Err())
	default:
		fmt.Println("locked, fence above 0:", m.Fence() > 0)
	}
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: locked, fence above 0: true
}

func ExampleSession_Lost() {
	ctx := context.Background()
	s, err := client.NewSession(ctx, exampleConn)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m := client.NewMutex(s, "capped", client.HoldOptions{MaxHold: 200 * time.Millisecond})
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	lost := <-s.Lost() // coordd reports it, by name and reason
	fmt.Println(lost.Name, lost.Reason)
	// Output: capped LOCK_LOSS_REASON_MAX_HOLD
}

func ExampleSemaphore() {
	ctx := context.Background()
	s, err := client.NewSession(ctx, exampleConn)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	permit := client.NewSemaphore(s, "gpu", 4, client.HoldOptions{}) // at most 4 holders
	if err := permit.Acquire(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired a permit")
	_ = permit.Release(ctx)
	// Output: acquired a permit
}

func ExampleElection() {
	ctx := context.Background()
	s, err := client.NewSession(ctx, exampleConn)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	e := client.NewElection(s, "scheduler", client.HoldOptions{})
	if err := e.Campaign(ctx, []byte("10.0.0.7:8080")); err != nil {
		log.Fatal(err)
	}
	leader, _, err := e.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("leader: %s\n", leader.Value)
	_ = e.Resign(ctx)
	// Output: leader: 10.0.0.7:8080
}

func ExampleLimiter() {
	ctx := context.Background()
	l := client.NewInlineLimiter(exampleConn, coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, 2, time.Hour, 0)
	for range 3 {
		d, err := l.Allow(ctx, "user-42", 1)
		if err != nil {
			log.Fatal(err) // unknown: the call may or may not have consumed
		}
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 1
	// true 0
	// false 0
}

func ExampleIdempotent() {
	ctx := context.Background()
	charge := func(ctx context.Context) ([]byte, error) {
		fmt.Println("charging")
		return []byte("receipt-1"), nil
	}
	for range 2 { // a retry gets the first call's result
		r, err := client.Idempotent(ctx, exampleConn, "order-7", "sha256:ab12", client.IdempotentOptions{}, charge)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(r))
	}
	// Output:
	// charging
	// receipt-1
	// receipt-1
}

func ExampleWorker() {
	ctx, stop := context.WithCancel(context.Background())
	q := coordv1.NewQueueServiceClient(exampleConn)
	if _, err := q.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "emails", Payload: []byte("hello")}); err != nil {
		log.Fatal(err)
	}
	w := client.NewWorker(exampleConn, "emails", func(ctx context.Context, m client.Message) error {
		fmt.Printf("sending %s (attempt %d)\n", m.Payload, m.Attempt)
		stop() // a graceful stop: this handler finishes and its message is acked
		return nil
	}, client.WorkerOptions{Concurrency: 8})
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
	// Output: sending hello (attempt 1)
}
