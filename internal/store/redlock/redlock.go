// Package redlock is a store of exclusive locks over N independent Redis
// masters (redis.mode: redlock), Redlock as its reference describes it,
// with what that description lacks: fences, and the delayed restart done
// by coordd itself.
//
//   - A grant takes the lock on each master (its own script, in parallel)
//     and holds if a majority took it within the validity: the ttl minus
//     the time taken minus the drift allowance (ttl/100 + Config.Drift).
//     The answered ttl is that validity. A failed grant is undone on every
//     master.
//   - The fence is a max-register over a majority: the grant reads the
//     fence counters of the masters that granted (a majority), takes their
//     maximum + 1, at least the latest of their clocks in µs (the floor),
//     and writes it to them; the grant answers only if a majority took the
//     write. Any two majorities share a master, so every fence is above
//     every fence answered before it, across any minority of failures and
//     restarts (and a whole restart by the floor). In one round, mostly:
//     the grant proposes a fence (propose: above everything this instance
//     saw, and ahead of its clock), and each master's acquireScript takes
//     it if it is above that master's counter and clock. If a majority of
//     the masters that granted took it, it is the fence, read and written
//     in that round; otherwise a second round (commitScript) writes the
//     maximum + 1.
//   - The scripts of concurrent calls to a master share pipelines (the
//     Redis store's batcher), one round trip each.
//   - A master that restarted (its run_id differs from the one its epoch
//     record holds) or lost its data (no epoch record) counts for no grant,
//     renewal or read until Config.RestartDelay (lock.max_ttl) has passed
//     since coordd first saw it back: every lease it forgot has ended by
//     then. The epoch record ({rl}:epoch: run_id and since, by the master's
//     clock) lives on the master, so every coordd instance agrees; it is
//     checked on every new connection (a restart breaks every connection,
//     so no command reaches a restarted master before the check) and every
//     Config.CheckInterval.
//   - A master whose clock jumps forward (clockReading: its TIME, in every
//     grant's answer and every epoch check, against this instance's
//     monotonic clock) may have expired leases early: its vote in that
//     grant does not count, and it counts for nothing until RestartDelay
//     has passed, recorded in its epoch record as a restart is.
//   - Renew extends the lock on a majority within the validity and never
//     brings back an expired one; Release deletes it everywhere; GetHolds
//     and CheckFence read a majority.
//   - Waiting: no queue across masters. A request not granted is told to
//     come back at the holder's deadline (with jitter), or soon after a
//     split vote; a release made by this instance wakes this instance's
//     waiters at once (Subscribe); hold.Waiters tries each name once per
//     instance per round, so the load does not grow with the waiters.
//
// Everything else answers store.ErrRedlockMode: shared and session-bound
// locks, semaphores, elections, sessions, limits, idempotency and queues.
package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
	rstore "github.com/coordd/coordd/internal/store/redis"
)

// Config configures a Store.
type Config struct {
	Addrs              []string // N >= 3, odd, independent standalone masters
	Username, Password string
	DB                 int           // the database on every master
	Timeout            time.Duration // one master's answer
	DialTimeout        time.Duration
	PoolSize           int    // per master; 0: go-redis's default
	Prefix             string // key prefix
	// Drift is the fixed part of the drift allowance (redis.redlock_drift):
	// a lease's validity is its ttl minus the time its grant took minus
	// ttl/100 + Drift. At most MaxDrift.
	Drift time.Duration
	// RestartDelay is how long a restarted master counts for nothing
	// (lock.max_ttl: the longest lease it may have forgotten).
	RestartDelay time.Duration
	// CheckInterval is how often each master's epoch is read besides on
	// every new connection (a master emptied without a restart, FLUSHALL,
	// counts until then); 0: 250ms.
	CheckInterval time.Duration
	// FenceTTL is how long a name's fence counter is kept after its last
	// grant (redis.idle_name_ttl); the floor covers a counter lost after.
	FenceTTL time.Duration
	// AllowEviction serves from masters whose maxmemory-policy may evict
	// keys (redis.allow_eviction); otherwise such a master is refused.
	AllowEviction bool
	// NoRestartDelay turns the delayed restart off: tests only, to show
	// the hazard it prevents.
	NoRestartDelay bool
	// Quorum, if not 0, is the number of masters a grant, renewal or read
	// needs instead of a majority: tests only, to show that a model check
	// catches a Redlock that grants on N/2.
	Quorum int
	Log    *slog.Logger
}

// MaxDrift bounds Config.Drift.
const MaxDrift = time.Second

