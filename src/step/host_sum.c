/* host_sum.c — where the host sums: the towers' gradient slots added in tower order, block by block, each block
 * checked for NaN/Inf and handed straight to the optimizer while it is in L1 (the fused pass), split across the
 * crew in whole blocks. Every mode that sums on the host (bsp, --overlap on's buckets, the node sum) uses it. */

#include "step.h"

static int sum_mixed(tt_trainer *tr, float *restrict out, size_t b, size_t len);

/* The single-node step's fused pass: the whole buffer, summed (cpu) or read from the pushed sum, and updated. */
host_pass fused_pass(const tt_trainer *tr)
{
    host_pass p = {0, tr->model->n_params, tr->place->info.host_sum, NULL, tr->h_grad, 1, 0};
    return p;
}

/* Slice i of T of a host pass, block by block. The fused pass (cpu placement, one rank): sum the towers' slots in
 * tower order into a block buffer on this thread's stack, then apply the optimizer to the block — the summed
 * gradient never exists as a whole buffer, so it costs no memory traffic. Other placements: the towers already
 * pushed the sum into h_grad. K ranks: a node-sum pass (into h_grad), then after the combine an update pass.
 * A fixed order makes the result independent of which tower finished first and of T.
 * Every block of the summed gradient is checked for NaN/Inf on its way to the optimizer — by the sum itself, or
 * by a read that brings the block into L1 for the optimizer — so the check costs no pass over memory. A block that
 * is not finite is not applied (the master weights stay finite) and the step halts the run; so is every block when
 * the loss was not finite (barrier A saw it). t_sum and t_update (may be NULL) get this thread's seconds of each. */
/* Blocks [lo, hi) of a host pass (lo a multiple of TT_REDUCE_BLOCK, or p->lo): *t_sum and *t_update get its seconds
 * of each. */
void host_blocks(tt_trainer *tr, const host_pass *p, size_t lo, size_t hi, double *t_sum, double *t_update)
{
    const size_t N = tr->cfg.n_towers;
    _Alignas(64) float block[TT_REDUCE_BLOCK];
    double t_reduce = 0, t_upd = 0, t = tt_now();
    for (size_t b = lo; b < hi; b += TT_REDUCE_BLOCK) {
        size_t e = b + TT_REDUCE_BLOCK < hi ? b + TT_REDUCE_BLOCK : hi, len = e - b;
        const float *grad = p->sum ? tr->h_slots[0] + b : p->grad + (b - p->lo); /* one tower: its slot is the sum */
        int finite = 1;
        if (p->sum && tr->h_params16) { /* --precision bf16, fp16: 16-bit pushes, a loss scale */
            if (tr->skip_step) continue; /* the gradient overflowed in 16 bits: nothing to sum, nothing applied */
            float *out = p->sum_out ? p->sum_out + b : block;
            finite = sum_mixed(tr, out, b, len);
            grad = out;
        } else if (p->sum && N > 1) {
            float *out = p->sum_out ? p->sum_out + b : block;
            finite = tt_sum_slots(out, tr->h_slots, N, b, len);
            grad = out;
        } else if (p->update) {
            finite = tt_all_finite(grad, len);
        }
        double t1 = tt_now();
        if (p->update && tr->clip && finite) { /* --clipnorm, --global-clipnorm: the factors are this step's */
            clip_block(tr, grad, block, b, len);
            grad = block;
            finite = tt_all_finite(block, len); /* a factor from a norm that is not finite (another block's) is NaN */
        }
        if (p->update) {
            if (!finite) atomic_store_explicit(&tr->grad_nonfinite, 1, memory_order_relaxed);
            else if (!tr->loss_nonfinite) {
                tt_optim_apply(&tr->opt, tr->h_params + b, grad, b - p->state_lo, e - p->state_lo);
                const size_t T = tr->model->n_trainable;
                if (tr->h_params16 && b < T) host_narrow_params(tr, b, e < T ? e : T); /* while in L1 */
            }
        }
        double t2 = tt_now();
        t_reduce += t1 - t;
        t_upd += t2 - t1;
        t = t2;
    }
    if (!p->sum) { /* the check of a pushed sum is part of the update's read */
        t_upd += t_reduce;
        t_reduce = 0;
    }
    *t_sum = t_reduce;
    *t_update = t_upd;
}

/* 16-bit slot s of len elements from format fmt, added into out in place (first: out = the slot). One loop per
 * format, so each inlines its conversion. */
static void add_slot16(float *restrict out, const uint16_t *restrict s, size_t len, int fmt, int first)
{
    if (fmt == TT_FMT_BF16) {
        if (first) for (size_t k = 0; k < len; k++) out[k] = tt_bf16_to_f32(s[k]);
        else for (size_t k = 0; k < len; k++) out[k] = tt_add(out[k], tt_bf16_to_f32(s[k]));
    } else {
        if (first) for (size_t k = 0; k < len; k++) out[k] = tt_fp16_to_f32(s[k]);
        else for (size_t k = 0; k < len; k++) out[k] = tt_add(out[k], tt_fp16_to_f32(s[k]));
    }
}

/* --precision bf16, fp16: block [b, b + len) of the summed gradient into out — its trainable part widened from the
 * towers' 16-bit slots (their FP32 slots with --push-precision fp32) and added in tower order, then divided by the
 * loss scale (times 1/scale: exact for a power of two); the non-trainable tail from the FP32 slots, unscaled (no
 * loss reaches it). Returns 1 if every element is finite. */
