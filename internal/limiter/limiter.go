// Package limiter implements RateLimitService's rules on top of store.Limits:
// named policies (the config's, reloadable, and each namespace's runtime
// policies, kept in store.Policies: runtime.go), inline limits and their
// bounds, cost, shadow mode, and failing open, closed or to a local limit
// when the store is unreachable (local.go). The algorithms themselves are
// specified in store/ratelimit.go and made atomic by each store.
package limiter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

// Config holds the bounds on limits.
type Config struct {
	MaxLimit     int64         `mapstructure:"max_limit"`     // the largest limit
	MaxLogLimit  int64         `mapstructure:"max_log_limit"` // the largest limit of a sliding log
	MaxPeriod    time.Duration `mapstructure:"max_period"`    // the longest period
	MaxNameBytes int           `mapstructure:"-"`             // the longest key
	// DenyCacheSize is how many keys over their limit are remembered, to be
	// denied without a round trip to the store (see denyCache); 0: none.
	DenyCacheSize int `mapstructure:"deny_cache_size"`
	// DenyCacheMaxAge is the longest such a denial is answered from the
	// cache before the store is asked again.
	DenyCacheMaxAge time.Duration `mapstructure:"deny_cache_max_age"`
	// MaxWait is the longest wait of an Allow (limits.max_wait).
	MaxWait time.Duration `mapstructure:"-"`
	// MaxPoliciesPerNamespace bounds each namespace's runtime policies
	// (PutPolicy).
	MaxPoliciesPerNamespace int `mapstructure:"max_policies_per_namespace"`
	// ExpectedInstances is how many coordd instances share the store: a
	// policy that fails local (FailLocal) admits limit ÷ this on each
	// while the store is unreachable.
	ExpectedInstances int `mapstructure:"expected_instances"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		MaxLimit: 1_000_000_000, MaxLogLimit: 1000, MaxPeriod: 168 * time.Hour, MaxNameBytes: 256,
		DenyCacheSize: 100_000, DenyCacheMaxAge: time.Second, MaxWait: time.Minute,
		MaxPoliciesPerNamespace: 100, ExpectedInstances: 1,
	}
}

// Policy is a named limit: from config, or a namespace's runtime policy.
type Policy struct {
	Limit store.Limit
	// Limits, set instead of Limit, are the policy's several limits (at
	// most store.MaxLimits, e.g. 10 a second and 1,000 a day): a call is
	// allowed only if every one allows it, in one atomic step, and a denial
	// takes from none; the denying limit's name is the answer's DeniedBy.
	Limits []NamedLimit
	// Shadow computes and counts decisions but allows every call.
	Shadow bool
	// OnStoreFailure says what Allow answers while the store is
	// unreachable.
	OnStoreFailure OnStoreFailure
	// LocalQuota, if > 0, lets each coordd instance take this many units of
	// a key at a time from the store and admit them locally (quota.go): a
	// hot key costs the store a call per chunk, not per call, and the
	// instances together never admit more than the limit. For a policy of
	// one fixed window or token bucket limit; at most its capacity.
	LocalQuota int64
}

// NamedLimit is one of a policy's several limits.
type NamedLimit struct {
	Name string
	store.Limit
}

// compiled is a policy (or an inline limit) as Allow uses it.
type compiled struct {
	Policy
	limits   []store.Limit // Limit, or Limits' limits
	names    []string      // Limits' names; nil with one limit
	more     string        // the limits after the first, as text: part of the deny cache's key
	capacity int64         // the least capacity: the largest cost
	runtime  bool          // a namespace's runtime policy
	local    localLimits   // with FailLocal: this instance's share of the limits
}

// compile prepares p for Allow; instances is ratelimit.expected_instances,
// for a policy that fails local.
func compile(p Policy, instances int) *compiled {
	c := &compiled{Policy: p, limits: []store.Limit{p.Limit}}
	if len(p.Limits) > 0 {
		c.limits, c.names = make([]store.Limit, len(p.Limits)), make([]string, len(p.Limits))
		for i, l := range p.Limits {
			c.limits[i], c.names[i] = l.Limit, l.Name
		}
		c.more = fmt.Sprint(c.limits[1:])
	}
	c.capacity = c.limits[0].Capacity()
	for _, l := range c.limits[1:] {
		c.capacity = min(c.capacity, l.Capacity())
	}
	if p.OnStoreFailure == FailLocal {
		c.local = shares(c.limits, instances)
	}
	return c
}

// Algorithms by their config names.
var algorithmNames = map[string]store.Algorithm{
	"fixed_window":   store.FixedWindow,
	"sliding_window": store.SlidingWindow,
	"sliding_log":    store.SlidingLog,
	"token_bucket":   store.TokenBucket,
	"leaky_bucket":   store.LeakyBucket,
}

// ParseAlgorithm returns the algorithm of a config name such as
// "token_bucket".
func ParseAlgorithm(name string) (store.Algorithm, error) {
	a, ok := algorithmNames[strings.ToLower(name)]
	if !ok {
		return 0, fmt.Errorf("unknown algorithm %q (want fixed_window, sliding_window, sliding_log, token_bucket or leaky_bucket)", name)
	}
	return a, nil
}

// namesOfAlgorithms is algorithmNames the other way round.
var namesOfAlgorithms = func() map[store.Algorithm]string {
	m := make(map[store.Algorithm]string, len(algorithmNames))
	for name, a := range algorithmNames {
		m[a] = name
	}
	return m
}()

// AlgorithmName is the configuration name of a (such as "token_bucket"), the
// inverse of ParseAlgorithm; "" if a is none of them.
func AlgorithmName(a store.Algorithm) string { return namesOfAlgorithms[a] }

// Store is what a Service keeps its state in: the limiters' state, and
// the runtime policies.
type Store interface {
	store.Limits
	store.Policies
}

// OnStoreFailure is what a policy answers while the store is unreachable
// (store.ErrUnavailable, the circuit breaker's fast failure included).
type OnStoreFailure int

// The answers; the values match the API's enum (0, unset, fails closed).
const (
	// FailClosed answers the store's error (UNAVAILABLE).
	FailClosed OnStoreFailure = iota + 1
	// FailOpen allows every call, marked degraded.
	FailOpen
	// FailLocal decides in this instance's memory, under its share of
	// each limit (local.go), marked degraded.
	FailLocal
)

// onStoreFailureNames are the OnStoreFailure values by their config names.
var onStoreFailureNames = map[string]OnStoreFailure{"fail_closed": FailClosed, "fail_open": FailOpen, "local": FailLocal}

// ParseOnStoreFailure returns the OnStoreFailure of a config name:
// fail_closed, fail_open or local, in lower case as the algorithms' names.
func ParseOnStoreFailure(name string) (OnStoreFailure, error) {
	f, ok := onStoreFailureNames[name]
	if !ok {
		return 0, fmt.Errorf("unknown value %q (want fail_closed, fail_open or local)", name)
	}
	return f, nil
}

// String is f's config name; "" for the zero value, which fails closed.
func (f OnStoreFailure) String() string {
	for name, v := range onStoreFailureNames {
		if v == f {
			return name
		}
	}
	return ""
}

// Service decides.
type Service struct {
	st       Store
	cfg      Config
	clock    clock.Clock
	drain    <-chan struct{} // closed: waits end
	denied   *denyCache      // nil: no cache
	quotas   *quotas         // the local quotas (Policy.LocalQuota)
	policies atomic.Pointer[map[string]*compiled]
	runtime  runtimePolicies // the namespaces' runtime policies (runtime.go)
	local    localStore      // the limiters of FailLocal while the store is unreachable (local.go)
}

// Option configures a Service.
type Option func(*Service)

// WithClock sets the clock of the deny cache: the store's, in tests that
// simulate time; the system clock by default.
func WithClock(c clock.Clock) Option { return func(s *Service) { s.clock = c } }

// WithDrain ends every wait (Request.Wait) when drain is closed: each
// answers its last decision.
func WithDrain(drain <-chan struct{}) Option { return func(s *Service) { s.drain = drain } }

// New returns a Service with policies, which must be valid (see
// SetPolicies).
func New(st Store, cfg Config, policies map[string]Policy, opts ...Option) (*Service, error) {
	s := &Service{st: st, cfg: cfg, clock: clock.Real{}, denied: newDenyCache(cfg.DenyCacheSize, cfg.DenyCacheMaxAge),
		quotas: newQuotas(max(cfg.DenyCacheSize, localQuotas))}
	s.runtime.init()
	for _, o := range opts {
		o(s)
	}
	if err := s.SetPolicies(policies); err != nil {
		return nil, err
	}
	return s, nil
}

// SetPolicies replaces the named policies at once, after checking every one;
// on error nothing changes. Calls in progress finish with the old ones.
func (s *Service) SetPolicies(policies map[string]Policy) error {
	if err := s.cfg.CheckPolicies(policies); err != nil {
		return err
	}
	m := make(map[string]*compiled, len(policies))
	for name, p := range policies {
		m[name] = compile(p, s.cfg.ExpectedInstances)
	}
	s.policies.Store(&m)
	return nil
}

// CheckLimit validates a limit; field prefixes the field names in the error.
func (s *Service) CheckLimit(field string, l store.Limit) error { return s.cfg.CheckLimit(field, l) }

// CheckLimit validates a limit against c's bounds; field prefixes the field
// names in the error.
func (c Config) CheckLimit(field string, l store.Limit) error {
	switch l.Algorithm {
	case store.FixedWindow, store.SlidingWindow, store.SlidingLog, store.TokenBucket, store.LeakyBucket:
	default:
		return validate.Errorf(field+".algorithm", "is required: one of the Algorithm values")
	}
	maxLimit := c.MaxLimit
	if l.Algorithm == store.SlidingLog {
		maxLimit = c.MaxLogLimit
	}
	if l.Limit < 1 || l.Limit > maxLimit {
		return validate.Errorf(field+".limit", "is %d; it must be between 1 and %d", l.Limit, maxLimit)
	}
	if err := validate.Duration(field+".period", l.Period, c.MaxPeriod); err != nil {
		return err
	}
	// The rate must be one the store represents exactly, never rounded:
	// the store counts time in whole microseconds, and the buckets admit
	// one unit every P/L of them (store/ratelimit.go).
	if l.Period%time.Microsecond != 0 {
		return validate.Errorf(field+".period", "is %v; it must be a whole number of microseconds, the store's resolution", l.Period)
	}
	bucket := l.Algorithm == store.TokenBucket || l.Algorithm == store.LeakyBucket
	if p := l.Period.Microseconds(); bucket && p%l.Limit != 0 {
		if p < l.Limit {
			return validate.Errorf(field+".limit", "is %d in %v, more than one unit per microsecond: a bucket admits one unit every period/limit microseconds, "+
				"a whole number at least 1, so at most %d in %v", l.Limit, l.Period, p, l.Period)
		}
		near := fmt.Sprint(time.Duration(p/l.Limit*l.Limit) * time.Microsecond)
		if hi := time.Duration(p/l.Limit+1) * time.Duration(l.Limit) * time.Microsecond; hi <= c.MaxPeriod {
			near += " or " + hi.String()
		}
		return validate.Errorf(field+".limit", "is %d, which does not divide the period %v into whole microseconds: a bucket admits one unit every "+
			"period/limit microseconds, never rounded; periods near it that this limit divides: %s", l.Limit, l.Period, near)
	}
	switch {
	case l.Burst < 0:
		return validate.Errorf(field+".burst", "is %d; it must not be negative", l.Burst)
	case l.Burst > 0 && !bucket:
		return validate.Errorf(field+".burst", "applies to the token and leaky buckets only; leave it 0")
	case l.Burst > c.MaxLimit:
		return validate.Errorf(field+".burst", "is %d; it must be at most %d", l.Burst, c.MaxLimit)
	}
	if bucket && l.Burst > l.Limit {
		// A burst above the limit must refill from empty within
		// max_period: this keeps every time the buckets compute within
		// microsecond precision (and int64) on every backend. (Without one,
		// the bucket refills within the period: always bounded.)
		interval := l.Period.Microseconds() / l.Limit
		if most := max(l.Limit, c.MaxPeriod.Microseconds()/interval); l.Burst > most {
			return validate.Errorf(field+".burst", "is %d: the bucket would take longer than ratelimit.max_period (%v) to refill; at most %d at this rate",
				l.Burst, c.MaxPeriod, most)
		}
	}
	return nil
}

// StoreKey is the store's key of key in namespace ns under policy, or under
// an inline limit if policy is "". A policy's state is its own: the key
// carries the policy's name after a NUL, which neither a key nor a policy
// name contains (they have no control characters), so two policies never
// share a counter, even with equal parameters, nor a policy and an inline
// limit. Inline limits keep one state per key and parameters (the store
// keeps a key's state apart for every distinct Limit).
func StoreKey(ns, key, policy string) string {
	k := store.Scope(ns, key)
	if policy != "" {
		k += "\x00" + policy
	}
	return k
}

// Request asks for a decision. Exactly one of Policy and Limit is set.
type Request struct {
	NS, Key string
	Policy  string
	Limit   *store.Limit
	Cost    int64 // 0 means 1
	Peek    bool
	// Wait, if denied, waits up to this long until allowed: the store is
	// asked again at each denial's RetryAfter, if that is within the wait,
	// and not in between. 0: no wait; not with Peek.
	Wait time.Duration
}

// Result is a decision with what the API reports beside it.
type Result struct {
	store.Decision
	Algorithm    store.Algorithm // the deciding limit's
	Limit        int64           // the deciding limit's
	DeniedBy     string          // denied under several limits: the deciding one's name
	Degraded     bool            // the store was unreachable: the policy fails open, or Local
	Local        bool            // decided by this instance alone (FailLocal), the store unreachable
	ShadowDenied bool            // shadow mode turned a denial into an allow
	Cached       bool            // a denial answered from the deny cache
	Runtime      bool            // under a namespace's runtime policy
}

// Allow decides r, waiting up to r.Wait for an allowance.
func (s *Service) Allow(ctx context.Context, r Request) (Result, error) {
	if err := validate.Name("key", r.Key, s.cfg.MaxNameBytes); err != nil {
		return Result{}, err
	}
	var p *compiled
	switch {
	case r.Policy != "" && r.Limit != nil:
		return Result{}, validate.Errorf("policy", "and limit are both set; set one")
	case r.Policy != "":
		if p = s.policy(r.NS, r.Policy); p == nil {
			if s.runtime.polling.Load() && !s.runtime.loaded.Load() {
				return Result{}, ErrPoliciesNotLoaded
			}
			return Result{}, validate.Errorf("policy", "%q is neither a configured policy nor a runtime policy of the namespace", r.Policy)
		}
	case r.Limit != nil:
		if err := s.CheckLimit("limit", *r.Limit); err != nil {
			return Result{}, err
		}
		p = compile(Policy{Limit: *r.Limit}, 1)
	default:
		return Result{}, validate.Errorf("policy", "is required, or an inline limit")
	}
	cost := r.Cost
	if cost == 0 {
		cost = 1
	}
	if cost < 0 || cost > p.capacity {
		what := "the limit's capacity"
		if len(p.limits) > 1 {
			what = "the least capacity of the policy's limits"
		}
		return Result{}, validate.Errorf("cost", "is %d; it must be between 1 and %d (%s)", cost, p.capacity, what)
	}
	if err := validate.Wait("wait", r.Wait, s.cfg.MaxWait); err != nil {
		return Result{}, err
	}
	if r.Wait > 0 && r.Peek {
		return Result{}, validate.Errorf("wait", "must be unset with peek: a peek consumes nothing, so there is nothing to wait for")
	}
	k := denyKey{StoreKey(r.NS, r.Key, r.Policy), p.limits[0], p.more}
	if r.Wait <= 0 {
		return s.decide(ctx, k, p, cost, r.Peek)
	}
	end := time.Now().Add(r.Wait)
	for {
		res, err := s.decide(ctx, k, p, cost, false)
		if err != nil || res.Allowed || res.RetryAfter > time.Until(end) {
			return res, err // a retry beyond the wait would be denied again: answer now
		}
		t := time.NewTimer(res.RetryAfter)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Result{}, ctx.Err()
		case <-s.drain:
			t.Stop()
			return res, nil
		}
	}
}

// localQuotas is the least number of local quotas kept (more with a
// larger deny cache).
const localQuotas = 10_000

// decide makes one decision of cost on k under p: from the local quota
// (a policy with LocalQuota, unless a peek), the deny cache, or the store.
func (s *Service) decide(ctx context.Context, k denyKey, p *compiled, cost int64, peek bool) (Result, error) {
	var res Result
	var err error
	if p.LocalQuota > 0 && !peek {
		res, err = s.allowLocal(ctx, k, p, cost)
	} else {
		res, err = s.fromStore(ctx, k, p, cost, peek)
	}
	if err != nil {
		if !errors.Is(err, store.ErrUnavailable) {
			return Result{}, err
		}
		switch p.OnStoreFailure {
		case FailOpen:
			l := p.limits[0]
			return Result{Decision: store.Decision{Allowed: true}, Algorithm: l.Algorithm, Limit: l.Limit, Degraded: true, Runtime: p.runtime}, nil
		case FailLocal:
			if cost > p.local.capacity {
				// Never admitted here, whatever the wait: no decision.
				return Result{}, err
			}
			res = s.allowHere(k, p, cost, peek)
		default:
			return Result{}, err
		}
	}
	res.Runtime = p.runtime
	if p.Shadow && !res.Allowed {
		res.Allowed, res.ShadowDenied, res.RetryAfter = true, true, 0
	}
	return res, nil
}

// fromStore decides from the deny cache, or the store.
func (s *Service) fromStore(ctx context.Context, k denyKey, p *compiled, cost int64, peek bool) (Result, error) {
	now := s.clock.Now()
	d, cached := s.denied.get(k, cost, now)
	var err error
	if !cached {
		if len(p.limits) == 1 {
			d, err = s.st.Allow(ctx, k.key, p.limits[0], cost, peek)
		} else {
			d, err = s.st.AllowAll(ctx, k.key, p.limits, cost, peek)
		}
		if err != nil {
			return Result{}, err
		}
		s.denied.put(k, cost, d, now)
	}
	l := p.limits[d.Limit]
	res := Result{Decision: d, Algorithm: l.Algorithm, Limit: l.Limit, Cached: cached}
	if !d.Allowed && p.names != nil {
		res.DeniedBy = p.names[d.Limit]
	}
	return res, nil
}

// Policies returns the named policies in force now (a reload replaces
// them), for display; changing the map changes nothing.
func (s *Service) Policies() map[string]Policy {
	m := *s.policies.Load()
	out := make(map[string]Policy, len(m))
	for name, c := range m {
		out[name] = c.Policy
	}
	return out
}
