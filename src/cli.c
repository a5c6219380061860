/* cli.c — option parsing for the towertrain subcommands (strict: a bad value or an unknown option is one line
 * and exit code 2) and the `train` subcommand. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
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

/* --reduce's help from the placement table: every placement's name and phrase, words wrapped at column 102 after
 * the 24 columns of the option's name. */
static void help_placements(FILE *f)
{
    char text[1024];
    size_t n = (size_t)snprintf(text, sizeof text, "where gradients are summed:");
    for (int r = 0; r < TT_REDUCE_COUNT && n < sizeof text; r++)
        n += (size_t)snprintf(text + n, sizeof text - n, " %s (%s)%s", tt_reduce_name((tt_reduce)r),
                              tt_reduce_about((tt_reduce)r)->help, r + 1 < TT_REDUCE_COUNT ? "," : "");
    if (n < sizeof text) snprintf(text + n, sizeof text - n, " [%s]", tt_reduce_name(TT_REDUCE_CPU));
    int col = fprintf(f, "  --reduce PLACE        ");
    const int indent = col, margin = 102;
    for (const char *w = text; *w;) {
        const int len = (int)strcspn(w, " ");
        if (col > indent && col + 1 + len > margin) col = fprintf(f, "\n%*s", indent, "") - 1;
        col += fprintf(f, "%s%.*s", col > indent ? " " : "", len, w);
        w += len + (w[len] == ' ');
    }
    fprintf(f, "\n");
}

/* The optimizer's options from its table, --lr-scaling after --lr (it is about the rate). */
static void help_optim_params(FILE *f)
{
    for (int i = 0; i < TT_OPTIM_N_PARAMS; i++) {
        const tt_optim_param *p = &tt_optim_params[i];
        if (!p->help) continue;
        char opt[32];
        snprintf(opt, sizeof opt, "--%s%s", p->name, p->type == TT_OPTIM_REAL ? " X" : "");
        fprintf(f, "  %-22s%s\n", opt, p->help);
        if (strcmp(p->name, "lr") == 0)
            fprintf(f, "  --lr-scaling RULE     none: lr as given; linear: lr x towers (Goyal et al. 2017) [none]\n");
    }
}

