/* test_sync.c — --sync (issue 22): stale-synchronous, asynchronous and local-SGD steps against the step they
 * generalise.
 *
 *   - one tower: ssp, async (either schedule) and weights:K are plain SGD on one copy, so they give bsp's weights and
 *     optimizer state bit for bit, with every staleness 0;
 *   - round robin: two runs are bit-identical, every gradient's staleness is min(j, N - 1) for shard j, and ssp:1
 *     follows the same schedule as async (the bound never binds in turn);
 *   - the free schedule under a straggler: async lets the fast tower take most shards, ssp:1 holds the towers within
 *     S + 1 shards of each other, and no gradient is staler than (N - 1)(2S + 1);
 *   - weights:1 with SGD equals gradient averaging (even shards) up to rounding; the average comes every K steps and
 *     at the run's end, with the towers' divergence;
 *   - a stop ends every mode cleanly at a shard or step boundary; a non-finite loss applies nothing;
 *   - what a mode cannot run with is refused with one line.
 * Backends: `test_sync` (or `test_sync cpu`) on the CPU backend; `test_sync cuda` on the CUDA backend (the stand-in
 * in CI), without forking. */
#include <pthread.h>
#include <time.h>

#include "tt_backend.h"
#include "tt_test.h"
#include "tt_trainer.h"

#define MODEL "dense units=16 activation=relu\ndense units=12 activation=relu\ndense units=5\n"
#define DIM 20
#define CLASSES 5

static tt_backend g_be;
static const char *g_device = "cpu";

static const tt_model_input *input_of(const tt_dataset *ds)
{
    static tt_model_input in;
    in.shape = ds->shape;
    in.n_classes = ds->n_classes;
    return &in;
}

/* One run: a trainer, `steps` steps of a fixed shuffled order as one run of steps, its results and ledger. */
typedef struct run {
    tt_trainer_config tc;
    size_t steps, n, P;
    tt_step_result *res;
    tt_tower_ledger *led;
    float *w;        /* master weights, then the optimizer's vectors */
    uint64_t optim_t; /* the optimizer's step count at the end */
    int bad[2][8];    /* after a non-finite halt: tt_trainer_nonfinite_towers (loss, gradient) of towers 0..7 */
    size_t done;
    tt_halt halt;
    double stop_after; /* > 0: tt_trainer_request_stop this many seconds after the start */
} run;

static tt_trainer_config sync_config(size_t towers, size_t batch, tt_optim_config oc, tt_sync_kind kind, size_t k,
                                     int rr)
{
    tt_trainer_config tc = tt_test_config(towers, batch, oc, TT_REDUCE_CPU);
    tc.ops = g_be.ops;
    tc.n_devices = g_be.n_devices;
    tc.devices = g_be.devices;
    tc.sync.kind = kind;
    tc.sync.k = k;
    tc.sync.round_robin = rr;
    return tc;
}

