package main

// redlock-lock-release: Lock + Release over N independent standalone Redis
// masters (--redlock), on coordd in its Redlock mode and on redsync, the
// Go library of the Redlock algorithm, in one run on the same servers.
//
//   - coordd: coordbench starts --redlock-coordd-bin itself (launchCoordd,
//     free loopback ports) with COORDD_STORE=redis, COORDD_REDIS_MODE=redlock,
//     COORDD_REDIS_ADDRS the --redlock servers and COORDD_REDIS_KEY_PREFIX
//     redlockKeyPrefix, and stops it after the scenario. Per op, as
//     lock-release: LockService Lock (ttl redlockTTL, no wait) on a random
//     name of --keys, then Release with the token granted; not acquired is
//     a miss. Without --redlock-coordd-bin its row is skipped: the coordd at
//     --addr serves the other scenarios and is not in Redlock mode.
//   - redsync (peer): github.com/go-redsync/redsync/v4 with one goredis v9
//     pool per server (a go-redis Client each, --redis-pool-size); per op
//     NewMutex(redsyncKeyPrefix+NAME, WithExpiry(redlockTTL), WithTries(1)),
//     TryLockContext then UnlockContext, NAME the name coordd's op picks.
//     A name another caller holds on a majority (or a split with no
//     majority) is a miss. redsync has no fencing token.
//
// The scenario runs once, after the others (with --coordd-bin too: its
// coordd is not one of those binaries). Redis's counters are the
// --redlock servers' INFO, summed (Masters = N). At the end every key
// under either prefix is deleted from every --redlock server.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// tRedsync is the redsync peer.
const tRedsync = "redsync" // github.com/go-redsync/redsync/v4: Mutex over the --redlock masters

// redlockTTL is the lease of both targets: redsync's default expiry.
const redlockTTL = 8 * time.Second

// redlockKeyPrefix is the key prefix of the coordd coordbench starts in
// Redlock mode: under --key-prefix, of this run only, so that clean-up
// deletes its keys, whatever their layout, and nothing else.
func (b *bench) redlockKeyPrefix() string {
	return b.cfg.KeyPrefix + ":redlock:" + b.runID
}

// redsyncKeyPrefix starts every key redsync writes (its key is the
// mutex's name).
func (b *bench) redsyncKeyPrefix() string {
	return b.cfg.KeyPrefix + ":redsync:" + b.runID + ":"
}

// runRedlock measures redlock-lock-release: redsync, then coordd, then
// deletes what both wrote.
func (b *bench) runRedlock(ctx context.Context) {
	const scenario = scRedlock
	nodes := make([]*redis.Client, len(b.cfg.Redlock))
	for i, a := range b.cfg.Redlock {
		nodes[i] = redis.NewClient(&redis.Options{Addr: a, PoolSize: b.cfg.RedisPool})
	}
	defer func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	}()
	if err := checkRedlockNodes(ctx, nodes); err != nil {
		for _, target := range []string{tRedsync, tCoordd} {
			b.add(&Result{Scenario: scenario, Target: target, Failed: "--redlock: " + err.Error()})
		}
		return
	}
	stats := b.stats
	b.stats = func(ctx context.Context) (redisCounters, error) { return readNodesCounters(ctx, nodes) }
	defer func() { b.stats = stats }()
	defer func() {
		// Also after an interrupt: its own context.
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := b.cleanupRedlock(cctx, nodes); err != nil {
			fmt.Fprintln(b.log, "coordbench: cleanup of the --redlock servers:", err)
		}
	}()

	if slices.Contains(b.cfg.Peers, tRedsync) {
		b.runRedsync(ctx, scenario, nodes)
	}
	if ctx.Err() != nil {
		return
	}
	if b.cfg.RedlockBin == "" {
		b.peerSkipped(scenario, tCoordd, "needs --redlock-coordd-bin (the coordd at --addr is not in Redlock mode)")
		return
	}
	if err := b.runRedlockCoordd(ctx, scenario); err != nil {
		b.add(&Result{Scenario: scenario, Target: tCoordd, Failed: err.Error()})
	}
}

