/* tt_ledger.h — the step ledger: where each step's time went, per tower and for the host, as a per-epoch summary
 * with a one-line verdict, JSON-lines step records, and a Chrome trace-event file (Perfetto, chrome://tracing).
 * Reads what the trainer records (tt_step_result, tt_tower_ledger); changes nothing. */
#ifndef TT_LEDGER_H
#define TT_LEDGER_H

#include <stdio.h>

#include "tt_out.h"
#include "tt_trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A named phase of a step split (tt_step_times) or of a tower's step (tt_tower_phases): one table each, in the order
 * every reader shows them — the JSON log and TensorBoard. */
typedef struct tt_phase_field {
    const char *name;
    size_t off; /* of its double in the struct */
} tt_phase_field;
static inline double tt_phase_value(const void *times, const tt_phase_field *f)
{
    return *(const double *)((const char *)times + f->off);
}
enum { TT_SPLIT_PHASES = 10, TT_TOWER_PHASES = 8 };
extern const tt_phase_field tt_split_phases[TT_SPLIT_PHASES]; /* launch .. update, then total */

/* One tower's phases in one step, in seconds, from its ledger (update: --update device|replicated, this tower's). */
typedef struct tt_tower_phases {
    double pull, data, compute, reduce, push, push_sum, wait, update;
} tt_tower_phases;
extern const tt_phase_field tt_tower_phase_fields[TT_TOWER_PHASES];
tt_tower_phases tt_tower_phases_of(const tt_tower_ledger *l);

/* a += b, every duration of a split (the timestamps of a step are not summed). */
void tt_step_times_add(tt_step_times *a, const tt_step_times *b);

/* The dominant cost of a step split as one line: "compute-bound: forward+backward 78% of the step". */
void tt_ledger_verdict(const tt_step_times *sum, char *out, size_t len);

/* "step split: launch 0% | pull 2% | ..." for the console. */
void tt_ledger_split_line(FILE *f, const tt_step_times *sum);

/* JSON object body (no braces) of a split summed over steps: "pull":…,"data":…,… */
void tt_ledger_json_split(tt_out *o, const tt_step_times *sum);

/* One JSON line per step, for steps first+1..end of the epoch (res and led indexed by the epoch's step, from 0),
 * each committed whole: {"event":"step","epoch":E,"step":K,"total":…,"towers":[{…}]}. */
tt_status tt_ledger_json_steps(tt_out *o, size_t epoch, const tt_step_result *res, const tt_tower_ledger *led,
                               size_t first, size_t end, size_t n_towers, tt_error *err);

/* Chrome trace-event JSON: one lane per tower, one for the host reducer, one for the cross-node combine (K ranks),
 * one for the optimizer, one for the run. */
typedef struct tt_trace {
    tt_out out;
    double origin; /* tt_now() at open: trace time 0 */
    int first;     /* no event written yet */
    size_t n_towers;
    int pid;       /* the process the next events belong to: rank + 1 */
    double shift;  /* added to their times: that rank's clock against rank 0's */
    int copy_lanes; /* the towers' side-stream lanes are named (--overlap on: at its first step) */
} tt_trace;

/* A job of `ranks` ranks (docs/scaleout.md) has one trace process per rank, each with its towers' lanes. */
tt_status tt_trace_open(tt_trace *t, const char *path, size_t n_towers, int ranks, const char *backend,
                        const char *reduce, tt_error *err);
/* The next tt_trace_steps are rank `rank`'s, whose clock reads `offset` seconds behind rank 0's. */
void tt_trace_rank(tt_trace *t, int rank, double offset);
/* Writes the spans of steps first..end-1 (copies carry their bytes), committed event by event. */
tt_status tt_trace_steps(tt_trace *t, const tt_step_result *res, const tt_tower_ledger *led, size_t first, size_t end,
                         tt_error *err);
/* A span on the run lane (epochs, validation). */
void tt_trace_span(tt_trace *t, const char *name, double t0, double t1);
/* Ends the event array, so the file is valid JSON however the run ended. Accepts a trace never opened. */
tt_status tt_trace_close(tt_trace *t, tt_error *err);

#ifdef __cplusplus
}
#endif
#endif
