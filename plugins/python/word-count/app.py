"""`word-count` in Python on `weir_sdk`: the same operator as
plugins/word-count (Rust).

Each input record is one word: its key when it has one (and it is UTF-8),
else its value with surrounding whitespace trimmed. For every record the
operator increments the word's count in host state and emits
`{"word": "<w>", "count": <n>}` keyed by the word, with the record's
timestamp. Empty words are skipped.

State (version 1, shared with the Rust build): `MapState("count")`, the
count of each word (key `<word>` 0x00 `count`, value the count as JSON).

Config (JSON, optional): `{"lowercase": true}` counts words
case-insensitively.

Build: scripts/build-polyglot.sh python. Test: pytest plugins/python.
"""

from dataclasses import dataclass

import weir_sdk
from weir_sdk import InvalidInput, MapState, Operator, json_str

# Rust's `str::trim` (Unicode White_Space), which differs from Python's
# `str.strip()` (that also strips U+001C..U+001F).
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


@dataclass
class Config:
    lowercase: bool = False


class WordCount(Operator):
    name = "word-count"
    version = "0.1.0"
    inputs = ["in"]
    outputs = ["out"]
    state_version = 1
    Config = Config

    def open(self, ctx):
        self.lowercase = ctx.config.lowercase
        self.counts = MapState("count")

    def word(self, rec):
        if rec.key is not None:
            try:
                raw = rec.key.decode("utf-8")
            except UnicodeDecodeError:
                raw = None
            if raw is not None:
                w = raw.strip(WHITESPACE)
                return w.lower() if self.lowercase else w
        try:
            raw = rec.value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidInput(f"record value is not UTF-8: {e}") from None
        w = raw.strip(WHITESPACE)
        return w.lower() if self.lowercase else w

    def process(self, ctx, port, batch):
        words = [self.word(rec) for rec in batch.records]
        counts = self.counts
        counts.prefetch(words)  # one host call for the words not cached
        emit = ctx.emit
        for rec, w in zip(batch, words):
            if not w:
                continue
            n = counts.get(w, 0) + 1
            counts[w] = n
            emit('{"word":%s,"count":%d}' % (json_str(w), n), w)


weir_sdk.export(WordCount, globals())
