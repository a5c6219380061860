/* tt_optim.h — the optimizer that lives on the host next to the master variables.
 *
 * State (momentum / first and second moments / RMSprop's averages) is flat, in the parameter buffer's layout. Each step
 * the trainer calls tt_optim_begin_step once (bias corrections and schedules: scalars), then tt_optim_apply on slices
 * of the buffer from several threads; the per-element formulas and their loop (tt_update_span, which the CPU backend's
 * device update runs too) are in tt_math.h. Semantics and defaults are Keras's:
 *   SGD   lr 0.01, momentum 0, nesterov false   https://keras.io/api/optimizers/sgd/
 *   Adam  lr 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7   https://keras.io/api/optimizers/adam/
 *   Nadam lr 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7   https://keras.io/api/optimizers/Nadam/
 *   RMSprop lr 0.001, rho 0.9, momentum 0, epsilon 1e-7, centered false   https://keras.io/api/optimizers/rmsprop/
 * docs/optimizers.md writes out every formula. */
#ifndef TT_OPTIM_H
#define TT_OPTIM_H

#include "tt_common.h"
#include "tt_math.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TT_OPT_SGD, TT_OPT_ADAM, TT_OPT_NADAM, TT_OPT_RMSPROP } tt_optim_kind;

/* ---- learning-rate schedules (src/model/schedule.c) ------------------------------------------------------------
 * The rate of optimizer step t (t = 0 for the first; Keras's optimizer.iterations: steps skipped by the loss scale
 * do not count), Keras 3's keras.optimizers.schedules with initial_learning_rate = the optimizer's lr:
 *   constant      lr
 *   step          PiecewiseConstantDecay(boundaries, values): values[0] while t <= boundaries[0], values[i] while
 *                 boundaries[i-1] < t <= boundaries[i], values[n] after the last
 *   exponential   ExponentialDecay(lr, decay_steps, decay_rate, staircase): lr * rate^(t / steps), the exponent
 *                 floored when staircase
 *   cosine        CosineDecay(lr, decay_steps, alpha, warmup_target, warmup_steps): with a warm-up, lr + (target - lr)
 *                 * t / warmup_steps while t < warmup_steps, then the decay from target; the decay from its start
 *                 rate r over decay_steps (t clamped there) is r * ((1 - alpha) * 0.5 * (1 + cos(pi t / steps)) + alpha)
 * --lr-scaling linear multiplies every rate the schedule gives by `scale` (the towers of every rank): the linear
 * scaling rule applies to the whole schedule. Then Goyal et al.'s gradual warm-up (--warmup-epochs): while t <
 * warmup_steps, the rate times (1/scale + (1 - 1/scale) * t / warmup_steps), from the unscaled rate to the scaled one. */
typedef enum { TT_SCHED_CONSTANT, TT_SCHED_STEP, TT_SCHED_EXPONENTIAL, TT_SCHED_COSINE, TT_SCHED_KINDS } tt_sched_kind;
/* The most boundaries; room for the longest words of a schedule (16 boundaries of 16 digits, 17 values of 15
 * characters: 560), and for the longest tt_optim_describe (every parameter, the schedule, the warm-up). */
enum { TT_SCHED_MAX_BOUNDS = 16, TT_SCHED_WORDS = 640, TT_OPTIM_WORDS = 1024 };
typedef struct tt_lr_schedule {
    tt_sched_kind kind;
    size_t n_bounds;                          /* step: boundaries, strictly increasing (values: n_bounds + 1) */
    uint64_t bounds[TT_SCHED_MAX_BOUNDS];
    float values[TT_SCHED_MAX_BOUNDS + 1];
    uint64_t decay_steps;                     /* exponential, cosine (>= 1) */
    float decay_rate;                         /* exponential (> 0) */
    int staircase;                            /* exponential */
    float alpha;                              /* cosine: the floor, a fraction of the start rate, in [0, 1] */
    float warmup_target;                      /* cosine: > 0 with warmup_steps > 0 (0: no warm-up, Keras's None) */
    uint64_t warmup_steps;                    /* cosine */
    float scale;                              /* --lr-scaling: the factor on every rate (0 or 1: none) */
    uint64_t ramp_steps;                      /* --warmup-epochs, in optimizer steps (0: none) */
} tt_lr_schedule;
/* Reads "constant", "step:B1,...,Bn:V0,...,Vn", "exponential:STEPS:RATE[:staircase]" or
 * "cosine:STEPS[:ALPHA[:TARGET:WARMUP_STEPS]]" into s (scale and ramp_steps 0); one line naming `what` on a bad one. */
