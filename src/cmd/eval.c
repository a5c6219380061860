/* eval.c — using a checkpoint: `towertrain eval` (loss, accuracy, top-5, per-class precision and recall and the
 * confusion matrix of a data set's test or validation split) and `towertrain predict` (the top-k classes with their
 * probabilities for every sample of an IDX or .npy file).
 *
 * The model comes from the checkpoint: its description (a built-in name or a model file's path) and the input shape,
 * classes and vocabulary it was trained on (the checkpoint's options); --model overrides the description. Its
 * tensors are then checked name by name and shape by shape against the file. The forward passes run on the towers
 * (tt_trainer_predict), so eval on N towers is the same evaluation train does after every epoch.
 * Not for: training (train.c) or the file format (checkpoint.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tt_backend.h"
#include "tt_cli.h"
#include "tt_mem.h"
#include "tt_out.h"
#include "tt_signal.h"
#include "tt_train.h"

typedef struct use_opts {
    const char *cmd;        /* "eval" or "predict" */
    const char *checkpoint; /* --checkpoint FILE */
    const char *input;      /* predict --input FILE */
    int split_val;          /* eval --split val */
    size_t top_k;           /* predict --top-k */
    int jsonl;              /* predict --format jsonl */
    int model_given;        /* --model overrides the checkpoint's */
} use_opts;


static int use_extra(const char *opt, const char *value, void *ctx, tt_error *err, tt_status *st)
{
    use_opts *o = (use_opts *)ctx;
    const int eval = strcmp(o->cmd, "eval") == 0;
    if (strcmp(opt, "--checkpoint") == 0 || (!eval && strcmp(opt, "--input") == 0)) {
        if (!value || !*value) *st = tt_fail(err, TT_ERR_ARG, "%s: missing value", opt);
        else if (opt[2] == 'c') o->checkpoint = value;
        else o->input = value;
        return 1;
    }
    if (eval && strcmp(opt, "--split") == 0) {
        if (!value) *st = tt_fail(err, TT_ERR_ARG, "--split: missing value");
        else if (strcmp(value, "test") == 0) o->split_val = 0;
        else if (strcmp(value, "val") == 0) o->split_val = 1;
        else *st = tt_fail(err, TT_ERR_ARG, "--split: '%.64s' is not test or val", value);
        return 1;
    }
    if (!eval && strcmp(opt, "--top-k") == 0) {
        *st = tt_cli_size(opt, value, 1, 1000000, &o->top_k, err);
        return 1;
    }
    if (!eval && strcmp(opt, "--format") == 0) {
        if (!value) *st = tt_fail(err, TT_ERR_ARG, "--format: missing value");
        else if (strcmp(value, "table") == 0) o->jsonl = 0;
        else if (strcmp(value, "jsonl") == 0) o->jsonl = 1;
        else *st = tt_fail(err, TT_ERR_ARG, "--format: '%.64s' is not table or jsonl", value);
        return 1;
    }
    if (strcmp(opt, "--model") == 0) o->model_given = 1; /* it overrides the checkpoint's */
    return 0; /* the train parser's: the options each command takes are the option table's (cli.c) */
}

/* The input the checkpoint's model was trained on, from its options (typed, required): "input":[d...], "classes":C,
 * "vocab":V; and a model file's text, "model_text" (*text, tt_malloc'd; NULL if none). */
