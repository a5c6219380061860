/* test_faults.c — how the trainer fails and stops: a non-finite loss or gradient halts a run without applying the
 * step, under every placement, naming exactly the towers that produced it; a stop request halts at the end of a
 * step; a NaN logit is never "correct"; every crew thread flushes subnormals; the memory plan is exactly what
 * the towers allocate (a counting backend adds up every allocation; --data-on device's training set included); no step, evaluation or probe writes past a
 * buffer (a backend with guard bytes); a probe whose setup fails on one device measures nothing; and of two failures
 * in one run, the first is the one reported. */
#include <float.h>

#include "tt_math.h"
#include "tt_mem.h"
#include "tt_out.h"
#include "tt_pool.h"
#include "tt_probe.h"
#include "tt_test.h"
#include "tt_trainer.h"

static const char *MODEL = "dense units=8 activation=relu\ndense units=3\n";

/* The buffer tests run over both: the dense MODEL on 6 flat features, and a conv model on the same 6 values seen as
 * a 2x3x1 image — with scratch (im2col), pooling, dropout — under a backend whose chunk_mnk is 16, so that a
 * convolution's chunks end inside a sample and its last chunk is short. */
static const char *CONV_MODEL = "conv2d filters=4 kernel=2 padding=same activation=relu\nmaxpool2d pool=2 "
                                "padding=same\ndropout rate=0.3\nflatten\ndense units=3\n";

static const tt_model_input *buffer_test_input(int conv)
{
    static tt_model_input in;
    in.shape = conv ? tt_shape3(2, 3, 1) : tt_shape1(6);
    in.n_classes = 3;
    in.vocab = 0;
    return &in;
}

/* n samples of dim features; samples in [bad_lo, bad_hi) have a pixel of 255, all others are zero. With
 * scale = 1e38 such a pixel is +Inf as a float input, so exactly the towers whose shard holds one go non-finite. */
static void poisoned_dataset(tt_dataset *ds, size_t n, size_t dim, size_t bad_lo, size_t bad_hi)
{
    tt_test_dataset(ds, n, dim, 3, 1);
    memset(ds->x, 0, n * dim);
    for (size_t s = bad_lo; s < bad_hi; s++) ds->x[s * dim + 1] = 255;
    ds->scale = 1e38f;
}

/* Where the sum is made and where the optimizer runs: every tower-order placement on the host, and the updates on
 * the devices (a NaN or Inf must halt them alike, with nothing non-finite applied). */
static const struct {
    tt_reduce reduce;
    tt_update update;
    int overlap; /* --overlap on: the loss checked and the blocks applied bucket by bucket, as they land */
} PLACES[] = {{TT_REDUCE_CPU, TT_UPDATE_HOST, 0},       {TT_REDUCE_DEVICE, TT_UPDATE_HOST, 0},
              {TT_REDUCE_ALLREDUCE, TT_UPDATE_HOST, 0}, {TT_REDUCE_DEVICE, TT_UPDATE_DEVICE, 0},
              {TT_REDUCE_ALLREDUCE, TT_UPDATE_REPLICATED, 0}, {TT_REDUCE_CPU, TT_UPDATE_HOST, 1}};
enum { N_PLACES = (int)(sizeof PLACES / sizeof PLACES[0]) };
static tt_update g_update = TT_UPDATE_HOST; /* init_trainer's */
static int g_overlap;                       /* and its --overlap */

static void init_trainer(tt_trainer **tr, tt_model *m, size_t towers, size_t batch, tt_reduce reduce,
                         const atomic_int *stop, float **init)
{
    tt_error err;
    ck_assert_int_eq(tt_model_parse(m, MODEL, "t", TT_FLAT_INPUT(6, 3), &err), TT_OK);
    *init = (float *)tt_malloc(m->n_params * sizeof(float));
    tt_model_init_params(m, *init, 3);
    tt_trainer_config tc = tt_test_config(towers, batch, tt_optim_defaults(TT_OPT_ADAM), reduce);
    tc.stop = stop;
    tc.update = g_update;
    tc.overlap = g_overlap;
    ck_assert_msg(tt_trainer_init(tr, m, &tc, *init, &err) == TT_OK, "%s", err.msg);
}

/* 3 towers, batch 12 (shards of 4): poison the shard of tower `bad` only. */
START_TEST(test_nonfinite_names_the_tower)
{
    for (int pl = 0; pl < N_PLACES; pl++)
        for (size_t bad = 0; bad < 3; bad++) {
            const int red = PLACES[pl].reduce;
            g_update = PLACES[pl].update;
            g_overlap = PLACES[pl].overlap;
            tt_dataset ds;
            poisoned_dataset(&ds, 12, 6, 4 * bad + 1, 4 * bad + 2);
            tt_model m;
            tt_trainer *tr = NULL;
            float *init;
            init_trainer(&tr, &m, 3, 12, (tt_reduce)red, NULL, &init);
            uint32_t idx[12];
            for (uint32_t i = 0; i < 12; i++) idx[i] = i;
            tt_step_result res;
            tt_error err;
            ck_assert_int_eq(tt_trainer_step(tr, &ds, idx, 12, &res, &err), TT_ERR_NUMERIC);
            ck_assert_int_eq(tt_trainer_halted(tr), TT_HALT_NONFINITE);
            int loss_bad[3], grad_bad[3];
            tt_trainer_nonfinite_towers(tr, loss_bad, grad_bad);
            for (size_t t = 0; t < 3; t++) {
                ck_assert_msg(loss_bad[t] == (t == bad), "--reduce %s, bad tower %zu: loss_bad[%zu] = %d",
                              tt_reduce_name((tt_reduce)red), bad, t, loss_bad[t]);
                ck_assert_msg(grad_bad[t] == (t == bad), "--reduce %s, bad tower %zu: grad_bad[%zu] = %d",
                              tt_reduce_name((tt_reduce)red), bad, t, grad_bad[t]);
            }
            /* the step was not applied: the master weights are the initial ones, bit for bit */
            ck_assert(memcmp(tt_trainer_params(tr), init, m.n_params * sizeof(float)) == 0);
            /* and the poisoned sample did not count as correct */
            ck_assert_uint_le(res.top1, 11);
            tt_trainer_free(tr);
            tt_free(init);
            tt_dataset_free(&ds);
        }
    g_update = TT_UPDATE_HOST;
    g_overlap = 0;
}
END_TEST

