/* cli.c — option parsing for the towertrain subcommands (strict: a bad value or an unknown option is one line
 * and exit code 2) and the `train` subcommand. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tt_backend.h"
#include "tt_cli.h"

/* Integers are digits only: no sign, no leading or trailing white space (strtoull would skip leading blanks and
 * accept "-1" as a huge number), no hex. */
tt_status tt_cli_size(const char *opt, const char *v, size_t lo, size_t hi, size_t *out, tt_error *err)
{
    char *end;
    if (!v || !isdigit((unsigned char)v[0]))
        return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' is not an integer in %zu..%zu", opt, v ? v : "", lo, hi);
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x < lo || x > hi)
        return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' is not an integer in %zu..%zu", opt, v, lo, hi);
    *out = (size_t)x;
    return TT_OK;
}

/* A number the model will use as a float32: plain decimal (1e-3, 0.5, .5), finite, in range, and surviving the
 * conversion — a value
 * that becomes 0, a subnormal (which the flush-to-zero mode reads as 0) or Inf as a float32 is refused rather than
 * silently trained with. */
tt_status tt_cli_float(const char *opt, const char *v, double lo, double hi, int lo_open, float *out, tt_error *err)
{
    char *end;
    errno = 0;
    /* like integers: starts with a digit or '.', no sign, no blank, no hex, no "inf"/"nan" words */
    int bad_form = !v || !(isdigit((unsigned char)v[0]) || v[0] == '.') || strpbrk(v, "xXpP") != NULL;
    double x = bad_form ? NAN : strtod(v, &end);
    if (bad_form || errno == ERANGE || *end || !isfinite(x) || x < lo || (lo_open && x == lo) || x > hi)
        return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' is not a number in %s%g, %g]", opt, v ? v : "",
                       lo_open ? "(" : "[", lo, hi);
    float f = (float)x;
    if (x != 0 && (f == 0 || fabsf(f) < FLT_MIN))
        return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' is 0 or subnormal as a float32 (the smallest normal float32 is %g; "
                       "smaller values are flushed to zero)", opt, v, (double)FLT_MIN);
    if (!isfinite(f)) return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' overflows a float32", opt, v);
    *out = f;
    return TT_OK;
}

/* ---- the train options: one table for parsing and --help ------------------------------------------------------- */

/* A parse in progress: the configuration, and what is settled once every option is read. */
typedef struct cli_parse {
    tt_run_config *c;
    const char *optimizer;
    int keep_given;
    int given[TT_OPTIM_N_PARAMS]; /* the optimizer's parameters (tt_optim_params' order): given, and their values */
    float real[TT_OPTIM_N_PARAMS];
} cli_parse;

typedef struct cli_opt cli_opt;
struct cli_opt {
    const char *name; /* "--towers" */
    const char *arg;  /* its value's word in --help ("N"); NULL: a flag, which takes no value */
    tt_status (*set)(const cli_opt *o, cli_parse *p, const char *value, tt_error *err);
    size_t field;     /* set_str's, set_size's: the tt_run_config field */
    size_t lo, hi;    /* set_size's range */
    unsigned cmds;    /* the commands that take it (CMDS_* below); the others refuse it, in their words (g_cmds) */
    const char *help; /* --help's text after the name, lines joined by '\n' (indented to the text's column); a "%s"
                       * is help_fn's to fill */
    void (*help_fn)(FILE *f, const cli_opt *o); /* NULL: help_row */
    const char *const *choices; /* set_choice's words, indexed by the field's enum value, NULL after the last; those
                                 * from index lo on are accepted */
    int resume; /* what --resume makes of it (R_* below): every option train takes says */
};

/* An option on --resume (the options table's column; --help's footer and docs/checkpoints.md list them from it):
 *   R_FREE  may change: the resumed run continues exactly without it (the towers, placements, graphs, overlap and
 *           where the data lives are bit-identical; logs, traces, checkpoints and the view are the run's own)
 *   R_SAME  must be the same: its value is in every checkpoint's options ("same") and a resume with another is
 *           refused, naming both (tt_run_config.resume_same)
 *   R_OWN   must be the same, checked by a rule of its own on resume (the model layer by layer, the data's CRC-32
 *           and sizes, --batch, --seed, the optimizer and its settings; --epochs counts the total)
 * 0 is no answer: an option train takes must have one (tt_cli_parse_train checks the table). */
enum { R_FREE = 1, R_SAME, R_OWN, R_SELF /* --resume, --resume-weights-only: the resume itself */ };

#define CFG(f) offsetof(tt_run_config, f)
#define CFG_AT(p, o, type) ((type *)((char *)(p)->c + (o)->field))

static tt_status set_str(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    (void)err;
    *CFG_AT(p, o, const char *) = v;
    return TT_OK;
}

static tt_status set_file(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    *CFG_AT(p, o, const char *) = v;
    return *v ? TT_OK : tt_fail(err, TT_ERR_ARG, "%s: empty file name", o->name);
}

static tt_status set_data(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    p->c->data_given = 1;
    return set_str(o, p, v, err);
}

static tt_status set_size(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    return tt_cli_size(o->name, v, o->lo, o->hi, CFG_AT(p, o, size_t), err);
}

static tt_status set_keep(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    p->keep_given = 1;
    return set_size(o, p, v, err);
}

static tt_status set_seed(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    size_t seed = 0;
    tt_status s = tt_cli_size(o->name, v, o->lo, o->hi, &seed, err);
    if (!s) p->c->seed = seed;
    return s;
}

