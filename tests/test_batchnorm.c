/* test_batchnorm.c — the batchnorm layer across towers (issue 22, item 4), through the trainer:
 *
 *   - --bn-sync on: N towers take the global batch's statistics, so N towers ≡ 1 tower — the weights, the moving
 *     statistics and the optimizer's state after several steps agree to float rounding (the towers' sums are added
 *     in another order than one tower's), for 2 and 3 towers, on a dense and a convolutional model, and with a
 *     tower that has no rows in the last step (it adds zeros to the others' exchanges) — measured 6e-6 to 7e-5 of
 *     the largest relative difference, most of it in the biases right before a batchnorm, whose gradient is
 *     rounding noise;
 *   - --bn-sync off: each tower normalises with its own rows' statistics, so N towers differ from 1 tower by far more
 *     than rounding: over 1000 times on's difference (measured 1.1 to 6.5; docs/models.md measures cnn-bn);
 *   - the moving statistics are non-trainable: the optimizer keeps no state for them (Adam's vectors stay 0 there)
 *     and after one step they hold exactly Keras's update, moving * momentum + batch statistic * (1 - momentum), of
 *     the batch (one tower: the layer's input recomputed on the host);
 *   - every placement of the sum and the update (--reduce allreduce, --update device and replicated, --overlap on)
 *     gives --reduce cpu --update host's bits, the tail and the optimizer's state included;
 *   - what --bn-sync on cannot run with is refused with one line.
 * `test_batchnorm cuda` runs the same on the CUDA backend (the stand-in in CI). Keras's own numbers for the layer are
 * in test_reference.c. */
#include <math.h>

#include "tt_backend.h"
#include "tt_checkpoint.h"
#include "tt_test.h"
#include "tt_trainer.h"

static tt_backend g_be;
static const char *g_device = "cpu";

#define DENSE_BN "dense units=12\nbatchnorm\nrelu\ndense units=8\nbatchnorm momentum=0.9 epsilon=0.01\nrelu\ndense units=5\n"
#define CONV_BN                                                                                                    \
    "conv2d filters=4 kernel=3 padding=same\nbatchnorm\nrelu\nmaxpool2d pool=2\nflatten\ndense units=6\n"         \
    "batchnorm momentum=0.5\nrelu\ndense units=5\n"

typedef struct run {
    const char *model;
    int conv;         /* the data as (4, 4, 2) images */
    size_t towers, batch, steps, n;
    int bn_sync;
    tt_optim_config oc;
    tt_reduce reduce; /* zero: cpu, host, no overlap */
    tt_update update;
    int overlap;
    float *w;          /* master weights, then the optimizer's vectors */
    size_t P, PT, n_slots;
} run;

