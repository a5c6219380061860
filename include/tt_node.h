/* tt_node.h — the nodes of a job: one towertrain process per node under mpirun, each with its towers and its host
 * reduction, combining their host sums over Open MPI (docs/scaleout.md).
 *
 * A job of K ranks splits the global batch over K x N towers (rank r's towers are global towers r*N .. r*N+N-1, with
 * the shards a single process of K*N towers would give them). After its towers' node sum, every rank takes part in
 * the cross-node combine:
 *   reduce-scatter  rank r receives slice r of every rank's node sum and adds them in rank order (0, 1, .., K-1) —
 *                   MPI only moves the bytes (MPI_Alltoallv), the additions are ours, so the order is fixed and the
 *                   result does not depend on the MPI library's choice of algorithm;
 *   allreduce       then every rank gathers all the summed slices (MPI_Allgatherv) and applies the same optimizer
 *                   step to its own full master copy;
 *   ps              or rank r applies the optimizer to slice r only — it is the parameter server of that slice and
 *                   holds 1/K of the optimizer state — and every rank gathers the updated weights.
 * One process (not launched by mpirun, or a build without MPI) is a job of one rank: the single-node path.
 * `#ifdef TT_WITH_MPI` appears in src/core/node.c only.
 * Not for: the step itself (tt_trainer.h) or the run (tt_train.h). */
#ifndef TT_NODE_H
#define TT_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "tt_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TT_NODE_ALLREDUCE, TT_NODE_PS, TT_NODE_REDUCE_COUNT } tt_node_reduce;

#define TT_MAX_RANKS 1024 /* ranks in one job */

extern const char *const tt_node_reduce_names[TT_NODE_REDUCE_COUNT + 1]; /* indexed by the mode, NULL after */
int tt_node_reduce_parse(const char *name, tt_node_reduce *r); /* -1 for an unknown name */
const char *tt_node_reduce_name(tt_node_reduce r);

typedef struct tt_node {
    int rank, size;      /* this process and K (0 on a rank that sits out a tt_node_split) */
    int local_size;      /* ranks on this machine: they share its cores and its memory */
    int mpi;             /* MPI is initialised (launched by mpirun, built with MPI) */
    double clock_offset; /* rank 0's tt_now() minus this rank's, measured at init (traces line up) */
    void *comm;          /* the MPI communicator (MPI_Comm *) */
    char host[64];       /* this machine's name */
} tt_node;

/* The process's job: a job of one rank until tt_node_init has found mpirun. */
tt_node *tt_node_world(void);

/* 1 when this process was started by mpirun (Open MPI's or PMIx's environment), whether or not MPI is built in. */
int tt_node_launched(void);

/* Joins the job when launched by mpirun (MPI_Init_thread, MPI_THREAD_SERIALIZED: one crew thread at a time calls
 * MPI); a build without MPI started by mpirun with more than one rank is TT_ERR_ARG. Collectives of a job of one
 * rank are copies. */
tt_status tt_node_init(int *argc, char ***argv, tt_error *err);

/* Leaves the job: rc is this process's exit code. When the failure was agreed by every rank (tt_node_agree), every
 * rank finalizes and exits with it; a failure only this rank knows aborts the whole job (MPI_Abort), so no other
 * rank waits in a collective for it. Returns rc. */
int tt_node_finish(int rc);

/* The start-up exchange (docs/scaleout.md, "The start-up exchange"): the first collective after tt_node_init, before any
 * whose size or meaning depends on the build. Every rank gives the 8 bytes {TT_BUILD_MAGIC, TT_BUILD_RECORD_VERSION}
 * where the first release gave {CRC-32 of the command, --help}, so a first-release rank reads a newer one as another
 * command and both end in tt_node_agree; then the 256-byte tt_build_record; then the command (cmd, and whether
 * --help was given) is compared with rank 0's. Returns the agreed status: TT_ERR_ARG with one line naming both
 * builds (or both commands) when any rank differs. Collective over nd (more than one rank). */
tt_status tt_node_check_build(tt_node *nd, const char *cmd, int help, tt_error *err);

/* 1 if the calling rank speaks for the job: rank 0 prints, logs, traces and checkpoints. */
int tt_node_speaks(void);

/* Rank r's slice of a P-float buffer over K ranks: [*lo, *lo + *n), 16-float aligned starts, the last may be short
 * (or empty). */
void tt_node_slice(size_t P, int K, int r, size_t *lo, size_t *n);

/* Every rank's status after a phase that may fail on some ranks only (loading, a checkpoint's write): returns TT_OK
 * if every rank's s was TT_OK; else the lowest failing rank's status, with err = "rank R: its message" on every rank.
 * After a failure returned here every rank knows, and the job can end together (tt_node_finish). */
tt_status tt_node_agree(tt_node *nd, tt_status s, tt_error *err);

