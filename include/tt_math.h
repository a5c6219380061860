/* tt_math.h — every per-element and per-row formula of towertrain, written once.
 *
 * The CPU backend and the host optimizer call these in loops; the CUDA backend (cuda/dev_cuda.cu) calls the same
 * functions from its kernels, one thread per element or per row. The header is compiled by both gcc (C11) and
 * nvcc (C++17): TT_HD expands to `__host__ __device__` under nvcc and to `static inline` under the C compiler,
 * so what the CPU tests check is literally the code a GPU would run (no Darknet-style formula drift).
 * Not for: loops over buffers (one exception: tt_update_span, the optimizer's loop that the host and the CPU backend
 * share), memory management or anything that needs the C library beyond <math.h>. */
#ifndef TT_MATH_H
#define TT_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define TT_HD __host__ __device__ __forceinline__ static
#else
#define TT_HD static inline
#endif

/* ---- input ------------------------------------------------------------------------------------------------ */

/* A raw unsigned-byte pixel to the model's input range ([0,1] with scale = 1/255). */
TT_HD float tt_pixel(uint8_t p, float scale) { return (float)p * scale; }

/* ---- reduction --------------------------------------------------------------------------------------------- */

/* One addend of a gradient sum. Every placement (host, one device, all devices) adds the towers' gradients with this
 * function in tower order, so they agree to the last bit. */
TT_HD float tt_add(float acc, float x) { return acc + x; }

/* ---- 16-bit formats (--precision) --------------------------------------------------------------------------
 * Mixed precision stores values in a 16-bit format wherever a GPU would (pulled weights, activations between
 * layers, pushed gradients) and computes in FP32. A format is TT_FMT_FP32 (no rounding), TT_FMT_BF16 (bfloat16: 8
 * exponent bits like FP32, 7 mantissa bits) or TT_FMT_FP16 (IEEE binary16: 5 exponent bits, 10 mantissa bits,
 * largest finite 65504, subnormals down to 2^-24). Conversions round to nearest, ties to even, as IEEE 754 and the
 * GPU's cvt.rn instructions do: a value too large for fp16 becomes Inf (from 65520 up), a NaN stays a NaN (made
 * quiet, its sign kept), subnormals are kept, not flushed. Integer work only, so no floating-point environment
 * (flush-to-zero, -ffast-math) changes a bit. */
enum { TT_FMT_FP32 = 0, TT_FMT_BF16 = 1, TT_FMT_FP16 = 2 };

TT_HD uint32_t tt_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

TT_HD float tt_bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x rounded to the nearest bf16 / fp16 value, as an FP32 bit pattern: ties to even on the magnitude's bits (a
 * float's bits order its magnitudes, so adding half a unit of the kept last place and masking rounds, the carry
 * running into the exponent where it must). fp16 keeps 10 mantissa bits of a normal value and a fixed quantum of
 * 2^-24 below 2^-14 (so more bits go, the smaller the exponent); from 65520 up it is Inf. Selects, no branches: the
 * loops over buffers vectorise. A NaN comes back quiet, with the payload bits the format keeps. */
TT_HD uint32_t tt_round_bf16_bits(uint32_t u)
{
    const uint32_t a = u & 0x7fffffffu;
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    return a > 0x7f800000u ? (u & 0xffff0000u) | 0x00400000u : r;
}

TT_HD uint32_t tt_round_fp16_bits(uint32_t u)
{
    const uint32_t a = u & 0x7fffffffu, sign = u & 0x80000000u, e = a >> 23;
    const uint32_t sh = e >= 113u ? 13u : e >= 103u ? 126u - e : 13u; /* bits dropped (13 for a normal fp16) */
    uint32_t r = (a + (1u << (sh - 1u)) - 1u + ((a >> sh) & 1u)) & ~((1u << sh) - 1u);
    r = e < 103u ? (a > 0x33000000u ? 0x33800000u : 0u) : r; /* below 2^-24: 0, or 2^-24 above its half */
    r = r > 0x477fe000u ? 0x7f800000u : r;                     /* beyond 65504: Inf */
    r = a > 0x7f800000u ? 0x7fc00000u | (a & 0x007fe000u) : r; /* NaN */
    return sign | r;
}

TT_HD uint16_t tt_f32_to_bf16(float x) { return (uint16_t)(tt_round_bf16_bits(tt_f32_bits(x)) >> 16); }

TT_HD float tt_bf16_to_f32(uint16_t h) { return tt_bits_f32((uint32_t)h << 16); }

/* The fp16 code of x: its rounded value (exactly an fp16 value) re-encoded — the exponent rebiased 127 -> 15 for a
 * normal value, the value in units of 2^-24 for a subnormal, the top mantissa bits for Inf and NaN. */
TT_HD uint16_t tt_f32_to_fp16(float x)
{
    const uint32_t r = tt_round_fp16_bits(tt_f32_bits(x)), a = r & 0x7fffffffu;
    const uint16_t sign = (uint16_t)((r >> 16) & 0x8000u);
    const uint32_t normal = (a - 0x38000000u) >> 13;
    /* a subnormal's units of 2^-24: the rounded value (0 or at least 2^-24: never an FP32 subnormal, so no
     * denormals-are-zero touches it) times 2^24 is an exact small integer */
    const uint32_t sub = a < 0x38800000u ? (uint32_t)(tt_bits_f32(a) * 0x1p24f) : 0u;
    const uint32_t special = 0x7c00u | ((a >> 13) & 0x3ffu);
    return (uint16_t)(sign | (a >= 0x7f800000u ? special : a >= 0x38800000u ? normal : sub));
}