/* A -inf bias on class 0: every sample labelled 0 has an infinite loss, yet the gradient (softmax - onehot, times
 * finite inputs) is finite — so only the loss check at barrier A can keep the step from being applied. */
START_TEST(test_infinite_loss_with_finite_gradient)
{
    for (int pl = 0; pl < N_PLACES; pl++) {
        const int red = PLACES[pl].reduce;
        g_update = PLACES[pl].update;
        g_overlap = PLACES[pl].overlap;
        tt_dataset ds;
        tt_test_dataset(&ds, 12, 6, 3, 4);
        for (size_t s = 0; s < 12; s++) ds.y[s] = (int32_t)(s % 3);
        tt_model m;
        tt_trainer *tr = NULL;
        float *init;
        init_trainer(&tr, &m, 2, 12, (tt_reduce)red, NULL, &init);
        const tt_layer *last = &m.layers[m.n_layers - 1];
        tt_trainer_get_params(tr, init);
        init[last->offset + last->in * last->out] = -INFINITY; /* the last layer's bias of class 0 */
        tt_trainer_set_params(tr, init);
        uint32_t idx[12];
        for (uint32_t i = 0; i < 12; i++) idx[i] = i;
        tt_step_result res;
        tt_error err;
        ck_assert_int_eq(tt_trainer_step(tr, &ds, idx, 12, &res, &err), TT_ERR_NUMERIC);
        ck_assert(!isfinite(res.loss_sum));
        int loss_bad[2], grad_bad[2];
        tt_trainer_nonfinite_towers(tr, loss_bad, grad_bad);
        ck_assert(loss_bad[0] && loss_bad[1] && !grad_bad[0] && !grad_bad[1]);
        ck_assert_msg(memcmp(tt_trainer_params(tr), init, m.n_params * sizeof(float)) == 0, "--reduce %s applied the step",
                      tt_reduce_name((tt_reduce)red));
        tt_trainer_free(tr);
        tt_free(init);
        tt_dataset_free(&ds);
    }
    g_update = TT_UPDATE_HOST;
    g_overlap = 0;
}
END_TEST

/* The mirror image: a finite loss with a gradient that is not finite, so only the gradient check can halt the run
 * and keep the non-finite part of the step from being applied. Two linear layers, W1 = 0 and b = 0, so the hidden
 * layer and the logits are 0 and every row's loss is log 3; W2's rows are (-1e30, 1e30, 1e30), so with every label
 * 0 the hidden layer's gradient dz W2^T is about 1.1e29 per element (dz = (p - onehot) / 12 = (-2/3, 1/3, 1/3) / 12);
 * and the poisoned tower's samples have one input of 255 * 1e30 = 2.55e32 (finite, and times W1 = 0 still 0), so
 * its W1 gradient x^T dh is about 3e61: +Inf in float32. The other towers' inputs are 0 and their gradients 0.
 * What is applied: the host checks and applies the summed gradient block by block, in parallel slices (one per host
 * thread), and skips the blocks that are not finite (docs/architecture.md, "The step"); finite blocks of other
 * slices are applied. So the test asserts that the weights stay finite and that those whose gradient was Inf (W1's
 * row for input 1) did not move — not that nothing moved. */
START_TEST(test_nonfinite_gradient_with_finite_loss)
{
    for (int pl = 0; pl < N_PLACES; pl++)
        for (size_t bad = 0; bad < 3; bad++) {
            const int red = PLACES[pl].reduce;
            tt_dataset ds;
            tt_test_dataset(&ds, 12, 6, 3, 5);
            memset(ds.x, 0, 12 * 6);
            for (size_t s = 0; s < 12; s++) ds.y[s] = 0;
            ds.x[(4 * bad + 2) * 6 + 1] = 255;
            ds.scale = 1e30f;
            tt_model m;
            tt_error err;
            ck_assert_int_eq(tt_model_parse(&m, "dense units=4\ndense units=3\n", "t", TT_FLAT_INPUT(6, 3), &err),
                             TT_OK);
            ck_assert_uint_eq(m.n_params, 6 * 4 + 4 + 4 * 3 + 3);
            float *init = (float *)tt_calloc(m.n_params, sizeof(float));
            float *w2 = init + m.layers[1].offset; /* (4, 3) row-major, then the bias (3) */
            for (size_t k = 0; k < 4; k++) {
                w2[k * 3 + 0] = -1e30f;
                w2[k * 3 + 1] = w2[k * 3 + 2] = 1e30f;
            }
            tt_trainer_config tc = tt_test_config(3, 12, tt_optim_defaults(TT_OPT_ADAM), (tt_reduce)red);
            tc.update = PLACES[pl].update;
            tc.overlap = PLACES[pl].overlap;
            tt_trainer *tr = NULL;
            ck_assert_msg(tt_trainer_init(&tr, &m, &tc, init, &err) == TT_OK, "%s", err.msg);
            uint32_t idx[12];
            for (uint32_t i = 0; i < 12; i++) idx[i] = i;
            tt_step_result res;
            ck_assert_msg(tt_trainer_step(tr, &ds, idx, 12, &res, &err) == TT_ERR_NUMERIC,
                          "--reduce %s, bad tower %zu: a non-finite gradient did not stop the step",
                          tt_reduce_name((tt_reduce)red), bad);
            ck_assert_int_eq(tt_trainer_halted(tr), TT_HALT_NONFINITE);
            /* the loss was finite: 12 rows of log 3 (float32 softmax of zeros: a few ulps) */
            ck_assert_msg(tt_close(res.loss_sum, 12.0 * log(3.0), 0, 1e-6), "loss sum %.9g", res.loss_sum);
            int loss_bad[3], grad_bad[3];
            tt_trainer_nonfinite_towers(tr, loss_bad, grad_bad);
            for (size_t t = 0; t < 3; t++) {
                ck_assert_int_eq(loss_bad[t], 0);
                ck_assert_msg(grad_bad[t] == (t == bad), "--reduce %s, bad tower %zu: grad_bad[%zu] = %d",
                              tt_reduce_name((tt_reduce)red), bad, t, grad_bad[t]);
            }
            ck_assert_msg(tt_all_finite(tt_trainer_params(tr), m.n_params), "--reduce %s: the master weights are not finite",
                          tt_reduce_name((tt_reduce)red));
            for (size_t k = 0; k < 4; k++) /* W1 (6, 4) row-major: input 1's row */
                ck_assert_msg(tt_trainer_params(tr)[m.layers[0].offset + 1 * 4 + k] == 0.0f,
                              "--reduce %s: W1[1][%zu] = %g moved with an infinite gradient",
                              tt_reduce_name((tt_reduce)red), k, (double)tt_trainer_params(tr)[m.layers[0].offset + 4 + k]);
            tt_trainer_free(tr);
            tt_free(init);
            tt_dataset_free(&ds);
        }
}
END_TEST

