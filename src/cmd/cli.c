/* cli.c — option parsing for the towertrain subcommands (strict: a bad value or an unknown option is one line
 * and exit code 2) by the run's options table (tt_run_opts, src/run/train_opts.c), --help from it, and the `train`
 * and `summary` subcommands. Not for: the table itself (each option's row), or what a run makes of an option. */
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

/* ---- the train options: read and described by the run's options table --------------------------------------- */

/* A parse in progress: the configuration, and what is settled once every option is read. */
typedef struct cli_parse {
    tt_run_config *c;
    const char *optimizer;
    int given_row[TT_RUN_N_OPTS]; /* the options table's rows given (tt_run_opts' order) */
    int given[TT_OPTIM_N_PARAMS]; /* the optimizer's parameters (tt_optim_params' order): given, and their values */
    float real[TT_OPTIM_N_PARAMS];
} cli_parse;

#define CFG_AT(p, o, type) ((type *)((char *)(p)->c + (o)->field))
#define LR_SCALING "--lr-scaling" /* described after --lr, in help_optimizer */

static tt_status set_str(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    (void)err;
    *CFG_AT(p, o, const char *) = v;
    return TT_OK;
}

static tt_status set_file(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    *CFG_AT(p, o, const char *) = v;
    return *v ? TT_OK : tt_fail(err, TT_ERR_ARG, "%s: empty file name", o->name);
}

static tt_status set_size(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    return tt_cli_size(o->name, v, o->lo, o->hi, CFG_AT(p, o, size_t), err);
}

static tt_status set_u64(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    size_t n = 0;
    tt_status s = tt_cli_size(o->name, v, o->lo, o->hi, &n, err);
    if (!s) *CFG_AT(p, o, uint64_t) = n;
    return s;
}

static tt_status set_int(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    size_t n = 0;
    tt_status s = tt_cli_size(o->name, v, o->lo, o->hi, &n, err);
    if (!s) *CFG_AT(p, o, int) = (int)n;
    return s;
}

