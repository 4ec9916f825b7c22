// Package redis is coordd's production store: all state in Redis — a Redis
// Cluster, or a standalone or Sentinel-managed Redis, through one
// redis.UniversalClient — with the semantics of store/storetest, which it
// passes like the memory store.
//
// Each store operation is one Lua script (lua/*.lua) on one hash slot, run
// with EVALSHA, on the Redis server's TIME. Operations that span two key
// groups — a session-bound lock (the lock's slot and the session's), a
// session's keepalive (the session's slot, then each lock's, pipelined) —
// are sequences of scripts ordered so that a crash between two steps can
// only leave a lock to expire at its deadline, never a lock held past it or
// released early.
//
// Every operation runs under a short timeout (Options.Timeout), and each of
// its commands through the circuit breaker of the node it goes to
// (NewBreakers): after consecutive failures to reach a node, commands to it
// fail at once for a while. A failure to reach Redis
// or to get its answer is store.ErrUnavailable: the operation may have
// happened.
//
// Wake-ups travel by sharded pub/sub: scripts SPUBLISH on the object's shard
// channel, and every coordd instance with a waiter SSUBSCRIBEs to it, on the
// one pub/sub connection it keeps to that channel's node (pubsub.go).
package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/tracing"
)

// Options configures a Store.
type Options struct {
	// Client is the connection, e.g. redis.NewUniversalClient. The store
	// does not close it.
	Client redis.UniversalClient
	// Prefix starts every key; default "coord". It must not contain braces.
	Prefix string
	// Timeout bounds each operation; default 500ms.
	Timeout time.Duration
	// Breakers, if set, are the client's circuit breakers (NewBreakers), for
	// BreakersOpen.
	Breakers *Breakers
	// WaitReplicas, if > 0, makes every lock grant, enqueue and idempotency
	// finish wait (WAIT) until that many replicas have it, for at most
	// WaitTimeout; fewer is reported as an uncertain outcome
	// (store.ErrUnavailable), since a failover could lose it.
	WaitReplicas int
	WaitTimeout  time.Duration
	// Clock, if set, replaces the Redis server's TIME: for tests with a
	// simulated clock only.
	Clock clock.Clock
	// MaxBatch, if > 0, batches the scripts of concurrent operations bound
	// for one node into pipelines of at most that many (see batcher): fewer
	// round trips under load, none added when idle. 0: every script is its
	// own round trip.
	MaxBatch int
	// DeadLetterTTL is how long a dead letter is kept after it died; 0
	// means store.DefaultDeadLetterTTL.
	DeadLetterTTL time.Duration
	// Observe, if set, is told of every operation: its name, how long it
	// took and, if it failed, its error (wrapping ErrUnavailable if Redis
	// could not be reached; answers about state, such as ErrNotHeld, are
	// not failures).
	Observe func(op string, d time.Duration, err error)
	// Trace, if set, gives every operation a span (tracing.Store), a child
	// of the caller's, named by the operation, with an error status exactly
	// when Observe is told of a failure. nil: no spans.
	Trace *tracing.Store
	// Eviction configures the eviction guard (eviction.go): by default no
	// command reaches a node whose maxmemory-policy is not noeviction; with
	// a HighWater, writes that only add data to a node past it are
	// store.ErrMemoryHigh.
	Eviction EvictionOptions
	// IdleNameTTL is how long a hold name's fence counter outlives its
	// last grant, and an election's revision and log its last leader or
	// waiter; 0 means DefaultIdleNameTTL. With nobody holding, waiting or
	// keeping a lock-delay, a name has no keys left after it.
	IdleNameTTL time.Duration
}

// DefaultIdleNameTTL is Options.IdleNameTTL's default (config
// redis.idle_name_ttl).
const DefaultIdleNameTTL = time.Hour

// Store is the Redis store.
type Store struct {
	client  redis.UniversalClient
	keys    keys
	timeout time.Duration
	wait    int
	waitFor time.Duration
	clock   clock.Clock
	observe func(op string, d time.Duration, err error)
	trace   *tracing.Store
	subs    subscriptions
	batch   *batcher // nil: no batching
	deadTTL time.Duration
	idleTTL time.Duration
	// timeSeen is the highest server time (unix µs) a lock grant has
	// returned: the fence floor when the clock is behind it (locks.go).
	timeSeen atomic.Int64

	breakers *Breakers
	eviction *evictionGuard
	layoutOK layoutGuard // the stored layout's version, checked on each master before its first call
	// closeClient closes the client when the store made it (Open).
	closeClient func() error
}

var _ store.Store = (*Store)(nil)

