/* test_resume.c — checkpoints as a run uses them (train.c, train_ckpt.c, ckpt_dir.c): --save-every-epoch,
 * --save-every-steps, --save-best, --keep, --resume FILE|DIR, the refusals, and the checkpoints' options in their
 * order; the file format itself is test_checkpoint.c's.
 *
 * Exact resume: 2 epochs straight and 1 epoch + resume + 1 epoch give the same weights to the bit with the same
 * tower count, also from a checkpoint taken mid-epoch (--save-every-steps); with another tower count the resumed run
 * agrees within the N-tower tolerance of test_towers (|dw| <= 2e-6 + 1e-5 |w| per step, loosened to 1e-4 + 1e-3 |w|
 * here for a whole epoch of Adam after the switch). The model is a small cnn with dropout, whose masks depend on the
 * epoch: a resume that lost the epoch would drop other units. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "tt_checkpoint.h"
#include "tt_cli.h"
#include "tt_test.h"
#include "tt_train.h"

static const char *MODEL = "input shape=6,6,1\n"
                           "conv2d filters=3 kernel=3 padding=same activation=relu\n"
                           "maxpool2d pool=2\n"
                           "dropout rate=0.25\n"
                           "flatten\n"
                           "dense units=4\n";

enum { N_TRAIN = 203, N_VAL = 40, BATCH = 32 }; /* 7 steps per epoch, the last one partial */

static tt_dataset g_train, g_val, g_test;
static char g_model_path[512];

static void make_images(tt_dataset *ds, size_t n, uint64_t seed)
{
    tt_test_dataset_zero(ds, n, 6, 6, 4);
    tt_rng r;
    tt_rng_seed(&r, seed, 1);
    for (size_t s = 0; s < n; s++) {
        ds->y[s] = (int32_t)tt_rng_below(&r, 4);
        for (size_t j = 0; j < 36; j++) ds->x[s * 36 + j] = (uint8_t)(tt_rng_below(&r, 128) + 32 * (size_t)ds->y[s] * (j % 4 == (size_t)ds->y[s]));
    }
}

static void setup(void)
{
    make_images(&g_train, N_TRAIN, 1);
    make_images(&g_val, N_VAL, 2);
    make_images(&g_test, 30, 3);
    snprintf(g_model_path, sizeof g_model_path, "%s/tt_resume_model_%d.txt", tt_test_tmp_base(), (int)getpid());
    tt_test_write_str(g_model_path, MODEL);
}

static void teardown(void)
{
    unlink(g_model_path);
    tt_dataset_free(&g_train);
    tt_dataset_free(&g_val);
    tt_dataset_free(&g_test);
}

static void config(tt_run_config *c, size_t towers, size_t epochs)
{
    tt_run_config_defaults(c);
    c->model = g_model_path;
    c->device = "cpu";
    c->towers = towers;
    c->batch = BATCH;
    c->epochs = epochs;
    c->seed = 3;
    c->optim = tt_optim_defaults(TT_OPT_NADAM); /* the most state: two vectors, t, the schedule's product */
    c->progress = TT_PROGRESS_QUIET;
}

/* Runs c; returns the final weights (caller frees) and the run's status. */
static float *run(const tt_run_config *c, size_t *P, tt_status *st, tt_error *err)
{
    tt_run_result *res = (tt_run_result *)tt_calloc(1, sizeof *res);
    *st = tt_run_on(c, &g_train, &g_val, &g_test, NULL, res, err);
    float *w = res->final_params;
    *P = res->n_params;
    tt_free(res);
    return w;
}

static float *run_ok(const tt_run_config *c, size_t *P)
{
    tt_status st;
    tt_error err;
    float *w = run(c, P, &st, &err);
    ck_assert_msg(st == TT_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(w);
    return w;
}

static int exists(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0;
}

/* Periodic checkpoints in dir. */
static size_t count_ckpts(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) n += strncmp(de->d_name, "ckpt-e", 6) == 0;
    closedir(d);
    return n;
}

/* c: epochs of a run that saves a checkpoint after every epoch into dir. */
static void saving(tt_run_config *c, size_t towers, size_t epochs, const char *dir)
{
    config(c, towers, epochs);
    c->checkpoint_dir = dir;
    c->save_every_epoch = 1;
}

/* A fresh dir, one epoch on `towers` towers saved there, and path = that epoch's checkpoint. */
static void first_epoch_saved(size_t towers, char *dir, size_t dlen, char *path, size_t plen)
{
    tt_run_config c;
    size_t P;
    tt_test_tmpdir(dir, dlen);
    saving(&c, towers, 1, dir);
    tt_free(run_ok(&c, &P));
    tt_ckpt_path(path, plen, dir, 1, 7);
    ck_assert_msg(exists(path), "no %s", path);
}

/* The checkpoints' options in their order — the run's own and the options table's at their places (issue 32) — with
 * the options' values as numbers or words. */