void tt_cli_train_help(FILE *f)
{
    char kinds[128];
    fprintf(f,
            "  --data SPEC           fashion-mnist (Debian's dataset-fashion-mnist), an MNIST-format directory,\n"
            "                        cifar10:DIR (CIFAR-10 binary) or npy:DIR (x_train.npy, y_train.npy, x_test.npy,\n"
            "                        y_test.npy); docs/data.md [fashion-mnist]\n"
            "  --model NAME|FILE     built-in mlp (256-relu-256-relu), cnn (the Keras cifar10_cnn example) or\n"
            "                        textcnn (embedding + conv1d, the Reuters seed), or a model file\n"
            "                        (docs/model-file.md) [mlp]\n"
            "  --vocab N             an embedding's vocabulary (token ids 0..N-1) [the data's largest id + 1]\n"
            "  --classes N           the class count: labels 0..N-1, a larger label is refused; classes may have no\n"
            "                        samples [the largest label + 1; a notice when that is over 10x the labels seen]\n"
            "  --device NAME         backend: %s; auto = cuda when a usable GPU exists, else cpu [auto]\n"
            "  --gpus LIST           GPUs the towers use, e.g. 0,1; more towers than GPUs share them round-robin,\n"
            "                        each tower with its own stream [every GPU]\n"
            "  --towers N            data-parallel towers, one thread each [1]\n"
            "  --batch N             global batch, split across the towers (sizes differ by at most 1) [256]\n"
            "  --epochs N            [10]\n"
            "  --optimizer NAME      %s, Keras semantics and defaults [adam]\n",
            tt_backend_list(), tt_optim_kind_list(kinds, sizeof kinds, ~0u, " | ", " | "));
    help_optim_params(f);
    fprintf(f,
            "  --seed N              initialisation and shuffling; same seed + towers = bit-identical run [1]\n"
            "  --val-samples N       validation = the last N training samples, 0 for none [10000]\n"
            "  --train-samples N     train on the first N remaining training samples only [all]\n"
            "  --test-samples N      test on the first N test samples only [all]\n"
            "  --log-json FILE       JSON lines: a start object, one per epoch, one for the test set\n"
            "  --progress MODE       auto | bar | lines | quiet [auto: a bar on a terminal]\n"
            "  --host-threads N      host threads for the gradient sum and the optimizer [CPUs]\n");
    help_placements(f);
    fprintf(f,
            "  --node-reduce MODE    under mpirun -np K: how the ranks combine their node sums (docs/scaleout.md):\n"
            "                        allreduce (every rank gets the global sum and updates its own copy) or ps (rank\n"
            "                        r updates slice r and holds 1/K of the optimizer state; the weights are\n"
            "                        gathered) [allreduce]\n"
            "  --trace FILE          Chrome trace-event JSON of every step (open in Perfetto or chrome://tracing)\n"
            "  --checkpoint-dir DIR  where checkpoints go (safetensors; docs/checkpoints.md); the end of training and a\n"
            "                        stop by SIGINT or SIGTERM (at the step boundary) then write one; a directory\n"
            "                        holding a later run's checkpoints is refused\n"
            "  --save-every-epoch    a checkpoint after every epoch\n"
            "  --save-every-steps N  a checkpoint after every N steps of the run\n"
            "  --save-best METRIC    val_loss | val_accuracy: best.safetensors whenever it improves\n"
            "  --keep N              periodic checkpoints kept, the newest [3]\n"
            "  --resume FILE|DIR     continue a run from a checkpoint (a directory: its newest valid one); give the\n"
            "                        run's --model, --batch, --seed and optimizer again; --epochs counts the total\n"
            "  --resume-weights-only FILE|DIR  start from a checkpoint's weights only, on purpose: another model with\n"
            "                        the same tensors, other options; a fresh optimizer, from epoch 1\n");
}

