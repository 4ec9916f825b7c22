"""A coordd session kept alive from Python: a heartbeat thread on a
KeepAlive stream, resumption of a broken stream, and the holds coordd
reports lost.

Works with the stubs generated from api/proto3 by any protoc (Debian's
``python3 -m grpc_tools.protoc`` included; see README.md) and grpcio 1.51 or
later::

    import grpc
    from coordd_session import Session
    from coord.v1 import lock_pb2, lock_pb2_grpc

    channel = grpc.insecure_channel("127.0.0.1:7070")
    with Session(channel, ttl=10.0) as s:
        locks = lock_pb2_grpc.LockServiceStub(channel)
        grant = locks.Lock(lock_pb2.LockRequest(name="reports", session_id=s.id))
        ...  # do the work while not s.lost_event.is_set()
    # leaving the block half-closes the stream: coordd releases the lock now

The lease is counted on the local clock, conservatively: the answer to a
heartbeat sent at T with ttl D means the session lives until at least T+D.
If no answer extends it in time (a coordd that stopped answering, a stream
that could not be resumed), the session is over: ``done`` is set, and so
is ``lost_event``.

A coordd at capacity refuses a new session with RESOURCE_EXHAUSTED, reason
OVERLOADED, naming a retry_after (``overloaded(err)`` reads it): opening
tries again after it, with jitter (between half of it and one and a half
times it), for up to ``overload_wait`` seconds (default 60; 0: not at all).
"""

import queue
import random
import threading
import time

import grpc
from google.protobuf import duration_pb2

from coord.v1 import session_pb2, session_pb2_grpc

# Codes after which a broken stream is resumed; any other ends the session.
_TRANSIENT = {
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED, grpc.StatusCode.ABORTED,
    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
}
_MIN_BACKOFF, _MAX_BACKOFF = 0.05, 1.0


def _varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        if c < 0x80:
            return n, i
        shift += 7


def _fields(b):
    """The (number, value) pairs of a serialized protobuf message: an int
    for a varint, bytes for a length-delimited field (others are skipped)."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(b, i)
        elif wire == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
            continue
        else:
            raise ValueError("protobuf wire type %d" % wire)
        yield number, v


def error_info(err):
    """The google.rpc.ErrorInfo of a grpc.RpcError from coordd, as
    (reason, metadata dict), or None. It is read from the
    grpc-status-details-bin trailer (google.rpc.Status, whose details are
    Any), decoded by hand so as to need nothing beyond grpcio."""
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailers or ():
        if key != "grpc-status-details-bin":
            continue
        for number, detail in _fields(value):
            if number != 3:  # Status.details
                continue
            any_fields = dict(_fields(detail))
            if any_fields.get(1, b"").decode() != "type.googleapis.com/google.rpc.ErrorInfo":
                continue
            reason, domain, metadata = "", "", {}
            for n, v in _fields(any_fields.get(2, b"")):
                if n == 1:
                    reason = v.decode()
                elif n == 2:
                    domain = v.decode()
                elif n == 3:
                    entry = dict(_fields(v))
                    metadata[entry.get(1, b"").decode()] = entry.get(2, b"").decode()
            if domain == "coordd":
                return reason, metadata
    return None


def _seconds(text):
    """Seconds in retry_after as coordd writes it (decimal seconds and an
    "s": "1s", "0.25s"), or None."""
    try:
        v = float(text[:-1]) if text.endswith("s") else None
    except ValueError:
        return None
    return v if v and v > 0 else None


def overloaded(err):
    """How many seconds coordd asked to wait when err is its refusal of new
    work at capacity (RESOURCE_EXHAUSTED, reason OVERLOADED), else None. A
    refusal without a readable retry_after asks for a second."""
    if not isinstance(err, grpc.RpcError) or err.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    info = error_info(err)
    if info is None or info[0] != "OVERLOADED":
        return None
    return _seconds(info[1].get("retry_after", "")) or 1.0


def _duration(seconds):
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


class LostHold:
    """A hold the session held and holds no more, as coordd reported it."""

    def __init__(self, kind, name, fence, reason):
        self.kind, self.name, self.fence, self.reason = kind, name, fence, reason

    def __repr__(self):
        return "LostHold(%s %r fence %d: %s)" % (
            session_pb2.HoldKind.Name(self.kind), self.name, self.fence,
            session_pb2.LockLossReason.Name(self.reason))


class _Stream:
    """One KeepAlive stream: requests go in through a queue, answers come out
    of the response iterator on the session's thread."""

    def __init__(self, stub, metadata):
        self.requests = queue.Queue()
        self.call = stub.KeepAlive(iter(self.requests.get, None), metadata=metadata)

    def send(self, req):
        self.requests.put(req)

    def half_close(self):
        self.requests.put(None)


