from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
HOLD_KIND_ELECTION: HoldKind
HOLD_KIND_LOCK: HoldKind
HOLD_KIND_SEMAPHORE: HoldKind
HOLD_KIND_UNSPECIFIED: HoldKind
LOCK_LOSS_REASON_GONE: LockLossReason
LOCK_LOSS_REASON_MAX_HOLD: LockLossReason
LOCK_LOSS_REASON_SESSION_EXPIRED: LockLossReason
LOCK_LOSS_REASON_UNSPECIFIED: LockLossReason

class KeepAliveRequest(_message.Message):
    __slots__ = ["lock_delay", "session_id", "ttl"]
    LOCK_DELAY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    lock_delay: _duration_pb2.Duration
    session_id: str
    ttl: _duration_pb2.Duration
    def __init__(self, session_id: _Optional[str] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., lock_delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class KeepAliveResponse(_message.Message):
    __slots__ = ["expire_time", "expired", "lost_locks", "session_id", "superseded", "ttl"]
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LOST_LOCKS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    expire_time: _timestamp_pb2.Timestamp
    expired: bool
    lost_locks: _containers.RepeatedCompositeFieldContainer[LostLock]
    session_id: str
    superseded: bool
    ttl: _duration_pb2.Duration
    def __init__(self, session_id: _Optional[str] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., lost_locks: _Optional[_Iterable[_Union[LostLock, _Mapping]]] = ..., expired: bool = ..., superseded: bool = ...) -> None: ...

class LostLock(_message.Message):
    __slots__ = ["fence", "kind", "name", "reason"]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    fence: int
    kind: HoldKind
    name: str
    reason: LockLossReason
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[_Union[LockLossReason, str]] = ..., fence: _Optional[int] = ..., kind: _Optional[_Union[HoldKind, str]] = ...) -> None: ...

class LockLossReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class HoldKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
