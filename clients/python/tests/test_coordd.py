"""coordd from Python, through the installed package (pip install
./clients/python): every service through the generated stubs (coordd.v1),
the Session helper and the typed API over it (Session.lock, Limiter,
idempotent, Worker), against a running coordd (e2e/python_test.go installs
the package into a fresh virtual environment and runs this against fresh
daemons in CI). By hand, from this folder (so that ``import coordd`` finds
the installed package, not the source beside it):

    cd clients/python/tests && COORDD_ADDR=127.0.0.1:7070 /tmp/venv/bin/python -m unittest -v test_coordd

COORDD_ADDR     host:port of coordd's gRPC listener (default 127.0.0.1:7070)
COORDD_API_KEY  if set, sent on every call as "authorization: Bearer <key>"
COORDD_ADDR_ONE_SESSION  host:port of a coordd with limits.max_sessions 1
                (OverloadTest needs it; e2e/python_test.go starts one)

Every name, key and queue gets a random suffix, so the test can run again
and again against one daemon.
"""

import os
import queue
import threading
import time
import unittest
import uuid

import grpc
from google.protobuf import duration_pb2

import coordd
from coordd import Session, overloaded
from coordd.v1 import (election_pb2, election_pb2_grpc, idempotency_pb2, idempotency_pb2_grpc,
                       lock_pb2, lock_pb2_grpc, queue_pb2, queue_pb2_grpc, ratelimit_pb2,
                       ratelimit_pb2_grpc, semaphore_pb2, semaphore_pb2_grpc, session_pb2,
                       session_pb2_grpc)

ADDR = os.environ.get("COORDD_ADDR", "127.0.0.1:7070")
METADATA = (("authorization", "Bearer " + os.environ["COORDD_API_KEY"]),) if os.environ.get("COORDD_API_KEY") else ()
TIMEOUT = 10.0


def unique(prefix):
    return "py-%s-%s" % (prefix, uuid.uuid4().hex[:12])


def seconds(s):
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(s * 1e9))
    return d


class CoorddTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.channel = grpc.insecure_channel(ADDR)
        grpc.channel_ready_future(cls.channel).result(timeout=TIMEOUT)
        cls.locks = lock_pb2_grpc.LockServiceStub(cls.channel)
        cls.sems = semaphore_pb2_grpc.SemaphoreServiceStub(cls.channel)
        cls.elections = election_pb2_grpc.ElectionServiceStub(cls.channel)
        cls.limits = ratelimit_pb2_grpc.RateLimitServiceStub(cls.channel)
        cls.idem = idempotency_pb2_grpc.IdempotencyServiceStub(cls.channel)
        cls.queues = queue_pb2_grpc.QueueServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()

    def call(self, method, request):
        return method(request, timeout=TIMEOUT, metadata=METADATA)

    def session(self, **kw):
        s = Session(self.channel, metadata=METADATA, **kw)
        self.addCleanup(s.close)
        return s


