/* train_ranks.c — the ranks' part of a training run (docs/scaleout.md): the job, what every rank's gathers receive,
 * the check that every rank was started as rank 0 was (the fingerprint: the run's own facts and the options table's
 * rows that the ranks must agree on), every rank's clock for the trace; and the walk of a flow's phases with the ranks'
 * agreement at the return of each (tt_run_phases), which the run's flow (train.c) is written as. Not for: what the
 * phases do (train.c and the sides), or the collectives themselves (src/core/node.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train_run.h"

tt_status tt_run_phases(const tt_run_phase *phases, size_t n, tt_node *nd, tt_pending *pending,
                        int (*broken)(void *ctx), void *ctx, tt_error *err)
{
    for (size_t at = 0; at < n;) {
        tt_status s = phases[at].run(ctx, err);
        if (!s || !broken || !broken(ctx)) s = tt_pending_agree(nd, pending, s, err); /* every rank alike */
        if (s) return s;
        at = phases[at].next ? phases[at].next(ctx, at, n) : at + 1;
    }
    return TT_OK;
}

void ranks_init(run_state *rs)
{
    rs->ranks.nd = rs->c->node ? rs->c->node : tt_node_world();
    rs->ranks.K = rs->ranks.nd->size > 1 ? rs->ranks.nd->size : 1;
    rs->ranks.rank0 = rs->ranks.nd->rank == 0;
}

tt_status ranks_open(run_state *rs, tt_error *err)
{
    const size_t K = (size_t)rs->ranks.K, N = rs->c->towers;
    if (!(rs->ranks.records = (int *)tt_calloc((K + 1) * 2 * N, sizeof(int))))
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    if (rs->c->trace && K > 1 &&
        (!(rs->ranks.clock_offsets = (double *)tt_calloc(K, sizeof(double))) ||
         !(rs->ranks.trace_results = (tt_step_result *)tt_calloc(K * rs->steps, sizeof(tt_step_result))) ||
         !(rs->ranks.trace_ledger = (tt_tower_ledger *)tt_calloc(K * rs->steps * N, sizeof(tt_tower_ledger)))))
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    return TT_OK;
}

void ranks_clocks(run_state *rs)
{
    tt_error e;
    if (rs->c->trace && rs->ranks.K > 1) /* the trace puts every rank's steps on rank 0's clock */
        run_fail(rs, tt_node_allgather(rs->ranks.nd, &rs->ranks.nd->clock_offset, rs->ranks.clock_offsets,
                                       sizeof(double), &e), &e);
}

void ranks_close(run_state *rs)
{
    tt_free(rs->ranks.clock_offsets);
    tt_free(rs->ranks.trace_results);
    tt_free(rs->ranks.trace_ledger);
    tt_free(rs->ranks.records);
}

/* ---- the fingerprint: what must be the same on every rank of a job ------------------------------------------- */

/* A rank started with another model, batch, data or option would step out of line with the others (or wait for a
 * collective they never call). The fingerprint is FP_FIELDS numbers, each at its place: the run's own facts (below)
 * and the options table's rows at TT_AT_RANKS; each says how its value reads, so a mismatch is told in the flag's own
 * words ("--reduce is device here, cpu on rank 0"). The first place that differs is named. */
enum { FP_FIELDS = 38 };
typedef enum { FP_OPTION, FP_COUNT, FP_CRC, FP_FLOAT, FP_SETTINGS } fp_kind;
typedef struct fingerprint {
    uint64_t v[FP_FIELDS];
    char hyper[TT_OPTIM_WORDS]; /* the optimizer's settings in words (FP_SETTINGS is their CRC-32) */
} fingerprint;
typedef struct fp_field { /* what a place holds (this process's: the ranks exchange the values only) */
    const char *name;
    fp_kind kind;
    const tt_run_opt *o; /* FP_OPTION: the row */
} fp_field;

static void fp_fact(fp_field *f, fingerprint *fp, int place, const char *name, fp_kind kind, uint64_t v)
{
    TT_ASSERT(place >= 1 && place <= FP_FIELDS && !f[place - 1].name && !tt_run_opt_at(TT_AT_RANKS, place));
    f[place - 1] = (fp_field){name, kind, NULL};
    fp->v[place - 1] = v;
}

