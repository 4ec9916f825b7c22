"""idempotent: run a function once per key across every caller, and give
every caller its outcome (BeginIdempotent, ExtendIdempotent, Finish).

    def charge(lost):            # lost: set if the key's lease ran out
        return payments.charge(order)        # bytes: the result to cache

    receipt = coordd.idempotent(channel, "charge:" + order.id, fingerprint, charge)

The first caller runs the function; a concurrent caller waits for its
outcome; a later one gets the cached outcome (the result, or a terminal
Failure raised again). A key in use with another fingerprint is
grpc.RpcError FAILED_PRECONDITION.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

import grpc

from ._calls import (CALL_SLACK, DEFAULT_MAX_WAIT, WaitCap, call_timeout, deadline_of, duration, left, retry)
from .errors import Failure, NotOwnerError, describe
from .session import Metadata
from .v1 import idempotency_pb2, idempotency_pb2_grpc

__all__ = ["idempotent"]

# FINISH_TIMEOUT bounds storing an outcome (retried while uncertain), even
# past the caller's timeout: a retryable failure frees the key for the next
# caller now, not at its TTL.
FINISH_TIMEOUT = 5.0


def idempotent(channel: grpc.Channel, key: str, fingerprint: str, fn: Callable[[threading.Event], bytes],
               processing_ttl: Optional[float] = None, result_ttl: Optional[float] = None,
               metadata: Optional[Metadata] = None, timeout: Optional[float] = None) -> bytes:
    """Runs fn at most once for key across every caller (once at least for
    as long as its outcome is cached), and returns its outcome: the cached
    result, or fn's. fingerprint identifies the request (a hash of its
    content). While another caller runs fn for key, waits for its outcome,
    for up to timeout seconds (None: no limit; TimeoutError past it).

    fn gets an Event that is set if the key's lease could not be extended
    (another caller may take over: stop). It returns the result to cache
    (bytes), or raises: a Failure says whether a retry may run fn again
    (retryable) or every later caller gets the failure (terminal); any
    other exception is stored as a retryable failure and raised again. A
    cached terminal failure is raised as Failure. NotOwnerError: fn ran, but
    its lease ran out before its outcome was stored.

    processing_ttl  how long the work owns the key without an extension
                    (seconds; None: coordd's default); extended every third
                    of it while fn runs
    result_ttl      how long the outcome is cached (None: coordd's default)
    """
    stub = idempotency_pb2_grpc.IdempotencyServiceStub(channel)
    md: Metadata = tuple(metadata or ())
    deadline = deadline_of(timeout)
    waits = WaitCap()
    while True:
        wait = waits.cap(DEFAULT_MAX_WAIT)
        rest = left(deadline)
        if rest is not None:
            wait = max(0.0, min(wait, rest - CALL_SLACK))
        req = idempotency_pb2.BeginIdempotentRequest(key=key, fingerprint=fingerprint, wait=duration(wait))
        if processing_ttl:
            req.processing_ttl.CopyFrom(duration(processing_ttl))
        try:
            resp = retry(lambda t: stub.BeginIdempotent(req, timeout=call_timeout(deadline, wait), metadata=md), deadline)
        except grpc.RpcError as err:
            if left(deadline) != 0 and waits.learn(err, wait):
                continue
            raise
        if resp.outcome == idempotency_pb2.OUTCOME_COMPLETED:
            return resp.result
        if resp.outcome == idempotency_pb2.OUTCOME_FAILED:
            raise Failure(resp.failure.message)
        if resp.outcome == idempotency_pb2.OUTCOME_EXECUTE:
            return _execute(stub, md, key, fingerprint, resp, processing_ttl, result_ttl, fn)
        # In progress elsewhere and the wait ran out: wait again.
        if left(deadline) == 0:
            raise TimeoutError("%s is still in progress elsewhere" % key)


def _execute(stub: idempotency_pb2_grpc.IdempotencyServiceStub, md: Metadata, key: str, fingerprint: str,
             begun: idempotency_pb2.BeginIdempotentResponse, processing_ttl: Optional[float],
             result_ttl: Optional[float], fn: Callable[[threading.Event], bytes]) -> bytes:
    """Runs fn as the key's owner, extending the lease while it runs, and
    stores its outcome."""
    token = begun.owner_token
    # The lease's end on the local monotonic clock.
    expires = [time.monotonic() + begun.expire_time.ToNanoseconds() / 1e9 - time.time()]
    ttl = processing_ttl or max(0.1, expires[0] - time.monotonic())  # coordd's default, as granted
    done, lost = threading.Event(), threading.Event()
    why: list = []

    def extend() -> None:
        # A third of the lease ahead, until fn returns; give up (and tell
        # fn) when the lease has run out without one.
        while not done.wait(ttl / 3):
            try:
                resp = retry(lambda t: stub.ExtendIdempotent(
                    idempotency_pb2.ExtendIdempotentRequest(key=key, owner_token=token, processing_ttl=duration(ttl)),
                    timeout=t, metadata=md), expires[0], done)
            except grpc.RpcError as err:
                if not done.is_set():
                    why.append(err)
                    lost.set()
                return
            expires[0] = time.monotonic() + resp.expire_time.ToNanoseconds() / 1e9 - time.time()

    extender = threading.Thread(target=extend, name="coordd-idempotent", daemon=True)
    extender.start()
    result: bytes = b""
    raised: Optional[BaseException] = None
    try:
        result = fn(lost)
    except Exception as e:  # stored below, raised again
        raised = e
    finally:
        done.set()
        extender.join()
    if why and why[0].code() == grpc.StatusCode.FAILED_PRECONDITION:
        raise NotOwnerError("%s: extending the lease: %s" % (key, describe(why[0])))
    # An extension that failed otherwise was uncertain: the lease may still
    # be ours, and Finish tells (FAILED_PRECONDITION if it is not).

    fin = idempotency_pb2.FinishRequest(key=key, owner_token=token)
    if result_ttl:
        fin.result_ttl.CopyFrom(duration(result_ttl))
    if raised is None:
        fin.result = result
    elif isinstance(raised, Failure):
        fin.failure.CopyFrom(idempotency_pb2.Failure(message=raised.message, retryable=raised.retryable))
    else:
        fin.failure.CopyFrom(idempotency_pb2.Failure(message=str(raised) or type(raised).__name__, retryable=True))
    deadline = deadline_of(FINISH_TIMEOUT)
    attempts = [0]

    def finish(t: float) -> idempotency_pb2.FinishResponse:
        attempts[0] += 1
        return stub.Finish(fin, timeout=t, metadata=md)

    try:
        retry(finish, deadline)
    except grpc.RpcError as err:
        if err.code() != grpc.StatusCode.FAILED_PRECONDITION:
            raise
        if attempts[0] == 1:
            raise NotOwnerError("%s: the lease ran out before the outcome was stored" % key) from err
        # An earlier attempt may have stored it: read what is stored.
        resp = retry(lambda t: stub.BeginIdempotent(
            idempotency_pb2.BeginIdempotentRequest(key=key, fingerprint=fingerprint), timeout=t, metadata=md), deadline)
        if resp.outcome == idempotency_pb2.OUTCOME_COMPLETED:
            return resp.result
        if resp.outcome == idempotency_pb2.OUTCOME_FAILED:
            raise Failure(resp.failure.message) from raised
        if resp.outcome != idempotency_pb2.OUTCOME_EXECUTE:
            raise NotOwnerError("%s: the lease ran out before the outcome was stored" % key) from err
        # Not stored, and the key is ours again: store it now.
        fin.owner_token = resp.owner_token
        try:
            retry(lambda t: stub.Finish(fin, timeout=t, metadata=md), deadline)
        except grpc.RpcError as err2:
            if err2.code() == grpc.StatusCode.FAILED_PRECONDITION:
                raise NotOwnerError("%s: the lease ran out before the outcome was stored" % key) from err2
            raise
    if raised is not None:
        raise raised
    return result