// New returns a Store on opts.Client and installs the eviction guard on it
// (eviction.go), so New must see the client before its first command, as
// NewBreakers must. It tries to load every script now (so that pipelined
// calls find them); Redis being unreachable is not an error here — calls
// fail until it is back, and scripts load then.
func New(ctx context.Context, opts Options) (*Store, error) {
	if opts.Client == nil {
		return nil, errors.New("redis: no client")
	}
	if opts.Prefix == "" {
		opts.Prefix = "coord"
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("redis: key prefix %q contains a brace", opts.Prefix)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 500 * time.Millisecond
	}
	if opts.DeadLetterTTL <= 0 {
		opts.DeadLetterTTL = store.DefaultDeadLetterTTL
	}
	if opts.IdleNameTTL <= 0 {
		opts.IdleNameTTL = DefaultIdleNameTTL
	}
	if opts.WaitReplicas > 0 && opts.WaitTimeout <= 0 {
		opts.WaitTimeout = 100 * time.Millisecond
	}
	s := &Store{
		client:   opts.Client,
		keys:     keys{prefix: opts.Prefix},
		timeout:  opts.Timeout,
		breakers: opts.Breakers,
		wait:     opts.WaitReplicas,
		waitFor:  opts.WaitTimeout,
		clock:    opts.Clock,
		observe:  opts.Observe,
		trace:    opts.Trace,
		eviction: newEvictionGuard(opts.Client, opts.Eviction),
		deadTTL:  opts.DeadLetterTTL.Truncate(time.Microsecond),
		idleTTL:  opts.IdleNameTTL.Truncate(time.Microsecond),
		layoutOK: layoutGuard{prefix: opts.Prefix},
	}
	if opts.MaxBatch > 0 {
		s.batch = newBatcher(opts.Client, opts.MaxBatch, opts.Timeout)
	}
	s.subs.init(s)
	_ = s.loadScripts(ctx)
	return s, nil
}

// Close stops the store's subscriptions. It closes the client only when
// the store made it (Open), not one given to New.
func (s *Store) Close() error {
	s.subs.close()
	if s.batch != nil {
		s.batch.close()
	}
	if s.closeClient != nil {
		return s.closeClient()
	}
	return nil
}

// BreakersOpen reports how many circuit breakers (one per node) are open.
func (s *Store) BreakersOpen() int { return s.breakers.Open() }