tt_status tt_lr_schedule_parse(const char *what, const char *spec, tt_lr_schedule *s, tt_error *err);
/* Its canonical words, what tt_lr_schedule_parse reads back (without scale and ramp); returns out. */
const char *tt_lr_schedule_words(const tt_lr_schedule *s, char *out, size_t len);
/* The rate of optimizer step t for base rate lr (the optimizer's, already scaled). Computed in double, rounded once. */
float tt_lr_at(const tt_lr_schedule *s, float lr, uint64_t t);

typedef struct tt_optim_config {
    tt_optim_kind kind;
    float lr;       /* the rate in force (after --lr-scaling) */
    float momentum; /* SGD, RMSprop */
    int nesterov;   /* SGD */
    float beta1, beta2; /* Adam, Nadam */
    float epsilon;      /* Adam, Nadam, RMSprop */
    float rho;          /* RMSprop: discount of the moving averages */
    int centered;       /* RMSprop: divide by the gradient's estimated variance, not its second moment */
    /* Keras 3's optimizer arguments for every kind (0: none), applied on the host after the sum, before the update:
     * one of the clips (Keras refuses two) on the summed gradient, then the decoupled weight decay (tt_math.h's
     * tt_decay_clip_elem; clipnorm and global_clipnorm need the whole gradient: tt_clip_scales) */
    float weight_decay, clipnorm, global_clipnorm, clipvalue;
    tt_lr_schedule sched; /* the rate of each step (constant: lr) */
} tt_optim_config;

typedef struct tt_optim {
    tt_optim_config cfg;
    size_t n;
    /* State positions from n_train on are the parameter buffer's non-trainable tail (BatchNorm's moving statistics,
     * tt_model.n_trainable): tt_optim_apply adds their "gradient" (tt_tail_elem) and keeps no state for them.
     * tt_optim_init sets n (no tail); the trainer sets the model's. */
    size_t n_train;
    float *m; /* SGD velocity, Adam/Nadam first moment, or RMSprop momentum (n; NULL for RMSprop with momentum 0) */
    float *v; /* Adam/Nadam second moment, or RMSprop's average of g^2 (n); NULL for SGD */
    float *a; /* RMSprop centered: average of g (n); NULL otherwise */
    uint64_t t;        /* steps applied so far */
    double u_product;  /* Nadam: prod of the momentum schedule so far */
    /* this step's scalars, set by tt_optim_begin_step: its rate (the schedule's at step t - 1), Adam's and Nadam's */
    float lr_now, alpha, cm, cg, cv;
} tt_optim;

/* Whether a configuration keeps state vector k (0 m, 1 v, 2 a: tt_optim's fields, in tt_optim_slots' order). */
int tt_optim_keeps(const tt_optim_config *c, int k);
/* The arguments of tt_update_elem (tt_math.h) for this step: the configuration and the step's scalars
 * (after tt_optim_begin_step). */
void tt_optim_update_args(const tt_optim *o, tt_update_args *u);

/* Keras defaults for a kind; returns -1 for an unknown name. */
int tt_optim_parse_kind(const char *name, tt_optim_kind *kind);
const char *tt_optim_kind_name(tt_optim_kind kind);
/* The names of the kinds in mask (bit 1u << kind; ~0u: all) into out, as "sgd, adam, nadam or rmsprop" with sep ", "
 * and last " or " (for a message or a help line); returns out. */
const char *tt_optim_kind_list(char *out, size_t len, unsigned mask, const char *sep, const char *last);
tt_optim_config tt_optim_defaults(tt_optim_kind kind);

/* The hyper-parameters, one table read by every user: the command line (options, their ranges and --help lines),
 * checkpoints (the metadata keys, written and read in this order) and tt_optim_describe. */