class Session:
    """A coordd session, kept alive by a thread until close().

    id          the session's ID: a secret, for this process's calls only
    lost        a queue.Queue of LostHold, in the order coordd reported them
    lost_event  set when any hold was reported lost, or the session is over
    done        set when the session is over; error says why (None after a
                close that coordd confirmed)
    """

    def __init__(self, channel, ttl=10.0, lock_delay=0.0, metadata=None, open_timeout=5.0, overload_wait=60.0):
        self._stub = session_pb2_grpc.SessionServiceStub(channel)
        self._metadata = metadata or ()
        self.ttl = ttl
        self.id = ""
        self.lost = queue.Queue()
        self.lost_event = threading.Event()
        self.done = threading.Event()
        self.error = None
        self._closing = threading.Event()
        self._seen = set()
        self._lock = threading.Lock()
        self._answers = queue.Queue()  # (response or exception) from the reader thread
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _open(self, first, timeout):
        """Opens a stream with first as its first heartbeat and waits up to
        timeout for the answer: (stream, answer or exception, when sent)."""
        stream = _Stream(self._stub, self._metadata)
        answers = queue.Queue()
        threading.Thread(target=self._read, args=(stream, answers), daemon=True).start()
        sent = time.monotonic()
        stream.send(first)
        try:
            resp = answers.get(timeout=timeout)
        except queue.Empty:
            stream.call.cancel()
            resp = TimeoutError("no answer from coordd within %.3fs" % timeout)
        stream.answers = answers
        return stream, resp, sent

    @staticmethod
    def _read(stream, answers):
        try:
            for resp in stream.call:
                answers.put(resp)
            answers.put(EOFError("coordd ended the session"))
        except grpc.RpcError as e:
            answers.put(e)

    def _end(self, error):
        with self._lock:
            if self.done.is_set():
                return
            self.error = error
            self.done.set()
            self.lost_event.set()

    def _handle(self, resp, sent):
        for l in resp.lost_locks:
            kind = l.kind or session_pb2.HOLD_KIND_LOCK  # servers before LostLock.kind
            key = (kind, l.name, l.fence)
            if key not in self._seen:  # coordd repeats a report until a heartbeat saw it
                self._seen.add(key)
                self.lost.put(LostHold(kind, l.name, l.fence, l.reason))
                self.lost_event.set()
        if resp.expired:
            self._end(RuntimeError("coordd reports the session expired"))
        elif resp.superseded:
            self._end(RuntimeError("another stream resumed the session"))
        elif sent is not None:
            self._deadline = max(self._deadline, sent + resp.ttl.ToNanoseconds() / 1e9)

    def _keep(self):
        stream, sent, backoff, last_error = self._stream, None, _MIN_BACKOFF, None
        next_beat = time.monotonic() + self.ttl / 3
        while not self._closing.is_set() and not self.done.is_set():
            now = time.monotonic()
            if now >= self._deadline:
                self._end(RuntimeError("no heartbeat was answered within the session TTL (%.3fs); last error: %s" % (self.ttl, last_error)))
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

    def _final(self, err):
        """Ends the session if err means it cannot be resumed."""
        if isinstance(err, grpc.RpcError) and err.code() in _TRANSIENT:
            return False
        if isinstance(err, TimeoutError):
            return False
        self._end(RuntimeError("the session cannot be resumed: %s" % err))
        return True

    def close(self, timeout=5.0):
        """Ends the session: half-closes the stream, so that coordd releases
        every hold now, and waits up to timeout for coordd to confirm.
        Returns True if it did; False means the holds end at the TTL."""
        if self._closing.is_set():
            return True
        self._closing.set()
        self._thread.join()
        if self.done.is_set():
            return self.error is None
        stream = self._stream
        if stream is None:
            self._end(RuntimeError("closed while the stream was broken"))
            return False
        stream.half_close()
        end = time.monotonic() + timeout
        while True:
            try:
                resp = stream.answers.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                stream.call.cancel()
                self._end(RuntimeError("coordd did not confirm the end of the session"))
                return False
            if isinstance(resp, EOFError):
                self._end(None)
                return True
            if isinstance(resp, Exception):
                ok = isinstance(resp, grpc.RpcError) and resp.code() == grpc.StatusCode.FAILED_PRECONDITION
                self._end(None if ok else resp)
                return ok
