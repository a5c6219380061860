/* test_callbacks.c — --early-stopping and --reduce-lr-on-plateau (tt_callbacks.h, src/run/callbacks.c and the run's
 * side, src/run/train_callbacks.c) against decisions recorded from Keras 3, and through runs.
 *
 * The cases between BEGIN and END were printed by tools/keras_callbacks_reference.py (TensorFlow 2.21.0, Keras 3.15.1
 * with the TensorFlow backend, CPU): keras.callbacks.EarlyStopping and ReduceLROnPlateau on a tiny compiled model, fed
 * a fixed metric sequence one epoch's logs at a time, the optimizer's rate read after every on_epoch_end, the epoch
 * whose on_epoch_end set model.stop_training, and the epoch whose weights on_train_end left in the model. The tests
 * give towertrain's callbacks the same SPECs (written by the script from Keras's arguments) and the same sequences,
 * and compare every decision: the rate after each epoch to the bit, the stop epoch, the restored epoch. To add a case,
 * edit the script, run it with a Keras venv and paste its output here; TensorFlow is never needed to run the tests.
 *
 * Then the runs: a short real run with --early-stopping stops early (exit status 0, its lines, the log's records, the
 * final checkpoint a finished run's, the test set on the restored weights); a run stopped by a signal after epoch k
 * and resumed decides and ends as the unbroken run (the rate, the stop, the weights to the bit); the refusals. */
#include <sys/stat.h>

#include <json-c/json.h>

#include "tt_callbacks.h"
#include "tt_checkpoint.h"
#include "tt_test.h"
#include "tt_train.h"

enum { CB_MAX_EPOCHS = 16 };

typedef struct cb_case {
    const char *name;
    const char *es, *rl;             /* --early-stopping's and --reduce-lr-on-plateau's SPEC (NULL: not given) */
    int n;                           /* epochs of metrics */
    double m[TT_CB_METRICS][CB_MAX_EPOCHS]; /* each epoch's metrics (the monitored ones given) */
    float lr[CB_MAX_EPOCHS];         /* the rate after each epoch run, as Keras left it */
    int reduced[CB_MAX_EPOCHS];      /* ReduceLROnPlateau reduced the rate at that epoch (even to the same float32) */
    int stop;                        /* the epoch training stopped after (0: it ran out) */
    int restored;                    /* the epoch whose weights Keras's on_train_end put back (0: none) */
    int es_wait, rl_wait, rl_cooldown; /* the counters at the end (EarlyStopping's wait, ReduceLROnPlateau's wait and
                                        * cooldown_counter) */
} cb_case;