typedef enum { TT_OPTIM_REAL, TT_OPTIM_FLAG } tt_optim_param_type;
typedef struct tt_optim_param {
    const char *name;         /* the checkpoint's metadata key, the banner's word, the option "--<name>" */
    tt_optim_param_type type; /* REAL: a float field, written "%.9g"; FLAG: an int 0/1, written "true"/"false" */
    size_t offset;            /* of its field in tt_optim_config */
    unsigned kinds;           /* the optimizers that read it: bit 1u << kind */
    float def;                /* Keras's default (lr: SGD's 0.01 is set apart in tt_optim_defaults) */
    double lo, hi;            /* REAL: what the command line takes, [lo, hi], or (lo, hi] with lo_open (one it
                               * does not set: what the library takes); a checkpoint's value too (lr: up to the most
                               * towers times hi, --lr-scaling linear) */
    int lo_open;
    int banner;               /* its place in tt_optim_describe (Keras's argument order); 0: not there (lr) */
    const char *needs;        /* FLAG: the REAL parameter it needs greater than 0 (NULL: none) */
    const char *help;         /* the --help text after "--<name> X"; NULL: no command-line option. A "%s" is the
                               * defaults of the optimizers that read it (tt_optim_param_defaults) */
    const char *flag;         /* the option's name without "--" where it is not `name` (Keras's weight_decay is
                               * --weight-decay); NULL: name */
    int quiet;                /* 0 means none: tt_optim_describe leaves it out, and a checkpoint without the key (one
                               * written before it existed) reads as 0 */
} tt_optim_param;
enum { TT_OPTIM_N_PARAMS = 12 };
extern const tt_optim_param tt_optim_params[TT_OPTIM_N_PARAMS];
/* The parameter of that name (no "--"), or -1. */
int tt_optim_param_find(const char *name);
/* The parameter whose option this is (without "--": "weight-decay"), or -1. */
int tt_optim_param_find_flag(const char *flag);
const char *tt_optim_param_flag(const tt_optim_param *p); /* its option's name without "--" */
/* Keras's norm clips (BaseOptimizer._clip_gradients), from sums of squares taken in double (tt_sum_squares):
 *   clipnorm c:         each variable's g <- g * c / d, d = tt_clipnorm_divisor(its sum of squares) = max(norm, c) —
 *                       applied below c too, where the product and the division round as Keras's do
 *   global_clipnorm c:  every g <- g * tt_global_clip_scale(the sum over every variable) = c * min(1/norm, 1/c)
 *                       (NaN for a norm that is not finite, as Keras's) */
double tt_sum_squares(const float *g, size_t n); /* in eight fixed lanes: the same bits every time */
float tt_clipnorm_divisor(const tt_optim_config *c, double sq);
float tt_global_clip_scale(const tt_optim_config *c, double sq);
static inline float tt_clipnorm_elem(float g, float c, float d) { return g * c / d; }

/* The first pair of clips set together (Keras allows one of clipnorm, global_clipnorm and clipvalue), their names in
 * *a and *b; 0: none. */
int tt_optim_clips_clash(const tt_optim_config *c, const char **a, const char **b);
/* The defaults of p for the optimizers that read it, kinds of one value together: "sgd 0.01, adam/nadam/rmsprop
 * 0.001" (from tt_optim_defaults). */
const char *tt_optim_param_defaults(const tt_optim_param *p, char *out, size_t len);
/* Its field in c: a float for REAL, an int for FLAG. */
void *tt_optim_param_field(tt_optim_config *c, const tt_optim_param *p);

/* Floats of state per parameter that tt_optim_init allocates for this configuration: 1 for SGD (velocity), 2 for
 * Adam and Nadam (moments), 1 to 3 for RMSprop (average of g^2; + momentum when momentum > 0; + average of g when
 * centered). The memory budget reads it. */
size_t tt_optim_state_floats(const tt_optim_config *cfg);
/* The configuration's hyper-parameters after the kind and lr, as ", momentum 0.9, nesterov" or ", rho 0.9,
 * momentum 0, epsilon 1e-07, centered" (for a banner); writes at most len bytes, always terminated. */
void tt_optim_describe(const tt_optim_config *cfg, char *out, size_t len);
tt_status tt_optim_init(tt_optim *o, const tt_optim_config *cfg, size_t n, tt_error *err);
/* One of the optimizer's per-parameter vectors (n floats), under Keras 3's name for it. */
typedef struct tt_optim_slot {
    const char *name; /* "momentum" (SGD velocity, Adam/Nadam first moment, RMSprop momentum), "velocity" (second
                       * moment, RMSprop's average of g^2), "average_gradient" (centered RMSprop) */
    float *data;
} tt_optim_slot;
/* The vectors this configuration keeps, in that order; returns how many (tt_optim_state_floats of them). With o->t
 * and o->u_product they are the whole state: restore all of them and the next step is the one that would have come. */
int tt_optim_slots(const tt_optim *o, tt_optim_slot out[3]);
/* The names tt_optim_slots gives for a configuration, in the same order, without an optimizer (a checkpoint reader
 * learns which vectors to expect from the configuration it read); returns how many (tt_optim_state_floats). */
int tt_optim_slot_names(const tt_optim_config *cfg, const char *out[3]);
void tt_optim_free(tt_optim *o);
void tt_optim_begin_step(tt_optim *o);
/* Updates parameters lo..hi-1 of the buffer: w[k] and g[k] (k = 0..hi-lo-1) are parameter lo+k and its gradient
 * (w and g point at the slice; the optimizer's state is indexed by the absolute position). Positions from n_train
 * on get tt_tail_elem, not the optimizer. */
void tt_optim_apply(const tt_optim *o, float *w, const float *g, size_t lo, size_t hi);

#ifdef __cplusplus
}
#endif
#endif