static tt_status ckpt_input(const tt_checkpoint *ck, const char *path, tt_model_input *in, char **text, tt_error *err)
{
    memset(in, 0, sizeof *in);
    *text = NULL;
    tt_ckpt_value shape, classes, vocab, mt;
    tt_status s = tt_checkpoint_option(ck, path, "input", TT_CKPT_UINTS, 1, &shape, err);
    if (!s) s = tt_checkpoint_option(ck, path, "classes", TT_CKPT_UINT, 1, &classes, err);
    if (!s) s = tt_checkpoint_option(ck, path, "vocab", TT_CKPT_UINT, 1, &vocab, err);
    if (!s) s = tt_checkpoint_option(ck, path, "model_text", TT_CKPT_STRING, 0, &mt, err);
    if (s) return s;
    if (shape.n < 1 || shape.n > TT_MAX_DIMS)
        return tt_fail(err, TT_ERR_FORMAT, "%s: options: input has %zu dimensions, not 1 to %d", path, shape.n,
                       TT_MAX_DIMS);
    in->shape.ndim = (int)shape.n;
    for (size_t i = 0; i < shape.n; i++) {
        if (shape.us[i] < 1 || shape.us[i] > (1 << 24))
            return tt_fail(err, TT_ERR_FORMAT, "%s: options: input dimension %zu is %llu, not 1 to 2^24", path, i,
                           (unsigned long long)shape.us[i]);
        in->shape.d[i] = (size_t)shape.us[i];
    }
    if (classes.u < 1 || classes.u > (1 << 24) || vocab.u > (1 << 24))
        return tt_fail(err, TT_ERR_FORMAT, "%s: options: classes %llu and vocab %llu are not 1 to 2^24 and 0 to 2^24",
                       path, (unsigned long long)classes.u, (unsigned long long)vocab.u);
    in->n_classes = (size_t)classes.u;
    in->vocab = vocab.u ? (size_t)vocab.u : 1;
    if (mt.found) {
        if (!*mt.s) return tt_fail(err, TT_ERR_FORMAT, "%s: options: model_text is empty", path);
        if (!(*text = (char *)tt_malloc(strlen(mt.s) + 1)))
            return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for its model text", path);
        memcpy(*text, mt.s, strlen(mt.s) + 1);
    }
    return TT_OK;
}

/* What to build the model from when --model is not given: the checkpoint's own text (a model file's, saved in it) or
 * a built-in model's name — never a path it names: a checkpoint is data, and "file:/etc/passwd" without the text
 * needs --model. *spec: the built-in name, or the name the text's messages use. */
static tt_status ckpt_model_spec(const tt_checkpoint *ck, const char *path, const char *text, char *spec, size_t len,
                                 tt_error *err)
{
    const char *d = ck->model_desc ? ck->model_desc : "";
    char q[96];
    tt_escape(d, q, sizeof q);
    if (text) {
        snprintf(spec, len, "%s (its model text)", path);
        return TT_OK;
    }
    if (strncmp(d, "builtin:", 8) == 0 && tt_model_is_builtin(d + 8)) {
        snprintf(spec, len, "%s", d + 8);
        return TT_OK;
    }
    if (strncmp(d, "file:", 5) == 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: its model is '%s' but it holds no model text (a checkpoint never names "
                       "a file to open): give --model", path, q);
    if (*d)
        return tt_fail(err, TT_ERR_FORMAT, "%s: its model '%s' is not a built-in model (%s): give --model", path, q,
                       tt_model_builtins());
    return tt_fail(err, TT_ERR_FORMAT, "%s: it does not say its model: give --model", path);
}

/* The same sizes in the same order once dimensions of size 1 are left out: (28, 28) is (28, 28, 1), but (3, 32, 32)
 * is not (32, 32, 3) — channels first would be read as channels last. */
static int same_but_ones(const tt_shape *a, const tt_shape *b)
{
    int i = 0, j = 0;
    for (;;) {
        while (i < a->ndim && a->d[i] == 1) i++;
        while (j < b->ndim && b->d[j] == 1) j++;
        if (i == a->ndim || j == b->ndim) return i == a->ndim && j == b->ndim;
        if (a->d[i++] != b->d[j++]) return 0;
    }
}

/* The model of the checkpoint, for samples of `shape` (NULL: the checkpoint's) and `classes` (0: the checkpoint's),
 * and the checkpoint read and checked against it. */
static tt_status load_model(const tt_run_config *c, const use_opts *o, const tt_shape *shape, size_t classes,
                            tt_model *m, tt_checkpoint *ck, tt_error *err)
{
    uint8_t *bytes = NULL; /* read once, parsed twice: the metadata, then against the model it describes */
    size_t len = 0;
    tt_status s = tt_checkpoint_read_bytes(o->checkpoint, &bytes, &len, err);
    if (!s) s = tt_checkpoint_parse(bytes, len, o->checkpoint, NULL, ck, err);
    if (s) {
        tt_free(bytes);
        return s;
    }
    tt_model_input in;
    char *text = NULL; /* a model file's text, saved in the checkpoint: the model does not need the file */
    s = ckpt_input(ck, o->checkpoint, &in, &text, err);
    char spec[4200];
    if (!s && o->model_given) snprintf(spec, sizeof spec, "%s", c->model);
    else if (!s) s = ckpt_model_spec(ck, o->checkpoint, text, spec, sizeof spec, err);
    if (!s && shape && !same_but_ones(shape, &in.shape)) {
        char x[64], y[64];
        s = tt_fail(err, TT_ERR_FORMAT, "%s: the samples are %s, the checkpoint's model takes %s", o->cmd,
                    tt_shape_str(shape, 0, x, sizeof x), tt_shape_str(&in.shape, 0, y, sizeof y));
    }
    if (!s && classes && classes != in.n_classes)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: the data have %zu classes, the checkpoint's model %zu", o->cmd, classes,
                    in.n_classes);
    if (!s && c->vocab) in.vocab = c->vocab;
    if (!s && text && !o->model_given)
        s = tt_model_parse(m, text, spec, &in, err);
    else if (!s)
        s = tt_model_make(m, spec, &in, err);
    tt_free(text);
    if (!s && c->vocab && !m->token_vocab)
        s = tt_fail(err, TT_ERR_ARG, "--vocab: the checkpoint's model does not start with an embedding");
    tt_checkpoint_free(ck);
    if (!s) s = tt_checkpoint_parse(bytes, len, o->checkpoint, m, ck, err);
    tt_free(bytes);
    tt_error nf;
    if (!s && tt_checkpoint_check_finite(ck, m, o->checkpoint, 0, NULL, &nf)) { /* evaluated anyway: the outputs show it */
        char line[sizeof nf.msg + 64];
        snprintf(line, sizeof line, "%s: its outputs may not be finite, nor mean what they would", nf.msg);
        tt_report_notice(line);
    }
    return s;
}