/* A rank's first failure that the other ranks do not know yet: a write of rank 0's console, log, trace, CSV or
 * checkpoint, or a part of a phase only this rank did. The writer records it where it happens (tt_pending_fail) and
 * goes on taking part in the collectives; the job agrees on it at its next agreement (tt_pending_agree). So an output
 * cannot forget to agree, and no rank leaves between two agreements while the others wait for it. */
typedef struct tt_pending {
    tt_status s; /* TT_OK: nothing failed */
    tt_error err;
} tt_pending;

/* The signal that stops the job (SIGINT, SIGTERM): this rank's, or (K ranks) the one any rank caught, so every rank
 * decides alike (one that left alone would leave the others waiting in a collective); it becomes the exit code on
 * every rank (tt_status_stop_signal), not only on the one that caught it. 0: none. Collective over nd. */
int tt_node_stop_signal(tt_node *nd);

/* Records s (with *err) unless a failure is recorded already; TT_OK records nothing. */
void tt_pending_fail(tt_pending *p, tt_status s, const tt_error *err);
/* An agreement: records s, then tt_node_agree on the recorded failure. Returns the agreed failure (with *err) on
 * every rank, or TT_OK; the record is cleared (the caller has it now). Every rank calls it at the same point. */
tt_status tt_pending_agree(tt_node *nd, tt_pending *p, tt_status s, tt_error *err);

/* An option as the ranks compare it before any of them branches on it (tt_node_same_words). */
typedef struct tt_node_word {
    const char *name;  /* "--assume", "--sync" */
    const char *value; /* the value in the user's words (a list as one string); NULL: not given */
} tt_node_word;

#define TT_NODE_WORDS 16 /* options in one tt_node_same_words */

/* The options that decide which collectives a command's ranks run (probe's --assume, bench's lists), compared with
 * rank 0's before any rank branches on them: a rank that went another way would leave the others waiting in a
 * collective. Each value is compared whole; the first option and rank that differ give every rank the same line,
 * "WHO: the ranks disagree on NAME: rank 0 A, rank R B (WHY)" ("not given" for NULL), TT_ERR_ARG, agreed
 * (tt_node_agree). n (1..TT_NODE_WORDS) and the names are the same on every rank: the command's own table.
 * Collective over nd; main thread only. */
tt_status tt_node_same_words(tt_node *nd, const char *who, const char *why, const tt_node_word *w, int n,
                             tt_error *err);

/* The cross-node combine's parts (see the picture above). recv holds K * slice floats; out gets this rank's slice
 * of the sum of every rank's `sum` (P floats), added in rank order. */
tt_status tt_node_reduce_scatter(tt_node *nd, const float *sum, float *recv, float *out, size_t P, tt_error *err);
/* buf (P floats) holds this rank's slice at its place: afterwards every rank's slice, on every rank. */
tt_status tt_node_allgather_slices(tt_node *nd, float *buf, size_t P, tt_error *err);
/* Rank 0 gets every rank's slice (`mine`: rank r's slice r, tt_node_slice floats) into full (P floats, rank 0
 * only; NULL elsewhere) — a ps checkpoint's optimizer state. */
tt_status tt_node_gather_slices(tt_node *nd, const float *mine, float *full, size_t P, tt_error *err);

/* all[r * bytes ..] = rank r's `mine` (bytes each). */
tt_status tt_node_allgather(tt_node *nd, const void *mine, void *all, size_t bytes, tt_error *err);
/* Rank 0's buf to every rank (any size). */
tt_status tt_node_bcast(tt_node *nd, void *buf, size_t bytes, tt_error *err);
/* v[0..n) (n <= 4) = the sum over ranks of every rank's v, added in rank order: the job's statistics, the same
 * numbers on every rank. */
tt_status tt_node_sum(tt_node *nd, double *v, int n, tt_error *err);
/* v[0..n) = the bitwise OR over ranks: flags every rank must agree on (a halt). */
tt_status tt_node_or(tt_node *nd, uint32_t *v, int n, tt_error *err);
/* A barrier that sleeps while it waits (ranks that sit out a bench sweep must not spin on the cores). */
tt_status tt_node_idle_barrier(tt_node *nd, tt_error *err);

/* A job of the first k ranks of nd (bench sweeps K): *sub is a node of k ranks on ranks < k, of size 0 elsewhere.
 * Collective over nd. tt_node_free releases it. */
tt_status tt_node_split(tt_node *nd, int k, tt_node *sub, tt_error *err);
void tt_node_free(tt_node *sub);

/* Point-to-point timing for the probe: rank 0 and rank `peer` exchange `bytes` back and forth reps times; returns
 * the one-way seconds per message (median) on every rank of the pair, 0 elsewhere. */
tt_status tt_node_pingpong(tt_node *nd, int peer, size_t bytes, int reps, double *one_way, tt_error *err);

#ifdef __cplusplus
}
#endif
#endif
