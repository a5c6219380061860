/* train.c — a training run: load, build, init, then epochs of shuffled steps with validation after each, the
 * test set at the end; Keras-style console lines (a live bar on a terminal) and a JSON-lines log. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "tt_backend.h"
#include "tt_blas.h"
#include "tt_input.h"
#include "tt_ledger.h"
#include "tt_rng.h"
#include "tt_signal.h"
#include "tt_train.h"

int tt_run_host_threads(const tt_node *nd, int given)
{
    if (given > 0 || nd->local_size <= 1) return given;
    const int share = tt_cpu_count() / nd->local_size;
    return share > 1 ? share : 1;
}

void tt_run_config_defaults(tt_run_config *c)
{
    memset(c, 0, sizeof *c);
    c->data = "fashion-mnist";
    c->model = "mlp";
    c->device = "auto";
    c->towers = 1;
    c->batch = 256;
    c->epochs = 10;
    c->optim = tt_optim_defaults(TT_OPT_ADAM);
    c->lr_scaling = TT_LR_NONE;
    c->seed = 1;
    c->val_samples = 10000;
    c->progress = TT_PROGRESS_AUTO;
    c->reduce = TT_REDUCE_CPU;
    c->keep = 3;
}

/* ---- console ----------------------------------------------------------------------------------------------- */

/* step of steps done; `first` of them were done before this process (a resumed epoch): the ETA counts the rest. */
static void print_bar(FILE *out, size_t first, size_t step, size_t steps, double elapsed, double loss, double acc,
                      int final)
{
    const int width = 30;
    int filled = steps ? (int)((double)width * (double)step / (double)steps) : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '=' : '.';
    if (filled > 0 && filled < width) bar[filled - 1] = '>';
    bar[width] = '\0';
    int digits = snprintf(NULL, 0, "%zu", steps);
    fprintf(out, "\r%*zu/%zu [%s]", digits, step, steps, bar);
    if (!final) {
        double eta = step > first ? elapsed / (double)(step - first) * (double)(steps - step) : 0;
        fprintf(out, " - ETA: %.0fs - loss: %.4f - accuracy: %.4f\033[K", eta, loss, acc);
        fflush(out);
    }
}

static void add_times(tt_step_times *a, const tt_step_times *b)
{
    a->launch += b->launch;
    a->pull += b->pull;
    a->data += b->data;
    a->compute += b->compute;
    a->push += b->push;
    a->wait += b->wait;
    a->towers += b->towers;
    a->reduce += b->reduce;
    a->combine += b->combine;
    a->update += b->update;
    a->total += b->total;
}

/* ---- the run ----------------------------------------------------------------------------------------------- */

/* Everything one run holds, so that opening, the epochs, a halt and the ending are separate functions. */
typedef struct run_state {
    const tt_run_config *c;
    const tt_dataset *train, *val, *test;
    FILE *out; /* console; NULL = silent */
    int bar;   /* a live progress bar on out */
    const tt_dev_ops *ops;
    tt_backend be;
    tt_model *model;
    tt_trainer_config tc;
    tt_trainer tr;
    float *h_init;
    uint32_t *idx;
    size_t steps; /* per epoch */
    double *step_secs;
    tt_step_result *results;
    tt_tower_ledger *ledger;
    tt_out log;
    tt_trace trace;
    int log_ended;            /* the log's final "error" / "stopped" record is written */
    /* checkpoints */
    size_t start_epoch, start_step; /* where the run begins: 1, 0; or where --resume's checkpoint left off */
    double best;              /* --save-best: the best value of the metric so far (NaN: none yet) */
    uint64_t saved_step;      /* the global step of the last periodic checkpoint written (or resumed from) */
    size_t written_epoch, written_step; /* the last periodic checkpoint this run wrote (0, 0: none): a stop there
                                         * leaves it as it is */
    uint32_t data_crc;        /* checkpoints: CRC-32 of the training set's samples and labels (which data it was) */
    char *ckpt_options;       /* --checkpoint-dir: the checkpoints' options (JSON text, the same for the whole run) */
    int dir_lock;             /* rank 0: --checkpoint-dir's lock file, held for the whole run (-1: none) */
    char ckpt_desc[300];      /* and their model description */
    char *model_text;         /* a model file's text, read once (checkpoints, the ranks' fingerprint); NULL: built in */
    tt_checkpoint resume_ck;  /* --resume: the checkpoint, until its state is in the trainer */
    char nothing_left[400];   /* --resume of a finished run: the line that says so (empty: there is training to do) */
    tt_status console_status; /* a failed console write noticed while the crew ran */
    tt_error console_err;
    /* a job of K ranks (docs/scaleout.md): rank 0 prints, logs, traces and checkpoints; every rank steps */
    tt_node *nd;
    int K, rank0;
    float *ck_full[TT_CKPT_MAX_SLOTS]; /* ps, rank 0: the optimizer's whole vectors, gathered for a checkpoint */
    double *clock_offsets;             /* --trace: every rank's clock against rank 0's */
} run_state;

static tt_status run_resume_load(run_state *rs, tt_error *err);
static tt_status run_trace_steps(run_state *rs, size_t first, size_t end, tt_error *err);
static tt_status run_ckpt_options(run_state *rs, tt_error *err);
static void run_resume_optim(run_state *rs);

/* The whole run's memory, before anything large is allocated: the trainer's buffers and the run's own. */
static tt_status run_check_memory(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    tt_status s = tt_trainer_plan(rs->model, &rs->tc, &plan, err);
    if (s) return s;
    const double P = (double)rs->model->n_params, steps = (double)rs->steps, N = (double)c->towers;
    tt_mem_add(&plan, "initial and final weights", TT_MEM_HOST, 2 * P * sizeof(float), TT_MEM_BY_PARAMS);
    tt_mem_add(&plan, "shuffle index", TT_MEM_HOST, (double)rs->train->n * sizeof(uint32_t), TT_MEM_BY_RUN);
    const double slots = (double)tt_optim_state_floats(&rs->tc.optim);
    if (c->resume) /* the file's bytes (broadcast by rank 0 to a job's ranks), and its tensors parsed from them */
        tt_mem_add(&plan, "--resume checkpoint", TT_MEM_HOST, 2 * (1 + slots) * P * sizeof(float), TT_MEM_BY_PARAMS);
    tt_mem_add(&plan, "step records", TT_MEM_HOST,
               steps * (sizeof(tt_step_result) + sizeof(double) + N * sizeof(tt_tower_ledger)), TT_MEM_BY_RUN);
    if (rs->K > 1 && rs->rank0 && c->checkpoint_dir && c->node_reduce == TT_NODE_PS)
        tt_mem_add(&plan, "optimizer state gathered for checkpoints (ps)", TT_MEM_HOST, slots * P * sizeof(float),
                   TT_MEM_BY_PARAMS);
    if (rs->nd->local_size > 1) { /* ranks on one machine share its memory: each plans for all of them */
        const double mine = tt_mem_total(&plan, TT_MEM_HOST) + (rs->ops->mem_info ? 0 : tt_mem_total(&plan, 0));
        tt_mem_add(&plan, "the other ranks on this machine", TT_MEM_HOST, (rs->nd->local_size - 1) * mine,
                   TT_MEM_BY_RUN);
    }
    return tt_mem_check(&plan, rs->ops, err);
}

static void print_banner(const run_state *rs)
{
    const tt_run_config *c = rs->c;
    FILE *out = rs->out;
    const size_t N = c->towers, B = rs->tc.batch;
    fprintf(out, "towertrain %s | backend %s (%d device%s) | %zu tower%s | batch %zu", TT_VERSION, rs->ops->name,
            rs->be.n_devices, rs->be.n_devices == 1 ? "" : "s", N, N == 1 ? "" : "s", c->batch);
    if (B < c->batch) fprintf(out, " (more than the %zu training samples: shards sized for %zu)", rs->train->n, B);
    const size_t G = N * (size_t)rs->K; /* every tower of the job */
    fprintf(out, " (shards of %zu..%zu) | --reduce %s\n", B / G, (B + G - 1) / G, tt_reduce_name(c->reduce));
    if (rs->K > 1)
        fprintf(out, "job: %d ranks x %zu tower%s = %zu towers (mpirun; %d on this machine, %d host thread%s each) | "
                "--node-reduce %s\n", rs->K, N, N == 1 ? "" : "s", G, rs->nd->local_size, rs->tc.host_threads,
                rs->tc.host_threads == 1 ? "" : "s", tt_node_reduce_name(c->node_reduce));
    fprintf(out, "BLAS: %s\n", tt_blas_describe());
    fprintf(out, "float: %s\n",
            tt_fpu_flushing() ? "subnormals flushed to zero (FTZ+DAZ) on tower and host threads"
                                     : "subnormals kept (this CPU has no flush-to-zero mode here)");
    char data[256];
    tt_escape(c->data, data, sizeof data);
    char shape[64];
    fprintf(out, "data: %s | %zu train, %zu validation, %zu test | %s %s, %zu classes\n", data, rs->train->n,
            rs->val->n, rs->test->n, tt_shape_str(&rs->train->shape, 0, shape, sizeof shape),
            rs->train->xtype == TT_X_U8 ? "bytes" : "float32", rs->train->n_classes);
    if (rs->model->notes[0]) fputs(rs->model->notes, out);
    tt_model_summary(rs->model, out);
    const tt_optim_config *o = &rs->tc.optim;
    fprintf(out, "optimizer: %s, lr %g", tt_optim_kind_name(o->kind), (double)o->lr);
    if (c->lr_scaling == TT_LR_LINEAR)
        fprintf(out, " (--lr-scaling linear: base %g x %zu towers)", (double)c->optim.lr, N * (size_t)rs->K);
    else
        fprintf(out, " (--lr-scaling none: the base rate%s)", c->lr_given ? "" : ", Keras default");
    char hyper[160];
    tt_optim_describe(o, hyper, sizeof hyper);
    fprintf(out, "%s\n", hyper);
}

