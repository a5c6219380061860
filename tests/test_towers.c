/* test_towers.c — the tower step's semantics: N towers give the weights of 1 tower (uneven shards and empty
 * shards included), runs are bit-identical for the same seed and towers, every sample of an epoch is trained (the
 * last partial batch too), and the step loop allocates nothing.
 *
 * N vs 1 tolerance: the towers' partial sums are added in a different grouping than one tower's GEMM, so each
 * gradient element differs by a few float32 ulps per step. After 20 steps (SGD with momentum, or Adam) on weights
 * of magnitude ~0.5 we measured max |w_N - w_1| <= 1.8e-7 (a couple of ulps) for N = 2, 3, 4; we assert
 * |dw| <= 2e-6 + 1e-5 |w|, ten times that. A wrong shard scale (the mean per tower instead of over the global
 * batch) is off by ~1e-2 to 1e-1 and fails at once.
 *
 * Backends: `test_towers` (or `test_towers cpu`) runs every test on the CPU backend; `test_towers cuda` runs the
 * trainer's tests on the CUDA backend (CTest test_towers_cuda; a visible skip without a GPU), with more towers than
 * GPUs among them (virtual towers), without forking (CUDA does not survive a fork). The bounds are the same: every
 * backend adds the towers' gradients with tt_add in tower order, and cuBLAS's summation inside one GEMM is its own
 * but the same for the same shape (unmeasured here: no GPU on the project's machines). --reduce nccl (CUDA only) is
 * left out of the bit-identical placements — NCCL sums in its own order — and held to the N-tower bound instead,
 * where it can run (one GPU per tower and a build with NCCL: tt_trainer_init refuses it with TT_ERR_ARG otherwise). */
#include "tt_backend.h"
#include "tt_test.h"
#include "tt_train.h"
#include "tt_trainer.h"

/* A workload: a model file and a data-set maker for it. The tower semantics are checked for each: an MLP on vectors,
 * a small cnn on 6x6 images and a small textcnn on token sequences — both with dropout on, whose masks depend on the
 * sample (its data-set index), never on the tower computing it. */
typedef struct workload {
    const char *name, *model;
    void (*make)(tt_dataset *ds, size_t n, uint64_t seed);
} workload;

static void make_vectors(tt_dataset *ds, size_t n, uint64_t seed) { tt_test_dataset(ds, n, 20, 5, seed); }

static void make_images(tt_dataset *ds, size_t n, uint64_t seed)
{
    tt_test_dataset(ds, n, 36, 5, seed);
    ds->shape = tt_shape3(6, 6, 1);
}

/* 10 token ids in 0..19 per sample (float32 data), labels from the byte features they came from */
static void make_tokens(tt_dataset *ds, size_t n, uint64_t seed)
{
    tt_test_dataset(ds, n, 10, 5, seed);
    float *t = (float *)tt_malloc(n * 10 * sizeof(float));
    ck_assert_ptr_nonnull(t);
    for (size_t i = 0; i < n * 10; i++) t[i] = (float)(ds->x[i] % 20);
    tt_free(ds->x);
    ds->x = (uint8_t *)t;
    ds->xtype = TT_X_F32;
    ds->scale = 1.0f;
    ds->shape = tt_shape1(10);
}

static const workload WORKLOADS[] = {
    {"mlp", "dense units=16 activation=relu\ndense units=12 activation=relu\ndense units=5\n", make_vectors},
    {"cnn", "conv2d filters=4 kernel=3 padding=same activation=relu\nmaxpool2d pool=2\ndropout rate=0.25\n"
            "conv2d filters=4 kernel=2 activation=relu\nflatten\ndropout rate=0.5\ndense units=5 activation=softmax\n",
     make_images},
    {"textcnn", "embedding dim=3\nconv1d filters=4 kernel=3 activation=relu\nmaxpool1d pool=2\ndropout rate=0.3\n"
                "flatten\ndense units=5 activation=softmax\n",
     make_tokens},
};
/* Wide enough for --overlap's 8 KiB buckets to cut it in three: [38912, 46853), [6144, 38912) (two chunks of host
 * work) and [0, 6144) — layer boundaries rounded up to whole blocks of TT_REDUCE_BLOCK floats. */
static const workload WIDE = {"wide mlp", "dense units=256 activation=relu\ndense units=128 activation=relu\n"
                                          "dropout rate=0.5\ndense units=64 activation=relu\ndense units=5\n",
                              make_vectors};
static const workload *g_w = &WORKLOADS[0]; /* the workload under test */
#define MODEL (g_w->model)

/* The model input of a data set (shape, classes, and vocabulary 20 for the token workload). */
static const tt_model_input *input_of(const tt_dataset *ds)
{
    static tt_model_input in;
    in.shape = ds->shape;
    in.n_classes = ds->n_classes;
    in.vocab = g_w == &WORKLOADS[2] ? 20 : 0;
    return &in;
}

static tt_reduce g_reduce = TT_REDUCE_CPU; /* placement used by train_steps */
static tt_update g_update = TT_UPDATE_HOST; /* and where its optimizer runs */
static int g_graphs;                        /* --graphs on (a backend with graphs) */
static int g_epilogues;                     /* --epilogues lt (1) or kernels (0) */
static int g_overlap;                       /* --overlap on */
static size_t g_bucket_bytes;               /* its buckets (0: the default) */
static int g_host_threads;                  /* the host crew (0: the CPUs) */
static size_t g_buckets;                    /* the buckets of the last train_job (0: --overlap off) */
static size_t g_edge[TT_MAX_BUCKETS + 1];   /* and their edges */
static tt_backend g_be;                    /* the backend under test and its devices */
static const char *g_device = "cpu";       /* its name, for tt_run_on */

/* tt_test_config on the backend under test: tower t runs on g_be.devices[t % n_devices]. */
static tt_trainer_config tower_config(size_t towers, size_t batch, tt_optim_config oc, tt_reduce reduce)
{
    tt_trainer_config tc = tt_test_config(towers, batch, oc, reduce);
    tc.ops = g_be.ops;
    tc.n_devices = g_be.n_devices;
    tc.devices = g_be.devices;
    tc.update = g_update;
    tc.graphs = g_graphs;
    tc.epilogues = g_epilogues;
    tc.overlap = g_overlap;
    tc.bucket_bytes = g_bucket_bytes;
    if (g_host_threads) tc.host_threads = g_host_threads;
    return tc;
}

/* The largest tower count to compare: 4, as always on the CPU; on a GPU backend at least one more than its GPUs, so
 * that some towers share a GPU (virtual towers); never more than the batch. */
static size_t max_towers(size_t batch)
{
    size_t n = (size_t)g_be.n_devices + 1 > 4 ? (size_t)g_be.n_devices + 1 : 4;
    return n < batch ? n : batch;
}

/* A trainer's master weights, then its optimizer's state vectors (tt_optim_slots' order): (1 + slots) * P floats,
 * the caller frees. */
static float *weights_and_state(tt_trainer *tr)
{
    const size_t P = tt_trainer_model(tr)->n_params;
    tt_optim_slot sl[3];
    const int slots = tt_optim_slots(tt_trainer_optim(tr), sl);
    float *out = (float *)tt_malloc((1 + (size_t)slots) * P * sizeof(float));
    memcpy(out, tt_trainer_params(tr), P * sizeof(float));
    for (int k = 0; k < slots; k++) memcpy(out + (1 + (size_t)k) * P, sl[k].data, P * sizeof(float));
    return out;
}

/* Trains `steps` steps of a fixed index sequence under `reduce`; returns the final master weights (caller frees), or
 * NULL with *err set where tt_trainer_init refuses the configuration. */
static float *train_steps_on(tt_reduce reduce, size_t towers, size_t batch, tt_optim_config oc, size_t steps,
                             const tt_dataset *ds, size_t last_n, size_t *P, tt_error *err)
{
    tt_model m;
    ck_assert_int_eq(tt_model_parse(&m, MODEL, "t", input_of(ds), err), TT_OK);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, 42);
    tt_trainer_config tc = tower_config(towers, batch, oc, reduce);
    tt_trainer *tr = NULL;
    tt_status st = tt_trainer_init(&tr, &m, &tc, init, err);
    if (st != TT_OK) {
        ck_assert_msg(st == TT_ERR_ARG, "--reduce %s, %zu towers: %s", tt_reduce_name(reduce), towers, err->msg);
        tt_trainer_free(tr);
        tt_free(init);
        return NULL;
    }
    uint32_t *idx = (uint32_t *)tt_malloc(ds->n * sizeof(uint32_t));
    tt_rng r;
    tt_rng_seed(&r, 9, 0);
    for (size_t i = 0; i < ds->n; i++) idx[i] = (uint32_t)i;
    tt_rng_shuffle(&r, idx, ds->n);
    for (size_t s = 0; s < steps; s++) {
        size_t n = s + 1 == steps && last_n ? last_n : batch;
        size_t lo = (s * batch) % (ds->n - batch);
        tt_step_result res;
        ck_assert_msg(tt_trainer_step(tr, ds, idx + lo, n, &res, err) == TT_OK, "%s", err->msg);
        ck_assert_uint_eq(res.n, n);
    }
    *P = m.n_params;
    float *out = weights_and_state(tr);
    tt_trainer_free(tr);
    tt_free(idx);
    tt_free(init);
    return out;
}

