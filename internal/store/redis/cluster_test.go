package redis

// Tests of the Redis store on the shared 3-master/3-replica Cluster
// (redistest.Cluster): that no operation ever touches keys of two slots,
// whatever the name; that a contended lock excludes and fences through the
// gRPC server; and that limiter decisions stay exact under concurrency.
//
// Each test runs on a random key prefix of its own and deletes its keys when
// it ends (the shared instances are never flushed).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/hashslot"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/server/servertest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
)

// clusterStore returns a Store opened (Open) on the shared Cluster as cfg
// says, with a pool of 64 connections per node and a random key prefix, and
// deletes every key under that prefix when the test ends; and the store's
// client. cfg.Addrs and cfg.Prefix are filled in.
func clusterStore(t *testing.T, cfg Config) (*Store, *goredis.ClusterClient) {
	t.Helper()
	cfg.Mode, cfg.Addrs, cfg.PoolSize = "cluster", redistest.Cluster(t), 64
	cfg.Prefix = "ct" + token.New()[:12]
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	st := openStore(t, cfg)
	cc := st.Client().(*goredis.ClusterClient)
	// Registered after openStore's Close, so run before it.
	t.Cleanup(func() { deletePrefix(t, cc, cfg.Prefix) })
	return st, cc
}

// deletePrefix deletes the keys under prefix on every master, one key per
// command (keys of different slots cannot share a command, even on one node).
func deletePrefix(t *testing.T, cc *goredis.ClusterClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var n atomic.Int64
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		pipe := c.Pipeline()
		for iter.Next(ctx) {
			pipe.Unlink(ctx, iter.Val())
			n.Add(1)
			if pipe.Len() >= 500 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		_, err := pipe.Exec(ctx)
		return err
	})
	if err != nil {
		t.Logf("cleanup of prefix %s: %v", prefix, err)
	}
}

// nameRunes is the ASCII part of the names' alphabet: every printable
// character, with ':', '{', '}' and ' ' weighted up since they matter to keys
// and hash tags.
var nameRunes = func() []rune {
	var rs []rune
	for r := rune(0x20); r < 0x7f; r++ {
		rs = append(rs, r)
	}
	for range 6 {
		rs = append(rs, ':', '{', '}', ' ')
	}
	return rs
}()

// randRune returns a printable ASCII rune (60%) or any valid non-control
// code point beyond ASCII, from Latin-1 to the supplementary planes.
func randRune(r *rand.Rand) rune {
	if r.IntN(10) < 6 {
		return nameRunes[r.IntN(len(nameRunes))]
	}
	for {
		var c rune
		switch r.IntN(4) {
		case 0:
			c = rune(0xa0 + r.IntN(0x800-0xa0)) // 2 bytes
		case 1:
			c = rune(0x800 + r.IntN(0x10000-0x800)) // 3 bytes
		case 2:
			c = rune(0x1f300 + r.IntN(0x400)) // emoji
		default:
			c = rune(0x10000 + r.IntN(0x110000-0x10000)) // 4 bytes
		}
		if utf8.ValidRune(c) && !unicode.IsControl(c) {
			return c
		}
	}
}

// randName returns a name the API accepts: 1 to 64 runes of randRune.
func randName(r *rand.Rand) string {
	for {
		var b strings.Builder
		for range 1 + r.IntN(64) {
			b.WriteRune(randRune(r))
		}
		if s := b.String(); validate.Name("name", s, 256) == nil {
			return s
		}
	}
}

// randNamespace returns a namespace: 1-16 characters, never ':'.
func randNamespace(r *rand.Rand) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."
	b := make([]byte, 1+r.IntN(16))
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	return string(b)
}

// failures collects the unexpected errors and wrong answers of many
// goroutines; it keeps the first few of each for the report.
type failures struct {
	mu        sync.Mutex
	errs      int // calls that returned an unexpected error
	crossSlot int // of which CROSSSLOT or "non local key"
	wrong     int // calls that answered something else than expected
	missed    int // wake-ups that did not arrive
	samples   []string
}

func (f *failures) sample(s string) {
	if len(f.samples) < 30 {
		f.samples = append(f.samples, s)
	}
}

