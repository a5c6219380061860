/* train_run.h — private to the run (src/run/train*.c): the state one training run holds, in parts — the flow's own
 * (train.c), the reporting side's (train_report.c, train_live.c), the checkpoint side's (train_ckpt.c), the ranks'
 * (train_ranks.c) and the callbacks' (train_callbacks.c), each part opened and closed by its own file — and what the
 * run's flow calls in the other files.
 * Not for: anything outside src/run (the run's public face is tt_train.h). The sides call down into nothing of
 * train.c; train.c calls into all of them. */
#ifndef TT_TRAIN_RUN_H
#define TT_TRAIN_RUN_H

#include <stdio.h>

#include "tt_backend.h"
#include "tt_callbacks.h"
#include "tt_ledger.h"
#include "tt_node.h"
#include "tt_tensorboard.h"
#include "tt_train.h"

/* The reporting side (rank 0 writes): the JSON-lines log, the trace, --tensorboard, the live view. */
typedef struct run_report {
    tt_out log;
    int log_ended; /* the log's final "error" / "stopped" record is written */
    tt_trace trace;
    /* --tensorboard (rank 0): the event files, DIR's lock (-1: none, or the checkpoint directory's), and for
     * --tensorboard-every-steps the epoch's next step to fold in, the epoch's running sums and the sums of the steps
     * since the last records (the host's split, and every tower's phases) */
    tt_tb tb;
    int tb_lock;
    size_t tb_next, tb_seen, tb_top1, tb_top5, tb_win_steps;
    double tb_loss;
    tt_step_times tb_win;
    double *tb_towers; /* 2 x towers x TT_TOWER_PHASES: an epoch's sums, then the window's */
    /* --progress towers on a terminal (live): the frame being built, the lines the last one took (0: none shown),
     * the time it was drawn */
    int live, live_lines;
    double live_t;
    char *live_buf; /* (towers + 6) lanes' worth, allocated as the run opens */
    size_t live_len, live_cap;
    int *live_width; /* the visible width of each line of the frame on screen */
    char live_restore[2][48]; /* what a signal writes to put the terminal back: erase the frame, show the cursor */
    int live_restore_k, live_cont; /* the one handed to tt_signal_restore; tt_signal_continued when last drawn */
} run_report;

/* The checkpoint side: --checkpoint-dir's saves and --resume's checkpoint. */
typedef struct run_ckpt {
    double best;         /* --save-best: the best value of the metric so far (NaN: none yet) */
    uint64_t saved_step; /* the global step of the last periodic checkpoint written (or resumed from) */
    size_t written_epoch, written_step; /* the last periodic checkpoint this run wrote (0, 0: none): a stop there
                                         * leaves it as it is */
    char *options;       /* --checkpoint-dir: the checkpoints' options (JSON text, the same for the whole run) */
    char desc[300];      /* and their model description */
    int dir_lock;        /* rank 0: --checkpoint-dir's lock file, held for the whole run (-1: none) */
    float *full[TT_CKPT_MAX_SLOTS]; /* ps, rank 0: the optimizer's whole vectors, gathered for a checkpoint */
    tt_checkpoint resume_ck;  /* --resume: the checkpoint, until its state is in the trainer */
    char nothing_left[400];   /* --resume of a finished run: the line that says so (empty: there is training to do) */
} run_ckpt;

/* A job of K ranks (docs/scaleout.md): rank 0 prints, logs, traces and checkpoints; every rank steps. */
typedef struct run_ranks {
    tt_node *nd;
    int K, rank0;
    /* this rank's first failure that the other ranks do not know yet (rank 0's console, log, trace or checkpoint; a
     * part of opening only this rank did): every writer records its own (run_fail), and the ranks agree on it at the
     * return of the run's phase (tt_run_phases), on every rank together. Nothing returns between two agreements. */
    tt_pending pending;
    /* what every rank's gathers receive, allocated while opening (so no gather waits for a rank whose allocation
     * failed): */
    double *clock_offsets;         /* --trace, K ranks: every rank's clock against rank 0's */
    tt_step_result *trace_results; /* --trace, K ranks: an epoch's step records of every rank */
    tt_tower_ledger *trace_ledger; /* and their towers' ledgers */
    int *records;                  /* K + 1 records of 2 * towers ints: every rank's, then this rank's */
} run_ranks;

