/* tt_train.h — a whole training run as the CLI performs it: data, model, towers, epochs, validation, test,
 * the Keras-style console output and the JSON-lines log; the options table every command line is read by, and the
 * walk of a job's phases with the ranks' agreement at each. `towertrain train` and `towertrain bench` call this.
 * Not for: the step itself (tt_trainer.h). */
#ifndef TT_TRAIN_H
#define TT_TRAIN_H

#include <stdio.h>

#include "tt_callbacks.h"
#include "tt_checkpoint.h"
#include "tt_data.h"
#include "tt_model.h"
#include "tt_optim.h"
#include "tt_trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TT_LR_NONE, TT_LR_LINEAR } tt_lr_scaling;
typedef enum { TT_PROGRESS_AUTO, TT_PROGRESS_BAR, TT_PROGRESS_LINES, TT_PROGRESS_QUIET, TT_PROGRESS_TOWERS } tt_progress;
typedef enum { TT_SAVE_BEST_NONE, TT_SAVE_BEST_VAL_LOSS, TT_SAVE_BEST_VAL_ACCURACY } tt_save_best;
/* Their names as the flags, the log, checkpoints and messages write them: indexed by the value, NULL after the last
 * (the command line's choice rows read these lists). */
extern const char *const tt_lr_scaling_names[];
extern const char *const tt_progress_names[];
extern const char *const tt_save_best_names[];
extern const char *const tt_precision_names[];      /* indexed by TT_FMT_*: fp32, bf16, fp16 */
extern const char *const tt_push_precision_names[]; /* same, fp32 */

/* "dynamic:65536", "1024", "none": a loss scale as the flag writes it. */
const char *tt_loss_scale_words(const tt_loss_scale *ls, char *out, size_t len);
/* "width=0.1,height=0.1,flip", "none": --augment's settings as the flag writes them (the preset cifar10 too). */
const char *tt_augment_words(const tt_augment *a, char *out, size_t len);
/* --augment's preset cifar10: the seed's cifar10_cnn, ImageDataGenerator(width_shift_range=0.1,
 * height_shift_range=0.1, horizontal_flip=True). */
extern const tt_augment tt_augment_cifar10;