/* As train_steps_on under g_reduce, which every backend can run. */
static float *train_steps(size_t towers, size_t batch, tt_optim_config oc, size_t steps, const tt_dataset *ds,
                          size_t last_n, size_t *P)
{
    tt_error err;
    float *w = train_steps_on(g_reduce, towers, batch, oc, steps, ds, last_n, P, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    return w;
}

/* N towers under `reduce` against the 1-tower reference: |dw| <= 2e-6 + 1e-5 |w| (see the top of the file). */
static double check_n_vs_1(const char *what, size_t N, size_t batch, const float *w, const float *ref, size_t P)
{
    double worst = 0;
    for (size_t i = 0; i < P; i++) {
        worst = fmax(worst, fabs((double)w[i] - ref[i]));
        ck_assert_msg(tt_close(w[i], ref[i], 2e-6, 1e-5), "%s N=%zu batch %zu: w[%zu] %.9g vs 1 tower %.9g", what, N,
                      batch, i, w[i], ref[i]);
    }
    return worst;
}

/* --reduce nccl, N towers, against the 1-tower reference where tt_trainer_init accepts it. Several towers on one GPU
 * must be refused (TT_ERR_ARG, naming nccl); one GPU per tower runs when the build has NCCL. */
static void check_nccl(tt_optim_config oc, size_t batch, size_t last_n, const tt_dataset *ds, const float *ref)
{
    for (size_t N = 1; N <= max_towers(batch); N++) {
        size_t P;
        tt_error err;
        float *w = train_steps_on(TT_REDUCE_NCCL, N, batch, oc, 20, ds, last_n, &P, &err);
        if (w) {
            ck_assert_msg(N <= (size_t)g_be.n_devices, "--reduce nccl ran %zu towers on %d GPUs", N, g_be.n_devices);
            double worst = check_n_vs_1("--reduce nccl", N, batch, w, ref, P);
            printf("%s --reduce nccl N=%zu batch=%zu: max |w_N - w_1| = %.3g\n", g_be.ops->name, N, batch, worst);
            tt_free(w);
            continue;
        }
        ck_assert_msg(strstr(err.msg, "nccl") != NULL, "--reduce nccl refused without naming it: %s", err.msg);
        printf("%s --reduce nccl N=%zu: refused (%s)\n", g_be.ops->name, N, err.msg);
    }
}

static void compare_towers(tt_optim_config oc, size_t batch, size_t last_n)
{
    tt_dataset ds;
    g_w->make(&ds, 600, 1);
    size_t P;
    float *ref = train_steps(1, batch, oc, 20, &ds, last_n, &P);
    for (size_t N = 2; N <= max_towers(batch); N++) {
        float *w = train_steps(N, batch, oc, 20, &ds, last_n, &P);
        double worst = check_n_vs_1("--reduce cpu", N, batch, w, ref, P), moved = 0;
        float *init = train_steps(1, batch, oc, 0, &ds, 0, &P);
        for (size_t i = 0; i < P; i++) moved = fmax(moved, fabs((double)ref[i] - init[i]));
        printf("%s N=%zu batch=%zu: max |w_N - w_1| = %.3g (weights moved %.3g)\n", g_be.ops->name, N, batch, worst,
               moved);
        ck_assert_msg(moved > 1e-2, "training did not move the weights (%g)", moved); /* the comparison tells */
        tt_free(init);
        tt_free(w);
    }
    if (g_be.ops != &tt_dev_cpu_ops) check_nccl(oc, batch, last_n, &ds, ref);
    tt_free(ref);
    tt_dataset_free(&ds);
}

START_TEST(test_n_towers_equal_one_sgd)
{
    tt_optim_config oc = tt_optim_defaults(TT_OPT_SGD);
    oc.lr = 0.1f;
    oc.momentum = 0.9f;
    compare_towers(oc, 50, 0); /* 50 = 25+25 = 17+17+16 = 13+13+12+12 */
}
END_TEST

START_TEST(test_n_towers_equal_one_adam)
{
    compare_towers(tt_optim_defaults(TT_OPT_ADAM), 47, 0); /* 47: uneven for 2, 3 and 4 */
}
END_TEST

/* A last partial step smaller than the tower count leaves some towers with empty shards. */
START_TEST(test_empty_shards)
{
    tt_optim_config oc = tt_optim_defaults(TT_OPT_SGD);
    oc.lr = 0.1f;
    compare_towers(oc, 8, 2);
}
END_TEST

/* Every placement adds the towers' gradients with the same tt_add in the same tower order, so the weights after
 * 50 steps must be identical to the bit (bound: 0 ulp) for N = 1..4 (on a GPU backend, up to one more than its GPUs),
 * with uneven shards and a partial last step. Not nccl: NCCL's order is its own (compare_towers bounds it). */
static void placements_agree(void)
{
    tt_dataset ds;
    g_w->make(&ds, 600, 5);
    tt_optim_config oc = tt_optim_defaults(TT_OPT_ADAM);
    for (size_t N = 1; N <= max_towers(47); N++) {
        size_t P;
        g_reduce = TT_REDUCE_CPU;
        float *ref = train_steps(N, 47, oc, 50, &ds, 13, &P);
        for (int r = TT_REDUCE_DEVICE; r <= TT_REDUCE_ALLREDUCE; r++) {
            g_reduce = (tt_reduce)r;
            float *w = train_steps(N, 47, oc, 50, &ds, 13, &P);
            double worst = 0;
            for (size_t i = 0; i < P; i++) worst = fmax(worst, fabs((double)w[i] - ref[i]));
            ck_assert_msg(memcmp(w, ref, P * sizeof(float)) == 0, "N=%zu --reduce %s: max |dw| %g vs cpu", N,
                          tt_reduce_name(g_reduce), worst);
            tt_free(w);
        }
        tt_free(ref);
    }
    g_reduce = TT_REDUCE_CPU;
    tt_dataset_free(&ds);
}

START_TEST(test_placements_agree) { placements_agree(); }
END_TEST

/* --epilogues lt against kernels: the mlp's dense layers (relu and plain) trained 30 steps, 2 towers, SGD with
 * momentum. On the CPU backend lt is the kernels' path itself (no gemm_bias_act: the wrapper's fallback), and on the
 * stand-in its cuBLASLt runs the same OpenBLAS call and the bias_relu formula: the weights must agree to the bit
 * (0 ulp) — with its heuristic offering algorithms, offering none (TT_SIM_LT_NO_ALGO=1: the fallback), with
 * --graphs on (the Lt call captured) and with --overlap on in 64 KiB buckets (a relu's bias gradient is written by
 * the dX GEMM of the layer above it, before its own bucket completes). On a GPU the fused epilogue may round differently from sgemm + kernels: the
 * N-towers bound (2e-6 + 1e-5 |w|), which a GPU window must confirm. */
static size_t first_diff(const float *a, const float *b, size_t n);

static void epilogues_agree(void)
{
    tt_dataset ds;
    g_w->make(&ds, 600, 5);
    tt_optim_config oc = tt_optim_defaults(TT_OPT_SGD);
    oc.lr = 0.1f;
    oc.momentum = 0.9f;
    const int exact = g_be.ops == &tt_dev_cpu_ops || strstr(g_be.ops->name, "stand-in") != NULL;
    const size_t N = 2;
    size_t P;
    g_epilogues = 0;
    float *ref = train_steps(N, 47, oc, 30, &ds, 13, &P);
    const int graphs = g_be.ops->capture_begin != NULL && (size_t)g_be.n_devices >= N;
    for (int run = 0; run < 4; run++) {
        if (run == 1) setenv("TT_SIM_LT_NO_ALGO", "1", 1);
        if (run == 2 && !graphs) continue;
        g_epilogues = 1;
        g_graphs = run == 2;
        g_overlap = run == 3; /* the buckets pushed while the dX GEMMs write the bias gradients below them */
        g_bucket_bytes = run == 3 ? 64 * 1024 : 0;
        float *w = train_steps(N, 47, oc, 30, &ds, 13, &P);
        unsetenv("TT_SIM_LT_NO_ALGO");
        const char *what = run == 0   ? "--epilogues lt"
                           : run == 1 ? "--epilogues lt, no algorithm offered"
                           : run == 2 ? "--epilogues lt --graphs on"
                                      : "--epilogues lt --overlap on";
        if (exact)
            ck_assert_msg(memcmp(w, ref, P * sizeof(float)) == 0, "%s: float %zu of %zu differs from kernels", what,
                          first_diff(w, ref, P), P);
        else
            check_n_vs_1(what, N, 47, w, ref, P);
        tt_free(w);
    }
    g_epilogues = 0;
    g_graphs = 0;
    g_overlap = 0;
    g_bucket_bytes = 0;
    tt_free(ref);
    tt_dataset_free(&ds);
}

START_TEST(test_epilogues_agree) { epilogues_agree(); }
END_TEST

/* The first of n floats whose bits differ between a and b; n if none does. */
static size_t first_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
    return n;
}

/* 30 steps of 47 samples (the last one of 13) as ONE run of steps (tt_trainer_start_steps), from the optimizer state
 * set to a fixed pattern (as a resumed run starts): the device's master and state must come from the host at the
 * run's start, and the other towers must pull tower 0's weights within it. Returns the weights, then the state
 * vectors (caller frees), or NULL with err where the configuration is refused. */
