/* test_precision.c — the 16-bit formats of --precision (tt_math.h's conversions) against a reference written from
 * IEEE 754's definitions: a binary format of p significand bits, smallest normal exponent emin and largest finite
 * value max rounds a real x to the nearest multiple of the quantum of x's binade (ties to the even multiple), and a
 * magnitude at least max + half the top binade's quantum becomes Inf. The reference computes that in double with
 * frexp/ldexp/floor, nothing shared with the bit manipulation it checks. */
#include <float.h>

#include "tt_dev.h"
#include "tt_math.h"
#include "tt_model.h"
#include "tt_test.h"

typedef struct fmt_def {
    int fmt, p, emin, emax;
    const char *name;
} fmt_def;

static const fmt_def FMTS[2] = {{TT_FMT_BF16, 8, -126, 127, "bf16"}, {TT_FMT_FP16, 11, -14, 15, "fp16"}};

static double fmt_max(const fmt_def *f) { return ldexp(2.0 - ldexp(1.0, 1 - f->p), f->emax); }

/* IEEE 754 round to nearest, ties to even, into format f. */
static double ieee_round(const fmt_def *f, double x)
{
    if (isnan(x) || isinf(x) || x == 0) return x;
    const double a = fabs(x);
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1): its leading bit is 2^(e-1) */
    int ex = e - 1 < f->emin ? f->emin : e - 1;
    const double q = ldexp(1.0, ex - (f->p - 1)), n = a / q, lo = floor(n), r = n - lo;
    const double k = r > 0.5 || (r == 0.5 && fmod(lo, 2.0) == 1.0) ? lo + 1 : lo;
    double y = k * q;
    if (a >= fmt_max(f) + ldexp(1.0, f->emax - f->p)) y = INFINITY;
    return copysign(y, x);
}

/* The value of code h of format f, from its fields. */
static double ieee_decode(const fmt_def *f, uint16_t h)
{
    const int mbits = f->p - 1, ebits = 15 - mbits, bias = f->emax;
    const int s = h >> 15, e = (h >> mbits) & ((1 << ebits) - 1), m = h & ((1 << mbits) - 1);
    double v;
    if (e == (1 << ebits) - 1) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, f->emin - mbits);
    else v = ldexp((double)((1 << mbits) + m), e - bias - mbits);
    return s ? -v : v;
}

static void check_one(const fmt_def *f, float x)
{
    const float got = tt_round_fmt(x, f->fmt);
    const double want = ieee_round(f, (double)x);
    if (isnan(want)) {
        ck_assert_msg(isnan(got), "%s: %a (bits %08x) gave %a, want NaN", f->name, (double)x, tt_f32_bits(x),
                      (double)got);
        ck_assert_msg(!!signbit(got) == !!signbit(x), "%s: NaN %08x lost its sign", f->name, tt_f32_bits(x));
        return;
    }
    ck_assert_msg((double)got == want && !!signbit(got) == !!signbit(want), "%s: %a (bits %08x) gave %a, want %a",
                  f->name, (double)x, tt_f32_bits(x), (double)got, want);
}

/* Every code decodes to its IEEE value, and every finite code comes back from its value unchanged. */
START_TEST(test_decode_every_code)
{
    for (int k = 0; k < 2; k++) {
        const fmt_def *f = &FMTS[k];
        for (uint32_t h = 0; h < 65536; h++) {
            const float v = tt_from16((uint16_t)h, f->fmt);
            const double want = ieee_decode(f, (uint16_t)h);
            if (isnan(want)) {
                ck_assert_msg(isnan(v), "%s %04x: %a, want NaN", f->name, h, (double)v);
                ck_assert(isnan(tt_from16(tt_to16(v, f->fmt), f->fmt)));
                continue;
            }
            ck_assert_msg((double)v == want && !!signbit(v) == !!signbit(want), "%s %04x: %a, want %a", f->name, h,
                          (double)v, want);
            ck_assert_msg(tt_to16(v, f->fmt) == h, "%s %04x: round trip gave %04x", f->name, h, tt_to16(v, f->fmt));
        }
    }
}
END_TEST

/* Between every two neighbouring finite codes: the midpoint goes to the even code, a float either side of it to the
 * nearer; and past the largest finite value, the overflow threshold. */
