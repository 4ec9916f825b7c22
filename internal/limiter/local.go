package limiter

// Failing local (FailLocal): while the store is unreachable, each coordd
// instance decides a policy's calls in its own memory, with the policy's
// own algorithms and periods and each limit (and burst) divided by
// ratelimit.expected_instances, rounded down but at least 1, so that an
// outage neither opens the gates nor closes them. The limiters are an
// embedded memory store (the product's own, store/memory), made on the
// first such call and closed by Close; a key's local state starts full at
// its first local call and lasts as the store's would (a period or two),
// so a second outage soon after the first finds what the first took: that
// is only stricter. Calls whose store call fails — the circuit breaker's
// fast failure included, and a policy's local quota refill (quota.go) —
// are decided here; every call asks the store first, so when it answers
// again, decisions come from its state again.
//
// Across N instances the local limits admit at most N × max(1, limit ÷ N) per
// period, on top of what the store had admitted before it became
// unreachable (GUARANTEES.md).

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
)

// localLimits are a policy's limits as each instance enforces them alone.
type localLimits struct {
	limits   []store.Limit // distinct: two limits whose shares are equal are one
	of       []int         // the index in the policy's limits of each
	capacity int64         // the least capacity of limits: the largest cost admitted here
}

// shares divides each limit's limit and burst by instances (at least 1).
func shares(limits []store.Limit, instances int) localLimits {
	n := int64(max(1, instances))
	var out localLimits
	for i, l := range limits {
		l.Limit = max(1, l.Limit/n)
		if l.Burst > 0 {
			l.Burst = max(1, l.Burst/n)
		}
		if !slices.Contains(out.limits, l) {
			out.limits, out.of = append(out.limits, l), append(out.of, i)
		}
		if out.capacity == 0 || l.Capacity() < out.capacity {
			out.capacity = l.Capacity()
		}
	}
	return out
}

// localStore is a Service's local limiters, made on first use, and made
// afresh when they hold more than max states (checked every checkEvery
// calls): a key space of many values (an address each) during a long
// outage must not grow every instance's memory without bound. Starting
// afresh gives each key a full share again: looser, by at most a share
// per key each time.
type localStore struct {
	st     atomic.Pointer[memory.Store]
	mu     sync.Mutex // makes and replaces st
	calls  atomic.Int64
	closed bool
}

// localCheckEvery is how many local calls apart the states are counted.
const localCheckEvery = 1024

func (l *localStore) get(s *Service) *memory.Store {
	st := l.st.Load()
	if st != nil && l.calls.Add(1)%localCheckEvery != 0 {
		return st
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st = l.st.Load()
	if st != nil && st.LimitStates() <= max(s.cfg.DenyCacheSize, localQuotas) {
		return st
	}
	if st != nil {
		_ = st.Close()
	}
	st = memory.New(memory.Options{Clock: s.clock})
	if l.closed {
		_ = st.Close() // used after Close: a store that keeps no sweeper
	} else {
		l.st.Store(st)
	}
	return st
}

func (l *localStore) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if st := l.st.Swap(nil); st != nil {
		_ = st.Close()
	}
}

// allowHere decides a call of cost on k under p (FailLocal) in this
// instance's memory; cost is at most the share's capacity (a call costing
// more gets the store's error: it could never be admitted here, and a
// denial's retry_after would never come true).
func (s *Service) allowHere(k denyKey, p *compiled, cost int64, peek bool) Result {
	d, err := s.local.get(s).AllowAll(context.Background(), k.key, p.local.limits, cost, peek)
	if err != nil {
		// Not reached: the shares are distinct, and the memory store
		// answers every call. Deny rather than guess.
		d = store.Decision{}
	}
	i := p.local.of[d.Limit]
	res := Result{Decision: d, Algorithm: p.limits[i].Algorithm, Limit: p.local.limits[d.Limit].Limit, Degraded: true, Local: true}
	if !d.Allowed && p.names != nil {
		res.DeniedBy = p.names[i]
	}
	return res
}

// Close releases the local limiters, if any were made. Call it when the
// Service is no longer used.
func (s *Service) Close() { s.local.close() }