class LockServiceTest(CoorddTest):
    def test_lock_renew_check_release(self):
        name = unique("lock")
        g = self.call(self.locks.Lock, lock_pb2.LockRequest(name=name, ttl=seconds(30), owner="alice"))
        self.assertTrue(g.acquired)
        self.assertEqual(len(g.token), 32)
        self.assertGreater(g.fence, 0)
        other = self.call(self.locks.Lock, lock_pb2.LockRequest(name=name, ttl=seconds(30)))
        self.assertFalse(other.acquired)
        self.assertEqual(other.holder, "alice")
        self.assertEqual(other.token, "")  # a stranger never sees the token
        info = self.call(self.locks.GetLock, lock_pb2.GetLockRequest(name=name))
        self.assertTrue(info.held)
        self.assertEqual(info.fence, g.fence)
        self.assertTrue(self.call(self.locks.CheckFence, lock_pb2.CheckFenceRequest(name=name, fence=g.fence)).current)
        r = self.call(self.locks.Renew, lock_pb2.RenewRequest(name=name, token=g.token, ttl=seconds(60)))
        self.assertEqual(r.fence, g.fence)
        self.assertTrue(self.call(self.locks.Release, lock_pb2.ReleaseRequest(name=name, token=g.token)).released)
        self.assertFalse(self.call(self.locks.Release, lock_pb2.ReleaseRequest(name=name, token=g.token)).released)

    def test_invalid_argument_names_the_field(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.call(self.locks.Lock, lock_pb2.LockRequest(name="", ttl=seconds(1)))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("name", cm.exception.details())


class SessionTest(CoorddTest):
    def test_session_keeps_its_lock_and_close_releases_it(self):
        name = unique("bound")
        s = self.session(ttl=1.0)
        g = self.call(self.locks.Lock, lock_pb2.LockRequest(name=name, session_id=s.id))
        self.assertTrue(g.acquired)
        time.sleep(2.5)  # more than two TTLs: the heartbeats keep it
        self.assertFalse(s.done.is_set(), s.error)
        self.assertTrue(self.call(self.locks.GetLock, lock_pb2.GetLockRequest(name=name)).held)
        self.assertTrue(s.close())
        self.assertFalse(self.call(self.locks.GetLock, lock_pb2.GetLockRequest(name=name)).held)

    def test_lost_lock_is_reported(self):
        name = unique("capped")
        s = self.session(ttl=1.0)
        g = self.call(self.locks.Lock, lock_pb2.LockRequest(name=name, session_id=s.id, max_hold=seconds(0.3)))
        self.assertTrue(g.acquired)
        lost = s.lost.get(timeout=5)
        self.assertEqual((lost.name, lost.fence, lost.kind, lost.reason),
                         (name, g.fence, session_pb2.HOLD_KIND_LOCK, session_pb2.LOCK_LOSS_REASON_MAX_HOLD))
        self.assertTrue(s.lost_event.is_set())
        self.assertFalse(s.done.is_set())

    def test_resume_on_a_new_stream(self):
        s = self.session(ttl=1.0)
        s._stream.call.cancel()  # break the stream: the helper resumes the session
        time.sleep(2.0)
        self.assertFalse(s.done.is_set(), s.error)
        self.assertTrue(s.close())


class OverloadTest(unittest.TestCase):
    """A coordd with limits.max_sessions 1 refuses a second session
    OVERLOADED with a retry_after; Session keeps trying after it and gets in
    once the first session has closed, and no sooner."""

    def test_session_waits_out_overloaded(self):
        addr = os.environ.get("COORDD_ADDR_ONE_SESSION")
        if not addr:
            self.skipTest("COORDD_ADDR_ONE_SESSION is not set")
        channel = grpc.insecure_channel(addr)
        self.addCleanup(channel.close)
        first = Session(channel, ttl=5.0, metadata=METADATA)
        with self.assertRaises(grpc.RpcError) as cm:
            Session(channel, ttl=5.0, metadata=METADATA, overload_wait=0)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertGreater(overloaded(cm.exception), 0)
        got = []
        opener = threading.Thread(target=lambda: got.append(Session(channel, ttl=5.0, metadata=METADATA, overload_wait=30)))
        opener.start()
        opener.join(1.5)
        self.assertTrue(opener.is_alive(), "a second session was opened beside the first at limits.max_sessions 1")
        self.assertTrue(first.close())
        opener.join(10)
        self.assertFalse(opener.is_alive(), "no session within 10s of a slot freeing")
        self.assertEqual(len(got), 1)
        self.assertNotEqual(got[0].id, first.id)
        self.assertTrue(got[0].close())


class SemaphoreServiceTest(CoorddTest):
    def test_permits(self):
        name = unique("sem")
        grants = [self.call(self.sems.Acquire, semaphore_pb2.AcquireRequest(name=name, limit=2, ttl=seconds(30))) for _ in range(3)]
        self.assertEqual([g.acquired for g in grants], [True, True, False])
        info = self.call(self.sems.GetSemaphore, semaphore_pb2.GetSemaphoreRequest(name=name))
        self.assertEqual(len(info.holders), 2)
        released = self.call(self.sems.Release, semaphore_pb2.SemaphoreServiceReleaseRequest(name=name, token=grants[0].token))
        self.assertTrue(released.released)
        self.assertTrue(self.call(self.sems.Acquire, semaphore_pb2.AcquireRequest(name=name, limit=2, ttl=seconds(30))).acquired)


class ElectionServiceTest(CoorddTest):
    def test_campaign_observe_resign(self):
        name = unique("election")
        s = self.session(ttl=5.0)
        observed = []
        stream = self.elections.Observe(election_pb2.ObserveRequest(name=name), metadata=METADATA)

        def read():
            try:
                for r in stream:
                    observed.append(r)
            except grpc.RpcError as e:  # cancelled at the end of the test
                if e.code() != grpc.StatusCode.CANCELLED:
                    raise

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not observed:  # the stream's first state: no leader yet
            time.sleep(0.01)
        c = self.call(self.elections.Campaign, election_pb2.CampaignRequest(name=name, value=b"py", session_id=s.id))
        self.assertTrue(c.elected)
        self.call(self.elections.Proclaim, election_pb2.ProclaimRequest(name=name, token=c.token, value=b"py2"))
        leader = self.call(self.elections.Leader, election_pb2.LeaderRequest(name=name))
        self.assertEqual((leader.has_leader, leader.leader.value, leader.leader.fence), (True, b"py2", c.fence))
        self.assertTrue(self.call(self.elections.Resign, election_pb2.ResignRequest(name=name, token=c.token)).resigned)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(observed) < 4:
            time.sleep(0.05)
        stream.cancel()
        self.assertEqual([(o.has_leader, o.leader.value) for o in observed[:4]],
                         [(False, b""), (True, b"py"), (True, b"py2"), (False, b"")])


class RateLimitServiceTest(CoorddTest):
    def test_allow_and_peek(self):
        key = unique("key")
        limit = ratelimit_pb2.Limit(algorithm=ratelimit_pb2.ALGORITHM_FIXED_WINDOW, limit=2, period=seconds(3600))
        got = [self.call(self.limits.Allow, ratelimit_pb2.AllowRequest(key=key, limit=limit)) for _ in range(3)]
        self.assertEqual([(a.allowed, a.remaining) for a in got], [(True, 1), (True, 0), (False, 0)])
        self.assertGreater(got[2].retry_after.ToNanoseconds(), 0)
        peek = self.call(self.limits.Allow, ratelimit_pb2.AllowRequest(key=key, limit=limit, peek=True))
        self.assertFalse(peek.allowed)


class IdempotencyServiceTest(CoorddTest):
    def test_execute_finish_replay(self):
        key = unique("idem")
        b = self.call(self.idem.BeginIdempotent, idempotency_pb2.BeginIdempotentRequest(key=key, fingerprint="f1"))
        self.assertEqual(b.outcome, idempotency_pb2.OUTCOME_EXECUTE)
        again = self.call(self.idem.BeginIdempotent, idempotency_pb2.BeginIdempotentRequest(key=key, fingerprint="f1"))
        self.assertEqual(again.outcome, idempotency_pb2.OUTCOME_IN_PROGRESS)
        self.call(self.idem.ExtendIdempotent, idempotency_pb2.ExtendIdempotentRequest(key=key, owner_token=b.owner_token, processing_ttl=seconds(30)))
        self.assertTrue(self.call(self.idem.Finish, idempotency_pb2.FinishRequest(key=key, owner_token=b.owner_token, result=b"ok")).stored)
        replay = self.call(self.idem.BeginIdempotent, idempotency_pb2.BeginIdempotentRequest(key=key, fingerprint="f1"))
        self.assertEqual((replay.outcome, replay.result), (idempotency_pb2.OUTCOME_COMPLETED, b"ok"))
        with self.assertRaises(grpc.RpcError) as cm:
            self.call(self.idem.BeginIdempotent, idempotency_pb2.BeginIdempotentRequest(key=key, fingerprint="f2"))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)


