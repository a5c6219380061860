/* probe.c — `towertrain probe`: measures what the step's cost model needs on this machine and backend (tt_probe_run:
 * the links and rates, the step's phases timed by the trainer), predicts each placement's step and the --sync modes,
 * the cross-node combine under mpirun (or on --link's link), then times every design this backend runs as whole steps
 * beside the prediction; --json FILE also writes the measured profile (tt_profile.h). `probe --assume SPEC` measures
 * nothing: the what-if of the cost model (tt_cost_model.h) from assumed or measured figures, for 1-8 GPUs.
 * Not for: the measurements and the prediction themselves (tt_probe.h) or the cost model's formulas (cost_model.c). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "measure.h"
#include "tt_blas.h"
#include "tt_build.h"
#include "tt_cli.h"
#include "tt_cost_model.h"
#include "tt_out.h"
#include "tt_probe.h"
#include "tt_profile.h"
#include "tt_signal.h"

typedef struct probe_opts {
    size_t reps;
    const char *assume; /* --assume SPEC: predict from assumed figures instead of measuring */
    const char *json;   /* --json FILE: the measured profile, written there (tt_profile.h) */
    double link_gbps, link_us; /* --link GBPS:US: the cross-node link the prediction assumes (0: the measured one) */
} probe_opts;

/* probe's own options, for tt_cli_parse_train: --reps, --link, --json, --assume. */
static int probe_extra(const char *opt, const char *value, void *ctx, tt_error *err, tt_status *st)
{
    probe_opts *po = (probe_opts *)ctx;
    if (strcmp(opt, "--reps") == 0) {
        *st = value ? tt_cli_size(opt, value, 1, 64, &po->reps, err)
                    : tt_fail(err, TT_ERR_ARG, "%s: missing value", opt);
        return 1;
    }
    if (strcmp(opt, "--link") == 0) {
        char *end = NULL;
        double g = value ? strtod(value, &end) : 0, u = end && *end == ':' ? strtod(end + 1, &end) : -1;
        if (!value || !(g > 0 && g < 1e4) || !(u >= 0 && u < 1e6) || *end || !isdigit((unsigned char)value[0]))
            *st = tt_fail(err, TT_ERR_ARG, "--link: '%.64s' is not GBPS:MICROSECONDS (a link's bandwidth in GB/s and "
                          "one-way latency, e.g. 3.1:20 for 25 Gb Ethernet)", value ? value : "");
        po->link_gbps = g;
        po->link_us = u;
        return 1;
    }
    if (strcmp(opt, "--json") == 0) {
        if (!value || !*value)
            *st = tt_fail(err, TT_ERR_ARG, "--json: missing value (the file to write the profile to)");
        else if (po->json) *st = tt_fail(err, TT_ERR_ARG, "--json: given twice");
        po->json = value;
        return 1;
    }
    if (strcmp(opt, "--assume") == 0) {
        if (!value || !*value)
            *st = tt_fail(err, TT_ERR_ARG, "--assume: missing value (a profile: %s, a measured profile's FILE, or "
                          "KEY=VALUE,...)", tt_assume_profiles());
        po->assume = value;
        return 1;
    }
    return 0;
}

/* The cross-node part of probe: the link, the combine measured against its model, the step of both --node-reduce
 * modes at this job's K, and the model's K = 1..16 on the link (measured, or --link's). */