// err records err if it is not nil and reports whether it was nil.
func (f *failures) err(op, name string, err error) bool {
	if err == nil {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs++
	msg := err.Error()
	if strings.Contains(msg, "CROSSSLOT") || strings.Contains(msg, "non local key") {
		f.crossSlot++
		f.sample(fmt.Sprintf("CROSS-SLOT %s(%q): %v", op, name, err))
	} else {
		f.sample(fmt.Sprintf("error %s(%q): %v", op, name, err))
	}
	return false
}

// want records a wrong answer unless ok.
func (f *failures) want(ok bool, op, name, format string, args ...any) {
	if ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wrong++
	f.sample(fmt.Sprintf("wrong %s(%q): %s", op, name, fmt.Sprintf(format, args...)))
}

// wake waits for one wake-up on sub.
func (f *failures) wake(sub *store.Subscription, topic string) {
	select {
	case <-sub.C():
	case <-time.After(5 * time.Second):
		f.mu.Lock()
		f.missed++
		f.sample(fmt.Sprintf("no wake-up on %q within 5s", topic))
		f.mu.Unlock()
	}
}

func (f *failures) report(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.samples {
		t.Log(s)
	}
	if f.crossSlot > 0 {
		t.Errorf("%d calls failed with CROSSSLOT / non local key", f.crossSlot)
	}
	if f.errs > 0 {
		t.Errorf("%d calls returned an unexpected error", f.errs)
	}
	if f.wrong > 0 {
		t.Errorf("%d calls answered something unexpected", f.wrong)
	}
	if f.missed > 0 {
		t.Errorf("%d wake-ups did not arrive", f.missed)
	}
}

// parallel runs f(0..n-1) on workers goroutines.
func parallel(workers, n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// sameSlot checks that every key (and channel) of one object hashes to one
// slot, which is what keeps its scripts from failing with CROSSSLOT.
func sameSlot(f *failures, kind, name string, keys ...string) {
	slot := redistest.Slot(keys[0])
	for _, k := range keys[1:] {
		f.want(redistest.Slot(k) == slot, "slot of "+kind, name, "key %q in slot %d, key %q in slot %d",
			keys[0], slot, k, redistest.Slot(k))
	}
}

// The limits every limiter key is driven with: one of each algorithm. The
// period is a day so that a key's calls (on the Redis server's clock) do not
// straddle a window boundary, which would turn the expected denial into an
// admission.
var crossSlotLimits = []store.Limit{
	{Algorithm: store.FixedWindow, Limit: 10, Period: 24 * time.Hour},
	{Algorithm: store.SlidingWindow, Limit: 10, Period: 24 * time.Hour},
	{Algorithm: store.SlidingLog, Limit: 10, Period: 24 * time.Hour},
	{Algorithm: store.TokenBucket, Limit: 10, Period: 24 * time.Hour, Burst: 5},
	{Algorithm: store.LeakyBucket, Limit: 10, Period: 24 * time.Hour, Burst: 2},
}

// TestNoCrossSlot proves that every store operation keeps to one hash slot
// per script on a real Cluster, for any name the API accepts (':', braces,
// spaces, any Unicode): 2,500 random names each of locks (plain and
// session-bound), limiter keys (all five algorithms, with peeks),
// idempotency keys and queues go through every operation of their kind, plus
// sessions scoped by random namespaces, including the multi-node pipelines
// of a session's keepalive and close; hundreds of subscriptions per kind of
// topic each get their wake-up. No call may fail (a CROSSSLOT or "non local
// key" is reported as such), every answer must be the expected one, and the
// names must spread over all three masters (each > 20%), so that the test
// did cross nodes. Its phases: every key and channel of an object in one
// slot (slots); every operation of every kind at once (operations); the
// multi-node pipelines of the sessions that hold locks all over (session
// pipelines); the spread of the names (coverage).
func TestNoCrossSlot(t *testing.T) {
	st, cc := clusterStore(t, Config{})
	x := newNoCrossSlot(st, cc, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	t.Run("slots", x.slots)
	t.Run("operations", x.operations)
	t.Run("session pipelines", x.sessionPipelines)
	t.Run("coverage", x.coverage)
}

// TestNoCrossSlot's sizes.
const (
	perKind         = 2500
	locksPerSession = 200
	bareSessions    = 500
	workers         = 32
)

// noCrossSlot is TestNoCrossSlot's state: its names, and what its phases
// share. Each phase and job takes the fields it uses under their own names.
type noCrossSlot struct {
	st                                         *Store
	cc                                         *goredis.ClusterClient
	r                                          *rand.Rand
	lockNames, limitKeys, idemKeys, queueNames []string
	bare                                       []string // sessions without locks
	labels                                     []string // owners, fingerprints, dedup IDs, results
	sessions                                   []*crossSlotSession
	f                                          *failures       // the operations' (jobs')
	subs                                       [5]atomic.Int64 // subscriptions by kind: lock, idem, queue, wait, election
}

// crossSlotSession is a session that holds locks.
type crossSlotSession struct {
	ns, id string
	mu     sync.Mutex
	kept   []string // session-bound locks left for CloseSession
}

// newNoCrossSlot draws the names, unique per kind once scoped.
func newNoCrossSlot(st *Store, cc *goredis.ClusterClient, r *rand.Rand) *noCrossSlot {
	// Locks take their session's namespace; the other kinds one of a pool.
	namespaces := make([]string, 16)
	for i := range namespaces {
		namespaces[i] = randNamespace(r)
	}
	sessions := make([]*crossSlotSession, (perKind+locksPerSession-1)/locksPerSession)
	for i := range sessions {
		sessions[i] = &crossSlotSession{ns: randNamespace(r)}
		sessions[i].id = store.Scope(sessions[i].ns, token.New())
	}
	names := func(ns func(i int) string) []string {
		seen := map[string]bool{}
		out := make([]string, 0, perKind)
		for len(out) < perKind {
			n := store.Scope(ns(len(out)), randName(r))
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
		return out
	}
	lockNames := names(func(i int) string { return sessions[i/locksPerSession].ns })
	limitKeys := names(func(int) string { return namespaces[r.IntN(len(namespaces))] })
	idemKeys := names(func(int) string { return namespaces[r.IntN(len(namespaces))] })
	queueNames := names(func(int) string { return namespaces[r.IntN(len(namespaces))] })
	bare := make([]string, bareSessions)
	for i := range bare {
		bare[i] = store.Scope(randNamespace(r), token.New())
	}
	labels := make([]string, 4*perKind) // owners, fingerprints, dedup IDs, results
	for i := range labels {
		labels[i] = randName(r)
	}

	return &noCrossSlot{st: st, cc: cc, r: r, lockNames: lockNames, limitKeys: limitKeys, idemKeys: idemKeys,
		queueNames: queueNames, bare: bare, labels: labels, sessions: sessions, f: new(failures)}
}

// slots is the static phase: every key and channel of an object in one slot.
func (x *noCrossSlot) slots(t *testing.T) {
	st, lockNames, limitKeys, idemKeys, queueNames, sessions, bare := x.st, x.lockNames, x.limitKeys, x.idemKeys, x.queueNames, x.sessions, x.bare
	var f failures
	for _, n := range lockNames {
		for _, kind := range []store.HoldKind{store.HoldLock, store.HoldSemaphore, store.HoldElection} {
			sameSlot(&f, string(kind), n, append(st.keys.hold(kind, n), st.keys.channel(store.WaitTopic(kind, n, "0123456789abcdef")))...)
		}
		sameSlot(&f, "election", n, st.keys.hold(store.HoldElection, n)[0], st.keys.channel(store.ElectionTopic(n)))
	}
	for _, n := range limitKeys {
		var ks []string
		for _, l := range crossSlotLimits {
			ks = append(ks, st.keys.limit(n, l)...)
		}
		sameSlot(&f, "limit", n, ks...)
	}
	for _, n := range idemKeys {
		sameSlot(&f, "idem", n, st.keys.idem(n), st.keys.channel(store.IdemTopic(n)))
	}
	for _, n := range queueNames {
		sameSlot(&f, "queue", n, append(st.keys.queue(n), st.keys.channel(store.QueueTopic(n)))...)
	}
	for _, s := range sessions {
		sameSlot(&f, "session", s.id, st.keys.session(s.id)...)
	}
	for _, id := range bare {
		sameSlot(&f, "session", id, st.keys.session(id)...)
	}

	f.report(t)
}

// lockJob takes lock i through every lock operation, as a plain lease and
// then bound to its session.
func (x *noCrossSlot) lockJob(i int) {
	st, ctx, f, lockNames, sessions, labels, subs := x.st, context.Background(), x.f, x.lockNames, x.sessions, x.labels, &x.subs
	name, s := lockNames[i], sessions[i/locksPerSession]
	owner := labels[i]
	tok := token.New()
	var maxHold time.Duration
	if i%2 == 0 {
		maxHold = time.Hour
	}
	g, err := st.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, Owner: owner, TTL: 30 * time.Second, MaxHold: maxHold})
	if !f.err("AcquireLock", name, err) {
		return
	}
	f.want(g.Acquired && g.Fence > 0, "AcquireLock", name, "grant %+v, want acquired", g)
	info, err := st.GetHolds(ctx, store.HoldLock, name)
	if f.err("GetLock", name, err) {
		f.want(info.Held && info.Fence == g.Fence && info.Owner == owner, "GetLock", name, "%+v, want held with fence %d", info, g.Fence)
	}
	l, err := st.RenewHold(ctx, store.HoldLock, name, tok, 40*time.Second)
	if f.err("RenewLock", name, err) {
		f.want(l.Fence == g.Fence, "RenewLock", name, "fence %d, want %d", l.Fence, g.Fence)
	}
	// Every fifth lock has a waiter, of another instance, whose wake-up
	// (its channel, in the lock's slot) the release must send.
	var sub *store.Subscription
	var w store.HoldRequest
	const instance = "0123456789abcdef"
	if i%5 == 0 {
		w = store.HoldRequest{Kind: store.HoldLock, Name: name, Token: token.New(), Owner: "w", TTL: time.Minute,
			Wait: &store.WaitTicket{Ticket: token.New(), Instance: instance, Lease: time.Minute}}
		topic := store.WaitTopic(store.HoldLock, name, instance)
		sub, err = st.Subscribe(ctx, topic)
		if f.err("Subscribe", topic, err) {
			subs[0].Add(1)
		}
		if gw, err := st.AcquireHold(ctx, w); f.err("AcquireHold(waiter)", name, err) {
			f.want(gw.Queued, "AcquireHold(waiter)", name, "%+v, want queued", gw)
		}
	}
	ok, _, err := storetest.ReleaseLock(ctx, st, name, tok)
	if f.err("ReleaseHold", name, err) {
		f.want(ok, "ReleaseHold", name, "not released")
	}
	if sub != nil {
		f.wake(sub, store.WaitTopic(store.HoldLock, name, instance))
		sub.Close()
		_, err := st.LeaveQueue(ctx, store.HoldLock, name, w.Wait.Ticket, "", "")
		f.err("LeaveQueue", name, err)
	}

	// The same name again, bound to a session.
	tok2 := token.New()
	g2, err := st.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok2, Owner: owner, SessionID: s.id, MaxHold: maxHold})
	if !f.err("AcquireLock(session)", name, err) {
		return
	}
	f.want(g2.Acquired && g2.Fence > g.Fence, "AcquireLock(session)", name, "grant %+v, want acquired with a fence > %d", g2, g.Fence)
	_, err = st.RenewHold(ctx, store.HoldLock, name, tok2, time.Minute)
	if !errors.Is(err, store.ErrSessionBound) {
		f.err("RenewLock(session)", name, fmt.Errorf("want ErrLockSessionBound, got %w", err))
	}
	info, err = st.GetHolds(ctx, store.HoldLock, name)
	if f.err("GetLock", name, err) {
		f.want(info.Held && info.SessionBound && info.Fence == g2.Fence, "GetLock(session)", name, "%+v, want held by session %q", info, s.id)
	}
	if i%2 == 1 {
		ok, _, err := storetest.ReleaseLock(ctx, st, name, tok2)
		if f.err("ReleaseLock(session)", name, err) {
			f.want(ok, "ReleaseLock(session)", name, "not released")
		}
		return
	}
	s.mu.Lock()
	s.kept = append(s.kept, name)
	s.mu.Unlock()
}

