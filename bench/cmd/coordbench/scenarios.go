package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/bsm/redislock"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-redis/redis_rate/v10"
	"github.com/hibiken/asynq"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// Targets: what a row measured.
const (
	tCoordd    = "coordd"     // coordd through its generated Go client
	tBare      = "bare-grpc"  // the empty method on a bare gRPC server
	tDirect    = "direct-lua" // coordd's Lua sent straight to Redis with go-redis
	tRedisRate = "redis_rate" // github.com/go-redis/redis_rate/v10
	tRedislock = "redislock"  // github.com/bsm/redislock
	tAsynq     = "asynq"      // github.com/hibiken/asynq
	// tCoorddCapped: coordd on a queue with --queue-max-in-flight.
	tCoorddCapped = "coordd-capped"
)

// limitSpec is an inline limit of an allow scenario.
type limitSpec struct {
	name         string
	algorithm    int // coordv1.Algorithm and store.Algorithm
	limit        int64
	periodMicros int64
	burst        int64
}

var algorithmNames = []string{"fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket"}

// limitSpecs are limits generous enough never to deny at any rate this
// tool reaches over --keys keys: a million a second, except the sliding
// log, whose limit is capped by ratelimit.max_log_limit (1000) and which
// keeps one entry per admission; spread over 10,000 keys, 1000 a second
// per key is ten million a second. The leaky bucket keeps its default
// burst of 1 (a call per microsecond per key).
var limitSpecs = map[string]limitSpec{
	"fixed_window":   {name: "fixed_window", algorithm: 1, limit: 1_000_000, periodMicros: 1_000_000},
	"sliding_window": {name: "sliding_window", algorithm: 2, limit: 1_000_000, periodMicros: 1_000_000},
	"sliding_log":    {name: "sliding_log", algorithm: 3, limit: 1000, periodMicros: 1_000_000},
	"token_bucket":   {name: "token_bucket", algorithm: 4, limit: 1_000_000, periodMicros: 1_000_000},
	"leaky_bucket":   {name: "leaky_bucket", algorithm: 5, limit: 1_000_000, periodMicros: 1_000_000},
}

// capacity is store.Limit.Capacity.
func (l limitSpec) capacity() int64 {
	switch {
	case l.name != "token_bucket" && l.name != "leaky_bucket":
		return l.limit
	case l.burst > 0:
		return l.burst
	case l.name == "token_bucket":
		return l.limit
	default:
		return 1
	}
}

func (l limitSpec) proto() *coordv1.Limit {
	return &coordv1.Limit{
		Algorithm: coordv1.Algorithm(l.algorithm), Limit: l.limit, Burst: l.burst,
		Period: durationpb.New(time.Duration(l.periodMicros) * time.Microsecond),
	}
}

// Fixed parameters of the scenarios, the same for coordd and the baselines.
const (
	lockTTL          = time.Minute
	idleNameTTL      = time.Hour // redis.idle_name_ttl's default
	contentionTTL    = 10 * time.Second
	contentionWait   = 10 * time.Second
	idemProcessTTL   = 30 * time.Second // coordd's idempotency.default_processing_ttl
	idemRetention    = 24 * time.Hour   // coordd's idempotency.default_result_ttl (an abandoned key's retention)
	idemResultTTL    = time.Minute      // short, so the shared Redis forgets them soon
	queueMaxAttempts = 5                // coordd's queue.default_max_attempts
	queueDedupWindow = 5 * time.Minute  // coordd's queue.dedup_window
	queueVisibility  = 30 * time.Second // coordd's queue.default_visibility_timeout
)

var (
	payload    = []byte("x")
	idemResult = []byte("ok")
)

// newToken is token.New: 128 random bits as 32 hex digits.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// coordd clients, one set per connection; worker w uses connection w % n.
type clients struct {
	conns   []*grpc.ClientConn
	health  []healthpb.HealthClient
	limits  []coordv1.RateLimitServiceClient
	rls     []rlsv3.RateLimitServiceClient // Envoy's ShouldRateLimit
	locks   []coordv1.LockServiceClient
	idem    []coordv1.IdempotencyServiceClient
	queues  []coordv1.QueueServiceClient
	session []coordv1.SessionServiceClient
	sems    []coordv1.SemaphoreServiceClient
}