TT_HD float tt_fp16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    /* a subnormal (or zero): m * 2^-24 — exact, and a normal FP32 number (or zero), so flush-to-zero cannot touch it */
    const uint32_t sub = tt_f32_bits((float)m * 0x1p-24f);
    const uint32_t bits = e == 0x1fu ? 0x7f800000u | (m << 13) : e ? ((e + 112u) << 23) | (m << 13) : sub;
    return tt_bits_f32(sign | bits);
}

/* The uint32 counts a narrow16 writes: the two totals, then TT_NARROW_PARTS partial pairs a device sums them from
 * (element i counted in part i % TT_NARROW_PARTS, so the totals never depend on the grid). */
#define TT_NARROW_PARTS 1024
#define TT_NARROW_COUNTS (2 + 2 * TT_NARROW_PARTS)

/* x in format fmt's 16 bits (fmt is BF16 or FP16), and back. */
TT_HD uint16_t tt_to16(float x, int fmt) { return fmt == TT_FMT_FP16 ? tt_f32_to_fp16(x) : tt_f32_to_bf16(x); }
TT_HD float tt_from16(uint16_t h, int fmt) { return fmt == TT_FMT_FP16 ? tt_fp16_to_f32(h) : tt_bf16_to_f32(h); }

/* x rounded to the nearest value of format fmt (FP32: x itself) — what storing it in 16 bits keeps. */
TT_HD float tt_round_fmt(float x, int fmt)
{
    return fmt == TT_FMT_FP32   ? x
           : fmt == TT_FMT_BF16 ? tt_bits_f32(tt_round_bf16_bits(tt_f32_bits(x)))
                                : tt_bits_f32(tt_round_fp16_bits(tt_f32_bits(x)));
}

/* One element of a gradient's push in 16 bits (tt_dev narrow16): its 16 bits, and what the counts add — an element
 * that was not zero in FP32 but is zero in 16 bits (underflow: what loss scaling exists to prevent), and one that is
 * Inf or NaN in 16 bits (overflow: a step the loss scaler skips). */
TT_HD uint32_t tt_narrow_under(float x, uint16_t h)
{
    return (uint32_t)((h & 0x7fffu) == 0) & (uint32_t)((tt_f32_bits(x) << 1) != 0); /* +-0 in 16 bits, not in FP32 */
}

TT_HD uint32_t tt_narrow_bad(uint16_t h, int fmt)
{
    const uint32_t e = fmt == TT_FMT_FP16 ? 0x7c00u : 0x7f80u; /* the exponent field, all ones: Inf or NaN */
    return (uint32_t)((h & e) == e);
}

TT_HD uint16_t tt_narrow_elem(float x, int fmt, uint32_t *under, uint32_t *bad)
{
    const uint16_t h = tt_to16(x, fmt);
    *under += tt_narrow_under(x, h);
    *bad += tt_narrow_bad(h, fmt);
    return h;
}

/* ---- activations ------------------------------------------------------------------------------------------- */

TT_HD float tt_relu(float x) { return x > 0.0f ? x : 0.0f; }

/* dL/dx of y = relu(x), written in terms of the output y (so the forward input need not be kept). */
TT_HD float tt_relu_grad(float dy, float y) { return y > 0.0f ? dy : 0.0f; }

/* Transpose: element i of y (cols, rows) is element tt_transpose_src(i) of x (rows, cols). */
TT_HD size_t tt_transpose_src(size_t i, size_t rows, size_t cols) { return i % rows * cols + i / rows; }

/* ---- batch normalization (Keras BatchNormalization over the last axis: rows r, channels c) ---------------------
 * Training: mean and variance (biased: divided by n, as Keras 3's ops.moments) of every channel over the n rows of
 * the batch — a tower's rows, or with --bn-sync on the global batch's — then y = (x - mean) * (inv * gamma) + beta
 * with inv = 1 / sqrt(var + epsilon). Evaluation: the moving mean and variance in their place. The moving statistics
 * follow mean and var: moving = moving * momentum + stat * (1 - momentum). */

/* One addend of a channel's sum of products of deviations: (x - mean) * w; w is x - mean itself for the variance
 * (tt_bn_sq_dev), dy for the backward's sum of dy * (x - mean). */
TT_HD float tt_bn_dev_prod(float x, float mean, float w) { return (x - mean) * w; }
TT_HD float tt_bn_sq_dev(float x, float mean) { return (x - mean) * (x - mean); }

TT_HD float tt_bn_inv(float var, float epsilon) { return 1.0f / sqrtf(var + epsilon); }

TT_HD float tt_bn_y(float x, float mean, float inv, float gamma, float beta)
{
    return (x - mean) * (inv * gamma) + beta;
}

/* dL/dx given dy, over a batch of n rows (inv_n = 1/n) whose channel sums are sdy = sum dy and sdyx = sum dy * xhat
 * (xhat = (x - mean) * inv): dx = gamma * inv * (dy - sdy/n - xhat * sdyx/n). */
