// Package store defines the storage that coordd's domain packages run on: one
// interface per kind of state, the types they exchange, and the errors they
// return. Each method is one atomic step on one key group (a lock and its
// fence, a session and its set of holds, a limiter key, an idempotency key, a
// queue), so that a Redis backend can make it one script on one hash slot.
//
// Time is the store's: the memory backend reads its injected clock, the Redis
// backend the Redis server's TIME, so every coordd instance agrees. Times have
// microsecond resolution; durations passed in are truncated to microseconds.
//
// Names passed to a store are already scoped to a namespace (see Scope).
// Backends: store/memory (embedded) and store/redis. The conformance suite in
// store/storetest defines the behaviour every backend must have.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Errors returned by stores. State conflicts are sentinel errors; callers
// test them with errors.Is.
var (
	// ErrNotHeld: the token holds no live hold of the name (expired,
	// released, or never held).
	ErrNotHeld = errors.New("not held")
	// ErrSessionBound: the hold is bound to a session and is renewed by it.
	ErrSessionBound = errors.New("the hold is bound to a session")
	// ErrSessionNotFound: no live session has the ID.
	ErrSessionNotFound = errors.New("session not found")
	// ErrFingerprintMismatch: the idempotency key is in use with another
	// fingerprint.
	ErrFingerprintMismatch = errors.New("fingerprint mismatch")
	// ErrNotOwner: the owner token does not own the idempotency key.
	ErrNotOwner = errors.New("not the owner")
	// ErrReceiptExpired: the receipt is not that of a live claim.
	ErrReceiptExpired = errors.New("receipt expired")
	// ErrTooManySessions: the namespace has as many live sessions as it may.
	ErrTooManySessions = errors.New("too many sessions in the namespace")
	// ErrTooManyHolds: the session has as many holds as it may, of every
	// kind (unacknowledged loss reports count too).
	ErrTooManyHolds = errors.New("too many holds in the session")
	// ErrSuperseded: a newer stream resumed the session; the caller's stream
	// no longer speaks for it.
	ErrSuperseded = errors.New("the session was resumed by another stream")
	// ErrQueueFull: the queue holds as many messages as it may
	// (NewMessage.MaxMessages); nothing was enqueued.
	ErrQueueFull = errors.New("queue full")
	// ErrTooManySchedules: the namespace has as many schedules as it may;
	// nothing was stored.
	ErrTooManySchedules = errors.New("too many schedules in the namespace")
	// ErrMemoryHigh: the store's memory is past its high-water mark, so a
	// write that only adds data (a new message, a new idempotency key, a
	// new session) is refused, and nothing was written; writes that end or
	// renew what exists go on.
	ErrMemoryHigh = errors.New("store memory high")
	// ErrRedlockMode: the store serves exclusive plain locks only (a Redlock
	// over independent Redis masters, store/redlock); nothing was done.
	ErrRedlockMode = errors.New("coordd runs in Redlock mode: it serves exclusive locks without sessions only")
	// ErrUnavailable wraps every failure to reach the store or to get its
	// answer. The outcome of the operation is unknown: it may have happened.
	ErrUnavailable = errors.New("store unavailable")
)

