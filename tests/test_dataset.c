/* test_dataset.c — the validation split and truncation on a synthetic data set, pixel by pixel; the epoch shuffle.
 *
 * Sample s of the synthetic set has pixel j = (s * 16 + j) mod 256 and label (3 s) mod 4, so every sample's bytes
 * and label say which sample it was. tt_dataset_split_tail must move the last n_val samples (copies, in order) into
 * val and leave the first n - n_val in the source; tt_dataset_truncate keeps a prefix. The end-to-end test checks
 * the split on Fashion-MNIST only when that package is installed; these checks run everywhere.
 * --classes N against every split: a label >= N in the validation split (the training file's tail) or in the test
 * split is refused like one in the training split, by train and by eval.
 * Not for: reading IDX files (test_idx.c). */
#include "tt_test.h"
#include "tt_train.h"

enum { N = 7, ROWS = 2, COLS = 3, DIM = ROWS * COLS, CLASSES = 4 };

static uint8_t pixel(size_t s, size_t j) { return (uint8_t)((s * 16 + j) % 256); }
static int32_t label(size_t s) { return (int32_t)((3 * s) % CLASSES); }

static void make(tt_dataset *ds, size_t n)
{
    tt_test_dataset_zero(ds, n, ROWS, COLS, CLASSES);
    for (size_t s = 0; s < n; s++) {
        for (size_t j = 0; j < DIM; j++) ds->x[s * DIM + j] = pixel(s, j);
        ds->y[s] = label(s);
    }
}

/* ds holds samples first .. first + ds->n - 1 of the synthetic set, with its shape. */
static void check_samples(const tt_dataset *ds, size_t first, size_t n, const char *what)
{
    ck_assert_msg(ds->n == n, "%s: %zu samples, want %zu", what, ds->n, n);
    ck_assert_uint_eq(ds->dim, DIM);
    ck_assert_uint_eq(ds->shape.d[0], ROWS);
    ck_assert_uint_eq(ds->shape.d[1], COLS);
    ck_assert_uint_eq(ds->n_classes, CLASSES);
    ck_assert(ds->scale == 1.0f / 255.0f);
    for (size_t s = 0; s < n; s++) {
        for (size_t j = 0; j < DIM; j++)
            ck_assert_msg(ds->x[s * DIM + j] == pixel(first + s, j), "%s sample %zu pixel %zu: %d, want %d", what, s,
                          j, ds->x[s * DIM + j], pixel(first + s, j));
        ck_assert_msg(ds->y[s] == label(first + s), "%s sample %zu: label %d, want %d", what, s, ds->y[s],
                      label(first + s));
    }
}

START_TEST(test_split_tail_pixels)
{
    for (size_t n_val = 1; n_val < N; n_val++) { /* n_val = N - 1 leaves one training sample */
        tt_dataset train, val;
        tt_error err;
        make(&train, N);
        ck_assert_int_eq(tt_dataset_split_tail(&train, n_val, &val, &err), TT_OK);
        check_samples(&val, N - n_val, n_val, "val");
        check_samples(&train, 0, N - n_val, "train");
        ck_assert_ptr_ne(val.x, train.x); /* copies: val outlives changes to train */
        memset(train.x, 0xAB, N * DIM);
        check_samples(&val, N - n_val, n_val, "val after train was overwritten");
        tt_dataset_free(&val);
        tt_dataset_free(&train);
    }
}
END_TEST

START_TEST(test_split_tail_none)
{
    tt_dataset train, val;
    tt_error err;
    make(&train, N);
    ck_assert_int_eq(tt_dataset_split_tail(&train, 0, &val, &err), TT_OK);
    ck_assert_uint_eq(val.n, 0);
    ck_assert_ptr_null(val.x);
    ck_assert_ptr_null(val.y);
    check_samples(&train, 0, N, "train");
    tt_dataset_free(&val); /* an empty split is freed like any other */
    tt_dataset_free(&train);
}
END_TEST