func newClients(conns []*grpc.ClientConn) *clients {
	c := &clients{conns: conns}
	for _, cc := range conns {
		c.health = append(c.health, healthpb.NewHealthClient(cc))
		c.limits = append(c.limits, coordv1.NewRateLimitServiceClient(cc))
		c.rls = append(c.rls, rlsv3.NewRateLimitServiceClient(cc))
		c.locks = append(c.locks, coordv1.NewLockServiceClient(cc))
		c.idem = append(c.idem, coordv1.NewIdempotencyServiceClient(cc))
		c.queues = append(c.queues, coordv1.NewQueueServiceClient(cc))
		c.session = append(c.session, coordv1.NewSessionServiceClient(cc))
		c.sems = append(c.sems, coordv1.NewSemaphoreServiceClient(cc))
	}
	return c
}

func (b *bench) key(w *worker) string { return b.keyNames[w.rng.IntN(len(b.keyNames))] }

// runEmpty measures the floor: Health/Check through coordd, and the empty
// method of a bare gRPC server.
func (b *bench) runEmpty(ctx context.Context) error {
	req := &healthpb.HealthCheckRequest{}
	b.measure(ctx, "empty", tCoordd, b.cfg.CoorddPID, func(ctx context.Context, w *worker) error {
		r, err := b.cl.health[w.id%len(b.cl.health)].Check(ctx, req)
		if err == nil && r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			err = fmt.Errorf("health: %v", r.GetStatus())
		}
		return err
	})
	if b.measured("empty", tBare) { // with --coordd-bin: once, for the first binary
		return nil
	}
	es, err := startEmptyServer(b.cfg.EmptyServer)
	if err != nil {
		return fmt.Errorf("bare gRPC server: %w", err)
	}
	defer es.stop()
	conns, err := b.dial(es.addr, b.cfg.Conns, false)
	if err != nil {
		return err
	}
	defer closeAll(conns)
	in := &emptypb.Empty{}
	b.measure(ctx, "empty", tBare, es.pid, func(ctx context.Context, w *worker) error {
		return conns[w.id%len(conns)].Invoke(ctx, emptyMethod, in, new(emptypb.Empty))
	})
	return nil
}

// runAllow measures Allow with one algorithm: the direct script, redis_rate
// (the buckets: GCRA, the same algorithm), the peer of the algorithm
// (gubernator: token bucket; envoy ratelimit: fixed window), then coordd.
func (b *bench) runAllow(ctx context.Context, scenario, algo string) {
	spec := limitSpecs[algo]
	if b.rdb != nil {
		sc := b.lua.limit[algo]
		a := b.lua.limitArgs(spec)
		b.measure(ctx, scenario, tDirect, 0, func(ctx context.Context, w *worker) error {
			r, err := sc.Run(ctx, b.rdb, b.keys.limit(scope(directNS, b.key(w)), spec), a...).Slice()
			if err != nil {
				return err
			}
			if n, _ := r[0].(int64); n != 1 {
				w.misses++
			}
			return nil
		})
		if algo == "token_bucket" || algo == "leaky_bucket" {
			lim := redis_rate.Limit{Rate: int(spec.limit), Burst: int(spec.capacity()), Period: time.Duration(spec.periodMicros) * time.Microsecond}
			rl := redis_rate.NewLimiter(b.rdb)
			prefix := b.cfg.KeyPrefix + ":redis_rate:" + algo + ":"
			b.measure(ctx, scenario, tRedisRate, 0, func(ctx context.Context, w *worker) error {
				r, err := rl.Allow(ctx, prefix+b.key(w), lim)
				if err != nil {
					return err
				}
				if r.Allowed == 0 {
					w.misses++
				}
				return nil
			})
		}
	}
	switch {
	case ctx.Err() != nil:
	case algo == "token_bucket" && b.peerWanted(tGubernator):
		if err := b.runGubernator(ctx, scenario, spec); err != nil {
			b.peerFailed(scenario, tGubernator, err)
		}
	case algo == "fixed_window" && b.peerWanted(tEnvoy) && len(b.cfg.Redis) == 0:
		b.peerSkipped(scenario, tEnvoy, "needs --redis (the Redis it keeps its counters in: coordd's)")
	case algo == "fixed_window" && b.peerWanted(tEnvoy):
		if err := b.runEnvoy(ctx, scenario, spec); err != nil {
			b.peerFailed(scenario, tEnvoy, err)
		}
	}
	l := spec.proto()
	b.measure(ctx, scenario, tCoordd, b.cfg.CoorddPID, func(ctx context.Context, w *worker) error {
		r, err := b.cl.limits[w.id%len(b.cl.limits)].Allow(ctx, &coordv1.AllowRequest{Key: b.key(w), Limit: l})
		if err != nil {
			return err
		}
		if !r.GetAllowed() {
			w.misses++
		}
		return nil
	})
}

