/* tt_test.h — helpers shared by the Check suites: synthetic data sets, temporary files, tolerances.
 * Tolerance convention (as in llm.c's test_gpt2): |a - r| <= atol + rtol * |r|, stated where used. */
#ifndef TT_TEST_H
#define TT_TEST_H

#include "tt_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "tt_data.h"
#include "tt_rng.h"
#include "tt_trainer.h"

/* How much longer than its CPU time a thread's work takes on this machine now: 1 when idle, about 3 with four busy
 * loops beside 2 cores. A fixed loop's wall time over its CPU time, the largest of 3 (the last second's load, not a
 * lucky slice). Tests of promptness ("refused at once", "stops within one GEMM") scale their idle bound by it, so
 * they hold on a busy CI machine and still catch a wait (a FIFO never opened, a step run to its end). */
static inline double tt_test_load_factor(void)
{
    double worst = 1.0;
    for (int k = 0; k < 3; k++) {
        struct timespec c0, c1;
        const double w0 = tt_now();
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        volatile unsigned x = 1;
        for (unsigned i = 0; i < 20000000u; i++) x = x * 1664525u + 1013904223u;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        const double wall = tt_now() - w0, cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
        if (cpu > 0 && wall / cpu > worst) worst = wall / cpu;
    }
    return worst > 20.0 ? 20.0 : worst;
}

/* An idle machine's bound for something prompt, in seconds, on this machine now (tt_test_load_factor). */
static inline double tt_test_prompt(double idle_bound) { return idle_bound * tt_test_load_factor(); }

static inline int tt_close(double a, double r, double atol, double rtol)
{
    return fabs(a - r) <= atol + rtol * fabs(r);
}

/* An all-zero data set of n samples of rows x cols byte pixels (scale 1/255) and labels 0, for a test to fill. */
static inline void tt_test_dataset_zero(tt_dataset *ds, size_t n, size_t rows, size_t cols, size_t classes)
{
    memset(ds, 0, sizeof *ds);
    ds->n = n;
    ds->shape = rows == 1 ? tt_shape1(cols) : tt_shape3(rows, cols, 1);
    ds->dim = rows * cols;
    ds->n_classes = classes;
    ds->scale = 1.0f / 255.0f;
    ds->x = (uint8_t *)tt_calloc(n * ds->dim, 1);
    ds->y = (int32_t *)tt_calloc(n, sizeof(int32_t));
    ck_assert(ds->x && ds->y);
}

/* n samples of dim byte features (model inputs in [0,1]); the label is the argmax of a fixed random linear map, so it is learnable. */
static inline void tt_test_dataset(tt_dataset *ds, size_t n, size_t dim, size_t classes, uint64_t seed)
{
    tt_test_dataset_zero(ds, n, 1, dim, classes);
    tt_rng r;
    tt_rng_seed(&r, seed, 7);
    float *teacher = (float *)tt_calloc(dim * classes, sizeof(float));
    for (size_t i = 0; i < dim * classes; i++) teacher[i] = 2.0f * tt_rng_uniform(&r) - 1.0f;
    for (size_t s = 0; s < n; s++) {
        for (size_t j = 0; j < dim; j++) ds->x[s * dim + j] = (uint8_t)tt_rng_below(&r, 256);
        float best = -1e30f;
        for (size_t c = 0; c < classes; c++) {
            float z = 0;
            for (size_t j = 0; j < dim; j++) z += ds->x[s * dim + j] * ds->scale * teacher[j * classes + c];
            if (z > best) {
                best = z;
                ds->y[s] = (int32_t)c;
            }
        }
    }
    tt_free(teacher);
}

/* A trainer configuration on the CPU backend: n towers, global batch B, an optimizer and a placement (the other
 * fields zero: all host threads, no stop flag). */
static inline tt_trainer_config tt_test_config(size_t towers, size_t batch, tt_optim_config optim, tt_reduce reduce)
{
    tt_trainer_config tc;
    memset(&tc, 0, sizeof tc);
    tc.ops = &tt_dev_cpu_ops;
    tc.n_devices = 1;
    tc.n_towers = towers;
    tc.batch = batch;
    tc.optim = optim;
    tc.reduce = reduce;
    return tc;
}

