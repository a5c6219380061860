/* test_reference.c — layers against references written here from their definitions, not from tt_math.h: what finite
 * differences cannot see (test_grad compares a layer's backward pass with its own forward pass, so a forward pass and
 * a backward pass wrong the same way — a stride ignored, a window that starts in the wrong place or misses a
 * position, an output one too long — pass there).
 *
 * - Forward passes of conv2d, conv1d, maxpool2d, maxpool1d, globalmaxpool1d and embedding, each built by the model
 *   parser from a line that spells every key it accepts (docs/model-file.md) — and from lines that leave keys to their
 *   defaults —, on small random inputs: the output shape against Keras's rule (same: ceil(n / s), the padding split
 *   smaller half first; valid: floor((n - k) / s) + 1) and every output against a direct loop over the window.
 * - Dropout through the layer, as the trainer calls it (tt_pass): the mask differs between epochs and between two
 *   dropout layers, is the same for the same (seed, epoch, layer, sample) whichever row of whichever shard holds the
 *   sample, drops `rate` of the elements (within 4 standard deviations), scales the kept ones by exactly 1/(1 - rate),
 *   and drops nothing in evaluation.
 * - The embedding's gradient: every id's rows of dy added in ascending token position, to the bit, against a sum
 *   written here — on the CPU backend and, given `cuda` (the suite's argument; CTest's test_reference_cuda in the
 *   stand-in build, label sim), on the CUDA backend.
 * - BatchNormalization against numbers recorded from Keras 3 (tools/keras_batchnorm_reference.py): training and
 *   inference outputs, the gradients, the moving statistics after a step — on the CPU and, given `cuda`, the CUDA
 *   backend.
 * Usage: test_reference [cpu|cuda]. */
#include "tt_backend.h"
#include "tt_test.h"

static const char *g_device = "cpu";
static tt_backend g_be;

/* ---- shapes by Keras's rule, written out again ------------------------------------------------------------------ */

/* Outputs along one axis and the padding before the first input. */
static size_t ref_axis(size_t n, size_t k, size_t s, int same, size_t *pad)
{
    if (!same) {
        *pad = 0;
        return (n - k) / s + 1;
    }
    const size_t out = (n + s - 1) / s;
    const long total = (long)((out - 1) * s + k) - (long)n;
    *pad = total > 0 ? (size_t)(total / 2) : 0;
    return out;
}

/* One layer (the model's first) built by the parser from `text` for input `in`; the model's other layers only make
 * the parser's last-layer rule hold. */
static const tt_layer *parse_first(tt_model *m, const char *text, tt_shape in, size_t vocab)
{
    tt_error err;
    tt_model_input mi = {in, 2, vocab};
    ck_assert_msg(tt_model_parse(m, text, "ref.txt", &mi, &err) == TT_OK, "%s: %s", text, err.msg);
    return &m->layers[0];
}

/* Runs layer l forward on the CPU backend over B rows of x with parameters p, chunked by chunk_mnk; returns y
 * (tt_malloc'd, B * l->out). */
static float *forward(const tt_layer *l, const float *p, const float *x, size_t B, size_t chunk_mnk,
                      const tt_pass *tmpl)
{
    tt_dev dev;
    tt_error err;
    ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
    const size_t ws = l->kind->workspace ? l->kind->workspace(l, B, chunk_mnk) : 0;
    float *d_p = tt_dev_alloc_f32(&dev, l->n_params ? l->n_params : 1), *d_x = tt_dev_alloc_f32(&dev, B * l->in);
    float *d_y = tt_dev_alloc_f32(&dev, B * l->out), *d_ws = tt_dev_alloc_f32(&dev, ws ? ws : 1);
    if (l->n_params) memcpy(d_p, p, l->n_params * sizeof(float));
    memcpy(d_x, x, B * l->in * sizeof(float));
    tt_pass ps = tmpl ? *tmpl : (tt_pass){.share = 1.0f};
    ps.d_ws = d_ws;
    ps.chunk_mnk = chunk_mnk;
    l->kind->forward(&dev, l, &ps, d_p, d_x, d_y, B);
    float *y = (float *)tt_malloc(B * l->out * sizeof(float));
    memcpy(y, d_y, B * l->out * sizeof(float));
    tt_dev_dfree(&dev, d_p);
    tt_dev_dfree(&dev, d_x);
    tt_dev_dfree(&dev, d_y);
    tt_dev_dfree(&dev, d_ws);
    tt_dev_free(&dev);
    return y;
}

