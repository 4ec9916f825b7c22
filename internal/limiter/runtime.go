package limiter

// Runtime policies: each namespace's own policies, put and deleted through
// the API and kept in the store (store.Policies), beside the config's. A
// config policy wins: Allow looks a name up among the config's first, and
// a runtime policy can never take a config policy's name (ErrFromConfig),
// so that a runtime and a config policy never share a limiter's state
// (StoreKey carries the policy's name).
//
// Every instance learns of a change within a second: RunPolicies asks the
// store every PollInterval whether the version of all policies moved (one
// small read), and if it did, reloads the namespaces whose version moved
// and drops those that have no policies left. A put or a delete reloads
// its namespace on its own instance at once.
//
// Concurrency: Allow reads an atomic pointer to a map of namespaces to
// maps of names (no lock, no allocation); reloads build new maps and swap
// the pointer under mu, which also orders a put's reload with the poll's.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

// PollInterval is how often RunPolicies asks the store for changes.
const PollInterval = 250 * time.Millisecond

// ErrFromConfig: a runtime policy may not be put or deleted under the
// name of a config policy.
var ErrFromConfig = errors.New("a config policy has this name; config policies cannot be put or deleted through the API")

// runtimePolicies are the namespaces' runtime policies as Allow uses them.
type runtimePolicies struct {
	m        atomic.Pointer[map[string]map[string]*compiled] // by namespace, then name
	mu       sync.Mutex                                      // held by reloads
	version  int64                                           // the version of all that m reflects; -1: none (read all)
	versions map[string]int64                                // each namespace's in m; -1: to be read again
	// polling: RunPolicies runs, so a name not in m may be a runtime
	// policy not loaded yet until loaded (a reload read every namespace).
	polling, loaded atomic.Bool
}

func (r *runtimePolicies) init() {
	m := map[string]map[string]*compiled{}
	r.m.Store(&m)
	r.versions = map[string]int64{}
	r.version = -1 // none read yet
}

// ErrPoliciesNotLoaded: a policy name that is not a config policy, asked
// for before this instance could read the runtime policies from the store
// (it started while the store was unreachable): it may be one. Wraps
// store.ErrUnavailable: UNAVAILABLE, never a "no such policy".
var ErrPoliciesNotLoaded = fmt.Errorf("the runtime policies are not loaded yet: %w", store.ErrUnavailable)

// policy returns the policy Allow in namespace ns names: the config's of
// that name, else ns's runtime policy; nil if neither.
func (s *Service) policy(ns, name string) *compiled {
	if p, ok := (*s.policies.Load())[name]; ok {
		return p
	}
	return (*s.runtime.m.Load())[ns][name]
}

// RuntimePolicies returns how many runtime policies this instance has in
// force, over every namespace.
func (s *Service) RuntimePolicies() int {
	n := 0
	for _, m := range *s.runtime.m.Load() {
		n += len(m)
	}
	return n
}

// resyncEvery is how many polls apart RunPolicies reads every namespace
// again whatever the versions say: a store that lost its recent writes (a
// failover to a replica that lagged) may hand out a version again that an
// instance already saw, with other policies behind it.
const resyncEvery = 120 // 30 s

