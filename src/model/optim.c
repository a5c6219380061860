/* optim.c — host optimizers: per-step scalars here, per-element formulas in tt_math.h (shared with a device
 * optimizer, should one be added). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tt_math.h"
#include "tt_optim.h"

/* The kinds' names, in tt_optim_kind's order. */
static const char *const g_kind_names[] = {"sgd", "adam", "nadam", "rmsprop"};
enum { N_KINDS = (int)(sizeof g_kind_names / sizeof g_kind_names[0]) };

int tt_optim_parse_kind(const char *name, tt_optim_kind *kind)
{
    for (int k = 0; k < N_KINDS; k++)
        if (strcmp(name, g_kind_names[k]) == 0) {
            *kind = (tt_optim_kind)k;
            return 0;
        }
    return -1;
}

const char *tt_optim_kind_name(tt_optim_kind kind)
{
    return (int)kind >= 0 && (int)kind < N_KINDS ? g_kind_names[kind] : "?";
}

const char *tt_optim_kind_list(char *out, size_t len, unsigned mask, const char *sep, const char *last)
{
    size_t n = 0;
    if (len) out[0] = '\0';
    for (int k = 0, listed = 0; k < N_KINDS && n < len; k++) {
        if (!(mask & (1u << k))) continue;
        const int more = (mask & ((1u << N_KINDS) - 1) & ~((2u << k) - 1)) != 0; /* a kind after k follows */
        n += (size_t)snprintf(out + n, len - n, "%s%s", !listed++ ? "" : more ? sep : last, g_kind_names[k]);
    }
    return out;
}

#define KIND(k) (1u << (k))
#define ALL_KINDS (KIND(TT_OPT_SGD) | KIND(TT_OPT_ADAM) | KIND(TT_OPT_NADAM) | KIND(TT_OPT_RMSPROP))
#define FIELD(f) offsetof(tt_optim_config, f)
/* In the checkpoints' order; the defaults and semantics are Keras's (tt_optim.h has the links). */
const tt_optim_param tt_optim_params[TT_OPTIM_N_PARAMS] = {
    {"lr", TT_OPTIM_REAL, FIELD(lr), KIND(TT_OPT_SGD) | KIND(TT_OPT_ADAM) | KIND(TT_OPT_NADAM) | KIND(TT_OPT_RMSPROP),
     0.001f, 0, 1e3, 1, 0, NULL, "base learning rate [Keras default: %s]", NULL, 0},
    {"momentum", TT_OPTIM_REAL, FIELD(momentum), KIND(TT_OPT_SGD) | KIND(TT_OPT_RMSPROP), 0.0f, 0, 0.999999, 0, 2,
     NULL, "sgd or rmsprop momentum in [0,1) [0]", NULL, 0},
    {"nesterov", TT_OPTIM_FLAG, FIELD(nesterov), KIND(TT_OPT_SGD), 0, 0, 0, 0, 3, "momentum", "sgd Nesterov momentum",
     NULL, 0},
    {"beta_1", TT_OPTIM_REAL, FIELD(beta1), KIND(TT_OPT_ADAM) | KIND(TT_OPT_NADAM), 0.9f, 0, 0.999999, 0, 4, NULL,
     NULL, NULL, 0},
    {"beta_2", TT_OPTIM_REAL, FIELD(beta2), KIND(TT_OPT_ADAM) | KIND(TT_OPT_NADAM), 0.999f, 0, 0.999999, 0, 5, NULL,
     NULL, NULL, 0},
    {"epsilon", TT_OPTIM_REAL, FIELD(epsilon), KIND(TT_OPT_ADAM) | KIND(TT_OPT_NADAM) | KIND(TT_OPT_RMSPROP), 1e-7f, 0,
     1, 1, 6, NULL, NULL, NULL, 0},
    {"rho", TT_OPTIM_REAL, FIELD(rho), KIND(TT_OPT_RMSPROP), 0.9f, 0, 0.999999, 1, 1, NULL,
     "rmsprop discount of its moving averages, in (0,1) [0.9]", NULL, 0},
    {"centered", TT_OPTIM_FLAG, FIELD(centered), KIND(TT_OPT_RMSPROP), 0, 0, 0, 0, 7, NULL,
     "rmsprop divides by the gradient's estimated variance, not its mean square", NULL, 0},
    /* every kind's, 0 for none (quiet); after the rest in Keras's argument order */
    {"weight_decay", TT_OPTIM_REAL, FIELD(weight_decay), ALL_KINDS, 0.0f, 0, 1, 1, 8, NULL,
     "decoupled weight decay before each update, w -= w x X x lr (Keras's weight_decay;\n"
     "AdamW is adam with 0.004) [none]", "weight-decay", 1},
    {"clipnorm", TT_OPTIM_REAL, FIELD(clipnorm), ALL_KINDS, 0.0f, 0, 1e30, 1, 9, NULL,
     "each variable's summed gradient clipped to L2 norm X (Keras's clipnorm) [none]", NULL, 1},
    {"clipvalue", TT_OPTIM_REAL, FIELD(clipvalue), ALL_KINDS, 0.0f, 0, 1e30, 1, 10, NULL,
     "every element of the summed gradient clipped to [-X, X] (Keras's clipvalue) [none]", NULL, 1},
    {"global_clipnorm", TT_OPTIM_REAL, FIELD(global_clipnorm), ALL_KINDS, 0.0f, 0, 1e30, 1, 11, NULL,
     "the whole summed gradient clipped to L2 norm X (Keras's global_clipnorm) [none]", "global-clipnorm", 1},
};
#undef KIND
#undef ALL_KINDS
#undef FIELD

