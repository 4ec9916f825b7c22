// Package failover is coordd's failover suite (GUARANTEES.md): it
// kills Redis Cluster masters, and a coordd instance, under load, and
// checks through coordd's gRPC API what clients can rely on across the
// failure. It has no code of its own; everything is in its tests, which run
// with `go test ./...` (so with scripts/test.sh and .ci/run). They take
// about 2-3 minutes in all under -race on 2 cores (most of it the 20,000
// enqueues of TestQueueFailover, twice; TestReplicationLoss about 50 s),
// longer on a loaded machine; every phase has a deadline.
//
// Every test but TestReplicationLoss starts a PRIVATE Redis Cluster of 3
// masters with 1 replica each (redistest.StartCluster), so that it may kill
// nodes; none touches the shared instances of scripts/redis-cluster.sh. The Redis nodes run with a
// node timeout of 2 s: a killed master's replica takes over 4-5 s after the
// kill (see the redistest package documentation).
//
//   - TestLockFailover: 32 clients loop Lock → write to a fenced resource →
//     Release while the master of the lock's slot is killed, its replica
//     promoted and the old master restarted; once with asynchronous
//     replication and once with redis.wait_replicas=1. The resource accepts
//     a write only if its fence is greater than every fence it accepted
//     before. One Lock in 20 is a zombie's: a 300 ms lease, then a 600 ms
//     pause, then a write with the old fence, which the resource must
//     reject if a later holder has written. Checked: no stale write is ever
//     accepted (judged by real time: a write accepted after the write of a
//     holder whose Lock was sent once the writer's lease had certainly
//     ended), fences never go backwards (a grant that follows another, in
//     real time, has a greater fence), a lease whose TTL has passed can no
//     longer be released. Reported: writes accepted and rejected as stale,
//     double holders (clients whose believed leases overlap), errors, and
//     how long the lock was unavailable. Double holders need a grant that
//     the master acknowledged and that its replica had not received when
//     it died, still believed held after the promotion; with the nodes on
//     one machine a replica receives a write within microseconds of the
//     client, so expect none in either mode: what wait_replicas=1 changes
//     here is availability (no grant while the master has no replica).
//   - TestQueueFailover: 20,000 numbered messages, enqueued with their
//     number as dedup_id (so a retry after UNAVAILABLE is idempotent) and
//     claimed and acked by consumers, through the kill of the queue's
//     master. With wait_replicas=1 no message may be lost and the queue
//     must end empty; with asynchronous replication the loss is measured
//     and reported, not failed on.
//   - TestRateLimitFailover: a fixed window of 100 per second hammered
//     through a master kill; every window's admissions must stay within a
//     stated bound (2 × the limit: one window's count may be lost with the
//     master and start again from 0 on the promoted replica).
//   - TestCoorddRestart: two real coordd processes, A and B, on the private
//     cluster; load clients that know both and retry a call on the other
//     instance after UNAVAILABLE; three sessions opened on A, each with a
//     lock bound to it. A is killed with SIGKILL. One session is resumed on
//     B with its ID at once, one 1.5 s before its TTL runs out; both still
//     hold their locks with the same fences, and no other client could
//     take them meanwhile. The third is abandoned: its lock is free once
//     its TTL has run out. The load moves to B; then A is started again
//     and serves.
//   - TestReplicationLoss: a failover that really loses writes, which the
//     kills above cannot (on one loopback a replica has every write within
//     microseconds). A standalone master and its replica, whose replication
//     link goes through a proxy in the test (proxy_test.go); coordd, a real
//     process, reaches the master through a second proxy. Under load (busy
//     locks with long holds and zombies, mostly free locks, all writing to
//     fenced resources; a queue whose consumers poll in batches;
//     idempotency keys) the link is cut, the master goes on acknowledging
//     for 1.2 s and is killed; the replica, which missed all of it, is
//     promoted 300 ms later (REPLICAOF NO ONE, as Sentinel would), the
//     front proxy switched to it, and the old master restarted as its
//     replica. The Cluster cases do the same on a private Cluster with its
//     own failover (losscluster_test.go): the master announces a proxy's
//     port, its replica connects from 127.0.0.2, and the cut drops only the
//     replica's connections. Counted from what the replica held at the promotion:
//     acknowledged-then-lost grants, enqueues and idempotency results;
//     then fences that went backwards, stale fenced writes accepted, double
//     holders and their overlap, messages never delivered, results that
//     would execute again. Five cases, in parallel: asynchronous
//     replication must lose acknowledged writes (else the test did not
//     test) and redis.wait_replicas=1 must lose none, double-hold none, and
//     answer writes during the cut UNAVAILABLE, each standalone and on a
//     Cluster; and asynchronous replication with the promoted replica's
//     clock 5 s behind (an LD_PRELOAD shim built with the C compiler,
//     redistest.ClockShim), where some grant must be made on a clock below
//     earlier fences (else the case did not test) and fences must still
//     never go backwards. No stale fenced write may be accepted in any
//     case.
//
// Each test logs a one-line summary of its counts (t.Logf), and TestMain
// prints them all as a table on stdout at the end. go test shows a passing
// package's output only with -v (or when run in a package directory
// without arguments); set COORDD_FAILOVER_SUMMARY to a file name to have
// the table appended to that file as well.
package failover
