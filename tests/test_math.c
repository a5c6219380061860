/* test_math.c — the shared per-row / per-element math against closed forms, through the CPU backend's ops. */
#include "tt_dev.h"
#include "tt_math.h"
#include "tt_model.h"
#include "tt_test.h"

/* loss = log(sum_j e^{z_j}) - z_label, gradient = softmax - onehot: computed here in double from the definition. */
START_TEST(test_softmax_xent_closed_form)
{
    const float z[4] = {1.0f, 2.0f, 3.0f, -0.5f};
    for (int label = 0; label < 4; label++) {
        double sum = 0;
        for (int i = 0; i < 4; i++) sum += exp((double)z[i]);
        double want_loss = log(sum) - z[label];
        float dz[4];
        int rank;
        float loss = tt_softmax_xent_row(z, 4, label, 0.5f, dz, &rank);
        ck_assert_msg(tt_close(loss, want_loss, 1e-6, 1e-6), "label %d: loss %g want %g", label, loss, want_loss);
        double gsum = 0;
        for (int i = 0; i < 4; i++) {
            double want = 0.5 * (exp((double)z[i]) / sum - (i == label));
            ck_assert_msg(tt_close(dz[i], want, 1e-7, 1e-6), "dz[%d] %g want %g", i, dz[i], want);
            gsum += dz[i];
        }
        ck_assert(fabs(gsum) < 1e-6); /* softmax sums to one, so the gradient sums to zero */
        int want_rank = 0;
        for (int i = 0; i < 4; i++) want_rank += z[i] > z[label];
        ck_assert_int_eq(rank, want_rank);
    }
}
END_TEST

/* Huge logits must not overflow (the max shift). */
START_TEST(test_softmax_xent_stable)
{
    const float z[3] = {1000.0f, 999.0f, -1000.0f};
    float dz[3];
    int rank;
    float loss = tt_softmax_xent_row(z, 3, 1, 1.0f, dz, &rank);
    double want = log(1.0 + exp(-1.0) + exp(-2000.0)) + 1.0;
    ck_assert(isfinite(loss));
    ck_assert(tt_close(loss, want, 1e-5, 1e-5));
    ck_assert_int_eq(rank, 1);
    for (int i = 0; i < 3; i++) ck_assert(isfinite(dz[i]));
}
END_TEST

START_TEST(test_pixel)
{
    ck_assert_float_eq(tt_pixel(0, 1.0f / 255.0f), 0.0f);
    ck_assert_float_eq(tt_pixel(255, 1.0f / 255.0f), 1.0f);
}
END_TEST

START_TEST(test_relu)
{
    ck_assert_float_eq(tt_relu(-2.0f), 0.0f);
    ck_assert_float_eq(tt_relu(3.5f), 3.5f);
    ck_assert_float_eq(tt_relu_grad(7.0f, 0.0f), 0.0f);
    ck_assert_float_eq(tt_relu_grad(7.0f, 0.25f), 7.0f);
}
END_TEST

