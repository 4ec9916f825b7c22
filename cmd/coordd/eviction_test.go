package main

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/token"
)

// evictingRedis starts a private Redis with maxmemory-policy volatile-lru.
func evictingRedis(t *testing.T) *redistest.Server {
	t.Helper()
	srv := redistest.StartStandalone(t)
	c := goredis.NewClient(redistest.Options(srv.Addr()))
	defer c.Close()
	if err := c.ConfigSet(context.Background(), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	return srv
}

func redisConfig(addr string) func(*Config) {
	return func(c *Config) {
		c.Store = "redis"
		c.Redis.Mode = "standalone"
		c.Redis.Addrs = []string{addr}
	}
}

// TestRedisEvictionRefusesToStart: coordd does not start on a Redis whose
// maxmemory-policy may evict keys, and says which node, which policy, why,
// and what to set.
func TestRedisEvictionRefusesToStart(t *testing.T) {
	srv := evictingRedis(t)
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	redisConfig(srv.Addr())(&cfg)
	cfg.applyLimits()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	wantRefusedToStart(t, cfg, "a volatile-lru Redis", srv.Addr(), "volatile-lru", "noeviction", "redis.allow_eviction", "second holder")
}

// wantRefusedToStart checks that newDaemon refuses cfg (on what), with an
// error that says every one of wants.
func wantRefusedToStart(t *testing.T, cfg Config, what string, wants ...string) {
	t.Helper()
	d, err := newDaemon(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		d.grpc.Stop()
		_ = d.grpcLis.Close()
		_ = d.httpLis.Close()
		_ = d.closeStore()
		t.Fatalf("newDaemon on %s = nil error; want a refusal", what)
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}

// TestRedisEvictionAllowed: with redis.allow_eviction, coordd starts on an
// evicting Redis, warns at start, serves, and exports
// coordd_redis_eviction_allowed 1 and coordd_redis_evicting_nodes 1.
func TestRedisEvictionAllowed(t *testing.T) {
	srv := evictingRedis(t)
	var logs lockedBuffer
	p := startInProcessLogging(t, &logs, func(c *Config) {
		redisConfig(srv.Addr())(c)
		c.Redis.AllowEviction = true
	})
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "allow_eviction") || !strings.Contains(out, "volatile-lru") {
		t.Errorf("no warning at start naming the policy and allow_eviction; the log:\n%s", out)
	}
	conn := dial(t, p.grpcAddr)
	defer conn.Close()
	waitServing(t, conn, 5*time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := coordv1.NewLockServiceClient(conn).Lock(ctx, &coordv1.LockRequest{Name: "x", Ttl: durationpb.New(time.Minute)})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock = %v, %v", g, err)
	}
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	m := getMetrics(t, hc, p.httpAddr)
	if v := m.value("coordd_redis_eviction_allowed"); v != 1 {
		t.Errorf("coordd_redis_eviction_allowed = %v, want 1", v)
	}
	if v := m.value("coordd_redis_evicting_nodes"); v != 1 {
		t.Errorf("coordd_redis_evicting_nodes = %v, want 1", v)
	}
}

// TestRedisLayoutRefusesToStart: coordd does not start on a Redis whose
// key prefix holds another stored layout version, and says which key,
// both versions and what to do.
func TestRedisLayoutRefusesToStart(t *testing.T) {
	addr := redistest.Standalone(t)
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	redisConfig(addr)(&cfg)
	cfg.Redis.KeyPrefix = "layout" + token.New()[:8]
	cfg.applyLimits()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// What a coordd of layout version 0 would have left: found where this
	// one looks first (the prefix's "v:layout" tag, slot 0).
	c := goredis.NewClient(redistest.Options(addr))
	defer c.Close()
	var key string
	for n := 0; ; n++ {
		key = cfg.Redis.KeyPrefix + ":{v:layout." + strconv.Itoa(n) + "}"
		if redistest.Slot(key) == 0 {
			break
		}
	}
	if err := c.Set(context.Background(), key, "0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	wantRefusedToStart(t, cfg, "a Redis with layout version 0", key, "stored layout version 0", "version "+strconv.Itoa(redis.LayoutVersion), "stop every coordd", "redis.key_prefix")
}