START_TEST(test_checkpoint_options_in_order)
{
    char dir[512], path[1024];
    first_epoch_saved(2, dir, sizeof dir, path, sizeof path);
    tt_checkpoint ck;
    tt_error err;
    ck_assert_msg(tt_checkpoint_read(path, NULL, &ck, &err) == TT_OK, "%s", err.msg);
    json_object *o = json_tokener_parse(ck.options);
    ck_assert_ptr_nonnull(o);
    static const char *const keys[] = {"input", "classes", "vocab", "model_text", "layers", "train_samples",
                                       "val_samples", "train_crc32", "epochs", "reduce", "lr_scaling", "base_lr",
                                       "same", "precision", "loss_scale", "early_stopping", "reduce_lr_on_plateau"};
    size_t k = 0;
    json_object_object_foreach(o, key, val) {
        (void)val;
        ck_assert_msg(k < sizeof keys / sizeof keys[0] && strcmp(key, keys[k]) == 0, "options: key %zu is %s", k, key);
        k++;
    }
    ck_assert_uint_eq(k, sizeof keys / sizeof keys[0]);
    json_object *v;
    ck_assert(json_object_object_get_ex(o, "epochs", &v) && json_object_is_type(v, json_type_int));
    ck_assert_int_eq(json_object_get_int(v), 1);
    ck_assert(json_object_object_get_ex(o, "reduce", &v) && strcmp(json_object_get_string(v), "cpu") == 0);
    ck_assert(json_object_object_get_ex(o, "lr_scaling", &v) && strcmp(json_object_get_string(v), "none") == 0);
    json_object_put(o);
    tt_checkpoint_free(&ck);
}
END_TEST

/* 2 epochs straight = 1 epoch, a checkpoint, a resume from it and 1 more; from a file and from the directory. */
START_TEST(test_resume_epoch_boundary_is_exact)
{
    for (size_t towers = 1; towers <= 2; towers++) {
        char dir[512], path[1024];
        tt_run_config c;
        size_t P, P2;
        config(&c, towers, 2);
        float *straight = run_ok(&c, &P);
        first_epoch_saved(towers, dir, sizeof dir, path, sizeof path);
        for (int from_dir = 0; from_dir <= 1; from_dir++) {
            config(&c, towers, 2);
            c.resume = from_dir ? dir : path;
            float *resumed = run_ok(&c, &P2);
            ck_assert_uint_eq(P, P2);
            ck_assert_msg(memcmp(resumed, straight, P * sizeof(float)) == 0,
                          "%zu towers: resumed from %s differs from the straight run", towers, c.resume);
            tt_free(resumed);
        }
        tt_free(straight);
    }
}
END_TEST

/* A checkpoint every 3 steps of the run: mid-epoch ones (steps 3 and 6 of epoch 1, 2 and 5 of epoch 2, ...). A resume
 * from each continues at the next step of its epoch and ends with the straight run's weights. */
START_TEST(test_resume_mid_epoch_is_exact)
{
    char dir[512], path[1024];
    tt_test_tmpdir(dir, sizeof dir);
    tt_run_config c;
    size_t P, P2;
    config(&c, 2, 3);
    float *straight = run_ok(&c, &P);
    config(&c, 2, 3);
    c.checkpoint_dir = dir;
    c.save_every_steps = 3;
    c.keep = 100;
    float *with_saves = run_ok(&c, &P2);
    ck_assert_msg(memcmp(with_saves, straight, P * sizeof(float)) == 0, "saving checkpoints changed the run");
    tt_free(with_saves);
    /* global steps 3, 6 | 9 = epoch 2 step 2, 12 = step 5 | 15 = epoch 3 step 1, 18 = step 4, 21 = the end */
    static const size_t want[][2] = {{1, 3}, {1, 6}, {2, 2}, {2, 5}, {3, 1}, {3, 4}, {3, 7}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        tt_ckpt_path(path, sizeof path, dir, want[k][0], want[k][1]);
        ck_assert_msg(exists(path), "no %s", path);
    }
    ck_assert_uint_eq(count_ckpts(dir), 7);
    for (size_t k = 0; k + 1 < sizeof want / sizeof want[0]; k++) {
        tt_ckpt_path(path, sizeof path, dir, want[k][0], want[k][1]);
        config(&c, 2, 3);
        c.resume = path;
        float *resumed = run_ok(&c, &P2);
        ck_assert_msg(memcmp(resumed, straight, P * sizeof(float)) == 0, "resumed from %s: other weights", path);
        tt_free(resumed);
    }
    tt_free(straight);
}
END_TEST

/* The recipes (issue 34): a schedule with its own warm-up, Goyal's warm-up over --lr-scaling linear, weight decay and
 * a global norm clip. A resume from any mid-run checkpoint takes every later step at the rate the straight run did,
 * to the bit; a resume with another schedule or without the warm-up is refused, naming both. */
