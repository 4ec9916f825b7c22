package redis

// What the hold scripts cost in Redis commands (every command a script
// calls counts, as Redis' INFO commandstats does), on a private standalone
// server so that nothing else's commands mix in. Not a timing: a budget.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
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

// commandStats returns INFO commandstats' calls per command, without the
// commands of the measurement and of the store's own upkeep (its eviction
// check's CONFIG GET, pings, client setup).
func commandStats(t *testing.T, c *goredis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		switch strings.SplitN(name, "|", 2)[0] {
		case "info", "config", "ping", "client", "hello", "cluster", "script", "command", "select":
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		out[name] = n
	}
	return out
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func describe(m map[string]int, per int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, " %s=%.1f", k, float64(m[k])/float64(per))
	}
	return b.String()
}

// privateStore opens a store with prefix on a standalone Redis of the
// test's own, and a plain client of that Redis, closed when the test ends.
func privateStore(t *testing.T, prefix string) (*Store, *goredis.Client) {
	t.Helper()
	srv := redistest.StartStandalone(t)
	s := openStore(t, Config{Addrs: []string{srv.Addr()}, Prefix: prefix})
	c := goredis.NewClient(redistest.Options(srv.Addr()))
	t.Cleanup(func() { _ = c.Close() })
	return s, c
}

// measure runs f n times between a CONFIG RESETSTAT and INFO commandstats
// and returns the commands per run.
func measure(t *testing.T, c *goredis.Client, n int, f func(i int)) (float64, string) {
	t.Helper()
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		f(i)
	}
	m := commandStats(t, c)
	return float64(total(m)) / float64(n), describe(m, n)
}

// TestHoldCommandBudget: an uncontended Lock+Release, a contended grant
// handed off (a waiter queues, its instance's release grants it), and one
// woken (a waiter queues, another instance's release wakes it, its retry is
// granted), in Redis commands.
func TestHoldCommandBudget(t *testing.T) {
	s, raw := privateStore(t, "budget")
	ctx := context.Background()
	const n = 50
	lock := func(name, tok string, w *store.WaitTicket) store.Grant {
		g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, TTL: time.Minute, Owner: "o", Wait: w})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	release := func(name, tok string) {
		if ok, _, err := storetest.ReleaseLock(ctx, s, name, tok); err != nil || !ok {
			t.Fatalf("ReleaseLock = %v, %v", ok, err)
		}
	}

	per, what := measure(t, raw, n, func(i int) {
		name, tok := fmt.Sprint("plain-", i%5), token.New()
		if g := lock(name, tok, nil); !g.Acquired {
			t.Fatalf("uncontended lock not acquired: %+v", g)
		}
		release(name, tok)
	})
	t.Logf("Lock+Release: %.1f commands:%s", per, what)
	plain := per

	held := token.New()
	lock("held", held, nil)
	refused, refusedWhat := measure(t, raw, n, func(int) {
		if g := lock("held", token.New(), nil); g.Acquired {
			t.Fatalf("lock of a held name granted: %+v", g)
		}
	})
	t.Logf("Lock refused by a live holder: %.1f commands:%s", refused, refusedWhat)
	release("held", held)
	if refused > 3 {
		t.Errorf("a Lock refused by a live holder costs %.1f commands, want at most 3 (the script, its TIME, the meta read)", refused)
	}

	var queue, handoff float64
	var queueWhat, handoffWhat string
	for i := range n {
		name, a, b := fmt.Sprint("handoff-", i%5), token.New(), token.New()
		w := &store.WaitTicket{Ticket: token.New(), Instance: "inst", Lease: store.WaitLease}
		lock(name, a, nil)
		p, d := measure(t, raw, 1, func(int) {
			if g := lock(name, b, w); g.Acquired || !g.Queued {
				t.Fatalf("contended lock: %+v, want queued", g)
			}
		})
		queue, queueWhat = queue+p, d
		p, d = measure(t, raw, 1, func(int) {
			rel, err := s.ReleaseHold(ctx, store.HoldLock, name, a, "inst")
			if err != nil || !rel.Released || len(rel.Handoffs) != 1 {
				t.Fatalf("ReleaseHold = %+v, %v; want released, one hand-off", rel, err)
			}
		})
		handoff, handoffWhat = handoff+p, d
		release(name, b)
	}
	t.Logf("handed off: queue %.1f (%s), release+hand-off %.1f (%s)", queue/n, queueWhat, handoff/n, handoffWhat)
	handedOff := (queue + handoff) / n

	var wake, grant float64
	var wakeWhat, grantWhat string
	queue = 0
	for i := range n {
		name, a, b := fmt.Sprint("contended-", i%5), token.New(), token.New()
		w := &store.WaitTicket{Ticket: token.New(), Instance: "inst", Lease: store.WaitLease}
		lock(name, a, nil)
		p, d := measure(t, raw, 1, func(int) {
			if g := lock(name, b, w); g.Acquired || !g.Queued {
				t.Fatalf("contended lock: %+v, want queued", g)
			}
		})
		queue, queueWhat = queue+p, d
		p, d = measure(t, raw, 1, func(int) { release(name, a) })
		wake, wakeWhat = wake+p, d
		p, d = measure(t, raw, 1, func(int) {
			if g := lock(name, b, w); !g.Acquired {
				t.Fatalf("woken lock: %+v, want acquired", g)
			}
		})
		grant, grantWhat = grant+p, d
		release(name, b)
	}
	t.Logf("contended: queue %.1f (%s), release+wake %.1f (%s), woken grant %.1f (%s)",
		queue/n, queueWhat, wake/n, wakeWhat, grant/n, grantWhat)
	// The budgets, as measured: a lock's plain exclusive holder lives in
	// its meta beside the fence, and a plain exclusive request or release
	// first runs a solo script that reads that meta only (9: a script
	// each, its TIME, the meta read, and the grant's write and TTL or the
	// release's delete; 15 when the holder had keys of its own and the
	// fence a key of its own). A request the solo script cannot decide (a
	// queue, a holder in the holder keys) runs the full script after it:
	// 3 commands more per plain call while the name is contended (38 and
	// 48 before the solo holder, 31 and 38 with it but no solo scripts; 90
	// for the woken cycle before the hold scripts expired only what they
	// wrote). A hand-off saves the woken retry and the wake-up.
	if plain > 10 {
		t.Errorf("Lock+Release costs %.1f commands, want at most 10", plain)
	}
	if handedOff > 37 {
		t.Errorf("a contended grant handed off (queue, release) costs %.1f commands, want at most 37", handedOff)
	}
	if c := (queue + wake + grant) / n; c > 47 {
		t.Errorf("a contended grant woken (queue, release, woken grant) costs %.1f commands, want at most 47", c)
	}
}