static tt_status set_flag(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    if (v) return tt_fail(err, TT_ERR_ARG, "%s: takes no value", o->name);
    *CFG_AT(p, o, int) = 1;
    return TT_OK;
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
static tt_status set_slow_tower(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
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
static tt_status set_sync(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    return tt_sync_parse(o->name, v, CFG_AT(p, o, tt_sync), err);
}

static tt_status set_optimizer(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    (void)o;
    (void)err;
    p->optimizer = v; /* read once every option is: the optimizer's parameters are checked against it */
    return TT_OK;
}

/* A choice row's accepted words, joined: "a, b or c" (sep ", ", last " or "). */
static const char *choice_list(const tt_run_opt *o, const char *sep, const char *last, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = o->lo; o->choices[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i == o->lo ? "" : o->choices[i + 1] ? sep : last,
                              o->choices[i]);
    return buf;
}

/* One word of the row's list: the field (an enum) gets its index. */
static tt_status set_choice(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
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

static tt_status set_reduce(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    char names[128];
    if (tt_reduce_parse(v, CFG_AT(p, o, tt_reduce)))
        return tt_fail(err, TT_ERR_ARG, "--reduce: '%.64s' is not %s", v,
                       tt_reduce_list(names, sizeof names, ", ", " or ", 0));
    return TT_OK;
}

/* --resume and --resume-weights-only: one checkpoint, taken one way */
static tt_status set_resume(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    if (p->c->resume) return tt_fail(err, TT_ERR_ARG, "%s: give --resume or --resume-weights-only, not both", o->name);
    *CFG_AT(p, o, const char *) = v;
    p->c->resume_weights_only = o->name[8] == '-';
    return TT_OK;
}

/* --loss-scale dynamic[:INIT] | N | none: a scale from 1 to 2^64 (an INIT or N a power of two unscales exactly) */
static tt_status set_loss_scale(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    tt_loss_scale ls = {0, 1.0, 0};
    const char *num = v;
    if (strcmp(v, "none") == 0) num = NULL;
    else if (strncmp(v, "dynamic", 7) == 0 && (v[7] == '\0' || v[7] == ':')) {
        ls = (tt_loss_scale){1, TT_SCALE_INIT, 0};
        num = v[7] ? v + 8 : NULL;
    }
    if (num) {
        char *end = NULL;
        errno = 0;
        /* as tt_cli_float: plain decimal — no sign, blank, hex or inf/nan words */
        const int bad_form = !(isdigit((unsigned char)num[0]) || num[0] == '.') || strpbrk(num, "xXpP") != NULL;
        const double x = bad_form ? NAN : strtod(num, &end);
        /* 2^64 itself, not a number above it that a double rounds to it */
        const int above = x >= TT_SCALE_MAX && strcmp(num, "18446744073709551616") != 0;
        if (bad_form || end == num || *end || errno || !(x >= 1.0 && x <= TT_SCALE_MAX) || above)
            return tt_fail(err, TT_ERR_ARG,
                           "%s: '%.64s' is not dynamic, dynamic:INIT, a scale N or none (INIT and N from 1 to 2^64)",
                           o->name, v);
        ls.scale = x;
    }
    memcpy(CFG_AT(p, o, tt_loss_scale), &ls, sizeof ls);
    return TT_OK;
}

/* --lr-schedule SPEC: Keras's schedules (tt_lr_schedule_parse) */
static tt_status set_lr_schedule(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    return tt_lr_schedule_parse(o->name, v, CFG_AT(p, o, tt_lr_schedule), err);
}

/* --augment none | cifar10 | a list of width=F, height=F and flip, each at most once, F a fraction in [0, 1) as
 * ImageDataGenerator's float ranges are (Keras reads a range of 1 or more as pixels, which --augment does not take). */
static tt_status set_augment(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    static const char *const names[] = {"width", "height", "flip"};
    tt_augment a = {0, 0, 0};
    if (strcmp(v, "cifar10") == 0) a = tt_augment_cifar10;
    const int list = strcmp(v, "none") != 0 && strcmp(v, "cifar10") != 0;
    unsigned seen = 0;
    for (const char *at = v; list; at++) {
        const size_t len = strcspn(at, ",");
        int k = 0;
        for (; k < 3; k++) { /* "width=F", "height=F", "flip" */
            const size_t nl = strlen(names[k]);
            if (strncmp(at, names[k], nl) == 0 && (k == 2 ? len == nl : at[nl] == '=')) break;
        }
        if (k == 3 && len == 0)
            return tt_fail(err, TT_ERR_ARG, "%s: '%.40s' has an empty item (give none, cifar10 or a list of width=F, "
                           "height=F and flip)", o->name, v);
        if (k == 3)
            return tt_fail(err, TT_ERR_ARG, "%s: '%.*s' is not width=F, height=F or flip (F a fraction in [0, 1); or "
                           "give none or cifar10)", o->name, (int)(len < 40 ? len : 40), at);
        if (seen & (1u << k)) return tt_fail(err, TT_ERR_ARG, "%s: %s is given twice", o->name, names[k]);
        seen |= 1u << k;
        if (k == 2) {
            a.flip = 1;
        } else {
            char label[32], num[48];
            const size_t skip = strlen(names[k]) + 1, n = len - skip;
            snprintf(label, sizeof label, "%s %s", o->name, names[k]);
            snprintf(num, sizeof num, "%.*s", (int)(n < sizeof num ? n : sizeof num - 1), at + skip);
            float f = 0;
            /* a number too long for num is refused whole, never read cut short */
            tt_status s = n < sizeof num ? tt_cli_float(label, num, 0.0, 1.0, 0, &f, err)
                                         : tt_fail(err, TT_ERR_ARG, "%s: '%s...' is not a number in [0, 1)", label,
                                                   num);
            if (s) return s;
            if (f >= 1.0f)
                return tt_fail(err, TT_ERR_ARG, "%s: '%s' is the whole image: give a fraction below 1 (Keras reads a "
                               "range of 1 or more as pixels, which --augment does not take)", label, num);
            *(k ? &a.height : &a.width) = f;
        }
        at += len;
        if (!*at) break;
    }
    memcpy(CFG_AT(p, o, tt_augment), &a, sizeof a);
    return TT_OK;
}

/* --early-stopping SPEC, --reduce-lr-on-plateau SPEC: the callback's own reader (the row's lo: which callback) */
static tt_status set_callback(const tt_run_opt *o, cli_parse *p, const char *v, tt_error *err)
{
    return tt_callback_parse(o->name, v, (tt_cb_kind)o->lo, CFG_AT(p, o, tt_callback), err);
}

/* How each kind of value is read. */
typedef tt_status (*set_fn)(const tt_run_opt *o, cli_parse *p, const char *value, tt_error *err);
static const set_fn g_set[TT_OPT_KINDS] = {
    [TT_OPT_STR] = set_str,       [TT_OPT_FILE] = set_file,     [TT_OPT_BACKEND] = set_str,
    [TT_OPT_SIZE] = set_size,     [TT_OPT_U64] = set_u64,       [TT_OPT_INT] = set_int,
    [TT_OPT_FLAG] = set_flag,     [TT_OPT_CHOICE] = set_choice, [TT_OPT_UPDATE] = set_choice,
    [TT_OPT_REDUCE] = set_reduce, [TT_OPT_SYNC] = set_sync,     [TT_OPT_SLOW] = set_slow_tower,
    [TT_OPT_OPTIM] = set_optimizer, [TT_OPT_RESUME] = set_resume, [TT_OPT_SCALE] = set_loss_scale,
    [TT_OPT_LRSCHED] = set_lr_schedule, [TT_OPT_AUGMENT] = set_augment,
    [TT_OPT_CALLBACK] = set_callback,
};

/* The commands that read the train options (indexed by TT_CMD_*), and how each refuses one it does not take. */
static const struct {
    const char *name;
    const char *why; /* "CMD: --opt does not apply (why)"; NULL: "(see towertrain CMD --help)" */
    int runs;        /* a command that trains: an option of train alone is refused as such; else an unknown option
                      * is refused as not applying too */
} g_cmds[TT_CMD_COUNT] = {
    [TT_CMD_TRAIN] = {"train", NULL, 1},
    [TT_CMD_BENCH] = {"bench", "every row is its own run; use --csv, or train for one run's log or trace", 1},
    [TT_CMD_COMPARE] = {"compare", "it runs every placement in turn; use train for one run's log or trace", 1},
    [TT_CMD_PROBE] = {"probe", "it measures synthetic steps of every placement, with no data set", 1},
    [TT_CMD_SUMMARY] = {"summary", "it takes --model, --data and --vocab", 0},
    [TT_CMD_EVAL] = {"eval", NULL, 0},
    [TT_CMD_PREDICT] = {"predict", NULL, 0},
};

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

static void help_fill(FILE *f, const tt_run_opt *o, const char *fill)
{
    char text[512];
    snprintf(text, sizeof text, o->help, fill);
    help_name(f, o->name, o->arg);
    help_text(f, text);
}

/* --update's help from the trainer's table: every update placement, its phrase and the placements it runs with. */
static void help_updates(FILE *f, const tt_run_opt *o)
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
static void help_syncs(FILE *f, const tt_run_opt *o)
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
static void help_choices(FILE *f, const tt_run_opt *o)
{
    char list[160];
    help_fill(f, o, choice_list(o, " | ", " | ", list, sizeof list));
}

/* --optimizer's row, then the optimizer's parameters from its table, --lr-scaling after --lr (it is about the rate) */
static void help_optimizer(FILE *f, const tt_run_opt *o)
{
    char kinds[128];
    help_fill(f, o, tt_optim_kind_list(kinds, sizeof kinds, ~0u, " | ", " | "));
    for (int i = 0; i < TT_OPTIM_N_PARAMS; i++) {
        const tt_optim_param *p = &tt_optim_params[i];
        if (!p->help) continue;
        char name[32];
        snprintf(name, sizeof name, "--%s", tt_optim_param_flag(p));
        help_name(f, name, p->type == TT_OPTIM_REAL ? "X" : NULL);
        char defaults[160], text[320];
        snprintf(text, sizeof text, p->help, tt_optim_param_defaults(p, defaults, sizeof defaults));
        help_text(f, text);
        if (strcmp(p->name, "lr") == 0) {
            const tt_run_opt *s = tt_run_opt_find(LR_SCALING);
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
static void help_placements(FILE *f, const tt_run_opt *o)
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

static void help_device(FILE *f, const tt_run_opt *o) { help_fill(f, o, tt_backend_list()); }

/* How each kind of row is described in --help (NULL: its text as it is). */
static void (*const g_help[TT_OPT_KINDS])(FILE *f, const tt_run_opt *o) = {
    [TT_OPT_BACKEND] = help_device,       [TT_OPT_CHOICE] = help_choices, [TT_OPT_UPDATE] = help_updates,
    [TT_OPT_REDUCE] = help_placements,    [TT_OPT_SYNC] = help_syncs,     [TT_OPT_OPTIM] = help_optimizer,
};

void tt_cli_train_help(FILE *f)
{
    for (int i = 0; i < TT_RUN_N_OPTS; i++) {
        const tt_run_opt *o = &tt_run_opts[i];
        if (o == tt_run_opt_find(LR_SCALING)) continue; /* after --lr (help_optimizer): it is about the rate */
        if (g_help[o->kind]) {
            g_help[o->kind](f, o);
        } else {
            help_name(f, o->name, o->arg);
            help_text(f, o->help);
        }
    }
}

/* train --help's footer: what --resume makes of the options, from the table's column. */
static void resume_help(FILE *f)
{
    static const struct {
        tt_opt_resume cls;
        const char *head;
    } groups[] = {{TT_RESUME_SAME, "must be the same (each checkpoint keeps it; another is refused):"},
                  {TT_RESUME_OWN, "must be the same, each checked its own way (--epochs counts the total):"},
                  {TT_RESUME_FREE, "may change (bit for bit; other towers within the N-tower tolerance, and only "
                                   "where a tower's rows set nothing: not with batchnorm per tower or --sync "
                                   "ssp/async):"}};
    fprintf(f, "\non --resume, these options\n");
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        char text[1024];
        size_t n = (size_t)snprintf(text, sizeof text, "%s", groups[g].head);
        const char *sep = " ";
        for (int i = 0; i < TT_RUN_N_OPTS && n < sizeof text; i++)
            if (tt_run_opts[i].resume == groups[g].cls && (tt_run_opts[i].cmds & TT_CMD(TRAIN))) {
                n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", sep, tt_run_opts[i].name);
                sep = ", ";
            }
        if (groups[g].cls == TT_RESUME_OWN && n < sizeof text)
            snprintf(text + n, sizeof text - n, ", and the optimizer's settings");
        fprintf(f, "  ");
        help_wrap(f, text, 2, 4);
    }
}

/* The TT_RESUME_SAME options' values as the user writes them, one per line ("--sync bsp"), into c->resume_same: what
 * every checkpoint keeps and a resume compares (a choice's word, --sync's MODE[:N]: tt_run_opts_check allows no
 * other kind there). */
static void resume_same(tt_run_config *c)
{
    size_t n = 0;
    c->resume_same[0] = '\0';
    for (int i = 0; i < TT_RUN_N_OPTS; i++) {
        const tt_run_opt *o = &tt_run_opts[i];
        if (o->resume != TT_RESUME_SAME) continue;
        char v[64];
        tt_run_opt_words(o, tt_run_opt_value(o, c), v, sizeof v);
        const int k = snprintf(c->resume_same + n, sizeof c->resume_same - n, "%s %s\n", o->name, v);
        TT_ASSERT(k > 0 && (size_t)k < sizeof c->resume_same - n); /* the field holds every TT_RESUME_SAME row */
        n += (size_t)k;
    }
}

/* The optimizer's parameter an option names (tt_optim_params' index), or -1. */
static int optim_option(const char *name)
{
    const int k = strncmp(name, "--", 2) == 0 ? tt_optim_param_find_flag(name + 2) : -1;
    return k >= 0 && tt_optim_params[k].help ? k : -1;
}

static int takes_value(const char *name)
{
    const tt_run_opt *o = tt_run_opt_find(name);
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
        return tt_fail(err, TT_ERR_ARG, "--%s: applies to --optimizer %s only", tt_optim_param_flag(p),
                       tt_optim_kind_list(names, sizeof names, p->kinds, ", ", " or "));
    }
    for (int k = 0; k < TT_OPTIM_N_PARAMS; k++) {
        const int need = tt_optim_params[k].needs ? tt_optim_param_find(tt_optim_params[k].needs) : -1;
        if (given[k] && need >= 0 && (!given[need] || real[need] == 0))
            return tt_fail(err, TT_ERR_ARG, "--%s: needs --%s greater than 0", tt_optim_param_flag(&tt_optim_params[k]),
                           tt_optim_param_flag(&tt_optim_params[need]));
    }
    for (int k = 0; k < TT_OPTIM_N_PARAMS; k++) {
        const tt_optim_param *p = &tt_optim_params[k];
        if (p->type == TT_OPTIM_FLAG) *(int *)tt_optim_param_field(o, p) = given[k]; /* a flag is off unless given */
        else if (given[k]) *(float *)tt_optim_param_field(o, p) = real[k];
    }
    const char *a, *b;
    if (tt_optim_clips_clash(o, &a, &b))
        return tt_fail(err, TT_ERR_ARG, "--%s: not with --%s (Keras's optimizers take one of clipnorm, global_clipnorm "
                       "and clipvalue)", b, a);
    return TT_OK;
}

/* An option the command does not take (its row's cmds), or any unknown one for a command that does not train: one
 * line in the command's words. TT_OK: the command takes it, or set_option will call it unknown. */
static tt_status refuse_option(const char *name, const char *cmd, tt_error *err)
{
    int c = 0;
    while (c < TT_CMD_COUNT && strcmp(g_cmds[c].name, cmd) != 0) c++;
    const tt_run_opt *o = tt_run_opt_find(name);
    const unsigned cmds = o ? o->cmds : optim_option(name) >= 0 ? (unsigned)TT_CMDS_OPTIM : 0;
    if (c == TT_CMD_COUNT || (cmds & 1u << c) || (!cmds && g_cmds[c].runs)) return TT_OK;
    if ((cmds & TT_CMD(ONLY_TRAIN)) && g_cmds[c].runs)
        return tt_fail(err, TT_ERR_ARG, "%s: applies to towertrain train only, not %s", name, cmd);
    if (g_cmds[c].why) return tt_fail(err, TT_ERR_ARG, "%s: %s does not apply (%s)", cmd, name, g_cmds[c].why);
    return tt_fail(err, TT_ERR_ARG, "%s: %s does not apply (see towertrain %s --help)", cmd, name, cmd);
}

/* One option of the table or of the optimizer's, its value read (NULL for a flag). */
static tt_status set_option(cli_parse *p, const char *name, const char *value, const char *cmd, tt_error *err)
{
    const tt_run_opt *o = tt_run_opt_find(name);
    const int k = o ? -1 : optim_option(name);
    tt_status s;
    if (o) {
        s = g_set[o->kind](o, p, value, err);
        p->given_row[o - tt_run_opts] = 1;
    } else if (k >= 0 && tt_optim_params[k].type == TT_OPTIM_REAL)
        s = tt_cli_float(name, value, tt_optim_params[k].lo, tt_optim_params[k].hi, tt_optim_params[k].lo_open,
                         &p->real[k], err);
    else if (k >= 0) s = value ? tt_fail(err, TT_ERR_ARG, "%s: takes no value", name) : TT_OK;
    else return tt_fail(err, TT_ERR_ARG, "%s: unknown option '%s' (see towertrain %s --help)", cmd, name, cmd);
    if (k >= 0) p->given[k] = 1;
    if (s) return s;
    if (value && !*value && strcmp(name, "--log-json") != 0) return tt_fail(err, TT_ERR_ARG, "%s: empty value", name);
    return TT_OK;
}

/* Was the table's option of that name given? */
static int given(const cli_parse *p, const char *name) { return p->given_row[tt_run_opt_find(name) - tt_run_opts]; }

/* What the options need of each other, once all are read. */
static tt_status cli_settle(cli_parse *p, tt_error *err)
{
    tt_run_config *c = p->c;
    const tt_status st = optim_options(p->optimizer, p->given, p->real, &c->optim, err);
    if (st) return st;
    c->lr_given = p->given[tt_optim_param_find("lr")];
    c->data_given = given(p, "--data"); /* not the default: summary and probe then use its shapes */
    if (c->towers > c->batch)
        return tt_fail(err, TT_ERR_ARG, "--towers %zu is more than --batch %zu: every tower needs at least one sample",
                       c->towers, c->batch);
    const char *needs_dir = c->save_every_epoch ? "--save-every-epoch"
                            : c->save_every_steps ? "--save-every-steps"
                            : c->save_best ? "--save-best"
                            : given(p, "--keep") ? "--keep"
                            : NULL;
    if (needs_dir && !c->checkpoint_dir) return tt_fail(err, TT_ERR_ARG, "%s: needs --checkpoint-dir DIR", needs_dir);
    if (c->tensorboard_every_steps && !c->tensorboard)
        return tt_fail(err, TT_ERR_ARG, "--tensorboard-every-steps: needs --tensorboard DIR");
    if (c->save_best && c->val_samples == 0)
        return tt_fail(err, TT_ERR_ARG, "--save-best: needs a validation set (--val-samples is 0)");
    const tt_status cs = tt_run_callbacks_check(c, c->val_samples, err); /* a val_* monitor, likewise */
    if (cs) return cs;
    resume_same(c);
    return TT_OK;
}

tt_status tt_cli_parse_train(int argc, char **argv, int first, tt_run_config *c, const char *cmd,
                             tt_cli_extra_fn extra, void *ctx, int *help, tt_error *err)
{
    cli_parse p = {.c = c};
    *help = 0;
    tt_run_opts_check();
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