/* Every sample's logits (ds->n, classes) with the checkpoint's weights, on c->towers towers; the memory checked
 * first. */
static tt_status infer(const char *o_cmd, const tt_run_config *c, const tt_model *m, const float *params,
                       const tt_dataset *ds, float **logits, tt_eval_result *res, tt_error *err)
{
    *logits = NULL;
    tt_backend be;
    tt_status s = tt_backend_open(c->device, c->gpus, &be, err);
    if (s) return s;
    if (be.notice[0]) tt_report_notice(be.notice);
    tt_trainer_config tc;
    memset(&tc, 0, sizeof tc);
    tc.ops = be.ops;
    tc.n_devices = be.n_devices;
    tc.devices = be.devices;
    tc.n_towers = c->towers;
    tc.batch = c->batch < c->towers ? c->towers : c->batch;
    tc.optim = tt_optim_defaults(TT_OPT_SGD); /* never applied: its state is one vector */
    tc.host_threads = c->host_threads;
    tc.stop = tt_signal_flag();
    tc.precision = c->precision; /* --precision: the towers' formats, as a training step's (the weights stay FP32) */
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    if ((s = tt_trainer_plan(m, &tc, &plan, err))) return s;
    tt_mem_add(&plan, "logits", TT_MEM_HOST, (double)ds->n * (double)m->n_classes * sizeof(float), TT_MEM_BY_RUN);
    if ((s = tt_mem_check(&plan, be.ops, err))) return s;
    *logits = (float *)tt_malloc(ds->n * m->n_classes * sizeof(float));
    if (!*logits) return tt_fail(err, TT_ERR_NOMEM, "out of memory for %zu x %zu logits", ds->n, m->n_classes);
    tt_trainer *tr = NULL;
    s = tt_trainer_init(&tr, m, &tc, params, err);
    if (!s) s = tt_trainer_predict(tr, ds, *logits, res, err);
    tt_trainer_free(tr);
    if ((!s || s == TT_ERR_STOPPED) && tt_signal_caught())
        s = tt_fail(err, TT_ERR_STOPPED, "%s: stopped by %s", o_cmd, tt_signal_name(tt_signal_caught()));
    if (s) {
        tt_free(*logits);
        *logits = NULL;
    }
    return s;
}

