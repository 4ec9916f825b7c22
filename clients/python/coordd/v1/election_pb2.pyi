from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CampaignRequest(_message.Message):
    __slots__ = ["name", "session_id", "value", "wait"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    name: str
    session_id: str
    value: bytes
    wait: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., value: _Optional[bytes] = ..., session_id: _Optional[str] = ..., wait: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CampaignResponse(_message.Message):
    __slots__ = ["already_leader", "elected", "expire_time", "fence", "has_leader", "leader", "token"]
    ALREADY_LEADER_FIELD_NUMBER: _ClassVar[int]
    ELECTED_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    HAS_LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    already_leader: bool
    elected: bool
    expire_time: _timestamp_pb2.Timestamp
    fence: int
    has_leader: bool
    leader: Leader
    token: str
    def __init__(self, elected: bool = ..., token: _Optional[str] = ..., fence: _Optional[int] = ..., leader: _Optional[_Union[Leader, _Mapping]] = ..., has_leader: bool = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., already_leader: bool = ...) -> None: ...

class Leader(_message.Message):
    __slots__ = ["elect_time", "fence", "value"]
    ELECT_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    elect_time: _timestamp_pb2.Timestamp
    fence: int
    value: bytes
    def __init__(self, value: _Optional[bytes] = ..., fence: _Optional[int] = ..., elect_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LeaderRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class LeaderResponse(_message.Message):
    __slots__ = ["has_leader", "leader", "rev"]
    HAS_LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REV_FIELD_NUMBER: _ClassVar[int]
    has_leader: bool
    leader: Leader
    rev: int
    def __init__(self, leader: _Optional[_Union[Leader, _Mapping]] = ..., has_leader: bool = ..., rev: _Optional[int] = ...) -> None: ...

class ObserveRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ObserveResponse(_message.Message):
    __slots__ = ["has_leader", "leader", "missed", "rev"]
    HAS_LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    REV_FIELD_NUMBER: _ClassVar[int]
    has_leader: bool
    leader: Leader
    missed: int
    rev: int
    def __init__(self, leader: _Optional[_Union[Leader, _Mapping]] = ..., has_leader: bool = ..., missed: _Optional[int] = ..., rev: _Optional[int] = ...) -> None: ...

class ProclaimRequest(_message.Message):
    __slots__ = ["name", "token", "value"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    token: str
    value: bytes
    def __init__(self, name: _Optional[str] = ..., token: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class ProclaimResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ResignRequest(_message.Message):
    __slots__ = ["name", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    token: str
    def __init__(self, name: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class ResignResponse(_message.Message):
    __slots__ = ["resigned"]
    RESIGNED_FIELD_NUMBER: _ClassVar[int]
    resigned: bool
    def __init__(self, resigned: bool = ...) -> None: ...
