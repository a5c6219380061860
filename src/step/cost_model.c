/* cost_model.c — the step's cost model (tt_cost_model.h), `probe --assume`: what-if predictions, the phases of a step
 * computed from assumed figures, fed to the same formula that turns measured phases into a predicted step
 * (tt_probe_predict), for 1..8 GPUs.
 *
 * Letters: N towers (one GPU each), B global batch, R = ceil(B / N) rows of the largest shard, D input features,
 * P parameters, S = 4 P bytes (the weights, or one gradient), F = tt_model_train_flops (per sample), K kernels of
 * one compute phase (tt_assume_kernels), Z optimizer state floats per parameter. Rates in bytes/s, times in s:
 *
 *   copy(bytes, link, n) = copy_us + max(bytes / link, n * bytes / host)   one DMA over a GPU's own PCIe link, n GPUs
 *                                      at once: the links are independent, host memory serves all of them
 *   pull        = copy(S, h2d, N)
 *   data        = N R D / host                          the N tower threads gather their rows (raw bytes) together
 *               + copy(R D, h2d, N) + launch + 5 R D / hbm + copy(4 R, h2d, N)   rows in, u8 -> f32, labels in
 *   compute     = sum over the phase's GEMM calls of body(g) + other + K launch        (tt_assume_compute_cost)
 *               body(g) = a measured profile's time for g's exact shape beyond its launch, where the table has it;
 *                       else 2 M N K / (fp32 * gemm_eff) (the fallback: so with no table, F R / (fp32 * gemm_eff));
 *               other   = the measured time of the phase's other kernels beyond their launches, where the model
 *                       (its parameter count), the rows and the kernel count are the measured ones; else 0 (a tiny
 *                       kernel costs its launch alone)
 *   --graphs on (a->graphs): the tower's step is one graph launch whose kernels are nodes: in data and compute each
 *               launch above becomes graph_node_us, and compute adds the graph's own launch (launch_us), once
 *   push_grad   = copy(S, d2h, N);  push_stats = copy(8 R, d2h, N)   (the loss and rank of every row)
 *   barrier     = barrier_us;  waves = 1;  straggle = 0   (identical GPUs and shards within one row of each other)
 * and each placement's reduce phase (ASSUMED_REDUCE; a placement without a formula is shown as not modelled):
 *   reduce_cpu  = N S / host                                the host reads N slots (the sum is fused with the update)
 *   reduce_device    = (N-1) (copy_us + S / peer) + (N-1) (launch + 3 S / hbm) + copy(S, d2h, 1)
 *                      tower 0 receives every other gradient in turn on its one stream, adds each (read 2, write 1)
 *   reduce_allreduce = copy_us + 2 L / hbm + (N-1) (copy_us + L / peer) + (N-1) (launch + 3 L / hbm) + copy(L, d2h, N)
 *                      L = 4 ceil16(ceil(P / N)) bytes, the trainer's slice; tower 0 (the slowest: it also copies its
 *                      own slice locally) — all towers at once, each on its own links
 *   reduce_nccl = nccl_us + (N > 1 ? S / nccl_busbw : 0) + copy(S, d2h, 1)
 *                      ncclReduce to tower 0: nccl-tests' bus bandwidth for Reduce is algbw = S / t
 *   update      = (3 + 2 Z) 4 P / host                      read w, g and the state, write w and the state
 * Where the optimizer runs (--update; tt_assume_update_step): host is the step above. On the GPUs nothing is pushed
 * but the statistics, the placement's reduce loses its push of the sum (reduce_keep: the terms above without their
 * last copy(.., d2h, ..)), and the host's update becomes the device's:
 *   update_dev  = 3 launch + (3 + 2 Z) 4 P / hbm + copy_us  clear, mark and update kernels; the flags read back
 *   device      (--reduce device, nccl) pull = N > 1 ? copy_us + (N-1) S / peer : 0   the others read tower 0's
 *               copy through its one link, one after another;  reduce = reduce_keep;  update = update_dev
 *   replicated  (--reduce allreduce, nccl) pull = 0;  reduce = allreduce: reduce_keep + (N-1) (copy_us + L / peer)
 *               (the all-gather of the summed slices); nccl: ncclAllReduce, nccl_us + (N > 1 ? 2 (N-1)/N S / busbw
 *               : 0) (nccl-tests: busbw = algbw 2 (N-1)/N);  update = update_dev, every GPU at once
 * --overlap on (a->overlap; --reduce cpu, --update host, no graphs; tt_assume_overlap_step): the trainer's buckets
 * k = 0.. (tt_assume_buckets: their edges, and each one's share of the backward's flops and kernels, counted from
 * the step as built; the GEMMs' time split by flops, the other kernels' by launches), every tower alike, times from
 * the compute's start; a tower has a side stream per direction:
 *   fwd         = the compute phase's forward and loss (its flops and kernels);  bwd_k = bucket k's layers
 *   T_k         = fwd + sum_{j<=k} bwd_j                bucket k's layers done (the tower's stream)
 *   L_k         = max(T_k, L_{k-1}) + copy(S_k, d2h, N) its push landed (the device-to-host side stream)
 *   H_k         = max(L_k, H_{k-1}) + (reduce_cpu + update) S_k / S    the crew sums and updates it
 *   U_k         = max(H_k, U_{k-1}) + copy(S_k, h2d, N) the next step's pull of it (the host-to-device side stream)
 *   step        = data + compute + push_stats + barrier (one: the step's only) + (U_last - T_last): push
 *               (L_last - T_last) + push_stats, reduce and update (H_last - L_last) in their proportions, pull
 *               (U_last - H_last)
 *   hidden      = 1 - (U_last - T_last) / (pull + push_grad + reduce_cpu + update of --overlap off): the share of
 *               the synchronisation (weights in, gradient out, sum, update) that ran under the backward
 * A measured profile (a file from `probe --json`; tt_assume_measured) gives: h2d, d2h = the pinned copies; peer = the
 * copy between two devices, or the device->device copy where one device was measured; copy_us = a 4-byte copy and
 * its wait; launch_us, graph_node_us = the chain of tiny fills, launched and replayed; barrier_us = the crew's
 * barrier; host_gbs = (3 + 2 Z) 4 P / the measured host update (the figure's main use); the GEMM table (each body =
 * the shape's seconds per call - launch_us); gemm_eff = the table's flops per step / (fp32 * its bodies per step), so
 * a shape missing from it is priced at the measured GEMMs' average rate; the other kernels. fp32, hbm and NCCL are
 * not measured: they stay the profile's.
 * docs/whatif.md gives the profiles' figures with their sources.
 * Not for: measurements (probe.c) or the prediction formula itself (tt_probe_predict). */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tt_cost_model.h"