static tt_status log_start(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_out *log = &rs->log;
    tt_out_printf(log,
                  "{\"event\":\"start\",\"version\":\"%s\",\"backend\":\"%s\",\"towers\":%zu,\"batch\":%zu,"
                  "\"epochs\":%zu,\"optimizer\":\"%s\",\"lr\":%.7g,\"base_lr\":%.7g,\"lr_scaling\":\"%s\","
                  "\"seed\":%llu,\"train_samples\":%zu,\"val_samples\":%zu,\"test_samples\":%zu,\"params\":%zu,"
                  "\"model\":\"%s\",\"reduce\":\"%s\",\"flush_denormals\":%s,\"ranks\":%d,\"node_reduce\":\"%s\"}\n",
                  TT_VERSION, rs->ops->name, c->towers, c->batch, c->epochs, tt_optim_kind_name(rs->tc.optim.kind),
                  (double)rs->tc.optim.lr, (double)c->optim.lr, c->lr_scaling == TT_LR_LINEAR ? "linear" : "none",
                  (unsigned long long)c->seed, rs->train->n, rs->val->n, rs->test->n, rs->model->n_params,
                  tt_model_file(rs->model) ? "file" : c->model, tt_reduce_name(c->reduce),
                  tt_fpu_flushing() ? "true" : "false", rs->K, tt_node_reduce_name(c->node_reduce));
    return tt_out_commit(log, err);
}

/* K ranks: what every rank holds, counted from its own allocations — the optimizer's floats (ps: 1/K each) — in a
 * "ranks" record of rank 0's log. Every rank calls it. */
static tt_status log_ranks(run_state *rs, tt_error *err)
{
    tt_optim *o = tt_trainer_optim(&rs->tr);
    const uint64_t mine = (uint64_t)o->n * tt_optim_state_floats(&o->cfg);
    uint64_t *all = (uint64_t *)tt_calloc((size_t)rs->K, sizeof(uint64_t));
    tt_status s = all ? tt_node_allgather(rs->nd, &mine, all, sizeof mine, err)
                      : tt_fail(err, TT_ERR_NOMEM, "out of memory");
    if (!s && rs->log.buf) {
        tt_out_printf(&rs->log, "{\"event\":\"ranks\",\"ranks\":%d,\"node_reduce\":\"%s\",\"params\":%zu,"
                      "\"optimizer_floats\":[", rs->K, tt_node_reduce_name(rs->c->node_reduce), rs->model->n_params);
        for (int r = 0; r < rs->K; r++) tt_out_printf(&rs->log, "%s%llu", r ? "," : "", (unsigned long long)all[r]);
        tt_out_printf(&rs->log, "]}\n");
        s = tt_out_commit(&rs->log, err);
    }
    tt_free(all);
    return s;
}

/* This rank's part of opening: model, trainer configuration, memory check, buffers, checkpoint options, log — in that
 * order, so nothing large is allocated before the budget says it fits. */
static tt_status run_open_local(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_status s = tt_backend_open(c->device, c->gpus, &rs->be, err);
    if (s) return s;
    rs->ops = rs->be.ops;
    rs->model = (tt_model *)tt_calloc(1, sizeof *rs->model);
    if (!rs->model) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    s = tt_run_model(c, rs->train, rs->val, rs->test, rs->model, err);
    if (s) return s;
    tt_trainer_config *tc = &rs->tc;
    tc->ops = rs->ops;
    tc->n_devices = rs->be.n_devices;
    tc->devices = rs->be.devices;
    tc->n_towers = c->towers;
    /* buffers are sized by the smaller of the batch and the data: a batch beyond the data is one step of it all */
    tc->batch = c->batch < rs->train->n ? c->batch : rs->train->n;
    if (tc->batch < c->towers) tc->batch = c->towers;
    tc->optim = c->optim;
    tc->host_threads = tt_run_host_threads(rs->nd, c->host_threads); /* ranks on one machine share its cores */
    tc->reduce = c->reduce;
    tc->seed = c->seed;
    tc->stop = tt_signal_flag();
    tc->node = rs->K > 1 ? rs->nd : NULL;
    tc->node_reduce = c->node_reduce;
    if (c->lr_scaling == TT_LR_LINEAR) tc->optim.lr = c->optim.lr * (float)(c->towers * (size_t)rs->K);
    rs->steps = (rs->train->n + tc->batch - 1) / tc->batch;
    s = run_check_memory(rs, err);
    if (s) return s;

    rs->h_init = (float *)tt_malloc(rs->model->n_params * sizeof(float));
    rs->idx = (uint32_t *)tt_malloc(rs->train->n * sizeof(uint32_t));
    rs->step_secs = (double *)tt_malloc(rs->steps * sizeof(double));
    rs->results = (tt_step_result *)tt_calloc(rs->steps, sizeof(tt_step_result));
    rs->ledger = (tt_tower_ledger *)tt_calloc(rs->steps * c->towers, sizeof(tt_tower_ledger));
    if (!rs->h_init || !rs->idx || !rs->step_secs || !rs->results || !rs->ledger)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    tt_model_init_params(rs->model, rs->h_init, c->seed);
    if (rs->K > 1 && rs->rank0 && c->checkpoint_dir && c->node_reduce == TT_NODE_PS) {
        const int n = (int)tt_optim_state_floats(&tc->optim);
        for (int k = 0; k < n; k++)
            if (!(rs->ck_full[k] = (float *)tt_malloc(rs->model->n_params * sizeof(float))))
                return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    }
    if (rs->rank0 && c->checkpoint_dir && ((s = tt_ckpt_dir_ready(c->checkpoint_dir, err)) ||
                                           (s = tt_ckpt_dir_lock(c->checkpoint_dir, &rs->dir_lock, err))))
        return s;
    /* which training set: a resume on other data with as many steps is refused; every rank of a job must have it */
    if (c->checkpoint_dir || c->resume || rs->K > 1) {
        uint32_t crc = tt_crc32(0, rs->train->x, rs->train->n * tt_dataset_sample_bytes(rs->train));
        rs->data_crc = tt_crc32(crc, rs->train->y, rs->train->n * sizeof(int32_t));
    }
    size_t text_len;
    if (tt_model_file(rs->model) && (c->checkpoint_dir || rs->K > 1) &&
        (s = tt_input_read_text(c->model, "model file", (size_t)1 << 20, &rs->model_text, &text_len, err)))
        return s;
    if (c->checkpoint_dir && (s = run_ckpt_options(rs, err))) return s;
    if (c->log_json && rs->rank0) {
        char what[200];
        snprintf(what, sizeof what, "--log-json %s", c->log_json);
        s = tt_out_open(&rs->log, c->log_json, what, 4096 + 512 * c->towers, err);
        if (!s) s = log_start(rs, err);
    }
    return s;
}

/* What must be the same on every rank of a job, as (name, value) pairs: a rank started with another model, batch,
 * data or option would step out of line with the others (or wait for a collective they never call). Each field says
 * how its value reads, so a mismatch is told in the flag's own words ("--reduce is device here, cpu on rank 0"). */
enum { FP_FIELDS = 24 };
typedef enum { FP_COUNT, FP_CRC, FP_GIVEN, FP_FLOAT, FP_OPTIMIZER, FP_NODE_REDUCE, FP_REDUCE, FP_SAVE_BEST } fp_kind;
typedef struct fingerprint {
    uint64_t v[FP_FIELDS];
    char hyper[160]; /* the optimizer's settings in words (field 12 is their CRC-32) */
} fingerprint;
static const struct {
    const char *name;
    fp_kind kind;
} fp_fields[FP_FIELDS] = {
    {"the model's parameter count", FP_COUNT}, {"the model (CRC-32 of its layout and description)", FP_CRC},
    {"--batch", FP_COUNT}, {"--towers", FP_COUNT}, {"training samples", FP_COUNT}, {"validation samples", FP_COUNT},
    {"test samples", FP_COUNT}, {"sample bytes", FP_COUNT}, {"classes", FP_COUNT}, {"--seed", FP_COUNT},
    {"--optimizer", FP_OPTIMIZER}, {"--lr", FP_FLOAT}, {"the optimizer's settings", FP_CRC}, {"--epochs", FP_COUNT},
    {"--node-reduce", FP_NODE_REDUCE}, {"--reduce", FP_REDUCE}, {"the training data (CRC-32)", FP_CRC},
    {"--checkpoint-dir", FP_GIVEN}, {"--save-every-epoch", FP_GIVEN}, {"--save-every-steps", FP_COUNT},
    {"--save-best", FP_SAVE_BEST}, {"--resume", FP_GIVEN}, {"--trace", FP_GIVEN}, {"--log-json", FP_GIVEN}};