/* The callbacks' side: --early-stopping and --reduce-lr-on-plateau (every rank holds the same: rank 0's decisions). */
typedef struct run_cb {
    int on;                 /* either callback given */
    tt_callbacks_state st;  /* their state between epochs (a resume's, or from the start) */
    float *h_best;          /* restore_best_weights: the best epoch's weights, a host copy (st.es_kept: taken) */
} run_cb;

/* Everything one run holds, so that its phases (train.c) are separate functions. */
typedef struct run_state {
    const tt_run_config *c;
    const tt_dataset *train, *val, *test;
    tt_run_result *res;
    FILE *out; /* console; NULL = silent */
    int bar;   /* a live progress bar on out */
    const tt_dev_ops *ops;
    tt_backend be;
    tt_model *model;
    tt_trainer_config tc;
    tt_trainer *tr;     /* NULL until tt_trainer_init made it */
    float *h_init;
    uint32_t *idx;
    size_t steps; /* per epoch */
    double *step_secs;
    tt_step_result *results;
    tt_tower_ledger *ledger;
    size_t start_epoch, start_step; /* where the run begins: 1, 0; or where --resume's checkpoint left off */
    size_t epoch;                   /* the epoch the run is in */
    tt_epoch_stats es;              /* its figures, from its steps to its checkpoints */
    uint64_t allocs_mark;           /* allocations before the first epoch (tt_run_result.allocs_after_first_step) */
    uint32_t data_crc;  /* CRC-32 of the training set's samples and labels (which data it was: checkpoints, ranks) */
    char *model_text;   /* a model file's text, read once (checkpoints, the ranks' fingerprint); NULL: built in */
    run_report report;
    run_ckpt ckpt;
    run_ranks ranks;
    run_cb cb;
} run_state;

/* ---- train_ranks.c: the ranks' part, and their agreement on this rank's first failure (tt_pending) ----------- */

static inline void run_fail(run_state *rs, tt_status s, const tt_error *err)
{
    tt_pending_fail(&rs->ranks.pending, s, err);
}
/* An agreement inside a phase, where a collective protocol needs one before it goes on (a save, --resume's
 * broadcast, a halt's stop): every rank calls it at the same point. The phases' own returns are agreed by
 * tt_run_phases. */
static inline tt_status run_agree(run_state *rs, tt_status s, tt_error *err)
{
    return tt_pending_agree(rs->ranks.nd, &rs->ranks.pending, s, err);
}
void ranks_init(run_state *rs);                       /* the job (c->node, or the world): nothing allocated */
tt_status ranks_open(run_state *rs, tt_error *err);   /* what the gathers receive (once the memory check passed) */
tt_status ranks_check(run_state *rs, tt_error *err);  /* every rank's configuration against rank 0's */
void ranks_clocks(run_state *rs);                     /* --trace, K ranks: every rank's clock (a failure recorded) */
void ranks_close(run_state *rs);

/* ---- train_ckpt.c: options, save, best, keep, resume ---------------------------------------------------------- */

void ckpt_init(run_state *rs);
/* --checkpoint-dir, rank 0: the directory ready and locked; ps: the buffers a checkpoint's gather fills */
tt_status ckpt_open(run_state *rs, tt_error *err);
void ckpt_close(run_state *rs);
void resume_notice_busy(const char *dir);
tt_status run_ckpt_options(run_state *rs, tt_error *err);
tt_status run_save(run_state *rs, size_t epoch, size_t step, const char *path, tt_error *err);
tt_status run_save_epoch(run_state *rs, size_t epoch, const tt_epoch_stats *es, tt_error *err);
void run_save_on_stop(run_state *rs, size_t epoch, size_t step, char *note, size_t len);
tt_status run_resume_load(run_state *rs, tt_error *err);
void run_resume_optim(run_state *rs);

