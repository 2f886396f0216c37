// `reconcile` (对账) in JavaScript: the same operator as plugins/reconcile (Rust).
//
// Inputs `a` and `b` carry JSON objects with an `amount` (a number, or a
// string holding one, as CSV sources produce). The key is the record key,
// else the JSON field named by `key_field` (default "key"). For each key the
// operator emits exactly one record, keyed by the key:
//
//   {"key": k, "status": "MATCH" | "AMOUNT_MISMATCH" | "ONLY_A" | "ONLY_B",
//    "a": <amount or null>, "b": <amount or null>}
//
// as soon as both sides are present (MATCH when |a - b| <= tolerance), and
// for keys seen on one side only, at `finish`. The first record per key and
// side counts; later records for a side already seen are ignored.
//
// State layout (state version 2, shared with the Rust build): key `<k>` 0x00
// `rc`, value a row value (0xFF and a row, plugins/js/lib/weir.js) of the
// fields `a` (f64), `b` (f64) and `done` (true), in that order, an absent
// side and `done: false` left out; a done key keeps no amounts
// (FF 02 04 "done"). A row is read with its fields in any order, unknown
// names skipped; `a`/`b` may also be an integer or a decimal, or null
// (absent); `t` (the first timestamp, kept by the builds with `timeout`) is
// checked, not kept. Values of state version 1, JSON {"a": <f64>, "b":
// <f64>, "done": true}, are still read, so a version-1 checkpoint continues.
//
// Config (JSON, optional): {"tolerance": 0.0, "key_field": "key"}.
//
// Build: scripts/build-polyglot.sh js (componentize-js, StarlingMonkey engine).

import { getMany, putMany, scan } from 'weir:operator/state@0.1.0';
import { emitBatch } from 'weir:operator/emit@0.1.0';
import {
  NEG_NAN,
  ROW,
  ROW_VALUE,
  TRIM,
  compareBytes,
  concat,
  configObject,
  encoder,
  fail,
  isObject,
  rowBool,
  rowF64,
  rowFields,
  rowNumber,
  utf8,
} from '../lib/weir.js';

export { snapshot } from '../lib/weir.js';

const SUFFIX = new Uint8Array([0, ...encoder.encode('rc')]);
const SCAN_PAGE = 1000;
// What Rust's `str::parse::<f64>` accepts (after `trim`).
const RUST_FLOAT = /^[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)$/;
const RUST_SPECIAL = /^([+-]?)(inf|infinity|nan)$/i;

let tolerance = 0;
let keyField = 'key';

function endsWith(bytes, suffix) {
  if (bytes.length < suffix.length) return false;
  for (let i = 0; i < suffix.length; i++) {
    if (bytes[bytes.length - suffix.length + i] !== suffix[i]) return false;
  }
  return true;
}

/** A float as serde_json writes it: shortest round-trip digits, `20.0`,
 * `0.00001`, `1e+16`, `1.5e-7`; `null` when not finite. */
function fmtF64(x) {
  if (!Number.isFinite(x)) return 'null';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  const [mant, exp] = Math.abs(x).toExponential().split('e');
  const digits = mant.replace('.', '');
  const n = digits.length;
  const point = Number(exp) + 1; // value = 0.<digits> * 10^point
  if (point > 0 && point <= 16) {
    if (n <= point) return sign + digits + '0'.repeat(point - n) + '.0';
    return sign + digits.slice(0, point) + '.' + digits.slice(point);
  }
  if (point > -5 && point <= 0) return sign + '0.' + '0'.repeat(-point) + digits;
  const m = n === 1 ? digits : digits[0] + '.' + digits.slice(1);
  const e = point - 1;
  return sign + m + (e >= 0 ? 'e+' : 'e-') + Math.abs(e);
}

/** Compact JSON of a parsed value, as serde_json writes it (object keys
 * sorted). JSON.parse keeps no integer/float distinction: integral numbers
 * are written as integers. */
