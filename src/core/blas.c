/* blas.c — OpenBLAS kernel selection (see tt_blas.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tt_blas.h"

/* OpenBLAS extensions (declared in its cblas.h, repeated here so this file does not depend on which cblas.h). */
char *openblas_get_corename(void);
char *openblas_get_config(void);
void openblas_set_num_threads(int);

#define REEXEC_MARK "TT_BLAS_REEXEC"

/* What a core name can run: 3 = AVX-512, 2 = AVX2+FMA, 1 = AVX, 0 = older / generic. */
static int core_tier(const char *core)
{
    static const char *t3[] = {"skylakex", "cooperlake", "sapphirerapids", NULL};
    static const char *t2[] = {"haswell", "zen", "skylake", "excavator", NULL};
    static const char *t1[] = {"sandybridge", "bulldozer", "piledriver", "steamroller", NULL};
    const char **tiers[3] = {t1, t2, t3};
    char low[64];
    size_t i = 0;
    for (; core[i] && i < sizeof low - 1; i++) low[i] = (char)(core[i] | 0x20);
    low[i] = '\0';
    for (int t = 2; t >= 0; t--)
        for (const char **n = tiers[t]; *n; n++)
            if (strcmp(low, *n) == 0) return t + 1;
    return 0;
}

static int cpu_tier(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return 3;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;
    if (__builtin_cpu_supports("avx")) return 1;
#endif
    return 0;
}

static const char *tier_core(int tier)
{
    static const char *names[4] = {NULL, "Sandybridge", "Haswell", "SkylakeX"};
    return names[tier];
}

static char g_why[160] = "detected by OpenBLAS";

void tt_blas_autoselect(char **argv)
{
    const char *core = openblas_get_corename();
    const char *env = getenv("OPENBLAS_CORETYPE");
    int have = core_tier(core), want = cpu_tier();
    if (getenv(REEXEC_MARK)) {
        snprintf(g_why, sizeof g_why, "auto-selected: OpenBLAS detected %s on a CPU that runs %s", getenv(REEXEC_MARK),
                 tier_core(want) ? tier_core(want) : "?");
        unsetenv(REEXEC_MARK);
        unsetenv("OPENBLAS_CORETYPE"); /* children (tests, benches) decide for themselves */
        return;
    }
    if (env && *env) {
        if (have < want)
            snprintf(g_why, sizeof g_why, "from OPENBLAS_CORETYPE=%s; this CPU could run %s", env, tier_core(want));
        else
            snprintf(g_why, sizeof g_why, "from OPENBLAS_CORETYPE=%s", env);
        return;
    }
    if (have >= want || !tier_core(want)) return;
    setenv(REEXEC_MARK, core, 1);
    setenv("OPENBLAS_CORETYPE", tier_core(want), 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the slow kernels, and say so */
    unsetenv(REEXEC_MARK);
    unsetenv("OPENBLAS_CORETYPE");
    snprintf(g_why, sizeof g_why, "detected by OpenBLAS; re-exec with %s failed, running slow kernels", tier_core(want));
}

void tt_blas_single_thread(void) { openblas_set_num_threads(1); }

const char *tt_blas_describe(void)
{
    static char line[400];
    snprintf(line, sizeof line, "%s | kernel %s (%s)", openblas_get_config(), openblas_get_corename(), g_why);
    return line;
}
