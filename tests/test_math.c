/* test_math.c — the shared per-row / per-element math against closed forms, through the CPU backend's ops. */
#include "tt_dev.h"
#include "tt_math.h"
#include "tt_test.h"

/* loss = log(sum_j e^{z_j}) - z_label, gradient = softmax - onehot: computed here in double from the definition. */
START_TEST(test_softmax_xent_closed_form)
{
    const float z[4] = {1.0f, 2.0f, 3.0f, -0.5f};
    for (int label = 0; label < 4; label++) {
        double sum = 0;
        for (int i = 0; i < 4; i++) sum += exp((double)z[i]);
        double want_loss = log(sum) - z[label];
        float dz[4];
        int rank;
        float loss = tt_softmax_xent_row(z, 4, label, 0.5f, dz, &rank);
        ck_assert_msg(tt_close(loss, want_loss, 1e-6, 1e-6), "label %d: loss %g want %g", label, loss, want_loss);
        double gsum = 0;
        for (int i = 0; i < 4; i++) {
            double want = 0.5 * (exp((double)z[i]) / sum - (i == label));
            ck_assert_msg(tt_close(dz[i], want, 1e-7, 1e-6), "dz[%d] %g want %g", i, dz[i], want);
            gsum += dz[i];
        }
        ck_assert(fabs(gsum) < 1e-6); /* softmax sums to one, so the gradient sums to zero */
        int want_rank = 0;
        for (int i = 0; i < 4; i++) want_rank += z[i] > z[label];
        ck_assert_int_eq(rank, want_rank);
    }
}
END_TEST

/* Huge logits must not overflow (the max shift). */
START_TEST(test_softmax_xent_stable)
{
    const float z[3] = {1000.0f, 999.0f, -1000.0f};
    float dz[3];
    int rank;
    float loss = tt_softmax_xent_row(z, 3, 1, 1.0f, dz, &rank);
    double want = log(1.0 + exp(-1.0) + exp(-2000.0)) + 1.0;
    ck_assert(isfinite(loss));
    ck_assert(tt_close(loss, want, 1e-5, 1e-5));
    ck_assert_int_eq(rank, 1);
    for (int i = 0; i < 3; i++) ck_assert(isfinite(dz[i]));
}
END_TEST

START_TEST(test_pixel)
{
    ck_assert_float_eq(tt_pixel(0, 1.0f / 255.0f), 0.0f);
    ck_assert_float_eq(tt_pixel(255, 1.0f / 255.0f), 1.0f);
}
END_TEST

START_TEST(test_relu)
{
    ck_assert_float_eq(tt_relu(-2.0f), 0.0f);
    ck_assert_float_eq(tt_relu(3.5f), 3.5f);
    ck_assert_float_eq(tt_relu_grad(7.0f, 0.0f), 0.0f);
    ck_assert_float_eq(tt_relu_grad(7.0f, 0.25f), 7.0f);
}
END_TEST

/* The CPU backend's row ops: bias_add, col_sum, softmax_xent stats layout. */
START_TEST(test_cpu_row_ops)
{
    tt_dev dev;
    tt_error err;
    ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
    float *d_y = tt_dev_alloc_f32(&dev, 6), *d_b = tt_dev_alloc_f32(&dev, 3), *d_s = tt_dev_alloc_f32(&dev, 3);
    ck_assert(isnan(d_y[0])); /* new device memory is poisoned */
    const float y[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
    tt_dev_h2d(&dev, d_y, y, sizeof y);
    tt_dev_h2d(&dev, d_b, b, sizeof b);
    tt_dev_bias_add(&dev, d_y, d_b, 2, 3);
    tt_dev_col_sum(&dev, d_s, d_y, 2, 3);
    float s[3];
    tt_dev_d2h(&dev, s, d_s, sizeof s);
    tt_dev_sync(&dev);
    ck_assert_float_eq(s[0], 25.0f);
    ck_assert_float_eq(s[1], 47.0f);
    ck_assert_float_eq(s[2], 69.0f);
    tt_dev_dfree(&dev, d_y);
    tt_dev_dfree(&dev, d_b);
    tt_dev_dfree(&dev, d_s);
    tt_dev_free(&dev);
    tt_dev_free(&dev); /* twice is fine */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("math");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_softmax_xent_closed_form);
    tcase_add_test(tc, test_softmax_xent_stable);
    tcase_add_test(tc, test_relu);
    tcase_add_test(tc, test_pixel);
    tcase_add_test(tc, test_cpu_row_ops);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