// hotSpec is allow-hot's limit: one call an hour, so that every call but
// the first is denied.
var hotSpec = limitSpec{name: "token_bucket", algorithm: 4, limit: 1, periodMicros: time.Hour.Microseconds()}

// runAllowHot measures Allow on a single key over its limit: the direct
// script and redis_rate ask Redis every time (one slot, one master: the
// single-key ceiling); coordd may answer from its deny cache
// (ratelimit.deny_cache_*). Denials are counted as misses.
func (b *bench) runAllowHot(ctx context.Context) {
	const scenario = "allow-hot"
	key := "cb:hot:" + b.runID
	if b.rdb != nil {
		sc := b.lua.limit[hotSpec.name]
		a := b.lua.limitArgs(hotSpec)
		k := b.keys.limit(scope(directNS, key), hotSpec)
		b.measure(ctx, scenario, tDirect, 0, func(ctx context.Context, w *worker) error {
			r, err := sc.Run(ctx, b.rdb, k, a...).Slice()
			if err != nil {
				return err
			}
			if n, _ := r[0].(int64); n != 1 {
				w.misses++
			}
			return nil
		})
		lim := redis_rate.Limit{Rate: 1, Burst: 1, Period: time.Hour}
		rl := redis_rate.NewLimiter(b.rdb)
		rkey := b.cfg.KeyPrefix + ":redis_rate:hot:" + b.runID
		b.usedRedisKeys = append(b.usedRedisKeys, "rate:"+rkey)
		b.measure(ctx, scenario, tRedisRate, 0, func(ctx context.Context, w *worker) error {
			r, err := rl.Allow(ctx, rkey, lim)
			if err != nil {
				return err
			}
			if r.Allowed == 0 {
				w.misses++
			}
			return nil
		})
		b.usedRedisKeys = append(b.usedRedisKeys, k...)
	}
	l := hotSpec.proto()
	b.measure(ctx, scenario, tCoordd, b.cfg.CoorddPID, func(ctx context.Context, w *worker) error {
		r, err := b.cl.limits[w.id%len(b.cl.limits)].Allow(ctx, &coordv1.AllowRequest{Key: key, Limit: l})
		if err != nil {
			return err
		}
		if !r.GetAllowed() {
			w.misses++
		}
		return nil
	})
	b.usedRedisKeys = append(b.usedRedisKeys, b.keys.limit(scope(b.cfg.Namespace, key), hotSpec)...)
}

var errNotReleased = errors.New("release: the lock just granted was not released")

