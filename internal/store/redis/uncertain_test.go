package redis_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
)

// cutProxy forwards connections to a Redis server and, when armed, lets the
// next reply reach it and then drops the connection before the client sees
// it: a command that ran, whose answer was lost.
type cutProxy struct {
	lis   net.Listener
	to    string
	armed atomic.Bool
	pass  atomic.Int32 // replies let through, once armed, before the cut
	down  atomic.Bool  // refuse new connections (a partition)
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, to string) *cutProxy {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{lis: lis, to: to}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { _ = lis.Close(); p.wg.Wait() })
	return p
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.wg.Add(2)
		go func() { // client -> server
			defer p.wg.Done()
			_, _ = io.Copy(s, c)
			_ = s.Close()
		}()
		go func() { // server -> client, cut when armed
			defer p.wg.Done()
			defer c.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && p.armed.Load() && p.pass.Add(-1) < 0 && p.armed.CompareAndSwap(true, false) {
					_ = s.Close()
					return
				}
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// TestLostAnswerIsUncertain: when the answer to a script that ran is lost,
// the store says so (store.ErrUnavailable) — it does not run the script
// again, which would grant a lock twice or take a limit twice, or turn a
// grant into "held by someone".
func TestLostAnswerIsUncertain(t *testing.T) {
	addr := redistest.Standalone(t)
	proxy := newCutProxy(t, addr)
	// go-redis retries by default; the store must stop it for scripts. So
	// not Open, whose client never retries (MaxRetries -1) and would hide a
	// store that let go-redis retry: a client with go-redis' defaults.
	c := goredis.NewClient(&goredis.Options{Addr: proxy.lis.Addr().String()})
	defer c.Close()
	direct := goredis.NewClient(redistest.Options(addr))
	defer direct.Close()
	prefix := "t" + token.New()[:12]
	s, err := redis.New(context.Background(), redis.Options{Client: c, Prefix: prefix, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	// A first command through the proxy, so that the store has read the
	// node's maxmemory-policy (eviction.go) before the cut.
	if _, err := s.GetHolds(ctx, store.HoldLock, "ns:l"); err != nil {
		t.Fatal(err)
	}
	tok := token.New()
	proxy.armed.Store(true)
	_, err = s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:l", Token: tok, Owner: "me", TTL: time.Minute})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("AcquireLock with its answer lost = %v, want store.ErrUnavailable", err)
	}
	// It ran once, for this token.
	if held, err := lockHeld(ctx, direct, prefix, "ns:l", tok); err != nil || !held {
		t.Fatalf("lock holder %s in Redis = %v, %v; want held (the script ran)", "of the call's token", held, err)
	}
	if ok, _, err := storetest.ReleaseLock(ctx, s, "ns:l", tok); err != nil || !ok {
		t.Fatalf("ReleaseLock by the uncertain call's token = %v, %v; want released", ok, err)
	}

	lim := store.Limit{Algorithm: store.FixedWindow, Limit: 10, Period: time.Hour}
	proxy.armed.Store(true)
	if _, err := s.Allow(ctx, "ns:k", lim, 3, false); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Allow with its answer lost = %v, want store.ErrUnavailable", err)
	}
	d, err := s.Allow(ctx, "ns:k", lim, 1, true)
	if err != nil || d.Remaining != 6 {
		t.Fatalf("after one lost Allow of cost 3, a peek = %+v, %v; want 6 remaining (taken once)", d, err)
	}
}

// twoInstances returns two Redis stores on one key prefix of a standalone
// server: cut reaches it through a cutProxy (returned), other directly (its
// client returned too), as two coordd instances would.
func twoInstances(t *testing.T) (cut, other *redis.Store, proxy *cutProxy, direct *goredis.Client, prefix string) {
	t.Helper()
	addr := redistest.Standalone(t)
	proxy = newCutProxy(t, addr)
	prefix = "t" + token.New()[:12]
	var err error
	for _, st := range []struct {
		s    **redis.Store
		addr string
	}{{&cut, proxy.lis.Addr().String()}, {&other, addr}} {
		cfg := redis.Config{Mode: "standalone", Addrs: []string{st.addr}, Prefix: prefix, Timeout: 2 * time.Second}
		if *st.s, err = redis.Open(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		s := *st.s
		t.Cleanup(func() { _ = s.Close() })
	}
	// other's client, as before: the test reads behind the stores' backs
	// through the connection of the instance that reaches Redis directly.
	return cut, other, proxy, other.Client().(*goredis.Client), prefix
}

// TestUncertainSessionBindingIsNeverRenewed: a session-bound grant whose
// binding step's answer was lost is reported uncertain, and the session's
// keepalives (here from another coordd instance that still reaches Redis)
// never renew it: the lock ends at the deadline it was granted with and the
// session reports it lost. (Before, the binding counted as the session's at
// once: keepalives renewed a lock whose caller had been told UNAVAILABLE and
// had no token, for as long as the session lived.)
func TestUncertainSessionBindingIsNeverRenewed(t *testing.T) {
	ctx := context.Background()
	cut, other, proxy, direct, prefix := twoInstances(t)

	const ttl = 600 * time.Millisecond
	sid := "ns:" + token.New()
	st, err := other.CreateSession(ctx, sid, ttl, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cut.GetHolds(ctx, store.HoldLock, "ns:l"); err != nil { // the node's policy is read (eviction.go)
		t.Fatal(err)
	}
	// The session's deadline, the grant, then the binding's answer is lost.
	proxy.pass.Store(2)
	proxy.armed.Store(true)
	tok := token.New()
	_, err = cut.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:l", Token: tok, Owner: "me", SessionID: sid})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("AcquireLock with the binding's answer lost = %v, want store.ErrUnavailable", err)
	}
	proxy.down.Store(true) // and the clean-up cannot reach Redis either
	if held, err := lockHeld(ctx, direct, prefix, "ns:l", tok); err != nil || !held {
		t.Fatalf("the uncertain grant's holder in Redis = %v, %v; want held (the scripts ran)", held, err)
	}
	ref := store.SessionRef{ID: sid, Stream: st.Stream}
	var lost []store.LostHold
	for end := time.Now().Add(4 * ttl); time.Now().Before(end); time.Sleep(ttl / 4) {
		st, err := other.KeepAliveSession(ctx, ref, 0)
		if err != nil {
			t.Fatal(err)
		}
		lost = append(lost, st.Lost...)
	}
	info, err := other.GetHolds(ctx, store.HoldLock, "ns:l")
	if err != nil {
		t.Fatal(err)
	}
	if info.Held {
		t.Fatalf("4 TTLs of keepalives after an uncertain binding: the lock is held (%+v); want it never renewed", info)
	}
	if len(lost) == 0 || lost[0].Name != "ns:l" || lost[0].Reason != store.LostGone {
		t.Fatalf("reports = %+v, want ns:l lost (GONE)", lost)
	}
}

// TestUncertainConfirmedBindingIsFound: when the answer lost is the
// binding's confirmation (the last step), the binding is the session's and
// is renewed; its token is not lost with the answer: the session asking
// again for the lock gets that grant (AlreadyHeld, with its token), and the
// clean-up of an uncertain grant (AbandonLock, by any instance) turns it
// into a loss report, so that a client that adopted it learns it is gone.
func TestUncertainConfirmedBindingIsFound(t *testing.T) {
	ctx := context.Background()
	cut, other, proxy, direct, prefix := twoInstances(t)
	sid := "ns:" + token.New()
	st, err := other.CreateSession(ctx, sid, time.Minute, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cut.GetHolds(ctx, store.HoldLock, "ns:l"); err != nil { // the node's policy is read (eviction.go)
		t.Fatal(err)
	}
	// The session's deadline, the grant, the pending binding; then the
	// confirmation's answer is lost.
	proxy.pass.Store(3)
	proxy.armed.Store(true)
	tok := token.New()
	if _, err := cut.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:l", Token: tok, Owner: "me", SessionID: sid}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("AcquireLock with the confirmation's answer lost = %v, want store.ErrUnavailable", err)
	}
	// The failure is the one named: every step ran, the binding is confirmed.
	entry, err := direct.HGet(ctx, sessionHoldsKey(prefix, sid), redis.HoldField(store.HoldLock, "ns:l")).Result()
	if err != nil || !strings.HasPrefix(entry, tok+" ") || strings.HasSuffix(entry, " p") {
		t.Fatalf("the session's entry for ns:l = %q, %v; want a confirmed binding of the uncertain grant", entry, err)
	}
	g, err := other.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:l", Token: token.New(), Owner: "me", SessionID: sid})
	if err != nil || !g.Acquired || !g.AlreadyHeld || g.Token != tok {
		t.Fatalf("the session asking again = %+v, %v; want its grant, token %s", g, err, tok)
	}
	if err := other.AbandonHold(ctx, store.HoldLock, "ns:l", tok, ""); err != nil {
		t.Fatal(err)
	}
	ks, err := other.KeepAliveSession(ctx, store.SessionRef{ID: sid, Stream: st.Stream}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks.Lost) != 1 || ks.Lost[0].Name != "ns:l" || ks.Lost[0].Fence != g.Fence || ks.Lost[0].Reason != store.LostGone {
		t.Fatalf("reports after AbandonLock = %+v, want ns:l lost (GONE)", ks.Lost)
	}
	if info, err := other.GetHolds(ctx, store.HoldLock, "ns:l"); err != nil || info.Held {
		t.Fatalf("GetLock after AbandonLock = %+v, %v; want free", info, err)
	}
}

// sessionLocksKey is a session's lock set (the store's layout).
func sessionHoldsKey(prefix, id string) string {
	_, holds, _ := redis.SessionKeys(prefix, id)
	return holds
}

// lockHeld reports whether tok is a holder of lock name under prefix in
// Redis (the store's layout, redis.LockKeys): its plain exclusive holder in
// its meta, or one in its holders hash.
func lockHeld(ctx context.Context, c *goredis.Client, prefix, name, tok string) (bool, error) {
	meta, holders := redis.LockKeys(prefix, name)
	if h, err := c.HGet(ctx, meta, redis.LockHolderField).Result(); err == nil && h == tok {
		return true, nil
	} else if err != nil && err != goredis.Nil {
		return false, err
	}
	return c.HExists(ctx, holders, tok).Result()
}