static void run_steps(run *r, const tt_dataset *ds)
{
    tt_error err;
    tt_model m;
    ck_assert_int_eq(tt_model_parse(&m, MODEL, "t", input_of(ds), &err), TT_OK);
    r->P = m.n_params;
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, 42);
    tt_trainer *tr = NULL;
    ck_assert_msg(tt_trainer_init(&tr, &m, &r->tc, init, &err) == TT_OK, "%s", err.msg);
    uint32_t *idx = (uint32_t *)tt_malloc(ds->n * sizeof(uint32_t));
    tt_rng rg;
    tt_rng_seed(&rg, 9, 0);
    for (size_t i = 0; i < ds->n; i++) idx[i] = (uint32_t)i;
    tt_rng_shuffle(&rg, idx, ds->n);
    const size_t N = r->tc.n_towers;
    r->res = (tt_step_result *)tt_calloc(r->steps, sizeof *r->res);
    r->led = (tt_tower_ledger *)tt_calloc(r->steps * N, sizeof *r->led);
    const size_t n = r->n ? r->n : r->steps * r->tc.batch;
    ck_assert_msg(tt_trainer_start_steps(tr, ds, idx, n, r->res, r->steps, r->led, &err) == TT_OK, "%s", err.msg);
    const double t0 = tt_now();
    while (!tt_trainer_wait(tr, r->stop_after > 0 ? 0.005 : -1, &r->done)) /* the run is over once it says 1 */
        if (tt_now() - t0 > r->stop_after) tt_trainer_request_stop(tr);
    r->halt = tt_trainer_halted(tr);
    r->optim_t = tt_trainer_optim(tr)->t;
    if (r->halt == TT_HALT_NONFINITE && N <= 8) tt_trainer_nonfinite_towers(tr, r->bad[0], r->bad[1]);
    tt_optim_slot sl[3];
    const int slots = tt_optim_slots(tt_trainer_optim(tr), sl);
    r->w = (float *)tt_malloc((1 + (size_t)slots) * r->P * sizeof(float));
    memcpy(r->w, tt_trainer_params(tr), r->P * sizeof(float));
    for (int k = 0; k < slots; k++) memcpy(r->w + (1 + (size_t)k) * r->P, sl[k].data, r->P * sizeof(float));
    r->P *= 1 + (size_t)slots;
    tt_trainer_free(tr);
    tt_free(idx);
    tt_free(init);
}

static void run_free(run *r)
{
    tt_free(r->res);
    tt_free(r->led);
    tt_free(r->w);
}

static size_t first_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
    return n;
}

static tt_optim_config adam(void) { return tt_optim_defaults(TT_OPT_ADAM); }
static tt_optim_config sgd(void)
{
    tt_optim_config oc = tt_optim_defaults(TT_OPT_SGD);
    oc.lr = 0.1f;
    return oc;
}

/* One tower: every mode is plain SGD on one copy — bsp's weights and optimizer state, bit for bit. */
START_TEST(test_one_tower_every_mode_is_bsp)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 400, DIM, CLASSES, 3);
    run ref = {.tc = sync_config(1, 32, adam(), TT_SYNC_BSP, 0, 0), .steps = 9};
    ref.n = 9 * 32 - 5; /* a short last step */
    run_steps(&ref, &ds);
    const struct {
        tt_sync_kind kind;
        size_t k;
        int rr;
    } modes[] = {{TT_SYNC_SSP, 1, 0}, {TT_SYNC_SSP, 3, 1}, {TT_SYNC_ASYNC, 0, 0}, {TT_SYNC_ASYNC, 0, 1},
                 {TT_SYNC_WEIGHTS, 1, 0}, {TT_SYNC_WEIGHTS, 4, 0}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        run r = {.tc = sync_config(1, 32, adam(), modes[i].kind, modes[i].k, modes[i].rr), .steps = 9, .n = ref.n};
        run_steps(&r, &ds);
        char m[32];
        tt_sync_format(&r.tc.sync, m, sizeof m);
        ck_assert_uint_eq(r.done, 9);
        ck_assert_int_eq(r.halt, TT_HALT_NONE);
        ck_assert_uint_eq(r.P, ref.P);
        const size_t d = first_diff(r.w, ref.w, r.P);
        ck_assert_msg(d == r.P, "--sync %s, 1 tower: float %zu of %zu differs from bsp (%.9g vs %.9g)", m, d, r.P,
                      d < r.P ? (double)r.w[d] : 0, d < r.P ? (double)ref.w[d] : 0);
        for (size_t s = 0; s < 9; s++) {
            ck_assert_uint_eq(r.res[s].n, ref.res[s].n);
            ck_assert_msg(r.res[s].loss_sum == ref.res[s].loss_sum, "--sync %s: step %zu's loss", m, s);
            ck_assert_uint_eq(r.res[s].staleness_max, 0);
        }
        run_free(&r);
    }
    run_free(&ref);
    tt_dataset_free(&ds);
}
END_TEST

