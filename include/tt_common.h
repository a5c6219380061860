/* tt_common.h — status codes, error messages, timing and counted allocation shared by every module.
 *
 * Recoverable conditions (bad flag, bad file, out of memory, no device) travel as a tt_status plus a one-line
 * message in a tt_error; broken invariants abort through TT_ASSERT with the statement, function and file:line.
 * Not for: anything device specific (see tt_dev.h). */
#ifndef TT_COMMON_H
#define TT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TT_VERSION "0.1.0"

typedef enum {
    TT_OK = 0,
    TT_ERR_ARG,    /* a bad flag or value: the CLI exits 2 */
    TT_ERR_IO,     /* a file could not be opened or read: exit 1 */
    TT_ERR_FORMAT, /* a file is malformed: exit 1 */
    TT_ERR_NOMEM,  /* an allocation failed: exit 1 */
    TT_ERR_DEVICE, /* a backend or device is missing or failed: exit 1 */
    TT_ERR_MODEL   /* a model description is invalid: exit 1 */
} tt_status;

/* One line naming the thing and what is wrong with it. */
typedef struct tt_error {
    char msg[512];
} tt_error;

/* Formats the message into err (if not NULL) and returns s, so callers can write `return tt_fail(...)`. */
tt_status tt_fail(tt_error *err, tt_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Exit code of the CLI for a status: 0, 2 for TT_ERR_ARG, 1 otherwise. */
int tt_status_exit_code(tt_status s);

/* Aborts with the failed statement, function, file:line. For invariants, never for user input. */
void tt_abort_at(const char *what, const char *func, const char *file, int line);
#define TT_ASSERT(cond)                                                                                          \
    do {                                                                                                         \
        if (!(cond)) tt_abort_at(#cond, __func__, __FILE__, __LINE__);                                           \
    } while (0)

/* Monotonic seconds. */
double tt_now(void);

/* Counted host allocation: every host buffer the project owns goes through these, so tests can assert that the
 * step loop allocates nothing. 64-byte aligned; tt_free(NULL) is a no-op. */
void *tt_malloc(size_t bytes);
void *tt_calloc(size_t n, size_t size);
void tt_free(void *p);
uint64_t tt_alloc_count(void); /* number of successful tt_malloc/tt_calloc calls so far (all threads) */
/* Largest single tt_malloc/tt_calloc request so far, successful or not (all threads): tests use it to prove that a
 * hostile header never makes a reader ask for the size it claims. */
uint64_t tt_alloc_largest_request(void);

/* Median of v[0..n) (sorts v in place); 0 for n == 0. */
double tt_median(double *v, size_t n);

/* n * size with overflow check: returns 0 and sets *out on success, -1 on overflow. */
int tt_mul_size(size_t a, size_t b, size_t *out);

#ifdef __cplusplus
}
#endif
#endif