static void run_steps(run *r)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 300, 32, 5, 7);
    if (r->conv) ds.shape = tt_shape3(4, 4, 2);
    tt_model_input in = {ds.shape, ds.n_classes, 0};
    tt_error err;
    tt_model m;
    ck_assert_msg(tt_model_parse(&m, r->model, "t", &in, &err) == TT_OK, "%s", err.msg);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, 42);
    tt_trainer_config tc = tt_test_config(r->towers, r->batch, r->oc, r->reduce);
    tc.update = r->update;
    tc.overlap = r->overlap;
    tc.bucket_bytes = r->overlap ? 256 : 0; /* several buckets, the tail in the last */
    tc.ops = g_be.ops;
    tc.n_devices = g_be.n_devices;
    tc.devices = g_be.devices;
    tc.bn_sync = r->bn_sync;
    tt_trainer *tr = NULL;
    ck_assert_msg(tt_trainer_init(&tr, &m, &tc, init, &err) == TT_OK, "%s", err.msg);
    uint32_t *idx = (uint32_t *)tt_malloc(ds.n * sizeof(uint32_t));
    for (size_t i = 0; i < ds.n; i++) idx[i] = (uint32_t)((i * 37) % ds.n);
    tt_step_result *res = (tt_step_result *)tt_calloc(r->steps, sizeof *res);
    const size_t n = r->n ? r->n : r->steps * r->batch;
    ck_assert_msg(tt_trainer_start_steps(tr, &ds, idx, n, res, r->steps, NULL, &err) == TT_OK, "%s", err.msg);
    size_t done = 0;
    while (!tt_trainer_wait(tr, -1, &done)) {
    }
    ck_assert_uint_eq(done, r->steps);
    ck_assert_int_eq(tt_trainer_halted(tr), TT_HALT_NONE);
    tt_optim_slot sl[3];
    const int slots = tt_optim_slots(tt_trainer_optim(tr), sl);
    r->P = m.n_params;
    r->PT = m.n_trainable;
    r->n_slots = (size_t)slots;
    r->w = (float *)tt_malloc((1 + (size_t)slots) * r->P * sizeof(float));
    memcpy(r->w, tt_trainer_params(tr), r->P * sizeof(float));
    for (int k = 0; k < slots; k++) memcpy(r->w + (1 + (size_t)k) * r->P, sl[k].data, r->P * sizeof(float));
    tt_trainer_free(tr);
    tt_free(res);
    tt_free(idx);
    tt_free(init);
    tt_dataset_free(&ds);
}

/* The largest |a - b| / (atol + |b|) over the weights (the tail included). */
static double worst(const run *a, const run *b, double atol)
{
    double e = 0;
    for (size_t i = 0; i < a->P; i++) {
        double d = fabs((double)a->w[i] - (double)b->w[i]) / (atol + fabs((double)b->w[i]));
        if (d > e) e = d;
    }
    return e;
}

static tt_optim_config sgd(void)
{
    tt_optim_config oc = tt_optim_defaults(TT_OPT_SGD);
    oc.lr = 0.05f;
    return oc;
}

/* sync on: 2 and 3 towers are 1 tower up to rounding; sync off: they are not. */
static void check_towers(const char *model, int conv, tt_optim_config oc, size_t steps, size_t n)
{
    run one = {model, conv, 1, 24, steps, n, 0, oc, 0, 0, 0, NULL, 0, 0, 0};
    run_steps(&one);
    for (size_t N = 2; N <= 3; N++) {
        run on = {model, conv, N, 24, steps, n, 1, oc, 0, 0, 0, NULL, 0, 0, 0};
        run off = {model, conv, N, 24, steps, n, 0, oc, 0, 0, 0, NULL, 0, 0, 0};
        run_steps(&on);
        run_steps(&off);
        const double e_on = worst(&on, &one, 1e-3), e_off = worst(&off, &one, 1e-3);
        ck_assert_msg(e_on < 2e-4, "%zu towers, --bn-sync on: %g from 1 tower (%s)", N, e_on, model);
        ck_assert_msg(e_off > 1000 * e_on && e_off > 1e-2, "%zu towers, --bn-sync off: only %g from 1 tower (on: %g)",
                      N, e_off, e_on);
        tt_free(on.w);
        tt_free(off.w);
    }
    tt_free(one.w);
}

START_TEST(test_sync_on_is_one_tower_dense) { check_towers(DENSE_BN, 0, sgd(), 6, 0); }
END_TEST

START_TEST(test_sync_on_is_one_tower_conv) { check_towers(CONV_BN, 1, sgd(), 4, 0); }
END_TEST

/* 4 steps of 24 and a last of 2 samples: with 3 towers the third has no rows in the last step */
START_TEST(test_sync_on_empty_tower) { check_towers(DENSE_BN, 0, sgd(), 5, 4 * 24 + 2); }
END_TEST

/* One step of one tower with Adam: the optimizer's state is 0 over the tail, and the moving statistics are Keras's
 * update of the first batchnorm's batch statistics, the layer's input (dense 12 of the batch) recomputed here. */
