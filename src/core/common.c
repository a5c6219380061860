/* common.c — the small utilities of tt_common.h: error formatting, abort, clock, counted allocation. */
#include "tt_common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "tt_signal.h"

tt_status tt_fail(tt_error *err, tt_status s, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return s;
}

static atomic_int g_stop_signal; /* the signal a job of several ranks agreed to stop on (another rank's, maybe) */

void tt_status_stop_signal(int sig) { atomic_store(&g_stop_signal, sig); }

int tt_status_exit_code(tt_status s)
{
    const int sig = atomic_load(&g_stop_signal) ? atomic_load(&g_stop_signal) : tt_signal_caught();
    switch (s) {
    case TT_OK: return 0;
    case TT_ERR_ARG: return 2;
    case TT_ERR_NUMERIC: return 3;
    case TT_ERR_STOPPED: return 128 + (sig ? sig : 2);
    default: return 1;
    }
}

tt_status tt_flush_stdout(void *fp, tt_error *err)
{
    FILE *f = (FILE *)fp;
    if (!f) return TT_OK;
    errno = 0;
    if (fflush(f) == 0 && !ferror(f)) return TT_OK;
    return tt_fail(err, TT_ERR_IO, "stdout: write failed: %s", errno ? strerror(errno) : "I/O error");
}

void tt_escape(const char *s, char *out, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    if (len == 0) return;
    for (const unsigned char *p = (const unsigned char *)s; *p && k + 1 < len; p++) {
        if (*p >= 0x20 && *p < 0x7f) {
            out[k++] = (char)*p;
        } else { /* \xHH, or stop short rather than cut an escape in half */
            if (k + 5 > len) break;
            out[k++] = '\\';
            out[k++] = 'x';
            out[k++] = hex[*p >> 4];
            out[k++] = hex[*p & 15];
        }
    }
    out[k] = '\0';
}