#include "tt_profile.h"

#define ASSUME_MAX_GPUS 8

/* ---- the compute phase ------------------------------------------------------------------------------------------ */

/* --precision bf16, fp16: the compute phase's conversions (tt_model_forward, tt_model_backward): the input (unless it
 * holds token ids) and every layer's output rounded, then the loss gradient and every dx but the first layer's. */
static size_t precision_kernels(const tt_model *m)
{
    size_t n = m->token_vocab ? 0 : 1;
    for (size_t i = 0; i < m->n_logits; i++) n += m->layers[i].in_epilogue ? 0 : 2;
    return n; /* forward: input + L outputs; backward: the loss gradient + L - 1 dx */
}

/* The bytes of one pull (or, push 1, one gradient's push) of a tower: the trainable weights in 16 bits with
 * --precision bf16, fp16 (the push: but --push-precision fp32), the rest in FP32. */
static double step_bytes(const tt_assume *a, const tt_model *m, int push)
{
    return (double)tt_model_param_bytes(m, a->precision && !(push && a->push_fp32));
}

void tt_assume_compute_cost(const tt_assume *a, const tt_model *m, size_t rows, tt_assume_compute *c)
{
    memset(c, 0, sizeof *c);
    tt_gemm_shape g[TT_ASSUME_MAX_GEMMS];
    const size_t n = tt_assume_gemm_list(m, rows, 0, g, TT_ASSUME_MAX_GEMMS, &c->kernels);
    const double peak = a->precision == TT_FMT_BF16 ? a->bf16_tflops : a->precision ? a->fp16_tflops : a->fp32_tflops;
    const double rate = peak * 1e12 * a->gemm_eff;
    const size_t table = a->precision ? 0 : a->n_gemms; /* the measured GEMMs are FP32's */
    c->kernels += a->precision ? precision_kernels(m) : 0;
    for (size_t i = 0; i < n; i++) {
        size_t t = 0;
        while (t < table && !(a->gemms[t].ta == g[i].ta && a->gemms[t].tb == g[i].tb && a->gemms[t].M == g[i].M &&
                                   a->gemms[t].N == g[i].N && a->gemms[t].K == g[i].K))
            t++;
        const double flops = 2.0 * (double)g[i].M * (double)g[i].N * (double)g[i].K;
        const double body = t < table ? a->gemms[t].body_s : flops / rate;
        c->gemm_s += body * (double)g[i].calls;
        c->gemm_calls += g[i].calls;
        c->from_table += t < table ? g[i].calls : 0;
    }
    c->other_measured = a->other_rows == rows && a->other_params == m->n_params &&
                        a->other_count + c->gemm_calls == c->kernels && a->other_rows > 0;
    c->other_s = c->other_measured ? a->other_body_s : 0;
}

/* ---- the phases ---------------------------------------------------------------------------------------------- */