/* The CPU backend's row ops: bias_add, col_sum, softmax_xent stats layout. */
START_TEST(test_cpu_row_ops)
{
    tt_dev dev;
    tt_error err;
    ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
    float *d_y = tt_dev_alloc_f32(&dev, 6), *d_b = tt_dev_alloc_f32(&dev, 3), *d_s = tt_dev_alloc_f32(&dev, 3);
    ck_assert(isnan(d_y[0])); /* new device memory is poisoned */
    const float y[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
    tt_dev_h2d(&dev, d_y, y, sizeof y);
    tt_dev_h2d(&dev, d_b, b, sizeof b);
    tt_dev_bias_add(&dev, d_y, d_b, 2, 3);
    tt_dev_col_sum(&dev, d_s, d_y, 2, 3);
    float s[3];
    tt_dev_d2h(&dev, s, d_s, sizeof s);
    tt_dev_sync(&dev);
    ck_assert_float_eq(s[0], 25.0f);
    ck_assert_float_eq(s[1], 47.0f);
    ck_assert_float_eq(s[2], 69.0f);
    /* transpose: (2, 3) -> (3, 2) */
    float *d_t = tt_dev_alloc_f32(&dev, 6), t[6];
    tt_dev_h2d(&dev, d_y, y, sizeof y);
    tt_dev_transpose(&dev, d_t, d_y, 2, 3);
    tt_dev_d2h(&dev, t, d_t, sizeof t);
    tt_dev_sync(&dev);
    const float want[6] = {1, 4, 2, 5, 3, 6};
    for (int i = 0; i < 6; i++) ck_assert_msg(t[i] == want[i], "transpose [%d] = %g, want %g", i, t[i], want[i]);
    tt_dev_dfree(&dev, d_t);
    tt_dev_dfree(&dev, d_y);
    tt_dev_dfree(&dev, d_b);
    tt_dev_dfree(&dev, d_s);
    tt_dev_free(&dev);
    tt_dev_free(&dev); /* twice is fine */
}
END_TEST


/* Geometries covering every path: same padding (uneven: more after than before), strides 2, overlapping windows
 * (stride 1 < window 3), a window cut by the padding, gaps (stride 3 > window 2, same), 1-D (H = 1) with and without
 * padding, and a global 1-D pool (window = stride = the sequence). {H, W, C, KH, KW, SH, SW, same} */
static const size_t GEOMS[][8] = {{5, 5, 2, 3, 3, 1, 1, 1}, {6, 7, 3, 3, 3, 2, 2, 1}, {5, 4, 2, 2, 2, 2, 2, 0},
                                  {6, 5, 1, 3, 3, 1, 1, 0}, {1, 9, 4, 1, 5, 1, 1, 0}, {5, 5, 2, 2, 2, 2, 2, 1},
                                  {8, 7, 3, 2, 2, 3, 3, 1}, {1, 10, 3, 1, 10, 1, 10, 0}, {1, 11, 2, 1, 3, 1, 2, 1}};

static tt_conv_geom geom_of(const size_t *v)
{
    tt_conv_geom g = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], 0, 0, 0, 0};
    if (v[7]) { /* same: ceil(n / s) outputs, the padding split with the smaller half before */
        g.OH = (g.H + g.SH - 1) / g.SH;
        g.OW = (g.W + g.SW - 1) / g.SW;
        size_t th = (g.OH - 1) * g.SH + g.KH, tw = (g.OW - 1) * g.SW + g.KW;
        g.PT = th > g.H ? (th - g.H) / 2 : 0;
        g.PL = tw > g.W ? (tw - g.W) / 2 : 0;
    } else {
        g.OH = (g.H - g.KH) / g.SH + 1;
        g.OW = (g.W - g.KW) / g.SW + 1;
    }
    return g;
}

/* The gather forms (one GPU thread per element) give the scatter forms' sums (the CPU's loops) to the bit: col2im, and
 * max pooling's gradient, including overlapping windows where a pixel receives several terms. Values are chosen so
 * that a different order of the additions would round differently (magnitudes from 1e-3 to 1e3). */
