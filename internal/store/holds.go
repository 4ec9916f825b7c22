package store

import (
	"context"
	"errors"
	"time"
)

// Holds is the storage of every kind of named lease with fencing: locks
// (exclusive or shared), semaphore permits and leaderships. A name of one
// kind is apart from the same name of another kind.
//
// A name has live holders (each with its own token, and a fence greater
// than every fence issued for the name before) and a queue of waiting
// tickets, in arrival order. Who may hold at once depends on the kind:
//   - HoldLock: one exclusive holder, or up to MaxHolders shared holders;
//   - HoldSemaphore: up to Limit holders (the semaphore's limit while it has
//     holders or waiters; another Limit is ErrLimitMismatch);
//   - HoldElection: one holder, the leader, always session-bound (through
//     Elections.Campaign).
//
// Waiting (AcquireLock.Wait): a request that is not granted at once joins
// the queue with its ticket and is told so (Queued). A request is granted
// only if it fits beside the live holders and no live ticket ahead of it
// in the queue would be blocked by it: for a lock, an exclusive request
// waits for every ticket ahead; a shared one only for the exclusive tickets
// ahead (writers are never starved by readers); for a semaphore, a request
// needs a free permit for itself and for every ticket ahead. A request
// without a ticket counts as behind the whole queue (it never jumps it).
// The same request coming back with its ticket (after a wake-up or at
// RetryAt) keeps its place and renews the ticket's lease. A ticket lapses
// when its lease passes without the request coming back or RefreshTickets
// (its coordd died): it then blocks no one. A ticket leaves the queue when
// its request is granted, on LeaveQueue, or when it lapses.
//
// Wake-ups are targeted: whenever a hold ends, a ticket leaves or lapses, or
// a lock-delay ends (whatever lets someone in), the store wakes
// WaitTopic(kind, name, instance) of the instances whose tickets may now be
// granted, and only those, so that the work per grant does not grow with
// the number of waiters.
//
// Hand-off: a ReleaseHold or LeaveQueue made by an instance (its instance
// argument) does not wake that instance's own plain tickets (a lock or a
// semaphore request without a session) that it lets in: it grants them in
// the same step, in queue order, as AcquireHold would have granted their
// requests then (the queued request's token, owner, TTL and max hold), and
// returns them (Handoff) for the instance to answer its waiters with. So a
// hand-off between two waiters of one instance costs the release alone. A
// session-bound ticket, or another instance's, is woken as above: a grant
// is only ever handed to the instance that asked the store for it, which is
// alive to deliver it (a dead instance's tickets are never granted). A
// request coming back with a token that holds already (a hand-off whose
// delivery was lost) is answered with that grant, and its ticket leaves.
//
// Lock-delay: a session-bound hold that ends because its session expired
// (not because its max hold was reached, nor on release, abandon or a clean
// close) keeps its name from being granted to anyone until its deadline +
// the session's lock delay (CreateSession). The not-granted answer's RetryAt
// is then the delay's end.
type Holds interface {
	// AcquireHold grants a hold of req.Kind (HoldLock or HoldSemaphore);
	// the rest is as Locks.AcquireLock.
	AcquireHold(ctx context.Context, req AcquireLock) (LockGrant, error)
	// RenewHold, AbandonHold and GetHolds are Locks' RenewLock, AbandonLock
	// and GetLock for a hold of any kind.
	RenewHold(ctx context.Context, kind HoldKind, name, token string, ttl time.Duration) (Lease, error)
	AbandonHold(ctx context.Context, kind HoldKind, name, token, ticket string) error
	GetHolds(ctx context.Context, kind HoldKind, name string) (LockInfo, error)
	// ReleaseHold is Locks' ReleaseLock for a hold of any kind, made by
	// instance ("": none): the plain tickets of instance that the release
	// lets in are granted at once and returned (Released.Handoffs). A token
	// that does not hold may still let tickets in (its expiry is cleaned
	// up), so a false Released may come with hand-offs.
	ReleaseHold(ctx context.Context, kind HoldKind, name, token, instance string) (Released, error)
	// LeaveQueue takes a waiting ticket out of the queue (its caller gave
	// up) and lets in whom that lets in, granting instance's plain tickets
	// (hand-offs, returned) and waking the others. If the ticket is not
	// queued and token (the waiting request's; "" for none) holds a plain
	// hold of the name, a hand-off granted it before its caller gave up:
	// that grant is returned among the hand-offs, with this ticket, and
	// nothing changes (the caller answers with it, or abandons it). An
	// unknown ticket is not an error.
	LeaveQueue(ctx context.Context, kind HoldKind, name, ticket, token, instance string) ([]Handoff, error)
	// RefreshTickets renews the leases of tickets still waiting to now +
	// lease, and returns those that are not in the queue any more (they
	// lapsed, or were granted or left): their requests must come back
	// without them to queue again, at the back. It also drops lapsed
	// tickets and wakes whom that lets in.
	RefreshTickets(ctx context.Context, kind HoldKind, name string, tickets []string, lease time.Duration) (gone []string, err error)
	// CheckFence reports whether a live holder of (kind, name) has fence
	// (Chubby's CheckSequencer).
	CheckFence(ctx context.Context, kind HoldKind, name string, fence uint64) (bool, error)
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
	Grant         LockGrant
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

// HolderInfo describes one live holder. Like LockInfo, never its token nor
// its session's ID.
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
// forgotten after a while (memory: an hour after its last change; Redis: a
// day), and its revisions then start again from 1.
type Elections interface {
	// Campaign makes req.SessionID the leader with req.Value if the election
	// has no leader and no ticket ahead (waiting as in Holds, kind
	// HoldElection), and wakes ElectionTopic(name). A session that already
	// leads gets its existing term back (AlreadyLeader, its Token
	// included). Session errors as AcquireLock's.
	Campaign(ctx context.Context, req Campaign) (Campaigned, error)
	// Proclaim sets the leader's value (a new revision; waking
	// ElectionTopic). ErrNotLeader if token does not lead.
	Proclaim(ctx context.Context, name, token string, value []byte) error
	// Resign ends token's leadership (a new revision: no leader), waking
	// the election's waiters and ElectionTopic; false if token does not
	// lead.
	Resign(ctx context.Context, name, token string) (bool, error)
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
	MaxSessionLocks int // as AcquireLock's
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