/* A field's value as the user would write it. */
static void fp_value(fp_kind k, uint64_t v, char *out, size_t len)
{
    static const char *const save_best[] = {"none", "val_loss", "val_accuracy"};
    float f;
    uint32_t bits = (uint32_t)v;
    switch (k) {
    case FP_CRC: snprintf(out, len, "%08llx", (unsigned long long)v); break;
    case FP_GIVEN: snprintf(out, len, "%s", v ? "given" : "not given"); break;
    case FP_FLOAT: /* the shortest text that reads back as this float: 0.002, not 0.00200000009 */
        memcpy(&f, &bits, sizeof f);
        for (int digits = 1; digits <= 9; digits++) {
            snprintf(out, len, "%.*g", digits, (double)f);
            if (strtof(out, NULL) == f) break;
        }
        break;
    case FP_OPTIMIZER: snprintf(out, len, "%s", v < 16 ? tt_optim_kind_name((tt_optim_kind)v) : "?"); break;
    case FP_NODE_REDUCE: snprintf(out, len, "%s", tt_node_reduce_name((tt_node_reduce)v)); break;
    case FP_REDUCE: snprintf(out, len, "%s", v < TT_REDUCE_COUNT ? tt_reduce_name((tt_reduce)v) : "?"); break;
    case FP_SAVE_BEST: snprintf(out, len, "%s", v < 3 ? save_best[v] : "?"); break;
    default: snprintf(out, len, "%llu", (unsigned long long)v); break;
    }
}

static void run_fingerprint_of(const run_state *rs, fingerprint *f)
{
    const tt_run_config *c = rs->c;
    const tt_model *m = rs->model;
    memset(f, 0, sizeof *f);
    uint32_t layout = 0;
    for (size_t t = 0; t < m->n_tensors; t++) {
        const tt_tensor_info *ti = &m->tensors[t];
        layout = tt_crc32(layout, ti->name, strlen(ti->name));
        for (int d = 0; d < ti->ndim; d++) {
            uint64_t dim = ti->shape[d];
            layout = tt_crc32(layout, &dim, sizeof dim);
        }
    }
    /* the model's description too: a model file's text (dropout rates, activations, strides are not in the layout) */
    const char *desc = rs->model_text ? rs->model_text : c->model;
    layout = tt_crc32(layout, desc, strlen(desc));
    tt_optim_describe(&rs->tc.optim, f->hyper, sizeof f->hyper);
    uint32_t lr;
    memcpy(&lr, &rs->tc.optim.lr, sizeof lr);
    const uint64_t v[FP_FIELDS] = {m->n_params, layout, c->batch, c->towers, rs->train->n, rs->val->n, rs->test->n,
                                   tt_dataset_sample_bytes(rs->train), rs->train->n_classes, c->seed,
                                   (uint64_t)rs->tc.optim.kind, lr, tt_crc32(0, f->hyper, strlen(f->hyper)), c->epochs,
                                   (uint64_t)c->node_reduce, (uint64_t)c->reduce, rs->data_crc,
                                   c->checkpoint_dir != NULL, (uint64_t)c->save_every_epoch, c->save_every_steps,
                                   (uint64_t)c->save_best, c->resume != NULL, c->trace != NULL, c->log_json != NULL};
    memcpy(f->v, v, sizeof v);
}

/* Every rank compares its fingerprint with rank 0's: a rank that differs fails, naming the first difference, and
 * every rank learns it (tt_node_agree). */
static tt_status run_check_fingerprints(run_state *rs, tt_error *err)
{
    if (rs->K <= 1) return TT_OK;
    fingerprint mine, *all = (fingerprint *)tt_calloc((size_t)rs->K, sizeof mine);
    if (!all) return tt_node_agree(rs->nd, tt_fail(err, TT_ERR_NOMEM, "out of memory"), err);
    run_fingerprint_of(rs, &mine);
    tt_status s = tt_node_allgather(rs->nd, &mine, all, sizeof mine, err);
    all[0].hyper[sizeof all[0].hyper - 1] = '\0'; /* another rank's bytes */
    for (int f = 0; !s && f < FP_FIELDS; f++)
        if (mine.v[f] != all[0].v[f]) {
            char here[160], there[160];
            fp_value(fp_fields[f].kind, mine.v[f], here, sizeof here);
            fp_value(fp_fields[f].kind, all[0].v[f], there, sizeof there);
            if (f == 12) { /* the optimizer's settings: in words (tt_optim_describe's ", momentum 0.9") */
                snprintf(here, sizeof here, "'%s'", mine.hyper + strspn(mine.hyper, ", "));
                snprintf(there, sizeof there, "'%s'", all[0].hyper + strspn(all[0].hyper, ", "));
            }
            s = tt_fail(err, TT_ERR_ARG,
                        "started with another configuration than rank 0: %s %s %s here, %s on rank 0 (every rank "
                        "must run the same model, batch, data and options)", fp_fields[f].name, f == 12 ? "are" : "is",
                        here, there);
        }
    tt_free(all);
    return tt_node_agree(rs->nd, s, err);
}

/* --resume DIR reads a directory without locking it: if another run is writing there now, one notice says that this
 * run forks it at its newest checkpoint as it stands. */
static void resume_notice_busy(const char *dir)
{
    struct stat st;
    const long pid = stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? tt_ckpt_dir_holder(dir) : 0;
    if (!pid) return;
    char line[600], who[48] = "its pid unknown";
    if (pid > 0) snprintf(who, sizeof who, "pid %ld", pid);
    snprintf(line, sizeof line, "--resume %.400s: another run (%s) is writing there; resuming from its newest "
             "checkpoint as it stands now", dir, who);
    tt_report_notice(line);
}

/* Opening a run: this rank's part, every rank's agreement (a rank that failed ends the job with its line), the
 * fingerprints, the banner, --resume, the towers, the trace. */
static tt_status run_open(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_trainer_config *tc = &rs->tc;
    tt_status s = tt_node_agree(rs->nd, run_open_local(rs, err), err);
    if (!s) s = run_check_fingerprints(rs, err);
    if (s) return s;
    if (rs->out) {
        /* how copies between the towers' devices travel: peer access is enabled here (the trainer asks again, and
         * finds it enabled), so the banner can say it before the towers start */
        int ords[TT_MAX_DEVICES], link[TT_MAX_DEVICES * TT_MAX_DEVICES];
        int n = tt_trainer_link_devices(tc, ords);
        if ((s = tt_backend_links(rs->ops, ords, n, link, err))) return s;
        print_banner(rs);
        tt_backend_print_links(rs->out, "", rs->ops, ords, n, link);
        if ((s = tt_flush_stdout(rs->out, err))) return s;
    }
    if (c->resume && rs->rank0) resume_notice_busy(c->resume);
    if (c->resume && (s = tt_node_agree(rs->nd, run_resume_load(rs, err), err))) return s;
    if (rs->nothing_left[0]) return TT_OK; /* no towers, no trace: tt_run_on says it and ends */
    if (rs->rank0 && c->checkpoint_dir)
        s = tt_ckpt_none_ahead(c->checkpoint_dir, rs->start_epoch, rs->start_step, rs->steps, err);
    if (!s) s = tt_trainer_init(&rs->tr, rs->model, tc, rs->h_init, err);
    if (!s && c->resume) run_resume_optim(rs);
    if (!s && c->trace && rs->rank0)
        s = tt_trace_open(&rs->trace, c->trace, c->towers, rs->K, rs->ops->name, tt_reduce_name(c->reduce), err);
    s = tt_node_agree(rs->nd, s, err);
    if (!s && c->trace && rs->K > 1) { /* the trace puts every rank's steps on rank 0's clock */
        rs->clock_offsets = (double *)tt_calloc((size_t)rs->K, sizeof(double));
        s = rs->clock_offsets ? tt_node_allgather(rs->nd, &rs->nd->clock_offset, rs->clock_offsets, sizeof(double), err)
                              : tt_fail(err, TT_ERR_NOMEM, "out of memory");
        s = tt_node_agree(rs->nd, s, err);
    }
    if (!s && rs->K > 1) s = tt_node_agree(rs->nd, log_ranks(rs, err), err);
    return s;
}

/* Runs started steps first.. of the epoch on the crew (the epoch began at step `begin` in this process); the calling
 * thread only draws the bar (and notices a console that fails). */
static void run_steps(run_state *rs, double e0, size_t begin, size_t first, size_t *done_steps)
{
    size_t drawn = begin, seen = 0, top1 = 0;
    double loss_sum = 0;
    while (!tt_trainer_wait(&rs->tr, rs->bar ? 0.1 : -1, done_steps)) {
        /* results[begin..first + done_steps) are final: fold them in and redraw the bar */
        for (; drawn < first + *done_steps; drawn++) {
            loss_sum += rs->results[drawn].loss_sum;
            top1 += rs->results[drawn].top1;
            seen += rs->results[drawn].n;
        }
        if (!seen || rs->console_status) continue;
        print_bar(rs->out, begin, first + *done_steps, rs->steps, tt_now() - e0, loss_sum / (double)seen,
                  (double)top1 / (double)seen, 0);
        rs->console_status = tt_flush_stdout(rs->out, &rs->console_err);
        if (rs->console_status) tt_trainer_request_stop(&rs->tr); /* stop now, not after training */
    }
}

/* The steps of an epoch that ran in this process, first..end-1 (all of them; from a resumed step; or those before a
 * halt): stats, console, log, trace. */
static void epoch_stats(run_state *rs, size_t epoch, size_t first, size_t end, tt_epoch_stats *es)
{
    memset(es, 0, sizeof *es);
    es->epoch = epoch;
    es->first_step = first;
    es->steps = end - first;
    double loss_sum = 0;
    size_t top1 = 0, top5 = 0, seen = 0;
    for (size_t st = first; st < end; st++) {
        const tt_step_result *r = &rs->results[st];
        loss_sum += r->loss_sum;
        top1 += r->top1;
        top5 += r->top5;
        seen += r->n;
        add_times(&es->split, &r->t);
        rs->step_secs[st - first] = r->t.total;
    }
    es->step_median = tt_median(rs->step_secs, end - first);
    es->samples = seen;
    es->loss = seen ? loss_sum / (double)seen : NAN;
    es->accuracy = seen ? (double)top1 / (double)seen : NAN;
    es->top5 = seen ? (double)top5 / (double)seen : NAN;
}