// maxBatch is the most scripts one pipeline to a master carries: the
// scripts of concurrent calls to a master share round trips (the Redis
// store's batcher), so that a grant's cost in system calls, on coordd and
// on each master, falls with the load instead of growing with it.
const maxBatch = 64

// proposalLead is how far ahead of this instance's clock a grant proposes
// its fence (acquireScript): far enough that a master's clock a little
// ahead of ours still takes the proposal.
const proposalLead = time.Second

// Store is the Redlock store. It implements store.Store.
type Store struct {
	refused
	cfg     Config
	masters []*master
	quorum  int
	hub     store.Hub // this instance's own releases wake its waiters
	stop    chan struct{}
	done    sync.WaitGroup
	ready   atomic.Bool  // vet is done: a new connection checks its master's epoch
	seen    atomic.Int64 // the latest master clock (µs) or fence seen: a floor of fences
	base    time.Time    // mono counts from here
	slept   int64        // bootMicros - monoMicros at the last check: grows when the host sleeps
	members sync.Map     // the deployment's masters as epoch records list them
}

var _ store.Store = (*Store)(nil)

type master struct {
	addr  string
	c     *redis.Client
	batch *rstore.Batcher // the scripts of concurrent calls, pipelined
	mu    sync.Mutex      // one epoch check at a time
	until atomic.Int64    // Unix ns before which its votes do not count
	run   atomic.Pointer[string]

	clk      sync.Mutex             // readings, and until on a jump (clockReading)
	readings [clockReadings]reading // the latest readings of its clock, a ring
	next     int                    // the ring's next slot
	jumped   atomic.Bool            // its clock jumped forward: the next epoch check records it
}

// reading is one reading of a master's clock: its TIME minus this
// instance's monotonic µs lay in [lo, hi], read by a call made at sent and
// answered at recv (mono); recv 0: none.
type reading struct{ lo, hi, sent, recv int64 }

// clockReadings is how many readings of each master's clock a new one is
// compared with.
const clockReadings = 16

// counts reports whether the master's answers count now.
func (m *master) counts() bool { return time.Now().UnixNano() >= m.until.Load() }

// Open connects to every master and checks that they are N >= 3 (odd)
// distinct, independent standalone masters; on any doubt it refuses,
// naming the address.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = 250 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Store{cfg: cfg, quorum: len(cfg.Addrs)/2 + 1, stop: make(chan struct{}), base: time.Now(), slept: bootMicros() - monoMicros()}
	if cfg.Quorum > 0 {
		s.quorum = cfg.Quorum
	}
	for _, addr := range cfg.Addrs {
		m := &master{addr: addr}
		opts := &redis.Options{Addr: addr, Username: cfg.Username, Password: cfg.Password, DB: cfg.DB, DialTimeout: cfg.DialTimeout,
			ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout, PoolSize: cfg.PoolSize, MaxRetries: -1,
			// One dial per try: go-redis's default, 5 tries 100 ms apart,
			// held every grant (which waits for every master) about 400 ms
			// while one master refused connections.
			DialerRetries: 1}
		opts.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
			if !s.ready.Load() || !m.mu.TryLock() {
				// vet reads every epoch first; or a check of this master
				// is under way, on the pool: it reads this connection's.
				return nil
			}
			defer m.mu.Unlock()
			return s.checkEpoch(ctx, m, cn)
		}
		m.c = redis.NewClient(opts)
		m.batch = rstore.NewBatcher(m.c, maxBatch, cfg.Timeout)
		s.masters = append(s.masters, m)
	}
	if err := s.vet(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	s.ready.Store(true)
	s.done.Add(1)
	go s.checkLoop()
	return s, nil
}

func (c Config) check() error {
	n := len(c.Addrs)
	switch {
	case n < 3 || n%2 == 0:
		return fmt.Errorf("redis.addrs: redis.mode redlock needs an odd number of independent masters, at least 3; got %d", n)
	case c.Drift < 0 || c.Drift > MaxDrift:
		return fmt.Errorf("redis.redlock_drift: %v is outside 0 to %v", c.Drift, MaxDrift)
	case c.RestartDelay <= 0:
		return errors.New("lock.max_ttl: must be positive (a restarted master counts for nothing this long)")
	}
	seen := map[string]bool{}
	for _, a := range c.Addrs {
		if seen[a] {
			return fmt.Errorf("redis.addrs: %s is listed twice", a)
		}
		seen[a] = true
	}
	return nil
}

