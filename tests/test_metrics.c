/* test_metrics.c — accuracy and top-5 against known answers.
 *
 * A one-layer model (`dense units=10`, C = D = 10) with weights set by hand to the identity and biases to zero, so
 * that sample s's logits are its own pixels: z_c = x_c / 255. Each sample is written so that its label has a chosen
 * rank, the number of classes whose logit is strictly greater than the label's (tt_math.h: top-k is correct iff
 * rank < k); ties with the label do not count. The expected accuracy and top-5 are counted by hand from the table
 * below, not recomputed from logits, and are asserted exactly: they are ratios of small integers, computed by the
 * trainer as (double)count / n. Evaluation and the training step's counts are both checked, with 1 and 3 towers
 * (23 samples: uneven shards, and evaluation in several chunks per tower).
 * Not for: the loss formula (test_math.c) or the gradients (test_grad.c). */
#include "tt_test.h"
#include "tt_trainer.h"

enum { C = 10, D = 10, HIGH = 200, LABEL = 100, LOW = 20 };

/* Per sample: label, how many other classes score strictly higher (the rank), how many tie with the label. */
static const struct {
    int label, rank, ties;
} SAMPLES[] = {
    {3, 0, 0}, {7, 0, 1}, {0, 0, 9}, {9, 0, 4}, /* rank 0: top-1 and top-5 (ties do not lower the rank) */
    {1, 1, 0}, {4, 1, 3},                       /* rank 1: the mutation "rank < 2" for top-1 counts these */
    {2, 2, 0}, {5, 3, 2}, {6, 4, 0}, {8, 4, 5}, /* ranks 2..4: top-5 only */
    {0, 5, 0}, {3, 5, 4}, {1, 6, 1}, {9, 9, 0}, /* rank >= 5: neither ("rank <= 5" would count 10, 11, 17) */
    {5, 0, 0}, {6, 1, 1}, {7, 2, 2}, {8, 5, 1}, {2, 7, 2}, {4, 0, 2}, {3, 8, 0}, {1, 3, 6}, {0, 4, 5},
};
#define N (sizeof SAMPLES / sizeof SAMPLES[0])
/* Counted by hand from the table (rows from 0): rank 0 in rows 0-3, 14, 19 -> 6; rank < 5: those, rows 4-9, 15, 16, 21, 22 -> 16 */
#define WANT_TOP1 6
#define WANT_TOP5 16

/* Sample s: the label's pixel is LABEL; `rank` other classes get HIGH (distinct values, all above LABEL),
 * `ties` get LABEL, the rest LOW or less. Which classes get what rotates with the label. */
static void make_dataset(tt_dataset *ds)
{
    tt_test_dataset_zero(ds, N, 1, D, C);
    for (size_t s = 0; s < N; s++) {
        const int L = SAMPLES[s].label, r = SAMPLES[s].rank, t = SAMPLES[s].ties;
        ck_assert(r + t <= C - 1);
        uint8_t *x = ds->x + s * D;
        x[L] = LABEL;
        for (int k = 0; k < C - 1; k++) {
            int c = (L + 1 + k) % C;
            x[c] = (uint8_t)(k < r ? HIGH + k : k < r + t ? LABEL : LOW - k);
        }
        ds->y[s] = L;
    }
}

/* The model with W = I (D x C, row-major) and b = 0: logits = pixels * scale. */
static void make_model(tt_model *m, float *params)
{
    tt_error err;
    ck_assert_msg(tt_model_parse(m, "dense units=10 activation=linear\n", "metrics", TT_FLAT_INPUT(D, C), &err) ==
                      TT_OK,
                  "%s", err.msg);
    ck_assert_uint_eq(m->n_params, D * C + C);
    for (size_t i = 0; i < m->n_params; i++) params[i] = 0.0f;
    for (size_t j = 0; j < D; j++) params[j * C + j] = 1.0f;
}

static void make_trainer(tt_trainer **tr, const tt_model *m, const float *params, size_t towers, size_t batch)
{
    tt_trainer_config tc = tt_test_config(towers, batch, tt_optim_defaults(TT_OPT_SGD), TT_REDUCE_CPU);
    tt_error err;
    ck_assert_msg(tt_trainer_init(tr, m, &tc, params, &err) == TT_OK, "%s", err.msg);
}

/* The mean loss from the definition, in double: log(sum_c e^{z_c}) - z_label with z = pixels / 255. */
static double want_mean_loss(const tt_dataset *ds)
{
    double sum = 0;
    for (size_t s = 0; s < ds->n; s++) {
        double e = 0;
        for (size_t c = 0; c < C; c++) e += exp(ds->x[s * D + c] / 255.0);
        sum += log(e) - ds->x[s * D + (size_t)ds->y[s]] / 255.0;
    }
    return sum / (double)ds->n;
}

