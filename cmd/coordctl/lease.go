package main

// How `coordctl lock` keeps its lease while the command runs: a session
// (session.go) in every mode but one; against a coordd in Redlock mode
// (redis.mode redlock), which serves no sessions, a plain lease that
// coordctl renews itself.
//
// Concurrency of a plain lease: one goroutine (keep) renews it, one Renew
// at a time, and alone moves its deadline, by the local clock and
// conservatively: the answer to a Renew sent at T with ttl D means the
// lock is held until T+D at least (coordd renewed it after T, and never
// brings an expired lock back). A renewal that fails otherwise than with
// LOCK_NOT_HELD (UNAVAILABLE, a timeout) is uncertain: it moves nothing,
// and keep tries again until the deadline. Each Renew is cut off at the
// deadline, so keep sees the deadline pass within moments.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// keeper keeps one hold's lease while the command runs.
type keeper interface {
	// ID is the session's ID to bind the hold to; "" for a plain lease.
	ID() string
	// granted tells the keeper that the hold was granted with token: the
	// request was sent at sent and answered a lease of ttl.
	granted(token string, sent time.Time, ttl time.Duration)
	// Lost is closed when the lease is lost; Err then says why.
	Lost() <-chan struct{}
	Err() error
	// Close gives the hold back, waiting up to bound for coordd's answer.
	// An error wrapping errGoneAtEnd says the hold was already gone.
	// Close must be called exactly once.
	Close(bound time.Duration) error
}

func (ss *session) granted(string, time.Time, time.Duration) {} // the session keeps it

// hasReason reports whether err is coordd's status code with an ErrorInfo
// of reason.
func hasReason(err error, code codes.Code, reason string) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "coordd" && info.GetReason() == reason {
			return true
		}
	}
	return false
}

// redlockMode reports whether err is coordd's refusal of a coordd in
// Redlock mode: it serves exclusive locks without sessions only.
func redlockMode(err error) bool { return hasReason(err, codes.FailedPrecondition, "REDLOCK_MODE") }

// Retries of an uncertain renewal back off from minRenewBackoff to a third
// of the TTL, at most maxRenewBackoff, with jitter.
const (
	minRenewBackoff = 50 * time.Millisecond
	maxRenewBackoff = time.Second
)

// plainLease is a lock held without a session, renewed by coordctl every
// ttl/3 and released by Close.
type plainLease struct {
	ttl     time.Duration // asked at every renewal
	timeout time.Duration // bounds each call
	renew   func(ctx context.Context, token string, ttl time.Duration) (time.Duration, error)
	release func(ctx context.Context, token string) (bool, error)

	token   string        // set by granted
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when keep returns; nil before granted
	lost    chan struct{} // closed when the lease is lost
	err     error         // why; written before lost is closed
	notHeld bool          // coordd answered LOCK_NOT_HELD (nothing to release); written before lost is closed
}

func newPlainLease(j *holdJob, timeout time.Duration) *plainLease {
	return &plainLease{ttl: j.ttl, timeout: timeout, renew: j.renew, release: j.release,
		stop: make(chan struct{}), lost: make(chan struct{})}
}

func (l *plainLease) ID() string { return "" }

func (l *plainLease) granted(token string, sent time.Time, ttl time.Duration) {
	l.token, l.done = token, make(chan struct{})
	go l.keep(sent.Add(ttl))
}

func (l *plainLease) Lost() <-chan struct{} { return l.lost }

func (l *plainLease) Err() error {
	select {
	case <-l.lost:
		return l.err
	default:
		return nil
	}
}

func (l *plainLease) end(err error, notHeld bool) {
	l.err, l.notHeld = err, notHeld
	close(l.lost)
}

// keep renews the lease every ttl/3 until Close, and ends it when coordd
// answers LOCK_NOT_HELD or deadline passes without a renewal answered. A
// grant that came after a wait (more than a third of the lease gone by
// its deadline, counted from when the request was sent) is renewed at
// once, and its deadline waits for that renewal's answer: the lock was
// granted some time during the wait, and a renewal answered proves it
// held now; an uncertain one leaves the old deadline, and so the lease
// lost if that has passed.
func (l *plainLease) keep(deadline time.Time) {
	defer close(l.done)
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	next := time.NewTimer(l.ttl / 3)
	defer next.Stop()
	proving := time.Until(deadline) < l.ttl*2/3
	if proving {
		expire.Stop()
		next.Reset(0)
	}
	backoff := minRenewBackoff
	var lastErr error
	for {
		select {
		case <-l.stop:
			return
		case <-expire.C:
			msg := fmt.Sprintf("no renewal was answered before the lease's end (--ttl %v, renewed every %v), so the lock may be gone", l.ttl, l.ttl/3)
			if lastErr != nil {
				msg += "; last error: " + describeStatus(lastErr)
			}
			l.end(errors.New(msg), false)
			return
		case <-next.C:
			sent := time.Now()
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			if proving {
				cancel()
				ctx, cancel = context.WithCancel(context.Background()) // the deadline may be past
			}
			ctx, cancelCall := context.WithTimeout(ctx, l.timeout)
			ttl, err := l.renew(ctx, l.token, l.ttl)
			cancelCall()
			cancel()
			switch {
			case err == nil:
				deadline, proving = sent.Add(ttl), false
				expire.Reset(time.Until(deadline))
				next.Reset(l.ttl / 3)
				backoff, lastErr = minRenewBackoff, nil
			case hasReason(err, codes.FailedPrecondition, "LOCK_NOT_HELD"):
				l.end(fmt.Errorf("coordd answers a renewal %s", describeStatus(err)), true)
				return
			default: // uncertain: the deadline stays
				lastErr = err
				if proving {
					proving = false
					expire.Reset(time.Until(deadline))
				}
				next.Reset(backoff/2 + rand.N(backoff/2+1))
				backoff = min(2*backoff, maxRenewBackoff, max(l.ttl/3, minRenewBackoff))
			}
		}
	}
}

// Close stops the renewals and releases the lock, unless coordd said it
// was not held. A lock that Release finds gone was lost (errGoneAtEnd),
// unless the lease was already known lost.
func (l *plainLease) Close(bound time.Duration) error {
	if l.done == nil {
		return nil // never granted: nothing to give back
	}
	close(l.stop)
	<-l.done
	lostErr := l.Err()
	if lostErr != nil && l.notHeld {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	released, err := l.release(ctx, l.token)
	switch {
	case err != nil:
		return fmt.Errorf("releasing the lock: %s; it ends when its lease (--ttl %v) runs out", describeStatus(err), l.ttl)
	case !released && lostErr == nil:
		return fmt.Errorf("%w: Release answered released=false, the lock was no longer held", errGoneAtEnd)
	}
	return nil
}