/* A field's value as the user would write it. */
static void fp_value(const fp_field *f, uint64_t v, char *out, size_t len)
{
    float x;
    uint32_t bits = (uint32_t)v;
    switch (f->kind) {
    case FP_OPTION: tt_run_opt_words(f->o, v, out, len); break;
    case FP_CRC: snprintf(out, len, "%08llx", (unsigned long long)v); break;
    case FP_FLOAT:
        memcpy(&x, &bits, sizeof x);
        tt_float_str(x, out, len);
        break;
    default: snprintf(out, len, "%llu", (unsigned long long)v); break;
    }
}

static void run_fingerprint_of(const run_state *rs, fp_field *f, fingerprint *fp)
{
    const tt_run_config *c = rs->c;
    const tt_model *m = rs->model;
    memset(f, 0, FP_FIELDS * sizeof *f);
    memset(fp, 0, sizeof *fp);
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
    tt_optim_describe(&rs->tc.optim, fp->hyper, sizeof fp->hyper);
    uint32_t lr;
    memcpy(&lr, &rs->tc.optim.lr, sizeof lr);
    fp_fact(f, fp, 1, "the model's parameter count", FP_COUNT, m->n_params);
    fp_fact(f, fp, 2, "the model (CRC-32 of its layout and description)", FP_CRC, layout);
    fp_fact(f, fp, 5, "training samples", FP_COUNT, rs->train->n);
    fp_fact(f, fp, 6, "validation samples", FP_COUNT, rs->val->n);
    fp_fact(f, fp, 7, "test samples", FP_COUNT, rs->test->n);
    fp_fact(f, fp, 8, "sample bytes", FP_COUNT, tt_dataset_sample_bytes(rs->train));
    fp_fact(f, fp, 9, "classes", FP_COUNT, rs->train->n_classes);
    fp_fact(f, fp, 12, "--lr", FP_FLOAT, lr); /* the rate the trainer runs: --lr-scaling's too */
    fp_fact(f, fp, 13, "the optimizer's settings", FP_SETTINGS, tt_crc32(0, fp->hyper, strlen(fp->hyper)));
    fp_fact(f, fp, 17, "the training data (CRC-32)", FP_CRC, rs->data_crc);
    for (int p = 1; p <= FP_FIELDS; p++) {
        const tt_run_opt *o = tt_run_opt_at(TT_AT_RANKS, p);
        if (o) {
            f[p - 1] = (fp_field){o->name, FP_OPTION, o};
            fp->v[p - 1] = tt_run_opt_value(o, c);
        }
        TT_ASSERT(f[p - 1].name); /* every place is a fact's or a row's */
    }
}

/* Every rank compares its fingerprint with rank 0's: a rank that differs fails, naming the first difference (the
 * phase's agreement tells every rank). */
tt_status ranks_check(run_state *rs, tt_error *err)
{
    if (rs->ranks.K <= 1) return TT_OK;
    fp_field f[FP_FIELDS];
    fingerprint mine, *all = (fingerprint *)tt_calloc((size_t)rs->ranks.K, sizeof mine);
    if (!all) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    run_fingerprint_of(rs, f, &mine);
    tt_status s = tt_node_allgather(rs->ranks.nd, &mine, all, sizeof mine, err);
    all[0].hyper[sizeof all[0].hyper - 1] = '\0'; /* another rank's bytes */
    for (int k = 0; !s && k < FP_FIELDS; k++)
        if (mine.v[k] != all[0].v[k]) {
            char here[160], there[160];
            fp_value(&f[k], mine.v[k], here, sizeof here);
            fp_value(&f[k], all[0].v[k], there, sizeof there);
            if (f[k].kind == FP_SETTINGS) { /* in words (tt_optim_describe's ", momentum 0.9") */
                snprintf(here, sizeof here, "'%s'", mine.hyper + strspn(mine.hyper, ", "));
                snprintf(there, sizeof there, "'%s'", all[0].hyper + strspn(all[0].hyper, ", "));
            }
            s = tt_fail(err, TT_ERR_ARG,
                        "started with another configuration than rank 0: %s %s %s here, %s on rank 0 (every rank "
                        "must run the same model, batch, data and options)", f[k].name,
                        f[k].kind == FP_SETTINGS ? "are" : "is", here, there);
        }
    tt_free(all);
    return s;
}