int tt_optim_param_find(const char *name)
{
    for (int i = 0; i < TT_OPTIM_N_PARAMS; i++)
        if (strcmp(name, tt_optim_params[i].name) == 0) return i;
    return -1;
}

const char *tt_optim_param_flag(const tt_optim_param *p) { return p->flag ? p->flag : p->name; }

int tt_optim_param_find_flag(const char *flag)
{
    for (int i = 0; i < TT_OPTIM_N_PARAMS; i++)
        if (strcmp(flag, tt_optim_param_flag(&tt_optim_params[i])) == 0) return i;
    return -1;
}

int tt_optim_clips_clash(const tt_optim_config *c, const char **a, const char **b)
{
    const struct {
        const char *name;
        float v;
    } clips[3] = {{"clipnorm", c->clipnorm}, {"global-clipnorm", c->global_clipnorm}, {"clipvalue", c->clipvalue}};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (clips[i].v > 0 && clips[j].v > 0) {
                *a = clips[i].name;
                *b = clips[j].name;
                return 1;
            }
    return 0;
}

void *tt_optim_param_field(tt_optim_config *c, const tt_optim_param *p) { return (char *)c + p->offset; }

double tt_sum_squares(const float *g, size_t n)
{
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++) lane[j] += (double)g[k + j] * (double)g[k + j];
    for (; k < n; k++) lane[k % 8] += (double)g[k] * (double)g[k];
    double s = 0;
    for (int j = 0; j < 8; j++) s += lane[j];
    return s;
}

float tt_clipnorm_divisor(const tt_optim_config *c, double sq)
{
    const float norm = sq > 0 ? (float)sqrt(sq) : 0.0f; /* Keras: the norm 0 where the sum is not positive */
    return norm > c->clipnorm ? norm : c->clipnorm;
}

float tt_global_clip_scale(const tt_optim_config *c, double sq)
{
    const float norm = (float)sqrt(sq), inv = 1.0f / norm, inv_c = 1.0f / c->global_clipnorm;
    return c->global_clipnorm * (inv < inv_c ? inv : inv_c) + (norm - norm);
}

tt_optim_config tt_optim_defaults(tt_optim_kind kind)
{
    tt_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    for (int i = 0; i < TT_OPTIM_N_PARAMS; i++) {
        const tt_optim_param *p = &tt_optim_params[i];
        if (p->type == TT_OPTIM_REAL) *(float *)tt_optim_param_field(&c, p) = p->def;
        else *(int *)tt_optim_param_field(&c, p) = p->def != 0;
    }
    if (kind == TT_OPT_SGD) c.lr = 0.01f; /* Keras's SGD alone starts at 0.01 */
    return c;
}

