from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CheckFenceRequest(_message.Message):
    __slots__ = ["fence", "name"]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    fence: int
    name: str
    def __init__(self, name: _Optional[str] = ..., fence: _Optional[int] = ...) -> None: ...

class CheckFenceResponse(_message.Message):
    __slots__ = ["current"]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    current: bool
    def __init__(self, current: bool = ...) -> None: ...

class GetLockRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetLockResponse(_message.Message):
    __slots__ = ["acquire_time", "expire_time", "fence", "held", "holders", "owner", "session_bound", "ttl", "waiters"]
    ACQUIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SESSION_BOUND_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    acquire_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    fence: int
    held: bool
    holders: _containers.RepeatedCompositeFieldContainer[Holder]
    owner: str
    session_bound: bool
    ttl: _duration_pb2.Duration
    waiters: int
    def __init__(self, held: bool = ..., owner: _Optional[str] = ..., fence: _Optional[int] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., acquire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., session_bound: bool = ..., holders: _Optional[_Iterable[_Union[Holder, _Mapping]]] = ..., waiters: _Optional[int] = ...) -> None: ...

class Holder(_message.Message):
    __slots__ = ["acquire_time", "expire_time", "fence", "owner", "session_bound", "shared", "ttl"]
    ACQUIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SESSION_BOUND_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    acquire_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    fence: int
    owner: str
    session_bound: bool
    shared: bool
    ttl: _duration_pb2.Duration
    def __init__(self, owner: _Optional[str] = ..., fence: _Optional[int] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., shared: bool = ..., session_bound: bool = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., acquire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LockRequest(_message.Message):
    __slots__ = ["max_hold", "name", "owner", "session_id", "shared", "ttl", "wait"]
    MAX_HOLD_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    max_hold: _duration_pb2.Duration
    name: str
    owner: str
    session_id: str
    shared: bool
    ttl: _duration_pb2.Duration
    wait: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., wait: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., session_id: _Optional[str] = ..., owner: _Optional[str] = ..., max_hold: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., shared: bool = ...) -> None: ...

class LockResponse(_message.Message):
    __slots__ = ["acquired", "already_held", "expire_time", "fence", "holder", "holders", "token", "ttl"]
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    ALREADY_HELD_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    acquired: bool
    already_held: bool
    expire_time: _timestamp_pb2.Timestamp
    fence: int
    holder: str
    holders: int
    token: str
    ttl: _duration_pb2.Duration
    def __init__(self, acquired: bool = ..., token: _Optional[str] = ..., fence: _Optional[int] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., holder: _Optional[str] = ..., already_held: bool = ..., holders: _Optional[int] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ["name", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    token: str
    def __init__(self, name: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ["released"]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: bool = ...) -> None: ...

class RenewRequest(_message.Message):
    __slots__ = ["name", "token", "ttl"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    name: str
    token: str
    ttl: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., token: _Optional[str] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RenewResponse(_message.Message):
    __slots__ = ["expire_time", "fence", "ttl"]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    expire_time: _timestamp_pb2.Timestamp
    fence: int
    ttl: _duration_pb2.Duration
    def __init__(self, ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., fence: _Optional[int] = ...) -> None: ...