/* One DMA of `bytes` over a GPU's own link at `gbs`, n GPUs copying at once (their DMA shares host memory). */
static double link_copy(const tt_assume *a, double bytes, double gbs, double n)
{
    const double t_link = bytes / (gbs * 1e9), t_host = n * bytes / (a->host_gbs * 1e9);
    return a->copy_us * 1e-6 + (t_link > t_host ? t_link : t_host);
}

static double peer_copy(const tt_assume *a, double bytes) { return a->copy_us * 1e-6 + bytes / (a->peer_gbs * 1e9); }

/* tt_dev_add over `bytes` of floats: read both operands, write one. */
static double device_add(const tt_assume *a, double bytes)
{
    return a->launch_us * 1e-6 + 3 * bytes / (a->hbm_gbs * 1e9);
}

/* ---- each placement's reduce phase (the formulas above), by placement; one left out here is not modelled: the
 * report shows '-' for it and never calls it best ---------------------------------------------------------------- */

typedef struct assumed_step {
    const tt_assume *a;
    const tt_model *m;
    size_t towers;
    double N, S;
} assumed_step;

static double reduce_cpu(const assumed_step *x) { return x->N * x->S / (x->a->host_gbs * 1e9); }

/* The placements' reduce phases without their last push of the sum to the host (reduce_keep), and that push. */
static double keep_device(const assumed_step *x)
{
    return (x->N - 1) * (peer_copy(x->a, x->S) + device_add(x->a, x->S));
}

static double reduce_device(const assumed_step *x) { return keep_device(x) + link_copy(x->a, x->S, x->a->d2h_gbs, 1); }

/* allreduce's slice: the trainer's, ceil(P / N) rounded up to 16 floats, in bytes */
static double slice_bytes(const assumed_step *x)
{
    const size_t P = x->m->n_params, slice = ((P + x->towers - 1) / x->towers + 15) & ~(size_t)15;
    return 4.0 * (double)(slice < P ? slice : P);
}

static double keep_allreduce(const assumed_step *x)
{
    const tt_assume *a = x->a;
    const double L = slice_bytes(x);
    return a->copy_us * 1e-6 + 2 * L / (a->hbm_gbs * 1e9) + (x->N - 1) * (peer_copy(a, L) + device_add(a, L));
}

static double reduce_allreduce(const assumed_step *x)
{
    return keep_allreduce(x) + link_copy(x->a, slice_bytes(x), x->a->d2h_gbs, x->N);
}

static double keep_nccl(const assumed_step *x)
{
    return x->a->nccl_us * 1e-6 + (x->towers > 1 ? x->S / (x->a->nccl_busbw_gbs * 1e9) : 0);
}

static double reduce_nccl(const assumed_step *x) { return keep_nccl(x) + link_copy(x->a, x->S, x->a->d2h_gbs, 1); }

static double (*const ASSUMED_REDUCE[TT_REDUCE_COUNT])(const assumed_step *) = {
    [TT_REDUCE_CPU] = reduce_cpu,
    [TT_REDUCE_DEVICE] = reduce_device,
    [TT_REDUCE_ALLREDUCE] = reduce_allreduce,
    [TT_REDUCE_NCCL] = reduce_nccl,
};

/* ---- where the optimizer runs (--update) ------------------------------------------------------------------- */

/* The reduce phase of r under update u (the head comment's formulas); < 0: not modelled or not runnable. */
static double update_reduce(const assumed_step *x, tt_reduce r, tt_update u)
{
    if (!(tt_update_reduces(u) & (1u << r)) || !ASSUMED_REDUCE[r]) return -1;
    if (u == TT_UPDATE_HOST) return ASSUMED_REDUCE[r](x);
    const tt_assume *a = x->a;
    if (u == TT_UPDATE_DEVICE)
        return r == TT_REDUCE_DEVICE ? keep_device(x) : r == TT_REDUCE_NCCL ? keep_nccl(x) : -1;
    if (r == TT_REDUCE_ALLREDUCE) return keep_allreduce(x) + (x->N - 1) * peer_copy(a, slice_bytes(x));
    if (r == TT_REDUCE_NCCL)
        return a->nccl_us * 1e-6 + (x->towers > 1 ? 2 * (x->N - 1) / x->N * x->S / (a->nccl_busbw_gbs * 1e9) : 0);
    return -1;
}