START_TEST(test_gather_equals_scatter)
{
    for (size_t k = 0; k < sizeof GEOMS / sizeof GEOMS[0]; k++) {
        const tt_conv_geom g = geom_of(GEOMS[k]);
        const size_t in = g.H * g.W * g.C, P = g.OH * g.OW, KC = g.KH * g.KW * g.C, out = P * g.C;
        float *dcols = (float *)tt_malloc(P * KC * sizeof(float)), *a = (float *)tt_calloc(in, sizeof(float));
        float *b = (float *)tt_calloc(in, sizeof(float));
        tt_rng r;
        tt_rng_seed(&r, k, 1);
        for (size_t i = 0; i < P * KC; i++)
            dcols[i] = ldexpf(tt_rng_uniform(&r) - 0.5f, (int)tt_rng_below(&r, 20) - 10);
        for (size_t oh = 0; oh < g.OH; oh++)
            for (size_t ow = 0; ow < g.OW; ow++) tt_col2im_patch(a, dcols + (oh * g.OW + ow) * KC, &g, oh, ow);
        /* the gather in two chunks of patches, split inside a row of patches, as a chunked col2im adds them */
        const size_t half = P / 2 + (P > 2);
        memset(b, 0, in * sizeof(float));
        for (size_t ih = 0; ih < g.H; ih++)
            for (size_t iw = 0; iw < g.W; iw++)
                for (size_t c = 0; c < g.C; c++) {
                    float *d = b + (ih * g.W + iw) * g.C + c;
                    *d = tt_col2im_elem(*d, dcols, &g, ih, iw, c, 0, half);
                    *d = tt_col2im_elem(*d, dcols + half * KC, &g, ih, iw, c, half, P);
                }
        ck_assert_msg(memcmp(a, b, in * sizeof(float)) == 0, "geometry %zu: col2im gather != scatter", k);
        /* max pooling: x with ties (small integers), so the first-argmax rule matters */
        float *x = (float *)tt_malloc(in * sizeof(float)), *y = (float *)tt_malloc(out * sizeof(float));
        float *dy = (float *)tt_malloc(out * sizeof(float));
        for (size_t i = 0; i < in; i++) x[i] = (float)tt_rng_below(&r, 4);
        for (size_t i = 0; i < out; i++) dy[i] = ldexpf(tt_rng_uniform(&r) + 0.5f, (int)tt_rng_below(&r, 20) - 10);
        for (size_t oh = 0; oh < g.OH; oh++)
            for (size_t ow = 0; ow < g.OW; ow++) tt_maxpool_pixel(y + (oh * g.OW + ow) * g.C, x, &g, oh, ow);
        memset(a, 0, in * sizeof(float));
        for (size_t o = 0; o < out; o++) { /* the argmax names an input equal to the maximum */
            size_t c = o % g.C, ow = (o / g.C) % g.OW, oh = o / g.C / g.OW,
                   at = tt_maxpool_argmax(x, y[o], &g, oh, ow, c);
            ck_assert(at != (size_t)-1 && x[at] == y[o]);
        }
        unsigned char routed[8];
        for (size_t oh = 0; oh < g.OH; oh++) /* the CPU's scatter, channels in two blocks when C > 1 */
            for (size_t ow = 0; ow < g.OW; ow++) {
                const size_t o = (oh * g.OW + ow) * g.C, half = g.C / 2;
                tt_maxpool_scatter(a, dy + o, x, y + o, &g, oh, ow, 0, half, routed);
                tt_maxpool_scatter(a, dy + o, x, y + o, &g, oh, ow, half, g.C, routed);
            }
        for (size_t ih = 0; ih < g.H; ih++)
            for (size_t iw = 0; iw < g.W; iw++)
                for (size_t c = 0; c < g.C; c++)
                    b[(ih * g.W + iw) * g.C + c] = tt_maxpool_grad(dy, x, y, &g, ih, iw, c);
        ck_assert_msg(memcmp(a, b, in * sizeof(float)) == 0, "geometry %zu: max-pool gradient gather != scatter", k);
        tt_free(dcols);
        tt_free(a);
        tt_free(b);
        tt_free(x);
        tt_free(y);
        tt_free(dy);
    }
}
END_TEST

/* The per-element forms (one GPU thread per output element) give exactly the bits of the row / pixel forms the CPU
 * backend loops over: im2col, max pooling's forward, the embedding's gather — over every geometry above, with
 * inputs that hold -0, ties and a NaN (copied and compared bit for bit). And the embedding's sort keys: ascending
 * key order is ascending (id, token position), an out-of-range id sorting after every valid one. */
