/* bench.h — what bench.c and bench_lists.c share: the sweep's lists (bench_opts), how the command line reads them
 * (bench_extra, for tt_cli_parse_train) and how the ranks of a job compare them (bench_same_lists). Private to
 * src/cmd/. */
#ifndef TT_BENCH_H
#define TT_BENCH_H

#include "tt_node.h"
#include "tt_train.h"

#define MAX_LIST 16

typedef struct bench_opts {
    size_t ranks[MAX_LIST], n_ranks; /* under mpirun -np K: sub-jobs of the first k ranks */
    size_t towers[MAX_LIST], n_towers;
    size_t batches[MAX_LIST], n_batches;
    tt_reduce reduces[TT_REDUCE_COUNT];
    size_t n_reduces;
    tt_update updates[TT_UPDATE_COUNT];
    size_t n_updates;
    tt_sync syncs[MAX_LIST]; /* --sync LIST */
    size_t n_syncs;
    int precs[3];            /* --precision LIST: TT_FMT_* */
    size_t n_precs;
    int weak;           /* --scaling weak: the batch list is per tower */
    size_t reps;        /* probe and floor reps */
    const char *csv;
} bench_opts;

/* bench's own options, for tt_cli_parse_train: the lists of the sweep, --scaling, --reps, --csv. */
int bench_extra(const char *opt, const char *value, void *ctx, tt_error *err, tt_status *st);

/* Every rank compares the sweep's lists with rank 0's before the first row (one agreed line where one differs). */
tt_status bench_same_lists(tt_node *nd, const bench_opts *b, tt_error *err);

#endif
