/* test_data_on.c — --data-on device (issue 30, item 3): the training set held on every device, a step's rows and
 * labels gathered there from the host's shuffled indices, against --data-on host, the design it replaces.
 *
 *   - the trainer: one run of steps (uneven shards — a batch of 47 — and a short last step of 13, from a resumed
 *     optimizer state) gives --data-on host's weights, optimizer state and per-step losses to the bit, for N = 1..4
 *     towers (a GPU backend: one more than its GPUs, so virtual towers share their device's copy), on byte vectors of
 *     an odd width (the byte-wise gather), byte images and float32 token ids (a cnn and a textcnn with dropout,
 *     whose masks read the gathered data-set ids), under every design that runs the data phase: --reduce cpu,
 *     allreduce; --update device, replicated; --overlap on; --graphs on (a backend with graphs: the index upload and
 *     the gathers are in the captured step, replayed with new indices every step); --sync async (round robin) and
 *     weights:K; and --bn-sync on. Bound: exact (0 ulp) — the same bytes land in the same buffers;
 *   - the ledger: every step's data phase moved rows x 4 bytes (the indices) instead of rows x (sample + label +
 *     index) bytes, in the trainer's ledger and in the JSON log's step records;
 *   - a whole run (tt_run_on: epochs, shuffles, validation and test on the host's path) and a resume from a
 *     mid-epoch checkpoint written by --data-on host give the uninterrupted host run's bits;
 *   - the memory plan holds the training set once per device (towers sharing a device read one copy), and a set too
 *     large for what is available is refused with one line naming the bytes, exit 1 (TT_MEM_LIMIT caps the host's
 *     figure; the CPU backend's device memory is host RAM);
 *   - the command line: --data-on bogus and the commands it does not apply to are refused with one line (exit 2);
 *     the start record and the banner name it; probe, bench and compare measure with it — compare (every design, and
 *     the other --data-on: max |dw| 0) on byte images, float32 .npy features and int32 .npy token ids too.
 * Backends: `test_data_on` (or `test_data_on cpu`) runs everything on the CPU backend; `test_data_on cuda` the
 * trainer's tests on the CUDA backend (CTest test_data_on_cuda: the stand-in in CI), without forking. */
#include <json-c/json.h>
#include <sys/stat.h>

#include "tt_backend.h"
#include "tt_checkpoint.h"
#include "tt_test.h"
#include "tt_train.h"
#include "tt_trainer.h"

static tt_backend g_be;
static const char *g_device = "cpu";

/* A workload: a model file and a data-set maker for it. */
typedef struct workload {
    const char *name, *model;
    void (*make)(tt_dataset *ds, size_t n, uint64_t seed);
    size_t vocab; /* an embedding's vocabulary (0: none) */
} workload;

/* 21 byte features: rows of an odd width, which the CUDA backend gathers byte by byte */
static void make_vectors(tt_dataset *ds, size_t n, uint64_t seed) { tt_test_dataset(ds, n, 21, 5, seed); }

static void make_images(tt_dataset *ds, size_t n, uint64_t seed)
{
    tt_test_dataset(ds, n, 36, 5, seed);
    ds->shape = tt_shape3(6, 6, 1);
}

/* 10 token ids in 0..19 per sample (float32 data) */
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
    {"mlp", "dense units=16 activation=relu\ndropout rate=0.25\ndense units=5\n", make_vectors, 0},
    {"cnn", "conv2d filters=4 kernel=3 padding=same activation=relu\nmaxpool2d pool=2\ndropout rate=0.25\n"
            "flatten\ndense units=5 activation=softmax\n",
     make_images, 0},
    {"textcnn", "embedding dim=3\nconv1d filters=4 kernel=3 activation=relu\nmaxpool1d pool=2\ndropout rate=0.3\n"
                "flatten\ndense units=5 activation=softmax\n",
     make_tokens, 20},
};
#define BN_MODEL                                                                                                     \
    "conv2d filters=4 kernel=3 padding=same\nbatchnorm\nrelu\nmaxpool2d pool=2\nflatten\ndense units=6\n"           \
    "batchnorm momentum=0.5\nrelu\ndense units=5\n"

/* One design of the step: where the sum and the update run, overlap, graphs, --sync, --bn-sync. */
typedef struct design {
    const char *name;
    tt_reduce reduce;
    tt_update update;
    int overlap, graphs;
    tt_sync sync;
    int bn_sync;
} design;

