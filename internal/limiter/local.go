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
// Across N instances the local limits admit at most N × (limit ÷ N) per
// period, on top of what the store had admitted before it became
// unreachable (GUARANTEES.md).

import (
	"context"
	"slices"
	"sync"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
)

// localLimits are a policy's limits as each instance enforces them alone.
type localLimits struct {
	limits []store.Limit // distinct: two limits whose shares are equal are one
	of     []int         // the index in the policy's limits of each
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
	}
	return out
}

// localStore is a Service's local limiters, made on first use.
type localStore struct {
	mu sync.Mutex
	st *memory.Store
}

func (l *localStore) get(s *Service) *memory.Store {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st == nil {
		l.st = memory.New(memory.Options{Clock: s.clock})
	}
	return l.st
}

func (l *localStore) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st != nil {
		_ = l.st.Close()
		l.st = nil
	}
}

// allowHere decides a call of cost on k under p (FailLocal) in this
// instance's memory. A call costing more than this instance's share is
// denied.
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
