/*
 * `reconcile` (对账) in C: the same operator as plugins/reconcile (Rust).
 *
 * Inputs `a` and `b` carry JSON objects with an `amount` (a number, or a
 * string holding one, as CSV sources produce). The key is the record key,
 * else the JSON field named by `key_field` (default "key"). For each key the
 * operator emits exactly one record, keyed by the key:
 *
 *   {"key": k, "status": "MATCH" | "AMOUNT_MISMATCH" | "ONLY_A" | "ONLY_B",
 *    "a": <amount or null>, "b": <amount or null>}
 *
 * as soon as both sides are present (MATCH when |a - b| <= tolerance), and
 * for keys seen on one side only, at `finish`. The first record per key and
 * side counts; later records for a side already seen are ignored.
 *
 * State layout (state version 2, shared with the Rust build): key `<k>` 0x00
 * `rc`, value a row value (0xFF and a row, plugins/c/lib/weir_util.h) of
 * the fields `a` (f64), `b` (f64) and `done` (true), in that order, an
 * absent side and `done: false` left out; a done key keeps no amounts
 * (FF 02 04 "done"). A row is read with its fields in any order, unknown
 * names skipped; `a`/`b` may also be an integer or a decimal, or null
 * (absent); `t` (the first timestamp, kept by the builds with `timeout`) is
 * checked, not kept. Values of state version 1, JSON {"a": <f64>, "b":
 * <f64>, "done": true}, are still read, so a version-1 checkpoint continues.
 *
 * Config (JSON, optional): {"tolerance": 0.0, "key_field": "key"}.
 *
 * Build: scripts/build-polyglot.sh c. The hooks not defined here
 * (on-checkpoint, snapshot, restore) are the defaults of
 * plugins/c/lib/weir_glue.c: the pending sides live in host state.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weir_glue.h"

static const char SUFFIX[] = "\0rc";
#define SUFFIX_LEN 3
#define SCAN_PAGE 1000

static double tolerance;
static char *key_field;
static size_t key_field_len;

typedef struct {
    bool has_a, has_b, done;
    double a, b;
} pending_t;

void exports_weir_operator_lifecycle_describe(weir_operator_types_operator_info_t *ret) {
    static const char *const inputs[] = {"a", "b", NULL}, *const outputs[] = {"out", NULL};
    describe_operator(ret, "reconcile", "0.1.0", inputs, outputs, 2);
}

bool exports_weir_operator_lifecycle_open(weir_operator_types_open_context_t *ctx,
                                          weir_operator_types_error_t *err) {
    static const char *const fields[] = {"tolerance", "key_field", NULL};
    arena_t a = {0};
    const jval_t *config;
    double tol = 0.0;
    const uint8_t *field = (const uint8_t *)"key";
    size_t field_len = 3;
    bool ok = config_object(&a, ctx, &config, err);
    for (size_t i = 0; ok && config && i < config->n; i++) {
        const jmember_t *m = &config->members[i];
        switch (config_field(m, fields, err)) {
        case 0:
            if (m->value.type != J_NUM)
                ok = set_error_str(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG,
                                   "`tolerance`: expected a number");
            else
                tol = m->value.num;
            break;
        case 1:
            if (m->value.type != J_STR) {
                ok = set_error_str(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG,
                                   "`key_field`: expected a string");
            } else {
                field = m->value.text;
                field_len = m->value.text_len;
            }
            break;
        default: ok = false;
        }
    }
    if (ok && (isnan(tol) || tol < 0.0)) {
        buf_t msg = {0};
        buf_puts(&msg, "`tolerance` must be >= 0, got ");
        buf_f64(&msg, tol);
        ok = set_error(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG, &msg);
    }
    if (ok) {
        tolerance = tol;
        free(key_field);
        key_field = malloc(field_len + 1);
        memcpy(key_field, field, field_len);
        key_field[field_len] = 0;
        key_field_len = field_len;
    }
    arena_free(&a);
    weir_operator_types_open_context_free(ctx);
    return ok;
}

/* ---- records */