static tt_status log_epoch(run_state *rs, const tt_epoch_stats *es, tt_error *err)
{
    tt_out *log = &rs->log;
    const int v = rs->val->n > 0;
    tt_out_printf(log, "{\"event\":\"epoch\",\"epoch\":%zu,\"steps\":%zu,\"samples\":%zu,", es->epoch, es->steps,
                  es->samples);
    tt_out_json_num(log, "seconds", es->seconds, 1);
    tt_out_json_num(log, "loss", es->loss, 1);
    tt_out_json_num(log, "accuracy", es->accuracy, 1);
    tt_out_json_num(log, "top5", es->top5, 1);
    tt_out_json_num(log, "val_loss", v ? es->val.loss : NAN, 1);
    tt_out_json_num(log, "val_accuracy", v ? es->val.accuracy : NAN, 1);
    tt_out_json_num(log, "val_top5", v ? es->val.top5 : NAN, 1);
    tt_out_json_num(log, "step_median", es->step_median, 1);
    char verdict[128];
    tt_ledger_verdict(&es->split, verdict, sizeof verdict);
    tt_out_printf(log, "\"verdict\":\"%s\",\"split\":{", verdict);
    tt_ledger_json_split(log, &es->split);
    tt_out_printf(log, "}}\n");
    tt_status s = tt_out_commit(log, err);
    return s ? s
             : tt_ledger_json_steps(log, es->epoch, rs->results, rs->ledger, es->first_step,
                                    es->first_step + es->steps, rs->c->towers, err);
}

static void print_epoch(run_state *rs, const tt_epoch_stats *es)
{
    FILE *out = rs->out;
    const size_t end = es->first_step + es->steps;
    if (rs->bar)
        print_bar(out, es->first_step, end, end, es->seconds, 0, 0, 1);
    else
        fprintf(out, "%zu/%zu", end, end);
    fprintf(out, " - %.2fs %.1fms/step - loss: %.4f - accuracy: %.4f - top5: %.4f", es->seconds,
            1e3 * es->seconds / (double)es->steps, es->loss, es->accuracy, es->top5);
    if (rs->val->n)
        fprintf(out, " - val_loss: %.4f - val_accuracy: %.4f - val_top5: %.4f", es->val.loss, es->val.accuracy,
                es->val.top5);
    fprintf(out, "%s\n", rs->bar ? "\033[K" : "");
    tt_ledger_split_line(out, &es->split);
}

/* The last record of a log whose run did not finish: {"event":"error"|"stopped",...,"message":the CLI's line}.
 * fields is the JSON in between (may be empty). Write errors here are not reported: the run is failing already. */
static void log_end(run_state *rs, const char *event, const char *fields, const tt_error *why)
{
    if (!rs->log.buf) return;
    tt_error werr;
    tt_out_printf(&rs->log, "{\"event\":\"%s\",%s", event, fields);
    tt_out_json_str(&rs->log, "message", why->msg, 0);
    tt_out_printf(&rs->log, "}\n");
    tt_out_commit(&rs->log, &werr);
    rs->log_ended = 1;
}

/* ---- checkpoints ---------------------------------------------------------------------------------------------- */

/* The checkpoints' model description ("builtin:NAME" or "file:PATH") and options, built once for the run: what eval
 * and predict rebuild the model from (input shape, classes, vocabulary, a model file's text), which training data it
 * was (the resume check), and the run's other options. */
static tt_status run_ckpt_options(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    const char *file = tt_model_file(rs->model);
    snprintf(rs->ckpt_desc, sizeof rs->ckpt_desc, "%s:%s", file ? "file" : "builtin", file ? file : c->model);
    const char *text = rs->model_text;
    const tt_shape *in = &rs->model->input_shape;
    json_object *opt = json_object_new_object(), *shape = json_object_new_array();
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", (unsigned)rs->data_crc);
    if (opt && shape) {
        for (int i = 0; i < in->ndim; i++) json_object_array_add(shape, json_object_new_int64((int64_t)in->d[i]));
        json_object_object_add(opt, "input", shape);
        shape = NULL; /* opt owns it */
        json_object_object_add(opt, "classes", json_object_new_int64((int64_t)rs->model->n_classes));
        json_object_object_add(opt, "vocab", json_object_new_int64((int64_t)rs->model->token_vocab));
        if (text) json_object_object_add(opt, "model_text", json_object_new_string(text));
        json_object_object_add(opt, "layers", tt_checkpoint_layers_json(rs->model)); /* resume compares them */
        json_object_object_add(opt, "train_samples", json_object_new_int64((int64_t)rs->train->n));
        json_object_object_add(opt, "val_samples", json_object_new_int64((int64_t)rs->val->n));
        json_object_object_add(opt, "train_crc32", json_object_new_string(crc));
        json_object_object_add(opt, "epochs", json_object_new_int64((int64_t)c->epochs));
        json_object_object_add(opt, "reduce", json_object_new_string(tt_reduce_name(c->reduce)));
        json_object_object_add(opt, "lr_scaling",
                               json_object_new_string(c->lr_scaling == TT_LR_LINEAR ? "linear" : "none"));
        json_object_object_add(opt, "base_lr", json_object_new_double((double)c->optim.lr));
        const char *j = json_object_to_json_string_ext(opt, JSON_C_TO_STRING_PLAIN);
        if (j && (rs->ckpt_options = (char *)tt_malloc(strlen(j) + 1)) != NULL)
            memcpy(rs->ckpt_options, j, strlen(j) + 1);
    }
    json_object_put(opt);
    json_object_put(shape);
    return rs->ckpt_options ? TT_OK : tt_fail(err, TT_ERR_NOMEM, "out of memory for the checkpoints' options");
}

/* Writes the run's state after `step` steps of epoch `epoch` (between steps: the trainer is idle, and its master
 * weights and optimizer state are written as they stand) to `path`, or to the periodic name when path is NULL (then
 * prunes to --keep); says so on the console and in the log. */
static tt_status run_save_here(run_state *rs, size_t epoch, size_t step, const char *path, tt_error *err);

/* Every rank calls it at the same point: ps gathers the optimizer's shards to rank 0, rank 0 writes, and every rank
 * learns how that went (a failed write ends the whole job, with its line). */
static tt_status run_save(run_state *rs, size_t epoch, size_t step, const char *path, tt_error *err)
{
    tt_status s = TT_OK;
    if (rs->K > 1 && rs->c->node_reduce == TT_NODE_PS) {
        tt_optim *o = tt_trainer_optim(&rs->tr);
        tt_optim_slot sl[TT_CKPT_MAX_SLOTS];
        const int n = tt_optim_slots(o, sl);
        for (int k = 0; !s && k < n; k++)
            s = tt_node_gather_slices(rs->nd, sl[k].data, rs->ck_full[k], rs->model->n_params, err);
    }
    if (!s && rs->rank0) s = run_save_here(rs, epoch, step, path, err);
    if (!path && !s) { /* every rank: the end-of-training decision, and whether a stop must write */
        rs->saved_step = tt_trainer_optim(&rs->tr)->t;
        rs->written_epoch = epoch;
        rs->written_step = step;
    }
    return tt_node_agree(rs->nd, s, err);
}

/* Rank 0's part of run_save: the file, its line and its record, and pruning. */
static tt_status run_save_here(run_state *rs, size_t epoch, size_t step, const char *path, tt_error *err)
{
    const tt_run_config *c = rs->c;
    char periodic[4096];
    if (!path) {
        tt_ckpt_path(periodic, sizeof periodic, c->checkpoint_dir, epoch, step);
        path = periodic;
    }
    const double t0 = tt_now();
    tt_optim *o = tt_trainer_optim(&rs->tr);
    tt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.epoch = epoch;
    ck.step = step;
    ck.steps_per_epoch = rs->steps;
    ck.global_step = o->t;
    ck.seed = c->seed;
    ck.batch = rs->tc.batch;
    ck.optim = o->cfg;
    ck.u_product = o->u_product;
    ck.best = rs->best;
    ck.towers = c->towers * (size_t)rs->K; /* every tower of the job */
    snprintf(ck.backend, sizeof ck.backend, "%s", rs->ops->name);
    ck.model_desc = rs->ckpt_desc;
    ck.options = rs->ckpt_options;
    ck.n_params = rs->model->n_params;
    ck.params = (float *)tt_trainer_params(&rs->tr); /* read only: the writer does not change a tensor */
    tt_optim_slot sl[TT_CKPT_MAX_SLOTS];
    ck.n_slots = tt_optim_slots(o, sl);
    for (int k = 0; k < ck.n_slots; k++) {
        snprintf(ck.slot_names[k], sizeof ck.slot_names[k], "%s", sl[k].name);
        ck.slots[k] = rs->ck_full[k] ? rs->ck_full[k] : sl[k].data; /* ps: the gathered vectors */
    }
    tt_status s = tt_checkpoint_write(path, rs->model, &ck, err);
    if (s) return s;
    const double secs = tt_now() - t0, mb = (double)(1 + ck.n_slots) * (double)ck.n_params * sizeof(float) / 1e6;
    if (rs->out) {
        char esc[300];
        tt_escape(path, esc, sizeof esc);
        fprintf(rs->out, "checkpoint: %s (epoch %zu, step %zu/%zu; %.1f MB in %.0f ms)\n", esc, epoch, step, rs->steps,
                mb, 1e3 * secs);
        if ((s = tt_flush_stdout(rs->out, err))) return s;
    }
    if (rs->log.buf) {
        tt_out_printf(&rs->log, "{\"event\":\"checkpoint\",\"epoch\":%zu,\"step\":%zu,", epoch, step);
        tt_out_json_str(&rs->log, "path", path, 1);
        tt_out_json_num(&rs->log, "megabytes", mb, 1);
        tt_out_json_num(&rs->log, "seconds", secs, 0);
        tt_out_printf(&rs->log, "}\n");
        if ((s = tt_out_commit(&rs->log, err))) return s;
    }
    if (path == periodic) s = tt_ckpt_prune(c->checkpoint_dir, c->keep, err);
    return s;
}

