/* cost_profiles.c — the figures `probe --assume` starts from: the machines' profiles (their sources in
 * docs/whatif.md), the keys a spec may set with their plausible ranges, the spec's parsing, and a measured profile
 * (a `probe --json` file) read into figures — cost_model.c's head comment says what a measured profile gives.
 * Not for: the formulas (cost_model.c). */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tt_cost_model.h"
#include "tt_profile.h"

/* Figures per profile; docs/whatif.md has every source and derating. The 16-bit peaks are NVIDIA's dense tensor-core
 * figures (the data sheets print twice them, "with sparsity"): H100 PCIe 756, H100 SXM and H200 989 (the H200's as
 * the H100 SXM's: the same GH100 die and clocks), A100 312 TFLOP/s, for BF16 and FP16 alike. Latencies (the _us keys), gemm_eff and the
 * host barrier are assumptions, the same on every profile but the measured one. */
/* h200-measured: a small kernel between GEMMs on the H200 — the bias-ReLU epilogue after a cublasSgemm at 256 rows
 * cost 5.2, 4.6 and 7.3 us more than the GEMM alone (docs/cuda.md): the median. */
#define H200_LAUNCH_US 5.2
static const tt_assume PROFILES[] = {
    {.name = "h100-pcie", /* H100 PCIe 80GB, PCIe Gen5 x16, no NVLink bridge */
     .h2d_gbs = 48, .d2h_gbs = 48, .peer_gbs = 48, .nccl_busbw_gbs = 28, .nccl_us = 40, .hbm_gbs = 1800,
     .fp32_tflops = 51, .bf16_tflops = 756, .fp16_tflops = 756, .gemm_eff = 0.3,
     .launch_us = 5, .graph_node_us = 2, .copy_us = 8, .host_gbs = 230,
     .barrier_us = 5},
    {.name = "a100-pcie", /* A100 PCIe 80GB, PCIe Gen4 x16, no NVLink bridge */
     .h2d_gbs = 24, .d2h_gbs = 24, .peer_gbs = 24, .nccl_busbw_gbs = 24, .nccl_us = 40, .hbm_gbs = 1740,
     .fp32_tflops = 19.5, .bf16_tflops = 312, .fp16_tflops = 312, .gemm_eff = 0.3,
     .launch_us = 5, .graph_node_us = 2, .copy_us = 8, .host_gbs = 230,
     .barrier_us = 5},
    {.name = "h100-sxm", /* H100 SXM5 80GB (HGX/DGX H100): NVLink 4 through NVSwitch, PCIe Gen5 x16 to the host */
     .h2d_gbs = 48, .d2h_gbs = 48, .peer_gbs = 380, .nccl_busbw_gbs = 370, .nccl_us = 10, .hbm_gbs = 3015,
     .fp32_tflops = 67, .bf16_tflops = 989, .fp16_tflops = 989, .gemm_eff = 0.3,
     .launch_us = 5, .graph_node_us = 2, .copy_us = 8, .host_gbs = 230,
     .barrier_us = 5},
    /* The H200 (PCIe, in a VM, 16-core Xeon host) measured on 2026-11-27: docs/cuda.md, "What has run where", and
     * docs/whatif.md, "The profiles and their sources", for each figure. Measured there: the links (probe), the
     * step's GEMMs together (probe: 0.101 ms), three GEMM shapes alone and the bias-ReLU kernel between GEMMs
     * (cuda.md's cuBLASLt table: launch_us), a graph's saving per launch (1.6 us), and the mlp's step split (the
     * host's update and barrier, and the compute phase's other kernels, derived from it). Not measured: the FP32
     * peak (NVIDIA's public H200 SXM figure), HBM (the datasheet's, derated as the others), NCCL and copy_us (the
     * other profiles' assumptions). */
    {.name = "h200-measured",
     .h2d_gbs = 34.2, .d2h_gbs = 34.4, .peer_gbs = 51.3, .nccl_busbw_gbs = 28, .nccl_us = 40, .hbm_gbs = 4320,
     .fp32_tflops = 67, .bf16_tflops = 989, .fp16_tflops = 989, .launch_us = H200_LAUNCH_US,
     .graph_node_us = H200_LAUNCH_US - 1.6, .copy_us = 8,
     /* the mlp's step (1 tower, batch 256, Adam): wait 0.018 ms is one barrier; update 0.060 ms is Adam's 28 bytes
      * a parameter over host memory, and one barrier */
     .barrier_us = 18, .host_gbs = 28.0 * 269322 / (60e-6 - 18e-6) / 1e9,
     /* the step's 8 GEMMs at 256 rows, 310.1 MFLOP, took 0.101 ms back to back: 8 launches and their bodies */
     .gemm_eff = 256.0 * 1211392 / (67e12 * (101e-6 - 8 * H200_LAUNCH_US * 1e-6)),
     /* cublasSgemm alone, 500 calls back to back: the mlp's forward GEMMs at 256 rows (13.7, 18.1, 11.7 us) */
     .n_gemms = 3,
     .gemms = {{0, 0, 256, 256, 784, (13.7 - H200_LAUNCH_US) * 1e-6},
               {0, 0, 256, 256, 256, (18.1 - H200_LAUNCH_US) * 1e-6},
               {0, 0, 256, 10, 256, (11.7 - H200_LAUNCH_US) * 1e-6}},
     /* the mlp's compute phase (0.207 ms) less its GEMMs (0.101): its 7 other kernels, less their launches */
     .other_params = 269322, .other_rows = 256, .other_count = 7,
     .other_body_s = (207e-6 - 101e-6) - 7 * H200_LAUNCH_US * 1e-6},
};
#define N_PROFILES (sizeof PROFILES / sizeof PROFILES[0])