static void report_line(const char *prefix, const char *msg)
{
    char line[4 * sizeof(((tt_error *)0)->msg) + 32];
    size_t p = strlen(prefix);
    memcpy(line, prefix, p);
    tt_escape(msg, line + p, sizeof line - p - 1);
    size_t n = strlen(line);
    line[n++] = '\n';
    for (size_t off = 0; off < n;) { /* one write; a partial one (a signal) is finished, never repeated */
        ssize_t w = write(STDERR_FILENO, line + off, n - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
}

static int g_rank, g_size = 1; /* tt_report_rank: set by the node layer once the job is joined */
static atomic_int g_agreed;      /* tt_report_agreed: the failure this process ends with was agreed by every rank */

void tt_report_rank(int rank, int size)
{
    g_rank = rank;
    g_size = size;
}

void tt_report_agreed(void) { atomic_store(&g_agreed, 1); }

/* A job of several ranks speaks once: a failure every rank agreed on (tt_node_agree; its message names the rank) is
 * printed by rank 0 alone, one only this rank knows by this rank, naming itself. Notices: rank 0. */
void tt_report_error(const char *msg)
{
    tt_signal_error_line(1); /* one line: a second signal from now on adds none of its own */
    if (g_size <= 1) {
        report_line("towertrain: ", msg);
    } else if (atomic_load(&g_agreed)) {
        if (g_rank == 0) report_line("towertrain: ", msg);
    } else {
        char prefix[48];
        snprintf(prefix, sizeof prefix, "towertrain: rank %d: ", g_rank);
        report_line(prefix, msg);
    }
    tt_signal_error_line(0);
}

void tt_report_notice(const char *msg)
{
    if (g_rank == 0) report_line("towertrain: notice: ", msg);
}

int tt_fpu_flushing(void)
{
#if defined(__SSE__)
    return (_mm_getcsr() & 0x8040) == 0x8040;
#elif defined(__aarch64__)
    unsigned long fpcr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    return (fpcr >> 24) & 1;
#else
    return 0;
#endif
}

int tt_fpu_flush_denormals(void)
{
#if defined(__SSE__)
    _mm_setcsr(_mm_getcsr() | 0x8040); /* bit 15 FTZ: results; bit 6 DAZ: inputs */
    return (_mm_getcsr() & 0x8040) == 0x8040;
#elif defined(__aarch64__)
    unsigned long fpcr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    fpcr |= 1ul << 24; /* FZ */
    __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
    return 1;
#else
    return 0;
#endif
}

void tt_abort_at(const char *what, const char *func, const char *file, int line)
{
    fprintf(stderr, "towertrain: internal error: %s failed in %s at %s:%d\n", what, func, file, line);
    abort();
}

double tt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double tt_wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static atomic_uint_fast64_t g_allocs;
static atomic_uint_fast64_t g_largest_request;

/* Raises the largest-request mark to `bytes` (a compare-exchange loop: concurrent callers keep the maximum). */
static void note_request(size_t bytes)
{
    uint_fast64_t seen = atomic_load(&g_largest_request);
    while ((uint64_t)bytes > seen && !atomic_compare_exchange_weak(&g_largest_request, &seen, (uint_fast64_t)bytes)) {
    }
}

void *tt_malloc(size_t bytes)
{
    note_request(bytes);
    if (bytes == 0) bytes = 1;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes) return NULL;
    void *p = aligned_alloc(64, rounded);
    if (p) atomic_fetch_add(&g_allocs, 1);
    return p;
}

void *tt_calloc(size_t n, size_t size)
{
    size_t bytes;
    if (tt_mul_size(n, size, &bytes)) return NULL;
    void *p = tt_malloc(bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void tt_free(void *p) { free(p); }

uint64_t tt_alloc_count(void) { return (uint64_t)atomic_load(&g_allocs); }

uint64_t tt_alloc_largest_request(void) { return (uint64_t)atomic_load(&g_largest_request); }

int tt_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a) return -1;
    *out = a * b;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tt_median(double *v, size_t n)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- shapes -------------------------------------------------------------------------------------------------- */

tt_shape tt_shape1(size_t a)
{
    tt_shape s = {1, {a, 0, 0, 0}};
    return s;
}

tt_shape tt_shape2(size_t a, size_t b)
{
    tt_shape s = {2, {a, b, 0, 0}};
    return s;
}

tt_shape tt_shape3(size_t a, size_t b, size_t c)
{
    tt_shape s = {3, {a, b, c, 0}};
    return s;
}

size_t tt_shape_elems(const tt_shape *s)
{
    size_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->d[i];
    return n;
}

const char *tt_float_str(float x, char *out, size_t len)
{
    if (!out || !len) return out; /* (and gcc's UBSan build then knows out is no null destination) */
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(out, len, "%.*g", digits, (double)x);
        if (strtof(out, NULL) == x) break;
    }
    return out;
}

const char *tt_double_str(double x, char *out, size_t len)
{
    if (!out || !len) return out;
    int digits = 1;
    while (digits < 17 && (snprintf(out, len, "%.*g", digits, x), strtod(out, NULL) != x)) digits++;
    /* a whole number in all its digits, as a user writes it: 10, not 1e+01 (%g turns to an exponent when the
     * exponent reaches the digits) */
    int exp10 = 0;
    for (double a = fabs(x); a >= 10 && exp10 < 17; a /= 10) exp10++;
    if (exp10 >= digits && exp10 < 17) digits = exp10 + 1;
    snprintf(out, len, "%.*g", digits, x);
    return out;
}

const char *tt_join_words(char *buf, size_t len, const char *const *words, size_t n, const char *sep, const char *last)
{
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (size_t k = 0; k < n && used < len; k++) {
        const char *before = k == 0 ? "" : k + 1 == n ? last : sep;
        int w = snprintf(buf + used, len - used, "%s%s", before, words[k]);
        used += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

int tt_shape_eq(const tt_shape *a, const tt_shape *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->d[i] != b->d[i]) return 0;
    return 1;
}

char *tt_shape_str(const tt_shape *s, int batch, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    if (batch) n += (size_t)snprintf(out + n, len - n, "(None");
    for (int i = 0; i < s->ndim && n < len; i++)
        n += (size_t)snprintf(out + n, len - n, batch ? ", %zu" : (i ? "x%zu" : "%zu"), s->d[i]);
    if (batch && n < len) snprintf(out + n, len - n, ")");
    return out;
}
