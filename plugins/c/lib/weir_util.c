/* See weir_util.h. */
#include "weir_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

/* ------------------------------------------------------------ buffer */

static void buf_reserve(buf_t *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->len + extra) cap *= 2;
    b->ptr = realloc(b->ptr, cap);
    if (!b->ptr) abort();
    b->cap = cap;
}

void buf_push(buf_t *b, const void *data, size_t n) {
    if (n == 0) return;
    buf_reserve(b, n);
    memcpy(b->ptr + b->len, data, n);
    b->len += n;
}

void buf_puts(buf_t *b, const char *s) { buf_push(b, s, strlen(s)); }

void buf_putc(buf_t *b, char c) { buf_push(b, &c, 1); }

int bytes_cmp(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len) {
    int c = memcmp(a, b, a_len < b_len ? a_len : b_len);
    return c ? c : (a_len > b_len) - (a_len < b_len);
}

char *buf_cstr(buf_t *b) {
    char *s = malloc(b->len + 1);
    if (!s) abort();
    if (b->len) memcpy(s, b->ptr, b->len);
    s[b->len] = 0;
    return s;
}

void buf_json_string(buf_t *b, const uint8_t *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    buf_putc(b, '"');
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (c < 0x20) {
                memcpy(u, "\\u00", 4);
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                u[6] = 0;
                esc = u;
            }
        }
        if (esc) {
            buf_push(b, s + start, i - start);
            buf_puts(b, esc);
            start = i + 1;
        }
    }
    buf_push(b, s + start, n - start);
    buf_putc(b, '"');
}

void buf_f64(buf_t *b, double x) {
    if (!isfinite(x)) {
        buf_puts(b, "null");
        return;
    }
    if (x == 0) {
        buf_puts(b, signbit(x) ? "-0.0" : "0.0");
        return;
    }
    /* The shortest precision whose text reads back as x. */
    char tmp[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, x);
        if (strtod(tmp, NULL) == x) break;
    }
    /* tmp is [-]d[.ddd]e[+-]XX */
    const char *t = tmp;
    if (*t == '-') {
        buf_putc(b, '-');
        t++;
    }
    char digits[24];
    int n = 0;
    while (*t && *t != 'e') {
        if (*t != '.') digits[n++] = *t;
        t++;
    }
    int exp10 = atoi(t + 1);
    while (n > 1 && digits[n - 1] == '0') n--;
    int point = exp10 + 1; /* value = 0.<digits> * 10^point */
    if (point > 0 && point <= 16) {
        if (n <= point) {
            buf_push(b, digits, n);
            for (int i = n; i < point; i++) buf_putc(b, '0');
            buf_puts(b, ".0");
        } else {
            buf_push(b, digits, point);
            buf_putc(b, '.');
            buf_push(b, digits + point, n - point);
        }
    } else if (point > -5 && point <= 0) {
        buf_puts(b, "0.");
        for (int i = 0; i < -point; i++) buf_putc(b, '0');
        buf_push(b, digits, n);
    } else {
        buf_putc(b, digits[0]);
        if (n > 1) {
            buf_putc(b, '.');
            buf_push(b, digits + 1, n - 1);
        }
        char e[16];
        snprintf(e, sizeof e, "e%c%d", point - 1 >= 0 ? '+' : '-', abs(point - 1));
        buf_puts(b, e);
    }
}

/* ------------------------------------------------------------ arena */

struct arena_chunk {
    arena_chunk_t *next;
    size_t used, cap;
    max_align_t data[];
};

