package limiter

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// denyCache remembers, for a short while, keys known to be over their limit,
// so that a key being hammered is answered without a round trip to the
// store. An entry is keyed by the state's key in the store (see StoreKey:
// the scoped key and the policy's name) and every parameter of its limits, so
// one policy's denial never answers another's call, and a changed policy
// never meets an old entry. It answers exactly
// what the store would: a denial consumes nothing, nothing but time can make
// the key admit a call of the same cost sooner than the denial's retry_after
// (others' calls only consume more), and the entry's answer is that denial
// with its times moved on. It answers only calls of the cost it was denied
// for: a larger cost is denied too, but its retry_after may be longer. It is kept for at most maxAge (and
// never past retry_after), which bounds any drift between coordd's clock and
// the store's.
type denyCache struct {
	maxAge  time.Duration
	perPart int
	parts   [cacheParts]denyPart
}

const cacheParts = 32

var cacheSeed = maphash.MakeSeed()

type denyPart struct {
	mu sync.Mutex
	m  map[denyKey]denyEntry
}

type denyKey struct {
	key   string
	limit store.Limit
	more  string // a policy's further limits, as text ("" with one)
}

type denyEntry struct {
	cost      int64     // the denied cost: calls of this cost or more are denied
	limit     int       // the deciding limit
	remaining int64     // remaining at the denial
	retryAt   time.Time // when the same call would be allowed
	resetAt   time.Time
	expire    time.Time // min(retryAt, denial + maxAge)
}

func newDenyCache(size int, maxAge time.Duration) *denyCache {
	if size <= 0 || maxAge <= 0 {
		return nil
	}
	c := &denyCache{maxAge: maxAge, perPart: max(1, size/cacheParts)}
	for i := range c.parts {
		c.parts[i].m = make(map[denyKey]denyEntry)
	}
	return c
}

func (c *denyCache) part(key string) *denyPart {
	return &c.parts[maphash.String(cacheSeed, key)%cacheParts]
}

// get returns the cached denial of a call of cost on k at now, if any.
func (c *denyCache) get(k denyKey, cost int64, now time.Time) (store.Decision, bool) {
	if c == nil {
		return store.Decision{}, false
	}
	p := c.part(k.key)
	p.mu.Lock()
	e, ok := p.m[k]
	if ok && !now.Before(e.expire) {
		delete(p.m, k)
		ok = false
	}
	p.mu.Unlock()
	// Only the same cost: a larger one is denied too, but its retry_after
	// may be longer than the one cached.
	if !ok || cost != e.cost {
		return store.Decision{}, false
	}
	return store.Decision{
		Remaining: e.remaining, RetryAfter: e.retryAt.Sub(now), ResetAfter: max(0, e.resetAt.Sub(now)), Limit: e.limit,
	}, true
}

// put remembers the store's denial d of a call of cost on k, decided at now.
func (c *denyCache) put(k denyKey, cost int64, d store.Decision, now time.Time) {
	if c == nil || d.Allowed || d.RetryAfter <= 0 {
		return
	}
	e := denyEntry{
		cost: cost, limit: d.Limit, remaining: d.Remaining,
		retryAt: now.Add(d.RetryAfter), resetAt: now.Add(d.ResetAfter),
		expire: now.Add(min(d.RetryAfter, c.maxAge)),
	}
	p := c.part(k.key)
	p.mu.Lock()
	defer p.mu.Unlock()
	// Each put looks at a few entries (map order is random) and drops the
	// expired ones, so that denials, which expire within maxAge, do not
	// pile up until the part is full: the cache stays about the size of
	// what was denied within maxAge. Full, it drops what has expired, or
	// else any entry, which only costs that key a round trip.
	full := len(p.m) >= c.perPart
	n, seen := 0, 0
	for old, oe := range p.m {
		seen++
		if !now.Before(oe.expire) || (full && n == 0) {
			delete(p.m, old)
			n++
		}
		if n >= 8 || (!full && seen >= sweepPerPut) {
			break
		}
	}
	p.m[k] = e
}

// sweepPerPut is how many entries a put that has room looks at.
const sweepPerPut = 2

// len is how many entries the cache holds, expired ones included.
func (c *denyCache) len() int {
	n := 0
	for i := range c.parts {
		c.parts[i].mu.Lock()
		n += len(c.parts[i].m)
		c.parts[i].mu.Unlock()
	}
	return n
}
