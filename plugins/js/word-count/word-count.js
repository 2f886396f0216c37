// `word-count` in JavaScript: the same operator as plugins/word-count (Rust).
//
// Each input record is one word: its key when it has one (and it is UTF-8),
// else its value with surrounding whitespace trimmed. For every record the
// operator increments the word's count in host state and emits
// {"word": "<w>", "count": <n>} keyed by the word. Empty words are skipped.
//
// State layout (state version 1, shared with the Rust build): key
// `<word>` 0x00 `count`, value the count as JSON text.
//
// Config (JSON, optional): {"lowercase": true} counts words case-insensitively.
//
// Build: scripts/build-polyglot.sh js (componentize-js, StarlingMonkey engine).
// WIT mapping: list<u8> is a Uint8Array, option<T> is T or undefined/null,
// records have camelCase fields, an error result is thrown as
// { tag: 'invalid-config', val: 'message' }.

import { getMany, putMany } from 'weir:operator/state@0.1.0';
import { emitBatch } from 'weir:operator/emit@0.1.0';
import { TRIM, concat, compareBytes, configObject, encoder, fail, utf8 } from '../lib/weir.js';

export { snapshot } from '../lib/weir.js';

const SUFFIX = new Uint8Array([0, ...encoder.encode('count')]);

let lowercase = false;

function decode(bytes) {
  try {
    return utf8.decode(bytes);
  } catch {
    return null;
  }
}

// Unicode's Case_Ignorable (approximated) and Cased, for the final sigma.
const CASE_IGNORABLE = /['.:^`\u00a8\u00ad\u00af\u00b4\u00b7\u00b8\u02b0-\u036f\u2018\u2019\u2024\u2027]/u;
const isCased = (c) => c.toLowerCase() !== c || c.toUpperCase() !== c;

// Rust's `str::to_lowercase`. The engine's toLowerCase has no final-sigma
// rule (StarlingMonkey is built without ICU), so apply it here: a capital
// sigma preceded by a cased letter and not followed by one becomes `ς`.
function toLowercase(s) {
  if (!s.includes('\u03a3')) return s.toLowerCase();
  const cs = [...s];
  const cased = (from, step) => {
    for (let j = from; j >= 0 && j < cs.length; j += step) {
      if (!CASE_IGNORABLE.test(cs[j])) return isCased(cs[j]);
    }
    return false;
  };
  return cs
    .map((c, i) => (c === '\u03a3' ? (cased(i - 1, -1) && !cased(i + 1, 1) ? '\u03c2' : '\u03c3') : c.toLowerCase()))
    .join('');
}

function wordOf(rec) {
  let raw = rec.key != null ? decode(rec.key) : null;
  if (raw === null) {
    raw = decode(rec.value);
    if (raw === null) throw fail('invalid-input', 'record value is not UTF-8');
  }
  const w = raw.replace(TRIM, '');
  return lowercase ? toLowercase(w) : w;
}

export const lifecycle = {
  describe() {
    return { name: 'word-count', version: '0.1.0', inputs: ['in'], outputs: ['out'], stateVersion: 1 };
  },

  open(ctx) {
    const config = configObject(ctx, ['lowercase']);
    const lc = config.lowercase ?? false;
    if (typeof lc !== 'boolean') throw fail('invalid-config', '`lowercase`: expected a boolean');
    lowercase = lc;
  },

  process(port, batch) {
    const words = batch.map(wordOf);
    // One state read and one write per batch, in byte order of the words.
    const distinct = [...new Set(words.filter((w) => w !== ''))]
      .map((w) => ({ w, bytes: encoder.encode(w) }))
      .sort((a, b) => compareBytes(a.bytes, b.bytes));
    const stored = getMany(distinct.map((d) => concat(d.bytes, SUFFIX)));
    const counts = new Map();
    distinct.forEach((d, i) => {
      const v = stored[i];
      counts.set(d.w, { bytes: d.bytes, n: v != null ? Number(utf8.decode(v)) : 0 });
    });
    const out = [];
    for (const w of words) {
      if (w === '') continue;
      const c = counts.get(w);
      c.n += 1;
      out.push({
        key: c.bytes,
        value: encoder.encode(`{"word":${JSON.stringify(w)},"count":${c.n}}`),
        timestamp: undefined,
      });
    }
    if (out.length > 0) emitBatch(0, out);
    if (counts.size > 0) {
      putMany([...counts.values()].map((c) => ({ key: concat(c.bytes, SUFFIX), value: encoder.encode(String(c.n)) })));
    }
  },

  onCheckpoint(checkpointId) {},

  finish() {},
};
