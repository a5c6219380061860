/* test_backend_ops.c — every op of a device backend against the CPU backend (the oracle), over several shapes,
 * with guard elements after every output that must come back untouched (ggml test-backend-ops style).
 * Runs for each non-CPU backend this build has and this machine can use; with none, it is a visible skip (77), or a
 * failure under TT_REQUIRE_GPU=1 (tools/gpu-check). `test_backend_ops cpu` runs every case against the CPU backend
 * itself, so the harness and the new cases are exercised on every machine. A process that has opened the CUDA backend
 * runs its tests without forking (CUDA does not survive a fork); CTest's TIMEOUT bounds it.
 *
 * Tolerances: elementwise ops and copies must match exactly — to the bit: -0 and +0 differ — or to 1e-6 relative
 * (the same tt_math.h code, but the GPU's expf/logf may differ by an ulp or two); sgemm uses per element atol 1e-4 +
 * rtol 1e-4 on O(1) inputs with K <= 300 (a different summation order, FP32 only: TF32 is switched off in the
 * backend); column sums (col_sum, the fused drelu_bgrad's bias gradient, batchnorm's sums) exactly: the CPU sums in
 * the GPU's chunks of rows. */
#include "tt_backend.h"
#include "tt_test.h"

enum { GUARD = 16 };
static const float GUARD_VALUE = 12345.0f;
static const tt_dev_ops *ops; /* the backend under test */
static tt_backend g_be;       /* its devices: the pair uses devices[0], the two-device cases devices[0] and [1] */

typedef struct pair {
    tt_dev cpu, dev;
} pair;

static void pair_init(pair *p)
{
    tt_error err;
    ck_assert_int_eq(tt_dev_init(&p->cpu, &tt_dev_cpu_ops, 0, &err), TT_OK);
    ck_assert_msg(tt_dev_init(&p->dev, ops, g_be.devices[0], &err) == TT_OK, "%s", err.msg);
    tt_dev_bind(&p->dev);
}

static void pair_free(pair *p)
{
    tt_dev_free(&p->cpu);
    tt_dev_free(&p->dev);
}

/* Uploads host data to both backends, with guards after it. */
static void upload(pair *p, const float *h, size_t n, float **d_cpu, float **d_dev)
{
    float *tmp = (float *)tt_malloc((n + GUARD) * sizeof(float));
    memcpy(tmp, h, n * sizeof(float));
    for (int g = 0; g < GUARD; g++) tmp[n + g] = GUARD_VALUE;
    *d_cpu = tt_dev_alloc_f32(&p->cpu, n + GUARD);
    *d_dev = tt_dev_alloc_f32(&p->dev, n + GUARD);
    tt_dev_h2d(&p->cpu, *d_cpu, tmp, (n + GUARD) * sizeof(float));
    tt_dev_h2d(&p->dev, *d_dev, tmp, (n + GUARD) * sizeof(float));
    tt_free(tmp);
}

static void compare(pair *p, const char *what, float *d_cpu, float *d_dev, size_t n, double atol, double rtol)
{
    float *a = (float *)tt_malloc((n + GUARD) * sizeof(float)), *b = (float *)tt_malloc((n + GUARD) * sizeof(float));
    tt_dev_d2h(&p->cpu, a, d_cpu, (n + GUARD) * sizeof(float));
    tt_dev_d2h(&p->dev, b, d_dev, (n + GUARD) * sizeof(float));
    tt_dev_sync(&p->cpu);
    tt_dev_sync(&p->dev);
    /* to the bit: -0 is not +0, and a NaN must be a NaN — of either sign and any payload, which IEEE leaves to the
     * hardware (an x86 CPU makes -NaN of 0/0 or sqrt(-1), a GPU +NaN) */
    const int exact = atol == 0 && rtol == 0;
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(isnan(b[i]) && isnan(a[i]) ? 1
                      : exact                  ? memcmp(&b[i], &a[i], sizeof(float)) == 0
                                               : tt_close(b[i], a[i], atol, rtol),
                      "%s: %s[%zu] = %.9g, cpu %.9g", what, ops->name, i, b[i], a[i]);
    for (int g = 0; g < GUARD; g++) ck_assert_msg(b[n + g] == GUARD_VALUE, "%s: wrote past the end", what);
    tt_free(a);
    tt_free(b);
    tt_dev_dfree(&p->cpu, d_cpu);
    tt_dev_dfree(&p->dev, d_dev);
}

static float *random_host(size_t n, uint64_t seed)
{
    float *h = (float *)tt_malloc(n * sizeof(float));
    tt_rng r;
    tt_rng_seed(&r, seed, 3);
    for (size_t i = 0; i < n; i++) h[i] = 2.0f * tt_rng_uniform(&r) - 1.0f;
    return h;
}

/* The operands of one sgemm on both backends: A (M x K) and B (K x N) random from seeds, C (M x N) from hc. */
typedef struct gemm_operands {
    float *ha, *hb, *a0, *a1, *b0, *b1, *c0, *c1;
} gemm_operands;

static void gemm_upload(pair *p, size_t M, size_t N, size_t K, uint64_t seed, const float *hc, gemm_operands *g)
{
    g->ha = random_host(M * K, seed);
    g->hb = random_host(K * N, seed + 1);
    upload(p, g->ha, M * K, &g->a0, &g->a1);
    upload(p, g->hb, K * N, &g->b0, &g->b1);
    upload(p, hc, M * N, &g->c0, &g->c1);
}

/* Frees A and B (C is freed by compare, or by the caller). */
static void gemm_free(pair *p, gemm_operands *g)
{
    tt_dev_dfree(&p->cpu, g->a0);
    tt_dev_dfree(&p->dev, g->a1);
    tt_dev_dfree(&p->cpu, g->b0);
    tt_dev_dfree(&p->dev, g->b1);
    tt_free(g->ha);
    tt_free(g->hb);
}

/* A host copy of n floats of device memory d_x (caller frees). */
static float *fetch(tt_dev *dev, const float *d_x, size_t n)
{
    float *h = (float *)tt_malloc(n * sizeof(float));
    tt_dev_d2h(dev, h, d_x, n * sizeof(float));
    tt_dev_sync(dev);
    return h;
}

START_TEST(test_sgemm)
{
    pair p;
    pair_init(&p);
    const size_t shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {128, 256, 300}, {33, 10, 256}, {256, 17, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                float *hc = random_host(M * N, 3);
                gemm_operands g;
                gemm_upload(&p, M, N, K, 1, hc, &g);
                size_t lda = ta ? M : K, ldb = tb ? K : N;
                tt_dev_sgemm(&p.cpu, ta, tb, M, N, K, 0.5f, g.a0, lda, g.b0, ldb, 0.25f, g.c0, N);
                tt_dev_sgemm(&p.dev, ta, tb, M, N, K, 0.5f, g.a1, lda, g.b1, ldb, 0.25f, g.c1, N);
                char what[64];
                snprintf(what, sizeof what, "sgemm %zux%zux%zu ta=%d tb=%d", M, N, K, ta, tb);
                compare(&p, what, g.c0, g.c1, M * N, 1e-4, 1e-4);
                gemm_free(&p, &g);
                tt_free(hc);
            }
    pair_free(&p);
}
END_TEST

/* beta = 0 must not read C (BLAS: C = alpha op(A) op(B), whatever C held): the forward pass writes into buffers that
 * start as NaN on both backends, and 0 * NaN is NaN. C is pre-filled with NaN; the result must be finite and equal
 * the CPU's within sgemm's tolerance. The CPU oracle is held to the same rule first: its product into NaN must equal
 * its product into zeros, to the bit. */
START_TEST(test_sgemm_beta0_ignores_c)
{
    pair p;
    pair_init(&p);
    const size_t shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {128, 256, 784}, {33, 10, 256}, {256, 17, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                float *hnan = (float *)tt_malloc(M * N * sizeof(float));
                float *hzero = (float *)tt_calloc(M * N, sizeof(float));
                for (size_t i = 0; i < M * N; i++) hnan[i] = NAN;
                gemm_operands g;
                gemm_upload(&p, M, N, K, 4, hnan, &g);
                float *a0 = g.a0, *a1 = g.a1, *b0 = g.b0, *b1 = g.b1, *c0 = g.c0, *c1 = g.c1, *z0, *z1;
                upload(&p, hzero, M * N, &z0, &z1);
                size_t lda = ta ? M : K, ldb = tb ? K : N;
                tt_dev_sgemm(&p.cpu, ta, tb, M, N, K, 1.0f, a0, lda, b0, ldb, 0.0f, z0, N);
                tt_dev_sgemm(&p.cpu, ta, tb, M, N, K, 1.0f, a0, lda, b0, ldb, 0.0f, c0, N);
                tt_dev_sgemm(&p.dev, ta, tb, M, N, K, 1.0f, a1, lda, b1, ldb, 0.0f, c1, N);
                char what[80];
                snprintf(what, sizeof what, "sgemm beta=0 into NaN %zux%zux%zu ta=%d tb=%d", M, N, K, ta, tb);
                float *into_nan = fetch(&p.cpu, c0, M * N), *into_zero = fetch(&p.cpu, z0, M * N);
                for (size_t i = 0; i < M * N; i++)
                    ck_assert_msg(isfinite(into_nan[i]) && into_nan[i] == into_zero[i],
                                  "%s: the cpu oracle read C: [%zu] = %g into NaN, %g into zeros", what, i, into_nan[i],
                                  into_zero[i]);
                compare(&p, what, c0, c1, M * N, 1e-4, 1e-4); /* tt_close fails on NaN: a read of C shows here */
                tt_dev_dfree(&p.cpu, z0);
                tt_dev_dfree(&p.dev, z1);
                gemm_free(&p, &g);
                tt_free(into_nan);
                tt_free(into_zero);
                tt_free(hnan);
                tt_free(hzero);
            }
    pair_free(&p);
}
END_TEST

/* col_sum's tolerance against the CPU: none. The GPU sums chunks of COL_CHUNK rows, then the chunks' sums, in order
 * (cuda/dev_cuda.cu, kColChunk), and the CPU sums in the same chunks (src/dev/dev_cpu.c, col_sum_chunked), so the
 * two agree to the bit at every size. (Until issue 22 the CPU summed all rows in turn: 2.6e-3 apart at 70000 rows.) */
enum { COL_CHUNK = 256 };
static double col_sum_atol(size_t rows)
{
    (void)rows;
    return 0;
}

START_TEST(test_elementwise_and_rows)
{
    pair p;
    pair_init(&p);
    const size_t shapes[][2] = {{1, 1}, {3, 10}, {128, 256}, {1000, 7}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t R = shapes[s][0], C = shapes[s][1], n = R * C;
        float *hx = random_host(n, 10 + s), *hb = random_host(C, 20 + s), *hy = random_host(n, 30 + s);
        float *x0, *x1, *b0, *b1, *y0, *y1;
        /* bias_add */
        upload(&p, hx, n, &x0, &x1);
        upload(&p, hb, C, &b0, &b1);
        tt_dev_bias_add(&p.cpu, x0, b0, R, C);
        tt_dev_bias_add(&p.dev, x1, b1, R, C);
        compare(&p, "bias_add", x0, x1, n, 0, 0);
        /* col_sum (test_col_sum has the cases and the tolerance) */
        upload(&p, hx, n, &x0, &x1);
        tt_dev_col_sum(&p.cpu, b0, x0, R, C);
        tt_dev_col_sum(&p.dev, b1, x1, R, C);
        compare(&p, "col_sum", b0, b1, C, col_sum_atol(R), 0);
        /* relu forward, backward */
        upload(&p, hy, n, &y0, &y1);
        tt_dev_relu_fwd(&p.cpu, y0, x0, n);
        tt_dev_relu_fwd(&p.dev, y1, x1, n);
        compare(&p, "relu_fwd", y0, y1, n, 0, 0);
        upload(&p, hy, n, &y0, &y1);
        float *d0, *d1;
        upload(&p, hy, n, &d0, &d1);
        tt_dev_relu_bwd(&p.cpu, d0, x0, y0, n);
        tt_dev_relu_bwd(&p.dev, d1, x1, y1, n);
        compare(&p, "relu_bwd", d0, d1, n, 0, 0);
        /* transpose (R, C) -> (C, R) */
        float *t0, *t1;
        upload(&p, hy, n, &t0, &t1);
        tt_dev_transpose(&p.cpu, t0, x0, R, C);
        tt_dev_transpose(&p.dev, t1, x1, R, C);
        compare(&p, "transpose", t0, t1, n, 0, 0);
        /* raw pixels to floats */
        uint8_t *px = (uint8_t *)tt_malloc(n), *p0 = (uint8_t *)tt_dev_alloc(&p.cpu, n),
                *p1 = (uint8_t *)tt_dev_alloc(&p.dev, n);
        for (size_t i = 0; i < n; i++) px[i] = (uint8_t)(i * 37);
        tt_dev_h2d(&p.cpu, p0, px, n);
        tt_dev_h2d(&p.dev, p1, px, n);
        tt_dev_u8_to_f32(&p.cpu, y0, p0, n, 1.0f / 255.0f);
        tt_dev_u8_to_f32(&p.dev, y1, p1, n, 1.0f / 255.0f);
        compare(&p, "u8_to_f32", y0, y1, n, 0, 0);
        upload(&p, hy, n, &y0, &y1);
        tt_dev_dfree(&p.cpu, p0);
        tt_dev_dfree(&p.dev, p1);
        tt_free(px);
        /* add (the gradient sum), and a peer copy from a second context of the same backend */
        float *a0, *a1;
        upload(&p, hx, n, &a0, &a1);
        tt_dev_add(&p.cpu, y0, a0, n);
        tt_dev_add(&p.dev, y1, a1, n);
        compare(&p, "add", y0, y1, n, 0, 0);
        tt_dev_dfree(&p.cpu, a0);
        tt_dev_dfree(&p.dev, a1);
        tt_dev peer;
        tt_error perr;
        ck_assert_msg(tt_dev_init(&peer, ops, g_be.devices[0], &perr) == TT_OK, "%s", perr.msg);
        float *d_peer = tt_dev_alloc_f32(&peer, n);
        tt_dev_h2d(&peer, d_peer, hx, n * sizeof(float));
        tt_dev_sync(&peer);
        upload(&p, hy, n, &y0, &y1);
        tt_dev_h2d(&p.cpu, y0, hx, n * sizeof(float));
        tt_dev_peer_copy(&p.dev, y1, &peer, d_peer, n * sizeof(float));
        compare(&p, "peer_copy", y0, y1, n, 0, 0);
        tt_dev_dfree(&peer, d_peer);
        tt_dev_free(&peer);
        upload(&p, hy, n, &y0, &y1);
        /* fill, d2d */
        tt_dev_fill(&p.cpu, y0, n, 0.5f);
        tt_dev_fill(&p.dev, y1, n, 0.5f);
        tt_dev_d2d(&p.cpu, x0, y0, n * sizeof(float));
        tt_dev_d2d(&p.dev, x1, y1, n * sizeof(float));
        compare(&p, "fill+d2d", x0, x1, n, 0, 0);
        tt_dev_dfree(&p.cpu, y0);
        tt_dev_dfree(&p.dev, y1);
        tt_free(hx);
        tt_free(hb);
        tt_free(hy);
    }
    pair_free(&p);
}
END_TEST

