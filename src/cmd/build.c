/* build.c — this binary's build record (see tt_build.h) and the start-up exchange that compares it between ranks
 * (tt_node_check_build, over tt_node.h's collectives). CMake writes the git commit at every build (tt_git_commit.h)
 * and passes whether it compiled for this machine's CPU (TT_BUILD_NATIVE); the rest the compiler says. Here rather than in node.c, so the
 * readers' fuzz targets, which link node.c for its one-rank world, need neither the backends nor the CRC-32. */
#include "tt_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_backend.h"
#include "tt_checkpoint.h"
#include "tt_common.h"
#include "tt_node.h"

#if defined(__has_include)
#if __has_include("tt_git_commit.h") /* written at every build by cmake/git_commit.cmake */
#include "tt_git_commit.h"
#endif
#endif
#ifndef TT_GIT_COMMIT
#define TT_GIT_COMMIT "unknown"
#endif
#ifndef TT_BUILD_NATIVE
#define TT_BUILD_NATIVE 0
#endif

_Static_assert(sizeof(tt_build_record) == 256, "the build record is exchanged as 256 bytes by every build");

/* The vector ISA the compiler may use: two builds for other ISAs round differently (FMA contracts a*b+c). */
static const char *isa(void)
{
#if defined(__AVX512F__)
    return "avx512f+avx2+fma";
#elif defined(__AVX2__) && defined(__FMA__)
    return "avx2+fma";
#elif defined(__AVX2__)
    return "avx2";
#elif defined(__AVX__)
    return "avx";
#elif defined(__SSE2__)
    return "sse2";
#elif defined(__aarch64__)
    return "aarch64";
#else
    return "generic";
#endif
}