/* Round robin, 3 towers: the same bits twice; staleness min(j, N - 1); ssp:1 the same schedule; not bsp's weights. */
START_TEST(test_round_robin_is_reproducible)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 400, DIM, CLASSES, 4);
    const size_t N = 3, B = 30, steps = 8;
    run a = {.tc = sync_config(N, B, adam(), TT_SYNC_ASYNC, 0, 1), .steps = steps};
    run b = a, c = {.tc = sync_config(N, B, adam(), TT_SYNC_SSP, 1, 1), .steps = steps};
    run bsp = {.tc = sync_config(N, B, adam(), TT_SYNC_BSP, 0, 0), .steps = steps};
    run_steps(&a, &ds);
    run_steps(&b, &ds);
    run_steps(&c, &ds);
    run_steps(&bsp, &ds);
    ck_assert_uint_eq(first_diff(a.w, b.w, a.P), a.P);
    ck_assert_uint_eq(first_diff(a.w, c.w, a.P), a.P);
    ck_assert_msg(first_diff(a.w, bsp.w, a.P) < a.P, "async gave bsp's weights: its gradients were not applied alone");
    for (size_t st = 0; st < steps; st++) {
        ck_assert_uint_eq(a.res[st].applied, N);
        ck_assert_uint_eq(a.res[st].n, B);
        for (size_t s = 0; s < N; s++) {
            const size_t j = st * N + s;
            const tt_tower_ledger *l = &a.led[j];
            ck_assert_uint_eq(l->tower, s); /* round robin: shard j on tower j % N */
            ck_assert_uint_eq(l->staleness, j < N - 1 ? j : N - 1);
            ck_assert_uint_eq(l->rows, B / N);
        }
        ck_assert_uint_eq(a.res[st].staleness_max, st == 0 ? N - 1 : N - 1);
        ck_assert(a.res[st].loss_sum == b.res[st].loss_sum);
    }
    run_free(&a);
    run_free(&b);
    run_free(&c);
    run_free(&bsp);
    tt_dataset_free(&ds);
}
END_TEST

/* The free schedule with tower 1 a straggler (15 ms a shard, the compute well under 1 ms): async hands most shards
 * to tower 0; ssp:1 keeps the towers within S + 1 shards; staleness within (N - 1)(2S + 1). Counts of shards, not
 * times: a loaded machine only makes the straggler relatively faster, which both bounds still hold for. */
START_TEST(test_free_schedule_bound)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 800, DIM, CLASSES, 5);
    const size_t N = 2, B = 16, steps = 24;
    for (int ssp = 0; ssp <= 1; ssp++) {
        run r = {.tc = sync_config(N, B, sgd(), ssp ? TT_SYNC_SSP : TT_SYNC_ASYNC, ssp, 0), .steps = steps};
        r.tc.slow[0] = (tt_slow_tower){1, 15, 0};
        r.tc.n_slow = 1;
        run_steps(&r, &ds);
        ck_assert_uint_eq(r.done, steps);
        size_t count[2] = {0, 0};
        uint32_t stale_max = 0;
        for (size_t j = 0; j < steps * N; j++) {
            ck_assert_uint_lt(r.led[j].tower, N);
            count[r.led[j].tower]++;
            stale_max = r.led[j].staleness > stale_max ? r.led[j].staleness : stale_max;
        }
        ck_assert_uint_eq(count[0] + count[1], steps * N);
        if (ssp) {
            ck_assert_msg(count[0] <= count[1] + 2, "ssp:1: tower 0 ran %zu shards, the straggler %zu", count[0],
                          count[1]);
            ck_assert_msg(stale_max <= 3, "ssp:1: a gradient %u applies stale", stale_max);
        } else {
            ck_assert_msg(count[0] >= 3 * count[1], "async: tower 0 ran %zu shards, the straggler %zu", count[0],
                          count[1]);
        }
        run_free(&r);
    }
    tt_dataset_free(&ds);
}
END_TEST