// vet reads every reachable master's INFO and epoch record: each must be
// a master of no Cluster, without replicas, that does not evict, and its
// own server (distinct run_ids), or coordd refuses to start, saying which.
// An unreachable master is checked when it first answers (its epoch and
// its role: one that fails then never counts). The records list the
// deployment's masters (members): a master without a record that another
// lists has lost its data; one that none lists is new.
func (s *Store) vet(ctx context.Context) error {
	runs := map[string]string{}
	recs := make([]map[string]string, len(s.masters))
	for i, m := range s.masters {
		info, err := m.c.Info(ctx, "server", "replication", "cluster", "memory").Result()
		if err != nil {
			s.cfg.Log.Warn("a redlock master does not answer at start: it counts for nothing until it does, and is checked then", "addr", m.addr, "err", err)
			continue
		}
		if err := s.vetInfo(m, info); err != nil {
			return err
		}
		run := infoField(info, "run_id")
		if other, ok := runs[run]; ok {
			return fmt.Errorf("redis.addrs: %s and %s are the same server (run_id %s)", other, m.addr, run)
		}
		runs[run] = m.addr
		if recs[i], err = m.c.HGetAll(ctx, s.epochKey()).Result(); err != nil {
			return fmt.Errorf("redis.addrs: %s: %w: %v", m.addr, store.ErrUnavailable, err)
		}
		for _, a := range strings.Split(recs[i]["members"], ",") {
			if a != "" {
				s.members.Store(a, true)
			}
		}
	}
	for i, m := range s.masters {
		if recs[i] == nil {
			continue
		}
		m.mu.Lock()
		err := s.checkEpoch(ctx, m, nil)
		m.mu.Unlock()
		if err != nil {
			return fmt.Errorf("redis.addrs: %s: %w", m.addr, err)
		}
	}
	return nil
}

// vetInfo checks a master's INFO: a master, of no Cluster, without
// replicas, that does not evict (unless AllowEviction).
func (s *Store) vetInfo(m *master, info string) error {
	switch {
	case infoField(info, "role") != "master":
		return fmt.Errorf("redis.addrs: %s is a %s, not a master: redlock needs independent masters", m.addr, infoField(info, "role"))
	case infoField(info, "cluster_enabled") == "1":
		return fmt.Errorf("redis.addrs: %s is a node of a Redis Cluster: redlock needs independent masters (use redis.mode cluster)", m.addr)
	case infoField(info, "connected_slaves") != "" && infoField(info, "connected_slaves") != "0":
		return fmt.Errorf("redis.addrs: %s has replicas: redlock needs independent masters, whose writes no failover can lose", m.addr)
	}
	if p := infoField(info, "maxmemory_policy"); p != "noeviction" && !s.cfg.AllowEviction {
		return fmt.Errorf("redis.addrs: %s has maxmemory-policy %s: it may evict a lock; set it to noeviction (or redis.allow_eviction: true, GUARANTEES.md)", m.addr, p)
	}
	return nil
}

func (s *Store) epochKey() string { return s.cfg.Prefix + ":{rl}:epoch" }

