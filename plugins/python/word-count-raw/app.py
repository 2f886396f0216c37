"""`word-count` in Python on the raw componentize-py bindings, without
`weir_sdk`: the baseline `weir-polyglot-bench` measures the SDK's
word count (plugins/python/word-count) against. Same operator as
plugins/word-count (Rust), except that its output records carry no
timestamp.

Each input record is one word: its key when it has one (and it is UTF-8),
else its value with surrounding whitespace trimmed. For every record the
operator increments the word's count in host state and emits
`{"word": "<w>", "count": <n>}` keyed by the word. Empty words are skipped.

State layout (state version 1, shared with the Rust build): key
`<word>` 0x00 `count`, value the count as JSON text.

Config (JSON, optional): `{"lowercase": true}` counts words case-insensitively.

World `operator` (see `world`). Build: scripts/build-polyglot.sh python.
"""

import json

import wit_world.exports
from componentize_py_types import Err
from wit_world.imports import emit, state, types

SUFFIX = b"\x00count"
# Rust's `str::trim` (Unicode White_Space), which differs from Python's
# `str.strip()` (that also strips U+001C..U+001F).
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

# One operator instance per component instance: module state.
_lowercase = None


def _error(kind, message):
    return Err(kind(message))


def _word(rec):
    raw = None
    if rec.key is not None:
        try:
            raw = rec.key.decode("utf-8")
        except UnicodeDecodeError:
            raw = None
    if raw is None:
        try:
            raw = rec.value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _error(types.Error_InvalidInput, f"record value is not UTF-8: {e}")
    w = raw.strip(WHITESPACE)
    return w.lower() if _lowercase else w


def _json_text(s):
    return json.dumps(s, ensure_ascii=False)


class Lifecycle(wit_world.exports.Lifecycle):
    def describe(self):
        return types.OperatorInfo(
            name="word-count",
            version="0.1.0",
            inputs=["in"],
            outputs=["out"],
            state_version=1,
        )

    def open(self, ctx):
        global _lowercase
        text = ctx.config if ctx.config.strip() else "{}"
        try:
            config = json.loads(text)
        except ValueError as e:
            raise _error(types.Error_InvalidConfig, f"config is not JSON: {e}")
        if not isinstance(config, dict):
            raise _error(types.Error_InvalidConfig, "config must be a JSON object")
        for field in config:
            if field != "lowercase":
                raise _error(
                    types.Error_InvalidConfig,
                    f"unknown field `{field}`, expected `lowercase`",
                )
        lowercase = config.get("lowercase", False)
        if not isinstance(lowercase, bool):
            raise _error(
                types.Error_InvalidConfig,
                f"`lowercase`: invalid type: expected a boolean, got {json.dumps(lowercase)}",
            )
        _lowercase = lowercase

    def process(self, port, batch):
        words = [_word(rec) for rec in batch]
        distinct = sorted({w for w in words if w})
        # One state read and one write per batch, not per record.
        stored = state.get_many([w.encode() + SUFFIX for w in distinct])
        counts = {w: (int(v) if v is not None else 0) for w, v in zip(distinct, stored)}
        out = []
        for w in words:
            if not w:
                continue
            counts[w] += 1
            value = '{"word":%s,"count":%d}' % (_json_text(w), counts[w])
            out.append(types.Record(key=w.encode(), value=value.encode(), timestamp=None))
        if out:
            emit.emit_batch(0, out)
        if counts:
            state.put_many(
                [state.Entry(key=w.encode() + SUFFIX, value=str(c).encode()) for w, c in counts.items()]
            )

    def on_checkpoint(self, checkpoint_id):
        pass

    def finish(self):
        pass


class Snapshot(wit_world.exports.Snapshot):
    def snapshot(self):
        return b""

    def restore(self, state_version, data):
        if data:
            raise _error(
                types.Error_IncompatibleState,
                f"this operator keeps no in-memory state but got {len(data)} snapshot bytes "
                f"(state version {state_version})",
            )
