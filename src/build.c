/* build.c — this binary's build record (see tt_build.h). CMake passes the git commit (TT_GIT_COMMIT) and whether it
 * compiled for this machine's CPU (TT_BUILD_NATIVE); the rest the compiler says. */
#include "tt_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_backend.h"
#include "tt_common.h"

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