// RunPolicies keeps the runtime policies in force up to date with the
// store until ctx ends: at once, then every PollInterval, and all of them
// again every resyncEvery polls. A failed poll is tried again at the next
// (the policies in force stay meanwhile).
func (s *Service) RunPolicies(ctx context.Context) {
	s.runtime.polling.Store(true)
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for i := 0; ; i++ {
		_ = s.reload(ctx, i%resyncEvery == 0)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reload reloads the namespaces whose runtime policies changed since the
// last reload, or, full, every namespace. Each namespace is taken as soon
// as it is read: one that cannot be read keeps its policies in force and
// is read again at the next reload, without holding back the others.
func (s *Service) reload(ctx context.Context, full bool) error {
	r := &s.runtime
	r.mu.Lock()
	defer r.mu.Unlock()
	known := r.version
	if full {
		known = -1
	}
	v, nss, err := s.st.PolicyVersions(ctx, known)
	if err != nil || nss == nil {
		return err
	}
	old := *r.m.Load()
	m := make(map[string]map[string]*compiled, len(nss))
	versions := make(map[string]int64, len(nss))
	var failed error
	for ns, nv := range nss {
		if !full && nv == r.versions[ns] {
			m[ns], versions[ns] = old[ns], nv
			continue
		}
		ps, err := s.load(ctx, ns)
		if err != nil {
			if old[ns] != nil {
				m[ns] = old[ns]
			}
			versions[ns], failed = -1, err
			continue
		}
		m[ns], versions[ns] = ps, nv
	}
	r.m.Store(&m)
	r.versions = versions
	if failed != nil {
		r.version = -1 // read the versions again at the next poll
		return failed
	}
	r.version = v
	r.loaded.Store(true)
	return nil
}

// apply puts c as ns's runtime policy name in force on this instance (nil:
// none), after a put or a delete here; the namespace's version stays the
// one last polled, so the next poll reads it once more.
func (s *Service) apply(ns, name string, c *compiled) {
	r := &s.runtime
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.m.Load()
	m := make(map[string]map[string]*compiled, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	ps := make(map[string]*compiled, len(old[ns])+1)
	for k, v := range old[ns] {
		ps[k] = v
	}
	if c != nil {
		ps[name] = c
	} else {
		delete(ps, name)
	}
	if len(ps) > 0 {
		m[ns] = ps
	} else {
		delete(m, ns)
	}
	r.m.Store(&m)
}

// load reads and compiles ns's runtime policies. A stored policy that
// today's bounds refuse (a config reload lowered them) is not in force.
func (s *Service) load(ctx context.Context, ns string) (map[string]*compiled, error) {
	stored, err := s.st.ListPolicies(ctx, ns)
	if err != nil {
		return nil, err
	}
	m := make(map[string]*compiled, len(stored))
	for _, sp := range stored {
		p, err := decodePolicy(sp.Spec)
		if err != nil || s.cfg.CheckPolicy(sp.Name, p) != nil {
			continue
		}
		m[sp.Name] = s.runtimeCompile(p)
	}
	return m, nil
}

// PutPolicy stores p as ns's runtime policy name, after the checks of a
// config policy (field names as the API's: policy.limit.period), and
// reports whether it was new. A config policy's name is ErrFromConfig; a
// new policy past ratelimit.max_policies_per_namespace is
// store.ErrTooManyPolicies.
func (s *Service) PutPolicy(ctx context.Context, ns, name string, p Policy) (created bool, err error) {
	if err := s.cfg.CheckPolicy(name, p); err != nil {
		return false, err
	}
	if _, ok := (*s.policies.Load())[name]; ok {
		return false, fmt.Errorf("policy %q: %w", name, ErrFromConfig)
	}
	spec, err := encodePolicy(p)
	if err != nil {
		return false, err
	}
	created, err = s.st.PutPolicy(ctx, ns, store.StoredPolicy{Name: name, Spec: spec}, s.cfg.MaxPoliciesPerNamespace)
	if errors.Is(err, store.ErrTooManyPolicies) {
		return false, fmt.Errorf("%w: ratelimit.max_policies_per_namespace is %d", err, s.cfg.MaxPoliciesPerNamespace)
	}
	if err != nil {
		return false, err
	}
	s.apply(ns, name, s.runtimeCompile(p))
	return created, nil
}

// runtimeCompile compiles a runtime policy.
func (s *Service) runtimeCompile(p Policy) *compiled {
	c := compile(p, s.cfg.ExpectedInstances)
	c.runtime = true
	return c
}

// DeletePolicy deletes ns's runtime policy name and reports whether there
// was one. A config policy's name is ErrFromConfig, unless a runtime policy
// of that name is stored (put before the config took the name: not in
// force, it can still be deleted).
func (s *Service) DeletePolicy(ctx context.Context, ns, name string) (bool, error) {
	if err := validate.Name("name", name, s.cfg.MaxNameBytes); err != nil {
		return false, err
	}
	deleted, err := s.st.DeletePolicy(ctx, ns, name)
	if err != nil {
		return false, err
	}
	if _, ok := (*s.policies.Load())[name]; ok && !deleted {
		return false, fmt.Errorf("policy %q: %w", name, ErrFromConfig)
	}
	s.apply(ns, name, nil)
	return deleted, nil
}

// ListPolicies returns ns's runtime policies, as stored now, by name.
func (s *Service) ListPolicies(ctx context.Context, ns string) (map[string]Policy, error) {
	stored, err := s.st.ListPolicies(ctx, ns)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Policy, len(stored))
	for _, sp := range stored {
		p, err := decodePolicy(sp.Spec)
		if err != nil {
			return nil, fmt.Errorf("runtime policy %q: %w", sp.Name, err)
		}
		out[sp.Name] = p
	}
	return out, nil
}

// policySpec is a runtime policy as stored: algorithms by their config
// names and periods in whole microseconds, so that the record does not
// depend on Go's types.
type policySpec struct {
	Limit          *limitSpec  `json:"limit,omitempty"`
	Limits         []limitSpec `json:"limits,omitempty"`
	Shadow         bool        `json:"shadow,omitempty"`
	OnStoreFailure string      `json:"on_store_failure,omitempty"`
	LocalQuota     int64       `json:"local_quota,omitempty"`
}

type limitSpec struct {
	Name      string `json:"name,omitempty"`
	Algorithm string `json:"algorithm"`
	Limit     int64  `json:"limit"`
	PeriodUS  int64  `json:"period_us"`
	Burst     int64  `json:"burst,omitempty"`
}

func specOf(name string, l store.Limit) limitSpec {
	return limitSpec{Name: name, Algorithm: AlgorithmName(l.Algorithm), Limit: l.Limit, PeriodUS: l.Period.Microseconds(), Burst: l.Burst}
}

func (l limitSpec) limit() (store.Limit, error) {
	a, err := ParseAlgorithm(l.Algorithm)
	return store.Limit{Algorithm: a, Limit: l.Limit, Period: time.Duration(l.PeriodUS) * time.Microsecond, Burst: l.Burst}, err
}

// encodePolicy writes a checked policy's record.
func encodePolicy(p Policy) ([]byte, error) {
	sp := policySpec{Shadow: p.Shadow, OnStoreFailure: p.OnStoreFailure.String(), LocalQuota: p.LocalQuota}
	if len(p.Limits) == 0 {
		l := specOf("", p.Limit)
		sp.Limit = &l
	}
	for _, l := range p.Limits {
		sp.Limits = append(sp.Limits, specOf(l.Name, l.Limit))
	}
	// Without HTML escaping: json.Marshal writes each <, > and & of a
	// name as six bytes.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(sp); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// decodePolicy reads a policy's record.
func decodePolicy(b []byte) (Policy, error) {
	var sp policySpec
	if err := json.Unmarshal(b, &sp); err != nil {
		return Policy{}, err
	}
	p := Policy{Shadow: sp.Shadow, LocalQuota: sp.LocalQuota}
	if sp.OnStoreFailure != "" {
		f, err := ParseOnStoreFailure(sp.OnStoreFailure)
		if err != nil {
			return Policy{}, err
		}
		p.OnStoreFailure = f
	}
	var err error
	if sp.Limit != nil {
		p.Limit, err = sp.Limit.limit()
	}
	for _, l := range sp.Limits {
		var sl store.Limit
		if sl, err = l.limit(); err != nil {
			break
		}
		p.Limits = append(p.Limits, NamedLimit{Name: l.Name, Limit: sl})
	}
	return p, err
}