START_TEST(test_ties_and_neighbours)
{
    for (int k = 0; k < 2; k++) {
        const fmt_def *f = &FMTS[k];
        for (uint32_t s = 0; s < 2; s++)
            for (uint32_t h = 0; h < 65535; h++) {
                const uint16_t a = (uint16_t)(h | s << 15), b = (uint16_t)((h + 1) | s << 15);
                const float va = tt_from16(a, f->fmt), vb = tt_from16(b, f->fmt);
                if (!isfinite(va)) break;
                /* past the largest finite value the next "code" is Inf: its midpoint is max + half the last quantum */
                const double below = (double)tt_from16((uint16_t)(a - 1), f->fmt);
                const double mid = isinf(vb) ? (double)va + ((double)va - below) / 2 : ((double)va + (double)vb) / 2;
                const float m = (float)mid;
                if (isinf(vb)) { /* the overflow threshold: max + half its quantum rounds to Inf */
                    ck_assert_msg(isinf(tt_round_fmt(m, f->fmt)), "%s: %a should overflow", f->name, mid);
                    ck_assert_msg(tt_round_fmt(nextafterf(m, 0.0f), f->fmt) == va, "%s: below the threshold", f->name);
                    break;
                }
                ck_assert_msg((double)m == mid, "%s: midpoint %a not a float", f->name, mid); /* 8+ spare bits */
                const uint16_t even = (a & 1) ? b : a;
                ck_assert_msg(tt_to16(m, f->fmt) == even, "%s: tie %a between %04x and %04x gave %04x", f->name, mid,
                              a, b, tt_to16(m, f->fmt));
                ck_assert(tt_to16(nextafterf(m, s ? INFINITY : -INFINITY), f->fmt) == a);
                ck_assert(tt_to16(nextafterf(m, s ? -INFINITY : INFINITY), f->fmt) == b);
                check_one(f, m);
            }
    }
}
END_TEST

/* Named edges, then every float bit pattern at a stride and a million random ones, against the reference. */
START_TEST(test_sweep_against_reference)
{
    const float edges[] = {0.0f,         -0.0f,        1.0f,          65504.0f,      65519.996f,   65520.0f,
                           -65520.0f,    65536.0f,     FLT_MAX,       -FLT_MAX,      FLT_MIN,      0x1p-14f,
                           0x1p-24f,     0x1p-25f,     0x1.8p-25f,    0x1.000002p-25f, 0x1p-26f,   0x1.ff8p-15f,
                           0x1p-133f,    0x1p-134f,    0x1.8p-134f,   0x1p-149f,     INFINITY,     -INFINITY,
                           NAN,          -NAN,         3.3895314e38f, 1.0078125f,    1.00390625f,  1.01171875f};
    for (int k = 0; k < 2; k++) {
        const fmt_def *f = &FMTS[k];
        for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) check_one(f, edges[i]);
        for (uint64_t u = 0; u <= 0xffffffffull; u += 1021) check_one(f, tt_bits_f32((uint32_t)u));
        tt_rng r;
        tt_rng_seed(&r, 33, (uint64_t)k);
        for (int i = 0; i < 1000000; i++) check_one(f, tt_bits_f32((uint32_t)tt_rng_next(&r)));
        /* signalling NaNs come back quiet */
        const float snan = tt_bits_f32(0x7f800001u);
        const uint16_t h = tt_to16(snan, f->fmt);
        ck_assert(isnan(tt_from16(h, f->fmt)));
        ck_assert_msg(f->fmt == TT_FMT_FP16 ? (h & 0x0200u) : (h & 0x0040u), "%s: NaN not quiet: %04x", f->name, h);
    }
}
END_TEST

/* The push's counts: an element zero in 16 bits but not in FP32 is an underflow; Inf or NaN in 16 bits is bad. */
START_TEST(test_narrow_counts)
{
    const float x[] = {0.0f, -0.0f, 1e-8f, -1e-9f, 1.0f, 70000.0f, -1e30f, NAN, INFINITY, 6e-8f, 1e-40f};
    uint32_t under = 0, bad = 0;
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) tt_narrow_elem(x[i], TT_FMT_FP16, &under, &bad);
    ck_assert_uint_eq(under, 3); /* 1e-8, -1e-9, 1e-40 (6e-8 rounds to 2^-24, not zero) */
    ck_assert_uint_eq(bad, 4);   /* 70000, -1e30, NaN, Inf */
    under = bad = 0;
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) tt_narrow_elem(x[i], TT_FMT_BF16, &under, &bad);
    ck_assert_uint_eq(under, 0); /* bf16 keeps FP32's range: 1e-40 is a bf16 subnormal (2^-133 and up) */
    ck_assert_uint_eq(bad, 2);   /* NaN, Inf */
    ck_assert_float_eq(tt_round_fmt(0.1f, TT_FMT_FP32), 0.1f);
}
END_TEST