/* After an epoch's validation: --save-every-epoch (or a --save-every-steps boundary at the epoch's end), and
 * --save-best when the metric improved. */
static tt_status run_save_epoch(run_state *rs, size_t epoch, const tt_epoch_stats *es, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_status s = TT_OK;
    const uint64_t global = (uint64_t)epoch * rs->steps;
    int improved = 0;
    if (c->save_best && rs->val->n) { /* first: the periodic checkpoint must carry the new best, or a run resumed
                                       * from it overwrites best.safetensors with a worse epoch */
        const double v = c->save_best == TT_SAVE_BEST_VAL_LOSS ? es->val.loss : es->val.accuracy;
        const int better = isnan(rs->best) || (c->save_best == TT_SAVE_BEST_VAL_LOSS ? v < rs->best : v > rs->best);
        if (better && isfinite(v)) {
            rs->best = v;
            improved = 1;
        }
    }
    if (c->save_every_epoch || (c->save_every_steps && global % c->save_every_steps == 0))
        s = run_save(rs, epoch, rs->steps, NULL, err);
    if (!s && improved) {
        char path[4096];
        snprintf(path, sizeof path, "%s/best.safetensors", c->checkpoint_dir);
        s = run_save(rs, epoch, rs->steps, path, err);
    }
    return s;
}

/* A stop by signal with --checkpoint-dir: the state at this step boundary, then the stop's line says where it is.
 * A failed write is said in the same line (the run is stopping anyway). */
static void run_save_on_stop(run_state *rs, size_t epoch, size_t step, char *note, size_t len)
{
    note[0] = '\0';
    if (!rs->ckpt_options || epoch == 0) return; /* no --checkpoint-dir, or nothing trained yet: nothing to save */
    char path[4096];
    tt_ckpt_path(path, sizeof path, rs->c->checkpoint_dir, epoch, step);
    if (rs->written_epoch == epoch && rs->written_step == step) { /* this very state is on disk: left as it is */
        snprintf(note, len, "; checkpoint %.3000s (written before the stop)", path);
        return;
    }
    tt_error e;
    if (run_save(rs, epoch, step, NULL, &e) == TT_OK)
        snprintf(note, len, "; checkpoint %.3000s", path);
    else
        snprintf(note, len, "; no checkpoint: %.3000s", e.msg);
}

/* The checkpoint's training set (its options' train_samples, val_samples, train_crc32: required, typed) must be this
 * run's: the same sample order needs the same samples. */
static tt_status resume_same_data(const run_state *rs, const tt_checkpoint *ck, const char *what, tt_error *err)
{
    tt_ckpt_value tn, vn, crc;
    tt_status s = tt_checkpoint_option(ck, what, "train_samples", TT_CKPT_UINT, 1, &tn, err);
    if (!s) s = tt_checkpoint_option(ck, what, "val_samples", TT_CKPT_UINT, 1, &vn, err);
    if (!s) s = tt_checkpoint_option(ck, what, "train_crc32", TT_CKPT_STRING, 1, &crc, err);
    if (s) return s;
    char mine[16], q[32];
    snprintf(mine, sizeof mine, "%08x", (unsigned)rs->data_crc);
    if (tn.u != rs->train->n)
        return tt_fail(err, TT_ERR_ARG, "%s: trained on %llu training samples, this run has %zu (the same --data, "
                       "--val-samples and --train-samples?)", what, (unsigned long long)tn.u, rs->train->n);
    if (vn.u != rs->val->n)
        return tt_fail(err, TT_ERR_ARG, "%s: trained with %llu validation samples, this run has %zu (the same "
                       "--val-samples?)", what, (unsigned long long)vn.u, rs->val->n);
    tt_escape(crc.s, q, sizeof q);
    if (strcmp(crc.s, mine) != 0)
        return tt_fail(err, TT_ERR_ARG, "%s: trained on other training data (CRC-32 %s, this run's %s: the same "
                       "--data?)", what, q, mine);
    return TT_OK;
}

/* --resume: rank 0 (or the one process) finds the checkpoint (a directory's newest valid one) and reads it; every rank
 * of a job gets its bytes (the other nodes need not see rank 0's disk) and parses them into rs->resume_ck. */
static tt_status run_resume_bytes(run_state *rs, char *path, size_t len, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_checkpoint *ck = &rs->resume_ck;
    struct stat st;
    uint8_t *buf = NULL;
    size_t n = 0;
    tt_status s = TT_OK;
    snprintf(path, len, "%s", c->resume);
    if (rs->rank0) {
        size_t skipped = 0;
        if (stat(c->resume, &st) == 0 && S_ISDIR(st.st_mode)) {
            s = tt_ckpt_newest(c->resume, rs->model, ck, path, len, &skipped, err);
            tt_checkpoint_free(ck);
            if (!s && skipped && rs->out)
                fprintf(rs->out, "resume: %zu newer checkpoint%s in %s did not read as valid; skipped\n", skipped,
                        skipped == 1 ? "" : "s", c->resume);
        }
        if (!s) s = tt_checkpoint_read_bytes(path, &buf, &n, err);
    }
    if ((s = tt_node_agree(rs->nd, s, err))) return s;
    uint64_t n64 = n;
    s = tt_node_bcast(rs->nd, &n64, sizeof n64, err);
    if (!s) s = tt_node_bcast(rs->nd, path, len, err);
    if (!s && !rs->rank0 && !(buf = (uint8_t *)tt_malloc(n64 ? (size_t)n64 : 1)))
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory for the checkpoint's %llu bytes", (unsigned long long)n64);
    if ((s = tt_node_agree(rs->nd, s, err)) == TT_OK) s = tt_node_bcast(rs->nd, buf, (size_t)n64, err);
    path[len - 1] = '\0';
    if (!s) s = tt_checkpoint_parse(buf, (size_t)n64, path, rs->model, ck, err);
    tt_free(buf);
    return s;
}

/* --resume-weights-only: the checkpoint's weights (names and shapes checked by the reader, values finite), on purpose
 * and nothing else: another model with the same tensors, other options or data may take them. The optimizer starts
 * fresh (its state belonged to the other training) and the run from epoch 1, step 1, as a new run does. */
static tt_status resume_weights_only(run_state *rs, const char *what, tt_error *err)
{
    const tt_checkpoint *ck = &rs->resume_ck;
    (void)err;
    memcpy(rs->h_init, ck->params, rs->model->n_params * sizeof(float));
    if (rs->out) {
        char esc[400];
        tt_escape(what, esc, sizeof esc);
        fprintf(rs->out, "resume: the weights of %s (epoch %llu, step %llu) only: its optimizer state, position and "
                "options are not used; a fresh optimizer, from epoch 1\n", esc + strlen("--resume-weights-only "),
                (unsigned long long)ck->epoch, (unsigned long long)ck->step);
    }
    return TT_OK;
}

/* --resume: the checkpoint (a file, or a directory's newest valid one), checked against this run: same model
 * (tensor by tensor), batch, seed, optimizer and steps per epoch. Sets the weights to start from (h_init), where to
 * begin, and keeps the optimizer's state for run_resume_optim. */