/* The first largest logit of a row (a NaN row: class 0). */
static size_t argmax(const float *z, size_t C)
{
    size_t best = 0;
    for (size_t i = 1; i < C; i++)
        if (z[i] > z[best]) best = i;
    return best;
}

/* A model that reads token ids: every value of ds must be one below its vocabulary (the embedding would read
 * outside its table otherwise). */
static tt_status check_tokens(const tt_model *m, const tt_dataset *ds, const char *what, tt_error *err)
{
    double max;
    if (!m->token_vocab) return TT_OK;
    if (tt_dataset_token_max(ds, &max))
        return tt_fail(err, TT_ERR_FORMAT, "%s: holds %.9g, not a token id (the model starts with an embedding)", what,
                       max);
    if (max >= (double)m->token_vocab)
        return tt_fail(err, TT_ERR_FORMAT, "%s: holds token id %.0f, the checkpoint's vocabulary is %zu (ids 0..%zu)",
                       what, max, m->token_vocab, m->token_vocab - 1);
    return TT_OK;
}

/* A command's whole life: options, --help, the required files, the body, and one line and an exit code on error. */
static int use_main(int argc, char **argv, use_opts *o, void (*help_fn)(void),
                    tt_status (*body)(tt_run_config *c, const use_opts *o, tt_error *err))
{
    tt_run_config c;
    tt_run_config_defaults(&c);
    tt_error err = {{0}};
    int help;
    tt_status s = tt_cli_parse_train(argc, argv, 2, &c, o->cmd, use_extra, o, &help, &err);
    if (!s && help) {
        help_fn();
        return 0;
    }
    if (!s && !o->checkpoint) s = tt_fail(&err, TT_ERR_ARG, "%s: --checkpoint FILE is required", o->cmd);
    if (!s && strcmp(o->cmd, "predict") == 0 && !o->input)
        s = tt_fail(&err, TT_ERR_ARG, "predict: --input FILE is required");
    if (!s) s = body(&c, o, &err);
    if (s) {
        fflush(stdout);
        tt_report_error(err.msg);
        return tt_status_exit_code(s);
    }
    return 0;
}

/* ---- eval ----------------------------------------------------------------------------------------------------- */

static void eval_help(void)
{
    printf("usage: towertrain eval --checkpoint FILE [--data SPEC] [--split test|val] [options]\n\n"
           "Evaluates a checkpoint's weights on a data set's test split (or its validation split: the last\n"
           "--val-samples training samples, as train takes them): loss, accuracy, top-5, each class's precision\n"
           "and recall, and the confusion matrix. The model is the checkpoint's (--model to override).\n\n"
           "options:\n"
           "  --checkpoint FILE     a checkpoint written by towertrain train --checkpoint-dir (required)\n"
           "  --split test|val      which split [test]\n"
           "  --data, --model, --vocab, --classes, --device, --gpus, --towers, --batch, --val-samples,\n"
           "  --test-samples, --log-json FILE, --host-threads, --precision: as for train (--log-json writes\n"
           "  one \"eval\" JSON object; the report says the precision)\n");
}

