/* test_resume_state.c — what --resume carries over besides the weights and the optimizer's vectors, checked through
 * runs (tt_run_on), not through train.c's internals:
 * - the best metric behind best.safetensors (--save-best): a checkpoint's "best" is edited to a value no epoch can
 *   beat, then to one every epoch beats; the resumed run must leave best.safetensors alone in the first case and
 *   rewrite it with its own epoch in the second — for val_loss (lower is better) and val_accuracy (higher);
 * - the options that depend on the job's size: --lr-scaling linear multiplies --lr by the towers, the checkpoint
 *   holds the rate it trained with, and a resume whose rate differs (other towers, or the scaling switched off) is
 *   refused with a line naming the rate and the scaling, while the same job resumes to the bit; and a checkpoint
 *   whose epochs have another number of steps than this run's is refused.
 * Not for: exact resumes and the other refusals (test_resume.c) or the file format (test_checkpoint.c). */
#include <dirent.h>
#include <sys/stat.h>

#include "tt_checkpoint.h"
#include "tt_test.h"
#include "tt_train.h"

static const char *MODEL = "dense units=6 activation=relu\ndense units=3\n";

enum { N_TRAIN = 60, N_VAL = 20, DIM = 8, CLASSES = 3, BATCH = 16 }; /* 4 steps per epoch, the last one partial */

static tt_dataset g_train, g_val, g_test;
static char g_model_path[512];

static void setup(void)
{
    tt_test_dataset(&g_train, N_TRAIN, DIM, CLASSES, 1);
    tt_test_dataset(&g_val, N_VAL, DIM, CLASSES, 2);
    tt_test_dataset(&g_test, 10, DIM, CLASSES, 3);
    snprintf(g_model_path, sizeof g_model_path, "%s/tt_resume_state_model_%d.txt", tt_test_tmp_base(), (int)getpid());
    tt_test_write_str(g_model_path, MODEL);
}

static void teardown(void)
{
    unlink(g_model_path);
    tt_dataset_free(&g_train);
    tt_dataset_free(&g_val);
    tt_dataset_free(&g_test);
}

static void config(tt_run_config *c, size_t towers, size_t epochs, const char *dir)
{
    tt_run_config_defaults(c);
    c->model = g_model_path;
    c->device = "cpu";
    c->towers = towers;
    c->batch = BATCH;
    c->epochs = epochs;
    c->seed = 5;
    c->optim = tt_optim_defaults(TT_OPT_ADAM);
    c->progress = TT_PROGRESS_QUIET;
    c->checkpoint_dir = dir;
    c->save_every_epoch = 1;
    c->keep = 10;
}

/* Runs c; the final weights (caller frees; NULL on failure) and the status. */
static float *run(const tt_run_config *c, tt_status *st, tt_error *err)
{
    tt_run_result *res = (tt_run_result *)tt_calloc(1, sizeof *res);
    *st = tt_run_on(c, &g_train, &g_val, &g_test, NULL, res, err);
    float *w = res->final_params;
    tt_free(res);
    return w;
}

static float *run_ok(const tt_run_config *c)
{
    tt_status st;
    tt_error err;
    float *w = run(c, &st, &err);
    ck_assert_msg(st == TT_OK, "%s", err.msg);
    return w;
}

/* The model the checkpoints hold, to read and rewrite them. */
static void model(tt_model *m)
{
    tt_error err;
    tt_model_input in = {tt_shape1(DIM), CLASSES, 0};
    ck_assert_msg(tt_model_parse(m, MODEL, "model.txt", &in, &err) == TT_OK, "%s", err.msg);
}

static void read_ck(const char *path, tt_checkpoint *ck)
{
    tt_model m;
    tt_error err;
    model(&m);
    ck_assert_msg(tt_checkpoint_read(path, &m, ck, &err) == TT_OK, "%s: %s", path, err.msg);
}

