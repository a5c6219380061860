/* test_optim.c — SGD, Adam and Nadam against weights recorded from a real Keras run.
 *
 * The cases between BEGIN and END were printed by tools/keras_reference.py (TensorFlow 2.21.0, Keras 3.15.1 with
 * the TensorFlow backend, CPU): a Keras optimizer applied to a float32 variable of 1 or 3 elements, one given
 * gradient per step, the variable read back after every step. The tests run towertrain's optimizer on the same
 * gradients and compare with those numbers, not with a second copy of its own formulas. To add or change a case,
 * edit the script, run it with a Keras venv and paste its output here; TensorFlow is never needed to run the tests.
 *
 * The cases are several steps long, with gradients that change size and sign and differ per element, so a wrong
 * moment update, bias correction, momentum rule or schedule moves the weights; adam_small and nadam_small use
 * gradients near 1e-4, 3e-6 and 1e-7, where sqrt(v) is 30 times, about equal to, or far below epsilon (1e-7), so
 * that epsilon's place (sqrt(v) + eps, not sqrt(v + eps)) sets the size of the update: the misplaced one makes
 * those updates 100 to 3000 times smaller. */
#include <float.h>

#include "tt_optim.h"
#include "tt_test.h"

#define KC_MAX_N 3
#define KC_MAX_STEPS 10

typedef struct keras_case {
    const char *name;
    tt_optim_config cfg;
    int n, steps;
    float w0[KC_MAX_N];               /* the variable before the first step */
    float g[KC_MAX_STEPS][KC_MAX_N];  /* the gradient of each step */
    float w[KC_MAX_STEPS][KC_MAX_N];  /* the variable after each step, as Keras left it */
} keras_case;