/* BEGIN keras_callbacks_reference.py output: TensorFlow 2.21.0, Keras 3.15.1 (backend tensorflow), NumPy 2.4.6 */
static const cb_case CB_CASES[] = {
    {.name = "es_improving", .n = 6,
     .es = "monitor=val_loss",
     .rl = NULL,
     .m[TT_CB_VAL_LOSS] = {0.9, 0.8, 0.7, 0.6, 0.5, 0.45},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0, 0, 0, 0},
     .stop = 0, .restored = 0, .es_wait = 0},
    {.name = "es_plateau", .n = 7,
     .es = "monitor=val_loss,patience=2",
     .rl = NULL,
     .m[TT_CB_VAL_LOSS] = {0.9, 0.7, 0.71, 0.72, 0.69, 0.75, 0.8},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0, 0},
     .stop = 4, .restored = 0, .es_wait = 2},
    {.name = "es_patience0", .n = 3,
     .es = "monitor=loss",
     .rl = NULL,
     .m[TT_CB_LOSS] = {0.5, 0.5, 0.4},
     .lr = {0.00100000005f, 0.00100000005f},
     .reduced = {0, 0},
     .stop = 2, .restored = 0, .es_wait = 1},
    {.name = "es_noisy_restore", .n = 9,
     .es = "monitor=val_loss,patience=3,restore_best_weights",
     .rl = NULL,
     .m[TT_CB_VAL_LOSS] = {1.0, 0.8, 0.85, 0.6, 0.65, 0.62, 0.61, 0.7, 0.59},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f,
            0.00100000005f},
     .reduced = {0, 0, 0, 0, 0, 0, 0},
     .stop = 7, .restored = 4, .es_wait = 3},
    {.name = "es_restore_no_stop", .n = 4,
     .es = "monitor=val_loss,patience=5,restore_best_weights",
     .rl = NULL,
     .m[TT_CB_VAL_LOSS] = {1.0, 0.7, 0.8, 0.75},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0, 0},
     .stop = 0, .restored = 2, .es_wait = 2},
    {.name = "es_min_delta_edge", .n = 5,
     .es = "monitor=val_loss,min_delta=0.1,patience=1",
     .rl = NULL,
     .m[TT_CB_VAL_LOSS] = {0.5, 0.4, 0.2999, 0.25, 0.2},
     .lr = {0.00100000005f, 0.00100000005f},
     .reduced = {0, 0},
     .stop = 2, .restored = 0, .es_wait = 1},
    {.name = "es_min_delta_over", .n = 6,
     .es = "monitor=val_loss,min_delta=0.05,patience=2",
     .rl = NULL,
     .m[TT_CB_VAL_LOSS] = {0.5, 0.449, 0.4, 0.36, 0.35, 0.34},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0, 0, 0, 0},
     .stop = 6, .restored = 0, .es_wait = 2},
    {.name = "es_float32_resolution", .n = 4,
     .es = "monitor=loss,patience=1",
     .rl = NULL,
     .m[TT_CB_LOSS] = {0.3, 0.29999999899999996, 0.299999998, 0.29},
     .lr = {0.00100000005f, 0.00100000005f},
     .reduced = {0, 0},
     .stop = 2, .restored = 0, .es_wait = 1},
    {.name = "es_accuracy_auto", .n = 6,
     .es = "monitor=val_accuracy,patience=1",
     .rl = NULL,
     .m[TT_CB_VAL_ACCURACY] = {0.5, 0.6, 0.65, 0.64, 0.63, 0.7},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0, 0},
     .stop = 4, .restored = 0, .es_wait = 1},
    {.name = "es_top5_max_delta", .n = 6,
     .es = "monitor=top5,mode=max,min_delta=0.01,patience=2",
     .rl = NULL,
     .m[TT_CB_TOP5] = {0.9, 0.905, 0.92, 0.925, 0.928, 0.95},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0, 0, 0},
     .stop = 5, .restored = 0, .es_wait = 2},
    {.name = "es_loss_mode_max", .n = 5,
     .es = "monitor=val_loss,mode=max,patience=1",
     .rl = NULL,
     .m[TT_CB_VAL_LOSS] = {0.5, 0.6, 0.55, 0.54, 0.7},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0},
     .stop = 3, .restored = 0, .es_wait = 1},
    {.name = "es_start_from_epoch", .n = 7,
     .es = "monitor=val_loss,patience=1,start_from_epoch=3",
     .rl = NULL,
     .m[TT_CB_VAL_LOSS] = {0.5, 0.6, 0.7, 0.8, 0.9, 0.85, 0.95},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0, 0, 0},
     .stop = 5, .restored = 0, .es_wait = 1},
    {.name = "es_baseline_never", .n = 5,
     .es = "monitor=val_loss,patience=2,baseline=0.4,restore_best_weights",
     .rl = NULL,
     .m[TT_CB_VAL_LOSS] = {0.6, 0.5, 0.55, 0.45, 0.3},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0},
     .stop = 3, .restored = 2, .es_wait = 3},
    {.name = "es_baseline_beaten", .n = 6,
     .es = "monitor=val_accuracy,patience=1,baseline=0.6",
     .rl = NULL,
     .m[TT_CB_VAL_ACCURACY] = {0.5, 0.55, 0.62, 0.65, 0.64, 0.63},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0, 0, 0},
     .stop = 5, .restored = 0, .es_wait = 1},
    {.name = "es_nan", .n = 5,
     .es = "monitor=val_loss,patience=2",
     .rl = NULL,
     .m[TT_CB_VAL_LOSS] = {0.5, NAN, 0.4, 0.3, 0.2},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0, 0, 0},
     .stop = 0, .restored = 0, .es_wait = 0},
    {.name = "es_nan_first", .n = 4,
     .es = "monitor=val_loss,patience=2",
     .rl = NULL,
     .m[TT_CB_VAL_LOSS] = {NAN, 0.5, 0.4, 0.3},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0},
     .stop = 3, .restored = 0, .es_wait = 2},
    {.name = "rl_plateau", .n = 9,
     .es = NULL,
     .rl = "monitor=val_loss,factor=0.5,patience=2",
     .m[TT_CB_VAL_LOSS] = {1.0, 0.9, 0.9, 0.95, 0.89, 0.9, 0.91, 0.92, 0.93},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.000500000024f, 0.000500000024f, 0.000500000024f,
            0.000250000012f, 0.000250000012f, 0.000125000006f},
     .reduced = {0, 0, 0, 1, 0, 0, 1, 0, 1},
     .stop = 0, .restored = 0, .rl_wait = 0, .rl_cooldown = 0},
    {.name = "rl_defaults", .n = 13,
     .es = NULL,
     .rl = "monitor=val_loss",
     .m[TT_CB_VAL_LOSS] = {1.0, 0.99995, 0.99995, 0.99995, 0.99995, 0.99995, 0.99995, 0.99995, 0.99995, 0.99995,
                           0.99995, 0.99995, 0.99995},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f,
            0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.000100000005f, 0.000100000005f,
            0.000100000005f},
     .reduced = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0},
     .stop = 0, .restored = 0, .rl_wait = 2, .rl_cooldown = 0},
    {.name = "rl_cooldown", .n = 11,
     .es = NULL,
     .rl = "monitor=loss,factor=0.2,patience=1,cooldown=2",
     .m[TT_CB_LOSS] = {1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 0.5, 0.6, 0.7},
     .lr = {0.00100000005f, 0.000200000009f, 0.000200000009f, 4.00000026e-05f, 4.00000026e-05f, 8.00000089e-06f,
            8.00000089e-06f, 1.60000013e-06f, 1.60000013e-06f, 3.20000026e-07f, 3.20000026e-07f},
     .reduced = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0},
     .stop = 0, .restored = 0, .rl_wait = 0, .rl_cooldown = 1},
    {.name = "rl_min_lr", .n = 7,
     .es = NULL,
     .rl = "monitor=val_loss,factor=0.1,patience=1,min_lr=1e-05",
     .m[TT_CB_VAL_LOSS] = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0},
     .lr = {0.00100000005f, 0.000100000005f, 1.00000007e-05f, 9.99999975e-06f, 9.99999975e-06f, 9.99999975e-06f,
            9.99999975e-06f},
     .reduced = {0, 1, 1, 1, 0, 0, 0},
     .stop = 0, .restored = 0, .rl_wait = 3, .rl_cooldown = 0},
    {.name = "rl_min_lr_between", .n = 6,
     .es = NULL,
     .rl = "monitor=val_loss,factor=0.3,patience=0,min_lr=2e-05",
     .m[TT_CB_VAL_LOSS] = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0},
     .lr = {0.00100000005f, 0.000300000014f, 9.00000014e-05f, 2.7e-05f, 1.99999995e-05f, 1.99999995e-05f},
     .reduced = {0, 1, 1, 1, 1, 0},
     .stop = 0, .restored = 0, .rl_wait = 1, .rl_cooldown = 0},
    {.name = "rl_min_lr_float32", .n = 9,
     .es = NULL,
     .rl = "monitor=val_loss,factor=0.5,patience=0,min_lr=3e-05,cooldown=1",
     .m[TT_CB_VAL_LOSS] = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0},
     .lr = {0.00100000005f, 0.000500000024f, 0.000250000012f, 0.000125000006f, 6.2500003e-05f, 3.12500015e-05f,
            2.99999992e-05f, 2.99999992e-05f, 2.99999992e-05f},
     .reduced = {0, 1, 1, 1, 1, 1, 1, 0, 0},
     .stop = 0, .restored = 0, .rl_wait = 2, .rl_cooldown = 0},
    {.name = "rl_min_lr_is_rate", .n = 4,
     .es = NULL,
     .rl = "monitor=val_loss,factor=0.5,patience=0,min_lr=0.001",
     .m[TT_CB_VAL_LOSS] = {1.0, 1.0, 1.0, 1.0},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 0, 0, 0},
     .stop = 0, .restored = 0, .rl_wait = 3, .rl_cooldown = 0},
    {.name = "rl_factor_rounds_back", .n = 5,
     .es = NULL,
     .rl = "monitor=val_loss,factor=0.99999999,patience=1,cooldown=1",
     .m[TT_CB_VAL_LOSS] = {1.0, 1.0, 1.0, 1.0, 1.0},
     .lr = {0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f},
     .reduced = {0, 1, 1, 1, 1},
     .stop = 0, .restored = 0, .rl_wait = 0, .rl_cooldown = 1},
    {.name = "rl_min_delta", .n = 7,
     .es = NULL,
     .rl = "monitor=val_loss,factor=0.5,patience=1,min_delta=0.01",
     .m[TT_CB_VAL_LOSS] = {1.0, 0.991, 0.98, 0.975, 0.96, 0.955, 0.95},
     .lr = {0.00100000005f, 0.000500000024f, 0.000500000024f, 0.000250000012f, 0.000250000012f, 0.000125000006f,
            6.2500003e-05f},
     .reduced = {0, 1, 0, 1, 0, 1, 1},
     .stop = 0, .restored = 0, .rl_wait = 0, .rl_cooldown = 0},
    {.name = "rl_accuracy", .n = 7,
     .es = NULL,
     .rl = "monitor=val_accuracy,factor=0.5,patience=1",
     .m[TT_CB_VAL_ACCURACY] = {0.5, 0.6, 0.6, 0.59, 0.7, 0.7, 0.69},
     .lr = {0.00100000005f, 0.00100000005f, 0.000500000024f, 0.000250000012f, 0.000250000012f, 0.000125000006f,
            6.2500003e-05f},
     .reduced = {0, 0, 1, 1, 0, 1, 1},
     .stop = 0, .restored = 0, .rl_wait = 0, .rl_cooldown = 0},
    {.name = "rl_top5_min_mode", .n = 5,
     .es = NULL,
     .rl = "monitor=val_top5,mode=min,factor=0.9,patience=1",
     .m[TT_CB_VAL_TOP5] = {0.9, 0.95, 0.97, 0.8, 0.85},
     .lr = {0.00100000005f, 0.000900000043f, 0.000810000056f, 0.000810000056f, 0.000729000079f},
     .reduced = {0, 1, 1, 0, 1},
     .stop = 0, .restored = 0, .rl_wait = 0, .rl_cooldown = 0},
    {.name = "both", .n = 9,
     .es = "monitor=val_loss,patience=3,restore_best_weights",
     .rl = "monitor=loss,factor=0.5,patience=1,cooldown=1,min_lr=0.0001",
     .m[TT_CB_LOSS] = {1.0, 0.9, 0.9, 0.91, 0.85, 0.86, 0.87, 0.88, 0.89},
     .m[TT_CB_VAL_LOSS] = {1.1, 1.0, 0.95, 0.97, 0.96, 0.94, 0.99, 1.0, 1.01},
     .lr = {0.00100000005f, 0.00100000005f, 0.000500000024f, 0.000250000012f, 0.000250000012f, 0.000125000006f,
            9.99999975e-05f, 9.99999975e-05f, 9.99999975e-05f},
     .reduced = {0, 0, 1, 1, 0, 1, 1, 0, 0},
     .stop = 9, .restored = 6, .es_wait = 3, .rl_wait = 2, .rl_cooldown = 0},
};
/* END keras_callbacks_reference.py output */