// checkEpoch reads master m's INFO and epoch record (on cn, a new
// connection, or on the pool) and sets until when its votes do not count:
// the record's since + delay, by m's clock, never earlier than this
// instance already set for the same run_id. A record that is missing or
// names another run_id is written anew: since = now, but for a master
// that no record lists yet (a new member: now - delay). delay is a
// max-register of every instance's lock.max_ttl. A master that fails
// vetInfo never counts. The caller holds m.mu.
func (s *Store) checkEpoch(ctx context.Context, m *master, cn *redis.Conn) error {
	var c interface {
		Info(ctx context.Context, section ...string) *redis.StringCmd
		HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
		HSet(ctx context.Context, key string, values ...any) *redis.IntCmd
		Time(ctx context.Context) *redis.TimeCmd
	} = m.c
	if cn != nil {
		c = cn
	}
	info, err := c.Info(ctx, "server", "replication", "cluster", "memory").Result()
	if err != nil {
		return err
	}
	if err := s.vetInfo(m, info); err != nil {
		s.cfg.Log.Error("a redlock master counts for nothing", "addr", m.addr, "err", err)
		m.until.Store(math.MaxInt64)
		return nil
	}
	run := infoField(info, "run_id")
	rec, err := c.HGetAll(ctx, s.epochKey()).Result()
	if err != nil {
		return err
	}
	sent := s.mono()
	now, err := c.Time(ctx).Result()
	if err != nil {
		return err
	}
	s.clockReading(m, now.UnixMicro(), sent, s.mono())
	delay := s.cfg.RestartDelay.Microseconds()
	if d, _ := strconv.ParseInt(rec["delay"], 10, 64); d > delay {
		delay = d
	}
	since, _ := strconv.ParseInt(rec["since"], 10, 64)
	local := time.Time{} // set when this instance sees the change itself
	jumped := m.jumped.Swap(false)
	if jumped && rec["run"] == run {
		// Its clock jumped forward: it may have expired leases early. As
		// a restart, recorded for every instance (a new one included).
		since = now.UnixMicro()
		local = time.Now().Add(time.Duration(delay) * time.Microsecond)
	} else if rec["run"] != run {
		since = now.UnixMicro()
		_, member := s.members.Load(m.addr)
		if rec["run"] == "" && !member {
			since -= delay // a new member: nothing to forget
		} else {
			local = time.Now().Add(time.Duration(delay) * time.Microsecond)
			s.cfg.Log.Warn("a redlock master restarted or lost its data: it counts for no lock until lock.max_ttl has passed",
				"addr", m.addr, "run_id", run, "for", time.Duration(delay)*time.Microsecond)
		}
	}
	s.members.Store(m.addr, true)
	var members []string
	s.members.Range(func(k, _ any) bool { members = append(members, k.(string)); return true })
	slices.Sort(members)
	if err := c.HSet(ctx, s.epochKey(), "run", run, "since", since, "delay", delay, "members", strings.Join(members, ",")).Err(); err != nil {
		if jumped {
			m.jumped.Store(true) // recorded at the next check
		}
		return err
	}
	until := time.Now().Add(time.Duration(since+delay-now.UnixMicro()) * time.Microsecond)
	if local.After(until) {
		until = local
	}
	if s.cfg.NoRestartDelay {
		until = time.Time{}
	}
	if prev := m.run.Load(); prev != nil && *prev == run {
		raise(&m.until, until.UnixNano()) // the same run: never shortened (a jump seen meanwhile kept)
	} else {
		m.until.Store(until.UnixNano())
	}
	m.run.Store(&run)
	return nil
}

func (s *Store) checkLoop() {
	defer s.done.Done()
	t := time.NewTicker(s.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.forgetSleep()
		var wg sync.WaitGroup
		for _, m := range s.masters {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
				defer cancel()
				m.mu.Lock()
				defer m.mu.Unlock()
				_ = s.checkEpoch(ctx, m, nil) // an unreachable master counts for nothing anyway
			})
		}
		wg.Wait()
	}
}

// Recovering returns the masters that count for nothing now: restarted
// or emptied less than lock.max_ttl ago (for /healthz and metrics).
func (s *Store) Recovering() []string {
	var out []string
	for _, m := range s.masters {
		if !m.counts() {
			out = append(out, m.addr)
		}
	}
	return out
}

// Close stops the checks and closes every client.
func (s *Store) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.done.Wait()
	var errs []error
	for _, m := range s.masters {
		m.batch.Close()
		errs = append(errs, m.c.Close())
	}
	return errors.Join(errs...)
}

// PartitionName is the memory store's naming; redlock has no queues.
func (*Store) PartitionName(queue string, p, k int) string { return queue + "#" + strconv.Itoa(p) }