// holdJob takes name 8i, as a semaphore and as an election, through every
// Holds and Elections operation: grants, a waiting ticket and its
// targeted wake-up, its refresh and leaving, the fence check, and an
// election's terms, value, log and resignation.
func (x *noCrossSlot) holdJob(i int) {
	st, ctx, f, lockNames, subs := x.st, context.Background(), x.f, x.lockNames, &x.subs
	i *= 8 // an eighth of the names, on sessions of their own: the lock sessions' leases must outlast the phase
	name := lockNames[i]
	s := &crossSlotSession{id: store.Scope(store.Namespace(name), token.New())}
	if _, err := st.CreateSession(ctx, s.id, 10*time.Minute, 0, 0); !f.err("CreateSession", s.id, err) {
		return
	}
	defer func() { _, _ = st.CloseSession(ctx, store.SessionRef{ID: s.id}) }()
	const instance = "0123456789abcdef"
	p1 := store.HoldRequest{Kind: store.HoldSemaphore, Name: name, Token: token.New(), Owner: "p1", TTL: time.Minute, Limit: 1}
	g1, err := st.AcquireHold(ctx, p1)
	if !f.err("AcquireHold(semaphore)", name, err) {
		return
	}
	f.want(g1.Acquired && g1.Holders == 1 && g1.Limit == 1, "AcquireHold(semaphore)", name, "grant %+v, want acquired", g1)
	ok, err := st.CheckFence(ctx, store.HoldSemaphore, name, g1.Fence)
	if f.err("CheckFence", name, err) {
		f.want(ok, "CheckFence", name, "fence %d not live", g1.Fence)
	}
	var sub *store.Subscription
	if i%8 == 0 { // every one
		sub, err = st.Subscribe(ctx, store.WaitTopic(store.HoldSemaphore, name, instance))
		if f.err("Subscribe", "wait", err) {
			subs[3].Add(1)
		}
	}
	ticket := token.New()
	p2 := store.HoldRequest{Kind: store.HoldSemaphore, Name: name, Token: token.New(), Owner: "p2", SessionID: s.id, Limit: 1,
		Wait: &store.WaitTicket{Ticket: ticket, Instance: instance, Lease: time.Minute}}
	g2, err := st.AcquireHold(ctx, p2)
	if f.err("AcquireHold(semaphore, waiting)", name, err) {
		f.want(!g2.Acquired && g2.Queued && g2.Holder == "p1", "AcquireHold(semaphore, waiting)", name, "grant %+v, want queued behind p1", g2)
	}
	gone, err := st.RefreshTickets(ctx, store.HoldSemaphore, name, []string{ticket, token.New()}, time.Minute)
	if f.err("RefreshTickets", name, err) {
		f.want(len(gone) == 1, "RefreshTickets", name, "gone %d, want 1", len(gone))
	}
	info, err := st.GetHolds(ctx, store.HoldSemaphore, name)
	if f.err("GetHolds", name, err) {
		f.want(len(info.Holders) == 1 && info.Waiters == 1 && info.Limit == 1, "GetHolds", name, "%+v", info)
	}
	rel, err := st.ReleaseHold(ctx, store.HoldSemaphore, name, p1.Token, "")
	if f.err("ReleaseHold", name, err) {
		f.want(rel.Released, "ReleaseHold", name, "not released")
	}
	if sub != nil {
		f.wake(sub, "wait")
		sub.Close()
	}
	g2, err = st.AcquireHold(ctx, p2)
	if f.err("AcquireHold(semaphore, woken)", name, err) {
		f.want(g2.Acquired, "AcquireHold(semaphore, woken)", name, "grant %+v, want acquired", g2)
	}
	_, err = st.LeaveQueue(ctx, store.HoldSemaphore, name, ticket, "", "")
	f.err("LeaveQueue", name, err)
	_, err = st.RenewHold(ctx, store.HoldSemaphore, name, p2.Token, time.Minute)
	if !errors.Is(err, store.ErrSessionBound) {
		f.err("RenewHold(session)", name, fmt.Errorf("want ErrLockSessionBound, got %w", err))
	}
	f.err("AbandonHold", name, st.AbandonHold(ctx, store.HoldSemaphore, name, p2.Token, ""))

	// The election of the same name.
	if i%8 == 0 {
		sub, err = st.Subscribe(ctx, store.ElectionTopic(name))
		if f.err("Subscribe", "election", err) {
			subs[4].Add(1)
		}
	} else {
		sub = nil
	}
	c := store.Campaign{Name: name, Token: token.New(), SessionID: s.id, Value: []byte(name)}
	won, err := st.Campaign(ctx, c)
	if !f.err("Campaign", name, err) {
		return
	}
	f.want(won.Elected, "Campaign", name, "%+v, want elected", won)
	f.err("Proclaim", name, st.Proclaim(ctx, name, c.Token, []byte("v")))
	l, err := st.Leader(ctx, name)
	if f.err("Leader", name, err) {
		f.want(l.HasLeader && string(l.Value) == "v" && l.Fence == won.Fence, "Leader", name, "%+v", l)
	}
	log, err := st.ElectionChanges(ctx, name, 0)
	if f.err("ElectionChanges", name, err) {
		f.want(len(log.Changes) == 2 && log.Current.Rev == 2, "ElectionChanges", name, "%+v", log)
	}
	resigned, err := st.ReleaseHold(ctx, store.HoldElection, name, c.Token, "")
	if f.err("ReleaseHold", name, err) {
		f.want(resigned.Released, "ReleaseHold", name, "not resigned")
	}
	if sub != nil {
		f.wake(sub, "election")
		sub.Close()
	}
}

