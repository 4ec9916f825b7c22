"""Worker: consume a queue at least once (Claim, Extend, Ack, Nack).

    def handle(m: coordd.Message) -> None:
        send_email(m.payload)           # raise to have it delivered again

    worker = coordd.Worker(channel, "emails", handle, concurrency=4)
    threading.Thread(target=worker.run).start()
    ...
    worker.stop()    # claims nothing more; running handlers finish and are acked

The Worker claims messages (no more than it has free handlers for), runs
the handler on each in a thread of its own, extends the claim every third
of the visibility timeout while the handler runs, and acks the message when
the handler returns, or nacks it (another attempt later) when it raises. A
message whose claim could not be extended may be delivered to another
consumer meanwhile (its ``lost`` is set): handlers must be idempotent (see
idempotent).
"""

from __future__ import annotations

import datetime
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import grpc

from ._calls import MIN_BACKOFF, WaitCap, backoff_sleep, call_timeout, deadline_of, duration, retry, transient
from .errors import CoorddError, describe
from .session import Metadata
from .v1 import queue_pb2, queue_pb2_grpc

__all__ = ["Worker", "Message", "Retry"]

# CLAIM_WAIT is how long one Claim waits for a message (coordd wakes it when
# one comes): well under the default limits.max_wait.
CLAIM_WAIT = 20.0


@dataclass
class Message:
    """A claimed queue message, as a Worker's handler gets it."""

    id: str
    payload: bytes
    attempt: int
    """The deliveries of this message, this one included."""
    max_attempts: int
    priority: int
    group: str
    enqueue_time: datetime.datetime
    lost: threading.Event = field(default_factory=threading.Event)
    """Set if the claim could not be extended: another consumer may have
    the message now; stop (the result is neither acked nor nacked)."""


class Retry(CoorddError):
    """A handler's exception that asks for another attempt after delay
    seconds (0: coordd's backoff). Any other exception is retried with
    coordd's backoff too; a message that has had its max attempts goes to
    the dead letters."""

    def __init__(self, delay: float = 0.0, reason: str = "") -> None:
        super().__init__("retry in %.3fs: %s" % (delay, reason))
        self.delay = delay


