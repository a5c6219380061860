/* model/ckpt.h — what the checkpoint's files share among themselves (not a public header; tt_checkpoint.h is): the
 * limits of a header, a parse in progress (ck_parse: the file, its header, its tensor entries), and the functions one
 * part calls in another. checkpoint.c walks the tensors and runs a read in order; safetensors.c is the container (the
 * header's text, entries, offsets, the checksum's place); ckpt_metadata.c the "__metadata__" keys; ckpt_options.c the
 * options and the model they describe. Each file says what it holds; each function is commented where it is defined. */
#ifndef TT_MODEL_CKPT_H
#define TT_MODEL_CKPT_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "tt_checkpoint.h"
#include "tt_json.h"

enum {
    CK_MAX_NDIM = 8,          /* ours have at most TT_MAX_DIMS; safetensors files from elsewhere rarely more */
    CK_JSON_DEPTH = 8,        /* ours nest 3 deep (header, entry, shape) */
    CK_QUOTE = 64,            /* bytes of a file's value quoted in a message */
    /* JSON values in a header (counted as commas by the pre-scan, before json-c allocates an object for each): ours
     * have ~15 per tensor, at most 4 x TT_MAX_TENSORS tensors, so about 8,000; a 64 MiB header of "[0,0,0,...]"
     * would have 32 million, some gigabytes as json-c objects */
    CK_MAX_VALUES = 1 << 16
};
#define CK_EPOCH_MAX ((uint64_t)1 << 32) /* a run resumes at epoch + 1: no wrap-around to 0 */

typedef struct ck_entry {
    const char *name; /* json-c's copy of the key (lives as long as the parsed header) */
    uint64_t begin, end; /* bytes, from the start of the data section */
    int ndim;
    uint64_t shape[CK_MAX_NDIM];
    int used; /* matched to a model tensor */
} ck_entry;

typedef struct ck_parse {
    const char *what; /* the source's name, first in every message */
    tt_error *err;
    json_object *top; /* the parsed header */
    json_object *md;  /* its "__metadata__" */
    const uint8_t *data; /* the data section */
    uint64_t data_len;
    ck_entry *e;
    size_t n_e;
    const uint8_t *buf; /* the whole file */
    size_t len;
    tt_json_scan sc; /* the header's scan: where its "checksum" value lies */
} ck_parse;

/* A file's value for a message: escaped, at most CK_QUOTE bytes. */
static inline const char *ck_quote(const char *s, char *out, size_t len)
{
    tt_escape(s, out, len);
    return out;
}

/* ---- safetensors.c: the container ------------------------------------------------------------------------------ */

int ck_put(json_object *o, const char *key, json_object *v);
int ck_push(json_object *a, json_object *v);
json_object *ck_entry_json(const tt_tensor_info *t, uint64_t begin);
void ck_prefix(unsigned char *out, size_t n);
void ck_put_hex(char *out, uint32_t crc);
tt_status ck_sum_locate(const char *what, const char *h, size_t n, const tt_json_scan *sc, size_t *digits,
                        tt_error *err);
tt_status ck_sum_digits(const char *what, const char *h, size_t n, size_t *digits, tt_error *err);
uint32_t ck_file_crc(const uint8_t *buf, size_t len, size_t digits);
tt_status ck_header(ck_parse *p, const uint8_t *buf, size_t len);
int ck_uint(json_object *v, uint64_t max, uint64_t *out);
const char *ck_shape_str(int ndim, const uint64_t *d, char *out, size_t len);
int ck_by_name(const void *a, const void *b);
tt_status ck_entries(ck_parse *p);

/* ---- ckpt_metadata.c: the "__metadata__" keys ------------------------------------------------------------------ */

json_object *ck_metadata(const tt_checkpoint *ck);
tt_status md_get(const ck_parse *p, const char *key, int optional, const char **v);
tt_status md_version(const ck_parse *p);
tt_status md_read(const ck_parse *p, tt_checkpoint *ck);

/* ---- ckpt_options.c: the options and the model they describe ------------------------------------------------- */

tt_status md_texts(const ck_parse *p, tt_checkpoint *ck);

#endif