double tt_assume_overlap_step(const tt_assume *a, const tt_model *m, size_t towers, size_t batch, tt_optim_kind opt,
                              tt_step_times *t)
{
    memset(t, 0, sizeof *t);
    tt_assume ao = *a;
    ao.graphs = 0; /* --overlap on runs uncaptured */
    tt_probe p;
    tt_assume_probe(&ao, m, towers, batch, opt, &p);
    tt_bucket_cost bc;
    tt_assume_buckets(m, p.rows, a->bucket_bytes, &bc);
    tt_assume_compute cc;
    tt_assume_compute_cost(a, m, p.rows, &cc);
    const double N = (double)towers, S = 4.0 * (double)m->n_params, kernel = a->launch_us * 1e-6;
    const double per_flop = bc.flops > 0 ? p.gemm_step / bc.flops : 0;
    const double per_launch = bc.launches > 0 ? cc.other_s / (double)bc.launches : 0; /* the other kernels' bodies */
    double bwd[TT_MAX_BUCKETS], bwd_all = 0;
    for (size_t k = 0; k < bc.nb; k++) {
        bwd[k] = bc.bwd_flops[k] * per_flop + (double)bc.bwd_launches[k] * (kernel + per_launch);
        bwd_all += bwd[k];
    }
    const double sum = reduce_cpu(&(assumed_step){a, m, towers, N, S}), host_work = sum + p.update;
    /* T: the backward so far (the tower's stream); L: the last push landed (the device-to-host side stream); H: the
     * host's last update; U: the last pull ahead (the host-to-device side stream) */
    double T = p.compute - bwd_all, L = 0, H = 0, Hk[TT_MAX_BUCKETS], pushes = 0;
    for (size_t k = 0; k < bc.nb; k++) {
        const double Sk = 4.0 * (double)(bc.edge[k] - bc.edge[k + 1]), c = link_copy(a, Sk, a->d2h_gbs, N);
        T += bwd[k];
        L = (T > L ? T : L) + c;
        pushes += c;
        H = Hk[k] = (L > H ? L : H) + host_work * Sk / S;
    }
    double U = 0;
    for (size_t k = 0; k < bc.nb; k++)
        U = (Hk[k] > U ? Hk[k] : U) + link_copy(a, 4.0 * (double)(bc.edge[k] - bc.edge[k + 1]), a->h2d_gbs, N);
    t->pull = U - H;
    t->data = p.data;
    t->compute = p.compute;
    t->push = L - T + p.push_stats;
    t->push_hidden = pushes - (L - T);
    t->wait = p.straggle + p.barrier;
    t->towers = t->pull + t->data + t->compute + t->push + t->wait;
    t->reduce = (H - L) * sum / host_work;
    t->update = (H - L) - t->reduce; /* the step's one barrier is in wait */
    t->total = t->towers + t->reduce + t->update;
    const double sync_off = p.pull + p.push_grad + sum + p.update;
    return sync_off > 0 ? 1 - (U - T) / sync_off : 0;
}

int tt_assume_update_step(const tt_assume *a, const tt_model *m, size_t towers, size_t batch, tt_optim_kind opt,
                          tt_reduce r, tt_update u, tt_step_times *t)
{
    memset(t, 0, sizeof *t);
    if ((unsigned)r >= TT_REDUCE_COUNT || (unsigned)u >= TT_UPDATE_COUNT) return 0;
    if (a->precision && (r != TT_REDUCE_CPU || u != TT_UPDATE_HOST || a->overlap)) return 0; /* compat.c */
    if (a->overlap) {
        if (r != TT_REDUCE_CPU || u != TT_UPDATE_HOST || a->graphs) return 0;
        tt_assume_overlap_step(a, m, towers, batch, opt, t);
        return 1;
    }
    tt_probe p;
    tt_assume_probe(a, m, towers, batch, opt, &p);
    const assumed_step x = {a, m, towers, (double)towers, step_bytes(a, m, 1)};
    const double reduce = update_reduce(&x, r, u);
    if (reduce < 0) return 0;
    if (u == TT_UPDATE_HOST) {
        tt_probe_predict(&p, r, t);
        return 1;
    }
    const tt_optim_config oc = tt_optim_defaults(opt);
    const double P = (double)m->n_params, launch = a->launch_us * 1e-6;
    t->pull = u == TT_UPDATE_DEVICE && towers > 1 ? a->copy_us * 1e-6 + (x.N - 1) * x.S / (a->peer_gbs * 1e9) : 0;
    t->data = p.data;
    t->compute = p.compute;
    t->push = p.push_stats;
    t->wait = p.straggle + p.barrier;
    t->towers = t->pull + t->data + t->compute + t->push + t->wait;
    t->reduce = reduce + p.barrier;
    t->update = 3 * launch + (3.0 + 2.0 * (double)tt_optim_state_floats(&oc)) * 4 * P / (a->hbm_gbs * 1e9) +
                a->copy_us * 1e-6 + p.barrier;
    t->total = t->towers + t->reduce + t->update;
    return 1;
}