static tt_status set_threads(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    size_t n = 0;
    tt_status s = tt_cli_size(o->name, v, o->lo, o->hi, &n, err);
    if (!s) p->c->host_threads = (int)n;
    return s;
}

/* A run of 1..5 decimal digits at *at (advanced past it), or -1. */
static long digits(const char **at)
{
    long v = 0;
    int n = 0;
    for (; isdigit((unsigned char)**at) && n < 6; (*at)++, n++) v = 10 * v + (**at - '0');
    return n >= 1 && n <= 5 ? v : -1;
}

/* --slow-tower T:MS[~J][,T:MS[~J]...]: whole milliseconds, each tower once. */
static tt_status set_slow_tower(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    tt_run_config *c = p->c;
    c->n_slow = 0;
    for (const char *at = v;;) {
        const char *item = at;
        const long t = digits(&at);
        const long ms = *at == ':' ? (at++, digits(&at)) : -1;
        const long j = *at == '~' ? (at++, digits(&at)) : 0;
        if (t < 0 || t > 1023 || ms < 0 || ms > 60000 || j < 0 || j > 60000 || (*at && *at != ','))
            return tt_fail(err, TT_ERR_ARG, "%s: '%.40s' is not TOWER:MS or TOWER:MS~JITTER (whole milliseconds up "
                           "to 60000, towers up to 1023), comma-separated", o->name, item);
        for (size_t k = 0; k < c->n_slow; k++)
            if (c->slow[k].tower == (size_t)t)
                return tt_fail(err, TT_ERR_ARG, "%s: tower %ld is given twice", o->name, t);
        if (c->n_slow == TT_MAX_SLOW)
            return tt_fail(err, TT_ERR_ARG, "%s: more than %d slow towers", o->name, TT_MAX_SLOW);
        size_t k = c->n_slow++; /* kept sorted by tower: one list, however it was written (the ranks compare it) */
        for (; k > 0 && c->slow[k - 1].tower > (size_t)t; k--) c->slow[k] = c->slow[k - 1];
        c->slow[k] = (tt_slow_tower){(size_t)t, (double)ms, (double)j};
        if (!*at++) return TT_OK;
    }
}

/* --sync MODE[:N]: the trainer's table */
static tt_status set_sync(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    return tt_sync_parse(o->name, v, &p->c->sync, err);
}

static tt_status set_optimizer(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    (void)o;
    (void)err;
    p->optimizer = v; /* read once every option is: the optimizer's parameters are checked against it */
    return TT_OK;
}

/* A choice row's accepted words, joined: "a, b or c" (sep ", ", last " or "). */
static const char *choice_list(const cli_opt *o, const char *sep, const char *last, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = o->lo; o->choices[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i == o->lo ? "" : o->choices[i + 1] ? sep : last,
                              o->choices[i]);
    return buf;
}

/* One word of the row's list: the field (an enum) gets its index. */
static tt_status set_choice(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    for (size_t i = o->lo; o->choices[i]; i++)
        if (strcmp(v, o->choices[i]) == 0) {
            const int e = (int)i;
            memcpy(CFG_AT(p, o, int), &e, sizeof e);
            return TT_OK;
        }
    char list[160];
    return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' is not %s", o->name, v,
                   choice_list(o, ", ", " or ", list, sizeof list));
}
_Static_assert(sizeof(tt_lr_scaling) == sizeof(int) && sizeof(tt_progress) == sizeof(int) &&
                   sizeof(tt_save_best) == sizeof(int) && sizeof(tt_node_reduce) == sizeof(int) &&
                   sizeof(tt_update) == sizeof(int) && sizeof(((tt_sync *)0)->round_robin) == sizeof(int),
               "set_choice writes an int");

static tt_status set_reduce(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    (void)o;
    char names[128];
    if (tt_reduce_parse(v, &p->c->reduce))
        return tt_fail(err, TT_ERR_ARG, "--reduce: '%.64s' is not %s", v,
                       tt_reduce_list(names, sizeof names, ", ", " or ", 0));
    return TT_OK;
}

static tt_status set_save_every_epoch(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    if (v) return tt_fail(err, TT_ERR_ARG, "%s: takes no value", o->name);
    p->c->save_every_epoch = 1;
    return TT_OK;
}

/* --resume and --resume-weights-only: one checkpoint, taken one way */
static tt_status set_resume(const cli_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    if (p->c->resume) return tt_fail(err, TT_ERR_ARG, "%s: give --resume or --resume-weights-only, not both", o->name);
    p->c->resume = v;
    p->c->resume_weights_only = o->name[8] == '-';
    return TT_OK;
}

static void help_row(FILE *f, const cli_opt *o);
static void help_fill(FILE *f, const cli_opt *o, const char *fill);
static void help_device(FILE *f, const cli_opt *o) { help_fill(f, o, tt_backend_list()); }
static void help_optimizer(FILE *f, const cli_opt *o);
static void help_placements(FILE *f, const cli_opt *o);
static void help_elsewhere(FILE *f, const cli_opt *o) { (void)f, (void)o; }
static void help_choices(FILE *f, const cli_opt *o);
static void help_updates(FILE *f, const cli_opt *o);
static void help_syncs(FILE *f, const cli_opt *o);