static const design DESIGNS[] = {
    {"cpu/host", TT_REDUCE_CPU, TT_UPDATE_HOST, 0, 0, {TT_SYNC_BSP, 0, 0}, 0},
    {"allreduce/host", TT_REDUCE_ALLREDUCE, TT_UPDATE_HOST, 0, 0, {TT_SYNC_BSP, 0, 0}, 0},
    {"device/device", TT_REDUCE_DEVICE, TT_UPDATE_DEVICE, 0, 0, {TT_SYNC_BSP, 0, 0}, 0},
    {"allreduce/replicated", TT_REDUCE_ALLREDUCE, TT_UPDATE_REPLICATED, 0, 0, {TT_SYNC_BSP, 0, 0}, 0},
    {"overlap on", TT_REDUCE_CPU, TT_UPDATE_HOST, 1, 0, {TT_SYNC_BSP, 0, 0}, 0},
    {"graphs on", TT_REDUCE_CPU, TT_UPDATE_HOST, 0, 1, {TT_SYNC_BSP, 0, 0}, 0},
    {"graphs on, replicated", TT_REDUCE_ALLREDUCE, TT_UPDATE_REPLICATED, 0, 1, {TT_SYNC_BSP, 0, 0}, 0},
    {"sync async round-robin", TT_REDUCE_CPU, TT_UPDATE_HOST, 0, 0, {TT_SYNC_ASYNC, 0, 1}, 0},
    {"sync weights:3", TT_REDUCE_CPU, TT_UPDATE_HOST, 0, 0, {TT_SYNC_WEIGHTS, 3, 0}, 0},
};

/* The largest tower count to compare: 4 on the CPU; on a GPU backend one more than its GPUs (a virtual tower reads
 * its device's copy of the set). */
static size_t max_towers(void)
{
    const size_t n = (size_t)g_be.n_devices + 1;
    return n > 4 ? n : g_be.ops == &tt_dev_cpu_ops ? 4 : n;
}

static tt_trainer_config design_config(const design *d, size_t towers, size_t batch, tt_optim_config oc)
{
    tt_trainer_config tc = tt_test_config(towers, batch, oc, d->reduce);
    tc.ops = g_be.ops;
    tc.n_devices = g_be.n_devices;
    tc.devices = g_be.devices;
    tc.update = d->update;
    tc.overlap = d->overlap;
    tc.bucket_bytes = d->overlap ? 8 << 10 : 0;
    tc.graphs = d->graphs;
    tc.sync = d->sync;
    tc.bn_sync = d->bn_sync;
    return tc;
}

/* What a run of steps left: the weights and the optimizer's vectors, every step's loss sum and counts, and whether
 * every tower entry of the ledger moved the data phase's bytes of its mode. */
typedef struct job {
    float *w;
    size_t floats;
    double loss[32];
    size_t top1[32], steps;
} job;

enum { STEPS = 30, BATCH = 47, LAST = 13 };

/* 30 steps of 47 samples (the last one of 13) as ONE run of steps, from a resumed optimizer state; data_on as given.
 * Returns 0 where the trainer refuses the configuration (err says why). */