const char *tt_optim_param_defaults(const tt_optim_param *p, char *out, size_t len)
{
    float def[N_KINDS];
    for (int k = 0; k < N_KINDS; k++) {
        tt_optim_config c = tt_optim_defaults((tt_optim_kind)k);
        def[k] = p->type == TT_OPTIM_REAL ? *(float *)tt_optim_param_field(&c, p)
                                          : (float)*(int *)tt_optim_param_field(&c, p);
    }
    size_t n = 0;
    unsigned said = 0;
    out[0] = '\0';
    for (int k = 0; k < N_KINDS && n < len; k++) {
        if (!(p->kinds & (1u << k)) || (said & (1u << k))) continue;
        n += (size_t)snprintf(out + n, len - n, "%s", n ? ", " : "");
        for (int j = k; j < N_KINDS && n < len; j++) /* every kind of this value, by name */
            if ((p->kinds & (1u << j)) && def[j] == def[k]) {
                n += (size_t)snprintf(out + n, len - n, "%s%s", j == k ? "" : "/", g_kind_names[j]);
                said |= 1u << j;
            }
        if (n < len) n += (size_t)snprintf(out + n, len - n, " %g", (double)def[k]);
    }
    return out;
}

/* Which state buffers a configuration uses: m (SGD velocity, Adam/Nadam first moment, RMSprop momentum), v (second
 * moments), a (RMSprop's average gradient). RMSprop keeps its momentum and average-gradient buffers only when it
 * uses them, as Keras's build() does. */
static int has_m_buf(const tt_optim_config *c) { return c->kind != TT_OPT_RMSPROP || c->momentum > 0; }
static int has_v_buf(const tt_optim_config *c) { return c->kind != TT_OPT_SGD; }
static int has_a_buf(const tt_optim_config *c) { return c->kind == TT_OPT_RMSPROP && c->centered; }

size_t tt_optim_state_floats(const tt_optim_config *cfg)
{
    return (size_t)(has_m_buf(cfg) + has_v_buf(cfg) + has_a_buf(cfg));
}

/* The kind's parameters in Keras's argument order (the table's banner places): ", momentum 0.9, nesterov". */
void tt_optim_describe(const tt_optim_config *c, char *out, size_t len)
{
    if (!len) return;
    out[0] = '\0';
    size_t n = 0;
    for (int place = 1; place <= TT_OPTIM_N_PARAMS; place++)
        for (int i = 0; i < TT_OPTIM_N_PARAMS && n < len; i++) {
            const tt_optim_param *p = &tt_optim_params[i];
            if (p->banner != place || !(p->kinds & (1u << c->kind))) continue;
            const void *f = (const char *)c + p->offset;
            if (p->quiet && p->type == TT_OPTIM_REAL && *(const float *)f == 0) continue; /* none */
            if (p->type == TT_OPTIM_REAL)
                n += (size_t)snprintf(out + n, len - n, ", %s %g", p->name, (double)*(const float *)f);
            else if (*(const int *)f) n += (size_t)snprintf(out + n, len - n, ", %s", p->name);
        }
    /* the schedule and the scaling rule's warm-up: the rate of every step */
    const tt_lr_schedule *sc = &c->sched;
    if (sc->kind != TT_SCHED_CONSTANT && n < len) {
        char w[TT_SCHED_WORDS];
        n += (size_t)snprintf(out + n, len - n, ", lr_schedule %s", tt_lr_schedule_words(sc, w, sizeof w));
        if (sc->scale > 1 && n < len) n += (size_t)snprintf(out + n, len - n, " x %g", (double)sc->scale);
    }
    if (sc->ramp_steps && n < len)
        n += (size_t)snprintf(out + n, len - n, ", warm-up %llu steps from lr/%g", (unsigned long long)sc->ramp_steps,
                              (double)(sc->scale > 1 ? sc->scale : 1));
}