typedef struct tt_run_config {
    const char *data;     /* "fashion-mnist", a directory, cifar10:DIR or npy:DIR */
    int data_given;       /* --data was on the command line (not the default): summary and probe then use its shapes */
    const char *model;    /* a built-in model (mlp, cnn, textcnn) or a model file */
    size_t vocab;         /* --vocab: an embedding's vocabulary; 0 = the data's largest token id + 1 */
    size_t classes;       /* --classes: the class count (labels must be below it); 0 = the largest label + 1 */
    const char *device;   /* backend name: auto, cpu, cuda */
    const char *gpus;     /* --gpus LIST, or NULL for every GPU */
    size_t towers, batch, epochs;
    tt_optim_config optim; /* lr here is the base rate */
    int lr_given;          /* --lr was given (else the optimizer's Keras default) */
    tt_lr_scaling lr_scaling;
    tt_lr_schedule lr_schedule; /* --lr-schedule (constant: none); the run adds --lr-scaling's factor and the warm-up */
    size_t warmup_epochs;       /* --warmup-epochs: Goyal's gradual warm-up to the scaled rate (0: none) */
    uint64_t seed;
    size_t val_samples;   /* from the end of the training files */
    size_t train_samples; /* 0 = all that remain after the validation split */
    size_t test_samples;  /* 0 = all */
    const char *log_json; /* NULL = none */
    tt_progress progress;
    int host_threads;     /* 0 = all CPUs */
    tt_reduce reduce;     /* where the gradients are summed */
    tt_update update;     /* where the optimizer runs (host: the master variables on the CPU) */
    int graphs;           /* --graphs on: each tower's step replayed as one CUDA graph */
    int epilogues;        /* --epilogues lt (1): dense layers' GEMM + bias/relu as one cuBLASLt call; kernels (0) */
    int overlap;          /* --overlap on: the push in buckets during backward, summed and updated as they land */
    size_t bucket_kib;    /* --bucket-kib: their size (0: TT_BUCKET_BYTES) */
    int data_on;          /* --data-on device: the training set held on every device, a step's rows gathered there
                           * from the host's shuffled indices (tt_trainer_config.data_on) */
    tt_node_reduce node_reduce; /* K ranks under mpirun: how the node sums are combined (docs/scaleout.md) */
    tt_node *node;        /* the job's ranks (NULL: tt_node_world(); bench passes a sub-job) */
    const char *trace;    /* Chrome trace-event file, or NULL */
    const char *tensorboard;        /* --tensorboard DIR: event files in DIR/train, DIR/validation (NULL: none) */
    tt_slow_tower slow[TT_MAX_SLOW]; /* --slow-tower T:MS[~J],...: stragglers on purpose */
    size_t n_slow;
    tt_sync sync;         /* --sync MODE[:N] and --sync-schedule: when a gradient reaches the master variables */
    int bn_sync;          /* --bn-sync on: batchnorm statistics over the global batch (tt_trainer_config.bn_sync) */
    int precision;        /* --precision: tt_math.h's TT_FMT_* (tt_trainer_config.precision) [fp32] */
    int push_fp32;        /* --push-precision fp32 (1): 16-bit towers push FP32 gradients; same (0) [same] */
    tt_loss_scale loss_scale; /* --loss-scale dynamic[:INIT]|N|none; scale 0: not given — fp16 then takes dynamic
                               * from TT_SCALE_INIT, bf16 none (tt_run_loss_scale) */
    size_t tensorboard_every_steps; /* --tensorboard-every-steps N: the same every N steps (0: per epoch only) */
    tt_augment augment;   /* --augment SPEC: a training step's images shifted and flipped (tt_trainer_config.augment;
                           * all zero: none) */
    /* checkpoints (docs/checkpoints.md) */
    const char *checkpoint_dir; /* --checkpoint-dir: where checkpoints go (NULL: none, and a stop writes none) */
    int save_every_epoch;       /* --save-every-epoch: after every epoch's validation */
    size_t save_every_steps;    /* --save-every-steps N: after every N-th step of the run (0: off) */
    tt_save_best save_best;     /* --save-best: best.safetensors when the metric improves */
    size_t keep;                /* --keep N: the newest N periodic checkpoints are kept [3] */
    const char *resume;         /* --resume FILE|DIR: continue from it (a directory: its newest valid one) */
    int resume_weights_only;    /* --resume-weights-only: take its weights only (fresh optimizer, from epoch 1) */
    /* callbacks (tt_callbacks.h; docs/optimizers.md, "Callbacks"): kind TT_CB_NONE when not given */
    tt_callback early_stopping; /* --early-stopping SPEC: Keras's EarlyStopping */
    tt_callback reduce_lr;      /* --reduce-lr-on-plateau SPEC: Keras's ReduceLROnPlateau */
    /* the options a resumed run must have as the checkpoint's run had them, as the user writes them, one per line
     * ("--sync bsp\n--bn-sync off\n"): the options table's TT_RESUME_SAME rows, written by the command line (which
     * knows what the user gave), kept in every checkpoint's options ("same") and compared by --resume; "" (a caller
     * that does not fill it): nothing compared */
    char resume_same[256];
    /* optional: called before every epoch (bench measures its GEMM floor there, interleaved with training) */
    tt_status (*before_epoch)(void *ctx, size_t epoch, tt_error *err);
    void *before_epoch_ctx;
} tt_run_config;

void tt_run_config_defaults(tt_run_config *c);

/* The loss scale a run uses: the one given, or its precision's default (fp16: dynamic from TT_SCALE_INIT; bf16 and
 * fp32: none). */
tt_loss_scale tt_run_loss_scale(const tt_run_config *c);

