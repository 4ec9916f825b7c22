package session_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/session"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
)

// recording is a store.Sessions that remembers the lock-delays it was
// given.
type recording struct {
	store.Sessions
	delays []time.Duration
}

func (r *recording) CreateSession(ctx context.Context, id string, ttl time.Duration, max int, lockDelay time.Duration) (store.SessionState, error) {
	r.delays = append(r.delays, lockDelay)
	return r.Sessions.CreateSession(ctx, id, ttl, max, lockDelay)
}

// TestOpenLockDelay: a new session's lock_delay reaches the store, checked
// against 0..store.MaxLockDelay before any store call.
func TestOpenLockDelay(t *testing.T) {
	mem := memory.New(memory.Options{})
	defer func() { _ = mem.Close() }()
	rec := &recording{Sessions: mem}
	svc := session.New(rec, mem, session.DefaultConfig())
	for _, d := range []time.Duration{0, time.Second, store.MaxLockDelay} {
		st, err := svc.Open(t.Context(), "ns", "", 0, d)
		if err != nil || !token.Valid(st.ID) {
			t.Fatalf("Open with lock_delay %v: %+v, %v", d, st, err)
		}
		if got := rec.delays[len(rec.delays)-1]; got != d {
			t.Errorf("CreateSession got lock delay %v, want %v", got, d)
		}
	}
	id := token.New()
	for _, d := range []time.Duration{-time.Millisecond, store.MaxLockDelay + time.Millisecond} {
		for _, resume := range []string{"", id} {
			before := len(rec.delays)
			_, err := svc.Open(t.Context(), "ns", resume, 0, d)
			var fe *validate.FieldError
			if !errors.As(err, &fe) || fe.Field != "lock_delay" {
				t.Errorf("Open(%q) with lock_delay %v: %v, want a FieldError for lock_delay", resume, d, err)
			}
			if len(rec.delays) != before {
				t.Errorf("CreateSession called for a bad lock_delay")
			}
		}
	}
	// A resume keeps the session's delay: nothing is created.
	st, _ := svc.Open(t.Context(), "ns", "", 0, time.Second)
	before := len(rec.delays)
	if _, err := svc.Open(t.Context(), "ns", st.ID, 0, 0); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if len(rec.delays) != before {
		t.Errorf("a resume created a session")
	}
}