static tt_status run_resume_load(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_checkpoint *ck = &rs->resume_ck;
    char path[4096];
    tt_status s = run_resume_bytes(rs, path, sizeof path, err);
    if (s) return s;
    char what[300];
    snprintf(what, sizeof what, "%s %.200s", c->resume_weights_only ? "--resume-weights-only" : "--resume", path);
    if ((s = tt_checkpoint_check_finite(ck, rs->model, what, !c->resume_weights_only, NULL, err))) return s;
    if (c->resume_weights_only) return resume_weights_only(rs, what, err);
    if ((s = tt_checkpoint_same_model(ck, what, rs->model, rs->model->builtin ? c->model : NULL, err))) {
        const tt_error e = *err; /* the line, and what to do about it */
        return tt_fail(err, s, "%s (give the same --model, or --resume-weights-only to take only its weights)", e.msg);
    }
    char have[160], want[160];
    tt_optim_describe(&ck->optim, have, sizeof have);
    tt_optim_describe(&rs->tc.optim, want, sizeof want);
    const tt_optim_config *a = &ck->optim, *b = &rs->tc.optim;
    if (ck->batch != rs->tc.batch)
        return tt_fail(err, TT_ERR_ARG, "--resume %.200s: trained with --batch %zu, this run has %zu (give the same)",
                       path, ck->batch, rs->tc.batch);
    if (ck->seed != c->seed)
        return tt_fail(err, TT_ERR_ARG, "--resume %.200s: trained with --seed %llu, this run has %llu (give the same)",
                       path, (unsigned long long)ck->seed, (unsigned long long)c->seed);
    if (a->kind != b->kind || a->lr != b->lr || strcmp(have, want) != 0)
        return tt_fail(err, TT_ERR_ARG,
                       "--resume %.200s: trained with --optimizer %s, lr %g%s; this run has %s, lr %g%s (give the "
                       "same%s)",
                       path, tt_optim_kind_name(a->kind), (double)a->lr, have, tt_optim_kind_name(b->kind),
                       (double)b->lr, want,
                       c->lr_scaling == TT_LR_LINEAR ? "; --lr-scaling linear multiplies --lr by the towers" : "");
    if (ck->steps_per_epoch != rs->steps)
        return tt_fail(err, TT_ERR_ARG,
                       "--resume %.200s: its epochs have %llu steps, this run's have %zu (the same --data, "
                       "--val-samples and --train-samples?)",
                       path, (unsigned long long)ck->steps_per_epoch, rs->steps);
    if ((s = resume_same_data(rs, ck, what, err))) return s;
    const int done = ck->step >= ck->steps_per_epoch;
    rs->start_epoch = (size_t)ck->epoch + (done ? 1 : 0);
    rs->start_step = done ? 0 : (size_t)ck->step;
    if (done && ck->epoch == c->epochs) { /* a finished run: a clean no-op, said in one line (tt_run_on) */
        char esc[300];
        tt_escape(path, esc, sizeof esc);
        snprintf(rs->nothing_left, sizeof rs->nothing_left, "resume: %s: nothing left to train (epochs %llu of %zu "
                 "done)", esc, (unsigned long long)ck->epoch, c->epochs);
        return TT_OK;
    }
    if (rs->start_epoch > c->epochs) /* beyond --epochs: the flag was meant otherwise */
        return tt_fail(err, TT_ERR_ARG,
                       "--resume %.200s: it has finished epoch %llu, and --epochs %zu counts the total (as Keras's "
                       "initial_epoch does): nothing to train",
                       path, (unsigned long long)ck->epoch, c->epochs);
    memcpy(rs->h_init, ck->params, rs->model->n_params * sizeof(float));
    rs->best = ck->best;
    rs->saved_step = ck->global_step;
    if (rs->out) {
        char esc[300];
        tt_escape(path, esc, sizeof esc);
        fprintf(rs->out, "resume: %s (epoch %llu, step %llu/%zu; written by %zu tower%s on %s) -> epoch %zu, step %zu\n",
                esc, (unsigned long long)ck->epoch, (unsigned long long)ck->step, rs->steps, ck->towers,
                ck->towers == 1 ? "" : "s", ck->backend, rs->start_epoch, rs->start_step + 1);
    }
    return TT_OK;
}

/* --resume, once the trainer exists: the optimizer's vectors, step count and schedule term; then the checkpoint's
 * memory goes. */
static void run_resume_optim(run_state *rs)
{
    tt_checkpoint *ck = &rs->resume_ck;
    if (rs->c->resume_weights_only) { /* a fresh optimizer */
        tt_checkpoint_free(ck);
        return;
    }
    tt_optim *o = tt_trainer_optim(&rs->tr);
    tt_optim_slot sl[TT_CKPT_MAX_SLOTS];
    const int n = tt_optim_slots(o, sl);
    const size_t off = tt_trainer_optim_offset(&rs->tr); /* ps: this rank's slice of each vector */
    for (int k = 0; k < n; k++)
        for (int j = 0; j < ck->n_slots; j++)
            if (strcmp(sl[k].name, ck->slot_names[j]) == 0) memcpy(sl[k].data, ck->slots[j] + off, o->n * sizeof(float));
    o->t = ck->global_step;
    o->u_product = ck->u_product;
    tt_checkpoint_free(ck);
}

/* The signal that stopped the job: this rank's, or (K ranks) the one any rank caught — every rank must decide
 * alike, or one would leave while the others wait for it. 0: none. */
static int run_signal(run_state *rs)
{
    const int mine = tt_signal_caught();
    if (rs->K <= 1) return mine;
    uint32_t bits = mine > 0 && mine < 32 ? 1u << mine : 0;
    tt_error e;
    if (tt_node_or(rs->nd, &bits, 1, &e)) return mine;
    for (int sig = 1; sig < 32; sig++)
        if (bits & (1u << sig)) {
            tt_status_stop_signal(sig); /* the exit code carries it on every rank, not only on the one that caught it */
            return sig;
        }
    return 0;
}

/* A stop request seen between steps (during loading, validation or before the test set). */
static tt_status run_stopped(run_state *rs, const char *where, size_t epoch, size_t step, tt_error *err)
{
    int sig = run_signal(rs);
    char note[3100];
    run_save_on_stop(rs, epoch, step, note, sizeof note);
    tt_status s = tt_fail(err, TT_ERR_STOPPED, "stopped by %s %s%s", tt_signal_name(sig), where, note);
    char fields[128];
    snprintf(fields, sizeof fields, "\"signal\":\"%s\",\"epoch\":%zu,\"step\":%zu,", tt_signal_name(sig), epoch, step);
    log_end(rs, "stopped", fields, err);
    return s;
}

/* After TT_HALT_NONFINITE: which towers, then one line and the "error" record. */
static tt_status run_nonfinite(run_state *rs, size_t epoch, size_t step, tt_error *err)
{
    const size_t N = rs->c->towers;
    int *bad = (int *)tt_calloc(2 * N, sizeof(int));   /* loss, then gradient, per tower */
    char *fields = (char *)tt_calloc(8 * N * (size_t)rs->K + 160, 1); /* the record's fields: every tower fits */
    double loss = rs->results[step - 1].loss_sum;
    char *list = fields;
    size_t len = 0;
    if (bad && fields) {
        list += sprintf(fields, "\"kind\":\"nonfinite\",\"epoch\":%zu,\"step\":%zu,\"towers\":[", epoch, step);
        tt_trainer_nonfinite_towers(&rs->tr, bad, bad + N);
    }
    if (bad && fields) { /* every rank's towers, named as the job's towers rank * N + t (one rank: its own) */
        int *all = (int *)tt_calloc(2 * N * (size_t)rs->K, sizeof(int));
        tt_error e;
        if (all && !tt_node_allgather(rs->nd, bad, all, 2 * N * sizeof(int), &e))
            for (size_t g = 0; g < N * (size_t)rs->K; g++) {
                const int *b = all + (g / N) * 2 * N;
                if (b[g % N] || b[N + g % N]) len += (size_t)sprintf(list + len, "%s%zu", len ? "," : "", g);
            }
        tt_free(all);
    }
    /* a non-finite loss skips the whole update; a gradient that is non-finite only in places skips those blocks */
    tt_status s = tt_fail(err, TT_ERR_NUMERIC,
                          "epoch %zu, step %zu/%zu: the %s is not finite (towers with a non-finite gradient or loss: "
                          "%.200s); training stopped at this step, %s (try a smaller --lr)",
                          epoch, step, rs->steps, isfinite(loss) ? "summed gradient" : "loss",
                          len ? list : "none, the sum overflowed",
                          isfinite(loss) ? "its non-finite gradient blocks not applied" : "its update not applied");
    if (bad && fields) {
        strcpy(list + len, "],");
        log_end(rs, "error", fields, err);
    }
    tt_free(bad);
    tt_free(fields);
    return s;
}

/* A run that halted after `steps` steps of this epoch, `first` of them before this process: their records, then the
 * reason. */
static tt_status run_halted(run_state *rs, size_t epoch, size_t first, size_t steps, tt_error *err)
{
    tt_error werr;
    if (tt_trainer_halted(&rs->tr) == TT_HALT_NODE) /* a collective failed: no other one can be trusted now */
        return tt_trainer_node_error(&rs->tr, err);
    if (rs->log.buf && steps > first)
        tt_ledger_json_steps(&rs->log, epoch, rs->results, rs->ledger, first, steps, rs->c->towers, &werr);
    if (rs->c->trace && steps > first) run_trace_steps(rs, first, steps, &werr);
    if (rs->out && rs->bar && !rs->console_status) fputc('\n', rs->out);
    if (tt_trainer_halted(&rs->tr) == TT_HALT_NONFINITE) return run_nonfinite(rs, epoch, steps, err);
    if (rs->K > 1) { /* every rank takes the stop's collectives (signal, checkpoint); rank 0's failed stdout wins */
        char at[128];
        snprintf(at, sizeof at, "in epoch %zu after step %zu/%zu (the master weights are those after that step)",
                 epoch, steps, rs->steps);
        tt_status st = run_stopped(rs, at, epoch, steps, err);
        if (!rs->console_status) return st;
        *err = rs->console_err;
        return rs->console_status;
    }
    if (rs->console_status) { /* stdout failed while the crew ran: that is the error */
        *err = rs->console_err;
        log_end(rs, "error", "\"kind\":\"output\",", err);
        return rs->console_status;
    }
    char where[128];
    snprintf(where, sizeof where, "in epoch %zu after step %zu/%zu (the master weights are those after that step)",
             epoch, steps, rs->steps);
    return run_stopped(rs, where, epoch, steps, err);
}

/* The trace of steps first..end-1: this rank's, or (K ranks) every rank's gathered to rank 0, each rank a process
 * of the trace on rank 0's clock. Every rank calls it at the same point. */