/* A halted step applies the same finite blocks wherever the optimizer runs: the host's slices are whole blocks of
 * TT_REDUCE_BLOCK (= TT_UPDATE_BLOCK) floats, so its NaN/Inf check covers the floats a device's update checks. The
 * model of test_nonfinite_gradient_with_finite_loss made wider (6 -> 600 -> 3: P = 6003, three blocks) with the
 * infinite gradient in input 5's row of W1 (floats 3000..3599, inside block 1 = 2048..4095): with 2 host threads a
 * slice edge at 3008 (16-aligned) would skip 2048..5055 on the host against the device's 2048..4095. */
START_TEST(test_halted_step_same_blocks)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 12, 6, 3, 5);
    memset(ds.x, 0, 12 * 6);
    for (size_t s = 0; s < 12; s++) ds.y[s] = 0;
    ds.x[2 * 6 + 5] = 255;
    ds.scale = 1e30f;
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&m, "dense units=600\ndense units=3\n", "t", TT_FLAT_INPUT(6, 3), &err), TT_OK);
    ck_assert_uint_eq(m.n_params, 6003);
    float *init = (float *)tt_calloc(m.n_params, sizeof(float));
    float *w2 = init + m.layers[1].offset;
    for (size_t k = 0; k < 600; k++) {
        w2[k * 3 + 0] = -1e30f;
        w2[k * 3 + 1] = w2[k * 3 + 2] = 1e30f;
    }
    float *after[N_PLACES];
    for (int pl = 0; pl < N_PLACES; pl++) {
        tt_trainer_config tc = tt_test_config(2, 12, tt_optim_defaults(TT_OPT_SGD), PLACES[pl].reduce);
        tc.update = PLACES[pl].update;
        tc.overlap = PLACES[pl].overlap;
        tc.host_threads = 2;
        tt_trainer *tr = NULL;
        ck_assert_msg(tt_trainer_init(&tr, &m, &tc, init, &err) == TT_OK, "%s", err.msg);
        uint32_t idx[12];
        for (uint32_t i = 0; i < 12; i++) idx[i] = i;
        tt_step_result res;
        ck_assert_int_eq(tt_trainer_step(tr, &ds, idx, 12, &res, &err), TT_ERR_NUMERIC);
        after[pl] = (float *)tt_malloc(m.n_params * sizeof(float));
        tt_trainer_get_params(tr, after[pl]);
        ck_assert(tt_all_finite(after[pl], m.n_params));
        ck_assert_msg(after[pl][5 * 600 + 7] == 0.0f, "--update %s applied an infinite gradient",
                      tt_update_name(PLACES[pl].update));
        ck_assert_msg(after[pl][4100] != init[4100], "--update %s: block 2 (finite) was not applied",
                      tt_update_name(PLACES[pl].update));
        tt_trainer_free(tr);
    }
    for (int pl = 1; pl < N_PLACES; pl++) {
        size_t first = m.n_params;
        for (size_t i = 0; i < m.n_params && first == m.n_params; i++)
            if (memcmp(&after[pl][i], &after[0][i], sizeof(float)) != 0) first = i;
        ck_assert_msg(first == m.n_params, "--reduce %s --update %s: weight %zu is %g, --reduce cpu's %g",
                      tt_reduce_name(PLACES[pl].reduce), tt_update_name(PLACES[pl].update), first,
                      first < m.n_params ? after[pl][first] : 0, first < m.n_params ? after[0][first] : 0);
    }
    for (int pl = 0; pl < N_PLACES; pl++) tt_free(after[pl]);
    tt_free(init);
    tt_dataset_free(&ds);
}
END_TEST