/* The keys, each with a plausible range (a figure outside it is a typo, and would print numbers hundreds of
 * digits long): rates in [min, max]; a latency (may_be_zero) in [0, max]; gemm_eff in (0, 1]. */
typedef struct assume_key {
    const char *name;
    size_t offset;
    int may_be_zero;
    double max;
    double min; /* rates: the smallest plausible value */
} assume_key;

static const assume_key KEYS[] = {
    {"h2d_gbs", offsetof(tt_assume, h2d_gbs), 0, 1e5, 1e-3},
    {"d2h_gbs", offsetof(tt_assume, d2h_gbs), 0, 1e5, 1e-3},
    {"peer_gbs", offsetof(tt_assume, peer_gbs), 0, 1e5, 1e-3},
    {"nccl_busbw_gbs", offsetof(tt_assume, nccl_busbw_gbs), 0, 1e5, 1e-3},
    {"nccl_us", offsetof(tt_assume, nccl_us), 1, 1e6, 0},
    {"hbm_gbs", offsetof(tt_assume, hbm_gbs), 0, 1e6, 1e-3},
    {"fp32_tflops", offsetof(tt_assume, fp32_tflops), 0, 1e5, 1e-6},
    {"bf16_tflops", offsetof(tt_assume, bf16_tflops), 0, 1e5, 1e-6},
    {"fp16_tflops", offsetof(tt_assume, fp16_tflops), 0, 1e5, 1e-6},
    {"gemm_eff", offsetof(tt_assume, gemm_eff), 0, 1, 1e-6},
    {"launch_us", offsetof(tt_assume, launch_us), 1, 1e6, 0},
    {"graph_node_us", offsetof(tt_assume, graph_node_us), 1, 1e6, 0},
    {"copy_us", offsetof(tt_assume, copy_us), 1, 1e6, 0},
    {"host_gbs", offsetof(tt_assume, host_gbs), 0, 1e5, 1e-3},
    {"barrier_us", offsetof(tt_assume, barrier_us), 1, 1e6, 0},
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

const char *tt_assume_profiles(void) { return "h100-pcie, a100-pcie, h100-sxm, h200-measured"; }

static const char KEY_LIST[] = "h2d_gbs, d2h_gbs, peer_gbs, nccl_busbw_gbs, nccl_us, hbm_gbs, fp32_tflops, bf16_tflops, "
                               "fp16_tflops, gemm_eff, "
                               "launch_us, graph_node_us, copy_us, host_gbs, barrier_us";

/* ---- parsing ------------------------------------------------------------------------------------------------- */

/* One KEY=VALUE item (len bytes at s, not terminated) applied to a. */
static tt_status parse_item(const char *s, size_t len, tt_assume *a, tt_error *err)
{
    const char *eq = memchr(s, '=', len);
    if (!eq)
        return tt_fail(err, TT_ERR_ARG, "--assume: '%.*s' is not KEY=VALUE (a profile name may only come first)",
                       (int)(len < 64 ? len : 64), s);
    const size_t klen = (size_t)(eq - s), vlen = len - klen - 1;
    size_t k = 0;
    while (k < N_KEYS && !(strlen(KEYS[k].name) == klen && memcmp(KEYS[k].name, s, klen) == 0)) k++;
    if (k == N_KEYS)
        return tt_fail(err, TT_ERR_ARG, "--assume: unknown key '%.*s' (keys: %s)", (int)(klen < 64 ? klen : 64), s,
                       KEY_LIST);
    const char *name = KEYS[k].name;
    if (a->overridden & (1u << k)) return tt_fail(err, TT_ERR_ARG, "--assume: key %s given twice", name);
    char v[64];
    if (vlen == 0 || vlen >= sizeof v)
        return tt_fail(err, TT_ERR_ARG, "--assume: %s: '%.*s' is not a number", name, (int)(vlen < 64 ? vlen : 64),
                       eq + 1);
    memcpy(v, eq + 1, vlen);
    v[vlen] = '\0';
    /* plain decimal: an optional sign, then a digit or '.'; no blanks, no hex, no "inf"/"nan" words */
    const char *digits = v[0] == '-' || v[0] == '+' ? v + 1 : v;
    int form_ok = (digits[0] >= '0' && digits[0] <= '9') || digits[0] == '.';
    char *end = v;
    double x = form_ok && !strpbrk(v, "xXpP") ? strtod(v, &end) : NAN;
    if (*end || isnan(x)) return tt_fail(err, TT_ERR_ARG, "--assume: %s: '%s' is not a number", name, v);
    if (!isfinite(x)) return tt_fail(err, TT_ERR_ARG, "--assume: %s: '%s' is not finite", name, v);
    if (x < 0 || (x == 0 && !KEYS[k].may_be_zero))
        return tt_fail(err, TT_ERR_ARG, "--assume: %s: '%s' must be %s", name, v, KEYS[k].may_be_zero ? ">= 0" : "> 0");
    if (x > KEYS[k].max || (x > 0 && x < KEYS[k].min))
        return tt_fail(err, TT_ERR_ARG, "--assume: %s: '%s' is outside the plausible range %g to %g", name, v,
                       KEYS[k].min, KEYS[k].max);
    *(double *)((char *)a + KEYS[k].offset) = x;
    a->overridden |= 1u << k;
    return TT_OK;
}

/* Sets figure `name` to x, from the measured profile. */
static void set_measured(tt_assume *a, const char *name, double x)
{
    for (size_t k = 0; k < N_KEYS; k++)
        if (strcmp(KEYS[k].name, name) == 0) {
            *(double *)((char *)a + KEYS[k].offset) = x;
            a->measured |= 1u << k;
            return;
        }
    TT_ASSERT(!"a key of the table");
}

/* A measured profile's figures on top of a's (the head comment's mapping). A figure outside the keys' plausible
 * range (a CPU's launch of 0.02 us is in it; a GEMM rate below 10^-6 of the peak is not) is refused as a spec value
 * would be. */
static tt_status assume_measured(tt_assume *a, const tt_profile *pf, const char *path, tt_error *err)
{
    snprintf(a->source, sizeof a->source, "%.100s (%.44s, backend %.24s)", path, pf->device, pf->backend);
    set_measured(a, "h2d_gbs", pf->h2d_pinned_gbs);
    set_measured(a, "d2h_gbs", pf->d2h_pinned_gbs);
    set_measured(a, "peer_gbs", isnan(pf->peer_gbs) ? pf->d2d_gbs : pf->peer_gbs);
    set_measured(a, "copy_us", pf->copy_s * 1e6);
    set_measured(a, "launch_us", pf->launch_s * 1e6);
    if (!isnan(pf->graph_node_s)) set_measured(a, "graph_node_us", pf->graph_node_s * 1e6);
    set_measured(a, "barrier_us", pf->barrier_s * 1e6);
    tt_optim_kind kind = TT_OPT_ADAM;
    tt_optim_parse_kind(pf->optimizer, &kind); /* tt_profile_read checked it */
    const tt_optim_config oc = tt_optim_defaults(kind);
    const double update_bytes = (3.0 + 2.0 * (double)tt_optim_state_floats(&oc)) * 4 * (double)pf->params;
    if (pf->update_s > 0) set_measured(a, "host_gbs", update_bytes / pf->update_s / 1e9);
    double flops = 0, body = 0;
    a->n_gemms = 0;
    for (size_t i = 0; i < pf->n_gemms && i < TT_ASSUME_MAX_GEMMS; i++) {
        const tt_profile_gemm *g = &pf->gemms[i];
        const double b = g->seconds > pf->launch_s ? g->seconds - pf->launch_s : 0;
        a->gemms[a->n_gemms++] = (tt_assume_gemm){(int)g->trans_a, (int)g->trans_b, g->m, g->n, g->k, b};
        flops += 2.0 * (double)g->m * (double)g->n * (double)g->k * (double)g->calls;
        body += b * (double)g->calls;
    }
    if (body > 0) {
        const double eff = flops / (a->fp32_tflops * 1e12 * body);
        set_measured(a, "gemm_eff", eff > 1 ? 1 : eff);
    }
    a->other_params = pf->params;
    a->other_rows = pf->rows;
    a->other_count = pf->kernels;
    const double launches = (double)pf->kernels * pf->launch_s;
    a->other_body_s = pf->kernels_s > launches ? pf->kernels_s - launches : 0;
    for (size_t k = 0; k < N_KEYS; k++) {
        if (!(a->measured & (1u << k))) continue;
        const double x = *(const double *)((const char *)a + KEYS[k].offset);
        if (x > KEYS[k].max || (x > 0 && x < KEYS[k].min) || (x == 0 && !KEYS[k].may_be_zero))
            return tt_fail(err, TT_ERR_FORMAT, "%s: gives %s = %g, outside the plausible range %g to %g", path,
                           KEYS[k].name, x, KEYS[k].min, KEYS[k].max);
    }
    return TT_OK;
}

/* An item that names a file: it holds a '/' or ends in ".json" (a KEY=VALUE's value never does). */
static int names_file(const char *s, size_t len)
{
    return memchr(s, '/', len) != NULL || (len >= 5 && memcmp(s + len - 5, ".json", 5) == 0);
}

tt_status tt_assume_parse(const char *spec, tt_assume *a, tt_error *err)
{
    if (!spec || !*spec)
        return tt_fail(err, TT_ERR_ARG, "--assume: empty (give a profile: %s, a measured profile's FILE, and/or "
                       "KEY=VALUE,...)", tt_assume_profiles());
    /* the file, if an item names one: from that item to the end of the spec */
    const char *file = NULL;
    for (const char *s = spec;;) {
        const size_t len = strcspn(s, ",");
        if (names_file(s, len)) {
            file = s;
            break;
        }
        if (!s[len]) break;
        s += len + 1;
    }
    const char *end = file ? file : spec + strlen(spec); /* the items before the file: a profile, then keys */
    const char *s = spec;
    size_t len = strcspn(s, ",");
    if (s + len > end) len = (size_t)(end - s);
    *a = PROFILES[0]; /* keys alone, or a file alone, start from h100-pcie */
    if (s < end && !memchr(s, '=', len)) {
        size_t i = 0;
        while (i < N_PROFILES && !(strlen(PROFILES[i].name) == len && memcmp(PROFILES[i].name, s, len) == 0)) i++;
        if (i == N_PROFILES)
            return tt_fail(err, TT_ERR_ARG, "--assume: unknown profile '%.*s' (profiles: %s; a file's name holds a '/' "
                           "or ends in .json)", (int)(len < 64 ? len : 64), s, tt_assume_profiles());
        *a = PROFILES[i];
        s += len + (s[len] == ',');
    }
    if (file) {
        tt_profile *pf = (tt_profile *)tt_calloc(1, sizeof *pf);
        if (!pf) return tt_fail(err, TT_ERR_NOMEM, "--assume: out of memory");
        tt_status st = tt_profile_read(file, pf, err);
        if (!st) st = assume_measured(a, pf, file, err);
        tt_free(pf);
        if (st) return st;
    }
    while (s < end) { /* KEY=VALUE items, up to the file (which the last one's comma precedes) */
        len = strcspn(s, ",");
        if (s + len > end) len = (size_t)(end - s);
        if (len == 0) return tt_fail(err, TT_ERR_ARG, "--assume: empty item in '%.128s'", spec);
        tt_status st = parse_item(s, len, a, err);
        if (st) return st;
        if (s[len] == '\0') break;
        s += len + 1;
    }
    if (!file && spec[strlen(spec) - 1] == ',')
        return tt_fail(err, TT_ERR_ARG, "--assume: empty item in '%.128s'", spec);
    return TT_OK;
}

size_t tt_assume_n_keys(void) { return N_KEYS; }

const char *tt_assume_key_name(size_t k) { return k < N_KEYS ? KEYS[k].name : NULL; }