/* ---- the options table (src/run/train_opts.c) ----------------------------------------------------------------- */
/* Every option of a run, one row each, in --help's order: how the command line reads it and what it says of it
 * (src/cmd/cli.c walks the rows), where its value goes in tt_run_config, and what the run makes of it — whether the
 * ranks of a job must agree on it, whether the JSON log's start record and the checkpoints' options carry it, and the
 * trainer's configuration field it is copied to. The run's walks (train_ranks.c, train_report.c, train_ckpt.c,
 * tt_run_opts_to_trainer) name no option. The optimizer's hyper-parameters are tt_optim_params' rows instead. */

/* How an option's value is held, and so how the command line reads it, how it reads as words ("--reduce is device
 * here") and how the records carry it. */
typedef enum {
    TT_OPT_STR,     /* const char *: a word or a path (a record says whether it was given) */
    TT_OPT_FILE,    /* const char *: a file or directory to write, not empty */
    TT_OPT_BACKEND, /* const char *: a backend's name (--help lists tt_backend_list) */
    TT_OPT_SIZE,    /* size_t in [lo, hi] */
    TT_OPT_U64,     /* uint64_t in [lo, hi] */
    TT_OPT_INT,     /* int in [lo, hi] */
    TT_OPT_FLAG,    /* int: 1 when given; it takes no value */
    TT_OPT_CHOICE,  /* an enum (int): one of choices[lo..], the value its index */
    TT_OPT_UPDATE,  /* tt_update: a word of tt_update_names (--help: the trainer's update table) */
    TT_OPT_REDUCE,  /* tt_reduce: a placement of the trainer's table */
    TT_OPT_SYNC,    /* tt_sync: MODE[:N] (its round_robin is another row's: --sync-schedule) */
    TT_OPT_SLOW,    /* tt_slow_tower[TT_MAX_SLOW] and the count after it (n_slow): T:MS[~J],... */
    TT_OPT_OPTIM,   /* tt_optim_config: --optimizer, its kind (its parameters are tt_optim_params' rows) */
    TT_OPT_RESUME,  /* const char *: the checkpoint to resume from (and resume_weights_only: which way) */
    TT_OPT_SCALE,   /* tt_loss_scale: dynamic[:INIT], a fixed N, or none */
    TT_OPT_LRSCHED, /* tt_lr_schedule: a Keras schedule (tt_lr_schedule_parse) */
    TT_OPT_AUGMENT, /* tt_augment: none, cifar10 or width=F,height=F,flip (docs/data.md) */
    TT_OPT_CALLBACK, /* tt_callback: a SPEC of key=value (tt_callback_parse; lo: its tt_cb_kind); as a number the
                      * CRC-32 of its canonical SPEC, in the log and the checkpoints that SPEC itself */
    TT_OPT_KINDS
} tt_opt_kind;

/* What --resume makes of an option (train --help's footer and docs/checkpoints.md list them from the table):
 *   FREE  may change: the resumed run continues exactly without it (the towers, placements, graphs, overlap and where
 *         the data lives are bit-identical; logs, traces, checkpoints and the view are the run's own)
 *   SAME  must be the same: its value is in every checkpoint's options ("same") and a resume with another is refused,
 *         naming both (tt_run_config.resume_same); a CHOICE, a SYNC or an AUGMENT row
 *   OWN   must be the same, checked by a rule of its own on resume (the model layer by layer, the data's CRC-32 and
 *         sizes, --batch, --seed, the optimizer and its settings; --epochs counts the total)
 *   SELF  --resume, --resume-weights-only: the resume itself
 * NONE is no answer: every option train takes has one (tt_run_opts_check). */
typedef enum { TT_RESUME_NONE, TT_RESUME_FREE, TT_RESUME_SAME, TT_RESUME_OWN, TT_RESUME_SELF } tt_opt_resume;

/* The records that carry options, each in an order of its own: an option's place there (tt_run_opt.at[record], from 1;
 * 0: not there), among the places of the run's own fields (which the record's writer gives, each with its place). */
