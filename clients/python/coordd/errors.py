"""coordd's errors as this package reports them, and what a gRPC error
from coordd says: its google.rpc.ErrorInfo (reason and metadata), a wait
over coordd's limits.max_wait, a refusal of new work at capacity.

coordd answers every error with a gRPC status and, in the
``grpc-status-details-bin`` trailer, a google.rpc.ErrorInfo whose domain is
"coordd" and whose reason names the case (README.md lists them). The trailer
is decoded here by hand, so that nothing beyond grpcio and protobuf is
needed (google.rpc's generated code lives in another distribution).
"""

from __future__ import annotations

from typing import Dict, Iterator, Optional, Tuple

import grpc

__all__ = [
    "CoorddError", "LockedError", "NotHeldError", "LostError", "SessionError",
    "NotOwnerError", "Failure", "error_info", "overloaded", "wait_limit", "describe",
]


class CoorddError(Exception):
    """The base of this package's own errors (gRPC errors are raised as
    grpc.RpcError, as the stubs raise them)."""


class LockedError(CoorddError):
    """try_lock's answer when the lock is held by another."""


class NotHeldError(CoorddError):
    """unlock's answer when the lock was not held any more: lost (coordd may
    not have reported it yet), or never taken."""


class SessionError(CoorddError, RuntimeError):
    """The session is over: it expired, another stream resumed it, no
    heartbeat was answered within its TTL, or it could not be resumed."""


class LostError(CoorddError):
    """coordd reported a hold lost (hold: a LostHold, with its kind, name,
    fence and reason)."""

    def __init__(self, hold: object) -> None:
        super().__init__("coordd reports %r" % (hold,))
        self.hold = hold


class NotOwnerError(CoorddError):
    """idempotent ran the function, but its lease on the key ran out before
    its outcome was stored (extensions failed): another caller may have run
    it too."""


class Failure(CoorddError):
    """An outcome of an idempotent function that coordd stores: retryable,
    the key is cleared so that a later call runs the function again;
    terminal (not retryable), the failure is cached and replayed to every
    later call (which raises it, retryable False)."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__("%s failure: %s" % ("retryable" if retryable else "terminal", message))
        self.message = message
        self.retryable = retryable


def _varint(b: bytes, i: int) -> Tuple[int, int]:
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        if c < 0x80:
            return n, i
        shift += 7


def _fields(b: bytes) -> Iterator[Tuple[int, object]]:
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


def _text(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else ""


def error_info(err: BaseException) -> Optional[Tuple[str, Dict[str, str]]]:
    """The google.rpc.ErrorInfo of a grpc.RpcError from coordd, as (reason,
    metadata), or None. It is read from the grpc-status-details-bin trailer
    (a google.rpc.Status, whose details are Any)."""
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailers or ():
        if key != "grpc-status-details-bin" or not isinstance(value, bytes):
            continue
        for number, detail in _fields(value):
            if number != 3 or not isinstance(detail, bytes):  # Status.details
                continue
            any_fields = dict(_fields(detail))
            if _text(any_fields.get(1)) != "type.googleapis.com/google.rpc.ErrorInfo":
                continue
            reason, domain, metadata = "", "", {}
            info = any_fields.get(2)
            for n, v in _fields(info if isinstance(info, bytes) else b""):
                if n == 1:
                    reason = _text(v)
                elif n == 2:
                    domain = _text(v)
                elif n == 3 and isinstance(v, bytes):
                    entry = dict(_fields(v))
                    metadata[_text(entry.get(1))] = _text(entry.get(2))
            if domain == "coordd":
                return reason, metadata
    return None


def _seconds(text: str) -> Optional[float]:
    """Seconds in a duration as coordd writes it in ErrorInfo metadata
    (decimal seconds and an "s": "1s", "0.25s"), or None."""
    try:
        v = float(text[:-1]) if text.endswith("s") else None
    except ValueError:
        return None
    return v if v and v > 0 else None


def overloaded(err: BaseException) -> Optional[float]:
    """How many seconds coordd asked to wait when err is its refusal of new
    work at capacity (RESOURCE_EXHAUSTED, reason OVERLOADED), else None. A
    refusal without a readable retry_after asks for a second."""
    if not isinstance(err, grpc.RpcError) or err.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    info = error_info(err)
    if info is None or info[0] != "OVERLOADED":
        return None
    return _seconds(info[1].get("retry_after", "")) or 1.0


def wait_limit(err: BaseException) -> Optional[float]:
    """The limit (seconds) that err, coordd's INVALID_ARGUMENT for a wait
    over its limits.max_wait, names; None if err is not that or names none."""
    if not isinstance(err, grpc.RpcError) or err.code() != grpc.StatusCode.INVALID_ARGUMENT:
        return None
    info = error_info(err)
    if info is None or info[1].get("field") != "wait":
        return None
    return _seconds(info[1].get("limit", ""))


def describe(err: BaseException) -> str:
    """err as CODE (REASON): message for a gRPC error from coordd; other
    errors as str() gives them."""
    if not isinstance(err, grpc.RpcError) or not hasattr(err, "code"):
        return str(err)
    info = error_info(err)
    reason = " (%s)" % info[0] if info and info[0] else ""
    return "%s%s: %s" % (err.code().name, reason, err.details())
