/* test_grad.c — finite-difference checks of every layer kind's backward pass, and of whole models with their loss.
 *
 * Central differences in float32 with step h: truncation error O(h^2), rounding error O(eps * |L| / h). With
 * h = 1e-2 on O(1) values both stay below ~1e-4, so analytic and numeric gradients must agree to
 * atol 2e-3 + rtol 2e-2 (a wrong formula is off by O(1)). Max pooling and ReLU have kinks: their inputs are spread
 * so that no +-h step crosses one (distinct values at least 4h apart within a window, |x| >= 0.1 for ReLU).
 * Convolutions are checked twice: in chunks of one sample (the CPU backend's chunking) and as one whole-shard GEMM
 * (a GPU's): the two must agree, and both with the finite differences. */
#include "tt_dev.h"
#include "tt_model.h"
#include "tt_test.h"

static const double H = 1e-2, ATOL = 2e-3, RTOL = 2e-2;
/* The whole model has ReLU kinks inside: a smaller step keeps the +-h points on one side of them (rounding noise
 * eps*|L|/h ~ 1e-4 stays far below ATOL). */
static const double H_MODEL = 1e-3;

static void fill_uniform(float *x, size_t n, tt_rng *r, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * tt_rng_uniform(r);
}

/* Central difference of loss(ctx) with respect to v[i] with step h. */
static double central(float *v, size_t i, double h, double (*loss)(void *), void *ctx)
{
    float keep = v[i];
    v[i] = keep + (float)h;
    double lp = loss(ctx);
    v[i] = keep - (float)h;
    double lm = loss(ctx);
    v[i] = keep;
    return (lp - lm) / (2 * h);
}

/* Central differences of loss(ctx) with respect to each v[i], compared with analytic[i]. Where they disagree, the
 * difference is taken again with h/4: if the two numeric values disagree with each other as well, a ReLU or max
 * kink lies within +-h of the point (the function is not smooth there, in a chain of random layers a near tie in a
 * pooling window happens) and the element is skipped as a kink; a wrong formula gives a stable numeric value that
 * disagrees with the analytic one and fails. At most 1 element in 20 (+1) may be a kink. */
static void check_fd(const char *what, float *v, size_t n, const float *analytic, double h, double (*loss)(void *),
                     void *ctx)
{
    size_t kinks = 0;
    for (size_t i = 0; i < n; i++) {
        double num = central(v, i, h, loss, ctx);
        if (tt_close(analytic[i], num, ATOL, RTOL)) continue;
        double fine = central(v, i, h / 4, loss, ctx);
        if (!tt_close(fine, num, ATOL, RTOL)) {
            kinks++;
            continue;
        }
        ck_assert_msg(0, "%s %zu: analytic %g numeric %g (h/4: %g)", what, i, analytic[i], num, fine);
    }
    ck_assert_msg(kinks <= n / 20 + 1, "%s: %zu of %zu elements near a kink: the check saw too little", what, kinks, n);
}

/* One layer under the loss L = sum_{r,c} R[r,c] * y[r,c], so dL/dy = R. */
typedef struct layer_case {
    tt_dev *dev;
    const tt_layer *l;
    tt_pass ps;
    float *p, *x, *y, *R;
    size_t B;
} layer_case;

static double layer_loss(void *arg)
{
    layer_case *c = (layer_case *)arg;
    c->l->kind->forward(c->dev, c->l, &c->ps, c->p, c->x, c->y, c->B);
    double acc = 0;
    for (size_t k = 0; k < c->B * c->l->out; k++) acc += (double)c->R[k] * c->y[k];
    return acc;
}

/* Inputs for a layer: uniform in [-1, 1]; for max pooling a permutation of well-separated values (no ties, no kink
 * within h); for ReLU away from 0; for an embedding, token ids. */
