package memory

import (
	"context"
	"slices"

	"github.com/coordd/coordd/internal/store"
)

// policies are the runtime rate-limit policies, under Store.pm: by
// namespace and name, each namespace's version, and the version of all.
type policies struct {
	byNS     map[string]map[string][]byte
	versions map[string]int64 // namespaces with policies
	version  int64
}

// PutPolicy implements store.Policies.
func (s *Store) PutPolicy(_ context.Context, ns string, p store.StoredPolicy, max int) (bool, error) {
	s.pm.Lock()
	defer s.pm.Unlock()
	m := s.pol.byNS[ns]
	_, replaced := m[p.Name]
	if !replaced && len(m) >= max {
		return false, store.ErrTooManyPolicies
	}
	if m == nil {
		m = make(map[string][]byte)
		s.pol.byNS[ns] = m
	}
	m[p.Name] = slices.Clone(p.Spec)
	s.pol.moved(ns)
	return !replaced, nil
}

// DeletePolicy implements store.Policies.
func (s *Store) DeletePolicy(_ context.Context, ns, name string) (bool, error) {
	s.pm.Lock()
	defer s.pm.Unlock()
	m := s.pol.byNS[ns]
	if _, ok := m[name]; !ok {
		return false, nil
	}
	delete(m, name)
	if len(m) == 0 {
		delete(s.pol.byNS, ns)
	}
	s.pol.moved(ns)
	return true, nil
}

// moved gives ns's policies, and all, a new version; a namespace left
// without policies has none.
func (p *policies) moved(ns string) {
	p.version++
	if _, ok := p.byNS[ns]; ok {
		p.versions[ns] = p.version
	} else {
		delete(p.versions, ns)
	}
}

// ListPolicies implements store.Policies.
func (s *Store) ListPolicies(_ context.Context, ns string) ([]store.StoredPolicy, error) {
	s.pm.Lock()
	defer s.pm.Unlock()
	out := make([]store.StoredPolicy, 0, len(s.pol.byNS[ns]))
	for name, spec := range s.pol.byNS[ns] {
		out = append(out, store.StoredPolicy{Name: name, Spec: slices.Clone(spec)})
	}
	return out, nil
}

// PolicyVersions implements store.Policies.
func (s *Store) PolicyVersions(_ context.Context, known int64) (int64, map[string]int64, error) {
	s.pm.Lock()
	defer s.pm.Unlock()
	if s.pol.version == known {
		return known, nil, nil
	}
	out := make(map[string]int64, len(s.pol.versions))
	for ns, v := range s.pol.versions {
		out[ns] = v
	}
	return s.pol.version, out, nil
}
