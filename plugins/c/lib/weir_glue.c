/* See weir_glue.h. */
#include "weir_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool set_error(weir_error_t *err, uint8_t tag, buf_t *msg) {
    err->tag = tag;
    operator_string_dup_n(&err->val.other, (const char *)msg->ptr, msg->len);
    free(msg->ptr);
    return false;
}

bool set_error_str(weir_error_t *err, uint8_t tag, const char *msg) {
    buf_t b = {0};
    buf_puts(&b, msg);
    return set_error(err, tag, &b);
}

/* A list of copies of `names` (NULL-terminated), freed by the bindings. */
static void string_list(operator_list_string_t *l, const char *const *names) {
    size_t n = 0;
    while (names[n]) n++;
    l->ptr = malloc((n + 1) * sizeof(operator_string_t));
    l->len = n;
    for (size_t i = 0; i < n; i++) operator_string_dup(&l->ptr[i], names[i]);
}

void describe_operator(weir_operator_types_operator_info_t *ret, const char *name,
                       const char *version, const char *const *inputs,
                       const char *const *outputs, uint32_t state_version) {
    operator_string_dup(&ret->name, name);
    operator_string_dup(&ret->version, version);
    string_list(&ret->inputs, inputs);
    string_list(&ret->outputs, outputs);
    ret->state_version = state_version;
}

bool config_object(arena_t *a, const weir_operator_types_open_context_t *ctx,
                   const jval_t **config, weir_error_t *err) {
    const uint8_t *text = ctx->config.ptr;
    size_t len = ctx->config.len;
    utf8_trim(&text, &len);
    *config = NULL;
    if (len == 0) return true;
    const char *why;
    const jval_t *v = json_parse(a, text, len, &why);
    if (!v) {
        buf_t msg = {0};
        buf_puts(&msg, "config is not JSON: ");
        buf_puts(&msg, why);
        return set_error(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG, &msg);
    }
    if (v->type != J_OBJ)
        return set_error_str(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG,
                             "config must be a JSON object");
    *config = v;
    return true;
}

int config_field(const jmember_t *m, const char *const *fields, weir_error_t *err) {
    size_t n = 0;
    for (; fields[n]; n++)
        if (m->key_len == strlen(fields[n]) && memcmp(m->key, fields[n], m->key_len) == 0)
            return (int)n;
    /* serde's words: `a`, `a` or `b`, one of `a`, `b`, `c`. */
    buf_t msg = {0};
    buf_puts(&msg, "unknown field `");
    buf_push(&msg, m->key, m->key_len);
    buf_puts(&msg, n > 2 ? "`, expected one of " : "`, expected ");
    for (size_t i = 0; i < n; i++) {
        if (i > 0) buf_puts(&msg, n > 2 ? ", " : " or ");
        buf_putc(&msg, '`');
        buf_puts(&msg, fields[i]);
        buf_putc(&msg, '`');
    }
    set_error(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG, &msg);
    return -1;
}

/* Orders two bytes_t, or items that begin with one. */
static int key_order(const void *x, const void *y) {
    const bytes_t *a = x, *b = y;
    return bytes_cmp(a->ptr, a->len, b->ptr, b->len);
}

size_t sort_keys(void *items, size_t n, size_t size) {
    char *at = items;
    qsort(items, n, size, key_order);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (kept > 0 && key_order(at + (kept - 1) * size, at + i * size) == 0) continue;
        if (kept != i) memcpy(at + kept * size, at + i * size, size);
        kept++;
    }
    return kept;
}

void *find_key(const void *items, size_t n, size_t size, const bytes_t *key) {
    return bsearch(key, items, n, size, key_order);
}

operator_list_u8_t state_key(const uint8_t *key, size_t len, const char *suffix,
                             size_t suffix_len) {
    operator_list_u8_t k = {malloc(len + suffix_len), len + suffix_len};
    if (len) memcpy(k.ptr, key, len);
    memcpy(k.ptr + len, suffix, suffix_len);
    return k;
}

void put_many(weir_operator_state_list_entry_t *entries) {
    if (entries->len) weir_operator_state_put_many(entries);
}

void emit(weir_operator_emit_list_record_t *records) {
    if (records->len) weir_operator_emit_emit_batch(0, records);
}

/* ---- default hooks (weak: an operator's own definition replaces them) */

__attribute__((weak)) bool exports_weir_operator_lifecycle_on_checkpoint(uint64_t checkpoint_id,
                                                                        weir_error_t *err) {
    (void)checkpoint_id;
    (void)err;
    return true;
}

__attribute__((weak)) bool exports_weir_operator_lifecycle_finish(weir_error_t *err) {
    (void)err;
    return true;
}

__attribute__((weak)) void exports_weir_operator_snapshot_snapshot(operator_list_u8_t *ret) {
    ret->ptr = NULL;
    ret->len = 0;
}

__attribute__((weak)) bool exports_weir_operator_snapshot_restore(uint32_t state_version,
                                                                 operator_list_u8_t *bytes,
                                                                 weir_error_t *err) {
    bool ok = true;
    if (bytes->len) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "this operator keeps no in-memory state but got %zu snapshot bytes (state version %u)",
                 bytes->len, state_version);
        ok = set_error_str(err, WEIR_OPERATOR_TYPES_ERROR_INCOMPATIBLE_STATE, msg);
    }
    operator_list_u8_free(bytes);
    return ok;
}
