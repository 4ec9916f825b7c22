package redis

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

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/tracing"
)

// Config is how Open connects and configures a Store: coordd's redis
// section (cmd/coordd maps it here), plus what only the daemon or a test
// supplies (DeadLetterTTL, Observe, Trace, Log, Clock).
type Config struct {
	// Mode is "cluster", "standalone", "sentinel" or "auto" (also ""):
	// sentinel with a MasterName, a Cluster when the first address answers
	// that cluster mode is on (or, if it does not answer, when there are
	// several addresses), else standalone.
	Mode       string
	Addrs      []string
	MasterName string
	Username   string
	Password   string
	DB         int
	// TLS, with TLSCAFile (PEM; default the system's roots) and
	// TLSServerName, connects over TLS 1.2 or later.
	TLS           bool
	TLSCAFile     string
	TLSServerName string
	// Timeout is the store's per-operation timeout and the sockets' read and
	// write timeout; DialTimeout bounds a dial (0: go-redis' default).
	Timeout     time.Duration
	DialTimeout time.Duration
	PoolSize    int // 0: go-redis' default
	Prefix      string
	// WaitReplicas and WaitTimeout are Options'.
	WaitReplicas int
	WaitTimeout  time.Duration
	// BreakerFailures and BreakerCooldown configure the circuit breakers
	// (NewBreakers); BreakerFailures 0 means no breakers.
	BreakerFailures int
	BreakerCooldown time.Duration
	MaxBatch        int
	// IdleNameTTL is Options.IdleNameTTL (redis.idle_name_ttl).
	IdleNameTTL time.Duration
	// MemoryHighWater is EvictionOptions.HighWater
	// (redis.memory_high_water; 0: off).
	MemoryHighWater float64
	// AllowEviction lets the store serve from masters whose
	// maxmemory-policy may evict keys (EvictionOptions.Allow).
	AllowEviction bool
	// ClientName, if set, names every connection (CLIENT SETNAME), so that
	// coordd's connections can be told apart in CLIENT LIST.
	ClientName string
	// Hooks are added to the client (on a Cluster, to each node's client),
	// below the circuit breakers and above the eviction guard: for
	// instrumentation such as tracing or metrics. Tests use them to count or
	// fail commands and dials on a store that is otherwise the daemon's.
	Hooks []redis.Hook

	DeadLetterTTL time.Duration
	Observe       func(op string, d time.Duration, err error)
	Trace         *tracing.Store // see Options.Trace
	// Log receives the mode detection's and the eviction guard's messages;
	// nil discards them.
	Log *slog.Logger
	// Clock, if set, replaces the Redis server's TIME: for tests only.
	Clock clock.Clock
}

// DefaultConfig returns coordd's documented defaults of the redis section,
// without addresses.
func DefaultConfig() Config {
	return Config{
		Mode:            "auto",
		Timeout:         500 * time.Millisecond,
		DialTimeout:     2 * time.Second,
		Prefix:          "coord",
		WaitTimeout:     100 * time.Millisecond,
		BreakerFailures: 5,
		BreakerCooldown: time.Second,
		MaxBatch:        64,
		IdleNameTTL:     DefaultIdleNameTTL,
		MemoryHighWater: 0.9,
	}
}

// ClientOptions returns the go-redis options coordd connects with: no
// retries, the context's deadline on the socket, Timeout as the read and
// write timeout. NewClient and Open connect with them; a test's own clients
// of a node, beside a Store's, come from redistest.Options instead.
func ClientOptions(c Config) (*redis.UniversalOptions, error) {
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
	return &redis.UniversalOptions{
		Addrs: c.Addrs, MasterName: c.MasterName, Username: c.Username, Password: c.Password, DB: c.DB,
		TLSConfig: tlsConfig, DialTimeout: c.DialTimeout, ReadTimeout: c.Timeout, WriteTimeout: c.Timeout,
		ContextTimeoutEnabled: true, PoolSize: c.PoolSize, ClientName: c.ClientName,
		// No silent retries: a script that timed out may have run, and
		// running it again (an Allow, an Enqueue) would do it twice. coordd
		// reports the uncertain outcome instead.
		MaxRetries: -1,
	}, nil
}

// NewClient connects as c.Mode says (see Config.Mode), with ClientOptions
// and c.Hooks.
func NewClient(ctx context.Context, c Config) (redis.UniversalClient, error) {
	client, err := newClient(ctx, c)
	if err != nil {
		return nil, err
	}
	addHooks(client, c.Hooks)
	return client, nil
}