void *arena_alloc(arena_t *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    arena_chunk_t *c = a->head;
    if (!c || c->used + n > c->cap) {
        size_t cap = n > 65536 ? n : 65536;
        c = malloc(sizeof(arena_chunk_t) + cap);
        if (!c) abort();
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

void arena_free(arena_t *a) {
    while (a->head) {
        arena_chunk_t *next = a->head->next;
        free(a->head);
        a->head = next;
    }
}

/* ------------------------------------------------------------ UTF-8 */

/* Decodes the code point at s[*i] (valid UTF-8) and advances *i. */
static uint32_t utf8_next(const uint8_t *s, size_t *i) {
    uint8_t c = s[*i];
    if (c < 0x80) {
        (*i)++;
        return c;
    }
    int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    uint32_t cp = c & (0x7F >> len);
    for (int k = 1; k < len; k++) cp = (cp << 6) | (s[*i + k] & 0x3F);
    *i += len;
    return cp;
}

/* Decodes the code point that ends at s[*end) and moves *end before it. */
static uint32_t utf8_prev(const uint8_t *s, size_t *end) {
    size_t start = *end - 1;
    while (start > 0 && (s[start] & 0xC0) == 0x80) start--;
    size_t i = start;
    uint32_t cp = utf8_next(s, &i);
    *end = start;
    return cp;
}

static void utf8_put(buf_t *b, uint32_t cp) {
    uint8_t out[4];
    size_t n;
    if (cp < 0x80) {
        out[0] = cp;
        n = 1;
    } else if (cp < 0x800) {
        out[0] = 0xC0 | (cp >> 6);
        out[1] = 0x80 | (cp & 0x3F);
        n = 2;
    } else if (cp < 0x10000) {
        out[0] = 0xE0 | (cp >> 12);
        out[1] = 0x80 | ((cp >> 6) & 0x3F);
        out[2] = 0x80 | (cp & 0x3F);
        n = 3;
    } else {
        out[0] = 0xF0 | (cp >> 18);
        out[1] = 0x80 | ((cp >> 12) & 0x3F);
        out[2] = 0x80 | ((cp >> 6) & 0x3F);
        out[3] = 0x80 | (cp & 0x3F);
        n = 4;
    }
    buf_push(b, out, n);
}

bool utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        uint32_t min;
        if ((c & 0xE0) == 0xC0) len = 2, min = 0x80;
        else if ((c & 0xF0) == 0xE0) len = 3, min = 0x800;
        else if ((c & 0xF8) == 0xF0) len = 4, min = 0x10000;
        else return false;
        if (i + len > n) return false;
        uint32_t cp = c & (0x7F >> len);
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

static bool is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

void utf8_trim(const uint8_t **s, size_t *n) {
    size_t start = 0, end = *n;
    while (start < end) {
        size_t i = start;
        if (!is_white_space(utf8_next(*s, &i))) break;
        start = i;
    }
    while (end > start) {
        size_t e = end;
        if (!is_white_space(utf8_prev(*s, &e))) break;
        end = e;
    }
    *s += start;
    *n = end - start;
}

/* Approximations of Unicode's Case_Ignorable and Cased properties, enough for
 * the final-sigma rule. */
static bool case_ignorable(uint32_t c) {
    return c == 0x27 || c == 0x2E || c == 0x3A || c == 0x5E || c == 0x60 || c == 0xA8 ||
           c == 0xAD || c == 0xAF || c == 0xB4 || c == 0xB7 || c == 0xB8 ||
           (c >= 0x2B0 && c <= 0x36F) || c == 0x2018 || c == 0x2019 || c == 0x2024 ||
           c == 0x2027;
}

static bool cased(uint32_t c) {
    return towlower(c) != (wint_t)c || towupper(c) != (wint_t)c || c == 0xAA || c == 0xBA;
}

void utf8_lower(buf_t *b, const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t at = i;
        uint32_t c = utf8_next(s, &i);
        if (c < 0x80) {
            buf_putc(b, (c >= 'A' && c <= 'Z') ? c + 32 : c);
        } else if (c == 0x130) {
            buf_putc(b, 'i');
            utf8_put(b, 0x307);
        } else if (c == 0x3A3) {
            /* Final sigma: preceded by a cased letter and not followed by one
             * (case-ignorable characters skipped on both sides). */
            bool before = false, after = false;
            size_t e = at;
            while (e > 0) {
                uint32_t p = utf8_prev(s, &e);
                if (!case_ignorable(p)) {
                    before = cased(p);
                    break;
                }
            }
            size_t j = i;
            while (j < n) {
                uint32_t q = utf8_next(s, &j);
                if (!case_ignorable(q)) {
                    after = cased(q);
                    break;
                }
            }
            utf8_put(b, before && !after ? 0x3C2 : 0x3C3);
        } else {
            utf8_put(b, towlower(c));
        }
    }
}

static bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

static bool eq_nocase(const uint8_t *s, size_t n, const char *word) {
    size_t m = strlen(word);
    if (n != m) return false;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c >= 'A' && c <= 'Z') c += 32;
        if (c != (uint8_t)word[i]) return false;
    }
    return true;
}

