package store

import (
	"context"
	"errors"
	"time"
)

// HoldKind is a kind of hold: a named lease with a fence. Kinds never
// contain ':' (the Redis store keys a session's holds by "kind:name").
type HoldKind string

// Hold kinds.
const (
	HoldLock      HoldKind = "lock"      // a lock, exclusive or shared
	HoldSemaphore HoldKind = "semaphore" // a semaphore's permit
	HoldElection  HoldKind = "election"  // a leadership (Elections)
)

// MaxLockDelay is the longest session lock-delay.
const MaxLockDelay = time.Minute

// Holds stores holds of every kind: locks (exclusive or shared),
// semaphore permits and leaderships. A name of one kind is apart from the
// same name of another kind.
//
// A hold is live while now < its deadline. A name has live holders, each
// with its own token and a fence, and a queue of waiting tickets in
// arrival order. Who may hold at once depends on the kind:
//   - HoldLock: one exclusive holder, or up to MaxHolders shared holders;
//   - HoldSemaphore: up to Limit holders (the limit of the semaphore's
//     holders and waiters; another Limit is ErrLimitMismatch);
//   - HoldElection: one leader, always session-bound (Elections.Campaign).
//
// Fences: fence = max(counter + 1, floor), where the floor is the store's
// time in Unix microseconds, and the counter becomes the fence. So every
// fence is greater than every fence issued for its name before, even if the
// counter is lost, as long as the store's clock does not step back past it.
// The Redis store keeps a counter per name, which ends its idle name ttl
// after the name's last grant; the memory store one for every name.
//
// Waiting (HoldRequest.Wait): a request that is not granted at once joins
// the queue with its ticket (Grant.Queued). A request is granted only if it
// fits beside the live holders and would block no live ticket ahead: for a
// lock, an exclusive request waits for every ticket ahead, a shared one for
// the exclusive tickets ahead only (writers never starve); for a
// semaphore, a request needs a free permit for itself and for every ticket
// ahead. A request without a ticket counts as behind the whole queue. The
// same request coming back with its ticket keeps its place and renews the
// ticket's lease. A ticket lapses when its lease passes without the request
// coming back or RefreshTickets (its coordd died), and then blocks no one.
//
// Wake-ups are targeted: whatever lets someone in (a hold ending, a ticket
// leaving or lapsing, a lock-delay ending) wakes WaitTopic(kind, name,
// instance) of exactly the instances whose tickets may now be granted, so
// that the work per grant does not grow with the number of waiters.
//
// Hand-off: a ReleaseHold or LeaveQueue made by an instance grants that
// instance's own plain tickets (a lock's or a semaphore's request without
// a session) that it lets in, in the same step and in queue order, as
// AcquireHold would have granted their requests, and returns them
// (Handoff). A session-bound ticket, or another instance's, is woken
// instead: a grant is only ever handed to the instance that asked for it.
// A request coming back with a token that holds already (a hand-off whose
// delivery was lost) is answered with that grant, and its ticket leaves.
//
// Lock-delay: a session-bound hold that ends because its session expired
// (not at its max hold, nor on release, abandon or a clean close) keeps its
// name from everyone until its deadline + the session's lock-delay; the
// not-granted answer's RetryAt is then the delay's end.
type Holds interface {
	// AcquireHold grants a hold of req.Kind (HoldLock or HoldSemaphore) if
	// it fits, with the caller's fresh token. The lease is TTL from now, or,
	// with SessionID, the session's (the hold joins the session's set: an
	// unknown or expired session is ErrSessionNotFound; a session with
	// MaxSessionHolds holds already is ErrTooManyHolds, and nothing is
	// granted; a live hold the session has already is answered with that
	// grant, AlreadyHeld, its token included). MaxHold > 0 caps the lease at
	// grant time + MaxHold, now and on every renewal. A session-bound grant
	// wakes SessionTopic(SessionID). Not granted is not an error: Acquired
	// is false and the grant describes the blocking holder.
	AcquireHold(ctx context.Context, req HoldRequest) (Grant, error)
	// RenewHold sets a live plain hold's deadline to now + ttl, capped by its
	// MaxHold: ErrNotHeld if token holds no live hold, ErrSessionBound if the
	// hold is its session's (renewed with it).
	RenewHold(ctx context.Context, kind HoldKind, name, token string, ttl time.Duration) (Lease, error)
	// AbandonHold ends a grant whose caller was told its outcome is
	// uncertain: ticket ("": none) leaves the queue first, so that nothing
	// hands the hold to token afterwards; then the hold is deleted if token
	// holds it live, and a session-bound one becomes a loss report
	// (LostGone, waking SessionTopic), so that a stream that adopted it
	// (AlreadyHeld) learns that it is gone. Not held is not an error.
	AbandonHold(ctx context.Context, kind HoldKind, name, token, ticket string) error
	// GetHolds describes the live holders and counts the live tickets.
	GetHolds(ctx context.Context, kind HoldKind, name string) (HoldInfo, error)
	// ReleaseHold deletes the hold if token holds it live (and takes it out
	// of its session's set), made by instance ("": none, nothing is handed
	// off): the plain tickets of instance it lets in are granted and
	// returned (Released.Handoffs). A token that does not hold may still
	// let tickets in (an expiry cleaned up), so a false Released may come
	// with hand-offs.
	ReleaseHold(ctx context.Context, kind HoldKind, name, token, instance string) (Released, error)
	// LeaveQueue takes a waiting ticket out of the queue (its caller gave
	// up) and lets in whom that lets in, granting instance's plain tickets
	// (hand-offs, returned) and waking the others. If the ticket is not
	// queued and token (the waiting request's; "" for none) holds a plain
	// hold of the name, a hand-off granted it before its caller gave up:
	// that grant is returned among the hand-offs, with this ticket, and
	// nothing changes. An unknown ticket is not an error.
	LeaveQueue(ctx context.Context, kind HoldKind, name, ticket, token, instance string) ([]Handoff, error)
	// RefreshTickets renews the leases of the tickets still waiting to now +
	// lease and returns those that are not in the queue any more (lapsed,
	// granted or left: their requests must queue again, at the back). It
	// drops lapsed tickets and wakes whom that lets in.
	RefreshTickets(ctx context.Context, kind HoldKind, name string, tickets []string, lease time.Duration) (gone []string, err error)
	// CheckFence reports whether a live holder of (kind, name) has fence
	// (Chubby's CheckSequencer).
	CheckFence(ctx context.Context, kind HoldKind, name string, fence uint64) (bool, error)
}

