"""A coordd session kept alive from Python: a heartbeat thread on a
KeepAlive stream, resumption of a broken stream, and the holds coordd
reports lost.

    import grpc
    import coordd
    from coordd.v1 import lock_pb2, lock_pb2_grpc

    channel = grpc.insecure_channel("127.0.0.1:7070")
    with coordd.Session(channel, ttl=10.0) as s:
        with s.lock("reports") as lock:   # a Mutex bound to the session
            ...  # fence every write with lock.fence; stop when lock.lost is set
    # leaving the block half-closes the stream: coordd releases the lock now

The lease is counted on the local clock, conservatively: the answer to a
heartbeat sent at T with ttl D means the session lives until at least T+D.
If no answer extends it in time (a coordd that stopped answering, a stream
that could not be resumed), the session is over: ``done`` is set, and so
is ``lost_event``, and every hold bound to it is told (its ``lost`` is set,
its ``err`` is a SessionError).

A coordd at capacity refuses a new session with RESOURCE_EXHAUSTED, reason
OVERLOADED, naming a retry_after (``overloaded(err)`` reads it): opening
tries again after it, with jitter (between half of it and one and a half
times it), for up to ``overload_wait`` seconds (default 60; 0: not at all).
"""

from __future__ import annotations

import queue
import random
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple, Union

import grpc

from ._calls import WaitCap, duration as _duration
from .errors import LostError, SessionError, error_info, overloaded
from .v1 import session_pb2, session_pb2_grpc

if TYPE_CHECKING:
    from .lock import Mutex

__all__ = ["Session", "LostHold", "error_info", "overloaded"]

Metadata = Sequence[Tuple[str, Union[str, bytes]]]

# Codes after which a broken stream is resumed; any other ends the session.
_TRANSIENT = {
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED, grpc.StatusCode.ABORTED,
    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
}
_MIN_BACKOFF, _MAX_BACKOFF = 0.05, 1.0


class LostHold:
    """A hold the session held and holds no more, as coordd reported it:
    kind (session_pb2.HoldKind), name, fence and reason
    (session_pb2.LockLossReason)."""

    def __init__(self, kind: int, name: str, fence: int, reason: int) -> None:
        self.kind, self.name, self.fence, self.reason = kind, name, fence, reason

    def __repr__(self) -> str:
        return "LostHold(%s %r fence %d: %s)" % (
            session_pb2.HoldKind.Name(self.kind), self.name, self.fence,
            session_pb2.LockLossReason.Name(self.reason))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LostHold) and (self.kind, self.name, self.fence, self.reason) == (
            other.kind, other.name, other.fence, other.reason)

    def __hash__(self) -> int:
        return hash((self.kind, self.name, self.fence, self.reason))


class _Watch:
    """One hold's end: ended (``ended`` set, ``err`` why) when coordd
    reports the hold lost at its fence, the session ends, or the hold is
    given back (err None)."""

    def __init__(self, fence: int) -> None:
        self.fence = fence
        self.ended = threading.Event()
        self.err: Optional[BaseException] = None

    def end(self, err: Optional[BaseException]) -> None:
        if not self.ended.is_set():
            self.err = err
            self.ended.set()


class _Stream:
    """One KeepAlive stream: requests go in through a queue, answers come out
    of the response iterator on the session's thread."""

    def __init__(self, stub: session_pb2_grpc.SessionServiceStub, metadata: Metadata) -> None:
        self.requests: "queue.Queue[Optional[session_pb2.KeepAliveRequest]]" = queue.Queue()
        self.call = stub.KeepAlive(iter(self.requests.get, None), metadata=metadata)
        self.answers: "queue.Queue[Any]" = queue.Queue()

    def send(self, req: session_pb2.KeepAliveRequest) -> None:
        self.requests.put(req)

    def half_close(self) -> None:
        self.requests.put(None)