/* The key and amount of a record, or false with *err set. */
static bool parse_record(arena_t *a, weir_operator_types_record_t *rec, buf_t *key,
                         double *amount, weir_operator_types_error_t *err) {
    const char *why;
    jval_t *v = json_parse(a, rec->value.ptr, rec->value.len, &why);
    if (!v) {
        buf_t msg = {0};
        buf_puts(&msg, "record value is not the expected JSON (");
        buf_puts(&msg, why);
        buf_puts(&msg, "): ");
        size_t shown = rec->value.len < 200 ? rec->value.len : 200;
        buf_push(&msg, rec->value.ptr, shown);
        if (!utf8_valid(msg.ptr, msg.len)) {
            msg.len = 0;
            buf_puts(&msg, "record value is not the expected JSON (invalid UTF-8)");
        }
        return set_error(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_INPUT, &msg);
    }
    /* The key: the record key when UTF-8, else the configured field. */
    if (rec->key.is_some && utf8_valid(rec->key.val.ptr, rec->key.val.len)) {
        buf_push(key, rec->key.val.ptr, rec->key.val.len);
    } else {
        const jval_t *f = json_get_n(v, (const uint8_t *)key_field, key_field_len);
        if (f && f->type == J_STR) {
            buf_push(key, f->text, f->text_len);
        } else if (f && f->type != J_NULL) {
            buf_json_value(key, f);
        } else {
            buf_t msg = {0};
            buf_puts(&msg, "record has no key and no `");
            buf_puts(&msg, key_field);
            buf_puts(&msg, "` field (set the source's `key` or the operator's `key_field`): ");
            buf_json_value(&msg, v);
            return set_error(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_INPUT, &msg);
        }
    }
    const jval_t *am = json_get(v, "amount");
    if (!am) {
        buf_t msg = {0};
        buf_puts(&msg, "record has no `amount`: ");
        buf_json_value(&msg, v);
        return set_error(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_INPUT, &msg);
    }
    bool ok = false;
    if (am->type == J_NUM) {
        *amount = am->num;
        ok = true;
    } else if (am->type == J_STR) {
        const uint8_t *s = am->text;
        size_t n = am->text_len;
        utf8_trim(&s, &n);
        ok = parse_rust_f64(s, n, amount);
    }
    if (!ok) {
        buf_t msg = {0};
        buf_puts(&msg, "`amount` is not a number: ");
        buf_json_value(&msg, am);
        return set_error(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_INPUT, &msg);
    }
    return true;
}

/* ---- state values */

static void encode_pending(buf_t *b, const pending_t *p) {
    buf_putc(b, (char)ROW_VALUE);
    if (p->has_a) row_f64(b, "a", p->a);
    if (p->has_b) row_f64(b, "b", p->b);
    if (p->done) row_bool(b, "done", true);
}

/* The row after a row value's first byte; false when it does not decode. */
static bool decode_row(const uint8_t *s, size_t n, pending_t *p) {
    size_t at = 0;
    row_field_t f;
    while (at < n) {
        if (!row_next(s, n, &at, &f)) return false;
        bool is_a = row_name_is(&f, "a");
        if (is_a || row_name_is(&f, "b")) {
            bool *has = is_a ? &p->has_a : &p->has_b;
            if (f.type == ROW_NULL) *has = false;
            else if (!(*has = row_number(&f, is_a ? &p->a : &p->b))) return false;
        } else if (row_name_is(&f, "done")) {
            if (f.type != ROW_FALSE && f.type != ROW_TRUE) return false;
            p->done = f.type == ROW_TRUE;
        } else if (row_name_is(&f, "t")) {
            if (f.type != ROW_NULL && f.type != ROW_INT &&
                !(f.type == ROW_UINT && f.u64 <= INT64_MAX))
                return false;
        }
    }
    return true;
}

static bool decode_json(const uint8_t *s, size_t n, pending_t *p) {
    arena_t a = {0};
    const char *why = "not an object";
    jval_t *v = json_parse(&a, s, n, &why);
    bool ok = v && v->type == J_OBJ;
    if (ok) {
        const jval_t *x = json_get(v, "a"), *y = json_get(v, "b"), *d = json_get(v, "done");
        if (x && x->type == J_NUM) p->has_a = true, p->a = x->num;
        else if (x && x->type != J_NULL) ok = false;
        if (y && y->type == J_NUM) p->has_b = true, p->b = y->num;
        else if (y && y->type != J_NULL) ok = false;
        if (d && d->type == J_BOOL) p->done = d->boolean;
        else if (d) ok = false;
    }
    arena_free(&a);
    return ok;
}

