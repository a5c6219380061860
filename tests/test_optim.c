/* test_optim.c — each optimizer against hand-computed steps.
 * The expected values below are worked out by hand (first step) or by the Keras formulas in double precision
 * written out here independently of tt_math.h (later steps). Tolerance: rtol 1e-5 (float32 arithmetic). */
#include "tt_optim.h"
#include "tt_test.h"

static void run(tt_optim_config c, const float *g, int steps, float w0, float *w_out)
{
    tt_optim o;
    tt_error err;
    ck_assert_int_eq(tt_optim_init(&o, &c, 1, &err), TT_OK);
    float w = w0;
    for (int t = 0; t < steps; t++) {
        tt_optim_begin_step(&o);
        tt_optim_apply(&o, &w, &g[t], 0, 1);
        w_out[t] = w;
    }
    tt_optim_free(&o);
}

START_TEST(test_sgd_plain)
{
    tt_optim_config c = tt_optim_defaults(TT_OPT_SGD);
    ck_assert_float_eq(c.lr, 0.01f); /* Keras default */
    float g[2] = {2.0f, -1.0f}, w[2];
    run(c, g, 2, 1.0f, w);
    ck_assert(tt_close(w[0], 0.98, 0, 1e-6));  /* 1 - 0.01*2 */
    ck_assert(tt_close(w[1], 0.99, 0, 1e-6));  /* 0.98 + 0.01*1 */
}
END_TEST

START_TEST(test_sgd_momentum_nesterov)
{
    tt_optim_config c = tt_optim_defaults(TT_OPT_SGD);
    c.lr = 0.1f;
    c.momentum = 0.9f;
    float g[2] = {1.0f, 1.0f}, w[2];
    run(c, g, 2, 0.0f, w);
    /* v1 = -0.1, w1 = -0.1; v2 = 0.9*-0.1 - 0.1 = -0.19, w2 = -0.29 */
    ck_assert(tt_close(w[0], -0.1, 0, 1e-6));
    ck_assert(tt_close(w[1], -0.29, 0, 1e-6));
    c.nesterov = 1;
    run(c, g, 2, 0.0f, w);
    /* w1 = 0.9*-0.1 - 0.1 = -0.19; v2 = -0.19, w2 = -0.19 + 0.9*-0.19 - 0.1 = -0.461 */
    ck_assert(tt_close(w[0], -0.19, 0, 1e-6));
    ck_assert(tt_close(w[1], -0.461, 0, 1e-6));
}
END_TEST

START_TEST(test_adam)
{
    tt_optim_config c = tt_optim_defaults(TT_OPT_ADAM);
    ck_assert_float_eq(c.lr, 0.001f);
    ck_assert_float_eq(c.epsilon, 1e-7f);
    float g[3] = {0.5f, -0.25f, 0.125f}, w[3];
    run(c, g, 3, 1.0f, w);
    /* step 1 by hand: m = 0.05, v = 0.00025, alpha = 0.001*sqrt(0.001)/0.1 = 3.16228e-4,
     * w = 1 - alpha * 0.05 / (0.0158114 + 1e-7) = 0.99900000 (Adam's first step is ~lr * sign(g)) */
    ck_assert_msg(tt_close(w[0], 1.0 - 3.16227766e-4 * 0.05 / (sqrt(0.00025) + 1e-7), 0, 1e-6), "w1 %.9g", w[0]);
    double m = 0, v = 0, wd = 1.0;
    for (int t = 1; t <= 3; t++) {
        double gt = g[t - 1];
        m = 0.9 * m + 0.1 * gt;
        v = 0.999 * v + 0.001 * gt * gt;
        double alpha = 0.001 * sqrt(1 - pow(0.999, t)) / (1 - pow(0.9, t));
        wd -= alpha * m / (sqrt(v) + 1e-7);
        ck_assert_msg(tt_close(w[t - 1], wd, 0, 1e-6), "step %d: %.9g want %.9g", t, w[t - 1], wd);
    }
}
END_TEST

/* Keras 3.15 (TensorFlow 2.21): w0 = 1, constant gradient 0.5, Nadam(learning_rate=0.1) -> w after steps 1..3.
 * Tolerance rtol 1e-6: float32 arithmetic on both sides, a few ulps. The TF <= 2.10 schedule 0.96^(0.004 t)
 * gives 0.894 at step 1 and fails. */
START_TEST(test_nadam)
{
    tt_optim_config c = tt_optim_defaults(TT_OPT_NADAM);
    c.lr = 0.1f;
    const float g[3] = {0.5f, 0.5f, 0.5f}, keras[3] = {0.8937212f, 0.8163624f, 0.7452287f};
    float w[3];
    run(c, g, 3, 1.0f, w);
    for (int t = 0; t < 3; t++)
        ck_assert_msg(tt_close(w[t], keras[t], 0, 1e-6), "step %d: %.9g want %.9g", t + 1, w[t], keras[t]);
}
END_TEST

START_TEST(test_parse_kind)
{
    tt_optim_kind k;
    ck_assert_int_eq(tt_optim_parse_kind("adam", &k), 0);
    ck_assert_int_eq(k, TT_OPT_ADAM);
    ck_assert_int_eq(tt_optim_parse_kind("rmsprop", &k), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_sgd_plain);
    tcase_add_test(tc, test_sgd_momentum_nesterov);
    tcase_add_test(tc, test_adam);
    tcase_add_test(tc, test_nadam);
    tcase_add_test(tc, test_parse_kind);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
