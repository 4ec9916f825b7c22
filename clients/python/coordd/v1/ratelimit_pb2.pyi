from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

ALGORITHM_FIXED_WINDOW: Algorithm
ALGORITHM_LEAKY_BUCKET: Algorithm
ALGORITHM_SLIDING_LOG: Algorithm
ALGORITHM_SLIDING_WINDOW: Algorithm
ALGORITHM_TOKEN_BUCKET: Algorithm
ALGORITHM_UNSPECIFIED: Algorithm
DESCRIPTOR: _descriptor.FileDescriptor
ON_STORE_FAILURE_FAIL_CLOSED: OnStoreFailure
ON_STORE_FAILURE_FAIL_OPEN: OnStoreFailure
ON_STORE_FAILURE_LOCAL: OnStoreFailure
ON_STORE_FAILURE_UNSPECIFIED: OnStoreFailure

class AllowRequest(_message.Message):
    __slots__ = ["cost", "key", "limit", "peek", "policy", "wait"]
    COST_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PEEK_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    cost: int
    key: str
    limit: Limit
    peek: bool
    policy: str
    wait: _duration_pb2.Duration
    def __init__(self, key: _Optional[str] = ..., policy: _Optional[str] = ..., limit: _Optional[_Union[Limit, _Mapping]] = ..., cost: _Optional[int] = ..., peek: bool = ..., wait: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AllowResponse(_message.Message):
    __slots__ = ["allowed", "degraded", "denied_by", "limit", "remaining", "reset_after", "retry_after", "shadow_denied"]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    DENIED_BY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    RESET_AFTER_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    SHADOW_DENIED_FIELD_NUMBER: _ClassVar[int]
    allowed: bool
    degraded: bool
    denied_by: str
    limit: int
    remaining: int
    reset_after: _duration_pb2.Duration
    retry_after: _duration_pb2.Duration
    shadow_denied: bool
    def __init__(self, allowed: bool = ..., remaining: _Optional[int] = ..., limit: _Optional[int] = ..., retry_after: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., reset_after: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., degraded: bool = ..., shadow_denied: bool = ..., denied_by: _Optional[str] = ...) -> None: ...

class DeletePolicyRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeletePolicyResponse(_message.Message):
    __slots__ = ["deleted"]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: bool = ...) -> None: ...

class Limit(_message.Message):
    __slots__ = ["algorithm", "burst", "limit", "period"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    algorithm: Algorithm
    burst: int
    limit: int
    period: _duration_pb2.Duration
    def __init__(self, algorithm: _Optional[_Union[Algorithm, str]] = ..., limit: _Optional[int] = ..., period: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., burst: _Optional[int] = ...) -> None: ...

class ListPoliciesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListPoliciesResponse(_message.Message):
    __slots__ = ["config", "runtime"]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    config: _containers.RepeatedCompositeFieldContainer[Policy]
    runtime: _containers.RepeatedCompositeFieldContainer[Policy]
    def __init__(self, runtime: _Optional[_Iterable[_Union[Policy, _Mapping]]] = ..., config: _Optional[_Iterable[_Union[Policy, _Mapping]]] = ...) -> None: ...

class NamedLimit(_message.Message):
    __slots__ = ["limit", "name"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    limit: Limit
    name: str
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[_Union[Limit, _Mapping]] = ...) -> None: ...

class Policy(_message.Message):
    __slots__ = ["limit", "limits", "local_quota", "name", "on_store_failure", "shadow"]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    LOCAL_QUOTA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ON_STORE_FAILURE_FIELD_NUMBER: _ClassVar[int]
    SHADOW_FIELD_NUMBER: _ClassVar[int]
    limit: Limit
    limits: _containers.RepeatedCompositeFieldContainer[NamedLimit]
    local_quota: int
    name: str
    on_store_failure: OnStoreFailure
    shadow: bool
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[_Union[Limit, _Mapping]] = ..., limits: _Optional[_Iterable[_Union[NamedLimit, _Mapping]]] = ..., shadow: bool = ..., on_store_failure: _Optional[_Union[OnStoreFailure, str]] = ..., local_quota: _Optional[int] = ...) -> None: ...

class PutPolicyRequest(_message.Message):
    __slots__ = ["policy"]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: Policy
    def __init__(self, policy: _Optional[_Union[Policy, _Mapping]] = ...) -> None: ...

class PutPolicyResponse(_message.Message):
    __slots__ = ["created"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    created: bool
    def __init__(self, created: bool = ...) -> None: ...

class OnStoreFailure(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Algorithm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
