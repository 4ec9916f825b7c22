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
	return traced{inner: inner, spans: spans}
}

// traced has every method of store.Store written out, none promoted from
// an embedded store: a method added to the interface fails to compile
// here until it has its span.
type traced struct {
	inner store.Store
	spans *Store
}

var _ store.Store = traced{}

func (t traced) AbandonHold(ctx context.Context, a1 store.HoldKind, a2 string, a3 string, a4 string) (err error) {
	ctx, span := t.spans.Start(ctx, "AbandonHold")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.AbandonHold(ctx, a1, a2, a3, a4)
}

func (t traced) Ack(ctx context.Context, a1 string, a2 []string) (r0 []bool, err error) {
	ctx, span := t.spans.Start(ctx, "Ack")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Ack(ctx, a1, a2)
}

func (t traced) AcquireHold(ctx context.Context, a1 store.HoldRequest) (r0 store.Grant, err error) {
	ctx, span := t.spans.Start(ctx, "AcquireHold")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.AcquireHold(ctx, a1)
}

func (t traced) Allow(ctx context.Context, a1 string, a2 store.Limit, a3 int64, a4 bool) (r0 store.Decision, err error) {
	ctx, span := t.spans.Start(ctx, "Allow")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Allow(ctx, a1, a2, a3, a4)
}

func (t traced) AllowAll(ctx context.Context, a1 string, a2 []store.Limit, a3 int64, a4 bool) (r0 store.Decision, err error) {
	ctx, span := t.spans.Start(ctx, "AllowAll")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.AllowAll(ctx, a1, a2, a3, a4)
}

func (t traced) CountHits(ctx context.Context, a1 []store.Hit) (r0 []store.HitCount, err error) {
	ctx, span := t.spans.Start(ctx, "CountHits")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.CountHits(ctx, a1)
}

func (t traced) BeginIdempotent(ctx context.Context, a1 store.BeginIdempotent) (r0 store.IdemState, err error) {
	ctx, span := t.spans.Start(ctx, "BeginIdempotent")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.BeginIdempotent(ctx, a1)
}

func (t traced) Campaign(ctx context.Context, a1 store.Campaign) (r0 store.Campaigned, err error) {
	ctx, span := t.spans.Start(ctx, "Campaign")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Campaign(ctx, a1)
}

func (t traced) CheckFence(ctx context.Context, a1 store.HoldKind, a2 string, a3 uint64) (r0 bool, err error) {
	ctx, span := t.spans.Start(ctx, "CheckFence")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.CheckFence(ctx, a1, a2, a3)
}

func (t traced) CheckSession(ctx context.Context, a1 store.SessionRef) (r0 store.SessionState, err error) {
	ctx, span := t.spans.Start(ctx, "CheckSession")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.CheckSession(ctx, a1)
}

func (t traced) Claim(ctx context.Context, a1 string, a2 store.Claim) (r0 store.Claimed, err error) {
	ctx, span := t.spans.Start(ctx, "Claim")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Claim(ctx, a1, a2)
}

func (t traced) CloseSession(ctx context.Context, a1 store.SessionRef) (r0 []store.ReleasedHold, err error) {
	ctx, span := t.spans.Start(ctx, "CloseSession")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.CloseSession(ctx, a1)
}

func (t traced) CreateSession(ctx context.Context, a1 string, a2 time.Duration, a3 int, a4 time.Duration) (r0 store.SessionState, err error) {
	ctx, span := t.spans.Start(ctx, "CreateSession")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.CreateSession(ctx, a1, a2, a3, a4)
}

func (t traced) ElectionChanges(ctx context.Context, a1 string, a2 uint64) (r0 store.ElectionLog, err error) {
	ctx, span := t.spans.Start(ctx, "ElectionChanges")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ElectionChanges(ctx, a1, a2)
}

func (t traced) Enqueue(ctx context.Context, a1 string, a2 store.NewMessage) (r0 store.Enqueued, err error) {
	ctx, span := t.spans.Start(ctx, "Enqueue")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Enqueue(ctx, a1, a2)
}

func (t traced) ExtendClaim(ctx context.Context, a1 string, a2 string, a3 time.Duration) (r0 time.Time, err error) {
	ctx, span := t.spans.Start(ctx, "ExtendClaim")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ExtendClaim(ctx, a1, a2, a3)
}

func (t traced) ExtendIdempotent(ctx context.Context, a1 string, a2 string, a3 time.Duration) (r0 time.Time, err error) {
	ctx, span := t.spans.Start(ctx, "ExtendIdempotent")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ExtendIdempotent(ctx, a1, a2, a3)
}

func (t traced) FinishIdempotent(ctx context.Context, a1 store.FinishIdempotent) (err error) {
	ctx, span := t.spans.Start(ctx, "FinishIdempotent")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.FinishIdempotent(ctx, a1)
}