class QueueServiceTest(CoorddTest):
    def test_enqueue_claim_extend_ack_nack_stats_redrive(self):
        q = unique("queue")
        for p in (b"a", b"b"):
            self.assertEqual(len(self.call(self.queues.Enqueue, queue_pb2.EnqueueRequest(queue=q, payload=p)).message_id) > 0, True)
        claimed = self.call(self.queues.Claim, queue_pb2.ClaimRequest(queue=q, max_messages=2, visibility_timeout=seconds(30))).messages
        self.assertEqual(sorted(m.payload for m in claimed), [b"a", b"b"])
        self.call(self.queues.Extend, queue_pb2.ExtendRequest(queue=q, receipt=claimed[0].receipt, visibility_timeout=seconds(60)))
        self.assertTrue(self.call(self.queues.Ack, queue_pb2.AckRequest(queue=q, receipt=claimed[0].receipt)).acked)
        self.call(self.queues.Nack, queue_pb2.NackRequest(queue=q, receipt=claimed[1].receipt, delay=seconds(0.001)))
        time.sleep(0.05)
        st = self.call(self.queues.Stats, queue_pb2.StatsRequest(queue=q))
        self.assertEqual((st.ready, st.in_flight, st.dead), (1, 0, 0))
        moved = self.call(self.queues.Redrive, queue_pb2.RedriveRequest(queue=q))
        self.assertEqual(moved.moved, 0)  # nothing dead


