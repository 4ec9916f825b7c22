package redis_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/token"
)

// cutProxy forwards connections to a Redis server and, when armed, lets the
// next reply reach it and then drops the connection before the client sees
// it: a command that ran, whose answer was lost.
type cutProxy struct {
	lis   net.Listener
	to    string
	armed atomic.Bool
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
				if n > 0 && p.armed.CompareAndSwap(true, false) {
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
	// go-redis retries by default; the store must stop it for scripts.
	c := goredis.NewClient(&goredis.Options{Addr: proxy.lis.Addr().String()})
	defer c.Close()
	direct := goredis.NewClient(&goredis.Options{Addr: addr})
	defer direct.Close()
	prefix := "t" + token.New()[:12]
	s, err := redis.New(context.Background(), redis.Options{Client: c, Prefix: prefix, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	tok := token.New()
	proxy.armed.Store(true)
	_, err = s.AcquireLock(ctx, store.AcquireLock{Name: "ns:l", Token: tok, Owner: "me", TTL: time.Minute})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("AcquireLock with its answer lost = %v, want store.ErrUnavailable", err)
	}
	// It ran once, for this token.
	if got, err := direct.HGet(ctx, prefix+":{l:ns:l}", "tok").Result(); err != nil || got != tok {
		t.Fatalf("lock token in Redis = %q, %v; want %q (the script ran)", got, err, tok)
	}
	if ok, _, err := s.ReleaseLock(ctx, "ns:l", tok); err != nil || !ok {
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