typedef enum {
    TT_AT_RANKS, /* what every rank of a job must have as rank 0 has it (train_ranks.c); the first that differs is
                  * named */
    TT_AT_LOG,   /* the JSON log's start record (train_report.c): "key":value, the key the name without "--" and with
                  * '_' for '-' ("--node-reduce" is "node_reduce") */
    TT_AT_CKPT,  /* the checkpoints' options (train_ckpt.c), keyed likewise */
    TT_AT_RECORDS
} tt_opt_record;

/* The commands that take options (tt_run_opt.cmds: bit 1u << TT_CMD_x); the command line refuses one a command does
 * not take in that command's words. TT_CMD_ONLY_TRAIN's bit: train's alone, and a command that runs steps says so
 * ("applies to towertrain train only"). */
enum {
    TT_CMD_TRAIN, TT_CMD_BENCH, TT_CMD_COMPARE, TT_CMD_PROBE, TT_CMD_SUMMARY, TT_CMD_EVAL, TT_CMD_PREDICT, TT_CMD_COUNT,
    TT_CMD_ONLY_TRAIN = TT_CMD_COUNT
};
#define TT_CMD(name) (1u << TT_CMD_##name)
enum {
    TT_CMDS_RUNS = TT_CMD(TRAIN) | TT_CMD(BENCH) | TT_CMD(COMPARE), /* what a run of steps reads */
    TT_CMDS_MEASURE = TT_CMDS_RUNS | TT_CMD(PROBE),                 /* and what probe's synthetic steps read */
    TT_CMDS_USE = TT_CMDS_MEASURE | TT_CMD(EVAL) | TT_CMD(PREDICT), /* and a trained model's use */
    TT_CMDS_MODEL = TT_CMDS_USE | TT_CMD(SUMMARY),                  /* the model itself */
    TT_CMDS_OPTIM = TT_CMDS_RUNS,                                   /* the optimizer's parameters (tt_optim_params) */
    TT_CMDS_CHECKPOINT = TT_CMD(TRAIN) | TT_CMD(ONLY_TRAIN),        /* checkpoints: train's alone */
};

typedef struct tt_run_opt {
    const char *name;           /* "--towers" */
    const char *arg;            /* its value's word in --help ("N"); NULL: a flag, which takes no value */
    tt_opt_kind kind;
    size_t field, field_size;   /* where its value is in tt_run_config, and the field's size (checked: the kind's) */
    size_t lo, hi;              /* SIZE, U64, INT: the range the command line takes; CHOICE: the first word taken */
    const char *const *choices; /* CHOICE, UPDATE: the words, indexed by the value, NULL after the last */
    unsigned cmds;              /* the commands that take it (TT_CMD bits) */
    tt_opt_resume resume;       /* what --resume makes of it (every option train takes says) */
    int at[TT_AT_RECORDS];      /* its place in each record that carries it (0: not there) */
    size_t trainer, trainer_size; /* 1 + the offset of the tt_trainer_config field its value is copied to, and its
                                   * size (0: none; the run derives what the trainer gets from it) */
    const char *help;           /* --help's text after the name, lines joined by '\n'; a "%s" is the command line's to
                                 * fill (a CHOICE's words, the backends, the optimizers) */
} tt_run_opt;

enum { TT_RUN_N_OPTS = 48 };
extern const tt_run_opt tt_run_opts[TT_RUN_N_OPTS];
const tt_run_opt *tt_run_opt_find(const char *name); /* NULL: no option of the table */
const tt_run_opt *tt_run_opt_at(tt_opt_record r, int place); /* the row at that place of the record, or NULL */
/* Its value in c as a number (what the ranks compare): a count or an enum as is, a string given (1) or not (0), --sync
 * as kind << 32 | N, --slow-tower as the CRC-32 of its list, --optimizer its kind, a callback the CRC-32 of its
 * canonical SPEC. */
