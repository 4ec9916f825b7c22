package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/coordd/coordd/internal/store"
)

func policyTests() []test {
	return []test{
		{"PutListDelete", policyPutListDelete},
		{"Bound", policyBound},
		{"ConcurrentBound", policyConcurrentBound},
		{"Versions", policyVersions},
	}
}

func (e *env) listPolicies(ns string) []store.StoredPolicy {
	e.Helper()
	l, err := e.s.ListPolicies(e.ctx, ns)
	noErr(e, "ListPolicies", err)
	slices.SortFunc(l, func(a, b store.StoredPolicy) int { return strings.Compare(a.Name, b.Name) })
	return l
}

func (e *env) putPolicy(ns, name, spec string, max int) (bool, error) {
	e.Helper()
	return e.s.PutPolicy(e.ctx, ns, store.StoredPolicy{Name: name, Spec: []byte(spec)}, max)
}

// policyPutListDelete: a policy is stored with its spec byte for byte,
// listed in its namespace only, replaced by a put of its name (created
// false), and gone after a delete, which reports whether there was one.
func policyPutListDelete(e *env) {
	ns := e.ns
	created, err := e.putPolicy(ns, "api", "{\"limit\":1}\x00\xff", 10)
	noErr(e, "PutPolicy api", err)
	eq(e, "created api", created, true)
	created, err = e.putPolicy(ns, "log-in:2", "b", 10)
	noErr(e, "PutPolicy log-in:2", err)
	eq(e, "created log-in:2", created, true)
	l := e.listPolicies(ns)
	if len(l) != 2 || l[0].Name != "api" || string(l[0].Spec) != "{\"limit\":1}\x00\xff" || l[1].Name != "log-in:2" || string(l[1].Spec) != "b" {
		e.Fatalf("ListPolicies = %q, want api and log-in:2 as put", l)
	}
	eq(e, "policies of another namespace", len(e.listPolicies(ns+"x")), 0)

	created, err = e.putPolicy(ns, "api", "c", 10)
	noErr(e, "PutPolicy api again", err)
	eq(e, "created by a replacing put", created, false)
	l = e.listPolicies(ns)
	if len(l) != 2 || string(l[0].Spec) != "c" {
		e.Fatalf("ListPolicies after the replacing put = %q, want api's spec c", l)
	}

	deleted, err := e.s.DeletePolicy(e.ctx, ns, "api")
	noErr(e, "DeletePolicy", err)
	eq(e, "deleted", deleted, true)
	deleted, err = e.s.DeletePolicy(e.ctx, ns, "api")
	noErr(e, "DeletePolicy again", err)
	eq(e, "deleted again", deleted, false)
	deleted, err = e.s.DeletePolicy(e.ctx, ns+"x", "log-in:2")
	noErr(e, "DeletePolicy in another namespace", err)
	eq(e, "deleted in another namespace", deleted, false)
	if l := e.listPolicies(ns); len(l) != 1 || l[0].Name != "log-in:2" {
		e.Fatalf("ListPolicies after the delete = %q, want log-in:2", l)
	}
}

// policyBound: a new policy past max is ErrTooManyPolicies and stores
// nothing; a replacing put at the bound, and a new one after a delete,
// are stored; the bound is per namespace.
func policyBound(e *env) {
	ns := e.ns
	for _, n := range []string{"a", "b"} {
		_, err := e.putPolicy(ns, n, n, 2)
		noErr(e, "PutPolicy "+n, err)
	}
	_, err := e.putPolicy(ns, "c", "c", 2)
	isErr(e, "PutPolicy c past the bound", err, store.ErrTooManyPolicies)
	if l := e.listPolicies(ns); len(l) != 2 {
		e.Fatalf("ListPolicies after the refusal = %q, want a and b", l)
	}
	created, err := e.putPolicy(ns, "b", "b2", 2)
	noErr(e, "PutPolicy b at the bound", err)
	eq(e, "created b at the bound", created, false)
	_, err = e.putPolicy(ns+"x", "c", "c", 2)
	noErr(e, "PutPolicy c in another namespace", err)
	_, err = e.s.DeletePolicy(e.ctx, ns, "a")
	noErr(e, "DeletePolicy a", err)
	_, err = e.putPolicy(ns, "c", "c", 2)
	noErr(e, "PutPolicy c after a delete", err)
	_, err = e.s.DeletePolicy(e.ctx, ns+"x", "c")
	noErr(e, "DeletePolicy c in another namespace", err)
}

// policyConcurrentBound: puts of new policies racing at the bound never
// leave more than it, and every put not refused is stored.
func policyConcurrentBound(e *env) {
	const max, n = 5, 24
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stored []string
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("p", i)
			_, err := e.s.PutPolicy(e.ctx, e.ns, store.StoredPolicy{Name: name, Spec: []byte(name)}, max)
			switch {
			case err == nil:
				mu.Lock()
				stored = append(stored, name)
				mu.Unlock()
			case !errors.Is(err, store.ErrTooManyPolicies):
				e.Errorf("PutPolicy %s: %v", name, err)
			}
		}()
	}
	wg.Wait()
	eq(e, "puts stored", len(stored), max)
	var names []string
	for _, p := range e.listPolicies(e.ns) {
		names = append(names, p.Name)
	}
	eqStrings(e, "policies listed", names, stored)
}

// policyVersions: every put and delete in a namespace gives it a version
// it never had; a namespace without policies has none; asked with the
// version it has, PolicyVersions answers no namespaces.
func policyVersions(e *env) {
	ns := e.ns
	seen := map[int64]bool{}
	versionOf := func(what string) (int64, bool) {
		e.Helper()
		_, nss, err := e.s.PolicyVersions(e.ctx, -1)
		noErr(e, "PolicyVersions "+what, err)
		v, ok := nss[ns]
		if ok && seen[v] {
			e.Errorf("%s: namespace version %d again", what, v)
		}
		seen[v] = true
		return v, ok
	}
	if _, ok := versionOf("before any policy"); ok {
		e.Errorf("a namespace without policies has a version")
	}
	_, err := e.putPolicy(ns, "a", "a", 10)
	noErr(e, "PutPolicy a", err)
	if _, ok := versionOf("after a put"); !ok {
		e.Fatalf("a namespace with a policy has no version")
	}
	_, err = e.putPolicy(ns, "a", "a2", 10)
	noErr(e, "PutPolicy a again", err)
	versionOf("after a replacing put")
	_, err = e.putPolicy(ns, "b", "b", 10)
	noErr(e, "PutPolicy b", err)
	versionOf("after a second put")
	_, err = e.s.DeletePolicy(e.ctx, ns, "a")
	noErr(e, "DeletePolicy a", err)
	versionOf("after a delete")
	_, err = e.s.DeletePolicy(e.ctx, ns, "b")
	noErr(e, "DeletePolicy b", err)
	if _, ok := versionOf("after the last delete"); ok {
		e.Errorf("a namespace whose policies were all deleted has a version")
	}
	// Other subtests may change their namespaces' policies meanwhile
	// (harnesses may share a database): ask again until the version holds.
	v, _, err := e.s.PolicyVersions(e.ctx, -1)
	noErr(e, "PolicyVersions", err)
	for range 100 {
		got, nss, err := e.s.PolicyVersions(e.ctx, v)
		noErr(e, "PolicyVersions with the known version", err)
		if got == v {
			if nss != nil {
				e.Errorf("PolicyVersions(%d) = %d, %v; want no namespaces when nothing changed", v, got, nss)
			}
			return
		}
		v = got
	}
	e.Errorf("the version of all moved on every one of 100 reads")
}