/* ---- the mixed-precision step, on the CPU backend (the oracle) ----------------------------------------------- */

typedef struct run_out {
    float *w;        /* the master weights after the run (caller frees) */
    size_t P;
    uint64_t under, elems, skipped;
    double scale;    /* the scale after the run */
    tt_halt halt;
    tt_status status;
} run_out;

static float g_lr = 0.1f; /* train_on's SGD rate */

/* `steps` steps of 64 samples of ds on the CPU backend's `model` (NULL: the MLP), from one seed: the precision, the
 * towers and the loss scale as given; SGD at g_lr (0.1: a gradient difference shows in the weights). */
static run_out train_on(const tt_dataset *ds, const char *model, int prec, size_t towers, tt_loss_scale ls,
                        size_t steps)
{
    tt_model m;
    tt_error err;
    const tt_model_input in = {ds->shape, ds->n_classes, 0};
    ck_assert_msg((model ? tt_model_parse(&m, model, "t", &in, &err) : tt_model_mlp(&m, ds->dim, ds->n_classes, &err)) ==
                      TT_OK, "%s", err.msg);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, 42);
    tt_optim_config oc = tt_optim_defaults(TT_OPT_SGD);
    oc.lr = g_lr;
    tt_trainer_config tc = tt_test_config(towers, 64, oc, TT_REDUCE_CPU);
    tc.host_threads = 2;
    tc.precision = prec;
    tc.loss_scale = ls;
    tt_trainer *tr = NULL;
    ck_assert_msg(tt_trainer_init(&tr, &m, &tc, init, &err) == TT_OK, "%s", err.msg);
    uint32_t idx[64];
    run_out o = {0};
    for (size_t s = 0; s < steps && !o.status; s++) {
        for (uint32_t i = 0; i < 64; i++) idx[i] = (uint32_t)((s * 64 + i * 7) % ds->n);
        tt_step_result res;
        o.status = tt_trainer_step(tr, ds, idx, 64, &res, &err);
        o.under += res.grad_under;
        o.elems += res.grad_elems;
    }
    const tt_scaler_state sc = tt_trainer_scaler(tr);
    o.skipped = sc.skipped;
    o.scale = sc.scale;
    o.halt = tt_trainer_halted(tr);
    o.P = m.n_params;
    o.w = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_trainer_get_params(tr, o.w);
    tt_trainer_free(tr);
    tt_free(init);
    return o;
}

/* The same on a learnable 32-feature, 5-class set whose byte features are scaled by pixel_scale. */
static run_out train_prec(int prec, size_t towers, tt_loss_scale ls, size_t steps, float pixel_scale)
{
    tt_dataset ds;
    tt_test_dataset(&ds, 512, 32, 5, 3);
    ds.scale = pixel_scale;
    run_out o = train_on(&ds, NULL, prec, towers, ls, steps);
    tt_dataset_free(&ds);
    return o;
}

static const tt_loss_scale NO_SCALE = {0, 0, 0};

/* The relative distance between two weight vectors' changes from the same start: ||(a - w0) - (b - w0)|| / ||a - w0||. */
static double change_distance(const float *a, const float *b, const float *w0, size_t P)
{
    double d = 0, n = 0;
    for (size_t i = 0; i < P; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        n += ((double)a[i] - w0[i]) * ((double)a[i] - w0[i]);
    }
    return sqrt(d / n);
}

/* Same seed, same format: the same bits; N towers against 1 within the format's rounding (each tower's gradient is
 * rounded to 16 bits apart, 1 tower's once: a few units of the format's last place), while FP32's differ by its own
 * rounding only; and bf16 and fp16 are not FP32 — the rounding happened. */