TT_HD float tt_bn_dx(float dy, float x, float mean, float inv, float gamma, float sdy, float sdyx, float inv_n)
{
    const float xhat = (x - mean) * inv;
    return gamma * inv * (dy - sdy * inv_n - xhat * (sdyx * inv_n));
}

/* A tower's share of one step of a moving statistic (its "gradient" in the parameter buffer's non-trainable tail):
 * factor * (stat - moving), factor = (1 - momentum) * the tower's share of the step's rows. The host adds the
 * towers' shares to the moving statistic (tt_tail_elem): moving + (1 - momentum) * (mean of stat - moving). */
TT_HD float tt_bn_moving_step(float stat, float moving, float factor) { return factor * (stat - moving); }

/* Channel c of C: the statistics a pass normalises with, into save = (mean[C], inv[C]) — the batch's from its sums
 * (s1 = sum x, s2 = sum of squared deviations, over 1/inv_n rows) in training, the moving ones (moving = (mean[C],
 * variance[C])) in evaluation (s1 NULL) — and in training (tail not NULL) the tower's step of each moving one. */
TT_HD void tt_bn_stats_channel(float *save, float *tail, const float *s1, const float *s2, const float *moving,
                               size_t C, size_t c, float inv_n, float epsilon, float factor)
{
    const float mean = s1 ? s1[c] * inv_n : moving[c], var = s1 ? s2[c] * inv_n : moving[C + c];
    save[c] = mean;
    save[C + c] = tt_bn_inv(var, epsilon);
    if (tail) {
        tail[c] = tt_bn_moving_step(mean, moving[c], factor);
        tail[C + c] = tt_bn_moving_step(var, moving[C + c], factor);
    }
}

/* ---- convolution and pooling (NHWC, one sample; 1-D layers are H = 1) -------------------------------------------
 * Output position (oh, ow) with kernel offset (kh, kw) reads input (oh*SH + kh - PT, ow*SW + kw - PL): Keras's
 * `same` padding puts PT = floor(total/2) zeros before and the rest after; `valid` has none. */
typedef struct tt_conv_geom {
    size_t H, W, C; /* input */
    size_t KH, KW;  /* kernel or pool window */
    size_t SH, SW;  /* strides */
    size_t PT, PL;  /* zero padding before the first row / column */
    size_t OH, OW;  /* output */
} tt_conv_geom;

/* The input index of output o, kernel offset k (stride s, padding pad, input size n); 0 if it falls in the padding. */
TT_HD int tt_conv_src(size_t o, size_t k, size_t s, size_t pad, size_t n, size_t *i)
{
    size_t p = o * s + k;
    if (p < pad || p - pad >= n) return 0;
    *i = p - pad;
    return 1;
}

/* The inverse: the output o whose kernel offset k reads input i (stride s, padding pad, n_out outputs); 0 if none. */
TT_HD int tt_conv_dst(size_t i, size_t k, size_t s, size_t pad, size_t n_out, size_t *o)
{
    size_t p = i + pad; /* = o * s + k */
    if (p < k || (p - k) % s || (p - k) / s >= n_out) return 0;
    *o = (p - k) / s;
    return 1;
}

/* The kernel offsets k in [*k0, *k1) of output o whose input o*s + k - pad lies inside [0, n) (kernel size K): a
 * window's in-bounds offsets are one run, and so are the inputs they read (consecutive k, consecutive inputs). */
TT_HD void tt_conv_window(size_t o, size_t s, size_t pad, size_t n, size_t K, size_t *k0, size_t *k1)
{
    const size_t p = o * s; /* input index + pad of offset 0 */
    size_t lo = pad > p ? pad - p : 0, hi = n + pad > p ? n + pad - p : 0;
    hi = hi < K ? hi : K;
    *k0 = lo < hi ? lo : hi;
    *k1 = hi;
}

/* im2col, one patch: row (oh, ow) of the (OH*OW, KH*KW*C) column matrix of sample x (H, W, C) — the KH*KW*C inputs
 * under the kernel, zeros in the padding, in (kh, kw, c) order: the order of a Keras kernel (KH, KW, C, F) viewed
 * as (KH*KW*C, F), so y = cols . W. A kernel row's in-bounds pixels are adjacent in x and in the column (channels
 * last): one contiguous copy of (kw1 - kw0)*C floats per kernel row, zeros around it. */
TT_HD void tt_im2col_row(float *col, const float *x, const tt_conv_geom *g, size_t oh, size_t ow)
{
    const size_t C = g->C, KWC = g->KW * C;
    size_t kw0, kw1;
    tt_conv_window(ow, g->SW, g->PL, g->W, g->KW, &kw0, &kw1);
    const size_t a = kw0 * C, b = kw1 * C;
    for (size_t kh = 0; kh < g->KH; kh++) {
        float *dst = col + kh * KWC;
        size_t ih = 0;
        if (!tt_conv_src(oh, kh, g->SH, g->PT, g->H, &ih) || a == b) {
            for (size_t i = 0; i < KWC; i++) dst[i] = 0.0f;
            continue;
        }
        const float *src = x + (ih * g->W + ow * g->SW + kw0 - g->PL) * C - a; /* src[a..b) = the run */
        for (size_t i = 0; i < a; i++) dst[i] = 0.0f;
        for (size_t i = a; i < b; i++) dst[i] = src[i];
        for (size_t i = b; i < KWC; i++) dst[i] = 0.0f;
    }
}

