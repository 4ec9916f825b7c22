// Package linearizability checks that coordd's locks, shared locks and
// semaphores are linearizable: that every history of concurrent Lock,
// Renew, Release and GetLock calls seen through the gRPC API (and of
// AcquireHold, RenewHold, ReleaseHold, GetHolds and LeaveQueue calls on a
// store) can be explained by the calls taking effect one at a time, each at
// some instant between its call and its return, in the order of a
// sequential lease lock (or of a name's holds).
//
// Its tests record histories (16 concurrent clients for a few seconds, on two
// lock names, through a coordd gRPC server on loopback; a little longer when
// a loaded machine has not yet produced every kind of answer) and check them
// with github.com/anishathalye/porcupine against a sequential model of a lock:
//
//   - Lock on a free lock grants it, with a new token and a fence greater
//     than every fence issued before for the name, unless tickets of
//     waiting Lock calls are ahead of it (waiters are served in arrival
//     order; the model does not see the queue): it is then not acquired
//     and names no holder. On a held lock it is not acquired and names the
//     holder's owner label.
//   - Renew succeeds, reporting the lock's fence, if and only if its token
//     holds the lock; otherwise LOCK_NOT_HELD.
//   - Release frees the lock and answers released=true if and only if its
//     token holds it; otherwise it changes nothing.
//   - GetLock answers held, the owner label and the fence of the holder.
//
// Leases are 30 s long, far longer than a test, so that expiry is not part of
// the model. Tokens and fences are chosen by the server, so the model takes
// them from the outputs: the state is the grant of the Lock that acquired
// (token, owner, fence) and the highest fence issued so far.
//
// A call that fails (UNAVAILABLE, a deadline) has an unknown outcome: it is
// recorded as never returning (on the memory store behind injected faults,
// where a call takes effect within it or not at all, as returning when it
// did) and the model lets it take effect or not. A Lock that fails may have
// granted the lock to a token the client never saw, which the server then
// tries to release; the model follows both the grant and that clean-up (one
// that may come at any later moment is part of the model's state, not an
// operation: state.Orphan).
//
// The tests run on the embedded memory store and on the shared Redis Cluster
// (internal/redistest; they fail under CI when it is missing, and are skipped
// otherwise), with injected store faults on the memory store, and show that
// the checker bites: a server whose Release ignores the token, one whose
// GetLock answers stale, hand-made illegal histories, and a wrong model, are
// all reported as not linearizable. Every check is bounded (10 s; search
// hints derived from the history keep it well under a second), and a check
// that times out fails the test: porcupine's Unknown is never a pass. On an
// unexpected result, a timeout included, the history's visualization is
// written to a temporary HTML file named in the failure; -linearizability.viz
// DIR writes the visualizations of the expected failures there too.
//
// The holds of shared locks and semaphores (store.Holds) are checked the
// same way, recorded on the stores directly (12 clients on three names for
// 2 s, up to 8 s until every kind of answer has been seen), on the memory
// store, the shared standalone Redis and the shared Redis Cluster, against
// a sequential model of one name's holds with its queue of tickets
// (holds_model_test.go): an exclusive request is granted only with no
// holder and no ticket ahead; a shared one beside shared holders only,
// under MaxHolders, with no exclusive ticket ahead; a semaphore request
// only if its holders and the tickets ahead leave a permit, under the
// limit of its holders and waiters (another is ErrLimitMismatch); a request
// without a ticket is behind the whole queue; a third of the requests wait,
// come back with their ticket a few times, and leave the queue. Leases and
// ticket leases are 30 s, so that their expiry is not part of the model.
// With sessions (the TestSession* tests), each client keeps a session of
// 500 ms without lock-delay, binds half of its requests that do not wait
// to it, renews it every 100 ms and drops it one step in a hundred; the
// recorder adds the session's expiry to the history as an operation that
// takes effect somewhere in its last renewal's call and return plus the
// TTL, and the model ends the session's holds there: a session-bound hold
// is live exactly while its session is, whoever reads it and however late
// (no coordd sweeps anything in these tests), an expired session gets no
// grant, and its holder asking again is answered with its grant
// (AlreadyHeld). A not-granted answer must name a
// holder that blocks it (with a RetryAt), or none when only tickets ahead
// do. The checker is shown to bite with a store that takes one exclusive
// request in four for a shared one (and hides it from GetHolds), one whose
// semaphores let Limit+1 in, hand-made illegal histories and a model that
// lets readers past waiting writers, one that keeps session-bound holds on
// leases of their own (they outlive their session) and one that hides the
// holds of live sessions; and the model to follow unknown outcomes with
// injected faults.
//
//	eval "$(scripts/redis-cluster.sh start)"
//	go test -race -v ./linearizability
//
// The package has no code of its own.
//
// A queue's max_in_flight is checked the same way (queue_cap_test.go):
// histories of 6 clients' Claim, Ack and Nack calls on a store queue with
// a cap of 3, on each store, against a sequential queue whose Claim hands
// out exactly min(asked, cap - in flight, ready); a history recorded under
// a store cap of 4 (a broken cap) is reported not linearizable.
package linearizability
