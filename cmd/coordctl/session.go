package main

// A session held by `coordctl lock` or `elect`: a client.Session (package
// client: the heartbeats, resumption, the local deadline) for one hold (a
// lock, a semaphore permit or a leadership), whose lease is lost when coordd
// reports that hold lost or the session ends.

import (
	"context"
	"time"

	"google.golang.org/grpc"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/client"
)

// holdRef names the one hold a session is for. coordd reports on the
// stream the losses of every hold of the session: only those of this kind
// and name are this hold's.
type holdRef struct {
	kind coordv1.HoldKind
	name string
}

// session is a live session for one hold.
type session struct {
	s    *client.Session
	hold holdRef
	lost chan struct{} // closed when the lease is lost
	err  error         // why; written before lost is closed
	done chan struct{} // closed when watch returns
}

// startSession opens a new session with ttl, for hold, and keeps it alive
// with a heartbeat every ttl/3 until Close. The session outlives ctx's
// cancellation (a signal must not break the stream and leave the lock held
// until its TTL): only Close ends it. timeout bounds the opening and each
// resumption.
func startSession(ctx context.Context, cc grpc.ClientConnInterface, hold holdRef, ttl, timeout time.Duration) (*session, error) {
	openCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := client.NewSession(openCtx, cc, client.WithTTL(ttl), client.WithResumeTimeout(timeout))
	if err != nil {
		return nil, err
	}
	ss := &session{s: s, hold: hold, lost: make(chan struct{}), done: make(chan struct{})}
	go ss.watch()
	return ss, nil
}

// watch ends the lease at the first loss of the hold, or the session's end.
func (ss *session) watch() {
	defer close(ss.done)
	for {
		select {
		case l := <-ss.s.Lost():
			if l.Kind == ss.hold.kind && l.Name == ss.hold.name {
				ss.err = &client.LostError{Hold: l}
				close(ss.lost)
				return
			}
		case <-ss.s.Done():
			ss.err = ss.s.Err()
			close(ss.lost)
			return
		}
	}
}

// ID is the session's ID.
func (ss *session) ID() string { return ss.s.ID() }

// Lost is closed when the lease is lost: the session expired or was ended
// by coordd, coordd reported its hold lost, or no heartbeat was answered
// within the TTL. Err says why.
func (ss *session) Lost() <-chan struct{} { return ss.lost }

// Err is why the lease was lost, once Lost is closed.
func (ss *session) Err() error {
	select {
	case <-ss.lost:
		return ss.err
	default:
		return nil
	}
}

// Close ends the session: it half-closes the stream, which makes coordd end
// the session and release its hold at once, and waits up to bound for coordd
// to confirm. An error means the end was not confirmed: the hold is then
// released when the session's TTL runs out. Close must be called exactly
// once.
func (ss *session) Close(bound time.Duration) error {
	err := ss.s.CloseWithin(bound)
	<-ss.done
	return err
}
