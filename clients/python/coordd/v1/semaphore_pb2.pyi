from . import lock_pb2 as _lock_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AcquireRequest(_message.Message):
    __slots__ = ["limit", "max_hold", "name", "owner", "session_id", "ttl", "wait"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MAX_HOLD_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    max_hold: _duration_pb2.Duration
    name: str
    owner: str
    session_id: str
    ttl: _duration_pb2.Duration
    wait: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[int] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., session_id: _Optional[str] = ..., wait: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., owner: _Optional[str] = ..., max_hold: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AcquireResponse(_message.Message):
    __slots__ = ["acquired", "already_held", "expire_time", "fence", "holder", "holders", "limit", "token", "ttl"]
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    ALREADY_HELD_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    acquired: bool
    already_held: bool
    expire_time: _timestamp_pb2.Timestamp
    fence: int
    holder: str
    holders: int
    limit: int
    token: str
    ttl: _duration_pb2.Duration
    def __init__(self, acquired: bool = ..., token: _Optional[str] = ..., fence: _Optional[int] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., holders: _Optional[int] = ..., limit: _Optional[int] = ..., holder: _Optional[str] = ..., already_held: bool = ...) -> None: ...

class GetSemaphoreRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetSemaphoreResponse(_message.Message):
    __slots__ = ["holders", "limit", "waiters"]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    holders: _containers.RepeatedCompositeFieldContainer[_lock_pb2.Holder]
    limit: int
    waiters: int
    def __init__(self, limit: _Optional[int] = ..., holders: _Optional[_Iterable[_Union[_lock_pb2.Holder, _Mapping]]] = ..., waiters: _Optional[int] = ...) -> None: ...

class SemaphoreServiceReleaseRequest(_message.Message):
    __slots__ = ["name", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    token: str
    def __init__(self, name: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class SemaphoreServiceReleaseResponse(_message.Message):
    __slots__ = ["released"]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: bool = ...) -> None: ...

class SemaphoreServiceRenewRequest(_message.Message):
    __slots__ = ["name", "token", "ttl"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    name: str
    token: str
    ttl: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., token: _Optional[str] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SemaphoreServiceRenewResponse(_message.Message):
    __slots__ = ["expire_time", "fence", "ttl"]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    expire_time: _timestamp_pb2.Timestamp
    fence: int
    ttl: _duration_pb2.Duration
    def __init__(self, ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., fence: _Optional[int] = ...) -> None: ...