/* A stored value: a row value (first byte ROW_VALUE) or version 1's JSON. */
static bool decode_pending(const uint8_t *s, size_t n, pending_t *p,
                           weir_operator_types_error_t *err) {
    memset(p, 0, sizeof *p);
    bool ok = n > 0 && s[0] == ROW_VALUE ? decode_row(s + 1, n - 1, p) : decode_json(s, n, p);
    if (!ok)
        set_error_str(err, WEIR_OPERATOR_TYPES_ERROR_INCOMPATIBLE_STATE,
                      "state `rc` holds a value that does not decode");
    return ok;
}

/* Appends the output record for `key` to `out`; false when neither side is known. */
static bool classified(const uint8_t *key, size_t key_len, const pending_t *p,
                       weir_operator_emit_list_record_t *out) {
    const char *status;
    if (p->has_a && p->has_b)
        status = fabs(p->a - p->b) <= tolerance + 1e-9 ? "MATCH" : "AMOUNT_MISMATCH";
    else if (p->has_a)
        status = "ONLY_A";
    else if (p->has_b)
        status = "ONLY_B";
    else
        return false;
    buf_t v = {0};
    buf_puts(&v, "{\"key\":");
    buf_json_string(&v, key, key_len);
    buf_puts(&v, ",\"status\":\"");
    buf_puts(&v, status);
    buf_puts(&v, "\",\"a\":");
    if (p->has_a) buf_f64(&v, p->a);
    else buf_puts(&v, "null");
    buf_puts(&v, ",\"b\":");
    if (p->has_b) buf_f64(&v, p->b);
    else buf_puts(&v, "null");
    buf_putc(&v, '}');
    weir_operator_types_record_t *r = &out->ptr[out->len++];
    r->key.is_some = true;
    r->key.val.ptr = malloc(key_len + 1);
    memcpy(r->key.val.ptr, key, key_len);
    r->key.val.len = key_len;
    r->value.ptr = v.ptr;
    r->value.len = v.len;
    r->timestamp.is_some = false;
    return true;
}

/* Emits `out` when `send`, then frees it with its records. */
static void emit_and_free(weir_operator_emit_list_record_t *out, bool send) {
    if (send) emit(out);
    for (size_t i = 0; i < out->len; i++) {
        free(out->ptr[i].key.val.ptr);
        free(out->ptr[i].value.ptr);
    }
    free(out->ptr);
}

typedef struct {
    buf_t key; /* the record key, then the state key suffix */
    double amount;
} parsed_t;

typedef struct {
    bytes_t key; /* first, for sort_keys and find_key */
    pending_t p;
    bool changed;
} slot_t;

