/* test_grad.c — finite-difference checks of every layer's backward pass and of the whole model with its loss.
 *
 * Central differences in float32 with step h: truncation error O(h^2), rounding error O(eps * |L| / h). With
 * h = 1e-2 on O(1) values both stay below ~1e-4, so analytic and numeric gradients must agree to
 * atol 2e-3 + rtol 2e-2 (a wrong formula is off by O(1)). */
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

/* Central differences of loss(ctx) with respect to each v[i], compared with analytic[i]. */
static void check_fd(const char *what, float *v, size_t n, const float *analytic, double h, double (*loss)(void *),
                     void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        float keep = v[i];
        v[i] = keep + (float)h;
        double lp = loss(ctx);
        v[i] = keep - (float)h;
        double lm = loss(ctx);
        v[i] = keep;
        double num = (lp - lm) / (2 * h);
        ck_assert_msg(tt_close(analytic[i], num, ATOL, RTOL), "%s %zu: analytic %g numeric %g", what, i, analytic[i],
                      num);
    }
}

/* One layer under the loss L = sum_{r,c} R[r,c] * y[r,c], so dL/dy = R. */
typedef struct layer_case {
    tt_dev *dev;
    const tt_layer *l;
    float *p, *x, *y, *R;
    size_t B;
} layer_case;

static double layer_loss(void *arg)
{
    layer_case *c = (layer_case *)arg;
    c->l->kind->forward(c->dev, c->l, c->p, c->x, c->y, c->B);
    double acc = 0;
    for (size_t k = 0; k < c->B * c->l->out; k++) acc += (double)c->R[k] * c->y[k];
    return acc;
}

/* Checks a layer's parameter gradient and input gradient. */
static void check_layer(tt_model *m, size_t li, size_t B, uint64_t seed)
{
    tt_dev dev;
    tt_error err;
    ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
    const tt_layer *l = &m->layers[li];
    tt_rng r;
    tt_rng_seed(&r, seed, 0);
    size_t np = l->n_params ? l->n_params : 1;
    float *p = tt_dev_alloc_f32(&dev, np), *g = tt_dev_alloc_f32(&dev, np);
    float *x = tt_dev_alloc_f32(&dev, B * l->in), *y = tt_dev_alloc_f32(&dev, B * l->out);
    float *R = tt_dev_alloc_f32(&dev, B * l->out), *dx = tt_dev_alloc_f32(&dev, B * l->in);
    fill_uniform(p, np, &r, -0.8f, 0.8f);
    fill_uniform(x, B * l->in, &r, -1.0f, 1.0f);
    fill_uniform(R, B * l->out, &r, -1.0f, 1.0f);
    /* keep relu inputs away from the kink, where the derivative is undefined */
    if (l->kind == &tt_layer_relu)
        for (size_t i = 0; i < B * l->in; i++) x[i] = x[i] < 0 ? x[i] - 0.1f : x[i] + 0.1f;

    l->kind->forward(&dev, l, p, x, y, B);
    l->kind->backward(&dev, l, p, g, x, y, R, dx, B);
    layer_case c = {&dev, l, p, x, y, R, B};
    char what[64];
    snprintf(what, sizeof what, "%s param", l->name);
    check_fd(what, p, l->n_params, g, H, layer_loss, &c);
    snprintf(what, sizeof what, "%s dx", l->name);
    check_fd(what, x, B * l->in, dx, H, layer_loss, &c);
    tt_dev_dfree(&dev, p);
    tt_dev_dfree(&dev, g);
    tt_dev_dfree(&dev, x);
    tt_dev_dfree(&dev, y);
    tt_dev_dfree(&dev, R);
    tt_dev_dfree(&dev, dx);
    tt_dev_free(&dev);
}

START_TEST(test_dense_grad)
{
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&m, "dense units=4\n", "t", 5, 4, &err), TT_OK);
    check_layer(&m, 0, 3, 11);
}
END_TEST

START_TEST(test_relu_grad)
{
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&m, "dense units=6\nrelu\ndense units=3\n", "t", 5, 3, &err), TT_OK);
    check_layer(&m, 1, 4, 12);
}
END_TEST

/* The whole model under its loss: mean softmax cross-entropy over the batch. */
typedef struct model_case {
    tt_dev *dev;
    const tt_model *m;
    float *params;
    float **act;
    float *stats;
    const int32_t *labels;
    size_t B;
} model_case;

static double model_loss(void *arg)
{
    model_case *c = (model_case *)arg;
    tt_model_forward(c->dev, c->m, c->params, c->act, c->B);
    tt_dev_softmax_xent(c->dev, NULL, c->stats, c->act[c->m->n_layers], c->labels, c->B, c->m->n_classes, 0.0f);
    double sum = 0;
    for (size_t b = 0; b < c->B; b++) sum += c->stats[2 * b];
    return sum / (double)c->B;
}

/* Whole model: gradient of every parameter. */
START_TEST(test_model_grad)
{
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_parse(&m, "dense units=7 activation=relu\ndense units=6 activation=relu\ndense units=4\n",
                                    "t", 5, 4, &err),
                     TT_OK);
    const size_t B = 5, P = m.n_params;
    tt_dev dev;
    ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
    float *params = tt_dev_alloc_f32(&dev, P), *grads = tt_dev_alloc_f32(&dev, P);
    float *act[TT_MAX_LAYERS + 1], *delta[2];
    for (size_t i = 0; i <= m.n_layers; i++)
        act[i] = tt_dev_alloc_f32(&dev, B * (i ? m.layers[i - 1].out : m.input_dim));
    delta[0] = tt_dev_alloc_f32(&dev, B * m.max_width);
    delta[1] = tt_dev_alloc_f32(&dev, B * m.max_width);
    float *dlogits = tt_dev_alloc_f32(&dev, B * m.n_classes), *stats = tt_dev_alloc_f32(&dev, 2 * B);
    int32_t labels[5] = {0, 3, 1, 2, 3};
    tt_model_init_params(&m, params, 3);
    tt_rng r;
    tt_rng_seed(&r, 5, 0);
    for (size_t i = 0; i < P; i++) params[i] += 0.1f * (tt_rng_uniform(&r) - 0.5f); /* non-zero biases too */
    fill_uniform(act[0], B * m.input_dim, &r, 0.0f, 1.0f);

    tt_model_forward(&dev, &m, params, act, B);
    tt_dev_softmax_xent(&dev, dlogits, stats, act[m.n_layers], labels, B, m.n_classes, 1.0f / (float)B);
    tt_model_backward(&dev, &m, params, grads, act, delta, dlogits, B);
    for (size_t i = 0; i < P; i++) ck_assert(isfinite(grads[i]));

    model_case mc = {&dev, &m, params, act, stats, labels, B};
    check_fd("param", params, P, grads, H_MODEL, model_loss, &mc);
    for (size_t i = 0; i <= m.n_layers; i++) tt_dev_dfree(&dev, act[i]);
    tt_dev_dfree(&dev, delta[0]);
    tt_dev_dfree(&dev, delta[1]);
    tt_dev_dfree(&dev, dlogits);
    tt_dev_dfree(&dev, stats);
    tt_dev_dfree(&dev, params);
    tt_dev_dfree(&dev, grads);
    tt_dev_free(&dev);
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
    tcase_add_test(tc, test_dense_grad);
    tcase_add_test(tc, test_relu_grad);
    tcase_add_test(tc, test_model_grad);
    tcase_add_test(tc, test_grad_check_catches_error);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