// NodeHealth implements store.NodeHealther: each master, with whether it
// answered, and Role "master (recovering)" while it counts for nothing.
func (s *Store) NodeHealth(ctx context.Context) []store.Node {
	out := make([]store.Node, len(s.masters))
	var wg sync.WaitGroup
	for i, m := range s.masters {
		wg.Go(func() {
			start := time.Now()
			err := m.c.Ping(ctx).Err()
			n := store.Node{Addr: m.addr, Role: "master", Reachable: err == nil}
			if err == nil {
				n.Latency = time.Since(start)
			}
			if !m.counts() {
				n.Role = "master (recovering)"
			}
			out[i] = n
		})
	}
	wg.Wait()
	return out
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// keys are a lock's keys on every master.
func (s *Store) keys(name string) []string {
	k := s.cfg.Prefix + ":{rl:" + name + "}"
	return []string{k, k + ":f"}
}

// answer is one master's reply.
type answer struct {
	v          []any
	err        error
	counts     bool  // the master counts: it was neither recovering before nor after its reply
	sent, recv int64 // when the call was made and answered (mono)
}

// all runs script on every master at once, each within the timeout.
func (s *Store) all(ctx context.Context, sc script, keys []string, args ...any) []answer {
	return s.on(ctx, nil, sc, keys, args...)
}

// on runs script at once on the masters of idx (nil: every master), each
// within the timeout; the answers are by master, the others' empty.
func (s *Store) on(ctx context.Context, idx []int, sc script, keys []string, args ...any) []answer {
	out := make([]answer, len(s.masters))
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	sent := s.mono() // the clock readings' times (clockReading)
	var wg sync.WaitGroup
	for i, m := range s.masters {
		if idx != nil && !slices.Contains(idx, i) {
			continue
		}
		wg.Go(func() {
			before := m.counts()
			r, err := m.batch.Eval(ctx, sc.src, sc.hash, keys, args...).Result()
			a := answer{err: err, counts: before && m.counts(), sent: sent, recv: s.mono()}
			switch v := r.(type) {
			case []any:
				a.v = v
			case int64:
				a.v = []any{v}
			case nil:
			default:
				if err == nil {
					a.err = fmt.Errorf("redlock: %s answered %T", m.addr, r)
				}
			}
			if errors.Is(a.err, redis.Nil) {
				a.err = nil
			}
			out[i] = a
		})
	}
	wg.Wait()
	return out
}

func num(v []any, i int) int64 {
	if i < len(v) {
		if n, ok := v[i].(int64); ok {
			return n
		}
	}
	return 0
}

func str(v []any, i int) string {
	if i < len(v) {
		if s, ok := v[i].(string); ok {
			return s
		}
	}
	return ""
}

// drift is the allowance of a lease of ttl.
func (s *Store) drift(ttl time.Duration) time.Duration { return ttl/100 + s.cfg.Drift }

// unavailable is the error of a step that got no majority either way.
func (s *Store) unavailable(what string, as []answer) error {
	var msgs []string
	for i, a := range as {
		switch {
		case a.err != nil:
			msgs = append(msgs, s.masters[i].addr+": "+a.err.Error())
		case !a.counts:
			msgs = append(msgs, s.masters[i].addr+": recovering (restarted less than lock.max_ttl ago)")
		}
	}
	return fmt.Errorf("redlock %s: no majority of %d masters answered (%s): %w", what, len(s.masters), strings.Join(msgs, "; "), store.ErrUnavailable)
}

// splitTries is how many times a grant tries again, each after a random
// few milliseconds, when no majority decided either way (contenders took
// the masters between them), before it answers UNAVAILABLE: a "not
// acquired" says someone holds the lock, and nobody does then.
const splitTries = 8

// AcquireHold implements store.Holds: an exclusive plain lock only.
func (s *Store) AcquireHold(ctx context.Context, req store.HoldRequest) (store.Grant, error) {
	if req.Kind != store.HoldLock || req.Shared || req.SessionID != "" {
		return store.Grant{}, store.ErrRedlockMode
	}
	for i := 1; ; i++ {
		g, split, err := s.acquire(ctx, req)
		if !split {
			return g, err
		}
		if i == splitTries {
			return store.Grant{}, fmt.Errorf("redlock grant: no majority either way after %d tries (neither free nor one holder's on a majority of the counting masters: contenders split them, or a holder's lease stands on masters some of which are down or recovering): %w", i, store.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return store.Grant{}, ctx.Err()
		case <-time.After(time.Millisecond + jitter(time.Duration(i)*5*time.Millisecond)):
		}
	}
}

// acquire tries a grant once; split: no majority decided either way.
func (s *Store) acquire(ctx context.Context, req store.HoldRequest) (g store.Grant, split bool, err error) {
	start := time.Now()
	keys := s.keys(req.Name)
	lease := req.TTL
	if req.MaxHold > 0 {
		lease = min(lease, req.MaxHold)
	}
	nonce := strconv.FormatUint(rand.Uint64(), 36) // this try's: its undo deletes its record only
	prop := s.propose()
	fenceTTL := max(1, int64(s.cfg.FenceTTL.Seconds()))
	as := s.all(ctx, acquireScript, keys, req.Token, req.Owner, max(1, lease.Milliseconds()), req.MaxHold.Microseconds(), nonce, prop, fenceTTL,
		2*proposalLead.Microseconds())
	var took, taken, down, slow []int
	counter, floor, proposed := int64(0), s.seen.Load(), 0
	for i, a := range as {
		if a.err == nil && len(a.v) > 4 {
			floor = max(floor, num(a.v, 4)) // every answering master's clock
			if s.clockReading(s.masters[i], num(a.v, 4), a.sent, a.recv) || !s.masters[i].counts() {
				a.counts = false // its "free" may be a lease it forgot
			}
		}
		switch {
		case a.err != nil || !a.counts:
			down = append(down, i)
		case num(a.v, 0) == 1:
			took = append(took, i)
			counter = max(counter, num(a.v, 3))
			if num(a.v, 1) == 1 {
				proposed++
			} else {
				slow = append(slow, i)
			}
		default:
			taken = append(taken, i)
		}
	}
	s.see(floor)
	if len(took) >= s.quorum {
		// One round: a majority took the proposal, above each one's
		// counter, so above every fence answered before (any two
		// majorities share a master), and it is written to them. The
		// masters that granted but did not take it get it too (else
		// their records, without a fence, would not count for renewals
		// and reads): a second round, only for them.
		fence, held := uint64(prop), proposed
		if proposed >= s.quorum && len(slow) > 0 {
			cs := s.on(ctx, slow, commitScript, keys, req.Token, prop, fenceTTL, nonce)
			for _, i := range slow {
				if c := cs[i]; c.err == nil && c.counts && num(c.v, 1) == 1 {
					held++
				}
			}
		}
		if proposed < s.quorum {
			// Two rounds: a counter or a clock was at or above the
			// proposal (another instance's clock ahead of ours), or the
			// proposal far above a clock. The maximum + 1 (at least the
			// floor, and the proposal where some masters took it) is
			// written to the masters that granted, a majority: any later
			// majority shares one.
			fence = uint64(max(counter+1, floor))
			if proposed > 0 {
				fence = max(fence, uint64(prop))
			}
			cs := s.on(ctx, took, commitScript, keys, req.Token, fence, fenceTTL, nonce)
			held = 0
			for _, i := range took {
				if c := cs[i]; c.err == nil && c.counts && num(c.v, 0) == 1 && num(c.v, 1) == 1 {
					held++
				}
			}
		}
		s.see(int64(fence))
		validity := lease - time.Since(start) - s.drift(lease)
		if held >= s.quorum && validity > 0 {
			return store.Grant{Acquired: true, Token: req.Token, Fence: fence, TTL: validity, ExpireTime: start.Add(lease - s.drift(lease)), Holders: 1}, false, nil
		}
	}
	// Not granted: this try undone everywhere.
	s.undo(ctx, keys, req.Token, nonce)
	// Another holder on a majority: not acquired. Its lease ends at the
	// least remaining among its masters.
	byToken := map[string][]int{}
	for _, i := range taken {
		if num(as[i].v, 3) == 0 {
			continue // a grant on its way (no fence yet): it may yet fail
		}
		tok := str(as[i].v, 5)
		byToken[tok] = append(byToken[tok], i)
	}
	for _, is := range byToken {
		if len(is) < s.quorum {
			continue
		}
		var left int64 = -1
		for _, i := range is {
			if pttl := num(as[i].v, 2); left < 0 || pttl < left {
				left = pttl
			}
		}
		ttl := time.Duration(max(left, 0)) * time.Millisecond
		return store.Grant{Holder: str(as[is[0]].v, 1), TTL: ttl, ExpireTime: time.Now().Add(ttl),
			RetryAt: time.Now().Add(ttl + jitter(50*time.Millisecond)), Holders: 1}, false, nil
	}
	if len(down) > len(s.masters)-s.quorum {
		return store.Grant{}, false, s.unavailable("grant", as)
	}
	// A split vote (contenders at once) or a grant that took too long.
	return store.Grant{}, true, nil
}

// jitter is a random duration in [0, d).
func jitter(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d))) }