static float *random_floats(size_t n, uint64_t seed)
{
    float *v = (float *)tt_malloc((n ? n : 1) * sizeof(float));
    tt_rng r;
    tt_rng_seed(&r, seed, 5);
    for (size_t i = 0; i < n; i++) v[i] = 2.0f * tt_rng_uniform(&r) - 1.0f;
    return v;
}

/* ---- convolutions -------------------------------------------------------------------------------------------- */

typedef struct conv_case {
    size_t H, W, C, KH, KW, SH, SW, F;
    int same, bias;
    const char *line; /* the layer's line; NULL: spelled from the fields with every key */
} conv_case;

/* A 2-D convolution (1-D: H = KH = SH = 1) from the definition, channels last, Keras's kernel (KH, KW, C, F). */
static void check_conv(const conv_case *k, int one_d)
{
    char text[512], line[256];
    if (k->line) snprintf(line, sizeof line, "%s", k->line);
    else if (one_d)
        snprintf(line, sizeof line, "conv1d filters=%zu kernel=%zu strides=%zu padding=%s activation=linear "
                 "use_bias=%s", k->F, k->KW, k->SW, k->same ? "same" : "valid", k->bias ? "true" : "false");
    else
        snprintf(line, sizeof line, "conv2d filters=%zu kernel=%zu,%zu strides=%zu,%zu padding=%s activation=linear "
                 "use_bias=%s", k->F, k->KH, k->KW, k->SH, k->SW, k->same ? "same" : "valid", k->bias ? "true" : "false");
    snprintf(text, sizeof text, "%s\nflatten\ndense units=2\n", line);
    tt_model m;
    const tt_layer *l = parse_first(&m, text, one_d ? tt_shape2(k->W, k->C) : tt_shape3(k->H, k->W, k->C), 0);
    size_t PT, PL;
    const size_t OH = ref_axis(k->H, k->KH, k->SH, k->same, &PT), OW = ref_axis(k->W, k->KW, k->SW, k->same, &PL);
    if (one_d)
        ck_assert_msg(l->out_shape.ndim == 2 && l->out_shape.d[0] == OW && l->out_shape.d[1] == k->F,
                      "%s: output %zux%zu, Keras gives %zux%zu", line, l->out_shape.d[0], l->out_shape.d[1], OW, k->F);
    else
        ck_assert_msg(l->out_shape.ndim == 3 && l->out_shape.d[0] == OH && l->out_shape.d[1] == OW &&
                      l->out_shape.d[2] == k->F, "%s: output %zux%zux%zu, Keras gives %zux%zux%zu", line,
                      l->out_shape.d[0], l->out_shape.d[1], l->out_shape.d[2], OH, OW, k->F);
    const size_t nw = k->KH * k->KW * k->C * k->F;
    ck_assert_msg(l->n_params == nw + (k->bias ? k->F : 0), "%s: %zu parameters", line, l->n_params);
    const size_t B = 3, in = k->H * k->W * k->C;
    float *p = random_floats(l->n_params, 11 + k->KW), *x = random_floats(B * in, 12 + k->W);
    const size_t chunks[2] = {1, tt_dev_cpu_ops.chunk_mnk}; /* one patch per chunk; the CPU backend's own */
    for (int c = 0; c < 2; c++) {
        float *y = forward(l, p, x, B, chunks[c], NULL);
        for (size_t b = 0; b < B; b++)
            for (size_t oh = 0; oh < OH; oh++)
                for (size_t ow = 0; ow < OW; ow++)
                    for (size_t f = 0; f < k->F; f++) {
                        double want = k->bias ? p[nw + f] : 0.0;
                        for (size_t i = 0; i < k->KH; i++)
                            for (size_t j = 0; j < k->KW; j++) {
                                const long ih = (long)(oh * k->SH + i) - (long)PT, iw = (long)(ow * k->SW + j) - (long)PL;
                                if (ih < 0 || iw < 0 || ih >= (long)k->H || iw >= (long)k->W) continue; /* zeros */
                                for (size_t ch = 0; ch < k->C; ch++)
                                    want += (double)x[b * in + ((size_t)ih * k->W + (size_t)iw) * k->C + ch] *
                                            p[((i * k->KW + j) * k->C + ch) * k->F + f];
                            }
                        const float got = y[b * l->out + (oh * OW + ow) * k->F + f];
                        ck_assert_msg(tt_close(got, want, 1e-5, 1e-5), "%s (chunk %zu): row %zu (%zu,%zu,%zu): %g, "
                                      "direct %g", line, chunks[c], b, oh, ow, f, (double)got, want);
                    }
        tt_free(y);
    }
    tt_free(p);
    tt_free(x);
}