/* Rewrites the checkpoint at path with its best metric and its steps per epoch replaced (the rest as it was). */
static void edit_ck(const char *path, double best, uint64_t steps_per_epoch)
{
    tt_model m;
    tt_checkpoint ck;
    tt_error err;
    model(&m);
    read_ck(path, &ck);
    ck.best = best;
    ck.steps_per_epoch = steps_per_epoch;
    ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s: %s", path, err.msg);
    tt_checkpoint_free(&ck);
}

static uint8_t *file_bytes(const char *path, size_t *n) { return tt_test_read_file(path, n); }

/* One epoch saved with --save-best `mode` into a fresh dir; then, for a best value no epoch beats and for one every
 * epoch beats, a resume for a second epoch: best.safetensors stays as epoch 1 wrote it, or is epoch 2's. */
static void check_best_carried(tt_save_best mode, double unbeatable, double beaten)
{
    char dir[512], p1[1024], p2[1024], best[1024];
    tt_test_tmpdir(dir, sizeof dir);
    tt_run_config c;
    config(&c, 1, 1, dir);
    c.save_best = mode;
    tt_free(run_ok(&c));
    tt_ckpt_path(p1, sizeof p1, dir, 1, 4);
    tt_ckpt_path(p2, sizeof p2, dir, 2, 4);
    snprintf(best, sizeof best, "%s/best.safetensors", dir);
    size_t n0, n1;
    uint8_t *before = file_bytes(best, &n0);
    for (int k = 0; k < 2; k++) {
        const double b = k ? beaten : unbeatable;
        edit_ck(p1, b, 4);
        remove(p2); /* the previous resume's: a directory holding checkpoints beyond the start is refused */
        config(&c, 1, 2, dir);
        c.save_best = mode;
        c.resume = p1;
        tt_free(run_ok(&c));
        tt_checkpoint e2, bk;
        read_ck(p2, &e2);
        read_ck(best, &bk);
        if (k == 0) {
            uint8_t *after = file_bytes(best, &n1);
            ck_assert_msg(n0 == n1 && memcmp(before, after, n0) == 0 && bk.epoch == 1,
                          "mode %d: resumed with best %g, best.safetensors was rewritten by epoch %llu (best %g)",
                          (int)mode, b, (unsigned long long)bk.epoch, bk.best);
            ck_assert_msg(e2.best == b, "mode %d: epoch 2's checkpoint carries best %.17g, the resumed one was %.17g",
                          (int)mode, e2.best, b);
            free(after);
        } else {
            ck_assert_msg(bk.epoch == 2 && bk.best != b && isfinite(bk.best),
                          "mode %d: resumed with best %g, which epoch 2 beats: best.safetensors is epoch %llu's (best "
                          "%g)", (int)mode, b, (unsigned long long)bk.epoch, bk.best);
            ck_assert_msg(e2.best == bk.best, "mode %d: epoch 2's checkpoint carries best %.17g, best.safetensors %.17g",
                          (int)mode, e2.best, bk.best);
        }
        tt_checkpoint_free(&e2);
        tt_checkpoint_free(&bk);
    }
    free(before);
}

START_TEST(test_resume_keeps_best_val_loss) { check_best_carried(TT_SAVE_BEST_VAL_LOSS, -1.0, 1e30); }
END_TEST

START_TEST(test_resume_keeps_best_val_accuracy) { check_best_carried(TT_SAVE_BEST_VAL_ACCURACY, 2.0, -1.0); }
END_TEST

/* --lr-scaling linear on 2 towers: the checkpoint holds 2 x --lr; a resume on 1 tower, or without the scaling, would
 * train at another rate and is refused; the same job resumes to the bit. */