/* ---- the decisions against Keras's ----------------------------------------------------------------------------- */

START_TEST(test_keras_decisions)
{
    const size_t n_cases = sizeof CB_CASES / sizeof CB_CASES[0];
    for (size_t c = 0; c < n_cases; c++) {
        const cb_case *k = &CB_CASES[c];
        tt_callback es, rl;
        tt_error err;
        tt_callback_defaults(&es, TT_CB_NONE);
        tt_callback_defaults(&rl, TT_CB_NONE);
        if (k->es)
            ck_assert_msg(tt_callback_parse("--early-stopping", k->es, TT_CB_EARLY_STOPPING, &es, &err) == TT_OK,
                          "%s: %s", k->name, err.msg);
        if (k->rl)
            ck_assert_msg(tt_callback_parse("--reduce-lr-on-plateau", k->rl, TT_CB_REDUCE_LR, &rl, &err) == TT_OK,
                          "%s: %s", k->name, err.msg);
        tt_callbacks_state st;
        tt_callbacks_begin(&st, &es, &rl, 0.001f); /* the script's SGD(learning_rate=0.001), a float32 variable */
        int stop = 0, kept = 0;
        for (int e = 1; e <= k->n && !stop; e++) {
            double m[TT_CB_METRICS];
            for (int i = 0; i < TT_CB_METRICS; i++) m[i] = k->m[i][e - 1];
            tt_cb_decision d;
            const float before = st.lr;
            tt_callbacks_epoch_end(&es, &rl, &st, (uint64_t)e, m, &d);
            ck_assert_msg(memcmp(&st.lr, &k->lr[e - 1], sizeof(float)) == 0, "%s, epoch %d: lr %.9g, Keras %.9g",
                          k->name, e, (double)st.lr, (double)k->lr[e - 1]);
            ck_assert_msg(d.reduced == k->reduced[e - 1] && d.old_lr == before && (d.reduced || st.lr == before),
                          "%s, epoch %d: reduced %d (Keras %d) from %.9g to %.9g", k->name, e, d.reduced,
                          k->reduced[e - 1], (double)d.old_lr, (double)st.lr);
            if (d.keep_weights) kept = e;
            if (d.stop) stop = e;
        }
        ck_assert_msg(stop == k->stop, "%s: stopped after epoch %d, Keras after %d", k->name, stop, k->stop);
        ck_assert_msg(!stop || st.es_stopped_epoch == (uint64_t)stop, "%s: stopped_epoch %llu", k->name,
                      (unsigned long long)st.es_stopped_epoch);
        ck_assert_msg(st.es_wait == (uint64_t)k->es_wait && st.rl_wait == (uint64_t)k->rl_wait &&
                          st.rl_cooldown == (uint64_t)k->rl_cooldown,
                      "%s: wait %llu, %llu, cooldown %llu; Keras %d, %d, %d", k->name, (unsigned long long)st.es_wait,
                      (unsigned long long)st.rl_wait, (unsigned long long)st.rl_cooldown, k->es_wait, k->rl_wait,
                      k->rl_cooldown);
        const int restored = tt_callbacks_restores(&es, &st) ? (int)st.es_best_epoch : 0;
        ck_assert_msg(restored == k->restored, "%s: restores epoch %d, Keras %d", k->name, restored, k->restored);
        ck_assert_msg(!restored || kept == restored, "%s: the weights kept are epoch %d's, the restore is %d's",
                      k->name, kept, restored);
        /* the canonical SPEC reads back as the same settings */
        for (int w = 0; w < 2; w++) {
            const tt_callback *cb = w ? &rl : &es;
            char words[256];
            tt_callback back;
            tt_callback_words(cb, words, sizeof words);
            ck_assert_msg(tt_callback_parse("--x", words, cb->kind ? cb->kind : TT_CB_EARLY_STOPPING, &back, &err) ==
                              TT_OK, "%s: '%s': %s", k->name, words, err.msg);
            ck_assert_msg(memcmp(&back, cb, sizeof back) == 0, "%s: '%s' reads back otherwise", k->name, words);
        }
    }
}
END_TEST

