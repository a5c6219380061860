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
    TT_ERR_MODEL,  /* a model description is invalid: exit 1 */
    TT_ERR_NUMERIC, /* training produced a non-finite loss or gradient: exit 3 */
    TT_ERR_STOPPED  /* SIGINT / SIGTERM asked the run to stop: exit 128 + the signal (130, 143) */
} tt_status;

/* One line naming the thing and what is wrong with it. */
typedef struct tt_error {
    char msg[1024]; /* room for two long paths and the reason */
} tt_error;

/* Formats the message into err (if not NULL) and returns s, so callers can write `return tt_fail(...)`. */
tt_status tt_fail(tt_error *err, tt_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Exit code of the CLI for a status: 0; 2 for TT_ERR_ARG; 3 for TT_ERR_NUMERIC; 128 + signal for TT_ERR_STOPPED;
 * 1 otherwise. */
int tt_status_exit_code(tt_status s);

/* The signal a job of several ranks agreed to stop on (docs/scaleout.md): a rank that caught none, or another one,
 * then exits with 128 + this one, as the rank that caught it does (a SIGTERM to one rank: 143 on every rank). */
void tt_status_stop_signal(int sig);

/* Prints "towertrain: MSG" to stderr as one line in one write, control characters and bytes >= 0x7f shown as
 * \xHH, so a hostile file name or model-file value cannot drive the terminal. Every error the CLI prints goes
 * through here. */
void tt_report_error(const char *msg);

/* As tt_report_error, as "towertrain: notice: MSG": something the user should know that is not an error. */
void tt_report_notice(const char *msg);

/* Who is reporting, handed down by the node layer (src/node.c) so the reporter needs nothing above it: this rank of
 * `size` (set once the job is joined; 0 of 1 until then), and whether the failure this process ends with was agreed
 * by every rank (then rank 0 alone prints it). A job of several ranks speaks once: an agreed failure is printed by
 * rank 0, one only this rank knows by this rank, naming itself; notices by rank 0. */
void tt_report_rank(int rank, int size);
void tt_report_agreed(void);

/* Flushes f (stdout) and reports a write that failed there or earlier — a full disk, a closed pipe — as
 * "stdout: write failed: REASON". TT_OK for f == NULL. */
tt_status tt_flush_stdout(void *f, tt_error *err);

/* Copies s into out (at most len bytes, always terminated) with control characters escaped as in
 * tt_report_error. */
void tt_escape(const char *s, char *out, size_t len);

/* Sets flush-to-zero and denormals-are-zero for the calling thread (x86 MXCSR FTZ+DAZ, Arm FPCR.FZ), as
 * TensorFlow does on its CPU threads: float results and inputs below FLT_MIN become 0 instead of taking the slow
 * microcoded subnormal path (Adam's moments of always-zero inputs decay into subnormals and made the update 3x
 * slower). Every thread that runs tower or host math calls it. Returns 1 if the mode is now set. */
int tt_fpu_flush_denormals(void);

/* 1 if the calling thread flushes subnormals (what tt_fpu_flush_denormals set): a query, it changes nothing. */
int tt_fpu_flushing(void);

/* Aborts with the failed statement, function, file:line. For invariants, never for user input. */
void tt_abort_at(const char *what, const char *func, const char *file, int line);
#define TT_ASSERT(cond)                                                                                          \
    do {                                                                                                         \
        if (!(cond)) tt_abort_at(#cond, __func__, __FILE__, __LINE__);                                           \
    } while (0)

/* Monotonic seconds. */
double tt_now(void);

/* Wall-clock seconds since the Unix epoch (CLOCK_REALTIME): timestamps others read (TensorBoard's events). */
double tt_wall_now(void);

/* Counted host allocation: every host buffer the project owns goes through these, so tests can assert that the
 * step loop allocates nothing. 64-byte aligned; tt_free(NULL) is a no-op. */
void *tt_malloc(size_t bytes);
void *tt_calloc(size_t n, size_t size);
void tt_free(void *p);
uint64_t tt_alloc_count(void); /* number of successful tt_malloc/tt_calloc calls so far (all threads) */
/* Largest single tt_malloc/tt_calloc request so far, successful or not (all threads): tests use it to prove that a
 * hostile header never makes a reader ask for the size it claims. */
uint64_t tt_alloc_largest_request(void);

/* words[0..n) joined into buf (cut short to len): sep between two words, last before the last one ("cpu, device
 * or nccl" for ", " and " or "). Returns buf. */
const char *tt_join_words(char *buf, size_t len, const char *const *words, size_t n, const char *sep, const char *last);

/* The shortest "%.*g" text that reads back as x — a float32 in 1 to 9 digits ("0.0005", never "0.000500000024"; as a
 * checkpoint's layers have always written their floats, 10 as "1e+01"), a double in 1 to 17 ("0.1", never
 * "0.10000000000000001"; a whole number below 1e17 in all its digits, "10"): a number as the user would write it.
 * Returns out. */
const char *tt_float_str(float x, char *out, size_t len);
const char *tt_double_str(double x, char *out, size_t len);

/* Median of v[0..n) (sorts v in place); 0 for n == 0. */
double tt_median(double *v, size_t n);

/* n * size with overflow check: returns 0 and sets *out on success, -1 on overflow. */
int tt_mul_size(size_t a, size_t b, size_t *out);

/* The shape of one sample's tensor, batch axis excluded, as Keras prints it after "None": (D) a flat vector,
 * (L, C) a sequence of L steps of C channels (or (L) token ids), (H, W, C) an image, channels last. */
#define TT_MAX_DIMS 4
typedef struct tt_shape {
    int ndim;
    size_t d[TT_MAX_DIMS];
} tt_shape;

tt_shape tt_shape1(size_t a);
tt_shape tt_shape2(size_t a, size_t b);
tt_shape tt_shape3(size_t a, size_t b, size_t c);
size_t tt_shape_elems(const tt_shape *s); /* product of the dims (1 for ndim 0) */
int tt_shape_eq(const tt_shape *a, const tt_shape *b);
/* "(None, 28, 28, 32)" with batch = 1, "28x28x32" with batch = 0; returns out. */
char *tt_shape_str(const tt_shape *s, int batch, char *out, size_t len);

/* The largest loss scale (--loss-scale, its dynamic growth, a checkpoint's loss_scale): 2^64. */
#define TT_SCALE_MAX 18446744073709551616.0

#ifdef __cplusplus
}
#endif
#endif