static int run_job(const char *model, size_t vocab, const tt_dataset *ds, const design *d, size_t towers,
                   tt_optim_config oc, int data_on, job *out, tt_error *err)
{
    tt_model m;
    const tt_model_input in = {ds->shape, ds->n_classes, vocab};
    ck_assert_msg(tt_model_parse(&m, model, "t", &in, err) == TT_OK, "%s", err->msg);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, 42);
    tt_trainer_config tc = design_config(d, towers, BATCH, oc);
    tc.data_on = data_on;
    tc.train_set = ds;
    tt_trainer *tr = NULL;
    if (tt_trainer_init(&tr, &m, &tc, init, err) != TT_OK) {
        tt_trainer_free(tr);
        tt_free(init);
        return 0;
    }
    tt_optim_slot sl[3];
    const int slots = tt_optim_slots(tt_trainer_optim(tr), sl);
    for (int k = 0; k < slots; k++) /* a resumed state: small, non-negative, never zero */
        for (size_t i = 0; i < m.n_params; i++) sl[k].data[i] = 1e-3f * (float)(1 + (i * 7 + (size_t)k) % 13);
    tt_trainer_optim(tr)->t = 5;
    tt_trainer_set_epoch(tr, 2);
    const size_t n = (STEPS - 1) * BATCH + LAST, SB = tt_dataset_sample_bytes(ds);
    uint32_t *idx = (uint32_t *)tt_malloc(n * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)((i * 37 + 11) % ds->n);
    tt_step_result res[STEPS];
    tt_tower_ledger *led = (tt_tower_ledger *)tt_calloc(STEPS * towers, sizeof *led);
    ck_assert_msg(tt_trainer_start_steps(tr, ds, idx, n, res, STEPS, led, err) == TT_OK, "%s", err->msg);
    tt_trainer_wait(tr, -1, NULL);
    ck_assert_int_eq(tt_trainer_halted(tr), TT_HALT_NONE);
    out->steps = STEPS;
    for (size_t s = 0; s < STEPS; s++) {
        out->loss[s] = res[s].loss_sum;
        out->top1[s] = res[s].top1;
        ck_assert_uint_eq(res[s].n, s + 1 == STEPS ? LAST : BATCH);
        /* the data phase's bytes: the indices alone, or the rows, labels and indices */
        for (size_t t = 0; t < towers; t++) {
            const tt_tower_ledger *l = &led[s * towers + t];
            const uint64_t want = l->rows * (data_on ? 4 : SB + 8);
            ck_assert_msg(l->bytes_data == want, "%s, data-on %s, step %zu, tower entry %zu (%zu rows): %llu bytes "
                          "of data, want %llu", d->name, tt_data_on_names[data_on], s, t, l->rows,
                          (unsigned long long)l->bytes_data, (unsigned long long)want);
        }
    }
    const size_t P = m.n_params;
    out->floats = (1 + (size_t)slots) * P;
    out->w = (float *)tt_malloc(out->floats * sizeof(float));
    memcpy(out->w, tt_trainer_params(tr), P * sizeof(float));
    for (int k = 0; k < slots; k++) memcpy(out->w + (1 + (size_t)k) * P, sl[k].data, P * sizeof(float));
    tt_trainer_free(tr);
    tt_free(led);
    tt_free(idx);
    tt_free(init);
    return 1;
}

/* --data-on device against host under design d for N = 1..max_towers: the same bits, or the same refusal. Returns
 * the tower counts that ran. */
static size_t check_design(const char *model, size_t vocab, const tt_dataset *ds, const design *d, tt_optim_config oc)
{
    size_t ran = 0;
    for (size_t N = 1; N <= max_towers(); N++) {
        job host, dev;
        tt_error e_host, e_dev;
        const int ran_host = run_job(model, vocab, ds, d, N, oc, 0, &host, &e_host);
        const int ran_dev = run_job(model, vocab, ds, d, N, oc, 1, &dev, &e_dev);
        ck_assert_msg(ran_host == ran_dev, "%s N=%zu: host %s, device %s", d->name, N,
                      ran_host ? "ran" : e_host.msg, ran_dev ? "ran" : e_dev.msg);
        if (!ran_host) { /* a design this backend cannot run with N towers (graphs on shared GPUs, none on the CPU) */
            ck_assert_str_eq(e_host.msg, e_dev.msg);
            continue;
        }
        ran++;
        ck_assert_uint_eq(host.floats, dev.floats);
        for (size_t i = 0; i < host.floats; i++)
            ck_assert_msg(memcmp(&host.w[i], &dev.w[i], sizeof(float)) == 0, "%s N=%zu: float %zu of %zu (weights "
                          "then state) is %.9g with --data-on device, %.9g with host", d->name, N, i, host.floats,
                          dev.w[i], host.w[i]);
        for (size_t s = 0; s < host.steps; s++)
            ck_assert_msg(host.loss[s] == dev.loss[s] && host.top1[s] == dev.top1[s], "%s N=%zu step %zu: loss sum "
                          "%.17g with --data-on device, %.17g with host", d->name, N, s, dev.loss[s], host.loss[s]);
        tt_free(host.w);
        tt_free(dev.w);
    }
    return ran;
}

static void designs_agree(const workload *w)
{
    tt_dataset ds;
    w->make(&ds, 600, 6);
    tt_optim_config adam = tt_optim_defaults(TT_OPT_ADAM);
    for (size_t k = 0; k < sizeof DESIGNS / sizeof DESIGNS[0]; k++) {
        const size_t ran = check_design(w->model, w->vocab, &ds, &DESIGNS[k], adam);
        /* every design ran somewhere: graphs wherever the backend has them (one GPU per tower) */
        ck_assert_msg(ran > 0 || (DESIGNS[k].graphs && !g_be.ops->capture_begin), "%s ran with no tower count",
                      DESIGNS[k].name);
    }
    tt_dataset_free(&ds);
}