static void probe_print_net(const tt_probe *p, const tt_net *measured, const probe_opts *po, int K, size_t P, size_t N,
                            size_t B)
{
    tt_net net = *measured;
    printf("\ncross-node combine (%zu floats = %.2f MB per rank, docs/scaleout.md):\n", P, 4e-6 * (double)P);
    if (K > 1) {
        printf("  measured over %d ranks: latency %.1f us, bandwidth %.2f GB/s (one message of a %.0f KB slice), "
               "rank-order sum %.2f GB/s\n", K, 1e6 * net.latency, net.bandwidth, 4e-3 * (double)P / K, net.sum_rate);
        printf("  the step's combine collectives: %.3f ms (of them statistics + halt flags %.3f ms); the model says "
               "%.3f ms\n", 1e3 * net.combine, 1e3 * net.small, 1e3 * tt_net_combine(&net, K, P));
        printf("  predicted step of %d ranks x %zu tower%s, batch %zu (ms):\n%12s %8s %8s %8s %8s %9s\n", K, N,
               N == 1 ? "" : "s", B, "node-reduce", "towers", "reduce", "combine", "update", "total");
        for (int m = 0; m < TT_NODE_REDUCE_COUNT; m++) {
            tt_step_times t;
            tt_probe_predict_node(p, &net, K, P, (tt_node_reduce)m, TT_REDUCE_CPU, &t);
            printf("%12s %8.3f %8.3f %8.3f %8.3f %9.3f\n", tt_node_reduce_name((tt_node_reduce)m), 1e3 * t.towers,
                   1e3 * t.reduce, 1e3 * t.combine, 1e3 * t.update, 1e3 * t.total);
        }
    } else if (po->link_gbps <= 0) {
        printf("  one process: nothing to measure (run it under mpirun -np K, or give --link GBPS:US)\n");
        return;
    }
    if (po->link_gbps > 0) {
        net.bandwidth = po->link_gbps;
        net.latency = 1e-6 * po->link_us;
        net.ranks = 1; /* the model, not this job's measurement */
    }
    printf("  the model on a link of %.2f GB/s and %.1f us%s, each rank as this one (its towers, its share of a batch "
           "that grows with K):\n%6s %12s %12s %12s %12s\n", net.bandwidth, 1e6 * net.latency,
           po->link_gbps > 0 ? " (--link)" : " (measured)", "ranks", "combine ms", "allreduce ms", "ps ms", "speedup");
    tt_step_times one;
    tt_probe_predict_node(p, &net, 1, P, TT_NODE_ALLREDUCE, TT_REDUCE_CPU, &one);
    for (int k = 1; k <= 16; k *= 2) {
        tt_step_times a, b;
        tt_probe_predict_node(p, &net, k, P, TT_NODE_ALLREDUCE, TT_REDUCE_CPU, &a);
        tt_probe_predict_node(p, &net, k, P, TT_NODE_PS, TT_REDUCE_CPU, &b);
        const double best = a.total < b.total ? a.total : b.total;
        printf("%6d %12.3f %12.3f %12.3f %11.2fx\n", k, 1e3 * a.combine, 1e3 * a.total, 1e3 * b.total,
               (double)k * one.total / best);
    }
}

/* Under mpirun every rank probes its share with the same model, towers, batch and reps: the combine's collectives are
 * sized by the parameters and repeated reps times, so a rank started differently would wait in one for ever. Each
 * rank compares with rank 0 and the first difference is named with both values; every rank learns it. */
static tt_status probe_same_on_ranks(tt_node *nd, const tt_run_config *c, size_t P, size_t reps, tt_error *err)
{
    if (nd->size <= 1) return TT_OK;
    static const char *const names[] = {"the model's parameter count", "--towers", "--batch", "--reps", "--optimizer"};
    enum { N = sizeof names / sizeof *names };
    const uint64_t mine[N] = {P, c->towers, c->batch, reps, (uint64_t)c->optim.kind};
    uint64_t all[N * TT_MAX_RANKS];
    tt_status s = tt_node_allgather(nd, mine, all, sizeof mine, err);
    for (int f = 0; !s && f < N; f++)
        if (mine[f] != all[f]) {
            char here[32], there[32];
            snprintf(here, sizeof here, "%llu", (unsigned long long)mine[f]);
            snprintf(there, sizeof there, "%llu", (unsigned long long)all[f]);
            if (f == N - 1) { /* the optimizer by its name */
                snprintf(here, sizeof here, "%s", tt_optim_kind_name(c->optim.kind));
                snprintf(there, sizeof there, "%s", all[f] < 16 ? tt_optim_kind_name((tt_optim_kind)all[f]) : "?");
            }
            s = tt_fail(err, TT_ERR_ARG, "probe: started otherwise than rank 0: %s is %s here, %s on rank 0 (every "
                        "rank must probe the same model, towers, batch and reps)", names[f], here, there);
        }
    return tt_node_agree(nd, s, err);
}