// IsState reports whether err is one of the stores' answers about state
// (ErrNotHeld and the like): an answer, not a failure of the store.
func IsState(err error) bool {
	for _, e := range []error{ErrNotHeld, ErrSessionBound, ErrSessionNotFound,
		ErrFingerprintMismatch, ErrNotOwner, ErrReceiptExpired,
		ErrTooManySessions, ErrTooManyHolds, ErrSuperseded,
		ErrLimitMismatch, ErrTooManyWaiters, ErrNotLeader, ErrQueueFull, ErrMemoryHigh, ErrTooManySchedules,
		ErrTooManyPolicies, ErrRedlockMode} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Scope returns name inside namespace ns. Namespaces never contain ':', so the
// result is unambiguous.
func Scope(ns, name string) string { return ns + ":" + name }

// Unscope returns the name that Scope(ns, name) put inside ns.
func Unscope(ns, scoped string) string { return strings.TrimPrefix(scoped, ns+":") }

// Namespace returns the namespace of a scoped name.
func Namespace(scoped string) string {
	ns, _, _ := strings.Cut(scoped, ":")
	return ns
}

// Store is every kind of state together; a backend implements all of it.
type Store interface {
	Holds
	Elections
	Sessions
	Limits
	Idempotency
	Queues
	Schedules
	QueueActivity
	Policies
	Subscriber
	// Close releases the backend's resources; the store is unusable after.
	Close() error
}

// Subscriber delivers wake-ups for waiters: a waiting ticket that may be
// granted, an idempotency key's finish, a queue's new or returned message.
// Wake-ups are hints, not guarantees: a waiter re-checks state after each
// one, and at the deadline the store told it (a holder's expiry, a
// message's due time), so a lost wake-up only delays it.
type Subscriber interface {
	// Subscribe starts delivering wake-ups for topic (WaitTopic,
	// ElectionTopic, IdemTopic, QueueTopic, SessionTopic) to the returned
	// subscription. Events after Subscribe returns are not missed. The
	// caller must Close it.
	Subscribe(ctx context.Context, topic string) (*Subscription, error)
}

// IdemTopic is the wake-up topic of idempotency key: finished.
func IdemTopic(key string) string { return "idem:" + key }

// QueueTopic is the wake-up topic of queue: a message became ready or due.
func QueueTopic(queue string) string { return "queue:" + queue }

// SessionTopic is the wake-up topic of session id: a hold was bound to it,
// or a stream resumed it (the stream that drove it is superseded).
func SessionTopic(id string) string { return "session:" + id }

// Sessions is session storage. A session is a lease with a set of holds of
// every kind bound to it, each by its kind and name. The holds' deadlines
// follow the session's, capped by their MaxHold.
//
// A session ID is a bearer capability (whoever has it can renew, resume or
// end the session), so it never leaves the stream that owns it. A session
// is driven by one stream at a time: CreateSession and ResumeSession return
// the stream's epoch (SessionState.Stream), a later ResumeSession raises it,
// and from then on calls that name an older epoch are ErrSuperseded and
// change nothing.
//
// Loss reports are at least once: a hold the session lost (max hold
// reached, gone, or, when the session expired, every hold it had) becomes
// a report with a sequence number (LostHold.Seq), returned by every later
// call until a call acknowledges it (SessionRef.Ack >= its Seq). An expired
// session is remembered, reported Expired with its unacknowledged reports,
// until SessionGrace after its deadline; after that it is unknown.
//
// The cap on a session's holds (HoldRequest.MaxSessionHolds, config
// session.max_holds) counts its holds of every kind, and its
// unacknowledged loss reports.
type Sessions interface {
	// CreateSession starts session id with a lease of ttl, on stream epoch
	// 1. id is scoped to a namespace (Scope); if the namespace already has
	// max live sessions (max > 0), it is ErrTooManySessions and nothing is
	// created. lockDelay (0: none) is the session's lock-delay (see Holds).
	CreateSession(ctx context.Context, id string, ttl time.Duration, max int, lockDelay time.Duration) (SessionState, error)
	// ResumeSession hands a session to a new stream: its epoch goes up by
	// one (so the old stream's calls are ErrSuperseded from now on), and it
	// is renewed and reported as by KeepAliveSession, acknowledging nothing;
	// SessionTopic(id) is woken. An expired session is reported (Expired),
	// not resumed.
	ResumeSession(ctx context.Context, id string, ttl time.Duration) (SessionState, error)
	// KeepAliveSession first forgets the reports ref acknowledges, then
	// renews a live session to now + ttl (ttl 0: its current TTL), or leaves
	// its deadline if that is later (a deadline is never shortened, so that
	// renewals applied out of order are harmless), and extends every hold
	// bound to it to the session's deadline, capped by the hold's MaxHold.
	// Holds of the session that are no longer held by it (max hold reached,
	// or gone) leave its set and become loss reports. Lost lists every
	// unacknowledged report. A binding whose outcome was never confirmed
	// (store/redis: a pending binding) is checked but never renewed. An
	// expired session is not renewed: the state has Expired true and Lost
	// lists its reports. An unknown session is ErrSessionNotFound; a stale
	// ref.Stream is ErrSuperseded.
	KeepAliveSession(ctx context.Context, ref SessionRef, ttl time.Duration) (SessionState, error)
	// CheckSession is KeepAliveSession without the renewal: it reports lost
	// holds and expiry the same way and changes no deadline.
	CheckSession(ctx context.Context, ref SessionRef) (SessionState, error)
	// CloseSession ends the session at once: it releases every hold the
	// session has (waking their waiters) and returns them. An expired
	// session is forgotten and releases nothing; an unknown one is
	// ErrSessionNotFound; a stale ref.Stream is ErrSuperseded, and nothing
	// changes.
	CloseSession(ctx context.Context, ref SessionRef) ([]ReleasedHold, error)
}

// urgentKey marks a context as Urgent's.
type urgentKey struct{}

// Urgent marks ctx's store calls as a live session's (its heartbeats,
// checks and resumes): a store that queues calls (store/redis's batches)
// sends them ahead of the rest, so that new work waits before a session's
// renewal does.
func Urgent(ctx context.Context) context.Context { return context.WithValue(ctx, urgentKey{}, true) }

// IsUrgent reports whether ctx was marked by Urgent.
func IsUrgent(ctx context.Context) bool { return ctx.Value(urgentKey{}) != nil }

// SessionRef names a session as one stream sees it.
type SessionRef struct {
	ID string
	// Stream is the epoch CreateSession or ResumeSession returned to the
	// stream; 0 checks none (for callers that own no stream: tests and
	// tools; the session service always passes its stream's).
	Stream uint64
	// Ack acknowledges every loss report with Seq <= Ack: they were sent on
	// this stream and a later heartbeat arrived after them.
	Ack uint64
}

// SessionGrace is how long an expired session is remembered for reporting.
const SessionGrace = time.Minute

// SessionState describes a session after a store call.
type SessionState struct {
	ID         string
	Stream     uint64        // the stream epoch the session is on
	TTL        time.Duration // time left until ExpireTime
	ExpireTime time.Time
	Expired    bool
	// Lost lists the unacknowledged loss reports, in Seq order.
	Lost []LostHold
	// NextLoss, if not zero, is when the next hold of the session reaches
	// its max hold (before the session's deadline): the stream checks the
	// session then, so that the loss is reported when it happens.
	NextLoss time.Time
}

// LostHold is a hold a session had and has no more.
type LostHold struct {
	Kind   HoldKind
	Name   string
	Fence  uint64
	Reason LossReason
	Seq    uint64 // the report's sequence number in its session, from 1
}

// ReleasedHold is a hold that CloseSession released.
type ReleasedHold struct {
	Kind HoldKind
	Name string
	Held time.Duration // how long it had been held
}

// LossReason says why a session lost a hold.
type LossReason int

// Loss reasons.
const (
	LostMaxHold LossReason = iota + 1
	LostSessionExpired
	LostGone
)

// Limits is rate-limiter storage: each call is one atomic decision.
type Limits interface {
	// Allow decides whether cost units may be taken from key's limiter under
	// limit, and takes them if so and if not peek. A denial takes nothing. A
	// key's state is separate for every distinct Limit. Limit must be valid:
	// Limit >= 1, Period >= 1µs, 1 <= cost <= capacity (see Limit.Capacity).
	// Its rate is exact if Period is whole µs and, for the buckets, Limit
	// divides it (ratelimit.go); internal/limiter passes no other.
	Allow(ctx context.Context, key string, limit Limit, cost int64, peek bool) (Decision, error)
	// AllowAll decides cost units against every limit of limits (1 to
	// MaxLimits, distinct) on key at once, in one atomic step: allowed iff
	// each limit allows them (each decided as Allow would alone, at the same
	// instant), and then taken from each unless peek; a denial takes nothing
	// from any (ratelimit.go, "Several limits"). cost must fit every limit's
	// capacity. Allow is AllowAll with one limit.
	AllowAll(ctx context.Context, key string, limits []Limit, cost int64, peek bool) (Decision, error)
	// CountHits adds each Hit's hits to its key's counter in the current
	// fixed window of its period, whatever the count (ratelimit.go,
	// "Counting hits"), and returns each counter's count after and the
	// store's time of its step (on a Cluster, its master's), in order.
	// Each counter's step is atomic; counters of different keys are
	// counted apart (on a Cluster, in one round trip per master). A
	// counter of a key is apart from its Allow states, and from its
	// counters of other periods. 1 to MaxHits hits, each with Period >=
	// 1µs and Hits >= 0. On an error the outcome of each is unknown.
	CountHits(ctx context.Context, hits []Hit) ([]HitCount, error)
}

// Hit is one counter's part of a CountHits.
type Hit struct {
	Key    string
	Period time.Duration
	Hits   int64
}

// HitCount is one counter's answer to a CountHits.
type HitCount struct {
	Count int64     // after the hits, at most MaxHitCount
	Now   time.Time // the store's time of the step
}

// MaxHitCount is where a counter stops growing (2^52: exact in a Lua
// number, far above any limit).
const MaxHitCount = 1 << 52

// MaxHits is the most counters one CountHits counts.
const MaxHits = 64

// CheckHits reports a list of hits that CountHits does not take.
func CheckHits(hits []Hit) error {
	if len(hits) < 1 || len(hits) > MaxHits {
		return fmt.Errorf("CountHits of %d counters, want 1 to %d", len(hits), MaxHits)
	}
	for _, h := range hits {
		if h.Period < time.Microsecond || h.Hits < 0 {
			return fmt.Errorf("CountHits of %+v", h)
		}
	}
	return nil
}

// MaxLimits is the most limits one AllowAll decides.
const MaxLimits = 8

// CheckLimits reports a list of limits that AllowAll does not take: none,
// more than MaxLimits, or one twice (a caller's bug: internal/limiter
// passes no such list).
func CheckLimits(limits []Limit) error {
	if len(limits) < 1 || len(limits) > MaxLimits {
		return fmt.Errorf("AllowAll of %d limits, want 1 to %d", len(limits), MaxLimits)
	}
	for i, l := range limits {
		if slices.Contains(limits[:i], l) {
			return fmt.Errorf("AllowAll of limit %+v twice", l)
		}
	}
	return nil
}

// Algorithm is a rate-limiting algorithm.
type Algorithm int

// Algorithms; the values match the API's enum.
const (
	FixedWindow Algorithm = iota + 1
	SlidingWindow
	SlidingLog
	TokenBucket
	LeakyBucket
)

// Limit is an algorithm with its parameters.
type Limit struct {
	Algorithm Algorithm
	Limit     int64         // units per Period
	Period    time.Duration // truncated to microseconds
	Burst     int64         // bucket capacity for the buckets; 0: the default
}

// Capacity is the most a single call may take: the bucket capacity for the
// token bucket (Burst, default Limit) and leaky bucket (Burst, default 1),
// Limit otherwise.
func (l Limit) Capacity() int64 {
	switch {
	case l.Algorithm != TokenBucket && l.Algorithm != LeakyBucket:
		return l.Limit
	case l.Burst > 0:
		return l.Burst
	case l.Algorithm == TokenBucket:
		return l.Limit
	default:
		return 1
	}
}

// Decision is a limiter's answer.
type Decision struct {
	Allowed    bool
	Remaining  int64         // units left after the call (what a peek would leave)
	RetryAfter time.Duration // denied: until the same call succeeds; else 0
	ResetAfter time.Duration // until the limiter is back to its unused state
	// Limit is the index, in AllowAll's limits, of the limit that decided:
	// denied, the denying limit whose RetryAfter is longest; allowed, the
	// one with the least Remaining (the first of equals). 0 for Allow.
	Limit int
}

// Idempotency is idempotency-key storage.
//
// A key is absent, processing (one owner until its processing deadline),
// completed or failed (until their result TTL). A processing key whose
// deadline passed is abandoned: it no longer has an owner, the next Begin
// with its fingerprint takes it over, and it is remembered, for fingerprint
// checks only, until Retention after its deadline.
type Idempotency interface {
	// BeginIdempotent claims an absent or abandoned key for req.OwnerToken
	// (Outcome Execute) or reports its state: InProgress, Completed with the
	// result, Failed with the failure. A key held with another fingerprint, in
	// any state, is ErrFingerprintMismatch.
	BeginIdempotent(ctx context.Context, req BeginIdempotent) (IdemState, error)
	// FinishIdempotent stores the outcome of the owner's work and wakes
	// IdemTopic(key): a result (completed) or a terminal failure (failed) for
	// ResultTTL, or, for a retryable failure, deletes the key. ErrNotOwner if
	// the owner token does not own a processing key whose deadline has not
	// passed.
	FinishIdempotent(ctx context.Context, req FinishIdempotent) error
	// ExtendIdempotent sets the owner's processing deadline to now + ttl.
	// ErrNotOwner as for FinishIdempotent.
	ExtendIdempotent(ctx context.Context, key, ownerToken string, ttl time.Duration) (time.Time, error)
}

// BeginIdempotent is a request to claim an idempotency key.
type BeginIdempotent struct {
	Key           string
	Fingerprint   string
	OwnerToken    string        // fresh, random; becomes the owner on Execute
	ProcessingTTL time.Duration // the owner's lease
	Retention     time.Duration // how long an abandoned key is remembered
}

// FinishIdempotent is a request to store an outcome.
type FinishIdempotent struct {
	Key        string
	OwnerToken string
	Result     []byte   // used when Failure is nil
	Failure    *Failure // nil: success with Result
	ResultTTL  time.Duration
}

// Failure is a failed operation's outcome.
type Failure struct {
	Message   string
	Retryable bool
}

// Outcome is an idempotency key's state as seen by BeginIdempotent.
type Outcome int

// Outcomes; the values match the API's enum.
const (
	Execute Outcome = iota + 1
	InProgress
	Completed
	Failed
)

// IdemState is the answer to BeginIdempotent.
type IdemState struct {
	Outcome    Outcome
	OwnerToken string // Execute
	Result     []byte // Completed
	Failure    *Failure
	// Execute, InProgress: the processing deadline; Completed, Failed: when
	// the cached outcome expires.
	ExpireTime time.Time
	// Time left until ExpireTime.
	TTL time.Duration
}

// Queues is work-queue storage.
//
// A message is delayed (until its deliver time), ready, in flight (claimed,
// until its claim deadline) or dead. It becomes due at its deliver time (a
// Nack's: now + delay; a Redrive's: now), or, when a claim of it expires,
// at the claim's deadline: it is then ready again, or, if that claim was
// its MaxAttempts-th delivery, dead. Ready messages are claimed in the
// order they became due (ties: in enqueue order, a redriven message
// counting as enqueued when redriven), whichever way they became due. Stats counts exactly by these times, however many messages
// came due at once.
//
// Lifetimes: a message lives until it is acked, or until DeadLetterTTL
// (the store's option; DefaultDeadLetterTTL) after it died; a dedup ID
// until its DedupWindow ends. Nothing else is kept: each operation deletes,
// in bounded batches of at most UpkeepBatch, what has ended, and a queue
// nobody uses any more frees its records by itself (on Redis every key of
// it has a TTL or holds only live messages; the memory store's sweep does
// the same).
type Queues interface {
	// Enqueue adds a message, or, if DedupID matches a message enqueued within
	// its DedupWindow, returns that message's ID and deliver time with
	// Duplicate true and adds nothing (with Replace, see NewMessage). It
	// wakes QueueTopic(queue).
	Enqueue(ctx context.Context, queue string, msg NewMessage) (Enqueued, error)
	// Claim hands out up to len(req.Tokens) ready messages, the highest
	// Priority first, then in the order they became ready (came due,
	// expired, were nacked or redriven; exactly so while at most
	// UpkeepBatch come due between two Claims): each one's attempt goes up
	// by one, its claim deadline becomes now + Visibility, and its receipt
	// is MakeReceipt(id, attempt, token). A message of a Group is ready only
	// while it is the group's head: every message of the group enqueued
	// before it is acked or dead, so a group has at most one message in
	// flight, delivered in enqueue order. NextDue tells how long until the
	// next delayed message is due or the next claim with attempts left
	// expires (what can make a message ready; 0: none), for a waiter's
	// fallback timer.
	Claim(ctx context.Context, queue string, req Claim) (Claimed, error)
	// Ack deletes the messages of live claims, all in one step: acked[i]
	// reports whether receipts[i] was the receipt of a live claim (one that
	// expired, was acked, nacked or redelivered, or never existed, is false
	// and changes nothing). The next message of an acked message's group
	// becomes its head (ready, waking QueueTopic(queue), or delayed until its
	// deliver time); so it does when a group's head dies.
	Ack(ctx context.Context, queue string, receipts []string) (acked []bool, err error)
	// Nack ends a live claim: the message is delayed by delay (ready at once
	// for 0, waking QueueTopic(queue)), or is dead if it has had MaxAttempts
	// deliveries. ErrReceiptExpired if the claim is not live.
	Nack(ctx context.Context, queue, receipt string, delay time.Duration) (Nacked, error)
	// ExtendClaim sets a live claim's deadline to now + visibility.
	// ErrReceiptExpired otherwise.
	ExtendClaim(ctx context.Context, queue, receipt string, visibility time.Duration) (time.Time, error)
	// Stats counts the queue's messages by state, exactly; a message waiting
	// behind its group's head counts as delayed.
	Stats(ctx context.Context, queue string) (QueueStats, error)
	// Redrive moves up to max dead messages, oldest first, to ready (due
	// now, after every message already ready of its priority; a message of
	// a group behind the group's messages) with their attempts reset to 0
	// and their EnqueueTime now (a redrive is a new enqueue), and wakes
	// QueueTopic(queue) if it moved any.
	Redrive(ctx context.Context, queue string, max int) (int, error)
	// RedriveIDs moves exactly those of ids that are dead letters of queue
	// (a claim that ended on its last attempt counts as dead, as for
	// Stats) to ready, as Redrive moves each, all in one step, and wakes
	// QueueTopic(queue) if it moved any. An ID that is not a dead letter
	// (unknown, forgotten, live, or repeated in ids after it was moved) is
	// skipped and changes nothing. It returns how many it moved. len(ids)
	// is at most MaxRedriveIDs.
	RedriveIDs(ctx context.Context, queue string, ids []string) (int, error)
	// ListDead returns up to max dead letters of queue (dead as Stats
	// counts them), in the order they died, oldest first, then by enqueue
	// order (DeadLetter.Seq), starting after the position after (the zero
	// DeadPos: the first), each with at most preview bytes of its payload.
	// It changes no message, and reads them in one step. Fewer than max
	// means there are no more (as of that step). max <= MaxListDead,
	// preview <= MaxDeadPreview.
	ListDead(ctx context.Context, queue string, after DeadPos, max, preview int) ([]DeadLetter, error)
	// PurgeDead deletes up to max dead letters of queue, oldest first (the
	// order of ListDead), for good, in one step, and returns how many it
	// deleted and how many dead letters the queue still has. A purged
	// message of a group that was the group's head (a claim that ended on
	// its last attempt) lets the group move on, as when it died. max <=
	// MaxPurgeDead.
	PurgeDead(ctx context.Context, queue string, max int) (purged, remaining int64, err error)
	// PartitionName names partition p (0 <= p < k, k <= MaxPartitions) of
	// queue spread over k partitions: a queue of its own, placed so that
	// the k partitions of one queue spread over the store's shards (on a
	// Redis Cluster, partition p's slot lies in the middle of the p-th
	// k-th of the slot range, so k partitions land on k masters when the
	// slots are split evenly). Partition 0 of 1 is queue itself. Another queue's name (one
	// that passes validate.Name) or another (p, k) never gives the same
	// name. A pure function of its arguments.
	PartitionName(queue string, p, k int) string
	// QueueSettings returns queue's settings (the zero QueueSettings if
	// none were set). It creates nothing.
	QueueSettings(ctx context.Context, queue string) (QueueSettings, error)
	// PauseQueue pauses (paused true) or resumes queue and returns its
	// settings; its caps stay as they are. Resuming wakes
	// QueueTopic(queue).
	PauseQueue(ctx context.Context, queue string, paused bool) (QueueSettings, error)
	// ConfigureQueue replaces queue's caps (MaxInFlight, RateLimit and
	// RatePeriod of c; its Paused is ignored and stays as it is) and
	// returns its settings. A new or changed claim rate starts with a
	// full bucket. It wakes QueueTopic(queue). A queue whose settings are
	// the zero QueueSettings keeps no record of them.
	ConfigureQueue(ctx context.Context, queue string, c QueueSettings) (QueueSettings, error)
	// ReserveClaims is the first step of a Claim on a queue spread over
	// partitions, whose settings (on queue, the partitioned queue's own
	// name) bound all of its partitions at once: it takes up to
	// len(tokens) of queue's slots (MaxInFlight) and claim-rate tokens,
	// each slot a reservation by its token until now + hold, all in one
	// step, and returns how many it took (the first N tokens'), as Claim
	// would hand out on a queue of one (a paused queue: none), with
	// NextDue and HeldBack as Claim's. The partitions' claims then use
	// those tokens (Claim.Reserved); ReleaseClaims ends the reservations.
	ReserveClaims(ctx context.Context, queue string, tokens []string, hold time.Duration) (Reserved, error)
	// ReleaseClaims ends the reservations of tokens (their claims ended,
	// or, unused, the claim-rate tokens they took are given back too) and
	// wakes QueueTopic(queue) if the queue was at its cap. A token with
	// no reservation is skipped.
	ReleaseClaims(ctx context.Context, queue string, tokens []string, unused bool) error
	// HoldReservations sets the end of the reservations of tokens to now +
	// hold, making again those that ended: their claims are live until
	// then (a claim that took longer than its reservation, an extended
	// claim).
	HoldReservations(ctx context.Context, queue string, tokens []string, hold time.Duration) error
	// Partitionings records that queue is spread over k partitions, besides
	// every k recorded for it before, and returns every k recorded, in
	// increasing order, 1 among them: the partitionings that may hold the
	// queue's messages. The record has no expiry and no k ever leaves it,
	// so that a partition is visited as long as it may hold a message.
	Partitionings(ctx context.Context, queue string, k int) ([]int, error)
}

// QueueSettings are a queue's settings, enforced by Claim in the same
// step as the claim: a paused queue hands out nothing; with MaxInFlight >
// 0, a Claim hands out at most MaxInFlight minus the queue's live claims;
// with RateLimit > 0, at most RateLimit messages are handed out per
// RatePeriod (a token bucket of RateLimit tokens refilled at RateLimit
// per RatePeriod, starting full). A Claim that the caps stop from handing
// out all it asked for reports in NextDue when the next token comes (a
// freed slot wakes QueueTopic: Ack, Nack and the claim expiries that
// NextDue already counts).
type QueueSettings struct {
	Paused      bool
	MaxInFlight int
	RateLimit   int64
	RatePeriod  time.Duration
}

// Capped reports whether the settings limit claims at all.
func (c QueueSettings) Capped() bool { return c.Paused || c.MaxInFlight > 0 || c.RateLimit > 0 }

// MaxPartitions is the most partitions a queue may be spread over.
const MaxPartitions = 64

// PartitionBase is the name of partition p of k of queue before a store
// places it (PartitionName): queue itself for k = 1; otherwise queue, a
// NUL (which no valid name contains, so no queue's partition is another
// queue) and "k.p".
func PartitionBase(queue string, p, k int) string {
	if k == 1 {
		return queue
	}
	return queue + "\x00" + strconv.Itoa(k) + "." + strconv.Itoa(p)
}

// UpkeepBatch bounds the records of each kind one queue operation deletes
// or moves in its upkeep.
const UpkeepBatch = 1000

// DefaultDeadLetterTTL is how long a dead letter is kept after it died,
// unless the store is told otherwise (config queue.dead_letter_ttl).
const DefaultDeadLetterTTL = 14 * 24 * time.Hour

// NewMessage is a message to enqueue.
type NewMessage struct {
	ID          string // fresh, random
	Payload     []byte
	Delay       time.Duration // used when DeliverTime is zero
	DeliverTime time.Time     // absolute; a past time means now
	MaxAttempts int           // >= 1
	DedupID     string        // "": no deduplication
	DedupWindow time.Duration // how long DedupID is remembered
	// Priority (0 to 9): among ready messages, a higher one is claimed
	// first.
	Priority int
	// Group ("": none): the messages of one group are delivered in enqueue
	// order, one at a time: a message is claimable only once every earlier
	// message of its group is acked or dead.
	Group string
	// Replace: a DedupID that names a message not claimed since its
	// enqueue or redrive (delayed, ready, or waiting behind its group's
	// head) replaces that message's payload, deliver time and priority
	// (it keeps its ID, its place in its group and its enqueue order) and
	// restarts the dedup window, instead of answering Duplicate; one that
	// names a message since claimed, acked or dead gets a new message,
	// which the DedupID names from then on.
	Replace bool
	// MaxMessages, if > 0, caps the messages the queue holds, dead
	// letters included: a new message beyond it is ErrQueueFull (a
	// duplicate is still answered).
	MaxMessages int
}

// Enqueued is the outcome of Enqueue.
type Enqueued struct {
	ID          string
	DeliverTime time.Time
	Duplicate   bool
	Replaced    bool // NewMessage.Replace replaced the message ID names
}

// Claim is a request for ready messages.
type Claim struct {
	Tokens     []string // one fresh token per message wanted
	Visibility time.Duration
	// Reserved: the tokens hold reservations of the partitioned queue
	// this queue is a partition of (ReserveClaims), which its caps
	// counted: the queue's own caps are not applied (its pause is).
	Reserved bool
}

// Reserved is the outcome of ReserveClaims.
type Reserved struct {
	N        int
	NextDue  time.Duration
	HeldBack string
}

// Claimed is the outcome of Claim.
type Claimed struct {
	Messages []Message
	NextDue  time.Duration
	// HeldBack names the setting that kept ready messages from this
	// Claim: "paused", "max_in_flight", "claim_rate", or "" (none did).
	HeldBack string
}

// The settings that hold claims back (Claimed.HeldBack), in the order
// Claim applies them.
var HeldBackReasons = []string{"paused", "max_in_flight", "claim_rate"}

// Message is a claimed message.
type Message struct {
	ID          string
	Payload     []byte
	Receipt     string
	Attempt     int
	MaxAttempts int
	EnqueueTime time.Time
	DeliverTime time.Time
	ExpireTime  time.Time // the claim's deadline
	Priority    int
	Group       string
}

// Nacked is the outcome of Nack.
type Nacked struct {
	DeliverTime time.Time // zero if dead
	Dead        bool
}

// Bounds of one call of the dead-letter operations, so that each does
// bounded work in one step.
const (
	MaxRedriveIDs  = 10000
	MaxListDead    = 500
	MaxDeadPreview = 4096
	MaxPurgeDead   = 10000
)

// DeadLetter describes a dead letter (Queues.ListDead); it has no
// receipt.
type DeadLetter struct {
	ID          string
	Preview     []byte    // the first bytes of the payload
	Size        int       // the payload's size in bytes
	Attempts    int       // deliveries since its last enqueue or redrive
	EnqueueTime time.Time // its enqueue, or its last redrive
	DeadTime    time.Time // when it died
	Priority    int
	Group       string
	Seq         uint64 // its place in the queue's enqueue order
}

// Pos is the position just after d in the order of ListDead.
func (d DeadLetter) Pos() DeadPos { return DeadPos{DeadTime: d.DeadTime, Seq: d.Seq, ID: d.ID} }

// DeadPos is a position in the order of Queues.ListDead: just after the
// dead letter that died at DeadTime with Seq and ID (that one need not
// exist any more). The zero DeadPos is the start.
type DeadPos struct {
	DeadTime time.Time
	Seq      uint64
	ID       string
}

// QueueStats counts a queue's messages by state, and tells whether it is
// paused (QueueSettings.Paused).
type QueueStats struct {
	Ready, Delayed, InFlight, Dead int64
	Paused                         bool
}

// Node is one store node's health, as NodeHealther reports it.
type Node struct {
	Addr      string        // host:port; "" for an in-process store
	Role      string        // "master", "replica", "standalone" or "memory"
	Reachable bool          // it answered a PING within the probe's timeout
	Latency   time.Duration // the PING's round trip; 0 when unreachable
	Breaker   string        // its circuit breaker: "closed", "open" or "" (none)
}

// NodeHealther is implemented by stores that can probe each of their nodes
// (the operator's console shows it). NodeHealth returns when every node has
// answered or ctx has ended; a node that did not answer is not Reachable.
type NodeHealther interface {
	NodeHealth(ctx context.Context) []Node
}

// RateRefund gives k tokens back to the bucket of c whose state is tat at
// now (tokens taken for claims that did not happen), never beyond full.
// The Redis store's scripts compute the same (rateRefund).
func RateRefund(c QueueSettings, tat, now float64, k int) float64 {
	t := float64(c.RatePeriod.Microseconds()) / float64(c.RateLimit)
	return math.Max(tat-float64(k)*t, math.Min(tat, now))
}

// RateTake takes up to n tokens of the claim rate of c (RateLimit > 0)
// from a bucket whose state is tat, its theoretical arrival time in µs
// (GCRA: the bucket is full when tat <= now; 0 is full), at now µs. It
// returns how many it took, the new tat, and, when it took fewer than n,
// the µs until the next token (at least 1; 0 otherwise). The Redis store's
// scripts compute the same (lua/queue_prelude.lua, rateTake).
func RateTake(c QueueSettings, tat, now float64, n int) (took int, newTat, next float64) {
	period := float64(c.RatePeriod.Microseconds())
	t := period / float64(c.RateLimit)
	tat = math.Max(tat, now)
	avail := math.Floor((now+period-tat)/t + 1e-9)
	took = int(math.Max(0, math.Min(float64(n), avail)))
	tat += float64(took) * t
	if took < n {
		next = math.Max(1, math.Ceil(tat+t-period-now))
	}
	return took, tat, next
}

// Schedules is storage of queue schedules (QueueService.PutSchedule): each
// namespace's, by queue (its name within the namespace) and name. Records have
// no expiry: a schedule lives until it is deleted.
type Schedules interface {
	// PutSchedule stores s in namespace ns, replacing the schedule of the
	// same Queue and Name, whose LastTime it keeps (s.LastTime is a new
	// schedule's). A new schedule in a namespace that has max of them is
	// ErrTooManySchedules, and nothing changes.
	PutSchedule(ctx context.Context, ns string, s Schedule, max int) error
	// DeleteSchedule deletes a schedule and reports whether there was one.
	DeleteSchedule(ctx context.Context, ns, queue, name string) (bool, error)
	// ListSchedules returns ns's schedules of queue ("": of every queue),
	// without their payloads, in no particular order.
	ListSchedules(ctx context.Context, ns, queue string) ([]Schedule, error)
	// SchedulePayload returns a schedule's payload; false if there is no
	// such schedule.
	SchedulePayload(ctx context.Context, ns, queue, name string) ([]byte, bool, error)
	// ScheduleNamespaces returns every namespace that has a schedule.
	ScheduleNamespaces(ctx context.Context) ([]string, error)
	// ScheduleTicked records that the schedule's tick at t was enqueued:
	// its LastTime becomes t if that is later. A schedule that is gone
	// stays gone.
	ScheduleTicked(ctx context.Context, ns, queue, name string, t time.Time) error
}

// Schedule is a stored schedule: what each of its ticks enqueues, and
// the latest tick enqueued.
type Schedule struct {
	Queue, Name string // Queue: within the namespace
	Spec        string // as put
	TimeZone    string // IANA; "" is UTC
	Payload     []byte // PutSchedule only: ListSchedules leaves it out
	PayloadSize int    // ListSchedules: the payload's size
	Group       string
	Priority    int
	MaxAttempts int
	// LastTime: the latest tick enqueued, or, before the first, when the
	// schedule was put (ticks come after it).
	LastTime time.Time
}

// QueueCounts are what happened to a queue's messages in one minute, as
// the instances that served it counted (QueueActivity).
type QueueCounts struct {
	Enqueued int64 // new messages (not duplicates)
	Acked    int64
	Retried  int64 // deliveries after the first (a Nack's or an expired claim's)
	Dead     int64 // messages a Nack made dead letters
}

// IsZero reports whether nothing happened.
func (c QueueCounts) IsZero() bool { return c == QueueCounts{} }

// QueueMinute is a queue's counts of one minute.
type QueueMinute struct {
	Minute time.Time // its start
	QueueCounts
}

// ActivityHistory is how long a queue's counts are kept.
const ActivityHistory = time.Hour

// ActivityRegistry bounds the queue names kept per namespace, and
// ActivityRegistryTTL how long a name is kept after its last activity.
const (
	ActivityRegistry    = 1000
	ActivityRegistryTTL = 24 * time.Hour
)

// QueueActivity is storage of what happened to queues, minute by minute,
// for the operator's console: counts instances add up, and a bounded
// registry of each namespace's queue names, so that every instance can
// list every queue of a namespace.
type QueueActivity interface {
	// RecordQueueActivity adds counts (by queue name within namespace ns)
	// to minute's, keeps each queue's last ActivityHistory of minutes, and
	// notes the queues in ns's registry (the ActivityRegistry most recent,
	// for ActivityRegistryTTL).
	RecordQueueActivity(ctx context.Context, ns string, minute time.Time, counts map[string]QueueCounts) error
	// QueueHistory returns the queue's minutes with counts since since,
	// oldest first.
	QueueHistory(ctx context.Context, ns, queue string, since time.Time) ([]QueueMinute, error)
	// ActiveQueues returns the queue names in ns's registry.
	ActiveQueues(ctx context.Context, ns string) ([]string, error)
}