// limitJob takes limiter key i through every algorithm: a peek, an
// admission and a denial.
func (x *noCrossSlot) limitJob(i int) {
	st, ctx, f, limitKeys := x.st, context.Background(), x.f, x.limitKeys
	key := limitKeys[i]
	for _, l := range crossSlotLimits {
		op := fmt.Sprintf("Allow(alg %d)", l.Algorithm)
		d, err := st.Allow(ctx, key, l, 1, true)
		if f.err(op+" peek", key, err) {
			f.want(d.Allowed, op+" peek", key, "%+v, want allowed", d)
		}
		d, err = st.Allow(ctx, key, l, 1, false)
		if f.err(op, key, err) {
			f.want(d.Allowed, op, key, "%+v, want allowed", d)
		}
		// The whole capacity more: denied (also exercises the
		// retry-after computations).
		d, err = st.Allow(ctx, key, l, l.Capacity(), false)
		if f.err(op+" denied", key, err) {
			f.want(!d.Allowed && d.RetryAfter > 0, op+" denied", key, "%+v, want denied with a retry after", d)
		}
	}
}

// idemJob takes idempotency key i through every idempotency operation.
func (x *noCrossSlot) idemJob(i int) {
	st, ctx, f, idemKeys, labels, subs := x.st, context.Background(), x.f, x.idemKeys, x.labels, &x.subs
	key, fp := idemKeys[i], labels[perKind+i]
	owner := token.New()
	req := store.BeginIdempotent{Key: key, Fingerprint: fp, OwnerToken: owner, ProcessingTTL: 30 * time.Second, Retention: time.Minute}
	s, err := st.BeginIdempotent(ctx, req)
	if !f.err("BeginIdempotent", key, err) {
		return
	}
	f.want(s.Outcome == store.Execute, "BeginIdempotent", key, "outcome %d, want Execute", s.Outcome)
	other := req
	other.OwnerToken = token.New()
	s, err = st.BeginIdempotent(ctx, other)
	if f.err("BeginIdempotent(again)", key, err) {
		f.want(s.Outcome == store.InProgress, "BeginIdempotent(again)", key, "outcome %d, want InProgress", s.Outcome)
	}
	other.Fingerprint = fp + "x"
	if _, err = st.BeginIdempotent(ctx, other); !errors.Is(err, store.ErrFingerprintMismatch) {
		f.err("BeginIdempotent(other fingerprint)", key, fmt.Errorf("want ErrFingerprintMismatch, got %w", err))
	}
	_, err = st.ExtendIdempotent(ctx, key, owner, time.Minute)
	f.err("ExtendIdempotent", key, err)
	var sub *store.Subscription
	if i%5 == 0 {
		sub, err = st.Subscribe(ctx, store.IdemTopic(key))
		if f.err("Subscribe", store.IdemTopic(key), err) {
			subs[1].Add(1)
		}
	}
	out := labels[2*perKind+i]
	fin := store.FinishIdempotent{Key: key, OwnerToken: owner, ResultTTL: time.Minute}
	want := store.Completed
	switch i % 3 {
	case 0:
		fin.Result = []byte(out)
	case 1:
		fin.Failure = &store.Failure{Message: out}
		want = store.Failed
	default:
		fin.Failure = &store.Failure{Message: out, Retryable: true}
		want = store.Execute
	}
	f.err("FinishIdempotent", key, st.FinishIdempotent(ctx, fin))
	if sub != nil {
		f.wake(sub, store.IdemTopic(key))
		sub.Close()
	}
	req.OwnerToken = token.New()
	s, err = st.BeginIdempotent(ctx, req)
	if !f.err("BeginIdempotent(after finish)", key, err) {
		return
	}
	switch want {
	case store.Completed:
		f.want(s.Outcome == want && string(s.Result) == out, "BeginIdempotent(after finish)", key, "%+v, want Completed with %q", s, out)
	case store.Failed:
		f.want(s.Outcome == want && s.Failure != nil && s.Failure.Message == out, "BeginIdempotent(after finish)", key, "%+v, want Failed with %q", s, out)
	default:
		f.want(s.Outcome == want, "BeginIdempotent(after retryable)", key, "%+v, want Execute", s)
		f.err("FinishIdempotent(2)", key, st.FinishIdempotent(ctx, store.FinishIdempotent{Key: key, OwnerToken: req.OwnerToken, Result: []byte(out), ResultTTL: time.Minute}))
	}
}