uint64_t tt_run_opt_value(const tt_run_opt *o, const tt_run_config *c);
/* That number as the user would write it: "device", "ssp:4", "given", "0000abcd" (a list's CRC-32); returns out. */
const char *tt_run_opt_words(const tt_run_opt *o, uint64_t v, char *out, size_t len);
int tt_run_opt_is_number(const tt_run_opt *o); /* a record carries its value as a JSON number (else as its words) */
void tt_run_opt_key(const tt_run_opt *o, char *out, size_t len); /* "--node-reduce" -> "node_reduce" */
/* The rows' values copied into the trainer's configuration (the rows with a trainer field). */
void tt_run_opts_to_trainer(const tt_run_config *c, tt_trainer_config *tc);
/* Aborts on a row that breaks the table's rules (a field of another size than its kind's, an option train takes
 * without a resume answer, two rows at one place of a record, a record's row of a kind it cannot carry): a
 * programming error, caught by every test that parses a command line or runs. */
void tt_run_opts_check(void);

/* Host threads of a rank: `given` (--host-threads) if > 0; else, with several ranks on this machine, its share of
 * the cores (at least 1); else 0 (the trainer's default: every CPU). */
int tt_run_host_threads(const tt_node *nd, int given);

/* The training set's sample order in an epoch: a permutation of 0..n-1 that depends on (seed, epoch) alone — not on
 * the epochs before it — so a run resumed at any epoch takes the same order without replaying the shuffles. */
void tt_epoch_order(uint32_t *idx, size_t n, uint64_t seed, uint64_t epoch);

/* A checkpoint directory (ckpt_dir.c): the path of the periodic checkpoint after `step` steps of epoch `epoch`
 * (names sort as the run progresses); the newest checkpoint there that reads as valid for m (*skipped: newer ones
 * that did not); deleting all but the newest `keep` periodic ones (other files are never touched). */
void tt_ckpt_path(char *buf, size_t len, const char *dir, uint64_t epoch, uint64_t step);
tt_status tt_ckpt_newest(const char *dir, const tt_model *m, tt_checkpoint *ck, char *path, size_t len,
                         size_t *skipped, tt_error *err);
tt_status tt_ckpt_prune(const char *dir, size_t keep, tt_error *err);
/* --checkpoint-dir before training: created if missing (one level), and a writable directory — a run fails now,
 * not after its first epoch. */
tt_status tt_ckpt_dir_ready(const char *dir, tt_error *err);
/* One directory, one run: an flock on DIR/.towertrain.lock (this pid written in it), held while *fd stays open and
 * dropped by the kernel when the process dies; a directory another run holds is refused (TT_ERR_IO, its pid). */
tt_status tt_ckpt_dir_lock(const char *dir, int *fd, tt_error *err);
/* Is another process's run writing to dir now (holding its lock)? Its pid, -1 if its pid is unknown, 0 if none (this
 * process's own lock does not count). --resume DIR reads without a lock; this is for the notice that says so. */
long tt_ckpt_dir_holder(const char *dir);
/* Refuses a directory holding a periodic checkpoint beyond where this run starts (after `step` steps of epoch
 * `epoch`, of `steps_per_epoch`): another run's, which --keep would keep while deleting this run's as it writes them,
 * and which --resume DIR would take. */
tt_status tt_ckpt_none_ahead(const char *dir, uint64_t epoch, uint64_t step, uint64_t steps_per_epoch, tt_error *err);

/* Per-epoch figures, for callers that want them (bench, tests). */
typedef struct tt_epoch_stats {
    size_t epoch, steps, samples; /* steps: those run in this process */
    size_t first_step;            /* steps of the epoch done before them (a resumed run), else 0 */
    double seconds; /* training steps only */
    float lr;       /* the rate of its last step (the schedule's) */
    double step_median; /* median step time (robust to a noisy machine) */
    double loss, accuracy, top5;
    tt_eval_result val;
    tt_step_times split; /* summed over the epoch's steps */
    /* --sync ssp, async: the gradients applied alone and their staleness (sum, largest); weights: the averages and
     * the towers' mean distance from the average before them, summed */
    size_t applied, averages;
    double staleness_sum, divergence_sum;
    uint32_t staleness_max;
    /* --precision bf16, fp16: the loss scale at the epoch's end (its last step's; 1: none), the steps skipped, and of
     * the pushed trainable gradient elements (grad_elems) those zero in 16 bits but not in FP32 (grad_under) */
    double loss_scale;
    size_t skipped;
    uint64_t grad_under, grad_elems;
} tt_epoch_stats;

