/* test_precision.c — the 16-bit formats of --precision (tt_math.h's conversions) against a reference written from
 * IEEE 754's definitions: a binary format of p significand bits, smallest normal exponent emin and largest finite
 * value max rounds a real x to the nearest multiple of the quantum of x's binade (ties to the even multiple), and a
 * magnitude at least max + half the top binade's quantum becomes Inf. The reference computes that in double with
 * frexp/ldexp/floor, nothing shared with the bit manipulation it checks. */
#include <float.h>

#include "tt_math.h"
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
    return tt_test_run_suite(s);
}
