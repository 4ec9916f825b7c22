package redis

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/coordd/coordd/internal/store"
)

// Runtime rate-limit policies: a hash of each namespace's (name → spec),
// a hash of the namespaces' versions and the counter that gives them, all
// under the hash tag {pol} (lua/policy_put.lua), so that each operation is
// one script on one slot. Instances poll the counter (PolicyVersions), one
// GET-sized script when nothing changed.

var policyKeyNames = []string{"kPolicies", "kVersions", "kVersion"}

// policies returns the keys of namespace ns's policies.
func (k keys) policies(ns string) []string {
	base := k.prefix + ":{pol}:"
	return []string{base + "p:" + ns, base + "v", base + "n"}
}

// policyPutArgs are lua/policy_put.lua's.
type policyPutArgs struct {
	NS   string `lua:"ns"`
	Name string `lua:"name"`
	Spec string `lua:"spec"`
	Max  int    `lua:"max,int"`
	Base int64  `lua:"base,int"`
}

// policyArgs are lua/policy_delete.lua's.
type policyArgs struct {
	NS   string `lua:"ns"`
	Name string `lua:"name"`
	Base int64  `lua:"base,int"`
}

// versionBase is where the version counter starts if it is missing: a
// random number between 2^40 and 2^52, so that a Redis that lost the
// counter does not count through versions an instance already saw.
func versionBase() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return 1<<40 + int64(binary.BigEndian.Uint64(b[:])%(1<<52-1<<40))
}

// policyReadArgs are lua/policy_read.lua's: what to read ("list" or
// "versions") and, for "versions", the version the caller knows.
type policyReadArgs struct {
	What  string `lua:"what"`
	Known int64  `lua:"known,int"`
}

// PutPolicy implements store.Policies.
func (s *Store) PutPolicy(ctx context.Context, ns string, p store.StoredPolicy, max int) (bool, error) {
	ks := s.keys.policies(ns)
	var created bool
	err := s.do(ctx, "PutPolicy", ks[0], func(ctx context.Context) error {
		c, err := codeOf(policyPut, s.eval(ctx, policyPut, ks, policyPutArgs{NS: ns, Name: p.Name, Spec: string(p.Spec), Max: max, Base: versionBase()}),
			codeOK, codeReplaced, codeNo)
		switch {
		case err != nil:
			return err
		case c == codeNo:
			return store.ErrTooManyPolicies
		}
		created = c == codeOK
		return nil
	})
	return created, err
}

// DeletePolicy implements store.Policies.
func (s *Store) DeletePolicy(ctx context.Context, ns, name string) (bool, error) {
	ks := s.keys.policies(ns)
	var deleted bool
	err := s.do(ctx, "DeletePolicy", ks[0], func(ctx context.Context) error {
		c, err := codeOf(policyDelete, s.eval(ctx, policyDelete, ks, policyArgs{NS: ns, Name: name, Base: versionBase()}), codeOK, codeNo)
		deleted = c == codeOK
		return err
	})
	return deleted, err
}

// ListPolicies implements store.Policies.
func (s *Store) ListPolicies(ctx context.Context, ns string) ([]store.StoredPolicy, error) {
	ks := s.keys.policies(ns)
	var out []store.StoredPolicy
	err := s.do(ctx, "ListPolicies", ks[0], func(ctx context.Context) error {
		r, err := replyOf(policyRead, s.eval(ctx, policyRead, ks, policyReadArgs{What: "list"}))
		if err != nil {
			return err
		}
		if r.len()%2 != 0 {
			return fmt.Errorf("%w: %s replied %d values, want pairs", errCorrupt, policyRead.name, r.len())
		}
		out = make([]store.StoredPolicy, 0, r.len()/2)
		for i := 0; i < r.len(); i += 2 {
			out = append(out, store.StoredPolicy{Name: r.str(i), Spec: []byte(r.str(i + 1))})
		}
		return r.done()
	})
	return out, err
}

// PolicyVersions implements store.Policies.
func (s *Store) PolicyVersions(ctx context.Context, known int64) (int64, map[string]int64, error) {
	ks := s.keys.policies("")
	var version int64
	var nss map[string]int64
	err := s.do(ctx, "PolicyVersions", ks[0], func(ctx context.Context) error {
		r, err := replyOf(policyRead, s.eval(ctx, policyRead, ks, policyReadArgs{What: "versions", Known: known}))
		if err != nil {
			return err
		}
		version = r.int(0)
		if version == known && r.len() == 1 {
			return r.done()
		}
		if r.len()%2 != 1 {
			return fmt.Errorf("%w: %s replied %d values, want a version and pairs", errCorrupt, policyRead.name, r.len())
		}
		nss = make(map[string]int64, r.len()/2)
		for i := 1; i < r.len(); i += 2 {
			v, err := strconv.ParseInt(r.str(i+1), 10, 64)
			if err != nil {
				return fmt.Errorf("%w: the policy version of namespace %q", errCorrupt, r.str(i))
			}
			nss[r.str(i)] = v
		}
		return r.done()
	})
	return version, nss, err
}
