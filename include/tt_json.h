/* tt_json.h — strict JSON for what towertrain reads from files: a checkpoint's header and the options inside it.
 *
 * json-c 0.16 parses, but even with JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8 it takes (checked by
 * tests/test_checkpoint.c's test_json_c_is_lax): leading zeros ("00", "-01"), "1.", NaN and Infinity, overlong UTF-8
 * forms, UTF-8-encoded surrogates and code points past U+10FFFF, lone surrogate escapes ("\ud800", made U+FFFD),
 * and repeated keys (the last one kept, silently). So every byte is first checked here against RFC 8259 and those
 * rules, without allocating; only then does json-c build the value, and the keys it kept are counted against the
 * keys seen, so a repeated key at any depth (also one spelt with escapes) is refused.
 * Not for: writing JSON (json-c does), or JSON from anywhere but files (the CLI's own JSON is written, never read). */
#ifndef TT_JSON_H
#define TT_JSON_H

#include <json-c/json.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the scan saw; `find` and `find_depth` are set by the caller (find NULL: look for nothing). */
typedef struct tt_json_scan {
    const char *find; /* an object key, as its raw bytes between the quotes (no escapes), at nesting find_depth */
    int find_depth;   /* 1: a key of the top object; 2: a key of an object inside it */
    size_t found;     /* keys `find` seen at that depth */
    size_t found_at;  /* byte offset of the first one's value (its opening quote when it is a string) */
    size_t keys;      /* object keys, all depths */
    size_t values;    /* values, all depths (containers included) */
} tt_json_scan;

/* Checks n bytes (never reading past them; a NUL is a control byte) as one strict JSON object, at most `depth` deep
 * and `max_values` values, with only blanks around it, then parses it with json-c. Returns the object, or NULL with
 * `why` set to the rest of a sentence that begins "the header ...": "is not JSON: a leading zero at byte 17",
 * "is JSON null, not an object", "holds control byte 0x0a in a string at byte 5", "repeats a key". */
json_object *tt_json_parse_object(const char *text, size_t n, int depth, size_t max_values, tt_json_scan *sc,
                                  char *why, size_t why_len);

/* Bytes of the UTF-8 sequence at s (n bytes left): 1..4, or 0 if it is not valid UTF-8 — a stray continuation
 * byte, an overlong form, a surrogate (U+D800..U+DFFF), past U+10FFFF, or cut short. A NUL is a valid 1. */
size_t tt_json_utf8_len(const unsigned char *s, size_t n);

/* 1 if s[0..n) is valid UTF-8 without NUL bytes: what a JSON string may hold for other readers (Python's json). */
int tt_json_utf8(const char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