bool parse_rust_f64(const uint8_t *s, size_t n, double *out) {
    size_t i = 0;
    bool neg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    const uint8_t *r = s + i;
    size_t rn = n - i;
    if (eq_nocase(r, rn, "inf") || eq_nocase(r, rn, "infinity")) {
        *out = neg ? -INFINITY : INFINITY;
        return true;
    }
    if (eq_nocase(r, rn, "nan")) {
        *out = copysign(NAN, neg ? -1.0 : 1.0);
        return true;
    }
    size_t int_digits = 0, frac_digits = 0;
    while (i < n && is_digit(s[i])) i++, int_digits++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && is_digit(s[i])) i++, frac_digits++;
    }
    if (int_digits + frac_digits == 0) return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t exp_digits = 0;
        while (i < n && is_digit(s[i])) i++, exp_digits++;
        if (exp_digits == 0) return false;
    }
    if (i != n) return false;
    char *tmp = malloc(n + 1);
    if (!tmp) abort();
    memcpy(tmp, s, n);
    tmp[n] = 0;
    *out = strtod(tmp, NULL);
    free(tmp);
    return true;
}

/* ------------------------------------------------------------ JSON */

typedef struct {
    arena_t *a;
    const uint8_t *s;
    size_t n, i;
    int depth;
    const char *err;
} parser_t;