/* im2col, one element: column (kh, kw, c) of patch (oh, ow) — the value tt_im2col_row writes there: the input under
 * that kernel offset, 0 in the padding. One GPU thread per element of the column matrix. */
TT_HD float tt_im2col_elem(const float *x, const tt_conv_geom *g, size_t oh, size_t ow, size_t kh, size_t kw,
                           size_t c)
{
    size_t ih = 0, iw = 0;
    if (!tt_conv_src(oh, kh, g->SH, g->PT, g->H, &ih) || !tt_conv_src(ow, kw, g->SW, g->PL, g->W, &iw)) return 0.0f;
    return x[(ih * g->W + iw) * g->C + c];
}

/* col2im, the scatter form, one patch: adds row (oh, ow) of the column gradient into the KH*KW pixels it was read
 * from (dx of one sample, (H, W, C); padding is skipped). The CPU backend runs it patch after patch in ascending
 * order over a zeroed dx: per kernel row one contiguous add of the in-bounds run, as in tt_im2col_row. */
TT_HD void tt_col2im_patch(float *dx, const float *dcol, const tt_conv_geom *g, size_t oh, size_t ow)
{
    const size_t C = g->C, KWC = g->KW * C;
    size_t kw0, kw1;
    tt_conv_window(ow, g->SW, g->PL, g->W, g->KW, &kw0, &kw1);
    const size_t a = kw0 * C, b = kw1 * C;
    for (size_t kh = 0; kh < g->KH && a < b; kh++) {
        size_t ih = 0;
        if (!tt_conv_src(oh, kh, g->SH, g->PT, g->H, &ih)) continue;
        float *dst = dx + (ih * g->W + ow * g->SW + kw0 - g->PL) * C - a; /* dst[a..b) = the run */
        const float *src = dcol + kh * KWC;
        for (size_t i = a; i < b; i++) dst[i] += src[i];
    }
}

/* col2im, the gather form, one element (input (ih, iw), channel c): acc plus the column gradients of the patches that
 * read it and lie in [q0, q1) (this sample's patch indices, oh * OW + ow), added one by one in ascending patch order
 * — the order in which tt_col2im_patch, patch after patch, adds them into dx — so the two forms give the same bits
 * (tests/test_math.c checks it). dcols holds the rows of patches q0.. of this sample. One GPU thread per element of
 * dx, acc = what dx holds: no atomics. */
TT_HD float tt_col2im_elem(float acc, const float *dcols, const tt_conv_geom *g, size_t ih, size_t iw, size_t c,
                           size_t q0, size_t q1)
{
    const size_t KC = g->KH * g->KW * g->C;
    for (size_t kh = g->KH; kh-- > 0;) { /* oh = (ih + PT - kh) / SH ascends as kh descends */
        size_t oh = 0, ow = 0;
        if (!tt_conv_dst(ih, kh, g->SH, g->PT, g->OH, &oh)) continue;
        for (size_t kw = g->KW; kw-- > 0;) {
            if (!tt_conv_dst(iw, kw, g->SW, g->PL, g->OW, &ow)) continue;
            const size_t q = oh * g->OW + ow;
            if (q < q0 || q >= q1) continue;
            acc = tt_add(acc, dcols[(q - q0) * KC + (kh * g->KW + kw) * g->C + c]);
        }
    }
    return acc;
}

/* Max pooling, one output pixel (oh, ow), every channel: y[c] = the largest input under the window (padding never
 * wins; a NaN wins, so a diverged input stays visible). Channels innermost: contiguous, vectorised on the CPU. */
TT_HD void tt_maxpool_pixel(float *y, const float *x, const tt_conv_geom *g, size_t oh, size_t ow)
{
    for (size_t c = 0; c < g->C; c++) y[c] = -INFINITY;
    for (size_t kh = 0; kh < g->KH; kh++) {
        size_t ih = 0, iw = 0;
        if (!tt_conv_src(oh, kh, g->SH, g->PT, g->H, &ih)) continue;
        for (size_t kw = 0; kw < g->KW; kw++) {
            if (!tt_conv_src(ow, kw, g->SW, g->PL, g->W, &iw)) continue;
            const float *src = x + (ih * g->W + iw) * g->C;
            for (size_t c = 0; c < g->C; c++) y[c] = (src[c] > y[c] || src[c] != src[c]) ? src[c] : y[c];
        }
    }
}

/* Max pooling, one element: channel c of output pixel (oh, ow) — tt_maxpool_pixel's y[c], by the same comparisons in
 * the same (kh, kw) order. One GPU thread per output element. */
TT_HD float tt_maxpool_elem(const float *x, const tt_conv_geom *g, size_t oh, size_t ow, size_t c)
{
    float y = -INFINITY;
    for (size_t kh = 0; kh < g->KH; kh++) {
        size_t ih = 0, iw = 0;
        if (!tt_conv_src(oh, kh, g->SH, g->PT, g->H, &ih)) continue;
        for (size_t kw = 0; kw < g->KW; kw++) {
            if (!tt_conv_src(ow, kw, g->SW, g->PL, g->W, &iw)) continue;
            const float v = x[(ih * g->W + iw) * g->C + c];
            y = (v > y || v != v) ? v : y;
        }
    }
    return y;
}