/* The report on stdout, and in the --log-json file opened before the evaluation (log->buf NULL: none). */
static tt_status eval_report(const use_opts *o, const tt_run_config *c, const tt_dataset *ds, const float *logits,
                             const tt_eval_result *res, size_t C, tt_out *log, tt_error *err)
{
    size_t *conf = (size_t *)tt_calloc(C * C, sizeof(size_t));
    if (!conf) return tt_fail(err, TT_ERR_NOMEM, "out of memory for a %zu x %zu confusion matrix", C, C);
    for (size_t i = 0; i < ds->n; i++) conf[(size_t)ds->y[i] * C + argmax(logits + i * C, C)]++;
    printf("eval: %s on %s %s (%zu samples, %s arithmetic): loss %.4f - accuracy %.4f - top5 %.4f\n", o->checkpoint,
           c->data, o->split_val ? "val" : "test", res->n, tt_precision_names[c->precision], res->loss, res->accuracy,
           res->top5);
    printf("%6s %10s %10s %8s\n", "class", "precision", "recall", "support");
    tt_status s = TT_OK;
    if (log->buf) {
        tt_out_printf(log, "{\"event\":\"eval\",");
        tt_out_json_str(log, "checkpoint", o->checkpoint, 1);
        tt_out_printf(log, "\"split\":\"%s\",\"samples\":%zu,\"precision\":\"%s\",", o->split_val ? "val" : "test",
                      res->n, tt_precision_names[c->precision]);
        tt_out_json_num(log, "loss", res->loss, 1);
        tt_out_json_num(log, "accuracy", res->accuracy, 1);
        tt_out_json_num(log, "top5", res->top5, 1);
        tt_out_printf(log, "\"classes\":[");
    }
    size_t k = 0; /* rows printed: a signal stops the report at the next one (C may be thousands of classes) */
    for (; k < C && !tt_signal_caught(); k++) {
        size_t tp = conf[k * C + k], support = 0, predicted = 0;
        for (size_t j = 0; j < C; j++) {
            support += conf[k * C + j];
            predicted += conf[j * C + k];
        }
        const double prec = predicted ? (double)tp / (double)predicted : NAN;
        const double rec = support ? (double)tp / (double)support : NAN;
        printf("%6zu %10.4f %10.4f %8zu\n", k, prec, rec, support);
        if (log->buf) {
            tt_out_printf(log, "%s{\"class\":%zu,", k ? "," : "", k);
            tt_out_json_num(log, "precision", prec, 1);
            tt_out_json_num(log, "recall", rec, 1);
            tt_out_printf(log, "\"support\":%zu}", support);
        }
    }
    const int cut = k < C;
    if (!cut) {
        printf("confusion matrix (rows: true class, columns: predicted)\n%6s", "");
        for (size_t j = 0; j < C; j++) printf(" %6zu", j);
        printf("\n");
        if (log->buf) tt_out_printf(log, "],\"confusion\":[");
    }
    for (k = 0; !cut && k < C && !tt_signal_caught(); k++) {
        printf("%6zu", k);
        if (log->buf) tt_out_printf(log, "%s[", k ? "," : "");
        for (size_t j = 0; j < C; j++) {
            printf(" %6zu", conf[k * C + j]);
            if (log->buf) tt_out_printf(log, "%s%zu", j ? "," : "", conf[k * C + j]);
        }
        printf("\n");
        if (log->buf) tt_out_printf(log, "]");
    }
    if (cut || k < C) { /* stopped: the lines printed are whole; the log's record, unfinished, is not written */
        tt_free(conf);
        tt_out_discard(log);
        s = tt_flush_stdout(stdout, err);
        return s ? s : tt_fail(err, TT_ERR_STOPPED, "eval: stopped by %s while printing the report (%s row %zu of %zu)",
                               tt_signal_name(tt_signal_caught()), cut ? "class" : "confusion matrix", k, C);
    }
    if (log->buf) {
        tt_out_printf(log, "]}\n");
        if (!s) s = tt_out_commit(log, err);
    }
    tt_free(conf);
    if (!s) s = tt_flush_stdout(stdout, err);
    return s;
}

/* What a command holds once it has run a checkpoint over samples. */
typedef struct use_state {
    tt_model *m;
    tt_checkpoint ck;
    float *logits; /* (n, classes) */
    tt_eval_result res;
} use_state;

/* The checkpoint's model for the samples ds (classes: the data's, 0 if unlabelled), its tensors checked, token ids
 * checked, and every sample's logits. ds takes the model's shape (the same up to dimensions of size 1). */
