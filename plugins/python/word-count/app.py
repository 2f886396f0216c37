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
from weir_sdk import MapState, Operator, json_str, trim


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
        """The record's word: its key when it is UTF-8, else its value
        (`InvalidInput` when that is not UTF-8), trimmed as Rust trims."""
        raw = rec.key_str()
        w = trim(rec.value_str() if raw is None else raw)
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