static float *train_job(tt_reduce reduce, tt_update update, size_t towers, tt_optim_config oc, const tt_dataset *ds,
                        size_t *P, tt_error *err)
{
    enum { STEPS = 30, BATCH = 47, LAST = 13 };
    tt_model m;
    ck_assert_int_eq(tt_model_parse(&m, MODEL, "t", input_of(ds), err), TT_OK);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, 42);
    tt_trainer_config tc = tower_config(towers, BATCH, oc, reduce);
    tc.update = update;
    tt_trainer *tr = NULL;
    if (tt_trainer_init(&tr, &m, &tc, init, err) != TT_OK) {
        tt_trainer_free(tr);
        tt_free(init);
        return NULL;
    }
    g_buckets = tt_trainer_buckets(tr, g_edge);
    tt_optim_slot sl[3];
    const int slots = tt_optim_slots(tt_trainer_optim(tr), sl);
    for (int k = 0; k < slots; k++) /* a resumed state: small, non-negative (second moments), never zero */
        for (size_t i = 0; i < m.n_params; i++) sl[k].data[i] = 1e-3f * (float)(1 + (i * 7 + (size_t)k) % 13);
    tt_trainer_optim(tr)->t = 5;
    const size_t n = (STEPS - 1) * BATCH + LAST;
    uint32_t *idx = (uint32_t *)tt_malloc(n * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)((i * 37) % ds->n);
    tt_step_result res[STEPS];
    ck_assert_msg(tt_trainer_start_steps(tr, ds, idx, n, res, STEPS, NULL, err) == TT_OK, "%s", err->msg);
    tt_trainer_wait(tr, -1, NULL);
    ck_assert_int_eq(tt_trainer_halted(tr), TT_HALT_NONE);
    *P = m.n_params;
    float *out = weights_and_state(tr);
    tt_trainer_free(tr);
    tt_free(idx);
    tt_free(init);
    return out;
}

/* --update device (tower 0's device) and replicated (every tower's) run tt_update_elem on the same sums in the same
 * order as the host's optimizer: after one run of 30 steps (train_job) with uneven shards and a partial last step,
 * from a resumed optimizer state, the weights and every optimizer state vector equal the host's to the bit, for every
 * optimizer and N = 1..4 (a GPU backend: one more than its GPUs). A backend with graphs runs every combination again
 * with --graphs on (each tower's steps replayed from a graph captured at its second step; the partial last step,
 * a shape seen once, runs uncaptured), host update included, to the same bits; towers sharing a GPU, and a backend
 * without graphs, refuse it with one line. A combination the placement cannot serve is refused with one line. */
static void updates_agree(void)
{
    tt_dataset ds;
    g_w->make(&ds, 600, 6);
    tt_optim_config ocs[6] = {tt_optim_defaults(TT_OPT_SGD),     tt_optim_defaults(TT_OPT_ADAM),
                              tt_optim_defaults(TT_OPT_NADAM),   tt_optim_defaults(TT_OPT_RMSPROP),
                              tt_optim_defaults(TT_OPT_ADAM),    tt_optim_defaults(TT_OPT_SGD)};
    ocs[0].momentum = 0.9f;
    ocs[0].nesterov = 1;
    ocs[3].momentum = 0.5f;
    ocs[3].centered = 1;
    ocs[4].weight_decay = 0.004f; /* AdamW, its gradient clipped by value: per element, on every placement */
    ocs[4].clipvalue = 0.01f;
    ocs[5].momentum = 0.9f; /* a schedule's rate each step, and the decay at that rate */
    ocs[5].weight_decay = 0.01f;
    tt_error se;
    ck_assert(tt_lr_schedule_parse("--lr-schedule", "cosine:20:0.1:0.05:5", &ocs[5].sched, &se) == TT_OK);
    static const struct {
        tt_update update;
        tt_reduce reduce;
    } runs[] = {{TT_UPDATE_HOST, TT_REDUCE_CPU},
                {TT_UPDATE_HOST, TT_REDUCE_ALLREDUCE},
                {TT_UPDATE_DEVICE, TT_REDUCE_DEVICE},
                {TT_UPDATE_REPLICATED, TT_REDUCE_ALLREDUCE}};
    const int graphs = g_be.ops->capture_begin != NULL;
    for (int k = 0; k < 6; k++)
        for (size_t N = 1; N <= max_towers(47); N++) {
            size_t P;
            tt_error e;
            float *ref = train_job(TT_REDUCE_CPU, TT_UPDATE_HOST, N, ocs[k], &ds, &P, &e);
            ck_assert_msg(ref != NULL, "%s", e.msg);
            const size_t floats = (1 + tt_optim_state_floats(&ocs[k])) * P;
            for (size_t r = 0; r < 2 * sizeof runs / sizeof runs[0]; r++) {
                const size_t j = r % (sizeof runs / sizeof runs[0]);
                g_graphs = r >= sizeof runs / sizeof runs[0];
                if ((g_graphs && !graphs) || (!g_graphs && runs[j].update == TT_UPDATE_HOST)) continue;
                g_update = runs[j].update;
                float *w = train_job(runs[j].reduce, runs[j].update, N, ocs[k], &ds, &P, &e);
                if (g_graphs && N > (size_t)g_be.n_devices) { /* virtual towers: graphs need one GPU per tower */
                    ck_assert(w == NULL);
                    ck_assert_msg(strstr(e.msg, "--graphs on: needs one GPU per tower") != NULL, "%s", e.msg);
                    continue;
                }
                ck_assert_msg(w != NULL, "%s", e.msg);
                const size_t first = first_diff(w, ref, floats);
                ck_assert_msg(first == floats, "%s N=%zu --reduce %s --update %s --graphs %s: float %zu of %zu "
                              "(weights then state) is %.9g, the host's %.9g", tt_optim_kind_name(ocs[k].kind), N,
                              tt_reduce_name(runs[j].reduce), tt_update_name(g_update), tt_graphs_names[g_graphs],
                              first, floats, first < floats ? w[first] : 0, first < floats ? ref[first] : 0);
                tt_free(w);
            }
            g_graphs = 0;
            tt_free(ref);
        }
    /* NCCL (a GPU backend, one GPU per tower): its reduce and all-reduce add in NCCL's order, so the update on the
     * devices is held to the host's update of the same NCCL sum within the N-towers tolerance */
    for (int k = 0; k < 4 && g_be.ops != &tt_dev_cpu_ops; k++)
        for (size_t N = 1; N <= (size_t)g_be.n_devices && N <= 4; N++) {
            size_t P;
            tt_error e;
            float *ref = train_job(TT_REDUCE_NCCL, TT_UPDATE_HOST, N, ocs[k], &ds, &P, &e);
            if (!ref) break; /* a build without NCCL: check_nccl says so */
            const size_t floats = (1 + tt_optim_state_floats(&ocs[k])) * P;
            for (int u = TT_UPDATE_DEVICE; u <= TT_UPDATE_REPLICATED; u++) {
                g_update = (tt_update)u;
                float *w = train_job(TT_REDUCE_NCCL, g_update, N, ocs[k], &ds, &P, &e);
                ck_assert_msg(w != NULL, "--reduce nccl --update %s: %s", tt_update_name(g_update), e.msg);
                for (size_t i = 0; i < floats; i++)
                    ck_assert_msg(tt_close(w[i], ref[i], 2e-6, 1e-5), "%s N=%zu --reduce nccl --update %s: float %zu "
                                  "%.9g, the host's %.9g", tt_optim_kind_name(ocs[k].kind), N, tt_update_name(g_update),
                                  i, w[i], ref[i]);
                tt_free(w);
            }
            tt_free(ref);
        }
    /* the placements that leave no sum where the update runs */
    tt_error err;
    size_t P;
    g_update = TT_UPDATE_DEVICE;
    ck_assert(train_steps_on(TT_REDUCE_CPU, 2, 47, ocs[1], 1, &ds, 0, &P, &err) == NULL);
    ck_assert_msg(strstr(err.msg, "--update device: needs --reduce device or nccl") != NULL, "%s", err.msg);
    g_update = TT_UPDATE_REPLICATED;
    ck_assert(train_steps_on(TT_REDUCE_DEVICE, 2, 47, ocs[1], 1, &ds, 0, &P, &err) == NULL);
    ck_assert_msg(strstr(err.msg, "--update replicated: needs --reduce allreduce or nccl") != NULL, "%s", err.msg);
    g_update = TT_UPDATE_HOST;
    if (!graphs) {
        g_graphs = 1;
        ck_assert(train_steps_on(TT_REDUCE_CPU, 2, 47, ocs[1], 1, &ds, 0, &P, &err) == NULL);
        ck_assert_msg(strstr(err.msg, "--graphs on: the cpu backend runs every op as it is issued") != NULL, "%s",
                      err.msg);
        g_graphs = 0;
    }
    g_reduce = TT_REDUCE_CPU;
    tt_dataset_free(&ds);
}

START_TEST(test_updates_agree) { updates_agree(); }

/* --clipnorm and --global-clipnorm: the host takes the norms of the whole summed gradient before it updates
 * (host_clip.c). The same bits whichever placement pushed the sum and however many host threads take the squares;
 * N towers against 1 within the N-towers tolerance; a clip that binds moves the weights; --update device is refused
 * with one line. */
