package main

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// fakeSessions is a SessionService whose answers a test scripts: behave
// gets the stream's number and the request's number on it (both from 1) and
// returns the response to send, an error that ends the stream (errEndStream:
// with OK), or neither (no answer).
type fakeSessions struct {
	coordv1.UnimplementedSessionServiceServer
	behave func(stream, n int, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error)

	mu         sync.Mutex
	streams    int
	firstIDs   []string // the session_id of each stream's first request
	halfClosed int
}

func (f *fakeSessions) KeepAlive(s coordv1.SessionService_KeepAliveServer) error {
	f.mu.Lock()
	f.streams++
	stream := f.streams
	f.mu.Unlock()
	for n := 1; ; n++ {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			f.mu.Lock()
			f.halfClosed++
			f.mu.Unlock()
			return nil
		}
		if err != nil {
			return err
		}
		if n == 1 {
			f.mu.Lock()
			f.firstIDs = append(f.firstIDs, req.GetSessionId())
			f.mu.Unlock()
		}
		resp, err := f.behave(stream, n, req)
		if errors.Is(err, errEndStream) {
			return nil
		}
		if err != nil {
			return err
		}
		if resp != nil {
			if err := s.Send(resp); err != nil {
				return err
			}
		}
	}
}

func (f *fakeSessions) state() (streams int, firstIDs []string, halfClosed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams, append([]string(nil), f.firstIDs...), f.halfClosed
}

// errEndStream makes fakeSessions end the stream with OK.
var errEndStream = errors.New("end the stream with OK")

// liveAnswer answers a heartbeat as a live session s1 would.
func liveAnswer(req *coordv1.KeepAliveRequest) *coordv1.KeepAliveResponse {
	return &coordv1.KeepAliveResponse{SessionId: "s1", Ttl: req.GetTtl()}
}

// startFake serves f and returns a connection to it.
func startFake(t *testing.T, f *fakeSessions) grpc.ClientConnInterface {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coordv1.RegisterSessionServiceServer(srv, f)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-served
	})
	return conn
}

const testTTL = 300 * time.Millisecond

func mustStart(t *testing.T, cc grpc.ClientConnInterface) *session {
	t.Helper()
	s, err := startSession(context.Background(), cc, holdRef{coordv1.HoldKind_HOLD_KIND_LOCK, "job"}, testTTL, 2*time.Second)
	if err != nil {
		t.Fatalf("startSession: %v", err)
	}
	if s.ID() != "s1" {
		t.Errorf("session ID = %q, want s1", s.ID())
	}
	return s
}

// waitLost waits up to within for the lease to be lost and returns why.
func waitLost(t *testing.T, s *session, within time.Duration) error {
	t.Helper()
	select {
	case <-s.Lost():
		return s.Err()
	case <-time.After(within):
		t.Fatalf("the lease was not lost within %v", within)
		return nil
	}
}

func TestSessionHeartbeatsAndCloses(t *testing.T) {
	var beats sync.WaitGroup
	beats.Add(5)
	f := &fakeSessions{behave: func(_, n int, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error) {
		if n <= 5 {
			beats.Done()
		}
		return liveAnswer(req), nil
	}}
	s := mustStart(t, startFake(t, f))
	beats.Wait() // about 4 x ttl/3
	if err := s.Err(); err != nil {
		t.Fatalf("lease lost while coordd answered: %v", err)
	}
	if err := s.Close(time.Second); err != nil {
		t.Errorf("Close = %v", err)
	}
	if streams, _, halfClosed := f.state(); streams != 1 || halfClosed != 1 {
		t.Errorf("%d streams, %d half-closed; want one, half-closed", streams, halfClosed)
	}
}

// A broken stream is resumed with the session's ID, and the lease goes on.
func TestSessionResumesBrokenStream(t *testing.T) {
	f := &fakeSessions{behave: func(stream, n int, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error) {
		if stream < 3 && n == 2 {
			return nil, status.Error(codes.Unavailable, "instance going away")
		}
		return liveAnswer(req), nil
	}}
	s := mustStart(t, startFake(t, f))
	time.Sleep(3 * testTTL)
	if err := s.Err(); err != nil {
		t.Fatalf("lease lost although every broken stream was resumed at once: %v", err)
	}
	if err := s.Close(time.Second); err != nil {
		t.Errorf("Close = %v", err)
	}
	streams, ids, halfClosed := f.state()
	if streams != 3 || halfClosed != 1 {
		t.Errorf("%d streams, %d half-closed; want 3 (two broken), the last half-closed", streams, halfClosed)
	}
	if want := []string{"", "s1", "s1"}; strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("first session_id of each stream = %q, want %q", ids, want)
	}
}

func TestSessionLoss(t *testing.T) {
	tests := []struct {
		name   string
		behave func(stream, n int, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error)
		want   string
		within time.Duration
	}{
		{"lock reported lost", func(_, n int, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error) {
			resp := liveAnswer(req)
			if n == 3 {
				resp.LostLocks = []*coordv1.LostLock{{Name: "job", Fence: 9, Reason: coordv1.LockLossReason_LOCK_LOSS_REASON_MAX_HOLD}}
			}
			return resp, nil
		}, `coordd reports lock "job" (fence 9): it reached its max hold`, time.Second},
		{"session expired", func(_, n int, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error) {
			if n == 2 {
				return &coordv1.KeepAliveResponse{SessionId: "s1", Expired: true}, nil
			}
			return liveAnswer(req), nil
		}, "coordd reports the session expired", time.Second},
		{"not found on resume", func(stream, n int, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error) {
			switch {
			case stream == 1 && n == 2:
				return nil, status.Error(codes.Unavailable, "broken")
			case stream > 1:
				return nil, status.Error(codes.FailedPrecondition, "session s1 expired")
			}
			return liveAnswer(req), nil
		}, "the session cannot be resumed: FAILED_PRECONDITION: session s1 expired", time.Second},
		{"stream ended by coordd", func(_, n int, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error) {
			if n == 2 {
				return nil, errEndStream
			}
			return liveAnswer(req), nil
		}, "coordd ended the session", time.Second},
		{"coordd stops answering", func(_, n int, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error) {
			if n > 1 {
				return nil, nil
			}
			return liveAnswer(req), nil
		}, "no heartbeat was answered within the session TTL (300ms)", 2 * testTTL},
		{"answers come after the TTL", func(_, n int, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error) {
			if n > 1 {
				time.Sleep(testTTL + 100*time.Millisecond) // answered, but too late to prove anything
			}
			return liveAnswer(req), nil
		}, "no heartbeat was answered within the session TTL (300ms)", 2 * testTTL},
		{"resumption keeps failing", func(stream, n int, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error) {
			if stream > 1 || n == 2 {
				return nil, status.Error(codes.Unavailable, "store unreachable")
			}
			return liveAnswer(req), nil
		}, "no heartbeat was answered within the session TTL (300ms), so the lease may have ended; last error: UNAVAILABLE: store unreachable", 2 * testTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSessions{behave: tt.behave}
			s := mustStart(t, startFake(t, f))
			started := time.Now()
			err := waitLost(t, s, tt.within)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("lease lost after %v with %v; want %q", time.Since(started).Round(time.Millisecond), err, tt.want)
			}
			// Close still ends what can be ended, and returns.
			_ = s.Close(200 * time.Millisecond)
		})
	}
}
