package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/store/redlock"
	"github.com/coordd/coordd/internal/tracing"
)

// RedisConfig is the redis section, used with store: redis.
type RedisConfig struct {
	Mode            string        `mapstructure:"mode"`
	Addrs           []string      `mapstructure:"addrs"`
	MasterName      string        `mapstructure:"master_name"`
	Username        string        `mapstructure:"username"`
	Password        string        `mapstructure:"password"`
	DB              int           `mapstructure:"db"`
	TLS             bool          `mapstructure:"tls"`
	TLSCAFile       string        `mapstructure:"tls_ca_file"`
	TLSServerName   string        `mapstructure:"tls_server_name"`
	Timeout         time.Duration `mapstructure:"timeout"`
	DialTimeout     time.Duration `mapstructure:"dial_timeout"`
	PoolSize        int           `mapstructure:"pool_size"`
	KeyPrefix       string        `mapstructure:"key_prefix"`
	WaitReplicas    int           `mapstructure:"wait_replicas"`
	WaitTimeout     time.Duration `mapstructure:"wait_timeout"`
	BreakerFailures int           `mapstructure:"breaker_failures"`
	BreakerCooldown time.Duration `mapstructure:"breaker_cooldown"`
	MaxBatch        int           `mapstructure:"max_batch"`
	// AllowEviction lets coordd serve from Redis masters whose
	// maxmemory-policy may evict keys; default false (GUARANTEES.md).
	AllowEviction bool `mapstructure:"allow_eviction"`
	// IdleNameTTL: a hold name (lock, semaphore, election) nobody holds,
	// waits for or keeps a lock-delay on has no keys left after it, its
	// fence counter included; default 1h, at least 1m.
	IdleNameTTL time.Duration `mapstructure:"idle_name_ttl"`
	// MemoryHighWater: past this share of a master's maxmemory, writes
	// that only add data are refused (STORE_MEMORY_HIGH); default 0.9, in
	// (0, 1].
	MemoryHighWater float64 `mapstructure:"memory_high_water"`
	// RedlockDrift is, with mode redlock, the fixed part of the clock drift
	// allowed a lease: its validity is ttl − the grant's time − (ttl/100 +
	// this); default 2ms, at most 1s.
	RedlockDrift time.Duration `mapstructure:"redlock_drift"`
}

// MinIdleNameTTL is redis.idle_name_ttl's least value: fences stay above
// every earlier one only while Redis's clock steps back by less than it.
const MinIdleNameTTL = time.Minute

// defaultRedisConfig returns the documented defaults of the redis section:
// the store's (redis.DefaultConfig), on 127.0.0.1:6379.
func defaultRedisConfig() RedisConfig {
	d := redis.DefaultConfig()
	return RedisConfig{
		Mode:            d.Mode,
		Addrs:           []string{"127.0.0.1:6379"},
		Timeout:         d.Timeout,
		DialTimeout:     d.DialTimeout,
		KeyPrefix:       d.Prefix,
		WaitTimeout:     d.WaitTimeout,
		BreakerFailures: d.BreakerFailures,
		BreakerCooldown: d.BreakerCooldown,
		MaxBatch:        d.MaxBatch,
		IdleNameTTL:     d.IdleNameTTL,
		MemoryHighWater: d.MemoryHighWater,
		RedlockDrift:    2 * time.Millisecond,
	}
}