START_TEST(test_mlp_bytes_agree) { designs_agree(&WORKLOADS[0]); }
END_TEST

START_TEST(test_cnn_images_agree) { designs_agree(&WORKLOADS[1]); }
END_TEST

START_TEST(test_textcnn_tokens_agree) { designs_agree(&WORKLOADS[2]); }
END_TEST

/* --bn-sync on: the towers exchange their statistics in the middle of the step; the rows they normalise come from
 * the device's copy of the set. */
START_TEST(test_bn_sync_agrees)
{
    tt_dataset ds;
    make_images(&ds, 600, 8);
    tt_optim_config sgd = tt_optim_defaults(TT_OPT_SGD);
    sgd.lr = 0.05f;
    sgd.momentum = 0.9f;
    const design d = {"bn-sync on", TT_REDUCE_CPU, TT_UPDATE_HOST, 0, 0, {TT_SYNC_BSP, 0, 0}, 1};
    ck_assert_uint_eq(check_design(BN_MODEL, 0, &ds, &d, sgd), max_towers());
    tt_dataset_free(&ds);
}
END_TEST

/* ---- whole runs --------------------------------------------------------------------------------------------- */

enum { RUN_N = 203, RUN_BATCH = 32 }; /* 7 steps an epoch, the last partial */
static tt_dataset g_train, g_val, g_test;
static char g_model_path[512];

static void runs_setup(void)
{
    make_images(&g_train, RUN_N, 1);
    make_images(&g_val, 40, 2);
    make_images(&g_test, 30, 3);
    snprintf(g_model_path, sizeof g_model_path, "%s/tt_data_on_model_%d.txt", tt_test_tmp_base(), (int)getpid());
    tt_test_write_str(g_model_path, WORKLOADS[1].model);
}

static void runs_teardown(void)
{
    unlink(g_model_path);
    tt_dataset_free(&g_train);
    tt_dataset_free(&g_val);
    tt_dataset_free(&g_test);
}

static void run_config(tt_run_config *c, int data_on, size_t epochs)
{
    tt_run_config_defaults(c);
    c->model = g_model_path;
    c->device = g_device;
    c->towers = max_towers() < 3 ? max_towers() : 3;
    c->batch = RUN_BATCH;
    c->epochs = epochs;
    c->seed = 3;
    c->optim = tt_optim_defaults(TT_OPT_NADAM);
    c->progress = TT_PROGRESS_QUIET;
    c->data_on = data_on;
}

static tt_run_result *run_ok(const tt_run_config *c)
{
    tt_run_result *res = (tt_run_result *)tt_calloc(1, sizeof *res);
    tt_error err;
    ck_assert_msg(tt_run_on(c, &g_train, &g_val, &g_test, NULL, res, &err) == TT_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(res->final_params);
    return res;
}

static void run_free(tt_run_result *r)
{
    tt_free(r->final_params);
    tt_free(r);
}

/* Every "step" record of a JSON log: each tower's bytes_data is rows x per_row; returns the records seen. A "start"
 * record must name data_on. */
static size_t check_log(const char *path, const char *data_on, uint64_t per_row)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[1 << 16];
    size_t steps = 0, starts = 0;
    while (fgets(line, sizeof line, f)) {
        json_object *o = json_tokener_parse(line), *ev, *v, *towers;
        ck_assert_msg(o != NULL, "not JSON: %s", line);
        ck_assert(json_object_object_get_ex(o, "event", &ev));
        if (strcmp(json_object_get_string(ev), "start") == 0) {
            ck_assert(json_object_object_get_ex(o, "data_on", &v));
            ck_assert_str_eq(json_object_get_string(v), data_on);
            starts++;
        }
        if (strcmp(json_object_get_string(ev), "step") == 0) {
            ck_assert(json_object_object_get_ex(o, "towers", &towers));
            for (size_t t = 0; t < json_object_array_length(towers); t++) {
                json_object *tw = json_object_array_get_idx(towers, t), *rows, *bytes;
                ck_assert(json_object_object_get_ex(tw, "rows", &rows));
                ck_assert_msg(json_object_object_get_ex(tw, "bytes_data", &bytes), "no bytes_data: %s", line);
                ck_assert_msg((uint64_t)json_object_get_int64(bytes) == (uint64_t)json_object_get_int64(rows) * per_row,
                              "--data-on %s: %s bytes of data for %s rows (want %llu a row): %s", data_on,
                              json_object_get_string(bytes), json_object_get_string(rows),
                              (unsigned long long)per_row, line);
            }
            steps++;
        }
        json_object_put(o);
    }
    fclose(f);
    ck_assert_uint_eq(starts, 1);
    return steps;
}