START_TEST(test_moving_statistics)
{
    run r = {"dense units=3\nbatchnorm momentum=0.9\ndense units=5\n", 0, 1, 16, 1, 0, 0,
             tt_optim_defaults(TT_OPT_ADAM), 0, 0, 0, NULL, 0, 0, 0};
    run_steps(&r);
    ck_assert_uint_eq(r.P - r.PT, 6);
    ck_assert_uint_eq(r.n_slots, 2);
    for (size_t k = 1; k <= r.n_slots; k++)
        for (size_t i = r.PT; i < r.P; i++) ck_assert_float_eq(r.w[k * r.P + i], 0.0f);
    /* the batch: the first 16 of the order, through dense 3 with its initial weights */
    tt_dataset ds;
    tt_test_dataset(&ds, 300, 32, 5, 7);
    tt_model_input in = {ds.shape, ds.n_classes, 0};
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&m, r.model, "t", &in, &err), TT_OK);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, 42);
    double mean[3] = {0}, var[3] = {0}, h[16][3];
    for (size_t b = 0; b < 16; b++) {
        const size_t s = (b * 37) % ds.n;
        for (size_t u = 0; u < 3; u++) {
            double acc = init[32 * 3 + u]; /* bias after the (32, 3) kernel */
            for (size_t d = 0; d < 32; d++) acc += (double)tt_pixel(ds.x[s * 32 + d], ds.scale) * init[d * 3 + u];
            h[b][u] = acc;
            mean[u] += acc / 16;
        }
    }
    for (size_t b = 0; b < 16; b++)
        for (size_t u = 0; u < 3; u++) var[u] += (h[b][u] - mean[u]) * (h[b][u] - mean[u]) / 16;
    for (size_t u = 0; u < 3; u++) {
        ck_assert_msg(tt_close(r.w[r.PT + u], 0.0 * 0.9 + mean[u] * 0.1, 1e-6, 1e-4), "moving_mean[%zu] %g, Keras %g",
                      u, (double)r.w[r.PT + u], mean[u] * 0.1);
        ck_assert_msg(tt_close(r.w[r.PT + 3 + u], 1.0 * 0.9 + var[u] * 0.1, 1e-6, 1e-4),
                      "moving_variance[%zu] %g, Keras %g", u, (double)r.w[r.PT + 3 + u], 0.9 + var[u] * 0.1);
    }
    tt_free(init);
    tt_free(r.w);
    tt_dataset_free(&ds);
}
END_TEST

/* Where the sum and the update run changes no bit, the tail included: the device's update (--update device,
 * replicated) adds the moving statistics' steps as the host does, and --overlap on's buckets find the tail complete
 * (the forward wrote it) — with the statistics exchanged or not. */
START_TEST(test_placements_same_bits)
{
    static const struct {
        tt_reduce reduce;
        tt_update update;
        int overlap;
    } runs[] = {{TT_REDUCE_ALLREDUCE, TT_UPDATE_HOST, 0},
                {TT_REDUCE_DEVICE, TT_UPDATE_DEVICE, 0},
                {TT_REDUCE_ALLREDUCE, TT_UPDATE_REPLICATED, 0},
                {TT_REDUCE_CPU, TT_UPDATE_HOST, 1}};
    for (int sync = 0; sync < 2; sync++) {
        run ref = {CONV_BN, 1, 2, 24, 4, 0, sync, tt_optim_defaults(TT_OPT_ADAM), 0, 0, 0, NULL, 0, 0, 0};
        run_steps(&ref);
        const size_t floats = (1 + ref.n_slots) * ref.P;
        for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
            run r = ref;
            r.reduce = runs[k].reduce, r.update = runs[k].update, r.overlap = runs[k].overlap, r.w = NULL;
            run_steps(&r);
            for (size_t i = 0; i < floats; i++)
                ck_assert_msg(memcmp(&r.w[i], &ref.w[i], sizeof(float)) == 0,
                              "--bn-sync %s, run %zu: float %zu of %zu (%s) %.9g, --reduce cpu --update host %.9g",
                              sync ? "on" : "off", k, i, floats, i % ref.P >= ref.PT ? "tail" : "trainable",
                              (double)r.w[i], (double)ref.w[i]);
            tt_free(r.w);
        }
        tt_free(ref.w);
    }
}
END_TEST

