/*
 * `word-count` in C: the same operator as plugins/word-count (Rust).
 *
 * Each input record is one word: its key when it has one (and it is UTF-8),
 * else its value with surrounding whitespace trimmed. For every record the
 * operator increments the word's count in host state and emits
 * {"word": "<w>", "count": <n>} keyed by the word. Empty words are skipped.
 *
 * State layout (state version 1, shared with the Rust build): key
 * `<word>` 0x00 `count`, value the count as JSON text.
 *
 * Config (JSON, optional): {"lowercase": true} counts words case-insensitively.
 *
 * Build: scripts/build-polyglot.sh c. Bindings (operator.h) are generated
 * from wit/ by the build; exports own their arguments (free them), imports
 * borrow theirs, and what an export returns is freed by the bindings.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "operator.h"
#include "weir_util.h"

static const char SUFFIX[] = "\0count";
#define SUFFIX_LEN 6

static bool lowercase;

/* ---- helpers for results */

static bool error(weir_operator_types_error_t *err, uint8_t tag, buf_t *msg) {
    err->tag = tag;
    operator_string_dup_n(&err->val.other, (const char *)msg->ptr, msg->len);
    free(msg->ptr);
    return false;
}

static bool error_str(weir_operator_types_error_t *err, uint8_t tag, const char *msg) {
    buf_t b = {0};
    buf_puts(&b, msg);
    return error(err, tag, &b);
}

static void dup_list(operator_list_string_t *l, const char *name) {
    l->ptr = malloc(sizeof(operator_string_t));
    l->len = 1;
    operator_string_dup(&l->ptr[0], name);
}

void exports_weir_operator_lifecycle_describe(weir_operator_types_operator_info_t *ret) {
    operator_string_dup(&ret->name, "word-count");
    operator_string_dup(&ret->version, "0.1.0");
    dup_list(&ret->inputs, "in");
    dup_list(&ret->outputs, "out");
    ret->state_version = 1;
}

bool exports_weir_operator_lifecycle_open(weir_operator_types_open_context_t *ctx,
                                          weir_operator_types_error_t *err) {
    arena_t a = {0};
    const uint8_t *text = ctx->config.ptr;
    size_t len = ctx->config.len;
    utf8_trim(&text, &len);
    bool ok = true;
    lowercase = false;
    if (len > 0) {
        const char *why;
        jval_t *config = json_parse(&a, text, len, &why);
        buf_t msg = {0};
        if (!config) {
            buf_puts(&msg, "config is not JSON: ");
            buf_puts(&msg, why);
            ok = error(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG, &msg);
        } else if (config->type != J_OBJ) {
            ok = error_str(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG,
                           "config must be a JSON object");
        } else {
            for (size_t i = 0; ok && i < config->n; i++) {
                jmember_t *m = &config->members[i];
                if (m->key_len == 9 && memcmp(m->key, "lowercase", 9) == 0) {
                    if (m->value.type != J_BOOL) {
                        ok = error_str(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG,
                                       "`lowercase`: expected a boolean");
                    } else {
                        lowercase = m->value.boolean;
                    }
                } else {
                    buf_puts(&msg, "unknown field `");
                    buf_push(&msg, m->key, m->key_len);
                    buf_puts(&msg, "`, expected `lowercase`");
                    ok = error(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG, &msg);
                }
            }
        }
    }
    arena_free(&a);
    weir_operator_types_open_context_free(ctx);
    return ok;
}

typedef struct {
    uint8_t *ptr;
    size_t len;
} word_t;

static int word_cmp(const void *x, const void *y) {
    const word_t *a = x, *b = y;
    size_t m = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->ptr, b->ptr, m);
    if (c) return c;
    return (a->len > b->len) - (a->len < b->len);
}

static operator_list_u8_t state_key(const word_t *w) {
    operator_list_u8_t k = {malloc(w->len + SUFFIX_LEN), w->len + SUFFIX_LEN};
    memcpy(k.ptr, w->ptr, w->len);
    memcpy(k.ptr + w->len, SUFFIX, SUFFIX_LEN);
    return k;
}