/* Three epochs through tt_run_on (a fresh shuffle each, validation after each, the test set at the end: those on the
 * host's path), with a JSON log: the same weights, epoch losses, validation and test figures to the bit; the log's
 * data phase moves the indices alone. */
START_TEST(test_run_identical_and_logged)
{
    runs_setup();
    char logs[2][600];
    tt_run_result *r[2];
    for (int d = 0; d < 2; d++) {
        snprintf(logs[d], sizeof logs[d], "%s/tt_data_on_log_%d_%d.json", tt_test_tmp_base(), (int)getpid(), d);
        tt_run_config c;
        run_config(&c, d, 3);
        c.log_json = logs[d];
        r[d] = run_ok(&c);
        const size_t steps = check_log(logs[d], tt_data_on_names[d], d ? 4 : 36 + 8);
        ck_assert_uint_eq(steps, 3 * 7);
        unlink(logs[d]);
    }
    ck_assert_uint_eq(r[0]->n_params, r[1]->n_params);
    ck_assert_msg(memcmp(r[0]->final_params, r[1]->final_params, r[0]->n_params * sizeof(float)) == 0,
                  "--data-on device trained other weights than host");
    for (size_t e = 0; e < 3; e++) {
        const tt_epoch_stats *a = &r[0]->epochs[e], *b = &r[1]->epochs[e];
        ck_assert_msg(a->loss == b->loss && a->accuracy == b->accuracy && a->val.loss == b->val.loss &&
                          a->val.accuracy == b->val.accuracy,
                      "epoch %zu: loss %.17g / %.17g, val_loss %.17g / %.17g", e + 1, a->loss, b->loss, a->val.loss,
                      b->val.loss);
    }
    ck_assert(r[0]->test.loss == r[1]->test.loss && r[0]->test.accuracy == r[1]->test.accuracy);
    ck_assert_uint_eq(r[1]->allocs_after_first_step, 0);
    run_free(r[0]);
    run_free(r[1]);
    runs_teardown();
}
END_TEST

/* A checkpoint every 3 steps of a --data-on host run (mid-epoch ones: epoch 1 step 3, epoch 2 step 2, ...); a
 * --data-on device run resumed from each gives the uninterrupted host run's weights: the option is not part of a
 * run's state. */
START_TEST(test_resume_mid_epoch)
{
    runs_setup();
    char dir[512], path[1024];
    tt_test_tmpdir(dir, sizeof dir);
    tt_run_config c;
    run_config(&c, 0, 3);
    tt_run_result *straight = run_ok(&c);
    run_config(&c, 0, 3);
    c.checkpoint_dir = dir;
    c.save_every_steps = 3;
    c.keep = 100;
    run_free(run_ok(&c));
    static const size_t at[][2] = {{1, 3}, {2, 2}, {3, 4}}; /* global steps 3, 9, 18 */
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        tt_ckpt_path(path, sizeof path, dir, at[k][0], at[k][1]);
        run_config(&c, 1, 3);
        c.resume = path;
        tt_run_result *resumed = run_ok(&c);
        ck_assert_msg(memcmp(resumed->final_params, straight->final_params, straight->n_params * sizeof(float)) == 0,
                      "--data-on device resumed from %s: other weights than the straight host run", path);
        ck_assert(resumed->test.loss == straight->test.loss);
        run_free(resumed);
    }
    run_free(straight);
    runs_teardown();
}
END_TEST

/* ---- the memory plan ---------------------------------------------------------------------------------------- */

static double part_bytes(const tt_mem_plan *p, const char *name, int device)
{
    double b = 0;
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->part[i].name, name) == 0 && p->part[i].device == device) b += p->part[i].bytes;
    return b;
}

/* One copy per device, whatever the towers: 5 towers on 2 devices hold 2 copies of (n, sample) bytes and n labels;
 * --data-on host holds none. */