// undo deletes token's lock on every master (with a nonce: that try's
// record only), within the timeout, whatever the caller's context says (a
// grant given up must not linger).
func (s *Store) undo(ctx context.Context, keys []string, token, nonce string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
	defer cancel()
	s.all(ctx, releaseScript, keys, token, nonce)
}

// propose returns the fence a grant proposes: above every fence and
// master clock this instance saw, and proposalLead ahead of its own clock.
// The floor is raised to it only once it is the fence answered: a
// proposal a majority did not take (from a clock far ahead, say) leaves
// nothing behind.
func (s *Store) propose() int64 {
	return max(s.seen.Load()+1, time.Now().UnixMicro()+proposalLead.Microseconds())
}

// jumpTolerance is how far beyond Config.Drift (and 1 ms a second of
// rate difference) a master's clock may move forward against this
// instance's between two readings before it counts as a jump.
const jumpTolerance = time.Millisecond

// mono is this instance's monotonic clock in µs, from 1: Go's, which no
// step of the wall clock moves (and which costs no system call: a
// reading's two ends must come from one clock read alike, or a thread
// descheduled between two clocks looks like a jump). It stops while the
// host sleeps; checkLoop then starts every master's readings afresh
// (forgetSleep).
func (s *Store) mono() int64 { return time.Since(s.base).Microseconds() + 1 }