START_TEST(test_towers_and_repeats)
{
    run_out w0 = train_prec(TT_FMT_FP32, 1, NO_SCALE, 0, 1.0f / 255.0f);
    run_out f1 = train_prec(TT_FMT_FP32, 1, NO_SCALE, 3, 1.0f / 255.0f);
    run_out f4 = train_prec(TT_FMT_FP32, 4, NO_SCALE, 3, 1.0f / 255.0f);
    const double fp32_gap = change_distance(f1.w, f4.w, w0.w, w0.P);
    ck_assert_msg(fp32_gap < 1e-5, "fp32: 4 towers against 1: %g", fp32_gap);
    const double unit[3] = {0, 0x1p-8, 0x1p-11};
    for (int fmt = TT_FMT_BF16; fmt <= TT_FMT_FP16; fmt++) {
        run_out a = train_prec(fmt, 1, NO_SCALE, 3, 1.0f / 255.0f);
        run_out b = train_prec(fmt, 1, NO_SCALE, 3, 1.0f / 255.0f);
        run_out c = train_prec(fmt, 4, NO_SCALE, 3, 1.0f / 255.0f);
        ck_assert_int_eq(a.status, TT_OK);
        ck_assert_msg(memcmp(a.w, b.w, a.P * sizeof(float)) == 0, "fmt %d: the same run twice differs", fmt);
        const double gap = change_distance(a.w, c.w, w0.w, w0.P), off = change_distance(a.w, f1.w, w0.w, w0.P);
        ck_assert_msg(gap < 16 * unit[fmt], "fmt %d: 4 towers against 1: %g (unit %g)", fmt, gap, unit[fmt]);
        ck_assert_msg(gap > fp32_gap, "fmt %d: 4 towers against 1 (%g) no further apart than FP32's (%g)", fmt, gap,
                      fp32_gap);
        ck_assert_msg(off > unit[fmt] / 64 && off < 64 * unit[fmt], "fmt %d: against FP32: %g", fmt, off);
        ck_assert_uint_eq(a.elems, 3 * (a.P - 0)); /* the MLP has no non-trainable tail */
        tt_free(a.w);
        tt_free(b.w);
        tt_free(c.w);
    }
    tt_free(w0.w);
    tt_free(f1.w);
    tt_free(f4.w);
}
END_TEST

/* fp16 without a scale loses small gradient elements to zero; the default dynamic scale keeps them. */
START_TEST(test_underflow_and_scale)
{
    run_out none = train_prec(TT_FMT_FP16, 2, (tt_loss_scale){0, 1, 0}, 4, 1.0f / 255.0f / 64.0f);
    run_out dyn = train_prec(TT_FMT_FP16, 2, (tt_loss_scale){1, TT_SCALE_INIT, 0}, 4, 1.0f / 255.0f / 64.0f);
    ck_assert_msg(none.under > 0, "no gradient element underflowed without a scale");
    ck_assert_msg(dyn.under < none.under / 4, "with the scale: %llu underflows, without %llu",
                  (unsigned long long)dyn.under, (unsigned long long)none.under);
    ck_assert_uint_eq(dyn.skipped, 0);
    ck_assert(dyn.scale == TT_SCALE_INIT);
    run_out bf = train_prec(TT_FMT_BF16, 2, NO_SCALE, 4, 1.0f / 255.0f / 64.0f);
    ck_assert_uint_eq(bf.under, 0); /* FP32's range */
    tt_free(none.w);
    tt_free(dyn.w);
    tt_free(bf.w);
}
END_TEST

/* GradScaler's rule: a scale too large overflows; those steps are skipped (the weights untouched by them) and the
 * scale halves each time, until the steps go through; a run of finite steps doubles it again. */