/* The commands that read the train options, and how each refuses one it does not take. */
enum { CMD_TRAIN, CMD_BENCH, CMD_COMPARE, CMD_PROBE, CMD_SUMMARY, CMD_EVAL, CMD_PREDICT, CMD_COUNT };
static const struct {
    const char *name;
    const char *why; /* "CMD: --opt does not apply (why)"; NULL: "(see towertrain CMD --help)" */
    int runs;        /* a command that trains: an option of train alone is refused as such; else an unknown option
                      * is refused as not applying too */
} g_cmds[CMD_COUNT] = {
    {"train", NULL, 1},
    {"bench", "every row is its own run; use --csv, or train for one run's log or trace", 1},
    {"compare", "it runs every placement in turn; use train for one run's log or trace", 1},
    {"probe", "it measures synthetic steps of every placement, with no data set", 1},
    {"summary", "it takes --model, --data and --vocab", 0},
    {"eval", NULL, 0},
    {"predict", NULL, 0},
};
#define ON(cmd) (1u << CMD_##cmd)
#define ON_CMD(c) (1u << (c))
enum {
    CMDS_TRAIN = ON(TRAIN),                                     /* checkpoints */
    CMDS_RUNS = ON(TRAIN) | ON(BENCH) | ON(COMPARE),            /* what a run of steps reads */
    CMDS_MEASURE = CMDS_RUNS | ON(PROBE),                       /* and what probe's synthetic steps read */
    CMDS_USE = CMDS_MEASURE | ON(EVAL) | ON(PREDICT),           /* and a trained model's use */
    CMDS_MODEL = CMDS_USE | ON(SUMMARY),                        /* the model itself */
    CMDS_OPTIM = CMDS_RUNS,                                     /* the optimizer's parameters (tt_optim_params) */
    CMDS_CHECKPOINT = ON(TRAIN) | 1u << CMD_COUNT,              /* train's alone, and said so by a command that runs */
};

