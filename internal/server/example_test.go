package server_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/store/memory"
)

// ExampleNew serves coordd on the memory store and takes a lock the way a
// client should: keep the fence, hand it to the resource the lock guards,
// release by token.
func ExampleNew() {
	st := memory.New(memory.Options{})
	defer st.Close()
	drain, drainNow := context.WithCancel(context.Background())
	defer drainNow()
	svc, err := server.NewServices(st, clock.Real{}, server.DefaultConfig(), drain)
	if err != nil {
		log.Fatal(err)
	}
	gs, _ := server.New(svc, server.Options{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	locks := coordv1.NewLockServiceClient(conn)
	ctx := context.Background()

	mine, err := locks.Lock(ctx, &coordv1.LockRequest{Name: "invoices", Ttl: durationpb.New(30 * time.Second), Owner: "worker-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker-1 acquired:", mine.GetAcquired())

	theirs, err := locks.Lock(ctx, &coordv1.LockRequest{Name: "invoices", Ttl: durationpb.New(30 * time.Second), Owner: "worker-2"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker-2 acquired:", theirs.GetAcquired(), "held by", theirs.GetHolder())

	// Write to the guarded resource with the fence, e.g.
	//   UPDATE invoices SET …, last_fence = $fence WHERE last_fence < $fence
	_ = mine.GetFence()

	rel, err := locks.Release(ctx, &coordv1.ReleaseRequest{Name: "invoices", Token: mine.GetToken()})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", rel.GetReleased())
	// Output:
	// worker-1 acquired: true
	// worker-2 acquired: false held by worker-1
	// released: true
}