START_TEST(test_plan_one_copy_per_device)
{
    tt_dataset ds;
    make_vectors(&ds, 333, 1);
    tt_model m;
    tt_error err;
    const tt_model_input in = {ds.shape, ds.n_classes, 0};
    ck_assert_int_eq(tt_model_parse(&m, WORKLOADS[0].model, "t", &in, &err), TT_OK);
    const int devs[2] = {0, 1};
    for (int d = 0; d < 2; d++) {
        tt_trainer_config tc = tt_test_config(5, 40, tt_optim_defaults(TT_OPT_ADAM), TT_REDUCE_CPU);
        tc.n_devices = 2; /* the plan reads sizes only: two "devices" of the CPU backend */
        tc.devices = devs;
        tc.data_on = d;
        tc.train_set = &ds;
        tt_mem_plan plan;
        memset(&plan, 0, sizeof plan);
        ck_assert_msg(tt_trainer_plan(&m, &tc, &plan, &err) == TT_OK, "%s", err.msg);
        for (int dev = 0; dev < 2; dev++)
            ck_assert_msg(part_bytes(&plan, "training set (--data-on device)", dev) == (d ? 333.0 * (21 + 4) : 0),
                          "--data-on %s, device %d: %g bytes of training set", tt_data_on_names[d], dev,
                          part_bytes(&plan, "training set (--data-on device)", dev));
        ck_assert(part_bytes(&plan, "training set (--data-on device)", TT_MEM_HOST) == 0);
    }
    tt_dataset_free(&ds);
}
END_TEST

/* A set that does not fit what is available: refused before anything is allocated, with one line that gives the
 * bytes needed and available and names the training set; --data-on host runs in the same budget. */
START_TEST(test_too_large_is_refused)
{
    tt_dataset train, none;
    tt_test_dataset(&train, 40000, 100, 5, 2); /* 4.2 MB with its labels */
    memset(&none, 0, sizeof none);
    char path[512];
    snprintf(path, sizeof path, "%s/tt_data_on_small_%d.txt", tt_test_tmp_base(), (int)getpid());
    tt_test_write_str(path, "dense units=5\n");
    tt_run_config c;
    tt_run_config_defaults(&c);
    c.model = path;
    c.device = "cpu";
    c.towers = 2;
    c.batch = 200;
    c.epochs = 1;
    c.progress = TT_PROGRESS_QUIET;
    setenv("TT_MEM_LIMIT", "3000000", 1);
    tt_run_result *res = (tt_run_result *)tt_calloc(1, sizeof *res);
    tt_error err;
    c.data_on = 1;
    ck_assert_int_eq(tt_run_on(&c, &train, &none, &none, NULL, res, &err), TT_ERR_NOMEM);
    ck_assert_msg(strstr(err.msg, "the run needs ") && strstr(err.msg, " MB of host memory but 3.0 MB is available "
                  "(TT_MEM_LIMIT)") && strstr(err.msg, "training set (--data-on device) 4.2 MB") &&
                      strstr(err.msg, "give --data-on host") && !strchr(err.msg, '\n'),
                  "%s", err.msg);
    c.data_on = 0;
    ck_assert_msg(tt_run_on(&c, &train, &none, &none, NULL, res, &err) == TT_OK, "%s", err.msg);
    unsetenv("TT_MEM_LIMIT");
    tt_free(res->final_params);
    tt_free(res);
    unlink(path);
    tt_dataset_free(&train);
}
END_TEST

/* ---- the command line ----------------------------------------------------------------------------------------- */

static char g_out[256], g_err[256];

/* An MNIST-format directory of n 6x6 images in dir (a small one: the commands below measure on it). */
static void write_images(const char *dir, size_t n)
{
    uint8_t *px = (uint8_t *)tt_malloc(n * 36), *lb = (uint8_t *)tt_malloc(n);
    for (size_t i = 0; i < n * 36; i++) px[i] = (uint8_t)(i * 2654435761u >> 24);
    for (size_t i = 0; i < n; i++) lb[i] = (uint8_t)(i % 5);
    const uint32_t dims[3] = {(uint32_t)n, 6, 6}, ldim[1] = {(uint32_t)n};
    tt_test_write_idx(dir, "train-images-idx3-ubyte.gz", 3, dims, px, n * 36);
    tt_test_write_idx(dir, "train-labels-idx1-ubyte.gz", 1, ldim, lb, n);
    tt_test_write_idx(dir, "t10k-images-idx3-ubyte.gz", 3, dims, px, n * 36);
    tt_test_write_idx(dir, "t10k-labels-idx1-ubyte.gz", 1, ldim, lb, n);
    tt_free(px);
    tt_free(lb);
}