/* In --help's order. The optimizer's parameters (--lr, --momentum, ...) are tt_optim_params' rows. */
static const cli_opt g_opts[] = {
    {"--data", "SPEC", set_data, CFG(data), 0, 0, CMDS_MEASURE | ON(SUMMARY) | ON(EVAL),
     "fashion-mnist (Debian's dataset-fashion-mnist), an MNIST-format directory,\n"
     "cifar10:DIR (CIFAR-10 binary) or npy:DIR (x_train.npy, y_train.npy, x_test.npy,\n"
     "y_test.npy); docs/data.md [fashion-mnist]", NULL, NULL, R_OWN},
    {"--model", "NAME|FILE", set_str, CFG(model), 0, 0, CMDS_MODEL,
     "built-in mlp (256-relu-256-relu), cnn (the Keras cifar10_cnn example) or\n"
     "textcnn (embedding + conv1d, the Reuters seed), or a model file\n"
     "(docs/model-file.md) [mlp]", NULL, NULL, R_OWN},
    {"--vocab", "N", set_size, CFG(vocab), 1, TT_MAX_VOCAB, CMDS_MODEL,
     "an embedding's vocabulary (token ids 0..N-1) [the data's largest id + 1]", NULL, NULL, R_OWN},
    {"--classes", "N", set_size, CFG(classes), 1, TT_MAX_CLASSES, CMDS_MEASURE | ON(EVAL),
     "the class count: labels 0..N-1, a larger label is refused; classes may have no\n"
     "samples [the largest label + 1; a notice when that is over 10x the labels seen]", NULL, NULL, R_OWN},
    {"--device", "NAME", set_str, CFG(device), 0, 0, CMDS_USE,
     "backend: %s; auto = cuda when a usable GPU exists, else cpu [auto]", help_device, NULL, R_FREE},
    {"--gpus", "LIST", set_str, CFG(gpus), 0, 0, CMDS_USE,
     "GPUs the towers use, e.g. 0,1; more towers than GPUs share them round-robin,\n"
     "each tower with its own stream [every GPU]", NULL, NULL, R_FREE},
    {"--towers", "N", set_size, CFG(towers), 1, 1024, CMDS_USE, "data-parallel towers, one thread each [1]", NULL,
     NULL, R_FREE},
    {"--batch", "N", set_size, CFG(batch), 1, 1 << 20, CMDS_USE,
     "global batch, split across the towers (sizes differ by at most 1) [256]", NULL, NULL, R_OWN},
    {"--epochs", "N", set_size, CFG(epochs), 1, 100000, CMDS_RUNS, "[10]", NULL, NULL, R_OWN},
    {"--optimizer", "NAME", set_optimizer, 0, 0, 0, CMDS_MEASURE, "%s, Keras semantics and defaults [adam]",
     help_optimizer, NULL, R_OWN},
    {"--lr-scaling", "RULE", set_choice, CFG(lr_scaling), 0, 0, CMDS_RUNS,
     "none: lr as given; linear: lr x towers (Goyal et al. 2017) [none]", help_elsewhere, /* after --lr */
     tt_lr_scaling_names, R_OWN},
    {"--seed", "N", set_seed, 0, 0, SIZE_MAX, CMDS_RUNS,
     "initialisation and shuffling; same seed + towers = bit-identical run [1]", NULL, NULL, R_OWN},
    {"--val-samples", "N", set_size, CFG(val_samples), 0, 100000000, CMDS_RUNS | ON(EVAL),
     "validation = the last N training samples, 0 for none [10000]", NULL, NULL, R_OWN},
    {"--train-samples", "N", set_size, CFG(train_samples), 1, 100000000, CMDS_RUNS,
     "train on the first N remaining training samples only [all]", NULL, NULL, R_OWN},
    {"--test-samples", "N", set_size, CFG(test_samples), 1, 100000000, CMDS_RUNS | ON(EVAL),
     "test on the first N test samples only [all]", NULL, NULL, R_FREE},
    {"--log-json", "FILE", set_file, CFG(log_json), 0, 0, ON(TRAIN) | ON(EVAL),
     "JSON lines: a start object, one per epoch, one for the test set", NULL, NULL, R_FREE},
    {"--progress", "MODE", set_choice, CFG(progress), 0, 0, CMDS_RUNS,
     "%s [auto: a bar on a terminal];\n"
     "towers: a live lane per tower and the host's, on a terminal (docs/tutorial.md)", help_choices,
     tt_progress_names, R_FREE},
    {"--host-threads", "N", set_threads, 0, 1, 256, CMDS_USE,
     "host threads for the gradient sum and the optimizer [CPUs]", NULL, NULL, R_FREE},
    {"--reduce", "PLACE", set_reduce, 0, 0, 0, ON(TRAIN) | ON(BENCH), NULL, help_placements, NULL, R_FREE},
    {"--update", "PLACE", set_choice, CFG(update), 0, 0, ON(TRAIN) | ON(BENCH), NULL, help_updates, tt_update_names, R_FREE},
    {"--graphs", "MODE", set_choice, CFG(graphs), 0, 0, ON(TRAIN) | ON(PROBE),
     "%s: on replays each tower's step as one CUDA graph (--device cuda) [off]", help_choices, tt_graphs_names, R_FREE},
    {"--epilogues", "MODE", set_choice, CFG(epilogues), 0, 0, ON(TRAIN),
     "%s: lt runs a dense layer's GEMM, bias and relu as one cuBLASLt\n"
     "call, and a relu's gradient in the next dense layer's dX GEMM, where cuBLASLt\n"
     "offers an algorithm (--device cuda; not yet validated on a GPU; elsewhere, and\n"
     "without one, sgemm + the fused kernels) [kernels]", help_choices, tt_epilogues_names, R_FREE},
    {"--overlap", "MODE", set_choice, CFG(overlap), 0, 0, ON(TRAIN) | ON(BENCH),
     "%s: on pushes the gradient in buckets during backward; the host sums and\n"
     "updates each bucket while the towers compute the layers below (--reduce cpu,\n"
     "--update host) [off]", help_choices, tt_overlap_names, R_FREE},
    {"--bucket-kib", "N", set_size, CFG(bucket_kib), 8, 1048576, ON(TRAIN) | ON(BENCH) | ON(COMPARE) | ON(PROBE),
     "--overlap on: the gradient's buckets, in KiB of whole layers (probe: its\n"
     "--overlap on designs, measured and predicted) [4096]", NULL, NULL, R_FREE},
    {"--data-on", "PLACE", set_choice, CFG(data_on), 0, 0, CMDS_MEASURE,
     "%s: where a step's rows come from: host gathers them and\n"
     "copies them in; device holds the training set on every device (uploaded once)\n"
     "and gathers them there from the shuffled indices, so a step copies in 4 bytes\n"
     "a row; validation and test take the host's path (docs/architecture.md) [host]", help_choices,
     tt_data_on_names, R_FREE},
    {"--node-reduce", "MODE", set_choice, CFG(node_reduce), 0, 0, CMDS_RUNS,
     "under mpirun -np K: how the ranks combine their node sums (docs/scaleout.md):\n"
     "allreduce (every rank gets the global sum and updates its own copy) or ps (rank\n"
     "r updates slice r and holds 1/K of the optimizer state; the weights are\n"
     "gathered) [allreduce]", NULL, tt_node_reduce_names, R_FREE},
    {"--trace", "FILE", set_file, CFG(trace), 0, 0, ON(TRAIN),
     "Chrome trace-event JSON of every step (open in Perfetto or chrome://tracing)", NULL, NULL, R_FREE},
    {"--slow-tower", "T:MS[~J],...", set_slow_tower, 0, 0, 0, ON(TRAIN) | ON(BENCH) | ON(PROBE),
     "stragglers on purpose: tower T's compute delayed MS milliseconds each step (~J: a\n"
     "delay drawn from [MS, MS+J] each step, from the seed); its barrier shows as the\n"
     "others' wait; probe predicts it (docs/tutorial.md)", NULL, NULL, R_FREE},
    {"--sync", "MODE", set_sync, 0, 0, 0, ON(TRAIN), NULL, help_syncs, NULL, R_SAME},
    {"--sync-schedule", "MODE", set_choice, CFG(sync.round_robin), 0, 0, ON(TRAIN),
     "%s: round-robin makes ssp and async reproducible (the towers take\n"
     "the shards, pull and apply in turn; for tests) [free]", help_choices, tt_sync_schedule_names, R_SAME},
    {"--bn-sync", "MODE", set_choice, CFG(bn_sync), 0, 0, ON(TRAIN),
     "%s: on takes batchnorm statistics over the global batch, the towers\n"
     "exchanging their sums (SyncBatchNorm: N towers compute what 1 tower would;\n"
     "bsp, one rank, no graphs); off over each tower's own rows, as TF's towers and\n"
     "multi_gpu_model did (docs/models.md) [off]", help_choices, tt_bn_sync_names, R_SAME},
    {"--tensorboard", "DIR", set_file, CFG(tensorboard), 0, 0, ON(TRAIN),
     "TensorBoard event files in DIR/train and DIR/validation, as Keras's callback\n"
     "writes them: epoch_loss, epoch_accuracy, epoch_top5, epoch_learning_rate and\n"
     "the step split, per tower too (docs/tensorboard.md)", NULL, NULL, R_FREE},
    {"--tensorboard-every-steps", "N", set_size, CFG(tensorboard_every_steps), 1, 1000000000, ON(TRAIN),
     "--tensorboard: the same every N steps (batch_loss, ...) [per epoch only]", NULL, NULL, R_FREE},
    {"--checkpoint-dir", "DIR", set_str, CFG(checkpoint_dir), 0, 0, CMDS_CHECKPOINT,
     "where checkpoints go (safetensors; docs/checkpoints.md); the end of training and a\n"
     "stop by SIGINT or SIGTERM (at the step boundary) then write one; a directory\n"
     "holding a later run's checkpoints is refused", NULL, NULL, R_FREE},
    {"--save-every-epoch", NULL, set_save_every_epoch, 0, 0, 0, CMDS_CHECKPOINT, "a checkpoint after every epoch",
     NULL, NULL, R_FREE},
    {"--save-every-steps", "N", set_size, CFG(save_every_steps), 1, 1000000000, CMDS_CHECKPOINT,
     "a checkpoint after every N steps of the run", NULL, NULL, R_FREE},
    {"--save-best", "METRIC", set_choice, CFG(save_best), 1, 0, CMDS_CHECKPOINT,
     "%s: best.safetensors whenever it improves", help_choices, tt_save_best_names, R_SAME},
    {"--keep", "N", set_keep, CFG(keep), 1, 100000, CMDS_CHECKPOINT, "periodic checkpoints kept, the newest [3]",
     NULL, NULL, R_FREE},
    {"--resume", "FILE|DIR", set_resume, 0, 0, 0, CMDS_CHECKPOINT,
     "continue a run from a checkpoint (a directory: its newest valid one); give the\n"
     "run's --model, --batch, --seed and optimizer again; --epochs counts the total", NULL, NULL, R_SELF},
    {"--resume-weights-only", "FILE|DIR", set_resume, 0, 0, 0, CMDS_CHECKPOINT,
     "start from a checkpoint's weights only, on purpose: another model with\n"
     "the same tensors, other options; a fresh optimizer, from epoch 1", NULL, NULL, R_SELF},
};
enum { N_OPTS = (int)(sizeof g_opts / sizeof g_opts[0]) };
#undef CFG