/* ---- the SPECs --------------------------------------------------------------------------------------------- */

START_TEST(test_spec_defaults)
{
    tt_callback cb;
    tt_error err;
    char w[256];
    ck_assert(tt_callback_parse("--early-stopping", "on", TT_CB_EARLY_STOPPING, &cb, &err) == TT_OK);
    ck_assert_str_eq(tt_callback_words(&cb, w, sizeof w), "monitor=val_loss,min_delta=0,patience=0,mode=auto,"
                     "baseline=none,restore_best_weights=false,start_from_epoch=0");
    ck_assert(tt_callback_parse("--reduce-lr-on-plateau", "on", TT_CB_REDUCE_LR, &cb, &err) == TT_OK);
    ck_assert_str_eq(tt_callback_words(&cb, w, sizeof w), "monitor=val_loss,factor=0.1,patience=10,mode=auto,"
                     "min_delta=0.0001,cooldown=0,min_lr=0");
    ck_assert(tt_callback_parse("--reduce-lr-on-plateau", "off", TT_CB_REDUCE_LR, &cb, &err) == TT_OK);
    ck_assert_int_eq(cb.kind, TT_CB_NONE);
    ck_assert_str_eq(tt_callback_words(&cb, w, sizeof w), "off");
    ck_assert(tt_callback_parse("--early-stopping", "restore_best_weights,monitor=accuracy,baseline=0.8,"
                                "start_from_epoch=2,min_delta=.001", TT_CB_EARLY_STOPPING, &cb, &err) == TT_OK);
    ck_assert_str_eq(tt_callback_words(&cb, w, sizeof w), "monitor=accuracy,min_delta=0.001,patience=0,mode=auto,"
                     "baseline=0.8,restore_best_weights=true,start_from_epoch=2");
    ck_assert(tt_callback_maximizes(&cb) && !tt_callback_needs_val(&cb));
    ck_assert(tt_callback_parse("--early-stopping", "monitor=val_top5,mode=min,restore_best_weights=false",
                                TT_CB_EARLY_STOPPING, &cb, &err) == TT_OK);
    ck_assert(!tt_callback_maximizes(&cb) && tt_callback_needs_val(&cb) && !cb.restore_best_weights);
}
END_TEST