/* What decides probe's way before anything is measured — the what-if (--assume), --json, --graphs' refusal — is
 * the same on every rank, agreed before any rank takes a way: a rank that took another one alone (--assume given to
 * one rank) left the others waiting in the first collective of theirs for ever. The words are the user's. */
static tt_status probe_same_branch(tt_node *nd, const tt_run_config *c, const probe_opts *po, tt_error *err)
{
    const tt_node_word w[] = {
        {"--assume", po->assume},
        {"--json", po->json ? "given" : NULL}, /* rank 0 writes it: the path is that node's */
        {"--graphs", tt_graphs_names[c->graphs != 0]},
    };
    return tt_node_same_words(nd, "probe", "every rank must run the same probe", w, (int)(sizeof w / sizeof *w),
                              err);
}

/* Every design of the step this backend can run (--reduce x --update x --graphs x --overlap), each as whole steps
 * by the trainer (tt_probe_steps), beside the phase model's prediction where it has one (the host's update, no
 * graph, no overlap). Measured first, then printed (rank 0); one rank only. */
static tt_status probe_designs(const tt_probe_config *pc, const tt_probe *p, tt_profile *pf, tt_error *err)
{
    enum { MAX_DESIGNS = TT_REDUCE_COUNT * TT_UPDATE_COUNT * 4 };
    tt_probe_design d[MAX_DESIGNS];
    tt_step_times t[MAX_DESIGNS];
    int n = 0;
    tt_status s = TT_OK;
    for (int r = 0; r < TT_REDUCE_COUNT; r++)
        for (int u = 0; u < TT_UPDATE_COUNT; u++)
            for (int v = 0; v < 4 && !s; v++) {
                int ran;
                d[n] = (tt_probe_design){(tt_reduce)r, (tt_update)u, v & 1, v >> 1};
                if (d[n].graphs && d[n].overlap) continue; /* refused by the trainer: no need to ask */
                s = tt_probe_steps(pc, &d[n], &t[n], &ran, err);
                n += !s && ran;
            }
    for (int i = 0; pf && !s && i < n && pf->n_steps < TT_PROFILE_MAX_STEPS; i++) { /* --json: each design's split */
        tt_profile_step *st = &pf->steps[pf->n_steps++];
        snprintf(st->reduce, sizeof st->reduce, "%s", tt_reduce_name(d[i].reduce));
        snprintf(st->update, sizeof st->update, "%s", tt_update_name(d[i].update));
        st->graphs = d[i].graphs;
        st->overlap = d[i].overlap;
        st->measured = t[i];
        tt_step_times *q = &st->predicted;
        if (d[i].update == TT_UPDATE_HOST && !d[i].graphs && !d[i].overlap) tt_probe_predict(p, d[i].reduce, q);
        else q->launch = q->pull = q->data = q->compute = q->push = q->wait = q->reduce = q->update = q->total = NAN;
    }
    if (s || !tt_node_speaks()) return s;
    printf("\nmeasured whole steps (every design this backend runs, by the trainer: 2 warm-up steps, then the median "
           "of %zu; ms):\n%10s %10s %6s %7s |%8s %8s %8s %8s %8s %8s %8s |%9s %9s\n", pc->reps ? pc->reps : 30,
           "reduce", "update", "graphs", "overlap", "pull", "data", "compute", "push", "wait", "reduce", "update",
           "total", "predicted");
    for (int i = 0; i < n; i++) {
        char pred[16] = "-";
        if (d[i].update == TT_UPDATE_HOST && !d[i].graphs && !d[i].overlap) {
            tt_step_times m;
            tt_probe_predict(p, d[i].reduce, &m);
            snprintf(pred, sizeof pred, "%.3f", 1e3 * m.total);
        }
        printf("%10s %10s %6s %7s |%8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f |%9.3f %9s\n", tt_reduce_name(d[i].reduce),
               tt_update_name(d[i].update), tt_graphs_names[d[i].graphs], tt_overlap_names[d[i].overlap],
               1e3 * t[i].pull, 1e3 * t[i].data, 1e3 * t[i].compute, 1e3 * t[i].push, 1e3 * t[i].wait,
               1e3 * t[i].reduce, 1e3 * t[i].update, 1e3 * t[i].total, pred);
    }
    return TT_OK;
}

