// What the JavaScript operators under plugins/js/ share: byte and text
// helpers, error results, the config check, rows (reading and writing
// their fields) and the snapshot hooks of an operator that keeps no
// in-memory state.
//
// An operator imports it as '../lib/weir.js'; componentize-js reads the
// imports from the files themselves, with plugins/js/ as the root the
// component sees (scripts/build-polyglot.sh runs it from there).

export const encoder = new TextEncoder();
export const utf8 = new TextDecoder('utf-8', { fatal: true });

// Rust's `str::trim` (Unicode White_Space); JS `trim` differs (U+FEFF, U+0085).
const WS = '[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
export const TRIM = new RegExp(`^${WS}+|${WS}+$`, 'g');

/** An error result of a hook, to throw: { tag: 'invalid-config', val: 'message' }. */
export function fail(tag, message) {
  return { tag, val: message };
}

export function concat(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** Orders byte strings as Rust's `[u8]` does (the order of state keys). */
export function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] !== b[i]) return a[i] - b[i];
  }
  return a.length - b.length;
}

export function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** `names` as serde lists expected fields: `a`, `a` or `b`, one of `a`, `b`, `c`. */
function oneOf(names) {
  const quoted = names.map((n) => `\`${n}\``);
  if (quoted.length <= 2) return quoted.join(' or ');
  return `one of ${quoted.join(', ')}`;
}

/** The operator's config (`ctx.config`, JSON, empty meaning `{}`) as an
 * object with no fields but `fields`; throws an `invalid-config` error as
 * the Rust build words it otherwise. */
export function configObject(ctx, fields) {
  const text = ctx.config.trim() === '' ? '{}' : ctx.config;
  let config;
  try {
    config = JSON.parse(text);
  } catch (e) {
    throw fail('invalid-config', `config is not JSON: ${e.message}`);
  }
  if (!isObject(config)) throw fail('invalid-config', 'config must be a JSON object');
  for (const field of Object.keys(config)) {
    if (!fields.includes(field)) {
      throw fail('invalid-config', `unknown field \`${field}\`, expected ${oneOf(fields)}`);
    }
  }
  return config;
}

// Rows (wit/flat.wit, flat/src/row.rs): fields one after another, each a
// type byte (ROW), the name's length (u8) and the name (UTF-8), then for
// INT, UINT and FLOAT 8 bytes little-endian (a float's IEEE bits), for
// STRING and DECIMAL a u32 little-endian length and that many UTF-8 bytes (a
// decimal: the text of a JSON number, `12.50`). A row value in keyed state
// is ROW_VALUE followed by a row; that byte begins neither JSON text nor
// UTF-8.
export const ROW = Object.freeze({ NULL: 0, FALSE: 1, TRUE: 2, INT: 3, UINT: 4, FLOAT: 5, STRING: 6, DECIMAL: 7 });
export const ROW_VALUE = 0xff;

/** The NaN with the sign bit set (Rust parses `-nan` as it). A JavaScript
 * engine holds one NaN, so a float field of that NaN reads as this, and
 * writing this writes it; it is NaN in arithmetic. Any other NaN is
 * written as 0x7FF8000000000000, Rust's `f64::NAN`. */
export const NEG_NAN = Object.freeze({ valueOf: () => NaN });

const JSON_NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

/** Appends to `out` (an array of bytes) the type and name of a field. */
function rowHead(out, type, name) {
  const bytes = encoder.encode(name);
  if (bytes.length > 255) throw new RangeError(`a row's field name is at most 255 bytes, not ${bytes.length}`);
  out.push(type, bytes.length, ...bytes);
}

/** Appends field `name` with `v`. */
export function rowBool(out, name, v) {
  rowHead(out, v ? ROW.TRUE : ROW.FALSE, name);
}

/** Appends field `name` with the float `x` (a number or NEG_NAN). */
export function rowF64(out, name, x) {
  rowHead(out, ROW.FLOAT, name);
  if (x === NEG_NAN || Number.isNaN(x)) {
    out.push(0, 0, 0, 0, 0, 0, 0xf8, x === NEG_NAN ? 0xff : 0x7f);
    return;
  }
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setFloat64(0, x, true);
  out.push(...bytes);
}

/** The fields of the row `bytes[at..]`, in order: { name, type, value },
 * the value null (NULL), a boolean (FALSE, TRUE), a BigInt (INT, UINT), a
 * number or NEG_NAN (FLOAT), a string (STRING, DECIMAL). Throws an Error
 * when the row is malformed: truncated, an unknown type byte, a name or
 * string not UTF-8, a decimal that is no JSON number. */
export function rowFields(bytes, at = 0) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fields = [];
  const take = (start, n) => {
    if (start + n > bytes.length) throw new Error(`the row ends inside its field at byte ${at}`);
    return bytes.subarray(start, start + n);
  };
  while (at < bytes.length) {
    const [type, nameLen] = take(at, 2);
    const name = utf8.decode(take(at + 2, nameLen));
    let body = at + 2 + nameLen;
    let value;
    switch (type) {
      case ROW.NULL: value = null; break;
      case ROW.FALSE: value = false; break;
      case ROW.TRUE: value = true; break;
      case ROW.INT:
      case ROW.UINT:
      case ROW.FLOAT:
        take(body, 8);
        if (type === ROW.INT) value = view.getBigInt64(body, true);
        else if (type === ROW.UINT) value = view.getBigUint64(body, true);
        else value = view.getFloat64(body, true);
        if (type === ROW.FLOAT && Number.isNaN(value) && bytes[body + 7] & 0x80) value = NEG_NAN;
        body += 8;
        break;
      case ROW.STRING:
      case ROW.DECIMAL: {
        take(body, 4);
        const len = view.getUint32(body, true);
        value = utf8.decode(take(body + 4, len));
        if (type === ROW.DECIMAL && !JSON_NUMBER.test(value)) throw new Error(`the row's field at byte ${at} is a decimal that is no JSON number`);
        body += 4 + len;
        break;
      }
      default:
        throw new Error(`the row's field at byte ${at} has unknown type ${type}`);
    }
    fields.push({ name, type, value });
    at = body;
  }
  return fields;
}

/** A number field's value as a number (or NEG_NAN): a float as is, an
 * integer as Rust's `as f64` converts it, a decimal as Rust's
 * `str::parse::<f64>` reads it; undefined for any other type. */
export function rowNumber(field) {
  switch (field.type) {
    case ROW.INT:
    case ROW.UINT:
    case ROW.DECIMAL:
      return Number(field.value);
    case ROW.FLOAT:
      return field.value;
    default:
      return undefined;
  }
}

/** The `snapshot` interface of an operator that keeps no in-memory state
 * (its state lives in the host): an empty snapshot, and a restore that
 * accepts only an empty one. */
export const snapshot = {
  snapshot() {
    return new Uint8Array(0);
  },

  restore(stateVersion, bytes) {
    if (bytes.length > 0) {
      throw fail(
        'incompatible-state',
        `this operator keeps no in-memory state but got ${bytes.length} snapshot bytes (state version ${stateVersion})`,
      );
    }
  },
};