static void skip_ws(parser_t *p) {
    while (p->i < p->n &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static bool fail(parser_t *p, const char *msg) {
    if (!p->err) p->err = msg;
    return false;
}

static bool literal(parser_t *p, const char *word) {
    size_t m = strlen(word);
    if (p->n - p->i < m || memcmp(p->s + p->i, word, m) != 0) return fail(p, "expected value");
    p->i += m;
    return true;
}

static int hex4(parser_t *p) {
    if (p->n - p->i < 4) return -1;
    int v = 0;
    for (int k = 0; k < 4; k++) {
        uint8_t c = p->s[p->i + k];
        int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    p->i += 4;
    return v;
}

static bool parse_string(parser_t *p, const uint8_t **out, size_t *out_len) {
    p->i++; /* opening quote */
    buf_t b = {0};
    bool ok = false;
    while (true) {
        if (p->i >= p->n) {
            fail(p, "EOF while parsing a string");
            break;
        }
        uint8_t c = p->s[p->i++];
        if (c == '"') {
            ok = true;
            break;
        }
        if (c < 0x20) {
            fail(p, "control character (\\u0000-\\u001F) found while parsing a string");
            break;
        }
        if (c != '\\') {
            buf_putc(&b, c);
            continue;
        }
        if (p->i >= p->n) {
            fail(p, "EOF while parsing a string");
            break;
        }
        uint8_t e = p->s[p->i++];
        switch (e) {
        case '"': buf_putc(&b, '"'); continue;
        case '\\': buf_putc(&b, '\\'); continue;
        case '/': buf_putc(&b, '/'); continue;
        case 'b': buf_putc(&b, '\b'); continue;
        case 'f': buf_putc(&b, '\f'); continue;
        case 'n': buf_putc(&b, '\n'); continue;
        case 'r': buf_putc(&b, '\r'); continue;
        case 't': buf_putc(&b, '\t'); continue;
        case 'u': break;
        default: fail(p, "invalid escape"); goto done;
        }
        int u = hex4(p);
        if (u < 0) {
            fail(p, "invalid escape");
            break;
        }
        uint32_t cp = u;
        if (u >= 0xD800 && u <= 0xDBFF) {
            if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') {
                fail(p, "lone leading surrogate in hex escape");
                break;
            }
            p->i += 2;
            int lo = hex4(p);
            if (lo < 0xDC00 || lo > 0xDFFF) {
                fail(p, "lone leading surrogate in hex escape");
                break;
            }
            cp = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        } else if (u >= 0xDC00 && u <= 0xDFFF) {
            fail(p, "lone trailing surrogate in hex escape");
            break;
        }
        utf8_put(&b, cp);
    }
done:
    if (ok) {
        uint8_t *copy = arena_alloc(p->a, b.len + 1);
        if (b.len) memcpy(copy, b.ptr, b.len);
        *out = copy;
        *out_len = b.len;
    }
    free(b.ptr);
    return ok;
}

static bool parse_number(parser_t *p, jval_t *v) {
    size_t start = p->i;
    bool neg = false, integer = true;
    if (p->s[p->i] == '-') neg = true, p->i++;
    if (p->i >= p->n || !is_digit(p->s[p->i])) return fail(p, "invalid number");
    if (p->s[p->i] == '0') {
        p->i++;
        if (p->i < p->n && is_digit(p->s[p->i])) return fail(p, "invalid number");
    } else {
        while (p->i < p->n && is_digit(p->s[p->i])) p->i++;
    }
    if (p->i < p->n && p->s[p->i] == '.') {
        integer = false;
        p->i++;
        if (p->i >= p->n || !is_digit(p->s[p->i])) return fail(p, "invalid number");
        while (p->i < p->n && is_digit(p->s[p->i])) p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        integer = false;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || !is_digit(p->s[p->i])) return fail(p, "invalid number");
        while (p->i < p->n && is_digit(p->s[p->i])) p->i++;
    }
    size_t len = p->i - start;
    char *tmp = arena_alloc(p->a, len + 1);
    memcpy(tmp, p->s + start, len);
    tmp[len] = 0;
    v->type = J_NUM;
    v->text = (const uint8_t *)tmp;
    v->text_len = len;
    v->num = strtod(tmp, NULL);
    if (integer) {
        /* Integers that fit i64 (negative) or u64 stay integers; serde_json
         * reads `-0` as the float -0.0. */
        const char *digits = tmp + (neg ? 1 : 0);
        const char *limit = neg ? "9223372036854775808" : "18446744073709551615";
        size_t nd = strlen(digits), nl = strlen(limit);
        integer = (nd < nl || (nd == nl && strcmp(digits, limit) <= 0)) &&
                  !(neg && strspn(digits, "0") == nd);
    }
    v->integer = integer;
    if (!isfinite(v->num)) return fail(p, "number out of range");
    return true;
}

static bool parse_value(parser_t *p, jval_t *v);

/* Parses the items of an array or object, from its opening bracket to its
 * `close`: each with `item` into an array of `size`-byte items in the arena,
 * comma-separated. Returns the array, with *count items, or NULL. */
static void *parse_items(parser_t *p, char close, size_t size,
                         bool (*item)(parser_t *p, void *out), size_t *count) {
    p->i++;
    size_t cap = 4, n = 0;
    char *items = arena_alloc(p->a, cap * size);
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
    } else {
        while (true) {
            if (n == cap) {
                char *bigger = arena_alloc(p->a, 2 * cap * size);
                memcpy(bigger, items, n * size);
                items = bigger;
                cap *= 2;
            }
            if (!item(p, items + n * size)) return NULL;
            n++;
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == close) {
                p->i++;
                break;
            }
            fail(p, close == ']' ? "expected `,` or `]`" : "expected `,` or `}`");
            return NULL;
        }
    }
    *count = n;
    return items;
}

static bool parse_element(parser_t *p, void *out) { return parse_value(p, out); }

static bool parse_member(parser_t *p, void *out) {
    jmember_t *m = out;
    skip_ws(p);
    if (p->i >= p->n || p->s[p->i] != '"') return fail(p, "key must be a string");
    if (!parse_string(p, &m->key, &m->key_len)) return false;
    skip_ws(p);
    if (p->i >= p->n || p->s[p->i] != ':') return fail(p, "expected `:`");
    p->i++;
    return parse_value(p, &m->value);
}