// checkRedlockNodes checks that the servers answer, are standalone (not
// Cluster nodes), and are distinct servers (their run_id: one server named
// by two addresses would make a false majority).
func checkRedlockNodes(ctx context.Context, nodes []*redis.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	seen := map[string]string{}
	for _, n := range nodes {
		addr := n.Options().Addr
		info, err := n.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		var mode, id string
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			switch k {
			case "redis_mode":
				mode = v
			case "run_id":
				id = v
			}
		}
		if mode != "standalone" {
			return fmt.Errorf("%s: redis_mode %q, want standalone", addr, mode)
		}
		if other, ok := seen[id]; ok && id != "" {
			return fmt.Errorf("%s and %s are the same server (run_id %s)", other, addr, id)
		}
		seen[id] = addr
	}
	return nil
}

// runRedsync measures redsync's Mutex over nodes.
func (b *bench) runRedsync(ctx context.Context, scenario string, nodes []*redis.Client) {
	pools := make([]redsyncredis.Pool, len(nodes))
	for i, n := range nodes {
		pools[i] = goredis.NewPool(n)
	}
	rs := redsync.New(pools...)
	prefix := b.redsyncKeyPrefix()
	b.measure(ctx, scenario, tRedsync, 0, func(ctx context.Context, w *worker) error {
		m := rs.NewMutex(prefix+b.key(w), redsync.WithExpiry(redlockTTL), redsync.WithTries(1))
		if err := m.TryLockContext(ctx); err != nil {
			if redsyncNotAcquired(err) {
				w.misses++
				return nil
			}
			return err
		}
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errNotReleased
		}
		return err
	})
}

// redsyncNotAcquired says whether TryLock's err means that other callers
// hold the name (on a majority, or split so that no one has one), not that
// a server failed.
func redsyncNotAcquired(err error) bool {
	var (
		redisErr  *redsync.RedisError
		taken     *redsync.ErrTaken
		nodeTaken *redsync.ErrNodeTaken
	)
	if errors.As(err, &redisErr) {
		return false
	}
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken)
}

// runRedlockCoordd starts the --redlock-coordd-bin coordd in Redlock mode,
// measures Lock + Release on it, and stops it.
func (b *bench) runRedlockCoordd(ctx context.Context, scenario string) error {
	env := append([]string{"COORDD_LOG_LEVEL=warn"}, os.Environ()...)
	env = append(env, "COORDD_STORE=redis", "COORDD_REDIS_MODE=redlock",
		"COORDD_REDIS_ADDRS="+strings.Join(b.cfg.Redlock, ","), "COORDD_REDIS_KEY_PREFIX="+b.redlockKeyPrefix())
	p, err := launchCoordd(ctx, b.cfg.RedlockBin, env, "")
	if err != nil {
		return fmt.Errorf("coordd in Redlock mode (%s): %w", b.cfg.RedlockBin, err)
	}
	defer func() {
		if err := p.stop(); err != nil {
			b.progress("coordd in Redlock mode: %v", err)
		}
	}()
	b.progress("coordd in Redlock mode: %s (pid %d) at %s on %s", b.cfg.RedlockBin, p.pid, p.addr, strings.Join(b.cfg.Redlock, ","))
	conns, err := b.dial(p.addr, b.cfg.Conns, true)
	if err != nil {
		return err
	}
	defer closeAll(conns)
	locks := make([]coordv1.LockServiceClient, len(conns))
	for i, c := range conns {
		locks[i] = coordv1.NewLockServiceClient(c)
	}
	b.measure(ctx, scenario, tCoordd, p.pid, b.lockReleaseOp(locks, redlockTTL))
	return nil
}

// cleanupRedlock deletes from every --redlock server the keys of both
// targets: everything under coordd's key prefix of this run and under
// redsync's (a lock lost in an error would live for redlockTTL; a fence
// counter forever).
func (b *bench) cleanupRedlock(ctx context.Context, nodes []*redis.Client) error {
	var errs []error
	for _, n := range nodes {
		for _, p := range []string{b.redlockKeyPrefix(), b.redsyncKeyPrefix()} {
			if err := deleteMatching(ctx, n, globEscape(p)+"*"); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", n.Options().Addr, err))
			}
		}
	}
	return errors.Join(errs...)
}