func (c RedisConfig) validate(bad func(key, format string, args ...any)) {
	switch c.Mode {
	case "auto", "cluster", "standalone", "sentinel", "redlock":
	default:
		bad("redis.mode", "%q is not cluster, standalone, sentinel, redlock or auto", c.Mode)
	}
	if c.Mode == "redlock" && (c.TLS || c.WaitReplicas > 0) {
		bad("redis.mode", "redlock takes neither redis.tls (not supported in this mode yet) nor redis.wait_replicas (its masters have no replicas)")
	}
	if c.RedlockDrift < 0 || c.RedlockDrift > redlock.MaxDrift {
		bad("redis.redlock_drift", "must be between 0 and %v, got %v", redlock.MaxDrift, c.RedlockDrift)
	}
	if len(c.Addrs) == 0 {
		bad("redis.addrs", "is required")
	}
	if c.Mode == "sentinel" && c.MasterName == "" {
		bad("redis.master_name", "is required with mode sentinel")
	}
	if c.DB < 0 {
		bad("redis.db", "must not be negative")
	}
	if c.DB != 0 && c.Mode == "cluster" {
		bad("redis.db", "must be 0 on a Cluster")
	}
	if c.Timeout <= 0 {
		bad("redis.timeout", "must be positive, got %v", c.Timeout)
	}
	if c.DialTimeout <= 0 {
		bad("redis.dial_timeout", "must be positive, got %v", c.DialTimeout)
	}
	if c.PoolSize < 0 {
		bad("redis.pool_size", "must not be negative")
	}
	if c.KeyPrefix == "" || strings.ContainsAny(c.KeyPrefix, "{} ") {
		bad("redis.key_prefix", "%q must be non-empty, without braces or spaces", c.KeyPrefix)
	}
	if c.WaitReplicas < 0 {
		bad("redis.wait_replicas", "must not be negative")
	}
	if c.WaitReplicas > 0 && (c.WaitTimeout <= 0 || c.WaitTimeout >= c.Timeout) {
		bad("redis.wait_timeout", "(%v) must be positive and below redis.timeout (%v) with wait_replicas", c.WaitTimeout, c.Timeout)
	}
	if c.BreakerFailures < 1 {
		bad("redis.breaker_failures", "must be at least 1")
	}
	if c.MaxBatch < 0 {
		bad("redis.max_batch", "must not be negative (0: no batching)")
	}
	if c.BreakerCooldown <= 0 {
		bad("redis.breaker_cooldown", "must be positive, got %v", c.BreakerCooldown)
	}
	if c.IdleNameTTL < MinIdleNameTTL {
		bad("redis.idle_name_ttl", "must be at least %v, got %v", MinIdleNameTTL, c.IdleNameTTL)
	}
	if !(c.MemoryHighWater > 0 && c.MemoryHighWater <= 1) {
		bad("redis.memory_high_water", "must be above 0 and at most 1 (a share of maxmemory), got %v", c.MemoryHighWater)
	}
}

// storeConfig maps the redis section to the store's Config.
func (c RedisConfig) storeConfig() redis.Config {
	return redis.Config{
		Mode: c.Mode, Addrs: c.Addrs, MasterName: c.MasterName, Username: c.Username, Password: c.Password, DB: c.DB,
		TLS: c.TLS, TLSCAFile: c.TLSCAFile, TLSServerName: c.TLSServerName,
		Timeout: c.Timeout, DialTimeout: c.DialTimeout, PoolSize: c.PoolSize, Prefix: c.KeyPrefix,
		WaitReplicas: c.WaitReplicas, WaitTimeout: c.WaitTimeout,
		BreakerFailures: c.BreakerFailures, BreakerCooldown: c.BreakerCooldown,
		MaxBatch: c.MaxBatch, AllowEviction: c.AllowEviction,
		IdleNameTTL: c.IdleNameTTL, MemoryHighWater: c.MemoryHighWater,
	}
}

// newRedlockStore opens the Redlock store (redis.mode redlock): exclusive
// locks over independent masters; a master that restarted counts for
// nothing for lock.max_ttl.
func newRedlockStore(ctx context.Context, c RedisConfig, maxTTL time.Duration, log *slog.Logger) (*redlock.Store, error) {
	return redlock.Open(ctx, redlock.Config{
		Addrs: c.Addrs, Username: c.Username, Password: c.Password, DB: c.DB, Timeout: c.Timeout, DialTimeout: c.DialTimeout,
		PoolSize: c.PoolSize, Prefix: c.KeyPrefix, Drift: c.RedlockDrift, RestartDelay: maxTTL, FenceTTL: c.IdleNameTTL,
		AllowEviction: c.AllowEviction, Log: log,
	})
}

// newRedisStore opens the Redis store (redis.Open: the client as the mode
// says, and the maxmemory-policy check of every master).
func newRedisStore(ctx context.Context, c RedisConfig, deadLetterTTL time.Duration, observe func(string, time.Duration, error), trace *tracing.Store, log *slog.Logger) (*redis.Store, error) {
	sc := c.storeConfig()
	sc.DeadLetterTTL, sc.Observe, sc.Trace, sc.Log = deadLetterTTL, observe, trace, log
	return redis.Open(ctx, sc)
}