void tt_assume_probe(const tt_assume *a, const tt_model *m, size_t towers, size_t batch, tt_optim_kind opt, tt_probe *p)
{
    TT_ASSERT(towers >= 1);
    memset(p, 0, sizeof *p);
    const double N = (double)towers, P = (double)m->n_params, S = step_bytes(a, m, 1), D = (double)m->input_dim;
    const double host = a->host_gbs * 1e9, hbm = a->hbm_gbs * 1e9, launch = a->launch_us * 1e-6;
    p->rows = (batch + towers - 1) / towers;
    const double R = (double)p->rows;
    p->crew = (int)towers; /* one host thread per tower: the figures count host memory, not host threads */
    p->waves = 1;
    p->h2d_pinned = p->h2d_pageable = a->h2d_gbs;
    p->d2h_pinned = p->d2h_pageable = a->d2h_gbs;
    p->peer = a->peer_gbs;
    p->host_memcpy = p->host_sum = a->host_gbs;
    tt_assume_compute cc;
    tt_assume_compute_cost(a, m, p->rows, &cc);
    p->gemm_step = cc.gemm_s;
    p->gemm_gflops = cc.gemm_s > 0 ? tt_model_train_flops(m) * R / cc.gemm_s / 1e9 : 0;

    /* --precision: the pull widens its 16-bit weights (a kernel), the push narrows and counts (two), each reading
     * and writing 6 bytes a trainable parameter; the host converts the updated weights (6 bytes each) */
    const double T = (double)m->n_trainable, conv = a->precision ? 6 * T / hbm : 0;
    p->pull = link_copy(a, step_bytes(a, m, 0), a->h2d_gbs, N) + (a->precision ? launch + conv : 0);
    /* a kernel of the tower's step: launched, or (--graphs on) a node of the step's one graph launch */
    const double kernel = a->graphs ? a->graph_node_us * 1e-6 : launch;
    p->data = N * R * D / host + link_copy(a, R * D, a->h2d_gbs, N) + kernel + 5 * R * D / hbm +
              link_copy(a, 4 * R, a->h2d_gbs, N);
    p->compute = cc.gemm_s + cc.other_s + (double)cc.kernels * kernel + (a->graphs ? launch : 0);
    p->push_grad = link_copy(a, step_bytes(a, m, 1), a->d2h_gbs, N) + (a->precision ? 2 * launch + conv : 0);
    p->push_stats = link_copy(a, 8 * R, a->d2h_gbs, N);
    p->barrier = a->barrier_us * 1e-6;
    p->straggle = 0;

    const assumed_step x = {a, m, towers, N, S};
    for (int r = 0; r < TT_REDUCE_COUNT; r++) {
        p->can[r] = ASSUMED_REDUCE[r] != NULL && (!a->precision || r == TT_REDUCE_CPU); /* 16 bits: the host sums */
        p->reduce[r] = p->can[r] ? ASSUMED_REDUCE[r](&x) : 0;
    }
    /* the kind's default configuration: `probe` takes --optimizer only (--momentum, --rho, --centered do not apply) */
    const tt_optim_config oc = tt_optim_defaults(opt);
    p->update = (3.0 + 2.0 * (double)tt_optim_state_floats(&oc)) * 4 * P / host + (a->precision ? 6 * T / host : 0);
}

/* ---- the report ---------------------------------------------------------------------------------------------- */

/* "784-256-256-10": the input, then every layer's output width (fused activations folded in). */
static void model_shape(const tt_model *m, char *out, size_t len)
{
    char in[64];
    size_t n = (size_t)snprintf(out, len, "%s", tt_shape_str(&m->input_shape, 0, in, sizeof in));
    for (size_t i = 0; i < m->n_logits && n < len; i++)
        if (m->layers[i].n_params) n += (size_t)snprintf(out + n, len - n, "-%zu", m->layers[i].out);
    if (n >= len && len > 4) strcpy(out + len - 4, "...");
}

