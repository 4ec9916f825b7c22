"""coordd's Python client: the generated gRPC stubs of every service
(coordd.v1: lock_pb2, lock_pb2_grpc, ...) and the primitives applications
use, in the spirit of coordd's Go client (package client):

- Session: a lease kept alive by a KeepAlive stream (a heartbeat every
  TTL/3, a broken stream resumed with jittered backoff, a conservative local
  deadline), the holds coordd reports lost, and a half-closing close().
- Mutex (Session.lock): a lock bound to a session, held in a with block,
  with its fence; told at once when coordd reports it lost or the session
  ends.
- Limiter: rate-limit decisions (allow) and waits (wait).
- idempotent: run a function once per key and replay its outcome.
- Worker: consume a queue at least once, with a claim extended while the
  handler runs, ack or nack, concurrency and a graceful stop.

Every call has a deadline; a call whose outcome is unknown (UNAVAILABLE) is
retried where a retry is safe, and otherwise raised: never reported as "no".

    import grpc, coordd

    channel = grpc.insecure_channel("127.0.0.1:7070")
    with coordd.Session(channel, ttl=10) as session:
        with session.lock("reports/daily") as lock:
            ...  # fence every write with lock.fence
"""

from .errors import (CoorddError, Failure, LockedError, LostError, NotHeldError, NotOwnerError, SessionError,
                     describe, error_info, overloaded, wait_limit)
from .idempotent import idempotent
from .limiter import Decision, Limiter
from .lock import Mutex
from .session import LostHold, Session
from .worker import Message, Retry, Worker

__version__ = "0.1.0"

__all__ = [
    "Session", "LostHold", "Mutex", "Limiter", "Decision", "idempotent", "Worker", "Message", "Retry",
    "CoorddError", "LockedError", "NotHeldError", "LostError", "SessionError", "NotOwnerError", "Failure",
    "describe", "error_info", "overloaded", "wait_limit",
]
