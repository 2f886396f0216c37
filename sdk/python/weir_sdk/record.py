"""Records and timers as an operator sees them."""

import enum
import json

from .errors import InvalidInput
from .jsontext import json_text


class Change(enum.IntEnum):
    """What a record does to the row it carries, in a changelog (a
    database's changes; wit/changes.wit). Records of streams that are no
    changelog are inserts."""

    #: A new row.
    INSERT = 0
    #: A row before an update (its after image follows).
    UPDATE_BEFORE = 1
    #: A row after an update.
    UPDATE_AFTER = 2
    #: A row deleted: the record carries its key (and its last values where known).
    DELETE = 3
    #: Every row of a table deleted: no key.
    TRUNCATE = 4

    def retracts(self):
        """Whether the record takes its row out: an update's before
        image, a delete, a truncate."""
        return self in (Change.UPDATE_BEFORE, Change.DELETE, Change.TRUNCATE)


class Record:
    """One record on an edge of the dataflow.

    `value` is bytes (UTF-8 text for the built-in formats: a line, or a JSON
    object for `jsonl` and `csv` sources); `key` is bytes or None (records
    with equal keys reach the same instance of a keyed operator); `timestamp`
    is event time in milliseconds since the Unix epoch, or None; `change`
    what it does to its row (a `Change`, `INSERT` unless the stream is a
    changelog).

    `str` arguments are stored as their UTF-8 bytes.
    """

    __slots__ = ("value", "key", "timestamp", "change")

    def __init__(self, value, key=None, timestamp=None, change=Change.INSERT):
        self.value = value.encode() if isinstance(value, str) else bytes(value)
        self.key = key.encode() if isinstance(key, str) else (None if key is None else bytes(key))
        self.timestamp = timestamp
        self.change = Change(change)

    @classmethod
    def json(cls, obj, key=None, timestamp=None):
        """A record whose value is `obj` as compact JSON (see `weir_sdk.json_text`)."""
        return cls(json_text(obj).encode(), key, timestamp)

    def value_str(self):
        """The value as text; `InvalidInput` when it is not UTF-8."""
        try:
            return self.value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidInput(f"record value is not UTF-8: {e}") from None

    def key_str(self):
        """The key as text; None without a key or when it is not UTF-8."""
        if self.key is None:
            return None
        try:
            return self.key.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def parse_json(self):
        """The value parsed as JSON; `InvalidInput` naming the record when it
        is not."""
        try:
            return json.loads(self.value)
        except ValueError as e:
            shown = self.value[:200].decode("utf-8", "replace")
            raise InvalidInput(f"record value is not JSON ({e}): {shown}") from None

    def with_key(self, key):
        """A copy with `key`."""
        return Record(self.value, key, self.timestamp, self.change)

    def with_timestamp(self, timestamp):
        """A copy with `timestamp`."""
        return Record(self.value, self.key, timestamp, self.change)

    def with_change(self, change):
        """A copy saying `change` (a `Change`)."""
        return Record(self.value, self.key, self.timestamp, change)

    def _fields(self):
        return (self.value, self.key, self.timestamp, self.change)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self):
        return hash(self._fields())

    def __repr__(self):
        parts = [repr(self.value)]
        if self.key is not None:
            parts.append(f"key={self.key!r}")
        if self.timestamp is not None:
            parts.append(f"timestamp={self.timestamp}")
        if self.change != Change.INSERT:
            parts.append(f"change={self.change!s}")
        return f"Record({', '.join(parts)})"


class TimeDomain(enum.Enum):
    """The clock a timer follows."""

    #: The instance's watermark.
    EVENT_TIME = "event-time"
    #: The host's wall clock.
    PROCESSING_TIME = "processing-time"


class Timer:
    """A timer that fired: its `key` (bytes), `time` (ms) and `domain`."""

    __slots__ = ("key", "time", "domain")

    def __init__(self, key, time, domain):
        self.key = key
        self.time = time
        self.domain = domain

    def key_str(self):
        """The key as text; None when it is not UTF-8."""
        try:
            return self.key.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def __eq__(self, other):
        if not isinstance(other, Timer):
            return NotImplemented
        return (self.key, self.time, self.domain) == (other.key, other.time, other.domain)

    def __repr__(self):
        return f"Timer({self.key!r}, {self.time}, {self.domain})"