static int takes_value(const char *opt)
{
    static const char *valued[] = {"--data", "--model", "--vocab", "--device", "--gpus", "--towers", "--batch",
                                   "--classes", "--epochs", "--optimizer", "--lr-scaling", "--seed",
                                   "--val-samples", "--train-samples", "--test-samples", "--log-json", "--progress",
                                   "--host-threads", "--reduce", "--node-reduce", "--trace", "--checkpoint-dir", "--save-every-steps",
                                   "--save-best", "--keep", "--resume", "--resume-weights-only", NULL};
    for (const char **v = valued; *v; v++)
        if (strcmp(opt, *v) == 0) return 1;
    const int k = strncmp(opt, "--", 2) == 0 ? tt_optim_param_find(opt + 2) : -1; /* the optimizer's */
    return k >= 0 && tt_optim_params[k].help && tt_optim_params[k].type == TT_OPTIM_REAL;
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

tt_status tt_cli_parse_train(int argc, char **argv, int first, tt_run_config *c, const char *cmd,
                             tt_cli_extra_fn extra, void *ctx, int *help, tt_error *err)
{
    const char *optimizer = NULL;
    int keep_given = 0, given[TT_OPTIM_N_PARAMS] = {0}; /* the optimizer's parameters: given, and their values */
    float real[TT_OPTIM_N_PARAMS] = {0};
    *help = 0;
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
        int valued = takes_value(name);
        if (valued && !value) {
            if (i + 1 >= argc) return tt_fail(err, TT_ERR_ARG, "%s: missing value", name);
            if (strncmp(argv[i + 1], "--", 2) == 0) /* "--log-json --nesterov": a value was forgotten */
                return tt_fail(err, TT_ERR_ARG, "%s: missing value (the next argument, '%.64s', is an option)", name,
                               argv[i + 1]);
            value = argv[++i];
        }
        tt_status s = TT_OK;
        int op; /* the optimizer's parameter, tt_optim_params[op] */
        static const char *const ckpt_opts[] = {"--checkpoint-dir", "--save-every-epoch", "--save-every-steps",
                                                "--save-best", "--keep", "--resume", "--resume-weights-only"};
        for (size_t k = 0; k < sizeof ckpt_opts / sizeof *ckpt_opts; k++)
            if (strcmp(name, ckpt_opts[k]) == 0 && strcmp(cmd, "train") != 0)
                return tt_fail(err, TT_ERR_ARG, "%s: applies to towertrain train only, not %s", name, cmd);
        if (strcmp(name, "--data") == 0) {
            c->data = value;
            c->data_given = 1;
        }
        else if (strcmp(name, "--model") == 0) c->model = value;
        else if (strcmp(name, "--vocab") == 0) s = tt_cli_size(name, value, 1, 16777216, &c->vocab, err);
        else if (strcmp(name, "--classes") == 0) s = tt_cli_size(name, value, 1, 16777216, &c->classes, err);
        else if (strcmp(name, "--device") == 0) c->device = value;
        else if (strcmp(name, "--gpus") == 0) c->gpus = value;
        else if (strcmp(name, "--towers") == 0) s = tt_cli_size(name, value, 1, 1024, &c->towers, err);
        else if (strcmp(name, "--batch") == 0) s = tt_cli_size(name, value, 1, 1 << 20, &c->batch, err);
        else if (strcmp(name, "--epochs") == 0) s = tt_cli_size(name, value, 1, 100000, &c->epochs, err);
        else if (strcmp(name, "--optimizer") == 0) optimizer = value;
        else if ((op = tt_optim_param_find(name + 2)) >= 0 && tt_optim_params[op].help) {
            const tt_optim_param *p = &tt_optim_params[op];
            if (p->type == TT_OPTIM_REAL) s = tt_cli_float(name, value, p->lo, p->hi, p->lo_open, &real[op], err);
            else if (value) return tt_fail(err, TT_ERR_ARG, "%s: takes no value", name);
            given[op] = 1;
        } else if (strcmp(name, "--lr-scaling") == 0) {
            if (strcmp(value, "none") == 0) c->lr_scaling = TT_LR_NONE;
            else if (strcmp(value, "linear") == 0) c->lr_scaling = TT_LR_LINEAR;
            else s = tt_fail(err, TT_ERR_ARG, "--lr-scaling: '%.64s' is not none or linear", value);
        } else if (strcmp(name, "--seed") == 0) {
            size_t seed;
            s = tt_cli_size(name, value, 0, SIZE_MAX, &seed, err);
            c->seed = seed;
        } else if (strcmp(name, "--val-samples") == 0) s = tt_cli_size(name, value, 0, 100000000, &c->val_samples, err);
        else if (strcmp(name, "--train-samples") == 0) s = tt_cli_size(name, value, 1, 100000000, &c->train_samples, err);
        else if (strcmp(name, "--test-samples") == 0) s = tt_cli_size(name, value, 1, 100000000, &c->test_samples, err);
        else if (strcmp(name, "--log-json") == 0) {
            if (!*value) s = tt_fail(err, TT_ERR_ARG, "--log-json: empty file name");
            c->log_json = value;
        } else if (strcmp(name, "--progress") == 0) {
            if (strcmp(value, "auto") == 0) c->progress = TT_PROGRESS_AUTO;
            else if (strcmp(value, "bar") == 0) c->progress = TT_PROGRESS_BAR;
            else if (strcmp(value, "lines") == 0) c->progress = TT_PROGRESS_LINES;
            else if (strcmp(value, "quiet") == 0) c->progress = TT_PROGRESS_QUIET;
            else s = tt_fail(err, TT_ERR_ARG, "--progress: '%.64s' is not auto, bar, lines or quiet", value);
        } else if (strcmp(name, "--reduce") == 0) {
            char names[128];
            if (tt_reduce_parse(value, &c->reduce))
                s = tt_fail(err, TT_ERR_ARG, "--reduce: '%.64s' is not %s", value,
                            tt_reduce_list(names, sizeof names, ", ", " or ", 0));
        } else if (strcmp(name, "--node-reduce") == 0) {
            if (tt_node_reduce_parse(value, &c->node_reduce))
                s = tt_fail(err, TT_ERR_ARG, "--node-reduce: '%.64s' is not allreduce or ps", value);
        } else if (strcmp(name, "--trace") == 0) {
            if (!*value) s = tt_fail(err, TT_ERR_ARG, "--trace: empty file name");
            c->trace = value;
        } else if (strcmp(name, "--checkpoint-dir") == 0) {
            c->checkpoint_dir = value;
        } else if (strcmp(name, "--save-every-epoch") == 0) {
            if (value) return tt_fail(err, TT_ERR_ARG, "--save-every-epoch: takes no value");
            c->save_every_epoch = 1;
        } else if (strcmp(name, "--save-every-steps") == 0) {
            s = tt_cli_size(name, value, 1, 1000000000, &c->save_every_steps, err);
        } else if (strcmp(name, "--save-best") == 0) {
            if (strcmp(value, "val_loss") == 0) c->save_best = TT_SAVE_BEST_VAL_LOSS;
            else if (strcmp(value, "val_accuracy") == 0) c->save_best = TT_SAVE_BEST_VAL_ACCURACY;
            else s = tt_fail(err, TT_ERR_ARG, "--save-best: '%.64s' is not val_loss or val_accuracy", value);
        } else if (strcmp(name, "--keep") == 0) {
            s = tt_cli_size(name, value, 1, 100000, &c->keep, err);
            keep_given = 1;
        } else if (strcmp(name, "--resume") == 0 || strcmp(name, "--resume-weights-only") == 0) {
            if (c->resume) /* one checkpoint, taken one way */
                return tt_fail(err, TT_ERR_ARG, "%s: give --resume or --resume-weights-only, not both", name);
            c->resume = value;
            c->resume_weights_only = name[8] == '-';
        } else if (strcmp(name, "--host-threads") == 0) {
            size_t n;
            s = tt_cli_size(name, value, 1, 256, &n, err);
            c->host_threads = (int)n;
        } else
            return tt_fail(err, TT_ERR_ARG, "%s: unknown option '%s' (see towertrain %s --help)", cmd, name, cmd);
        if (s) return s;
        if (value && !*value && strcmp(name, "--log-json") != 0)
            return tt_fail(err, TT_ERR_ARG, "%s: empty value", name);
    }
    const tt_status st = optim_options(optimizer, given, real, &c->optim, err);
    if (st) return st;
    c->lr_given = given[tt_optim_param_find("lr")];
    if (c->towers > c->batch)
        return tt_fail(err, TT_ERR_ARG, "--towers %zu is more than --batch %zu: every tower needs at least one sample",
                       c->towers, c->batch);
    const char *needs_dir = c->save_every_epoch ? "--save-every-epoch"
                            : c->save_every_steps ? "--save-every-steps"
                            : c->save_best ? "--save-best"
                            : keep_given ? "--keep"
                            : NULL;
    if (needs_dir && !c->checkpoint_dir) return tt_fail(err, TT_ERR_ARG, "%s: needs --checkpoint-dir DIR", needs_dir);
    if (c->save_best && c->val_samples == 0)
        return tt_fail(err, TT_ERR_ARG, "--save-best: needs a validation set (--val-samples is 0)");
    return TT_OK;
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

static int summary_extra(const char *opt, const char *value, void *ctx, tt_error *err, tt_status *st)
{
    (void)value;
    (void)ctx;
    if (strcmp(opt, "--model") == 0 || strcmp(opt, "--data") == 0 || strcmp(opt, "--vocab") == 0)
        return 0; /* the train parser's */
    *st = tt_fail(err, TT_ERR_ARG, "summary: %s does not apply (it takes --model, --data and --vocab)", opt);
    return 1;
}

int tt_cmd_summary(int argc, char **argv)
{
    tt_run_config c;
    tt_run_config_defaults(&c);
    tt_error err = {{0}};
    int help;
    tt_status s = tt_cli_parse_train(argc, argv, 2, &c, "summary", summary_extra, NULL, &help, &err);
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
