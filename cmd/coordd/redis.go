package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store/redis"
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
}

// defaultRedisConfig returns the documented defaults of the redis section.
func defaultRedisConfig() RedisConfig {
	return RedisConfig{
		Mode:            "auto",
		Addrs:           []string{"127.0.0.1:6379"},
		Timeout:         500 * time.Millisecond,
		DialTimeout:     2 * time.Second,
		KeyPrefix:       "coord",
		WaitTimeout:     100 * time.Millisecond,
		BreakerFailures: 5,
		BreakerCooldown: time.Second,
		MaxBatch:        64,
	}
}

func (c RedisConfig) validate(bad func(key, format string, args ...any)) {
	switch c.Mode {
	case "auto", "cluster", "standalone", "sentinel":
	default:
		bad("redis.mode", "%q is not cluster, standalone, sentinel or auto", c.Mode)
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
}

// newRedisClient connects as the mode says. "auto" is sentinel with a
// master_name, a Cluster when the first address answers that cluster mode is
// on (or, if it does not answer, when there are several addresses), else
// standalone.
func newRedisClient(ctx context.Context, c RedisConfig, log *slog.Logger) (goredis.UniversalClient, error) {
	var tlsConfig *tls.Config
	if c.TLS {
		tlsConfig = &tls.Config{ServerName: c.TLSServerName, MinVersion: tls.VersionTLS12}
		if c.TLSCAFile != "" {
			pem, err := os.ReadFile(c.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("redis.tls_ca_file: %w", err)
			}
			tlsConfig.RootCAs = x509.NewCertPool()
			if !tlsConfig.RootCAs.AppendCertsFromPEM(pem) {
				return nil, errors.New("redis.tls_ca_file: no certificate in it")
			}
		}
	}
	opts := &goredis.UniversalOptions{
		Addrs: c.Addrs, MasterName: c.MasterName, Username: c.Username, Password: c.Password, DB: c.DB,
		TLSConfig: tlsConfig, DialTimeout: c.DialTimeout, ReadTimeout: c.Timeout, WriteTimeout: c.Timeout,
		ContextTimeoutEnabled: true, PoolSize: c.PoolSize,
		// No silent retries: a script that timed out may have run, and
		// running it again (an Allow, an Enqueue) would do it twice. coordd
		// reports the uncertain outcome instead.
		MaxRetries: -1,
	}
	mode := c.Mode
	if mode == "auto" {
		mode = detectMode(ctx, c, opts, log)
	}
	switch mode {
	case "cluster":
		opts.DB = 0
		return goredis.NewClusterClient(opts.Cluster()), nil
	case "sentinel":
		return goredis.NewFailoverClient(opts.Failover()), nil
	default:
		return goredis.NewClient(opts.Simple()), nil
	}
}

func detectMode(ctx context.Context, c RedisConfig, opts *goredis.UniversalOptions, log *slog.Logger) string {
	if c.MasterName != "" {
		return "sentinel"
	}
	probe := goredis.NewClient(opts.Simple())
	defer probe.Close()
	ctx, cancel := context.WithTimeout(ctx, c.DialTimeout)
	defer cancel()
	info, err := probe.Info(ctx, "cluster").Result()
	switch {
	case err == nil && strings.Contains(info, "cluster_enabled:1"):
		return "cluster"
	case err == nil:
		return "standalone"
	case len(c.Addrs) > 1:
		log.Warn("redis unreachable at start; assuming a Cluster since several addresses are configured", "err", err)
		return "cluster"
	default:
		log.Warn("redis unreachable at start; assuming standalone (set redis.mode to be sure)", "err", err)
		return "standalone"
	}
}

// newRedisStore builds the Redis store and its client, and reads every
// master's maxmemory-policy: coordd refuses to start on a master that may
// evict keys, unless redis.allow_eviction (then it warns). A Redis that
// cannot be read yet is read by the store before its first command.
func newRedisStore(ctx context.Context, c RedisConfig, deadLetterTTL time.Duration, observe func(string, time.Duration, error), log *slog.Logger) (*redis.Store, goredis.UniversalClient, error) {
	client, err := newRedisClient(ctx, c, log)
	if err != nil {
		return nil, nil, err
	}
	st, err := redis.New(ctx, redis.Options{
		Client: client, Prefix: c.KeyPrefix, Timeout: c.Timeout,
		Breakers:     redis.NewBreakers(client, redis.BreakerOptions{Failures: c.BreakerFailures, Cooldown: c.BreakerCooldown}),
		WaitReplicas: c.WaitReplicas, WaitTimeout: c.WaitTimeout,
		Observe: observe, MaxBatch: c.MaxBatch, DeadLetterTTL: deadLetterTTL,
		Eviction: redis.EvictionOptions{Allow: c.AllowEviction, OnPolicy: func(node, policy string) {
			switch {
			case policy == redis.NoEviction:
				log.Info("redis node has maxmemory-policy noeviction", "node", node)
			case c.AllowEviction:
				log.Warn("redis node may evict coordd's keys; serving anyway since redis.allow_eviction is true: "+
					"a lock can be granted to a second holder while the first holds it (GUARANTEES.md)", "node", node, "maxmemory_policy", policy)
			default:
				log.Error("redis node may evict coordd's keys; calls to it fail UNAVAILABLE until its maxmemory-policy is noeviction "+
					"(or redis.allow_eviction is true)", "node", node, "maxmemory_policy", policy)
			}
		}},
	})
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, c.DialTimeout+c.Timeout)
	defer cancel()
	nodes, err := st.CheckEviction(cctx)
	if err != nil {
		log.Warn("redis is not reachable yet; calls fail (or fail open) until it is, and each master's maxmemory-policy is read before its first call", "err", err)
	}
	var evicting []string
	for _, n := range nodes {
		if n.Policy != redis.NoEviction {
			evicting = append(evicting, n.Node+" has maxmemory-policy "+n.Policy)
		}
	}
	if len(evicting) > 0 && !c.AllowEviction {
		_ = st.Close()
		_ = client.Close()
		return nil, nil, fmt.Errorf("redis: %s; coordd needs noeviction, since an evicted key is a live lock granted to a second holder, "+
			"a lost fence or a lost message: set maxmemory-policy noeviction, or redis.allow_eviction: true to accept that (GUARANTEES.md)",
			strings.Join(evicting, ", "))
	}
	return st, client, nil
}
