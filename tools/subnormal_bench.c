/* subnormal_bench.c — what subnormal optimizer state costs on this CPU, with and without flush-to-zero.
 *
 * Times the host's Adam update (tt_optim_apply, the trainer's own code) over the seed MLP's 269,322 parameters with
 * the gradient zero and the moments either normal (1e-3, 1e-6) or subnormal (1e-39) — the state of the always-zero
 * border pixels a few epochs into training. Best of 50 reps, first with the CPU's default mode, then with FTZ+DAZ
 * set as every towertrain crew thread sets it. Intel cores take a microcode assist per subnormal operand or result;
 * AMD Zen cores mostly do not. Run: ./build/tt_subnormal_bench. Not a test: it prints, it asserts nothing. */
#include <stdio.h>
#include <string.h>

#include "tt_common.h"
#include "tt_optim.h"

static double time_update(tt_optim *o, float *w, const float *g, size_t P, float m0, float v0)
{
    double best = 1e9;
    for (int rep = 0; rep < 50; rep++) {
        for (size_t i = 0; i < P; i++) {
            o->m[i] = m0;
            o->v[i] = v0;
        }
        double t0 = tt_now();
        tt_optim_apply(o, w, g, 0, P);
        double t = tt_now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

int main(void)
{
    const size_t P = 269322;
    tt_optim o;
    tt_error err;
    tt_optim_config c = tt_optim_defaults(TT_OPT_ADAM);
    float *w = (float *)tt_calloc(P, sizeof(float)), *g = (float *)tt_calloc(P, sizeof(float));
    if (!w || !g || tt_optim_init(&o, &c, P, &err) != TT_OK) {
        fprintf(stderr, "subnormal_bench: out of memory\n");
        return 1;
    }
    tt_optim_begin_step(&o);
    printf("Adam update of %zu parameters, gradient 0, best of 50 (ms):\n", P);
    for (int ftz = 0; ftz <= 1; ftz++) {
        if (ftz && !tt_fpu_flush_denormals()) {
            printf("  this CPU has no flush-to-zero mode here\n");
            break;
        }
        double normal = time_update(&o, w, g, P, 1e-3f, 1e-6f), sub = time_update(&o, w, g, P, 1e-39f, 1e-39f);
        printf("  %-14s normal moments %.3f | subnormal moments %.3f (%.2fx)\n", ftz ? "FTZ+DAZ:" : "default mode:",
               1e3 * normal, 1e3 * sub, sub / normal);
    }
    tt_optim_free(&o);
    tt_free(w);
    tt_free(g);
    return 0;
}