START_TEST(test_softmax_xent)
{
    pair p;
    pair_init(&p);
    const size_t shapes[][2] = {{1, 10}, {128, 10}, {77, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t R = shapes[s][0], C = shapes[s][1];
        float *hz = random_host(R * C, 40 + s);
        for (size_t i = 0; i < R * C; i++) hz[i] *= 8.0f;
        int32_t *lab = (int32_t *)tt_malloc(R * sizeof(int32_t));
        for (size_t r = 0; r < R; r++) lab[r] = (int32_t)((r * 7) % C);
        float *z0, *z1, *g0, *g1, *s0, *s1;
        upload(&p, hz, R * C, &z0, &z1);
        upload(&p, hz, R * C, &g0, &g1);
        float *zeros = (float *)tt_calloc(2 * R, sizeof(float));
        upload(&p, zeros, 2 * R, &s0, &s1);
        int32_t *l0 = (int32_t *)tt_dev_alloc(&p.cpu, R * sizeof(int32_t));
        int32_t *l1 = (int32_t *)tt_dev_alloc(&p.dev, R * sizeof(int32_t));
        tt_dev_h2d(&p.cpu, l0, lab, R * sizeof(int32_t));
        tt_dev_h2d(&p.dev, l1, lab, R * sizeof(int32_t));
        tt_dev_softmax_xent(&p.cpu, g0, s0, z0, l0, R, C, 1.0f / (float)R);
        tt_dev_softmax_xent(&p.dev, g1, s1, z1, l1, R, C, 1.0f / (float)R);
        compare(&p, "softmax_xent dlogits", g0, g1, R * C, 1e-7, 1e-5);
        compare(&p, "softmax_xent stats", s0, s1, 2 * R, 1e-6, 1e-5);
        tt_dev_dfree(&p.cpu, z0);
        tt_dev_dfree(&p.dev, z1);
        tt_dev_dfree(&p.cpu, l0);
        tt_dev_dfree(&p.dev, l1);
        tt_free(zeros);
        tt_free(lab);
        tt_free(hz);
    }
    pair_free(&p);
}
END_TEST

/* The evaluation path: d_dlogits == NULL computes the per-row stats only. They must equal the CPU's (the training
 * path's tolerance) and, on the same backend, the training path's stats to the bit; nothing else is written — the
 * logits stay as uploaded, the guards after the stats stay intact, and a buffer where a gradient could have gone
 * (allocated between the logits and the stats) keeps its fill. */
START_TEST(test_softmax_xent_eval)
{
    pair p;
    pair_init(&p);
    const size_t shapes[][2] = {{1, 10}, {128, 10}, {77, 3}, {1000, 10}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t R = shapes[s][0], C = shapes[s][1];
        float *hz = random_host(R * C, 50 + s);
        for (size_t i = 0; i < R * C; i++) hz[i] *= 8.0f;
        int32_t *lab = (int32_t *)tt_malloc(R * sizeof(int32_t));
        for (size_t r = 0; r < R; r++) lab[r] = (int32_t)((r * 3) % C);
        float *fill = (float *)tt_malloc(R * C * sizeof(float)), *zeros = (float *)tt_calloc(2 * R, sizeof(float));
        for (size_t i = 0; i < R * C; i++) fill[i] = GUARD_VALUE;
        float *z0, *z1, *g0, *g1, *s0, *s1, *t0, *t1, *tg0, *tg1;
        upload(&p, hz, R * C, &z0, &z1);
        upload(&p, fill, R * C, &g0, &g1); /* never passed: must keep its fill */
        upload(&p, zeros, 2 * R, &s0, &s1);
        upload(&p, zeros, 2 * R, &t0, &t1);
        upload(&p, hz, R * C, &tg0, &tg1);
        int32_t *l0 = (int32_t *)tt_dev_alloc(&p.cpu, R * sizeof(int32_t));
        int32_t *l1 = (int32_t *)tt_dev_alloc(&p.dev, R * sizeof(int32_t));
        tt_dev_h2d(&p.cpu, l0, lab, R * sizeof(int32_t));
        tt_dev_h2d(&p.dev, l1, lab, R * sizeof(int32_t));
        tt_dev_softmax_xent(&p.cpu, NULL, s0, z0, l0, R, C, 1.0f / (float)R);
        tt_dev_softmax_xent(&p.dev, NULL, s1, z1, l1, R, C, 1.0f / (float)R);
        tt_dev_softmax_xent(&p.dev, tg1, t1, z1, l1, R, C, 1.0f / (float)R); /* the training path, same backend */
        float *eval = fetch(&p.dev, s1, 2 * R), *train = fetch(&p.dev, t1, 2 * R);
        for (size_t i = 0; i < 2 * R; i++)
            ck_assert_msg(eval[i] == train[i], "softmax_xent %zux%zu: %s eval stats[%zu] = %.9g, training path %.9g", R,
                          C, ops->name, i, eval[i], train[i]);
        float *logits = fetch(&p.dev, z1, R * C), *bystander = fetch(&p.dev, g1, R * C + GUARD);
        ck_assert_msg(memcmp(logits, hz, R * C * sizeof(float)) == 0, "softmax_xent eval: %s wrote the logits",
                      ops->name);
        for (size_t i = 0; i < R * C + GUARD; i++)
            ck_assert_msg(bystander[i] == GUARD_VALUE, "softmax_xent eval %zux%zu: %s wrote [%zu] of a buffer it was "
                          "not given", R, C, ops->name, i);
        char what[64];
        snprintf(what, sizeof what, "softmax_xent eval %zux%zu stats", R, C);
        compare(&p, what, s0, s1, 2 * R, 1e-6, 1e-5);
        const void *bufs[][2] = {{z0, z1}, {g0, g1}, {t0, t1}, {tg0, tg1}, {l0, l1}};
        for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) {
            tt_dev_dfree(&p.cpu, (void *)bufs[b][0]);
            tt_dev_dfree(&p.dev, (void *)bufs[b][1]);
        }
        tt_free(eval);
        tt_free(train);
        tt_free(logits);
        tt_free(bystander);
        tt_free(fill);
        tt_free(zeros);
        tt_free(lab);
        tt_free(hz);
    }
    pair_free(&p);
}
END_TEST

/* Convolution and pooling ops over several geometries, 3 rows each: im2col, col2im, max pooling forward and backward.
 * Overlapping windows (the GPU's gather for the pool gradient): same padding split unevenly, strides 2 < 3, 1-D.
 * Windows that do not overlap (the GPU routes each window's dy to its argmax): 2x2 stride 2, gaps between windows
 * (stride 3 > 2), same padding before and after (4x4 by 3x3 / 3: PT = PL = 1), and a globalmaxpool1d (window = stride
 * = the sequence). Exact to the bit: the backends run the same tt_math.h functions, and the gathers add in the
 * scatters' order (test_math checks that on the CPU); dy holds some -0, which the CPU's scatter turns into +0. */
START_TEST(test_conv_pool_ops)
{
    pair p;
    pair_init(&p);
    static const size_t G[][11] = { /* H W C KH KW SH SW PT PL OH OW */
        {5, 5, 2, 3, 3, 1, 1, 1, 1, 5, 5}, {6, 7, 3, 3, 3, 2, 2, 0, 1, 3, 4}, {6, 5, 1, 3, 3, 1, 1, 0, 0, 4, 3},
        {1, 9, 4, 1, 5, 1, 1, 0, 0, 1, 5}, {28, 28, 1, 3, 3, 1, 1, 1, 1, 28, 28}, {6, 6, 3, 2, 2, 2, 2, 0, 0, 3, 3},
        {8, 7, 2, 2, 2, 3, 3, 0, 0, 3, 2}, {4, 4, 2, 3, 3, 3, 3, 1, 1, 2, 2}, {1, 300, 5, 1, 300, 1, 300, 0, 0, 1, 1},
        {28, 28, 8, 2, 2, 2, 2, 0, 0, 14, 14}};
    const size_t R = 3;
    for (size_t k = 0; k < sizeof G / sizeof G[0]; k++) {
        const tt_conv_geom g = {G[k][0], G[k][1], G[k][2], G[k][3], G[k][4], G[k][5], G[k][6], G[k][7], G[k][8],
                                G[k][9], G[k][10]};
        const size_t in = g.H * g.W * g.C, P = g.OH * g.OW, KC = g.KH * g.KW * g.C, out = P * g.C;
        float *hx = random_host(R * in, 70 + k), *hc = random_host(R * P * KC, 80 + k),
              *hy = random_host(R * out, 90 + k);
        float *x0, *x1, *c0, *c1, *d0, *d1, *y0, *y1, *dy0, *dy1;
        char what[64];
        /* in two chunks of patches, the first ending inside a sample: im2col writes rows q0.., col2im adds them */
        const size_t Q = R * P, q1 = Q / 2 + 1;
        upload(&p, hx, R * in, &x0, &x1);
        upload(&p, hc, Q * KC, &c0, &c1);
        tt_dev_im2col(&p.cpu, c0, x0, 0, q1, &g);
        tt_dev_im2col(&p.dev, c1, x1, 0, q1, &g);
        tt_dev_im2col(&p.cpu, c0 + q1 * KC, x0, q1, Q - q1, &g);
        tt_dev_im2col(&p.dev, c1 + q1 * KC, x1, q1, Q - q1, &g);
        snprintf(what, sizeof what, "im2col geometry %zu", k);
        compare(&p, what, c0, c1, Q * KC, 0, 0);
        upload(&p, hc, Q * KC, &c0, &c1);
        upload(&p, hx, R * in, &d0, &d1); /* col2im adds into what dx holds */
        tt_dev_col2im(&p.cpu, d0, c0, 0, q1, &g);
        tt_dev_col2im(&p.dev, d1, c1, 0, q1, &g);
        tt_dev_col2im(&p.cpu, d0, c0 + q1 * KC, q1, Q - q1, &g);
        tt_dev_col2im(&p.dev, d1, c1 + q1 * KC, q1, Q - q1, &g);
        snprintf(what, sizeof what, "col2im geometry %zu", k);
        compare(&p, what, d0, d1, R * in, 0, 0);
        tt_dev_dfree(&p.cpu, c0);
        tt_dev_dfree(&p.dev, c1);
        /* max pooling over the same geometry: x quantised so that windows hold ties */
        for (size_t i = 0; i < R * in; i++) hx[i] = (float)(int)(hx[i] * 3.0f);
        tt_dev_h2d(&p.cpu, x0, hx, R * in * sizeof(float));
        tt_dev_h2d(&p.dev, x1, hx, R * in * sizeof(float));
        upload(&p, hy, R * out, &y0, &y1);
        tt_dev_maxpool_fwd(&p.cpu, y0, x0, R, &g);
        tt_dev_maxpool_fwd(&p.dev, y1, x1, R, &g);
        for (size_t i = 0; i < R * out; i += 7) hy[i] = -0.0f;
        upload(&p, hy, R * out, &dy0, &dy1);
        upload(&p, hx, R * in, &d0, &d1);
        tt_dev_maxpool_bwd(&p.cpu, d0, dy0, x0, y0, R, &g);
        tt_dev_maxpool_bwd(&p.dev, d1, dy1, x1, y1, R, &g);
        snprintf(what, sizeof what, "maxpool_bwd geometry %zu", k);
        compare(&p, what, d0, d1, R * in, 0, 0);
        snprintf(what, sizeof what, "maxpool_fwd geometry %zu", k);
        compare(&p, what, y0, y1, R * out, 0, 0);
        compare(&p, "maxpool input (untouched)", x0, x1, R * in, 0, 0);
        tt_dev_dfree(&p.cpu, dy0);
        tt_dev_dfree(&p.dev, dy1);
        tt_free(hx);
        tt_free(hc);
        tt_free(hy);
    }
    pair_free(&p);
}
END_TEST