// addHooks adds hooks to client, or on a Cluster to each node's client as
// it is created (as the breakers and the eviction guard are), in order.
func addHooks(client redis.UniversalClient, hooks []redis.Hook) {
	if len(hooks) == 0 {
		return
	}
	if cc, ok := client.(*redis.ClusterClient); ok {
		cc.OnNewNode(func(node *redis.Client) {
			for _, h := range hooks {
				node.AddHook(h)
			}
		})
		return
	}
	for _, h := range hooks {
		client.AddHook(h)
	}
}

func newClient(ctx context.Context, c Config) (redis.UniversalClient, error) {
	opts, err := ClientOptions(c)
	if err != nil {
		return nil, err
	}
	mode := c.Mode
	if mode == "auto" || mode == "" {
		mode = detectMode(ctx, c, opts, logger(c))
	}
	switch mode {
	case "cluster":
		opts.DB = 0
		return redis.NewClusterClient(opts.Cluster()), nil
	case "sentinel":
		return redis.NewFailoverClient(opts.Failover()), nil
	default:
		return redis.NewClient(opts.Simple()), nil
	}
}

func logger(c Config) *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

func detectMode(ctx context.Context, c Config, opts *redis.UniversalOptions, log *slog.Logger) string {
	if c.MasterName != "" {
		return "sentinel"
	}
	probe := redis.NewClient(opts.Simple())
	defer probe.Close()
	timeout := c.DialTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second // go-redis' default dial timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
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

// Open connects as c says (NewClient) and returns a Store on that client,
// which the Store's Close closes. It reads every master's maxmemory-policy:
// it refuses a master that may evict keys, unless c.AllowEviction (then it
// warns). A Redis that cannot be read yet is read by the store before its
// first command.
func Open(ctx context.Context, c Config) (*Store, error) {
	log := logger(c)
	client, err := newClient(ctx, c)
	if err != nil {
		return nil, err
	}
	var breakers *Breakers
	if c.BreakerFailures > 0 {
		breakers = NewBreakers(client, BreakerOptions{Failures: c.BreakerFailures, Cooldown: c.BreakerCooldown})
	}
	addHooks(client, c.Hooks) // below the breakers: what they see fail counts
	st, err := New(ctx, Options{
		Client: client, Prefix: c.Prefix, Timeout: c.Timeout, Breakers: breakers,
		WaitReplicas: c.WaitReplicas, WaitTimeout: c.WaitTimeout, Clock: c.Clock,
		Observe: c.Observe, Trace: c.Trace, MaxBatch: c.MaxBatch, DeadLetterTTL: c.DeadLetterTTL,
		IdleNameTTL: c.IdleNameTTL,
		Eviction: EvictionOptions{Allow: c.AllowEviction, HighWater: c.MemoryHighWater, OnPolicy: func(node, policy string) {
			switch {
			case policy == NoEviction:
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
		return nil, err
	}
	st.closeClient = client.Close
	cctx, cancel := context.WithTimeout(ctx, c.DialTimeout+st.timeout)
	defer cancel()
	nodes, err := st.CheckEviction(cctx)
	if err != nil {
		log.Warn("redis is not reachable yet; calls fail (or fail open) until it is, and each master's maxmemory-policy is read before its first call", "err", err)
	}
	var evicting []string
	for _, n := range nodes {
		if n.Policy != NoEviction {
			evicting = append(evicting, n.Node+" has maxmemory-policy "+n.Policy)
		}
	}
	if len(evicting) > 0 && !c.AllowEviction {
		_ = st.Close()
		return nil, fmt.Errorf("redis: %s; coordd needs noeviction, since an evicted key is a live lock granted to a second holder, "+
			"a lost fence or a lost message: set maxmemory-policy noeviction, or redis.allow_eviction: true to accept that (GUARANTEES.md)",
			strings.Join(evicting, ", "))
	}
	if err == nil {
		// The stored layout's version, on every master (layout.go); if
		// Redis cannot be reached now, the first call checks it.
		var lerr *LayoutError
		if err := st.checkEveryLayout(cctx); errors.As(err, &lerr) {
			_ = st.Close()
			return nil, fmt.Errorf("redis: %w", err)
		} else if err != nil {
			log.Warn("the stored layout's version could not be checked yet; the first call checks it", "err", err)
		}
	}
	return st, nil
}

// Client is the go-redis client the store runs on.
func (s *Store) Client() redis.UniversalClient { return s.client }