tt_status tt_optim_init(tt_optim *o, const tt_optim_config *cfg, size_t n, tt_error *err)
{
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->n = n;
    o->n_train = n;
    o->u_product = 1.0;
    o->lr_now = tt_lr_at(&cfg->sched, cfg->lr, 0); /* the first step's, until tt_optim_begin_step sets it */
    if (has_m_buf(cfg)) o->m = (float *)tt_calloc(n, sizeof(float));
    if (has_v_buf(cfg)) o->v = (float *)tt_calloc(n, sizeof(float));
    if (has_a_buf(cfg)) o->a = (float *)tt_calloc(n, sizeof(float));
    if ((has_m_buf(cfg) && !o->m) || (has_v_buf(cfg) && !o->v) || (has_a_buf(cfg) && !o->a)) {
        tt_optim_free(o);
        return tt_fail(err, TT_ERR_NOMEM, "optimizer: out of memory for %zu parameters of state", n);
    }
    return TT_OK;
}

/* The state vectors in the order tt_optim_slots and checkpoints list them (m, v, a): Keras 3's name and whether a
 * configuration keeps it. */
static const struct {
    const char *name;
    int (*kept)(const tt_optim_config *c);
} g_slots[3] = {{"momentum", has_m_buf}, {"velocity", has_v_buf}, {"average_gradient", has_a_buf}};

int tt_optim_keeps(const tt_optim_config *c, int k) { return k >= 0 && k < 3 && g_slots[k].kept(c); }

_Static_assert(TT_OPT_SGD == 0 && TT_OPT_ADAM == 1 && TT_OPT_NADAM == 2 && TT_OPT_RMSPROP == 3,
               "tt_update_elem's kinds are tt_optim_kind's values");

void tt_optim_update_args(const tt_optim *o, tt_update_args *u)
{
    const tt_optim_config *c = &o->cfg;
    const tt_update_args a = {(int)c->kind, c->nesterov, o->lr_now, c->momentum, c->beta1,       c->beta2,
                              c->epsilon,   c->rho,      o->alpha,  o->cm,       o->cg,          o->cv,
                              o->n_train,   c->weight_decay, c->clipvalue};
    *u = a;
}

int tt_optim_slot_names(const tt_optim_config *cfg, const char *out[3])
{
    int n = 0;
    for (int k = 0; k < 3; k++)
        if (g_slots[k].kept(cfg)) out[n++] = g_slots[k].name;
    return n;
}

int tt_optim_slots(const tt_optim *o, tt_optim_slot out[3])
{
    float *const bufs[3] = {o->m, o->v, o->a}; /* g_slots' order */
    int n = 0;
    for (int k = 0; k < 3; k++)
        if (g_slots[k].kept(&o->cfg)) out[n++] = (tt_optim_slot){g_slots[k].name, bufs[k]};
    return n;
}

void tt_optim_free(tt_optim *o)
{
    tt_free(o->m);
    tt_free(o->v);
    tt_free(o->a);
    o->m = o->v = o->a = NULL;
}

void tt_optim_begin_step(tt_optim *o)
{
    o->lr_now = tt_lr_at(&o->cfg.sched, o->cfg.lr, o->t); /* Keras: the schedule at iterations, before its increment */
    o->t++;
    const double t = (double)o->t, b1 = o->cfg.beta1, b2 = o->cfg.beta2;
    switch (o->cfg.kind) {
    case TT_OPT_SGD:
    case TT_OPT_RMSPROP: break; /* no per-step scalars: Keras's RMSprop has no bias correction */
    case TT_OPT_ADAM: o->alpha = (float)(o->lr_now * sqrt(1.0 - pow(b2, t)) / (1.0 - pow(b1, t))); break;
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

/* tt_math.h's loop, which the CPU backend's device update runs too: one loop, the same bits on both paths. */
void tt_optim_apply(const tt_optim *o, float *restrict w, const float *restrict g, size_t lo, size_t hi)
{
    tt_update_args u;
    tt_optim_update_args(o, &u);
    tt_update_span(&u, w, g, o->m, o->v, o->a, lo, hi);
}