class PackageTest(unittest.TestCase):
    """The package under test is the installed one, with its stubs made
    package-relative."""

    def test_installed_package(self):
        here = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "coordd"))
        self.assertNotEqual(os.path.realpath(os.path.dirname(coordd.__file__)), here,
                            "coordd is imported from the source tree, not the installed package")
        self.assertEqual(lock_pb2.LockRequest.__module__, "coordd.v1.lock_pb2")
        self.assertEqual(lock_pb2.DESCRIPTOR.name, "coord/v1/lock.proto")  # as every other client registers it
        self.assertIs(semaphore_pb2.DESCRIPTOR.dependencies[0], lock_pb2.DESCRIPTOR)


class MutexTest(CoorddTest):
    def test_lock_excludes_orders_and_fences(self):
        name = unique("mutex")
        a, b = self.session(ttl=5.0), self.session(ttl=5.0)
        with a.lock(name, owner="a") as held:
            first = held.fence
            self.assertGreater(first, 0)
            self.assertTrue(held.held)
            self.assertFalse(held.lost.is_set())
            with self.assertRaises(coordd.LockedError):
                b.lock(name).try_lock()
            late = b.lock(name)
            with self.assertRaises(TimeoutError):
                late.lock(timeout=0.3)
            self.assertEqual((late.held, late.fence), (False, 0))
            waiter = b.lock(name)
            got = []
            t = threading.Thread(target=lambda: got.append(waiter.lock(timeout=10) or waiter.fence))
            t.start()
            time.sleep(0.2)
            self.assertEqual(got, [], "granted while another held the lock")
        t.join(10)
        self.assertEqual(len(got), 1, "the waiter was not granted after the release")
        self.assertGreater(got[0], first)
        self.assertEqual(held.fence, 0)
        waiter.unlock()
        with self.assertRaises(coordd.NotHeldError):
            waiter.unlock()

    def test_lost_lock_is_told(self):
        name = unique("capped")
        s = self.session(ttl=5.0)
        with self.assertRaises(coordd.LostError) as cm:
            with s.lock(name, max_hold=0.3) as held:
                fence = held.fence
                self.assertTrue(held.lost.wait(5), "coordd's report of the lost lock did not reach the Mutex")
                self.assertFalse(held.held)
                with self.assertRaises(coordd.LostError):
                    held.check()
        hold = cm.exception.hold
        self.assertEqual((hold.name, hold.fence, hold.reason), (name, fence, session_pb2.LOCK_LOSS_REASON_MAX_HOLD))
        self.assertFalse(s.done.is_set())

    def test_lost_session_is_told(self):
        name = unique("superseded")
        s = self.session(ttl=5.0)
        requests = queue.Queue()
        with self.assertRaises(coordd.SessionError):
            with s.lock(name) as held:
                # Another stream resumes the session: coordd ends this one.
                other = session_pb2_grpc.SessionServiceStub(self.channel).KeepAlive(iter(requests.get, None), metadata=METADATA)
                self.addCleanup(other.cancel)
                requests.put(session_pb2.KeepAliveRequest(session_id=s.id, ttl=seconds(5)))
                next(other)
                self.assertTrue(held.lost.wait(5), "the end of the session did not reach the Mutex")
                self.assertIsInstance(held.err, coordd.SessionError)
                self.assertTrue(s.done.is_set())
        with self.assertRaises(coordd.SessionError):
            s.lock(unique("after")).lock(timeout=1)