// TestEnqueueCommandBudget: an Enqueue of a ready message (no dedup ID, no
// group) on a queue with live messages costs the script and 7 commands: the
// time, the sequence number, the message and its meta, its place in ready,
// the wake-up, and one PERSIST that finds the queue's records without an
// expiry (no EXISTS to learn the queue is not empty: it just got a message).
func TestEnqueueCommandBudget(t *testing.T) {
	s, raw := privateStore(t, "budget")
	ctx := context.Background()
	per, what := measure(t, raw, 50, func(int) {
		if _, err := s.Enqueue(ctx, "q", store.NewMessage{ID: token.New(), Payload: []byte("p"), MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("Enqueue: %.1f commands:%s", per, what)
	if per != 8 {
		t.Errorf("Enqueue: %.1f commands (%s), want 8", per, what)
	}
}

// TestHeartbeatCommandBudget: a heartbeat (KeepAliveSession) of a session
// with one session-bound lock, and with four, in Redis commands: one script
// on the session's slot whatever the number of holds, which live by the
// session's liveness (asked by whoever finds a hold's recorded deadline
// passed) and whose keys are renewed only every few TTLs (not in this
// test's 3 s). An Allow runs 5.
func TestHeartbeatCommandBudget(t *testing.T) {
	// A clock of the test's, 100 ms a heartbeat from the start of a 30 s
	// expiry step, so that no heartbeat here moves a key's TTL into the
	// next step (lua/prelude.lua's stepUp), which one in about nine does at
	// a third of a 10 s TTL: without it the count would depend on when the
	// test runs. On the server's clock each script also calls TIME: that
	// one a script is added to the count.
	srv := redistest.StartStandalone(t)
	clk := clock.NewFake(time.Unix(1_800_000_010, 0))
	s := openStore(t, Config{Addrs: []string{srv.Addr()}, Prefix: "hb", Clock: clk})
	raw := goredis.NewClient(redistest.Options(srv.Addr()))
	t.Cleanup(func() { _ = raw.Close() })
	ctx := context.Background()
	const n = 30
	perHeartbeat := func(locks int) (float64, string) {
		id := "ns:" + token.New()
		if _, err := s.CreateSession(ctx, id, 10*time.Second, 0, 0); err != nil {
			t.Fatal(err)
		}
		for i := range locks {
			g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: fmt.Sprint(id, ":", i), Token: token.New(), Owner: "o", SessionID: id})
			if err != nil || !g.Acquired {
				t.Fatalf("session-bound lock = %+v, %v", g, err)
			}
		}
		per, what := measure(t, raw, n, func(int) {
			clk.Advance(100 * time.Millisecond)
			st, err := s.KeepAliveSession(ctx, store.SessionRef{ID: id}, 10*time.Second)
			if err != nil || st.Expired || len(st.Lost) > 0 {
				t.Fatalf("KeepAliveSession = %+v, %v", st, err)
			}
		})
		scripts := float64(commandStats(t, raw)["evalsha"]) / n
		return per + scripts, what + fmt.Sprintf(" time=%.1f (the server's clock)", scripts)
	}
	one, oneWhat := perHeartbeat(1)
	four, fourWhat := perHeartbeat(4)
	t.Logf("a heartbeat with 1 lock: %.1f commands:%s", one, oneWhat)
	t.Logf("a heartbeat with 4 locks: %.1f commands:%s", four, fourWhat)
	// 4 each as measured (10 and 25 when a heartbeat renewed every hold).
	if one > 4 || four > 4 {
		t.Errorf("a heartbeat costs %.1f commands with 1 lock, %.1f with 4: want at most 4 each", one, four)
	}
}