// HoldRequest asks for a hold.
type HoldRequest struct {
	Kind      HoldKind // HoldLock or HoldSemaphore
	Name      string
	Token     string        // fresh, random; proves ownership later
	Owner     string        // a label shown to others
	TTL       time.Duration // the lease; ignored with SessionID
	MaxHold   time.Duration // 0: no cap
	SessionID string        // "": a plain lease
	// MaxSessionHolds caps the holds of every kind a session has at once,
	// its unacknowledged loss reports included; 0: no cap (tests only).
	MaxSessionHolds int
	// Shared asks for a shared hold (HoldLock only).
	Shared bool
	// MaxHolders caps a lock's shared holders at once; 0: no cap (tests
	// only).
	MaxHolders int
	// Limit is a semaphore's number of permits (HoldSemaphore: >= 1).
	Limit int
	// Wait, if not nil, queues the request when it is not granted at once.
	Wait *WaitTicket
}

// Grant is the outcome of AcquireHold.
type Grant struct {
	Acquired bool
	// AlreadyHeld: the asking session held it already; the grant is that
	// one, and Token is its token.
	AlreadyHeld bool
	Token       string
	// Fence of the new grant; 0 when not acquired.
	Fence uint64
	// Acquired: the caller's lease. Not acquired: the blocking holder's
	// remaining lease.
	TTL        time.Duration
	ExpireTime time.Time
	// Holder is the blocking holder's Owner label when not acquired (with
	// several, the one whose lease ends first).
	Holder string
	// Queued: not acquired, and the request's ticket waits in the queue.
	Queued bool
	// RetryAt, when not acquired and not zero, is when the state may change
	// by itself (a blocking holder's deadline, a lock-delay's end); zero:
	// only a wake-up can let the request in.
	RetryAt time.Time
	// Holders counts the live holders after the call; Limit is a
	// semaphore's limit.
	Holders, Limit int
}

// Lease is a renewed hold's lease.
type Lease struct {
	TTL        time.Duration
	ExpireTime time.Time
	Fence      uint64
}

// HoldInfo describes a name's live holders, never their tokens nor their
// sessions' IDs (secrets of the holders). The single-holder fields
// describe the holder with the lowest fence; Holders lists every live
// holder, by fence.
type HoldInfo struct {
	Holders      []HolderInfo
	Waiters      int // live tickets in the queue
	Limit        int // a semaphore's limit (0 without holders or waiters)
	Held         bool
	Owner        string
	Fence        uint64
	SessionBound bool
	TTL          time.Duration
	ExpireTime   time.Time
	AcquireTime  time.Time
}

// Released is the outcome of ReleaseHold.
type Released struct {
	Released bool
	Held     time.Duration // how long the hold had been held, when Released
	// Handoffs are the releasing instance's waiting requests that the
	// release granted (see Holds), in queue order.
	Handoffs []Handoff
}

// Handoff is a grant made to a waiting request by another call of its
// instance (ReleaseHold, LeaveQueue): the request's ticket and token, and
// the grant as AcquireHold would have answered the request (Acquired,
// Fence, TTL, ExpireTime, Holders, Limit).
type Handoff struct {
	Ticket, Token string
	Grant         Grant
}

// WaitTicket puts a request that is not granted at once in the queue of its
// name.
type WaitTicket struct {
	Ticket   string        // fresh, random, one per waiting call; kept for every retry of it
	Instance string        // the waiting coordd's ID: its wake-ups are WaitTopic(kind, name, Instance)
	Lease    time.Duration // the ticket lapses unless the request comes back, or is refreshed, within it
}