bool exports_weir_operator_lifecycle_process(uint32_t port,
                                             exports_weir_operator_lifecycle_list_record_t *batch,
                                             weir_operator_types_error_t *err) {
    bool ok = true;
    size_t n = batch->len;
    parsed_t *parsed = calloc(n + 1, sizeof(parsed_t));
    arena_t a = {0};
    if (port != 0 && port != 1) {
        char msg[80];
        snprintf(msg, sizeof msg, "reconcile has inputs 0 (a) and 1 (b), got port %u", port);
        ok = set_error_str(err, WEIR_OPERATOR_TYPES_ERROR_OTHER, msg);
    }
    for (size_t i = 0; ok && i < n; i++)
        ok = parse_record(&a, &batch->ptr[i], &parsed[i].key, &parsed[i].amount, err);
    arena_free(&a);
    if (ok) {
        /* Distinct keys, sorted: one state read and one write per batch. */
        slot_t *slots = calloc(n + 1, sizeof(slot_t));
        for (size_t i = 0; i < n; i++) {
            slots[i].key.ptr = parsed[i].key.ptr;
            slots[i].key.len = parsed[i].key.len;
        }
        size_t nd = sort_keys(slots, n, sizeof(slot_t));

        operator_list_list_u8_t keys = {malloc((nd + 1) * sizeof(operator_list_u8_t)), nd};
        for (size_t i = 0; i < nd; i++)
            keys.ptr[i] = state_key(slots[i].key.ptr, slots[i].key.len, SUFFIX, SUFFIX_LEN);
        operator_list_option_list_u8_t stored;
        weir_operator_state_get_many(&keys, &stored);
        for (size_t i = 0; ok && i < nd; i++)
            if (stored.ptr[i].is_some)
                ok = decode_pending(stored.ptr[i].val.ptr, stored.ptr[i].val.len, &slots[i].p, err);
        operator_list_option_list_u8_free(&stored);

        weir_operator_emit_list_record_t out = {malloc((n + 1) * sizeof(weir_operator_types_record_t)), 0};
        for (size_t i = 0; ok && i < n; i++) {
            bytes_t probe = {parsed[i].key.ptr, parsed[i].key.len};
            slot_t *s = find_key(slots, nd, sizeof(slot_t), &probe);
            pending_t *p = &s->p;
            bool *side = port == 0 ? &p->has_a : &p->has_b;
            if (p->done || *side) continue;
            *side = true;
            if (port == 0) p->a = parsed[i].amount;
            else p->b = parsed[i].amount;
            s->changed = true;
            if (p->has_a && p->has_b) {
                classified(s->key.ptr, s->key.len, p, &out);
                p->done = true;
                p->has_a = p->has_b = false; /* a done key keeps no amounts */
            }
        }
        emit_and_free(&out, ok);

        weir_operator_state_list_entry_t entries = {malloc((nd + 1) * sizeof(weir_operator_state_entry_t)), 0};
        for (size_t i = 0; ok && i < nd; i++) {
            if (!slots[i].changed) continue;
            buf_t v = {0};
            encode_pending(&v, &slots[i].p);
            weir_operator_state_entry_t *e = &entries.ptr[entries.len++];
            e->key = keys.ptr[i];
            e->value.ptr = v.ptr;
            e->value.len = v.len;
        }
        put_many(&entries);
        for (size_t i = 0; i < entries.len; i++) free(entries.ptr[i].value.ptr);
        free(entries.ptr);
        operator_list_list_u8_free(&keys);
        free(slots);
    }
    for (size_t i = 0; i < n; i++) free(parsed[i].key.ptr);
    free(parsed);
    exports_weir_operator_lifecycle_list_record_free(batch);
    return ok;
}

bool exports_weir_operator_lifecycle_finish(weir_operator_types_error_t *err) {
    /* Every key not classified yet, in byte-key order. */
    operator_list_u8_t prefix = {NULL, 0};
    operator_list_u8_t after = {NULL, 0};
    bool has_after = false, ok = true;
    while (ok) {
        weir_operator_state_list_entry_t page;
        weir_operator_state_scan(&prefix, has_after ? &after : NULL, SCAN_PAGE, &page);
        weir_operator_emit_list_record_t out = {malloc((page.len + 1) * sizeof(weir_operator_types_record_t)), 0};
        weir_operator_state_list_entry_t updates = {malloc((page.len + 1) * sizeof(weir_operator_state_entry_t)), 0};
        for (size_t i = 0; ok && i < page.len; i++) {
            weir_operator_state_entry_t *e = &page.ptr[i];
            if (e->key.len < SUFFIX_LEN ||
                memcmp(e->key.ptr + e->key.len - SUFFIX_LEN, SUFFIX, SUFFIX_LEN) != 0)
                continue;
            pending_t p;
            ok = decode_pending(e->value.ptr, e->value.len, &p, err);
            if (!ok || p.done) continue;
            classified(e->key.ptr, e->key.len - SUFFIX_LEN, &p, &out);
            p.done = true;
            p.has_a = p.has_b = false;
            buf_t v = {0};
            encode_pending(&v, &p);
            weir_operator_state_entry_t *u = &updates.ptr[updates.len++];
            u->key = e->key; /* borrowed from the page */
            u->value.ptr = v.ptr;
            u->value.len = v.len;
        }
        emit_and_free(&out, ok);
        if (ok) put_many(&updates);
        for (size_t i = 0; i < updates.len; i++) free(updates.ptr[i].value.ptr);
        free(updates.ptr);
        bool more = page.len == SCAN_PAGE;
        if (more) {
            free(after.ptr);
            after.len = page.ptr[page.len - 1].key.len;
            after.ptr = malloc(after.len + 1);
            memcpy(after.ptr, page.ptr[page.len - 1].key.ptr, after.len);
            has_after = true;
        }
        weir_operator_state_list_entry_free(&page);
        if (!more) break;
    }
    free(after.ptr);
    return ok;
}