class LimiterTest(CoorddTest):
    def test_allow_peek_and_denial(self):
        key = unique("key")
        limiter = coordd.Limiter.inline(self.channel, "fixed_window", limit=2, period=3600, metadata=METADATA)
        got = [limiter.allow(key) for _ in range(3)]
        self.assertEqual([(bool(d), d.allowed, d.remaining) for d in got], [(True, True, 1), (True, True, 0), (False, False, 0)])
        self.assertGreater(got[2].retry_after, 0)
        self.assertFalse(limiter.peek(key).allowed)
        with self.assertRaises(ValueError):
            coordd.Limiter(self.channel)

    def test_wait(self):
        key = unique("key")
        limiter = coordd.Limiter.inline(self.channel, "token_bucket", limit=1, period=0.5, burst=1, metadata=METADATA)
        self.assertTrue(limiter.allow(key).allowed)
        start = time.monotonic()
        limiter.wait(key, timeout=5)
        self.assertGreater(time.monotonic() - start, 0.2)
        hourly = coordd.Limiter.inline(self.channel, "fixed_window", limit=1, period=3600, metadata=METADATA)
        self.assertTrue(hourly.allow(key).allowed)
        with self.assertRaises(TimeoutError):
            hourly.wait(key, timeout=0.3)


class IdempotentTest(CoorddTest):
    def test_once_among_concurrent_callers_past_the_processing_ttl(self):
        key = unique("idem")
        runs = []

        def work(lost):
            runs.append(1)
            time.sleep(1.5)  # past the processing TTL: the lease is extended
            self.assertFalse(lost.is_set())
            return b"done"

        results = []
        callers = [threading.Thread(target=lambda: results.append(coordd.idempotent(
            self.channel, key, "f1", work, processing_ttl=0.6, metadata=METADATA, timeout=10))) for _ in range(3)]
        for c in callers:
            c.start()
        for c in callers:
            c.join(15)
        self.assertEqual(results, [b"done"] * 3)
        self.assertEqual(len(runs), 1, "the function ran more than once")
        self.assertEqual(coordd.idempotent(self.channel, key, "f1", lambda lost: b"again", metadata=METADATA), b"done")

    def test_failures(self):
        terminal, retryable, crash = unique("terminal"), unique("retryable"), unique("crash")

        def fail(lost):
            raise coordd.Failure("card declined")

        with self.assertRaises(coordd.Failure):
            coordd.idempotent(self.channel, terminal, "f", fail, metadata=METADATA)
        with self.assertRaises(coordd.Failure) as cm:  # replayed, not run again
            coordd.idempotent(self.channel, terminal, "f", lambda lost: b"ok", metadata=METADATA)
        self.assertEqual((cm.exception.message, cm.exception.retryable), ("card declined", False))

        def flaky(lost):
            raise coordd.Failure("try later", retryable=True)

        with self.assertRaises(coordd.Failure):
            coordd.idempotent(self.channel, retryable, "f", flaky, metadata=METADATA)
        self.assertEqual(coordd.idempotent(self.channel, retryable, "f", lambda lost: b"ok", metadata=METADATA), b"ok")

        def boom(lost):
            raise KeyError("boom")

        with self.assertRaises(KeyError):  # stored as retryable, raised again
            coordd.idempotent(self.channel, crash, "f", boom, metadata=METADATA)
        self.assertEqual(coordd.idempotent(self.channel, crash, "f", lambda lost: b"ok", metadata=METADATA), b"ok")


