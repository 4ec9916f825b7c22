package tracing

// This file: a store.Store that gives each call of an inner store a span,
// for the memory store, which has no round trips to observe (the Redis
// store starts its spans itself, one per round trip: redis.Options.Trace).
// Each method is one call of the inner store under one span named by the
// method; methods without a context (Close, PartitionName) pass through.

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// WrapStore returns inner with a span per call from spans, or inner itself
// if spans is nil (tracing off).
func WrapStore(inner store.Store, spans *Store) store.Store {
	if spans == nil {
		return inner
	}
	return traced{Store: inner, spans: spans}
}

type traced struct {
	store.Store
	spans *Store
}

var _ store.Store = traced{}

func (t traced) AbandonHold(ctx context.Context, a1 store.HoldKind, a2 string, a3 string, a4 string) (err error) {
	ctx, span := t.spans.Start(ctx, "AbandonHold")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.AbandonHold(ctx, a1, a2, a3, a4)
}

func (t traced) AbandonLock(ctx context.Context, a1 string, a2 string, a3 string) (err error) {
	ctx, span := t.spans.Start(ctx, "AbandonLock")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.AbandonLock(ctx, a1, a2, a3)
}

func (t traced) Ack(ctx context.Context, a1 string, a2 []string) (r0 []bool, err error) {
	ctx, span := t.spans.Start(ctx, "Ack")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Ack(ctx, a1, a2)
}

func (t traced) AcquireHold(ctx context.Context, a1 store.AcquireLock) (r0 store.LockGrant, err error) {
	ctx, span := t.spans.Start(ctx, "AcquireHold")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.AcquireHold(ctx, a1)
}

func (t traced) AcquireLock(ctx context.Context, a1 store.AcquireLock) (r0 store.LockGrant, err error) {
	ctx, span := t.spans.Start(ctx, "AcquireLock")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.AcquireLock(ctx, a1)
}

func (t traced) Allow(ctx context.Context, a1 string, a2 store.Limit, a3 int64, a4 bool) (r0 store.Decision, err error) {
	ctx, span := t.spans.Start(ctx, "Allow")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Allow(ctx, a1, a2, a3, a4)
}

func (t traced) AllowAll(ctx context.Context, a1 string, a2 []store.Limit, a3 int64, a4 bool) (r0 store.Decision, err error) {
	ctx, span := t.spans.Start(ctx, "AllowAll")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.AllowAll(ctx, a1, a2, a3, a4)
}

func (t traced) BeginIdempotent(ctx context.Context, a1 store.BeginIdempotent) (r0 store.IdemState, err error) {
	ctx, span := t.spans.Start(ctx, "BeginIdempotent")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.BeginIdempotent(ctx, a1)
}

func (t traced) Campaign(ctx context.Context, a1 store.Campaign) (r0 store.Campaigned, err error) {
	ctx, span := t.spans.Start(ctx, "Campaign")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Campaign(ctx, a1)
}

func (t traced) CheckFence(ctx context.Context, a1 store.HoldKind, a2 string, a3 uint64) (r0 bool, err error) {
	ctx, span := t.spans.Start(ctx, "CheckFence")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.CheckFence(ctx, a1, a2, a3)
}

func (t traced) CheckSession(ctx context.Context, a1 store.SessionRef) (r0 store.SessionState, err error) {
	ctx, span := t.spans.Start(ctx, "CheckSession")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.CheckSession(ctx, a1)
}

func (t traced) Claim(ctx context.Context, a1 string, a2 store.Claim) (r0 store.Claimed, err error) {
	ctx, span := t.spans.Start(ctx, "Claim")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Claim(ctx, a1, a2)
}

func (t traced) CloseSession(ctx context.Context, a1 store.SessionRef) (r0 []store.ReleasedHold, err error) {
	ctx, span := t.spans.Start(ctx, "CloseSession")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.CloseSession(ctx, a1)
}

func (t traced) CreateSession(ctx context.Context, a1 string, a2 time.Duration, a3 int, a4 time.Duration) (r0 store.SessionState, err error) {
	ctx, span := t.spans.Start(ctx, "CreateSession")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.CreateSession(ctx, a1, a2, a3, a4)
}

func (t traced) ElectionChanges(ctx context.Context, a1 string, a2 uint64) (r0 store.ElectionLog, err error) {
	ctx, span := t.spans.Start(ctx, "ElectionChanges")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.ElectionChanges(ctx, a1, a2)
}

func (t traced) Enqueue(ctx context.Context, a1 string, a2 store.NewMessage) (r0 store.Enqueued, err error) {
	ctx, span := t.spans.Start(ctx, "Enqueue")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Enqueue(ctx, a1, a2)
}

func (t traced) ExtendClaim(ctx context.Context, a1 string, a2 string, a3 time.Duration) (r0 time.Time, err error) {
	ctx, span := t.spans.Start(ctx, "ExtendClaim")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.ExtendClaim(ctx, a1, a2, a3)
}

