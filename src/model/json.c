/* json.c — strict JSON for what towertrain reads from files (tt_json.h): a scan of the raw bytes against RFC 8259
 * and the rules json-c does not keep, then json-c's parse, then the keys it kept counted against the keys seen.
 *
 * The scan is a recursive descent over the text, bounded by the nesting limit (so by the caller, never by the file),
 * that allocates nothing: a 64 MiB header of "[0,0,0,..." is refused at its max_values-th value, before json-c makes
 * an object of each. Every refusal names the byte where it happened.
 * Not for: writing JSON, or building values (json-c does both). */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tt_json.h"

typedef struct scan {
    const char *s;
    size_t n, i;
    int depth, max_depth;
    size_t max_values;
    tt_json_scan *out;
    char *why;
    size_t why_len;
} scan;

static int scan_fail(scan *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, c->why_len, fmt, ap);
    va_end(ap);
    return -1;
}

size_t tt_json_utf8_len(const unsigned char *p, size_t n)
{
    const unsigned b = p[0];
    size_t k;
    unsigned cp;
    if (b < 0x80) return 1;
    if (b >= 0xc2 && b <= 0xdf) k = 1, cp = b & 0x1f;
    else if (b >= 0xe0 && b <= 0xef) k = 2, cp = b & 0x0f;
    else if (b >= 0xf0 && b <= 0xf4) k = 3, cp = b & 0x07;
    else return 0; /* a continuation byte, 0xc0/0xc1 (always overlong), or past U+10FFFF */
    if (n <= k) return 0;
    for (size_t t = 1; t <= k; t++) {
        if ((p[t] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (p[t] & 0x3f);
    }
    if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return k + 1;
}

int tt_json_utf8(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        const size_t k = p[i] ? tt_json_utf8_len(p + i, n - i) : 0;
        if (!k) return 0;
        i += k;
    }
    return 1;
}

static void skip_blanks(scan *c)
{
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        const char h = s[k];
        const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 0;
}

/* A \u escape at c->i (the backslash): not U+0000 (a C string would end there), surrogates only as a high one
 * followed by a low one. */
static int scan_u_escape(scan *c)
{
    const size_t at = c->i;
    unsigned u, lo;
    if (c->n - at < 6 || hex4(c->s + at + 2, &u)) return scan_fail(c, "is not JSON: a bad \\u escape at byte %zu", at);
    if (u == 0) return scan_fail(c, "holds \\u0000 in a string at byte %zu", at);
    if (u >= 0xdc00 && u <= 0xdfff) return scan_fail(c, "is not JSON: a lone surrogate \\u%04x at byte %zu", u, at);
    c->i += 6;
    if (u < 0xd800 || u > 0xdbff) return 0;
    if (c->n - c->i < 6 || c->s[c->i] != '\\' || c->s[c->i + 1] != 'u' || hex4(c->s + c->i + 2, &lo) ||
        lo < 0xdc00 || lo > 0xdfff)
        return scan_fail(c, "is not JSON: a lone surrogate \\u%04x at byte %zu", u, at);
    c->i += 6;
    return 0;
}

/* A string from its opening quote at c->i to past its closing one. */
static int scan_string(scan *c)
{
    for (c->i++; c->i < c->n;) {
        const unsigned char b = (unsigned char)c->s[c->i];
        if (b == '"') {
            c->i++;
            return 0;
        }
        if (b < 0x20) return scan_fail(c, "holds control byte 0x%02x in a string at byte %zu", b, c->i);
        if (b == '\\') {
            const char e = c->i + 1 < c->n ? c->s[c->i + 1] : '\0';
            if (e == 'u') {
                if (scan_u_escape(c)) return -1;
            } else if (e && strchr("\"\\/bfnrt", e)) {
                c->i += 2;
            } else {
                return scan_fail(c, "is not JSON: a bad escape at byte %zu", c->i);
            }
            continue;
        }
        const size_t k = tt_json_utf8_len((const unsigned char *)c->s + c->i, c->n - c->i);
        if (!k)
            return scan_fail(c, "is not UTF-8 at byte %zu (an overlong form, a surrogate, past U+10FFFF or a stray "
                             "byte)", c->i);
        c->i += k;
    }
    return scan_fail(c, "is not JSON: it ends inside a string");
}

static int is_digit(scan *c) { return c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9'; }

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? — RFC 8259's number, nothing more. */
static int scan_number(scan *c)
{
    const size_t at = c->i;
    if (c->s[c->i] == '-') c->i++;
    if (!is_digit(c)) return scan_fail(c, "is not JSON: not a number at byte %zu", at);
    if (c->s[c->i] == '0') {
        c->i++;
        if (is_digit(c)) return scan_fail(c, "is not JSON: a number with a leading zero at byte %zu", at);
    }
    while (is_digit(c)) c->i++;
    if (c->i < c->n && c->s[c->i] == '.') {
        c->i++;
        if (!is_digit(c)) return scan_fail(c, "is not JSON: a number without digits after its '.' at byte %zu", at);
        while (is_digit(c)) c->i++;
    }
    if (c->i < c->n && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
        c->i++;
        if (c->i < c->n && (c->s[c->i] == '+' || c->s[c->i] == '-')) c->i++;
        if (!is_digit(c)) return scan_fail(c, "is not JSON: a number without exponent digits at byte %zu", at);
        while (is_digit(c)) c->i++;
    }
    return 0;
}

static int scan_value(scan *c);

/* The refusal for byte c->i where `what` should be: control bytes and single quotes named as such. */
static int unexpected(scan *c, const char *what)
{
    if (c->i >= c->n) return scan_fail(c, "is not JSON: it ends where %s should be", what);
    const unsigned char b = (unsigned char)c->s[c->i];
    if (b < 0x20) return scan_fail(c, "holds control byte 0x%02x at byte %zu", b, c->i);
    if (b == '\'') return scan_fail(c, "is not JSON: a single quote at byte %zu", c->i);
    if (b >= 0x20 && b < 0x7f) return scan_fail(c, "is not JSON: '%c' where %s should be, at byte %zu", b, what, c->i);
    return scan_fail(c, "is not JSON: byte 0x%02x where %s should be, at byte %zu", b, what, c->i);
}

/* An object or an array from its opening bracket at c->i to past its closing one. */
static int scan_container(scan *c)
{
    const char close = c->s[c->i] == '{' ? '}' : ']';
    if (++c->depth > c->max_depth)
        return scan_fail(c, "is not JSON: nested more than %d deep at byte %zu", c->max_depth, c->i);
    c->i++;
    skip_blanks(c);
    if (c->i < c->n && c->s[c->i] == close) {
        c->i++;
        c->depth--;
        return 0;
    }
    for (;;) {
        skip_blanks(c);
        if (close == '}') {
            if (c->i >= c->n || c->s[c->i] != '"') return unexpected(c, "a key");
            const size_t k0 = c->i;
            if (scan_string(c)) return -1;
            const size_t klen = c->i - k0 - 2;
            c->out->keys++;
            skip_blanks(c);
            if (c->i >= c->n || c->s[c->i] != ':') return unexpected(c, "':'");
            c->i++;
            skip_blanks(c);
            const tt_json_scan *o = c->out;
            if (o->find && c->depth == o->find_depth && klen == strlen(o->find) && !memcmp(c->s + k0 + 1, o->find, klen))
                if (c->out->found++ == 0) c->out->found_at = c->i;
        }
        if (scan_value(c)) return -1;
        skip_blanks(c);
        if (c->i < c->n && c->s[c->i] == close) {
            c->i++;
            c->depth--;
            return 0;
        }
        if (c->i >= c->n || c->s[c->i] != ',') return unexpected(c, close == '}' ? "',' or '}'" : "',' or ']'");
        c->i++;
        skip_blanks(c);
        if (c->i < c->n && c->s[c->i] == close) return scan_fail(c, "is not JSON: a trailing comma at byte %zu", c->i);
    }
}

static int scan_value(scan *c)
{
    skip_blanks(c);
    if (c->i >= c->n) return scan_fail(c, "is not JSON: it ends inside the JSON value");
    if (++c->out->values > c->max_values)
        return scan_fail(c, "holds more than %zu JSON values (a checkpoint's has at most about 8,000)", c->max_values);
    const unsigned char b = (unsigned char)c->s[c->i];
    if (b == '{' || b == '[') return scan_container(c);
    if (b == '"') return scan_string(c);
    if (b == '-' || (b >= '0' && b <= '9')) return scan_number(c);
    static const char *const words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++)
        if (c->n - c->i >= strlen(words[w]) && !memcmp(c->s + c->i, words[w], strlen(words[w]))) {
            c->i += strlen(words[w]);
            return 0;
        }
    return unexpected(c, "a value");
}

/* Keys of every object in a parsed value (its depth bounded by the scan). */
static size_t count_keys(json_object *v)
{
    size_t k = 0;
    if (json_object_is_type(v, json_type_object)) {
        json_object_object_foreach(v, key, val) {
            (void)key;
            k += 1 + count_keys(val);
        }
    } else if (json_object_is_type(v, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(v); i++) k += count_keys(json_object_array_get_idx(v, i));
    }
    return k;
}

static const char *json_kind(char b)
{
    switch (b) {
    case 'n': return "null";
    case 't': case 'f': return "a boolean";
    case '"': return "a string";
    case '[': return "an array";
    default: return "a number";
    }
}

json_object *tt_json_parse_object(const char *text, size_t n, int depth, size_t max_values, tt_json_scan *sc,
                                  char *why, size_t why_len)
{
    scan c = {.s = text, .n = n, .max_depth = depth, .max_values = max_values, .out = sc, .why = why,
              .why_len = why_len};
    sc->found = sc->found_at = sc->keys = sc->values = 0;
    skip_blanks(&c);
    const size_t first = c.i;
    if (scan_value(&c)) return NULL;
    skip_blanks(&c);
    if (c.i < n) {
        unexpected(&c, "nothing more (only blanks after the JSON value)");
        return NULL;
    }
    if (text[first] != '{') {
        scan_fail(&c, "is JSON %s, not an object", json_kind(text[first]));
        return NULL;
    }
    json_tokener *tok = n > INT_MAX ? NULL : json_tokener_new_ex(depth);
    if (!tok) {
        scan_fail(&c, "is too large for json-c (or out of memory)");
        return NULL;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS | JSON_TOKENER_VALIDATE_UTF8);
    json_object *v = json_tokener_parse_ex(tok, text, (int)n);
    const enum json_tokener_error e = json_tokener_get_error(tok);
    if (!v || e != json_tokener_success) { /* the scan passed it: json-c's own limits (its error, named) */
        scan_fail(&c, "is not JSON for json-c: %s at byte %zu", json_tokener_error_desc(e),
                  json_tokener_get_parse_end(tok));
        json_object_put(v);
        v = NULL;
    } else if (count_keys(v) != sc->keys) {
        scan_fail(&c, "repeats a key (json-c would keep only the last)");
        json_object_put(v);
        v = NULL;
    }
    json_tokener_free(tok);
    return v;
}