static void layer_inputs(const tt_layer *l, float *x, size_t n, tt_rng *r)
{
    fill_uniform(x, n, r, -1.0f, 1.0f);
    if (l->kind == &tt_layer_relu)
        for (size_t i = 0; i < n; i++) x[i] = x[i] < 0 ? x[i] - 0.1f : x[i] + 0.1f;
    if (l->kind == &tt_layer_maxpool2d || l->kind == &tt_layer_maxpool1d || l->kind == &tt_layer_globalmaxpool1d) {
        for (size_t i = 0; i < n; i++) x[i] = 0.05f * (float)i - 0.025f * (float)n; /* 5h apart */
        for (size_t i = n; i-- > 1;) { /* shuffled */
            size_t j = tt_rng_below(r, i + 1);
            float t = x[i];
            x[i] = x[j];
            x[j] = t;
        }
    }
    if (l->kind == &tt_layer_embedding)
        for (size_t i = 0; i < n; i++) x[i] = (float)tt_rng_below(r, l->vocab);
}

/* Runs layer li's forward and backward with chunk_mnk, checks them against finite differences, and returns the
 * analytic parameter and input gradients (caller frees) so that two chunkings can be compared. */
static void check_layer_chunk(const tt_model *m, size_t li, size_t B, uint64_t seed, size_t chunk_mnk,
                              float **g_out, float **dx_out)
{
    tt_dev dev;
    tt_error err;
    ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
    const tt_layer *l = &m->layers[li];
    tt_rng r;
    tt_rng_seed(&r, seed, 0);
    size_t np = l->n_params ? l->n_params : 1, ws = l->kind->workspace ? l->kind->workspace(l, B, chunk_mnk) : 1;
    /* the whole model's buffer: a batchnorm reads its moving statistics in the tail (l->stat_offset) */
    float *all = tt_dev_alloc_f32(&dev, m->n_params + 1), *p = all + l->offset;
    float *g = tt_dev_alloc_f32(&dev, np), *w = tt_dev_alloc_f32(&dev, ws);
    float *saved = tt_dev_alloc_f32(&dev, m->n_saved + 1);
    float *x = tt_dev_alloc_f32(&dev, B * l->in), *y = tt_dev_alloc_f32(&dev, B * l->out);
    float *R = tt_dev_alloc_f32(&dev, B * l->out), *dx = tt_dev_alloc_f32(&dev, B * l->in);
    uint32_t ids[64];
    ck_assert(B <= 64);
    for (size_t i = 0; i < B; i++) ids[i] = (uint32_t)(1000 + 7 * i);
    fill_uniform(all, m->n_params + 1, &r, -0.8f, 0.8f);
    layer_inputs(l, x, B * l->in, &r);
    fill_uniform(R, B * l->out, &r, -1.0f, 1.0f);
    const tt_pass ps = {.training = 1,
                        .seed = 5,
                        .epoch = 2,
                        .d_ids = ids,
                        .d_ws = w,
                        .chunk_mnk = chunk_mnk,
                        .d_saved = saved,
                        .share = 1.0f,
                        .rows_all = B};
    layer_case c = {&dev, l, ps, p, x, y, R, B};
    l->kind->forward(&dev, l, &c.ps, p, x, y, B);
    const int has_dx = l->kind != &tt_layer_embedding; /* token ids have no gradient */
    l->kind->backward(&dev, l, &c.ps, p, g, x, y, R, has_dx ? dx : NULL, B);
    char what[64];
    snprintf(what, sizeof what, "%s param (chunk %zu)", l->name, chunk_mnk);
    if (l->n_params) check_fd(what, p, l->n_params, g, H, layer_loss, &c);
    snprintf(what, sizeof what, "%s dx (chunk %zu)", l->name, chunk_mnk);
    if (has_dx) check_fd(what, x, B * l->in, dx, H, layer_loss, &c);
    *g_out = (float *)tt_malloc(np * sizeof(float));
    *dx_out = (float *)tt_malloc(B * l->in * sizeof(float));
    memcpy(*g_out, g, np * sizeof(float));
    memcpy(*dx_out, dx, B * l->in * sizeof(float));
    float *bufs[] = {all, g, w, x, y, R, dx, saved};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tt_dev_dfree(&dev, bufs[i]);
    tt_dev_free(&dev);
}

/* Layer li of the model `text` for input shape `in` (1..3 dims) and C classes: checked by finite differences in
 * chunks of one sample and as one chunk; the two chunkings give the same gradients (to float rounding: dW is summed
 * per chunk, then across them). */
