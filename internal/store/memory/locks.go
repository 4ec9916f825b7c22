package memory

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// Locks are the holds of kind store.HoldLock (holds.go).

// AcquireLock implements store.Locks.
func (s *Store) AcquireLock(ctx context.Context, req store.AcquireLock) (store.LockGrant, error) {
	req.Kind = store.HoldLock
	return s.AcquireHold(ctx, req)
}

// RenewLock implements store.Locks.
func (s *Store) RenewLock(ctx context.Context, name, token string, ttl time.Duration) (store.Lease, error) {
	return s.RenewHold(ctx, store.HoldLock, name, token, ttl)
}

// ReleaseLock implements store.Locks.
func (s *Store) ReleaseLock(ctx context.Context, name, token string) (bool, time.Duration, error) {
	rel, err := s.ReleaseHold(ctx, store.HoldLock, name, token, "")
	return rel.Released, rel.Held, err
}

// AbandonLock implements store.Locks.
func (s *Store) AbandonLock(ctx context.Context, name, token, ticket string) error {
	return s.AbandonHold(ctx, store.HoldLock, name, token, ticket)
}

// GetLock implements store.Locks.
func (s *Store) GetLock(ctx context.Context, name string) (store.LockInfo, error) {
	return s.GetHolds(ctx, store.HoldLock, name)
}