/* --json: what probe measured besides its tables (tt_probe_kernels_run: each GEMM shape alone, the launch floor and
 * a graph node, a copy's fixed cost, the compute phase's other kernels), the profile filled and written. */
static tt_status probe_json(tt_out *o, tt_profile *pf, const tt_probe_config *pc, const tt_probe *p,
                            const tt_run_config *c, const char *backend, tt_error *err)
{
    tt_probe_kernels *k = (tt_probe_kernels *)tt_calloc(1, sizeof *k);
    if (!k) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    tt_status s = tt_probe_kernels_run(pc, k, err);
    if (!s) {
        tt_profile_fill(pf, pc, p, k);
        tt_build_record rec;
        tt_build_record_of(&rec);
        tt_build_describe(&rec, pf->towertrain, sizeof pf->towertrain);
        snprintf(pf->backend, sizeof pf->backend, "%s", backend);
        snprintf(pf->blas, sizeof pf->blas, "%s", tt_blas_describe());
        snprintf(pf->model, sizeof pf->model, "%s", c->model ? c->model : "mlp");
        tt_profile_write(o, pf);
        s = tt_out_commit(o, err);
    }
    if (!s && tt_node_speaks()) {
        printf("\nprofile written (%s): %zu GEMM shapes timed alone, %zu other kernels %.3f ms; a launch %.3f us",
               o->what, k->n_gemms, k->others, 1e3 * k->others_s, 1e6 * k->launch);
        if (!isnan(k->graph_node)) printf(", a graph node %.3f us", 1e6 * k->graph_node);
        printf("\n");
    }
    tt_free(k);
    return s;
}

/* --json's file at the end: a complete document, or none. A probe that failed or was stopped before its document
 * was written whole (one commit) removes the file it created or truncated — while it still holds it, and only if the
 * name still is that file, never a device (/dev/null) — so no empty or partial profile is left for --assume FILE to
 * read. Then closed; returns the close's status. */
static tt_status json_close(tt_out *o, const char *path, tt_status s, tt_error *err)
{
    struct stat held, named;
    if (s && o->buf) {
        tt_out_discard(o);
        if (o->committed == 0 && fstat(o->fd, &held) == 0 && S_ISREG(held.st_mode) && stat(path, &named) == 0 &&
            named.st_dev == held.st_dev && named.st_ino == held.st_ino)
            unlink(path);
    }
    return tt_out_close(o, err);
}

/* probe --assume SPEC --json FILE: every design's predicted step for 1-8 GPUs (strong scaling: the global batch as
 * given), one JSON object — what tools/gpu-check --bundle holds against the steps it measured. A design the cost
 * model has no formula for is left out. */
static tt_status what_if_json(const char *path, tt_assume *a, const tt_model *m, const tt_run_config *c,
                              tt_error *err)
{
    tt_out o;
    memset(&o, 0, sizeof o);
    char what[256];
    snprintf(what, sizeof what, "--json %.240s", path);
    tt_status s = tt_out_open(&o, path, what, 1 << 16, err);
    if (s) return s;
    tt_out_printf(&o, "{\"schema\":\"towertrain-whatif\",\"version\":1,\"profile\":\"%s\",\"model\":\"", a->name);
    for (const char *p = c->model ? c->model : "mlp"; *p; p++) /* a model file's path: escaped */
        tt_out_printf(&o, (*p == '"' || *p == '\\') ? "\\%c" : ((unsigned char)*p < 0x20 ? "?" : "%c"), *p);
    tt_out_printf(&o, "\",\"batch\":%zu,\"designs\":[", c->batch);
    const int graphs0 = a->graphs;
    int first = 1;
    for (size_t n = 1; n <= 8; n++)
        for (int r = 0; r < TT_REDUCE_COUNT; r++)
            for (int u = 0; u < TT_UPDATE_COUNT; u++)
                for (int g = 0; g < 2; g++)
                    for (int ov = 0; ov < 2; ov++) {
                        tt_step_times t;
                        a->graphs = g;
                        int ok;
                        if (ov)
                            ok = !g && r == TT_REDUCE_CPU && u == TT_UPDATE_HOST &&
                                 (tt_assume_overlap_step(a, m, n, c->batch, c->optim.kind, &t), 1);
                        else
                            ok = tt_assume_update_step(a, m, n, c->batch, c->optim.kind, (tt_reduce)r, (tt_update)u,
                                                       &t);
                        if (!ok) continue;
                        tt_out_printf(&o, "%s{\"towers\":%zu,\"reduce\":\"%s\",\"update\":\"%s\",\"graphs\":%s,"
                                      "\"overlap\":%s,\"pull_s\":%.9g,\"data_s\":%.9g,\"compute_s\":%.9g,"
                                      "\"push_s\":%.9g,\"wait_s\":%.9g,\"reduce_s\":%.9g,\"update_s\":%.9g,"
                                      "\"total_s\":%.9g}",
                                      first ? "" : ",", n, tt_reduce_name((tt_reduce)r), tt_update_names[u],
                                      g ? "true" : "false", ov ? "true" : "false", t.pull, t.data, t.compute, t.push,
                                      t.wait, t.reduce, t.update, t.total);
                        first = 0;
                    }
    a->graphs = graphs0;
    tt_out_printf(&o, "]}\n");
    s = tt_out_commit(&o, err);
    tt_error close_err;
    const tt_status closed = json_close(&o, path, s, &close_err);
    if (!s && closed) {
        *err = close_err;
        s = closed;
    }
    return s;
}