START_TEST(test_dynamic_backoff_and_growth)
{
    run_out w0 = train_prec(TT_FMT_FP16, 2, NO_SCALE, 0, 1.0f / 255.0f);
    run_out r = train_prec(TT_FMT_FP16, 2, (tt_loss_scale){1, 0x1p24, 0}, 12, 1.0f / 255.0f);
    ck_assert_int_eq(r.status, TT_OK);
    ck_assert_msg(r.skipped > 0 && r.skipped < 12, "skipped %llu of 12", (unsigned long long)r.skipped);
    ck_assert(r.scale == ldexp(1.0, 24 - (int)r.skipped));
    ck_assert(memcmp(r.w, w0.w, r.P * sizeof(float)) != 0); /* the later steps applied */
    for (size_t i = 0; i < r.P; i++) ck_assert(isfinite(r.w[i]));
    /* every skipped step is a step not taken: skipping k steps then taking the rest equals taking them from the
     * start at the scale that went through, up to the scale's exact power of two (the unscaled sums are equal) */
    run_out g = train_prec(TT_FMT_FP16, 2, (tt_loss_scale){1, 1024, 3}, 7, 1.0f / 255.0f);
    ck_assert_uint_eq(g.skipped, 0);
    ck_assert(g.scale == 1024.0 * 4); /* doubled after steps 3 and 6 */
    /* the host divides the scale out: a scaled run takes the unscaled run's steps, within fp16's rounding */
    run_out plain = train_prec(TT_FMT_FP16, 2, (tt_loss_scale){0, 1, 0}, 7, 1.0f / 255.0f);
    const double gap = change_distance(plain.w, g.w, w0.w, w0.P);
    ck_assert_msg(gap < 16 * 0x1p-11, "scaled against unscaled: %g", gap);
    tt_free(plain.w);
    tt_free(w0.w);
    tt_free(r.w);
    tt_free(g.w);
}
END_TEST

/* A scale that halves below 1 halts the run (TT_HALT_SCALE), not the divergence halt. One linear layer on rows that
 * are all one feature of 60000 (fp16 holds it), labelled with the class the initial weights score lowest: the
 * softmax saturates, every row's loss gradient is -1/64 at that class, and its weight's gradient is -60000 x the
 * scale — finite at 1, an overflow at 1.5. A loss that is not finite still halts as a divergence. */
START_TEST(test_scale_collapse_and_nonfinite_loss)
{
    tt_dataset ds;
    tt_test_dataset_zero(&ds, 64, 1, 4, 5);
    ds.scale = 60000.0f / 255.0f;
    tt_model m;
    tt_error err;
    const tt_model_input in = {ds.shape, ds.n_classes, 0};
    ck_assert_int_eq(tt_model_parse(&m, "dense units=5\n", "t", &in, &err), TT_OK);
    float *w = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, w, 42);
    int32_t low = 0;
    for (int32_t c = 1; c < 5; c++) /* the kernel (4 x 5, row-major) comes first in the layout: feature 0's row */
        if (w[c] < w[low]) low = c;
    for (size_t r = 0; r < ds.n; r++) {
        ds.x[r * 4] = 255;
        ds.y[r] = low;
    }
    run_out ok = train_on(&ds, "dense units=5\n", TT_FMT_FP16, 1, (tt_loss_scale){1, 1, 0}, 1);
    ck_assert_int_eq(ok.status, TT_OK); /* at scale 1 the step goes through */
    ck_assert_uint_eq(ok.skipped, 0);
    run_out r = train_on(&ds, "dense units=5\n", TT_FMT_FP16, 1, (tt_loss_scale){1, 1.5, 0}, 3);
    ck_assert_int_eq(r.status, TT_ERR_NUMERIC);
    ck_assert_int_eq(r.halt, TT_HALT_SCALE);
    ck_assert_uint_eq(r.skipped, 1);
    ck_assert_msg(memcmp(r.w, w, m.n_params * sizeof(float)) == 0, "the skipped step changed the weights");
    run_out f = train_on(&ds, "dense units=5\n", TT_FMT_FP16, 1, (tt_loss_scale){1, 1e10, 0}, 1); /* skip, go on */
    ck_assert_int_eq(f.status, TT_OK);
    ck_assert_uint_eq(f.skipped, 1);
    tt_free(ok.w);
    tt_free(r.w);
    tt_free(f.w);
    tt_free(w);
    tt_dataset_free(&ds);
    run_out n = train_prec(TT_FMT_BF16, 1, NO_SCALE, 6, 1e30f);
    ck_assert_int_eq(n.halt, TT_HALT_NONFINITE);
    for (size_t i = 0; i < n.P; i++) ck_assert(isfinite(n.w[i]));
    tt_free(n.w);
}
END_TEST