bool exports_weir_operator_lifecycle_process(uint32_t port,
                                             exports_weir_operator_lifecycle_list_record_t *batch,
                                             weir_operator_types_error_t *err) {
    (void)port;
    size_t n = batch->len;
    word_t *words = calloc(n + 1, sizeof(word_t));
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        weir_operator_types_record_t *rec = &batch->ptr[i];
        const uint8_t *raw;
        size_t len;
        if (rec->key.is_some && utf8_valid(rec->key.val.ptr, rec->key.val.len)) {
            raw = rec->key.val.ptr;
            len = rec->key.val.len;
        } else if (utf8_valid(rec->value.ptr, rec->value.len)) {
            raw = rec->value.ptr;
            len = rec->value.len;
        } else {
            ok = error_str(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_INPUT,
                           "record value is not UTF-8");
            break;
        }
        utf8_trim(&raw, &len);
        buf_t w = {0};
        if (lowercase)
            utf8_lower(&w, raw, len);
        else
            buf_push(&w, raw, len);
        words[i].ptr = w.ptr;
        words[i].len = w.len;
    }
    if (ok) {
        /* Distinct non-empty words, sorted: one state read and one write per batch. */
        word_t *distinct = malloc((n + 1) * sizeof(word_t));
        size_t nd = 0;
        for (size_t i = 0; i < n; i++)
            if (words[i].len) distinct[nd++] = words[i];
        qsort(distinct, nd, sizeof(word_t), word_cmp);
        size_t u = 0;
        for (size_t i = 0; i < nd; i++)
            if (u == 0 || word_cmp(&distinct[u - 1], &distinct[i]) != 0) distinct[u++] = distinct[i];
        nd = u;

        operator_list_list_u8_t keys = {malloc((nd + 1) * sizeof(operator_list_u8_t)), nd};
        for (size_t i = 0; i < nd; i++) keys.ptr[i] = state_key(&distinct[i]);
        operator_list_option_list_u8_t stored;
        weir_operator_state_get_many(&keys, &stored);
        uint64_t *counts = calloc(nd + 1, sizeof(uint64_t));
        for (size_t i = 0; i < nd; i++) {
            if (stored.ptr[i].is_some) {
                char tmp[32];
                size_t l = stored.ptr[i].val.len < 31 ? stored.ptr[i].val.len : 31;
                memcpy(tmp, stored.ptr[i].val.ptr, l);
                tmp[l] = 0;
                counts[i] = strtoull(tmp, NULL, 10);
            }
        }
        operator_list_option_list_u8_free(&stored);

        weir_operator_emit_list_record_t out = {malloc((n + 1) * sizeof(weir_operator_types_record_t)), 0};
        for (size_t i = 0; i < n; i++) {
            if (!words[i].len) continue;
            word_t *d = bsearch(&words[i], distinct, nd, sizeof(word_t), word_cmp);
            uint64_t c = ++counts[d - distinct];
            buf_t v = {0};
            buf_puts(&v, "{\"word\":");
            buf_json_string(&v, words[i].ptr, words[i].len);
            char tmp[40];
            snprintf(tmp, sizeof tmp, ",\"count\":%" PRIu64 "}", c);
            buf_puts(&v, tmp);
            weir_operator_types_record_t *r = &out.ptr[out.len++];
            r->key.is_some = true;
            r->key.val.ptr = words[i].ptr;
            r->key.val.len = words[i].len;
            r->value.ptr = v.ptr;
            r->value.len = v.len;
            r->timestamp.is_some = false;
        }
        if (out.len) weir_operator_emit_emit_batch(0, &out);
        for (size_t i = 0; i < out.len; i++) free(out.ptr[i].value.ptr);
        free(out.ptr);

        weir_operator_state_list_entry_t entries = {malloc((nd + 1) * sizeof(weir_operator_state_entry_t)), nd};
        for (size_t i = 0; i < nd; i++) {
            char tmp[32];
            int l = snprintf(tmp, sizeof tmp, "%" PRIu64, counts[i]);
            entries.ptr[i].key = keys.ptr[i];
            entries.ptr[i].value.ptr = malloc(l);
            entries.ptr[i].value.len = l;
            memcpy(entries.ptr[i].value.ptr, tmp, l);
        }
        if (nd) weir_operator_state_put_many(&entries);
        for (size_t i = 0; i < nd; i++) free(entries.ptr[i].value.ptr);
        free(entries.ptr);
        operator_list_list_u8_free(&keys);
        free(counts);
        free(distinct);
    }
    for (size_t i = 0; i < n; i++) free(words[i].ptr);
    free(words);
    exports_weir_operator_lifecycle_list_record_free(batch);
    return ok;
}

bool exports_weir_operator_lifecycle_on_checkpoint(uint64_t checkpoint_id,
                                                   weir_operator_types_error_t *err) {
    (void)checkpoint_id;
    (void)err;
    return true;
}

bool exports_weir_operator_lifecycle_finish(weir_operator_types_error_t *err) {
    (void)err;
    return true;
}

void exports_weir_operator_snapshot_snapshot(operator_list_u8_t *ret) {
    ret->ptr = NULL;
    ret->len = 0;
}

bool exports_weir_operator_snapshot_restore(uint32_t state_version, operator_list_u8_t *bytes,
                                            weir_operator_types_error_t *err) {
    bool ok = true;
    if (bytes->len) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "this operator keeps no in-memory state but got %zu snapshot bytes (state version %u)",
                 bytes->len, state_version);
        ok = error_str(err, WEIR_OPERATOR_TYPES_ERROR_INCOMPATIBLE_STATE, msg);
    }
    operator_list_u8_free(bytes);
    return ok;
}
