/* fuzz_profile.c — libFuzzer target for the measured profile's reader (tt_profile_parse in src/step/profile.c), what
 * `probe --assume FILE` reads: the strict JSON scan (src/model/json.c), json-c with an explicit length, a report's
 * "probe" wrapper, the schema tables' types, ranges, required and unknown keys, the nested objects and arrays, and
 * the checks after them (a shape twice, the shard's rows, the optimizer). A refusal must name the input in one line;
 * an accepted profile must hold what the reader promises: counts within their bounds, every GEMM dimension in range
 * and each shape once, every rate finite and > 0, every time finite and >= 0 (or NaN where null is allowed).
 * Not for: opening files (tests/test_assume.c: directories, FIFOs, links, the size limit) or the what-if itself. */
#include <math.h>
#include <stdlib.h>

#include "tt_fuzz.h"
#include "tt_profile.h"

static void check_profile(const tt_profile *p)
{
    TT_ASSERT(p->n_gemms <= TT_PROFILE_MAX_GEMMS && p->n_steps <= TT_PROFILE_MAX_STEPS);
    TT_ASSERT(p->towers >= 1 && p->batch >= 1 && p->rows == (p->batch + p->towers - 1) / p->towers);
    const double rates[] = {p->h2d_pinned_gbs, p->h2d_pageable_gbs, p->d2h_pinned_gbs, p->d2h_pageable_gbs, p->d2d_gbs,
                            p->copy_s, p->memcpy_gbs, p->sum_gbs, p->launch_s, p->gemm_step_s, p->train_flops};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) TT_ASSERT(isfinite(rates[i]) && rates[i] > 0);
    TT_ASSERT(isnan(p->peer_gbs) || (isfinite(p->peer_gbs) && p->peer_gbs > 0));
    TT_ASSERT(isnan(p->graph_node_s) || (isfinite(p->graph_node_s) && p->graph_node_s > 0));
    const double times[] = {p->barrier_s, p->wake_s, p->pull_s, p->data_s, p->compute_s, p->push_grad_s,
                            p->push_stats_s, p->straggle_s, p->update_s};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) TT_ASSERT(isfinite(times[i]) && times[i] >= 0);
    for (size_t i = 0; i < p->n_gemms; i++) {
        const tt_profile_gemm *g = &p->gemms[i];
        TT_ASSERT(g->trans_a <= 1 && g->trans_b <= 1 && g->calls >= 1);
        TT_ASSERT(g->m >= 1 && g->n >= 1 && g->k >= 1 && g->m <= TT_PROFILE_MAX_DIM && g->n <= TT_PROFILE_MAX_DIM &&
                  g->k <= TT_PROFILE_MAX_DIM && (double)g->m * (double)g->n * (double)g->k <= 1e15);
        TT_ASSERT(isfinite(g->seconds) && g->seconds > 0 && isfinite(g->gflops) && g->gflops > 0);
        for (size_t j = 0; j < i; j++)
            TT_ASSERT(!(p->gemms[j].trans_a == g->trans_a && p->gemms[j].trans_b == g->trans_b &&
                        p->gemms[j].m == g->m && p->gemms[j].n == g->n && p->gemms[j].k == g->k));
    }
    for (size_t i = 0; i < p->n_steps; i++) {
        TT_ASSERT(memchr(p->steps[i].reduce, '\0', sizeof p->steps[i].reduce) != NULL);
        TT_ASSERT(p->steps[i].graphs == 0 || p->steps[i].graphs == 1);
        TT_ASSERT(isfinite(p->steps[i].measured.total) && p->steps[i].measured.total >= 0);
    }
    TT_ASSERT(memchr(p->device, '\0', sizeof p->device) != NULL && memchr(p->model, '\0', sizeof p->model) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > TT_PROFILE_MAX_BYTES || memchr(data, '\0', size)) return 0; /* tt_profile_read refuses them first */
    static tt_profile p; /* ~60 KB: not on the stack */
    tt_error err = {{0}};
    const tt_status s = tt_profile_parse((const char *)data, size, "fuzz-profile", &p, &err);
    if (s != TT_OK) tt_fuzz_check_refusal(s, &err, "fuzz-profile");
    else check_profile(&p);
    return 0;
}