/* n_val = n (nothing left to train on) and more are errors that name the flag and leave the source untouched. */
START_TEST(test_split_tail_too_many)
{
    for (size_t n_val = N; n_val <= N + 1; n_val++) {
        tt_dataset train, val;
        tt_error err;
        make(&train, N);
        ck_assert_int_eq(tt_dataset_split_tail(&train, n_val, &val, &err), TT_ERR_ARG);
        ck_assert_msg(strstr(err.msg, "--val-samples") != NULL, "message: %s", err.msg);
        ck_assert_uint_eq(val.n, 0);
        ck_assert_ptr_null(val.x);
        check_samples(&train, 0, N, "train after a refused split");
        tt_dataset_free(&train);
    }
}
END_TEST

START_TEST(test_truncate)
{
    tt_dataset ds;
    make(&ds, N);
    tt_dataset_truncate(&ds, N + 3); /* more than there are: unchanged */
    check_samples(&ds, 0, N, "truncate to more");
    tt_dataset_truncate(&ds, N);
    check_samples(&ds, 0, N, "truncate to n");
    tt_dataset_truncate(&ds, 4);
    check_samples(&ds, 0, 4, "truncate to 4");
    tt_dataset_truncate(&ds, 1);
    check_samples(&ds, 0, 1, "truncate to 1");
    tt_dataset_free(&ds);
}
END_TEST

/* What tt_run_load does: split the validation tail off, then keep a prefix of what remains. */
START_TEST(test_split_then_truncate)
{
    tt_dataset train, val;
    tt_error err;
    make(&train, N);
    ck_assert_int_eq(tt_dataset_split_tail(&train, 2, &val, &err), TT_OK);
    tt_dataset_truncate(&train, 3);
    check_samples(&train, 0, 3, "train");
    check_samples(&val, 5, 2, "val"); /* the last two of the file, not of the truncated set */
    tt_dataset_free(&val);
    tt_dataset_free(&train);
}
END_TEST

/* The epoch shuffle (tt_rng_shuffle, Fisher-Yates) gives every order of 3 items alike: 6000 shuffles, one per
 * stream as the epochs draw them (tt_rng_seed(seed, epoch)), must hit each of the 6 orders 1000 +- 150 times
 * (binomial sd 29: a 5-sd bound, on fixed seeds, so the test is deterministic). Sattolo's variant (j < i - 1) makes
 * only the 2 cyclic orders; a shuffle that leaves the last item in place makes 2 others never. */
START_TEST(test_shuffle_uniform)
{
    enum { SHUFFLES = 6000 };
    int count[3][3][3] = {{{0}}};
    for (uint64_t e = 1; e <= SHUFFLES; e++) {
        uint32_t idx[3] = {0, 1, 2};
        tt_rng r;
        tt_rng_seed(&r, 1, e);
        tt_rng_shuffle(&r, idx, 3);
        ck_assert(idx[0] < 3 && idx[1] < 3 && idx[2] < 3);
        ck_assert(idx[0] != idx[1] && idx[1] != idx[2] && idx[0] != idx[2]); /* a permutation */
        count[idx[0]][idx[1]][idx[2]]++;
    }
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            if (b == a) continue;
            const int c = 3 - a - b, n = count[a][b][c];
            ck_assert_msg(n >= 850 && n <= 1150, "order %d%d%d: %d of %d shuffles, want 1000 +- 150", a, b, c, n,
                          SHUFFLES);
        }
}
END_TEST

/* --classes N: the model has N outputs, so every label must be in 0..N-1 (README: "a label >= N is then refused") —
 * in whichever split it lies, not only in the samples trained on. An MNIST-format set (labels 0..9 are IDX-valid) of
 * 200 training samples, the last 40 the validation split, and 30 test samples, labels 0..5 but for one: a label of
 * 6 (N itself) or 9 at training sample 197 (in the validation split) or at test sample 23, with --classes 6. Each is
 * refused with one line naming the file's split and sample (the validation split is the training file's tail, its
 * samples counted there) — by tt_run_load, train, and eval on the split that holds it; the same set with label 5
 * there (N - 1) trains. */