// queueJob takes queue i through every queue operation.
func (x *noCrossSlot) queueJob(i int) {
	st, ctx, f, queueNames, labels, subs := x.st, context.Background(), x.f, x.queueNames, x.labels, &x.subs
	q, dedup, payload := queueNames[i], labels[3*perKind+i], []byte(labels[i])
	stats := func(op string, want store.QueueStats) {
		s, err := st.Stats(ctx, q)
		if f.err("Stats", q, err) {
			f.want(s == want, "Stats "+op, q, "%+v, want %+v", s, want)
		}
	}
	enq := func(op string, m store.NewMessage) store.Enqueued {
		m.ID, m.Payload = token.New(), payload
		e, err := st.Enqueue(ctx, q, m)
		f.err(op, q, err)
		return e
	}
	e1 := enq("Enqueue(dedup)", store.NewMessage{MaxAttempts: 2, DedupID: dedup, DedupWindow: time.Minute})
	dup := enq("Enqueue(duplicate)", store.NewMessage{MaxAttempts: 2, DedupID: dedup, DedupWindow: time.Minute})
	f.want(!e1.Duplicate && dup.Duplicate && dup.ID == e1.ID, "Enqueue(duplicate)", q, "first %+v, second %+v", e1, dup)
	enq("Enqueue(delay)", store.NewMessage{MaxAttempts: 1, Delay: time.Hour})
	e3 := enq("Enqueue(past deliver time)", store.NewMessage{MaxAttempts: 1, DeliverTime: time.Now().Add(-time.Second)})
	enq("Enqueue(future deliver time)", store.NewMessage{MaxAttempts: 1, DeliverTime: time.Now().Add(time.Hour)})
	stats("after enqueue", store.QueueStats{Ready: 2, Delayed: 2})

	c, err := st.Claim(ctx, q, store.Claim{Tokens: []string{token.New(), token.New(), token.New()}, Visibility: 30 * time.Second})
	if !f.err("Claim", q, err) {
		return
	}
	if len(c.Messages) != 2 || c.Messages[0].ID != e1.ID || c.Messages[1].ID != e3.ID {
		f.want(false, "Claim", q, "got %d messages, want %s then %s", len(c.Messages), e1.ID, e3.ID)
		return
	}
	m1, m3 := c.Messages[0], c.Messages[1]
	f.want(string(m1.Payload) == string(payload), "Claim", q, "payload %q, want %q", m1.Payload, payload)
	_, err = st.ExtendClaim(ctx, q, m1.Receipt, time.Minute)
	f.err("ExtendClaim", q, err)
	var sub *store.Subscription
	if i%5 == 0 {
		sub, err = st.Subscribe(ctx, store.QueueTopic(q))
		if f.err("Subscribe", store.QueueTopic(q), err) {
			subs[2].Add(1)
		}
	}
	n, err := st.Nack(ctx, q, m1.Receipt, 0)
	if f.err("Nack", q, err) {
		f.want(!n.Dead, "Nack", q, "%+v, want ready again", n)
	}
	if sub != nil {
		f.wake(sub, store.QueueTopic(q))
		sub.Close()
	}
	n, err = st.Nack(ctx, q, m3.Receipt, 0)
	if f.err("Nack(last attempt)", q, err) {
		f.want(n.Dead, "Nack(last attempt)", q, "%+v, want dead", n)
	}
	stats("after nack", store.QueueStats{Ready: 1, Delayed: 2, Dead: 1})
	dl, err := st.ListDead(ctx, q, store.DeadPos{}, 10, 4)
	if f.err("ListDead", q, err) {
		f.want(len(dl) == 1 && dl[0].ID == m3.ID, "ListDead", q, "%d dead letters, want %s", len(dl), m3.ID)
	}
	if i%2 == 0 {
		moved, err := st.RedriveIDs(ctx, q, []string{m3.ID, token.New()})
		if f.err("RedriveIDs", q, err) {
			f.want(moved == 1, "RedriveIDs", q, "moved %d, want 1", moved)
		}
	} else {
		moved, err := st.Redrive(ctx, q, 10)
		if f.err("Redrive", q, err) {
			f.want(moved == 1, "Redrive", q, "moved %d, want 1", moved)
		}
	}
	purged, remaining, err := st.PurgeDead(ctx, q, 10)
	if f.err("PurgeDead", q, err) {
		f.want(purged == 0 && remaining == 0, "PurgeDead", q, "purged %d, remaining %d, want none", purged, remaining)
	}
	c, err = st.Claim(ctx, q, store.Claim{Tokens: []string{token.New(), token.New()}, Visibility: 30 * time.Second})
	if !f.err("Claim(2)", q, err) {
		return
	}
	f.want(len(c.Messages) == 2, "Claim(2)", q, "got %d messages, want 2", len(c.Messages))
	receipts := make([]string, len(c.Messages))
	for i, m := range c.Messages {
		receipts[i] = m.Receipt
	}
	acked, err := st.Ack(ctx, q, receipts)
	if f.err("Ack", q, err) {
		f.want(len(acked) == len(receipts) && !slices.Contains(acked, false), "Ack", q, "acked %v", acked)
	}
	stats("after ack", store.QueueStats{Delayed: 2})
}

// bareJob takes lockless session i through every session operation.
func (x *noCrossSlot) bareJob(i int) {
	st, ctx, f, bare := x.st, context.Background(), x.f, x.bare
	id := bare[i]
	_, err := st.CreateSession(ctx, id, time.Minute, 0, 0)
	if !f.err("CreateSession", id, err) {
		return
	}
	s, err := st.KeepAliveSession(ctx, store.SessionRef{ID: id}, 2*time.Minute)
	if f.err("KeepAliveSession", id, err) {
		f.want(!s.Expired && len(s.Lost) == 0, "KeepAliveSession", id, "%+v", s)
	}
	s, err = st.CheckSession(ctx, store.SessionRef{ID: id})
	if f.err("CheckSession", id, err) {
		f.want(!s.Expired && len(s.Lost) == 0, "CheckSession", id, "%+v", s)
	}
	released, err := storetest.ReleasedNames(st.CloseSession(ctx, store.SessionRef{ID: id}))
	if f.err("CloseSession", id, err) {
		f.want(len(released) == 0, "CloseSession", id, "released %q", released)
	}
}