/* The input (its offset in the sample) that window (oh, ow), channel c routes its gradient to: the window's first
 * input, in (kh, kw) order, equal to the output y — where Keras/TF send a max-pool gradient. */
TT_HD size_t tt_maxpool_argmax(const float *x, float y, const tt_conv_geom *g, size_t oh, size_t ow, size_t c)
{
    for (size_t kh = 0; kh < g->KH; kh++) {
        size_t ih = 0, iw = 0;
        if (!tt_conv_src(oh, kh, g->SH, g->PT, g->H, &ih)) continue;
        for (size_t kw = 0; kw < g->KW; kw++) {
            if (!tt_conv_src(ow, kw, g->SW, g->PL, g->W, &iw)) continue;
            const size_t at = (ih * g->W + iw) * g->C + c;
            if (x[at] == y) return at;
        }
    }
    return (size_t)-1; /* y is NaN (no input equals it): no gradient; the loss is NaN anyway */
}

/* Max pooling's gradient, the scatter form, one window (oh, ow), channels c0..c1-1: adds dy[c] to the window's
 * first input equal to y[c] (tt_maxpool_argmax's choice, found for all these channels in one pass over the window).
 * dx, x are one sample's, dy, y the window's outputs; `routed` is scratch for c1 - c0 flags. The CPU backend runs it
 * window after window, ascending. */
TT_HD void tt_maxpool_scatter(float *dx, const float *dy, const float *x, const float *y, const tt_conv_geom *g,
                              size_t oh, size_t ow, size_t c0, size_t c1, unsigned char *routed)
{
    for (size_t c = c0; c < c1; c++) routed[c - c0] = 0;
    for (size_t kh = 0; kh < g->KH; kh++) {
        size_t ih = 0, iw = 0;
        if (!tt_conv_src(oh, kh, g->SH, g->PT, g->H, &ih)) continue;
        for (size_t kw = 0; kw < g->KW; kw++) {
            if (!tt_conv_src(ow, kw, g->SW, g->PL, g->W, &iw)) continue;
            const size_t at = (ih * g->W + iw) * g->C;
            for (size_t c = c0; c < c1; c++) {
                const int take = !routed[c - c0] && x[at + c] == y[c];
                dx[at + c] += take ? dy[c] : 0.0f;
                routed[c - c0] |= (unsigned char)take;
            }
        }
    }
}

/* Max pooling's gradient, the gather form, one input (ih, iw, c): the sum of dy over the windows (ascending) that
 * route to it — the order in which the CPU backend's scatter (window after window over a zeroed dx) adds them. */
TT_HD float tt_maxpool_grad(const float *dy, const float *x, const float *y, const tt_conv_geom *g, size_t ih,
                            size_t iw, size_t c)
{
    float acc = 0.0f;
    const size_t self = (ih * g->W + iw) * g->C + c;
    for (size_t kh = g->KH; kh-- > 0;) { /* windows in ascending order, as in tt_col2im_elem */
        size_t oh = 0, ow = 0;
        if (!tt_conv_dst(ih, kh, g->SH, g->PT, g->OH, &oh)) continue;
        for (size_t kw = g->KW; kw-- > 0;) {
            if (!tt_conv_dst(iw, kw, g->SW, g->PL, g->OW, &ow)) continue;
            const size_t o = (oh * g->OW + ow) * g->C + c;
            if (tt_maxpool_argmax(x, y[o], g, oh, ow, c) == self) acc += dy[o];
        }
    }
    return acc;
}

/* ---- dropout ------------------------------------------------------------------------------------------------
 * Inverted dropout, as Keras: a kept element is scaled by 1/(1 - rate), a dropped one is 0. The mask is a hash of
 * (seed, epoch, layer, the sample's index in the data set, the element) — counter-based, no state — so it does not
 * depend on which tower computes the sample or on how the batch is split: N towers drop exactly what 1 tower drops,
 * and the backward pass recomputes the forward's mask instead of storing it. */
TT_HD uint64_t tt_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull; /* splitmix64's finaliser (Steele, Lea, Flood 2014) */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The key of a layer in an epoch: = tt_mix64(seed ^ tt_mix64(epoch ^ tt_mix64(layer))). */
TT_HD uint64_t tt_dropout_key(uint64_t seed, uint64_t epoch, uint64_t layer)
{
    return tt_mix64(seed ^ tt_mix64(epoch ^ tt_mix64(layer)));
}

/* x times the mask of element j of data-set sample `sample`: kept iff a uniform u in [0,1) (24 bits) >= rate. */
TT_HD float tt_dropout(float x, uint64_t key, uint64_t sample, uint64_t j, float rate, float keep_scale)
{
    uint64_t h = tt_mix64(key ^ tt_mix64(sample * 0x100000001b3ull + j));
    float u = (float)(h >> 40) * (1.0f / 16777216.0f);
    return u >= rate ? x * keep_scale : 0.0f;
}

/* ---- embedding ------------------------------------------------------------------------------------------------
 * A token id travels as a float (exact below 2^24); ids outside [0, V) give a zero vector, as Keras's GPU kernel
 * does (the run checks the data's ids against the vocabulary before training, so none reach here). */
