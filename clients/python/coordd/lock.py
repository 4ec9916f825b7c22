"""Mutex: a lock bound to a session, held in a with block.

    with coordd.Session(channel) as session:
        with session.lock("reports/daily", owner="worker-1") as lock:
            write(lock.fence, ...)   # fence every write the lock protects
            lock.check()             # raises if coordd reported it lost

A lock is a lease, not a proof of exclusion: coordd may report it lost (its
max_hold reached, the session expired, the store lost it) while the block
runs. The Mutex is told at once: ``lost`` is set and ``err`` says why, and
leaving the block raises that error (a LostError naming the hold, or a
SessionError), unless the block raised an error of its own. Guard every
write with ``fence``: a downstream that rejects a write whose fence is not
greater than the last one it accepted is safe from an old holder.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Optional

import grpc

from ._calls import (CALL_SLACK, CALL_TIMEOUT, DEFAULT_MAX_WAIT, MIN_BACKOFF, backoff_sleep, call_timeout,
                     deadline_of, duration, left, retry, transient)
from .errors import LockedError, NotHeldError, SessionError
from .v1 import lock_pb2, lock_pb2_grpc, session_pb2

if TYPE_CHECKING:
    from .session import Session, _Watch

__all__ = ["Mutex"]

_ENDED = threading.Event()
_ENDED.set()

# How long giving back a grant whose answer was lost may take (Mutex._give_back).
GIVE_BACK_TIMEOUT = 2.0


class Mutex:
    """A lock on name bound to a session, exclusive or shared (a
    readers-writer lock's read side): granted in arrival order across every
    coordd instance, held while the session lives, released by unlock(), the
    end of a with block, or the session's end.

    owner      a label others see (GetLock, a contended Lock); not a secret
    max_hold   caps how long a grant may be held, in seconds (None: no cap)
    shared     a shared hold: shared holders coexist; an exclusive one
               excludes them, and a waiting exclusive request goes before
               every shared request that comes after it
    timeout    how long a with block waits for the lock (None: until
               granted); TimeoutError past it
    max_wait   the longest wait one call asks coordd for (default 60 s, or
               coordd's limits.max_wait once learned): a longer wait is
               several calls, each a new place at the back of the queue

    A Mutex holds at most one grant at a time; it is safe for use by several
    threads.
    """

    def __init__(self, session: "Session", name: str, owner: str = "", max_hold: Optional[float] = None,
                 shared: bool = False, timeout: Optional[float] = None, max_wait: float = DEFAULT_MAX_WAIT) -> None:
        self.session = session
        self.name = name
        self.owner = owner
        self.max_hold = max_hold
        self.shared = shared
        self.timeout = timeout
        self.max_wait = max_wait
        self._stub = lock_pb2_grpc.LockServiceStub(session.channel)
        self._op = threading.Lock()  # one lock() or unlock() at a time
        self._mu = threading.Lock()  # guards what follows
        self._token = ""
        self._fence = 0
        self._watch: Optional["_Watch"] = None

    def __enter__(self) -> "Mutex":
        self.lock(self.timeout)
        return self

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: object) -> bool:
        lost = self.err
        try:
            self.unlock()
        except NotHeldError as e:
            if exc_type is None:
                raise (lost or e) from e
        except Exception:
            if exc_type is None:
                raise
        else:
            if lost is not None and exc_type is None:
                raise lost  # released, but the session could not vouch for it meanwhile
        return False

    @property
    def fence(self) -> int:
        """The fence of the grant held (0 if none): greater than every fence
        issued for the name before."""
        with self._mu:
            return self._fence if self._token else 0

    @property
    def held(self) -> bool:
        """Whether a grant is held and was not lost."""
        with self._mu:
            return bool(self._token) and self._watch is not None and not self._watch.ended.is_set()

    @property
    def lost(self) -> threading.Event:
        """Set when the grant held ends: coordd reported it lost or the
        session ended (``err`` says why), or it was given back. Set when
        nothing is held."""
        with self._mu:
            return self._watch.ended if self._token and self._watch is not None else _ENDED

    @property
    def err(self) -> Optional[BaseException]:
        """Why the grant was lost (a LostError, or the session's
        SessionError) once ``lost`` is set; None while held, after a
        release, or if nothing was held."""
        with self._mu:
            w = self._watch
            return w.err if w is not None and w.ended.is_set() else None

    def check(self) -> None:
        """Raises why the lock is not held (err, or NotHeldError): call it
        between steps of the work the lock protects."""
        if not self.held:
            raise self.err or NotHeldError("%s is not held" % self.name)

    def lock(self, timeout: Optional[float] = None) -> None:
        """Waits until the lock is granted, for up to timeout seconds (None:
        no limit): TimeoutError then, and nothing held. An uncertain outcome
        (coordd unreachable) is retried: the session gets its existing grant
        back. Locking a Mutex that holds a grant returns at once."""
        self._take(True, deadline_of(timeout))

    def try_lock(self, timeout: float = CALL_TIMEOUT) -> None:
        """Takes the lock if it is free now; LockedError if it is not. An
        uncertain outcome is retried for up to timeout seconds."""
        self._take(False, deadline_of(timeout))

    def _give_back(self, req: lock_pb2.LockRequest) -> None:
        """After a Lock whose answer was lost at the deadline (coordd may
        have granted it): asks again without waiting, which answers the
        session's grant if there is one, and releases it, so that nothing
        stays held behind a TimeoutError. If coordd cannot be reached now,
        such a grant ends with the session."""
        again = lock_pb2.LockRequest()
        again.CopyFrom(req)
        again.wait.Clear()
        try:
            resp = self._stub.Lock(again, timeout=GIVE_BACK_TIMEOUT, metadata=self.session.metadata)
            if resp.acquired:
                self._stub.Release(lock_pb2.ReleaseRequest(name=self.name, token=resp.token),
                                   timeout=GIVE_BACK_TIMEOUT, metadata=self.session.metadata)
        except grpc.RpcError:
            pass

    def unlock(self, timeout: float = 5.0) -> None:
        """Releases the lock. NotHeldError: it was not held (lost, or never
        locked). An uncertain outcome is retried for up to timeout seconds;
        its error is raised after that, and the lock ends with the session."""
        with self._op:
            with self._mu:
                token, w = self._token, self._watch
            if not token:
                raise NotHeldError("%s is not held" % self.name)
            resp = retry(lambda t: self._stub.Release(lock_pb2.ReleaseRequest(name=self.name, token=token),
                                                      timeout=t, metadata=self.session.metadata),
                         deadline_of(timeout))
            if w is not None:
                self.session._unwatch(session_pb2.HOLD_KIND_LOCK, self.name, w)
            with self._mu:
                self._token, self._fence = "", 0
            if not resp.released:
                raise NotHeldError("%s was not held any more when released" % self.name)

    def _take(self, wait: bool, deadline: Optional[float]) -> None:
        with self._op:
            if self.held:
                return
            s = self.session
            backoff = MIN_BACKOFF
            while True:
                if s.done.is_set():
                    raise SessionError("the session is over: %s" % (s.error,))
                w = 0.0
                if wait:
                    w = s.waits.cap(self.max_wait)
                    rest = left(deadline)
                    if rest is not None:
                        w = max(0.0, min(w, rest - CALL_SLACK))
                req = lock_pb2.LockRequest(name=self.name, session_id=s.id, owner=self.owner, shared=self.shared,
                                           wait=duration(w))
                if self.max_hold:
                    req.max_hold.CopyFrom(duration(self.max_hold))
                try:
                    resp = self._stub.Lock(req, timeout=call_timeout(deadline, w), metadata=s.metadata)
                except grpc.RpcError as err:
                    if wait and left(deadline) != 0 and s.waits.learn(err, w):
                        continue
                    if left(deadline) == 0 and err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                        self._give_back(req)
                        raise TimeoutError("%s was not granted in time" % self.name) from err
                    if not transient(err) or left(deadline) == 0:
                        raise
                    backoff = backoff_sleep(backoff, deadline)
                    continue
                if resp.acquired:
                    watch = s._watch(session_pb2.HOLD_KIND_LOCK, self.name, resp.fence)
                    with self._mu:
                        self._token, self._fence, self._watch = resp.token, resp.fence, watch
                    return
                if not wait:
                    raise LockedError("%s is held by %s" % (self.name, resp.holder or "another"))
                backoff = MIN_BACKOFF
                rest = left(deadline)
                if rest is not None and rest <= CALL_SLACK:
                    raise TimeoutError("%s was not granted in time" % self.name)