function jsonValue(v) {
  if (typeof v === 'number') return Number.isInteger(v) && !Object.is(v, -0) && Math.abs(v) < 2 ** 64 ? String(BigInt(v)) : fmtF64(v);
  if (Array.isArray(v)) return '[' + v.map(jsonValue).join(',') + ']';
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v).sort((a, b) => compareBytes(encoder.encode(a), encoder.encode(b)));
    return '{' + keys.map((k) => JSON.stringify(k) + ':' + jsonValue(v[k])).join(',') + '}';
  }
  return JSON.stringify(v);
}

function parseJson(bytes) {
  return JSON.parse(utf8.decode(bytes));
}

function amountOf(v) {
  if (!isObject(v) || !Object.hasOwn(v, 'amount')) {
    throw fail('invalid-input', `record has no \`amount\`: ${jsonValue(v)}`);
  }
  const amount = v.amount;
  if (typeof amount === 'number') return amount;
  if (typeof amount === 'string') {
    const s = amount.replace(TRIM, '');
    if (RUST_FLOAT.test(s)) return Number(s);
    const special = RUST_SPECIAL.exec(s);
    if (special) {
      if (special[2].toLowerCase() === 'nan') return special[1] === '-' ? NEG_NAN : NaN;
      return special[1] === '-' ? -Infinity : Infinity;
    }
  }
  throw fail('invalid-input', `\`amount\` is not a number: ${jsonValue(amount)}`);
}

function keyOf(rec, v) {
  if (rec.key != null) {
    try {
      return utf8.decode(rec.key);
    } catch {
      // not UTF-8: fall back to the field
    }
  }
  const field = isObject(v) && Object.hasOwn(v, keyField) ? v[keyField] : null;
  if (typeof field === 'string') return field;
  if (field !== null && field !== undefined) return jsonValue(field);
  throw fail(
    'invalid-input',
    `record has no key and no \`${keyField}\` field (set the source's \`key\` or the operator's \`key_field\`): ${jsonValue(v)}`,
  );
}

function encodePending(p) {
  const out = [ROW_VALUE];
  if (p.a !== null) rowF64(out, 'a', p.a);
  if (p.b !== null) rowF64(out, 'b', p.b);
  if (p.done) rowBool(out, 'done', true);
  return new Uint8Array(out);
}

/** The pending state of a row value (its row after the first byte). */
function decodeRow(bytes) {
  const p = { a: null, b: null, done: false };
  for (const f of rowFields(bytes, 1)) {
    if (f.name === 'a' || f.name === 'b') {
      const x = f.type === ROW.NULL ? null : rowNumber(f);
      if (x === undefined) throw new Error(`\`${f.name}\` is not a number`);
      p[f.name] = x;
    } else if (f.name === 'done') {
      if (typeof f.value !== 'boolean') throw new Error('`done` is not a boolean');
      p.done = f.value;
    } else if (f.name === 't') {
      const ok = f.type === ROW.NULL || f.type === ROW.INT || (f.type === ROW.UINT && f.value <= 0x7fffffffffffffffn);
      if (!ok) throw new Error('`t` is not a timestamp');
    }
  }
  return p;
}

/** A stored value: a row value (first byte ROW_VALUE) or version 1's JSON. */
function decodePending(bytes) {
  try {
    if (bytes.length > 0 && bytes[0] === ROW_VALUE) return decodeRow(bytes);
    const v = parseJson(bytes);
    return { a: v.a ?? null, b: v.b ?? null, done: v.done === true };
  } catch (e) {
    throw fail('incompatible-state', `state \`rc\` holds a value that does not decode: ${e.message ?? e}`);
  }
}