/* ---- train_report.c: the banner, the Keras-style lines, the JSON-lines log's records, the trace's steps ------- */
/* The writers record a failed write (run_fail) and return nothing: the ranks agree at the phase's return. Each writes
 * only while nothing has failed (the first failure is the run's line; later lines would only repeat it). */

void report_init(run_state *rs);
/* Rank 0 while the run opens: the log (and its start record), --tensorboard's directory, the live view's buffers. */
tt_status report_open(run_state *rs, tt_error *err);
/* Once every check that can refuse the run has passed: the trace and the event files (a failure recorded). */
void report_start(run_state *rs);
/* The trace closed (valid JSON however the run ended), the log's last record if the run failed (s), the log and the
 * event files closed: the first error wins. Then the part's memory. */
tt_status report_close(run_state *rs, tt_status s, tt_error *err);
void print_bar(FILE *out, size_t first, size_t step, size_t steps, double elapsed, double loss, double acc, int final);
void print_flush(run_state *rs);
void print_banner(run_state *rs);
void print_epoch(run_state *rs, const tt_epoch_stats *es);
void print_test(run_state *rs, const tt_eval_result *test);
void log_ranks(run_state *rs);
void log_epoch(run_state *rs, const tt_epoch_stats *es);
int live_fits(run_state *rs);
tt_status live_open(run_state *rs, tt_error *err);
/* 0: the terminal is now too small for the lanes (the frame is erased): the caller draws the bar instead */
int live_draw(run_state *rs, size_t begin, size_t done, double e0, double loss, double acc);
void live_end(run_state *rs);
void tb_epoch(run_state *rs, const tt_epoch_stats *es);
void tb_epoch_begin(run_state *rs, size_t first);
void tb_steps(run_state *rs, size_t epoch, size_t end);
void log_test(run_state *rs, const tt_eval_result *test);
void log_nothing_left(run_state *rs);
void log_end(run_state *rs, const char *event, const char *fields, const tt_error *why);
void run_trace_steps(run_state *rs, size_t first, size_t end);

/* ---- train_callbacks.c: --early-stopping, --reduce-lr-on-plateau ----------------------------------------------- */
/* Every rank calls each at the same point; a failure is recorded (run_fail), agreed at the phase's return. */

void cb_plan(const run_state *rs, tt_mem_plan *plan); /* the host copy of the best weights (and a resumed one) */
tt_status cb_open(run_state *rs, tt_error *err);      /* the monitors checked, the state begun, the copy allocated */
void cb_close(run_state *rs);
/* After epoch es's lines and records, before its checkpoints: rank 0's decisions, taken by every rank (the rate set
 * in the trainer, the best weights kept), said in lines and records. */
void cb_epoch_end(run_state *rs, const tt_epoch_stats *es);
/* The epoch the training ends after: EarlyStopping's stop, else --epochs. */
size_t cb_last_epoch(const run_state *rs);
/* Keras's on_train_end: the best epoch's weights back into the trainer (restore_best_weights), said; 1 if it did. */
int cb_train_end(run_state *rs);
/* A checkpoint's callbacks state and best weights (pointers into rs: valid while the run is). */
void cb_to_ckpt(const run_state *rs, tt_checkpoint *ck);
/* --resume: the checkpoint's callbacks must be this run's (their SPECs, and the state they keep); their state taken.
 * stopped: set when EarlyStopping had stopped the checkpoint's run (a finished run, then). */
tt_status cb_resume(run_state *rs, const tt_checkpoint *ck, const char *what, int *stopped, tt_error *err);
/* --resume, once the trainer exists: the rate in force and the best weights from the checkpoint. */
void cb_resume_trainer(run_state *rs, const tt_checkpoint *ck);

#endif
