/* tt_callbacks.h — Keras's EarlyStopping and ReduceLROnPlateau as a run's callbacks (--early-stopping SPEC,
 * --reduce-lr-on-plateau SPEC; docs/optimizers.md, "Callbacks"): their settings, read from an option's SPEC and
 * written back as one canonical SPEC, and their decisions at an epoch's end from the epoch's metrics — a state and a
 * pure function (src/run/callbacks.c: no I/O, so a test feeds it a recorded metric sequence). Keras 3's semantics,
 * argument names and defaults (keras/src/callbacks/early_stopping.py, reduce_lr_on_plateau.py, monitor_callback.py):
 * https://keras.io/api/callbacks/early_stopping/, https://keras.io/api/callbacks/reduce_lr_on_plateau/.
 * Not for: what a run does with a decision — its lines and records, the weights it keeps and restores, checkpoints,
 * the ranks' agreement (src/run/train_callbacks.c). */
#ifndef TT_CALLBACKS_H
#define TT_CALLBACKS_H

#include <stddef.h>
#include <stdint.h>

#include "tt_checkpoint.h"
#include "tt_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TT_CB_NONE, TT_CB_EARLY_STOPPING, TT_CB_REDUCE_LR } tt_cb_kind;
/* What a callback can monitor: an epoch's metrics as the log's epoch record names them. */
typedef enum {
    TT_CB_LOSS, TT_CB_ACCURACY, TT_CB_TOP5, TT_CB_VAL_LOSS, TT_CB_VAL_ACCURACY, TT_CB_VAL_TOP5, TT_CB_METRICS
} tt_cb_metric;
typedef enum { TT_CB_AUTO, TT_CB_MIN, TT_CB_MAX } tt_cb_mode;
extern const char *const tt_cb_metric_names[]; /* "loss", ..., "val_top5", NULL: indexed by tt_cb_metric */
extern const char *const tt_cb_mode_names[];   /* "auto", "min", "max", NULL */

/* One callback's settings, Keras's argument names; [Keras's default]. */
typedef struct tt_callback {
    tt_cb_kind kind;      /* TT_CB_NONE: the option was not given */
    tt_cb_metric monitor; /* [val_loss] */
    tt_cb_mode mode;      /* [auto: max for accuracy and top5, min for loss, with or without val_] */
    double min_delta;     /* >= 0: a change smaller than it is no improvement [EarlyStopping 0, ReduceLROnPlateau
                           * 1e-4] */
    size_t patience;      /* epochs without improvement [EarlyStopping 0, ReduceLROnPlateau 10] */
    /* EarlyStopping */
    int has_baseline;     /* baseline given: an epoch that does not beat it does not reset the wait [none] */
    double baseline;
    int restore_best_weights; /* at the end of training, the best epoch's weights [false] */
    size_t start_from_epoch;  /* epochs of warm-up not monitored [0] */
    /* ReduceLROnPlateau */
    double factor;        /* new_lr = lr * factor, in (0, 1) [0.1] */
    size_t cooldown;      /* epochs after a reduction before the wait counts again [0] */
    double min_lr;        /* the rate's lower bound [0] */
} tt_callback;

/* Keras's defaults for kind (TT_CB_NONE: a callback that is off). */
void tt_callback_defaults(tt_callback *cb, tt_cb_kind kind);

/* An option's SPEC: a comma list of key=value with Keras's argument names ("monitor=val_loss,patience=3,
 * restore_best_weights"; a flag alone is true, or =true|false), or one bare word "on" for the defaults. `opt` names
 * the option in the one line a bad key or value gets (TT_ERR_ARG): "--early-stopping: patience: '-1' is not an
 * integer in 0..100000". */
tt_status tt_callback_parse(const char *opt, const char *spec, tt_cb_kind kind, tt_callback *cb, tt_error *err);

enum { TT_CALLBACK_WORDS = 256 }; /* bytes that hold a canonical SPEC (the longest, every number 23 digits: 178) */

/* The settings as one canonical SPEC, every key in Keras's order with its value ("monitor=val_loss,mode=auto,
 * min_delta=0,patience=3,baseline=none,restore_best_weights=false,start_from_epoch=0"), read back by
 * tt_callback_parse as the same settings; "off" for TT_CB_NONE. What the log, the checkpoints and --resume carry. */
const char *tt_callback_words(const tt_callback *cb, char *out, size_t len);

/* The direction in force (mode auto: max for accuracy and top5, as Keras reads their metrics' direction). */
int tt_callback_maximizes(const tt_callback *cb);
/* Does it monitor a validation metric (which a run without validation cannot give)? */
int tt_callback_needs_val(const tt_callback *cb);

/* The callbacks' state between epochs (Keras's attributes: best, wait, best_epoch, stopped_epoch, cooldown_counter,
 * and the rate in force) is what a checkpoint keeps, so that a resumed run decides as the unbroken one would: its
 * fields are tt_checkpoint.h's tt_ckpt_callbacks. */
typedef tt_ckpt_callbacks tt_callbacks_state;

/* What an epoch's end decided. */
typedef struct tt_cb_decision {
    int keep_weights; /* restore_best_weights: this epoch's weights are the best so far: keep a copy of them */
    int stop;         /* EarlyStopping: training stops after this epoch */
    int reduced;      /* ReduceLROnPlateau: the rate was reduced from old_lr to st->lr */
    float old_lr;
} tt_cb_decision;

/* Keras's on_train_begin: nothing seen yet, the rate lr in force; es and rl (either TT_CB_NONE) say which
 * callbacks' state it holds. */
void tt_callbacks_begin(tt_callbacks_state *st, const tt_callback *es, const tt_callback *rl, float lr);

/* Keras's on_epoch_end for EarlyStopping es, then ReduceLROnPlateau rl (either TT_CB_NONE: not run), for epoch
 * `epoch` (from 1) with the epoch's metrics (indexed by tt_cb_metric; a monitored one must be there): updates st and
 * says what was decided. */
void tt_callbacks_epoch_end(const tt_callback *es, const tt_callback *rl, tt_callbacks_state *st, uint64_t epoch,
                            const double *metrics, tt_cb_decision *d);

/* Keras's on_train_end: does EarlyStopping put the best epoch's weights back (restore_best_weights and an epoch
 * monitored — Keras 3.15 restores whether it stopped the training or the epochs ran out)? The epoch:
 * st->es_best_epoch. */
int tt_callbacks_restores(const tt_callback *es, const tt_callbacks_state *st);

#ifdef __cplusplus
}
#endif
#endif