START_TEST(test_conv2d_reference)
{
    static const conv_case CASES[] = {
        {7, 6, 2, 3, 2, 2, 1, 3, 1, 1, NULL},  {6, 7, 1, 2, 3, 1, 2, 2, 0, 0, NULL},
        {5, 5, 3, 1, 1, 2, 2, 2, 1, 1, NULL},  {8, 5, 2, 3, 3, 3, 2, 2, 1, 1, NULL},
        {9, 4, 1, 4, 2, 3, 1, 3, 0, 1, NULL},  {4, 4, 2, 5, 5, 1, 1, 2, 1, 1, NULL},
        {8, 9, 1, 2, 2, 3, 3, 2, 0, 1, NULL},  /* strides beyond the kernel: windows skip positions */
        {7, 6, 2, 3, 3, 1, 1, 2, 0, 1, "conv2d filters=2 kernel=3"}, /* the defaults: strides 1, valid, a bias */
    };
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) check_conv(&CASES[k], 0);
}
END_TEST

START_TEST(test_conv1d_reference)
{
    static const conv_case CASES[] = {
        {1, 10, 2, 1, 3, 1, 2, 3, 1, 1, NULL}, {1, 9, 3, 1, 4, 1, 1, 2, 0, 0, NULL},
        {1, 8, 1, 1, 2, 1, 3, 2, 0, 1, NULL},  {1, 7, 2, 1, 5, 1, 2, 2, 1, 1, NULL},
        {1, 11, 2, 1, 3, 1, 4, 2, 1, 0, NULL},
        {1, 9, 2, 1, 3, 1, 1, 2, 0, 1, "conv1d filters=2 kernel=3"}, /* the defaults */
    };
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) check_conv(&CASES[k], 1);
}
END_TEST

/* ---- pooling ------------------------------------------------------------------------------------------------- */

typedef struct pool_case {
    size_t H, W, C, KH, KW, SH, SW;
    int same;
    const char *line; /* the layer's line (kernel, strides and padding as they must then be) */
} pool_case;

/* Max pooling from the definition: the largest input under the window, padding never counted. */
static void check_pool(const pool_case *k, int rank)
{
    char text[512];
    snprintf(text, sizeof text, "%s\nflatten\ndense units=2\n", k->line);
    tt_model m;
    const tt_layer *l = parse_first(&m, text, rank == 3 ? tt_shape3(k->H, k->W, k->C) : tt_shape2(k->W, k->C), 0);
    size_t PT, PL;
    const size_t OH = ref_axis(k->H, k->KH, k->SH, k->same, &PT), OW = ref_axis(k->W, k->KW, k->SW, k->same, &PL);
    const size_t want_out = OH * OW * k->C;
    ck_assert_msg(l->out == want_out && l->out_shape.ndim == rank, "%s on %zux%zux%zu: %zu outputs (rank %d), Keras "
                  "gives %zux%zux%zu", k->line, k->H, k->W, k->C, l->out, l->out_shape.ndim, OH, OW, k->C);
    if (rank == 3)
        ck_assert_msg(l->out_shape.d[0] == OH && l->out_shape.d[1] == OW, "%s: %zux%zu, Keras gives %zux%zu", k->line,
                      l->out_shape.d[0], l->out_shape.d[1], OH, OW);
    const size_t B = 3, in = k->H * k->W * k->C;
    float *x = random_floats(B * in, 20 + k->W + k->KW);
    float *y = forward(l, NULL, x, B, 0, NULL);
    for (size_t b = 0; b < B; b++)
        for (size_t oh = 0; oh < OH; oh++)
            for (size_t ow = 0; ow < OW; ow++)
                for (size_t c = 0; c < k->C; c++) {
                    float want = -INFINITY;
                    int seen = 0;
                    for (size_t i = 0; i < k->KH; i++)
                        for (size_t j = 0; j < k->KW; j++) {
                            const long ih = (long)(oh * k->SH + i) - (long)PT, iw = (long)(ow * k->SW + j) - (long)PL;
                            if (ih < 0 || iw < 0 || ih >= (long)k->H || iw >= (long)k->W) continue;
                            const float v = x[b * in + ((size_t)ih * k->W + (size_t)iw) * k->C + c];
                            if (!seen || v > want) want = v;
                            seen = 1;
                        }
                    ck_assert_msg(seen, "%s: window (%zu,%zu) holds no input", k->line, oh, ow);
                    const float got = y[b * l->out + (oh * OW + ow) * k->C + c];
                    ck_assert_msg(got == want, "%s on %zux%zux%zu: row %zu (%zu,%zu,%zu): %g, direct %g", k->line,
                                  k->H, k->W, k->C, b, oh, ow, c, (double)got, (double)want);
                }
    tt_free(x);
    tt_free(y);
}