// WaitLease is the ticket lease coordd uses; a waiting coordd refreshes its
// tickets every WaitRefresh, so that one that dies stops blocking others
// within WaitLease + WaitRefresh.
const (
	WaitLease   = time.Second
	WaitRefresh = 300 * time.Millisecond
)

// MaxWaiters bounds a name's queue: a request that would be the next is
// ErrTooManyWaiters.
const MaxWaiters = 10000

// WaitTopic is the wake-up topic of the tickets of instance waiting for
// (kind, name): one of them may be granted now. Instance IDs never contain
// ':'.
func WaitTopic(kind HoldKind, name, instance string) string {
	return "wait:" + string(kind) + ":" + instance + ":" + name
}

// HolderInfo describes one live holder, never its token nor its
// session's ID.
type HolderInfo struct {
	Owner        string
	Fence        uint64
	Shared       bool
	SessionBound bool
	TTL          time.Duration
	ExpireTime   time.Time
	AcquireTime  time.Time
}

// More errors of holds.
var (
	// ErrLimitMismatch: a semaphore request's Limit differs from the limit
	// of the semaphore's holders and waiters.
	ErrLimitMismatch = errors.New("limit differs from the semaphore's")
	// ErrTooManyWaiters: the name's queue has MaxWaiters tickets.
	ErrTooManyWaiters = errors.New("too many waiters")
	// ErrNotLeader: the token does not lead the election.
	ErrNotLeader = errors.New("not the leader")
)

// Elections is leader-election storage. An election is a hold of kind
// HoldElection on its name: one leader at a time, always bound to a
// session (it leads as long as its session lives), each term with a fence
// greater than every earlier term's, and a value the leader sets. Every
// change of an election (a new leader, a new value, no leader) gets the
// next revision (from 1) and is kept in a log of the last ElectionLogSize
// changes, so that observers on every instance see every change, in order.
// A leadership that ended without a store call (its session expired) is
// logged as "no leader" by the first call on the election after its end,
// before anything else. An election with no leader and no ticket is
// forgotten its idle name ttl (an hour by default) after its last change,
// and its revisions then start again from 1. A leader resigns by
// Holds.ReleaseHold (kind HoldElection): a new revision, no leader, waking
// the waiters and ElectionTopic.
type Elections interface {
	// Campaign makes req.SessionID the leader with req.Value if the election
	// has no leader and no ticket ahead (waiting as in Holds, kind
	// HoldElection), and wakes ElectionTopic(name). A session that already
	// leads gets its existing term back (AlreadyLeader, its Token
	// included). Session errors as AcquireHold's.
	Campaign(ctx context.Context, req Campaign) (Campaigned, error)
	// Proclaim sets the leader's value (a new revision; waking
	// ElectionTopic). ErrNotLeader if token does not lead.
	Proclaim(ctx context.Context, name, token string, value []byte) error
	// Leader describes the current leader.
	Leader(ctx context.Context, name string) (LeaderInfo, error)
	// ElectionChanges returns the changes after revision after, in order,
	// and the current leader.
	ElectionChanges(ctx context.Context, name string, after uint64) (ElectionLog, error)
}

// ElectionLogSize is how many changes an election's log keeps.
const ElectionLogSize = 64

// ElectionTopic is the wake-up topic of an election's observers: it
// changed.
func ElectionTopic(name string) string { return "elect:" + name }

// Campaign is a request to lead an election.
type Campaign struct {
	Name            string
	Token           string // fresh, random
	SessionID       string // required
	Value           []byte
	MaxSessionHolds int // as HoldRequest's
	Wait            *WaitTicket
}

// Campaigned is the outcome of Campaign.
type Campaigned struct {
	Elected       bool
	AlreadyLeader bool   // the session led already; Token is its term's
	Token         string // AlreadyLeader only
	Fence         uint64 // the term's fence when elected
	ExpireTime    time.Time
	Queued        bool       // not elected; the ticket waits
	RetryAt       time.Time  // not elected: when the leadership may end by itself
	Leader        LeaderInfo // not elected: the current leader
}

// LeaderInfo describes an election's leader.
type LeaderInfo struct {
	HasLeader  bool
	Value      []byte
	Fence      uint64
	ElectTime  time.Time // when the term began
	ExpireTime time.Time // when it ends unless its session is renewed
	Rev        uint64    // the revision of the election's last change (0: never had one)
}

// ElectionChange is one change of an election: the leader after it
// (HasLeader false: no leader).
type ElectionChange struct {
	Rev    uint64
	Leader LeaderInfo
}

// ElectionLog is the answer to ElectionChanges.
type ElectionLog struct {
	// Changes after the asked revision, in order (at most ElectionLogSize).
	Changes []ElectionChange
	// Missed counts changes after the asked revision that the log no
	// longer has (they came before Changes[0]): the caller fell behind.
	Missed uint64
	// Current is the leader now (its Rev is the last change's).
	Current LeaderInfo
}
