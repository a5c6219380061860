/* optim.c — host optimizers: per-step scalars here, per-element formulas in tt_math.h (shared with a device
 * optimizer, should one be added). */
#include <math.h>
#include <string.h>

#include "tt_math.h"
#include "tt_optim.h"

int tt_optim_parse_kind(const char *name, tt_optim_kind *kind)
{
    if (strcmp(name, "sgd") == 0) *kind = TT_OPT_SGD;
    else if (strcmp(name, "adam") == 0) *kind = TT_OPT_ADAM;
    else if (strcmp(name, "nadam") == 0) *kind = TT_OPT_NADAM;
    else return -1;
    return 0;
}

const char *tt_optim_kind_name(tt_optim_kind kind)
{
    switch (kind) {
    case TT_OPT_SGD: return "sgd";
    case TT_OPT_ADAM: return "adam";
    case TT_OPT_NADAM: return "nadam";
    }
    return "?";
}

tt_optim_config tt_optim_defaults(tt_optim_kind kind)
{
    tt_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.lr = kind == TT_OPT_SGD ? 0.01f : 0.001f;
    c.beta1 = 0.9f;
    c.beta2 = 0.999f;
    c.epsilon = 1e-7f;
    return c;
}

size_t tt_optim_state_floats(tt_optim_kind kind) { return kind == TT_OPT_SGD ? 1 : 2; }

tt_status tt_optim_init(tt_optim *o, const tt_optim_config *cfg, size_t n, tt_error *err)
{
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->n = n;
    o->u_product = 1.0;
    o->m = (float *)tt_calloc(n, sizeof(float));
    if (cfg->kind != TT_OPT_SGD) o->v = (float *)tt_calloc(n, sizeof(float));
    if (!o->m || (cfg->kind != TT_OPT_SGD && !o->v)) {
        tt_optim_free(o);
        return tt_fail(err, TT_ERR_NOMEM, "optimizer: out of memory for %zu parameters of state", n);
    }
    return TT_OK;
}

void tt_optim_free(tt_optim *o)
{
    tt_free(o->m);
    tt_free(o->v);
    o->m = o->v = NULL;
}

void tt_optim_begin_step(tt_optim *o)
{
    o->t++;
    const double t = (double)o->t, b1 = o->cfg.beta1, b2 = o->cfg.beta2;
    switch (o->cfg.kind) {
    case TT_OPT_SGD: break;
    case TT_OPT_ADAM: o->alpha = (float)(o->cfg.lr * sqrt(1.0 - pow(b2, t)) / (1.0 - pow(b1, t))); break;
    case TT_OPT_NADAM: {
        /* Keras 3 Nadam's momentum schedule (keras/src/optimizers/nadam.py): u_t = beta_1 (1 - 0.5 * 0.96^t).
         * The running product takes u_t before this step's update, as Keras's _backend_update_step does; the
         * next step's u_{t+1} enters only this step's m_hat. (TF <= 2.10 / tf.keras legacy Nadam used
         * 0.96^(0.004 t), a much slower warm-up; see docs/optimizers.md.) */
        double u_t = b1 * (1.0 - 0.5 * pow(0.96, t));
        double u_t1 = b1 * (1.0 - 0.5 * pow(0.96, t + 1.0));
        double prod_t = o->u_product * u_t;
        double prod_t1 = prod_t * u_t1;
        o->u_product = prod_t;
        o->cm = (float)(u_t1 / (1.0 - prod_t1));
        o->cg = (float)((1.0 - u_t) / (1.0 - prod_t));
        o->cv = (float)(1.0 / (1.0 - pow(b2, t)));
        break;
    }
    }
}

void tt_optim_apply(const tt_optim *o, float *restrict w, const float *restrict g, size_t lo, size_t hi)
{
    const tt_optim_config *c = &o->cfg;
    float *restrict m = o->m + lo, *restrict v = o->v ? o->v + lo : NULL;
    const size_t n = hi - lo;
    switch (c->kind) {
    case TT_OPT_SGD:
        if (c->nesterov)
            for (size_t i = 0; i < n; i++) tt_sgd_elem(&w[i], &m[i], g[i], c->lr, c->momentum, 1);
        else
            for (size_t i = 0; i < n; i++) tt_sgd_elem(&w[i], &m[i], g[i], c->lr, c->momentum, 0);
        break;
    case TT_OPT_ADAM:
        for (size_t i = 0; i < n; i++) tt_adam_elem(&w[i], &m[i], &v[i], g[i], o->alpha, c->beta1, c->beta2, c->epsilon);
        break;
    case TT_OPT_NADAM:
        for (size_t i = 0; i < n; i++)
            tt_nadam_elem(&w[i], &m[i], &v[i], g[i], c->lr, c->beta1, c->beta2, c->epsilon, o->cm, o->cg, o->cv);
        break;
    }
}
