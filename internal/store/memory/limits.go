package memory

import (
	"context"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// The algorithms below follow the specification in store/ratelimit.go line
// by line, in int64 microseconds and, where it says so, float64, so that they
// decide exactly as the Redis scripts do.

const limitShards = 64

var limitSeed = maphash.MakeSeed()

type limitShard struct {
	mu sync.Mutex
	m  map[limitKey]*limitState
}

// limitKey keeps a key's state apart for every distinct limit.
type limitKey struct {
	key   string
	limit store.Limit
}

type limitState struct {
	expire int64 // µs; the state may be dropped from then on
	// Fixed and sliding window.
	window    int64
	cur, prev int64
	// Buckets.
	tat int64
	// Sliding log, oldest first.
	log []logEntry
}

type logEntry struct{ at, cost int64 }

// Allow implements store.Limits.
func (s *Store) Allow(ctx context.Context, key string, l store.Limit, cost int64, peek bool) (store.Decision, error) {
	return s.AllowAll(ctx, key, []store.Limit{l}, cost, peek)
}

// AllowAll implements store.Limits: a key's limiters share its shard, whose
// lock makes the decision one step.
func (s *Store) AllowAll(_ context.Context, key string, limits []store.Limit, cost int64, peek bool) (store.Decision, error) {
	if err := store.CheckLimits(limits); err != nil {
		return store.Decision{}, err
	}
	now := s.now().UnixMicro()
	sh := &s.limits[maphash.String(limitSeed, key)%limitShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var out store.Decision
	var next [store.MaxLimits]*limitState
	var keys [store.MaxLimits]limitKey
	for i, l := range limits {
		l.Period = us(l.Period)
		keys[i] = limitKey{key: key, limit: l}
		st := sh.m[keys[i]]
		if st != nil && st.expire <= now {
			st = nil
		}
		var d store.Decision
		switch l.Algorithm {
		case store.FixedWindow:
			d, next[i] = fixedWindow(st, now, l, cost)
		case store.SlidingWindow:
			d, next[i] = slidingWindow(st, now, l, cost)
		case store.SlidingLog:
			d, next[i] = slidingLog(st, now, l, cost)
		default:
			d, next[i] = gcra(st, now, l, cost)
		}
		out = combine(out, d, i)
	}
	if out.Allowed && !peek {
		for i := range limits {
			sh.m[keys[i]] = next[i]
		}
	}
	return out, nil
}

// CountHits implements store.Limits: each counter is a fixed window state
// under a Limit of its period alone (no algorithm: apart from every Allow
// state), stepped under its shard's lock.
func (s *Store) CountHits(_ context.Context, hits []store.Hit) ([]store.HitCount, error) {
	if err := store.CheckHits(hits); err != nil {
		return nil, err
	}
	t := s.now()
	out := make([]store.HitCount, len(hits))
	for i, h := range hits {
		out[i] = store.HitCount{Count: s.countHits(t.UnixMicro(), h), Now: t}
	}
	return out, nil
}

func (s *Store) countHits(now int64, h store.Hit) int64 {
	k := limitKey{key: h.Key, limit: store.Limit{Period: us(h.Period)}}
	p := k.limit.Period.Microseconds()
	sh := &s.limits[maphash.String(limitSeed, h.Key)%limitShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	w, n := now/p, int64(0)
	if st := sh.m[k]; st != nil && st.expire > now && st.window >= w {
		w, n = st.window, st.cur // a later window than now's (the clock stepped back) stays current
	}
	if h.Hits > 0 {
		n = min(n+min(h.Hits, store.MaxHitCount), store.MaxHitCount)
		sh.m[k] = &limitState{expire: (w + 2) * p, window: w, cur: n}
	}
	return n
}

// combine folds limit i's decision d into the decision so far, so, as
// store/ratelimit.go's "Several limits" says.
func combine(so, d store.Decision, i int) store.Decision {
	if i == 0 {
		d.Limit = 0
		return d
	}
	switch {
	case !d.Allowed && (so.Allowed || d.RetryAfter > so.RetryAfter):
		so.Limit, so.RetryAfter = i, d.RetryAfter // the first denial, or a longer one
	case d.Allowed && so.Allowed && d.Remaining < so.Remaining:
		so.Limit = i
	}
	so.Allowed = so.Allowed && d.Allowed
	so.Remaining = min(so.Remaining, d.Remaining)
	so.ResetAfter = max(so.ResetAfter, d.ResetAfter)
	return so
}

func micros(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

func fixedWindow(st *limitState, now int64, l store.Limit, c int64) (store.Decision, *limitState) {
	p := l.Period.Microseconds()
	w := now / p
	n := int64(0)
	if st != nil && st.window >= w {
		// A later window than now's (the clock stepped back) stays current.
		w, n = st.window, st.cur
	}
	end := (w + 1) * p
	if n+c > l.Limit {
		d := store.Decision{Remaining: l.Limit - n, RetryAfter: micros(end - now)}
		if n > 0 {
			d.ResetAfter = micros(end - now)
		}
		return d, nil
	}
	return store.Decision{Allowed: true, Remaining: l.Limit - n - c, ResetAfter: micros(end - now)},
		&limitState{expire: end + p, window: w, cur: n + c}
}

// slidingEstimate is the sliding window's estimate e microseconds into the
// current window.
func slidingEstimate(prev, cur, e, p int64) float64 {
	return float64(prev)*float64(p-e)/float64(p) + float64(cur)
}

func slidingWindow(st *limitState, now int64, l store.Limit, c int64) (store.Decision, *limitState) {
	p := l.Period.Microseconds()
	w := now / p
	var cur, prev int64
	if st != nil {
		switch {
		case st.window >= w:
			// A later window than now's (the clock stepped back) stays
			// current, decided as at its start.
			w, cur, prev = st.window, st.cur, st.prev
		case st.window == w-1:
			prev = st.cur
		}
	}
	e := max(0, now-w*p)
	limit := float64(l.Limit)
	est := slidingEstimate(prev, cur, e, p)
	if est+float64(c) <= limit {
		d := store.Decision{
			Allowed:    true,
			Remaining:  max(0, int64(math.Floor(limit-est-float64(c)))),
			ResetAfter: micros((w+2)*p - now),
		}
		return d, &limitState{expire: (w + 2) * p, window: w, cur: cur + c, prev: prev}
	}
	d := store.Decision{Remaining: max(0, int64(math.Floor(limit-est)))}
	switch {
	case cur > 0:
		d.ResetAfter = micros((w+2)*p - now)
	case prev > 0:
		d.ResetAfter = micros((w+1)*p - now)
	}
	d.RetryAfter = micros(slidingRetry(prev, cur, w, e, p, l.Limit, c) - now)
	return d, nil
}

// slidingRetry is the first instant after a denial at e into window w at
// which the same call is allowed.
func slidingRetry(prev, cur, w, e, p, limit, c int64) int64 {
	allowed := func(prev, cur, e int64) bool {
		return slidingEstimate(prev, cur, e, p)+float64(c) <= float64(limit)
	}
	// first finds, in a window with counts prev and cur, the first e' in
	// [from, p) at which the call is allowed, or -1.
	first := func(prev, cur, from int64) int64 {
		switch {
		case cur+c > limit:
			return -1 // not even once prev has decayed
		case prev == 0:
			return from
		}
		room := float64(limit - cur - c)
		x := max(int64(math.Ceil(float64(p)-room*float64(p)/float64(prev))), from)
		// Correct float rounding by the admission test itself.
		for x > from && allowed(prev, cur, x-1) {
			x--
		}
		for x < p && !allowed(prev, cur, x) {
			x++
		}
		if x >= p {
			return -1
		}
		return x
	}
	if x := first(prev, cur, e+1); x >= 0 {
		return w*p + x
	}
	if x := first(cur, 0, 0); x >= 0 {
		return (w+1)*p + x
	}
	return (w + 2) * p
}

func slidingLog(st *limitState, now int64, l store.Limit, c int64) (store.Decision, *limitState) {
	p := l.Period.Microseconds()
	var log []logEntry
	used := int64(0)
	if st != nil {
		for i, en := range st.log {
			if en.at > now-p {
				log = st.log[i:]
				break
			}
		}
		for _, en := range log {
			used += en.cost
		}
	}
	if used+c <= l.Limit {
		// In time order: after a step back of the clock, entries later than
		// now stay after the new one.
		i := len(log)
		for i > 0 && log[i-1].at > now {
			i--
		}
		next := append(log, logEntry{now, c})
		if i < len(log) {
			next = make([]logEntry, 0, len(log)+1)
			next = append(append(append(next, log[:i]...), logEntry{now, c}), log[i:]...)
		}
		last := next[len(next)-1].at
		return store.Decision{Allowed: true, Remaining: l.Limit - used - c, ResetAfter: micros(last + p - now)},
			&limitState{expire: last + p, log: next}
	}
	d := store.Decision{Remaining: l.Limit - used}
	if len(log) > 0 {
		d.ResetAfter = micros(log[len(log)-1].at + p - now)
	}
	freed := int64(0)
	for _, en := range log {
		freed += en.cost
		if used-freed+c <= l.Limit {
			d.RetryAfter = micros(en.at + p - now)
			break
		}
	}
	return d, nil
}

func gcra(st *limitState, now int64, l store.Limit, c int64) (store.Decision, *limitState) {
	p := l.Period.Microseconds()
	t := (p + l.Limit - 1) / l.Limit // ceil(P/L)
	capacity := l.Capacity()
	tat := now
	if st != nil {
		tat = max(st.tat, now)
	}
	next := tat + c*t
	allowAt := next - capacity*t
	allowed := allowAt <= now
	after := tat
	if allowed {
		after = next
	}
	d := store.Decision{
		Allowed:    allowed,
		Remaining:  min(max((capacity*t-(after-now))/t, 0), capacity),
		ResetAfter: micros(after - now),
	}
	if !allowed {
		d.RetryAfter = micros(allowAt - now)
		return d, nil
	}
	return d, &limitState{expire: next, tat: next}
}

// LimitStates returns how many rate-limit states (of keys, limits and
// counters) the store holds, expired ones not yet swept included.
func (s *Store) LimitStates() int {
	n := 0
	for i := range s.limits {
		sh := &s.limits[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// sweep deletes expired states, looking at up to sweepBatch, and reports how
// many it deleted.
func (sh *limitShard) sweep(now time.Time) int {
	n, seen := 0, 0
	t := now.UnixMicro()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for k, st := range sh.m {
		if seen++; seen > sweepBatch {
			break
		}
		if st.expire <= t {
			delete(sh.m, k)
			n++
		}
	}
	return n
}