void tt_build_record_of(tt_build_record *r)
{
    memset(r, 0, sizeof *r);
    r->magic = TT_BUILD_MAGIC;
    r->version = TT_BUILD_RECORD_VERSION;
    const uint32_t one = 1;
    unsigned char little;
    memcpy(&little, &one, 1);
    r->sizes = (uint32_t)sizeof(size_t) | (uint32_t)sizeof(long) << 8 | (uint32_t)sizeof(void *) << 16 |
               (uint32_t)little << 24;
    snprintf(r->release, sizeof r->release, "%s", TT_VERSION);
    const char *fake = getenv("TT_TEST_FAKE_COMMIT");
    snprintf(r->commit, sizeof r->commit, "%s", fake && *fake ? fake : TT_GIT_COMMIT);
#ifdef TT_WITH_MPI
    snprintf(r->backends, sizeof r->backends, "%s+mpi", tt_backend_list());
#else
    snprintf(r->backends, sizeof r->backends, "%s", tt_backend_list());
#endif
#if defined(__FAST_MATH__)
    const char *math = "fast-math";
#else
    const char *math = "IEEE floats";
#endif
    snprintf(r->floats, sizeof r->floats, "%s, %s, %s%s", tt_fpu_flushing() ? "FTZ+DAZ" : "subnormals kept", math,
             TT_BUILD_NATIVE ? "-march=native " : "", isa());
#if defined(__clang__)
    snprintf(r->compiler, sizeof r->compiler, "clang %d.%d.%d", __clang_major__, __clang_minor__,
             __clang_patchlevel__);
#elif defined(__GNUC__)
    snprintf(r->compiler, sizeof r->compiler, "gcc %d.%d.%d", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
    snprintf(r->compiler, sizeof r->compiler, "unknown compiler");
#endif
}

/* A text field of a record that came from another process: at most its size, whatever it holds. */
#define FIELD(r, f) (int)strnlen((r)->f, sizeof (r)->f), (r)->f

void tt_build_describe(const tt_build_record *r, char *out, size_t len)
{
    snprintf(out, len, "towertrain %.*s (commit %.*s, backends %.*s, %.*s, %.*s, %u-bit size_t, %s-endian)",
             FIELD(r, release), FIELD(r, commit), FIELD(r, backends), FIELD(r, floats), FIELD(r, compiler),
             8 * (r->sizes & 0xff), r->sizes >> 24 ? "little" : "big");
}

const char *tt_build_differs(const tt_build_record *a, const tt_build_record *b)
{
    static const struct {
        size_t off, len;
        const char *name;
    } fields[] = {
        {offsetof(tt_build_record, release), sizeof a->release, "the release"},
        {offsetof(tt_build_record, commit), sizeof a->commit, "the commit"},
        {offsetof(tt_build_record, backends), sizeof a->backends, "the backends"},
        {offsetof(tt_build_record, floats), sizeof a->floats, "the float settings"},
        {offsetof(tt_build_record, compiler), sizeof a->compiler, "the compiler"},
        {offsetof(tt_build_record, sizes), sizeof a->sizes, "the type sizes or byte order"},
        {offsetof(tt_build_record, magic), 2 * sizeof a->magic, "the record version"},
        {offsetof(tt_build_record, reserved), sizeof a->reserved, "a reserved field"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        if (memcmp((const char *)a + fields[i].off, (const char *)b + fields[i].off, fields[i].len) != 0)
            return fields[i].name;
    return NULL;
}

/* ---- the start-up exchange: which build every rank runs ---------------------------------------------------- */

/* Step 1's 8 bytes from rank r: 0 this build's protocol; else the reason, and *old if r speaks the first release's. */
static int build_pair_differs(const uint32_t *pair, int *old)
{
    *old = pair[0] != TT_BUILD_MAGIC || pair[1] < 2; /* the first release sent {CRC-32 of the command, 0 or 1} */
    return *old || pair[1] != TT_BUILD_RECORD_VERSION;
}

static tt_status build_pairs(tt_node *nd, const tt_build_record *mine, tt_error *err)
{
    const uint32_t pair[2] = {TT_BUILD_MAGIC, TT_BUILD_RECORD_VERSION};
    uint32_t *all = (uint32_t *)tt_calloc((size_t)nd->size, sizeof pair);
    tt_status s = all ? tt_node_allgather(nd, pair, all, sizeof pair, err)
                      : tt_fail(err, TT_ERR_NOMEM, "out of memory");
    char here[400];
    tt_build_describe(mine, here, sizeof here);
    for (int r = 0; !s && r < nd->size; r++) {
        int old;
        if (!build_pair_differs(all + 2 * r, &old)) continue;
        if (old)
            s = tt_fail(err, TT_ERR_ARG, "rank %d runs an older towertrain, one that sends no build record (0.1.0 "
                        "up to commit 50436ee); rank %d runs %s: every rank must run the same build",
                        r, nd->rank, here);
        else
            s = tt_fail(err, TT_ERR_ARG, "rank %d sends build record version %u, rank %d version %u (%s): every "
                        "rank must run the same build", r, (unsigned)all[2 * r + 1], nd->rank,
                        TT_BUILD_RECORD_VERSION, here);
    }
    tt_free(all);
    return s;
}

static tt_status build_records(tt_node *nd, const tt_build_record *mine, tt_error *err)
{
    tt_build_record *all = (tt_build_record *)tt_calloc((size_t)nd->size, sizeof *mine);
    tt_status s = all ? tt_node_allgather(nd, mine, all, sizeof *mine, err)
                      : tt_fail(err, TT_ERR_NOMEM, "out of memory");
    const char *what = s ? NULL : tt_build_differs(mine, &all[0]);
    if (what) {
        char here[400], there[400];
        tt_build_describe(mine, here, sizeof here);
        tt_build_describe(&all[0], there, sizeof there);
        s = tt_fail(err, TT_ERR_ARG, "another build than rank 0 (%s differs): this rank runs %s; rank 0 runs %s "
                    "(every rank must run the same build)", what, here, there);
    }
    tt_free(all);
    return s;
}

tt_status tt_node_check_build(tt_node *nd, const char *cmd, int help, tt_error *err)
{
    tt_build_record mine;
    tt_build_record_of(&mine);
    tt_status s = build_pairs(nd, &mine, err);
    /* a rank of the first release agrees now (its message: another command); this build's ranks go on together */
    if ((s = tt_node_agree(nd, s, err))) return s;
    s = build_records(nd, &mine, err);
    if ((s = tt_node_agree(nd, s, err))) return s;
    uint32_t cmd_of[2] = {tt_crc32(0, cmd, strlen(cmd)), help != 0}, all[2 * TT_MAX_RANKS];
    s = tt_node_allgather(nd, cmd_of, all, sizeof cmd_of, err);
    if (!s && (cmd_of[0] != all[0] || cmd_of[1] != all[1]))
        s = tt_fail(err, TT_ERR_ARG, "started as 'towertrain %.40s%s', unlike rank 0 (every rank must run the same "
                    "command)", cmd, help ? " --help" : "");
    return tt_node_agree(nd, s, err);
}