static void recipe(tt_run_config *c)
{
    config(c, 2, 3);
    tt_error err;
    ck_assert(tt_lr_schedule_parse("--lr-schedule", "cosine:15:0.1:0.004:4", &c->lr_schedule, &err) == TT_OK);
    c->lr_scaling = TT_LR_LINEAR;
    c->warmup_epochs = 1;
    c->optim.weight_decay = 0.01f;
    c->optim.global_clipnorm = 0.5f;
}

START_TEST(test_resume_recipes_exact)
{
    char dir[512], path[1024];
    tt_test_tmpdir(dir, sizeof dir);
    tt_run_config c;
    size_t P, P2;
    recipe(&c);
    float *straight = run_ok(&c, &P);
    recipe(&c);
    c.checkpoint_dir = dir;
    c.save_every_steps = 5;
    c.keep = 100;
    tt_free(run_ok(&c, &P2));
    static const size_t at[][2] = {{1, 5}, {2, 3}, {3, 1}};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        tt_ckpt_path(path, sizeof path, dir, at[k][0], at[k][1]);
        recipe(&c);
        c.resume = path;
        float *resumed = run_ok(&c, &P2);
        ck_assert_msg(memcmp(resumed, straight, P * sizeof(float)) == 0, "resumed from %s: other weights", path);
        tt_free(resumed);
    }
    tt_free(straight);
    tt_ckpt_path(path, sizeof path, dir, 2, 3);
    tt_status st;
    tt_error err;
    recipe(&c);
    c.resume = path;
    ck_assert(tt_lr_schedule_parse("--lr-schedule", "cosine:15:0.1", &c.lr_schedule, &err) == TT_OK);
    ck_assert_ptr_null(run(&c, &P2, &st, &err));
    ck_assert_msg(st == TT_ERR_ARG && strstr(err.msg, "lr_schedule cosine:15:0.1:0.004:4 x 2") &&
                      strstr(err.msg, "lr_schedule cosine:15:0.1 x 2"), "%s", err.msg);
    recipe(&c);
    c.resume = path;
    c.warmup_epochs = 2;
    ck_assert_ptr_null(run(&c, &P2, &st, &err));
    ck_assert_msg(st == TT_ERR_ARG && strstr(err.msg, "warm-up 7 steps") && strstr(err.msg, "warm-up 14 steps"), "%s",
                  err.msg);
}
END_TEST

/* Goyal's warm-up counts optimizer steps: --sync async applies each tower's gradient alone (2 a step here), so two
 * epochs of warm-up end at the end of epoch 2, not of epoch 1; the rate climbs every epoch and reaches the scaled one. */
START_TEST(test_warmup_counts_applies)
{
    for (int async = 0; async <= 1; async++) {
        tt_run_config c;
        config(&c, 2, 3);
        c.optim = tt_optim_defaults(TT_OPT_SGD);
        c.optim.lr = 0.01f;
        c.lr_scaling = TT_LR_LINEAR;
        c.warmup_epochs = 2;
        if (async) c.sync.kind = TT_SYNC_ASYNC;
        tt_run_result *res = (tt_run_result *)tt_calloc(1, sizeof *res);
        tt_error err;
        ck_assert_msg(tt_run_on(&c, &g_train, &g_val, &g_test, NULL, res, &err) == TT_OK, "%s", err.msg);
        const float *lr[3] = {&res->epochs[0].lr, &res->epochs[1].lr, &res->epochs[2].lr};
        ck_assert_msg(*lr[0] > 0.01f && *lr[0] < 0.016f && *lr[1] > *lr[0] && *lr[1] < 0.02f && *lr[2] == 0.02f,
                      "%s: the rates after epochs 1, 2, 3 are %.9g, %.9g, %.9g", async ? "async" : "bsp", *lr[0],
                      *lr[1], *lr[2]);
        tt_free(res->final_params);
        tt_free(res);
    }
}
END_TEST

/* Another tower count: the same run within the N-tower tolerance, not to the bit. */
START_TEST(test_resume_other_towers_within_tolerance)
{
    char dir[512], path[1024];
    tt_run_config c;
    size_t P, P2;
    config(&c, 1, 2);
    float *straight = run_ok(&c, &P);
    first_epoch_saved(1, dir, sizeof dir, path, sizeof path);
    config(&c, 3, 2);
    c.resume = path;
    float *resumed = run_ok(&c, &P2);
    double worst = 0;
    for (size_t i = 0; i < P; i++)
        worst = fmax(worst, fabs((double)resumed[i] - straight[i]) / (1e-4 + 1e-3 * fabs(straight[i])));
    ck_assert_msg(worst <= 1.0, "3 towers after a 1-tower checkpoint: |dw| is %g of the tolerance", worst);
    tt_free(resumed);
    tt_free(straight);
}
END_TEST