/* A stop request raised before the run halts it after exactly one step, applied. */
START_TEST(test_stop_request_halts_after_the_step)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 60, 6, 3, 2);
    atomic_int stop;
    atomic_init(&stop, 1);
    tt_model m;
    tt_trainer *tr = NULL;
    float *init;
    init_trainer(&tr, &m, 2, 10, TT_REDUCE_CPU, &stop, &init);
    uint32_t idx[60];
    for (uint32_t i = 0; i < 60; i++) idx[i] = i;
    tt_step_result res[6];
    tt_error err;
    ck_assert_int_eq(tt_trainer_start_steps(tr, &ds, idx, 60, res, 6, NULL, &err), TT_OK);
    size_t done = 0;
    ck_assert_int_eq(tt_trainer_wait(tr, -1, &done), 1);
    ck_assert_uint_eq(done, 1);
    ck_assert_int_eq(tt_trainer_halted(tr), TT_HALT_STOP);
    ck_assert(memcmp(tt_trainer_params(tr), init, m.n_params * sizeof(float)) != 0); /* step 1 was applied */
    float *after_one = (float *)tt_malloc(m.n_params * sizeof(float));
    memcpy(after_one, tt_trainer_params(tr), m.n_params * sizeof(float));
    /* the same step in a trainer that was never asked to stop gives the same weights */
    tt_trainer *tr2 = NULL;
    tt_model m2;
    float *init2;
    init_trainer(&tr2, &m2, 2, 10, TT_REDUCE_CPU, NULL, &init2);
    ck_assert_int_eq(tt_trainer_step(tr2, &ds, idx, 10, &res[0], &err), TT_OK);
    ck_assert(memcmp(tt_trainer_params(tr2), after_one, m.n_params * sizeof(float)) == 0);
    /* a request from another thread while steps run: the run ends early and says why. 20,000 steps take far
     * longer than the request takes to land (microseconds after the start). */
    atomic_store(&stop, 0);
    enum { LONG = 200000 };
    uint32_t *many = (uint32_t *)tt_malloc(LONG * sizeof(uint32_t));
    tt_step_result *many_res = (tt_step_result *)tt_calloc(LONG / 10, sizeof(tt_step_result));
    for (uint32_t i = 0; i < LONG; i++) many[i] = i % 60;
    ck_assert_int_eq(tt_trainer_start_steps(tr, &ds, many, LONG, many_res, LONG / 10, NULL, &err), TT_OK);
    tt_trainer_request_stop(tr);
    ck_assert_int_eq(tt_trainer_wait(tr, -1, &done), 1);
    ck_assert_int_eq(tt_trainer_halted(tr), TT_HALT_STOP);
    ck_assert_uint_ge(done, 1);
    ck_assert_uint_lt(done, LONG / 10);
    tt_free(many);
    tt_free(many_res);
    tt_trainer_free(tr);
    tt_trainer_free(tr2);
    tt_free(init);
    tt_free(init2);
    tt_free(after_one);
    tt_dataset_free(&ds);
}
END_TEST

/* Every comparison with a NaN is false: without the check a NaN row has rank 0 and counts as correct. */
START_TEST(test_nonfinite_logits_are_wrong)
{
    const float rows[4][4] = {{NAN, 1, 2, 3}, {1, NAN, 0, 0}, {INFINITY, 0, 0, 0}, {0, -INFINITY, 0, 1}};
    for (int r = 0; r < 4; r++)
        for (int label = 0; label < 4; label++) {
            int rank = -1;
            float dz[4];
            float loss = tt_softmax_xent_row(rows[r], 4, label, 1.0f, dz, &rank);
            ck_assert_msg(rank >= 5, "row %d label %d: rank %d would count as a top-5 hit", r, label, rank);
            ck_assert_int_eq(rank, TT_RANK_NONFINITE);
            ck_assert_msg(!isfinite(loss) || r == 3, "row %d: loss %g", r, loss);
        }
    const float ok[3] = {0.5f, 2.0f, -1.0f};
    int rank;
    tt_softmax_xent_row(ok, 3, 0, 1.0f, NULL, &rank);
    ck_assert_int_eq(rank, 1);
}
END_TEST

/* The sum's own check: NaN, Inf and an overflowing sum are caught for every slot count and position. */
START_TEST(test_sum_slots_reports_nonfinite)
{
    enum { LEN = 37 };
    float a[LEN], b[LEN], c[LEN], out[LEN];
    for (int k = 0; k < LEN; k++) a[k] = b[k] = c[k] = 1.0f;
    float *slots[3] = {a, b, c};
    for (size_t n = 1; n <= 3; n++) ck_assert_int_eq(tt_sum_slots(out, slots, n, 0, LEN), 1);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (size_t n = 1; n <= 3; n++)
        for (size_t w = 0; w < n; w++)
            for (int v = 0; v < 3; v++)
                for (int k = 0; k < LEN; k += 9) {
                    slots[w][k] = bad[v];
                    ck_assert_msg(tt_sum_slots(out, slots, n, 0, LEN) == 0, "n=%zu slot %zu k=%d", n, w, k);
                    ck_assert_int_eq(tt_all_finite(slots[w], LEN), 0);
                    slots[w][k] = 1.0f;
                }
    a[5] = b[5] = FLT_MAX; /* finite terms, infinite sum */
    ck_assert_int_eq(tt_sum_slots(out, slots, 2, 0, LEN), 0);
    ck_assert_int_eq(tt_all_finite(a, LEN), 1);
}
END_TEST

/* Every crew thread runs with flush-to-zero and denormals-are-zero: a subnormal input reads as 0 and a result
 * below FLT_MIN becomes 0. */
static volatile float g_tiny = 1e-40f, g_half = 0.5f;
static int g_flushed[4];

static void subnormal_job(void *arg, int i, int n)
{
    (void)arg;
    (void)n;
    float in = g_tiny * 1.0f;              /* DAZ: a subnormal operand is read as 0 */
    float out = (FLT_MIN * g_half) * 1.0f; /* FTZ: a subnormal result is written as 0 */
    g_flushed[i] = in == 0.0f && out == 0.0f;
}