/* A checkpoint's moving variance below 0 is refused like a NaN (tt_checkpoint_check_finite: resume refuses, eval
 * warns), with the NaN and the negative counted apart; -0 is a variance. */
START_TEST(test_negative_moving_variance)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 8, 32, 5, 7);
    tt_model_input in = {ds.shape, ds.n_classes, 0};
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&m, "dense units=3\nbatchnorm\ndense units=5\n", "t", &in, &err), TT_OK);
    float *w = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, w, 1);
    tt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.params = w;
    size_t bad = 9;
    w[m.n_trainable + 3] = -0.0f; /* moving_variance[0] */
    ck_assert_int_eq(tt_checkpoint_check_finite(&ck, &m, "f", 0, &bad, &err), TT_OK);
    ck_assert_uint_eq(bad, 0);
    w[m.n_trainable + 4] = -0.5f;
    w[m.n_trainable + 1] = -0.5f; /* a moving mean may be negative */
    ck_assert_int_eq(tt_checkpoint_check_finite(&ck, &m, "f", 0, &bad, &err), TT_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "f: tensor batch_normalization/moving_variance holds a negative value (-0.5) at index 1, "
                              "where only a variance or a mean square can be (1 negative value in all)");
    w[0] = NAN;
    ck_assert_int_eq(tt_checkpoint_check_finite(&ck, &m, "f", 0, &bad, &err), TT_ERR_FORMAT);
    ck_assert_uint_eq(bad, 2);
    ck_assert_str_eq(err.msg, "f: tensor dense/kernel holds NaN at index 0 (1 non-finite and 1 negative value in all)");
    tt_free(w);
    tt_dataset_free(&ds);
}
END_TEST

START_TEST(test_refusals)
{
    tt_trainer_config tc = tt_test_config(2, 32, sgd(), TT_REDUCE_CPU);
    tc.bn_sync = 1;
    tt_error err;
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_OK);
    tc.sync.kind = TT_SYNC_ASYNC;
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "--bn-sync on: not with --sync async") != NULL, "%s", err.msg);
    tc.sync.kind = TT_SYNC_WEIGHTS;
    tc.sync.k = 4;
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "weights:4") != NULL, "%s", err.msg);
    tc.n_towers = 1; /* one tower: nothing to exchange, nothing refused */
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_OK);
}
END_TEST

int main(int argc, char **argv)
{
    g_device = argc > 1 ? argv[1] : "cpu";
    const int is_cpu = strcmp(g_device, "cpu") == 0;
    tt_error err;
    if (tt_backend_open(g_device, NULL, &g_be, &err) != TT_OK) return tt_test_skip_no_gpu("batchnorm", err.msg);
    if (!is_cpu && g_be.ops == &tt_dev_cpu_ops) return tt_test_skip_no_gpu(g_device, "opened the CPU backend");
    Suite *s = suite_create(g_device);
    TCase *tc = tcase_create("batchnorm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_sync_on_is_one_tower_dense);
    tcase_add_test(tc, test_sync_on_is_one_tower_conv);
    tcase_add_test(tc, test_sync_on_empty_tower);
    tcase_add_test(tc, test_moving_statistics);
    tcase_add_test(tc, test_placements_same_bits);
    if (is_cpu) tcase_add_test(tc, test_refusals);
    if (is_cpu) tcase_add_test(tc, test_negative_moving_variance);
    suite_add_tcase(s, tc);
    return tt_test_run_suite_mode(s, is_cpu ? CK_FORK_GETENV : CK_NOFORK);
}