/* --keep N leaves the newest N periodic checkpoints, and never touches other files. */
START_TEST(test_keep_prunes_oldest)
{
    char dir[512], path[1024], other[1024];
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(other, sizeof other, "%s/notes.txt", dir);
    tt_test_write_str(other, "mine\n");
    tt_run_config c;
    size_t P;
    config(&c, 1, 3);
    c.checkpoint_dir = dir;
    c.save_every_steps = 2;
    c.keep = 2;
    tt_free(run_ok(&c, &P));
    ck_assert_uint_eq(count_ckpts(dir), 2);
    tt_ckpt_path(path, sizeof path, dir, 3, 7); /* the end of training (global 21: no multiple of 2) */
    ck_assert_msg(exists(path), "no checkpoint at the end of training");
    tt_ckpt_path(path, sizeof path, dir, 3, 6); /* global 20 = epoch 3 step 6 */
    ck_assert_msg(exists(path), "the newest but one is gone");
    ck_assert(exists(other));
}
END_TEST

/* --save-best val_loss: best.safetensors is written (and the end of training's periodic checkpoint). */
START_TEST(test_save_best)
{
    char dir[512], path[1024];
    tt_test_tmpdir(dir, sizeof dir);
    tt_run_config c;
    size_t P;
    config(&c, 1, 2);
    c.checkpoint_dir = dir;
    c.save_best = TT_SAVE_BEST_VAL_LOSS;
    tt_free(run_ok(&c, &P));
    snprintf(path, sizeof path, "%s/best.safetensors", dir);
    ck_assert_msg(exists(path), "no best.safetensors");
    ck_assert_uint_eq(count_ckpts(dir), 1); /* the end of training */
}
END_TEST

/* --save-best with periodic checkpoints: each one carries the best value up to and including its epoch (the value
 * best.safetensors was written with), so a run resumed from it does not take a worse epoch for a better one. */
