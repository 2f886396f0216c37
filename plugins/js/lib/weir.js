// What the JavaScript operators under plugins/js/ share: byte and text
// helpers, error results, the config check and the snapshot hooks of an
// operator that keeps no in-memory state.
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
