package redlock

// Every store.Store method a Redlock does not serve answers
// store.ErrRedlockMode (written from the interface's method list: a
// method added to store.Store fails the build until it is added here).

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// refused answers every store call but the locks' with
// store.ErrRedlockMode.
type refused struct{}

func (refused) Ack(ctx context.Context, a1 string, a2 []string) (r0 []bool, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) Allow(ctx context.Context, a1 string, a2 store.Limit, a3 int64, a4 bool) (r0 store.Decision, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) AllowAll(ctx context.Context, a1 string, a2 []store.Limit, a3 int64, a4 bool) (r0 store.Decision, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) CountHits(ctx context.Context, a1 []store.Hit) (r0 []store.HitCount, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) BeginIdempotent(ctx context.Context, a1 store.BeginIdempotent) (r0 store.IdemState, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) Campaign(ctx context.Context, a1 store.Campaign) (r0 store.Campaigned, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) CheckSession(ctx context.Context, a1 store.SessionRef) (r0 store.SessionState, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) Claim(ctx context.Context, a1 string, a2 store.Claim) (r0 store.Claimed, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) CloseSession(ctx context.Context, a1 store.SessionRef) (r0 []store.ReleasedHold, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) CreateSession(ctx context.Context, a1 string, a2 time.Duration, a3 int, a4 time.Duration) (r0 store.SessionState, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ElectionChanges(ctx context.Context, a1 string, a2 uint64) (r0 store.ElectionLog, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) Enqueue(ctx context.Context, a1 string, a2 store.NewMessage) (r0 store.Enqueued, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ExtendClaim(ctx context.Context, a1 string, a2 string, a3 time.Duration) (r0 time.Time, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ExtendIdempotent(ctx context.Context, a1 string, a2 string, a3 time.Duration) (r0 time.Time, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) FinishIdempotent(ctx context.Context, a1 store.FinishIdempotent) (err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) KeepAliveSession(ctx context.Context, a1 store.SessionRef, a2 time.Duration) (r0 store.SessionState, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) Leader(ctx context.Context, a1 string) (r0 store.LeaderInfo, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) Nack(ctx context.Context, a1 string, a2 string, a3 time.Duration) (r0 store.Nacked, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) QueueSettings(ctx context.Context, a1 string) (r0 store.QueueSettings, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) PauseQueue(ctx context.Context, a1 string, a2 bool) (r0 store.QueueSettings, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ConfigureQueue(ctx context.Context, a1 string, a2 store.QueueSettings) (r0 store.QueueSettings, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) Partitionings(ctx context.Context, a1 string, a2 int) (r0 []int, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) Proclaim(ctx context.Context, a1 string, a2 string, a3 []uint8) (err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) Redrive(ctx context.Context, a1 string, a2 int) (r0 int, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ResumeSession(ctx context.Context, a1 string, a2 time.Duration) (r0 store.SessionState, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) Stats(ctx context.Context, a1 string) (r0 store.QueueStats, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ListDead(ctx context.Context, a1 string, a2 store.DeadPos, a3 int, a4 int) (r0 []store.DeadLetter, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) PurgeDead(ctx context.Context, a1 string, a2 int) (r0 int64, r1 int64, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) RedriveIDs(ctx context.Context, a1 string, a2 []string) (r0 int, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) PutSchedule(ctx context.Context, a1 string, a2 store.Schedule, a3 int) (err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) DeleteSchedule(ctx context.Context, a1, a2, a3 string) (r0 bool, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ListSchedules(ctx context.Context, a1, a2 string) (r0 []store.Schedule, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) SchedulePayload(ctx context.Context, a1, a2, a3 string) (r0 []byte, r1 bool, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ScheduleNamespaces(ctx context.Context) (r0 []string, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ScheduleTicked(ctx context.Context, a1, a2, a3 string, a4 time.Time) (err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) RecordQueueActivity(ctx context.Context, a1 string, a2 time.Time, a3 map[string]store.QueueCounts) (err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) QueueHistory(ctx context.Context, a1, a2 string, a3 time.Time) (r0 []store.QueueMinute, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ActiveQueues(ctx context.Context, a1 string) (r0 []string, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) PutPolicy(ctx context.Context, a1 string, a2 store.StoredPolicy, a3 int) (r0 bool, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) DeletePolicy(ctx context.Context, a1, a2 string) (r0 bool, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ListPolicies(ctx context.Context, a1 string) (r0 []store.StoredPolicy, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) PolicyVersions(ctx context.Context, a1 int64) (r0 int64, r1 map[string]int64, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ReserveClaims(ctx context.Context, a1 string, a2 []string, a3 time.Duration) (r0 store.Reserved, err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) ReleaseClaims(ctx context.Context, a1 string, a2 []string, a3 bool) (err error) {
	err = store.ErrRedlockMode
	return
}

func (refused) HoldReservations(ctx context.Context, a1 string, a2 []string, a3 time.Duration) (err error) {
	err = store.ErrRedlockMode
	return
}