static void expect(const char *args, int code, const char *fragment)
{
    tt_test_expect(args, code, fragment, g_out, g_err);
}

/* DIR/name as np.save writes an array of dtype descr ('<f4', '<i4', '|u1') and shape ("(300, 12)"). */
static void write_npy(const char *dir, const char *name, const char *descr, const char *shape, const void *data,
                      size_t n)
{
    char p[512], hdr[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int len = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    ck_assert(len > 0 && len < 100);
    while ((10 + len + 1) % 64) hdr[len++] = ' ';
    hdr[len++] = '\n';
    unsigned char *buf = (unsigned char *)tt_malloc(10 + (size_t)len + n);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(len & 0xff);
    buf[9] = (unsigned char)(len >> 8);
    memcpy(buf + 10, hdr, (size_t)len);
    memcpy(buf + 10 + len, data, n);
    tt_test_write(p, buf, 10 + (size_t)len + n);
    tt_free(buf);
}

/* npy:DIR sets of 300 training and 60 test samples of 12 values, 5 classes: float32 features (tokens 0: values in
 * [0, 1)) or int32 token ids in 0..19 (tokens 1), which the reader turns into float32 ids. */
static void write_npy_set(const char *dir, int tokens)
{
    enum { NTR = 300, NTE = 60, L = 12 };
    float xf[NTR * L];
    int32_t xi[NTR * L];
    uint8_t y[NTR];
    tt_rng r;
    tt_rng_seed(&r, 21, (uint64_t)tokens);
    for (size_t i = 0; i < NTR * L; i++) {
        xi[i] = (int32_t)tt_rng_below(&r, 20);
        xf[i] = tt_rng_uniform(&r);
    }
    for (size_t i = 0; i < NTR; i++) y[i] = (uint8_t)((tokens ? (size_t)xi[i * L] : (size_t)(xf[i * L] * 5)) % 5);
    const char *descr = tokens ? "<i4" : "<f4";
    const void *x = tokens ? (const void *)xi : (const void *)xf;
    write_npy(dir, "x_train.npy", descr, "(300, 12)", x, sizeof xf);
    write_npy(dir, "y_train.npy", "|u1", "(300,)", y, NTR);
    write_npy(dir, "x_test.npy", descr, "(60, 12)", x, NTE * L * 4);
    write_npy(dir, "y_test.npy", "|u1", "(60,)", y, NTE);
}

/* compare on an npy:DIR set: every design with --data-on host, the host's design again with device: max |dw| 0. */
static void compare_npy(const char *dir, const char *model_text)
{
    char model[300], args[1024];
    snprintf(model, sizeof model, "%s/npy-model.txt", dir);
    tt_test_write_str(model, model_text);
    snprintf(args, sizeof args, "compare --device cpu --model %s --data npy:%s --val-samples 50 --towers 3 --batch 32",
             model, dir);
    expect(args, 0, "");
    const char *o = tt_test_slurp(g_out);
    ck_assert_msg(strstr(o, "max |dw| between any two placements: 0 ") != NULL, "%s", o);
    ck_assert_msg(strstr(o, "       cpu       host     off  device ") != NULL, "%s", o);
}

START_TEST(test_cli)
{
    char dir[128], args[4096], model[256];
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(g_out, sizeof g_out, "%s/out.txt", dir);
    snprintf(g_err, sizeof g_err, "%s/err.txt", dir);
    snprintf(model, sizeof model, "%s/model.txt", dir);
    tt_test_write_str(model, "flatten\ndense units=8 activation=relu\ndense units=10\n");
    write_images(dir, 400);
    expect("train --data-on bogus", 2, "--data-on: 'bogus' is not host or device");
    expect("train --data-on device --data-on host", 2, "--data-on: given twice");
    expect("eval --checkpoint x.safetensors --data-on device", 2, "eval: --data-on does not apply");
    expect("summary --data-on device", 2, "summary: --data-on does not apply");
    expect("probe --assume h100-pcie --data-on device", 2, "probe --assume: --data-on does not apply");
    /* train: the banner and the start record say it */
    char log[256];
    snprintf(log, sizeof log, "%s/log.json", dir);
    snprintf(args, sizeof args, "train --device cpu --model %s --data %s --val-samples 50 --test-samples 50 --towers 3 "
             "--batch 32 --epochs 1 --data-on device --log-json %s --progress lines", model, dir, log);
    expect(args, 0, "");
    const char *o = tt_test_slurp(g_out);
    ck_assert_msg(strstr(o, "--reduce cpu --data-on device (the training set, 14.0 kB, on each device; a step copies "
                         "in its indices)") != NULL, "%s", o);
    ck_assert_uint_eq(check_log(log, "device", 4), 11); /* 350 samples, batches of 32 */
    /* the probe times the trainer's data phase with the set on the devices */
    snprintf(args, sizeof args, "probe --device cpu --model %s --data %s --towers 2 --batch 32 --reps 2 --data-on "
             "device", model, dir);
    expect(args, 0, "");
    o = tt_test_slurp(g_out);
    ck_assert_msg(strstr(o, "(--data-on device: indices in, rows gathered there)") != NULL, "%s", o);
    /* bench: the banner and the CSV's column */
    char csv[256];
    snprintf(csv, sizeof csv, "%s/b.csv", dir);
    snprintf(args, sizeof args, "bench --device cpu --model %s --data %s --val-samples 50 --towers 2 --batch 32 "
             "--epochs 1 --reps 2 --data-on device --csv %s", model, dir, csv);
    expect(args, 0, "");
    ck_assert_msg(strstr(tt_test_slurp(g_out), "| --data-on device") != NULL, "%s", tt_test_slurp(g_out));
    const char *table = tt_test_slurp(csv);
    ck_assert_msg(strstr(table, ",data_on,precision\n") != NULL && strstr(table, ",device,fp32\n") != NULL, "%s", table);
    /* compare: every design with the given data phase, the host's design with the other one, all the same bits */
    snprintf(args, sizeof args, "compare --device cpu --model %s --data %s --val-samples 50 --towers 3 --batch 32",
             model, dir);
    expect(args, 0, "");
    o = tt_test_slurp(g_out);
    ck_assert_msg(strstr(o, "max |dw| between any two placements: 0 ") != NULL, "%s", o);
    ck_assert_msg(strstr(o, "       cpu       host     off    host ") != NULL &&
                      strstr(o, "       cpu       host     off  device ") != NULL, "%s", o);
    /* float32 .npy inputs (straight into the input activation), and int32 token ids into an embedding */
    char npy[200];
    snprintf(npy, sizeof npy, "%s/f32", dir);
    ck_assert_int_eq(mkdir(npy, 0700), 0);
    write_npy_set(npy, 0);
    compare_npy(npy, "dense units=8 activation=relu\ndropout rate=0.25\ndense units=5\n");
    snprintf(npy, sizeof npy, "%s/tokens", dir);
    ck_assert_int_eq(mkdir(npy, 0700), 0);
    write_npy_set(npy, 1);
    compare_npy(npy, "embedding dim=3\nconv1d filters=4 kernel=3 activation=relu\nmaxpool1d pool=2\nflatten\n"
                     "dense units=5\n");
}
END_TEST

/* Usage: test_data_on [cpu|cuda] (default cpu). */
int main(int argc, char **argv)
{
    g_device = argc > 1 ? argv[1] : "cpu";
    const int is_cpu = strcmp(g_device, "cpu") == 0;
    tt_error err;
    if (tt_backend_open(g_device, NULL, &g_be, &err) != TT_OK) return tt_test_skip_no_gpu("--data-on", err.msg);
    if (!is_cpu && g_be.ops == &tt_dev_cpu_ops) return tt_test_skip_no_gpu(g_device, "opened the CPU backend");
    Suite *s = suite_create(g_device);
    TCase *tc = tcase_create("data-on");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_mlp_bytes_agree);
    tcase_add_test(tc, test_cnn_images_agree);
    tcase_add_test(tc, test_textcnn_tokens_agree);
    tcase_add_test(tc, test_bn_sync_agrees);
    tcase_add_test(tc, test_run_identical_and_logged);
    tcase_add_test(tc, test_resume_mid_epoch);
    if (is_cpu) { /* host code, the CPU backend's budget and the command line */
        tcase_add_test(tc, test_plan_one_copy_per_device);
        tcase_add_test(tc, test_too_large_is_refused);
        tcase_add_test(tc, test_cli);
    } else {
        printf("%s: %d GPU%s (towers run on them round-robin)\n", g_device, g_be.n_devices,
               g_be.n_devices == 1 ? "" : "s");
    }
    suite_add_tcase(s, tc);
    return tt_test_run_suite_mode(s, is_cpu ? CK_FORK_GETENV : CK_NOFORK);
}