START_TEST(test_classes_checked_in_every_split)
{
    enum { NTR = 200, NVAL = 40, NTE = 30, DIM = 16, CLASSES = 6, AT_VAL = 197, AT_TEST = 23 };
    static unsigned char img[NTR * DIM], lab[NTR], tlab[NTE];
    for (int i = 0; i < NTR * DIM; i++) img[i] = (unsigned char)((i * 7) % 251);
    ck_assert(AT_VAL >= NTR - NVAL && AT_TEST < NTE); /* the one label lies in the validation and the test split */
    static const int labels[] = {CLASSES, 9, CLASSES - 1};
    for (int in_test = 0; in_test < 2; in_test++)
        for (size_t li = 0; li < sizeof labels / sizeof *labels; li++) {
            const int bad = labels[li] >= CLASSES; /* the rule: 0 <= label < N */
            char d[256], out[300], err[300], args[1024], want[160];
            tt_test_tmpdir(d, sizeof d);
            for (int i = 0; i < NTR; i++) lab[i] = (unsigned char)(i % CLASSES);
            for (int i = 0; i < NTE; i++) tlab[i] = (unsigned char)(i % CLASSES);
            if (in_test) tlab[AT_TEST] = (unsigned char)labels[li];
            else lab[AT_VAL] = (unsigned char)labels[li];
            const uint32_t tri[3] = {NTR, 4, 4}, trl[1] = {NTR}, tei[3] = {NTE, 4, 4}, tel[1] = {NTE};
            tt_test_write_idx(d, "train-images-idx3-ubyte.gz", 3, tri, img, sizeof img);
            tt_test_write_idx(d, "train-labels-idx1-ubyte.gz", 1, trl, lab, sizeof lab);
            tt_test_write_idx(d, "t10k-images-idx3-ubyte.gz", 3, tei, img, NTE * DIM);
            tt_test_write_idx(d, "t10k-labels-idx1-ubyte.gz", 1, tel, tlab, sizeof tlab);
            snprintf(out, sizeof out, "%s/stdout", d);
            snprintf(err, sizeof err, "%s/stderr", d);
            snprintf(want, sizeof want, "--classes %d: %s sample %d has label %d (labels must be 0..%d)", CLASSES,
                     in_test ? "test" : "training", in_test ? AT_TEST : AT_VAL, labels[li], CLASSES - 1);
            /* the library's loader */
            tt_run_config c;
            tt_run_config_defaults(&c);
            c.data = d;
            c.classes = CLASSES;
            c.val_samples = NVAL;
            tt_dataset train, val, test;
            tt_error e = {{0}};
            const tt_status s = tt_run_load(&c, &train, &val, &test, &e);
            if (bad) {
                ck_assert_msg(s == TT_ERR_FORMAT && strcmp(e.msg, want) == 0, "label %d: '%s', want '%s'",
                              labels[li], s ? e.msg : "accepted", want);
            } else {
                ck_assert_msg(s == TT_OK, "%s", e.msg);
                ck_assert_uint_eq(val.n, NVAL);
                ck_assert_int_eq(in_test ? test.y[AT_TEST] : val.y[AT_VAL - (NTR - NVAL)], labels[li]);
                ck_assert_uint_eq(train.n_classes, CLASSES);
                tt_dataset_free(&train);
                tt_dataset_free(&val);
                tt_dataset_free(&test);
            }
            /* train, and eval on the split that holds the label (refused before the checkpoint is read) */
            snprintf(args, sizeof args, "train --device cpu --data %s --val-samples %d --classes %d --epochs 1 "
                     "--batch 32 --progress quiet", d, NVAL, CLASSES);
            tt_test_expect(args, bad ? 1 : 0, bad ? want : "", out, err);
            if (!bad) continue;
            snprintf(args, sizeof args, "eval --checkpoint %s/none.safetensors --split %s --data %s --val-samples %d "
                     "--classes %d", d, in_test ? "test" : "val", d, NVAL, CLASSES);
            tt_test_expect(args, 1, want, out, err);
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dataset");
    TCase *tc = tcase_create("split");
    tcase_add_test(tc, test_split_tail_pixels);
    tcase_add_test(tc, test_split_tail_none);
    tcase_add_test(tc, test_split_tail_too_many);
    tcase_add_test(tc, test_truncate);
    tcase_add_test(tc, test_split_then_truncate);
    tcase_add_test(tc, test_shuffle_uniform);
    tcase_add_test(tc, test_classes_checked_in_every_split);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
