/* test_backend_ops.c — every op of a device backend against the CPU backend (the oracle), over several shapes,
 * with guard elements after every output that must come back untouched (ggml test-backend-ops style).
 * Runs for each non-CPU backend this build has and this machine can use; with none, it is a visible skip (77).
 *
 * Tolerances: elementwise ops and copies must match exactly or to 1e-6 relative (the same tt_math.h code, but
 * the GPU's expf/logf may differ by an ulp or two); sgemm uses per element atol 1e-4 + rtol 1e-4 on O(1) inputs with
 * K <= 300 (a different summation order, FP32 only: TF32 is switched off in the backend). */
#include "tt_backend.h"
#include "tt_test.h"

enum { GUARD = 16 };
static const float GUARD_VALUE = 12345.0f;
static const tt_dev_ops *ops; /* the backend under test */

typedef struct pair {
    tt_dev cpu, dev;
} pair;

static void pair_init(pair *p)
{
    tt_error err;
    ck_assert_int_eq(tt_dev_init(&p->cpu, &tt_dev_cpu_ops, 0, &err), TT_OK);
    ck_assert_msg(tt_dev_init(&p->dev, ops, 0, &err) == TT_OK, "%s", err.msg);
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
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(tt_close(b[i], a[i], atol, rtol), "%s: %s[%zu] = %.9g, cpu %.9g", what, ops->name, i, b[i], a[i]);
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

START_TEST(test_sgemm)
{
    pair p;
    pair_init(&p);
    const size_t shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {128, 256, 300}, {33, 10, 256}, {256, 17, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                float *ha = random_host(M * K, 1), *hb = random_host(K * N, 2), *hc = random_host(M * N, 3);
                float *a0, *a1, *b0, *b1, *c0, *c1;
                upload(&p, ha, M * K, &a0, &a1);
                upload(&p, hb, K * N, &b0, &b1);
                upload(&p, hc, M * N, &c0, &c1);
                size_t lda = ta ? M : K, ldb = tb ? K : N;
                tt_dev_sgemm(&p.cpu, ta, tb, M, N, K, 0.5f, a0, lda, b0, ldb, 0.25f, c0, N);
                tt_dev_sgemm(&p.dev, ta, tb, M, N, K, 0.5f, a1, lda, b1, ldb, 0.25f, c1, N);
                char what[64];
                snprintf(what, sizeof what, "sgemm %zux%zux%zu ta=%d tb=%d", M, N, K, ta, tb);
                compare(&p, what, c0, c1, M * N, 1e-4, 1e-4);
                tt_dev_dfree(&p.cpu, a0);
                tt_dev_dfree(&p.dev, a1);
                tt_dev_dfree(&p.cpu, b0);
                tt_dev_dfree(&p.dev, b1);
                tt_free(ha);
                tt_free(hb);
                tt_free(hc);
            }
    pair_free(&p);
}
END_TEST

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
        /* col_sum (same summation order on both) */
        upload(&p, hx, n, &x0, &x1);
        tt_dev_col_sum(&p.cpu, b0, x0, R, C);
        tt_dev_col_sum(&p.dev, b1, x1, R, C);
        compare(&p, "col_sum", b0, b1, C, 1e-6, 1e-6);
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
        ck_assert_msg(tt_dev_init(&peer, ops, 0, &perr) == TT_OK, "%s", perr.msg);
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

/* Usage: test_backend_ops [BACKEND...] (default: cuda). `test_backend_ops cpu` runs the harness against the CPU
 * backend itself, which checks the harness (guards, shapes, frees) on every machine. */
int main(int argc, char **argv)
{
    const char *def[] = {"cuda"};
    const char **names = argc > 1 ? (const char **)argv + 1 : def;
    size_t count = argc > 1 ? (size_t)argc - 1 : 1;
    int ran = 0, failed = 0;
    for (size_t i = 0; i < count; i++) {
        tt_backend be;
        tt_error err;
        if (tt_backend_open(names[i], NULL, &be, &err) != TT_OK) {
            printf("SKIP: backend %s: %s\n", names[i], err.msg);
            continue;
        }
        ops = be.ops;
        Suite *s = suite_create(names[i]);
        TCase *tc = tcase_create("ops-vs-cpu");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_sgemm);
        tcase_add_test(tc, test_elementwise_and_rows);
        tcase_add_test(tc, test_softmax_xent);
        suite_add_tcase(s, tc);
        failed |= tt_test_run_suite(s);
        ran++;
    }
    return ran ? failed : 77;
}