static int sum_mixed(tt_trainer *tr, float *restrict out, size_t b, size_t len)
{
    const size_t N = tr->cfg.n_towers, T = tr->model->n_trainable;
    const size_t n16 = b >= T ? 0 : b + len <= T ? len : T - b;
    if (n16 && tr->towers[0].h_push16)
        for (size_t t = 0; t < N; t++) add_slot16(out, tr->towers[t].h_push16 + b, n16, tr->cfg.precision, t == 0);
    else if (n16)
        tt_sum_slots(out, tr->h_slots, N, b, n16);
    if (n16 < len) tt_sum_slots(out + n16, tr->h_slots, N, b + n16, len - n16);
    if (tr->scaler.scale != 1.0) {
        const float inv = (float)(1.0 / tr->scaler.scale);
        for (size_t k = 0; k < n16; k++) out[k] *= inv;
    }
    return tt_all_finite(out, len);
}

void host_narrow_params(tt_trainer *tr, size_t lo, size_t hi)
{
    const float *w = tr->h_params;
    uint16_t *h = tr->h_params16;
    uint32_t bad = 0;
    if (tr->cfg.precision == TT_FMT_BF16) { /* FP32's exponents, but from 3.3961e38 up it rounds to Inf */
        for (size_t k = lo; k < hi; k++) h[k] = tt_f32_to_bf16(w[k]);
        for (size_t k = lo; k < hi; k++) bad += tt_narrow_bad(h[k], TT_FMT_BF16);
    } else {
        for (size_t k = lo; k < hi; k++) h[k] = tt_f32_to_fp16(w[k]);
        for (size_t k = lo; k < hi; k++) bad += tt_narrow_bad(h[k], TT_FMT_FP16);
    }
    if (bad) atomic_store_explicit(&tr->w16_range, 1, memory_order_relaxed);
}

/* Slice i of T of the range [from, to) in whole blocks of TT_REDUCE_BLOCK floats: [*lo, *hi). A block's NaN/Inf
 * check covers the same floats as a device's update (--update device, replicated), so a halted step applies the same
 * finite blocks wherever the optimizer runs. */
void block_slice(size_t from, size_t to, int i, int T, size_t *lo, size_t *hi)
{
    size_t chunk = (to - from + (size_t)T - 1) / (size_t)T;
    chunk = (chunk + TT_REDUCE_BLOCK - 1) / TT_REDUCE_BLOCK * TT_REDUCE_BLOCK;
    *lo = from + (size_t)i * chunk;
    *hi = *lo + chunk;
    if (*lo > to) *lo = to;
    if (*hi > to) *hi = to;
}

void host_slice(tt_trainer *tr, const host_pass *p, int i, int T, double *t_sum, double *t_update)
{
    size_t lo, hi;
    block_slice(p->lo, p->hi, i, T, &lo, &hi);
    double t_reduce, t_upd, t_begin = tt_now();
    host_blocks(tr, p, lo, hi, &t_reduce, &t_upd);
    if (t_sum) *t_sum = t_reduce;
    if (t_update) *t_update = t_upd;
    if (i == 0) { /* thread 0's slice stands for the host in the trace: the reduction, then the update */
        if (p->sum) {
            tr->t_reduce0 = t_begin;
            tr->t_reduce1 = t_begin + t_reduce;
        }
        if (p->update) {
            tr->t_update0 = p->sum ? tr->t_reduce1 : t_begin;
            tr->t_update1 = tr->t_update0 + t_upd;
        }
    }
}
/* The exponent field of x: all ones exactly for Inf and NaN. Integer work, so the loops below vectorise and no
 * float comparison is needed that -ffinite-math-only could fold away. */
static inline uint32_t exponent_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b & 0x7f800000u;
}

int tt_all_finite(const float *x, size_t n)
{
    uint32_t emax = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t e = exponent_bits(x[k]);
        emax = e > emax ? e : emax;
    }
    return emax != 0x7f800000u;
}

int tt_sum_slots(float *restrict out, float *const *slots, size_t n_slots, size_t offset, size_t len)
{
    const float *restrict s0 = slots[0] + offset;
    if (n_slots == 1) {
        for (size_t k = 0; k < len; k++) out[k] = s0[k];
        return tt_all_finite(out, len);
    }
    /* the last addition also checks the sum: a NaN or Inf in any slot reaches it (or the sum overflowed) */
    uint32_t emax = 0;
    const float *restrict s1 = slots[1] + offset;
    if (n_slots == 2) {
        for (size_t k = 0; k < len; k++) {
            out[k] = tt_add(s0[k], s1[k]);
            uint32_t e = exponent_bits(out[k]);
            emax = e > emax ? e : emax;
        }
        return emax != 0x7f800000u;
    }
    for (size_t k = 0; k < len; k++) out[k] = tt_add(s0[k], s1[k]);
    for (size_t w = 2; w + 1 < n_slots; w++) {
        const float *restrict sw = slots[w] + offset;
        for (size_t k = 0; k < len; k++) out[k] = tt_add(out[k], sw[k]);
    }
    const float *restrict sl = slots[n_slots - 1] + offset;
    for (size_t k = 0; k < len; k++) {
        out[k] = tt_add(out[k], sl[k]);
        uint32_t e = exponent_bits(out[k]);
        emax = e > emax ? e : emax;
    }
    return emax != 0x7f800000u;
}
