/*
 * Small helpers shared by the C operators under plugins/c/: a growable byte
 * buffer, JSON text as serde_json writes it, a strict JSON parser, UTF-8
 * checks and Unicode trimming/lowercasing as Rust's `str` does them, and
 * reading and writing the fields of rows (state values in binary form).
 *
 * Memory: everything a parse allocates comes from an arena, freed at once
 * with arena_free at the end of a hook.
 */
#ifndef WEIR_UTIL_H
#define WEIR_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- growable buffer (malloc'd; hand `ptr` to the host or free it) */
typedef struct {
    uint8_t *ptr;
    size_t len, cap;
} buf_t;

void buf_push(buf_t *b, const void *data, size_t n);
void buf_puts(buf_t *b, const char *s);
void buf_putc(buf_t *b, char c);
/* `s` as a JSON string literal, escaped like serde_json. */
void buf_json_string(buf_t *b, const uint8_t *s, size_t n);
/* `x` as serde_json writes an f64: shortest round-trip digits, `20.0`,
 * `0.00001`, `1e+16`, `1.5e-7`; `null` when not finite. */
void buf_f64(buf_t *b, double x);
/* NUL-terminated copy of the buffer's bytes (malloc'd). */
char *buf_cstr(buf_t *b);

/* Orders byte strings as Rust's `[u8]` does (the order of state keys):
 * negative, zero or positive like memcmp. */
int bytes_cmp(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len);

/* ---- arena */
typedef struct arena_chunk arena_chunk_t;
typedef struct {
    arena_chunk_t *head;
} arena_t;

void *arena_alloc(arena_t *a, size_t n);
void arena_free(arena_t *a);

/* ---- JSON values (strict, like serde_json) */
typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype_t;

typedef struct jval jval_t;
typedef struct jmember jmember_t;

struct jval {
    jtype_t type;
    bool boolean;
    /* J_NUM: the value, and whether the text was an integer that fits
     * i64/u64 (serde_json keeps those as integers). */
    double num;
    bool integer;
    /* J_NUM: the source text; J_STR: the decoded UTF-8 bytes. */
    const uint8_t *text;
    size_t text_len;
    /* J_ARR: elems[n]; J_OBJ: members[n] in source order. */
    size_t n;
    jval_t *elems;
    jmember_t *members;
};

struct jmember {
    const uint8_t *key;
    size_t key_len;
    jval_t value;
};

/* Parses `s` as one JSON value (surrounding whitespace allowed). Returns
 * NULL and sets *err (static text) when it is not valid JSON. */
jval_t *json_parse(arena_t *a, const uint8_t *s, size_t n, const char **err);
/* The member `key` of an object (the last one when repeated), or NULL. */
const jval_t *json_get(const jval_t *obj, const char *key);
/* The same for a key of `len` bytes. */
const jval_t *json_get_n(const jval_t *obj, const uint8_t *key, size_t len);
/* `v` as serde_json's `Value::to_string` writes it (compact, object keys
 * sorted). */
void buf_json_value(buf_t *b, const jval_t *v);

/* ---- text */
/* Whether `s` is valid UTF-8 (as Rust's `str::from_utf8` decides). */
bool utf8_valid(const uint8_t *s, size_t n);
/* Trims Unicode White_Space from both ends (Rust's `str::trim`). */
void utf8_trim(const uint8_t **s, size_t *n);
/* Appends the lowercase of valid UTF-8 `s` (Rust's `str::to_lowercase`:
 * simple case mapping, U+0130 to "i\u0307", and a final sigma). */
void utf8_lower(buf_t *b, const uint8_t *s, size_t n);
/* Parses `s` (already trimmed) as Rust's `str::parse::<f64>` does (`-nan`
 * too: the NaN with the sign bit set). */
bool parse_rust_f64(const uint8_t *s, size_t n, double *out);

/* ---- rows (wit/flat.wit, flat/src/row.rs)
 * A row is its fields one after another, each: a type byte (ROW_*), the
 * name's length (u8), the name (UTF-8), then for ROW_INT, ROW_UINT and
 * ROW_FLOAT 8 bytes little-endian (a float's IEEE bits exactly: NaN,
 * infinities and -0.0 as they are), for ROW_STRING and ROW_DECIMAL a u32
 * little-endian length and that many UTF-8 bytes (a decimal: the text of a
 * JSON number, `12.50`). A row value in keyed state is ROW_VALUE followed
 * by a row; that byte begins neither JSON text nor UTF-8. */
enum { ROW_NULL, ROW_FALSE, ROW_TRUE, ROW_INT, ROW_UINT, ROW_FLOAT, ROW_STRING, ROW_DECIMAL };
#define ROW_VALUE 0xFF

/* Appends field `name` (NUL-terminated, at most 255 bytes) with `v`. */
void row_bool(buf_t *b, const char *name, bool v);
void row_f64(buf_t *b, const char *name, double v);

/* One field of a row as row_next reads it; `name` and `text` point into
 * the row. */
typedef struct {
    uint8_t type; /* ROW_* */
    const uint8_t *name;
    size_t name_len;
    int64_t i64;  /* ROW_INT */
    uint64_t u64; /* ROW_UINT */
    double f64;   /* ROW_FLOAT, its bits as stored */
    /* ROW_STRING: the string; ROW_DECIMAL: a JSON number's text. */
    const uint8_t *text;
    size_t text_len;
} row_field_t;

/* Reads the field of the row s[0..n) that starts at *at (< n) into *f and
 * moves *at past it. False when the row is malformed there: truncated, an
 * unknown type byte, a name or string not UTF-8, a decimal that is no JSON
 * number. */
bool row_next(const uint8_t *s, size_t n, size_t *at, row_field_t *f);
/* Whether the field's name is `name` (NUL-terminated). */
bool row_name_is(const row_field_t *f, const char *name);
/* A number field as a double: a float as is, an integer as Rust's `as f64`
 * converts it, a decimal as Rust's `str::parse::<f64>` reads it. False for
 * any other type. */
bool row_number(const row_field_t *f, double *out);

#endif