/* "Stored in 16 bits", checked where it is stored: a training pass of a model with every kind of buffer — a conv2d
 * (im2col), batchnorm (statistics), a fused relu, pooling, dropout, dense — under each format leaves every activation,
 * the loss gradient and the last dx written as values of the format (rounding them again changes nothing), while
 * the weight gradients (FP32 sums of 16-bit products) are not all 16-bit values. */
static int all_in_format(const float *x, size_t n, int fmt)
{
    for (size_t i = 0; i < n; i++)
        if (tt_round_fmt(x[i], fmt) != x[i] && !isnan(x[i])) return 0;
    return 1;
}

START_TEST(test_pass_stores_16_bits)
{
    const char *text = "conv2d filters=4 kernel=3 padding=same activation=relu\nbatchnorm\nmaxpool2d pool=2\n"
                       "flatten\ndense units=8 activation=relu\ndropout rate=0.25\ndense units=5\n";
    for (int fmt = TT_FMT_BF16; fmt <= TT_FMT_FP16; fmt++) {
        tt_model m;
        tt_error err;
        const tt_model_input in = {tt_shape3(6, 6, 1), 5, 0};
        ck_assert_msg(tt_model_parse(&m, text, "t", &in, &err) == TT_OK, "%s", err.msg);
        const size_t B = 7, P = m.n_params;
        tt_dev dev;
        ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
        float *params = tt_dev_alloc_f32(&dev, P), *grads = tt_dev_alloc_f32(&dev, P), *act[TT_MAX_LAYERS + 1];
        for (size_t i = 0; i <= m.n_logits; i++)
            act[i] = tt_model_act_shared(&m, i) ? act[i - 1]
                                                : tt_dev_alloc_f32(&dev, B * (i ? m.layers[i - 1].out : m.input_dim));
        float *delta[2] = {tt_dev_alloc_f32(&dev, B * m.max_width), tt_dev_alloc_f32(&dev, B * m.max_width)};
        const size_t ws = tt_model_workspace(&m, B, tt_dev_cpu_ops.chunk_mnk);
        float *w = tt_dev_alloc_f32(&dev, ws ? ws : 1), *saved = tt_dev_alloc_f32(&dev, m.n_saved + 1);
        float *dlogits = tt_dev_alloc_f32(&dev, B * m.n_classes), *stats = tt_dev_alloc_f32(&dev, 2 * B);
        int32_t labels[7] = {0, 3, 1, 2, 4, 1, 0};
        uint32_t ids[7] = {4, 9, 2, 7, 1, 3, 5};
        tt_model_init_params(&m, params, 3);
        tt_dev_round16(&dev, params, m.n_trainable, fmt); /* as a pull leaves them */
        tt_rng r;
        tt_rng_seed(&r, 5, 0);
        for (size_t i = 0; i < B * m.input_dim; i++) act[0][i] = tt_rng_uniform(&r);
        const tt_pass ps = {.training = 1, .seed = 7, .epoch = 1, .d_ids = ids, .d_ws = w,
                            .chunk_mnk = tt_dev_cpu_ops.chunk_mnk, .d_saved = saved, .d_grads = grads, .share = 1.0f,
                            .rows_all = B, .fmt = fmt};
        tt_model_forward(&dev, &m, &ps, params, act, B);
        for (size_t i = 0; i <= m.n_logits; i++)
            ck_assert_msg(all_in_format(act[i], B * (i ? m.layers[i - 1].out : m.input_dim), fmt),
                          "fmt %d: activation %zu is not stored in 16 bits", fmt, i);
        tt_dev_softmax_xent(&dev, dlogits, stats, tt_model_logits(&m, act), labels, B, m.n_classes, 1.0f / B);
        ck_assert(!all_in_format(dlogits, B * m.n_classes, fmt)); /* the loss's own FP32 result, before the pass */
        tt_model_backward(&dev, &m, &ps, params, grads, act, delta, dlogits, B);
        ck_assert_msg(all_in_format(dlogits, B * m.n_classes, fmt), "fmt %d: the loss gradient", fmt);
        /* the last dx written: the first conv2d's output gradient (layer 1's dx), in whichever buffer it went */
        ck_assert_msg(all_in_format(delta[0], B * m.layers[0].out, fmt) ||
                          all_in_format(delta[1], B * m.layers[0].out, fmt), "fmt %d: the dx", fmt);
        ck_assert_msg(!all_in_format(grads, m.n_trainable, fmt), "fmt %d: the gradient is already 16-bit", fmt);
        for (size_t i = 0; i <= m.n_logits; i++)
            if (!tt_model_act_shared(&m, i)) tt_dev_dfree(&dev, act[i]);
        float *bufs[] = {delta[0], delta[1], w, dlogits, stats, params, grads, saved};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tt_dev_dfree(&dev, bufs[i]);
        tt_dev_free(&dev);
    }
}
END_TEST