static const cli_opt *find_opt(const char *name)
{
    for (int i = 0; i < N_OPTS; i++)
        if (strcmp(name, g_opts[i].name) == 0) return &g_opts[i];
    return NULL;
}

/* The option and its value's word, in the 24 columns before the text (two blanks after a longer one). */
static void help_name(FILE *f, const char *name, const char *arg)
{
    char opt[64];
    snprintf(opt, sizeof opt, "%s%s%s", name, arg ? " " : "", arg ? arg : "");
    fprintf(f, strlen(opt) <= 20 ? "  %-22s" : "  %s  ", opt);
}

/* The text, its lines after the first indented to column 24. */
static void help_text(FILE *f, const char *text)
{
    for (const char *t = text; *t; t++) {
        if (*t == '\n') fprintf(f, "\n%24s", "");
        else fputc(*t, f);
    }
    fputc('\n', f);
}

static void help_row(FILE *f, const cli_opt *o)
{
    if (o->help_fn) {
        o->help_fn(f, o);
        return;
    }
    help_name(f, o->name, o->arg);
    help_text(f, o->help);
}

static void help_fill(FILE *f, const cli_opt *o, const char *fill)
{
    char text[512];
    snprintf(text, sizeof text, o->help, fill);
    help_name(f, o->name, o->arg);
    help_text(f, text);
}

/* --update's help from the trainer's table: every update placement, its phrase and the placements it runs with. */
static void help_updates(FILE *f, const cli_opt *o)
{
    help_name(f, o->name, o->arg);
    fprintf(f, "where the optimizer runs [host]:");
    for (int u = 0; u < TT_UPDATE_COUNT; u++) {
        char with[96] = "any --reduce";
        size_t n = 0;
        const unsigned r_all = (1u << TT_REDUCE_COUNT) - 1, rs = tt_update_reduces((tt_update)u);
        for (int r = 0; r < TT_REDUCE_COUNT && rs != r_all; r++)
            if (rs & (1u << r))
                n += (size_t)snprintf(with + n, sizeof with - n, "%s%s", n ? "/" : "--reduce ",
                                      tt_reduce_name((tt_reduce)r));
        fprintf(f, "\n%24s%s (%s): %s", "", tt_update_name((tt_update)u), with, tt_update_help((tt_update)u));
    }
    fputc('\n', f);
}

/* --sync's help from the trainer's table: every mode and its phrase. */
static void help_syncs(FILE *f, const cli_opt *o)
{
    help_name(f, o->name, o->arg);
    fprintf(f, "when a tower's gradient reaches the master variables (docs/sync.md) [bsp]:");
    for (int k = 0; k < TT_SYNC_COUNT; k++) {
        const tt_sync_info *in = tt_sync_about((tt_sync_kind)k);
        char word[32];
        snprintf(word, sizeof word, "%s%s%s", in->name, in->arg ? ":" : "", in->arg ? in->arg : "");
        fprintf(f, "\n%24s%s: %s", "", word, in->help);
    }
    fputc('\n', f);
}

/* A choice row: its words, "a | b | c" */
static void help_choices(FILE *f, const cli_opt *o)
{
    char list[160];
    help_fill(f, o, choice_list(o, " | ", " | ", list, sizeof list));
}