static void norm_clips_agree(void)
{
    tt_dataset ds;
    g_w->make(&ds, 600, 6);
    tt_optim_config ocs[2] = {tt_optim_defaults(TT_OPT_SGD), tt_optim_defaults(TT_OPT_ADAM)};
    ocs[0].momentum = 0.9f;
    ocs[0].clipnorm = 0.05f;
    ocs[1].global_clipnorm = 0.1f;
    static const tt_reduce reduces[] = {TT_REDUCE_CPU, TT_REDUCE_DEVICE, TT_REDUCE_ALLREDUCE};
    for (int k = 0; k < 2; k++) {
        size_t P;
        tt_error e;
        float *one = train_job(TT_REDUCE_CPU, TT_UPDATE_HOST, 1, ocs[k], &ds, &P, &e);
        ck_assert_msg(one != NULL, "%s", e.msg);
        tt_optim_config plain = ocs[k];
        plain.clipnorm = plain.global_clipnorm = 0;
        float *unclipped = train_job(TT_REDUCE_CPU, TT_UPDATE_HOST, 1, plain, &ds, &P, &e);
        ck_assert_msg(first_diff(one, unclipped, P) < P, "the clip moved no weight");
        for (size_t N = 1; N <= max_towers(47); N++) {
            float *ref = NULL;
            for (size_t r = 0; r < sizeof reduces / sizeof reduces[0]; r++)
                for (int threads = 0; threads < 2; threads++) {
                    g_host_threads = threads ? 1 : 0;
                    float *w = train_job(reduces[r], TT_UPDATE_HOST, N, ocs[k], &ds, &P, &e);
                    ck_assert_msg(w != NULL, "%s", e.msg);
                    if (!ref) {
                        ref = w;
                        check_n_vs_1("norm clip", N, 47, w, one, P);
                        continue;
                    }
                    const size_t first = first_diff(w, ref, P);
                    ck_assert_msg(first == P, "%s N=%zu --reduce %s, %s host threads: weight %zu is %.9g, cpu's %.9g",
                                  k ? "global-clipnorm" : "clipnorm", N, tt_reduce_name(reduces[r]),
                                  threads ? "1" : "all", first, first < P ? w[first] : 0, first < P ? ref[first] : 0);
                    tt_free(w);
                }
            g_host_threads = 0;
            tt_free(ref);
        }
        tt_free(one);
        tt_free(unclipped);
        g_update = TT_UPDATE_DEVICE;
        ck_assert(train_job(TT_REDUCE_DEVICE, TT_UPDATE_DEVICE, 2, ocs[k], &ds, &P, &e) == NULL);
        ck_assert_msg(strstr(e.msg, "needs --update host") && !strchr(e.msg, '\n'), "%s", e.msg);
        g_update = TT_UPDATE_HOST;
    }
    tt_dataset_free(&ds);
}

START_TEST(test_norm_clips_agree) { norm_clips_agree(); }

/* The distance variables [first, last) of the trainable tensors moved, ||w1 - w0|| over each (per, one per tensor) or
 * over them all (per NULL). */
static double moved(const tt_model *m, const float *w0, const float *w1, size_t v, double *per)
{
    double all = 0;
    for (size_t t = 0; t < m->n_tensors && m->tensors[t].offset < m->n_trainable; t++) {
        double s = 0;
        for (size_t i = m->tensors[t].offset; i < m->tensors[t].offset + m->tensors[t].size; i++)
            s += ((double)w1[i] - w0[i]) * ((double)w1[i] - w0[i]);
        if (per && t == v) *per = sqrt(s);
        all += s;
    }
    return sqrt(all);
}

/* What the norm clips do, on a model of many blocks (the wide mlp: 23 of TT_REDUCE_BLOCK, its variables across their
 * edges): one SGD step at lr 1 moves each variable by its clipped gradient, so with --clipnorm c every variable whose
 * gradient is longer than c moves by c (the others as without the clip), and with --global-clipnorm c all of them
 * together move by c — on 1 and 3 towers (3 host slices), within float rounding of the subtraction. */
static void norm_clips_bound(void)
{
    const workload *keep = g_w;
    g_w = &WIDE;
    tt_dataset ds;
    g_w->make(&ds, 600, 6);
    tt_model m;
    tt_error e;
    ck_assert_int_eq(tt_model_parse(&m, MODEL, "t", input_of(&ds), &e), TT_OK);
    tt_optim_config oc = tt_optim_defaults(TT_OPT_SGD);
    oc.lr = 1.0f;
    const float c = 2e-3f;
    size_t P;
    for (size_t N = 1; N <= 3; N += 2) {
        float *w0 = train_steps(N, 47, oc, 0, &ds, 0, &P), *plain = train_steps(N, 47, oc, 1, &ds, 0, &P);
        tt_optim_config on = oc;
        on.clipnorm = c;
        float *per = train_steps(N, 47, on, 1, &ds, 0, &P);
        size_t bound = 0;
        for (size_t v = 0; v < m.n_tensors && m.tensors[v].offset < m.n_trainable; v++) {
            double dp = 0, dc = 0;
            moved(&m, w0, plain, v, &dp);
            moved(&m, w0, per, v, &dc);
            const double want = dp > c ? c : dp;
            bound += dp > c;
            ck_assert_msg(fabs(dc - want) <= 0.02 * want, "N=%zu --clipnorm %g: %s moved %.6g, unclipped %.6g", N,
                          (double)c, m.tensors[v].name, dc, dp);
        }
        ck_assert_msg(bound >= 3, "only %zu variables' gradients were longer than the clip", bound);
        on.clipnorm = 0;
        on.global_clipnorm = c;
        float *global = train_steps(N, 47, on, 1, &ds, 0, &P);
        const double dg = moved(&m, w0, global, SIZE_MAX, NULL), dp = moved(&m, w0, plain, SIZE_MAX, NULL);
        ck_assert_msg(dp > 2 * c && fabs(dg - c) <= 0.02 * c, "N=%zu --global-clipnorm %g: moved %.6g, unclipped %.6g",
                      N, (double)c, dg, dp);
        tt_free(w0);
        tt_free(plain);
        tt_free(per);
        tt_free(global);
    }
    tt_dataset_free(&ds);
    g_w = keep;
}

START_TEST(test_norm_clips_bound) { norm_clips_bound(); }
END_TEST

/* --overlap on: the buckets summed and updated as they land, by whichever crew thread is free, and the next step's
 * weights pulled bucket by bucket as each is updated, give --overlap off's weights and optimizer state to the bit:
 * one run of 30 steps (train_job: uneven shards, a partial last step, a resumed state), for N = 1..4 towers (a GPU
 * backend: one more than its GPUs), buckets of 8 KiB (every layer boundary past a block is an edge, up to 16
 * buckets) and the default 4 MiB (one bucket for these models), a host crew of 1 thread and of 5 (more threads than
 * towers: host-only threads take chunks while the towers compute), SGD with Nesterov momentum and Adam. The
 * combinations it cannot serve are refused with one line. */
static void overlap_agrees(size_t small_buckets)
{
    tt_dataset ds;
    g_w->make(&ds, 600, 6);
    tt_optim_config ocs[2] = {tt_optim_defaults(TT_OPT_SGD), tt_optim_defaults(TT_OPT_ADAM)};
    ocs[0].momentum = 0.9f;
    ocs[0].nesterov = 1;
    static const size_t buckets[] = {8 << 10, 0};
    static const int crews[] = {1, 5};
    for (int k = 0; k < 2; k++)
        for (size_t N = 1; N <= max_towers(47); N++) {
            size_t P;
            tt_error e;
            float *ref = train_job(TT_REDUCE_CPU, TT_UPDATE_HOST, N, ocs[k], &ds, &P, &e);
            ck_assert_msg(ref != NULL, "%s", e.msg);
            const size_t floats = (1 + tt_optim_state_floats(&ocs[k])) * P;
            g_overlap = 1;
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < 2; c++) {
                    g_bucket_bytes = buckets[b];
                    g_host_threads = crews[c];
                    float *w = train_job(TT_REDUCE_CPU, TT_UPDATE_HOST, N, ocs[k], &ds, &P, &e);
                    ck_assert_msg(w != NULL, "%s", e.msg);
                    ck_assert_uint_eq(g_buckets, b == 0 ? small_buckets : 1);
                    if (g_w == &WIDE && b == 0) /* layer boundaries rounded up to whole blocks */
                        ck_assert(g_edge[0] == 46853 && g_edge[1] == 38912 && g_edge[2] == 6144 && g_edge[3] == 0);
                    const size_t first = first_diff(w, ref, floats);
                    ck_assert_msg(first == floats, "%s N=%zu --overlap on, buckets %zu bytes, %d host threads: float "
                                  "%zu of %zu (weights then state) is %.9g, --overlap off's %.9g",
                                  tt_optim_kind_name(ocs[k].kind), N, g_bucket_bytes, g_host_threads, first, floats,
                                  first < floats ? w[first] : 0, first < floats ? ref[first] : 0);
                    tt_free(w);
                }
            g_overlap = 0;
            g_bucket_bytes = 0;
            g_host_threads = 0;
            tt_free(ref);
        }
    /* what it cannot serve: a reduce on the towers, an update on a device, a graph */
    tt_error err;
    size_t P;
    g_overlap = 1;
    ck_assert(train_steps_on(TT_REDUCE_ALLREDUCE, 2, 47, ocs[1], 1, &ds, 0, &P, &err) == NULL);
    ck_assert_msg(strstr(err.msg, "--overlap on: the host sums and updates each bucket as the towers push it, so it "
                         "needs --reduce cpu and --update host (not --reduce allreduce --update host)") != NULL,
                  "%s", err.msg);
    if (g_be.ops->capture_begin) {
        g_graphs = 1;
        ck_assert(train_steps_on(TT_REDUCE_CPU, 1, 47, ocs[1], 1, &ds, 0, &P, &err) == NULL);
        ck_assert_msg(strstr(err.msg, "--overlap on: a tower waits for each bucket's push") != NULL, "%s", err.msg);
        g_graphs = 0;
    }
    g_overlap = 0;
    tt_dataset_free(&ds);
}