START_TEST(test_elem_forms_equal_row_forms)
{
    for (size_t k = 0; k < sizeof GEOMS / sizeof GEOMS[0]; k++) {
        const tt_conv_geom g = geom_of(GEOMS[k]);
        const size_t in = g.H * g.W * g.C, KC = g.KH * g.KW * g.C;
        float *x = (float *)tt_malloc(in * sizeof(float)), *row = (float *)tt_malloc(KC * sizeof(float));
        float *px = (float *)tt_malloc(g.C * sizeof(float));
        tt_rng r;
        tt_rng_seed(&r, k, 3);
        for (size_t i = 0; i < in; i++) x[i] = (float)tt_rng_below(&r, 5) - 2.0f;
        x[0] = -0.0f;
        x[in / 2] = NAN;
        for (size_t oh = 0; oh < g.OH; oh++)
            for (size_t ow = 0; ow < g.OW; ow++) {
                tt_im2col_row(row, x, &g, oh, ow);
                for (size_t kh = 0; kh < g.KH; kh++)
                    for (size_t kw = 0; kw < g.KW; kw++)
                        for (size_t c = 0; c < g.C; c++) {
                            const float e = tt_im2col_elem(x, &g, oh, ow, kh, kw, c);
                            ck_assert_msg(memcmp(&e, &row[(kh * g.KW + kw) * g.C + c], sizeof e) == 0,
                                          "geometry %zu: im2col (%zu,%zu) column (%zu,%zu,%zu): elem %g, row %g", k,
                                          oh, ow, kh, kw, c, e, row[(kh * g.KW + kw) * g.C + c]);
                        }
                tt_maxpool_pixel(px, x, &g, oh, ow);
                for (size_t c = 0; c < g.C; c++) {
                    const float e = tt_maxpool_elem(x, &g, oh, ow, c);
                    ck_assert_msg(memcmp(&e, &px[c], sizeof e) == 0, "geometry %zu: max pool (%zu,%zu,%zu): %g, %g", k,
                                  oh, ow, c, e, px[c]);
                }
            }
        tt_free(x);
        tt_free(row);
        tt_free(px);
    }
    enum { V = 6, E = 3 };
    float w[V * E], y[E];
    for (size_t i = 0; i < V * E; i++) w[i] = (float)i - 4.0f;
    w[2 * E] = -0.0f;
    const float ids[] = {0.0f, 2.0f, 5.0f, 5.9f, 6.0f, -1.0f, NAN, INFINITY};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        tt_embed_row(y, w, ids[i], V, E);
        for (size_t e = 0; e < E; e++) {
            const float v = tt_embed_elem(w, ids[i], V, E, e);
            ck_assert_msg(memcmp(&v, &y[e], sizeof v) == 0, "embed id %g column %zu: %g, row %g", (double)ids[i], e, v,
                          y[e]);
        }
        size_t id;
        const uint64_t key = tt_embed_key(ids[i], V, (uint32_t)(100 - i));
        ck_assert_uint_eq(key & 0xffffffffu, 100 - i);
        ck_assert_uint_eq(key >> 32, tt_token_id(ids[i], V, &id) ? id : V);
    }
    ck_assert(tt_embed_key(1.0f, V, 7) < tt_embed_key(1.0f, V, 8));
    ck_assert(tt_embed_key(1.0f, V, 0xffffffffu) < tt_embed_key(2.0f, V, 0));
    ck_assert(tt_embed_key(5.0f, V, 0xffffffffu) < tt_embed_key(-3.0f, V, 0));
}
END_TEST

/* Dropout's mask: drops about `rate` of the elements (within 4 standard deviations), scales the kept by 1/(1-rate),
 * depends on the sample's index and on (seed, epoch, layer) — and on nothing else, so the same sample gets the same
 * mask whatever tower or row it lands in. */
START_TEST(test_dropout_mask)
{
    const float rate = 0.25f, keep = 1.0f / (1.0f - rate);
    const uint64_t key = tt_dropout_key(7, 3, 2);
    size_t dropped = 0, n = 0;
    for (uint64_t sample = 0; sample < 200; sample++)
        for (uint64_t j = 0; j < 500; j++, n++) {
            float y = tt_dropout(2.0f, key, sample, j, rate, keep);
            ck_assert(y == 0.0f || y == 2.0f * keep);
            dropped += y == 0.0f;
        }
    const double sd = sqrt((double)n * rate * (1 - rate));
    ck_assert_msg(fabs((double)dropped - rate * (double)n) < 4 * sd, "dropped %zu of %zu at rate %g", dropped, n,
                  (double)rate);
    ck_assert(tt_dropout(1.0f, key, 5, 9, 0.0f, 1.0f) == 1.0f); /* rate 0 keeps everything */
    /* another seed, epoch or layer gives another mask (over 500 elements, identical masks are impossible in practice)
     */
    const uint64_t others[3] = {tt_dropout_key(8, 3, 2), tt_dropout_key(7, 4, 2), tt_dropout_key(7, 3, 3)};
    for (int o = 0; o < 3; o++) {
        size_t same = 0;
        for (uint64_t j = 0; j < 500; j++)
            same += (tt_dropout(1.0f, key, 11, j, 0.5f, 2.0f) == 0) ==
                    (tt_dropout(1.0f, others[o], 11, j, 0.5f, 2.0f) == 0);
        ck_assert_msg(same < 450, "key %d: %zu of 500 mask bits equal", o, same);
    }
}
END_TEST