class WorkerTest(CoorddTest):
    def enqueue(self, q, *payloads):
        for p in payloads:
            self.call(self.queues.Enqueue, queue_pb2.EnqueueRequest(queue=q, payload=p))

    def run_worker(self, worker):
        errors = []

        def run():
            try:
                worker.run()
            except Exception as e:
                errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        self.addCleanup(t.join, 10)
        self.addCleanup(worker.stop)
        return t, errors

    def test_acks_nacks_and_extends(self):
        q = unique("worker")
        self.enqueue(q, b"a", b"b", b"slow", b"fail")
        handled, lock, inside = [], threading.Lock(), [0, 0]  # [now, most]

        def handle(m):
            with lock:
                handled.append((m.payload, m.attempt))
                inside[0] += 1
                inside[1] = max(inside)
            try:
                if m.payload == b"slow":
                    time.sleep(1.5)  # past the visibility timeout: the claim is extended
                    self.assertFalse(m.lost.is_set())
                if m.payload == b"fail" and m.attempt == 1:
                    raise coordd.Retry(0.05, "first attempt")
            finally:
                with lock:
                    inside[0] -= 1

        reported = []
        worker = coordd.Worker(self.channel, q, handle, concurrency=2, visibility=0.9, on_error=reported.append,
                               metadata=METADATA)
        t, errors = self.run_worker(worker)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(handled) < 5:
            time.sleep(0.05)
        time.sleep(0.2)  # an ack after the last handler returns
        worker.stop()
        t.join(10)
        self.assertFalse(t.is_alive(), "run did not return after stop")
        self.assertEqual(errors, [])
        self.assertEqual(sorted(handled), [(b"a", 1), (b"b", 1), (b"fail", 1), (b"fail", 2), (b"slow", 1)])
        self.assertLessEqual(inside[1], 2, "more handlers at once than the concurrency")
        self.assertEqual(reported, [])
        st = self.call(self.queues.Stats, queue_pb2.StatsRequest(queue=q))
        self.assertEqual((st.ready, st.in_flight, st.dead), (0, 0, 0))

    def test_stop_lets_running_handlers_finish(self):
        q = unique("stop")
        self.enqueue(q, b"x")
        started, finished = threading.Event(), threading.Event()

        def handle(m):
            started.set()
            time.sleep(0.5)
            finished.set()

        worker = coordd.Worker(self.channel, q, handle, metadata=METADATA)
        t, errors = self.run_worker(worker)
        self.assertTrue(started.wait(5))
        worker.stop()
        t.join(10)
        self.assertTrue(finished.is_set(), "run returned before its handler finished")
        st = self.call(self.queues.Stats, queue_pb2.StatsRequest(queue=q))
        self.assertEqual((st.ready, st.in_flight), (0, 0), "the message was not acked")
        self.assertEqual(errors, [])

    def test_unrecoverable_error_ends_run(self):
        worker = coordd.Worker(self.channel, "", lambda m: None, metadata=METADATA)
        t, errors = self.run_worker(worker)
        t.join(10)
        self.assertEqual([e.code() for e in errors], [grpc.StatusCode.INVALID_ARGUMENT])


if __name__ == "__main__":
    unittest.main()