// loadScripts loads every script on every node.
func (s *Store) loadScripts(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	load := func(ctx context.Context, c redis.Scripter) error {
		for _, sc := range allScripts {
			if err := sc.Load(ctx, c).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		// Replicas too: a replica promoted in a failover then has them.
		return cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	}
	return load(ctx, s.client)
}

// do runs one operation under the timeout and turns its error into the
// store's: the caller's own cancellation passes through, failures to reach
// Redis (a timeout, a lost connection, an open circuit breaker) wrap
// store.ErrUnavailable. On a Cluster such a failure also asks go-redis to
// reload the slot map, since a master that died refuses connections rather
// than answering MOVED, and the map would otherwise stay stale until its
// periodic reload (60 s) after a failover.
func (s *Store) do(ctx context.Context, op, key string, fn func(ctx context.Context) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.observe != nil || s.trace != nil {
		var span trace.Span
		ctx, span = s.trace.Start(ctx, op)
		start := time.Now()
		defer func() {
			failed := err
			if store.IsState(failed) || errors.Is(failed, ctx.Err()) {
				failed = nil // an answer about state, or the caller giving up
			}
			if s.observe != nil {
				s.observe(op, time.Since(start), failed)
			}
			s.trace.End(span, failed)
		}()
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err = s.layout(cctx, key); err == nil {
		err = fn(cctx)
	}
	switch {
	case err == nil, store.IsState(err):
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	case isBug(err):
		return fmt.Errorf("redis %s: %w", op, err)
	}
	if errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("redis %s: %w", op, err) // ours: not replicated, lost in flight, breaker open
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
	return fmt.Errorf("redis %s: %w: %v", op, store.ErrUnavailable, err)
}

// isBug tells an error of coordd's own making (a script error, a wrong
// type, keys across slots) from a failure to reach Redis or of Redis to
// serve (a timeout, a closed connection, CLUSTERDOWN, LOADING, READONLY…).
func isBug(err error) bool {
	if errors.Is(err, errCorrupt) {
		return true
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	var nerr net.Error
	if errors.As(err, &nerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range []string{"ERR ", "WRONGTYPE", "CROSSSLOT"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// clockSlack is how much longer than its logical lifetime every key lives
// with a simulated clock (Options.Clock), since Redis expires keys by its
// own.
const clockSlack = time.Hour

// timeArgs are ARGV[1] and ARGV[2] of every script: the clock, and the slack
// on physical expiries (lua/prelude.lua).
func (s *Store) timeArgs() []any {
	if s.clock == nil {
		return []any{-1, 0}
	}
	return []any{s.clock.Now().Truncate(time.Microsecond).UnixMicro(), int64(clockSlack / time.Millisecond)}
}

// eval runs a script with the time arguments first: EVALSHA, and EVAL if
// Redis does not have the script (after a restart).
func (s *Store) eval(ctx context.Context, sc *script, keys []string, args scriptArgs) *redis.Cmd {
	return evalOn(ctx, s.client, s.batch, sc.src, sc.Hash(), keys, sc.argv(s.timeArgs(), args))
}

// evalOn runs EVALSHA of hash on client, in b's batches (nil: alone), and
// EVAL of src if the server does not have the script (after a restart).
func evalOn(ctx context.Context, client redis.UniversalClient, b *batcher, src, hash string, keys []string, args []any) *redis.Cmd {
	cmd := evalCmd(ctx, "evalsha", hash, keys, args)
	if b != nil {
		if err := b.run(ctx, keys[0], cmd); err != nil {
			cmd.SetErr(err) // withdrawn unsent: the caller gave up first
			return cmd.Cmd
		}
	} else {
		_ = client.Process(ctx, cmd)
	}
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = evalCmd(ctx, "eval", src, keys, args)
		_ = client.Process(ctx, cmd)
	}
	return cmd.Cmd
}

// evalCmd builds an EVAL or EVALSHA that go-redis must never retry: a script
// whose connection broke after it was sent may have run, and running it
// again (an Allow, an Enqueue, a Claim) would do its work twice, or make a
// lock grant look like a contended lock. The outcome is reported uncertain
// instead.
func evalCmd(ctx context.Context, name, script string, keys []string, args []any) noRetry {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	cmd := redis.NewCmd(ctx, append(a, args...)...)
	cmd.SetFirstKeyPos(3)
	return noRetry{cmd}
}

// noRetry is a command go-redis does not retry (see evalCmd).
type noRetry struct{ *redis.Cmd }

func (noRetry) NoRetry() bool { return true }

// evalReplicated is eval followed, with WaitReplicas set, by WAIT on the same
// connection, so that it waits for this write. replicated is false if fewer
// replicas than asked acknowledged it in time; the caller decides what that
// means (only a write that happened is at risk). A shortfall is not a
// failure to reach the master, which answered.
func (s *Store) evalReplicated(ctx context.Context, sc *script, keys []string, args scriptArgs) (cmd *redis.Cmd, replicated bool) {
	if s.wait <= 0 {
		return s.eval(ctx, sc, keys, args), true
	}
	all := sc.argv(s.timeArgs(), args)
	for attempt := 0; ; attempt++ {
		var pipe redis.Pipeliner
		if cc, ok := s.client.(*redis.ClusterClient); ok {
			node, err := cc.MasterForKey(ctx, keys[0])
			if err != nil {
				cmd := redis.NewCmd(ctx)
				cmd.SetErr(err)
				return cmd, false
			}
			pipe = node.Pipeline()
		} else {
			pipe = s.client.Pipeline()
		}
		c := evalCmd(ctx, "evalsha", sc.Hash(), keys, all)
		_ = pipe.Process(ctx, c)
		wait := pipe.Do(ctx, "WAIT", s.wait, s.waitFor.Milliseconds())
		_, _ = pipe.Exec(ctx)
		switch {
		case redis.HasErrorPrefix(c.Err(), "NOSCRIPT") && attempt == 0:
			if err := s.loadScripts(ctx); err == nil {
				continue
			}
		case redis.HasErrorPrefix(c.Err(), "MOVED"), redis.HasErrorPrefix(c.Err(), "ASK"):
			// This node pipeline bypasses go-redis's redirection: the slot
			// moved, so the script did not run; learn the new map and go the
			// ordinary way, without WAIT this once.
			if cc, ok := s.client.(*redis.ClusterClient); ok {
				cc.ReloadState(ctx)
			}
			return s.eval(ctx, sc, keys, args), false
		}
		n, err := wait.Int()
		return c.Cmd, err == nil && n >= s.wait
	}
}

// errNotReplicated: a write happened on the master but fewer replicas than
// redis.wait_replicas acknowledged it in time; a failover could lose it, so
// its outcome is reported uncertain.
var errNotReplicated = fmt.Errorf("%w: the write was not replicated in time", store.ErrUnavailable)

// evalPipelined runs several scripts in one pipeline (grouped by node on a
// Cluster) and returns their commands in order; each has its own result or
// error. Scripts a node lacks (after a restart, or on a replica just
// promoted) are loaded and only those calls are run again.
func (s *Store) evalPipelined(ctx context.Context, calls []call) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	run := func(idx []int) {
		pipe := s.client.Pipeline()
		for _, i := range idx {
			c := calls[i]
			cmd := evalCmd(ctx, "evalsha", c.script.Hash(), c.keys, c.script.argv(s.timeArgs(), c.args))
			_ = pipe.Process(ctx, cmd)
			cmds[i] = cmd.Cmd
		}
		_, _ = pipe.Exec(ctx)
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	run(all)
	var again []int
	for i, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 && s.loadScripts(ctx) == nil {
		run(again)
	}
	return cmds
}

// call is one script call of a pipeline.
type call struct {
	script *script
	keys   []string
	args   scriptArgs
}

// Scripts tell times in Unix microseconds and durations in microseconds.

func micros(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

func unixMicro(n int64) time.Time { return time.UnixMicro(n) }