// forgetSleep starts every master's clock readings afresh if the host
// slept since the last call (the boottime ran ahead of the monotonic
// clock): across a sleep the masters' clocks would all look as if they
// had jumped forward. Only checkLoop calls it. A grant answered between
// the resume and the next check may still take a master for jumped.
func (s *Store) forgetSleep() {
	slept := bootMicros() - monoMicros()
	if slept-s.slept < time.Second.Microseconds() { // two clocks read one after the other: not to the µs
		return
	}
	s.slept = slept
	for _, m := range s.masters {
		m.clk.Lock()
		m.readings = [clockReadings]reading{}
		m.clk.Unlock()
	}
	s.cfg.Log.Info("the host slept: the masters' clocks are read afresh")
}

// clockReading takes master m's TIME (µs), read by a call made at sent
// and answered at recv (mono), and reports whether its clock jumped
// forward: then it may have expired leases early (Redis expires keys by
// its wall clock), so it counts for nothing until Config.RestartDelay has
// passed, as a restarted master, and the next epoch check records it for
// the other instances. A step back is no hazard (its leases live longer;
// the fence is a max-register) and is not one.
//
// Its TIME minus mono lies in [now-recv, now-sent]. A reading is compared
// only with the earlier ones that were answered before it was asked
// (readings come in concurrently, and are taken out of order): with the
// offset unchanged, its lo is at most their hi; more than the tolerance
// above any of them is a jump. until is set before m.clk is released, so
// a concurrent reading that finds the jump already taken in finds the
// master not counting.
func (s *Store) clockReading(m *master, now, sent, recv int64) bool {
	if s.cfg.NoRestartDelay {
		return false
	}
	r := reading{lo: now - recv, hi: now - sent, sent: sent, recv: recv}
	m.clk.Lock()
	defer m.clk.Unlock()
	var by int64
	for _, p := range m.readings {
		if p.recv == 0 || p.recv > sent {
			continue
		}
		tol := (s.cfg.Drift + jumpTolerance).Microseconds() + (recv-p.recv)/1000
		by = max(by, r.lo-p.hi-tol)
	}
	if by > 0 {
		m.readings = [clockReadings]reading{} // the jump is taken in: compared from here on
	}
	m.readings[m.next] = r
	m.next = (m.next + 1) % clockReadings
	if by <= 0 {
		return false
	}
	raise(&m.until, time.Now().Add(s.cfg.RestartDelay).UnixNano())
	m.jumped.Store(true)
	s.cfg.Log.Warn("a redlock master's clock jumped forward: it may have expired leases early, and counts for no lock until lock.max_ttl has passed",
		"addr", m.addr, "by_at_least", time.Duration(by)*time.Microsecond, "for", s.cfg.RestartDelay)
	return true
}

// raise sets v to x if x is greater.
func raise(v *atomic.Int64, x int64) {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}

// see raises the latest master clock (µs) or fence this instance saw: a
// floor of every fence it hands out, so that its fences never go back
// when the masters of a grant have slower clocks than an earlier one's.
func (s *Store) see(t int64) { raise(&s.seen, t) }

// RenewHold implements store.Holds: extended on a majority within the
// validity, never bringing back an expired lock.
func (s *Store) RenewHold(ctx context.Context, kind store.HoldKind, name, token string, ttl time.Duration) (store.Lease, error) {
	if kind != store.HoldLock {
		return store.Lease{}, store.ErrRedlockMode
	}
	start := time.Now()
	as := s.all(ctx, renewScript, s.keys(name), token, max(1, ttl.Milliseconds()))
	ok, notHeld := 0, 0
	var least int64 = -1
	var fence uint64
	for _, a := range as {
		switch {
		case a.err != nil || !a.counts:
		case num(a.v, 0) == 1:
			ok++
			if t := num(a.v, 1); least < 0 || t < least {
				least = t
			}
			fence = max(fence, uint64(num(a.v, 2)))
		default:
			notHeld++
		}
	}
	switch {
	case ok >= s.quorum:
		granted := time.Duration(least) * time.Millisecond // the least of the majority: max_hold's cap
		validity := granted - time.Since(start) - s.drift(granted)
		if validity > 0 {
			return store.Lease{TTL: validity, ExpireTime: start.Add(granted - s.drift(granted)), Fence: fence}, nil
		}
		return store.Lease{}, fmt.Errorf("redlock renew: the lease ran out while renewing: %w", store.ErrNotHeld)
	case notHeld > len(s.masters)-s.quorum:
		return store.Lease{}, store.ErrNotHeld
	}
	return store.Lease{}, s.unavailable("renew", as)
}