static void print_header(FILE *f, const tt_assume *a, const tt_model *m, size_t batch, tt_optim_kind opt)
{
    char shape[80];
    model_shape(m, shape, sizeof shape);
    /* a profile's figures are assumed; h200-measured's were recorded on that GPU; a file's measured by probe --json */
    fprintf(f, "what-if: PREDICTED from %s | profile %s | %s\n",
            a->source[0] ? "measured figures, not a run" : a->n_gemms ? "figures recorded on that GPU, not a run"
                                                                      : "assumed figures, not measured",
            a->name, tt_optim_kind_name(opt));
    if (a->source[0]) {
        fprintf(f, "  measured profile %s gives:", a->source);
        for (size_t k = 0, col = 30 + strlen(a->source); k < tt_assume_n_keys(); k++) {
            if (!(a->measured & (1u << k))) continue;
            if (col + 1 + strlen(tt_assume_key_name(k)) > 110) fprintf(f, "\n   "), col = 3;
            col += (size_t)fprintf(f, " %s", tt_assume_key_name(k));
        }
        fprintf(f, "\n  (the other figures are %s's)\n", a->name);
    }
    fprintf(f, "  model %s: P = %zu parameters, %.2f MB pulled and %.2f MB pushed per GPU per step%s%s\n", shape,
            m->n_params, 1e-6 * step_bytes(a, m, 0), 1e-6 * step_bytes(a, m, 1), a->precision ? ", --precision " : "",
            a->precision == TT_FMT_BF16 ? "bf16" : a->precision ? "fp16" : "");
    fprintf(f, "  links (GB/s, per GPU and direction): h2d %.4g, d2h %.4g, peer %.4g, NCCL busbw %.4g + %.4g us per "
               "collective; copy %.4g us\n",
            a->h2d_gbs, a->d2h_gbs, a->peer_gbs, a->nccl_busbw_gbs, a->nccl_us, a->copy_us);
    if (a->precision)
        fprintf(f, "  GPU: %s tensor cores %.4g TFLOP/s (dense) x gemm_eff %.4g, HBM %.4g GB/s, %zu kernels per compute "
                "phase (one GPU; the conversions' included)", a->precision == TT_FMT_BF16 ? "BF16" : "FP16",
                a->precision == TT_FMT_BF16 ? a->bf16_tflops : a->fp16_tflops, a->gemm_eff, a->hbm_gbs,
                tt_assume_kernels(m, batch) + precision_kernels(m));
    else
        fprintf(f, "  GPU: FP32 %.4g TFLOP/s x gemm_eff %.4g, HBM %.4g GB/s, %zu kernels per compute phase (one GPU)",
                a->fp32_tflops, a->gemm_eff, a->hbm_gbs, tt_assume_kernels(m, batch));
    if (a->graphs)
        fprintf(f, " as graph nodes of %.4g us,\n  --graphs on: one graph launch of %.4g us per step\n",
                a->graph_node_us, a->launch_us);
    else
        fprintf(f, " launched at %.4g us each\n", a->launch_us);
    fprintf(f, "  host: memory %.4g GB/s (every DMA, the sum, the update), barrier %.4g us\n", a->host_gbs,
            a->barrier_us);
    if (a->n_gemms || a->other_rows) {
        tt_assume_compute cc;
        tt_assume_compute_cost(a, m, batch, &cc);
        fprintf(f, "  measured GEMM table: %zu shapes; one GPU (%zu rows): %zu of its %zu GEMM calls priced from it, "
                   "%zu by gemm_eff\n  (the fallback); its other %zu kernels: %s\n", a->n_gemms, batch, cc.from_table,
                cc.gemm_calls, cc.gemm_calls - cc.from_table, cc.kernels - cc.gemm_calls,
                cc.other_measured ? "measured" : "their launches alone (not measured at this shard)");
    }
    if (a->overridden) {
        fprintf(f, "  overridden:");
        for (size_t k = 0, col = 13; k < tt_assume_n_keys(); k++) {
            if (!(a->overridden & (1u << k))) continue;
            if (col + 1 + strlen(tt_assume_key_name(k)) > 110) fprintf(f, "\n             "), col = 13;
            col += (size_t)fprintf(f, " %s", tt_assume_key_name(k));
        }
        fprintf(f, "\n");
    }
}

/* One GPU count's prediction: every placement's step and the best one's split. */
typedef struct assume_row {
    tt_step_times t[TT_REDUCE_COUNT];
    int can[TT_REDUCE_COUNT]; /* modelled: t[r] holds its step */
    tt_reduce best;
    double samples_per_s, launch_part; /* launch_part: the compute phase's kernel launches, s */
} assume_row;

static void predict_row(const tt_assume *a, const tt_model *m, size_t n, size_t global, tt_optim_kind opt,
                        assume_row *row)
{
    tt_probe p;
    tt_assume_probe(a, m, n, global, opt, &p);
    row->best = TT_REDUCE_CPU;
    for (int r = 0; r < TT_REDUCE_COUNT; r++) {
        row->can[r] = p.can[r];
        if (!p.can[r]) continue;
        tt_probe_predict(&p, (tt_reduce)r, &row->t[r]);
        if (row->t[r].total < row->t[row->best].total) row->best = (tt_reduce)r;
    }
    row->samples_per_s = (double)global / row->t[row->best].total;
    row->launch_part = a->graphs ? ((double)tt_assume_kernels(m, p.rows) * a->graph_node_us + a->launch_us) * 1e-6
                                 : (double)tt_assume_kernels(m, p.rows) * a->launch_us * 1e-6;
}

