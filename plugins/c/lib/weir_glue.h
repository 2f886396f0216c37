/*
 * What the C operators under plugins/c/ share on top of the generated
 * bindings (operator.h): error results, `describe`, the config check, state
 * keys and the host calls on lists.
 *
 * weir_glue.c also defines `on-checkpoint`, `finish`, `snapshot` and
 * `restore` for an operator that keeps no in-memory state and has nothing
 * to do at a checkpoint or at the end: they do nothing, the snapshot is
 * empty and a restore accepts only an empty one. They are weak: an operator
 * that defines one of these hooks itself replaces the default.
 */
#ifndef WEIR_GLUE_H
#define WEIR_GLUE_H

#include "operator.h"
#include "weir_util.h"

typedef weir_operator_types_error_t weir_error_t;

/* Sets the error result `tag` with the text of `msg` (whose bytes are
 * freed) and returns false. */
bool set_error(weir_error_t *err, uint8_t tag, buf_t *msg);
/* The same with a NUL-terminated message. */
bool set_error_str(weir_error_t *err, uint8_t tag, const char *msg);

/* Fills the result of `describe`; `inputs` and `outputs` end with NULL. */
void describe_operator(weir_operator_types_operator_info_t *ret, const char *name,
                       const char *version, const char *const *inputs,
                       const char *const *outputs, uint32_t state_version);

/* The operator's config (JSON, optional), parsed into `a`: true with
 * *config the object, or NULL when the config is blank; false with an
 * invalid-config error when it is not a JSON object. */
bool config_object(arena_t *a, const weir_operator_types_open_context_t *ctx,
                   const jval_t **config, weir_error_t *err);
/* Which of `fields` (NULL-terminated) the config member `m` is: its index,
 * or -1 with an invalid-config error naming the expected fields as serde
 * does. */
int config_field(const jmember_t *m, const char *const *fields, weir_error_t *err);

/* A byte string. */
typedef struct {
    uint8_t *ptr;
    size_t len;
} bytes_t;

/* Sorts the `n` items of `size` bytes at `items`, each of which begins with
 * a bytes_t, by those bytes (as Rust orders `[u8]`), and keeps one item of
 * each run of equal ones, at the front: returns how many are kept. */
size_t sort_keys(void *items, size_t n, size_t size);
/* The item of `items` (sorted by sort_keys) that begins with the bytes of
 * `key`, or NULL. */
void *find_key(const void *items, size_t n, size_t size, const bytes_t *key);

/* The state key `key` followed by `suffix` (`suffix_len` bytes, which may
 * include a NUL), malloc'd. */
operator_list_u8_t state_key(const uint8_t *key, size_t len, const char *suffix,
                             size_t suffix_len);

/* The host calls, skipped for an empty list. */
void put_many(weir_operator_state_list_entry_t *entries);
/* Emits `records` on output port 0. */
void emit(weir_operator_emit_list_record_t *records);

#endif
