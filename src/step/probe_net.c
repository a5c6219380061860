/* probe_net.c — the cross-node combine (tt_probe.h, docs/scaleout.md): the link between the ranks measured over a
 * real job (tt_probe_net: ping-pong latency and bandwidth, the combine's own collectives, the host's rank-order sum),
 * its model for K ranks (tt_net_combine), and the predicted step of K ranks (tt_probe_predict_node).
 * Not for: the collectives themselves (tt_node.h) or one rank's step (probe_predict.c). */
#include <string.h>

#include "tt_math.h"
#include "tt_probe.h"

/* GB/s of out += x over n floats (one read of x per element), median of reps. */
static double sum_rate_of(float *out, const float *x, size_t n, size_t reps)
{
    double v[64];
    reps = reps > 64 ? 64 : reps;
    for (size_t r = 0; r < reps; r++) {
        double t0 = tt_now();
        for (size_t k = 0; k < n; k++) out[k] = tt_add(out[k], x[k]);
        v[r] = tt_now() - t0;
    }
    double t = tt_median(v, reps);
    return t > 0 ? (double)n * sizeof(float) / t / 1e9 : 0;
}

tt_status tt_probe_net(tt_node *nd, size_t P, size_t reps, tt_net *net, tt_error *err)
{
    memset(net, 0, sizeof *net);
    const int K = nd->size > 1 ? nd->size : 1;
    net->ranks = K;
    size_t lo, S;
    tt_node_slice(P, K, 0, &lo, &S);
    /* one rank measures only the sum rate, on at most 4 MB: a model too large to train gets its memory line from
     * the trainer's budget, not from here */
    const size_t n_sum = K > 1 ? P : (S < ((size_t)1 << 20) ? S : ((size_t)1 << 20));
    float *sum = (float *)tt_calloc(n_sum ? n_sum : 1, sizeof(float));
    float *recv = (float *)tt_calloc(K > 1 ? (size_t)K * S + 1 : n_sum + 1, sizeof(float));
    float *slice = (float *)tt_calloc(K > 1 ? S + 1 : 1, sizeof(float));
    double *v = (double *)tt_calloc(reps + 1, sizeof(double)), *w = (double *)tt_calloc(reps + 1, sizeof(double));
    tt_status s = sum && recv && slice && v && w ? TT_OK : tt_fail(err, TT_ERR_NOMEM, "probe: out of memory");
    if (!s) net->sum_rate = sum_rate_of(recv, sum, K > 1 ? S : n_sum, reps);
    if (!s && K > 1) {
        double one;
        s = tt_node_pingpong(nd, 1, 8, (int)reps, &one, err);
        net->latency = one;
        if (!s) s = tt_node_pingpong(nd, 1, S * sizeof(float), (int)reps, &one, err);
        if (!s && one > net->latency) net->bandwidth = (double)(S * sizeof(float)) / (one - net->latency) / 1e9;
        /* rank 0's figures for everyone */
        double fig[2] = {net->latency, net->bandwidth};
        if (!s) s = tt_node_bcast(nd, fig, sizeof fig, err);
        net->latency = fig[0];
        net->bandwidth = fig[1];
        /* the combine as the step runs it, rep by rep, lined up by a barrier-like small collective */
        for (size_t r = 0; !s && r <= reps; r++) {
            double st[4] = {1, 2, 3, 4}, all[4 * TT_MAX_RANKS];
            uint32_t flags[2] = {0, 0};
            s = tt_node_or(nd, flags, 2, err);
            double t0 = tt_now();
            if (!s) s = tt_node_allgather(nd, st, all, sizeof st, err);
            if (!s) s = tt_node_or(nd, flags, 2, err);
            double t1 = tt_now();
            if (!s) s = tt_node_reduce_scatter(nd, sum, recv, slice, P, err);
            if (!s) s = tt_node_allgather_slices(nd, sum, P, err);
            double t2 = tt_now();
            if (r > 0) { /* rep 0 warms up */
                v[r - 1] = t2 - t0;
                w[r - 1] = t1 - t0;
            }
        }
        if (!s) {
            net->combine = tt_median(v, reps);
            net->small = tt_median(w, reps);
        }
    }
    tt_free(sum);
    tt_free(recv);
    tt_free(slice);
    tt_free(v);
    tt_free(w);
    return s;
}

double tt_net_combine(const tt_net *net, int K, size_t P)
{
    if (K <= 1) return 0;
    size_t lo, S;
    tt_node_slice(P, K, 0, &lo, &S);
    const double bytes = (double)S * sizeof(float), k1 = (double)(K - 1);
    const double send = net->bandwidth > 0 ? bytes / (net->bandwidth * 1e9) : 0;
    const double add = net->sum_rate > 0 ? bytes / (net->sum_rate * 1e9) : 0;
    int log2k = 0;
    while ((1 << log2k) < K) log2k++;
    return 2 * k1 * (net->latency + send) + k1 * add + 2.0 * log2k * net->latency;
}

void tt_probe_predict_node(const tt_probe *p, const tt_net *net, int K, size_t P, tt_node_reduce m, tt_reduce r,
                           tt_step_times *o)
{
    tt_probe_predict(p, r, o);
    if (K <= 1) return;
    /* the node sum is the reduce phase as on one rank (the cpu placement's share of the fused pass: ~0 for one
     * tower, whose slot is the sum) */
    o->combine = K == net->ranks && net->combine > 0 ? net->combine : tt_net_combine(net, K, P);
    o->update = (m == TT_NODE_PS ? p->update / K : p->update) + p->barrier;
    o->total = o->towers + o->reduce + o->combine + o->update;
}
