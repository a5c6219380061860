/* tt_checkpoint.h — a training run's state in one safetensors file (docs/checkpoints.md).
 *
 * The file: an 8-byte little-endian header length, a JSON header, then raw little-endian float32 tensors
 * (https://huggingface.co/docs/safetensors: dtype "F32", shape, data_offsets relative to the end of the header).
 * Tensors: the master weights under the model's layout-table names ("conv2d/kernel", "dense/bias", ...) in Keras's
 * layouts, then the optimizer's vectors as "optimizer/<slot>/<tensor name>" with the same shapes (tt_optim_slots:
 * "momentum", "velocity", "average_gradient"), then with --early-stopping restore_best_weights the best epoch's
 * weights as "early_stopping/best_weights/<tensor name>". The header's "__metadata__" (string to string, as the format
 * requires) holds where the run is, what trained it, and a CRC-32 of the whole file (its own 8 digits read as '0's),
 * verified before any other value is read. Format version 2; version 1 (a CRC of the tensors only) is refused.
 *
 * A checkpoint does not depend on the tower count: the master weights live on the host and are what is saved; the
 * tower count and backend are written for information only.
 * Not for: deciding when to save or what to resume (train.c). */
#ifndef TT_CHECKPOINT_H
#define TT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "tt_common.h"
#include "tt_model.h"
#include "tt_optim.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { TT_CKPT_MAX_SLOTS = 3, TT_CKPT_MAX_ITEMS = 64 };

struct json_object;

/* --early-stopping, --reduce-lr-on-plateau: the callbacks' state between epochs (tt_callbacks.h reads it as
 * tt_callbacks_state; epochs from 1, 0: none). Metadata keys, optional on reading (absent: the callback was off), each
 * callback's written together: EarlyStopping's "es_wait", "es_best" (absent: no best yet; "nan" a NaN metric),
 * "es_best_epoch", "es_stopped_epoch", "es_best_weights" (true: the tensors "early_stopping/best_weights/<tensor>",
 * the best epoch's weights, follow the optimizer's); ReduceLROnPlateau's "plateau_wait", "plateau_best",
 * "plateau_cooldown", "plateau_lr" (the rate in force; the optimizer's "lr" stays the run's configured rate). */
typedef struct tt_ckpt_callbacks {
    int early, plateau;   /* which callbacks' state this is (their keys are there) */
    int es_has_best;      /* EarlyStopping: a best value (Keras's best is not None) */
    double es_best;
    uint64_t es_wait, es_best_epoch, es_stopped_epoch; /* stopped: the epoch it stopped the training after */
    int es_kept;          /* restore_best_weights: the best epoch's weights are kept (best_params) */
    int rl_has_best;      /* ReduceLROnPlateau */
    double rl_best;
    uint64_t rl_wait, rl_cooldown;
    float lr;             /* the rate in force */
} tt_ckpt_callbacks;

typedef struct tt_checkpoint {
    /* where the run is: epoch `epoch` (1-based) has `step` of its `steps_per_epoch` steps done (step ==
     * steps_per_epoch: the epoch is finished); `global_step` steps applied since the start; `optim_steps` the
     * optimizer's step count t (= global_step, except under --sync ssp or async: one per gradient applied alone;
     * metadata key "optim_steps", optional on reading: absent, it is global_step) */
    uint64_t epoch, step, steps_per_epoch, global_step, optim_steps;
    uint64_t seed;      /* the run's --seed: with epoch it gives the sample order and the dropout masks */
    size_t batch;       /* the global batch (a resume must use the same) */
    /* the optimizer: its configuration and scalars (its vectors are tensors) */
    tt_optim_config optim;
    double u_product;   /* Nadam's running product of the momentum schedule */
    /* --save-best: the monitored metric's best value so far (NaN: none yet) */
    double best;
    /* --precision bf16, fp16: the loss scaler (tt_scaler_state; metadata keys "loss_scale", "loss_scale_good",
     * "loss_scale_skipped", written when loss_scale is not 0, optional on reading: absent, 0, 0, 0). A skipped step
     * does not count in optim_steps: optim_steps + loss_scale_skipped >= global_step. */
    double loss_scale;
    uint64_t scale_good, scale_skipped;
    /* information only: what wrote it */
    size_t towers;
    char backend[16];
    /* the model's description (the model file's text, or "builtin:NAME"), tt_malloc'd, may be NULL */
    char *model_desc;
    /* the training options as a JSON object in text, tt_malloc'd, may be NULL */
    char *options;
    /* the same, parsed (by the reader only; NULL otherwise): read them with tt_checkpoint_option */
    struct json_object *opts;
    /* tensors: n_params floats each, in the layout table's order; tt_malloc'd by tt_checkpoint_read (for
     * tt_checkpoint_write: any buffers, only read). slot_names / slots: tt_optim_slot_names(&optim)'s, in its order */
    size_t n_params;
    float *params;
    int n_slots;
    char slot_names[TT_CKPT_MAX_SLOTS][24];
    float *slots[TT_CKPT_MAX_SLOTS];
    /* the callbacks' state; with cb.es_kept, best_params: the best epoch's weights, n_params floats (tt_malloc'd by
     * the reader; for the writer, any buffer) */
    tt_ckpt_callbacks cb;
    float *best_params;
} tt_checkpoint;