START_TEST(test_overlap_agrees)
{
    g_w = &WIDE;
    overlap_agrees(3);
    g_w = &WORKLOADS[0];
}
END_TEST

/* Evaluation reads the host's weights whatever --update says: right after init and after tt_trainer_set_params (the
 * devices' masters are loaded only when a run of steps starts), a trainer with the optimizer on the devices
 * evaluates exactly what one with it on the host does. */
START_TEST(test_update_evaluates_host_weights)
{
    tt_dataset ds;
    g_w->make(&ds, 300, 8);
    tt_error err;
    tt_model m;
    ck_assert_int_eq(tt_model_parse(&m, MODEL, "t", input_of(&ds), &err), TT_OK);
    float *w = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, w, 5);
    static const struct {
        tt_reduce reduce;
        tt_update update;
    } runs[] = {{TT_REDUCE_CPU, TT_UPDATE_HOST}, {TT_REDUCE_DEVICE, TT_UPDATE_DEVICE},
                {TT_REDUCE_ALLREDUCE, TT_UPDATE_REPLICATED}};
    tt_eval_result first[3], second[3];
    for (size_t r = 0; r < 3; r++) {
        tt_trainer_config tc = tower_config(2, 32, tt_optim_defaults(TT_OPT_ADAM), runs[r].reduce);
        tc.update = runs[r].update;
        tt_trainer *tr = NULL;
        ck_assert_msg(tt_trainer_init(&tr, &m, &tc, w, &err) == TT_OK, "%s", err.msg);
        ck_assert_int_eq(tt_trainer_evaluate(tr, &ds, &first[r], &err), TT_OK);
        for (size_t i = 0; i < m.n_params; i++) w[i] *= 0.5f; /* other weights, set between runs of steps */
        tt_trainer_set_params(tr, w);
        for (size_t i = 0; i < m.n_params; i++) w[i] *= 2.0f;
        ck_assert_int_eq(tt_trainer_evaluate(tr, &ds, &second[r], &err), TT_OK);
        tt_trainer_free(tr);
        ck_assert_msg(first[r].loss == first[0].loss && second[r].loss == second[0].loss,
                      "--update %s evaluates %.9g then %.9g, the host's %.9g then %.9g", tt_update_name(runs[r].update),
                      first[r].loss, second[r].loss, first[0].loss, second[0].loss);
    }
    ck_assert(first[0].loss != second[0].loss); /* the set weights were evaluated */
    tt_free(w);
    tt_dataset_free(&ds);
}
END_TEST

static void run_full(size_t towers, uint64_t seed, tt_run_result *res)
{
    static tt_dataset train, val, test;
    static const workload *made;
    if (made != g_w) {
        if (made) {
            tt_dataset_free(&train);
            tt_dataset_free(&val);
            tt_dataset_free(&test);
        }
        g_w->make(&train, 1003, 2); /* 1003 = 15 full batches of 64 + 43 */
        g_w->make(&val, 200, 3);
        g_w->make(&test, 100, 4);
        made = g_w;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/tt_model_%d.txt", tt_test_tmp_base(), (int)getpid());
    tt_test_write(path, MODEL, strlen(MODEL));
    tt_run_config c;
    tt_run_config_defaults(&c);
    c.model = path;
    c.towers = towers;
    c.batch = 64;
    c.epochs = 3;
    c.seed = seed;
    c.progress = TT_PROGRESS_QUIET;
    c.reduce = g_reduce;
    c.device = g_device; /* never the default, auto: on a GPU machine that would be CUDA in the CPU run too */
    tt_error err;
    ck_assert_msg(tt_run_on(&c, &train, &val, &test, NULL, res, &err) == TT_OK, "%s", err.msg);
    unlink(path);
}

static void same_seed_bit_identical(void)
{
    for (size_t towers = 1; towers <= 3; towers += 2) {
        tt_run_result *a = (tt_run_result *)tt_calloc(1, sizeof *a), *b = (tt_run_result *)tt_calloc(1, sizeof *b);
        run_full(towers, 7, a);
        run_full(towers, 7, b);
        ck_assert_uint_eq(a->n_params, b->n_params);
        ck_assert_msg(memcmp(a->final_params, b->final_params, a->n_params * sizeof(float)) == 0,
                      "%zu towers: same seed, different weights", towers);
        for (size_t e = 0; e < a->n_epochs; e++) ck_assert(a->epochs[e].loss == b->epochs[e].loss);
        ck_assert(a->test.loss == b->test.loss);
        /* a different seed gives different weights */
        tt_run_result *c = (tt_run_result *)tt_calloc(1, sizeof *c);
        run_full(towers, 8, c);
        ck_assert(memcmp(a->final_params, c->final_params, a->n_params * sizeof(float)) != 0);
        tt_free(a->final_params);
        tt_free(b->final_params);
        tt_free(c->final_params);
        tt_free(a);
        tt_free(b);
        tt_free(c);
    }
}

START_TEST(test_same_seed_bit_identical) { same_seed_bit_identical(); }
END_TEST

static void trains_every_sample(void)
{
    for (int red = TT_REDUCE_CPU; red <= TT_REDUCE_ALLREDUCE; red++) {
        g_reduce = (tt_reduce)red;
        tt_run_result *r = (tt_run_result *)tt_calloc(1, sizeof *r);
        run_full(3, 1, r);
        ck_assert_uint_eq(r->n_epochs, 3);
        for (size_t e = 0; e < 3; e++) {
            ck_assert_uint_eq(r->epochs[e].samples, 1003); /* the partial batch of 43 is trained, not dropped */
            ck_assert_uint_eq(r->epochs[e].steps, 16);
        }
        ck_assert_msg(r->allocs_after_first_step == 0, "--reduce %s allocated in the step loop", tt_reduce_name(red));
        ck_assert(r->epochs[2].loss < r->epochs[0].loss);
        ck_assert_uint_eq(r->test.n, 100);
        tt_free(r->final_params);
        tt_free(r);
    }
    g_reduce = TT_REDUCE_CPU;
}

START_TEST(test_epoch_trains_every_sample_and_allocates_nothing) { trains_every_sample(); }
END_TEST

/* ---- the epoch loop, replayed by hand ----------------------------------------------------------------------
 * tt_run_on takes every epoch e's order from tt_epoch_order(seed, e): the identity shuffled with tt_rng_seed(seed, e),
 * a function of (seed, epoch) alone, so a resumed run needs no replay of earlier shuffles; it trains the batches in
 * order, the last one partial. The replay below does exactly that through tt_trainer_step; the weights must be
 * equal to the bit (same steps, same additions). A loop that shuffled only in epoch 1, or shuffled the previous
 * epoch's order again, trains other batches and gives other weights. The replay also adds up each epoch's step
 * results and evaluates the validation set after each epoch, as train.c does: the run's epoch statistics (loss,
 * accuracy, top-5, samples, steps, and the validation figures) must equal those sums exactly — same numbers, same
 * order of additions. */
enum { REPLAY_N = 203, REPLAY_BATCH = 32, REPLAY_EPOCHS = 3, REPLAY_TOWERS = 2 }; /* 203 = 6 x 32 + 11 */

typedef enum { SHUFFLE_EVERY_EPOCH, SHUFFLE_FIRST_EPOCH_ONLY, SHUFFLE_CUMULATIVE } replay_mode;

/* eps (may be NULL): REPLAY_EPOCHS records, filled as train.c's epoch_stats fills them (loss, accuracy, top5,
 * samples, steps) and with the validation set's evaluation after the epoch. */
static float *replay_run(const tt_run_config *c, const tt_dataset *train, const tt_dataset *val, replay_mode mode,
                         tt_epoch_stats *eps, size_t *P)
{
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&m, MODEL, "t", input_of(train), &err), TT_OK);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, c->seed);
    tt_trainer_config tc = tower_config(c->towers, c->batch, c->optim, c->reduce); /* --lr-scaling none */
    tc.host_threads = c->host_threads;
    tt_trainer *tr = NULL;
    ck_assert_msg(tt_trainer_init(&tr, &m, &tc, init, &err) == TT_OK, "%s", err.msg);
    uint32_t idx[REPLAY_N];
    for (size_t i = 0; i < train->n; i++) idx[i] = (uint32_t)i;
    for (size_t e = 1; e <= c->epochs; e++) {
        if (mode == SHUFFLE_EVERY_EPOCH || e == 1) {
            tt_epoch_order(idx, train->n, c->seed, e);
        } else if (mode == SHUFFLE_CUMULATIVE) { /* the previous order, shuffled again */
            tt_rng rng;
            tt_rng_seed(&rng, c->seed, e);
            tt_rng_shuffle(&rng, idx, train->n);
        }
        double loss_sum = 0;
        size_t top1 = 0, top5 = 0, seen = 0, steps = 0;
        for (size_t first = 0; first < train->n; first += c->batch) {
            size_t n = train->n - first < c->batch ? train->n - first : c->batch;
            tt_step_result res;
            ck_assert_int_eq(tt_trainer_step(tr, train, idx + first, n, &res, &err), TT_OK);
            loss_sum += res.loss_sum;
            top1 += res.top1;
            top5 += res.top5;
            seen += res.n;
            steps++;
        }
        if (eps) {
            tt_epoch_stats *es = &eps[e - 1];
            memset(es, 0, sizeof *es);
            es->steps = steps;
            es->samples = seen;
            es->loss = loss_sum / (double)seen;
            es->accuracy = (double)top1 / (double)seen;
            es->top5 = (double)top5 / (double)seen;
            ck_assert_int_eq(tt_trainer_evaluate(tr, val, &es->val, &err), TT_OK);
        }
    }
    *P = m.n_params;
    float *out = (float *)tt_malloc(m.n_params * sizeof(float));
    memcpy(out, tt_trainer_params(tr), m.n_params * sizeof(float));
    tt_trainer_free(tr);
    tt_free(init);
    return out;
}