/* BEGIN keras_reference.py output: TensorFlow 2.21.0, Keras 3.15.1 (backend tensorflow), NumPy 2.4.6 */
static const keras_case KERAS_CASES[] = {
    /* keras.optimizers.SGD(learning_rate=0.1) */
    {.name = "sgd_plain",
     .cfg = {.kind = TT_OPT_SGD, .lr = 0.100000001f, .momentum = 0.0f, .nesterov = 0},
     .n = 3, .steps = 6, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -1.0f, 2.0f},
           {0.25f, 0.75f, -1.5f},
           {-0.125f, 0.300000012f, 0.699999988f},
           {1.0f, -0.200000003f, -0.899999976f},
           {0.600000024f, 0.100000001f, 0.0500000007f},
           {-0.400000006f, -0.349999994f, 1.10000002f}},
     .w = {{0.949999988f, -0.400000006f, 0.049999997f},
           {0.925000012f, -0.475000024f, 0.200000003f},
           {0.9375f, -0.504999995f, 0.129999995f},
           {0.837499976f, -0.484999985f, 0.219999999f},
           {0.777499974f, -0.494999975f, 0.215000004f},
           {0.817499995f, -0.459999979f, 0.104999997f}}},
    /* keras.optimizers.SGD(learning_rate=0.1, momentum=0.9) */
    {.name = "sgd_momentum",
     .cfg = {.kind = TT_OPT_SGD, .lr = 0.100000001f, .momentum = 0.899999976f, .nesterov = 0},
     .n = 3, .steps = 7, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -1.0f, 2.0f},
           {0.25f, 0.75f, -1.5f},
           {-0.125f, 0.300000012f, 0.699999988f},
           {1.0f, -0.200000003f, -0.899999976f},
           {0.600000024f, 0.100000001f, 0.0500000007f},
           {-0.400000006f, -0.349999994f, 1.10000002f},
           {0.200000003f, 0.449999988f, -0.300000012f}},
     .w = {{0.949999988f, -0.400000006f, 0.049999997f},
           {0.879999995f, -0.38500002f, 0.0200000107f},
           {0.82950002f, -0.401500016f, -0.0769999772f},
           {0.684050024f, -0.396350026f, -0.0742999688f},
           {0.493145049f, -0.40171504f, -0.0768699646f},
           {0.361330569f, -0.371543556f, -0.189182967f},
           {0.222697541f, -0.389389217f, -0.260264665f}}},
    /* keras.optimizers.SGD(learning_rate=0.1, momentum=0.9, nesterov=True) */
    {.name = "sgd_nesterov",
     .cfg = {.kind = TT_OPT_SGD, .lr = 0.100000001f, .momentum = 0.899999976f, .nesterov = 1},
     .n = 3, .steps = 7, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -1.0f, 2.0f},
           {0.25f, 0.75f, -1.5f},
           {-0.125f, 0.300000012f, 0.699999988f},
           {1.0f, -0.200000003f, -0.899999976f},
           {0.600000024f, 0.100000001f, 0.0500000007f},
           {-0.400000006f, -0.349999994f, 1.10000002f},
           {0.200000003f, 0.449999988f, -0.300000012f}},
     .w = {{0.904999971f, -0.310000002f, -0.129999995f},
           {0.816999972f, -0.371500015f, -0.00699997693f},
           {0.784049988f, -0.416350007f, -0.164299965f},
           {0.553144991f, -0.39171502f, -0.0718699619f},
           {0.321330488f, -0.406543523f, -0.0791829526f},
           {0.242697462f, -0.34438917f, -0.290264666f},
           {0.0979277343f, -0.405450255f, -0.324238181f}}},
    /* keras.optimizers.Adam() */
    {.name = "adam_default",
     .cfg = {.kind = TT_OPT_ADAM, .lr = 0.00100000005f,
             .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
     .n = 3, .steps = 8, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -0.300000012f, 1.20000005f},
           {-0.25f, -0.600000024f, 0.899999976f},
           {0.125f, 0.200000003f, -2.0f},
           {0.400000006f, -0.100000001f, 0.300000012f},
           {-0.800000012f, 0.0500000007f, 0.600000024f},
           {0.300000012f, -0.449999988f, -0.699999988f},
           {0.600000024f, 0.25f, 0.150000006f},
           {-0.0500000007f, -0.300000012f, 1.5f}},
     .w = {{0.999000013f, -0.499000013f, 0.249000013f},
           {0.998733699f, -0.498034835f, 0.248017445f},
           {0.998393297f, -0.497502506f, 0.248073161f},
           {0.997831762f, -0.496988595f, 0.248049185f},
           {0.997930944f, -0.496593833f, 0.24790287f},
           {0.997871101f, -0.496026516f, 0.247917682f},
           {0.997583091f, -0.495696515f, 0.247902244f},
           {0.997349143f, -0.495260417f, 0.24764815f}}},
    /* keras.optimizers.Adam(learning_rate=0.01, beta_1=0.8, beta_2=0.95, epsilon=0.0001) */
    {.name = "adam_custom",
     .cfg = {.kind = TT_OPT_ADAM, .lr = 0.00999999978f,
             .beta1 = 0.800000012f, .beta2 = 0.949999988f, .epsilon = 9.99999975e-05f},
     .n = 3, .steps = 6, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -0.300000012f, 1.20000005f},
           {-0.25f, -0.600000024f, 0.899999976f},
           {0.125f, 0.200000003f, -2.0f},
           {0.400000006f, -0.100000001f, 0.300000012f},
           {-0.800000012f, 0.0500000007f, 0.600000024f},
           {0.300000012f, -0.449999988f, -0.699999988f}},
     .w = {{0.99000895f, -0.490014881f, 0.24000372f},
           {0.987886071f, -0.480258048f, 0.230229154f},
           {0.98479563f, -0.475460887f, 0.231667459f},
           {0.978973925f, -0.470818937f, 0.231962919f},
           {0.980956316f, -0.467616975f, 0.230631143f},
           {0.98070991f, -0.461908221f, 0.231362954f}}},
    /* keras.optimizers.Adam() */
    {.name = "adam_small",
     .cfg = {.kind = TT_OPT_ADAM, .lr = 0.00100000005f,
             .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
     .n = 3, .steps = 10, .w0 = {0.5f, -0.25f, 0.125f},
     .g = {{9.99999975e-05f, 1.00000001e-07f, -3.00000011e-06f},
           {0.000150000007f, 2.00000002e-07f, -1.99999999e-06f},
           {-4.99999987e-05f, -1.00000001e-07f, 3.99999999e-06f},
           {7.9999998e-05f, 1.50000005e-07f, -3.00000011e-06f},
           {0.000119999997f, 5.00000006e-08f, -9.99999997e-07f},
           {-9.99999975e-05f, 1.00000001e-07f, 4.99999987e-06f},
           {9.00000014e-05f, -7.99999995e-08f, -2.49999994e-06f},
           {0.000110000001f, 1.19999996e-07f, -3.50000005e-06f},
           {9.99999975e-05f, 1.00000001e-07f, 1.99999999e-06f},
           {7.00000019e-05f, 9.00000003e-08f, -3.00000011e-06f}},
     .w = {{0.49903065f, -0.250030667f, 0.125486836f},
           {0.498056948f, -0.250094414f, 0.126003698f},
           {0.497499228f, -0.250124604f, 0.126020893f},
           {0.496853471f, -0.250174284f, 0.126220807f},
           {0.49610877f, -0.250224113f, 0.126446322f},
           {0.495718569f, -0.25028187f, 0.126376003f},
           {0.495230883f, -0.250320494f, 0.126426414f},
           {0.494647831f, -0.250371307f, 0.12661016f},
           {0.494001299f, -0.250430107f, 0.126691848f},
           {0.493332446f, -0.250494748f, 0.126874611f}}},
    /* keras.optimizers.Nadam(learning_rate=0.1) */
    {.name = "nadam_const",
     .cfg = {.kind = TT_OPT_NADAM, .lr = 0.100000001f,
             .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
     .n = 1, .steps = 6, .w0 = {1.0f},
     .g = {{0.5f},
           {0.5f},
           {0.5f},
           {0.5f},
           {0.5f},
           {0.5f}},
     .w = {{0.893721223f},
           {0.816362441f},
           {0.745228708f},
           {0.675055742f},
           {0.604022801f},
           {0.531422257f}}},
    /* keras.optimizers.Nadam(learning_rate=0.01) */
    {.name = "nadam_vary",
     .cfg = {.kind = TT_OPT_NADAM, .lr = 0.00999999978f,
             .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
     .n = 3, .steps = 8, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -0.300000012f, 1.20000005f},
           {-0.25f, -0.600000024f, 0.899999976f},
           {0.125f, 0.200000003f, -2.0f},
           {0.400000006f, -0.100000001f, 0.300000012f},
           {-0.800000012f, 0.0500000007f, 0.600000024f},
           {0.300000012f, -0.449999988f, -0.699999988f},
           {0.600000024f, 0.25f, 0.150000006f},
           {-0.0500000007f, -0.300000012f, 1.5f}},
     .w = {{0.989372134f, -0.489372134f, 0.239372119f},
           {0.993298054f, -0.479910761f, 0.232663348f},
           {0.990664661f, -0.481899291f, 0.24053511f},
           {0.983732998f, -0.47947669f, 0.239268571f},
           {0.992075443f, -0.479336381f, 0.236435354f},
           {0.988853216f, -0.471786052f, 0.239418328f},
           {0.982394695f, -0.474131286f, 0.238717556f},
           {0.982088387f, -0.468751281f, 0.231972679f}}},
    /* keras.optimizers.Nadam() */
    {.name = "nadam_small",
     .cfg = {.kind = TT_OPT_NADAM, .lr = 0.00100000005f,
             .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
     .n = 3, .steps = 10, .w0 = {0.5f, -0.25f, 0.125f},
     .g = {{9.99999975e-05f, 1.00000001e-07f, -3.00000011e-06f},
           {0.000150000007f, 2.00000002e-07f, -1.99999999e-06f},
           {-4.99999987e-05f, -1.00000001e-07f, 3.99999999e-06f},
           {7.9999998e-05f, 1.50000005e-07f, -3.00000011e-06f},
           {0.000119999997f, 5.00000006e-08f, -9.99999997e-07f},
           {-9.99999975e-05f, 1.00000001e-07f, 4.99999987e-06f},
           {9.00000014e-05f, -7.99999995e-08f, -2.49999994e-06f},
           {0.000110000001f, 1.19999996e-07f, -3.50000005e-06f},
           {9.99999975e-05f, 1.00000001e-07f, 1.99999999e-06f},
           {7.00000019e-05f, 9.00000003e-08f, -3.00000011e-06f}},
     .w = {{0.498938262f, -0.250531405f, 0.126028508f},
           {0.498048753f, -0.251111031f, 0.126631752f},
           {0.498224288f, -0.250914842f, 0.125935003f},
           {0.497697622f, -0.251296997f, 0.126473531f},
           {0.496978402f, -0.251477957f, 0.126715094f},
           {0.497312546f, -0.251778215f, 0.12600638f},
           {0.496776551f, -0.251687288f, 0.126365125f},
           {0.496125996f, -0.252016097f, 0.126897186f},
           {0.495485842f, -0.252322108f, 0.126678199f},
           {0.494937658f, -0.252622932f, 0.127148002f}}},
};
/* the default arguments of each optimizer, from default-constructed Keras objects */
static const tt_optim_config KERAS_DEFAULTS[] = {
    {.kind = TT_OPT_SGD, .lr = 0.00999999978f, .momentum = 0.0f, .nesterov = 0},
    {.kind = TT_OPT_ADAM, .lr = 0.00100000005f,
     .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
    {.kind = TT_OPT_NADAM, .lr = 0.00100000005f,
     .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
};
/* END keras_reference.py output */

#define N_CASES (int)(sizeof KERAS_CASES / sizeof KERAS_CASES[0])

/* Tolerance, per element and step: |w - w_keras| <= W_ULPS * 2^-23 |w_keras| + STEP_RTOL * path, where path is the
 * distance the Keras weight has travelled so far (the sum of |step|).
 * - W_ULPS = 4 (2^-23 |w| is one to two ulps of w): both sides compute in float32, and rounding each update into
 *   w differs by an ulp now and then.
 * - STEP_RTOL = 2e-5: Keras computes the per-step scalars in float32, optim.c in double. The worst is 1 - beta_2^t
 *   (Adam's alpha, Nadam's v_hat): beta_2^t ~ 0.998 carries a rounding error of up to ~6e-8, which is up to 3e-5 of
 *   1 - beta_2^t at t = 2 (cancellation), 1.5e-5 after the sqrt; so a step's size may differ by ~1.5e-5 of itself.
 * Measured over all cases: at most 6.6 x 2^-23 |w| (nadam_const, lr 0.1: big steps), 4.8e-7 of the path beyond
 * W_ULPS; every run prints both. A formula error (epsilon inside the sqrt, the legacy Nadam schedule, the bias
 * correction of step t+1, beta_1 for beta_2, Nesterov without the look-ahead) changes some step of some case by
 * 1e-3 of its size or far more, and fails. */
#define W_ULPS 4.0
#define STEP_RTOL 2e-5

/* Runs case kc with the whole variable in one tt_optim_apply call (slices == 0), or one call per element
 * (slices == 1: the state must be indexed by absolute position, as the trainer's host slices need). */
static void run_case(const keras_case *kc, int slices, float w[KC_MAX_STEPS][KC_MAX_N])
{
    tt_optim o;
    tt_error err;
    ck_assert_int_eq(tt_optim_init(&o, &kc->cfg, (size_t)kc->n, &err), TT_OK);
    float cur[KC_MAX_N];
    memcpy(cur, kc->w0, sizeof cur);
    for (int t = 0; t < kc->steps; t++) {
        tt_optim_begin_step(&o);
        if (slices)
            for (int i = 0; i < kc->n; i++) tt_optim_apply(&o, &cur[i], &kc->g[t][i], (size_t)i, (size_t)i + 1);
        else
            tt_optim_apply(&o, cur, kc->g[t], 0, (size_t)kc->n);
        memcpy(w[t], cur, sizeof cur);
    }
    tt_optim_free(&o);
}

START_TEST(test_keras_case)
{
    const keras_case *kc = &KERAS_CASES[_i];
    float w[KC_MAX_STEPS][KC_MAX_N] = {{0}}, ws[KC_MAX_STEPS][KC_MAX_N] = {{0}};
    run_case(kc, 0, w);
    double worst_ulps = 0, worst_path = 0; /* |w - w_keras| / (2^-23 |w_keras|); what exceeds W_ULPS, / path */
    for (int i = 0; i < kc->n; i++) {
        double path = 0, prev = kc->w0[i];
        for (int t = 0; t < kc->steps; t++) {
            const double r = kc->w[t][i], d = fabs((double)w[t][i] - r), ulp_r = FLT_EPSILON * fabs(r);
            path += fabs(r - prev);
            prev = r;
            worst_ulps = fmax(worst_ulps, d / ulp_r);
            if (path > 0) worst_path = fmax(worst_path, (d - W_ULPS * ulp_r) / path);
            ck_assert_msg(d <= W_ULPS * ulp_r + STEP_RTOL * path,
                          "%s step %d element %d: %.9g, Keras %.9g (%.1f x 2^-23 |w|; path so far %.3g)", kc->name,
                          t + 1, i, w[t][i], r, d / ulp_r, path);
        }
    }
    printf("%-13s %2d steps x %d: max |w - w_keras| = %.2f x 2^-23 |w|; beyond %g of those: %.2g of the path\n",
           kc->name, kc->steps, kc->n, worst_ulps, W_ULPS, worst_path);
    run_case(kc, 1, ws);
    ck_assert_msg(memcmp(w, ws, sizeof w) == 0, "%s: applying element by element differs", kc->name);
}
END_TEST

/* tt_optim_defaults gives Keras's default arguments (only the fields each optimizer has). */
START_TEST(test_keras_defaults)
{
    for (size_t k = 0; k < sizeof KERAS_DEFAULTS / sizeof KERAS_DEFAULTS[0]; k++) {
        const tt_optim_config *want = &KERAS_DEFAULTS[k];
        tt_optim_config c = tt_optim_defaults(want->kind);
        ck_assert_int_eq(c.kind, want->kind);
        ck_assert_float_eq(c.lr, want->lr);
        if (want->kind == TT_OPT_SGD) {
            ck_assert_float_eq(c.momentum, want->momentum);
            ck_assert_int_eq(c.nesterov, want->nesterov);
        } else {
            ck_assert_float_eq(c.beta1, want->beta1);
            ck_assert_float_eq(c.beta2, want->beta2);
            ck_assert_float_eq(c.epsilon, want->epsilon);
        }
    }
}
END_TEST

START_TEST(test_parse_kind)
{
    tt_optim_kind k;
    ck_assert_int_eq(tt_optim_parse_kind("adam", &k), 0);
    ck_assert_int_eq(k, TT_OPT_ADAM);
    ck_assert_int_eq(tt_optim_parse_kind("nadam", &k), 0);
    ck_assert_int_eq(k, TT_OPT_NADAM);
    ck_assert_int_eq(tt_optim_parse_kind("sgd", &k), 0);
    ck_assert_int_eq(k, TT_OPT_SGD);
    ck_assert_int_eq(tt_optim_parse_kind("rmsprop", &k), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("keras");
    tcase_add_loop_test(tc, test_keras_case, 0, N_CASES);
    tcase_add_test(tc, test_keras_defaults);
    tcase_add_test(tc, test_parse_kind);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