START_TEST(test_maxpool2d_reference)
{
    static const pool_case CASES[] = {
        {7, 6, 2, 3, 2, 2, 1, 1, "maxpool2d pool=3,2 strides=2,1 padding=same"},
        {6, 6, 1, 2, 2, 2, 2, 0, "maxpool2d pool=2"},                /* the defaults: strides = pool, valid */
        {7, 7, 2, 3, 3, 2, 2, 0, "maxpool2d pool=3 strides=2 padding=valid"},
        {5, 8, 1, 2, 3, 3, 3, 1, "maxpool2d pool=2,3 strides=3 padding=same"}, /* strides beyond the window */
        {5, 5, 1, 2, 2, 2, 2, 1, "maxpool2d padding=same"},         /* the last window half in the padding */
        {7, 9, 2, 2, 3, 2, 3, 0, "maxpool2d pool=2,3"},             /* strides = a non-square pool */
        {8, 7, 1, 3, 2, 3, 2, 1, "maxpool2d pool=3,2 padding=same"},
        {6, 5, 3, 1, 2, 2, 1, 0, "maxpool2d pool=1,2 strides=2,1"},
    };
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) check_pool(&CASES[k], 3);
}
END_TEST

START_TEST(test_maxpool1d_reference)
{
    static const pool_case CASES[] = {
        {1, 9, 2, 1, 3, 1, 2, 0, "maxpool1d pool=3 strides=2 padding=valid"},
        {1, 9, 2, 1, 2, 1, 2, 1, "maxpool1d pool=2 padding=same"},
        {1, 10, 3, 1, 2, 1, 3, 1, "maxpool1d strides=3 padding=same"}, /* the default pool, 2 */
        {1, 7, 1, 1, 4, 1, 1, 0, "maxpool1d pool=4 strides=1"},
        {1, 8, 2, 1, 2, 1, 2, 0, "maxpool1d"},                           /* every default */
        {1, 11, 2, 1, 3, 1, 3, 1, "maxpool1d pool=3 padding=same"},
    };
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) check_pool(&CASES[k], 2);
}
END_TEST

/* GlobalMaxPooling1D: the maximum over every position of the sequence — a window that missed the last (or first)
 * position would differ wherever that position holds the channel's maximum, which over 3 rows x 3 channels of a
 * random sequence it does somewhere (checked below). */
START_TEST(test_globalmaxpool1d_reference)
{
    static const size_t CASES[][2] = {{7, 3}, {1, 2}, {6, 4}, {9, 1}}; /* L, C */
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        const size_t L = CASES[k][0], C = CASES[k][1], B = 3;
        tt_model m;
        const tt_layer *l = parse_first(&m, "globalmaxpool1d\ndense units=2\n", tt_shape2(L, C), 0);
        ck_assert_msg(l->out_shape.ndim == 1 && l->out == C, "globalmaxpool1d on %zux%zu: %zu outputs", L, C, l->out);
        float *x = random_floats(B * L * C, 30 + k);
        /* the maximum at the last position in row 0, at the first in row 1 */
        for (size_t c = 0; c < C; c++) {
            x[(L - 1) * C + c] = 5.0f + (float)c;
            x[L * C + c] = 6.0f + (float)c;
        }
        float *y = forward(l, NULL, x, B, 0, NULL);
        for (size_t b = 0; b < B; b++)
            for (size_t c = 0; c < C; c++) {
                float want = x[b * L * C + c];
                for (size_t t = 1; t < L; t++) want = fmaxf(want, x[b * L * C + t * C + c]);
                ck_assert_msg(y[b * C + c] == want, "L %zu row %zu channel %zu: %g, the maximum is %g", L, b, c,
                              (double)y[b * C + c], (double)want);
            }
        tt_free(x);
        tt_free(y);
    }
}
END_TEST