START_TEST(test_run_equals_hand_replay)
{
    tt_dataset train, val, none;
    g_w->make(&train, REPLAY_N, 6);
    g_w->make(&val, 41, 8);
    memset(&none, 0, sizeof none); /* no test samples: they do not touch the weights or the epochs */
    char path[256];
    snprintf(path, sizeof path, "%s/tt_model_replay_%d.txt", tt_test_tmp_base(), (int)getpid());
    tt_test_write_str(path, MODEL);
    tt_run_config c;
    tt_run_config_defaults(&c); /* Adam, Keras defaults */
    c.model = path;
    c.towers = REPLAY_TOWERS;
    c.batch = REPLAY_BATCH;
    c.epochs = REPLAY_EPOCHS;
    c.seed = 11;
    c.progress = TT_PROGRESS_QUIET;
    c.device = g_device;
    tt_run_result *res = (tt_run_result *)tt_calloc(1, sizeof *res);
    tt_error err;
    ck_assert_msg(tt_run_on(&c, &train, &val, &none, NULL, res, &err) == TT_OK, "%s", err.msg);
    unlink(path);
    ck_assert_uint_eq(res->n_epochs, REPLAY_EPOCHS);
    ck_assert_uint_eq(res->epochs[0].steps, 7);

    size_t P;
    tt_epoch_stats want_es[REPLAY_EPOCHS];
    float *want = replay_run(&c, &train, &val, SHUFFLE_EVERY_EPOCH, want_es, &P);
    ck_assert_uint_eq(res->n_params, P);
    double worst = 0;
    for (size_t i = 0; i < P; i++) worst = fmax(worst, fabs((double)res->final_params[i] - want[i]));
    ck_assert_msg(memcmp(res->final_params, want, P * sizeof(float)) == 0,
                  "tt_run_on differs from the hand replay (max |dw| %g): not one fresh shuffle per epoch?", worst);
    for (size_t e = 0; e < REPLAY_EPOCHS; e++) {
        const tt_epoch_stats *got = &res->epochs[e], *w = &want_es[e];
        ck_assert_uint_eq(got->epoch, e + 1);
        ck_assert_uint_eq(got->steps, w->steps);
        ck_assert_uint_eq(got->samples, w->samples);
        ck_assert_msg(got->loss == w->loss && got->accuracy == w->accuracy && got->top5 == w->top5,
                      "epoch %zu: loss %.9g accuracy %.9g top5 %.9g, the replay's steps give %.9g %.9g %.9g", e + 1,
                      got->loss, got->accuracy, got->top5, w->loss, w->accuracy, w->top5);
        ck_assert_uint_eq(got->val.n, val.n);
        ck_assert_msg(got->val.loss == w->val.loss && got->val.accuracy == w->val.accuracy &&
                          got->val.top5 == w->val.top5,
                      "epoch %zu: val loss %.9g accuracy %.9g top5 %.9g, the replay gives %.9g %.9g %.9g", e + 1,
                      got->val.loss, got->val.accuracy, got->val.top5, w->val.loss, w->val.accuracy, w->val.top5);
    }
    /* the check can tell: the statistics are not all the same number */
    ck_assert(want_es[0].accuracy != want_es[0].top5 && want_es[0].val.accuracy != want_es[0].val.top5);
    /* the test can tell: shuffling only once gives other weights */
    float *once = replay_run(&c, &train, &val, SHUFFLE_FIRST_EPOCH_ONLY, NULL, &P);
    ck_assert(memcmp(once, want, P * sizeof(float)) != 0);
    tt_free(once);
    float *cumulative = replay_run(&c, &train, &val, SHUFFLE_CUMULATIVE, NULL, &P);
    ck_assert(memcmp(cumulative, want, P * sizeof(float)) != 0);
    tt_free(cumulative);
    tt_free(want);
    tt_free(res->final_params);
    tt_free(res);
    tt_dataset_free(&train);
    tt_dataset_free(&val);
}
END_TEST

/* ---- exact resume from the trainer's state ----------------------------------------------------------------
 * A run is its master weights, the optimizer's state (tt_optim_slots, t, u_product), and where it is: the epoch (the
 * sample order is tt_epoch_order(seed, epoch); dropout's masks depend on the epoch) and the step in it. A trainer built
 * anew from that state, continuing at the next step, must give the same weights to the bit as the run that never
 * stopped — at an epoch boundary and mid-epoch. Nadam: the optimizer with the most state (two vectors, t, the
 * schedule's running product). The test can tell: a resume that restores the weights only gives other weights. */
enum { RESUME_N = 203, RESUME_BATCH = 32, RESUME_EPOCHS = 3 }; /* 7 steps per epoch, the last partial */

typedef struct resume_state {
    float *params, *slots[3];
    int n_slots;
    uint64_t t;
    double u_product;
} resume_state;

/* Global steps [from, to) of the run: step k is step k % 7 of epoch k / 7 + 1. */
static void resume_span(tt_trainer *tr, const tt_dataset *train, uint64_t seed, size_t from, size_t to)
{
    const size_t spe = (RESUME_N + RESUME_BATCH - 1) / RESUME_BATCH;
    uint32_t idx[RESUME_N];
    tt_error err;
    for (size_t k = from; k < to; k++) {
        const size_t e = k / spe + 1, first = k % spe * RESUME_BATCH;
        if (k == from || k % spe == 0) {
            tt_epoch_order(idx, RESUME_N, seed, e);
            tt_trainer_set_epoch(tr, e);
        }
        const size_t n = RESUME_N - first < RESUME_BATCH ? RESUME_N - first : RESUME_BATCH;
        tt_step_result res;
        ck_assert_msg(tt_trainer_step(tr, train, idx + first, n, &res, &err) == TT_OK, "%s", err.msg);
    }
}

/* A trainer over steps [from, to); from > 0 starts from *in (restore_optim: its optimizer state too); *out (may be
 * NULL) receives the state at the end. Returns the final weights (caller frees). */
static float *resume_run(const tt_dataset *train, size_t towers, size_t from, size_t to, const resume_state *in,
                         int restore_optim, resume_state *out, size_t *P)
{
    tt_model m;
    tt_error err;
    const uint64_t seed = 5;
    ck_assert_int_eq(tt_model_parse(&m, MODEL, "t", input_of(train), &err), TT_OK);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, seed);
    tt_trainer_config tc = tower_config(towers, RESUME_BATCH, tt_optim_defaults(TT_OPT_NADAM), g_reduce);
    tc.seed = seed;
    tt_trainer *tr = NULL;
    ck_assert_msg(tt_trainer_init(&tr, &m, &tc, from ? in->params : init, &err) == TT_OK, "%s", err.msg);
    tt_optim *o = tt_trainer_optim(tr);
    tt_optim_slot sl[3];
    const int ns = tt_optim_slots(o, sl);
    ck_assert_int_eq(ns, (int)tt_optim_state_floats(&o->cfg));
    if (from && restore_optim) {
        ck_assert_int_eq(ns, in->n_slots);
        for (int k = 0; k < ns; k++) memcpy(sl[k].data, in->slots[k], m.n_params * sizeof(float));
        o->t = in->t;
        o->u_product = in->u_product;
    }
    resume_span(tr, train, seed, from, to);
    *P = m.n_params;
    float *w = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_trainer_get_params(tr, w);
    if (out) {
        out->params = (float *)tt_malloc(m.n_params * sizeof(float));
        memcpy(out->params, w, m.n_params * sizeof(float));
        out->n_slots = ns;
        for (int k = 0; k < ns; k++) {
            out->slots[k] = (float *)tt_malloc(m.n_params * sizeof(float));
            memcpy(out->slots[k], sl[k].data, m.n_params * sizeof(float));
        }
        out->t = o->t;
        out->u_product = o->u_product;
    }
    tt_trainer_free(tr);
    tt_free(init);
    return w;
}