// operations runs every kind's job at once: each name through every
// operation of its kind.
func (x *noCrossSlot) operations(t *testing.T) {
	st, ctx, f, r, sessions, subs := x.st, context.Background(), x.f, x.r, x.sessions, &x.subs
	begin := time.Now()
	for _, s := range sessions {
		_, err := st.CreateSession(ctx, s.id, 2*time.Minute, 0, 0)
		f.err("CreateSession", s.id, err)
	}

	// Every kind at once, interleaved.
	type job struct {
		run func(int)
		i   int
	}
	var jobs []job
	for i := range perKind {
		jobs = append(jobs, job{x.lockJob, i}, job{x.limitJob, i}, job{x.idemJob, i}, job{x.queueJob, i})
		if i < perKind/8 {
			jobs = append(jobs, job{x.holdJob, i})
		}
	}
	for i := range bareSessions {
		jobs = append(jobs, job{x.bareJob, i})
	}
	r.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	parallel(workers, len(jobs), func(i int) { jobs[i].run(jobs[i].i) })

	elapsed := time.Since(begin)
	t.Logf("subscriptions with their wake-up: %d lock, %d idem, %d queue, %d wait, %d election topics",
		subs[0].Load(), subs[1].Load(), subs[2].Load(), subs[3].Load(), subs[4].Load())
	t.Logf("%d names (+%d sessions) through every operation in %v on %d goroutines",
		4*perKind, bareSessions+len(sessions), elapsed.Round(time.Millisecond), workers)
	for i := range subs {
		if n := subs[i].Load(); n < 300 {
			t.Errorf("subscriptions of kind %d: %d, want >= 300", i, n)
		}
	}
	f.report(t)
}

// sessionPipelines closes the sessions that hold locks.
func (x *noCrossSlot) sessionPipelines(t *testing.T) {
	st, ctx, sessions := x.st, context.Background(), x.sessions
	var f failures
	// Each session's locks span every master: its keepalive, check and close
	// are pipelines over all three.
	parallel(workers, len(sessions), func(i int) {
		s := sessions[i]
		ka, err := st.KeepAliveSession(ctx, store.SessionRef{ID: s.id}, 3*time.Minute)
		if f.err("KeepAliveSession", s.id, err) {
			f.want(!ka.Expired && len(ka.Lost) == 0, "KeepAliveSession", s.id, "expired %v, lost %d", ka.Expired, len(ka.Lost))
		}
		ck, err := st.CheckSession(ctx, store.SessionRef{ID: s.id})
		if f.err("CheckSession", s.id, err) {
			f.want(!ck.Expired && len(ck.Lost) == 0, "CheckSession", s.id, "expired %v, lost %d", ck.Expired, len(ck.Lost))
		}
		released, err := storetest.ReleasedNames(st.CloseSession(ctx, store.SessionRef{ID: s.id}))
		if f.err("CloseSession", s.id, err) {
			slices.Sort(released)
			kept := slices.Sorted(slices.Values(s.kept))
			f.want(slices.Equal(released, kept), "CloseSession", s.id, "released %d locks, want the %d it kept", len(released), len(kept))
		}
		for _, name := range s.kept {
			info, err := st.GetHolds(ctx, store.HoldLock, name)
			if f.err("GetLock(after close)", name, err) {
				f.want(!info.Held, "GetLock(after close)", name, "still held: %+v", info)
			}
		}
	})
	f.report(t)
}

// coverage checks which master serves each object.
func (x *noCrossSlot) coverage(t *testing.T) {
	st, cc, ctx, lockNames, limitKeys, idemKeys, queueNames, bare := x.st, x.cc, context.Background(), x.lockNames, x.limitKeys, x.idemKeys, x.queueNames, x.bare
	masters := map[string]bool{}
	count := func(kind string, keys []string) {
		by := map[string]int{}
		for _, k := range keys {
			c, err := cc.MasterForKey(ctx, k)
			if err != nil {
				t.Fatalf("MasterForKey(%q): %v", k, err)
			}
			by[c.Options().Addr]++
			masters[c.Options().Addr] = true
		}
		addrs := slices.Sorted(func(yield func(string) bool) {
			for a := range by {
				if !yield(a) {
					return
				}
			}
		})
		var line []string
		for _, a := range addrs {
			line = append(line, fmt.Sprintf("%s %d (%.1f%%)", a, by[a], 100*float64(by[a])/float64(len(keys))))
		}
		t.Logf("%-9s %5d names by master: %s", kind, len(keys), strings.Join(line, ", "))
		if len(by) != 3 {
			t.Errorf("%s: names hit %d masters, want 3", kind, len(by))
		}
		for a, n := range by {
			if 5*n <= len(keys) {
				t.Errorf("%s: master %s has %d of %d names, want > 20%%", kind, a, n, len(keys))
			}
		}
	}
	keysOf := func(names []string, key func(string) string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = key(n)
		}
		return out
	}
	count("locks", keysOf(lockNames, func(n string) string { return st.keys.hold(store.HoldLock, n)[0] }))
	count("semaphores", keysOf(lockNames, func(n string) string { return st.keys.hold(store.HoldSemaphore, n)[0] }))
	count("elections", keysOf(lockNames, func(n string) string { return st.keys.hold(store.HoldElection, n)[0] }))
	count("limits", keysOf(limitKeys, func(n string) string { return st.keys.limit(n, crossSlotLimits[0])[0] }))
	count("idem", keysOf(idemKeys, st.keys.idem))
	count("queues", keysOf(queueNames, func(n string) string { return st.keys.queue(n)[0] }))
	count("sessions", keysOf(bare, func(n string) string { return st.keys.session(n)[0] }))
}

// fenced is a downstream resource that accepts a write only with a fence
// greater than every fence it accepted before, and watches for two holders
// inside the critical section at once.
type fenced struct {
	mu       sync.Mutex
	last     uint64
	accepted []uint64
	rejected int
	holders  atomic.Int32
	overlaps atomic.Int32
}

func (r *fenced) enter() {
	if r.holders.Add(1) > 1 {
		r.overlaps.Add(1)
	}
}

func (r *fenced) leave() { r.holders.Add(-1) }

func (r *fenced) write(fence uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fence <= r.last {
		r.rejected++
		return
	}
	r.last = fence
	r.accepted = append(r.accepted, fence)
}