static bool parse_value(parser_t *p, jval_t *v) {
    memset(v, 0, sizeof *v);
    skip_ws(p);
    if (p->i >= p->n) return fail(p, "EOF while parsing a value");
    if (++p->depth > 128) return fail(p, "recursion limit exceeded");
    bool ok;
    switch (p->s[p->i]) {
    case 'n': ok = literal(p, "null"); v->type = J_NULL; break;
    case 't': ok = literal(p, "true"); v->type = J_BOOL; v->boolean = true; break;
    case 'f': ok = literal(p, "false"); v->type = J_BOOL; break;
    case '"': v->type = J_STR; ok = parse_string(p, &v->text, &v->text_len); break;
    case '[':
        v->type = J_ARR;
        ok = (v->elems = parse_items(p, ']', sizeof(jval_t), parse_element, &v->n)) != NULL;
        break;
    case '{':
        v->type = J_OBJ;
        ok = (v->members = parse_items(p, '}', sizeof(jmember_t), parse_member, &v->n)) != NULL;
        break;
    default:
        ok = (p->s[p->i] == '-' || is_digit(p->s[p->i])) ? parse_number(p, v) : fail(p, "expected value");
    }
    p->depth--;
    return ok;
}

jval_t *json_parse(arena_t *a, const uint8_t *s, size_t n, const char **err) {
    parser_t p = {.a = a, .s = s, .n = n};
    if (!utf8_valid(s, n)) {
        *err = "invalid UTF-8";
        return NULL;
    }
    jval_t *v = arena_alloc(a, sizeof(jval_t));
    if (!parse_value(&p, v)) {
        *err = p.err;
        return NULL;
    }
    skip_ws(&p);
    if (p.i != n) {
        *err = "trailing characters";
        return NULL;
    }
    return v;
}

const jval_t *json_get(const jval_t *obj, const char *key) {
    return json_get_n(obj, (const uint8_t *)key, strlen(key));
}

const jval_t *json_get_n(const jval_t *obj, const uint8_t *key, size_t len) {
    if (!obj || obj->type != J_OBJ) return NULL;
    const jval_t *found = NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (obj->members[i].key_len == len && memcmp(obj->members[i].key, key, len) == 0)
            found = &obj->members[i].value;
    return found;
}

static int member_cmp(const void *x, const void *y) {
    const jmember_t *a = *(const jmember_t *const *)x, *b = *(const jmember_t *const *)y;
    int c = bytes_cmp(a->key, a->key_len, b->key, b->key_len);
    if (c) return c;
    /* Equal keys: source order, so the last one can win. */
    return a < b ? -1 : a > b;
}

void buf_json_value(buf_t *b, const jval_t *v) {
    switch (v->type) {
    case J_NULL: buf_puts(b, "null"); break;
    case J_BOOL: buf_puts(b, v->boolean ? "true" : "false"); break;
    case J_STR: buf_json_string(b, v->text, v->text_len); break;
    case J_NUM:
        if (v->integer) {
            char tmp[32];
            if (v->text[0] == '-')
                snprintf(tmp, sizeof tmp, "%lld", strtoll((const char *)v->text, NULL, 10));
            else
                snprintf(tmp, sizeof tmp, "%llu", strtoull((const char *)v->text, NULL, 10));
            buf_puts(b, tmp);
        } else {
            buf_f64(b, v->num);
        }
        break;
    case J_ARR:
        buf_putc(b, '[');
        for (size_t i = 0; i < v->n; i++) {
            if (i) buf_putc(b, ',');
            buf_json_value(b, &v->elems[i]);
        }
        buf_putc(b, ']');
        break;
    case J_OBJ: {
        const jmember_t **sorted = malloc((v->n + 1) * sizeof *sorted);
        if (!sorted) abort();
        for (size_t i = 0; i < v->n; i++) sorted[i] = &v->members[i];
        qsort(sorted, v->n, sizeof *sorted, member_cmp);
        buf_putc(b, '{');
        bool first = true;
        for (size_t i = 0; i < v->n; i++) {
            /* Of repeated keys, the last wins. */
            if (i + 1 < v->n && sorted[i + 1]->key_len == sorted[i]->key_len &&
                memcmp(sorted[i + 1]->key, sorted[i]->key, sorted[i]->key_len) == 0)
                continue;
            if (!first) buf_putc(b, ',');
            first = false;
            buf_json_string(b, sorted[i]->key, sorted[i]->key_len);
            buf_putc(b, ':');
            buf_json_value(b, &sorted[i]->value);
        }
        buf_putc(b, '}');
        free(sorted);
        break;
    }
    }
}