static void resume_state_free(resume_state *s)
{
    tt_free(s->params);
    for (int k = 0; k < s->n_slots; k++) tt_free(s->slots[k]);
}

static void resume_is_exact(void)
{
    tt_dataset train;
    g_w->make(&train, RESUME_N, 13);
    const size_t spe = 7, total = RESUME_EPOCHS * spe, cuts[2] = {spe, spe + 3}; /* an epoch boundary, mid-epoch */
    const size_t towers = max_towers(RESUME_BATCH) < 2 ? max_towers(RESUME_BATCH) : 2;
    size_t P;
    float *straight = resume_run(&train, towers, 0, total, NULL, 0, NULL, &P);
    for (int c = 0; c < 2; c++) {
        resume_state st;
        tt_free(resume_run(&train, towers, 0, cuts[c], NULL, 0, &st, &P));
        ck_assert_uint_eq(st.t, cuts[c]);
        float *resumed = resume_run(&train, towers, cuts[c], total, &st, 1, NULL, &P);
        double worst = 0;
        for (size_t i = 0; i < P; i++) worst = fmax(worst, fabs((double)resumed[i] - straight[i]));
        ck_assert_msg(memcmp(resumed, straight, P * sizeof(float)) == 0,
                      "%s: resumed after step %zu differs from the straight run (max |dw| %g)", g_w->name, cuts[c],
                      worst);
        float *weights_only = resume_run(&train, towers, cuts[c], total, &st, 0, NULL, &P);
        ck_assert_msg(memcmp(weights_only, straight, P * sizeof(float)) != 0, "the optimizer's state made no difference");
        tt_free(weights_only);
        tt_free(resumed);
        resume_state_free(&st);
    }
    tt_free(straight);
    tt_dataset_free(&train);
}

START_TEST(test_resume_is_exact) { resume_is_exact(); }
END_TEST

/* ---- the host's sum of the slots -------------------------------------------------------------------------------
 * tt_sum_slots must add slot 0 + slot 1, then slot 2, then slot 3, ... (tower order), nothing else: every placement
 * relies on that order to agree to the bit. The values are chosen so that float addition in any other order or
 * grouping gives another result (float32: 1e8 + 1 = 1e8, since ulp(1e8) = 8; 2^24 + 1 = 2^24):
 *   A = {1e8, 1, -1e8, 1}:      tower order 1e8, 1e8, 0, 1 for 1..4 slots; reversed ((1 - 1e8) + 1) + 1e8 = 0,
 *                               pairwise (1e8 + 1) + (-1e8 + 1) = 0
 *   B = {1, 1e8, -1e8, -1}:     1, 1e8, 0, -1; for 3 slots s0 + (s1 + s2) = 1, reversed 3 slots 1
 *   C = {2^24, 1, 1, -2^24}:    2^24, 2^24, 2^24, 0; s0 + (s1 + s2) = 2^24 + 2, pairwise 1, reversed 2
 * From 5 slots on, the middle slots 2..N-2 have a loop of their own (the first pair and the last slot, which also
 * checks the sum, have theirs), so the order inside it needs patterns of 5 and 6:
 *   D = {1e8, 1, 1, -1e8, 1, 1}: 1e8, 1e8, 1e8, 0, 1, 2; the middle reversed gives 2 for 5 slots
 *   E = {1e8, 1, 1, 1, -1e8, 1}: 1e8, 1e8, 1e8, 1e8, 0, 1; the middle reversed gives 3 for 6 slots
 * Element k uses pattern k % (number of patterns) scaled by 2^(k % 7) (exact: the roundings scale with it), so a
 * wrong offset reads another element's values. Offsets and lengths are not multiples of 16 (the host slices'
 * alignment), and the floats after out[len) are guards that must stay untouched. Bound: exact (0 ulp). */
enum { SUM_TOTAL = 64, SUM_MAX_SLOTS = 6 };

/* pat and want: n_pat rows of max_slots floats; want[p][n - 1] is the tower-order sum of the first n of pat[p]. */
static void check_sum_order(size_t max_slots, size_t n_pat, const float *pat, const float *want_tab)
{
    static const size_t RANGES[][2] = {{0, 1}, {3, 37}, {17, 33}, {5, 59}, {0, SUM_TOTAL}}; /* offset, len */
    float *slots[SUM_MAX_SLOTS];
    ck_assert(max_slots <= SUM_MAX_SLOTS);
    for (size_t w = 0; w < max_slots; w++) {
        slots[w] = (float *)tt_malloc(SUM_TOTAL * sizeof(float));
        for (size_t k = 0; k < SUM_TOTAL; k++) slots[w][k] = ldexpf(pat[(k % n_pat) * max_slots + w], (int)(k % 7));
    }
    for (size_t n_slots = 1; n_slots <= max_slots; n_slots++)
        for (size_t r = 0; r < sizeof RANGES / sizeof RANGES[0]; r++) {
            const size_t off = RANGES[r][0], len = RANGES[r][1];
            float out[SUM_TOTAL + 4];
            for (size_t k = 0; k < SUM_TOTAL + 4; k++) out[k] = -7.0f; /* guards */
            tt_sum_slots(out, slots, n_slots, off, len);
            for (size_t k = 0; k < len; k++) {
                const size_t e = off + k;
                const float want = ldexpf(want_tab[(e % n_pat) * max_slots + n_slots - 1], (int)(e % 7));
                ck_assert_msg(out[k] == want, "%zu slots, offset %zu: out[%zu] = %.9g, want %.9g", n_slots, off, k,
                              out[k], want);
            }
            for (size_t k = len; k < SUM_TOTAL + 4; k++)
                ck_assert_msg(out[k] == -7.0f, "%zu slots: wrote out[%zu], past len %zu", n_slots, k, len);
        }
    for (size_t w = 0; w < max_slots; w++) tt_free(slots[w]);
}

START_TEST(test_sum_slots_tower_order)
{
    static const float PAT[3][4] = {{1e8f, 1.0f, -1e8f, 1.0f}, {1.0f, 1e8f, -1e8f, -1.0f},
                                    {16777216.0f, 1.0f, 1.0f, -16777216.0f}};
    static const float WANT[3][4] = {{1e8f, 1e8f, 0.0f, 1.0f}, {1.0f, 1e8f, 0.0f, -1.0f},
                                     {16777216.0f, 16777216.0f, 16777216.0f, 0.0f}};
    check_sum_order(4, 3, &PAT[0][0], &WANT[0][0]);
    static const float PAT6[2][6] = {{1e8f, 1.0f, 1.0f, -1e8f, 1.0f, 1.0f}, {1e8f, 1.0f, 1.0f, 1.0f, -1e8f, 1.0f}};
    static const float WANT6[2][6] = {{1e8f, 1e8f, 1e8f, 0.0f, 1.0f, 2.0f}, {1e8f, 1e8f, 1e8f, 1e8f, 0.0f, 1.0f}};
    check_sum_order(6, 2, &PAT6[0][0], &WANT6[0][0]);
}
END_TEST

START_TEST(test_more_towers_than_batch_is_an_error)
{
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&m, MODEL, "t", TT_FLAT_INPUT(20, 5), &err), TT_OK);
    float *init = (float *)tt_calloc(m.n_params, sizeof(float));
    tt_trainer_config tc = tt_test_config(5, 4, tt_optim_defaults(TT_OPT_SGD), TT_REDUCE_CPU);
    tt_trainer *tr = NULL;
    ck_assert_int_eq(tt_trainer_init(&tr, &m, &tc, init, &err), TT_ERR_ARG);
    ck_assert(strstr(err.msg, "--towers 5") != NULL);
    tt_trainer_free(tr);
    tt_free(init);
}
END_TEST

/* A model that starts with an embedding reads token ids: the vocabulary comes from the data (largest id + 1) or
 * --vocab; ids beyond a model file's vocab=, beyond --vocab, or data that are not non-negative integers are refused
 * before training, each with one line (TT_ERR_MODEL, TT_ERR_ARG, TT_ERR_FORMAT). */