TT_HD int tt_token_id(float t, size_t V, size_t *id)
{
    if (!(t >= 0.0f) || t >= (float)V) return 0;
    *id = (size_t)t;
    return 1;
}

TT_HD void tt_embed_row(float *y, const float *w, float t, size_t V, size_t E)
{
    size_t id;
    if (tt_token_id(t, V, &id))
        for (size_t e = 0; e < E; e++) y[e] = w[id * E + e];
    else
        for (size_t e = 0; e < E; e++) y[e] = 0.0f;
}

/* One element of tt_embed_row's y: column e of token t's row (0 for an id outside [0, V)). One GPU thread each. */
TT_HD float tt_embed_elem(const float *w, float t, size_t V, size_t E, size_t e)
{
    size_t id;
    return tt_token_id(t, V, &id) ? w[id * E + e] : 0.0f;
}

/* The sort key of token position i (< 2^32) for the embedding's gradient on a GPU: id << 32 | i, with id = V for an
 * id outside [0, V) (V < 2^32), so that such tokens sort after every valid one. Keys are distinct: sorted, they list
 * each id's positions in ascending token order — the order in which the CPU adds its rows. */
TT_HD uint64_t tt_embed_key(float t, size_t V, uint32_t i)
{
    size_t id;
    if (!tt_token_id(t, V, &id)) id = V;
    return (uint64_t)id << 32 | i;
}

/* ---- softmax cross-entropy from logits, one row ------------------------------------------------------------ */

/* Probabilities p[0..C) of one row of logits: exp(z_i - m) / sum_j exp(z_j - m), m = max z (as below). */
TT_HD void tt_softmax_row(const float *z, int C, float *p)
{
    float m = z[0];
    for (int i = 1; i < C; i++) m = z[i] > m ? z[i] : m;
    float s = 0.0f;
    for (int i = 0; i < C; i++) s += expf(z[i] - m);
    const float inv = 1.0f / s;
    for (int i = 0; i < C; i++) p[i] = expf(z[i] - m) * inv;
}

/* For one sample with logits z[0..C) and integer label:
 *   p_i    = exp(z_i - m) / s,  m = max_j z_j,  s = sum_j exp(z_j - m)        (max-shift avoids overflow)
 *   loss   = -log p_label = log(s) - (z_label - m)
 *   dz_i   = scale * (p_i - [i == label])                                     (d loss / d z, times scale)
 *   rank   = number of classes whose logit is strictly greater than z_label   (top-k correct iff rank < k)
 *            or TT_RANK_NONFINITE when any logit is NaN or Inf: every comparison with a NaN is false, so a NaN row
 *            would otherwise have rank 0 and count as correct (a diverged run reporting accuracy 1.0)
 * scale is 1/B_global, so that summing every tower's gradient gives the gradient of the mean loss over the
 * global batch. dz may be NULL (evaluation). Returns the loss (NaN or Inf for such a row); writes *rank. */
#define TT_RANK_NONFINITE (1 << 24) /* wrong for every top-k; exact as the float the stats buffer holds */
TT_HD float tt_softmax_xent_row(const float *z, int C, int label, float scale, float *dz, int *rank)
{
    float m = z[0];
    for (int i = 1; i < C; i++) m = z[i] > m ? z[i] : m;
    float s = 0.0f;
    for (int i = 0; i < C; i++) s += expf(z[i] - m);
    float zl = z[label];
    int r = 0, finite = 1;
    for (int i = 0; i < C; i++) {
        r += z[i] > zl;
        finite &= isfinite(z[i]) ? 1 : 0;
    }
    *rank = finite ? r : TT_RANK_NONFINITE;
    if (dz) {
        float inv = 1.0f / s;
        for (int i = 0; i < C; i++) {
            float p = expf(z[i] - m) * inv;
            dz[i] = scale * (p - (i == label ? 1.0f : 0.0f));
        }
    }
    return logf(s) - (zl - m);
}

/* ---- optimizers, one parameter ------------------------------------------------------------------------------
 * Keras semantics (keras.optimizers.SGD / Adam / Nadam / RMSprop, Keras 3 source); the per-step scalars (bias
 * corrections, momentum schedule) are computed once per step on the host by optim.c and passed in.
 * References: https://keras.io/api/optimizers/sgd/ , /adam/ , /Nadam/ , /rmsprop/ ; Kingma & Ba 2015; Dozat 2016;
 * Hinton, Neural Networks for Machine Learning, lecture 6e (2012). */

/* SGD with momentum mu (mu = 0: plain SGD):  v <- mu*v - lr*g;  w <- w + v   (nesterov: w <- w + mu*v - lr*g) */
TT_HD void tt_sgd_elem(float *w, float *v, float g, float lr, float mu, int nesterov)
{
    float vn = mu * *v - lr * g;
    *v = vn;
    *w += nesterov ? mu * vn - lr * g : vn;
}

/* Adam: m <- m + (g-m)(1-b1);  v <- v + (g^2-v)(1-b2);  w <- w - alpha * m / (sqrt(v) + eps)
 * with alpha = lr * sqrt(1-b2^t) / (1-b1^t) computed by the caller. */
TT_HD void tt_adam_elem(float *w, float *m, float *v, float g, float alpha, float b1, float b2, float eps)
{
    float mn = *m + (g - *m) * (1.0f - b1);
    float vn = *v + (g * g - *v) * (1.0f - b2);
    *m = mn;
    *v = vn;
    *w -= alpha * mn / (sqrtf(vn) + eps);
}