static tt_status run_trace_steps(run_state *rs, size_t first, size_t end, tt_error *err)
{
    if (rs->K <= 1) return rs->trace.out.buf ? tt_trace_steps(&rs->trace, rs->results, rs->ledger, first, end, err)
                                             : TT_OK;
    const size_t N = rs->c->towers, n = end - first, K = (size_t)rs->K;
    const size_t rb = n * sizeof(tt_step_result), lb = n * N * sizeof(tt_tower_ledger);
    tt_step_result *res = (tt_step_result *)tt_malloc(rb ? K * rb : 1);
    tt_tower_ledger *led = (tt_tower_ledger *)tt_malloc(lb ? K * lb : 1);
    tt_status s = res && led ? TT_OK : tt_fail(err, TT_ERR_NOMEM, "out of memory for the trace");
    if (!s) s = tt_node_allgather(rs->nd, rs->results + first, res, rb, err);
    if (!s) s = tt_node_allgather(rs->nd, rs->ledger + first * N, led, lb, err);
    for (size_t r = 0; !s && rs->trace.out.buf && r < K; r++) {
        tt_trace_rank(&rs->trace, (int)r, rs->clock_offsets[r]);
        s = tt_trace_steps(&rs->trace, res + r * n, led + r * n * N, 0, n, err);
    }
    if (rs->trace.out.buf) tt_trace_rank(&rs->trace, 0, 0);
    tt_free(res);
    tt_free(led);
    return s;
}

void tt_epoch_order(uint32_t *idx, size_t n, uint64_t seed, uint64_t epoch)
{
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
    tt_rng rng;
    tt_rng_seed(&rng, seed, epoch);
    tt_rng_shuffle(&rng, idx, n);
}

/* The steps of an epoch from step `first` (0, or where a resumed checkpoint left off) to its end, in runs of steps
 * that end at every --save-every-steps boundary of the run's global step count, with a checkpoint there. */
static tt_status run_epoch_steps(run_state *rs, size_t epoch, size_t first, double e0, tt_error *err)
{
    const tt_run_config *c = rs->c;
    const size_t B = rs->tc.batch, n = rs->train->n, before = (epoch - 1) * rs->steps; /* global steps before */
    for (size_t k = first; k < rs->steps;) {
        size_t end = rs->steps;
        if (c->save_every_steps) { /* the next multiple of N after global step before + k */
            const size_t next = ((before + k) / c->save_every_steps + 1) * c->save_every_steps - before;
            end = next < end ? next : end;
        }
        const size_t lo = k * B, hi = end * B < n ? end * B : n;
        tt_status s = tt_trainer_start_steps(&rs->tr, rs->train, rs->idx + lo, hi - lo, rs->results + k, end - k,
                                             rs->ledger + k * c->towers, err);
        if (s) return s;
        size_t done = 0;
        run_steps(rs, e0, first, k, &done);
        if (tt_trainer_halted(&rs->tr)) return run_halted(rs, epoch, first, k + done, err);
        k = end;
        if (c->save_every_steps && k < rs->steps && (before + k) % c->save_every_steps == 0) {
            if (rs->bar && rs->out) fputc('\n', rs->out);
            if ((s = run_save(rs, epoch, k, NULL, err))) return s;
        }
    }
    return TT_OK;
}

/* One epoch: its order, the steps (from `first`), validation, then console, log, trace and checkpoints. */
static tt_status run_epoch(run_state *rs, size_t epoch, size_t first, tt_run_result *res, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_status s;
    if (c->before_epoch && (s = c->before_epoch(c->before_epoch_ctx, epoch, err)) != TT_OK) return s;
    tt_epoch_order(rs->idx, rs->train->n, c->seed, epoch);
    if (rs->out) fprintf(rs->out, "Epoch %zu/%zu\n", epoch, c->epochs);
    double e0 = tt_now();
    tt_trainer_set_epoch(&rs->tr, epoch);
    if ((s = run_epoch_steps(rs, epoch, first, e0, err))) return s;
    tt_epoch_stats es;
    epoch_stats(rs, epoch, first, rs->steps, &es);
    es.seconds = tt_now() - e0;
    double v0 = tt_now();
    s = tt_trainer_evaluate(&rs->tr, rs->val, &es.val, err);
    if (s) return s;
    if (c->trace) {
        char name[32];
        snprintf(name, sizeof name, "epoch %zu", epoch);
        if (rs->trace.out.buf) {
            tt_trace_span(&rs->trace, name, e0, e0 + es.seconds);
            tt_trace_span(&rs->trace, "validation", v0, tt_now());
        }
        s = run_trace_steps(rs, first, rs->steps, err); /* every rank gathers; rank 0 writes */
    }
    if (!s && rs->out) {
        print_epoch(rs, &es);
        s = tt_flush_stdout(rs->out, err);
    }
    if (!s && rs->log.buf) s = log_epoch(rs, &es, err);
    /* K ranks: rank 0's trace, console or log may have failed (no early return above: every rank must get here);
     * every rank learns it before the checkpoint's collectives */
    if ((s = tt_node_agree(rs->nd, s, err))) return s;
    if (epoch <= sizeof res->epochs / sizeof res->epochs[0]) res->epochs[epoch - 1] = es;
    res->n_epochs = epoch;
    return c->checkpoint_dir ? run_save_epoch(rs, epoch, &es, err) : TT_OK;
}

/* The test set, its line and record, and the final weights. A signal stops the evaluation at a batch boundary: no
 * figures, and the final checkpoint (written before it) stays as it is. */
static tt_status run_finish(run_state *rs, tt_run_result *res, tt_error *err)
{
    tt_status s = tt_trainer_evaluate_stoppable(&rs->tr, rs->test, &res->test, err);
    const int cut = s == TT_ERR_STOPPED;
    if (cut) s = TT_OK;             /* this rank's flag: every rank decides alike below */
    const int sig = run_signal(rs); /* every rank calls it, whatever its own status */
    if (!s && sig) {
        memset(&res->test, 0, sizeof res->test);
        return run_stopped(rs, cut ? "while the test set was evaluated (stopped at a batch boundary: no test figures)"
                                   : "as the test set's evaluation ended (no test figures)",
                           rs->c->epochs, rs->steps, err);
    }
    if (s) return s;
    if (rs->out && rs->test->n) {
        fprintf(rs->out, "test: %zu samples - loss: %.4f - accuracy: %.4f - top5: %.4f\n", res->test.n,
                res->test.loss, res->test.accuracy, res->test.top5);
        if ((s = tt_flush_stdout(rs->out, err))) return s;
    }
    if (rs->log.buf && rs->test->n) {
        tt_out_printf(&rs->log, "{\"event\":\"test\",\"samples\":%zu,", res->test.n);
        tt_out_json_num(&rs->log, "loss", res->test.loss, 1);
        tt_out_json_num(&rs->log, "accuracy", res->test.accuracy, 1);
        tt_out_json_num(&rs->log, "top5", res->test.top5, 0);
        tt_out_printf(&rs->log, "}\n");
        if ((s = tt_out_commit(&rs->log, err))) return s;
    }
    res->n_params = rs->model->n_params;
    res->final_params = (float *)tt_malloc(rs->model->n_params * sizeof(float));
    if (res->final_params) tt_trainer_get_params(&rs->tr, res->final_params);
    return TT_OK;
}

/* Closes the trace (valid JSON however the run ended) and the log; the first error wins. */
static tt_status run_close(run_state *rs, tt_status s, tt_error *err)
{
    tt_error cerr;
    tt_status ts = tt_trace_close(&rs->trace, &cerr);
    if (!s && ts) {
        *err = cerr;
        s = ts;
    }
    if (s && !rs->log_ended) { /* any other way a run fails (a write, validation) still ends its log with a record */
        static const char *const kinds[] = {[TT_OK] = "ok",           [TT_ERR_ARG] = "arg",
                                            [TT_ERR_IO] = "io",       [TT_ERR_FORMAT] = "format",
                                            [TT_ERR_NOMEM] = "memory", [TT_ERR_DEVICE] = "device",
                                            [TT_ERR_MODEL] = "model", [TT_ERR_NUMERIC] = "nonfinite",
                                            [TT_ERR_STOPPED] = "stopped"};
        char fields[64];
        const char *kind = (unsigned)s < sizeof kinds / sizeof *kinds ? kinds[s] : "?";
        snprintf(fields, sizeof fields, "\"kind\":\"%s\",", kind);
        log_end(rs, "error", fields, err);
    }
    tt_status ls = tt_out_close(&rs->log, &cerr);
    if (!s && ls) {
        *err = cerr;
        s = ls;
    }
    tt_trainer_free(&rs->tr);
    if (rs->dir_lock >= 0) close(rs->dir_lock); /* the directory is free for the next run */
    tt_free(rs->idx);
    tt_free(rs->step_secs);
    tt_free(rs->results);
    tt_free(rs->ledger);
    tt_free(rs->h_init);
    tt_free(rs->ckpt_options);
    tt_free(rs->model_text);
    tt_checkpoint_free(&rs->resume_ck);
    for (int k = 0; k < TT_CKPT_MAX_SLOTS; k++) tt_free(rs->ck_full[k]);
    tt_free(rs->clock_offsets);
    tt_free(rs->model);
    return s;
}

/* --resume of a run that finished all its epochs: one line, a "nothing_to_train" record, exit 0. */
static tt_status run_nothing_left(run_state *rs, tt_error *err)
{
    tt_status s = TT_OK;
    if (rs->out) {
        fprintf(rs->out, "%s\n", rs->nothing_left);
        s = tt_flush_stdout(rs->out, err);
    }
    if (!s && rs->log.buf) {
        tt_out_printf(&rs->log, "{\"event\":\"nothing_to_train\",\"epochs\":%zu,", rs->c->epochs);
        tt_out_json_str(&rs->log, "message", rs->nothing_left, 0);
        tt_out_printf(&rs->log, "}\n");
        s = tt_out_commit(&rs->log, err);
    }
    s = run_close(rs, s, err);
    tt_free(rs);
    return s;
}