// runLockRelease measures a Lock and its Release on random names: the
// direct scripts, redislock, etcd's concurrency.Mutex (--peers), then
// coordd. A name taken by another worker
// at that moment is a miss (not acquired), not an error.
func (b *bench) runLockRelease(ctx context.Context) {
	const scenario = "lock-release"
	if b.rdb != nil {
		ttl := lockTTL.Microseconds()
		b.measure(ctx, scenario, tDirect, 0, func(ctx context.Context, w *worker) error {
			name := scope(directNS, b.key(w))
			tok := newToken()
			lk := b.keys.lock(name)
			// lua/hold_acquire.lua: a plain exclusive lease, no ticket.
			base := b.keys.lockBase(name)
			acquire, release := args(base, "lock", tok, "", ttl, 0, "", 0, 0, "0", "0", 0, 0, "", "", 0, 0, ""), args(base, "lock", tok, "0")
			if b.lua.named != nil {
				hold := map[string]any{"base": base, "kind": "lock", "idleTTL": idleNameTTL.Microseconds(), "tok": tok, "ttl": ttl}
				acquire, release = b.lua.byName("hold_acquire", hold), b.lua.byName("hold_release", hold)
			}
			r, err := b.lua.lockAcquire.Run(ctx, b.rdb, lk, acquire...).Slice()
			if err != nil {
				return err
			}
			if n, _ := r[0].(int64); n != 1 {
				w.misses++
				return nil
			}
			r, err = b.lua.lockRelease.Run(ctx, b.rdb, lk, release...).Slice()
			if err != nil {
				return err
			}
			if n, _ := r[0].(int64); n != 1 {
				return errNotReleased
			}
			return nil
		})
		rl := redislock.New(b.rdb)
		prefix := b.cfg.KeyPrefix + ":redislock:"
		b.measure(ctx, scenario, tRedislock, 0, func(ctx context.Context, w *worker) error {
			l, err := rl.Obtain(ctx, prefix+b.key(w), lockTTL, nil)
			if errors.Is(err, redislock.ErrNotObtained) {
				w.misses++
				return nil
			}
			if err != nil {
				return err
			}
			return l.Release(ctx)
		})
	}
	b.runEtcdPeers(ctx)
	b.measure(ctx, scenario, tCoordd, b.cfg.CoorddPID, b.lockReleaseOp(b.cl.locks, lockTTL))
}

// lockReleaseOp is an op of Lock (ttl, no wait) + Release of a random
// name on locks; a lock not acquired is a miss.
func (b *bench) lockReleaseOp(locks []coordv1.LockServiceClient, ttl time.Duration) opFunc {
	d := durationpb.New(ttl)
	return func(ctx context.Context, w *worker) error {
		c := locks[w.id%len(locks)]
		name := b.key(w)
		g, err := c.Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: d})
		if err != nil {
			return err
		}
		if !g.GetAcquired() {
			w.misses++
			return nil
		}
		r, err := c.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: g.GetToken()})
		if err == nil && !r.GetReleased() {
			err = errNotReleased
		}
		return err
	}
}

// idemKey is a key never used before in this run (warm-ups included).
func (b *bench) idemKey(target string) string {
	return "cb:idem:" + b.runID + ":" + target + ":" + strconv.FormatInt(b.seq.Add(1), 10)
}

var errNotExecute = errors.New("BeginIdempotent on a fresh key did not answer EXECUTE")