func (t traced) ExtendIdempotent(ctx context.Context, a1 string, a2 string, a3 time.Duration) (r0 time.Time, err error) {
	ctx, span := t.spans.Start(ctx, "ExtendIdempotent")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.ExtendIdempotent(ctx, a1, a2, a3)
}

func (t traced) FinishIdempotent(ctx context.Context, a1 store.FinishIdempotent) (err error) {
	ctx, span := t.spans.Start(ctx, "FinishIdempotent")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.FinishIdempotent(ctx, a1)
}

func (t traced) GetHolds(ctx context.Context, a1 store.HoldKind, a2 string) (r0 store.LockInfo, err error) {
	ctx, span := t.spans.Start(ctx, "GetHolds")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.GetHolds(ctx, a1, a2)
}

func (t traced) GetLock(ctx context.Context, a1 string) (r0 store.LockInfo, err error) {
	ctx, span := t.spans.Start(ctx, "GetLock")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.GetLock(ctx, a1)
}

func (t traced) KeepAliveSession(ctx context.Context, a1 store.SessionRef, a2 time.Duration) (r0 store.SessionState, err error) {
	ctx, span := t.spans.Start(ctx, "KeepAliveSession")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.KeepAliveSession(ctx, a1, a2)
}

func (t traced) Leader(ctx context.Context, a1 string) (r0 store.LeaderInfo, err error) {
	ctx, span := t.spans.Start(ctx, "Leader")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Leader(ctx, a1)
}

func (t traced) LeaveQueue(ctx context.Context, a1 store.HoldKind, a2 string, a3 string, a4 string, a5 string) (r0 []store.Handoff, err error) {
	ctx, span := t.spans.Start(ctx, "LeaveQueue")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.LeaveQueue(ctx, a1, a2, a3, a4, a5)
}

func (t traced) Nack(ctx context.Context, a1 string, a2 string, a3 time.Duration) (r0 store.Nacked, err error) {
	ctx, span := t.spans.Start(ctx, "Nack")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Nack(ctx, a1, a2, a3)
}

func (t traced) Partitionings(ctx context.Context, a1 string, a2 int) (r0 []int, err error) {
	ctx, span := t.spans.Start(ctx, "Partitionings")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Partitionings(ctx, a1, a2)
}

func (t traced) Proclaim(ctx context.Context, a1 string, a2 string, a3 []uint8) (err error) {
	ctx, span := t.spans.Start(ctx, "Proclaim")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Proclaim(ctx, a1, a2, a3)
}

func (t traced) Redrive(ctx context.Context, a1 string, a2 int) (r0 int, err error) {
	ctx, span := t.spans.Start(ctx, "Redrive")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Redrive(ctx, a1, a2)
}

func (t traced) RefreshTickets(ctx context.Context, a1 store.HoldKind, a2 string, a3 []string, a4 time.Duration) (r0 []string, err error) {
	ctx, span := t.spans.Start(ctx, "RefreshTickets")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.RefreshTickets(ctx, a1, a2, a3, a4)
}

func (t traced) ReleaseHold(ctx context.Context, a1 store.HoldKind, a2 string, a3 string, a4 string) (r0 store.Released, err error) {
	ctx, span := t.spans.Start(ctx, "ReleaseHold")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.ReleaseHold(ctx, a1, a2, a3, a4)
}

func (t traced) ReleaseLock(ctx context.Context, a1 string, a2 string) (r0 bool, r1 time.Duration, err error) {
	ctx, span := t.spans.Start(ctx, "ReleaseLock")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.ReleaseLock(ctx, a1, a2)
}

func (t traced) RenewHold(ctx context.Context, a1 store.HoldKind, a2 string, a3 string, a4 time.Duration) (r0 store.Lease, err error) {
	ctx, span := t.spans.Start(ctx, "RenewHold")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.RenewHold(ctx, a1, a2, a3, a4)
}

func (t traced) RenewLock(ctx context.Context, a1 string, a2 string, a3 time.Duration) (r0 store.Lease, err error) {
	ctx, span := t.spans.Start(ctx, "RenewLock")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.RenewLock(ctx, a1, a2, a3)
}

func (t traced) Resign(ctx context.Context, a1 string, a2 string) (r0 bool, err error) {
	ctx, span := t.spans.Start(ctx, "Resign")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Resign(ctx, a1, a2)
}

func (t traced) ResumeSession(ctx context.Context, a1 string, a2 time.Duration) (r0 store.SessionState, err error) {
	ctx, span := t.spans.Start(ctx, "ResumeSession")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.ResumeSession(ctx, a1, a2)
}

func (t traced) Stats(ctx context.Context, a1 string) (r0 store.QueueStats, err error) {
	ctx, span := t.spans.Start(ctx, "Stats")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Stats(ctx, a1)
}

func (t traced) Subscribe(ctx context.Context, a1 string) (r0 *store.Subscription, err error) {
	ctx, span := t.spans.Start(ctx, "Subscribe")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.Store.Subscribe(ctx, a1)
}