/* Where adding GPUs stops helping, and what dominates the step at 8 GPUs. */
static void print_verdict(FILE *f, const char *mode, const assume_row *rows)
{
    int top = 0;
    for (int i = 1; i < ASSUME_MAX_GPUS; i++)
        if (rows[i].samples_per_s > rows[top].samples_per_s) top = i;
    const assume_row *last = &rows[ASSUME_MAX_GPUS - 1];
    const tt_step_times *t = &last->t[last->best];
    const double transfer = t->pull + t->data + t->push;
    const struct {
        const char *what;
        double s;
    } groups[] = {{"compute", t->compute}, {"pull+data+push", transfer}, {"reduce", t->reduce},
                  {"host update", t->update}, {"barrier wait", t->wait}};
    size_t g = 0;
    for (size_t i = 1; i < sizeof groups / sizeof groups[0]; i++)
        if (groups[i].s > groups[g].s) g = i;
    const double speed = rows[top].samples_per_s / rows[0].samples_per_s;
    if (top == 0)
        fprintf(f, "%s: adding GPUs never helps: 1 GPU is fastest", mode);
    else if (top < ASSUME_MAX_GPUS - 1)
        fprintf(f, "%s: adding GPUs helps up to %d (%.2fx), then slows the step", mode, top + 1, speed);
    else
        fprintf(f, "%s: still faster at %d GPUs (%.2fx)", mode, ASSUME_MAX_GPUS, speed);
    const double launches = last->launch_part < t->compute ? last->launch_part : t->compute;
    fprintf(f, ".\n  at %d GPUs (%s %.3f ms) largest: %s %.3f ms = %.0f%%", ASSUME_MAX_GPUS,
            tt_reduce_name(last->best), 1e3 * t->total, groups[g].what, 1e3 * groups[g].s,
            100.0 * groups[g].s / t->total);
    if (g == 0) fprintf(f, ", of it launches %.3f ms\n", 1e3 * launches);
    else fprintf(f, "; compute %.3f ms, of it launches %.3f\n", 1e3 * t->compute, 1e3 * launches);
}

/* --update: for each GPU count the best step with the optimizer on the host, on GPU 0 and on every GPU (the
 * placement that gives it in parentheses), and which of them is fastest. */
/* Per GPU count, each --update with its best (--reduce, --graphs): the design to choose. */
static void print_updates(FILE *f, const tt_assume *a, const tt_model *m, size_t batch, tt_optim_kind opt, int weak)
{
    fprintf(f, "where the optimizer runs (--update; each with its best --reduce, --graphs on (+g) or --overlap on "
               "(+o)), step ms:\nGPUs |");
    for (int u = 0; u < TT_UPDATE_COUNT; u++) fprintf(f, " %23s", tt_update_name((tt_update)u));
    fprintf(f, " | fastest\n");
    for (size_t n = 1; n <= ASSUME_MAX_GPUS; n++) {
        const size_t global = weak ? batch * n : batch;
        int best_u = -1, best_ug = 0;
        double best = 0;
        fprintf(f, "%4zu |", n);
        for (int u = 0; u < TT_UPDATE_COUNT; u++) {
            int best_r = -1, best_g = 0;
            double t_u = 0;
            for (int v = 0; v < 3; v++) { /* graphs off, on; overlap on (uncaptured) */
                tt_assume ag = *a;
                ag.graphs = v == 1;
                ag.overlap = v == 2;
                for (int r = 0; r < TT_REDUCE_COUNT; r++) {
                    tt_step_times t;
                    if (!tt_assume_update_step(&ag, m, n, global, opt, (tt_reduce)r, (tt_update)u, &t)) continue;
                    if (best_r < 0 || t.total < t_u) best_r = r, best_g = v, t_u = t.total;
                }
            }
            if (best_r < 0) {
                fprintf(f, " %23s", "-");
                continue;
            }
            char tag[16];
            snprintf(tag, sizeof tag, "%s%s", tt_reduce_name((tt_reduce)best_r),
                     best_g == 1 ? "+g" : best_g == 2 ? "+o" : "");
            fprintf(f, " %9.3f (%-11s)", 1e3 * t_u, tag);
            if (best_u < 0 || t_u < best) best_u = u, best_ug = best_g, best = t_u;
        }
        fprintf(f, " | %s%s, %.0f samples/s\n", tt_update_name((tt_update)best_u),
                best_ug == 1 ? " + graphs" : best_ug == 2 ? " + overlap" : "", (double)global / best);
    }
}

/* --overlap on against off (--reduce cpu, --update host): the step, and how much of the synchronisation it hides. */
static void print_overlap(FILE *f, const tt_assume *a, const tt_model *m, size_t batch, tt_optim_kind opt, int weak)
{
    if (a->precision) { /* compat.c: its buckets travel in FP32 */
        fprintf(f, "--overlap on: not with --precision bf16 or fp16 (its buckets are pushed and pulled in FP32)\n");
        return;
    }
    size_t edge[TT_MAX_BUCKETS + 1];
    const size_t nb = tt_trainer_bucket_edges(m, a->bucket_bytes, edge);
    fprintf(f, "--overlap on (--reduce cpu --update host, %zu bucket%s of about %zu KiB): step ms, and the share of the\n"
               "synchronisation (pull, push, host sum and update) it hides behind the backward:\n"
               "GPUs |  off ms   on ms | hidden | exposed sync ms\n", nb, nb == 1 ? "" : "s",
            (a->bucket_bytes ? a->bucket_bytes : TT_BUCKET_BYTES) >> 10);
    for (size_t n = 1; n <= ASSUME_MAX_GPUS; n++) {
        const size_t global = weak ? batch * n : batch;
        tt_assume ao = *a;
        ao.graphs = 0;
        tt_step_times off, on;
        tt_assume_update_step(&ao, m, n, global, opt, TT_REDUCE_CPU, TT_UPDATE_HOST, &off);
        const double hidden = tt_assume_overlap_step(&ao, m, n, global, opt, &on);
        fprintf(f, "%4zu | %7.3f %7.3f | %5.0f%% | %7.3f\n", n, 1e3 * off.total, 1e3 * on.total,
                hidden > 0 ? 100 * hidden : 0.0, /* one bucket: nothing hides (no "-0%" from the rounding) */
                1e3 * (on.pull + on.push + on.reduce + on.update));
    }
}