class Session:
    """A coordd session, kept alive by a thread until close() (or the end of
    a with block).

    id          the session's ID: a secret, for this process's calls only
    lost        a queue.Queue of LostHold, in the order coordd reported them
                (each once, though coordd repeats a report until a
                heartbeat has seen it)
    lost_event  set when any hold was reported lost, or the session is over
    done        set when the session is over; error says why (a
                SessionError; None after a close that coordd confirmed)

    Opening raises grpc.RpcError if coordd refuses the session (and keeps
    refusing OVERLOADED past overload_wait), or TimeoutError if it does not
    answer within open_timeout.
    """

    def __init__(self, channel: grpc.Channel, ttl: float = 10.0, lock_delay: float = 0.0,
                 metadata: Optional[Metadata] = None, open_timeout: float = 5.0, overload_wait: float = 60.0) -> None:
        self._channel = channel
        self._stub = session_pb2_grpc.SessionServiceStub(channel)
        self._metadata: Metadata = tuple(metadata or ())
        self.ttl = ttl
        self.id = ""
        self.lost: "queue.Queue[LostHold]" = queue.Queue()
        self.lost_event = threading.Event()
        self.done = threading.Event()
        self.error: Optional[BaseException] = None
        self.waits = WaitCap()  # coordd's limits.max_wait, once learned
        self._closing = threading.Event()
        self._close_lock = threading.Lock()  # one close at a time; later ones get its answer
        self._closed: Optional[bool] = None
        self._seen: Dict[Tuple[int, str, int], LostHold] = {}
        self._lock = threading.Lock()
        self._watches: Dict[Tuple[int, str], _Watch] = {}
        self._open_timeout = open_timeout
        first = session_pb2.KeepAliveRequest(ttl=_duration(ttl))
        if lock_delay:
            first.lock_delay.CopyFrom(_duration(lock_delay))
        give_up = time.monotonic() + overload_wait
        self._stream, resp, sent = self._open(first, open_timeout)
        while isinstance(resp, Exception):
            retry = overloaded(resp)
            if retry is None or time.monotonic() + retry / 2 > give_up:
                raise resp
            time.sleep(min(retry / 2 + random.uniform(0, retry), max(0.0, give_up - time.monotonic())))
            self._stream, resp, sent = self._open(first, open_timeout)
        self.id = resp.session_id
        self._deadline = sent + resp.ttl.ToNanoseconds() / 1e9
        self._thread = threading.Thread(target=self._keep, name="coordd-session", daemon=True)
        self._thread.start()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def channel(self) -> grpc.Channel:
        """The channel the session was opened on (its holds' calls use it)."""
        return self._channel

    @property
    def metadata(self) -> Metadata:
        """The metadata sent with the session's calls (an API key)."""
        return self._metadata

    def lock(self, name: str, owner: str = "", max_hold: Optional[float] = None, shared: bool = False,
             timeout: Optional[float] = None) -> "Mutex":
        """A Mutex on name bound to this session: use it in a with block to
        hold the lock for the block (waiting up to timeout seconds for it;
        None: until granted), or call its lock() and unlock()."""
        from .lock import Mutex
        return Mutex(self, name, owner=owner, max_hold=max_hold, shared=shared, timeout=timeout)

    def _open(self, first: session_pb2.KeepAliveRequest, timeout: float) -> Tuple[_Stream, Any, float]:
        """Opens a stream with first as its first heartbeat and waits up to
        timeout for the answer: (stream, answer or exception, when sent)."""
        stream = _Stream(self._stub, self._metadata)
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()
        sent = time.monotonic()
        stream.send(first)
        try:
            resp = stream.answers.get(timeout=timeout)
        except queue.Empty:
            stream.call.cancel()
            resp = TimeoutError("no answer from coordd within %.3fs" % timeout)
        return stream, resp, sent

    @staticmethod
    def _read(stream: _Stream) -> None:
        try:
            for resp in stream.call:
                stream.answers.put(resp)
            stream.answers.put(EOFError("coordd ended the session"))
        except grpc.RpcError as e:
            stream.answers.put(e)

    def _end(self, error: Optional[BaseException]) -> None:
        with self._lock:
            if self.done.is_set():
                return
            self.error = error
            self.done.set()
            self.lost_event.set()
            for w in self._watches.values():
                w.end(error)
            self._watches.clear()

    def _watch(self, kind: int, name: str, fence: int) -> _Watch:
        """Registers the hold (kind, name) granted at fence: the watch ends
        when coordd reports it lost or the session ends (at once if the
        session is over already)."""
        w = _Watch(fence)
        with self._lock:
            if self.done.is_set():
                w.end(self.error or SessionError("the session is over"))
                return w
            hold = self._seen.get((kind, name, fence))
            if hold is not None:  # reported before the grant's answer came back
                w.end(LostError(hold))
                return w
            old = self._watches.get((kind, name))
            if old is not None:
                old.end(None)
            self._watches[(kind, name)] = w
        return w

    def _unwatch(self, kind: int, name: str, w: _Watch) -> None:
        """Ends the registration of a hold given back."""
        with self._lock:
            if self._watches.get((kind, name)) is w:
                del self._watches[(kind, name)]
                w.end(None)

    def _handle(self, resp: session_pb2.KeepAliveResponse, sent: Optional[float]) -> None:
        for l in resp.lost_locks:
            kind = l.kind or session_pb2.HOLD_KIND_LOCK  # servers before LostLock.kind
            hold = LostHold(kind, l.name, l.fence, l.reason)
            key = (kind, l.name, l.fence)
            with self._lock:
                if key not in self._seen:  # coordd repeats a report until a heartbeat saw it
                    self._seen[key] = hold
                    self.lost.put(hold)
                    self.lost_event.set()
                w = self._watches.get((kind, l.name))
                if w is not None and w.fence == l.fence:  # not a later grant of the name
                    del self._watches[(kind, l.name)]
                    w.end(LostError(hold))
        if resp.expired:
            self._end(SessionError("coordd reports the session expired"))
        elif resp.superseded:
            self._end(SessionError("another stream resumed the session"))
        elif sent is not None:
            self._deadline = max(self._deadline, sent + resp.ttl.ToNanoseconds() / 1e9)

    def _keep(self) -> None:
        stream: Optional[_Stream] = self._stream
        sent: Optional[float] = None
        backoff, last_error = _MIN_BACKOFF, None
        next_beat = time.monotonic() + self.ttl / 3
        while not self._closing.is_set() and not self.done.is_set():
            now = time.monotonic()
            if now >= self._deadline:
                self._end(SessionError("no heartbeat was answered within the session TTL (%.3fs); last error: %s" % (self.ttl, last_error)))
                break
            if stream is None:
                stream, resp, when = self._open(session_pb2.KeepAliveRequest(session_id=self.id, ttl=_duration(self.ttl)),
                                                min(self._open_timeout, self._deadline - now))
                if isinstance(resp, Exception):
                    stream.call.cancel()
                    stream, last_error = None, resp
                    if self._final(resp):
                        break
                    self._closing.wait(backoff / 2 + random.uniform(0, backoff / 2))
                    backoff = min(2 * backoff, _MAX_BACKOFF)
                    continue
                backoff = _MIN_BACKOFF
                self._stream = stream
                self._handle(resp, when)
                next_beat = time.monotonic() + self.ttl / 3
                continue
            if sent is None and now >= next_beat:
                sent = now
                stream.send(session_pb2.KeepAliveRequest(session_id=self.id, ttl=_duration(self.ttl)))
            timeout = max(0.0, min(next_beat if sent is None else self._deadline, self._deadline) - time.monotonic())
            try:
                resp = stream.answers.get(timeout=min(timeout, 0.05))
            except queue.Empty:
                continue
            if isinstance(resp, Exception):
                stream.call.cancel()
                stream, sent, last_error = None, None, resp
                self._stream = None
                if self._final(resp):
                    break
                continue
            self._handle(resp, sent)
            if sent is not None:
                sent, next_beat = None, time.monotonic() + self.ttl / 3

    def _final(self, err: BaseException) -> bool:
        """Ends the session if err means it cannot be resumed."""
        if isinstance(err, grpc.RpcError) and err.code() in _TRANSIENT:
            return False
        if isinstance(err, TimeoutError):
            return False
        self._end(SessionError("the session cannot be resumed: %s" % err))
        return True

    def close(self, timeout: float = 5.0) -> bool:
        """Ends the session: half-closes the stream, so that coordd releases
        every hold now, and waits up to timeout for coordd to confirm.
        Returns True if it did; False means the holds end at the TTL. A
        later or concurrent call waits for the first and gives its answer."""
        with self._close_lock:
            if self._closed is None:
                self._closed = self._close(timeout)
            return self._closed

    def _close(self, timeout: float) -> bool:
        self._closing.set()
        self._thread.join()
        if self.done.is_set():
            return self.error is None
        stream = self._stream
        if stream is None:
            self._end(SessionError("closed while the stream was broken"))
            return False
        stream.half_close()
        end = time.monotonic() + timeout
        while True:
            try:
                resp = stream.answers.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                stream.call.cancel()
                self._end(SessionError("coordd did not confirm the end of the session"))
                return False
            if isinstance(resp, EOFError):
                self._end(None)
                return True
            if isinstance(resp, Exception):
                # Not OK (FAILED_PRECONDITION: another stream has the
                # session): nothing was released; the holds end at the TTL.
                self._end(resp)
                return False