/* --optimizer's row, then the optimizer's parameters from its table, --lr-scaling after --lr (it is about the rate) */
static void help_optimizer(FILE *f, const cli_opt *o)
{
    char kinds[128];
    help_fill(f, o, tt_optim_kind_list(kinds, sizeof kinds, ~0u, " | ", " | "));
    for (int i = 0; i < TT_OPTIM_N_PARAMS; i++) {
        const tt_optim_param *p = &tt_optim_params[i];
        if (!p->help) continue;
        char name[32];
        snprintf(name, sizeof name, "--%s", p->name);
        help_name(f, name, p->type == TT_OPTIM_REAL ? "X" : NULL);
        char defaults[160], text[320];
        snprintf(text, sizeof text, p->help, tt_optim_param_defaults(p, defaults, sizeof defaults));
        help_text(f, text);
        if (strcmp(p->name, "lr") == 0) {
            const cli_opt *s = find_opt("--lr-scaling");
            help_name(f, s->name, s->arg);
            help_text(f, s->help);
        }
    }
}

/* text's words from column col on, wrapped at --help's margin (102) onto lines indented to `indent`, then a newline. */
static void help_wrap(FILE *f, const char *text, int col, int indent)
{
    int line_start = 1; /* no space before a line's first word */
    for (const char *w = text; *w;) {
        const int len = (int)strcspn(w, " ");
        if (!line_start && col + 1 + len > 102) {
            col = fprintf(f, "\n%*s", indent, "") - 1;
            line_start = 1;
        }
        col += fprintf(f, "%s%.*s", line_start ? "" : " ", len, w);
        line_start = 0;
        w += len + (w[len] == ' ');
    }
    fprintf(f, "\n");
}

/* --reduce's help from the placement table: every placement's name and phrase, words wrapped at column 102 after
 * the 24 columns of the option's name. */
static void help_placements(FILE *f, const cli_opt *o)
{
    char text[1024];
    size_t n = (size_t)snprintf(text, sizeof text, "where gradients are summed:");
    for (int r = 0; r < TT_REDUCE_COUNT && n < sizeof text; r++)
        n += (size_t)snprintf(text + n, sizeof text - n, " %s (%s)%s", tt_reduce_name((tt_reduce)r),
                              tt_reduce_about((tt_reduce)r)->help, r + 1 < TT_REDUCE_COUNT ? "," : "");
    if (n < sizeof text) snprintf(text + n, sizeof text - n, " [%s]", tt_reduce_name(TT_REDUCE_CPU));
    help_name(f, o->name, o->arg);
    help_wrap(f, text, 24, 24);
}

void tt_cli_train_help(FILE *f)
{
    for (int i = 0; i < N_OPTS; i++) help_row(f, &g_opts[i]);
}

/* train --help's footer: what --resume makes of the options, from the table's column. */
static void resume_help(FILE *f)
{
    static const struct {
        int cls;
        const char *head;
    } groups[] = {{R_SAME, "must be the same (each checkpoint keeps it; another is refused):"},
                  {R_OWN, "must be the same, each checked its own way (--epochs counts the total):"},
                  {R_FREE, "may change (bit for bit; other towers within the N-tower tolerance, and only where a "
                           "tower's rows set nothing: not with batchnorm per tower or --sync ssp/async):"}};
    fprintf(f, "\non --resume, these options\n");
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        char text[1024];
        size_t n = (size_t)snprintf(text, sizeof text, "%s", groups[g].head);
        const char *sep = " ";
        for (int i = 0; i < N_OPTS && n < sizeof text; i++)
            if (g_opts[i].resume == groups[g].cls && (g_opts[i].cmds & ON(TRAIN))) {
                n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", sep, g_opts[i].name);
                sep = ", ";
            }
        if (groups[g].cls == R_OWN && n < sizeof text) snprintf(text + n, sizeof text - n, ", and the optimizer's settings");
        fprintf(f, "  ");
        help_wrap(f, text, 2, 4);
    }
}

/* The R_SAME options' values as the user writes them, one per line ("--sync bsp"), into c->resume_same: what every
 * checkpoint keeps and a resume compares. A choice's word, --sync's MODE[:N] (an R_SAME row of another kind would
 * need its own words here: tt_cli_parse_train's table check refuses it). */
static void resume_same(tt_run_config *c)
{
    size_t n = 0;
    c->resume_same[0] = '\0';
    for (int i = 0; i < N_OPTS; i++) {
        const cli_opt *o = &g_opts[i];
        if (o->resume != R_SAME) continue;
        char v[64];
        if (o->set == set_sync) {
            tt_sync_format(&c->sync, v, sizeof v);
        } else {
            int e;
            memcpy(&e, (const char *)c + o->field, sizeof e);
            snprintf(v, sizeof v, "%s", o->choices[e]);
        }
        const int k = snprintf(c->resume_same + n, sizeof c->resume_same - n, "%s %s\n", o->name, v);
        TT_ASSERT(k > 0 && (size_t)k < sizeof c->resume_same - n); /* the field holds every R_SAME row */
        n += (size_t)k;
    }
}

/* Every option train takes says what --resume makes of it, and an R_SAME one is a choice or --sync (resume_same's
 * words): a row added without is a programming error, caught by every test that parses a command line. */
static void resume_column_check(void)
{
    for (int i = 0; i < N_OPTS; i++) {
        const cli_opt *o = &g_opts[i];
        TT_ASSERT(!(o->cmds & ON(TRAIN)) || o->resume);
        TT_ASSERT(o->resume != R_SAME || o->set == set_sync || o->set == set_choice);
    }
}

/* The optimizer's parameter an option names (tt_optim_params' index), or -1. */
static int optim_option(const char *name)
{
    const int k = strncmp(name, "--", 2) == 0 ? tt_optim_param_find(name + 2) : -1;
    return k >= 0 && tt_optim_params[k].help ? k : -1;
}