// TestLockContentionOnCluster proves mutual exclusion and fencing of one hot
// lock through coordd's gRPC server on the Cluster: 64 clients loop for 10 s
// on Lock (ttl 2s, wait 5s) → a fenced write → Release. No write may be
// rejected, no two clients may ever be inside at once, the accepted fences
// must rise strictly, every grant must still be held at its release, and the
// lock must keep being granted (waiters are woken by the release's
// SPUBLISH, not by polling).
func TestLockContentionOnCluster(t *testing.T) {
	const (
		clients = 64
		run     = 10 * time.Second
	)
	st, _ := clusterStore(t, Config{})
	locks := coordv1.NewLockServiceClient(servertest.Serve(t, st, clock.Real{}))
	var res fenced
	var grants, timedOut, notReleased atomic.Int64
	var f failures
	begin := time.Now()
	stop := begin.Add(run)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			owner := fmt.Sprintf("client-%d", c)
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				g, err := locks.Lock(ctx, &coordv1.LockRequest{Name: "hot", Owner: owner,
					Ttl: durationpb.New(2 * time.Second), Wait: durationpb.New(5 * time.Second)})
				if !f.err("Lock", "hot", err) {
					cancel()
					return
				}
				if !g.GetAcquired() {
					timedOut.Add(1)
					cancel()
					continue
				}
				grants.Add(1)
				res.enter()
				res.write(g.GetFence())
				runtime.Gosched()
				res.leave()
				rel, err := locks.Release(ctx, &coordv1.ReleaseRequest{Name: "hot", Token: g.GetToken()})
				cancel()
				if !f.err("Release", "hot", err) {
					return
				}
				if !rel.GetReleased() {
					notReleased.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)

	res.mu.Lock()
	defer res.mu.Unlock()
	t.Logf("%d grants in %v: %.0f grants/s; %d waits of 5s ended without the lock; fences %d..%d",
		grants.Load(), elapsed.Round(time.Millisecond), float64(grants.Load())/elapsed.Seconds(), timedOut.Load(),
		first(res.accepted), last(res.accepted))
	f.report(t)
	if res.rejected > 0 {
		t.Errorf("%d writes rejected by the fenced resource (a stale or repeated fence)", res.rejected)
	}
	if n := res.overlaps.Load(); n > 0 {
		t.Errorf("%d times two clients were inside the critical section at once", n)
	}
	for i := 1; i < len(res.accepted); i++ {
		if res.accepted[i] <= res.accepted[i-1] {
			t.Errorf("accepted fences not strictly increasing at %d: %d then %d", i, res.accepted[i-1], res.accepted[i])
			break
		}
	}
	if int64(len(res.accepted)) != grants.Load() {
		t.Errorf("%d writes accepted, want one per grant (%d)", len(res.accepted), grants.Load())
	}
	if n := notReleased.Load(); n > 0 {
		t.Errorf("%d releases found the lock no longer held (a 2s lease lost within a critical section of microseconds)", n)
	}
	if g := grants.Load(); float64(g)/elapsed.Seconds() < 20 {
		t.Errorf("only %d grants in %v: waiters are not woken promptly", g, elapsed)
	}
}

func first(s []uint64) uint64 {
	if len(s) == 0 {
		return 0
	}
	return s[0]
}