func (t traced) GetHolds(ctx context.Context, a1 store.HoldKind, a2 string) (r0 store.HoldInfo, err error) {
	ctx, span := t.spans.Start(ctx, "GetHolds")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.GetHolds(ctx, a1, a2)
}

func (t traced) KeepAliveSession(ctx context.Context, a1 store.SessionRef, a2 time.Duration) (r0 store.SessionState, err error) {
	ctx, span := t.spans.Start(ctx, "KeepAliveSession")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.KeepAliveSession(ctx, a1, a2)
}

func (t traced) Leader(ctx context.Context, a1 string) (r0 store.LeaderInfo, err error) {
	ctx, span := t.spans.Start(ctx, "Leader")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Leader(ctx, a1)
}

func (t traced) LeaveQueue(ctx context.Context, a1 store.HoldKind, a2 string, a3 string, a4 string, a5 string) (r0 []store.Handoff, err error) {
	ctx, span := t.spans.Start(ctx, "LeaveQueue")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.LeaveQueue(ctx, a1, a2, a3, a4, a5)
}

func (t traced) Nack(ctx context.Context, a1 string, a2 string, a3 time.Duration) (r0 store.Nacked, err error) {
	ctx, span := t.spans.Start(ctx, "Nack")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Nack(ctx, a1, a2, a3)
}

func (t traced) QueueSettings(ctx context.Context, a1 string) (r0 store.QueueSettings, err error) {
	ctx, span := t.spans.Start(ctx, "QueueSettings")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.QueueSettings(ctx, a1)
}

func (t traced) PauseQueue(ctx context.Context, a1 string, a2 bool) (r0 store.QueueSettings, err error) {
	ctx, span := t.spans.Start(ctx, "PauseQueue")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.PauseQueue(ctx, a1, a2)
}

func (t traced) ConfigureQueue(ctx context.Context, a1 string, a2 store.QueueSettings) (r0 store.QueueSettings, err error) {
	ctx, span := t.spans.Start(ctx, "ConfigureQueue")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ConfigureQueue(ctx, a1, a2)
}

func (t traced) Partitionings(ctx context.Context, a1 string, a2 int) (r0 []int, err error) {
	ctx, span := t.spans.Start(ctx, "Partitionings")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Partitionings(ctx, a1, a2)
}

func (t traced) Proclaim(ctx context.Context, a1 string, a2 string, a3 []uint8) (err error) {
	ctx, span := t.spans.Start(ctx, "Proclaim")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Proclaim(ctx, a1, a2, a3)
}

func (t traced) Redrive(ctx context.Context, a1 string, a2 int) (r0 int, err error) {
	ctx, span := t.spans.Start(ctx, "Redrive")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Redrive(ctx, a1, a2)
}

func (t traced) RefreshTickets(ctx context.Context, a1 store.HoldKind, a2 string, a3 []string, a4 time.Duration) (r0 []string, err error) {
	ctx, span := t.spans.Start(ctx, "RefreshTickets")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.RefreshTickets(ctx, a1, a2, a3, a4)
}

func (t traced) ReleaseHold(ctx context.Context, a1 store.HoldKind, a2 string, a3 string, a4 string) (r0 store.Released, err error) {
	ctx, span := t.spans.Start(ctx, "ReleaseHold")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ReleaseHold(ctx, a1, a2, a3, a4)
}

func (t traced) RenewHold(ctx context.Context, a1 store.HoldKind, a2 string, a3 string, a4 time.Duration) (r0 store.Lease, err error) {
	ctx, span := t.spans.Start(ctx, "RenewHold")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.RenewHold(ctx, a1, a2, a3, a4)
}

func (t traced) ResumeSession(ctx context.Context, a1 string, a2 time.Duration) (r0 store.SessionState, err error) {
	ctx, span := t.spans.Start(ctx, "ResumeSession")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ResumeSession(ctx, a1, a2)
}

func (t traced) Stats(ctx context.Context, a1 string) (r0 store.QueueStats, err error) {
	ctx, span := t.spans.Start(ctx, "Stats")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Stats(ctx, a1)
}

func (t traced) Subscribe(ctx context.Context, a1 string) (r0 *store.Subscription, err error) {
	ctx, span := t.spans.Start(ctx, "Subscribe")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.Subscribe(ctx, a1)
}

// Close and PartitionName take no context, so get no span.
func (t traced) Close() error { return t.inner.Close() }

func (t traced) PartitionName(queue string, p, k int) string {
	return t.inner.PartitionName(queue, p, k)
}

func (t traced) ListDead(ctx context.Context, a1 string, a2 store.DeadPos, a3 int, a4 int) (r0 []store.DeadLetter, err error) {
	ctx, span := t.spans.Start(ctx, "ListDead")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ListDead(ctx, a1, a2, a3, a4)
}

