// Package soak holds coordd's soak test: a bounded, mixed load of
// every RPC from many client goroutines over several gRPC connections, with
// clients that disconnect at random, followed by a quiet period and a check
// that coordd gave everything back.
//
// The server and its store run in the test process, wired as
// cmd/coordd's newDaemon wires them (domain and gRPC metrics, the default
// limits against abuse, message size and stream limits), so that the test
// can measure the heap and the goroutines of the server itself:
//
//	go test -race -count=1 -v ./soak                              # 60 s of load on the memory store
//	go test -count=1 -v ./soak -args -soak.duration=10m           # longer
//	eval "$(scripts/redis-cluster.sh start)"
//	go test -count=1 -v ./soak -args -soak.backend=cluster        # on the shared Redis Cluster (or redis: standalone)
//
// Other flags: -soak.quiet (the quiet period), -soak.warmup (the burst
// before the baseline), -soak.conns (stable connections, 4), -soak.scale
// (workers of each kind, times this), -soak.profiles DIR (heap and
// goroutine profiles at the baseline and after, every allocation sampled:
// go tool pprof -base DIR/heap-before.pb.gz DIR/heap-after.pb.gz).
//
// # The load
//
// Worker goroutines of six kinds run scenarios until -soak.duration
// (default 60 s; with -short, 5 s) has passed, each on one of
// -soak.conns stable connections or, now and then, on a connection of its
// own that is closed at a random moment, mid-call:
//
//   - locks: Lock with and without wait (and max_hold), Renew, GetLock,
//     Release, stale tokens; some locks are abandoned to expire;
//   - sessions: KeepAlive streams (TTL 1-2 s) holding session-bound locks
//     (Lock with session_id, with and without wait; Renew of one is
//     LOCK_SESSION_BOUND), ended by half-close, by breaking the stream
//     without half-close (the session lives to its TTL), by breaking it and
//     resuming the session on a new stream, or by going silent until the
//     server reports the session expired;
//   - rate limits: Allow with each algorithm, inline and through named
//     policies (one in shadow mode), with cost and peek;
//   - idempotency: BeginIdempotent with and without wait, ExtendIdempotent,
//     Finish with a result, a failure or a retryable failure, keys abandoned
//     by their owner, Finish after the lease ran out, fingerprint mismatches;
//   - queue producers: Enqueue with delay, deliver_time, dedup_id and small
//     max_attempts, with back-pressure from Stats;
//   - queue consumers: Claim with and without wait, Ack, Nack (with and
//     without delay), Extend, Stats, Redrive; claims are abandoned.
//
// Any call may also have its context cancelled or timed out mid-call. A
// controller measures a GetLock's latency every 100 ms and makes the workers
// pause between scenarios (up to 100 ms) while it is over a target (3 times
// the idle latency, 40-150 ms), so that the load adapts to the machine (the
// race detector makes everything several times slower, and CI machines are
// shared) instead of starving heartbeats.
//
// Every TTL is short (locks, claims and leases at most 2 s, sessions 1-2 s,
// rate-limit periods at most 1 s, idempotency results and abandoned keys and
// queue dedup entries 2 s) so that a quiet period of a few seconds
// (-soak.quiet, default 6 s) lets everything run out; the memory store
// sweeps every 100 ms.
//
// # The checks
//
// The baseline is measured (two GCs, then runtime.ReadMemStats and the
// goroutine count) with the server up and the stable connections idle,
// after a warm-up: every RPC once on every connection, then a short burst of
// the load itself (-soak.warmup, 3 s), drained, and a pause for its leases
// to run out. Without the burst, the heap after a load is a few hundred KiB
// higher whatever the load's length (10 s or 60 s alike): HPACK tables, map
// and pool capacities, runtime goroutine descriptors, metric series and
// caches grow to a working size and stay; with it, what grows is what a
// leak looks like.
//
// After the load, the test acks every message (redriving dead letters),
// waits out the quiet period, and then requires:
//
//   - no call of the load ended INTERNAL or UNKNOWN, nor with any code the
//     call could not legitimately get (CANCELLED or DEADLINE_EXCEEDED only
//     when the test cancelled it, UNAVAILABLE only on a connection the test
//     closed or, on Redis, STORE_UNAVAILABLE; FAILED_PRECONDITION only with
//     the reasons the call may get); the server logged no error, recorded
//     no panic, and reports no open KeepAlive stream;
//   - every queue's Stats are zero, every message enqueued was acked (or
//     its Ack's outcome was unknown to the client), none was acked twice;
//   - GetLock shows every lock name used free; BeginIdempotent on every
//     idempotency key used answers EXECUTE (the probe then clears it with a
//     retryable failure);
//   - resuming every session ID used ends with SESSION_NOT_FOUND (after an
//     expired=true response for the sessions still within
//     store.SessionGrace, a minute, whose records the store keeps that long
//     on purpose: the only records the test leaves before this probe). The
//     IDs are those the clients learned and those the server answered with
//     (a stream interceptor sees them): a session created for a client
//     whose connection closed before the answer arrived is probed too;
//   - on the memory store, Len() after the probe is the number of sessions
//     it found within their grace (less those whose grace has ended
//     since), and 0 once the last one's grace has ended (the test waits for
//     that, up to a minute); on Redis, only the
//     keys meant to outlive everything are left: each lock name's fence
//     counter, each queue's enqueue counter and the namespace's session
//     index, and the keys of the sessions within their grace (the test
//     deletes its keys at the end);
//   - the heap (HeapAlloc and HeapInuse after two GCs) — on the memory
//     store, measured once the sessions' grace has ended: their records,
//     allocated all through the load, each keep a span of the heap in use
//     (0.17-0.27 MiB of HeapInuse for 57-88 sessions, in six runs) — is at
//     most max(10 %, 1 MiB) above its baseline — on Redis, plus the buffers of
//     the connections the go-redis pools opened since the baseline and keep
//     open (64 KiB each, 256 KiB for a pipeline connection); the number of
//     goroutines is back to its baseline (the excess stacks are printed
//     otherwise);
//   - after the clients and the server are shut down, no goroutine is left
//     (goleak, in the test and in TestMain).
package soak