START_TEST(test_crew_flushes_subnormals)
{
    tt_pool p;
    tt_error err;
    ck_assert_int_eq(tt_pool_init(&p, 4, &err), TT_OK);
    tt_pool_run(&p, 4, subnormal_job, NULL);
    for (int i = 0; i < 4; i++) ck_assert_msg(g_flushed[i], "crew thread %d keeps subnormals", i);
    tt_pool_free(&p);
    tt_pool_free(&p); /* twice is fine */
}
END_TEST

/* ---- the plan is what is allocated ---------------------------------------------------------------------- */

static atomic_ullong g_dev_bytes, g_host_bytes; /* every tower allocates on its own thread */

static void *count_alloc(void *ctx, size_t bytes)
{
    atomic_fetch_add(&g_dev_bytes, bytes);
    return tt_dev_cpu_ops.alloc(ctx, bytes);
}

static void *count_host_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    atomic_fetch_add(&g_host_bytes, bytes);
    return tt_malloc(bytes);
}

START_TEST(test_plan_matches_allocations)
{
    tt_dev_ops ops = tt_dev_cpu_ops;
    ops.alloc = count_alloc;
    ops.host_alloc = count_host_alloc;
    ops.host_free = NULL;
    ops.chunk_mnk = 16;
    for (int conv = 0; conv <= 1; conv++)
    for (int pl = 0; pl < N_PLACES; pl++)
        for (size_t towers = 1; towers <= 4; towers++)
        for (int data_on = 0; data_on <= 1; data_on++) { /* --data-on device: the training set on the device too */
            const int red = PLACES[pl].reduce;
            tt_model m;
            tt_error err;
            ck_assert_int_eq(tt_model_parse(&m, conv ? CONV_MODEL : MODEL, "t", buffer_test_input(conv), &err), TT_OK);
            ck_assert(!conv || tt_model_workspace(&m, 10, ops.chunk_mnk) > 0); /* the plan has scratch to count */
            float *init = (float *)tt_calloc(m.n_params, sizeof(float));
            tt_trainer_config tc = tt_test_config(towers, 37, tt_optim_defaults(TT_OPT_NADAM), (tt_reduce)red);
            tc.ops = &ops;
            tc.update = PLACES[pl].update; /* --update device, replicated: the state and staging on the devices */
            tt_dataset set;
            tt_test_dataset(&set, 53, m.input_dim, m.n_classes, 3);
            tc.data_on = data_on;
            tc.train_set = &set;
            tt_mem_plan plan;
            memset(&plan, 0, sizeof plan);
            ck_assert_int_eq(tt_trainer_plan(&m, &tc, &plan, &err), TT_OK);
            atomic_store(&g_dev_bytes, 0);
            atomic_store(&g_host_bytes, 0);
            tt_trainer *tr = NULL;
            ck_assert_int_eq(tt_trainer_init(&tr, &m, &tc, init, &err), TT_OK);
            double optim = 2.0 * (double)m.n_params * sizeof(float);
            const double dev = (double)atomic_load(&g_dev_bytes), host = (double)atomic_load(&g_host_bytes);
            ck_assert_msg(tt_mem_total(&plan, 0) == dev, "%s --reduce %s, %zu towers: plan %g, allocated %g device",
                          conv ? "conv" : "dense", tt_reduce_name((tt_reduce)red), towers, tt_mem_total(&plan, 0), dev);
            ck_assert_msg(tt_mem_total(&plan, TT_MEM_HOST) == host + optim,
                          "%s --reduce %s, %zu towers: plan %g, allocated %g host + %g optimizer",
                          conv ? "conv" : "dense", tt_reduce_name((tt_reduce)red), towers,
                          tt_mem_total(&plan, TT_MEM_HOST), host, optim);
            tt_trainer_free(tr);
            tt_free(init);
            tt_dataset_free(&set);
        }
}
END_TEST

/* A plan over what the machine has is refused with the figure, the largest part and the model file. */
START_TEST(test_over_budget_is_refused)
{
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.model = "big.txt";
    plan.n_params = 1000;
    tt_mem_add(&plan, "activations", 0, 1e9, TT_MEM_BY_WIDTH);
    tt_mem_add(&plan, "gradient slots", TT_MEM_HOST, 3e15, TT_MEM_BY_PARAMS);
    tt_mem_add(&plan, "activations", 0, 1e9, TT_MEM_BY_WIDTH); /* merged with the first */
    ck_assert_int_eq(plan.n, 2);
    tt_error err;
    ck_assert_int_eq(tt_mem_check(&plan, &tt_dev_cpu_ops, &err), TT_ERR_NOMEM);
    ck_assert_msg(strstr(err.msg, "3.0 PB") || strstr(err.msg, "3000.0 TB"), "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "largest part: gradient slots") && strstr(err.msg, "model file big.txt"), "%s",
                  err.msg);
    tt_mem_plan small;
    memset(&small, 0, sizeof small);
    tt_mem_add(&small, "activations", 0, 1e6, TT_MEM_BY_WIDTH);
    ck_assert_int_eq(tt_mem_check(&small, &tt_dev_cpu_ops, &err), TT_OK);
    /* the CPU backend has no mem_info: its "device" memory is host RAM and counts against the host alone */
    tt_mem_plan dev_only;
    memset(&dev_only, 0, sizeof dev_only);
    tt_mem_add(&dev_only, "activations", 0, 3e15, TT_MEM_BY_WIDTH);
    tt_mem_add(&dev_only, "master weights", TT_MEM_HOST, 1e6, TT_MEM_BY_PARAMS);
    ck_assert_int_eq(tt_mem_check(&dev_only, &tt_dev_cpu_ops, &err), TT_ERR_NOMEM);
    ck_assert_msg(strstr(err.msg, "of host memory") && strstr(err.msg, "largest part: activations"), "%s", err.msg);
}
END_TEST

