/* tt_math.h — every per-element and per-row formula of towertrain, written once.
 *
 * The CPU backend and the host optimizer call these in loops; the CUDA backend (cuda/dev_cuda.cu) calls the same
 * functions from its kernels, one thread per element or per row. The header is compiled by both gcc (C11) and
 * nvcc (C++17): TT_HD expands to `__host__ __device__` under nvcc and to `static inline` under the C compiler,
 * so what the CPU tests check is literally the code a GPU would run (no Darknet-style formula drift).
 * Not for: loops, memory management or anything that needs the C library beyond <math.h>. */
#ifndef TT_MATH_H
#define TT_MATH_H

#include <math.h>
#include <stdint.h>

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

/* ---- activations ------------------------------------------------------------------------------------------- */

TT_HD float tt_relu(float x) { return x > 0.0f ? x : 0.0f; }

/* dL/dx of y = relu(x), written in terms of the output y (so the forward input need not be kept). */
TT_HD float tt_relu_grad(float dy, float y) { return y > 0.0f ? dy : 0.0f; }

/* ---- softmax cross-entropy from logits, one row ------------------------------------------------------------ */

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
 * Keras semantics (keras.optimizers.SGD / Adam / Nadam, Keras 3 source); the per-step scalars (bias
 * corrections, momentum schedule) are computed once per step on the host by optim.c and passed in.
 * References: https://keras.io/api/optimizers/sgd/ , /adam/ , /Nadam/ ; Kingma & Ba 2015; Dozat 2016. */

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

#endif