// ReleaseHold implements store.Holds: deleted on every master; this
// instance's waiters for the name are woken.
func (s *Store) ReleaseHold(ctx context.Context, kind store.HoldKind, name, token, instance string) (store.Released, error) {
	if kind != store.HoldLock {
		return store.Released{}, store.ErrRedlockMode
	}
	as := s.all(ctx, releaseScript, s.keys(name), token, "")
	deleted, notHeld := 0, 0
	for _, a := range as {
		switch {
		case a.err != nil || !a.counts:
		case num(a.v, 0) == 1:
			deleted++
		default:
			notHeld++
		}
	}
	if deleted > 0 && instance != "" {
		s.hub.Notify(store.WaitTopic(kind, name, instance))
	}
	switch {
	case deleted >= s.quorum:
		return store.Released{Released: true}, nil
	case notHeld > len(s.masters)-s.quorum:
		return store.Released{}, nil
	}
	return store.Released{}, s.unavailable("release", as)
}

// AbandonHold implements store.Holds: the token's lock is deleted
// everywhere, if it holds anywhere.
func (s *Store) AbandonHold(ctx context.Context, kind store.HoldKind, name, token, _ string) error {
	if kind != store.HoldLock {
		return store.ErrRedlockMode
	}
	s.undo(ctx, s.keys(name), token, "")
	return nil
}

// GetHolds implements store.Holds: the holder a majority agrees on.
func (s *Store) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.HoldInfo, error) {
	if kind != store.HoldLock {
		return store.HoldInfo{}, store.ErrRedlockMode
	}
	as := s.all(ctx, getScript, s.keys(name))
	type holder struct {
		n     int
		owner string
		fence uint64
		left  int64
	}
	by := map[string]*holder{}
	free := 0
	for _, a := range as {
		if a.err != nil || !a.counts {
			continue
		}
		tok := str(a.v, 0)
		if tok == "" || num(a.v, 2) == 0 {
			// Free, or a grant still on its way (no fence yet): it holds
			// from its answer on, if it is granted at all.
			free++
			continue
		}
		h := by[tok]
		if h == nil {
			h = &holder{owner: str(a.v, 1), left: -1}
			by[tok] = h
		}
		h.n++
		h.fence = max(h.fence, uint64(num(a.v, 2)))
		if l := num(a.v, 3); h.left < 0 || l < h.left {
			h.left = l
		}
	}
	for _, h := range by {
		if h.n >= s.quorum {
			left := time.Duration(h.left) * time.Millisecond
			left -= s.drift(left)
			if left <= 0 {
				break
			}
			info := store.HolderInfo{Owner: h.owner, Fence: h.fence, TTL: left, ExpireTime: time.Now().Add(left)}
			return store.HoldInfo{Holders: []store.HolderInfo{info}, Held: true, Owner: h.owner, Fence: h.fence, TTL: left, ExpireTime: info.ExpireTime}, nil
		}
	}
	if free < s.quorum {
		// Neither a holder nor free on a majority: the masters that did
		// not answer may complete a holder's.
		return store.HoldInfo{}, s.unavailable("read", as)
	}
	return store.HoldInfo{}, nil
}

// CheckFence implements store.Holds: whether the holder a majority agrees
// on has fence.
func (s *Store) CheckFence(ctx context.Context, kind store.HoldKind, name string, fence uint64) (bool, error) {
	info, err := s.GetHolds(ctx, kind, name)
	return err == nil && info.Held && info.Fence == fence, err
}

// LeaveQueue implements store.Holds: there is no queue.
func (s *Store) LeaveQueue(_ context.Context, kind store.HoldKind, _, _, _, _ string) ([]store.Handoff, error) {
	if kind != store.HoldLock {
		return nil, store.ErrRedlockMode
	}
	return nil, nil
}

// RefreshTickets implements store.Holds: there is no queue, and no ticket
// is ever gone.
func (s *Store) RefreshTickets(_ context.Context, kind store.HoldKind, _ string, _ []string, _ time.Duration) ([]string, error) {
	if kind != store.HoldLock {
		return nil, store.ErrRedlockMode
	}
	return nil, nil
}

// Subscribe implements store.Subscriber: this instance's own releases.
func (s *Store) Subscribe(ctx context.Context, topic string) (*store.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sub, _ := s.hub.Subscribe(topic, nil)
	return sub, nil
}

// monoStart anchors monoMicros.
var monoStart = time.Now()

// monoMicros is Go's monotonic clock in µs.
func monoMicros() int64 { return time.Since(monoStart).Microseconds() }