/* ---- guard bytes: nothing writes past a buffer ----------------------------------------------------------------
 * The CPU backend with GUARD_BYTES of 0xA5 right after every device and pinned host buffer, checked when the buffer
 * is freed (as ggml's test-backend-ops guards every output). A buffer sized too small for what a step, an
 * evaluation or the probe writes into it damages its guard; in a Release build that overflow would otherwise pass
 * unnoticed or crash somewhere else. Device buffers start as NaN, as on the CPU backend. */
enum { GUARD_HEAD = 64, GUARD_BYTES = 64 };
static atomic_int g_guards_damaged;

static void *guarded_alloc(size_t bytes, int poison)
{
    size_t total = (GUARD_HEAD + bytes + GUARD_BYTES + 63) & ~(size_t)63;
    unsigned char *base = (unsigned char *)aligned_alloc(64, total);
    if (!base) return NULL;
    memcpy(base, &bytes, sizeof bytes);
    unsigned char *p = base + GUARD_HEAD;
    if (poison)
        for (size_t i = 0; i + sizeof(float) <= bytes; i += sizeof(float)) ((float *)p)[i / sizeof(float)] = NAN;
    memset(p + bytes, 0xA5, GUARD_BYTES);
    return p;
}

static void guarded_free(void *ptr)
{
    if (!ptr) return;
    unsigned char *p = (unsigned char *)ptr, *base = p - GUARD_HEAD;
    size_t bytes;
    memcpy(&bytes, base, sizeof bytes);
    for (size_t i = 0; i < GUARD_BYTES; i++)
        if (p[bytes + i] != 0xA5) {
            atomic_fetch_add(&g_guards_damaged, 1);
            break;
        }
    free(base);
}

static void *guard_dev_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return guarded_alloc(bytes, 1);
}

static void *guard_host_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return guarded_alloc(bytes, 0);
}

static void guard_free(void *ctx, void *p)
{
    (void)ctx;
    guarded_free(p);
}

static tt_dev_ops guard_ops(void)
{
    tt_dev_ops ops = tt_dev_cpu_ops;
    ops.alloc = guard_dev_alloc;
    ops.dfree = guard_free;
    ops.host_alloc = guard_host_alloc;
    ops.host_free = guard_free;
    return ops;
}

/* Steps (a full batch of 37 and a partial one of 23: uneven shards), then an evaluation in chunks, for 1..4 towers
 * and every placement, the dense and the conv model; every guard must be intact when the trainer frees its buffers. */
START_TEST(test_buffers_hold_what_is_written)
{
    tt_dev_ops ops = guard_ops();
    ops.chunk_mnk = 16;
    tt_dataset ds;
    tt_test_dataset(&ds, 60, 6, 3, 7);
    uint32_t idx[60];
    for (uint32_t i = 0; i < 60; i++) idx[i] = i;
    for (int conv = 0; conv <= 1; conv++)
    for (int pl = 0; pl < N_PLACES; pl++)
        for (size_t towers = 1; towers <= 4; towers++) {
            const int red = PLACES[pl].reduce;
            tt_model m;
            tt_error err;
            ds.shape = buffer_test_input(conv)->shape;
            ck_assert_int_eq(tt_model_parse(&m, conv ? CONV_MODEL : MODEL, "t", buffer_test_input(conv), &err), TT_OK);
            float *init = (float *)tt_malloc(m.n_params * sizeof(float));
            tt_model_init_params(&m, init, 3);
            tt_trainer_config tc = tt_test_config(towers, 37, tt_optim_defaults(TT_OPT_ADAM), (tt_reduce)red);
            tc.ops = &ops;
            atomic_store(&g_guards_damaged, 0);
            tt_trainer *tr = NULL;
            ck_assert_msg(tt_trainer_init(&tr, &m, &tc, init, &err) == TT_OK, "%s", err.msg);
            tt_step_result res[2];
            size_t done = 0;
            ck_assert_int_eq(tt_trainer_start_steps(tr, &ds, idx, 60, res, 2, NULL, &err), TT_OK);
            ck_assert_int_eq(tt_trainer_wait(tr, -1, &done), 1);
            ck_assert_uint_eq(done, 2);
            ck_assert_int_eq(tt_trainer_halted(tr), TT_HALT_NONE);
            tt_eval_result ev;
            ck_assert_int_eq(tt_trainer_evaluate(tr, &ds, &ev, &err), TT_OK);
            tt_trainer_free(tr);
            ck_assert_msg(atomic_load(&g_guards_damaged) == 0, "%s --reduce %s, %zu towers: %d buffers written past",
                          conv ? "conv" : "dense", tt_reduce_name((tt_reduce)red), towers,
                          atomic_load(&g_guards_damaged));
            tt_free(init);
        }
    tt_dataset_free(&ds);
}
END_TEST

/* The probe with 2 towers and shards of 32 rows on a 21-parameter model: its pinned staging takes the gradient
 * (21 floats) and the step's statistics (2 per row, 64 floats), so it must be sized by the larger. */
static void probe_config(tt_probe_config *pc, const tt_model *m, const tt_dev_ops *ops, int n_devices)
{
    memset(pc, 0, sizeof *pc);
    pc->model = m;
    pc->ops = ops;
    pc->n_devices = n_devices;
    pc->towers = 2;
    pc->batch = 64;
    pc->optim = tt_optim_defaults(TT_OPT_ADAM);
    pc->host_threads = 2;
    pc->reps = 1;
}

