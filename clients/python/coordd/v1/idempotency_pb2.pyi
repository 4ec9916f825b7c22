from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
OUTCOME_COMPLETED: Outcome
OUTCOME_EXECUTE: Outcome
OUTCOME_FAILED: Outcome
OUTCOME_IN_PROGRESS: Outcome
OUTCOME_UNSPECIFIED: Outcome

class BeginIdempotentRequest(_message.Message):
    __slots__ = ["fingerprint", "key", "processing_ttl", "wait"]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PROCESSING_TTL_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    fingerprint: str
    key: str
    processing_ttl: _duration_pb2.Duration
    wait: _duration_pb2.Duration
    def __init__(self, key: _Optional[str] = ..., fingerprint: _Optional[str] = ..., processing_ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., wait: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class BeginIdempotentResponse(_message.Message):
    __slots__ = ["expire_time", "failure", "outcome", "owner_token", "result"]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    OWNER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    expire_time: _timestamp_pb2.Timestamp
    failure: Failure
    outcome: Outcome
    owner_token: str
    result: bytes
    def __init__(self, outcome: _Optional[_Union[Outcome, str]] = ..., owner_token: _Optional[str] = ..., result: _Optional[bytes] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ExtendIdempotentRequest(_message.Message):
    __slots__ = ["key", "owner_token", "processing_ttl"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    OWNER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PROCESSING_TTL_FIELD_NUMBER: _ClassVar[int]
    key: str
    owner_token: str
    processing_ttl: _duration_pb2.Duration
    def __init__(self, key: _Optional[str] = ..., owner_token: _Optional[str] = ..., processing_ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ExtendIdempotentResponse(_message.Message):
    __slots__ = ["expire_time"]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ["message", "retryable"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    message: str
    retryable: bool
    def __init__(self, message: _Optional[str] = ..., retryable: bool = ...) -> None: ...

class FinishRequest(_message.Message):
    __slots__ = ["failure", "key", "owner_token", "result", "result_ttl"]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    OWNER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_TTL_FIELD_NUMBER: _ClassVar[int]
    failure: Failure
    key: str
    owner_token: str
    result: bytes
    result_ttl: _duration_pb2.Duration
    def __init__(self, key: _Optional[str] = ..., owner_token: _Optional[str] = ..., result: _Optional[bytes] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., result_ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class FinishResponse(_message.Message):
    __slots__ = ["stored"]
    STORED_FIELD_NUMBER: _ClassVar[int]
    stored: bool
    def __init__(self, stored: bool = ...) -> None: ...

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
