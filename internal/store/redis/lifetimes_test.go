package redis

// TestKeyLifetimes lists, with SCAN on the test's own standalone Redis, every
// key a queue and an idempotency key leave behind, and checks that each has
// a TTL that ends when its records end (plus the simulated clock's slack),
// or holds only live messages, so that nothing outlives its records when
// nobody touches the queue or the key again.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
)

// ltKeys returns the keys under pattern, with each one's PTTL (-1: none).
func ltKeys(t *testing.T, c *goredis.Client, pattern string) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	out := map[string]time.Duration{}
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		d, err := c.PTTL(ctx, iter.Val()).Result()
		if err != nil {
			t.Fatalf("PTTL %s: %v", iter.Val(), err)
		}
		if d != -2 { // -2: expired between SCAN and PTTL
			out[iter.Val()] = d
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN %s: %v", pattern, err)
	}
	return out
}

// ltWant checks keys against want: each key must be one of want's, and
// have the TTL want gives it or, for a negative want, none. A TTL counts
// down in real time from when it was set: ltSlop allows for the time the
// test has taken since.
func ltWant(t *testing.T, what string, keys map[string]time.Duration, want map[string]time.Duration) {
	t.Helper()
	for k, ttl := range keys {
		w, ok := want[k]
		switch {
		case !ok:
			t.Errorf("%s: key %s (pttl %v) is not one the store should have left", what, k, ttl)
		case w < 0 && ttl >= 0:
			t.Errorf("%s: key %s has pttl %v, want none (it holds live messages)", what, k, ttl)
		case w >= 0 && ttl < 0:
			t.Errorf("%s: key %s has no TTL, want %v", what, k, w)
		case w >= 0 && (ttl < w-ltSlop || ttl > w):
			t.Errorf("%s: key %s has pttl %v, want %v", what, k, ttl, w)
		}
	}
	var missing []string
	for k := range want {
		if _, ok := keys[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("%s: keys %v are missing; have %v", what, missing, keys)
	}
}

const ltSlop = 5 * time.Second

// ltExpiryStep is prelude.lua's expiryStep: keys that follow a renewed
// deadline (a session's, its holds') expire at their need rounded up to it.
const ltExpiryStep = 30 * time.Second

func TestKeyLifetimes(t *testing.T) {
	addr := redistest.Standalone(t)
	clk := clock.NewFake(rgT0)
	const deadTTL = time.Hour
	s, c, _ := rgStandalone(t, addr, clk, Config{DeadLetterTTL: deadTTL})
	ctx := context.Background()
	slack := time.Duration(s.timeArgs()[1].(int64)) * time.Millisecond
	noErr := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	claim := func(q string, vis time.Duration) store.Message {
		t.Helper()
		cl, err := s.Claim(ctx, q, store.Claim{Tokens: []string{token.New()}, Visibility: vis})
		noErr("Claim", err)
		if len(cl.Messages) != 1 {
			t.Fatalf("Claim: %d messages, want 1", len(cl.Messages))
		}
		return cl.Messages[0]
	}
	enqueue := func(q string, max int, dedup string) {
		t.Helper()
		_, err := s.Enqueue(ctx, q, store.NewMessage{ID: token.New(), Payload: []byte("p"), MaxAttempts: max,
			DedupID: dedup, DedupWindow: 5 * time.Minute})
		noErr("Enqueue", err)
	}

	t.Run("queue", func(t *testing.T) {
		q := "lifetimes"
		k := s.keys.queue(q)
		last, dead, msg, meta, deadmsg, dedup, dedupexp, seq, ready, deadprev := k[2], k[3], k[4], k[5], k[6], k[7], k[8], k[9], k[10], k[14]
		pattern := strings.TrimSuffix(k[0], ":pending") + ":*"

		// An acked message with a dedup ID, a dead letter, and a claim on
		// its last attempt: nothing live, so every key has a TTL.
		enqueue(q, 3, "d1")
		_, err := s.Ack(ctx, q, []string{claim(q, time.Minute).Receipt})
		noErr("Ack", err)
		enqueue(q, 1, "")
		_, err = s.Nack(ctx, q, claim(q, time.Minute).Receipt, 0)
		noErr("Nack", err)
		enqueue(q, 1, "")
		claim(q, 10*time.Second)
		lastEnd := 10*time.Second + deadTTL + slack + time.Millisecond
		ltWant(t, "no live message", ltKeys(t, c, pattern), map[string]time.Duration{
			last: lastEnd, msg: lastEnd, meta: lastEnd, seq: lastEnd,
			dead: deadTTL + slack + time.Millisecond, deadmsg: deadTTL + slack + time.Millisecond, deadprev: deadTTL + slack + time.Millisecond,
			dedup: 5*time.Minute + slack + time.Millisecond, dedupexp: 5*time.Minute + slack + time.Millisecond,
		})

		// A ready message: the keys that hold it have no TTL, and hold
		// only the live messages; the others keep theirs (set in real time:
		// the simulated second does not count).
		clk.Advance(time.Second)
		enqueue(q, 3, "")
		ltWant(t, "a ready message", ltKeys(t, c, pattern), map[string]time.Duration{
			ready: -1, msg: -1, meta: -1, seq: -1, last: lastEnd,
			dead: deadTTL + slack + time.Millisecond, deadmsg: deadTTL + slack + time.Millisecond, deadprev: deadTTL + slack + time.Millisecond,
			dedup: 5*time.Minute + slack + time.Millisecond, dedupexp: 5*time.Minute + slack + time.Millisecond,
		})
		if n, err := c.HLen(ctx, msg).Result(); err != nil || n != 2 {
			t.Errorf("HLEN msg = %d, %v; want 2 (the ready message and the claim)", n, err)
		}

		// Everything ends: the ready message is acked, the claim dies, the
		// dead letters and the dedup ID pass their ttl. The next Claim's
		// upkeep (Stats only reads) leaves nothing.
		_, err = s.Ack(ctx, q, []string{claim(q, time.Minute).Receipt})
		noErr("Ack", err)
		clk.Advance(10*time.Second + deadTTL)
		if cl, err := s.Claim(ctx, q, store.Claim{Tokens: []string{token.New()}, Visibility: time.Minute}); err != nil || len(cl.Messages) != 0 {
			t.Fatalf("Claim = %+v, %v; want no message", cl, err)
		}
		st, err := s.Stats(ctx, q)
		noErr("Stats", err)
		if st != (store.QueueStats{}) {
			t.Errorf("Stats = %+v, want empty", st)
		}
		ltWant(t, "all ended", ltKeys(t, c, pattern), nil)
	})

	t.Run("idempotency", func(t *testing.T) {
		key := func(n string) string { return s.keys.idem(n) }
		begin := func(n string, ttl time.Duration) string {
			t.Helper()
			owner := token.New()
			st, err := s.BeginIdempotent(ctx, store.BeginIdempotent{Key: n, Fingerprint: "fp", OwnerToken: owner,
				ProcessingTTL: ttl, Retention: deadTTL})
			noErr("BeginIdempotent", err)
			if st.Outcome != store.Execute {
				t.Fatalf("BeginIdempotent(%s) = %+v, want EXECUTE", n, st)
			}
			return owner
		}
		begin("in-progress", time.Minute)
		owner := begin("done", time.Minute)
		noErr("Finish", s.FinishIdempotent(ctx, store.FinishIdempotent{Key: "done", OwnerToken: owner, Result: []byte("r"), ResultTTL: 2 * time.Hour}))
		owner = begin("retryable", time.Minute)
		noErr("Finish", s.FinishIdempotent(ctx, store.FinishIdempotent{Key: "retryable", OwnerToken: owner,
			Failure: &store.Failure{Retryable: true}}))
		ltWant(t, "idempotency keys", ltKeys(t, c, s.keys.prefix+":{i:*"), map[string]time.Duration{
			// An abandoned key keeps its fingerprint for the retention
			// after its owner's lease.
			key("in-progress"): time.Minute + deadTTL + slack + time.Millisecond,
			key("done"):        2*time.Hour + slack + time.Millisecond,
		})
	})
}

// TestHoldKeyLifetimes: a lock's keys end with what they hold. A lock's
// plain exclusive holder lives in its meta beside the fence counter, which
// lasts the idle name ttl after the last grant (or as long as a longer
// lease needs it, and then, released, that ttl after its grant); while it
// is held and a waiter queues, the queue's keys have the ticket's lease;
// the woken grant empties the queue. A shared holder lives in the holder
// keys, until its deadline (a plain lock has no lock-delay) rounded up to
// prelude.lua's expiryStep, and meta (which says the holder keys are in
// use) lasts as long.
func TestHoldKeyLifetimes(t *testing.T) {
	s, c := privateStore(t, "lt")
	ctx := context.Background()
	k := s.keys.hold(store.HoldLock, "n")
	h, dl, q, ql, qi, qx, meta := k[0], k[1], k[3], k[4], k[5], k[6], k[7]
	pattern := s.keys.prefix + ":{l:*"
	lockFor := func(tok string, ttl time.Duration, shared bool, w *store.WaitTicket) store.Grant {
		t.Helper()
		g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "n", Token: tok, TTL: ttl, Owner: "o", Shared: shared, Wait: w})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	lock := func(tok string, w *store.WaitTicket) store.Grant { return lockFor(tok, time.Minute, false, w) }
	release := func(tok string) {
		t.Helper()
		if ok, _, err := storetest.ReleaseLock(ctx, s, "n", tok); err != nil || !ok {
			t.Fatalf("ReleaseLock = %v, %v", ok, err)
		}
	}
	// held is the TTL a holder's keys must have: until its deadline (a
	// plain lock has no lock-delay), rounded up to a whole step.
	held := func(g store.Grant, ttl time.Duration) time.Duration {
		need := g.ExpireTime.UnixMicro()
		step := ltExpiryStep.Microseconds()
		// From the grant's time (its deadline less its TTL), a millisecond
		// more, rounded up (prelude.lua).
		at := g.ExpireTime.Add(-ttl)
		return time.UnixMicro(need-need%step+step).Sub(at) + 2*time.Millisecond
	}
	idle := DefaultIdleNameTTL + time.Millisecond

	a := token.New()
	lock(a, nil)
	ltWant(t, "held", ltKeys(t, c, pattern), map[string]time.Duration{meta: idle})
	release(a)
	ltWant(t, "released", ltKeys(t, c, pattern), map[string]time.Duration{meta: idle})

	a, b := token.New(), token.New()
	w := &store.WaitTicket{Ticket: token.New(), Instance: "i", Lease: store.WaitLease}
	lock(a, nil)
	if g := lock(b, w); g.Acquired || !g.Queued {
		t.Fatalf("second lock = %+v, want queued", g)
	}
	lease := store.WaitLease + time.Millisecond
	ltWant(t, "held, one waiting", ltKeys(t, c, pattern), map[string]time.Duration{meta: idle,
		q: lease, ql: lease, qi: lease, qx: lease})
	release(a)
	if g := lock(b, w); !g.Acquired {
		t.Fatalf("woken lock = %+v, want acquired", g)
	}
	ltWant(t, "the waiter holds it", ltKeys(t, c, pattern), map[string]time.Duration{meta: idle})
	release(b)
	ltWant(t, "all released", ltKeys(t, c, pattern), map[string]time.Duration{meta: idle})

	long := DefaultIdleNameTTL + 10*time.Minute
	g := lockFor(a, long, false, nil)
	ltWant(t, "held longer than the idle ttl", ltKeys(t, c, pattern), map[string]time.Duration{meta: held(g, long)})
	release(a)
	ltWant(t, "released after that", ltKeys(t, c, pattern), map[string]time.Duration{meta: idle})

	g = lockFor(a, long, true, nil)
	ltWant(t, "shared", ltKeys(t, c, pattern), map[string]time.Duration{h: held(g, long), dl: held(g, long), meta: held(g, long)})
	release(a)
	// The holder keys are empty, so gone; meta keeps its TTL (x until the
	// next clean-up finds them empty).
	ltWant(t, "shared, released", ltKeys(t, c, pattern), map[string]time.Duration{meta: held(g, long)})
}
