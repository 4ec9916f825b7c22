"""coordd from Python: every service through the stubs generated from
api/proto3 with Debian's grpc_tools, and the session helper, against a
running coordd (e2e/python_test.go runs it against a fresh daemon in CI).

    python3 -m grpc_tools.protoc -I api/proto3 --python_out=GEN --grpc_python_out=GEN api/proto3/coord/v1/*.proto
    COORDD_ADDR=127.0.0.1:7070 PYTHONPATH=GEN:clients/python python3 -m unittest -v clients/python/test_coordd.py

COORDD_ADDR     host:port of coordd's gRPC listener (default 127.0.0.1:7070)
COORDD_API_KEY  if set, sent on every call as "authorization: Bearer <key>"
COORDD_ADDR_ONE_SESSION  host:port of a coordd with limits.max_sessions 1
                (OverloadTest needs it; e2e/python_test.go starts one)

Every name, key and queue gets a random suffix, so the test can run again
and again against one daemon.
"""

import os
import threading
import time
import unittest
import uuid

import grpc
from google.protobuf import duration_pb2

from coord.v1 import (election_pb2, election_pb2_grpc, idempotency_pb2, idempotency_pb2_grpc,
                      lock_pb2, lock_pb2_grpc, queue_pb2, queue_pb2_grpc, ratelimit_pb2,
                      ratelimit_pb2_grpc, semaphore_pb2, semaphore_pb2_grpc, session_pb2)
from coordd_session import Session, overloaded

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
        reader = threading.Thread(target=lambda: [observed.append(r) for r in stream], daemon=True)
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


if __name__ == "__main__":
    unittest.main()