/* Known answers: a conv2d layer's forward (im2col + sgemm, chunked) against a direct convolution written from the
 * definition, with TensorFlow's padding rule spelled out here on its own (same: out = ceil(n/s), pad_total =
 * max((out-1)*s + k - n, 0), pad_before = pad_total / 2 — the extra row goes after); and max pooling against a direct
 * window maximum. Finite differences cannot catch a convolution whose forward and backward are wrong the same way
 * (an offset in the padding); this can. */
static double direct_conv(const float *x, const float *w, const float *b, size_t H, size_t W, size_t C, size_t K,
                          size_t S, size_t F, int same, size_t oh, size_t ow, size_t f, size_t *OH, size_t *OW)
{
    size_t pt = 0, pl = 0;
    if (same) {
        *OH = (H + S - 1) / S;
        *OW = (W + S - 1) / S;
        long th = (long)((*OH - 1) * S + K) - (long)H, tw = (long)((*OW - 1) * S + K) - (long)W;
        pt = th > 0 ? (size_t)th / 2 : 0;
        pl = tw > 0 ? (size_t)tw / 2 : 0;
    } else {
        *OH = (H - K) / S + 1;
        *OW = (W - K) / S + 1;
    }
    double acc = b[f];
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < K; j++) {
            long ih = (long)(oh * S + i) - (long)pt, iw = (long)(ow * S + j) - (long)pl;
            if (ih < 0 || iw < 0 || ih >= (long)H || iw >= (long)W) continue;
            for (size_t c = 0; c < C; c++)
                acc += (double)x[((size_t)ih * W + (size_t)iw) * C + c] * w[((i * K + j) * C + c) * F + f];
        }
    return acc;
}

/* A whole model's forward walk against the same model written out by hand, so a ReLU that runs as its layer's
 * epilogue (or that the walk skips) must still be applied exactly once and where the model says: a dense + relu
 * (fused), a relu line after a flatten (a layer of its own), a dense without a bias + relu, and a last dense. Weights
 * and inputs are sized so every ReLU zeroes some units and passes others. */
