package hold

import (
	"testing"

	"github.com/coordd/coordd/internal/store"
)

// TestFull: which grants leave no room for the next waiter.
func TestFull(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  store.HoldRequest
		g    store.Grant
		want bool
	}{
		{"exclusive lock", store.HoldRequest{Kind: store.HoldLock}, store.Grant{Acquired: true, Holders: 1}, true},
		{"shared lock", store.HoldRequest{Kind: store.HoldLock, Shared: true, MaxHolders: 3}, store.Grant{Acquired: true, Holders: 2}, false},
		{"shared lock, uncapped", store.HoldRequest{Kind: store.HoldLock, Shared: true}, store.Grant{Acquired: true, Holders: 5}, false},
		{"shared lock at its cap", store.HoldRequest{Kind: store.HoldLock, Shared: true, MaxHolders: 3}, store.Grant{Acquired: true, Holders: 3}, true},
		{"semaphore with permits left", store.HoldRequest{Kind: store.HoldSemaphore, Limit: 4}, store.Grant{Acquired: true, Holders: 3, Limit: 4}, false},
		{"semaphore's last permit", store.HoldRequest{Kind: store.HoldSemaphore, Limit: 4}, store.Grant{Acquired: true, Holders: 4, Limit: 4}, true},
		{"not acquired", store.HoldRequest{Kind: store.HoldLock}, store.Grant{Queued: true, Holders: 1}, false},
		{"already held", store.HoldRequest{Kind: store.HoldLock}, store.Grant{Acquired: true, AlreadyHeld: true, Holders: 1}, false},
	} {
		if got := full(tc.req, tc.g); got != tc.want {
			t.Errorf("%s: full = %v, want %v", tc.name, got, tc.want)
		}
	}
}