/* weights:1 with SGD (even shards) equals gradient averaging: the mean of w - lr g_t is w - lr mean(g_t). */
START_TEST(test_weights_k1_is_gradient_averaging)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 400, DIM, CLASSES, 6);
    for (size_t N = 2; N <= 4; N += 2) {
        run bsp = {.tc = sync_config(N, 32, sgd(), TT_SYNC_BSP, 0, 0), .steps = 10};
        run w1 = {.tc = sync_config(N, 32, sgd(), TT_SYNC_WEIGHTS, 1, 0), .steps = 10};
        run w4 = {.tc = sync_config(N, 32, sgd(), TT_SYNC_WEIGHTS, 4, 0), .steps = 10};
        run_steps(&bsp, &ds);
        run_steps(&w1, &ds);
        run_steps(&w4, &ds);
        double worst = 0, worst4 = 0;
        for (size_t i = 0; i < bsp.P; i++) {
            worst = fmax(worst, fabs((double)w1.w[i] - bsp.w[i]) / (2e-6 + 1e-5 * fabs((double)bsp.w[i])));
            worst4 = fmax(worst4, fabs((double)w4.w[i] - bsp.w[i]));
        }
        ck_assert_msg(worst <= 1.0, "weights:1, %zu towers: %.3g of the tolerance from gradient averaging", N, worst);
        ck_assert_msg(worst4 > 1e-5, "weights:4 gave gradient averaging's weights (%.3g): no local steps?", worst4);
        for (size_t s = 0; s < 10; s++) {
            ck_assert_int_eq(w1.res[s].averaged, 1);
            ck_assert_int_eq(w4.res[s].averaged, s % 4 == 3); /* every 4th (the run's end: a snapshot) */
            if (w4.res[s].averaged) ck_assert(w4.res[s].divergence > 0 && isfinite(w4.res[s].divergence));
        }
        run_free(&bsp);
        run_free(&w1);
        run_free(&w4);
    }
    tt_dataset_free(&ds);
}
END_TEST

/* weights:3 over 10 steps as one run of steps, or as runs of 4 and 6 with an evaluation between (an epoch's end, a
 * checkpoint): the towers go on from their own weights between averages, so the bits are the same. */
START_TEST(test_weights_runs_split_anywhere)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 400, DIM, CLASSES, 9);
    tt_error err;
    tt_model m;
    ck_assert_int_eq(tt_model_parse(&m, MODEL, "t", input_of(&ds), &err), TT_OK);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, 42);
    uint32_t *idx = (uint32_t *)tt_malloc(ds.n * sizeof(uint32_t));
    for (size_t i = 0; i < ds.n; i++) idx[i] = (uint32_t)((i * 37) % ds.n);
    float *out[2];
    for (int split = 0; split < 2; split++) {
        tt_trainer_config tc = sync_config(2, 20, adam(), TT_SYNC_WEIGHTS, 3, 0);
        tt_trainer *tr = NULL;
        ck_assert_msg(tt_trainer_init(&tr, &m, &tc, init, &err) == TT_OK, "%s", err.msg);
        tt_step_result res[10];
        const size_t cut = split ? 4 : 10;
        tt_status st = tt_trainer_start_steps(tr, &ds, idx, cut * 20, res, 10, NULL, &err);
        ck_assert_msg(st == TT_OK, "%s", err.msg);
        tt_trainer_wait(tr, -1, NULL);
        if (split) {
            tt_eval_result ev;
            ck_assert_int_eq(tt_trainer_evaluate(tr, &ds, &ev, &err), TT_OK);
            ck_assert_msg(tt_trainer_start_steps(tr, &ds, idx + cut * 20, (10 - cut) * 20, res, 10, NULL, &err) ==
                              TT_OK, "%s", err.msg);
            tt_trainer_wait(tr, -1, NULL);
        }
        ck_assert_int_eq(tt_trainer_halted(tr), TT_HALT_NONE);
        out[split] = (float *)tt_malloc(m.n_params * sizeof(float));
        tt_trainer_get_params(tr, out[split]);
        tt_trainer_free(tr);
    }
    const size_t d = first_diff(out[0], out[1], m.n_params);
    ck_assert_msg(d == m.n_params, "weights:3 split after step 4: float %zu differs", d);
    tt_free(out[0]);
    tt_free(out[1]);
    tt_free(idx);
    tt_free(init);
    tt_dataset_free(&ds);
}
END_TEST

