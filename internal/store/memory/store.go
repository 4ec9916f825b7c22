// Package memory is coordd's embedded store: all state in this process, with
// real mutual exclusion and the same semantics as the Redis store (both pass
// store/storetest). It is the default backend, for a sidecar or a laptop; its
// state ends with the process.
//
// Concurrency: each kind of state has its own mutex, and every store method
// runs entirely under one of them, which makes it atomic:
//   - lk guards the holds (locks, semaphore permits, leaderships: see
//     holds.go), sessions and the fence counter together, because a
//     session's keepalive or close touches its holds of every kind;
//   - rate-limiter state is split over shards by key hash, since Allow is
//     the hottest call;
//   - idempotency keys share one mutex;
//   - each queue has its own mutex, found under the queues map's mutex;
//   - the runtime rate-limit policies share one mutex.
//
// No method holds two of these at once, except that queue methods hold the
// queues map's mutex only to find the queue. Wake-ups go through a store.Hub
// after the state's mutex is released.
//
// Expiry is by deadline: every read treats a record whose deadline has passed
// as absent. A background sweep (every Options.SweepInterval) deletes
// expired records in bounded batches, so that memory follows live state, and
// wakes the waiters that the expired holds and lapsed tickets let in.
package memory

import (
	"context"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
)

// Options configures a Store.
type Options struct {
	// Clock is the store's time; nil means the system clock.
	Clock clock.Clock
	// SweepInterval is how often expired records are deleted; 0 means 1s.
	SweepInterval time.Duration
	// DeadLetterTTL is how long a dead letter is kept after it died; 0
	// means store.DefaultDeadLetterTTL.
	DeadLetterTTL time.Duration
	// IdleNameTTL is how long an election without leader or waiters keeps
	// its revision and log; 0 means DefaultIdleNameTTL. (Fences need no
	// record per name here: one counter serves every name.)
	IdleNameTTL time.Duration
}

// DefaultIdleNameTTL is Options.IdleNameTTL's default, as the Redis
// store's.
const DefaultIdleNameTTL = time.Hour

// Store is the embedded store. Its zero value is not usable; call New.
type Store struct {
	clock   clock.Clock
	hub     store.Hub
	deadTTL time.Duration
	idleTTL time.Duration

	lk        sync.Mutex
	holds     map[holdKey]*holdSet
	sessions  map[string]*sessionRec
	byNS      map[string]map[string]struct{} // session IDs by namespace, for its cap
	lastFence uint64

	limits [limitShards]limitShard

	im   sync.Mutex
	idem map[string]*idemRec

	qm     sync.Mutex
	queues map[string]*queueRec
	parts  map[string][]int // Partitionings' record, sorted; never forgotten

	sm        sync.Mutex
	schedules map[string]map[schedKey]store.Schedule // by namespace

	am  sync.Mutex
	act activity

	pm  sync.Mutex
	pol policies

	stop chan struct{}
	done chan struct{}
}

var _ store.Store = (*Store)(nil)

// New returns a Store and starts its sweep; Close stops it.
func New(opts Options) *Store {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = time.Second
	}
	if opts.DeadLetterTTL <= 0 {
		opts.DeadLetterTTL = store.DefaultDeadLetterTTL
	}
	if opts.IdleNameTTL <= 0 {
		opts.IdleNameTTL = DefaultIdleNameTTL
	}
	s := &Store{
		clock:    opts.Clock,
		deadTTL:  us(opts.DeadLetterTTL),
		idleTTL:  opts.IdleNameTTL,
		holds:    make(map[holdKey]*holdSet),
		sessions: make(map[string]*sessionRec),
		byNS:     make(map[string]map[string]struct{}),
		idem:     make(map[string]*idemRec),
		queues:   make(map[string]*queueRec),
		parts:    make(map[string][]int),

		schedules: make(map[string]map[schedKey]store.Schedule),
		act:       activity{minutes: map[string]map[int64]store.QueueCounts{}, registry: map[string]map[string]time.Time{}},
		pol:       policies{byNS: map[string]map[string][]byte{}, versions: map[string]int64{}},
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	for i := range s.limits {
		s.limits[i].m = make(map[limitKey]*limitState)
	}
	go s.sweepLoop(opts.SweepInterval)
	return s
}