/* The dynamic scale grows to 2^64 and no further (bf16's range would let it pass FLT_MAX, where the towers' float
 * overflows). An fp16 master weight beyond 65504 (its 16-bit copy Inf): refused before any step, and a step that
 * takes one there halts the run after it (TT_HALT_RANGE). */
START_TEST(test_scale_cap_and_fp16_range)
{
    run_out cap = train_prec(TT_FMT_BF16, 1, (tt_loss_scale){1, 0x1p62, 1}, 4, 1.0f / 255.0f);
    ck_assert_int_eq(cap.status, TT_OK);
    ck_assert_msg(cap.scale == TT_SCALE_MAX, "grew to %g", cap.scale);
    tt_free(cap.w);
    g_lr = 1e7f; /* one step throws weights far beyond 65504 (finite in FP32) */
    run_out far = train_prec(TT_FMT_FP16, 1, (tt_loss_scale){1, 1, 0}, 3, 1.0f / 255.0f);
    g_lr = 0.1f;
    ck_assert_int_eq(far.status, TT_ERR_NUMERIC);
    ck_assert_int_eq(far.halt, TT_HALT_RANGE);
    tt_free(far.w);
    tt_dataset ds;
    tt_test_dataset(&ds, 64, 32, 5, 3);
    tt_model m;
    tt_error err;
    ck_assert_int_eq(tt_model_mlp(&m, 32, 5, &err), TT_OK);
    float *w = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, w, 42);
    w[7] = 70000.0f;
    tt_trainer_config tc = tt_test_config(1, 64, tt_optim_defaults(TT_OPT_SGD), TT_REDUCE_CPU);
    tc.precision = TT_FMT_FP16;
    tt_trainer *tr = NULL;
    ck_assert_int_eq(tt_trainer_init(&tr, &m, &tc, w, &err), TT_ERR_ARG);
    ck_assert_ptr_null(tr);
    ck_assert_msg(strstr(err.msg, "--precision fp16: the weights hold values whose fp16 copy would be Inf") != NULL,
                  "%s", err.msg);
    w[7] = 65519.99f; /* rounds to 65504: accepted */
    ck_assert_msg(tt_trainer_init(&tr, &m, &tc, w, &err) == TT_OK, "%s", err.msg);
    tt_trainer_free(tr);
    tr = NULL;
    w[7] = 70000.0f;
    tc.precision = TT_FMT_BF16; /* FP32's exponents: 70000 is fine */
    ck_assert_int_eq(tt_trainer_init(&tr, &m, &tc, w, &err), TT_OK);
    tt_trainer_free(tr);
    tr = NULL;
    w[7] = 3.4e38f; /* but bf16 rounds it to Inf */
    ck_assert_int_eq(tt_trainer_init(&tr, &m, &tc, w, &err), TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "--precision bf16: the weights hold values whose bf16 copy would be Inf") != NULL,
                  "%s", err.msg);
    tt_free(w);
    tt_dataset_free(&ds);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("precision");
    TCase *tc = tcase_create("formats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_decode_every_code);
    tcase_add_test(tc, test_ties_and_neighbours);
    tcase_add_test(tc, test_sweep_against_reference);
    tcase_add_test(tc, test_narrow_counts);
    suite_add_tcase(s, tc);
    TCase *st = tcase_create("step");
    tcase_set_timeout(st, 120);
    tcase_add_test(st, test_pass_stores_16_bits);
    tcase_add_test(st, test_towers_and_repeats);
    tcase_add_test(st, test_underflow_and_scale);
    tcase_add_test(st, test_dynamic_backoff_and_growth);
    tcase_add_test(st, test_scale_collapse_and_nonfinite_loss);
    tcase_add_test(st, test_scale_cap_and_fp16_range);
    suite_add_tcase(s, st);
    return tt_test_run_suite(s);
}
