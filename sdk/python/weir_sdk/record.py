"""Records and timers as an operator sees them."""

import enum
import json
from decimal import Decimal

from . import row as row_mod
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
    changelog). `is_row` says the value is a row (`weir_sdk.row`): only an
    operator that reads rows (`Operator.reads_rows`) gets such records;
    read them with `row()`.

    `str` arguments are stored as their UTF-8 bytes.
    """

    __slots__ = ("value", "key", "timestamp", "change", "is_row")

    def __init__(self, value, key=None, timestamp=None, change=Change.INSERT):
        self.value = value.encode() if isinstance(value, str) else bytes(value)
        self.key = key.encode() if isinstance(key, str) else (None if key is None else bytes(key))
        self.timestamp = timestamp
        self.change = Change(change)
        self.is_row = False

    @classmethod
    def json(cls, obj, key=None, timestamp=None):
        """A record whose value is `obj` as compact JSON (see `weir_sdk.json_text`)."""
        return cls(json_text(obj).encode(), key, timestamp)

    @classmethod
    def of_row(cls, fields, key=None, timestamp=None, change=Change.INSERT):
        """A record whose value is the row of `fields` (a dict in the row's
        order; values None, bool, int, float, str, `decimal.Decimal`), as a
        `csv` source or `Context.emit_row` writes one."""
        r = cls(row_mod.encode(fields), key, timestamp, change)
        r.is_row = True
        return r

    def row(self, decimal=Decimal):
        """The fields of a row as a dict in order (None, bool, int, float,
        str values, and decimals through `decimal`, given their text:
        `decimal.Decimal` by default, `float` or `json.loads` to read them
        as JSON would), None when the value is text; `InvalidInput` when it
        is no row (the host checks the rows it delivers)."""
        if not self.is_row:
            return None
        try:
            return row_mod.read(self.value, decimal)
        except row_mod.BadRow as e:
            raise InvalidInput(f"record value is no row: {e}") from None

    def as_text(self):
        """The record as an operator that does not read rows gets it (and
        a sink writing JSON writes it): a row as the JSON text of its
        fields in order, as the host writes it; a text record itself."""
        if not self.is_row:
            return self
        try:
            text = row_mod.to_json(self.value)
        except row_mod.BadRow as e:
            raise InvalidInput(f"record value is no row: {e}") from None
        return Record(text, self.key, self.timestamp, self.change)

    def _text_only(self, what):
        if self.is_row:
            raise InvalidInput(
                f"record value is a row, not {what}: read it with record.row() "
                "(the operator reads rows: Operator.reads_rows)"
            )

    def value_str(self):
        """The value as text; `InvalidInput` when it is not UTF-8 or is a
        row."""
        self._text_only("text")
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
        is not (or is a row)."""
        self._text_only("JSON text")
        try:
            return json.loads(self.value)
        except ValueError as e:
            shown = self.value[:200].decode("utf-8", "replace")
            raise InvalidInput(f"record value is not JSON ({e}): {shown}") from None

    def with_key(self, key):
        """A copy with `key`."""
        return self._copy(key, self.timestamp, self.change)

    def with_timestamp(self, timestamp):
        """A copy with `timestamp`."""
        return self._copy(self.key, timestamp, self.change)

    def with_change(self, change):
        """A copy saying `change` (a `Change`)."""
        return self._copy(self.key, self.timestamp, change)

    def _copy(self, key, timestamp, change):
        r = Record(self.value, key, timestamp, change)
        r.is_row = self.is_row
        return r

    def _fields(self):
        return (self.value, self.key, self.timestamp, self.change, self.is_row)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self):
        return hash(self._fields())

    def __repr__(self):
        if self.is_row:
            try:
                parts = [f"row={row_mod.read(self.value)!r}"]
            except row_mod.BadRow:
                parts = [f"row={self.value!r}"]
        else:
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