START_TEST(test_periodic_carries_best)
{
    char dir[512], path[1024], best[1024];
    tt_test_tmpdir(dir, sizeof dir);
    tt_run_config c;
    size_t P;
    saving(&c, 1, 3, dir);
    c.keep = 10;
    c.save_best = TT_SAVE_BEST_VAL_LOSS;
    tt_free(run_ok(&c, &P));
    snprintf(best, sizeof best, "%s/best.safetensors", dir);
    tt_checkpoint b, e;
    tt_error err;
    ck_assert_msg(tt_checkpoint_read(best, NULL, &b, &err) == TT_OK, "%s", err.msg);
    tt_ckpt_path(path, sizeof path, dir, b.epoch, 7);
    ck_assert_msg(tt_checkpoint_read(path, NULL, &e, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(b.best == e.best, "epoch %llu improved the best to %.17g, its periodic checkpoint says %.17g",
                  (unsigned long long)b.epoch, b.best, e.best);
    tt_checkpoint_free(&b);
    tt_checkpoint_free(&e);
}
END_TEST

/* A directory holding checkpoints beyond where a run starts (another run's) is refused before training: --keep would
 * delete this run's checkpoints as it writes them and --resume DIR would take the other run's. */
START_TEST(test_dir_with_newer_checkpoints)
{
    char dir[512], path[1024], copy[1024];
    tt_test_tmpdir(dir, sizeof dir);
    tt_run_config c;
    size_t P;
    saving(&c, 1, 3, dir);
    c.keep = 10;
    tt_free(run_ok(&c, &P));
    tt_ckpt_path(path, sizeof path, dir, 1, 7);
    snprintf(copy, sizeof copy, "%s.copy", dir);
    ck_assert_int_eq(rename(path, copy), 0); /* epoch 1's, outside the directory */
    for (int k = 0; k < 2; k++) {
        saving(&c, 1, 2, dir);
        c.resume = k ? copy : NULL;
        tt_status st;
        tt_error err;
        tt_free(run(&c, &P, &st, &err));
        ck_assert_msg(st == TT_ERR_ARG, "%s: accepted", k ? "a resume from epoch 1" : "a fresh run");
        ck_assert_msg(strstr(err.msg, "beyond where this run starts") && strstr(err.msg, "ckpt-e000003-s000000007"),
                      "%s", err.msg);
    }
    saving(&c, 1, 4, dir); /* from the directory's newest: nothing beyond it */
    c.resume = dir;
    tt_free(run_ok(&c, &P));
    remove(copy);
}
END_TEST


/* Issue 18. A header bit-flip sweep over a real checkpoint (a run's, with its model text, options and layers): every
 * single-bit flip of the length prefix and the header is refused, with the model and without (docs/checkpoints.md:
 * no flip is harmless). The flips of the tensors' bytes: test_checkpoint's test_flipped_data_byte. */
START_TEST(test_header_bit_flips_all_refused)
{
    char dir[512], path[1024];
    first_epoch_saved(1, dir, sizeof dir, path, sizeof path);
    size_t len;
    uint8_t *b = tt_test_read_file(path, &len);
    const size_t n = 8 + (size_t)tt_test_le64(b);
    tt_model m;
    tt_error err;
    const tt_model_input none = {{0, {0, 0, 0, 0}}, 0, 0};
    ck_assert_msg(tt_model_parse(&m, MODEL, "t", &none, &err) == TT_OK, "%s", err.msg);
    tt_checkpoint ck;
    ck_assert_msg(tt_checkpoint_parse(b, len, "ck", &m, &ck, &err) == TT_OK, "%s", err.msg);
    tt_checkpoint_free(&ck);
    size_t accepted = 0, flips = 0;
    for (size_t i = 0; i < n; i++)
        for (int bit = 0; bit < 8; bit++, flips++) {
            b[i] ^= (uint8_t)(1u << bit);
            if (tt_checkpoint_parse(b, len, "ck", &m, &ck, &err) == TT_OK ||
                tt_checkpoint_parse(b, len, "ck", NULL, &ck, &err) == TT_OK) {
                if (accepted++ < 5) fprintf(stderr, "accepted: byte %zu bit %d\n", i, bit);
                tt_checkpoint_free(&ck);
            }
            b[i] ^= (uint8_t)(1u << bit);
        }
    ck_assert_msg(accepted == 0, "%zu of %zu header bit flips accepted", accepted, flips);
    if (getenv("TT_SWEEP_SAY")) fprintf(stderr, "header sweep: %zu bytes, %zu flips, 0 accepted\n", n, flips);
    ck_assert_uint_ge(flips, 8 * 1000); /* a real header: model text, options, layers, 3 x 4 tensors */
    free(b);
}
END_TEST

/* A checkpoint of the run at `path` rewritten through the writer with other options, model description or weights
 * (read against MODEL first): a valid file that says what the test wants it to say. */
static void rewrite(const char *path, const char *desc, const char *options, int nan_at)
{
    tt_model m;
    tt_error err;
    const tt_model_input none = {{0, {0, 0, 0, 0}}, 0, 0};
    ck_assert_msg(tt_model_parse(&m, MODEL, "t", &none, &err) == TT_OK, "%s", err.msg);
    tt_checkpoint ck;
    ck_assert_msg(tt_checkpoint_read(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
    tt_free(ck.model_desc);
    tt_free(ck.options);
    ck.model_desc = desc ? strdup(desc) : NULL;
    ck.options = options ? strdup(options) : NULL;
    if (nan_at >= 1000000) ck.slots[1][nan_at - 1000000] = -1.0f; /* a negative second moment */
    else if (nan_at >= 0) ck.slots[1][nan_at] = NAN;
    if (nan_at < -1) ck.params[-nan_at] = INFINITY;
    ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
    free(ck.model_desc);
    free(ck.options);
    ck.model_desc = ck.options = NULL;
    tt_checkpoint_free(&ck);
}

/* The options of a checkpoint at path (the writer's text, tt_malloc'd), with `from` replaced by `to`. */
static char *options_edited(const char *path, const char *from, const char *to)
{
    tt_checkpoint ck;
    tt_error err;
    ck_assert_msg(tt_checkpoint_read(path, NULL, &ck, &err) == TT_OK, "%s", err.msg);
    const char *at = strstr(ck.options, from);
    ck_assert_msg(at != NULL, "'%s' not in %s", from, ck.options);
    char *o = (char *)malloc(strlen(ck.options) + strlen(to) + 1);
    sprintf(o, "%.*s%s%s", (int)(at - ck.options), ck.options, to, at + strlen(from));
    tt_checkpoint_free(&ck);
    return o;
}

/* A run resumed from path with model text `model` (NULL: MODEL) refused with `want` (NULL: accepted). */
static void resume_expect(const char *path, const char *model, int weights_only, const char *want)
{
    char mp[1024];
    snprintf(mp, sizeof mp, "%s.other.txt", path);
    tt_test_write_str(mp, model ? model : MODEL);
    tt_run_config c;
    config(&c, 1, 2);
    c.model = mp;
    c.resume = path;
    c.resume_weights_only = weights_only;
    size_t P;
    tt_status st;
    tt_error err;
    tt_free(run(&c, &P, &st, &err));
    unlink(mp);
    if (!want) {
        ck_assert_msg(st == TT_OK, "refused: %s", err.msg);
        return;
    }
    ck_assert_msg(st != TT_OK, "accepted; expected '%s'", want);
    ck_assert_msg(strstr(err.msg, want) != NULL, "'%s' does not say '%s'", err.msg, want);
    /* a model that does not fit the checkpoint is a file problem (exit 1), as a shape mismatch is (README's table) */
    ck_assert_msg(tt_status_exit_code(st) == 1, "exit %d, not 1: %s", tt_status_exit_code(st), err.msg);
    ck_assert_msg(strchr(err.msg, '\n') == NULL, "more than one line: %s", err.msg);
}

/* The model, not just its shapes: the same tensors with a ReLU removed, a dropout added or removed, another rate,
 * another activation, are refused naming the first layer that differs; --resume-weights-only takes them on purpose. */
START_TEST(test_resume_checks_the_model)
{
    char dir[512], path[1024];
    first_epoch_saved(1, dir, sizeof dir, path, sizeof path);
    static const struct {
        const char *model, *want;
    } cases[] = {
        {"input shape=6,6,1\nconv2d filters=3 kernel=3 padding=same\nmaxpool2d pool=2\ndropout rate=0.25\nflatten\n"
         "dense units=4\n",
         "differs at layer 2: the checkpoint's is 'relu', this run's is 'maxpool2d pool=2,2 strides=pool padding=valid'"},
        {"input shape=6,6,1\nconv2d filters=3 kernel=3 padding=same activation=relu\nmaxpool2d pool=2\nflatten\n"
         "dense units=4\n",
         "differs at layer 4: the checkpoint's is 'dropout rate=0.25', this run's is 'flatten'"},
        {"input shape=6,6,1\nconv2d filters=3 kernel=3 padding=same activation=relu\nmaxpool2d pool=2\n"
         "dropout rate=0.5\nflatten\ndense units=4\n",
         "the checkpoint's is 'dropout rate=0.25', this run's is 'dropout rate=0.5'"},
        {"input shape=6,6,1\nconv2d filters=3 kernel=3 padding=same activation=relu\nmaxpool2d pool=2\n"
         "dropout rate=0.25\nflatten\ndense units=4\ndropout rate=0.1\n",
         "differs at layer 7: the checkpoint's is '(none: it has fewer)', this run's is 'dropout rate=0.1'"},
        {"input shape=6,6,1\nconv2d filters=3 kernel=3 padding=same activation=relu\nmaxpool2d pool=2\n"
         "dropout rate=0.25\nflatten\ndense units=4 activation=softmax\n",
         "the checkpoint's is '(none: it has fewer)', this run's is 'softmax'"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        resume_expect(path, cases[k].model, 0, cases[k].want);
        resume_expect(path, cases[k].model, 0, "or --resume-weights-only to take only its weights");
    }
    resume_expect(path, NULL, 0, NULL); /* the same model: resumed */
    /* on purpose: the weights only, into a model with another dropout (a fresh optimizer, from epoch 1) */
    resume_expect(path, cases[2].model, 1, NULL);
    /* the same bytes read in another shape: 2x18 instead of 6x6 images keep the data's CRC-32, and with padding=same
     * and a 2x2 pool every weight's shape (3x3x3 = 1x9x3 = 27 inputs to the dense layer) */
    const tt_shape sq = g_train.shape, wide = {3, {2, 18, 1}};
    g_train.shape = g_val.shape = g_test.shape = wide;
    resume_expect(path, "input shape=2,18,1\nconv2d filters=3 kernel=3 padding=same activation=relu\nmaxpool2d pool=2\n"
                  "dropout rate=0.25\nflatten\ndense units=4\n", 0,
                  "the model's input differs: the checkpoint's is 6x6x1, this run's is 2x18x1");
    g_train.shape = g_val.shape = g_test.shape = sq;
    /* a checkpoint's "layers" cannot be left out or renamed to skip the check */
    char *o = options_edited(path, "\"layers\":", "\"layerz\":");
    rewrite(path, NULL, o, -1);
    free(o);
    resume_expect(path, NULL, 0, "options: unknown key 'layerz'");
}
END_TEST

/* Weights-only keeps nothing else: not the position (from epoch 1), not the optimizer state (Nadam's t from 0): the
 * same weights as a fresh run started from the checkpoint's weights, which a differently seeded fresh run is not. */
START_TEST(test_resume_weights_only_starts_fresh)
{
    char dir[512], path[1024];
    first_epoch_saved(1, dir, sizeof dir, path, sizeof path);
    tt_run_config c;
    config(&c, 1, 1);
    c.resume = path;
    c.resume_weights_only = 1;
    c.seed = 9; /* another seed and batch: options of its own */
    c.batch = 16;
    size_t P;
    float *a = run_ok(&c, &P); /* one epoch: epoch 1 again, not "nothing to train" */
    c.resume = NULL;
    c.resume_weights_only = 0;
    float *b = run_ok(&c, &P);
    int same = 1;
    for (size_t i = 0; i < P; i++) same &= a[i] == b[i];
    ck_assert_msg(!same, "--resume-weights-only did not start from the checkpoint's weights");
    tt_free(a);
    tt_free(b);
}
END_TEST

/* Typed options: a null, a number where a string belongs, a key left out — one line naming the key, never a crash
 * (the strcmp on NULL of issue 18); NaN or Inf in a weight or an optimizer slot is refused, naming tensor and index,
 * and so is a negative second moment. */
START_TEST(test_resume_refuses_bad_values)
{
    char dir[512], path[1024];
    first_epoch_saved(1, dir, sizeof dir, path, sizeof path);
    size_t len;
    uint8_t *orig = tt_test_read_file(path, &len);
    static const struct {
        const char *from, *to, *want;
    } cases[] = {
        {"\"train_crc32\":\"", "\"train_crc32\":null,\"x\":\"", "options: key 'train_crc32' is null, not a string"},
        {"\"train_samples\":203", "\"train_samples\":\"203\"", "key 'train_samples' is a string, not an unsigned"},
        {"\"train_samples\":203", "\"train_samples\":-203", "key 'train_samples' is an integer, not an unsigned"},
        {"\"val_samples\":40,", "", "its options have no key 'val_samples'"},
        {"\"input\":[", "\"input\":[0", "options is not JSON: a number with a leading zero"},
        {"{\"input\"", "{\"classes\":4,\"input\"", "options repeats a key"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tt_test_write(path, orig, len);
        char *o = options_edited(path, cases[k].from, cases[k].to);
        if (k == 0) { /* "x": the rest of the old value, an unknown key: the null must be refused first */
            char *x = strstr(o, ",\"x\":\"");
            memmove(x, strchr(x + 6, '"') + 1, strlen(strchr(x + 6, '"') + 1) + 1);
        }
        rewrite(path, NULL, o, -1);
        free(o);
        resume_expect(path, NULL, 0, cases[k].want);
    }
    tt_test_write(path, orig, len);
    rewrite(path, NULL, NULL, 5); /* the velocity (Nadam's second slot), element 5 */
    resume_expect(path, NULL, 0, "tensor optimizer/velocity/conv2d/kernel holds NaN at index 5 (1 non-finite value");
    tt_test_write(path, orig, len);
    rewrite(path, NULL, NULL, -33); /* weight 33: conv2d/bias is 27..29, dense/kernel from 30 */
    resume_expect(path, NULL, 0, "tensor dense/kernel holds Inf at index 3 (1 non-finite value in all)");
    tt_test_write(path, orig, len);
    rewrite(path, NULL, NULL, 1000000 + 7); /* velocity element 7 = -1: its square root would be NaN */
    resume_expect(path, NULL, 0, "tensor optimizer/velocity/conv2d/kernel holds a negative value (-1) at index 7, "
                                 "where only a variance or a mean square can be (1 negative value in all)");
    free(orig);
}
END_TEST

/* eval/predict on the output of tt_cmd_predict with stderr in a file: its exit code and first stderr line. */
static int predict_cli(const char *ck, const char *input, const char *model, char *line, size_t len)
{
    char tt[] = "towertrain", a0[] = "predict", a1[] = "--device", a2[] = "cpu", a3[] = "--checkpoint", a5[] = "--input", a7[] = "--model";
    char *argv[] = {tt, a0, a1, a2, a3, (char *)ck, a5, (char *)input, a7, (char *)model, NULL};
    char errp[1024];
    snprintf(errp, sizeof errp, "%s.stderr", input);
    fflush(stderr);
    const int saved = dup(2), fd = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    FILE *devnull = freopen("/dev/null", "w", stdout);
    const int code = tt_cmd_predict(model ? 10 : 8, argv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    (void)devnull;
    size_t n;
    char *t = (char *)tt_test_read_file(errp, &n);
    snprintf(line, len, "%.*s", (int)n, t);
    free(t);
    return code;
}

/* A checkpoint is data: one whose model says file:PATH without the text never makes predict (or eval: the same
 * load_model) open PATH — it needs --model, exit 1; a "builtin:" name that is a path is no built-in model. */
START_TEST(test_checkpoint_never_names_a_file)
{
    char dir[512], path[1024], secret[1024], npy[1024], line[4096], model[1024];
    first_epoch_saved(1, dir, sizeof dir, path, sizeof path);
    snprintf(secret, sizeof secret, "%s/secret.txt", dir);
    tt_test_write_str(secret, "SECRET-FIRST-LINE dense units=4\n");
    snprintf(npy, sizeof npy, "%s/x.npy", dir);
    unsigned char buf[128 + 72];
    memset(buf, ' ', 128);
    memcpy(buf, "\x93NUMPY\x01\x00\x76\x00", 10);
    const int hl = snprintf((char *)buf + 10, 118, "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 6, 6), }");
    buf[10 + hl] = ' ';
    buf[127] = '\n';
    memset(buf + 128, 7, 72);
    tt_test_write(npy, buf, sizeof buf);
    const char *opts = "{\"input\":[6,6,1],\"classes\":4,\"vocab\":0}";
    char desc[1100];
    for (int k = 0; k < 2; k++) {
        snprintf(desc, sizeof desc, "%s:%s", k ? "builtin" : "file", secret);
        rewrite(path, desc, opts, -1);
        const int code = predict_cli(path, npy, NULL, line, sizeof line);
        ck_assert_msg(code == 1, "exit %d: %s", code, line);
        ck_assert_msg(strstr(line, k ? "is not a built-in model" : "holds no model text") && strstr(line, "give --model"),
                      "%s", line);
        ck_assert_msg(!strstr(line, "SECRET-FIRST-LINE"), "the named file was opened: %s", line);
        ck_assert_msg(strchr(line, '\n') == strrchr(line, '\n'), "more than one line: %s", line);
    }
    /* with --model it works: the user named the file */
    snprintf(model, sizeof model, "%s/m.txt", dir);
    tt_test_write_str(model, MODEL);
    const int code = predict_cli(path, npy, model, line, sizeof line);
    ck_assert_msg(code == 0, "exit %d: %s", code, line);
    /* NaN weights: predict warns (one notice line naming the tensor) and still predicts */
    rewrite(path, "builtin:none", opts, -31);
    const int c2 = predict_cli(path, npy, model, line, sizeof line);
    ck_assert_msg(c2 == 0 && strstr(line, "tensor dense/kernel holds Inf at index 1") && strstr(line, "notice"),
                  "exit %d: %s", c2, line);
}
END_TEST

/* Refusals: one line naming the thing. */
START_TEST(test_resume_refusals)
{
    char dir[512], path[1024], other_model[1024];
    tt_run_config c;
    size_t P;
    first_epoch_saved(1, dir, sizeof dir, path, sizeof path);
    struct {
        const char *what, *want;
    } cases[] = {{"batch", "--batch"}, {"seed", "--seed"}, {"optimizer", "--optimizer"}, {"epochs", "(a no-op)"},
                 {"model", "conv2d/kernel"}, {"missing", "No such file"}, {"empty dir", "no checkpoint"},
                 {"other data, as many samples", "trained on other training data"},
                 {"fewer samples, as many steps", "trained on 203 training samples, this run has 200"}};
    snprintf(other_model, sizeof other_model, "%s/other.txt", dir);
    tt_test_write_str(other_model, "input shape=6,6,1\nconv2d filters=5 kernel=3 padding=same\nflatten\ndense units=4\n");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char empty[512], missing[1024];
        config(&c, 1, 2);
        c.resume = path;
        switch (k) {
        case 0: c.batch = 16; break;
        case 1: c.seed = 4; break;
        case 2: c.optim = tt_optim_defaults(TT_OPT_ADAM); break;
        case 3: c.epochs = 1; break;
        case 4: c.model = other_model; break;
        case 5:
            snprintf(missing, sizeof missing, "%s/nope.safetensors", dir);
            c.resume = missing;
            break;
        case 6:
            tt_test_tmpdir(empty, sizeof empty);
            c.resume = empty;
            break;
        case 7: g_train.y[0] = (g_train.y[0] + 1) % 4; break; /* one label changed */
        case 8: g_train.n = 200; break;                      /* still 7 steps of 32 */
        }
        tt_status st;
        tt_error err;
        float *w = run(&c, &P, &st, &err);
        tt_free(w);
        if (k == 7) g_train.y[0] = (g_train.y[0] + 3) % 4;
        if (k == 8) g_train.n = N_TRAIN;
        if (k == 3) { /* the checkpoint's epoch is the last: a finished run, resumed as a clean no-op (issue 18) */
            ck_assert_msg(st == TT_OK, "a finished run resumed: '%s'", err.msg);
            continue;
        }
        ck_assert_msg(st != TT_OK, "%s: accepted", cases[k].what);
        ck_assert_msg(strstr(err.msg, cases[k].want) != NULL, "%s: '%s' does not say %s", cases[k].what, err.msg,
                      cases[k].want);
        ck_assert_msg(strchr(err.msg, '\n') == NULL, "%s: more than one line", cases[k].what);
    }
}
END_TEST

/* --checkpoint-dir must be a writable directory, checked before training; a missing one is created. */
START_TEST(test_checkpoint_dir_checked_first)
{
    char dir[512], file[1024], fresh[1024];
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/a-file", dir);
    tt_test_write_str(file, "x");
    tt_run_config c;
    size_t P;
    tt_status st;
    tt_error err;
    saving(&c, 1, 1, file);
    tt_free(run(&c, &P, &st, &err));
    ck_assert_msg(st != TT_OK && strstr(err.msg, "not a directory"), "%s", err.msg);
    snprintf(fresh, sizeof fresh, "%s/new", dir);
    c.checkpoint_dir = fresh;
    tt_free(run_ok(&c, &P));
    ck_assert_uint_eq(count_ckpts(fresh), 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("resume");
    TCase *tc = tcase_create("runs");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_checkpoint_options_in_order);
    tcase_add_test(tc, test_resume_epoch_boundary_is_exact);
    tcase_add_test(tc, test_warmup_counts_applies);
    tcase_add_test(tc, test_resume_recipes_exact);
    tcase_add_test(tc, test_resume_mid_epoch_is_exact);
    tcase_add_test(tc, test_resume_other_towers_within_tolerance);
    tcase_add_test(tc, test_keep_prunes_oldest);
    tcase_add_test(tc, test_save_best);
    tcase_add_test(tc, test_resume_refusals);
    tcase_add_test(tc, test_periodic_carries_best);
    tcase_add_test(tc, test_dir_with_newer_checkpoints);
    tcase_add_test(tc, test_checkpoint_dir_checked_first);
    tcase_add_test(tc, test_header_bit_flips_all_refused);
    tcase_add_test(tc, test_resume_checks_the_model);
    tcase_add_test(tc, test_resume_weights_only_starts_fresh);
    tcase_add_test(tc, test_resume_refuses_bad_values);
    tcase_add_test(tc, test_checkpoint_never_names_a_file);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