/* weights:3, 4 towers, batch 6, a last step of 2 samples (two towers with empty shards, no optimizer step): every
 * step's times are finite and sane, the wait at each meeting from each tower's own last step. */
START_TEST(test_weights_short_last_step)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 100, DIM, CLASSES, 11);
    run r = {.tc = sync_config(4, 6, adam(), TT_SYNC_WEIGHTS, 3, 0), .steps = 10, .n = 56};
    run_steps(&r, &ds);
    ck_assert_uint_eq(r.done, 10);
    ck_assert_uint_eq(r.res[9].n, 2);
    ck_assert_uint_eq(r.optim_t, 10); /* tower 0's count: it has a row in every step */
    for (size_t s = 0; s < 10; s++) {
        const tt_step_times *t = &r.res[s].t;
        ck_assert_msg(t->total >= 0 && t->total < 60 && t->wait >= 0 && t->wait <= t->total, "step %zu: total %g, "
                      "wait %g", s, t->total, t->wait);
    }
    run_free(&r);
    tt_dataset_free(&ds);
}
END_TEST

/* A stop in the middle: every mode halts cleanly, the finished steps a prefix, the weights finite; weights:K
 * averages at the step it stops. */
START_TEST(test_stop_mid_run)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 800, DIM, CLASSES, 7);
    const tt_sync_kind kinds[] = {TT_SYNC_SSP, TT_SYNC_ASYNC, TT_SYNC_ASYNC, TT_SYNC_WEIGHTS};
    for (size_t i = 0; i < 4; i++) {
        run r = {.tc = sync_config(2, 16, adam(), kinds[i], kinds[i] == TT_SYNC_ASYNC ? 0 : 2, i == 2), .steps = 40,
                 .stop_after = 0.08};
        r.tc.slow[0] = (tt_slow_tower){0, 10, 0}; /* 0.4 s of delays in all: the stop comes well before */
        r.tc.slow[1] = (tt_slow_tower){1, 10, 0};
        r.tc.n_slow = 2;
        const double bound = tt_test_prompt(5.0), t0 = tt_now();
        run_steps(&r, &ds);
        ck_assert_msg(tt_now() - t0 < bound, "the stop took %.1f s", tt_now() - t0);
        ck_assert_msg(r.halt == TT_HALT_STOP, "mode %zu: halt %d after %zu steps", i, (int)r.halt, r.done);
        ck_assert_uint_lt(r.done, 40);
        for (size_t k = 0; k < r.P; k++) ck_assert(isfinite(r.w[k]));
        for (size_t s = 0; s < r.done; s++) ck_assert_uint_eq(r.res[s].n, 16);
        if (kinds[i] == TT_SYNC_WEIGHTS) { /* every tower ran every finished step, no more */
            ck_assert_uint_gt(r.done, 0);
            ck_assert_msg(r.optim_t == r.done, "weights: %llu optimizer steps, %zu finished steps",
                          (unsigned long long)r.optim_t, r.done);
        } else { /* every gradient applied belongs to a finished step: the run's end is a step's end */
            size_t applied = 0;
            for (size_t s = 0; s < r.done; s++) applied += r.res[s].applied;
            ck_assert_msg(r.optim_t == applied, "mode %zu: %llu gradients applied, the finished steps hold %zu", i,
                          (unsigned long long)r.optim_t, applied);
        }
        run_free(&r);
    }
    tt_dataset_free(&ds);
}
END_TEST

/* A stop asked for the moment a run of steps starts, many times over: no schedule waits for a turn that never comes
 * (round robin: a tower waiting to pull a shard past the stop's end), every run halts. */
