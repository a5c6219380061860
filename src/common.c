/* common.c — the small utilities of tt_common.h: error formatting, abort, clock, counted allocation. */
#include "tt_common.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int tt_status_exit_code(tt_status s)
{
    if (s == TT_OK) return 0;
    return s == TT_ERR_ARG ? 2 : 1;
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