static void check_layer(const char *text, tt_shape in, size_t C, size_t li, size_t B, uint64_t seed)
{
    tt_model m;
    tt_error err;
    tt_model_input mi = {in, C, 11};
    ck_assert_msg(tt_model_parse(&m, text, "t", &mi, &err) == TT_OK, "%s", err.msg);
    const tt_layer *l = &m.layers[li];
    float *g1, *dx1, *g0, *dx0;
    check_layer_chunk(&m, li, B, seed, 1, &g1, &dx1);
    check_layer_chunk(&m, li, B, seed, 0, &g0, &dx0);
    for (size_t i = 0; i < l->n_params; i++)
        ck_assert_msg(tt_close(g1[i], g0[i], 1e-5, 1e-5), "%s: chunked dW[%zu] %g, whole %g", l->name, i, g1[i], g0[i]);
    for (size_t i = 0; l->kind != &tt_layer_embedding && i < B * l->in; i++) /* ids: no dx */
        ck_assert_msg(tt_close(dx1[i], dx0[i], 1e-6, 1e-6), "%s: chunked dx[%zu] %g, whole %g", l->name, i, dx1[i],
                      dx0[i]);
    tt_free(g1);
    tt_free(dx1);
    tt_free(g0);
    tt_free(dx0);
}

START_TEST(test_dense_grad) { check_layer("dense units=4\n", tt_shape1(5), 4, 0, 3, 11); }
END_TEST

START_TEST(test_relu_grad) { check_layer("dense units=6\nrelu\ndense units=3\n", tt_shape1(5), 3, 1, 4, 12); }
END_TEST

/* same padding with stride 2 (uneven padding: 1 before, 2 after on a 6-wide input with a 3-kernel... and 7), valid
 * padding with a non-square kernel, and use_bias=false: every path of the geometry */
START_TEST(test_conv2d_grad)
{
    check_layer("conv2d filters=3 kernel=3 padding=same\nflatten\ndense units=2\n", tt_shape3(5, 5, 2), 2, 0, 2, 13);
    check_layer("conv2d filters=2 kernel=3 strides=2 padding=same\nflatten\ndense units=2\n", tt_shape3(6, 7, 2), 2, 0,
                2, 14);
    check_layer("conv2d filters=2 kernel=2,3 padding=valid use_bias=false\nflatten\ndense units=2\n",
                tt_shape3(4, 5, 3), 2, 0, 3, 15);
}
END_TEST

START_TEST(test_conv1d_grad)
{
    check_layer("conv1d filters=4 kernel=3\nflatten\ndense units=2\n", tt_shape2(9, 3), 2, 0, 2, 16);
    check_layer("conv1d filters=2 kernel=4 strides=2 padding=same\nflatten\ndense units=2\n", tt_shape2(9, 2), 2, 0,
                3, 17);
}
END_TEST

/* pool 2 stride 2 on an odd size (the last row dropped), overlapping windows (pool 3 stride 1) and same padding */
START_TEST(test_maxpool2d_grad)
{
    check_layer("maxpool2d pool=2\nflatten\ndense units=2\n", tt_shape3(5, 4, 2), 2, 0, 2, 18);
    check_layer("maxpool2d pool=3 strides=1\nflatten\ndense units=2\n", tt_shape3(4, 5, 2), 2, 0, 2, 19);
    check_layer("maxpool2d pool=2 padding=same\nflatten\ndense units=2\n", tt_shape3(5, 5, 1), 2, 0, 2, 20);
}
END_TEST

START_TEST(test_maxpool1d_grad)
{
    check_layer("maxpool1d pool=2\nflatten\ndense units=2\n", tt_shape2(9, 3), 2, 0, 2, 21);
    check_layer("globalmaxpool1d\ndense units=2\n", tt_shape2(7, 3), 2, 0, 3, 22);
}
END_TEST

/* In a training step dropout is linear in x with a fixed mask: the finite differences see the mask */
START_TEST(test_dropout_grad)
{
    check_layer("dropout rate=0.5\nflatten\ndense units=2\n", tt_shape2(4, 3), 2, 0, 4, 23);
}
END_TEST

START_TEST(test_flatten_grad) { check_layer("flatten\ndense units=2\n", tt_shape3(2, 3, 2), 2, 0, 2, 24); }
END_TEST