START_TEST(test_token_checks)
{
    tt_dataset train, none;
    make_tokens(&train, 50, 3);
    memset(&none, 0, sizeof none);
    tt_run_config c;
    tt_run_config_defaults(&c);
    c.model = "textcnn";
    tt_model *m = (tt_model *)tt_calloc(1, sizeof *m);
    tt_error err;
    ck_assert_int_eq(tt_run_model(&c, &train, &none, &none, m, &err), TT_ERR_MODEL); /* 10 tokens: too short */
    char path[256];
    snprintf(path, sizeof path, "%s/tt_tokens_%d.txt", tt_test_tmp_base(), (int)getpid());
    tt_test_write_str(path, "embedding dim=2\nflatten\ndense units=5\n");
    c.model = path;
    ck_assert_msg(tt_run_model(&c, &train, &none, &none, m, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(m->layers[0].vocab, 20); /* ids 0..19 */
    tt_test_write_str(path, "embedding dim=2 vocab=19\nflatten\ndense units=5\n"); /* one short: id 19 */
    ck_assert_int_eq(tt_run_model(&c, &train, &none, &none, m, &err), TT_ERR_MODEL);
    ck_assert_msg(strstr(err.msg, "token id 19") && strstr(err.msg, "vocabulary is 19"), "%s", err.msg);
    tt_test_write_str(path, "embedding dim=2\nflatten\ndense units=5\n");
    c.vocab = 5;
    ck_assert_int_eq(tt_run_model(&c, &train, &none, &none, m, &err), TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "--vocab"), "%s", err.msg);
    c.vocab = 0;
    ((float *)(void *)train.x)[7] = 2.5f;
    ck_assert_int_eq(tt_run_model(&c, &train, &none, &none, m, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "2.5"), "%s", err.msg);
    /* integers too large to be token ids: 2^24 (float32 stops being exact there; an embedding's largest vocab) and
     * 1e30 (an integer as a float, whose size_t conversion would be undefined) */
    ((float *)(void *)train.x)[7] = 16777216.0f;
    ck_assert_int_eq(tt_run_model(&c, &train, &none, &none, m, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "16777216,") && strstr(err.msg, "not a token id"), "%s", err.msg);
    ((float *)(void *)train.x)[7] = 1e30f;
    ck_assert_int_eq(tt_run_model(&c, &train, &none, &none, m, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "e+30,") && strstr(err.msg, "not a token id"), "%s", err.msg);
    ((float *)(void *)train.x)[7] = 3.0f;
    /* --vocab with a model file that sets vocab= (ids fit both): refused, not silently the file's */
    tt_test_write_str(path, "embedding dim=2 vocab=30\nflatten\ndense units=5\n");
    c.vocab = 25;
    ck_assert_int_eq(tt_run_model(&c, &train, &none, &none, m, &err), TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "--vocab: 25") && strstr(err.msg, "vocab=30"), "%s", err.msg);
    c.vocab = 30;
    ck_assert_msg(tt_run_model(&c, &train, &none, &none, m, &err) == TT_OK, "%s", err.msg);
    c.vocab = 0;
    unlink(path);
    tt_free(m);
    tt_dataset_free(&train);
}
END_TEST

/* Token ids stored as bytes (uint8 .npy) are ids, not pixels: a model that starts with an embedding reads them
 * unscaled, so the same ids stored as bytes or as float32 train to the same bits. */
START_TEST(test_byte_tokens_are_ids)
{
    tt_dataset f32, u8;
    make_tokens(&f32, 300, 4);
    u8 = f32;
    u8.x = (uint8_t *)tt_malloc(f32.n * f32.dim);
    u8.y = (int32_t *)tt_malloc(f32.n * sizeof(int32_t));
    u8.xtype = TT_X_U8;
    u8.scale = 1.0f / 255.0f;
    for (size_t i = 0; i < f32.n * f32.dim; i++) u8.x[i] = (uint8_t)((float *)(void *)f32.x)[i];
    memcpy(u8.y, f32.y, f32.n * sizeof(int32_t));
    g_w = &WORKLOADS[2];
    size_t P;
    float *a = train_steps(2, 32, tt_optim_defaults(TT_OPT_ADAM), 5, &f32, 0, &P);
    float *b = train_steps(2, 32, tt_optim_defaults(TT_OPT_ADAM), 5, &u8, 0, &P);
    ck_assert_msg(memcmp(a, b, P * sizeof(float)) == 0, "byte token ids trained differently from float32 ones");
    tt_free(a);
    tt_free(b);
    tt_dataset_free(&f32);
    tt_dataset_free(&u8);
}
END_TEST

/* Evaluation runs the layers in evaluation mode: a dropout layer is the identity there, so a model with dropout
 * evaluates exactly like the same model without it (dropout has no parameters: the same weights fit both); and a
 * training step does drop (the two train differently). */
START_TEST(test_dropout_off_in_evaluation)
{
    tt_dataset ds;
    make_vectors(&ds, 300, 9);
    tt_model with, without;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&with, "dense units=16 activation=relu\ndropout rate=0.5\ndense units=5\n", "t",
                                    input_of(&ds), &err), TT_OK);
    ck_assert_int_eq(tt_model_parse(&without, "dense units=16 activation=relu\ndense units=5\n", "t", input_of(&ds),
                                    &err), TT_OK);
    ck_assert_uint_eq(with.n_params, without.n_params);
    float *w = (float *)tt_malloc(with.n_params * sizeof(float));
    tt_model_init_params(&without, w, 3);
    tt_eval_result r[2];
    tt_step_result st[2];
    uint32_t idx[32];
    for (int i = 0; i < 32; i++) idx[i] = (uint32_t)i;
    const tt_model *models[2] = {&with, &without};
    for (int k = 0; k < 2; k++) {
        tt_trainer_config tc = tower_config(2, 32, tt_optim_defaults(TT_OPT_SGD), TT_REDUCE_CPU);
        tt_trainer *tr = NULL;
        ck_assert_msg(tt_trainer_init(&tr, models[k], &tc, w, &err) == TT_OK, "%s", err.msg);
        ck_assert_int_eq(tt_trainer_evaluate(tr, &ds, &r[k], &err), TT_OK);
        ck_assert_int_eq(tt_trainer_step(tr, &ds, idx, 32, &st[k], &err), TT_OK);
        tt_trainer_free(tr);
    }
    ck_assert_msg(r[0].loss == r[1].loss && r[0].accuracy == r[1].accuracy, "evaluation with dropout: loss %.9g, "
                  "without: %.9g", r[0].loss, r[1].loss);
    ck_assert_msg(st[0].loss_sum != st[1].loss_sum, "a training step with dropout 0.5 dropped nothing");
    tt_free(w);
    tt_dataset_free(&ds);
}
END_TEST

/* The cnn and textcnn workloads (dropout on): N towers = 1 tower, placements bit-identical, same seed bit-identical,
 * every sample trained with no allocation in the step loop. */
static void workload_semantics(const workload *w)
{
    g_w = w;
    compare_towers(tt_optim_defaults(TT_OPT_ADAM), 47, 0);
    placements_agree();
    same_seed_bit_identical();
    trains_every_sample();
    resume_is_exact();
    overlap_agrees(1);
    g_w = &WORKLOADS[0];
}

START_TEST(test_cnn_workload) { workload_semantics(&WORKLOADS[1]); }
END_TEST

START_TEST(test_textcnn_workload) { workload_semantics(&WORKLOADS[2]); }
END_TEST

/* Usage: test_towers [cpu|cuda] (default cpu). */
/* Every test starts from the defaults of the knobs above. A CUDA run does not fork (a process that has initialised
 * CUDA must not), so a test that fails half-way would otherwise hand its placement to every test after it. */
static void knobs_default(void)
{
    g_w = &WORKLOADS[0];
    g_reduce = TT_REDUCE_CPU;
    g_update = TT_UPDATE_HOST;
    g_graphs = 0;
    g_epilogues = 0;
    g_overlap = 0;
    g_bucket_bytes = 0;
    g_host_threads = 0;
    g_buckets = 0;
}

int main(int argc, char **argv)
{
    g_device = argc > 1 ? argv[1] : "cpu";
    const int is_cpu = strcmp(g_device, "cpu") == 0;
    tt_error err;
    if (tt_backend_open(g_device, NULL, &g_be, &err) != TT_OK) { /* cuda: the first CUDA call of this process */
        char what[64];
        snprintf(what, sizeof what, "towers on backend %s", g_device);
        return tt_test_skip_no_gpu(what, err.msg);
    }
    if (!is_cpu && g_be.ops == &tt_dev_cpu_ops) return tt_test_skip_no_gpu(g_device, "opened the CPU backend");
    Suite *s = suite_create(g_device);
    TCase *tc = tcase_create("semantics");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, knobs_default, NULL);
    tcase_add_test(tc, test_n_towers_equal_one_sgd);
    tcase_add_test(tc, test_n_towers_equal_one_adam);
    tcase_add_test(tc, test_empty_shards);
    tcase_add_test(tc, test_placements_agree);
    tcase_add_test(tc, test_epilogues_agree);
    tcase_add_test(tc, test_updates_agree);
    tcase_add_test(tc, test_norm_clips_agree);
    tcase_add_test(tc, test_norm_clips_bound);
    tcase_add_test(tc, test_overlap_agrees);
    tcase_add_test(tc, test_update_evaluates_host_weights);
    tcase_add_test(tc, test_same_seed_bit_identical);
    tcase_add_test(tc, test_epoch_trains_every_sample_and_allocates_nothing);
    tcase_add_test(tc, test_run_equals_hand_replay);
    tcase_add_test(tc, test_resume_is_exact);
    tcase_add_test(tc, test_cnn_workload);
    tcase_add_test(tc, test_textcnn_workload);
    if (is_cpu) { /* host code only: the backend does not enter */
        tcase_add_test(tc, test_sum_slots_tower_order);
        tcase_add_test(tc, test_more_towers_than_batch_is_an_error);
        tcase_add_test(tc, test_token_checks);
        tcase_add_test(tc, test_byte_tokens_are_ids);
        tcase_add_test(tc, test_dropout_off_in_evaluation);
    } else {
        printf("%s: %d GPU%s (towers run on them round-robin)\n", g_device, g_be.n_devices,
               g_be.n_devices == 1 ? "" : "s");
    }
    suite_add_tcase(s, tc);
    /* the CPU run forks a child per test, as every suite; a process that has initialised CUDA must not fork */
    return tt_test_run_suite_mode(s, is_cpu ? CK_FORK_GETENV : CK_NOFORK);
}