/* Evaluation with 1 tower (batch 4: six chunks) and 3 towers (batch 9: shards of 8, 8, 7 in chunks of 3). */
START_TEST(test_evaluate_known_ranks)
{
    static const size_t towers[2] = {1, 3}, batch[2] = {4, 9};
    tt_dataset ds;
    make_dataset(&ds);
    tt_model m;
    float params[D * C + C];
    make_model(&m, params);
    for (int k = 0; k < 2; k++) {
        tt_trainer *tr = NULL;
        make_trainer(&tr, &m, params, towers[k], batch[k]);
        tt_eval_result ev;
        tt_error err;
        ck_assert_int_eq(tt_trainer_evaluate(tr, &ds, &ev, &err), TT_OK);
        ck_assert_uint_eq(ev.n, N);
        ck_assert_msg(ev.accuracy == (double)WANT_TOP1 / N, "%zu towers: accuracy %.9g, want %d/%zu", towers[k],
                      ev.accuracy, WANT_TOP1, N);
        ck_assert_msg(ev.top5 == (double)WANT_TOP5 / N, "%zu towers: top5 %.9g, want %d/%zu", towers[k], ev.top5,
                      WANT_TOP5, N);
        /* float32 softmax over 10 logits in [0, 1]: a few ulps per sample; 1e-6 relative is ample */
        double want = want_mean_loss(&ds);
        ck_assert_msg(tt_close(ev.loss, want, 0, 1e-6), "loss %.9g want %.9g", ev.loss, want);
        tt_trainer_free(tr);
    }
    tt_dataset_free(&ds);
}
END_TEST

/* A training step counts top-1 / top-5 from its forward pass (before the update): the same answers, with the
 * samples in a shuffled order and split over 1 and 3 towers. */
START_TEST(test_step_counts_known_ranks)
{
    tt_dataset ds;
    make_dataset(&ds);
    tt_model m;
    float params[D * C + C];
    make_model(&m, params);
    uint32_t idx[N];
    for (size_t i = 0; i < N; i++) idx[i] = (uint32_t)i;
    tt_rng r;
    tt_rng_seed(&r, 3, 0);
    tt_rng_shuffle(&r, idx, N);
    for (size_t towers = 1; towers <= 3; towers += 2) {
        tt_trainer *tr = NULL;
        make_trainer(&tr, &m, params, towers, N);
        tt_step_result res;
        tt_error err;
        ck_assert_int_eq(tt_trainer_step(tr, &ds, idx, N, &res, &err), TT_OK);
        ck_assert_uint_eq(res.n, N);
        ck_assert_msg(res.top1 == WANT_TOP1, "%zu towers: top1 %zu, want %d", towers, res.top1, WANT_TOP1);
        ck_assert_msg(res.top5 == WANT_TOP5, "%zu towers: top5 %zu, want %d", towers, res.top5, WANT_TOP5);
        double want = want_mean_loss(&ds) * N;
        ck_assert_msg(tt_close(res.loss_sum, want, 0, 1e-6), "loss sum %.9g want %.9g", res.loss_sum, want);
        tt_trainer_free(tr);
    }
    tt_dataset_free(&ds);
}
END_TEST

/* The table itself: every row's pixels give the rank it claims (guards the test's data, not the trainer). */
START_TEST(test_table_consistent)
{
    tt_dataset ds;
    make_dataset(&ds);
    int top1 = 0, top5 = 0;
    for (size_t s = 0; s < N; s++) {
        const uint8_t *x = ds.x + s * D;
        int rank = 0, ties = 0;
        for (int c = 0; c < C; c++) {
            rank += x[c] > x[ds.y[s]];
            ties += c != ds.y[s] && x[c] == x[ds.y[s]];
        }
        ck_assert_int_eq(rank, SAMPLES[s].rank);
        ck_assert_int_eq(ties, SAMPLES[s].ties);
        top1 += rank < 1;
        top5 += rank < 5;
    }
    ck_assert_int_eq(top1, WANT_TOP1);
    ck_assert_int_eq(top5, WANT_TOP5);
    tt_dataset_free(&ds);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("known answers");
    tcase_add_test(tc, test_table_consistent);
    tcase_add_test(tc, test_evaluate_known_ranks);
    tcase_add_test(tc, test_step_counts_known_ranks);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