START_TEST(test_embedding_grad)
{
    check_layer("embedding dim=3\nflatten\ndense units=2\n", tt_shape1(6), 2, 0, 4, 25); /* vocab 11: ids repeat */
}
END_TEST

/* Batch statistics in a training step: dx carries the mean's and the variance's dependence on every row; over the
 * channels of a dense output (rows = samples) and of an image (rows = samples x pixels), and as a first layer. */
START_TEST(test_batchnorm_grad)
{
    check_layer("dense units=4\nbatchnorm\ndense units=2\n", tt_shape1(3), 2, 1, 5, 26);
    check_layer("batchnorm momentum=0.9 epsilon=0.01\nflatten\ndense units=2\n", tt_shape3(2, 3, 4), 2, 0, 3, 27);
}
END_TEST

/* The whole model under its loss: mean softmax cross-entropy over the batch. */
typedef struct model_case {
    tt_dev *dev;
    const tt_model *m;
    tt_pass ps;
    float *params;
    float **act;
    float *stats;
    const int32_t *labels;
    size_t B;
} model_case;

static double model_loss(void *arg)
{
    model_case *c = (model_case *)arg;
    tt_model_forward(c->dev, c->m, &c->ps, c->params, c->act, c->B);
    tt_dev_softmax_xent(c->dev, NULL, c->stats, tt_model_logits(c->m, c->act), c->labels, c->B, c->m->n_classes, 0.0f);
    double sum = 0;
    for (size_t b = 0; b < c->B; b++) sum += c->stats[2 * b];
    return sum / (double)c->B;
}

/* Every parameter of a whole model (text, input shape) by finite differences. */
static void check_model(const char *text, tt_shape in, size_t C, size_t vocab)
{
    tt_model m;
    tt_error err;
    tt_model_input mi = {in, C, vocab};
    ck_assert_msg(tt_model_parse(&m, text, "t", &mi, &err) == TT_OK, "%s", err.msg);
    const size_t B = 5, P = m.n_params;
    tt_dev dev;
    ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
    float *params = tt_dev_alloc_f32(&dev, P), *grads = tt_dev_alloc_f32(&dev, P);
    float *act[TT_MAX_LAYERS + 1], *delta[2];
    for (size_t i = 0; i <= m.n_logits; i++) /* a relu epilogue's output is its input (tt_model_act_shared) */
        act[i] = tt_model_act_shared(&m, i) ? act[i - 1]
                                            : tt_dev_alloc_f32(&dev, B * (i ? m.layers[i - 1].out : m.input_dim));
    delta[0] = tt_dev_alloc_f32(&dev, B * m.max_width);
    delta[1] = tt_dev_alloc_f32(&dev, B * m.max_width);
    size_t ws = tt_model_workspace(&m, B, tt_dev_cpu_ops.chunk_mnk);
    float *w = tt_dev_alloc_f32(&dev, ws ? ws : 1);
    float *dlogits = tt_dev_alloc_f32(&dev, B * m.n_classes), *stats = tt_dev_alloc_f32(&dev, 2 * B);
    float *saved = tt_dev_alloc_f32(&dev, m.n_saved + 1);
    int32_t labels[5] = {0, 3, 1, 2, 3};
    uint32_t ids[5] = {4, 9, 2, 7, 1};
    for (size_t b = 0; b < B; b++) labels[b] %= (int32_t)C;
    tt_model_init_params(&m, params, 3);
    tt_rng r;
    tt_rng_seed(&r, 5, 0);
    for (size_t i = 0; i < P; i++) params[i] += 0.1f * (tt_rng_uniform(&r) - 0.5f); /* non-zero biases too */
    fill_uniform(act[0], B * m.input_dim, &r, 0.0f, 1.0f);
    if (vocab)
        for (size_t i = 0; i < B * m.input_dim; i++) act[0][i] = (float)tt_rng_below(&r, vocab);
    model_case mc = {&dev,
                     &m,
                     {.training = 1,
                      .seed = 7,
                      .epoch = 1,
                      .d_ids = ids,
                      .d_ws = w,
                      .chunk_mnk = tt_dev_cpu_ops.chunk_mnk,
                      .d_saved = saved,
                      .share = 1.0f,
                      .rows_all = B},
                     params,
                     act,
                     stats,
                     labels,
                     B};
    tt_model_forward(&dev, &m, &mc.ps, params, act, B);
    tt_dev_softmax_xent(&dev, dlogits, stats, tt_model_logits(&m, act), labels, B, m.n_classes, 1.0f / (float)B);
    tt_model_backward(&dev, &m, &mc.ps, params, grads, act, delta, dlogits, B);
    const size_t PT = m.n_trainable; /* the tail (moving statistics) has no gradient */
    for (size_t i = 0; i < PT; i++) ck_assert(isfinite(grads[i]));
    check_fd("param", params, PT, grads, H_MODEL, model_loss, &mc);
    for (size_t i = 0; i <= m.n_logits; i++)
        if (!tt_model_act_shared(&m, i)) tt_dev_dfree(&dev, act[i]);
    float *bufs[] = {delta[0], delta[1], w, dlogits, stats, params, grads, saved};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tt_dev_dfree(&dev, bufs[i]);
    tt_dev_free(&dev);
}