/* Embedding forward: row t of the output is row id(t) of the table; the vocabulary from the key or the data. */
START_TEST(test_embedding_reference)
{
    static const char *const LINES[] = {"embedding dim=3 vocab=7", "embedding dim=5"};
    for (int k = 0; k < 2; k++) {
        const size_t L = 6, V = 7, B = 4, E = k ? 5 : 3;
        char text[256];
        snprintf(text, sizeof text, "%s\nflatten\ndense units=2\n", LINES[k]);
        tt_model m;
        const tt_layer *l = parse_first(&m, text, tt_shape1(L), k ? V : 0);
        ck_assert_msg(l->n_params == V * E && l->out_shape.d[0] == L && l->out_shape.d[1] == E, "%s", LINES[k]);
        float *w = random_floats(V * E, 40 + (uint64_t)k), x[4 * 6];
        tt_rng r;
        tt_rng_seed(&r, 41, 1);
        for (size_t i = 0; i < B * L; i++) x[i] = (float)tt_rng_below(&r, V);
        x[0] = 0.0f;
        x[1] = (float)(V - 1);
        float *y = forward(l, w, x, B, 0, NULL);
        for (size_t i = 0; i < B * L; i++)
            for (size_t e = 0; e < E; e++)
                ck_assert_msg(y[i * E + e] == w[(size_t)x[i] * E + e], "%s: token %zu (id %g) column %zu", LINES[k], i,
                              (double)x[i], e);
        tt_free(w);
        tt_free(y);
    }
}
END_TEST

/* ---- dropout through the layer ------------------------------------------------------------------------------- */

enum { DR_ROWS = 8, DR_COLS = 600 };

/* Layer `which` (0 or 1: two dropout layers of one model) forward over rows whose data-set indices are ids, in a
 * training step (seed, epoch) or in evaluation; x = 1 + column / 1000 (every element distinct and positive). */
static float *dropout_out(tt_model *m, int which, int training, uint64_t seed, uint64_t epoch, const uint32_t *ids)
{
    float x[DR_ROWS * DR_COLS];
    for (size_t i = 0; i < DR_ROWS * DR_COLS; i++) x[i] = 1.0f + (float)(i % DR_COLS) / 1000.0f;
    tt_pass ps = {.training = training, .seed = seed, .epoch = epoch, .d_ids = ids, .share = 1.0f};
    return forward(&m->layers[which ? 2 : 0], NULL, x, DR_ROWS, 0, &ps);
}

static size_t mask_differences(const float *a, const float *b, size_t row_a, size_t row_b)
{
    size_t n = 0;
    for (size_t j = 0; j < DR_COLS; j++) n += (a[row_a * DR_COLS + j] == 0.0f) != (b[row_b * DR_COLS + j] == 0.0f);
    return n;
}

START_TEST(test_dropout_through_the_layer)
{
    const float rate = 0.3f;
    tt_model m;
    parse_first(&m, "dropout rate=0.3\nrelu\ndropout rate=0.3\nflatten\ndense units=2\n", tt_shape1(DR_COLS), 0);
    const uint32_t ids[DR_ROWS] = {5, 17, 3, 99, 42, 7, 1000, 12};
    uint32_t shuffled[DR_ROWS];
    for (int r = 0; r < DR_ROWS; r++) shuffled[r] = ids[(r + 3) % DR_ROWS]; /* the same samples, other rows */
    float *e1 = dropout_out(&m, 0, 1, 9, 1, ids), *e1again = dropout_out(&m, 0, 1, 9, 1, ids);
    float *e2 = dropout_out(&m, 0, 1, 9, 2, ids), *moved = dropout_out(&m, 0, 1, 9, 1, shuffled);
    float *other_layer = dropout_out(&m, 1, 1, 9, 1, ids), *other_seed = dropout_out(&m, 0, 1, 10, 1, ids);
    float *eval = dropout_out(&m, 0, 0, 9, 1, ids);
    size_t dropped = 0;
    for (size_t r = 0; r < DR_ROWS; r++) {
        ck_assert_msg(mask_differences(e1, e1again, r, r) == 0, "row %zu: the same (seed, epoch, layer, sample) gave "
                      "another mask", r);
        ck_assert_msg(mask_differences(e1, moved, (r + 3) % DR_ROWS, r) == 0, "sample %u: its mask depends on its row",
                      ids[(r + 3) % DR_ROWS]);
        /* masks of independent keys agree on ~58% of 600 elements (0.7^2 + 0.3^2); 100 differences is far below the
         * ~252 expected and far above 0 */
        ck_assert_msg(mask_differences(e1, e2, r, r) > 100, "row %zu: epoch 2 drops what epoch 1 dropped", r);
        ck_assert_msg(mask_differences(e1, other_layer, r, r) > 100, "row %zu: two dropout layers share a mask", r);
        ck_assert_msg(mask_differences(e1, other_seed, r, r) > 100, "row %zu: another seed, the same mask", r);
        if (r) ck_assert_msg(mask_differences(e1, e1, r, 0) > 100, "rows %zu and 0: one mask for two samples", r);
        for (size_t j = 0; j < DR_COLS; j++) {
            const float x = 1.0f + (float)j / 1000.0f, y = e1[r * DR_COLS + j];
            ck_assert_msg(y == 0.0f || y == x * (1.0f / (1.0f - rate)), "kept %g as %g, not x / (1 - rate) = %g",
                          (double)x, (double)y, (double)(x * (1.0f / (1.0f - rate))));
            ck_assert_msg(eval[r * DR_COLS + j] == x, "evaluation changed %g to %g", (double)x,
                          (double)eval[r * DR_COLS + j]);
            dropped += y == 0.0f;
        }
    }
    const double n = DR_ROWS * DR_COLS, sd = sqrt(n * rate * (1 - rate));
    ck_assert_msg(fabs((double)dropped - rate * n) < 4 * sd, "dropped %zu of %g at rate %g", dropped, n, (double)rate);
    float *bufs[] = {e1, e1again, e2, moved, other_layer, other_seed, eval};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tt_free(bufs[i]);
}
END_TEST