START_TEST(test_probe_buffers_hold_what_is_written)
{
    tt_dev_ops ops = guard_ops();
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&m, "dense units=3\n", "t", TT_FLAT_INPUT(6, 3), &err), TT_OK);
    ck_assert_uint_lt(m.n_params, 64);
    tt_probe_config pc;
    probe_config(&pc, &m, &ops, 1);
    tt_probe p;
    atomic_store(&g_guards_damaged, 0);
    ck_assert_msg(tt_probe_run(&pc, &p, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(p.rows, 32);
    ck_assert_msg(atomic_load(&g_guards_damaged) == 0, "the probe wrote past %d buffers",
                  atomic_load(&g_guards_damaged));
}
END_TEST

/* The probe's threads read each other's buffers (peer copies, the reductions), so when one thread's setup fails no
 * thread may run a measurement: the probe returns the error. Device 1 of this backend has no memory at all. */
static tt_status ordinal_init(void **ctx, int ordinal, tt_error *err)
{
    (void)err;
    int *o = (int *)malloc(sizeof *o);
    ck_assert_ptr_nonnull(o);
    *o = ordinal;
    *ctx = o;
    return TT_OK;
}

static void ordinal_destroy(void *ctx) { free(ctx); }

static void *device1_full_alloc(void *ctx, size_t bytes) { return *(int *)ctx == 1 ? NULL : guarded_alloc(bytes, 1); }

START_TEST(test_probe_setup_failure_measures_nothing)
{
    tt_dev_ops ops = guard_ops();
    ops.init = ordinal_init;
    ops.destroy = ordinal_destroy;
    ops.alloc = device1_full_alloc;
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&m, "dense units=3\n", "t", TT_FLAT_INPUT(6, 3), &err), TT_OK);
    tt_probe_config pc;
    probe_config(&pc, &m, &ops, 2);
    tt_probe p;
    atomic_store(&g_guards_damaged, 0);
    ck_assert_int_eq(tt_probe_run(&pc, &p, &err), TT_ERR_NOMEM);
    ck_assert_msg(strstr(err.msg, "device 1") != NULL, "%s", err.msg);
    ck_assert_int_eq(atomic_load(&g_guards_damaged), 0);
}
END_TEST

/* A log's strings are valid JSON whatever they hold: escapes for quotes, backslashes and control bytes, well-formed
 * UTF-8 kept, every other byte (a raw file name, an overlong or surrogate encoding) replaced by U+FFFD. */
START_TEST(test_json_strings_stay_valid)
{
    char dirp[64], path[128];
    tt_test_tmpdir(dirp, sizeof dirp);
    snprintf(path, sizeof path, "%s/s.json", dirp);
    tt_out o;
    tt_error err;
    ck_assert_int_eq(tt_out_open(&o, path, "test", 64, &err), TT_OK);
    tt_out_json_str(&o, "m", "a\"b\\c\x1b\xff\xc3\xa9\xe2\x82\xac\xc0\xaf\xed\xa0\x80\xf0\x9f\x98\x80\xf4\x90\x80\x80z", 0);
    tt_out_printf(&o, "\n");
    ck_assert_int_eq(tt_out_close(&o, &err), TT_OK);
    FILE *f = fopen(path, "rb");
    char got[256] = {0};
    ck_assert_ptr_nonnull(f);
    ck_assert(fread(got, 1, sizeof got - 1, f) > 0);
    fclose(f);
    const char *want = "\"m\":\"a\\\"b\\\\c\\u001b\\ufffd\xc3\xa9\xe2\x82\xac\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"
                       "\xf0\x9f\x98\x80\\ufffd\\ufffd\\ufffd\\ufffdz\"\n";
    ck_assert_str_eq(got, want);
}
END_TEST

/* ---- two failures in one run: the first is the one reported --------------------------------------------------- */

/* tt_node.h's contract for a failure recorded between two agreements: the first one recorded is kept (a later one,
 * a TT_OK, and the status the agreement itself brings change nothing), the agreement returns it with its own line,
 * and clears the record, so the next failure is the next agreement's. */
START_TEST(test_pending_first_failure_wins)
{
    tt_node *nd = tt_node_world();
    ck_assert_int_le(nd->size, 1);
    tt_pending p;
    memset(&p, 0, sizeof p);
    tt_error a, b, got;
    tt_fail(&a, TT_ERR_IO, "--csv out.csv: write failed: first");
    tt_fail(&b, TT_ERR_NUMERIC, "epoch 1, step 2/3: second");
    tt_pending_fail(&p, TT_ERR_IO, &a);
    tt_pending_fail(&p, TT_ERR_NUMERIC, &b);
    tt_pending_fail(&p, TT_OK, &b);
    ck_assert_int_eq(tt_pending_agree(nd, &p, TT_OK, &got), TT_ERR_IO);
    ck_assert_str_eq(got.msg, a.msg);
    ck_assert_int_eq(tt_pending_agree(nd, &p, TT_OK, &got), TT_OK); /* agreed: the record is cleared */
    tt_pending_fail(&p, TT_ERR_NUMERIC, &b);                        /* the agreement's own failure comes second */
    got = a;
    ck_assert_int_eq(tt_pending_agree(nd, &p, TT_ERR_IO, &got), TT_ERR_NUMERIC);
    ck_assert_str_eq(got.msg, b.msg);
    got = b; /* nothing recorded before: the agreement's own failure, its line as given */
    ck_assert_int_eq(tt_pending_agree(nd, &p, TT_ERR_STOPPED, &got), TT_ERR_STOPPED);
    ck_assert_str_eq(got.msg, b.msg);
}
END_TEST

/* Two failures a real command makes: `bench` writes its CSV's header before its banner, so with --csv and stdout
 * both on a full device the CSV's write fails first and stdout's second (its banner flushed after) — the one line
 * names the CSV. Each alone is named, so the answer is a choice of the first, not a failure unseen. */