/* probe --assume SPEC: the what-if report from assumed figures (refusing the options that only a measurement reads).
 * Under mpirun every rank checks its own options, spec and model (a profile FILE one node lacks is named), and the
 * job agrees on that; then rank 0 alone reports and writes --json's file, and the job agrees on its outcome. */
static tt_status probe_what_if(tt_node *nd, const tt_run_config *c, const char *spec, const char *json, int argc,
                               char **argv, tt_error *err)
{
    static const char *const measured[] = {"--towers", "--device", "--gpus", "--host-threads", "--reps",
                                           "--slow-tower", "--data-on", NULL};
    tt_status s = TT_OK;
    for (int i = 2; !s && i < argc; i++)
        for (const char *const *o = measured; !s && *o; o++) {
            size_t len = strlen(*o);
            if (strncmp(argv[i], *o, len) == 0 && (argv[i][len] == '\0' || argv[i][len] == '='))
                s = tt_fail(err, TT_ERR_ARG, "probe --assume: %s does not apply (it predicts 1-8 GPUs from assumed "
                            "figures, measuring nothing)", *o);
        }
    tt_assume a;
    tt_model *m = (tt_model *)tt_calloc(1, sizeof *m);
    if (!s && !m) s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
    if (!s) s = tt_assume_parse(spec, &a, err);
    if (!s) {
        a.graphs = c->graphs;
        a.bucket_bytes = c->bucket_kib << 10;
        a.precision = c->precision;
        a.push_fp32 = c->push_fp32;
        s = tt_run_describe_model(c, m, err);
    }
    if (!(s = tt_node_agree(nd, s, err))) {
        if (tt_node_speaks()) {
            s = tt_assume_report(stdout, &a, m, c->batch, c->optim.kind, err);
            if (!s) s = tt_flush_stdout(stdout, err);
            if (!s && json) s = what_if_json(json, &a, m, c, err);
        }
        s = tt_node_agree(nd, s, err); /* rank 0's outcome: every rank's exit code */
    }
    tt_free(m);
    return s;
}