/* ---- the embedding's gradient, to the bit ---------------------------------------------------------------------- */

/* dW[v, :] = the rows of dy of the tokens with id v, added one after another in ascending token position, in float:
 * the order the backends promise (layers/embedding.c). Values of very different sizes, so that another order of the
 * same additions rounds differently (checked: the reversed order gives other bits). */
START_TEST(test_embedding_gradient_order)
{
    enum { N = 64, V = 5, E = 3 };
    float t[N], dy[N * E], want[V * E], reversed[V * E];
    tt_rng r;
    tt_rng_seed(&r, 77, 1);
    for (size_t i = 0; i < N; i++) {
        t[i] = (float)tt_rng_below(&r, V);
        for (size_t e = 0; e < E; e++) {
            const float mag = (float)ldexp(1.0, (int)tt_rng_below(&r, 40) - 20);
            dy[i * E + e] = (tt_rng_uniform(&r) - 0.5f) * mag;
        }
    }
    t[N - 1] = (float)V; /* an id outside the vocabulary: no row */
    for (size_t k = 0; k < V * E; k++) want[k] = reversed[k] = 0.0f;
    for (size_t i = 0; i < N; i++) {
        if (t[i] >= (float)V) continue;
        const size_t id = (size_t)t[i];
        for (size_t e = 0; e < E; e++) {
            volatile float s = want[id * E + e] + dy[i * E + e]; /* one rounding per addition, no contraction */
            want[id * E + e] = s;
        }
    }
    for (size_t i = N; i-- > 0;) {
        if (t[i] >= (float)V) continue;
        for (size_t e = 0; e < E; e++) {
            volatile float s = reversed[(size_t)t[i] * E + e] + dy[i * E + e];
            reversed[(size_t)t[i] * E + e] = s;
        }
    }
    ck_assert_msg(memcmp(want, reversed, sizeof want) != 0, "the data cannot tell the orders apart");
    tt_dev dev;
    tt_error err;
    ck_assert_msg(tt_dev_init(&dev, g_be.ops, g_be.devices[0], &err) == TT_OK, "%s", err.msg);
    tt_dev_bind(&dev);
    float *d_t = tt_dev_alloc_f32(&dev, N), *d_dy = tt_dev_alloc_f32(&dev, N * E);
    float *d_dw = tt_dev_alloc_f32(&dev, V * E + 1);
    float got[V * E + 1];
    const float guard = 12345.0f;
    tt_dev_h2d(&dev, d_t, t, sizeof t);
    tt_dev_h2d(&dev, d_dy, dy, sizeof dy);
    tt_dev_h2d(&dev, d_dw + V * E, &guard, sizeof guard);
    tt_dev_embed_bwd(&dev, d_dw, d_dy, d_t, N, V, E);
    tt_dev_d2h(&dev, got, d_dw, sizeof got);
    tt_dev_sync(&dev);
    for (size_t k = 0; k < V * E; k++)
        ck_assert_msg(memcmp(&got[k], &want[k], sizeof(float)) == 0, "%s: dW[%zu][%zu] = %a, token order gives %a%s",
                      g_device, k / E, k % E, (double)got[k], (double)want[k],
                      got[k] == reversed[k] ? " (the reversed order's)" : "");
    ck_assert_msg(got[V * E] == guard, "%s: wrote past dW", g_device);
    tt_dev_dfree(&dev, d_t);
    tt_dev_dfree(&dev, d_dy);
    tt_dev_dfree(&dev, d_dw);
    tt_dev_free(&dev);
}
END_TEST

