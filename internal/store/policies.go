package store

import (
	"context"
	"errors"
)

// ErrTooManyPolicies: the namespace has as many runtime rate-limit
// policies as it may; nothing was stored.
var ErrTooManyPolicies = errors.New("too many rate-limit policies in the namespace")

// Policies is storage of runtime rate-limit policies
// (RateLimitService.PutPolicy): each namespace's, by name, with no expiry.
// The store keeps a policy's spec as the limiter encoded it, without
// reading it. Every change moves a version, so that every coordd instance
// sharing the store can learn of it cheaply (PolicyVersions) and reload
// only the namespaces that changed.
type Policies interface {
	// PutPolicy stores p in namespace ns, replacing the policy of the same
	// name, and reports whether it was new. A new policy in a namespace that
	// has max of them is ErrTooManyPolicies, and nothing changes: the count
	// is checked in the same atomic step as the write, so concurrent puts
	// never leave more than max.
	PutPolicy(ctx context.Context, ns string, p StoredPolicy, max int) (created bool, err error)
	// DeletePolicy deletes ns's policy name and reports whether there was
	// one.
	DeletePolicy(ctx context.Context, ns, name string) (bool, error)
	// ListPolicies returns ns's policies, in no particular order.
	ListPolicies(ctx context.Context, ns string) ([]StoredPolicy, error)
	// PolicyVersions returns the version of every namespace's policies
	// together, and, unless it is known (the caller's last one), the
	// version of each namespace that has policies. A namespace's version
	// changes with every put or delete of one of its policies and never
	// comes back to an earlier value, so that a caller that saw a version
	// has seen every change before it. With version == known, namespaces
	// is nil: one cheap read when nothing changed.
	PolicyVersions(ctx context.Context, known int64) (version int64, namespaces map[string]int64, err error)
}

// StoredPolicy is a runtime policy as stored: its name and its spec, which
// only the limiter reads.
type StoredPolicy struct {
	Name string
	Spec []byte
}
