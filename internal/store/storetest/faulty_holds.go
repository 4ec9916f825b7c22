package storetest

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// AcquireHold implements store.Holds.
func (f *Faulty) AcquireHold(ctx context.Context, req store.HoldRequest) (store.Grant, error) {
	return do(ctx, f, "AcquireHold", func() (store.Grant, error) { return f.inner.AcquireHold(ctx, req) }, nil)
}

// RenewHold implements store.Holds.
func (f *Faulty) RenewHold(ctx context.Context, kind store.HoldKind, name, token string, ttl time.Duration) (store.Lease, error) {
	return do(ctx, f, "RenewHold", func() (store.Lease, error) { return f.inner.RenewHold(ctx, kind, name, token, ttl) }, nil)
}

// ReleaseHold implements store.Holds.
func (f *Faulty) ReleaseHold(ctx context.Context, kind store.HoldKind, name, token, instance string) (store.Released, error) {
	return do(ctx, f, "ReleaseHold", func() (store.Released, error) { return f.inner.ReleaseHold(ctx, kind, name, token, instance) }, nil)
}

// AbandonHold implements store.Holds.
func (f *Faulty) AbandonHold(ctx context.Context, kind store.HoldKind, name, token, ticket string) error {
	return do0(ctx, f, "AbandonHold", func() error { return f.inner.AbandonHold(ctx, kind, name, token, ticket) })
}

// GetHolds implements store.Holds.
func (f *Faulty) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.HoldInfo, error) {
	return do(ctx, f, "GetHolds", func() (store.HoldInfo, error) { return f.inner.GetHolds(ctx, kind, name) }, nil)
}

// LeaveQueue implements store.Holds.
func (f *Faulty) LeaveQueue(ctx context.Context, kind store.HoldKind, name, ticket, token, instance string) ([]store.Handoff, error) {
	return do(ctx, f, "LeaveQueue", func() ([]store.Handoff, error) {
		return f.inner.LeaveQueue(ctx, kind, name, ticket, token, instance)
	}, nil)
}

// RefreshTickets implements store.Holds.
func (f *Faulty) RefreshTickets(ctx context.Context, kind store.HoldKind, name string, tickets []string, lease time.Duration) ([]string, error) {
	return do(ctx, f, "RefreshTickets", func() ([]string, error) { return f.inner.RefreshTickets(ctx, kind, name, tickets, lease) }, nil)
}

// CheckFence implements store.Holds.
func (f *Faulty) CheckFence(ctx context.Context, kind store.HoldKind, name string, fence uint64) (bool, error) {
	return do(ctx, f, "CheckFence", func() (bool, error) { return f.inner.CheckFence(ctx, kind, name, fence) }, nil)
}

// Campaign implements store.Elections.
func (f *Faulty) Campaign(ctx context.Context, req store.Campaign) (store.Campaigned, error) {
	return do(ctx, f, "Campaign", func() (store.Campaigned, error) { return f.inner.Campaign(ctx, req) }, nil)
}

// Proclaim implements store.Elections.
func (f *Faulty) Proclaim(ctx context.Context, name, token string, value []byte) error {
	return do0(ctx, f, "Proclaim", func() error { return f.inner.Proclaim(ctx, name, token, value) })
}

// Leader implements store.Elections.
func (f *Faulty) Leader(ctx context.Context, name string) (store.LeaderInfo, error) {
	return do(ctx, f, "Leader", func() (store.LeaderInfo, error) { return f.inner.Leader(ctx, name) }, nil)
}

// ElectionChanges implements store.Elections.
func (f *Faulty) ElectionChanges(ctx context.Context, name string, after uint64) (store.ElectionLog, error) {
	return do(ctx, f, "ElectionChanges", func() (store.ElectionLog, error) { return f.inner.ElectionChanges(ctx, name, after) }, nil)
}