/* Where temporary files go: $TMPDIR if set (tools/mutants points it into its scratch directory), else /tmp. */
static inline const char *tt_test_tmp_base(void)
{
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

/* A fresh temporary directory (removed by the OS's tmp cleaning; tests write only small files). */
static inline void tt_test_tmpdir(char *out, size_t len)
{
    /* mkdtemp wants a template ending in six 'X' characters, which it replaces */
    int n = snprintf(out, len, "%s/tt_test_", tt_test_tmp_base());
    ck_assert(n > 0 && (size_t)n + 7 <= len);
    memset(out + n, 'X', 6);
    out[n + 6] = '\0';
    ck_assert_ptr_nonnull(mkdtemp(out));
}

static inline void tt_test_write(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static inline void tt_test_write_str(const char *path, const char *text) { tt_test_write(path, text, strlen(text)); }

/* DIR/NAME: a gzip'd IDX file (the MNIST format) of ndim big-endian dimensions and n bytes of unsigned bytes. */
static inline void tt_test_write_idx(const char *dir, const char *name, int ndim, const uint32_t *dims,
                                     const unsigned char *data, size_t n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    gzFile f = gzopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    unsigned char h[16] = {0, 0, 8, (unsigned char)ndim};
    for (int i = 0; i < ndim; i++)
        for (int b = 0; b < 4; b++) h[4 + 4 * i + b] = (unsigned char)(dims[i] >> (24 - 8 * b));
    gzwrite(f, h, 4 + 4 * (unsigned)ndim);
    if (n) gzwrite(f, data, (unsigned)n);
    gzclose(f);
}

/* A whole file, malloc'd (caller frees), *len its size; the test fails if it cannot be read. */
static inline uint8_t *tt_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    const long n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    uint8_t *b = (uint8_t *)malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* The first 64 KiB of a file as a string, in a static buffer (the next call overwrites it): a command's stdout or
 * stderr captured by a test. */
static inline char *tt_test_slurp(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Newlines in s: the lines a command wrote to stderr (one error, one line). */
static inline size_t tt_test_count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

#ifdef TT_BIN
/* Runs `towertrain ARGS` (the build's executable), stdout and stderr to the files out and err, stdin /dev/null;
 * returns its exit code. */
static inline int tt_test_run(const char *args, const char *out, const char *err)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s' </dev/null", TT_BIN, args, out, err);
    const int st = system(cmd);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* As tt_test_run, expecting exit `code`; a fragment (not NULL or "") must be on stderr, as its one line, with no
 * internal error or sanitizer report. */
static inline void tt_test_expect(const char *args, int code, const char *fragment, const char *out, const char *err)
{
    const int rc = tt_test_run(args, out, err);
    const char *e = tt_test_slurp(err);
    ck_assert_msg(rc == code, "towertrain %s: exit %d want %d (stderr: %s)", args, rc, code, e);
    if (!fragment || !*fragment) return;
    ck_assert_msg(strstr(e, fragment) != NULL, "towertrain %s: stderr '%s' lacks '%s'", args, e, fragment);
    const size_t lines = tt_test_count_lines(e);
    ck_assert_msg(lines == 1, "towertrain %s: %zu lines on stderr, want one: %s", args, lines, e);
    ck_assert_msg(strstr(e, "internal error") == NULL && strstr(e, "Sanitizer") == NULL, "%s", e);
}
#endif

/* A little-endian unsigned 64-bit integer (a safetensors file's header length). */
static inline uint64_t tt_test_le64(const uint8_t *b)
{
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
    return n;
}

/* Runs a suite; 0 if every test passed, else 1. fork: CK_FORK_GETENV (Check's default: a child per test, so a crash
 * fails one test and the run goes on; CK_FORK=no in the environment for gdb) or CK_NOFORK, which every suite run by a
 * process that has initialised CUDA must use — CUDA does not survive a fork, so a forked child's first CUDA call
 * fails. Without a fork, Check's per-test timeout (tcase_set_timeout) no longer applies: such a test needs a CTest
 * TIMEOUT instead (tests/CMakeLists.txt). */
static inline int tt_test_run_suite_mode(Suite *s, enum fork_status fork)
{
    SRunner *sr = srunner_create(s);
    if (fork != CK_FORK_GETENV) srunner_set_fork_status(sr, fork);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

/* For suites that never touch CUDA in the test process itself (a forked child may). */
static inline int tt_test_run_suite(Suite *s) { return tt_test_run_suite_mode(s, CK_FORK_GETENV); }

/* Is TT_REQUIRE_GPU=1 set (tools/gpu-check sets it)? Then a test that would skip for want of a GPU fails instead. */
static inline int tt_test_gpu_required(void)
{
    const char *v = getenv("TT_REQUIRE_GPU");
    return v && strcmp(v, "1") == 0;
}

/* The exit code of a suite that cannot run for want of GPU hardware (no CUDA in this build, no driver, no device, one
 * GPU where two are needed): prints the reason and returns 77, a visible skip in CTest (SKIP_RETURN_CODE 77) —
 * or, under TT_REQUIRE_GPU=1, prints it as a failure and returns 1: on a machine that must test its GPUs, a skip would
 * pass for a success. */
static inline int tt_test_skip_no_gpu(const char *what, const char *why)
{
    if (tt_test_gpu_required()) {
        printf("FAIL: %s: %s (TT_REQUIRE_GPU=1: a GPU test may not skip)\n", what, why);
        return 1;
    }
    printf("SKIP: %s: %s\n", what, why);
    return 77;
}

#endif