START_TEST(test_model_forward_known_answer)
{
    tt_model m;
    tt_error err;
    tt_model_input in = {tt_shape1(5), 3, 0};
    const char *text = "dense units=4 activation=relu\ndense units=4\nflatten\nrelu\ndense units=4 use_bias=false\n"
                       "relu\ndense units=3\n";
    ck_assert_msg(tt_model_parse(&m, text, "t", &in, &err) == TT_OK, "%s", err.msg);
    tt_dev dev;
    ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
    const size_t B = 3, P = m.n_params;
    float *p = tt_dev_alloc_f32(&dev, P), *act[TT_MAX_LAYERS + 1];
    for (size_t i = 0; i <= m.n_logits; i++)
        act[i] = tt_model_act_shared(&m, i) ? act[i - 1]
                                            : tt_dev_alloc_f32(&dev, B * (i ? m.layers[i - 1].out : m.input_dim));
    tt_rng r;
    tt_rng_seed(&r, 11, 0);
    for (size_t i = 0; i < P; i++) p[i] = tt_rng_uniform(&r) - 0.5f;
    for (size_t i = 0; i < B * 5; i++) act[0][i] = 2.0f * tt_rng_uniform(&r) - 1.0f;
    double x[B][5];
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < 5; i++) x[b][i] = act[0][b * 5 + i];
    const tt_pass ps = {.share = 1.0f};
    tt_model_forward(&dev, &m, &ps, p, act, B);
    /* by hand: the layers' parameters in order in p, kernel (in, out) row-major then bias */
    const size_t widths[][3] = {{5, 4, 1}, {4, 4, 1}, {4, 4, 0}, {4, 3, 1}}; /* in, out, bias */
    const int relu_after[] = {1, 1, 1, 0};
    int zeroed = 0, passed = 0;
    for (size_t b = 0; b < B; b++) {
        double h[5], o[4];
        memcpy(h, x[b], sizeof x[b]);
        const float *q = p;
        for (size_t k = 0; k < 4; k++) {
            const size_t I = widths[k][0], O = widths[k][1];
            for (size_t j = 0; j < O; j++) {
                double acc = widths[k][2] ? q[I * O + j] : 0.0;
                for (size_t i = 0; i < I; i++) acc += h[i] * q[i * O + j];
                if (relu_after[k]) zeroed += acc <= 0, passed += acc > 0;
                o[j] = relu_after[k] && acc < 0 ? 0.0 : acc;
            }
            q += I * O + (widths[k][2] ? O : 0);
            memcpy(h, o, O * sizeof(double));
        }
        const float *logits = tt_model_logits(&m, act) + b * 3;
        for (size_t j = 0; j < 3; j++)
            ck_assert_msg(tt_close(logits[j], h[j], 1e-5, 1e-5), "row %zu logit %zu: %.9g, by hand %.9g", b, j,
                          logits[j], h[j]);
    }
    ck_assert_msg(zeroed > 2 && passed > 2, "the inputs exercise too few ReLUs (%d zeroed, %d passed)", zeroed, passed);
    for (size_t i = 0; i <= m.n_logits; i++)
        if (!tt_model_act_shared(&m, i)) tt_dev_dfree(&dev, act[i]);
    tt_dev_dfree(&dev, p);
    tt_dev_free(&dev);
}
END_TEST