/* Nadam (Keras): with the caller's per-step scalars
 *   cm = u_{t+1} / (1 - prod_{i<=t+1} u_i),  cg = (1 - u_t) / (1 - prod_{i<=t} u_i),  cv = 1 / (1 - b2^t)
 *   m <- m + (g-m)(1-b1);  v <- v + (g^2-v)(1-b2)
 *   w <- w - lr * (cm*m + cg*g) / (sqrt(cv*v) + eps) */
TT_HD void tt_nadam_elem(float *w, float *m, float *v, float g, float lr, float b1, float b2, float eps,
                         float cm, float cg, float cv)
{
    float mn = *m + (g - *m) * (1.0f - b1);
    float vn = *v + (g * g - *v) * (1.0f - b2);
    *m = mn;
    *v = vn;
    *w -= lr * (cm * mn + cg * g) / (sqrtf(cv * vn) + eps);
}

/* RMSprop (Keras 3, keras/src/optimizers/rmsprop.py), in Keras's order of operations:
 *   v <- rho*v + (1-rho) g^2
 *   centered:  a <- rho*a + (1-rho) g;  var = v - a^2              otherwise:  var = v
 *   inc = lr*g / sqrt(var + eps)
 *   momentum:  s <- mu*s + inc;  w <- w - s                      otherwise:  w <- w - inc
 * epsilon is INSIDE the square root here (unlike Adam's sqrt(v) + eps): with |g| near 1e-7 it sets the step.
 * s (momentum, NULL when mu = 0) and a (average gradient, NULL when not centered) are optional state; Keras keeps
 * them only in those configurations, and tt_optim_state_floats counts them the same way. */
TT_HD void tt_rmsprop_elem(float *w, float *v, float *s, float *a, float g, float lr, float rho, float mu, float eps)
{
    float vn = rho * *v + (1.0f - rho) * (g * g);
    *v = vn;
    float var = vn; /* the mean square, or (centered) the variance estimate */
    if (a) {
        float an = rho * *a + (1.0f - rho) * g;
        *a = an;
        var = vn - an * an;
    }
    float inc = lr * g / sqrtf(var + eps);
    if (s) {
        float sn = mu * *s + inc;
        *s = sn;
        *w -= sn;
    } else {
        *w -= inc;
    }
}

/* 1 if x is neither NaN nor Inf: its exponent field is not all ones (integer work, which -ffinite-math-only cannot
 * fold away). */
TT_HD int tt_finite(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return (b & 0x7f800000u) != 0x7f800000u;
}

/* One optimizer step of one element, whichever the optimizer — the four functions above with the arguments the
 * host's tt_optim_apply passes them, so a device's update (--update device, replicated) writes the host's bits.
 * kind: tt_optim_kind's value (0 sgd, 1 adam, 2 nadam, 3 rmsprop); m, v, a: the optimizer's state at this element
 * (NULL where it keeps none: RMSprop's momentum and average gradient). */
typedef struct tt_update_args {
    int kind, nesterov;
    float lr, momentum, beta1, beta2, epsilon, rho; /* lr: this step's rate (the schedule's, tt_optim_begin_step) */
    float alpha, cm, cg, cv; /* the step's scalars (tt_optim_begin_step: Adam's alpha, Nadam's cm, cg, cv) */
    size_t n_train; /* elements at this index and beyond are the non-trainable tail: tt_tail_elem, no optimizer */
    float weight_decay, clipvalue; /* 0: none (tt_decay_clip_elem) */
} tt_update_args;

/* Keras 3's optimizers before the update (BaseOptimizer.apply): the gradient clipped to [-clipvalue, clipvalue]
 * (clipvalue > 0), then the variable decayed, w <- w - w * weight_decay * lr, with this step's rate (decoupled weight
 * decay: AdamW is Adam with it). Returns the gradient the update takes. A NaN gradient stays NaN (its block is not
 * applied). */
TT_HD float tt_decay_clip_elem(const tt_update_args *u, float *w, float g)
{
    if (u->clipvalue > 0.0f) g = g < -u->clipvalue ? -u->clipvalue : g > u->clipvalue ? u->clipvalue : g;
    if (u->weight_decay > 0.0f) *w = *w - *w * u->weight_decay * u->lr;
    return g;
}

/* The non-trainable tail of the parameter buffer (BatchNorm's moving statistics): no optimizer; its "gradient" is
 * the towers' summed step of the statistic (tt_bn_moving_step), added. */
TT_HD void tt_tail_elem(float *w, float g) { *w += g; }

/* The blocks a device's update checks for NaN and Inf: a block that holds one is not applied. */
#define TT_UPDATE_BLOCK 2048

/* How a device cuts its reductions, and so how many kernels an op launches (the CUDA backend's launchers and the
 * cost model's launch counter, src/step/launches.c, read these): a column sum (col_sum, drelu_bgrad) in chunks of
 * TT_COL_CHUNK rows, a second pass adding the chunks' sums where there is more than one; the embedding gradient's
 * sort in runs of TT_SORT_RUN keys (one launch), merged pairwise (one launch per doubling), then summed (one). */
#define TT_COL_CHUNK 256
#define TT_SORT_RUN 32

