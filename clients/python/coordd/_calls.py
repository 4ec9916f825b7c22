"""How this package makes its calls: every call has a deadline; a call
whose outcome is unknown (UNAVAILABLE, ABORTED, or our own per-call
deadline) is retried with jittered backoff where a retry is safe, until the
caller's deadline; a wait longer than coordd's limits.max_wait is made in
rounds of at most that limit, learned from coordd's refusal of a longer one.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Callable, Optional, TypeVar

import grpc
from google.protobuf import duration_pb2

from .errors import wait_limit

T = TypeVar("T")

MIN_BACKOFF, MAX_BACKOFF = 0.05, 1.0
# CALL_TIMEOUT bounds a call that does not wait (on top of its wait for one
# that does): past it the outcome is unknown, as with UNAVAILABLE.
CALL_TIMEOUT = 10.0
# DEFAULT_MAX_WAIT is the longest wait one call asks coordd for: its
# limits.max_wait by default.
DEFAULT_MAX_WAIT = 60.0
# CALL_SLACK: a wait ends this much before the caller's deadline, so that
# coordd's answer arrives before it.
CALL_SLACK = 0.05

_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED, grpc.StatusCode.DEADLINE_EXCEEDED})


def transient(err: BaseException) -> bool:
    """Whether err may pass if the call is made again: coordd or its store
    unreachable, or no answer within the call's own deadline (the outcome
    is unknown)."""
    return isinstance(err, grpc.RpcError) and err.code() in _TRANSIENT


def duration(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


def deadline_of(timeout: Optional[float]) -> Optional[float]:
    """The monotonic deadline timeout seconds from now (None: none)."""
    return None if timeout is None else time.monotonic() + timeout


def left(deadline: Optional[float]) -> Optional[float]:
    """Seconds until deadline (None: no deadline); never below 0."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def call_timeout(deadline: Optional[float], wait: float = 0.0) -> float:
    """The gRPC timeout of one call that waits up to wait: the wait and
    CALL_TIMEOUT, cut at the caller's deadline."""
    t = wait + CALL_TIMEOUT
    rest = left(deadline)
    return t if rest is None else max(0.001, min(t, rest))


def backoff_sleep(backoff: float, deadline: Optional[float], stop: Optional[threading.Event] = None) -> float:
    """Sleeps between half of backoff and backoff (cut at deadline, or until
    stop is set) and returns the next backoff."""
    d = backoff / 2 + random.uniform(0, backoff / 2)
    rest = left(deadline)
    if rest is not None:
        d = min(d, rest)
    if stop is not None:
        stop.wait(d)
    else:
        time.sleep(d)
    return min(2 * backoff, MAX_BACKOFF)


def retry(call: Callable[[float], T], deadline: Optional[float], stop: Optional[threading.Event] = None) -> T:
    """call(timeout) until it returns, fails other than transiently, the
    deadline passes or stop is set (then its last error is raised)."""
    backoff = MIN_BACKOFF
    while True:
        try:
            return call(call_timeout(deadline))
        except grpc.RpcError as err:
            if not transient(err) or left(deadline) == 0 or (stop is not None and stop.is_set()):
                raise
        backoff = backoff_sleep(backoff, deadline, stop)


class WaitCap:
    """coordd's limits.max_wait as learned from a wait it refused for being
    over it (None: not learned yet): later waits ask for no more."""

    def __init__(self) -> None:
        self.limit: Optional[float] = None

    def cap(self, wait: float) -> float:
        """wait, or the learned limit if that is lower."""
        return wait if self.limit is None else min(wait, self.limit)

    def learn(self, err: BaseException, wait: float) -> bool:
        """Whether err is coordd's refusal of wait as over its
        limits.max_wait, naming a lower limit, which is kept: the caller
        asks again at once."""
        limit = wait_limit(err)
        if limit is None or limit >= wait:
            return False
        self.limit = limit
        return True