typedef struct tt_run_result {
    size_t n_epochs;
    tt_epoch_stats epochs[1024]; /* the first 1024 epochs */
    tt_eval_result test;
    uint64_t allocs_after_first_step; /* host + device allocations made by steps 2..end (must be 0) */
    size_t n_params;
    float *final_params; /* tt_malloc'd copy of the master weights at the end (caller frees); may be NULL */
    size_t stopped_epoch;  /* --early-stopping stopped the training after this epoch (0: it did not) */
    size_t restored_epoch; /* restore_best_weights put this epoch's weights back at the end (0: none) */
} tt_run_result;

/* The data sets of a run: --data loaded, the last --val-samples split off, --train-samples / --test-samples
 * applied. The caller frees all three. */
tt_status tt_run_load(const tt_run_config *c, tt_dataset *train, tt_dataset *val, tt_dataset *test, tt_error *err);

/* The model of a run (--model NAME or FILE) for the data: train's sample shape and classes, and for a model that
 * starts with an embedding the vocabulary (--vocab, else the largest token id over the three sets + 1), with every
 * set's token ids checked against it. */
tt_status tt_run_model(const tt_run_config *c, const tt_dataset *train, const tt_dataset *val,
                       const tt_dataset *test, tt_model *m, tt_error *err);

/* The model a command describes without training it (summary, probe): built for the data's sample shape, classes
 * and tokens when --data was given (loaded with c's options, no validation split), else for the model's own
 * default input (tt_model_default_input; --vocab applies). */
tt_status tt_run_describe_model(const tt_run_config *c, tt_model *m, tt_error *err);

/* ---- a job's flow as a table of phases, agreed one by one (src/run/train_ranks.c) ---------------------------- */
/* A flow every rank of a job walks together (a run's, train.c; bench's and probe's, src/cmd/) is a table of phases;
 * at the return of each, the ranks agree on how it went (tt_pending_agree: a failure only one rank knows, recorded
 * where it happened, becomes every rank's), and the flow goes on only where it went well everywhere. So a phase does
 * not return early on a failure of this rank alone: it records it (tt_pending_fail) and takes part in every collective
 * of the phase; only a collective protocol inside a phase (a checkpoint's save, --resume's broadcast) agrees on its
 * own steps. */
typedef struct tt_run_phase {
    tt_status (*run)(void *ctx, tt_error *err);
    /* after the phase's agreement, the index of the phase to run next: NULL is the next row; repeated phases (a run's
     * epochs) go back, a flow that is done early returns n */
    size_t (*next)(void *ctx, size_t at, size_t n);
} tt_run_phase;
/* Walks phases[0..n) from the first with ctx; returns the first failure, agreed by every rank of nd, or TT_OK after
 * the last. broken (NULL: never): after a failed phase, whether no collective can be trusted now (a cross-node
 * collective failed): the failure is then returned without an agreement. */
tt_status tt_run_phases(const tt_run_phase *phases, size_t n, tt_node *nd, tt_pending *pending,
                        int (*broken)(void *ctx), void *ctx, tt_error *err);

/* The callbacks' monitors against the run's data: a val_* monitor needs a validation set (val_n > 0), else one line
 * naming the option (TT_ERR_ARG). The command line asks before loading (val_n: --val-samples), the run again. */
tt_status tt_run_callbacks_check(const tt_run_config *c, size_t val_n, tt_error *err);

/* Runs the whole job, printing to out (NULL = silent). Errors return a status with a one-line message. */
tt_status tt_run(const tt_run_config *c, FILE *out, tt_run_result *res, tt_error *err);

/* A data set already loaded (for tests and bench): trains on train, validates on val, tests on test (either may
 * have n == 0). */
tt_status tt_run_on(const tt_run_config *c, const tt_dataset *train, const tt_dataset *val, const tt_dataset *test,
                    FILE *out, tt_run_result *res, tt_error *err);

#ifdef __cplusplus
}
#endif
#endif
