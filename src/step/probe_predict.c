/* probe_predict.c — what the cost model makes of a probe (tt_probe.h): the predicted split of one step under a
 * placement (tt_probe_predict: the sum of the step's phases, as tt_probe.h's head comment gives it), of one global
 * batch under a --sync mode (tt_probe_predict_sync), and the median of several probes; with --slow-tower's delays
 * drawn as the trainer draws them (probe_expected_max). Measures nothing.
 * Not for: the measurements (probe.c, probe_phases.c), the cross-node step (probe_net.c) or the what-if's figures
 * (cost_model.c). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "probe_parts.h"
#include "step.h"
#include "tt_rng.h"

/* The sum of k draws of U[0, 1): exact for small k, the normal approximation (mean k/2, variance k/12, Box-Muller)
 * beyond, so that weights:1000000 costs what weights:16 does. */
static double uniform_sum(tt_rng *r, size_t k)
{
    if (k <= 32) {
        double s = 0;
        for (size_t i = 0; i < k; i++) s += (double)tt_rng_uniform(r);
        return s;
    }
    const double u1 = ((double)tt_rng_uniform(r) + 0x1p-25), u2 = (double)tt_rng_uniform(r);
    const double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    const double s = 0.5 * (double)k + z * sqrt((double)k / 12.0);
    return s < 0 ? 0 : s > (double)k ? (double)k : s;
}

/* The expected longest, over the towers, of `k` steps' sums of (base + tower t's delay), seconds: the delays drawn as
 * the trainer draws them (MS + U [0, J)), E[max] estimated from 4096 draws of a fixed seed (exact for constant
 * delays). */
double probe_expected_max(const tt_probe_config *c, double base, size_t k)
{
    enum { DRAWS = 4096 };
    double jitter = 0;
    for (size_t s = 0; s < c->n_slow; s++) jitter += c->slow[s].jitter_ms;
    const size_t draws = jitter > 0 ? DRAWS : 1;
    tt_rng r;
    tt_rng_seed(&r, 0x5eed, 1);
    double sum = 0;
    for (size_t d = 0; d < draws; d++) {
        double worst = 0;
        for (size_t t = 0; t < c->towers; t++) {
            double tot = (double)k * base;
            for (size_t s = 0; s < c->n_slow; s++)
                if (c->slow[s].tower == t)
                    tot += 1e-3 * ((double)k * c->slow[s].ms +
                                   (jitter > 0 ? uniform_sum(&r, k) : 0.5 * (double)k) * c->slow[s].jitter_ms);
            worst = tot > worst ? tot : worst;
        }
        sum += worst;
    }
    return sum / (double)draws;
}

static double median_of(const tt_probe *ps, int n, size_t offset)
{
    double v[8];
    for (int i = 0; i < n; i++) v[i] = *(const double *)((const char *)&ps[i] + offset);
    return tt_median(v, (size_t)n);
}

void tt_probe_median(const tt_probe *ps, int n, tt_probe *out)
{
    TT_ASSERT(n >= 1 && n <= 8);
    *out = ps[0];
    const size_t fields[] = {offsetof(tt_probe, pull),       offsetof(tt_probe, data),     offsetof(tt_probe, compute),
                             offsetof(tt_probe, push_grad),  offsetof(tt_probe, push_stats),
                             offsetof(tt_probe, barrier),    offsetof(tt_probe, straggle), offsetof(tt_probe, update),
                             offsetof(tt_probe, apply1),     offsetof(tt_probe, dev_update),
                             offsetof(tt_probe, gemm_step)};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        *(double *)((char *)out + fields[i]) = median_of(ps, n, fields[i]);
    for (int r = 0; r < TT_REDUCE_COUNT; r++)
        out->reduce[r] = median_of(ps, n, offsetof(tt_probe, reduce) + (size_t)r * sizeof(double));
}