class Worker:
    """Consumes queue (at least once), running handler on each message,
    concurrency at a time.

    visibility  each claim's visibility timeout in seconds (default 30):
                how long a message is hidden from other consumers without
                an extension; extended every third of it while the handler
                runs
    on_error    if set, hears of the errors the Worker goes on after: a
                failed Claim, Ack, Nack or Extend (never the handler's own)
    metadata    sent with every call (an API key)
    """

    def __init__(self, channel: grpc.Channel, queue: str, handler: Callable[[Message], None], concurrency: int = 1,
                 visibility: float = 30.0, on_error: Optional[Callable[[BaseException], None]] = None,
                 metadata: Optional[Metadata] = None) -> None:
        self._stub = queue_pb2_grpc.QueueServiceStub(channel)
        self.queue = queue
        self.handler = handler
        self.concurrency = max(1, concurrency)
        self.visibility = visibility if visibility > 0 else 30.0
        self.on_error = on_error
        self.metadata: Metadata = tuple(metadata or ())
        self._stopping = threading.Event()
        self._waits = WaitCap()

    def stop(self) -> None:
        """Asks run to stop: it claims nothing more (a waiting Claim is
        cancelled), lets the running handlers finish, acks or nacks their
        messages, and returns."""
        self._stopping.set()

    def run(self) -> None:
        """Consumes the queue until stop(). An error that no retry can cure
        (a queue name coordd refuses, a key without the permission) ends it
        at once, raised after the running handlers finish."""
        slots = threading.Semaphore(self.concurrency)
        running: List[threading.Thread] = []
        backoff = MIN_BACKOFF
        try:
            while not self._stopping.is_set():
                # Claim only as many as there are free slots.
                while not slots.acquire(timeout=0.05):
                    if self._stopping.is_set():
                        return
                n = 1
                while n < self.concurrency and slots.acquire(blocking=False):
                    n += 1
                wait = self._waits.cap(CLAIM_WAIT)
                try:
                    msgs = self._claim(n, wait)
                except grpc.RpcError as err:
                    for _ in range(n):
                        slots.release()
                    if self._stopping.is_set():
                        return
                    if self._waits.learn(err, wait):
                        continue
                    if not transient(err):
                        raise
                    self._report(CoorddError("claiming from %r: %s" % (self.queue, describe(err))))
                    backoff = backoff_sleep(backoff, None, self._stopping)
                    continue
                backoff = MIN_BACKOFF
                for _ in range(n - len(msgs)):
                    slots.release()
                running = [t for t in running if t.is_alive()]
                for m in msgs:
                    t = threading.Thread(target=self._handle, args=(m, slots), name="coordd-worker", daemon=True)
                    t.start()
                    running.append(t)
        finally:
            for t in running:
                t.join()

    def _claim(self, n: int, wait: float) -> List[queue_pb2.Message]:
        """One Claim of up to n messages, waiting up to wait; cancelled by
        stop() (CANCELLED, or nothing if it answered first)."""
        req = queue_pb2.ClaimRequest(queue=self.queue, max_messages=n, visibility_timeout=duration(self.visibility),
                                     wait=duration(wait))
        future = self._stub.Claim.future(req, timeout=call_timeout(None, wait), metadata=self.metadata)
        answered = threading.Event()
        future.add_done_callback(lambda _: answered.set())
        while not answered.wait(0.05):
            if self._stopping.is_set():
                future.cancel()
                break
        try:
            return list(future.result().messages)
        except grpc.FutureCancelledError:
            # Cancelled by stop(): coordd hands out nothing to a cancelled
            # Claim (what it may have taken comes back at its visibility).
            return []

    def _handle(self, m: queue_pb2.Message, slots: threading.Semaphore) -> None:
        try:
            self._handle_one(m)
        finally:
            slots.release()

    def _handle_one(self, m: queue_pb2.Message) -> None:
        msg = Message(id=m.message_id, payload=m.payload, attempt=m.attempt, max_attempts=m.max_attempts,
                      priority=m.priority, group=m.group, enqueue_time=m.enqueue_time.ToDatetime())
        done = threading.Event()
        # The claim's end on the local monotonic clock.
        expires = [time.monotonic() + m.expire_time.ToNanoseconds() / 1e9 - time.time()]

        def extend() -> None:
            while not done.wait(self.visibility / 3):
                try:
                    resp = retry(lambda t: self._stub.Extend(
                        queue_pb2.ExtendRequest(queue=self.queue, receipt=m.receipt,
                                                visibility_timeout=duration(self.visibility)),
                        timeout=t, metadata=self.metadata), expires[0], done)
                except grpc.RpcError as err:
                    if not done.is_set():
                        self._report(CoorddError("extending message %s: %s" % (m.message_id, describe(err))))
                        msg.lost.set()
                    return
                expires[0] = time.monotonic() + resp.expire_time.ToNanoseconds() / 1e9 - time.time()

        extender = threading.Thread(target=extend, name="coordd-worker-extend", daemon=True)
        extender.start()
        raised: Optional[BaseException] = None
        try:
            self.handler(msg)
        except Exception as e:  # the message is nacked, and the worker goes on
            raised = e
        finally:
            done.set()
            extender.join()
        if msg.lost.is_set():
            return  # the claim is gone: the message is delivered again
        deadline = deadline_of(self.visibility)
        try:
            if raised is None:
                retry(lambda t: self._stub.Ack(queue_pb2.AckRequest(queue=self.queue, receipt=m.receipt),
                                               timeout=t, metadata=self.metadata), deadline)
                return
            req = queue_pb2.NackRequest(queue=self.queue, receipt=m.receipt)
            if isinstance(raised, Retry) and raised.delay > 0:
                req.delay.CopyFrom(duration(raised.delay))
            retry(lambda t: self._stub.Nack(req, timeout=t, metadata=self.metadata), deadline)
        except grpc.RpcError as err:
            self._report(CoorddError("%s message %s: %s" % ("acking" if raised is None else "nacking", m.message_id,
                                                              describe(err))))

    def _report(self, err: BaseException) -> None:
        if self.on_error is not None:
            self.on_error(err)
