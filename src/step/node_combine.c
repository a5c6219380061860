/* node_combine.c — a step across K ranks (mpirun): the rank's node sum, the cross-node combine (the job's
 * statistics and the reduce-scatter of the node sums, in rank order), then the update of the whole buffer
 * (--node-reduce allreduce) or of this rank's slice (ps). */
#include <math.h>

#include "step.h"

/* The rank's node sum: h_slots[0] (cpu, one tower: its slot), or h_grad (the node-sum pass or a placement's push). */
static const float *node_sum(const tt_trainer *tr)
{
    return tr->place->info.host_sum && tr->cfg.n_towers == 1 ? tr->h_slots[0] : tr->h_grad;
}

/* Serial section after the node sum (K ranks): the cross-node combine. Every rank's statistics (the step's loss and
 * counts are the job's, added in rank order), the reduce-scatter of the node sums (this rank's slice of the global
 * sum, added in rank order), and for allreduce the gather of the whole sum into h_grad. Then the optimizer's step
 * starts. A failed collective halts the run (TT_HALT_NODE) with nothing applied. */
static void after_node_sum(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    tt_node *nd = tr->cfg.node;
    tt_step_result *res = &tr->results[tr->cur_step];
    const size_t P = tr->model->n_params;
    tr->t_combine0 = tt_now();
    double job[4] = {(double)res->n, res->loss_sum, (double)res->top1, (double)res->top5};
    tt_status s = tt_node_sum(nd, job, 4, &tr->node_err); /* the job's statistics, in rank order */
    const int ps = tr->cfg.node_reduce == TT_NODE_PS;
    if (!s) {
        res->n = (size_t)job[0];
        res->loss_sum = job[1];
        res->top1 = (size_t)job[2];
        res->top5 = (size_t)job[3];
        tr->loss_nonfinite = !isfinite(job[1]);
        /* allreduce: this rank's slice of the global sum lands in place in h_grad (the node sum there has been sent
         * by then), and the gather fills in the rest; ps: the slice is all this rank updates */
        float *out = ps ? tr->h_slice : tr->h_grad + tr->node_lo;
        s = tt_node_reduce_scatter(nd, node_sum(tr), tr->h_recv, out, P, &tr->node_err);
    }
    if (!s && !ps) s = tt_node_allgather_slices(nd, tr->h_grad, P, &tr->node_err);
    if (s) {
        tr->node_status = s;
        tr->loss_nonfinite = 1; /* nothing is applied: the update pass only reads */
    }
    tt_optim_begin_step(&tr->opt);
    tr->t_combine1 = tt_now();
}

/* The host's part of a step across K ranks, as a composition of phases: the node sum (the cpu placement's slots
 * summed into h_grad; a placement's reduce or a single tower's slot already is it), the cross-node combine (a serial
 * section: one crew thread talks MPI), then the update — of the whole buffer from the global sum (allreduce) or of
 * this rank's slice (ps; the weights are gathered at barrier B). */
void host_node_step(tt_trainer *tr, int i, int T)
{
    const size_t P = tr->model->n_params;
    if (tr->place->info.host_sum && tr->cfg.n_towers > 1) {
        const host_pass sum = {0, P, 1, tr->h_grad, NULL, 0, 0};
        host_slice(tr, &sum, i, T, NULL, NULL);
    }
    tt_barrier_wait(&tr->bar_reduce, after_node_sum, tr);
    size_t lo, n; /* ps: this rank's slice, from its slice of the sum; allreduce: everything, from the whole sum */
    owned_slice(&tr->cfg, P, &lo, &n);
    const host_pass upd = {lo, lo + n, 0, NULL, tr->cfg.node_reduce == TT_NODE_PS ? tr->h_slice : tr->h_grad, 1, lo};
    host_slice(tr, &upd, i, T, NULL, NULL);
}