function classified(key, keyBytes, p) {
  let status;
  if (p.a !== null && p.b !== null) status = Math.abs(p.a - p.b) <= tolerance + 1e-9 ? 'MATCH' : 'AMOUNT_MISMATCH';
  else if (p.a !== null) status = 'ONLY_A';
  else if (p.b !== null) status = 'ONLY_B';
  else return null;
  const a = p.a === null ? 'null' : fmtF64(p.a);
  const b = p.b === null ? 'null' : fmtF64(p.b);
  return {
    key: keyBytes,
    value: encoder.encode(`{"key":${JSON.stringify(key)},"status":"${status}","a":${a},"b":${b}}`),
    timestamp: undefined,
  };
}

export const lifecycle = {
  describe() {
    return { name: 'reconcile', version: '0.1.0', inputs: ['a', 'b'], outputs: ['out'], stateVersion: 2 };
  },

  open(ctx) {
    const config = configObject(ctx, ['tolerance', 'key_field']);
    const tol = config.tolerance ?? 0;
    if (typeof tol !== 'number') throw fail('invalid-config', '`tolerance`: expected a number');
    const field = config.key_field ?? 'key';
    if (typeof field !== 'string') throw fail('invalid-config', '`key_field`: expected a string');
    if (Number.isNaN(tol) || tol < 0) throw fail('invalid-config', `\`tolerance\` must be >= 0, got ${fmtF64(tol)}`);
    tolerance = tol;
    keyField = field;
  },

  process(port, batch) {
    if (port !== 0 && port !== 1) throw fail('other', `reconcile has inputs 0 (a) and 1 (b), got port ${port}`);
    const parsed = batch.map((rec) => {
      let v;
      try {
        v = parseJson(rec.value);
      } catch (e) {
        throw fail('invalid-input', `record value is not the expected JSON (${e.message ?? e})`);
      }
      return [keyOf(rec, v), amountOf(v)];
    });
    // One state read and one write per batch, in byte order of the keys.
    const slots = [...new Set(parsed.map(([k]) => k))]
      .map((k) => ({ key: k, bytes: encoder.encode(k), p: null, changed: false }))
      .sort((x, y) => compareBytes(x.bytes, y.bytes));
    const stored = getMany(slots.map((s) => concat(s.bytes, SUFFIX)));
    const byKey = new Map();
    slots.forEach((s, i) => {
      s.p = stored[i] != null ? decodePending(stored[i]) : { a: null, b: null, done: false };
      byKey.set(s.key, s);
    });
    const side = port === 0 ? 'a' : 'b';
    const out = [];
    for (const [key, amount] of parsed) {
      const s = byKey.get(key);
      if (s.p.done || s.p[side] !== null) continue;
      s.p[side] = amount;
      s.changed = true;
      if (s.p.a !== null && s.p.b !== null) {
        out.push(classified(key, s.bytes, s.p));
        // A done key keeps no amounts.
        s.p = { a: null, b: null, done: true };
      }
    }
    if (out.length > 0) emitBatch(0, out);
    const updates = slots.filter((s) => s.changed).map((s) => ({ key: concat(s.bytes, SUFFIX), value: encodePending(s.p) }));
    if (updates.length > 0) putMany(updates);
  },

  onCheckpoint(checkpointId) {},

  finish() {
    const entries = [];
    let after = undefined;
    for (;;) {
      const page = scan(new Uint8Array(0), after, SCAN_PAGE);
      entries.push(...page);
      if (page.length < SCAN_PAGE) break;
      after = page[page.length - 1].key;
    }
    const out = [];
    const updates = [];
    for (const e of entries) {
      if (!endsWith(e.key, SUFFIX)) continue;
      const keyBytes = e.key.slice(0, e.key.length - SUFFIX.length);
      const p = decodePending(e.value);
      if (p.done) continue;
      const rec = classified(new TextDecoder().decode(keyBytes), keyBytes, p);
      if (rec) out.push(rec);
      updates.push({ key: e.key, value: encodePending({ a: null, b: null, done: true }) });
    }
    if (out.length > 0) emitBatch(0, out);
    if (updates.length > 0) putMany(updates);
  },
};