START_TEST(test_stop_at_start)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 120, DIM, CLASSES, 10);
    tt_error err;
    tt_model m;
    ck_assert_int_eq(tt_model_parse(&m, MODEL, "t", input_of(&ds), &err), TT_OK);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, 42);
    uint32_t idx[120];
    for (uint32_t i = 0; i < 120; i++) idx[i] = i;
    const struct {
        tt_sync_kind kind;
        size_t k;
        int rr;
    } modes[] = {{TT_SYNC_ASYNC, 0, 1}, {TT_SYNC_SSP, 1, 1}, {TT_SYNC_ASYNC, 0, 0}, {TT_SYNC_WEIGHTS, 2, 0}};
    for (size_t md = 0; md < 4; md++)
        for (size_t N = 2; N <= 4; N++) {
            tt_trainer_config tc = sync_config(N, 12, adam(), modes[md].kind, modes[md].k, modes[md].rr);
            tt_trainer *tr = NULL;
            ck_assert_msg(tt_trainer_init(&tr, &m, &tc, init, &err) == TT_OK, "%s", err.msg);
            tt_step_result res[10];
            for (int it = 0; it < 40; it++) {
                size_t done = 0;
                ck_assert_int_eq(tt_trainer_start_steps(tr, &ds, idx, 120, res, 10, NULL, &err), TT_OK);
                tt_trainer_request_stop(tr);
                tt_trainer_wait(tr, -1, &done);
                const tt_halt h = tt_trainer_halted(tr); /* the run may have ended before the request came */
                ck_assert_msg(h == TT_HALT_STOP || (h == TT_HALT_NONE && done == 10), "mode %zu, %zu towers: halt %d "
                              "after %zu steps", md, N, (int)h, done);
            }
            tt_trainer_free(tr);
        }
    tt_free(init);
    tt_dataset_free(&ds);
}
END_TEST

/* A NaN sample: ssp and async apply nothing of its shard and halt; the master weights stay finite. */
START_TEST(test_nonfinite_applies_nothing)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 200, DIM, CLASSES, 8);
    float *x = (float *)tt_malloc(ds.n * DIM * sizeof(float)); /* float32 features, one of them NaN */
    for (size_t i = 0; i < ds.n * DIM; i++) x[i] = (float)ds.x[i] / 255.0f;
    x[37 * DIM + 3] = NAN;
    uint32_t order[200]; /* run_steps's order: the step that holds sample 37 */
    tt_rng rg;
    tt_rng_seed(&rg, 9, 0);
    for (uint32_t i = 0; i < 200; i++) order[i] = i;
    tt_rng_shuffle(&rg, order, 200);
    size_t bad_step = 0;
    for (size_t i = 0; i < 200; i++)
        if (order[i] == 37) bad_step = i / 20;
    tt_free(ds.x);
    ds.x = (uint8_t *)x;
    ds.xtype = TT_X_F32;
    ds.scale = 1.0f;
    for (int k = 0; k < 3; k++) { /* weights: the towers catch up with the furthest one; its step is reported */
        if (k == 2) {
            run r = {.tc = sync_config(3, 20, adam(), TT_SYNC_WEIGHTS, 3, 0), .steps = 10};
            run_steps(&r, &ds);
            ck_assert_int_eq(r.halt, TT_HALT_NONFINITE);
            ck_assert_uint_ge(r.done, bad_step + 1);
            ck_assert_uint_eq(r.optim_t, r.done);
            for (size_t i = 0; i < r.P; i++) ck_assert(isfinite(r.w[i]));
            int named = 0; /* the towers of the step that went bad, recorded then (the catch-up ran them on) */
            for (size_t t = 0; t < 3; t++) named |= r.bad[0][t] | r.bad[1][t];
            ck_assert_msg(named, "weights: the non-finite step's towers are not named");
            run_free(&r);
            continue;
        }
        run r = {.tc = sync_config(4, 20, adam(), k ? TT_SYNC_ASYNC : TT_SYNC_SSP, k ? 0 : 2, k), .steps = 10};
        run_steps(&r, &ds);
        ck_assert_int_eq(r.halt, TT_HALT_NONFINITE);
        for (size_t i = 0; i < r.P; i++) ck_assert(isfinite(r.w[i]));
        /* round robin: the run ends with the NaN sample's step, finished (a ReLU maps NaN to 0: the loss may be
         * finite, the gradient is not); the free schedule may have finished later steps before the bad shard came */
        ck_assert_uint_ge(r.done, bad_step + 1);
        if (k == 1) {
            ck_assert_uint_eq(r.done, bad_step + 1);
            for (size_t st = 0; st + 1 < r.done; st++) ck_assert(isfinite(r.res[st].loss_sum));
        }
        for (size_t st = 0; st < r.done; st++) ck_assert_uint_eq(r.res[st].n, 20);
        int named = 0; /* the diagnosis names the tower that had the NaN */
        for (size_t t = 0; t < 4; t++) named |= r.bad[0][t] | r.bad[1][t];
        ck_assert_msg(named, "k %d: no tower named", k);
        run_free(&r);
    }
    tt_dataset_free(&ds);
}
END_TEST