START_TEST(test_bench_two_write_failures_first_named)
{
    char d[256], args[1024], out[300], err[300];
    tt_test_tmpdir(d, sizeof d);
    enum { NTR = 120, NTE = 20, DIM = 16 };
    static unsigned char img[NTR * DIM], lab[NTR];
    for (int i = 0; i < NTR; i++) {
        lab[i] = (unsigned char)(i % 3);
        for (int j = 0; j < DIM; j++) img[i * DIM + j] = (unsigned char)(i * 7 + j * 13);
    }
    const uint32_t tri[3] = {NTR, 4, 4}, trl[1] = {NTR}, tei[3] = {NTE, 4, 4}, tel[1] = {NTE};
    tt_test_write_idx(d, "train-images-idx3-ubyte.gz", 3, tri, img, sizeof img);
    tt_test_write_idx(d, "train-labels-idx1-ubyte.gz", 1, trl, lab, sizeof lab);
    tt_test_write_idx(d, "t10k-images-idx3-ubyte.gz", 3, tei, img, NTE * DIM);
    tt_test_write_idx(d, "t10k-labels-idx1-ubyte.gz", 1, tel, lab, NTE);
    snprintf(out, sizeof out, "%s/stdout", d);
    snprintf(err, sizeof err, "%s/stderr", d);
    static const struct {
        const char *csv, *out, *want, *not_want;
    } cases[] = {
        {"/dev/full", "/dev/full", "--csv /dev/full: write failed", "stdout"}, /* both: the first */
        {"/dev/full", NULL, "--csv /dev/full: write failed", "stdout"},
        {"CSV", "/dev/full", "stdout: write failed", "--csv"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char csv[300];
        snprintf(csv, sizeof csv, "%s", strcmp(cases[k].csv, "CSV") ? cases[k].csv : d);
        if (!strcmp(cases[k].csv, "CSV")) strcat(csv, "/rows.csv");
        snprintf(args, sizeof args, "bench --device cpu --data %s --val-samples 20 --epochs 1 --towers 1 --batch 16 "
                 "--reps 1 --csv %s", d, csv);
        tt_test_expect(args, 1, cases[k].want, cases[k].out ? cases[k].out : out, err);
        ck_assert_msg(strstr(tt_test_slurp(err), cases[k].not_want) == NULL, "%s: %s", args, tt_test_slurp(err));
    }
}
END_TEST

/* A norm clip with a gradient block that is not finite (from the review of issue 34): --global-clipnorm's factor is
 * then NaN, and no block may be applied with it — the master weights stay finite and the step halts, as without the
 * clip; --clipnorm's other variables stay finite too. Both placements that update on the host, 1 and 2 threads. */
static void clip_nonfinite(int global, tt_reduce red, int threads)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 12, 6, 3, 5);
    memset(ds.x, 0, 12 * 6);
    for (size_t s = 0; s < 12; s++) ds.y[s] = 0;
    ds.x[2 * 6 + 5] = 255;
    ds.scale = 1e30f; /* one input of 2.55e32: its row's gradient overflows, the rest stay finite */
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&m, "dense units=600\ndense units=3\n", "t", TT_FLAT_INPUT(6, 3), &err), TT_OK);
    float *init = (float *)tt_calloc(m.n_params, sizeof(float));
    float *w2 = init + m.layers[1].offset;
    for (size_t k = 0; k < 600; k++) {
        w2[k * 3 + 0] = -1e30f;
        w2[k * 3 + 1] = w2[k * 3 + 2] = 1e30f;
    }
    tt_optim_config oc = tt_optim_defaults(TT_OPT_SGD);
    if (global) oc.global_clipnorm = 1.0f;
    else oc.clipnorm = 1.0f;
    tt_trainer_config tc = tt_test_config(2, 12, oc, red);
    tc.host_threads = threads;
    tt_trainer *tr = NULL;
    ck_assert_msg(tt_trainer_init(&tr, &m, &tc, init, &err) == TT_OK, "%s", err.msg);
    uint32_t idx[12];
    for (uint32_t i = 0; i < 12; i++) idx[i] = i;
    tt_step_result res;
    ck_assert_int_eq(tt_trainer_step(tr, &ds, idx, 12, &res, &err), TT_ERR_NUMERIC);
    size_t bad = 0;
    const float *w = tt_trainer_params(tr);
    for (size_t i = 0; i < m.n_params; i++) bad += !tt_finite(w[i]);
    ck_assert_msg(bad == 0, "--%s, --reduce %s, %d threads: %zu of %zu master weights not finite",
                  global ? "global-clipnorm" : "clipnorm", tt_reduce_name(red), threads, bad, m.n_params);
    tt_trainer_free(tr);
    tt_free(init);
    tt_dataset_free(&ds);
}

START_TEST(test_norm_clip_nonfinite)
{
    clip_nonfinite(1, TT_REDUCE_CPU, 2);
    clip_nonfinite(1, TT_REDUCE_DEVICE, 1);
    clip_nonfinite(0, TT_REDUCE_CPU, 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_nonfinite_names_the_tower);
    tcase_add_test(tc, test_infinite_loss_with_finite_gradient);
    tcase_add_test(tc, test_nonfinite_gradient_with_finite_loss);
    tcase_add_test(tc, test_halted_step_same_blocks);
    tcase_add_test(tc, test_stop_request_halts_after_the_step);
    tcase_add_test(tc, test_nonfinite_logits_are_wrong);
    tcase_add_test(tc, test_sum_slots_reports_nonfinite);
    tcase_add_test(tc, test_crew_flushes_subnormals);
    tcase_add_test(tc, test_plan_matches_allocations);
    tcase_add_test(tc, test_over_budget_is_refused);
    tcase_add_test(tc, test_json_strings_stay_valid);
    tcase_add_test(tc, test_buffers_hold_what_is_written);
    tcase_add_test(tc, test_probe_buffers_hold_what_is_written);
    tcase_add_test(tc, test_probe_setup_failure_measures_nothing);
    tcase_add_test(tc, test_pending_first_failure_wins);
    tcase_add_test(tc, test_bench_two_write_failures_first_named);
    tcase_add_test(tc, test_norm_clip_nonfinite);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
