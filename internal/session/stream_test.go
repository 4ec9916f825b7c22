package session_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/session"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
)

// scripted is a Transport that delivers reqs, then io.EOF, and records
// what Stop was told.
type scripted struct {
	mu      sync.Mutex
	reqs    []session.Request
	replies []session.Reply
	stopped []error
}

func (s *scripted) Recv() (session.Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		return session.Request{}, io.EOF
	}
	r := s.reqs[0]
	s.reqs = s.reqs[1:]
	return r, nil
}

func (s *scripted) Send(r session.Reply) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, r)
	return nil
}

func (s *scripted) Stop(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = append(s.stopped, err)
}

// drainingClose is a store whose CloseSession drains the server while it
// runs.
type drainingClose struct {
	store.Sessions
	drain context.CancelFunc
}

func (d drainingClose) CloseSession(ctx context.Context, ref store.SessionRef) ([]store.ReleasedHold, error) {
	d.drain()
	time.Sleep(20 * time.Millisecond) // the drain's AfterFunc runs meanwhile
	return d.Sessions.CloseSession(ctx, ref)
}

// TestDrainDuringHalfClose: a drain that comes while a half-closed
// stream's session is being closed does not cut the close short: Run
// answers what the close did (nil: the client is told OK, its session
// ended), and the transport is not told to stop with the drain's status
// (the client would resume a session that no longer exists).
func TestDrainDuringHalfClose(t *testing.T) {
	mem := memory.New(memory.Options{})
	defer func() { _ = mem.Close() }()
	drain, drainNow := context.WithCancel(context.Background())
	defer drainNow()
	svc := session.New(drainingClose{mem, drainNow}, mem, session.DefaultConfig())
	tr := &scripted{reqs: []session.Request{{TTL: 10 * time.Second}}}
	err := svc.Run(t.Context(), "ns", tr, drain, session.Hooks{Lost: func(store.LostHold) {}, Released: func(store.ReleasedHold) {}})
	if err != nil {
		t.Errorf("Run = %v, want nil: the half-close finished", err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.replies) != 1 || tr.replies[0].State.ID == "" {
		t.Fatalf("replies = %+v, want the open's", tr.replies)
	}
	if len(tr.stopped) != 0 {
		t.Errorf("Stop was told %v during the half-close", tr.stopped)
	}
	if _, err := mem.CheckSession(t.Context(), store.SessionRef{ID: store.Scope("ns", tr.replies[0].State.ID)}); err == nil {
		t.Errorf("the session lives on after the half-close")
	}
}
