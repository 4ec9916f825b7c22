package limiter

// Local quotas: a policy with LocalQuota answers a hot key from units this
// instance took from the store in chunks, a hierarchical token bucket: the
// store's limiter is the parent, each coordd instance's chunk a child that
// only ever holds units the parent admitted. So the instances together never
// admit more than the store would have; an instance that dies takes at most
// its chunk with it (admitted by the store, never used).
//
// A chunk is the policy's LocalQuota units (or the call's cost if larger),
// taken with one store call as one admission of that cost; if the store
// has fewer left, the call takes what the denial says remains (a second
// call), so that the last units of a window or a bucket are handed out
// too. A chunk is kept only as long as the store would count it: a fixed
// window's until the window ends (its reset_after, counted from before the
// store call, so early rather than late on coordd's clock), a token
// bucket's for as long as the bucket takes to refill it (chunk × period /
// limit), so that spending it cannot move admissions into a later window
// or interval than the store's own bound allows. A denial is answered
// locally until its retry_after, as the deny cache would.
//
// Concurrency: one mutex per key's quota, held across the store call that
// refills it, so that the calls of one hot key on one instance wait for the
// one refill rather than each asking the store. The quotas are sharded by
// key, bounded in number like the deny cache, and dropped when spent and
// expired.

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// quotas are the local quotas of one Service.
type quotas struct {
	perPart int
	parts   [cacheParts]quotaPart
}

type quotaPart struct {
	mu sync.Mutex
	m  map[denyKey]*quota
}

// quota is one key's local quota under one policy.
type quota struct {
	mu          sync.Mutex
	left        int64     // units taken from the store, not admitted yet
	expire      time.Time // until when left may be admitted
	deniedUntil time.Time // the store denied: answer locally until then
	denial      store.Decision
	deniedAt    time.Time
}

func newQuotas(size int) *quotas {
	q := &quotas{perPart: max(1, size/cacheParts)}
	for i := range q.parts {
		q.parts[i].m = make(map[denyKey]*quota)
	}
	return q
}

// get returns k's quota, creating it.
func (q *quotas) get(k denyKey, now time.Time) *quota {
	p := &q.parts[maphash.String(cacheSeed, k.key)%cacheParts]
	p.mu.Lock()
	defer p.mu.Unlock()
	if qu := p.m[k]; qu != nil {
		return qu
	}
	if len(p.m) >= q.perPart {
		// Full: drop quotas that hold nothing now (their next call asks the
		// store, as a first call does), or else any (it loses its units).
		n := 0
		for old, oq := range p.m {
			if oq.spent(now) || n == 0 {
				delete(p.m, old)
				n++
			}
			if n >= 8 {
				break
			}
		}
	}
	qu := &quota{}
	p.m[k] = qu
	return qu
}

// spent reports whether the quota holds nothing it may use at now.
func (qu *quota) spent(now time.Time) bool {
	qu.mu.Lock()
	defer qu.mu.Unlock()
	return (qu.left == 0 || !now.Before(qu.expire)) && !now.Before(qu.deniedUntil)
}

// allowLocal decides a call of cost under p from k's local quota, refilling
// it from the store when it runs out.
func (s *Service) allowLocal(ctx context.Context, k denyKey, p *compiled, cost int64) (Result, error) {
	l := p.limits[0]
	result := func(d store.Decision, cached bool) Result {
		return Result{Decision: d, Algorithm: l.Algorithm, Limit: l.Limit, Cached: cached}
	}
	now := s.clock.Now()
	qu := s.quotas.get(k, now)
	qu.mu.Lock()
	defer qu.mu.Unlock()
	if qu.left >= cost && now.Before(qu.expire) {
		qu.left -= cost
		return result(store.Decision{Allowed: true, Remaining: qu.left, ResetAfter: qu.expire.Sub(now)}, true), nil
	}
	if now.Before(qu.deniedUntil) {
		d := qu.denial
		d.RetryAfter = qu.deniedUntil.Sub(now)
		d.ResetAfter = max(0, d.ResetAfter-now.Sub(qu.deniedAt))
		return result(d, true), nil
	}
	chunk := max(p.LocalQuota, cost)
	for {
		start := s.clock.Now()
		d, err := s.st.Allow(ctx, k.key, l, chunk, false)
		if err != nil {
			return Result{}, err
		}
		if d.Allowed {
			// What is left of a chunk expires as the store's count of it.
			qu.left = chunk - cost
			if l.Algorithm == store.FixedWindow {
				qu.expire = start.Add(d.ResetAfter)
			} else {
				qu.expire = start.Add(time.Duration(chunk) * (l.Period / time.Duration(l.Limit)))
			}
			d.Remaining = qu.left
			return result(d, false), nil
		}
		if d.Remaining >= cost && d.Remaining < chunk {
			chunk = d.Remaining // take what is left
			continue
		}
		qu.left, qu.denial, qu.deniedAt, qu.deniedUntil = 0, d, start, start.Add(d.RetryAfter)
		return result(d, false), nil
	}
}
