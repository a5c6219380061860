/* tt_build.h — what this towertrain binary is: its release, git commit, backends and float settings, as one
 * fixed-size record that the ranks of a job compare before anything else (docs/scaleout.md, "The start-up exchange").
 *
 * Two builds of one release can still compute differently (another commit, -march=native or not, -ffast-math, a
 * CUDA backend): ranks of different builds would step out of line, or wait in a collective the other never calls.
 * The record is plain bytes with fixed-size text fields, so any two builds can exchange it and print each other.
 * Not for: the run's configuration (train.c's fingerprint). The exchange (tt_node_check_build, in tt_node.h) is
 * implemented in build.c. */
#ifndef TT_BUILD_H
#define TT_BUILD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TT_BUILD_MAGIC 0x44425454u /* "TTBD" little-endian: never the CRC-32 of a command name (checked in tests) */
#define TT_BUILD_RECORD_VERSION 2u /* 1 was the first release's {command CRC-32, --help} pair; see docs/scaleout.md */

/* 256 bytes, no padding, text fields NUL-terminated (the compare and the messages read them as text). */
typedef struct tt_build_record {
    uint32_t magic, version; /* TT_BUILD_MAGIC, TT_BUILD_RECORD_VERSION */
    uint32_t sizes;          /* sizeof(size_t), sizeof(long), sizeof(void *), 1 for little-endian: a byte each */
    uint32_t reserved;       /* 0 */
    char release[16];        /* TT_VERSION */
    char commit[48];         /* git describe at build time, "unknown" outside git */
    char backends[40];       /* tt_backend_list() and MPI */
    char floats[88];         /* FTZ/DAZ, fast-math or not, -march=native and the vector ISA compiled for */
    char compiler[48];       /* the C compiler's version */
} tt_build_record;

/* This binary's record. TT_TEST_FAKE_COMMIT (an environment variable, for the tests) replaces the commit, so one
 * binary can play a second build under mpirun. */
void tt_build_record_of(tt_build_record *r);

/* "towertrain 0.1.0 (commit 50436ee, backends auto,cpu+mpi, FTZ+DAZ, IEEE floats, -march=native avx2+fma, gcc
 * 12.2.0, LP64 little-endian)": a record in one line, for messages and --version. */
void tt_build_describe(const tt_build_record *r, char *out, size_t len);

/* The name of the first field in which a and b differ ("the commit", "the backends", ...), or NULL if none. */
const char *tt_build_differs(const tt_build_record *a, const tt_build_record *b);

#ifdef __cplusplus
}
#endif
#endif
