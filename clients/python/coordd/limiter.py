"""Limiter: coordd's rate-limit decisions (Allow) on keys under one limit.

    limiter = coordd.Limiter(channel, policy="api")              # configured on coordd
    limiter = coordd.Limiter.inline(channel, "token_bucket", 10, 1.0)
    if limiter.allow("user:42"):
        ...
    limiter.wait("user:42", timeout=5.0)   # until allowed; coordd does the waiting

A denial is an answer, not an error: ``allow`` returns a Decision whose
``allowed`` is False and whose ``retry_after`` says when the same call
succeeds if nothing else consumes. An error (grpc.RpcError: UNAVAILABLE for
a fail-closed limit with the store unreachable) is not a denial: the call
may or may not have consumed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional, Union

import grpc

from ._calls import CALL_SLACK, DEFAULT_MAX_WAIT, WaitCap, call_timeout, deadline_of, duration, left
from .session import Metadata
from .v1 import ratelimit_pb2, ratelimit_pb2_grpc

__all__ = ["Limiter", "Decision"]


@dataclass(frozen=True)
class Decision:
    """A rate limiter's answer. True when allowed, so that ``if
    limiter.allow(key):`` reads as it should."""

    allowed: bool
    remaining: int
    """The units left (the least of several limits')."""
    retry_after: float
    """Denied: seconds until the same call succeeds if nothing else consumes."""
    reset_after: float
    """Seconds until the limit is whole again."""
    limit: int
    degraded: bool
    """The store was unreachable and the policy fails open (or local)."""
    denied_by: str
    """The limit of a multi-limit policy that denied."""

    def __bool__(self) -> bool:
        return self.allowed


def _algorithm(a: Union[str, int]) -> int:
    """An Algorithm enum value from its name ("token_bucket", as in
    coordd's configuration, or "ALGORITHM_TOKEN_BUCKET") or its number."""
    if isinstance(a, int):
        return a
    name = a.upper()
    return ratelimit_pb2.Algorithm.Value(name if name.startswith("ALGORITHM_") else "ALGORITHM_" + name)


class Limiter:
    """Asks coordd's rate limiter for decisions on keys under one limit: a
    policy configured on coordd (ratelimit.policies, or PutPolicy), or an
    inline limit (Limiter.inline). Safe for use by several threads.

    metadata   sent with every call (an API key: ("authorization", "Bearer
               <key>"))
    max_wait   the longest wait one Allow call asks coordd for (default
               60 s, or coordd's limits.max_wait once learned); wait() waits
               longer in several calls
    """

    def __init__(self, channel: grpc.Channel, policy: str = "", limit: Optional[ratelimit_pb2.Limit] = None,
                 metadata: Optional[Metadata] = None, max_wait: float = DEFAULT_MAX_WAIT) -> None:
        if bool(policy) == (limit is not None):
            raise ValueError("a Limiter needs a policy or an inline limit, not both")
        self._stub = ratelimit_pb2_grpc.RateLimitServiceStub(channel)
        self.policy = policy
        self.limit = limit
        self.metadata: Metadata = tuple(metadata or ())
        self.max_wait = max_wait
        self._waits = WaitCap()

    @classmethod
    def inline(cls, channel: grpc.Channel, algorithm: Union[str, int], limit: int, period: float, burst: int = 0,
               metadata: Optional[Metadata] = None) -> "Limiter":
        """A Limiter under an inline limit: limit units a period (seconds)
        with algorithm ("fixed_window", "sliding_window", "sliding_log",
        "token_bucket" or "leaky_bucket"); burst is the buckets' capacity (0:
        coordd's default)."""
        return cls(channel, limit=ratelimit_pb2.Limit(algorithm=_algorithm(algorithm), limit=limit,
                                                      period=duration(period), burst=burst), metadata=metadata)

    def allow(self, key: str, cost: int = 1, timeout: Optional[float] = None) -> Decision:
        """Consumes cost units of key's limit if the limit allows it, and
        says whether it did. Not retried: an error leaves the outcome
        unknown."""
        return self._allow(key, cost, 0.0, deadline_of(timeout))

    def peek(self, key: str, cost: int = 1, timeout: Optional[float] = None) -> Decision:
        """What allow would answer, consuming nothing."""
        return self._allow(key, cost, 0.0, deadline_of(timeout), peek=True)

    def wait(self, key: str, cost: int = 1, timeout: Optional[float] = None) -> None:
        """Waits until cost units of key's limit are allowed, and consumes
        them, for up to timeout seconds (None: no limit): coordd waits for
        each denial's retry_after itself, so nothing polls. TimeoutError past
        the timeout, and nothing consumed."""
        deadline = deadline_of(timeout)
        while True:
            wait = self._waits.cap(self.max_wait)
            rest = left(deadline)
            if rest is not None:
                wait = min(wait, rest - CALL_SLACK)
                if wait <= 0:
                    raise TimeoutError("%s was not allowed in time" % key)
            try:
                d = self._allow(key, cost, wait, deadline)
            except grpc.RpcError as err:
                if self._waits.learn(err, wait):
                    continue
                raise
            if d.allowed:
                return
            # Denied at once: the retry_after lies beyond the wait. Sleep
            # until it if the deadline lets us; else ask again.
            if d.retry_after > wait:
                rest = left(deadline)
                if rest is not None and rest < d.retry_after:
                    raise TimeoutError("%s is not allowed before the timeout (retry after %.3fs)" % (key, d.retry_after))
                time.sleep(d.retry_after - wait)

    def _allow(self, key: str, cost: int, wait: float, deadline: Optional[float], peek: bool = False) -> Decision:
        req = ratelimit_pb2.AllowRequest(key=key, policy=self.policy, cost=cost, peek=peek)
        if self.limit is not None:
            req.limit.CopyFrom(self.limit)
        if wait > 0:
            req.wait.CopyFrom(duration(wait))
        resp = self._stub.Allow(req, timeout=call_timeout(deadline, wait), metadata=self.metadata)
        return Decision(
            allowed=resp.allowed, remaining=resp.remaining, retry_after=resp.retry_after.ToNanoseconds() / 1e9,
            reset_after=resp.reset_after.ToNanoseconds() / 1e9, limit=resp.limit, degraded=resp.degraded,
            denied_by=resp.denied_by)