// runIdem measures BeginIdempotent + Finish on unique keys: the direct
// scripts, then coordd.
func (b *bench) runIdem(ctx context.Context) {
	const scenario = "idem"
	if b.rdb != nil {
		b.measure(ctx, scenario, tDirect, 0, func(ctx context.Context, w *worker) error {
			key := scope(directNS, b.idemKey(tDirect))
			k := []string{b.keys.idem(key)}
			owner := newToken()
			r, err := b.lua.idemBegin.Run(ctx, b.rdb, k, args("fp", owner, idemProcessTTL.Microseconds(), idemRetention.Microseconds())...).Slice()
			if err != nil {
				return err
			}
			// {OK, EXECUTE, ...}: claimed for this owner (lua/idem_begin.lua).
			if code, _ := r[0].(int64); code != 1 || len(r) < 2 {
				return errNotExecute
			}
			if outcome, _ := r[1].(int64); outcome != 1 {
				return errNotExecute
			}
			n, err := b.lua.idemFinish.Run(ctx, b.rdb, k, args(owner, "c", string(idemResult), idemResultTTL.Microseconds(), b.keys.idemChannel(key))...).Int64()
			if err == nil && n != 1 {
				err = errors.New("finish: not stored")
			}
			return err
		})
	}
	resultTTL := durationpb.New(idemResultTTL)
	b.measure(ctx, scenario, tCoordd, b.cfg.CoorddPID, func(ctx context.Context, w *worker) error {
		c := b.cl.idem[w.id%len(b.cl.idem)]
		key := b.idemKey(tCoordd)
		r, err := c.BeginIdempotent(ctx, &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: "fp"})
		if err != nil {
			return err
		}
		if r.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
			return errNotExecute
		}
		f, err := c.Finish(ctx, &coordv1.FinishRequest{Key: key, OwnerToken: r.GetOwnerToken(), Result: idemResult, ResultTtl: resultTTL})
		if err == nil && !f.GetStored() {
			err = errors.New("finish: not stored")
		}
		return err
	})
}

// enqueueArgs are queue_enqueue.lua's arguments for a new message, as
// internal/store/redis/queue.go passes them.
func (b *bench) enqueueArgs(queue string) []any {
	if b.lua.named != nil {
		return b.lua.byName("queue_enqueue", map[string]any{"deadTTL": deadLetterTTL.Microseconds(),
			"wakeChannel": b.keys.queueChannel(queue), "id": newToken(), "encoded": string(append([]byte{1}, payload...)),
			"deliverAt": -1, "maxAttempts": queueMaxAttempts, "dedupWindow": queueDedupWindow.Microseconds()})
	}
	if b.lua.queueV2 { // priority 0, no group
		return b.queueArgs(queue, newToken(), string(append([]byte{1}, payload...)), int64(0), int64(-1), queueMaxAttempts, "",
			queueDedupWindow.Microseconds(), 0, "")
	}
	return b.queueArgs(queue, newToken(), string(append([]byte{1}, payload...)), int64(0), int64(-1), queueMaxAttempts, "",
		queueDedupWindow.Microseconds(), b.keys.queueChannel(queue))
}

// runEnqueue measures Enqueue of a tiny message onto --queues queues: the
// direct script, asynq's Client, then coordd.
func (b *bench) runEnqueue(ctx context.Context) {
	const scenario = "enqueue"
	names := make([]string, b.cfg.Queues)
	for i := range names {
		names[i] = "cb-enq-" + b.runID + "-" + strconv.Itoa(i)
	}
	b.usedQueues = append(b.usedQueues, names...)
	if b.rdb != nil {
		b.measure(ctx, scenario, tDirect, 0, func(ctx context.Context, w *worker) error {
			q := scope(directNS, names[w.rng.IntN(len(names))])
			r, err := b.lua.queueEnqueue.Run(ctx, b.rdb, b.keys.queue(q), b.enqueueArgs(q)...).Slice()
			if err == nil {
				// OK (lua/prelude.lua): added; DUPLICATE otherwise.
				if n, _ := r[0].(int64); n != 1 {
					err = errors.New("enqueue: a duplicate")
				}
			}
			return err
		})
		ac := asynq.NewClientFromRedisClient(b.rdb)
		b.usedAsynqQueues = append(b.usedAsynqQueues, names...)
		b.measure(ctx, scenario, tAsynq, 0, func(ctx context.Context, w *worker) error {
			_, err := ac.EnqueueContext(ctx, asynq.NewTask("cb", payload), asynq.Queue(names[w.rng.IntN(len(names))]))
			return err
		})
	}
	b.measure(ctx, scenario, tCoordd, b.cfg.CoorddPID, func(ctx context.Context, w *worker) error {
		_, err := b.cl.queues[w.id%len(b.cl.queues)].Enqueue(ctx, &coordv1.EnqueueRequest{Queue: names[w.rng.IntN(len(names))], Payload: payload})
		return err
	})
}