/* ---- batchnorm against Keras ------------------------------------------------------------------------------------
 * One BatchNormalization(momentum=0.9) over two 2x2 images of 3 channels (8 rows per channel), numbers recorded from
 * Keras 3 by tools/keras_batchnorm_reference.py: the training output, the gradients of sum(R * y) (dx, dgamma, dbeta),
 * the moving statistics after that step (the layer's tail step added, as the host adds it) and the inference output
 * with the moving statistics before it. On the CPU backend and, given `cuda`, on the CUDA backend. atol 2e-6 + rtol
 * 1e-5: TensorFlow normalises as x * (gamma * inv) + (beta - mean * gamma * inv), towertrain as
 * (x - mean) * (inv * gamma) + beta, and sums in another order. */
/* BEGIN keras_batchnorm_reference.py output: TensorFlow 2.21.0, Keras 3.15.1 */
static const float BN_X[24] =
    {1.6875, 3.4375, 1.53125, -1.15625, 1.84375, -0.65625, 2.5625, 1.34375, 0.125, -0.8125, -0.59375, 0.46875,
    -0.625, 2.375, 2.53125, -0.28125, 1.53125, -0.53125, 3.03125, -1.5625, 0.1875, 3.0625, 1.96875, 1.71875};
static const float BN_R[24] =
    {0.6875, 1.015625, -0.515625, -0.71875, 0.203125, -1.140625, -1.125, -1.109375, 0.71875, -0.203125, -0.171875,
    0.796875, -1.0625, 0.921875, -0.953125, 1.4375, 0.796875, -1.40625, 1.34375, 0.484375, -0.0625, -0.921875,
    -0.40625, 1};
static const float BN_PARAMS[6] =
    {1.5, -0.75, 0.5, 0.25, 0, -1}; /* gamma, beta */
static const float BN_MOVING[6] =
    {0.100000001, -0.200000003, 0.300000012, 1.5, 0.5, 2}; /* moving mean, variance */
static const float BN_Y_TRAIN[24] =
    {0.910043418, -1.06313205, -0.596811295, -1.57965422, -0.273044825, -1.62310982, 1.67610431, -0.0251743197,
    -1.25657463, -1.27870166, 0.935323834, -1.09529912, -1.11454582, -0.536407232, -0.127646208, -0.813593328,
    -0.118125737, -1.56446409, 2.08649397, 1.41557288, -1.22725177, 2.11385345, -0.335012436, -0.508842826};
static const float BN_DX[24] =
    {0.626689911, -0.274804592, -0.217447251, -0.465769023, 0.0379074365, -0.339702725, -1.00283027, 0.660307884,
    0.471589327, -0.0311075225, 0.0860446915, 0.481375694, -0.792634368, -0.288380563, -0.500865877, 1.37934363,
    -0.274101019, -0.47409457, 1.13569117, -0.294038326, 0.100169219, -0.849383414, 0.347064495, 0.47897619};
static const float BN_DPARAMS[6] =
    {0.763638377, 1.37986887, 1.42032385, -0.5625, 1.734375, -1.5625}; /* dgamma, dbeta */
static const float BN_MOVING_AFTER[6] =
    {0.18335937, -0.0507031083, 0.337187529, 1.64344323, 0.678782642, 1.91347647};
static const float BN_Y_EVAL[24] =
    {2.19363451, -3.85429883, -0.56479615, -1.28807306, -2.16555977, -1.33800101, 3.26492929, -1.63575923,
    -1.06185639, -0.867207289, 0.41721791, -0.940352798, -0.637644112, -2.72847271, -0.211331129, -0.216778383,
    -1.83443439, -1.29381788, 3.83883715, 1.44370639, -1.03976488, 3.87709761, -2.29800987, -0.498521447};
/* END keras_batchnorm_reference.py output */

static void bn_expect(const char *what, const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(tt_close(got[i], want[i], 2e-6, 1e-5), "%s: batchnorm %s[%zu] = %.9g, Keras %.9g", g_device,
                      what, i, (double)got[i], (double)want[i]);
}