func last(s []uint64) uint64 {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// admission is one allowed call: the fake instant it was made at and the
// Remaining it answered.
type admission struct {
	at        time.Time
	remaining int64
}

// TestAllowConcurrentWindowsOnCluster proves that limiter decisions are
// atomic and exact under contention through coordd's gRPC server on the
// Cluster, with the store on a fake clock so that windows are exact: 64
// clients hammer one key at the same fake instants. The fixed window admits
// exactly its limit in each window, each admission with a distinct
// Remaining; the sliding log never holds more than its limit in any span of
// one period, and admits its limit again as soon as the old entries leave;
// the token bucket admits its capacity at one instant and then exactly the
// refill, to the microsecond of its emission interval.
func TestAllowConcurrentWindowsOnCluster(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	st, _ := clusterStore(t, Config{Clock: clk})
	r := &windowsRun{clk: clk, limits: coordv1.NewRateLimitServiceClient(servertest.Serve(t, st, clk)), ctx: context.Background()}
	t.Run("fixed_window", r.fixedWindow)
	t.Run("sliding_log", r.slidingLog)
	t.Run("token_bucket", r.tokenBucket)
}

// TestAllowConcurrentWindowsOnCluster's load and limits.
const (
	cwClients = 64
	cwLimit   = 37
	cwPeriod  = time.Second
	cwWindows = 5
)

var (
	cwBase  = time.Unix(1_800_000_000, 0) // a whole number of periods
	cwCalls = []int{17, 17, 16}           // per client in each of a window's instants: 50
)

// windowsRun is TestAllowConcurrentWindowsOnCluster's server, on the fake
// clock, shared by its subtests.
type windowsRun struct {
	clk    *clock.Fake
	limits coordv1.RateLimitServiceClient
	ctx    context.Context
}

// burst sets the fake clock to at and has every client call Allow calls
// times as fast as it can; it returns the admissions.
func (r *windowsRun) burst(t *testing.T, key string, l *coordv1.Limit, at time.Time, calls int) []admission {
	t.Helper()
	r.clk.Set(at)
	var mu sync.Mutex
	var out []admission
	var f failures
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range cwClients {
		wg.Go(func() {
			<-start
			for range calls {
				resp, err := r.limits.Allow(r.ctx, &coordv1.AllowRequest{Key: key, Limit: l})
				if !f.err("Allow", key, err) {
					return
				}
				if resp.GetAllowed() {
					mu.Lock()
					out = append(out, admission{at, resp.GetRemaining()})
					mu.Unlock()
				}
			}
		})
	}
	close(start)
	wg.Wait()
	f.report(t)
	return out
}

// distinctRemaining checks that the admissions' Remaining values are distinct.
func distinctRemaining(t *testing.T, what string, adm []admission) {
	t.Helper()
	seen := map[int64]bool{}
	for _, a := range adm {
		if seen[a.remaining] {
			t.Errorf("%s: Remaining %d answered twice: two decisions saw the same state", what, a.remaining)
			return
		}
		seen[a.remaining] = true
	}
}

func cwLimitOf(alg coordv1.Algorithm) *coordv1.Limit {
	return &coordv1.Limit{Algorithm: alg, Limit: cwLimit, Period: durationpb.New(cwPeriod)}
}

// fixedWindow: each window admits exactly its limit, with the Remaining
// values 0..limit-1 once each.
func (r *windowsRun) fixedWindow(t *testing.T) {
	begin := time.Now()
	l := cwLimitOf(coordv1.Algorithm_ALGORITHM_FIXED_WINDOW)
	for k := range cwWindows {
		w := cwBase.Add(time.Duration(k) * cwPeriod)
		var adm []admission
		for j, off := range []time.Duration{0, 400 * time.Millisecond, cwPeriod - time.Microsecond} {
			adm = append(adm, r.burst(t, "fw", l, w.Add(off), cwCalls[j])...)
		}
		if len(adm) != cwLimit {
			t.Errorf("window %d: %d admitted, want exactly %d", k, len(adm), cwLimit)
		}
		distinctRemaining(t, fmt.Sprintf("window %d", k), adm)
		rem := make([]int64, len(adm))
		for i, a := range adm {
			rem[i] = a.remaining
		}
		slices.Sort(rem)
		for i, got := range rem {
			if got != int64(i) {
				t.Errorf("window %d: Remaining values %v, want 0..%d once each", k, rem, cwLimit-1)
				break
			}
		}
	}
	t.Logf("%d windows × %d clients × 50 calls in %v", cwWindows, cwClients, time.Since(begin).Round(time.Millisecond))
}

// slidingLog: no span of one period holds more than the limit, and each
// window admits its limit again as soon as the old entries leave.
func (r *windowsRun) slidingLog(t *testing.T) {
	begin := time.Now()
	l := cwLimitOf(coordv1.Algorithm_ALGORITHM_SLIDING_LOG)
	// Window k starts at b_k; b_{k+1} is b_k + P exactly (the old
	// entries leave at that very microsecond) or 150ms later. Within
	// a window: its start, 300ms in, and its last microsecond.
	var all []admission
	var starts []time.Time
	b := cwBase.Add(100 * cwPeriod)
	for k := range cwWindows {
		starts = append(starts, b)
		for j, off := range []time.Duration{0, 300 * time.Millisecond, cwPeriod - time.Microsecond} {
			adm := r.burst(t, "sl", l, b.Add(off), cwCalls[j])
			distinctRemaining(t, fmt.Sprintf("window %d, +%v", k, off), adm)
			all = append(all, adm...)
		}
		b = b.Add(cwPeriod + time.Duration(k%2)*150*time.Millisecond)
	}
	// No span (t-P, t] holds more than the limit.
	for _, a := range all {
		n := 0
		for _, o := range all {
			if o.at.After(a.at.Add(-cwPeriod)) && !o.at.After(a.at) {
				n++
			}
		}
		if n > cwLimit {
			t.Errorf("%d admissions in the period ending %v, limit %d", n, a.at.Sub(cwBase), cwLimit)
			break
		}
	}
	// Each window admits its limit: at least (so, with the above,
	// exactly) limit in [b_k, b_k + P).
	for k, s := range starts {
		var in []admission
		for _, a := range all {
			if !a.at.Before(s) && a.at.Before(s.Add(cwPeriod)) {
				in = append(in, a)
			}
		}
		if len(in) < cwLimit {
			t.Errorf("window %d (from %v): %d admitted, want %d", k, s.Sub(cwBase), len(in), cwLimit)
		}
		distinctRemaining(t, fmt.Sprintf("window %d", k), in)
	}
	t.Logf("%d admissions over %d windows in %v", len(all), cwWindows, time.Since(begin).Round(time.Millisecond))
}

// tokenBucket: the bucket admits its capacity at one instant and then
// exactly the refill, to the microsecond of its emission interval.
func (r *windowsRun) tokenBucket(t *testing.T) {
	begin := time.Now()
	// A bucket's limit must divide its period in µs: 37 per 999,999µs.
	tbPeriod := 999_999 * time.Microsecond
	l := &coordv1.Limit{Algorithm: coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: cwLimit, Period: durationpb.New(tbPeriod)}
	// GCRA with T = P/L µs per token: after the capacity (L) at t0, a
	// client that takes everything at every instant has had L +
	// floor((t-t0)/T) by t, as long as instants are closer than L*T
	// (the bucket never fills up again).
	T := tbPeriod.Microseconds() / cwLimit
	t0 := cwBase.Add(200 * cwPeriod)
	cum := func(at time.Time) int64 { return cwLimit + at.Sub(t0).Microseconds()/T }
	var prev int64
	total := 0
	for k := range cwWindows {
		for j, off := range []time.Duration{0, 100 * time.Millisecond, 400*time.Millisecond + 7*time.Microsecond, 730 * time.Millisecond} {
			at := t0.Add(time.Duration(k)*cwPeriod + off)
			adm := r.burst(t, "tb", l, at, []int{13, 13, 12, 12}[j])
			want := cum(at) - prev
			prev = cum(at)
			total += len(adm)
			if int64(len(adm)) != want {
				t.Errorf("at t0+%v: %d admitted, want %d", at.Sub(t0), len(adm), want)
			}
			distinctRemaining(t, fmt.Sprintf("at t0+%v", at.Sub(t0)), adm)
		}
	}
	t.Logf("%d admissions (T = %dµs) in %v", total, T, time.Since(begin).Round(time.Millisecond))
}

// TestPartitionsSpreadOverMasters checks that the partitions of a queue
// land where PartitionName says: partition p of k in the middle three
// quarters of the p-th k-th of the slot range (CLUSTER KEYSLOT agreeing), so 3 partitions on the 3 masters
// and 6 on them two by two; and that a partition's keys, channel and the
// queue's record of partitionings each stay in one slot. Names with a '}'
// cannot be moved and stay in the queue's slot.
func TestPartitionsSpreadOverMasters(t *testing.T) {
	st, cc := clusterStore(t, Config{})
	ctx := t.Context()
	masterOf := func(key string) string {
		t.Helper()
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return node.Options().Addr
	}
	for _, q := range []string{"ns:jobs", "ns:orders/eu", "x:" + strings.Repeat("é", 40)} {
		for _, k := range []int{3, 6} {
			perMaster := map[string]int{}
			for p := range k {
				name := st.PartitionName(q, p, k)
				keys := st.keys.queue(name)
				slot, err := cc.ClusterKeySlot(ctx, keys[0]).Result()
				if err != nil {
					t.Fatal(err)
				}
				if lo, hi := int64(p*hashslot.Count/k+hashslot.Count/k/8), int64((p+1)*hashslot.Count/k-hashslot.Count/k/8); slot < lo || slot >= hi {
					t.Errorf("%q partition %d of %d: slot %d, want [%d, %d)", q, p, k, slot, lo, hi)
				}
				for _, key := range append(keys, st.keys.channel(store.QueueTopic(name))) {
					if s := hashslot.Of(key); s != int(slot) {
						t.Errorf("%q partition %d of %d: %s in slot %d, not %d", q, p, k, key, s, slot)
					}
				}
				perMaster[masterOf(keys[0])]++
			}
			if len(perMaster) != 3 {
				t.Errorf("%q over %d partitions: masters %v, want all 3, %d each", q, k, perMaster, k/3)
			}
			for m, n := range perMaster {
				if n != k/3 {
					t.Errorf("%q over %d partitions: %d on %s, want %d", q, k, n, m, k/3)
				}
			}
		}
		if hashslot.Of(st.keys.queueParts(q)) != hashslot.Of(st.keys.queue(q)[0]) {
			t.Errorf("%q: the record of partitionings is not in the queue's slot", q)
		}
	}
	q := "ns:a}b"
	for p := range 3 {
		if got := hashslot.Of(st.keys.queue(st.PartitionName(q, p, 3))[0]); got != hashslot.Of(st.keys.queue(q)[0]) {
			t.Errorf("%q partition %d: slot %d, want the queue's own", q, p, got)
		}
	}
}