static void probe_help(void)
{
    printf("usage: towertrain probe [--model M] [--towers N] [--batch B] [--optimizer O] [--device D] "
           "[--reps N] [--json FILE]\n"
           "       towertrain probe --assume PROFILE|FILE|KEY=VALUE,... [--model M] [--batch B] [--optimizer O]\n\n"
           "Times every phase of a step with the trainer's own code, under every reduction placement, and the\n"
           "links that explain them — copy bandwidth host->device and device->host (pinned and pageable),\n"
           "device->device, host memcpy, sgemm at the model's shapes, barriers — and predicts the step time of\n"
           "each placement before any training; then runs every design this backend can (--reduce x --update x\n"
           "--graphs x --overlap, --bucket-kib for its buckets) as whole steps by the trainer, measured beside the\n"
           "prediction. Needs no data set: inputs are synthetic, shaped as --data's\n"
           "samples when given, else as the model's default input (mlp 784, cnn 32x32x3, textcnn the Reuters\n"
           "seed's 300 tokens of 30982; a model file: its `input shape=` line).\n\n"
           "options: the train options --model --data --vocab --towers --batch --optimizer --device --gpus\n"
           "  --host-threads, and\n"
           "  --reps N          reps per measurement, median [30]\n"
           "  --json FILE       also time every GEMM shape of the step alone, a kernel launch, a graph node\n"
           "                    (CUDA), a copy's fixed cost and the compute phase's other kernels, and write\n"
           "                    all of it, with the phases and the whole steps, to FILE as one JSON object: the\n"
           "                    measured profile that --assume FILE reads (docs/whatif.md lists its fields)\n"
           "  --link GBPS:US    the cross-node link to predict K ranks on (bandwidth GB/s : one-way latency\n"
           "                    microseconds), e.g. 3.1:20 for 25 Gb Ethernet [under mpirun: the measured one]\n"
           "Under mpirun -np K each rank probes its share of the batch, and the combine between the ranks is\n"
           "measured (ping-pong latency and bandwidth, the combine's own collectives); the table predicts both\n"
           "--node-reduce modes, and the cost model K = 1..16 ranks on the link (docs/scaleout.md).\n"
           "  --assume SPEC     measure nothing: predict 1-8 GPUs, strong and weak scaling, every placement, from\n"
           "                    assumed figures — a profile (%s),\n"
           "                    optionally followed by KEY=VALUE overrides, or KEY=VALUE alone (docs/whatif.md\n"
           "                    lists the keys) — or from\n"
           "                    a measured profile: an item holding a '/' or ending in .json is a file that\n"
           "                    probe --json wrote (or a report.json holding one under \"probe\"), and its name\n"
           "                    runs to the end of SPEC: [PROFILE,][KEY=VALUE,...]FILE (the keys win over the\n"
           "                    file, the file over the profile); with --graphs on, each tower's step predicted\n"
           "                    as one CUDA graph launch; with --json FILE, every design's predicted step\n"
           "                    for 1-8 GPUs also as one JSON object (docs/whatif.md)\n",
           tt_assume_profiles());
}

/* The predicted step of every placement (tt_probe_predict), and why one that did not run here could not. */
static void probe_print_predicted(const tt_probe *p, const tt_backend *be, size_t towers, int precision)
{
    printf("\npredicted step (ms):\n%10s %8s %8s %8s %8s %8s %8s %8s %9s\n", "reduce", "pull", "data", "compute",
           "push", "wait", "reduce", "update", "total");
    for (int r = 0; r < TT_REDUCE_COUNT; r++) {
        tt_step_times t;
        if (!p->can[r]) {
            tt_error why;
            tt_trainer_config tc = {.ops = be->ops, .n_devices = be->n_devices, .n_towers = towers,
                                    .reduce = (tt_reduce)r, .precision = precision};
            tt_trainer_check(&tc, &why);
            printf("%10s   (not here: %s)\n", tt_reduce_name((tt_reduce)r), why.msg);
            continue;
        }
        tt_probe_predict(p, (tt_reduce)r, &t);
        printf("%10s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %9.3f\n", tt_reduce_name((tt_reduce)r), 1e3 * t.pull,
               1e3 * t.data, 1e3 * t.compute, 1e3 * t.push, 1e3 * t.wait, 1e3 * t.reduce, 1e3 * t.update,
               1e3 * t.total);
    }
}

/* One rank: the --sync modes predicted (--reduce cpu, --update host): time per global batch, docs/sync.md. */
static void probe_print_sync(const tt_probe *p, const tt_probe_config *pc)
{
    static const tt_sync modes[] = {{TT_SYNC_BSP, 0, 0},   {TT_SYNC_SSP, 1, 0},     {TT_SYNC_SSP, 4, 0},
                                    {TT_SYNC_ASYNC, 0, 0}, {TT_SYNC_WEIGHTS, 4, 0}, {TT_SYNC_WEIGHTS, 16, 0}};
    if (pc->precision) { /* compat.c: the 16-bit pull and push are bsp's */
        printf("\npredicted --sync modes: bsp alone with --precision bf16 or fp16 (the step above)\n");
        return;
    }
    printf("\npredicted --sync modes (ms per global batch; the epoch's wall over its steps):");
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        tt_step_times t;
        char name[32];
        tt_probe_predict_sync(p, pc, &modes[m], &t);
        printf("%s %s %.3f", m ? " |" : "", tt_sync_format(&modes[m], name, sizeof name), 1e3 * t.total);
    }
    printf("\n");
}