START_TEST(test_batchnorm_keras)
{
    tt_model m;
    const tt_layer *l = parse_first(&m, "batchnorm momentum=0.9\nflatten\ndense units=2\n", tt_shape3(2, 2, 3), 0);
    ck_assert_uint_eq(l->n_params, 6);
    ck_assert_uint_eq(l->n_stats, 6);
    ck_assert_float_eq(l->epsilon, 1e-3f); /* Keras's default */
    tt_dev dev;
    tt_error err;
    ck_assert_msg(tt_dev_init(&dev, g_be.ops, g_be.devices[0], &err) == TT_OK, "%s", err.msg);
    tt_dev_bind(&dev);
    const size_t P = m.n_params, B = 2, F = sizeof(float);
    float *h_all = (float *)tt_calloc(P, F);
    memcpy(h_all + l->offset, BN_PARAMS, sizeof BN_PARAMS);
    memcpy(h_all + l->stat_offset, BN_MOVING, sizeof BN_MOVING);
    float *d_p = tt_dev_alloc_f32(&dev, P), *d_g = tt_dev_alloc_f32(&dev, P), *d_x = tt_dev_alloc_f32(&dev, 24);
    float *d_y = tt_dev_alloc_f32(&dev, 24), *d_dy = tt_dev_alloc_f32(&dev, 24), *d_dx = tt_dev_alloc_f32(&dev, 24);
    float *d_ws = tt_dev_alloc_f32(&dev, l->kind->workspace(l, B, 0)), *d_save = tt_dev_alloc_f32(&dev, m.n_saved);
    tt_dev_h2d(&dev, d_p, h_all, P * F);
    tt_dev_fill(&dev, d_g, P, 0.0f);
    tt_dev_h2d(&dev, d_x, BN_X, sizeof BN_X);
    tt_dev_h2d(&dev, d_dy, BN_R, sizeof BN_R);
    float y[24], dx[24], g[6], tail[6], y_eval[24];
    /* inference first, with the moving statistics before the step */
    tt_pass ps = {.epoch = 1, .d_ws = d_ws, .d_saved = d_save, .share = 1.0f, .rows_all = B};
    l->kind->forward(&dev, l, &ps, d_p + l->offset, d_x, d_y, B);
    tt_dev_d2h(&dev, y_eval, d_y, sizeof y_eval);
    /* a training step of one tower: share 1 */
    ps.training = 1;
    ps.d_grads = d_g;
    l->kind->forward(&dev, l, &ps, d_p + l->offset, d_x, d_y, B);
    tt_dev_d2h(&dev, y, d_y, sizeof y);
    l->kind->backward(&dev, l, &ps, d_p + l->offset, d_g + l->offset, d_x, d_y, d_dy, d_dx, B);
    tt_dev_d2h(&dev, dx, d_dx, sizeof dx);
    tt_dev_d2h(&dev, g, d_g + l->offset, sizeof g);
    tt_dev_d2h(&dev, tail, d_g + l->stat_offset, sizeof tail);
    tt_dev_sync(&dev);
    for (size_t i = 0; i < 6; i++) { /* the host adds the tower's step to the moving statistics */
        float moving = BN_MOVING[i];
        tt_tail_elem(&moving, tail[i]);
        tail[i] = moving;
    }
    bn_expect("inference output", y_eval, BN_Y_EVAL, 24);
    bn_expect("training output", y, BN_Y_TRAIN, 24);
    bn_expect("dx", dx, BN_DX, 24);
    bn_expect("dgamma, dbeta", g, BN_DPARAMS, 6);
    bn_expect("moving statistics after the step", tail, BN_MOVING_AFTER, 6);
    float *bufs[] = {d_p, d_g, d_x, d_y, d_dy, d_dx, d_ws, d_save};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tt_dev_dfree(&dev, bufs[i]);
    tt_dev_free(&dev);
    tt_free(h_all);
}
END_TEST

int main(int argc, char **argv)
{
    g_device = argc > 1 ? argv[1] : "cpu";
    const int is_cpu = strcmp(g_device, "cpu") == 0;
    tt_error err;
    if (tt_backend_open(g_device, NULL, &g_be, &err) != TT_OK) {
        char what[64];
        snprintf(what, sizeof what, "reference on backend %s", g_device);
        return tt_test_skip_no_gpu(what, err.msg);
    }
    if (!is_cpu && g_be.ops == &tt_dev_cpu_ops) return tt_test_skip_no_gpu(g_device, "opened the CPU backend");
    Suite *s = suite_create(g_device);
    TCase *tc = tcase_create("reference");
    if (is_cpu) { /* the layers run on the CPU backend, the oracle; test_backend_ops holds the others to it */
        tcase_add_test(tc, test_conv2d_reference);
        tcase_add_test(tc, test_conv1d_reference);
        tcase_add_test(tc, test_maxpool2d_reference);
        tcase_add_test(tc, test_maxpool1d_reference);
        tcase_add_test(tc, test_globalmaxpool1d_reference);
        tcase_add_test(tc, test_embedding_reference);
        tcase_add_test(tc, test_dropout_through_the_layer);
    }
    tcase_add_test(tc, test_embedding_gradient_order);
    tcase_add_test(tc, test_batchnorm_keras);
    suite_add_tcase(s, tc);
    return tt_test_run_suite_mode(s, is_cpu ? CK_FORK_GETENV : CK_NOFORK);
}