/* Dropout (a sample's mask from its data-set index: rows given out of order) and the embedding's gather and ordered
 * sum (ids repeat, one is out of range and must give zeros): exact on both backends. */
START_TEST(test_dropout_embedding_ops)
{
    pair p;
    pair_init(&p);
    const size_t R = 37, C = 129, V = 13, E = 5, n = 200;
    float *hx = random_host(R * C, 100), *ht = (float *)tt_malloc(n * sizeof(float)), *hw = random_host(V * E, 101);
    float *hd = random_host(n * E, 102), *x0, *x1, *y0, *y1, *t0, *t1, *w0, *w1, *e0, *e1, *g0, *g1, *dd0, *dd1;
    uint32_t ids[37];
    for (size_t r = 0; r < R; r++) ids[r] = (uint32_t)(5000 - 97 * r);
    uint32_t *i0 = (uint32_t *)tt_dev_alloc(&p.cpu, sizeof ids), *i1 = (uint32_t *)tt_dev_alloc(&p.dev, sizeof ids);
    tt_dev_h2d(&p.cpu, i0, ids, sizeof ids);
    tt_dev_h2d(&p.dev, i1, ids, sizeof ids);
    upload(&p, hx, R * C, &x0, &x1);
    upload(&p, hx, R * C, &y0, &y1);
    const uint64_t key = tt_dropout_key(3, 2, 1);
    tt_dev_dropout(&p.cpu, y0, x0, R, C, 0.3f, key, i0);
    tt_dev_dropout(&p.dev, y1, x1, R, C, 0.3f, key, i1);
    compare(&p, "dropout", y0, y1, R * C, 0, 0);
    tt_dev_dropout(&p.cpu, x0, x0, R, C, 0.5f, key, i0); /* in place */
    tt_dev_dropout(&p.dev, x1, x1, R, C, 0.5f, key, i1);
    compare(&p, "dropout in place", x0, x1, R * C, 0, 0);
    for (size_t i = 0; i < n; i++) ht[i] = i == 17 ? (float)V : (float)((i * 7) % V);
    upload(&p, ht, n, &t0, &t1);
    upload(&p, hw, V * E, &w0, &w1);
    upload(&p, hd, n * E, &e0, &e1);
    tt_dev_embed_fwd(&p.cpu, e0, w0, t0, n, V, E);
    tt_dev_embed_fwd(&p.dev, e1, w1, t1, n, V, E);
    float *fw = fetch(&p.cpu, e0, n * E);
    for (size_t e = 0; e < E; e++) ck_assert(fw[17 * E + e] == 0.0f); /* id V: out of range, zeros */
    tt_free(fw);
    compare(&p, "embed_fwd", e0, e1, n * E, 0, 0);
    upload(&p, hd, n * E, &dd0, &dd1);
    upload(&p, hw, V * E, &g0, &g1);
    tt_dev_embed_bwd(&p.cpu, g0, dd0, t0, n, V, E);
    tt_dev_embed_bwd(&p.dev, g1, dd1, t1, n, V, E);
    compare(&p, "embed_bwd", g0, g1, V * E, 0, 0);
    const void *bufs[][2] = {{t0, t1}, {w0, w1}, {dd0, dd1}, {i0, i1}};
    for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) {
        tt_dev_dfree(&p.cpu, (void *)bufs[b][0]);
        tt_dev_dfree(&p.dev, (void *)bufs[b][1]);
    }
    tt_free(hx);
    tt_free(ht);
    tt_free(hw);
    tt_free(hd);
    pair_free(&p);
}
END_TEST

/* augment (--augment): every image of a shard shifted and flipped by its sample's own draw, against the CPU backend
 * to the bit (the same tt_augment.h code, no FMA on either side), over square and non-square images of one to three
 * channels, ranges that move pixels past the edge, rows out of data-set order (the draws read the indices, so two
 * rows of one index come out the same), a zero range (flips only), a shard of one image. Exact, with guards. */
START_TEST(test_augment_op)
{
    pair p;
    pair_init(&p);
    static const struct {
        size_t rows, H, W, C;
        tt_augment a;
    } cases[] = {{37, 6, 5, 2, {0.1f, 0.1f, 1}}, {9, 32, 32, 3, {0.1f, 0.1f, 1}}, {13, 4, 7, 1, {0.9f, 0.6f, 0}},
                 {5, 3, 3, 3, {0.0f, 0.0f, 1}}, {1, 28, 28, 1, {0.25f, 0.05f, 1}}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const size_t R = cases[k].rows, img = cases[k].H * cases[k].W * cases[k].C;
        float *hx = random_host(R * img, 300 + k), *x0, *x1, *y0, *y1;
        if (R > 3) memcpy(hx + 3 * img, hx + img, img * sizeof(float)); /* rows 1 and 3: one sample, twice */
        uint32_t ids[37];
        for (size_t r = 0; r < R; r++) ids[r] = r == 3 ? ids[1] : (uint32_t)(7000 - 131 * r); /* rows 1, 3: one id */
        uint32_t *i0 = (uint32_t *)tt_dev_alloc(&p.cpu, sizeof ids), *i1 = (uint32_t *)tt_dev_alloc(&p.dev, sizeof ids);
        tt_dev_h2d(&p.cpu, i0, ids, sizeof ids);
        tt_dev_h2d(&p.dev, i1, ids, sizeof ids);
        upload(&p, hx, R * img, &x0, &x1);
        upload(&p, hx, R * img, &y0, &y1);
        const uint64_t key = tt_augment_key(11, 3 + k);
        tt_dev_augment(&p.cpu, y0, x0, i0, R, cases[k].H, cases[k].W, cases[k].C, &cases[k].a, key);
        tt_dev_augment(&p.dev, y1, x1, i1, R, cases[k].H, cases[k].W, cases[k].C, &cases[k].a, key);
        char what[96];
        snprintf(what, sizeof what, "augment %zu x %zux%zux%zu", R, cases[k].H, cases[k].W, cases[k].C);
        if (R > 3) { /* one sample in two rows: one transform */
            float *h = fetch(&p.dev, y1, R * img);
            ck_assert_msg(memcmp(h + img, h + 3 * img, img * sizeof(float)) == 0, "%s: rows 1 and 3 differ", what);
            tt_free(h);
        }
        compare(&p, what, y0, y1, R * img, 0, 0);
        tt_dev_dfree(&p.cpu, x0);
        tt_dev_dfree(&p.dev, x1);
        tt_dev_dfree(&p.cpu, i0);
        tt_dev_dfree(&p.dev, i1);
        tt_free(hx);
    }
    pair_free(&p);
}
END_TEST

/* gather_rows (--data-on device): rows of a byte table by index, on both backends and against the rows picked on the
 * host — exact, to the byte. Row widths of whole 4-byte words (a label, float rows, 784-byte images: the CUDA
 * backend's word kernel) and odd ones (its byte kernel), and the word width again into an output that starts one
 * byte off alignment (the byte kernel too); repeated indices, and indices past the table (n_src, beyond, UINT32_MAX),
 * whose rows must come back as zero bytes. GUARD bytes after each output must stay as they were. */