/* Writes ck for model m to path, safely: a temporary file in the same directory, written, fsync'd, renamed over path,
 * then the directory fsync'd — a crash at any moment leaves either the old file or the new one, never a torn one.
 * Every failed write, fsync or rename is an error naming the file (TT_ERR_IO; the temporary is removed). ck must
 * describe a file the reader takes back — n_params == m->n_params, the slots tt_optim_slot_names gives for ck->optim,
 * model_desc and options (if not NULL) UTF-8 — else TT_ERR_ARG before anything is written. */
tt_status tt_checkpoint_write(const char *path, const tt_model *m, const tt_checkpoint *ck, tt_error *err);

/* Reads and checks path against model m. Opens regular files only; every size and offset is checked against the
 * file (nothing is allocated beyond what the file holds); dtype F32 only; the checksum must match; every tensor of m
 * and of the optimizer's slots must be there with m's shape, and no other tensor (else one line naming the first
 * tensor that differs). m NULL: the header, metadata and checksum only (params and slots stay NULL) — to learn the
 * model (model_desc) before building it. On error ck is left empty. */
tt_status tt_checkpoint_read(const char *path, const tt_model *m, tt_checkpoint *ck, tt_error *err);

/* The file's bytes, read as tt_checkpoint_read reads them (regular files only, the memory checked first), into *buf
 * (tt_malloc'd, caller frees): for a caller that parses them twice — the metadata to build the model, then against it
 * (eval, predict). */
tt_status tt_checkpoint_read_bytes(const char *path, uint8_t **buf, size_t *len, tt_error *err);

/* The same from a buffer (the fuzz target's entry). `what` names the source in messages. */
tt_status tt_checkpoint_parse(const uint8_t *buf, size_t len, const char *what, const tt_model *m, tt_checkpoint *ck,
                              tt_error *err);

void tt_checkpoint_free(tt_checkpoint *ck); /* accepts an empty or half-filled one */

/* Rewrites the checksum of a checkpoint's bytes in place (after an edit), as the writer computes it: for tests and the
 * fuzz target, to reach the checks behind the checksum. TT_ERR_FORMAT if the header has no place for it. */
tt_status tt_checkpoint_seal(uint8_t *buf, size_t len, tt_error *err);

/* The options' values, typed. The reader refuses a key the format does not list, and a value not of its key's type;
 * every read of an option goes through tt_checkpoint_option. */
typedef enum { TT_CKPT_UINT, TT_CKPT_NUMBER, TT_CKPT_STRING, TT_CKPT_UINTS, TT_CKPT_STRINGS } tt_ckpt_type;
typedef struct tt_ckpt_value {
    int found;                  /* 0: the key is absent (and was not required) */
    uint64_t u;                 /* UINT: 0 .. 2^63 - 2 */
    double d;                   /* NUMBER: finite */
    const char *s;              /* STRING: without NUL bytes (ck's memory: valid while ck is) */
    size_t n;                   /* UINTS, STRINGS: elements (at most TT_CKPT_MAX_ITEMS) */
    uint64_t us[TT_CKPT_MAX_ITEMS];
    const char *ss[TT_CKPT_MAX_ITEMS];
} tt_ckpt_value;

/* Option `key` of ck (read by tt_checkpoint_read) as `type` into *v. Absent: TT_OK with v->found 0, or (required) an
 * error naming the key; of another type (JSON null included): an error naming the key, what it is and what it must
 * be — "ck.safetensors: options: key 'train_crc32' is null, not a string". `what` starts the message. */
tt_status tt_checkpoint_option(const tt_checkpoint *ck, const char *what, const char *key, tt_ckpt_type type,
                               int required, tt_ckpt_value *v, tt_error *err);

/* Every weight (and with_slots: optimizer value) of ck (read against m) finite, and every batchnorm moving variance
 * not negative? Else TT_ERR_FORMAT naming the first tensor, its flat index and the count (*bad, may be NULL):
 * --resume refuses such a file; eval and predict warn with the line and go on (their outputs show what the weights
 * do). */
tt_status tt_checkpoint_check_finite(const tt_checkpoint *ck, const tt_model *m, const char *what, int with_slots,
                                     size_t *bad, tt_error *err);

/* A layer as the options' "layers" list has it: its kind and every key of its kind with its value, as a model file
 * spells them ("dense units=256 use_bias=true", "dropout rate=0.5", "relu"); a fused activation is its own layer. */
void tt_checkpoint_layer_desc(const tt_layer *l, char *out, size_t len);

/* m's layers as that list (a JSON array of strings; NULL: out of memory): train writes it into the options. */
struct json_object *tt_checkpoint_layers_json(const tt_model *m);

/* The checkpoint's model is m: the same input shape and layers, keys and values (its options' "input" and "layers";
 * required keys), and for two built-in models the same name (builtin: m's built-in name, or NULL). Else TT_ERR_FORMAT
 * naming the input shapes or the first layer that differs, with both descriptions. */
tt_status tt_checkpoint_same_model(const tt_checkpoint *ck, const char *what, const tt_model *m, const char *builtin,
                                   tt_error *err);

/* zlib's CRC-32 of n bytes continued from crc (start from 0), in pieces zlib's uInt length can take: the checksum of
 * a checkpoint's data, and train's fingerprint of its training set. */
uint32_t tt_crc32(uint32_t crc, const void *p, size_t n);

#ifdef __cplusplus
}
#endif

#endif