tt_status tt_run_on(const tt_run_config *c, const tt_dataset *train, const tt_dataset *val, const tt_dataset *test,
                    FILE *out, tt_run_result *res, tt_error *err)
{
    memset(res, 0, sizeof *res);
    if (train->n == 0) return tt_fail(err, TT_ERR_ARG, "no training samples");
    if (c->towers > c->batch)
        return tt_fail(err, TT_ERR_ARG, "--towers %zu is more than --batch %zu: every tower needs at least one sample",
                       c->towers, c->batch);
    run_state *rs = (run_state *)tt_calloc(1, sizeof *rs);
    if (!rs) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    rs->c = c;
    rs->dir_lock = -1;
    rs->nd = c->node ? c->node : tt_node_world();
    rs->K = rs->nd->size > 1 ? rs->nd->size : 1;
    rs->rank0 = rs->nd->rank == 0;
    rs->start_epoch = 1;
    rs->best = NAN;
    rs->train = train;
    rs->val = val;
    rs->test = test;
    rs->out = c->progress == TT_PROGRESS_QUIET ? NULL : out;
    rs->bar = rs->out && (c->progress == TT_PROGRESS_BAR || (c->progress == TT_PROGRESS_AUTO && isatty(fileno(out))));
    tt_status s = run_open(rs, err);
    if (!s && rs->nothing_left[0]) return run_nothing_left(rs, err);
    uint64_t allocs_mark = tt_alloc_count() + tt_trainer_device_allocs(&rs->tr);
    char where[64];
    /* K ranks: every point where one rank could fail alone (rank 0's output, a checkpoint) is followed by an
     * agreement, so all ranks leave together (tt_node_agree); only a failed collective is left to abort the job */
    for (size_t epoch = rs->start_epoch; !s && epoch <= c->epochs; epoch++) {
        const size_t first = epoch == rs->start_epoch ? rs->start_step : 0;
        if (run_signal(rs)) { /* it came between steps: while loading or validating */
            snprintf(where, sizeof where, "before epoch %zu", epoch);
            s = first ? run_stopped(rs, where, epoch, first, err)
                      : run_stopped(rs, where, epoch - 1, epoch > 1 ? rs->steps : 0, err);
        } else {
            s = run_epoch(rs, epoch, first, res, err);
        }
        if (!s || tt_trainer_halted(&rs->tr) != TT_HALT_NODE) s = tt_node_agree(rs->nd, s, err);
    }
    res->allocs_after_first_step = tt_alloc_count() + tt_trainer_device_allocs(&rs->tr) - allocs_mark;
    if (!s && c->checkpoint_dir && rs->saved_step != (uint64_t)c->epochs * rs->steps) { /* the end of training */
        s = run_save(rs, c->epochs, rs->steps, NULL, err);
    }
    if (!s && run_signal(rs)) s = run_stopped(rs, "before the test set", c->epochs, rs->steps, err);
    if (!s) s = tt_node_agree(rs->nd, run_finish(rs, res, err), err);
    if (!s && run_signal(rs))
        s = run_stopped(rs, "while the test set was evaluated (it was finished)", c->epochs, rs->steps, err);
    s = run_close(rs, s, err);
    tt_free(rs);
    return s;
}

tt_status tt_run_load(const tt_run_config *c, tt_dataset *train, tt_dataset *val, tt_dataset *test, tt_error *err)
{
    memset(val, 0, sizeof *val);
    tt_status s = tt_dataset_load(c->data, train, test, err);
    if (s) return s;
    char notice[300], line[600];
    s = tt_dataset_classes(train, test, c->classes, notice, sizeof notice, err);
    if (!s && notice[0]) { /* the line's control characters are escaped by tt_report_notice */
        snprintf(line, sizeof line, "--data %.250s: %s", c->data, notice);
        tt_report_notice(line);
    }
    if (!s) s = tt_dataset_split_tail(train, c->val_samples, val, err);
    if (!s && c->train_samples) {
        if (c->train_samples > train->n)
            s = tt_fail(err, TT_ERR_ARG, "--train-samples %zu: only %zu training samples after the validation split",
                        c->train_samples, train->n);
        else
            tt_dataset_truncate(train, c->train_samples);
    }
    if (!s && c->test_samples) {
        if (c->test_samples > test->n)
            s = tt_fail(err, TT_ERR_ARG, "--test-samples %zu: the test set has only %zu samples", c->test_samples,
                        test->n);
        else
            tt_dataset_truncate(test, c->test_samples);
    }
    if (s) {
        tt_dataset_free(train);
        tt_dataset_free(val);
        tt_dataset_free(test);
    }
    return s;
}

/* The largest token id over the sets (each must hold non-negative integers), for an embedding's vocabulary. */
static tt_status token_max(const tt_dataset *const *sets, const char *const *names, double *max, tt_error *err)
{
    *max = 0;
    for (int i = 0; i < 3; i++) {
        double m;
        if (!sets[i]->n) continue;
        if (tt_dataset_token_max(sets[i], &m))
            return tt_fail(err, TT_ERR_FORMAT,
                           "the %s data hold %.9g, not a token id (an integer in 0..16777215): a model "
                           "that starts with an embedding needs token ids",
                           names[i], m);
        *max = m > *max ? m : *max;
    }
    return TT_OK;
}

/* --vocab is the vocabulary of a model that reads token ids: refused for a model without one, and for a model file
 * whose vocab= says otherwise (the file's value would win silently, and a message would blame --vocab for it). */
static tt_status vocab_flag_applies(const tt_run_config *c, const tt_model *m, tt_error *err)
{
    if (!c->vocab) return TT_OK;
    if (!m->token_vocab)
        return tt_fail(err, TT_ERR_ARG, "--vocab: %s does not start with an embedding (--vocab is its vocabulary)",
                       m->source);
    if (m->token_vocab != c->vocab)
        return tt_fail(err, TT_ERR_ARG, "--vocab: %zu, but %s sets vocab=%zu for its embedding (give one of them)",
                       c->vocab, m->source, m->token_vocab);
    return TT_OK;
}

tt_status tt_run_model(const tt_run_config *c, const tt_dataset *train, const tt_dataset *val,
                       const tt_dataset *test, tt_model *m, tt_error *err)
{
    const tt_dataset *sets[3] = {train, val, test};
    const char *names[3] = {"training", "validation", "test"};
    /* the vocabulary matters only to a model that reads token ids: build first (1 stands in for a vocabulary the
     * data will give), and scan the data only for such a model — once */
    tt_model_input in = {train->shape, train->n_classes, c->vocab ? c->vocab : 1};
    tt_status s = tt_model_make(m, c->model, &in, err);
    if (!s) s = vocab_flag_applies(c, m, err);
    if (s || !m->token_vocab) return s;
    double max;
    if ((s = token_max(sets, names, &max, err))) return s;
    if (m->vocab_from_input && !c->vocab) { /* the data's vocabulary: the largest id + 1 */
        in.vocab = (size_t)max + 1;
        if ((s = tt_model_make(m, c->model, &in, err))) return s;
    }
    const size_t V = m->token_vocab;
    if (max >= (double)V)
        return tt_fail(err, c->vocab ? TT_ERR_ARG : TT_ERR_MODEL, "%s: the data hold token id %.0f but the vocabulary "
                       "is %zu (ids 0..%zu)%s", c->vocab ? "--vocab" : m->source, max, V, V - 1,
                       c->vocab ? "" : ": give a larger vocab=, or none to take it from the data");
    return TT_OK;
}

tt_status tt_run(const tt_run_config *c, FILE *out, tt_run_result *res, tt_error *err)
{
    tt_backend be;
    tt_status s = tt_backend_open(c->device, c->gpus, &be, err); /* before spending seconds on the data */
    if (!s && be.notice[0] && out) tt_report_notice(be.notice);
    tt_trainer_config place = {.ops = be.ops, .n_devices = be.n_devices, .n_towers = c->towers, .reduce = c->reduce};
    if (!s) s = tt_trainer_check(&place, err); /* --reduce nccl where it cannot run: before the data */
    tt_dataset train, val, test;
    memset(&train, 0, sizeof train);
    memset(&val, 0, sizeof val);
    memset(&test, 0, sizeof test);
    if (!s) s = tt_run_load(c, &train, &val, &test, err);
    /* K ranks: a rank whose backend or files failed ends the job, named (a failed load leaves its sets zeroed) */
    s = tt_node_agree(c->node ? c->node : tt_node_world(), s, err);
    if (s) {
        tt_dataset_free(&train);
        tt_dataset_free(&val);
        tt_dataset_free(&test);
        return s;
    }
    if (tt_signal_caught()) /* loading takes seconds: a signal then stops the run before it starts */
        s = tt_fail(err, TT_ERR_STOPPED, "stopped by %s while loading the data", tt_signal_name(tt_signal_caught()));
    else
        s = tt_run_on(c, &train, &val, &test, out, res, err);
    tt_dataset_free(&train);
    tt_dataset_free(&val);
    tt_dataset_free(&test);
    return s;
}

tt_status tt_run_describe_model(const tt_run_config *c, tt_model *m, tt_error *err)
{
    if (!c->data_given) {
        tt_model_input in;
        tt_status s = tt_model_default_input(c->model, &in, err);
        if (!s && c->vocab) in.vocab = c->vocab;
        if (!s) s = tt_model_make(m, c->model, &in, err);
        return s ? s : vocab_flag_applies(c, m, err);
    }
    tt_dataset train, val, test;
    tt_run_config whole = *c;
    whole.val_samples = 0; /* the shapes and tokens of every training sample */
    tt_status s = tt_run_load(&whole, &train, &val, &test, err);
    if (!s) s = tt_run_model(&whole, &train, &val, &test, m, err);
    tt_dataset_free(&train); /* zeroed by a load that failed */
    tt_dataset_free(&val);
    tt_dataset_free(&test);
    return s;
}