static int takes_value(const char *name)
{
    const cli_opt *o = find_opt(name);
    const int k = optim_option(name);
    return o ? o->arg != NULL : k >= 0 && tt_optim_params[k].type == TT_OPTIM_REAL;
}

/* The optimizer's options into o: --optimizer's defaults, then the parameters given (given[k], real[k] in
 * tt_optim_params' order), each refused where the kind does not read it or what it needs is 0. */
static tt_status optim_options(const char *optimizer, const int *given, const float *real, tt_optim_config *o,
                               tt_error *err)
{
    char names[128];
    if (optimizer) {
        tt_optim_kind kind;
        if (tt_optim_parse_kind(optimizer, &kind))
            return tt_fail(err, TT_ERR_ARG, "--optimizer: '%.64s' is not %s", optimizer,
                           tt_optim_kind_list(names, sizeof names, ~0u, ", ", " or "));
        *o = tt_optim_defaults(kind);
    }
    for (int k = 0; k < TT_OPTIM_N_PARAMS; k++) {
        const tt_optim_param *p = &tt_optim_params[k];
        if (!given[k] || (p->kinds & (1u << o->kind))) continue;
        return tt_fail(err, TT_ERR_ARG, "--%s: applies to --optimizer %s only", p->name,
                       tt_optim_kind_list(names, sizeof names, p->kinds, ", ", " or "));
    }
    for (int k = 0; k < TT_OPTIM_N_PARAMS; k++) {
        const int need = tt_optim_params[k].needs ? tt_optim_param_find(tt_optim_params[k].needs) : -1;
        if (given[k] && need >= 0 && (!given[need] || real[need] == 0))
            return tt_fail(err, TT_ERR_ARG, "--%s: needs --%s greater than 0", tt_optim_params[k].name,
                           tt_optim_params[need].name);
    }
    for (int k = 0; k < TT_OPTIM_N_PARAMS; k++) {
        const tt_optim_param *p = &tt_optim_params[k];
        if (p->type == TT_OPTIM_FLAG) *(int *)tt_optim_param_field(o, p) = given[k]; /* a flag is off unless given */
        else if (given[k]) *(float *)tt_optim_param_field(o, p) = real[k];
    }
    return TT_OK;
}

/* An option the command does not take (its row's cmds), or any unknown one for a command that does not train: one
 * line in the command's words. TT_OK: the command takes it, or set_option will call it unknown. */
static tt_status refuse_option(const char *name, const char *cmd, tt_error *err)
{
    int c = 0;
    while (c < CMD_COUNT && strcmp(g_cmds[c].name, cmd) != 0) c++;
    const cli_opt *o = find_opt(name);
    const unsigned cmds = o ? o->cmds : optim_option(name) >= 0 ? (unsigned)CMDS_OPTIM : 0;
    if (c == CMD_COUNT || (cmds & ON_CMD(c)) || (!cmds && g_cmds[c].runs)) return TT_OK;
    if (cmds == CMDS_CHECKPOINT && g_cmds[c].runs)
        return tt_fail(err, TT_ERR_ARG, "%s: applies to towertrain train only, not %s", name, cmd);
    if (g_cmds[c].why) return tt_fail(err, TT_ERR_ARG, "%s: %s does not apply (%s)", cmd, name, g_cmds[c].why);
    return tt_fail(err, TT_ERR_ARG, "%s: %s does not apply (see towertrain %s --help)", cmd, name, cmd);
}

/* One option of the table or of the optimizer's, its value read (NULL for a flag). */
static tt_status set_option(cli_parse *p, const char *name, const char *value, const char *cmd, tt_error *err)
{
    const cli_opt *o = find_opt(name);
    const int k = o ? -1 : optim_option(name);
    tt_status s;
    if (o) s = o->set(o, p, value, err);
    else if (k >= 0 && tt_optim_params[k].type == TT_OPTIM_REAL)
        s = tt_cli_float(name, value, tt_optim_params[k].lo, tt_optim_params[k].hi, tt_optim_params[k].lo_open,
                         &p->real[k], err);
    else if (k >= 0) s = value ? tt_fail(err, TT_ERR_ARG, "%s: takes no value", name) : TT_OK;
    else return tt_fail(err, TT_ERR_ARG, "%s: unknown option '%s' (see towertrain %s --help)", cmd, name, cmd);
    if (k >= 0) p->given[k] = 1;
    if (s) return s;
    if (value && !*value && strcmp(name, "--log-json") != 0) return tt_fail(err, TT_ERR_ARG, "%s: empty value", name);
    return TT_OK;
}

/* What the options need of each other, once all are read. */
static tt_status cli_settle(cli_parse *p, tt_error *err)
{
    tt_run_config *c = p->c;
    const tt_status st = optim_options(p->optimizer, p->given, p->real, &c->optim, err);
    if (st) return st;
    c->lr_given = p->given[tt_optim_param_find("lr")];
    if (c->towers > c->batch)
        return tt_fail(err, TT_ERR_ARG, "--towers %zu is more than --batch %zu: every tower needs at least one sample",
                       c->towers, c->batch);
    const char *needs_dir = c->save_every_epoch ? "--save-every-epoch"
                            : c->save_every_steps ? "--save-every-steps"
                            : c->save_best ? "--save-best"
                            : p->keep_given ? "--keep"
                            : NULL;
    if (needs_dir && !c->checkpoint_dir) return tt_fail(err, TT_ERR_ARG, "%s: needs --checkpoint-dir DIR", needs_dir);
    if (c->tensorboard_every_steps && !c->tensorboard)
        return tt_fail(err, TT_ERR_ARG, "--tensorboard-every-steps: needs --tensorboard DIR");
    if (c->save_best && c->val_samples == 0)
        return tt_fail(err, TT_ERR_ARG, "--save-best: needs a validation set (--val-samples is 0)");
    resume_same(c);
    return TT_OK;
}