/* --json: the file is opened before anything is measured, so a bad path fails before minutes of measuring; *pf gets
 * the profile to fill (NULL without --json). One process only. */
static tt_status probe_json_open(const probe_opts *po, int K, tt_out *json_out, tt_profile **pf, tt_error *err)
{
    tt_status s = TT_OK;
    memset(json_out, 0, sizeof *json_out);
    *pf = NULL;
    if (po->json && K > 1)
        s = tt_fail(err, TT_ERR_ARG, "probe --json: one process only (under mpirun, bench measures the job)");
    else if (po->json && !(*pf = (tt_profile *)tt_calloc(1, sizeof **pf)))
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
    char what[256];
    snprintf(what, sizeof what, "--json %.240s", po->json ? po->json : "");
    if (!s && po->json) s = tt_out_open(json_out, po->json, what, 1 << 16, err);
    return s;
}

/* probe's flow: phases every rank of the job walks together, agreeing at the return of each (tt_run_phases), so a
 * failure one rank alone meets (its backend, its model file, rank 0's output) ends the job there on every rank. */
typedef struct probe_flow {
    tt_run_config *c;
    const probe_opts *po;
    tt_backend be;
    tt_model *model;
    tt_node *nd;
    int K;
    int measured; /* the measurement started: the job's stop signal is every rank's exit code from then on */
    tt_out json_out;
    tt_profile *pf;
    tt_probe_config pc;
    tt_probe p;
    tt_net net;
} probe_flow;

/* The backend and the model. */
static tt_status probe_open(void *ctx, tt_error *err)
{
    probe_flow *f = (probe_flow *)ctx;
    tt_status s = tt_backend_open(f->c->device, f->c->gpus, &f->be, err);
    if (s) return s;
    if (f->be.notice[0]) tt_report_notice(f->be.notice);
    f->model = (tt_model *)tt_calloc(1, sizeof *f->model);
    if (!f->model) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    return tt_run_describe_model(f->c, f->model, err);
}

static tt_status probe_ranks(void *ctx, tt_error *err)
{
    probe_flow *f = (probe_flow *)ctx;
    return probe_same_on_ranks(f->nd, f->c, f->model->n_params, f->po->reps, err);
}

/* --json's file and profile; the probe's configuration: one rank's share of the batch, the shards of B over K x N
 * towers. */
static tt_status probe_outputs(void *ctx, tt_error *err)
{
    probe_flow *f = (probe_flow *)ctx;
    const tt_run_config *c = f->c;
    f->pc = (tt_probe_config){.model = f->model, .ops = f->be.ops, .n_devices = f->be.n_devices,
                              .devices = f->be.devices, .towers = c->towers,
                              .batch = (c->batch + (size_t)f->K - 1) / (size_t)f->K, .optim = c->optim,
                              .host_threads = tt_run_host_threads(f->nd, c->host_threads), .reps = f->po->reps,
                              .bucket_bytes = c->bucket_kib << 10, .n_slow = c->n_slow, .data_on = c->data_on,
                              .precision = c->precision, .push_fp32 = c->push_fp32};
    memcpy(f->pc.slow, c->slow, sizeof f->pc.slow);
    return probe_json_open(f->po, f->K, &f->json_out, &f->pf, err);
}

static tt_status probe_measure(void *ctx, tt_error *err)
{
    probe_flow *f = (probe_flow *)ctx;
    f->measured = 1;
    return tt_probe_run(&f->pc, &f->p, err);
}

static tt_status probe_link(void *ctx, tt_error *err)
{
    probe_flow *f = (probe_flow *)ctx;
    return tt_probe_net(f->nd, f->model->n_params, f->po->reps, &f->net, err);
}