static tt_status use_run(const tt_run_config *c, const use_opts *o, tt_dataset *ds, size_t classes, use_state *st,
                         tt_error *err)
{
    st->m = (tt_model *)tt_calloc(1, sizeof *st->m);
    if (!st->m) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    tt_status s = load_model(c, o, &ds->shape, classes, st->m, &st->ck, err);
    if (s) return s;
    ds->shape = st->m->input_shape;
    ds->n_classes = st->m->n_classes;
    if ((s = check_tokens(st->m, ds, o->input ? o->input : c->data, err))) return s;
    return infer(o->cmd, c, st->m, st->ck.params, ds, &st->logits, &st->res, err);
}

static void use_state_free(use_state *st)
{
    tt_free(st->logits);
    tt_checkpoint_free(&st->ck);
    tt_free(st->m);
    memset(st, 0, sizeof *st);
}

/* The checkpoint on the chosen split of --data. */
static tt_status eval_body(tt_run_config *c, const use_opts *o, tt_error *err)
{
    tt_dataset train, val, test;
    memset(&train, 0, sizeof train);
    memset(&val, 0, sizeof val);
    memset(&test, 0, sizeof test);
    use_state st;
    memset(&st, 0, sizeof st);
    tt_out log;
    memset(&log, 0, sizeof log);
    if (!o->split_val) c->val_samples = 0; /* the test split: no validation split to take off */
    tt_status s = tt_run_load(c, &train, &val, &test, err);
    tt_dataset *ds = o->split_val ? &val : &test;
    if (!s && ds->n == 0)
        s = tt_fail(err, TT_ERR_ARG, "eval: the %s split is empty", o->split_val ? "val (--val-samples 0?)" : "test");
    const size_t C = train.n_classes;
    if (!s && c->log_json) { /* opened now: a bad path is said before the evaluation, not after it */
        char what[300];
        snprintf(what, sizeof what, "--log-json %s", c->log_json);
        s = tt_out_open(&log, c->log_json, what, 4096 + 64 * C * (C + 4), err);
    }
    if (!s) s = use_run(c, o, ds, C, &st, err);
    if (!s) s = eval_report(o, c, ds, st.logits, &st.res, C, &log, err);
    tt_error cerr;
    tt_status cs = tt_out_close(&log, &cerr);
    if (!s && cs) {
        *err = cerr;
        s = cs;
    }
    use_state_free(&st);
    tt_dataset_free(&train);
    tt_dataset_free(&val);
    tt_dataset_free(&test);
    return s;
}

int tt_cmd_eval(int argc, char **argv)
{
    use_opts o = {.cmd = "eval"};
    return use_main(argc, argv, &o, eval_help, eval_body);
}

/* ---- predict -------------------------------------------------------------------------------------------------- */

static void predict_help(void)
{
    printf("usage: towertrain predict --checkpoint FILE --input FILE [--top-k K] [--format table|jsonl] [options]\n\n"
           "The top-k classes and their probabilities (softmax of the logits) for every sample of an IDX image file\n"
           "(gzip or plain) or a .npy file of samples, with a checkpoint's weights. The model is the checkpoint's\n"
           "(--model to override); the samples must have its input shape.\n\n"
           "options:\n"
           "  --checkpoint FILE     a checkpoint written by towertrain train --checkpoint-dir (required)\n"
           "  --input FILE          the samples: FILE.npy, or an IDX image file (required)\n"
           "  --top-k K             classes per sample, the most probable first [5, at most the classes]\n"
           "  --format FORMAT       table: a line per sample; jsonl: {\"sample\":i,\"top\":[{\"class\":c,\"p\":p},...]}\n"
           "                        per line [table]\n"
           "  --model, --vocab, --device, --gpus, --towers, --batch, --host-threads, --precision: as for\n"
           "  train (bf16, fp16: a line on stderr says so)\n");
}

/* Does class a rank before class b: a larger p, or the same p and a lower index; a NaN after every number. */
static int ranks_before(const float *p, size_t a, size_t b)
{
    const int na = isnan(p[a]), nb = isnan(p[b]);
    if (na != nb) return nb;
    if (!na && p[a] != p[b]) return p[a] > p[b];
    return a < b;
}