static void print_mode(FILE *f, const tt_assume *a, const tt_model *m, size_t batch, tt_optim_kind opt, int weak)
{
    assume_row rows[ASSUME_MAX_GPUS];
    if (weak)
        fprintf(f, "\nweak scaling: %zu samples per GPU (global batch %zu x GPUs); step times in ms\n", batch, batch);
    else
        fprintf(f, "\nstrong scaling: global batch %zu split over the GPUs (shards of ceil(%zu/N) rows); "
                   "step times in ms\n", batch, batch);
    /* a column per placement, as wide as its name (at least a %6.3f), then the best step's split */
    int width[TT_REDUCE_COUNT], cols = 0;
    for (int r = 0; r < TT_REDUCE_COUNT; r++) {
        const int len = (int)strlen(tt_reduce_name((tt_reduce)r)) - 1;
        width[r] = len > 6 ? len : 6;
        cols += width[r] + 2;
    }
    fprintf(f, "%-*s   split of the best step\n", 11 + cols + 2, "                step of each placement (* best)");
    fprintf(f, "GPUs rows |");
    for (int r = 0; r < TT_REDUCE_COUNT; r++) fprintf(f, " %*s", width[r] + 1, tt_reduce_name((tt_reduce)r));
    fprintf(f, " |   pull   data compute   push   wait reduce update | samples/s speed\n");
    for (int i = 0; i < ASSUME_MAX_GPUS; i++) {
        const size_t n = (size_t)i + 1, global = weak ? batch * n : batch;
        assume_row *row = &rows[i];
        predict_row(a, m, n, global, opt, row);
        const tt_step_times *b = &row->t[row->best];
        fprintf(f, "%4zu %4zu |", n, (global + n - 1) / n);
        for (int r = 0; r < TT_REDUCE_COUNT; r++)
            if (row->can[r])
                fprintf(f, " %*.3f%c", width[r], 1e3 * row->t[r].total, r == (int)row->best ? '*' : ' ');
            else
                fprintf(f, " %*s ", width[r], "-");
        fprintf(f, " | %6.3f %6.3f %7.3f %6.3f %6.3f %6.3f %6.3f | %9.0f %4.2fx\n", 1e3 * b->pull, 1e3 * b->data,
                1e3 * b->compute, 1e3 * b->push, 1e3 * b->wait, 1e3 * b->reduce, 1e3 * b->update, row->samples_per_s,
                row->samples_per_s / rows[0].samples_per_s);
    }
    print_verdict(f, weak ? "weak" : "strong", rows);
    if (a->n_gemms) { /* where the GEMM table priced the step, and where the fallback did */
        fprintf(f, "GEMM calls, measured table/fallback:");
        for (size_t n = 1; n <= ASSUME_MAX_GPUS; n++) {
            tt_assume_compute cc;
            const size_t global = weak ? batch * n : batch;
            tt_assume_compute_cost(a, m, (global + n - 1) / n, &cc);
            fprintf(f, " %zu: %zu/%zu", n, cc.from_table, cc.gemm_calls - cc.from_table);
        }
        fprintf(f, "\n");
    }
    print_updates(f, a, m, batch, opt, weak);
    print_overlap(f, a, m, batch, opt, weak);
}

tt_status tt_assume_report(FILE *f, const tt_assume *a, const tt_model *m, size_t batch, tt_optim_kind opt,
                           tt_error *err)
{
    if (batch == 0) return tt_fail(err, TT_ERR_ARG, "what-if: the batch must be at least 1");
    print_header(f, a, m, batch, opt);
    print_mode(f, a, m, batch, opt, 0);
    print_mode(f, a, m, batch, opt, 1);
    fprintf(f, "(wait = barriers; straggle 0 and one wave: identical GPUs. "
               "Check against a measured run: tools/gpu-check)\n");
    if (fflush(f) != 0 || ferror(f))
        return tt_fail(err, TT_ERR_IO, "what-if report: write failed: %s", strerror(errno ? errno : EIO));
    return TT_OK;
}