/* A stop's signal, caught by any rank, is the job's. */
static tt_status probe_stopped(void *ctx, tt_error *err)
{
    probe_flow *f = (probe_flow *)ctx;
    f->measured = 0; /* asked now */
    const int sig = tt_node_stop_signal(f->nd);
    return sig ? tt_fail(err, TT_ERR_STOPPED, "probe: stopped by %s", tt_signal_name(sig)) : TT_OK;
}

/* Rank 0's tables; in one process the designs timed as whole steps and --json's profile. */
static tt_status probe_report(void *ctx, tt_error *err)
{
    probe_flow *f = (probe_flow *)ctx;
    tt_status s = TT_OK;
    if (tt_node_speaks()) {
        printf("BLAS: %s\n", tt_blas_describe());
        tt_probe_print(stdout, &f->p, &f->pc);
        probe_print_predicted(&f->p, &f->be, f->c->towers, f->c->precision);
        probe_print_net(&f->p, &f->net, f->po, f->K, f->model->n_params, f->c->towers, f->c->batch);
        if (f->K == 1) probe_print_sync(&f->p, &f->pc);
    }
    if (f->K == 1) s = probe_designs(&f->pc, &f->p, f->pf, err); /* under mpirun bench measures the job's designs */
    if (!s && f->pf) s = probe_json(&f->json_out, f->pf, &f->pc, &f->p, f->c, f->be.ops->name, err);
    tt_error close_err;
    const tt_status closed = json_close(&f->json_out, f->po->json, s, &close_err);
    if (!s && closed) s = tt_fail(err, closed, "%s", close_err.msg);
    return s;
}

/* Rank 0's table on its stdout. */
static tt_status probe_flush(void *ctx, tt_error *err)
{
    (void)ctx;
    return tt_node_speaks() ? tt_flush_stdout(stdout, err) : TT_OK;
}

static const tt_run_phase g_probe_phases[] = {
    {probe_open, NULL},    {probe_ranks, NULL},  {probe_outputs, NULL}, {probe_measure, NULL},
    {probe_link, NULL},    {probe_stopped, NULL}, {probe_report, NULL}, {probe_flush, NULL},
};

int tt_cmd_probe(int argc, char **argv)
{
    tt_run_config c;
    tt_run_config_defaults(&c);
    probe_opts po = {.reps = 30};
    tt_error err = {{0}};
    int help;
    tt_status s = tt_cli_parse_train(argc, argv, 2, &c, "probe", probe_extra, &po, &help, &err);
    s = tt_node_agree(tt_node_world(), s, &err);
    if (help && !tt_node_speaks()) return 0;
    if (help) {
        probe_help();
        return 0;
    }
    if (s) return measure_fail(s, &err);
    if ((s = probe_same_branch(tt_node_world(), &c, &po, &err))) return measure_fail(s, &err);
    if (po.assume) { /* no backend, no measurement */
        s = probe_what_if(tt_node_world(), &c, po.assume, po.json, argc, argv, &err);
        return s ? measure_fail(s, &err) : 0;
    }
    if (c.graphs) /* every rank alike (agreed above): the refusal is agreed too, so no rank aborts the job */
        return measure_fail(tt_node_agree(tt_node_world(), tt_fail(&err, TT_ERR_ARG, "probe: --graphs on: the probe "
                                          "measures every design this backend runs, graphs included where it has "
                                          "them (--graphs is the what-if's: give --assume)"), &err), &err);
    probe_flow f;
    memset(&f, 0, sizeof f);
    f.c = &c;
    f.po = &po;
    f.nd = tt_node_world();
    f.K = f.nd->size > 1 ? f.nd->size : 1;
    tt_pending pend = {TT_OK, {{0}}};
    s = tt_run_phases(g_probe_phases, sizeof g_probe_phases / sizeof g_probe_phases[0], f.nd, &pend, NULL, &f, &err);
    if (f.measured) tt_node_stop_signal(f.nd); /* a failed measurement: the job's signal is still every rank's */
    tt_error close_err;
    json_close(&f.json_out, po.json, s, &close_err); /* a phase before the report failed: no profile, no file */
    tt_free(f.pf);
    tt_free(f.model);
    return s ? measure_fail(s, &err) : 0;
}