/* Moves heap[i] down a heap of n entries whose top (heap[0]) is the one ranking last. */
static void sift_down(const float *p, size_t *heap, size_t n, size_t i)
{
    for (;;) {
        size_t worst = i, l = 2 * i + 1, r = l + 1;
        if (l < n && ranks_before(p, heap[worst], heap[l])) worst = l;
        if (r < n && ranks_before(p, heap[worst], heap[r])) worst = r;
        if (worst == i) return;
        const size_t t = heap[i];
        heap[i] = heap[worst];
        heap[worst] = t;
        i = worst;
    }
}

void tt_top_k(const float *p, size_t C, size_t k, size_t *top, size_t *heap)
{
    if (k == 0) return;
    for (size_t j = 0; j < k; j++) heap[j] = j; /* the first k classes, then heapified */
    for (size_t i = k / 2; i-- > 0;) sift_down(p, heap, k, i);
    for (size_t j = k; j < C; j++)
        if (ranks_before(p, j, heap[0])) { /* beats the k-th best so far: takes its place */
            heap[0] = j;
            sift_down(p, heap, k, 0);
        }
    for (size_t n = k; n > 0; n--) { /* popping the worst fills top from the back */
        top[n - 1] = heap[0];
        heap[0] = heap[n - 1];
        sift_down(p, heap, n - 1, 0);
    }
}

/* Every sample's line; a signal stops it at the next sample (the lines printed are whole). */
static tt_status predict_print(const use_opts *o, size_t n, const float *logits, size_t C, tt_error *err)
{
    const size_t K = o->top_k < C ? o->top_k : C;
    float *p = (float *)tt_malloc(C * sizeof(float));
    size_t *top = (size_t *)tt_malloc(2 * K * sizeof(size_t)); /* the k best, then the heap's scratch */
    if (!p || !top) {
        tt_free(p);
        tt_free(top);
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    }
    if (!o->jsonl) {
        printf("%8s", "sample");
        for (size_t k = 0; k < K; k++) printf("  %5s%zu %7s", "top", k + 1, "p");
        printf("\n");
    }
    tt_status s = TT_OK;
    size_t i = 0;
    for (; i < n && !s && !tt_signal_caught(); i++) {
        tt_softmax_row(logits + i * C, (int)C, p);
        tt_top_k(p, C, K, top, top + K);
        if (o->jsonl) {
            printf("{\"sample\":%zu,\"top\":[", i);
            for (size_t k = 0; k < K; k++)
                printf("%s{\"class\":%zu,\"p\":%.6g}", k ? "," : "", top[k], (double)p[top[k]]);
            printf("]}\n");
        } else {
            printf("%8zu", i);
            for (size_t k = 0; k < K; k++) printf("  %6zu %7.4f", top[k], (double)p[top[k]]);
            printf("\n");
        }
        if (i % 4096 == 4095) s = tt_flush_stdout(stdout, err);
    }
    if (!s) s = tt_flush_stdout(stdout, err);
    if (!s && i < n)
        s = tt_fail(err, TT_ERR_STOPPED, "predict: stopped by %s after %zu of %zu samples (the lines printed are "
                    "whole)", tt_signal_name(tt_signal_caught()), i, n);
    tt_free(p);
    tt_free(top);
    return s;
}

/* The checkpoint's top-k classes for every sample of --input. */
static tt_status predict_body(tt_run_config *c, const use_opts *o, tt_error *err)
{
    tt_dataset ds;
    use_state st;
    memset(&st, 0, sizeof st);
    tt_status s = tt_samples_load(o->input, &ds, err);
    if (!s) s = use_run(c, o, &ds, 0, &st, err);
    if (!s && c->precision) /* the table is the samples' alone: which arithmetic made it goes to stderr */
        fprintf(stderr, "predict: precision %s (the checkpoint's FP32 weights rounded to it, as a tower's step has "
                "them)\n", tt_precision_names[c->precision]);
    if (!s) s = predict_print(o, ds.n, st.logits, st.m->n_classes, err);
    use_state_free(&st);
    tt_dataset_free(&ds);
    return s;
}

int tt_cmd_predict(int argc, char **argv)
{
    use_opts o = {.cmd = "predict", .top_k = 5};
    return use_main(argc, argv, &o, predict_help, predict_body);
}