tt_status tt_cli_parse_train(int argc, char **argv, int first, tt_run_config *c, const char *cmd,
                             tt_cli_extra_fn extra, void *ctx, int *help, tt_error *err)
{
    cli_parse p = {.c = c};
    *help = 0;
    resume_column_check();
    enum { MAX_SEEN = 64 };
    char seen[MAX_SEEN][64]; /* options given so far: each may appear once, as a repeated key in a model file */
    int n_seen = 0;
    for (int i = first; i < argc; i++) {
        char name[64];
        const char *arg = argv[i], *value = NULL;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            *help = 1;
            return TT_OK;
        }
        if (strncmp(arg, "--", 2) != 0)
            return tt_fail(err, TT_ERR_ARG, "%s: unexpected argument '%.64s' (options start with --)", cmd, arg);
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (len >= sizeof name) return tt_fail(err, TT_ERR_ARG, "%s: unknown option '%.40s...'", cmd, arg);
        memcpy(name, arg, len);
        name[len] = '\0';
        if (eq) value = eq + 1;
        for (int k = 0; k < n_seen; k++)
            if (strcmp(seen[k], name) == 0) return tt_fail(err, TT_ERR_ARG, "%s: given twice", name);
        if (n_seen < MAX_SEEN) memcpy(seen[n_seen++], name, len + 1);
        if (extra) {
            /* the subcommand's own options first: 1 = consumed a value, 2 = a flag, 0 = not its option */
            tt_status st = TT_OK;
            const char *v = value ? value : (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 ? argv[i + 1] : NULL);
            int used = extra(name, v, ctx, err, &st);
            if (st) return st;
            if (used == 1) {
                if (!value) i++;
                continue;
            }
            if (used == 2) continue;
        }
        const tt_status r = refuse_option(name, cmd, err);
        if (r) return r;
        if (takes_value(name) && !value) {
            if (i + 1 >= argc) return tt_fail(err, TT_ERR_ARG, "%s: missing value", name);
            if (strncmp(argv[i + 1], "--", 2) == 0) /* "--log-json --nesterov": a value was forgotten */
                return tt_fail(err, TT_ERR_ARG, "%s: missing value (the next argument, '%.64s', is an option)", name,
                               argv[i + 1]);
            value = argv[++i];
        }
        const tt_status s = set_option(&p, name, value, cmd, err);
        if (s) return s;
    }
    return cli_settle(&p, err);
}

int tt_cmd_train(int argc, char **argv)
{
    tt_run_config c;
    tt_run_config_defaults(&c);
    tt_error err = {{0}};
    int help;
    tt_status s = tt_cli_parse_train(argc, argv, 2, &c, "train", NULL, NULL, &help, &err);
    s = tt_node_agree(tt_node_world(), s, &err); /* a rank started with a bad flag stops the whole job */
    if (s) {
        tt_report_error(err.msg);
        return tt_status_exit_code(s);
    }
    if (help) {
        printf("usage: towertrain train [options]\n\nTrains a model with N data-parallel towers; the master weights "
               "and the optimizer live on the host.\n\noptions:\n");
        tt_cli_train_help(stdout);
        resume_help(stdout);
        return 0;
    }
    tt_run_result *res = (tt_run_result *)tt_calloc(1, sizeof *res);
    if (!res) {
        tt_report_error("out of memory");
        return 1;
    }
    s = tt_run(&c, tt_node_speaks() ? stdout : NULL, res, &err); /* rank 0 prints for the job */
    tt_free(res->final_params);
    tt_free(res);
    if (s) {
        fflush(stdout);
        tt_report_error(err.msg);
        return tt_status_exit_code(s);
    }
    return 0;
}

/* ---- summary --------------------------------------------------------------------------------------------------- */

int tt_cmd_summary(int argc, char **argv)
{
    tt_run_config c;
    tt_run_config_defaults(&c);
    tt_error err = {{0}};
    int help;
    tt_status s = tt_cli_parse_train(argc, argv, 2, &c, "summary", NULL, NULL, &help, &err);
    if (help) {
        printf("usage: towertrain summary [--model NAME|FILE] [--data SPEC] [--vocab N]\n\n"
               "Prints the model's layers as Keras's model.summary() does: each layer (type), its output shape and\n"
               "parameter count, and the totals. With --data the model is built for the data's sample shape, classes\n"
               "and token ids, as train would build it; without, for the model's default input: mlp 784 -> 10, cnn\n"
               "32x32x3 -> 10 (the Keras cifar10_cnn example), textcnn 300 tokens of a 30,982-word vocabulary -> 46\n"
               "classes (the Reuters seed: 332,856 parameters); a model file needs an `input shape=` line.\n");
        return 0;
    }
    tt_model *m = (tt_model *)tt_calloc(1, sizeof *m);
    if (!s && !m) s = tt_fail(&err, TT_ERR_NOMEM, "out of memory");
    if (!s) s = tt_run_describe_model(&c, m, &err);
    if (!s) {
        if (m->notes[0]) fputs(m->notes, stdout);
        tt_model_summary(m, stdout);
    }
    tt_free(m);
    if (s) {
        tt_report_error(err.msg);
        return tt_status_exit_code(s);
    }
    return 0;
}
