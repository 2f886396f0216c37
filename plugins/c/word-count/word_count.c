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
 * borrow theirs, and what an export returns is freed by the bindings. The
 * hooks not defined here (on-checkpoint, finish, snapshot, restore) are the
 * defaults of plugins/c/lib/weir_glue.c: this operator keeps no in-memory
 * state.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weir_glue.h"

static const char SUFFIX[] = "\0count";
#define SUFFIX_LEN 6

static bool lowercase;

void exports_weir_operator_lifecycle_describe(weir_operator_types_operator_info_t *ret) {
    static const char *const inputs[] = {"in", NULL}, *const outputs[] = {"out", NULL};
    describe_operator(ret, "word-count", "0.1.0", inputs, outputs, 1);
}

bool exports_weir_operator_lifecycle_open(weir_operator_types_open_context_t *ctx,
                                          weir_operator_types_error_t *err) {
    static const char *const fields[] = {"lowercase", NULL};
    arena_t a = {0};
    const jval_t *config;
    lowercase = false;
    bool ok = config_object(&a, ctx, &config, err);
    for (size_t i = 0; ok && config && i < config->n; i++) {
        const jmember_t *m = &config->members[i];
        if (config_field(m, fields, err) < 0)
            ok = false;
        else if (m->value.type != J_BOOL)
            ok = set_error_str(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_CONFIG,
                               "`lowercase`: expected a boolean");
        else
            lowercase = m->value.boolean;
    }
    arena_free(&a);
    weir_operator_types_open_context_free(ctx);
    return ok;
}

bool exports_weir_operator_lifecycle_process(uint32_t port,
                                             exports_weir_operator_lifecycle_list_record_t *batch,
                                             weir_operator_types_error_t *err) {
    (void)port;
    size_t n = batch->len;
    bytes_t *words = calloc(n + 1, sizeof(bytes_t)); /* owned */
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
            ok = set_error_str(err, WEIR_OPERATOR_TYPES_ERROR_INVALID_INPUT,
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
        bytes_t *distinct = malloc((n + 1) * sizeof(bytes_t));
        size_t nd = 0;
        for (size_t i = 0; i < n; i++)
            if (words[i].len) distinct[nd++] = words[i];
        nd = sort_keys(distinct, nd, sizeof(bytes_t));

        operator_list_list_u8_t keys = {malloc((nd + 1) * sizeof(operator_list_u8_t)), nd};
        for (size_t i = 0; i < nd; i++)
            keys.ptr[i] = state_key(distinct[i].ptr, distinct[i].len, SUFFIX, SUFFIX_LEN);
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
            bytes_t *d = find_key(distinct, nd, sizeof(bytes_t), &words[i]);
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
        emit(&out);
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
        put_many(&entries);
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