/* ------------------------------------------------------------ rows */

static void row_head(buf_t *b, uint8_t type, const char *name) {
    size_t n = strlen(name);
    if (n > 255) abort();
    uint8_t head[2] = {type, (uint8_t)n};
    buf_push(b, head, 2);
    buf_push(b, name, n);
}

static void put_u64_le(buf_t *b, uint64_t v) {
    uint8_t out[8];
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)(v >> (8 * i));
    buf_push(b, out, 8);
}

static uint64_t u64_le(const uint8_t *s) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | s[i];
    return v;
}

void row_bool(buf_t *b, const char *name, bool v) { row_head(b, v ? ROW_TRUE : ROW_FALSE, name); }

void row_f64(buf_t *b, const char *name, double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    row_head(b, ROW_FLOAT, name);
    put_u64_le(b, bits);
}

/* Whether `s` is one JSON number, nothing around it (flat's json::is_number). */
static bool json_number(const uint8_t *s, size_t n) {
    size_t i = n > 0 && s[0] == '-' ? 1 : 0;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && s[i] >= '1' && s[i] <= '9') {
        while (i < n && is_digit(s[i])) i++;
    } else {
        return false;
    }
    if (i < n && s[i] == '.') {
        size_t start = ++i;
        while (i < n && is_digit(s[i])) i++;
        if (i == start) return false;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t start = i;
        while (i < n && is_digit(s[i])) i++;
        if (i == start) return false;
    }
    return i == n;
}

bool row_next(const uint8_t *s, size_t n, size_t *at, row_field_t *f) {
    size_t i = *at;
    memset(f, 0, sizeof *f);
    if (n - i < 2) return false;
    f->type = s[i];
    f->name_len = s[i + 1];
    i += 2;
    if (n - i < f->name_len) return false;
    f->name = s + i;
    i += f->name_len;
    if (!utf8_valid(f->name, f->name_len)) return false;
    switch (f->type) {
    case ROW_NULL:
    case ROW_FALSE:
    case ROW_TRUE: break;
    case ROW_INT:
    case ROW_UINT:
    case ROW_FLOAT: {
        if (n - i < 8) return false;
        uint64_t bits = u64_le(s + i);
        i += 8;
        f->u64 = bits;
        f->i64 = (int64_t)bits;
        memcpy(&f->f64, &bits, 8);
        break;
    }
    case ROW_STRING:
    case ROW_DECIMAL: {
        if (n - i < 4) return false;
        size_t len = (size_t)s[i] | (size_t)s[i + 1] << 8 | (size_t)s[i + 2] << 16 | (size_t)s[i + 3] << 24;
        i += 4;
        if (n - i < len) return false;
        f->text = s + i;
        f->text_len = len;
        i += len;
        if (f->type == ROW_STRING ? !utf8_valid(f->text, len) : !json_number(f->text, len))
            return false;
        break;
    }
    default: return false;
    }
    *at = i;
    return true;
}

bool row_name_is(const row_field_t *f, const char *name) {
    size_t n = strlen(name);
    return f->name_len == n && memcmp(f->name, name, n) == 0;
}

bool row_number(const row_field_t *f, double *out) {
    switch (f->type) {
    case ROW_INT: *out = (double)f->i64; return true;
    case ROW_UINT: *out = (double)f->u64; return true;
    case ROW_FLOAT: *out = f->f64; return true;
    case ROW_DECIMAL: return parse_rust_f64(f->text, f->text_len, out);
    default: return false;
    }
}
