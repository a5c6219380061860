/* tt_input.h — the one way towertrain opens an input file (data sets, model files), and reads it as hostile.
 *
 * tt_input_open refuses anything but a regular file without blocking (a FIFO with no writer, a directory, a device
 * are refused at once), and every read is exact: a short one is an error naming the file, never a quiet end. An
 * input can also be memory (tt_input_open_mem), which is how the fuzzers and tests reach the same code. After
 * tt_input_detect_gzip, reads return the decompressed stream: concatenated gzip members are one stream, a member
 * cut short is "truncated", a bad check value is "corrupt", and bytes after the last member are an error.
 * Not for: parsing any format (see src/data/idx.c, src/model/model_file.c) or writing files. */
#ifndef TT_INPUT_H
#define TT_INPUT_H

#include "tt_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TT_INPUT_RAW_BUF ((size_t)1 << 17)      /* raw bytes read from the file per read() call */
#define TT_INPUT_FIRST_ALLOC ((size_t)4 << 20) /* a gzip payload's buffer starts at most this big, then doubles */

struct tt_input_gz; /* inflate state, private to src/data/input.c */

typedef struct tt_input {
    const char *path;            /* names the input in every message (not copied: must outlive the input) */
    int fd;                      /* the open file, or -1 for memory */
    const unsigned char *next;   /* raw bytes read from the source but not consumed yet: next[0..avail) */
    size_t avail;
    unsigned char *buf;          /* a file's raw buffer (TT_INPUT_RAW_BUF bytes); NULL for memory */
    uint64_t raw_size;           /* the file's size when opened, or the memory's length */
    uint64_t raw_read;           /* raw bytes taken from the source so far (consumed + avail) */
    int eof;                     /* the source has no more raw bytes */
    struct tt_input_gz *gz;      /* non-NULL after tt_input_detect_gzip found the gzip magic */
} tt_input;

/* Opens a regular file for reading (O_NONBLOCK while checking, so a FIFO cannot hang the open; then blocking
 * reads). Anything else fails with TT_ERR_IO: "PATH: not a regular file (a FIFO)". */
tt_status tt_input_open(tt_input *in, const char *path, tt_error *err);

/* An input over data[0..n) (not copied); name is used in messages like a path. */
tt_status tt_input_open_mem(tt_input *in, const void *data, size_t n, const char *name, tt_error *err);

/* Looks at the first two bytes: if they are the gzip magic 1f 8b, every later read returns the decompressed
 * stream; otherwise reads stay raw. Call it before any read. */
tt_status tt_input_detect_gzip(tt_input *in, tt_error *err);

/* For raw inputs, the bytes left to read are known in advance: sets *left and returns 1. Returns 0 for gzip. */
int tt_input_left(const tt_input *in, uint64_t *left);

/* Reads exactly n bytes; fewer is TT_ERR_FORMAT "PATH: truncated: the file ends after M of the N bytes of WHAT". */
tt_status tt_input_read(tt_input *in, void *buf, size_t n, const char *what, tt_error *err);

/* Reads exactly n bytes into a new tt_malloc'd *out, never allocating more than the input can hold: a raw input
 * shorter than n fails before any allocation; a gzip payload goes into a buffer that starts at
 * min(n, TT_INPUT_FIRST_ALLOC) and doubles as data arrive (never beyond n). *out is NULL on failure. */
tt_status tt_input_read_alloc(tt_input *in, size_t n, const char *what, uint8_t **out, tt_error *err);

/* A new tt_malloc'd *out of n bytes for data derived from the input (elements converted to another width, records
 * of several files joined), after the host-memory check of tt_input_read_alloc: TT_ERR_NOMEM naming the input and
 * `what` if it does not fit. The caller must have checked that the input holds the data n is computed from: this is
 * no defence against a lying header. *out is NULL on failure. */
tt_status tt_input_alloc(const tt_input *in, size_t n, const char *what, uint8_t **out, tt_error *err);

/* Checks what follows: *more = 1 if data remain, 0 at a clean end. A gzip stream is read to its end here, so a
 * missing trailer, a bad check value or bytes after the last member are reported by this call. */
tt_status tt_input_at_end(tt_input *in, int *more, tt_error *err);

/* Closes the file and frees the buffers; accepts a half-opened input and can be called twice. */
void tt_input_close(tt_input *in);

/* Reads a whole small text file (raw, never decompressed) into a NUL-terminated tt_malloc'd *text of *len bytes.
 * Files over max_bytes and files containing a NUL byte fail with TT_ERR_FORMAT, naming `what` ("model file"). */
tt_status tt_input_read_text(const char *path, const char *what, size_t max_bytes, char **text, size_t *len,
                             tt_error *err);

#ifdef __cplusplus
}
#endif
#endif
