/* bn_exchange.c — --bn-sync on: the batchnorm layers' exchange inside the pass (tt_pass.xchg): a tower's floats
 * to its pinned host slot, a barrier of the N towers, the N slots added in tower order, the sum copied back. */

#include "step.h"

/* --bn-sync on: tower tw's part of an exchange (tt_exchange.sum). Its n floats go to its host slot of this exchange's
 * parity; after every tower's (the barrier) each tower adds the N slots in tower order — the same bits on every
 * tower — and copies the sum back. The parity keeps a fast tower's next exchange off the slots a slow one still
 * reads: to write them again it must pass the next barrier, which the slow one reaches only after reading. */
void tower_exchange(void *arg, tt_dev *dev, float *d_buf, size_t n)
{
    tt_tower *tw = (tt_tower *)arg;
    tt_trainer *tr = tw->tr;
    const size_t N = tr->cfg.n_towers, par = (size_t)(tw->xchg_seq++ & 1) * tr->xchg_max;
    TT_ASSERT(n <= tr->xchg_max);
    if (d_buf) {
        tt_dev_d2h(dev, tw->h_xchg + par, d_buf, n * sizeof(float));
        tt_dev_sync(dev);
    } else {
        memset(tw->h_xchg + par, 0, n * sizeof(float));
    }
    tt_barrier_wait(&tr->bar_xchg, NULL, NULL);
    for (size_t k = 0; k < n; k++) {
        float acc = 0.0f;
        for (size_t t = 0; t < N; t++) acc = tt_add(acc, tr->towers[t].h_xchg[par + k]);
        tw->h_xsum[k] = acc;
    }
    if (d_buf) tt_dev_h2d(dev, d_buf, tw->h_xsum, n * sizeof(float));
}

/* --bn-sync on with several towers: the most floats one exchange carries (a batchnorm layer's 2C, which its saved
 * floats bound), or 0: no exchange. */
size_t xchg_floats(const tt_model *m, const tt_trainer_config *cfg)
{
    return cfg->bn_sync && cfg->n_towers > 1 ? m->n_saved : 0;
}
