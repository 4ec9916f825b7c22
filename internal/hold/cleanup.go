package hold

// CleanUps: the background clean-up of uncertain grants, of every kind of
// hold. A goroutine per grant whose first AbandonHold failed, bounded in
// number; mu guards closed and inFlight; the drain ends them, Wait waits
// for them.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
	"github.com/coordd/coordd/internal/waiter"
)

// CleanUps abandons grants of one kind of hold whose outcome a caller was
// told is uncertain. The zero value is not usable; call NewCleanUps.
type CleanUps struct {
	st       store.Holds
	kind     store.HoldKind
	drain    waiter.Drain
	wg       sync.WaitGroup
	mu       sync.Mutex // guards closed and inFlight
	closed   bool       // Wait was called: no clean-up starts
	inFlight int
}

// NewCleanUps returns the clean-ups of grants of kind in st; background
// tries end when drain is closed.
func NewCleanUps(st store.Holds, kind store.HoldKind, drain waiter.Drain) *CleanUps {
	return &CleanUps{st: st, kind: kind, drain: drain}
}

// cleanUpFor bounds the background clean-up of an uncertain session-bound
// grant (a lease's is bounded by its TTL).
const cleanUpFor = time.Hour

// maxCleanUps bounds the background clean-ups in flight; past it, an
// uncertain grant is left to end by itself (at its TTL; a session-bound
// one, unconfirmed, at the deadline it was granted with).
const maxCleanUps = 10000

// Abandon ends a grant of name that a failed acquisition may have made:
// its token is known only to the failed call, so nobody else can. The
// store's abandon releases a lease, and turns a session-bound grant into a loss
// report, so that a stream that adopted it (AlreadyHeld) learns that it is
// gone. The request's wait ticket (nil: it never queued) leaves the queue
// first: left there, it could be handed the grant until its lease ends, after
// the grant was abandoned. One try now; if the store cannot be reached,
// tries go on in the background, with backoff, until the store answers,
// life has passed (sessionBound: cleanUpFor), or the daemon drains.
func (c *CleanUps) Abandon(name, tok string, ticket *store.WaitTicket, life time.Duration, sessionBound bool) {
	if sessionBound {
		life = cleanUpFor // a binding may live as long as its session
	}
	id := ""
	if ticket != nil {
		id = ticket.Ticket
	}
	if c.abandonOnce(name, tok, id) {
		return
	}
	c.mu.Lock()
	if c.closed || c.inFlight >= maxCleanUps {
		c.mu.Unlock()
		return
	}
	c.inFlight++
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			c.inFlight--
			c.mu.Unlock()
			c.wg.Done()
		}()
		end := time.Now().Add(life)
		backoff := 50 * time.Millisecond
		for time.Now().Before(end) {
			t := time.NewTimer(backoff)
			select {
			case <-c.drain:
				t.Stop()
				return
			case <-t.C:
			}
			if c.abandonOnce(name, tok, id) {
				return
			}
			backoff = min(2*backoff, 2*time.Second)
		}
	}()
}

// abandonOnce tries once and reports whether the store answered.
func (c *CleanUps) abandonOnce(name, tok, ticket string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.st.AbandonHold(ctx, c.kind, name, tok, ticket) == nil
}

// Wait returns when every background clean-up has ended (they end when the
// drain channel closes); no clean-up starts after it is called.
func (c *CleanUps) Wait() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
}

// Uncertain reports whether err leaves the outcome of an acquisition
// unknown (the store may have granted it): anything but the session errors
// that the store answers before granting anything.
func Uncertain(err error) bool {
	return err != nil && !errors.Is(err, store.ErrSessionNotFound) && !errors.Is(err, store.ErrTooManyHolds) &&
		!errors.Is(err, store.ErrLimitMismatch) && !errors.Is(err, store.ErrTooManyWaiters) && !errors.Is(err, store.ErrRedlockMode) &&
		!validate.IsFieldError(err)
}

// LocalTime turns a time of the store's clock (clk tells it) into the local
// clock's, for Result's RetryAt; zero stays zero.
func LocalTime(clk clock.Clock, t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Now().Add(t.Sub(clk.Now()))
}