/* What the modes cannot run with, one line each; the words parsed and written back. */
START_TEST(test_refusals)
{
    tt_error err;
    tt_sync sy = {TT_SYNC_BSP, 0, 0};
    const char *bad[] = {"", "ssp", "ssp:", "ssp:0", "ssp:-1", "ssp:1x", "ssp:99999999999999999999", "async:2",
                         "weights:0", "bsp:1", "sync", "SSP:1", "ssp:1000001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(tt_sync_parse("--sync", bad[i], &sy, &err) == TT_ERR_ARG, "'%s' was taken", bad[i]);
        ck_assert(strncmp(err.msg, "--sync: ", 8) == 0 && !strchr(err.msg, '\n'));
    }
    const char *good[] = {"bsp", "ssp:1", "ssp:4", "async", "weights:1", "weights:16", "ssp:1000000"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char back[32];
        ck_assert_int_eq(tt_sync_parse("--sync", good[i], &sy, &err), TT_OK);
        ck_assert_str_eq(tt_sync_format(&sy, back, sizeof back), good[i]);
    }
    tt_trainer_config tc = sync_config(2, 8, adam(), TT_SYNC_ASYNC, 0, 0);
    tc.reduce = TT_REDUCE_DEVICE;
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "--reduce cpu and --update host"));
    tc = sync_config(2, 8, adam(), TT_SYNC_WEIGHTS, 2, 0);
    tc.overlap = 1;
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "--overlap"));
    tc = sync_config(2, 8, adam(), TT_SYNC_WEIGHTS, 2, 1);
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "round-robin"));
    tc = sync_config(2, 8, adam(), TT_SYNC_SSP, 0, 0);
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_ERR_ARG);
    tc = sync_config(2, 8, adam(), (tt_sync_kind)TT_SYNC_COUNT, 0, 0);
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_ERR_ARG);
}
END_TEST

int main(int argc, char **argv)
{
    g_device = argc > 1 ? argv[1] : "cpu";
    const int is_cpu = strcmp(g_device, "cpu") == 0;
    tt_error err;
    if (tt_backend_open(g_device, NULL, &g_be, &err) != TT_OK) return tt_test_skip_no_gpu("--sync", err.msg);
    if (!is_cpu && g_be.ops == &tt_dev_cpu_ops) return tt_test_skip_no_gpu(g_device, "opened the CPU backend");
    Suite *s = suite_create(g_device);
    TCase *tc = tcase_create("sync");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_one_tower_every_mode_is_bsp);
    tcase_add_test(tc, test_round_robin_is_reproducible);
    tcase_add_test(tc, test_free_schedule_bound);
    tcase_add_test(tc, test_weights_k1_is_gradient_averaging);
    tcase_add_test(tc, test_weights_runs_split_anywhere);
    tcase_add_test(tc, test_weights_short_last_step);
    tcase_add_test(tc, test_stop_mid_run);
    tcase_add_test(tc, test_stop_at_start);
    tcase_add_test(tc, test_nonfinite_applies_nothing);
    if (is_cpu) tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return tt_test_run_suite_mode(s, is_cpu ? CK_FORK_GETENV : CK_NOFORK);
}
