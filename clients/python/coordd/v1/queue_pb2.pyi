from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DEDUP_MODE_KEEP_FIRST: DedupMode
DEDUP_MODE_REPLACE: DedupMode
DEDUP_MODE_UNSPECIFIED: DedupMode
DESCRIPTOR: _descriptor.FileDescriptor

class AckRequest(_message.Message):
    __slots__ = ["queue", "receipt", "receipts"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    receipt: str
    receipts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, queue: _Optional[str] = ..., receipt: _Optional[str] = ..., receipts: _Optional[_Iterable[str]] = ...) -> None: ...

class AckResponse(_message.Message):
    __slots__ = ["acked", "acked_count", "expired_receipts"]
    ACKED_COUNT_FIELD_NUMBER: _ClassVar[int]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    acked: bool
    acked_count: int
    expired_receipts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, acked: bool = ..., acked_count: _Optional[int] = ..., expired_receipts: _Optional[_Iterable[str]] = ...) -> None: ...

class ClaimRate(_message.Message):
    __slots__ = ["limit", "period"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    limit: int
    period: _duration_pb2.Duration
    def __init__(self, limit: _Optional[int] = ..., period: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ClaimRequest(_message.Message):
    __slots__ = ["max_messages", "queue", "visibility_timeout", "wait"]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    max_messages: int
    queue: str
    visibility_timeout: _duration_pb2.Duration
    wait: _duration_pb2.Duration
    def __init__(self, queue: _Optional[str] = ..., max_messages: _Optional[int] = ..., visibility_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., wait: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ClaimResponse(_message.Message):
    __slots__ = ["messages"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class ConfigureQueueRequest(_message.Message):
    __slots__ = ["claim_rate", "max_in_flight", "queue"]
    CLAIM_RATE_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    claim_rate: ClaimRate
    max_in_flight: int
    queue: str
    def __init__(self, queue: _Optional[str] = ..., max_in_flight: _Optional[int] = ..., claim_rate: _Optional[_Union[ClaimRate, _Mapping]] = ...) -> None: ...

class ConfigureQueueResponse(_message.Message):
    __slots__ = ["settings"]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: QueueSettings
    def __init__(self, settings: _Optional[_Union[QueueSettings, _Mapping]] = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ["attempts", "dead_time", "enqueue_time", "group", "message_id", "payload_preview", "payload_size", "priority"]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    DEAD_TIME_FIELD_NUMBER: _ClassVar[int]
    ENQUEUE_TIME_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_PREVIEW_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SIZE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    attempts: int
    dead_time: _timestamp_pb2.Timestamp
    enqueue_time: _timestamp_pb2.Timestamp
    group: str
    message_id: str
    payload_preview: bytes
    payload_size: int
    priority: int
    def __init__(self, message_id: _Optional[str] = ..., payload_preview: _Optional[bytes] = ..., payload_size: _Optional[int] = ..., attempts: _Optional[int] = ..., enqueue_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., dead_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., priority: _Optional[int] = ..., group: _Optional[str] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ["name", "queue"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ["deleted"]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: bool = ...) -> None: ...

class EnqueueRequest(_message.Message):
    __slots__ = ["dedup_id", "dedup_mode", "delay", "deliver_time", "group", "max_attempts", "payload", "priority", "queue"]
    DEDUP_ID_FIELD_NUMBER: _ClassVar[int]
    DEDUP_MODE_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    DELIVER_TIME_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    dedup_id: str
    dedup_mode: DedupMode
    delay: _duration_pb2.Duration
    deliver_time: _timestamp_pb2.Timestamp
    group: str
    max_attempts: int
    payload: bytes
    priority: int
    queue: str
    def __init__(self, queue: _Optional[str] = ..., payload: _Optional[bytes] = ..., delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., deliver_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., dedup_id: _Optional[str] = ..., max_attempts: _Optional[int] = ..., priority: _Optional[int] = ..., group: _Optional[str] = ..., dedup_mode: _Optional[_Union[DedupMode, str]] = ...) -> None: ...

class EnqueueResponse(_message.Message):
    __slots__ = ["deliver_time", "duplicate", "message_id", "replaced"]
    DELIVER_TIME_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    deliver_time: _timestamp_pb2.Timestamp
    duplicate: bool
    message_id: str
    replaced: bool
    def __init__(self, message_id: _Optional[str] = ..., deliver_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., duplicate: bool = ..., replaced: bool = ...) -> None: ...

class ExtendRequest(_message.Message):
    __slots__ = ["queue", "receipt", "visibility_timeout"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    receipt: str
    visibility_timeout: _duration_pb2.Duration
    def __init__(self, queue: _Optional[str] = ..., receipt: _Optional[str] = ..., visibility_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ExtendResponse(_message.Message):
    __slots__ = ["expire_time"]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetQueueSettingsRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class GetQueueSettingsResponse(_message.Message):
    __slots__ = ["settings"]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: QueueSettings
    def __init__(self, settings: _Optional[_Union[QueueSettings, _Mapping]] = ...) -> None: ...

class ListDeadLettersRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "preview_bytes", "queue"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_BYTES_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    preview_bytes: int
    queue: str
    def __init__(self, queue: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., preview_bytes: _Optional[int] = ...) -> None: ...

class ListDeadLettersResponse(_message.Message):
    __slots__ = ["dead_letters", "next_page_token"]
    DEAD_LETTERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    dead_letters: _containers.RepeatedCompositeFieldContainer[DeadLetter]
    next_page_token: str
    def __init__(self, dead_letters: _Optional[_Iterable[_Union[DeadLetter, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ["schedules"]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["attempt", "deliver_time", "enqueue_time", "expire_time", "group", "max_attempts", "message_id", "payload", "priority", "receipt"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DELIVER_TIME_FIELD_NUMBER: _ClassVar[int]
    ENQUEUE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    deliver_time: _timestamp_pb2.Timestamp
    enqueue_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    group: str
    max_attempts: int
    message_id: str
    payload: bytes
    priority: int
    receipt: str
    def __init__(self, message_id: _Optional[str] = ..., payload: _Optional[bytes] = ..., receipt: _Optional[str] = ..., attempt: _Optional[int] = ..., enqueue_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., deliver_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., max_attempts: _Optional[int] = ..., priority: _Optional[int] = ..., group: _Optional[str] = ...) -> None: ...

class NackRequest(_message.Message):
    __slots__ = ["delay", "queue", "receipt"]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    delay: _duration_pb2.Duration
    queue: str
    receipt: str
    def __init__(self, queue: _Optional[str] = ..., receipt: _Optional[str] = ..., delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class NackResponse(_message.Message):
    __slots__ = ["dead_lettered", "deliver_time"]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    DELIVER_TIME_FIELD_NUMBER: _ClassVar[int]
    dead_lettered: bool
    deliver_time: _timestamp_pb2.Timestamp
    def __init__(self, deliver_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., dead_lettered: bool = ...) -> None: ...

class PauseQueueRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class PauseQueueResponse(_message.Message):
    __slots__ = ["settings"]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: QueueSettings
    def __init__(self, settings: _Optional[_Union[QueueSettings, _Mapping]] = ...) -> None: ...

class PurgeDeadLettersRequest(_message.Message):
    __slots__ = ["max_messages", "queue"]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    max_messages: int
    queue: str
    def __init__(self, queue: _Optional[str] = ..., max_messages: _Optional[int] = ...) -> None: ...

class PurgeDeadLettersResponse(_message.Message):
    __slots__ = ["purged", "remaining"]
    PURGED_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    purged: int
    remaining: int
    def __init__(self, purged: _Optional[int] = ..., remaining: _Optional[int] = ...) -> None: ...

class PutScheduleRequest(_message.Message):
    __slots__ = ["group", "max_attempts", "name", "payload", "priority", "queue", "spec", "time_zone"]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    group: str
    max_attempts: int
    name: str
    payload: bytes
    priority: int
    queue: str
    spec: str
    time_zone: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., spec: _Optional[str] = ..., payload: _Optional[bytes] = ..., time_zone: _Optional[str] = ..., group: _Optional[str] = ..., priority: _Optional[int] = ..., max_attempts: _Optional[int] = ...) -> None: ...

class PutScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class QueueSettings(_message.Message):
    __slots__ = ["claim_rate", "max_in_flight", "paused"]
    CLAIM_RATE_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    claim_rate: ClaimRate
    max_in_flight: int
    paused: bool
    def __init__(self, paused: bool = ..., max_in_flight: _Optional[int] = ..., claim_rate: _Optional[_Union[ClaimRate, _Mapping]] = ...) -> None: ...

class RedriveRequest(_message.Message):
    __slots__ = ["max_messages", "message_ids", "queue"]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    max_messages: int
    message_ids: _containers.RepeatedScalarFieldContainer[str]
    queue: str
    def __init__(self, queue: _Optional[str] = ..., max_messages: _Optional[int] = ..., message_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RedriveResponse(_message.Message):
    __slots__ = ["moved"]
    MOVED_FIELD_NUMBER: _ClassVar[int]
    moved: int
    def __init__(self, moved: _Optional[int] = ...) -> None: ...

class ResumeQueueRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class ResumeQueueResponse(_message.Message):
    __slots__ = ["settings"]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: QueueSettings
    def __init__(self, settings: _Optional[_Union[QueueSettings, _Mapping]] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ["group", "last_time", "max_attempts", "name", "next_time", "payload_size", "priority", "queue", "spec", "time_zone"]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    LAST_TIME_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_TIME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SIZE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    group: str
    last_time: _timestamp_pb2.Timestamp
    max_attempts: int
    name: str
    next_time: _timestamp_pb2.Timestamp
    payload_size: int
    priority: int
    queue: str
    spec: str
    time_zone: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., spec: _Optional[str] = ..., time_zone: _Optional[str] = ..., group: _Optional[str] = ..., priority: _Optional[int] = ..., max_attempts: _Optional[int] = ..., payload_size: _Optional[int] = ..., last_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., next_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ["dead", "delayed", "in_flight", "paused", "ready"]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    DELAYED_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    dead: int
    delayed: int
    in_flight: int
    paused: bool
    ready: int
    def __init__(self, ready: _Optional[int] = ..., delayed: _Optional[int] = ..., in_flight: _Optional[int] = ..., dead: _Optional[int] = ..., paused: bool = ...) -> None: ...

class DedupMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