START_TEST(test_resume_lr_scaling)
{
    char dir[512], straight_dir[512], p1[1024];
    tt_test_tmpdir(dir, sizeof dir);
    tt_test_tmpdir(straight_dir, sizeof straight_dir);
    tt_run_config c;
    config(&c, 2, 1, dir);
    c.lr_scaling = TT_LR_LINEAR;
    c.optim.lr = 0.004f;
    c.lr_given = 1;
    tt_free(run_ok(&c));
    tt_ckpt_path(p1, sizeof p1, dir, 1, 4);
    tt_checkpoint ck;
    read_ck(p1, &ck);
    ck_assert_msg(ck.optim.lr == 0.008f, "2 towers with --lr-scaling linear: the checkpoint's rate is %g, not 2 x 0.004",
                  (double)ck.optim.lr);
    tt_checkpoint_free(&ck);
    for (int k = 0; k < 2; k++) {
        config(&c, k ? 2 : 1, 2, dir);
        c.lr_scaling = k ? TT_LR_NONE : TT_LR_LINEAR;
        c.optim.lr = 0.004f;
        c.lr_given = 1;
        c.resume = p1;
        tt_status st;
        tt_error err;
        tt_free(run(&c, &st, &err));
        ck_assert_msg(st == TT_ERR_ARG, "%s: accepted (status %d)", k ? "the scaling switched off" : "1 tower", (int)st);
        ck_assert_msg(strstr(err.msg, "lr 0.008") && strstr(err.msg, "lr 0.004") && strchr(err.msg, '\n') == NULL,
                      "%s: '%s' does not name both rates on one line", k ? "no scaling" : "1 tower", err.msg);
        if (!k) ck_assert_msg(strstr(err.msg, "--lr-scaling linear"), "'%s' does not name the scaling", err.msg);
    }
    /* the same job: 1 epoch + resume + 1 epoch = 2 epochs straight, to the bit */
    config(&c, 2, 2, dir);
    c.lr_scaling = TT_LR_LINEAR;
    c.optim.lr = 0.004f;
    c.lr_given = 1;
    c.resume = p1;
    float *resumed = run_ok(&c);
    config(&c, 2, 2, straight_dir);
    c.lr_scaling = TT_LR_LINEAR;
    c.optim.lr = 0.004f;
    c.lr_given = 1;
    float *straight = run_ok(&c);
    tt_model m;
    model(&m);
    ck_assert_msg(memcmp(resumed, straight, m.n_params * sizeof(float)) == 0, "the resumed job differs from the "
                  "straight one");
    tt_free(resumed);
    tt_free(straight);
}
END_TEST

/* A checkpoint whose epochs have 5 steps, resumed by a run whose epochs have 4 (the same data and batch otherwise):
 * where an epoch ends, and so the sample order, would differ — refused, naming both counts. */
START_TEST(test_resume_steps_per_epoch)
{
    char dir[512], p1[1024];
    tt_test_tmpdir(dir, sizeof dir);
    tt_run_config c;
    config(&c, 1, 1, dir);
    tt_free(run_ok(&c));
    tt_ckpt_path(p1, sizeof p1, dir, 1, 4);
    tt_checkpoint ck;
    read_ck(p1, &ck);
    ck_assert_uint_eq(ck.steps_per_epoch, 4);
    ck_assert_uint_eq(ck.step, 4);
    const double best = ck.best;
    tt_checkpoint_free(&ck);
    edit_ck(p1, best, 5); /* epoch 1 now unfinished: step 4 of 5 */
    config(&c, 1, 2, dir);
    c.resume = p1;
    tt_status st;
    tt_error err;
    tt_free(run(&c, &st, &err));
    ck_assert_msg(st == TT_ERR_ARG, "a checkpoint of 5 steps per epoch resumed by a run of 4: accepted");
    ck_assert_msg(strstr(err.msg, "5 steps") && strstr(err.msg, "4") && strchr(err.msg, '\n') == NULL, "'%s'",
                  err.msg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("resume_state");
    TCase *tc = tcase_create("runs");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_resume_keeps_best_val_loss);
    tcase_add_test(tc, test_resume_keeps_best_val_accuracy);
    tcase_add_test(tc, test_resume_lr_scaling);
    tcase_add_test(tc, test_resume_steps_per_epoch);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