TT_HD size_t tt_col_sum_launches(size_t rows) { return rows > TT_COL_CHUNK ? 2 : 1; }

TT_HD size_t tt_embed_bwd_launches(size_t n)
{
    size_t k = n ? 2 : 1;
    for (size_t w = TT_SORT_RUN; w < n; w *= 2) k++;
    return k;
}

TT_HD void tt_update_elem(const tt_update_args *u, float *w, float *m, float *v, float *a, float g)
{
    g = tt_decay_clip_elem(u, w, g);
    switch (u->kind) {
    case 0: tt_sgd_elem(w, m, g, u->lr, u->momentum, u->nesterov); break;
    case 1: tt_adam_elem(w, m, v, g, u->alpha, u->beta1, u->beta2, u->epsilon); break;
    case 2: tt_nadam_elem(w, m, v, g, u->lr, u->beta1, u->beta2, u->epsilon, u->cm, u->cg, u->cv); break;
    default: tt_rmsprop_elem(w, v, m, a, g, u->lr, u->rho, u->momentum, u->epsilon); break;
    }
}

#ifndef __cplusplus
/* tt_update_elem over n elements, one loop per optimizer (its switch out of the loop, and RMSprop's optional state
 * too, so each loop vectorises): the same bits, several times faster than a switch per element. w, g, m, v, a point
 * at the span (m, v, a NULL where the optimizer keeps none). */
static inline void tt_update_trainable(const tt_update_args *u, float *restrict w, const float *restrict g,
                                       float *restrict m, float *restrict v, float *restrict a, size_t n)
{
    switch (u->kind) {
    case 0: /* sgd */
        if (u->nesterov)
            for (size_t i = 0; i < n; i++) tt_sgd_elem(&w[i], &m[i], g[i], u->lr, u->momentum, 1);
        else
            for (size_t i = 0; i < n; i++) tt_sgd_elem(&w[i], &m[i], g[i], u->lr, u->momentum, 0);
        break;
    case 1: /* adam */
        for (size_t i = 0; i < n; i++)
            tt_adam_elem(&w[i], &m[i], &v[i], g[i], u->alpha, u->beta1, u->beta2, u->epsilon);
        break;
    case 2: /* nadam */
        for (size_t i = 0; i < n; i++)
            tt_nadam_elem(&w[i], &m[i], &v[i], g[i], u->lr, u->beta1, u->beta2, u->epsilon, u->cm, u->cg, u->cv);
        break;
    default: /* rmsprop: one loop per buffer combination, so each inlined tt_rmsprop_elem has no branches left */
        if (m && a)
            for (size_t i = 0; i < n; i++)
                tt_rmsprop_elem(&w[i], &v[i], &m[i], &a[i], g[i], u->lr, u->rho, u->momentum, u->epsilon);
        else if (m)
            for (size_t i = 0; i < n; i++)
                tt_rmsprop_elem(&w[i], &v[i], &m[i], NULL, g[i], u->lr, u->rho, u->momentum, u->epsilon);
        else if (a)
            for (size_t i = 0; i < n; i++)
                tt_rmsprop_elem(&w[i], &v[i], NULL, &a[i], g[i], u->lr, u->rho, u->momentum, u->epsilon);
        else
            for (size_t i = 0; i < n; i++)
                tt_rmsprop_elem(&w[i], &v[i], NULL, NULL, g[i], u->lr, u->rho, u->momentum, u->epsilon);
        break;
    }
}

/* One optimizer step of parameters lo..hi-1 of the buffer: w[k] and g[k] (k = 0..hi-lo-1) are parameter lo+k and its
 * gradient; m, v, a are the optimizer's state from the buffer's start (indexed by the absolute position; NULL where
 * it keeps none). Parameters from u->n_train on are the non-trainable tail: tt_tail_elem, no optimizer. The one loop
 * of the host's optimizer (tt_optim_apply) and of the CPU backend's update (--update device, replicated), so both
 * write the same bits; a GPU runs tt_update_elem per thread instead. C only (restrict). */
static inline void tt_update_span(const tt_update_args *u, float *restrict w, const float *restrict g, float *m,
                                  float *v, float *a, size_t lo, size_t hi)
{
    const size_t split = hi < u->n_train ? hi : lo > u->n_train ? lo : u->n_train;
    if (split > lo && (u->weight_decay > 0.0f || u->clipvalue > 0.0f)) {
        /* tt_update_elem's order in chunks: clip into a copy, decay, then the kind's loop (the same bits) */
        enum { CHUNK = 256 };
        float gc[CHUNK];
        for (size_t c = lo; c < split; c += CHUNK) {
            const size_t len = split - c < CHUNK ? split - c : CHUNK;
            for (size_t k = 0; k < len; k++) gc[k] = tt_decay_clip_elem(u, &w[c - lo + k], g[c - lo + k]);
            tt_update_trainable(u, w + (c - lo), gc, m ? m + c : NULL, v ? v + c : NULL, a ? a + c : NULL, len);
        }
    } else if (split > lo) {
        tt_update_trainable(u, w, g, m ? m + lo : NULL, v ? v + lo : NULL, a ? a + lo : NULL, split - lo);
    }
    for (size_t k = split; k < hi; k++) tt_tail_elem(&w[k - lo], g[k - lo]);
}
#endif

#endif