func (t traced) PurgeDead(ctx context.Context, a1 string, a2 int) (r0 int64, r1 int64, err error) {
	ctx, span := t.spans.Start(ctx, "PurgeDead")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.PurgeDead(ctx, a1, a2)
}

func (t traced) RedriveIDs(ctx context.Context, a1 string, a2 []string) (r0 int, err error) {
	ctx, span := t.spans.Start(ctx, "RedriveIDs")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.RedriveIDs(ctx, a1, a2)
}

var _ store.NodeHealther = traced{}

// NodeHealth is the inner store's, if it reports any.
func (t traced) NodeHealth(ctx context.Context) []store.Node {
	if nh, ok := t.inner.(store.NodeHealther); ok {
		return nh.NodeHealth(ctx)
	}
	return nil
}

func (t traced) PutSchedule(ctx context.Context, a1 string, a2 store.Schedule, a3 int) (err error) {
	ctx, span := t.spans.Start(ctx, "PutSchedule")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.PutSchedule(ctx, a1, a2, a3)
}

func (t traced) DeleteSchedule(ctx context.Context, a1, a2, a3 string) (r0 bool, err error) {
	ctx, span := t.spans.Start(ctx, "DeleteSchedule")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.DeleteSchedule(ctx, a1, a2, a3)
}

func (t traced) ListSchedules(ctx context.Context, a1, a2 string) (r0 []store.Schedule, err error) {
	ctx, span := t.spans.Start(ctx, "ListSchedules")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ListSchedules(ctx, a1, a2)
}

func (t traced) SchedulePayload(ctx context.Context, a1, a2, a3 string) (r0 []byte, r1 bool, err error) {
	ctx, span := t.spans.Start(ctx, "SchedulePayload")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.SchedulePayload(ctx, a1, a2, a3)
}

func (t traced) ScheduleNamespaces(ctx context.Context) (r0 []string, err error) {
	ctx, span := t.spans.Start(ctx, "ScheduleNamespaces")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ScheduleNamespaces(ctx)
}

func (t traced) ScheduleTicked(ctx context.Context, a1, a2, a3 string, a4 time.Time) (err error) {
	ctx, span := t.spans.Start(ctx, "ScheduleTicked")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ScheduleTicked(ctx, a1, a2, a3, a4)
}

func (t traced) RecordQueueActivity(ctx context.Context, a1 string, a2 time.Time, a3 map[string]store.QueueCounts) (err error) {
	ctx, span := t.spans.Start(ctx, "RecordQueueActivity")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.RecordQueueActivity(ctx, a1, a2, a3)
}

func (t traced) QueueHistory(ctx context.Context, a1, a2 string, a3 time.Time) (r0 []store.QueueMinute, err error) {
	ctx, span := t.spans.Start(ctx, "QueueHistory")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.QueueHistory(ctx, a1, a2, a3)
}

func (t traced) ActiveQueues(ctx context.Context, a1 string) (r0 []string, err error) {
	ctx, span := t.spans.Start(ctx, "ActiveQueues")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ActiveQueues(ctx, a1)
}

func (t traced) PutPolicy(ctx context.Context, a1 string, a2 store.StoredPolicy, a3 int) (r0 bool, err error) {
	ctx, span := t.spans.Start(ctx, "PutPolicy")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.PutPolicy(ctx, a1, a2, a3)
}

func (t traced) DeletePolicy(ctx context.Context, a1, a2 string) (r0 bool, err error) {
	ctx, span := t.spans.Start(ctx, "DeletePolicy")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.DeletePolicy(ctx, a1, a2)
}

func (t traced) ListPolicies(ctx context.Context, a1 string) (r0 []store.StoredPolicy, err error) {
	ctx, span := t.spans.Start(ctx, "ListPolicies")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ListPolicies(ctx, a1)
}

func (t traced) PolicyVersions(ctx context.Context, a1 int64) (r0 int64, r1 map[string]int64, err error) {
	ctx, span := t.spans.Start(ctx, "PolicyVersions")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.PolicyVersions(ctx, a1)
}

func (t traced) ReserveClaims(ctx context.Context, a1 string, a2 []string, a3 time.Duration) (r0 store.Reserved, err error) {
	ctx, span := t.spans.Start(ctx, "ReserveClaims")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ReserveClaims(ctx, a1, a2, a3)
}

func (t traced) ReleaseClaims(ctx context.Context, a1 string, a2 []string, a3 bool) (err error) {
	ctx, span := t.spans.Start(ctx, "ReleaseClaims")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.ReleaseClaims(ctx, a1, a2, a3)
}

func (t traced) HoldReservations(ctx context.Context, a1 string, a2 []string, a3 time.Duration) (err error) {
	ctx, span := t.spans.Start(ctx, "HoldReservations")
	defer func() { t.spans.End(span, Failure(err)) }()
	return t.inner.HoldReservations(ctx, a1, a2, a3)
}