START_TEST(test_conv_pool_known_answers)
{
    static const size_t CASES[][6] = {{7, 6, 2, 3, 1, 1}, {6, 6, 3, 3, 2, 1}, {8, 7, 1, 2, 2, 1}, {7, 7, 2, 3, 2, 0},
                                      {5, 9, 3, 3, 1, 0}}; /* H W C K S same */
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        const size_t H = CASES[k][0], W = CASES[k][1], C = CASES[k][2], K = CASES[k][3], S = CASES[k][4], F = 3, B = 2;
        char text[128];
        snprintf(text, sizeof text, "conv2d filters=%zu kernel=%zu strides=%zu padding=%s\nflatten\ndense units=2\n", F,
                 K, S, CASES[k][5] ? "same" : "valid");
        tt_model m;
        tt_error err;
        tt_model_input in = {tt_shape3(H, W, C), 2, 0};
        ck_assert_msg(tt_model_parse(&m, text, "t", &in, &err) == TT_OK, "%s", err.msg);
        const tt_layer *l = &m.layers[0];
        tt_dev dev;
        ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
        float *p = tt_dev_alloc_f32(&dev, l->n_params), *x = tt_dev_alloc_f32(&dev, B * l->in);
        float *y = tt_dev_alloc_f32(&dev, B * l->out), *ws = tt_dev_alloc_f32(&dev, l->kind->workspace(l, B, 1));
        tt_rng r;
        tt_rng_seed(&r, k, 2);
        for (size_t i = 0; i < l->n_params; i++) p[i] = tt_rng_uniform(&r) - 0.5f;
        for (size_t i = 0; i < B * l->in; i++) x[i] = tt_rng_uniform(&r) - 0.5f;
        tt_pass ps = {.d_ws = ws, .chunk_mnk = 1, .share = 1.0f}; /* chunks of one patch */
        l->kind->forward(&dev, l, &ps, p, x, y, B);
        size_t OH = 0, OW = 0;
        direct_conv(x, p, p + K * K * C * F, H, W, C, K, S, F, (int)CASES[k][5], 0, 0, 0, &OH, &OW);
        ck_assert_msg(l->out_shape.d[0] == OH && l->out_shape.d[1] == OW, "case %zu: %zux%zu, Keras gives %zux%zu", k,
                      l->out_shape.d[0], l->out_shape.d[1], OH, OW);
        for (size_t b = 0; b < B; b++)
            for (size_t oh = 0; oh < OH; oh++)
                for (size_t ow = 0; ow < OW; ow++)
                    for (size_t f = 0; f < F; f++) {
                        double want = direct_conv(x + b * l->in, p, p + K * K * C * F, H, W, C, K, S, F,
                                                  (int)CASES[k][5], oh, ow, f, &OH, &OW);
                        float got = y[b * l->out + (oh * OW + ow) * F + f];
                        ck_assert_msg(tt_close(got, want, 1e-5, 1e-5), "case %zu row %zu (%zu,%zu,%zu): %g, direct %g",
                                      k, b, oh, ow, f, got, want);
                    }
        /* max pooling with the same window and stride over x: the direct maximum of the window (valid padding) */
        tt_conv_geom g = {H, W, C, K, K, S, S, 0, 0, (H - K) / S + 1, (W - K) / S + 1};
        float *py = tt_dev_alloc_f32(&dev, B * g.OH * g.OW * C);
        tt_dev_maxpool_fwd(&dev, py, x, B, &g);
        for (size_t b = 0; b < B; b++)
            for (size_t o = 0; o < g.OH * g.OW * C; o++) {
                size_t c = o % C, ow = (o / C) % g.OW, oh = o / C / g.OW;
                float want = -INFINITY;
                for (size_t i = 0; i < K; i++)
                    for (size_t j = 0; j < K; j++)
                        want = fmaxf(want, x[b * l->in + ((oh * S + i) * W + ow * S + j) * C + c]);
                ck_assert_msg(py[b * g.OH * g.OW * C + o] == want, "case %zu: max pool [%zu] %g, direct %g", k, o,
                              py[b * g.OH * g.OW * C + o], want);
            }
        float *bufs[] = {p, x, y, ws, py};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tt_dev_dfree(&dev, bufs[i]);
        tt_dev_free(&dev);
    }
}
END_TEST

/* The dropout op keeps x / (1 - rate) (Keras's inverted dropout: the expected output is the input). */
START_TEST(test_dropout_op_scale)
{
    tt_dev dev;
    tt_error err;
    ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
    const size_t R = 4, Cn = 1000;
    float *x = tt_dev_alloc_f32(&dev, R * Cn), *y = tt_dev_alloc_f32(&dev, R * Cn);
    uint32_t ids[4] = {9, 3, 7, 1};
    for (size_t i = 0; i < R * Cn; i++) x[i] = 3.0f;
    tt_dev_dropout(&dev, y, x, R, Cn, 0.4f, tt_dropout_key(1, 1, 1), ids);
    double sum = 0;
    for (size_t i = 0; i < R * Cn; i++) {
        ck_assert_msg(y[i] == 0.0f || y[i] == 3.0f / 0.6f, "y[%zu] = %g", i, y[i]);
        sum += y[i];
    }
    ck_assert_msg(fabs(sum / (double)(R * Cn) - 3.0) < 0.15, "mean %g, want 3", sum / (double)(R * Cn));
    tt_dev_dfree(&dev, x);
    tt_dev_dfree(&dev, y);
    tt_dev_free(&dev);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("math");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_softmax_xent_closed_form);
    tcase_add_test(tc, test_softmax_xent_stable);
    tcase_add_test(tc, test_relu);
    tcase_add_test(tc, test_pixel);
    tcase_add_test(tc, test_cpu_row_ops);
    tcase_add_test(tc, test_gather_equals_scatter);
    tcase_add_test(tc, test_elem_forms_equal_row_forms);
    tcase_add_test(tc, test_dropout_mask);
    tcase_add_test(tc, test_conv_pool_known_answers);
    tcase_add_test(tc, test_model_forward_known_answer);
    tcase_add_test(tc, test_dropout_op_scale);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