/* Every bad key or value: one line naming the option and the key (and what it takes). */
START_TEST(test_spec_refusals)
{
    static const struct {
        tt_cb_kind kind;
        const char *spec, *want;
    } bad[] = {
        {TT_CB_EARLY_STOPPING, "", "--early-stopping: an empty item in ''"},
        {TT_CB_EARLY_STOPPING, "patience=3,", "--early-stopping: an empty item"},
        {TT_CB_EARLY_STOPPING, "yes", "--early-stopping: unknown key 'yes' (EarlyStopping takes monitor, min_delta, "
                                      "patience, mode, baseline, restore_best_weights, start_from_epoch; or on alone"},
        {TT_CB_EARLY_STOPPING, "on,patience=2", "unknown key 'on'"},
        {TT_CB_EARLY_STOPPING, "factor=0.5", "--early-stopping: unknown key 'factor'"},
        {TT_CB_REDUCE_LR, "restore_best_weights", "--reduce-lr-on-plateau: unknown key 'restore_best_weights' "
                                                  "(ReduceLROnPlateau takes monitor, factor, patience, mode, "
                                                  "min_delta, cooldown, min_lr"},
        {TT_CB_EARLY_STOPPING, "patience=2,patience=3", "--early-stopping: patience: given twice"},
        {TT_CB_EARLY_STOPPING, "patience", "--early-stopping: patience: needs a value (patience=...)"},
        {TT_CB_EARLY_STOPPING, "patience=-1", "--early-stopping: patience: '-1' is not an integer in 0..100000"},
        {TT_CB_EARLY_STOPPING, "patience=100001", "patience: '100001' is not an integer in 0..100000"},
        {TT_CB_EARLY_STOPPING, "patience= 2", "patience: ' 2' is not an integer"},
        {TT_CB_EARLY_STOPPING, "monitor=val_acc", "--early-stopping: monitor: 'val_acc' is not loss, accuracy, top5, "
                                                  "val_loss, val_accuracy or val_top5"},
        {TT_CB_EARLY_STOPPING, "mode=up", "--early-stopping: mode: 'up' is not auto, min or max"},
        {TT_CB_EARLY_STOPPING, "min_delta=-0.1", "--early-stopping: min_delta: '-0.1' is not a number in [0, 1e+09]"},
        {TT_CB_EARLY_STOPPING, "min_delta=nan", "min_delta: 'nan' is not a number"},
        {TT_CB_EARLY_STOPPING, "min_delta=0x1p-3", "min_delta: '0x1p-3' is not a number"},
        {TT_CB_EARLY_STOPPING, "min_delta=1e999", "min_delta: '1e999' is not a number"},
        {TT_CB_EARLY_STOPPING, "baseline=low", "--early-stopping: baseline: 'low' is not a number in [0, 1e+09] (or "
                                               "none)"},
        {TT_CB_EARLY_STOPPING, "restore_best_weights=1", "--early-stopping: restore_best_weights: '1' is not true or "
                                                         "false"},
        {TT_CB_EARLY_STOPPING, "start_from_epoch=2.5", "start_from_epoch: '2.5' is not an integer"},
        {TT_CB_REDUCE_LR, "factor=1", "--reduce-lr-on-plateau: factor: '1' is not a number in (0, 1)"},
        {TT_CB_REDUCE_LR, "factor=0", "factor: '0' is not a number in (0, 1)"},
        {TT_CB_REDUCE_LR, "factor=1.5", "factor: '1.5' is not a number in (0, 1)"},
        {TT_CB_REDUCE_LR, "min_lr=-1e-5", "--reduce-lr-on-plateau: min_lr: '-1e-5' is not a number"},
        {TT_CB_REDUCE_LR, "cooldown=x", "--reduce-lr-on-plateau: cooldown: 'x' is not an integer"},
        {TT_CB_REDUCE_LR, "monitor=", "--reduce-lr-on-plateau: monitor: '' is not loss"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tt_callback cb;
        tt_error err;
        const char *opt = bad[i].kind == TT_CB_REDUCE_LR ? "--reduce-lr-on-plateau" : "--early-stopping";
        ck_assert_msg(tt_callback_parse(opt, bad[i].spec, bad[i].kind, &cb, &err) == TT_ERR_ARG, "'%s' accepted",
                      bad[i].spec);
        ck_assert_msg(strstr(err.msg, bad[i].want) && strncmp(err.msg, opt, strlen(opt)) == 0 &&
                          !strchr(err.msg, '\n'), "'%s': %s (want '%s')", bad[i].spec, err.msg, bad[i].want);
    }
}
END_TEST

/* ---- through runs ---------------------------------------------------------------------------------------------- */

/* 12 byte features, 4 classes (one learnable teacher): 240 training samples (8 steps of 32, the last short of 16), 64
 * for validation, 40 to test; a small MLP with Adam. */
static const char *MODEL = "input shape=12\n"
                           "dense units=16 activation=relu\n"
                           "dense units=4\n";
static tt_dataset g_train, g_val, g_test;
static char g_dir[512], g_model_path[600];

static void setup(void)
{
    tt_error err;
    tt_test_dataset(&g_train, 344, 12, 4, 1);
    ck_assert(tt_dataset_split_tail(&g_train, 40, &g_test, &err) == TT_OK);
    ck_assert(tt_dataset_split_tail(&g_train, 64, &g_val, &err) == TT_OK);
    tt_test_tmpdir(g_dir, sizeof g_dir);
    snprintf(g_model_path, sizeof g_model_path, "%s/model.txt", g_dir);
    tt_test_write_str(g_model_path, MODEL);
}

static void teardown(void)
{
    tt_dataset_free(&g_train);
    tt_dataset_free(&g_val);
    tt_dataset_free(&g_test);
}

static void config(tt_run_config *c, size_t epochs, const char *es, const char *rl)
{
    tt_run_config_defaults(c);
    c->model = g_model_path;
    c->device = "cpu";
    c->batch = 32;
    c->epochs = epochs;
    c->seed = 5;
    c->progress = TT_PROGRESS_QUIET;
    tt_error err;
    if (es) ck_assert_msg(tt_callback_parse("--early-stopping", es, TT_CB_EARLY_STOPPING, &c->early_stopping, &err) ==
                              TT_OK, "%s", err.msg);
    if (rl) ck_assert_msg(tt_callback_parse("--reduce-lr-on-plateau", rl, TT_CB_REDUCE_LR, &c->reduce_lr, &err) ==
                              TT_OK, "%s", err.msg);
}

/* Runs c on the suite's data: the result (its final weights the caller's to free) and the status. */
static tt_status run(const tt_run_config *c, tt_run_result *res, tt_error *err)
{
    return tt_run_on(c, &g_train, &g_val, &g_test, NULL, res, err);
}

static tt_run_result *run_ok(const tt_run_config *c)
{
    tt_run_result *res = (tt_run_result *)tt_calloc(1, sizeof *res);
    tt_error err;
    const tt_status s = run(c, res, &err);
    ck_assert_msg(s == TT_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(res->final_params);
    return res;
}

static void result_free(tt_run_result *res)
{
    tt_free(res->final_params);
    tt_free(res);
}

/* A min_delta no change can reach (val_loss + 10 below the best: never): EarlyStopping's first epoch sets the best,
 * every later one waits, so patience 2 stops after epoch 3 for any data — and restore_best_weights puts epoch 1's
 * weights back, which a 1-epoch run ends with, to the bit; the test set is evaluated on them. */
START_TEST(test_run_stops_and_restores)
{
    tt_run_config c;
    config(&c, 1, NULL, NULL);
    tt_run_result *one = run_ok(&c);
    config(&c, 10, "monitor=val_loss,min_delta=10,patience=2,restore_best_weights", NULL);
    tt_run_result *es = run_ok(&c);
    ck_assert_uint_eq(es->n_epochs, 3);
    ck_assert_uint_eq(es->stopped_epoch, 3);
    ck_assert_uint_eq(es->restored_epoch, 1);
    ck_assert_uint_eq(es->n_params, one->n_params);
    ck_assert_msg(memcmp(es->final_params, one->final_params, one->n_params * sizeof(float)) == 0,
                  "the restored weights are not epoch 1's");
    ck_assert_msg(es->test.loss == one->test.loss && es->test.accuracy == one->test.accuracy,
                  "the test set was not evaluated on the restored weights: loss %.9g, epoch 1's %.9g", es->test.loss,
                  one->test.loss);
    ck_assert_msg(es->epochs[0].loss == one->epochs[0].loss && es->epochs[2].loss != one->epochs[0].loss,
                  "epochs 2 and 3 were trained (%.9g, %.9g)", es->epochs[0].loss, es->epochs[2].loss);
    /* without restore_best_weights: the same stop, the last epoch's weights kept */
    config(&c, 10, "monitor=val_loss,min_delta=10,patience=2", NULL);
    tt_run_result *last = run_ok(&c);
    ck_assert_uint_eq(last->stopped_epoch, 3);
    ck_assert_uint_eq(last->restored_epoch, 0);
    ck_assert_msg(memcmp(last->final_params, one->final_params, one->n_params * sizeof(float)) != 0,
                  "the weights are epoch 1's without restore_best_weights");
    result_free(one);
    result_free(es);
    result_free(last);
}
END_TEST

/* ReduceLROnPlateau with a min_delta no change reaches and patience 1: epoch 1 sets the best, every later epoch
 * halves the rate (no cooldown) down to min_lr; each epoch's figures carry the rate its steps used, and the rate
 * took effect (the epochs after the first reduction differ from a run without the callback; those before do not). */
START_TEST(test_run_reduces_lr)
{
    tt_run_config c;
    config(&c, 5, NULL, NULL);
    tt_run_result *plain = run_ok(&c);
    config(&c, 5, NULL, "monitor=loss,min_delta=10,factor=0.5,patience=1,min_lr=0.0002");
    tt_run_result *rl = run_ok(&c);
    const float want[5] = {0.001f, 0.001f, 0.0005f, 0.00025f, 0.0002f}; /* (float)max(lr * 0.5, 0.0002) */
    for (int e = 0; e < 5; e++) {
        ck_assert_msg(rl->epochs[e].lr == want[e], "epoch %d: lr %.9g, want %.9g", e + 1, (double)rl->epochs[e].lr,
                      (double)want[e]);
        ck_assert_msg(plain->epochs[e].lr == 0.001f, "epoch %d: lr %.9g without the callback", e + 1,
                      (double)plain->epochs[e].lr);
    }
    ck_assert_msg(rl->epochs[1].loss == plain->epochs[1].loss, "epoch 2 trained at another rate");
    ck_assert_msg(rl->epochs[2].loss != plain->epochs[2].loss, "epoch 3 trained at the same rate: the reduction did "
                  "not reach the optimizer");
    ck_assert_uint_eq(rl->n_epochs, 5);
    result_free(plain);
    result_free(rl);
}
END_TEST

/* The rate reaches every optimizer that applies an update: the host's, tower 0's (--update device), every tower's
 * (--update replicated: each its own copy), and the towers' own under --sync weights:2 and async. For each design:
 * the epochs before the first reduction are the plain run's to the bit, the epoch after it is not; and the device
 * updates give the host's bits (they compute the same steps at the same rates). */
START_TEST(test_rate_reaches_every_optimizer)
{
    static const struct {
        const char *name;
        tt_reduce reduce;
        tt_update update;
        tt_sync sync;
        int same_as_host; /* bit-identical to --update host */
    } designs[] = {
        {"host", TT_REDUCE_CPU, TT_UPDATE_HOST, {TT_SYNC_BSP, 0, 0}, 1},
        {"--update device", TT_REDUCE_DEVICE, TT_UPDATE_DEVICE, {TT_SYNC_BSP, 0, 0}, 1},
        {"--update replicated", TT_REDUCE_ALLREDUCE, TT_UPDATE_REPLICATED, {TT_SYNC_BSP, 0, 0}, 1},
        {"--sync weights:2", TT_REDUCE_CPU, TT_UPDATE_HOST, {TT_SYNC_WEIGHTS, 2, 0}, 0},
        {"--sync async", TT_REDUCE_CPU, TT_UPDATE_HOST, {TT_SYNC_ASYNC, 0, 1}, 0},
    };
    tt_run_result *host = NULL;
    for (size_t i = 0; i < sizeof designs / sizeof designs[0]; i++) {
        tt_run_config c;
        config(&c, 4, NULL, NULL);
        c.towers = 2;
        c.reduce = designs[i].reduce;
        c.update = designs[i].update;
        c.sync = designs[i].sync;
        tt_run_result *plain = run_ok(&c);
        config(&c, 4, NULL, "monitor=loss,min_delta=10,factor=0.5,patience=1");
        c.towers = 2;
        c.reduce = designs[i].reduce;
        c.update = designs[i].update;
        c.sync = designs[i].sync;
        tt_run_result *rl = run_ok(&c);
        ck_assert_msg(rl->epochs[2].lr == 0.0005f && rl->epochs[3].lr == 0.00025f, "%s: rates %.9g, %.9g",
                      designs[i].name, (double)rl->epochs[2].lr, (double)rl->epochs[3].lr);
        ck_assert_msg(rl->epochs[1].loss == plain->epochs[1].loss, "%s: epoch 2 trained at another rate",
                      designs[i].name);
        ck_assert_msg(rl->epochs[2].loss != plain->epochs[2].loss && rl->epochs[3].loss != plain->epochs[3].loss,
                      "%s: the reduced rate did not reach the updates", designs[i].name);
        if (!host) {
            host = rl;
        } else {
            if (designs[i].same_as_host)
                ck_assert_msg(memcmp(rl->final_params, host->final_params, host->n_params * sizeof(float)) == 0,
                              "%s: other weights than --update host at the same rates", designs[i].name);
            result_free(rl);
        }
        result_free(plain);
    }
    result_free(host);
}
END_TEST

/* A checkpoint path of the periodic kind: epoch e, step s. */
static void ckpt_at(char *path, size_t len, const char *dir, size_t e, size_t s) { tt_ckpt_path(path, len, dir, e, s); }

/* The unbroken run: EarlyStopping on val_loss with restore_best_weights and ReduceLROnPlateau on loss, with a
 * checkpoint after every epoch and every 3 steps; then runs resumed from several of its checkpoints (after epoch k,
 * and mid-epoch) with the same options: each decides as the unbroken run did — the rate of every epoch, the stop, the
 * restored epoch — and ends with its weights, to the bit. A run killed after epoch k would leave that very
 * checkpoint. Then the stopped run's own last checkpoint resumes as a finished run's: nothing to train. */
START_TEST(test_resume_decides_as_unbroken)
{
    static const char *ES = "monitor=val_loss,patience=3,restore_best_weights",
                      *RL = "monitor=loss,factor=0.5,patience=1,min_delta=0.02,cooldown=1";
    char dir[600];
    snprintf(dir, sizeof dir, "%s/unbroken", g_dir);
    tt_run_config c;
    config(&c, 40, ES, RL);
    c.optim.lr = 0.05f; /* a rate that overshoots: val_loss goes up and down, and stops improving within the epochs */
    c.lr_given = 1;
    c.checkpoint_dir = dir;
    c.save_every_epoch = 1;
    c.save_every_steps = 3;
    c.keep = 1000;
    tt_run_result *whole = run_ok(&c);
    ck_assert_msg(whole->stopped_epoch >= 5 && whole->stopped_epoch < 40, "stopped after epoch %zu",
                  whole->stopped_epoch);
    ck_assert_msg(whole->restored_epoch >= 1 && whole->restored_epoch < whole->stopped_epoch, "restored %zu",
                  whole->restored_epoch);
    int reduced = 0;
    for (size_t e = 1; e < whole->n_epochs; e++) reduced |= whole->epochs[e].lr < whole->epochs[e - 1].lr;
    ck_assert_msg(reduced, "ReduceLROnPlateau never reduced the rate: the case tests nothing of its state");
    const size_t at[][2] = {{1, 8}, {whole->stopped_epoch - 2, 8}, {whole->stopped_epoch - 1, 8},
                            {whole->stopped_epoch - 1, 3}};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        char from[1024], fresh[700];
        ckpt_at(from, sizeof from, dir, at[i][0], at[i][1]);
        snprintf(fresh, sizeof fresh, "%s/resumed%zu", g_dir, i);
        tt_run_config r = c;
        r.checkpoint_dir = fresh;
        r.resume = from;
        tt_run_result *res = run_ok(&r);
        ck_assert_msg(res->stopped_epoch == whole->stopped_epoch && res->restored_epoch == whole->restored_epoch,
                      "resumed from %s: stopped %zu, restored %zu; unbroken %zu, %zu", from, res->stopped_epoch,
                      res->restored_epoch, whole->stopped_epoch, whole->restored_epoch);
        for (size_t e = at[i][0]; e < whole->n_epochs; e++)
            ck_assert_msg(res->epochs[e].lr == whole->epochs[e].lr, "resumed from %s: epoch %zu's rate %.9g, unbroken "
                          "%.9g", from, e + 1, (double)res->epochs[e].lr, (double)whole->epochs[e].lr);
        ck_assert_msg(memcmp(res->final_params, whole->final_params, whole->n_params * sizeof(float)) == 0,
                      "resumed from %s: other final weights", from);
        ck_assert_msg(res->test.loss == whole->test.loss, "resumed from %s: test loss %.9g, unbroken %.9g", from,
                      res->test.loss, whole->test.loss);
        result_free(res);
    }
    /* the stopped run's last checkpoint: a finished run's (a resume trains nothing, whatever --epochs says) */
    char last[1024];
    ckpt_at(last, sizeof last, dir, whole->stopped_epoch, 8);
    tt_run_config r = c;
    r.checkpoint_dir = NULL;
    r.save_every_epoch = 0;
    r.save_every_steps = 0;
    r.resume = last;
    tt_run_result *none = (tt_run_result *)tt_calloc(1, sizeof *none);
    tt_error err;
    ck_assert_msg(run(&r, none, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(none->n_epochs, 0);
    ck_assert_ptr_null(none->final_params);
    tt_checkpoint ck; /* and it holds the restored weights, the state of a stopped run */
    ck_assert_msg(tt_checkpoint_read(last, NULL, &ck, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(ck.cb.es_stopped_epoch, whole->stopped_epoch);
    ck_assert_uint_eq(ck.cb.es_best_epoch, whole->restored_epoch);
    ck_assert(ck.cb.early && ck.cb.plateau && ck.cb.es_kept);
    ck_assert_msg(ck.cb.lr == whole->epochs[whole->n_epochs - 1].lr || ck.cb.lr < whole->epochs[whole->n_epochs - 1].lr,
                  "plateau_lr %.9g", (double)ck.cb.lr);
    ck_assert_msg(ck.optim.lr == 0.05f, "the checkpoint's optimizer rate is %.9g, not the run's", (double)ck.optim.lr);
    tt_checkpoint_free(&ck);
    result_free(whole);
    result_free(none);
}
END_TEST

/* A resume with other callbacks than the checkpoint's run is refused, naming both SPECs; a val_* monitor without
 * validation is refused in one line; the canonical SPECs reach the log's start record. */
START_TEST(test_refusals)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/refusals", g_dir);
    tt_run_config c;
    config(&c, 2, "patience=1", NULL);
    c.checkpoint_dir = dir;
    c.save_every_epoch = 1;
    result_free(run_ok(&c));
    char from[1024];
    ckpt_at(from, sizeof from, dir, 1, 8);
    static const struct {
        const char *es, *rl, *want;
    } bad[] = {
        {"patience=2", NULL, "trained with --early-stopping monitor=val_loss,min_delta=0,patience=1,mode=auto,"
                             "baseline=none,restore_best_weights=false,start_from_epoch=0, this run has "
                             "--early-stopping monitor=val_loss,min_delta=0,patience=2,"},
        {NULL, NULL, "this run has --early-stopping off (give the same"},
        {"patience=1", "on", "trained with --reduce-lr-on-plateau off, this run has --reduce-lr-on-plateau "
                             "monitor=val_loss,factor=0.1,"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tt_run_config r;
        config(&r, 3, bad[i].es, bad[i].rl);
        r.resume = from;
        tt_run_result res;
        tt_error err;
        ck_assert_int_eq(run(&r, &res, &err), TT_ERR_ARG);
        ck_assert_msg(strstr(err.msg, bad[i].want) && !strchr(err.msg, '\n'), "%s", err.msg);
        tt_free(res.final_params);
    }
    tt_run_config v;
    config(&v, 2, "monitor=val_accuracy", NULL);
    tt_dataset none = {0};
    tt_run_result res;
    tt_error err;
    ck_assert_int_eq(tt_run_on(&v, &g_train, &none, &g_test, NULL, &res, &err), TT_ERR_ARG);
    ck_assert_str_eq(err.msg, "--early-stopping: monitor=val_accuracy needs a validation set (--val-samples is 0): "
                     "monitor loss, accuracy or top5, or give --val-samples N");
}
END_TEST

/* ---- the executable -------------------------------------------------------------------------------------------- */

/* `towertrain ARGS` with stdout and stderr in files of g_dir; its exit status. */
static int tt(const char *args, char *out, char *errs, size_t len)
{
    char cmd[4096], o[700], e[700];
    snprintf(o, sizeof o, "%s/stdout", g_dir);
    snprintf(e, sizeof e, "%s/stderr", g_dir);
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s' </dev/null", TT_BIN, args, o, e);
    const int st = system(cmd);
    size_t n;
    char *b = (char *)tt_test_read_file(o, &n);
    snprintf(out, len, "%.*s", (int)n, b);
    free(b);
    b = (char *)tt_test_read_file(e, &n);
    snprintf(errs, len, "%.*s", (int)n, b);
    free(b);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The log's records of an event, counted; *first: the first one (the caller puts it), or NULL. */
static int log_events(const char *path, const char *event, json_object **first)
{
    size_t n;
    char *b = (char *)tt_test_read_file(path, &n), *save = NULL;
    b[n] = '\0'; /* its n + 1 bytes: a string */
    int count = 0;
    if (first) *first = NULL;
    for (char *line = strtok_r(b, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_object *o = json_tokener_parse(line), *ev;
        ck_assert_msg(o != NULL, "%s: a line that is not JSON: %.200s", path, line);
        if (json_object_object_get_ex(o, "event", &ev) && strcmp(json_object_get_string(ev), event) == 0) {
            if (first && !*first) {
                *first = o;
                o = NULL;
            }
            count++;
        }
        json_object_put(o);
    }
    free(b);
    return count;
}

static double rec_num(json_object *o, const char *key)
{
    json_object *v;
    ck_assert_msg(json_object_object_get_ex(o, key, &v), "no %s in %s", key, json_object_to_json_string(o));
    return json_object_get_double(v);
}

/* A short real run of the executable on an MNIST-format directory: --early-stopping with a small patience stops it
 * early with exit status 0, says so in Keras's words, writes the final checkpoint a finished run writes (at the
 * epoch it stopped after) and the log's records; --reduce-lr-on-plateau's line and record; bad SPECs exit 2 with
 * one line; the options are train's alone. */
START_TEST(test_executable)
{
    enum { NTR = 200, NTE = 40, D = 16 };
    static unsigned char img[NTR * D], lab[NTR];
    tt_rng r;
    tt_rng_seed(&r, 1, 1);
    for (int i = 0; i < NTR; i++) {
        lab[i] = (unsigned char)(i % 10);
        for (int j = 0; j < D; j++) img[i * D + j] = (unsigned char)(tt_rng_below(&r, 60) + (j == lab[i] ? 190 : 0));
    }
    char data[300], ckd[700], log[700], args[3000]; /* data: the IDX files' names fit tt_test_write_idx's 512 */
    static char out[1 << 16], errs[1 << 16];
    snprintf(data, sizeof data, "%.250s/data", g_dir);
    snprintf(ckd, sizeof ckd, "%s/ck", g_dir);
    snprintf(log, sizeof log, "%s/log.json", g_dir);
    ck_assert_int_eq(mkdir(data, 0777), 0);
    const uint32_t tri[3] = {NTR, 4, 4}, trl[1] = {NTR}, tei[3] = {NTE, 4, 4}, tel[1] = {NTE};
    tt_test_write_idx(data, "train-images-idx3-ubyte.gz", 3, tri, img, sizeof img);
    tt_test_write_idx(data, "train-labels-idx1-ubyte.gz", 1, trl, lab, sizeof lab);
    tt_test_write_idx(data, "t10k-images-idx3-ubyte.gz", 3, tei, img, NTE * D);
    tt_test_write_idx(data, "t10k-labels-idx1-ubyte.gz", 1, tel, lab, NTE);
    snprintf(args, sizeof args, "train --data '%s' --val-samples 40 --batch 32 --epochs 20 --device cpu --progress "
             "lines --early-stopping monitor=val_loss,min_delta=10,patience=1,restore_best_weights "
             "--reduce-lr-on-plateau monitor=val_loss,min_delta=10,patience=1,factor=0.5 --checkpoint-dir '%s' "
             "--log-json '%s'", data, ckd, log);
    ck_assert_msg(tt(args, out, errs, sizeof out) == 0, "%s", errs);
    const char *lines[] = {
        "callbacks: EarlyStopping monitor=val_loss,min_delta=10,patience=1,mode=auto,baseline=none,"
        "restore_best_weights=true,start_from_epoch=0 (val_loss: lower is better)\n",
        "val_top5: 1.0000 - learning_rate: 0.0010\n", /* the rate in force, as Keras's progbar shows it then */
        "\nEpoch 2: ReduceLROnPlateau reducing learning rate to 0.0005.\nEpoch 2: early stopping\n"
        "Restoring model weights from the end of the best epoch: 1.\ncheckpoint: ",
        "ckpt-e000002-s000000005.safetensors (epoch 2, step 5/5;", "\ntest: 40 samples"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        ck_assert_msg(strstr(out, lines[i]) != NULL, "no '%s' in:\n%s", lines[i], out);
    ck_assert_msg(strstr(out, "Epoch 3/20") == NULL, "an epoch after the stop ran:\n%s", out);
    json_object *o;
    ck_assert_int_eq(log_events(log, "epoch", NULL), 2);
    ck_assert_int_eq(log_events(log, "early_stopping", &o), 1);
    ck_assert(rec_num(o, "epoch") == 2 && rec_num(o, "best_epoch") == 1 && rec_num(o, "wait") == 1);
    json_object_put(o);
    ck_assert_int_eq(log_events(log, "reduce_lr_on_plateau", &o), 1);
    ck_assert(rec_num(o, "epoch") == 2 && rec_num(o, "old_lr") == 0.001 && rec_num(o, "lr") == 0.0005);
    json_object_put(o);
    ck_assert_int_eq(log_events(log, "restore_best_weights", &o), 1);
    ck_assert(rec_num(o, "best_epoch") == 1);
    json_object_put(o);
    ck_assert_int_eq(log_events(log, "start", &o), 1);
    json_object *v;
    ck_assert(json_object_object_get_ex(o, "reduce_lr_on_plateau", &v));
    ck_assert_str_eq(json_object_get_string(v), "monitor=val_loss,factor=0.5,patience=1,mode=auto,min_delta=10,"
                     "cooldown=0,min_lr=0");
    json_object_put(o);
    ck_assert_int_eq(log_events(log, "test", NULL), 1);
    /* resumed: a finished run's checkpoint, one line and exit 0 */
    snprintf(args, sizeof args, "train --data '%s' --val-samples 40 --batch 32 --epochs 20 --device cpu --progress "
             "lines --early-stopping monitor=val_loss,min_delta=10,patience=1,restore_best_weights "
             "--reduce-lr-on-plateau monitor=val_loss,min_delta=10,patience=1,factor=0.5 --resume '%s'", data, ckd);
    ck_assert_msg(tt(args, out, errs, sizeof out) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "nothing left to train (early stopping ended it after epoch 2)\n"), "%s", out);
    /* bad values: exit 2, one line naming the option and the key */
    static const struct {
        const char *args, *line;
    } bad[] = {
        {"train --early-stopping patience=x", "towertrain: --early-stopping: patience: 'x' is not an integer in "
                                              "0..100000\n"},
        {"train --reduce-lr-on-plateau factor=2", "towertrain: --reduce-lr-on-plateau: factor: '2' is not a number in "
                                                  "(0, 1)\n"},
        {"train --early-stopping on --val-samples 0", "towertrain: --early-stopping: monitor=val_loss needs a "
                                                      "validation set (--val-samples is 0): monitor loss, accuracy "
                                                      "or top5, or give --val-samples N\n"},
        {"bench --early-stopping on", "towertrain: --early-stopping: applies to towertrain train only, not bench\n"},
        {"train --early-stopping", "towertrain: --early-stopping: missing value\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(tt(bad[i].args, out, errs, sizeof out) == 2, "%s: %s", bad[i].args, errs);
        ck_assert_msg(strcmp(errs, bad[i].line) == 0, "%s: '%s'", bad[i].args, errs);
    }
    ck_assert_int_eq(tt("train --help", out, errs, sizeof out), 0);
    ck_assert_msg(strstr(out, "--early-stopping SPEC") && strstr(out, "--reduce-lr-on-plateau SPEC"), "%s", out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("callbacks");
    TCase *tk = tcase_create("keras");
    tcase_add_test(tk, test_keras_decisions);
    tcase_add_test(tk, test_spec_defaults);
    tcase_add_test(tk, test_spec_refusals);
    suite_add_tcase(s, tk);
    TCase *tc = tcase_create("runs");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_run_stops_and_restores);
    tcase_add_test(tc, test_run_reduces_lr);
    tcase_add_test(tc, test_rate_reaches_every_optimizer);
    tcase_add_test(tc, test_resume_decides_as_unbroken);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_executable);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