void tt_probe_predict(const tt_probe *p, tt_reduce r, tt_step_times *o)
{
    TT_ASSERT((unsigned)r < TT_REDUCE_COUNT);
    memset(o, 0, sizeof *o);
    o->pull = p->pull;
    o->data = p->data;
    o->compute = p->compute;
    const int host_sum = tt_reduce_about(r)->host_sum;
    o->push = p->push_stats + (host_sum ? p->push_grad : 0);
    /* the phases were timed with all N towers at once: towers outnumbering cores are in them already */
    /* --slow-tower: the delayed towers' compute grows by their delay (the ledger's compute is the towers' mean), and
     * every other tower waits at the barrier for the most delayed one */
    o->compute += p->slow_mean;
    const double work = o->pull + o->data + o->compute + o->push;
    o->wait = p->straggle + p->barrier + p->slow_max - p->slow_mean;
    o->towers = work + o->wait;
    o->reduce = p->reduce[r] + (host_sum ? 0 : p->barrier); /* a tower-side reduce ends at barrier R */
    o->update = p->update + p->barrier;
    o->total = o->towers + o->reduce + o->update;
}

/* Tower t's expected delay a step, seconds. */
static double tower_delay(const tt_probe_config *c, size_t t)
{
    for (size_t s = 0; s < c->n_slow; s++)
        if (c->slow[s].tower == t) return 1e-3 * (c->slow[s].ms + 0.5 * c->slow[s].jitter_ms);
    return 0;
}

void tt_probe_predict_sync(const tt_probe *p, const tt_probe_config *c, const tt_sync *sy, tt_step_times *o)
{
    /* the mode's row says what its step is (its bits, never its name: a new mode with bsp's bits is bsp's step) */
    const unsigned caps = sync_modes[sy->kind].caps;
    tt_probe_predict(p, TT_REDUCE_CPU, o);
    if (caps & SYNC_SUMMED) return;
    const double N = (double)c->towers;
    const double apply1 = p->apply1; /* one thread's apply of the whole buffer */
    memset(o, 0, sizeof *o);
    o->data = p->data;
    o->compute = p->compute + p->slow_mean;
    if (caps & SYNC_OWN_WEIGHTS) { /* no pull or gradient push a step; the tower's own update; an average */
        const double step = p->data + p->compute + p->push_stats + p->dev_update;
        const double K = (double)sy->k;
        const double average = p->push_grad + p->reduce[TT_REDUCE_CPU] + p->pull + p->barrier;
        o->push = p->push_stats;
        o->update = p->dev_update;
        o->reduce = average / K;
        o->total = probe_expected_max(c, step, sy->k) / K + o->reduce;
        o->wait = o->total - (o->data + o->compute + o->push + o->update + o->reduce);
        if (o->wait < 0) o->wait = 0;
        return;
    }
    /* ssp, async: a shard's work on its tower, then its apply; each tower at its own rate */
    const double busy = p->pull + p->data + p->compute + p->push_stats + p->push_grad + apply1;
    double rate = 0, slowest = 0;
    for (size_t t = 0; t < c->towers; t++) {
        const double s = busy + tower_delay(c, t);
        rate += 1.0 / s;
        slowest = s > slowest ? s : slowest;
    }
    double step = N / rate;
    const double serial = N * (p->pull + apply1); /* the pulls and applies go one at a time, under the lock */
    step = serial > step ? serial : step;
    if (caps & SYNC_BOUNDED) { /* at the slowest tower's pace, and a share of bsp's wait for the longest draw */
        const double excess = probe_expected_max(c, busy, 1) - slowest; /* E[max] beyond the largest mean */
        const double ssp = slowest + (excess > 0 ? excess : 0) / (double)(sy->k + 1);
        step = ssp > step ? ssp : step;
    }
    o->pull = p->pull;
    o->push = p->push_stats + p->push_grad;
    o->update = apply1;
    o->total = step;
    o->wait = o->total - (o->pull + o->data + o->compute + o->push + o->update);
    if (o->wait < 0) o->wait = 0;
}