// Close stops the sweep. The store must not be used after.
func (s *Store) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	return nil
}

// Subscribe implements store.Subscriber.
func (s *Store) Subscribe(ctx context.Context, topic string) (*store.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sub, _ := s.hub.Subscribe(topic, nil)
	return sub, nil
}

// Len reports how many records the store holds (holders of locks,
// semaphores and elections, waiting tickets, names that keep only a
// lock-delay or an election's log, sessions, limiter states, idempotency
// keys, messages, dead letters included, and deduplication entries),
// expired or not. Tests use it to check that a rejected request changed
// nothing.
func (s *Store) Len() int {
	s.lk.Lock()
	n := len(s.sessions)
	for _, h := range s.holds {
		n += max(len(h.holders)+len(h.tickets), 1)
	}
	s.lk.Unlock()
	for i := range s.limits {
		sh := &s.limits[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	s.im.Lock()
	n += len(s.idem)
	s.im.Unlock()
	for _, q := range s.queueList() {
		q.mu.Lock()
		n += len(q.msgs) + len(q.dedup)
		q.mu.Unlock()
	}
	return n
}

// Keeps returns those of names (scoped hold and queue names) that the
// store would still keep a record of after horizon with nobody touching
// them: a live holder, ticket or lock-delay, an election's retention, a
// message or a dedup entry; with horizon 0, every record it has now, an
// empty one (which the sweep would drop) included. Tests use it to check
// that what ended leaves nothing behind, and that reads create nothing.
func (s *Store) Keeps(horizon time.Duration, names ...string) []string {
	t := s.now().Add(horizon)
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var out []string
	s.lk.Lock()
	for k, h := range s.holds {
		if want[k.name] && (horizon == 0 || h.keepsAt(t, s.idleTTL)) {
			out = append(out, string(k.kind)+":"+k.name)
		}
	}
	s.lk.Unlock()
	s.qm.Lock()
	queues := make(map[string]*queueRec)
	for n, q := range s.queues {
		if want[n] {
			queues[n] = q
		}
	}
	s.qm.Unlock()
	for n, q := range queues {
		q.mu.Lock()
		keeps := horizon == 0 || len(q.msgs) > 0 || q.conf.Capped()
		for _, d := range q.dedup {
			keeps = keeps || d.expire.After(t)
		}
		q.mu.Unlock()
		if keeps {
			out = append(out, "queue:"+n)
		}
	}
	return out
}

// now is the store's time at microsecond resolution, as on Redis.
func (s *Store) now() time.Time { return s.clock.Now().Truncate(time.Microsecond) }

// us truncates d to microseconds.
func us(d time.Duration) time.Duration { return d.Truncate(time.Microsecond) }

// sweepBatch bounds the records one sweep round looks at per kind of state.
const sweepBatch = 1000

func (s *Store) sweepLoop(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweep()
		}
	}
}

// sweep deletes expired records, looking at up to sweepBatch records of each
// kind per round (Go's map iteration starts at a random place), and repeats a
// kind while more than a quarter of what it looked at had expired, as Redis's
// own active expiry does.
func (s *Store) sweep() {
	const rounds = 16
	for i := 0; i < rounds && s.sweepHolds() > sweepBatch/4; i++ {
	}
	for i := range s.limits {
		for j := 0; j < rounds && s.limits[i].sweep(s.now()) > sweepBatch/4; j++ {
		}
	}
	for i := 0; i < rounds && s.sweepIdem() > sweepBatch/4; i++ {
	}
	for _, q := range s.queueList() {
		for i := 0; i < rounds && q.sweep(s.now(), s.deadTTL); i++ {
		}
	}
	s.dropEmptyQueues()
	s.am.Lock()
	s.trimActivity(s.now())
	s.am.Unlock()
}

var _ store.NodeHealther = (*Store)(nil)

// NodeHealth reports the one in-process node, always reachable.
func (s *Store) NodeHealth(context.Context) []store.Node {
	return []store.Node{{Role: "memory", Reachable: true}}
}