START_TEST(test_gather_rows)
{
    pair p;
    pair_init(&p);
    const size_t shapes[][3] = {{1, 1, 1}, {50, 7, 3}, {300, 128, 784}, {100, 64, 4}, {1000, 47, 40}, {17, 33, 12},
                                {9, 200, 5}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (int offset = 0; offset < 2; offset++) { /* the output at its allocation's start, or one byte in */
            const size_t n_src = shapes[sh][0], rows = shapes[sh][1], rb = shapes[sh][2], out = rows * rb + offset;
            uint8_t *table = (uint8_t *)tt_malloc(n_src * rb), *want = (uint8_t *)tt_malloc(out + GUARD);
            uint32_t *idx = (uint32_t *)tt_malloc(rows * sizeof(uint32_t));
            tt_rng r;
            tt_rng_seed(&r, 77 + sh, (uint64_t)offset);
            for (size_t i = 0; i < n_src * rb; i++) table[i] = (uint8_t)tt_rng_below(&r, 256);
            const uint32_t past[3] = {(uint32_t)n_src, (uint32_t)n_src + 1000, 0xffffffffu}; /* past the table */
            for (size_t k = 0; k < rows; k++) /* mostly in range, repeats included; every 9th row past the table */
                idx[k] = k % 9 == 8 ? past[k / 9 % 3] : (uint32_t)tt_rng_below(&r, n_src);
            memset(want, 0xa5, out + GUARD);
            for (size_t k = 0; k < rows; k++) {
                uint8_t *row = want + offset + k * rb;
                if (idx[k] < n_src) memcpy(row, table + (size_t)idx[k] * rb, rb);
                else memset(row, 0, rb);
            }
            tt_dev *devs[2] = {&p.cpu, &p.dev};
            uint8_t *got[2];
            for (int b = 0; b < 2; b++) {
                tt_dev *d = devs[b];
                uint8_t *d_table = (uint8_t *)tt_dev_alloc(d, n_src * rb), *d_out = (uint8_t *)tt_dev_alloc(d, out + GUARD);
                uint32_t *d_idx = (uint32_t *)tt_dev_alloc(d, rows * sizeof(uint32_t));
                uint8_t *fill = (uint8_t *)tt_malloc(out + GUARD);
                memset(fill, 0xa5, out + GUARD);
                tt_dev_h2d(d, d_table, table, n_src * rb);
                tt_dev_h2d(d, d_idx, idx, rows * sizeof(uint32_t));
                tt_dev_h2d(d, d_out, fill, out + GUARD);
                tt_dev_gather_rows(d, d_out + offset, d_table, n_src, d_idx, rows, rb);
                got[b] = (uint8_t *)tt_malloc(out + GUARD);
                tt_dev_d2h(d, got[b], d_out, out + GUARD);
                tt_dev_sync(d);
                tt_dev_dfree(d, d_table);
                tt_dev_dfree(d, d_out);
                tt_dev_dfree(d, d_idx);
                tt_free(fill);
            }
            for (size_t i = 0; i < out + GUARD; i++) {
                ck_assert_msg(got[0][i] == want[i], "gather_rows %zu of %zu rows x %zu bytes, offset %d: cpu byte %zu "
                              "is %u, want %u", rows, n_src, rb, offset, i, got[0][i], want[i]);
                ck_assert_msg(got[1][i] == want[i], "gather_rows %zu of %zu rows x %zu bytes, offset %d: %s byte %zu "
                              "is %u, want %u%s", rows, n_src, rb, offset, ops->name, i, got[1][i], want[i],
                              i >= out ? " (a guard byte)" : "");
            }
            tt_free(got[0]);
            tt_free(got[1]);
            tt_free(table);
            tt_free(want);
            tt_free(idx);
        }
    pair_free(&p);
}
END_TEST

/* A host copy of n floats of device memory, and whether two such copies agree to the bit. */
static int same_bits(tt_dev *dev, const float *d_a, const float *d_b, size_t n)
{
    float *a = fetch(dev, d_a, n), *b = fetch(dev, d_b, n);
    const int same = memcmp(a, b, n * sizeof(float)) == 0;
    tt_free(a);
    tt_free(b);
    return same;
}

/* col_sum on both sides of one GPU chunk (COL_CHUNK rows): no rows (zeros), one chunk (exact), one more row than a
 * chunk, and many chunks, up to a conv layer's bias gradient (B*OH*OW rows, few columns). Inputs k/64 in [-1, 1] sum
 * exactly in float in any order (|sum| < 2^17, six fraction bits: 23 bits), so there both backends must agree to the
 * bit whatever the chunking — a lost, doubled or misplaced row shows; random inputs too (the same chunks). Each device
 * sum is done twice and must repeat to the bit (the grid never changes the order). */
START_TEST(test_col_sum)
{
    pair p;
    pair_init(&p);
    const size_t shapes[][2] = {{0, 7}, {1, 1}, {255, 3}, {256, 40}, {257, 5}, {4096, 64}, {70000, 33}, {100003, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int dyadic = 0; dyadic < 2; dyadic++) {
            const size_t R = shapes[s][0], C = shapes[s][1], n = R * C;
            float *hx = random_host(n ? n : 1, 200 + s), *ho = random_host(C, 300 + s);
            if (dyadic)
                for (size_t i = 0; i < n; i++) hx[i] = (float)(int)(hx[i] * 64.0f) / 64.0f;
            float *x0, *x1, *o0, *o1, *again0, *again1;
            upload(&p, hx, n, &x0, &x1);
            upload(&p, ho, C, &o0, &o1);
            upload(&p, ho, C, &again0, &again1);
            tt_dev_col_sum(&p.cpu, o0, x0, R, C);
            tt_dev_col_sum(&p.dev, o1, x1, R, C);
            tt_dev_col_sum(&p.dev, again1, x1, R, C);
            ck_assert_msg(same_bits(&p.dev, o1, again1, C), "col_sum %zux%zu: %s differs from run to run", R, C,
                          ops->name);
            char what[64];
            snprintf(what, sizeof what, "col_sum %zux%zu%s", R, C, dyadic ? " (exact sums)" : "");
            compare(&p, what, o0, o1, C, dyadic ? 0 : col_sum_atol(R), 0);
            tt_dev_dfree(&p.cpu, again0);
            tt_dev_dfree(&p.dev, again1);
            tt_dev_dfree(&p.cpu, x0);
            tt_dev_dfree(&p.dev, x1);
            tt_free(hx);
            tt_free(ho);
        }
    pair_free(&p);
}
END_TEST

/* BatchNorm's ops (src/layers/batchnorm.c), each from the same inputs on both backends: col_dev_sum (a variance's
 * sum of squared deviations from center * center_scale, and the backward's scaled sum of dy * (x - mean)) exactly:
 * the CPU sums in the GPU's chunks (dev_cpu.c);
 * bn_stats (training with the tail, evaluation), bn_fwd (in place too) and bn_dx exactly — plain IEEE arithmetic
 * with no contraction. Rows 0: zero sums and nothing written. */
START_TEST(test_batchnorm_ops)
{
    pair p;
    pair_init(&p);
    const size_t shapes[][2] = {{0, 3}, {1, 1}, {255, 3}, {257, 5}, {4096, 32}, {70000, 7}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const size_t R = shapes[s][0], C = shapes[s][1], n = R * C;
        float *hx = random_host(n ? n : 1, 400 + s), *hdy = random_host(n ? n : 1, 410 + s);
        float *hc = random_host(2 * C, 420 + s), *hsc = random_host(C, 430 + s), *hmov = random_host(2 * C, 440 + s);
        float *hgb = random_host(2 * C, 450 + s), *hout = random_host(2 * C, 460 + s);
        for (size_t c = 0; c < C; c++) hmov[C + c] = fabsf(hmov[C + c]) + 0.1f; /* a variance */
        for (size_t c = 0; c < C; c++) hc[C + c] = fabsf(hc[C + c]) * (float)(R ? R : 1); /* a sum of squares */
        float *x0, *x1, *dy0, *dy1, *c0, *c1, *sc0, *sc1, *mov0, *mov1, *gb0, *gb1, *o0, *o1;
        upload(&p, hx, n, &x0, &x1);
        upload(&p, hdy, n, &dy0, &dy1);
        upload(&p, hc, 2 * C, &c0, &c1);
        upload(&p, hsc, C, &sc0, &sc1);
        upload(&p, hmov, 2 * C, &mov0, &mov1);
        upload(&p, hgb, 2 * C, &gb0, &gb1);
        char what[80];
        for (int bwd = 0; bwd < 2; bwd++) {
            upload(&p, hout, C, &o0, &o1);
            tt_dev_col_dev_sum(&p.cpu, o0, x0, bwd ? dy0 : NULL, c0, bwd ? 1.0f : 0.25f, bwd ? sc0 : NULL, R, C);
            tt_dev_col_dev_sum(&p.dev, o1, x1, bwd ? dy1 : NULL, c1, bwd ? 1.0f : 0.25f, bwd ? sc1 : NULL, R, C);
            snprintf(what, sizeof what, "col_dev_sum %zux%zu%s", R, C, bwd ? " (dy, scaled)" : "");
            compare(&p, what, o0, o1, C, 0, 0);
        }
        const float inv_n = R ? 1.0f / (float)R : 1.0f;
        for (int train = 0; train < 2; train++) { /* save (2C) and tail (2C): from hout, all written */
            float *sv0, *sv1, *t0, *t1;
            upload(&p, hout, 2 * C, &sv0, &sv1);
            upload(&p, hout, 2 * C, &t0, &t1);
            tt_dev_bn_stats(&p.cpu, sv0, train ? t0 : NULL, train ? c0 : NULL, train ? c0 + C : NULL, mov0, C, inv_n,
                            1e-3f, 0.005f);
            tt_dev_bn_stats(&p.dev, sv1, train ? t1 : NULL, train ? c1 : NULL, train ? c1 + C : NULL, mov1, C, inv_n,
                            1e-3f, 0.005f);
            snprintf(what, sizeof what, "bn_stats C=%zu %s", C, train ? "training" : "evaluation");
            compare(&p, what, t0, t1, 2 * C, 0, 0); /* evaluation: untouched */
            if (train) { /* save from training: the statistics bn_fwd and bn_dx read */
                float *y0, *y1, *dx0, *dx1, *xi0, *xi1;
                upload(&p, hdy, n, &y0, &y1);
                upload(&p, hdy, n, &dx0, &dx1);
                upload(&p, hx, n, &xi0, &xi1);
                tt_dev_bn_fwd(&p.cpu, y0, x0, sv0, gb0, R, C);
                tt_dev_bn_fwd(&p.dev, y1, x1, sv1, gb1, R, C);
                tt_dev_bn_fwd(&p.cpu, xi0, xi0, sv0, gb0, R, C); /* in place */
                tt_dev_bn_fwd(&p.dev, xi1, xi1, sv1, gb1, R, C);
                tt_dev_bn_dx(&p.cpu, dx0, dy0, x0, sv0, gb0, mov0, R, C, inv_n); /* any 2C as the sums */
                tt_dev_bn_dx(&p.dev, dx1, dy1, x1, sv1, gb1, mov1, R, C, inv_n);
                snprintf(what, sizeof what, "bn_fwd %zux%zu", R, C);
                compare(&p, what, y0, y1, n, 0, 0);
                snprintf(what, sizeof what, "bn_fwd %zux%zu in place", R, C);
                compare(&p, what, xi0, xi1, n, 0, 0);
                snprintf(what, sizeof what, "bn_dx %zux%zu", R, C);
                compare(&p, what, dx0, dx1, n, 0, 0);
            }
            compare(&p, what, sv0, sv1, 2 * C, 0, 0);
        }
        float *bufs0[] = {x0, dy0, c0, sc0, mov0, gb0}, *bufs1[] = {x1, dy1, c1, sc1, mov1, gb1};
        for (size_t i = 0; i < sizeof bufs0 / sizeof bufs0[0]; i++) {
            tt_dev_dfree(&p.cpu, bufs0[i]);
            tt_dev_dfree(&p.dev, bufs1[i]);
        }
        float *hb[] = {hx, hdy, hc, hsc, hmov, hgb, hout};
        for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++) tt_free(hb[i]);
    }
    pair_free(&p);
}
END_TEST

/* The fused epilogues on one backend: bias_relu against bias_add + relu_fwd, drelu_bgrad (in place, as the layers
 * run it, and into another buffer) against relu_bwd + col_sum — to the bit, on that backend (the same order of every
 * sum). The results stay on the device for the comparison across backends: y, dz, db and the out-of-place dz2. */
typedef struct epilogue_out {
    float *y, *dz, *db, *dz2;
} epilogue_out;

static void epilogue_on(tt_dev *dev, const float *hx, const float *hb, const float *hdy, const float *hy, size_t R,
                        size_t C, epilogue_out *o)
{
    const size_t n = R * C, sz = (n + GUARD) * sizeof(float);
    float *guarded = (float *)tt_malloc(sz);
    for (int g = 0; g < GUARD; g++) guarded[n + g] = GUARD_VALUE;
    float *d_b = tt_dev_alloc_f32(dev, C), *d_y = tt_dev_alloc_f32(dev, n + 1), *d_ref = tt_dev_alloc_f32(dev, n + 1);
    float *d_dbref = tt_dev_alloc_f32(dev, C + GUARD), *d_dy = tt_dev_alloc_f32(dev, n + 1);
    o->y = tt_dev_alloc_f32(dev, n + GUARD);
    o->dz = tt_dev_alloc_f32(dev, n + GUARD);
    o->dz2 = tt_dev_alloc_f32(dev, n + GUARD);
    o->db = tt_dev_alloc_f32(dev, C + GUARD);
    tt_dev_h2d(dev, d_b, hb, C * sizeof(float));
    memcpy(guarded, hx, n * sizeof(float));
    tt_dev_h2d(dev, o->y, guarded, sz);
    tt_dev_h2d(dev, d_ref, guarded, n * sizeof(float));
    tt_dev_bias_relu(dev, o->y, d_b, R, C);
    tt_dev_bias_add(dev, d_ref, d_b, R, C);
    tt_dev_relu_fwd(dev, d_ref, d_ref, n);
    ck_assert_msg(same_bits(dev, o->y, d_ref, n), "bias_relu %zux%zu: %s differs from bias_add + relu_fwd", R, C,
                  dev->ops->name);
    memcpy(guarded, hdy, n * sizeof(float));
    tt_dev_h2d(dev, o->dz, guarded, sz);
    tt_dev_h2d(dev, o->dz2, guarded, sz);
    tt_dev_h2d(dev, d_dy, hdy, n * sizeof(float));
    tt_dev_h2d(dev, d_y, hy, n * sizeof(float));
    for (int g = 0; g < GUARD; g++) guarded[g] = GUARD_VALUE;
    tt_dev_h2d(dev, o->db + C, guarded, GUARD * sizeof(float));
    tt_dev_drelu_bgrad(dev, o->dz, o->db, o->dz, d_y, R, C); /* in place */
    tt_dev_relu_bwd(dev, d_ref, d_dy, d_y, n);
    tt_dev_col_sum(dev, d_dbref, d_ref, R, C);
    ck_assert_msg(same_bits(dev, o->dz, d_ref, n) && same_bits(dev, o->db, d_dbref, C),
                  "drelu_bgrad %zux%zu: %s differs from relu_bwd + col_sum", R, C, dev->ops->name);
    tt_dev_drelu_bgrad(dev, o->dz2, d_dbref, d_dy, d_y, R, C); /* into another buffer: dy is left as it was */
    ck_assert_msg(same_bits(dev, o->dz2, d_ref, n) && same_bits(dev, o->db, d_dbref, C),
                  "drelu_bgrad %zux%zu: %s out of place differs", R, C, dev->ops->name);
    float *back = fetch(dev, d_dy, n ? n : 1);
    ck_assert_msg(n == 0 || memcmp(back, hdy, n * sizeof(float)) == 0, "drelu_bgrad: %s wrote into dy",
                  dev->ops->name);
    tt_free(back);
    float *bufs[] = {d_b, d_y, d_ref, d_dbref, d_dy};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tt_dev_dfree(dev, bufs[i]);
    tt_free(guarded);
}

/* Both backends, over shapes on both sides of one GPU column chunk (COL_CHUNK rows) up to a conv layer's bias
 * gradient. y is a relu's output (exact zeros where x <= 0), so the mask is exercised at 0; dy in [-1, 1). Each
 * backend matches its own unfused ops to the bit; across backends y, dz and db to the bit. */
START_TEST(test_fused_epilogues)
{
    pair p;
    pair_init(&p);
    const size_t shapes[][2] = {{0, 7}, {1, 1}, {3, 10}, {256, 40}, {257, 5}, {4096, 64}, {70000, 33}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const size_t R = shapes[s][0], C = shapes[s][1], n = R * C;
        float *hx = random_host(n ? n : 1, 400 + s), *hb = random_host(C, 500 + s);
        float *hdy = random_host(n ? n : 1, 600 + s), *hy = (float *)tt_malloc((n ? n : 1) * sizeof(float));
        for (size_t i = 0; i < n; i++) hy[i] = tt_relu(hx[i]);
        epilogue_out a, b;
        epilogue_on(&p.cpu, hx, hb, hdy, hy, R, C, &a);
        epilogue_on(&p.dev, hx, hb, hdy, hy, R, C, &b);
        char what[64];
        snprintf(what, sizeof what, "bias_relu %zux%zu", R, C);
        compare(&p, what, a.y, b.y, n, 0, 0);
        snprintf(what, sizeof what, "drelu_bgrad dz %zux%zu", R, C);
        compare(&p, what, a.dz, b.dz, n, 0, 0);
        compare(&p, what, a.dz2, b.dz2, n, 0, 0);
        snprintf(what, sizeof what, "drelu_bgrad db %zux%zu", R, C);
        compare(&p, what, a.db, b.db, C, col_sum_atol(R), 0);
        tt_free(hx);
        tt_free(hb);
        tt_free(hdy);
        tt_free(hy);
    }
    pair_free(&p);
}
END_TEST

/* --epilogues lt: tt_dev_gemm_bias_act (y = act(x w + b), the dense layer's forward) through the backend's one call
 * against the CPU, whose table has no such op (its path is the wrapper's fallback: sgemm then bias_relu / bias_add /
 * relu_fwd), over odd sizes, one row and K = 1, relu on and off, bias or none. y starts as NaN (beta 0: never read)
 * with guards after it. Tolerance: on the stand-in none — its cuBLASLt runs the very cblas_sgemm call cublasSgemm
 * runs, then the epilogue per element as bias_relu does, so the bits agree; on a GPU sgemm's (atol 1e-4 + rtol 1e-4
 * per element, O(1) inputs, K <= 300, FP32 compute: CUBLAS_COMPUTE_32F), which a GPU window must confirm. The
 * stand-in's heuristic offers an algorithm for every shape, so there its op must take the call (returns 1); with
 * TT_SIM_LT_NO_ALGO=1 it offers none: the op returns 0 with nothing issued and the wrapper's fallback gives the same
 * bits. A GPU may decline any shape: both answers are fine there. */
static int is_stand_in(void) { return strstr(ops->name, "stand-in") != NULL; }

/* off: every operand starts off floats into its allocation — a layer's weights are a slice of the flat parameter
 * buffer at any float offset, so x, w, b and y may be 4, 8 or 128 bytes past an aligned address (cuBLASLt must be
 * told, and a bias under 16 bytes of alignment falls back to the kernels). */
static void gemm_bias_act_case_at(pair *p, size_t M, size_t N, size_t K, int relu, int bias, int want_lt, size_t off)
{
    float *hx = random_host(M * K + off, 800 + M), *hw = random_host(K * N + off, 900 + N);
    float *hb = random_host(N + off, 1000 + K);
    float *hy = (float *)tt_malloc((M * N + off) * sizeof(float));
    for (size_t i = 0; i < M * N + off; i++) hy[i] = NAN;
    float *xa0, *xa1, *wa0, *wa1, *ba0, *ba1, *ya0, *ya1;
    upload(p, hx, M * K + off, &xa0, &xa1);
    upload(p, hw, K * N + off, &wa0, &wa1);
    upload(p, hb, N + off, &ba0, &ba1);
    upload(p, hy, M * N + off, &ya0, &ya1);
    float *x0 = xa0 + off, *x1 = xa1 + off, *w0 = wa0 + off, *w1 = wa1 + off, *b0 = ba0 + off, *b1 = ba1 + off;
    float *y0 = ya0 + off, *y1 = ya1 + off;
    tt_dev *dev = &p->dev;
    tt_dev_gemm_bias_act(&p->cpu, 1, M, N, K, x0, w0, bias ? b0 : NULL, y0, relu, NULL);
    if (want_lt >= 0 && dev->ops->gemm_bias_act) {
        const int took = dev->ops->gemm_bias_act(dev->ctx, M, N, K, x1, w1, bias ? b1 : NULL, y1, relu, NULL);
        ck_assert_msg(took == want_lt, "gemm_bias_act %zux%zux%zu: the op returned %d, want %d", M, N, K, took,
                      want_lt);
        if (!took) tt_dev_gemm_bias_act(dev, 0, M, N, K, x1, w1, bias ? b1 : NULL, y1, relu, NULL);
    } else {
        tt_dev_gemm_bias_act(dev, 1, M, N, K, x1, w1, bias ? b1 : NULL, y1, relu, NULL);
    }
    tt_dev_sync(dev);
    char what[96];
    snprintf(what, sizeof what, "gemm_bias_act %zux%zux%zu relu=%d bias=%d +%zu floats", M, N, K, relu, bias, off);
    const double tol = is_stand_in() || ops == &tt_dev_cpu_ops ? 0 : 1e-4;
    compare(p, what, ya0, ya1, M * N + off, tol, tol); /* the off floats before y too: NaN on both, untouched */
    tt_dev_dfree(&p->cpu, xa0), tt_dev_dfree(&p->dev, xa1);
    tt_dev_dfree(&p->cpu, wa0), tt_dev_dfree(&p->dev, wa1);
    tt_dev_dfree(&p->cpu, ba0), tt_dev_dfree(&p->dev, ba1);
    tt_free(hx), tt_free(hw), tt_free(hb), tt_free(hy);
}

static void gemm_bias_act_case(pair *p, size_t M, size_t N, size_t K, int relu, int bias, int want_lt)
{
    gemm_bias_act_case_at(p, M, N, K, relu, bias, want_lt, 0);
}

static const size_t lt_shapes[][3] = {{1, 1, 1}, {1, 10, 33}, {7, 5, 3}, {33, 10, 1}, {128, 17, 300}, {65, 129, 64}};

START_TEST(test_gemm_bias_act)
{
    pair p;
    pair_init(&p);
    const int want = is_stand_in() ? 1 : -1; /* -1: whatever the GPU's heuristic says, through the wrapper */
    for (size_t s = 0; s < sizeof lt_shapes / sizeof lt_shapes[0]; s++)
        for (int relu = 0; relu < 2; relu++)
            for (int bias = 0; bias < 2; bias++) {
                gemm_bias_act_case(&p, lt_shapes[s][0], lt_shapes[s][1], lt_shapes[s][2], relu, bias, want);
                gemm_bias_act_case(&p, lt_shapes[s][0], lt_shapes[s][1], lt_shapes[s][2], relu, bias, want);
            }
    /* operands 4, 8 and 128 bytes into their allocations (cudaMalloc's blocks, the stand-in's too, are 256-byte aligned):
     * the plan is chosen for the alignment the pointers have (the stand-in refuses a pointer less aligned than its
     * algorithm assumes, as a GPU faults on it), and a bias under 16 bytes of alignment is the kernels' */
    const size_t offs[] = {1, 2, 32};
    for (size_t o = 0; o < 3; o++)
        for (int bias = 0; bias < 2; bias++) {
            const int w = !is_stand_in() ? -1 : bias && offs[o] * sizeof(float) % 16 ? 0 : 1;
            gemm_bias_act_case_at(&p, 33, 10, 7, 1, bias, w, offs[o]);
            gemm_bias_act_case_at(&p, 65, 129, 64, 0, bias, w, offs[o]);
        }
    pair_free(&p);
}
END_TEST

/* --epilogues lt across a relu: dense layer i's forward writes its relu's bit-mask (RELU_AUX_BIAS: y = relu(x w1 +
 * b1) and the mask of y > 0), and layer i+2's dx GEMM applies it (DRELU_BGRAD: dz = dy w2ᵀ where the bit is set,
 * db = dz's column sums: layer i's bias gradient) — against the CPU, whose path is the wrappers' fallback (sgemm +
 * bias_relu; sgemm + drelu_bgrad over y). Shapes: widths under, at and over one 128-bit mask row (the padding), rows
 * over one column chunk (the bias gradient's two-pass order), K = 1. Exact zeros at the relu: x's first row is 0 and
 * b1 has zeros and negatives, so z = b1 there — a bit cleared at z = 0 as at y = 0. The mask buffer is exactly
 * tt_relu_mask_bytes (the stand-in checks every bit it writes or reads lies in it). Tolerance: none on the stand-in
 * (its cuBLASLt sums the bias gradient in drelu_bgrad's order); on a GPU sgemm's for y and dz, and for db a sum over
 * M rows in cuBLASLt's own order (atol 1e-3 + rtol 1e-4), which a GPU window must confirm. With no algorithm offered
 * (the stand-in's TT_SIM_LT_NO_ALGO=1) the forward returns 0 — no mask — and the backward's wrapper, given none, is the
 * kernels' path: the same bits. */
static void drelu_link_case(pair *p, size_t M, size_t D, size_t N, size_t K)
{
    float *hx = random_host(M * D, 1200 + M), *hw1 = random_host(D * N, 1300 + N), *hb1 = random_host(N, 1400 + D);
    float *hdy = random_host(M * K, 1500 + K), *hw2 = random_host(N * K, 1600 + N);
    for (size_t c = 0; c < D; c++) hx[c] = 0.0f; /* row 0: z = b1 */
    for (size_t c = 0; c < N; c += 3) hb1[c] = c % 2 ? -0.25f : 0.0f;
    float *x0, *x1, *w10, *w11, *b10, *b11, *dy0, *dy1, *w20, *w21;
    upload(p, hx, M * D, &x0, &x1);
    upload(p, hw1, D * N, &w10, &w11);
    upload(p, hb1, N, &b10, &b11);
    upload(p, hdy, M * K, &dy0, &dy1);
    upload(p, hw2, N * K, &w20, &w21);
    float *hnan = (float *)tt_malloc((M * N + GUARD) * sizeof(float));
    for (size_t i = 0; i < M * N; i++) hnan[i] = NAN; /* every output written, never read first */
    float *y0, *y1, *dz0, *dz1, *db0, *db1;
    upload(p, hnan, M * N, &y0, &y1);
    upload(p, hnan, M * N, &dz0, &dz1);
    upload(p, hnan, N, &db0, &db1);
    const size_t mask_bytes = tt_relu_mask_bytes(M, N);
    ck_assert_uint_ge(mask_bytes, M * ((N + 127) / 128) * 16);
    ck_assert_uint_eq(mask_bytes % 256, 0);
    void *mask = tt_dev_alloc(&p->dev, mask_bytes);
    ck_assert(mask != NULL);
    const int cpu_masked = tt_dev_gemm_bias_act(&p->cpu, 1, M, N, D, x0, w10, b10, y0, 1, NULL);
    ck_assert_int_eq(cpu_masked, 0);
    tt_dev_gemm_drelu_bgrad(&p->cpu, 1, M, N, K, dy0, w20, NULL, y0, dz0, db0);
    const int masked = tt_dev_gemm_bias_act(&p->dev, 1, M, N, D, x1, w11, b11, y1, 1, mask);
    const char *no_algo = getenv("TT_SIM_LT_NO_ALGO");
    if (is_stand_in()) /* its heuristic offers every shape, unless told to offer none */
        ck_assert_int_eq(masked, !(no_algo && strcmp(no_algo, "1") == 0));
    tt_dev_gemm_drelu_bgrad(&p->dev, 1, M, N, K, dy1, w21, masked ? mask : NULL, y1, dz1, db1);
    tt_dev_sync(&p->dev);
    char what[96];
    const double tol = is_stand_in() ? 0 : 1e-4;
    snprintf(what, sizeof what, "RELU_AUX_BIAS y %zux%zux%zu", M, N, D);
    compare(p, what, y0, y1, M * N, tol, tol);
    snprintf(what, sizeof what, "DRELU_BGRAD dz %zux%zux%zu", M, N, K);
    compare(p, what, dz0, dz1, M * N, tol, tol);
    snprintf(what, sizeof what, "DRELU_BGRAD db %zux%zux%zu", M, N, K);
    compare(p, what, db0, db1, N, is_stand_in() ? 0 : 1e-3, tol);
    tt_dev_dfree(&p->dev, mask);
    float *bufs0[] = {x0, w10, b10, dy0, w20}, *bufs1[] = {x1, w11, b11, dy1, w21};
    for (size_t i = 0; i < 5; i++) tt_dev_dfree(&p->cpu, bufs0[i]), tt_dev_dfree(&p->dev, bufs1[i]);
    tt_free(hx), tt_free(hw1), tt_free(hb1), tt_free(hdy), tt_free(hw2), tt_free(hnan);
}

START_TEST(test_gemm_drelu_bgrad)
{
    pair p;
    pair_init(&p);
    const size_t shapes[][4] = {{1, 3, 1, 1},     {7, 5, 10, 3},    {33, 17, 128, 10}, {64, 20, 129, 7},
                                {300, 12, 256, 10}, {257, 9, 300, 1}, {256, 784, 256, 256}};
    for (int pass = 0; pass < (is_stand_in() ? 2 : 1); pass++) {
        if (pass) { /* a fresh context: its plans are made while the heuristic offers nothing */
            pair_free(&p);
            setenv("TT_SIM_LT_NO_ALGO", "1", 1);
            pair_init(&p);
        }
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            drelu_link_case(&p, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
        unsetenv("TT_SIM_LT_NO_ALGO");
    }
    ck_assert_uint_eq(tt_relu_mask_bytes(0, 10), 0);
    ck_assert_uint_eq(tt_relu_mask_bytes(1, 1), 256);
    ck_assert_uint_eq(tt_relu_mask_bytes(16, 128), 256);
    ck_assert_uint_eq(tt_relu_mask_bytes(17, 129), 17 * 32 + 256 - 17 * 32 % 256);
    ck_assert_uint_eq(tt_relu_mask_bytes(SIZE_MAX / 8, 1024), 0); /* an overflow is 0, not a small size */
    pair_free(&p);
}
END_TEST

/* The stand-in's heuristic offering nothing (TT_SIM_LT_NO_ALGO=1, read at each query): a fresh context's plans say
 * "none offered", the op returns 0 and issues nothing, and the wrapper's fallback matches the CPU to the bit. Then
 * the call captured in a graph (algorithms offered again, a fresh context): the capture runs nothing, and each launch
 * gives the bits of the op issued directly. */
START_TEST(test_gemm_bias_act_fallback_and_graph)
{
    if (!is_stand_in()) return; /* a GPU's heuristic cannot be told to decline */
    pair p;
    pair_init(&p);
    setenv("TT_SIM_LT_NO_ALGO", "1", 1);
    for (size_t s = 0; s < sizeof lt_shapes / sizeof lt_shapes[0]; s++)
        gemm_bias_act_case(&p, lt_shapes[s][0], lt_shapes[s][1], lt_shapes[s][2], 1, 1, 0);
    unsetenv("TT_SIM_LT_NO_ALGO");
    tt_dev g;
    tt_error err;
    ck_assert_msg(tt_dev_init(&g, ops, g_be.devices[0], &err) == TT_OK, "%s", err.msg);
    const size_t M = 33, N = 10, K = 7;
    float *hx = random_host(M * K, 1100), *hw = random_host(K * N, 1101), *hb = random_host(N, 1102);
    float *x = tt_dev_alloc_f32(&g, M * K), *w = tt_dev_alloc_f32(&g, K * N), *b = tt_dev_alloc_f32(&g, N);
    float *y = tt_dev_alloc_f32(&g, M * N), *y2 = tt_dev_alloc_f32(&g, M * N);
    tt_dev_h2d(&g, x, hx, M * K * sizeof(float));
    tt_dev_h2d(&g, w, hw, K * N * sizeof(float));
    tt_dev_h2d(&g, b, hb, N * sizeof(float));
    tt_dev_fill(&g, y, M * N, 0.0f);
    tt_dev_sync(&g);
    tt_dev_capture_begin(&g); /* the shape's first call: its plan is made inside the capture (host work only) */
    tt_dev_gemm_bias_act(&g, 1, M, N, K, x, w, b, y, 1, NULL);
    void *graph = tt_dev_capture_end(&g);
    ck_assert_msg(graph != NULL, "a captured cuBLASLt call spoilt the capture");
    float *before = fetch(&g, y, M * N);
    for (size_t i = 0; i < M * N; i++) ck_assert_msg(before[i] == 0.0f, "the capture ran the matmul");
    tt_free(before);
    for (int launch = 0; launch < 2; launch++) {
        if (launch) {
            for (size_t i = 0; i < M * K; i++) hx[i] = -0.5f * hx[i];
            tt_dev_h2d(&g, x, hx, M * K * sizeof(float));
        }
        ck_assert(tt_dev_graph_launch(&g, graph) == 1);
        tt_dev_gemm_bias_act(&g, 1, M, N, K, x, w, b, y2, 1, NULL);
        tt_dev_sync(&g);
        ck_assert_msg(same_bits(&g, y, y2, M * N), "launch %d: the graph's matmul differs from the call's", launch);
    }
    tt_dev_graph_free(&g, graph);
    float *bufs[] = {x, w, b, y, y2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tt_dev_dfree(&g, bufs[i]);
    tt_dev_free(&g);
    tt_free(hx), tt_free(hw), tt_free(hb);
    pair_free(&p);
}
END_TEST

/* Graphs (a backend with capture ops): a captured sequence runs nothing at its capture, and each launch runs it on
 * the memory as it is then — the same bits as the ops issued directly (a column sum over 1000 rows: its scratch);
 * events recorded in the capture are recorded at each launch; a capture whose op had to grow the backend's scratch
 * gives no graph (the ops are then issued again, uncaptured), and a graph whose scratch moved since its capture is
 * stale: not launched. */
START_TEST(test_graphs)
{
    if (!ops->capture_begin) return; /* the CPU backend runs every op as it is issued */
    pair p;
    pair_init(&p);
    const size_t R = 1000, C = 7, n = R * C;
    float *hx = random_host(n, 700), *hz = random_host(C, 701);
    for (size_t i = 0; i < C; i++) hz[i] = 0.0f;
    float *x0, *x1, *o0, *o1;
    upload(&p, hx, n, &x0, &x1);
    upload(&p, hz, C, &o0, &o1);
    void *a = tt_dev_event_create(&p.dev), *b = tt_dev_event_create(&p.dev);
    ck_assert(a && b);
    tt_dev_capture_begin(&p.dev); /* a fresh context has no scratch yet: the column sum spoils this capture */
    tt_dev_col_sum(&p.dev, o1, x1, R, C);
    ck_assert(tt_dev_capture_end(&p.dev) == NULL);
    tt_dev_col_sum(&p.dev, o1, x1, R, C); /* issued: the scratch grows to its size */
    tt_dev_h2d(&p.dev, o1, hz, C * sizeof(float));
    tt_dev_capture_begin(&p.dev);
    tt_dev_event_record(&p.dev, a);
    tt_dev_col_sum(&p.dev, o1, x1, R, C);
    tt_dev_event_record(&p.dev, b);
    void *g = tt_dev_capture_end(&p.dev);
    ck_assert(g != NULL);
    float *before = fetch(&p.dev, o1, C);
    for (size_t i = 0; i < C; i++) ck_assert_msg(before[i] == 0.0f, "the capture ran its ops");
    tt_free(before);
    for (int launch = 0; launch < 2; launch++) {
        if (launch) { /* new contents: a launch reads the memory as it is when it runs */
            for (size_t i = 0; i < n; i++) hx[i] = -hx[i] * 0.5f;
            tt_dev_h2d(&p.dev, x1, hx, n * sizeof(float));
        }
        ck_assert(tt_dev_graph_launch(&p.dev, g) == 1);
        tt_dev_sync(&p.dev);
        ck_assert(tt_dev_event_elapsed(&p.dev, a, b) >= 0.0);
        float *d0 = tt_dev_alloc_f32(&p.dev, C);
        tt_dev_col_sum(&p.dev, d0, x1, R, C); /* the same op issued directly: the same bits */
        ck_assert_msg(same_bits(&p.dev, o1, d0, C), "launch %d: the graph's column sum differs from the op's", launch);
        tt_dev_dfree(&p.dev, d0);
    }
    tt_dev_h2d(&p.cpu, x0, hx, n * sizeof(float));
    tt_dev_col_sum(&p.cpu, o0, x0, R, C);
    compare(&p, "col_sum in a graph", o0, o1, C, col_sum_atol(R), 0);
    float *big = tt_dev_alloc_f32(&p.dev, 8 * n), *sum = tt_dev_alloc_f32(&p.dev, C);
    tt_dev_fill(&p.dev, big, 8 * n, 1.0f);
    tt_dev_col_sum(&p.dev, sum, big, 8 * R, C); /* more chunks: the scratch moves */
    ck_assert_msg(tt_dev_graph_launch(&p.dev, g) == 0, "a graph over moved scratch was launched");
    tt_dev_graph_free(&p.dev, g);
    tt_dev_sync(&p.dev);
    /* a fresh context: the embedding's gradient needs scratch for its sort, so its capture is spoilt too (no
     * graph; the op issues nothing it cannot, rather than kernels on a missing block) */
    tt_dev fresh;
    tt_error ferr;
    ck_assert_msg(tt_dev_init(&fresh, ops, g_be.devices[0], &ferr) == TT_OK, "%s", ferr.msg);
    float *dw = tt_dev_alloc_f32(&fresh, 4 * 3), *dy = tt_dev_alloc_f32(&fresh, 64 * 3);
    float *t = tt_dev_alloc_f32(&fresh, 64);
    tt_dev_fill(&fresh, dy, 64 * 3, 1.0f);
    tt_dev_fill(&fresh, t, 64, 2.0f);
    tt_dev_sync(&fresh);
    tt_dev_capture_begin(&fresh);
    tt_dev_embed_bwd(&fresh, dw, dy, t, 64, 4, 3);
    ck_assert(tt_dev_capture_end(&fresh) == NULL);
    tt_dev_embed_bwd(&fresh, dw, dy, t, 64, 4, 3); /* issued: all 64 tokens are id 2 */
    float *hdw = fetch(&fresh, dw, 12);
    for (size_t i = 0; i < 12; i++) ck_assert(hdw[i] == (i / 3 == 2 ? 64.0f : 0.0f));
    tt_free(hdw);
    tt_dev_dfree(&fresh, dw);
    tt_dev_dfree(&fresh, dy);
    tt_dev_dfree(&fresh, t);
    tt_dev_free(&fresh);
    tt_dev_dfree(&p.dev, big);
    tt_dev_dfree(&p.dev, sum);
    tt_dev_dfree(&p.cpu, x0);
    tt_dev_dfree(&p.dev, x1);
    tt_dev_event_destroy(&p.dev, a);
    tt_dev_event_destroy(&p.dev, b);
    tt_free(hx);
    tt_free(hz);
    pair_free(&p);
}
END_TEST

/* The optimizer on a device (--update device, replicated): every optimizer and state combination over sizes around
 * the finiteness block (TT_UPDATE_BLOCK), with a NaN in one block and an Inf in another: the weights, every state
 * vector and the block flags against the CPU's; with skip (a non-finite loss) nothing moves but the flags. Exact on
 * every backend: the formulas are compiled without FMA contraction everywhere (ISO C, the stand-in's
 * -ffp-contract=off, nvcc --fmad=false), division and square root are IEEE-rounded, and a NaN matches any NaN. */
START_TEST(test_update)
{
    pair p;
    pair_init(&p);
    const tt_update_args args[] = {
        {0, 1, 0.01f, 0.9f, 0, 0, 0, 0, 0, 0, 0, 0, SIZE_MAX, 0, 0}, /* sgd, nesterov momentum */
        {0, 0, 0.1f, 0.0f, 0, 0, 0, 0, 0, 0, 0, 0, SIZE_MAX, 0, 0}, /* sgd */
        {1, 0, 0.001f, 0, 0.9f, 0.999f, 1e-7f, 0, 0.0003f, 0, 0, 0, SIZE_MAX, 0, 0}, /* adam, the step's alpha */
        {2, 0, 0.002f, 0, 0.9f, 0.999f, 1e-7f, 0, 0, 5.1f, 0.06f, 1000.5f, SIZE_MAX, 0, 0}, /* nadam, its scalars */
        {3, 0, 0.001f, 0.5f, 0, 0, 1e-7f, 0.9f, 0, 0, 0, 0, SIZE_MAX, 0, 0}, /* rmsprop, momentum (and centered) */
        {3, 0, 0.001f, 0.0f, 0, 0, 1e-7f, 0.9f, 0, 0, 0, 0, SIZE_MAX, 0, 0}, /* rmsprop plain */
        {1, 0, 0.001f, 0, 0.9f, 0.999f, 1e-7f, 0, 0.0003f, 0, 0, 0, SIZE_MAX, 0.004f, 0}, /* adamw: weight decay */
        {0, 0, 0.1f, 0.9f, 0, 0, 0, 0, 0, 0, 0, 0, SIZE_MAX, 0.01f, 0.25f}, /* sgd: decay and clipvalue */
        {3, 0, 0.001f, 0.5f, 0, 0, 1e-7f, 0.9f, 0, 0, 0, 0, SIZE_MAX, 0, 0.1f}, /* rmsprop: clipvalue */
    };
    const size_t sizes[] = {1, 2047, 2048, 2049, 3 * TT_UPDATE_BLOCK + 5};
    for (size_t c = 0; c < sizeof args / sizeof args[0]; c++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int skip = 0; skip < 2; skip++) {
                const size_t n = sizes[s], blocks = (n + TT_UPDATE_BLOCK - 1) / TT_UPDATE_BLOCK;
                float *hw = random_host(n, 600 + s), *hg = random_host(n, 700 + s), *hm = random_host(n, 800 + s);
                float *hv = random_host(n, 900 + s), *ha = random_host(n, 1000 + s), *hb = random_host(blocks, 1);
                for (size_t i = 0; i < n; i++) hv[i] = fabsf(hv[i]); /* second moments are not negative */
                if (n > TT_UPDATE_BLOCK) hg[TT_UPDATE_BLOCK + 3] = NAN;
                if (n > 3 * TT_UPDATE_BLOCK) hg[n - 1] = INFINITY;
                const int has_m = args[c].kind != 3 || args[c].momentum > 0, has_v = args[c].kind != 0;
                const int has_a = args[c].kind == 3 && args[c].momentum > 0; /* centered with momentum */
                float *w0, *w1, *g0, *g1, *m0, *m1, *v0, *v1, *a0, *a1, *b0, *b1;
                upload(&p, hw, n, &w0, &w1);
                upload(&p, hg, n, &g0, &g1);
                upload(&p, hm, n, &m0, &m1);
                upload(&p, hv, n, &v0, &v1);
                upload(&p, ha, n, &a0, &a1);
                upload(&p, hb, blocks, &b0, &b1);
                tt_update_args u = args[c];
                if (s % 2) u.n_train = n / 2; /* 2047, 2049: a non-trainable tail from the middle of a block */
                tt_dev_update(&p.cpu, &u, w0, g0, has_m ? m0 : NULL, has_v ? v0 : NULL, has_a ? a0 : NULL,
                              (int32_t *)b0, n, skip);
                tt_dev_update(&p.dev, &u, w1, g1, has_m ? m1 : NULL, has_v ? v1 : NULL, has_a ? a1 : NULL,
                              (int32_t *)b1, n, skip);
                char what[96];
                snprintf(what, sizeof what, "update kind %d case %zu n=%zu%s: weights", args[c].kind, c, n,
                         skip ? " skip" : "");
                compare(&p, what, w0, w1, n, 0, 0);
                snprintf(what, sizeof what, "update case %zu n=%zu: state", c, n);
                compare(&p, what, m0, m1, n, 0, 0);
                compare(&p, what, v0, v1, n, 0, 0);
                compare(&p, what, a0, a1, n, 0, 0);
                snprintf(what, sizeof what, "update case %zu n=%zu: the non-finite blocks", c, n);
                compare(&p, what, b0, b1, blocks, 0, 0);
                tt_dev_dfree(&p.cpu, g0);
                tt_dev_dfree(&p.dev, g1);
                tt_free(hw);
                tt_free(hg);
                tt_free(hm);
                tt_free(hv);
                tt_free(ha);
                tt_free(hb);
            }
    pair_free(&p);
}
END_TEST

/* The CPU's update itself: a skipped step or a non-finite block leaves the weights and the state as they were, the
 * flags say which blocks were not finite, and a finite block moves. */
START_TEST(test_update_flags)
{
    tt_dev cpu;
    tt_error err;
    ck_assert_int_eq(tt_dev_init(&cpu, &tt_dev_cpu_ops, 0, &err), TT_OK);
    enum { N = 2 * TT_UPDATE_BLOCK + 1 };
    float *w = tt_dev_alloc_f32(&cpu, N), *g = tt_dev_alloc_f32(&cpu, N), *m = tt_dev_alloc_f32(&cpu, N);
    int32_t bad[3] = {7, 7, 7};
    for (size_t i = 0; i < N; i++) {
        w[i] = 1.0f;
        g[i] = 1.0f;
        m[i] = 0.0f;
    }
    g[TT_UPDATE_BLOCK + 5] = NAN;
    const tt_update_args sgd = {0, 0, 0.5f, 0, 0, 0, 0, 0, 0, 0, 0, 0, SIZE_MAX, 0, 0};
    tt_dev_update(&cpu, &sgd, w, g, m, NULL, NULL, bad, N, 1); /* skipped: flags only */
    ck_assert(bad[0] == 0 && bad[1] == 1 && bad[2] == 0 && w[0] == 1.0f && w[N - 1] == 1.0f);
    tt_dev_update(&cpu, &sgd, w, g, m, NULL, NULL, bad, N, 0);
    ck_assert_msg(w[0] == 0.5f && w[N - 1] == 0.5f && m[0] == -0.5f, "w %g %g m %g", w[0], w[N - 1], m[0]);
    ck_assert_msg(w[TT_UPDATE_BLOCK] == 1.0f && w[2 * TT_UPDATE_BLOCK - 1] == 1.0f && m[TT_UPDATE_BLOCK] == 0.0f,
                  "a non-finite block moved");
    tt_dev_dfree(&cpu, w);
    tt_dev_dfree(&cpu, g);
    tt_dev_dfree(&cpu, m);
    tt_dev_free(&cpu);
}
END_TEST

/* The embedding's gradient, exact against the CPU and repeated to the bit: no tokens, fewer than one sorted run (32),
 * runs that do not fill the last merge, thousands of tokens (several merge passes), and one id only. Ids repeat, some
 * never occur (id 1 never does), and some are out of range (V, V + 5, -1, 1e9, NaN: no gradient). dy spans 2^-10 ..
 * 2^10, so adding a row's terms in another order would round differently. */
START_TEST(test_embed_bwd)
{
    pair p;
    pair_init(&p);
    const size_t cases[][3] = {{0, 7, 3}, {1, 5, 2}, {31, 4, 3}, {33, 50, 4}, {200, 13, 5}, {1000, 2, 1},
                               {5000, 97, 8}, {4099, 3, 17}}; /* n V E */
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const size_t n = cases[k][0], V = cases[k][1], E = cases[k][2];
        float *ht = (float *)tt_malloc((n ? n : 1) * sizeof(float)), *hd = random_host(n * E + 1, 400 + k);
        float *hw = random_host(V * E, 500 + k);
        tt_rng r;
        tt_rng_seed(&r, k, 4);
        const float bad[5] = {(float)V, (float)V + 5.0f, -1.0f, 1e9f, NAN};
        for (size_t i = 0; i < n; i++) {
            size_t id = tt_rng_below(&r, V);
            ht[i] = i % 53 == 7 ? bad[i % 5] : (float)(id == 1 && V > 2 ? 2 : id);
        }
        for (size_t i = 0; i < n * E; i++) hd[i] = ldexpf(hd[i], (int)tt_rng_below(&r, 21) - 10);
        float *t0, *t1, *d0, *d1, *g0, *g1, *again0, *again1;
        upload(&p, ht, n, &t0, &t1);
        upload(&p, hd, n * E, &d0, &d1);
        upload(&p, hw, V * E, &g0, &g1); /* every element is written: no zeroing first */
        upload(&p, hw, V * E, &again0, &again1);
        tt_dev_embed_bwd(&p.cpu, g0, d0, t0, n, V, E);
        tt_dev_embed_bwd(&p.dev, g1, d1, t1, n, V, E);
        tt_dev_embed_bwd(&p.dev, again1, d1, t1, n, V, E);
        ck_assert_msg(same_bits(&p.dev, g1, again1, V * E), "embed_bwd n=%zu: %s differs from run to run", n,
                      ops->name);
        if (V > 2 && n > 0) { /* id 1 never occurs: its row is zeros */
            float *h = fetch(&p.dev, g1, V * E);
            for (size_t e = 0; e < E; e++)
                ck_assert_msg(h[E + e] == 0.0f, "embed_bwd n=%zu: unused id 1 got %g", n, h[E + e]);
            tt_free(h);
        }
        char what[64];
        snprintf(what, sizeof what, "embed_bwd n=%zu V=%zu E=%zu", n, V, E);
        compare(&p, what, g0, g1, V * E, 0, 0);
        const void *bufs[][2] = {{t0, t1}, {d0, d1}, {again0, again1}};
        for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) {
            tt_dev_dfree(&p.cpu, (void *)bufs[b][0]);
            tt_dev_dfree(&p.dev, (void *)bufs[b][1]);
        }
        tt_free(ht);
        tt_free(hd);
        tt_free(hw);
    }
    pair_free(&p);
}
END_TEST

/* Events, as the ledger uses them: marks on the tower's stream, read once the stream is synced. Around a GEMM of 0.1
 * GFLOP the elapsed time is finite and > 0; an empty interval is finite and >= 0; a later mark is no earlier than an
 * earlier one; an event recorded again (every step reuses its events) measures its new interval. */
START_TEST(test_events)
{
    pair p;
    pair_init(&p);
    enum { M = 128, N = 256, K = 784 };
    float *hc = (float *)tt_calloc(M * N, sizeof(float));
    gemm_operands g;
    gemm_upload(&p, M, N, K, 6, hc, &g);
    float *a0 = g.a0, *a1 = g.a1, *b0 = g.b0, *b1 = g.b1, *c0 = g.c0, *c1 = g.c1;
    void *ev[3];
    for (int i = 0; i < 3; i++)
        ck_assert_msg((ev[i] = tt_dev_event_create(&p.dev)) != NULL, "%s: event_create failed", ops->name);
    for (int round = 0; round < 2; round++) {
        tt_dev_event_record(&p.dev, ev[0]);
        for (int k = 0; k < 2; k++) tt_dev_sgemm(&p.dev, 0, 0, M, N, K, 1.0f, a1, K, b1, N, 0.0f, c1, N);
        tt_dev_event_record(&p.dev, ev[1]);
        tt_dev_event_record(&p.dev, ev[2]); /* nothing in between */
        tt_dev_sync(&p.dev);
        double work = tt_dev_event_elapsed(&p.dev, ev[0], ev[1]), empty = tt_dev_event_elapsed(&p.dev, ev[1], ev[2]);
        double all = tt_dev_event_elapsed(&p.dev, ev[0], ev[2]);
        ck_assert_msg(isfinite(work) && work > 0, "%s round %d: elapsed around two GEMMs %g s", ops->name, round, work);
        ck_assert_msg(isfinite(empty) && empty >= 0, "%s round %d: elapsed over nothing %g s", ops->name, round, empty);
        ck_assert_msg(isfinite(all) && all >= work, "%s round %d: a to c %g s < a to b %g s", ops->name, round, all,
                      work);
        ck_assert_msg(work < 60, "%s: %g s for 0.1 GFLOP: not seconds?", ops->name, work);
    }
    for (int i = 0; i < 3; i++) tt_dev_event_destroy(&p.dev, ev[i]);
    tt_dev_sgemm(&p.cpu, 0, 0, M, N, K, 1.0f, a0, K, b0, N, 0.0f, c0, N);
    compare(&p, "sgemm between events", c0, c1, M * N, 1e-4, 1e-4);
    gemm_free(&p, &g);
    tt_free(hc);
    pair_free(&p);
}
END_TEST

/* The side streams of --overlap on: a push of a buffer the tower's stream is still writing waits for the event
 * after the write; a pull ahead into a buffer, then the tower's stream waiting for it before a kernel reads it; a
 * zero-byte copy still records its event. The same floats on every backend, and the events complete. */
START_TEST(test_side_copies)
{
    enum { N = 70000 };
    tt_dev *dv = NULL;
    pair p;
    pair_init(&p);
    dv = &p.dev;
    float *d_x = (float *)tt_dev_alloc(dv, N * sizeof(float)), *d_y = (float *)tt_dev_alloc(dv, N * sizeof(float));
    float *h_out = (float *)tt_dev_host_alloc(dv, N * sizeof(float)), *h_in = (float *)tt_dev_host_alloc(dv, N * sizeof(float));
    ck_assert(d_x && d_y && h_out && h_in);
    void *ready = tt_dev_event_create(dv), *pushed = tt_dev_event_create(dv), *pulled = tt_dev_event_create(dv);
    ck_assert(ready && pushed && pulled);
    /* As in the trainer, the pull ahead (no event to wait for) writes a buffer no work on the tower's stream is still
     * writing: the host has seen that stream pass it. Here that is d_y's NaN poison, a kernel on the tower's stream
     * (on an H200 the unordered pull landed first, and the poison overwrote it). */
    tt_dev_sync(dv);
    for (int i = 0; i < N; i++) h_in[i] = (float)(i % 97) - 48.0f;
    tt_dev_fill(dv, d_x, N, 2.5f);
    tt_dev_event_record(dv, ready);
    tt_dev_side_copy(dv, h_out, d_x, N * sizeof(float), 0, ready, pushed);
    tt_dev_side_copy(dv, d_y, h_in, N * sizeof(float), 1, NULL, pulled);
    tt_dev_side_copy(dv, h_out, d_x, 0, 0, NULL, ready); /* nothing to copy: the event still records */
    tt_dev_stream_wait(dv, pulled);
    tt_dev_add(dv, d_y, d_y, N); /* reads what the pull ahead wrote */
    tt_dev_event_sync(dv, pushed);
    ck_assert(tt_dev_event_done(dv, pushed));
    for (int i = 0; i < N; i++) ck_assert_msg(h_out[i] == 2.5f, "%s: pushed[%d] = %g", ops->name, i, h_out[i]);
    tt_dev_sync(dv);
    ck_assert(tt_dev_event_done(dv, pulled) && tt_dev_event_done(dv, ready));
    tt_dev_d2h(dv, h_out, d_y, N * sizeof(float));
    tt_dev_sync(dv);
    for (int i = 0; i < N; i++)
        ck_assert_msg(h_out[i] == 2.0f * h_in[i], "%s: pulled and doubled [%d] = %g", ops->name, i, h_out[i]);
    tt_dev_event_destroy(dv, ready);
    tt_dev_event_destroy(dv, pushed);
    tt_dev_event_destroy(dv, pulled);
    tt_dev_dfree(dv, d_x);
    tt_dev_dfree(dv, d_y);
    tt_dev_host_free(dv, h_out);
    tt_dev_host_free(dv, h_in);
    pair_free(&p);
}
END_TEST

/* A peer copy between two devices — devices[0] and devices[1] of the backend (the CPU backend has one memory: two
 * contexts on it) — in both directions: exact, and the guards after the destination intact. Each handle's calls run
 * with its own device bound, as in a tower thread. Sizes: one float, an odd count, 4 MiB. */
START_TEST(test_peer_copy_two_devices)
{
    const int ord[2] = {g_be.devices[0], g_be.n_devices > 1 ? g_be.devices[1] : g_be.devices[0]};
    tt_dev d[2];
    tt_error err;
    /* peer access as a run sets it up (twice: the second finds it enabled already), so a GPU pair that allows it is
     * tested on the direct path; the matrix must say so consistently */
    int link[4], again[4];
    ck_assert_msg(tt_backend_links(ops, ord, 2, link, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(tt_backend_links(ops, ord, 2, again, &err) == TT_OK, "second peer setup: %s", err.msg);
    ck_assert(memcmp(link, again, sizeof link) == 0);
    ck_assert(link[0] == TT_LINK_SAME && link[3] == TT_LINK_SAME);
    ck_assert(ord[0] != ord[1] || (link[1] == TT_LINK_SAME && link[2] == TT_LINK_SAME));
    printf("%s: peer copies %d <-> %d: %s / %s\n", ops->name, ord[0], ord[1],
           link[1] == TT_LINK_PEER ? "direct" : link[1] == TT_LINK_SAME ? "one memory" : "staged",
           link[2] == TT_LINK_PEER ? "direct" : link[2] == TT_LINK_SAME ? "one memory" : "staged");
    for (int i = 0; i < 2; i++) ck_assert_msg(tt_dev_init(&d[i], ops, ord[i], &err) == TT_OK, "%s", err.msg);
    const size_t sizes[] = {1, 1001, 1 << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int dir = 0; dir < 2; dir++) {
            const size_t n = sizes[s];
            tt_dev *src = &d[dir], *dst = &d[1 - dir];
            float *hx = random_host(n, 60 + s), *hy = (float *)tt_malloc((n + GUARD) * sizeof(float));
            for (size_t i = 0; i < n + GUARD; i++) hy[i] = i < n ? -1.0f : GUARD_VALUE;
            tt_dev_bind(src);
            float *d_src = tt_dev_alloc_f32(src, n);
            ck_assert_ptr_nonnull(d_src);
            tt_dev_h2d(src, d_src, hx, n * sizeof(float));
            tt_dev_sync(src); /* the source is complete before the copy, as the trainer's barrier ensures */
            tt_dev_bind(dst);
            float *d_dst = tt_dev_alloc_f32(dst, n + GUARD);
            ck_assert_ptr_nonnull(d_dst);
            tt_dev_h2d(dst, d_dst, hy, (n + GUARD) * sizeof(float));
            tt_dev_peer_copy(dst, d_dst, src, d_src, n * sizeof(float));
            float *got = fetch(dst, d_dst, n + GUARD);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(got[i] == hx[i], "%s peer copy %d -> %d, %zu floats: [%zu] = %g, want %g", ops->name,
                              ord[dir], ord[1 - dir], n, i, got[i], hx[i]);
            for (int g = 0; g < GUARD; g++)
                ck_assert_msg(got[n + g] == GUARD_VALUE, "%s peer copy %d -> %d: wrote past the end", ops->name,
                              ord[dir], ord[1 - dir]);
            tt_dev_dfree(dst, d_dst);
            tt_dev_bind(src);
            tt_dev_dfree(src, d_src);
            tt_free(got);
            tt_free(hx);
            tt_free(hy);
        }
    for (int i = 0; i < 2; i++) tt_dev_free(&d[i]);
}
END_TEST

/* The table has every op a backend must have (include/tt_dev.h's list, need MUST and every OP); a copy without one of
 * them — an op on the stream, the init that makes a context — is refused by tt_dev_init, which names it; one without
 * an optional op is not. */
/* The 16-bit formats: round16 and widen16 to the bit, narrow16's bits and counts exactly (its counts past
 * TT_NARROW_PARTS elements, with and without an output, and for none), on values at the formats' edges and random
 * ones over many binades; then a GEMM under gemm_format on operands rounded to the format (the towers' case: the
 * tensor cores' exact conversion) and on operands that are not (the backend converts them) against the CPU's sgemm
 * of the rounded operands. */
static float *edge_values(size_t n, uint64_t seed)
{
    static const float edges[] = {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, -7e4f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f,
                                  1e-30f, 1e30f, INFINITY, -INFINITY, NAN, 1.00390625f, 0x1p-133f, 3.4e38f, 1e-41f};
    float *h = random_host(n, seed);
    tt_rng r;
    tt_rng_seed(&r, seed, 7);
    for (size_t i = 0; i < n; i++)
        h[i] = i < sizeof edges / sizeof edges[0] ? edges[i] : h[i] * ldexpf(1.0f, (int)tt_rng_below(&r, 80) - 60);
    return h;
}

static void compare_u32(pair *p, const char *what, const uint32_t *d0, const uint32_t *d1, size_t n)
{
    uint32_t *a = (uint32_t *)tt_malloc(n * 4), *b = (uint32_t *)tt_malloc(n * 4);
    tt_dev_d2h(&p->cpu, a, d0, n * 4);
    tt_dev_d2h(&p->dev, b, d1, n * 4);
    tt_dev_sync(&p->cpu);
    tt_dev_sync(&p->dev);
    for (size_t i = 0; i < n; i++) ck_assert_msg(a[i] == b[i], "%s: %s[%zu] = %u, cpu %u", what, ops->name, i, b[i], a[i]);
    tt_free(a);
    tt_free(b);
}

START_TEST(test_precision_ops)
{
    pair p;
    pair_init(&p);
    const size_t sizes[] = {1, 17, 3000};
    for (int fmt = TT_FMT_BF16; fmt <= TT_FMT_FP16; fmt++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            const size_t n = sizes[k];
            float *h = edge_values(n, 40 + k), *x0, *x1;
            char what[64];
            upload(&p, h, n, &x0, &x1);
            tt_dev_round16(&p.cpu, x0, n, fmt);
            tt_dev_round16(&p.dev, x1, n, fmt);
            snprintf(what, sizeof what, "round16 fmt %d n %zu", fmt, n);
            compare(&p, what, x0, x1, n, 0, 0);
            /* narrow16 of the raw values, then widen16 of its bits: round16's result again */
            uint16_t *y0 = (uint16_t *)tt_dev_alloc(&p.cpu, 2 * n + 64), *y1 = (uint16_t *)tt_dev_alloc(&p.dev, 2 * n + 64);
            uint32_t *c0 = (uint32_t *)tt_dev_alloc(&p.cpu, 4 * TT_NARROW_COUNTS);
            uint32_t *c1 = (uint32_t *)tt_dev_alloc(&p.dev, 4 * TT_NARROW_COUNTS);
            upload(&p, h, n, &x0, &x1);
            tt_dev_narrow16(&p.cpu, y0, x0, n, fmt, c0);
            tt_dev_narrow16(&p.dev, y1, x1, n, fmt, c1);
            snprintf(what, sizeof what, "narrow16 counts fmt %d n %zu", fmt, n);
            compare_u32(&p, what, c0, c1, 2);
            tt_dev_narrow16(&p.dev, NULL, x1, n, fmt, c1); /* counts only */
            compare_u32(&p, what, c0, c1, 2);
            uint32_t want[2] = {0, 0};
            for (size_t i = 0; i < n; i++) (void)tt_narrow_elem(h[i], fmt, &want[0], &want[1]);
            uint32_t got[2];
            tt_dev_d2h(&p.dev, got, c1, sizeof got);
            tt_dev_sync(&p.dev);
            ck_assert_msg(got[0] == want[0] && got[1] == want[1], "narrow16 counts %u %u, want %u %u", got[0], got[1],
                          want[0], want[1]);
            ck_assert(n < 20 || (want[0] > 0 && want[1] > 0)); /* the values reach both counts */
            float *w0 = tt_dev_alloc_f32(&p.cpu, n + GUARD), *w1 = tt_dev_alloc_f32(&p.dev, n + GUARD);
            float *guard = (float *)tt_malloc((n + GUARD) * sizeof(float));
            for (size_t i = 0; i < n + GUARD; i++) guard[i] = GUARD_VALUE;
            tt_dev_h2d(&p.cpu, w0, guard, (n + GUARD) * sizeof(float));
            tt_dev_h2d(&p.dev, w1, guard, (n + GUARD) * sizeof(float));
            tt_dev_widen16(&p.cpu, w0, y0, n, fmt);
            tt_dev_widen16(&p.dev, w1, y1, n, fmt);
            snprintf(what, sizeof what, "narrow16 + widen16 fmt %d n %zu", fmt, n);
            float *r0 = fetch(&p.cpu, w0, n);
            for (size_t i = 0; i < n; i++) /* the CPU's against the formula, then the device's against the CPU's */
                ck_assert(isnan(h[i]) ? isnan(r0[i]) : memcmp(&r0[i], &(float){tt_round_fmt(h[i], fmt)}, 4) == 0);
            tt_free(r0);
            compare(&p, what, w0, w1, n, 0, 0);
            tt_dev_narrow16(&p.cpu, y0, x0, 0, fmt, c0); /* none: zero counts */
            tt_dev_narrow16(&p.dev, y1, x1, 0, fmt, c1);
            tt_dev_d2h(&p.dev, got, c1, sizeof got);
            tt_dev_sync(&p.dev);
            ck_assert(got[0] == 0 && got[1] == 0);
            tt_dev_dfree(&p.cpu, x0);
            tt_dev_dfree(&p.dev, x1);
            tt_dev_dfree(&p.cpu, y0);
            tt_dev_dfree(&p.dev, y1);
            tt_dev_dfree(&p.cpu, c0);
            tt_dev_dfree(&p.dev, c1);
            tt_free(guard);
            tt_free(h);
        }
    /* GEMMs with 16-bit operands: exact products, FP32 sums (a different order: sgemm's tolerance) */
    for (int fmt = TT_FMT_BF16; fmt <= TT_FMT_FP16; fmt++)
        for (int pre = ops->gemm_format ? 0 : 1; pre < 2; pre++) { /* raw operands: a backend that converts */
            const size_t M = 33, N = 20, K = 257;
            float *hc = random_host(M * N, 3);
            gemm_operands g;
            gemm_upload(&p, M, N, K, 5, hc, &g);
            tt_dev_round16(&p.cpu, g.a0, M * K, fmt); /* the oracle: FP32 sgemm of the rounded operands */
            tt_dev_round16(&p.cpu, g.b0, K * N, fmt);
            if (pre) {
                tt_dev_round16(&p.dev, g.a1, M * K, fmt);
                tt_dev_round16(&p.dev, g.b1, K * N, fmt);
            }
            tt_dev_gemm_format(&p.dev, fmt);
            tt_dev_sgemm(&p.cpu, 0, 1, M, N, K, 1.0f, g.a0, K, g.b0, K, 0.5f, g.c0, N);
            tt_dev_sgemm(&p.dev, 0, 1, M, N, K, 1.0f, g.a1, K, g.b1, K, 0.5f, g.c1, N);
            tt_dev_gemm_format(&p.dev, TT_FMT_FP32);
            char what[64];
            snprintf(what, sizeof what, "sgemm, gemm_format %d, operands %s", fmt, pre ? "rounded" : "raw");
            compare(&p, what, g.c0, g.c1, M * N, 1e-4, 1e-4);
            gemm_free(&p, &g);
            tt_free(hc);
        }
    pair_free(&p);
}
END_TEST

START_TEST(test_table_complete)
{
    ck_assert_msg(tt_dev_ops_missing(ops) == NULL, "%s: its table has no %s", ops->name, tt_dev_ops_missing(ops));
    tt_dev_ops lacking = *ops;
    lacking.softmax_xent = NULL;
    ck_assert_str_eq(tt_dev_ops_missing(&lacking), "softmax_xent");
    tt_dev dev;
    tt_error err;
    ck_assert_int_eq(tt_dev_init(&dev, &lacking, g_be.devices[0], &err), TT_ERR_DEVICE);
    char want[256];
    snprintf(want, sizeof want,
             "the %s backend's table has no softmax_xent, an op every backend must have (include/tt_dev.h, TT_DEV_OPS)",
             ops->name);
    ck_assert_str_eq(err.msg, want);
    ck_assert_ptr_null(dev.ops);
    tt_dev_free(&dev);
    lacking = *ops;
    lacking.init = NULL;
    ck_assert_str_eq(tt_dev_ops_missing(&lacking), "init");
    ck_assert_int_eq(tt_dev_init(&dev, &lacking, g_be.devices[0], &err), TT_ERR_DEVICE);
    lacking = *ops;
    lacking.gemm_bias_act = NULL;
    lacking.comm_init = NULL;
    lacking.capture_end = NULL;
    ck_assert_ptr_null(tt_dev_ops_missing(&lacking));
}
END_TEST

/* Usage: test_backend_ops [--two-devices] [BACKEND...] (default: cuda). `test_backend_ops cpu` runs the harness and
 * every case against the CPU backend itself, which checks them on every machine. Every backend runs the two-device
 * copy when it has two devices (the CPU backend always: one memory); --two-devices runs only that case and, with
 * fewer than two GPUs, skips (CTest test_backend_ops_peer). */
int main(int argc, char **argv)
{
    const int two_only = argc > 1 && strcmp(argv[1], "--two-devices") == 0;
    const int first = 1 + two_only;
    const char *def[] = {"cuda"};
    const char **names = argc > first ? (const char **)argv + first : def;
    size_t count = argc > first ? (size_t)(argc - first) : 1;
    int ran = 0, failed = 0, skip_rc = 0, cuda_touched = 0;
    for (size_t i = 0; i < count; i++) {
        tt_error err;
        cuda_touched |= strcmp(names[i], "cpu") != 0; /* auto and cuda ask the CUDA runtime for its devices */
        if (tt_backend_open(names[i], NULL, &g_be, &err) != TT_OK) {
            char what[64];
            snprintf(what, sizeof what, "backend %s", names[i]);
            skip_rc = tt_test_skip_no_gpu(what, err.msg);
            continue;
        }
        ops = g_be.ops;
        const int is_cpu = ops == &tt_dev_cpu_ops, two = is_cpu || g_be.n_devices >= 2;
        if (two_only && !two) {
            char what[64], why[96];
            snprintf(what, sizeof what, "backend %s: peer copy between two devices", names[i]);
            snprintf(why, sizeof why, "needs two GPUs, this machine has %d", g_be.n_devices);
            skip_rc = tt_test_skip_no_gpu(what, why);
            continue;
        }
        Suite *s = suite_create(names[i]);
        if (!two_only) {
            TCase *tc = tcase_create("ops-vs-cpu");
            tcase_set_timeout(tc, 120);
            tcase_add_test(tc, test_sgemm);
            tcase_add_test(tc, test_sgemm_beta0_ignores_c);
            tcase_add_test(tc, test_elementwise_and_rows);
            tcase_add_test(tc, test_softmax_xent);
            tcase_add_test(tc, test_softmax_xent_eval);
            tcase_add_test(tc, test_conv_pool_ops);
            tcase_add_test(tc, test_dropout_embedding_ops);
            tcase_add_test(tc, test_augment_op);
            tcase_add_test(tc, test_gather_rows);
            tcase_add_test(tc, test_col_sum);
            tcase_add_test(tc, test_batchnorm_ops);
            tcase_add_test(tc, test_fused_epilogues);
            tcase_add_test(tc, test_graphs);
            tcase_add_test(tc, test_gemm_bias_act);
            tcase_add_test(tc, test_gemm_bias_act_fallback_and_graph);
            tcase_add_test(tc, test_gemm_drelu_bgrad);
            tcase_add_test(tc, test_embed_bwd);
            tcase_add_test(tc, test_update);
            tcase_add_test(tc, test_update_flags);
            tcase_add_test(tc, test_side_copies);
            tcase_add_test(tc, test_events);
            tcase_add_test(tc, test_precision_ops);
            tcase_add_test(tc, test_table_complete);
            suite_add_tcase(s, tc);
        }
        if (two) {
            TCase *tc = tcase_create("two-devices");
            tcase_set_timeout(tc, 120);
            tcase_add_test(tc, test_peer_copy_two_devices);
            suite_add_tcase(s, tc);
        } else {
            printf("note: backend %s: %d GPU, so the copy between two devices is left to test_backend_ops_peer, "
                   "which skips\n", names[i], g_be.n_devices);
        }
        /* a process that has initialised CUDA must not fork its tests: CTest's TIMEOUT bounds them instead */
        failed |= tt_test_run_suite_mode(s, cuda_touched ? CK_NOFORK : CK_FORK_GETENV);
        ran++;
    }
    if (!ran) return skip_rc;
    return failed || skip_rc == 1 ? 1 : 0;
}
