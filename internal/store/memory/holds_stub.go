package memory

import (
	"context"
	"errors"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// SCAFFOLDING for issue 11: replaced by the real implementation before merge.
var errTODO = errors.New("not implemented yet")

func (s *Store) AcquireHold(ctx context.Context, req store.AcquireLock) (store.LockGrant, error) {
	return store.LockGrant{}, errTODO
}
func (s *Store) RenewHold(ctx context.Context, kind store.HoldKind, name, token string, ttl time.Duration) (store.Lease, error) {
	return store.Lease{}, errTODO
}
func (s *Store) ReleaseHold(ctx context.Context, kind store.HoldKind, name, token string) (bool, time.Duration, error) {
	return false, 0, errTODO
}
func (s *Store) AbandonHold(ctx context.Context, kind store.HoldKind, name, token string) error {
	return errTODO
}
func (s *Store) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.LockInfo, error) {
	return store.LockInfo{}, errTODO
}
func (s *Store) LeaveQueue(ctx context.Context, kind store.HoldKind, name, ticket string) error {
	return errTODO
}
func (s *Store) RefreshTickets(ctx context.Context, kind store.HoldKind, name string, tickets []string, lease time.Duration) ([]string, error) {
	return nil, errTODO
}
func (s *Store) CheckFence(ctx context.Context, kind store.HoldKind, name string, fence uint64) (bool, error) {
	return false, errTODO
}
func (s *Store) Campaign(ctx context.Context, req store.Campaign) (store.Campaigned, error) {
	return store.Campaigned{}, errTODO
}
func (s *Store) Proclaim(ctx context.Context, name, token string, value []byte) error { return errTODO }
func (s *Store) Resign(ctx context.Context, name, token string) (bool, error)         { return false, errTODO }
func (s *Store) Leader(ctx context.Context, name string) (store.LeaderInfo, error) {
	return store.LeaderInfo{}, errTODO
}
func (s *Store) ElectionChanges(ctx context.Context, name string, after uint64) (store.ElectionLog, error) {
	return store.ElectionLog{}, errTODO
}