START_TEST(test_model_grad)
{
    check_model("dense units=7 activation=relu\ndense units=6 activation=relu\ndense units=4\n", tt_shape1(5), 4, 0);
    check_model("dense units=6 activation=relu\ndense units=4 activation=softmax\n", tt_shape1(5), 4, 0);
    /* the epilogue without a bias, a relu line after a dense (an epilogue too), a relu after a dropout (run as a
     * layer of its own), and a model ending in a relu epilogue (its logits are the relu's output) */
    check_model("dense units=7 use_bias=false activation=relu\ndense units=6\nrelu\ndropout rate=0.2\nrelu\n"
                "dense units=4 activation=relu\n",
                tt_shape1(5), 4, 0);
}
END_TEST

/* A small cnn (conv same + valid, pool, dropout, flatten, dense, softmax) and a small textcnn (embedding, conv1d,
 * pool, flatten, dense, softmax): every parameter, through every layer kind's backward in sequence. */
START_TEST(test_conv_models_grad)
{
    check_model("conv2d filters=3 kernel=3 padding=same activation=relu\nconv2d filters=2 kernel=2 use_bias=false "
                "activation=relu\nmaxpool2d pool=2\n"
                "dropout rate=0.25\nflatten\ndense units=4 activation=relu\ndense units=3 activation=softmax\n",
                tt_shape3(6, 6, 2), 3, 0);
    check_model("embedding dim=3\nconv1d filters=4 kernel=3 activation=relu\nmaxpool1d pool=2\nflatten\n"
                "dense units=3 activation=softmax\n", tt_shape1(8), 3, 9);
    /* batchnorm after a conv (before its relu) and after a dense: the tail sits after every trainable tensor */
    check_model("conv2d filters=3 kernel=3 padding=same\nbatchnorm\nrelu\nmaxpool2d pool=2\nflatten\n"
                "dense units=4\nbatchnorm\nrelu\ndense units=3 activation=softmax\n", tt_shape3(4, 4, 2), 3, 0);
}
END_TEST

/* A broken backward must be caught: the check is not vacuous. */
START_TEST(test_grad_check_catches_error)
{
    float g = 1.0f;
    double num = 1.1; /* a 10% error, e.g. a missing term */
    ck_assert(!tt_close(g, num, ATOL, RTOL) || RTOL >= 0.1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("grad");
    TCase *tc = tcase_create("finite-differences");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_dense_grad);
    tcase_add_test(tc, test_relu_grad);
    tcase_add_test(tc, test_conv2d_grad);
    tcase_add_test(tc, test_conv1d_grad);
    tcase_add_test(tc, test_maxpool2d_grad);
    tcase_add_test(tc, test_maxpool1d_grad);
    tcase_add_test(tc, test_dropout_grad);
    tcase_add_test(tc, test_flatten_grad);
    tcase_add_test(tc, test_embedding_grad);
    tcase_add_test(tc, test_batchnorm_grad);
    tcase_add_test(tc, test_model_grad);
    tcase_add_test(tc, test_conv_models_grad);
    tcase_add_test(tc, test_grad_check_catches_error);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
