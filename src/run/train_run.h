/* train_run.h — private to the run (train.c, train_ckpt.c, train_report.c): the state one training run holds, and
 * what the run's flow (train.c) calls in its checkpoint side (train_ckpt.c) and its reporting side (train_report.c).
 * Not for: anything outside those three files (the run's public face is tt_train.h). The two sides call down into
 * nothing of train.c; train.c calls into both. */
#ifndef TT_TRAIN_RUN_H
#define TT_TRAIN_RUN_H

#include <stdio.h>

#include "tt_backend.h"
#include "tt_ledger.h"
#include "tt_node.h"
#include "tt_tensorboard.h"
#include "tt_train.h"

/* Everything one run holds, so that opening, the epochs, a halt and the ending are separate functions. */
typedef struct run_state {
    const tt_run_config *c;
    const tt_dataset *train, *val, *test;
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
    tt_out log;
    tt_trace trace;
    /* --tensorboard (rank 0): the event files, DIR's lock (-1: none, or the checkpoint directory's), and for
     * --tensorboard-every-steps the epoch's next step to fold in, the epoch's running sums and the sums of the steps
     * since the last records (the host's split, and every tower's phases) */
    tt_tb tb;
    /* --progress towers on a terminal (live): the frame being built, the lines the last one took (0: none shown),
     * the time it was drawn */
    int live, live_lines;
    double live_t;
    char *live_buf; /* (towers + 6) lanes' worth, allocated as the run opens */
    size_t live_len, live_cap;
    int *live_width; /* the visible width of each line of the frame on screen */
    char live_restore[2][48]; /* what a signal writes to put the terminal back: erase the frame, show the cursor */
    int live_restore_k, live_cont; /* the one handed to tt_signal_restore; tt_signal_continued when last drawn */
    int tb_lock;
    size_t tb_next, tb_seen, tb_top1, tb_top5, tb_win_steps;
    double tb_loss;
    tt_step_times tb_win;
    double *tb_towers; /* 2 x towers x TT_TOWER_PHASES: an epoch's sums, then the window's */
    int log_ended;            /* the log's final "error" / "stopped" record is written */
    /* checkpoints */
    size_t start_epoch, start_step; /* where the run begins: 1, 0; or where --resume's checkpoint left off */
    double best;              /* --save-best: the best value of the metric so far (NaN: none yet) */
    uint64_t saved_step;      /* the global step of the last periodic checkpoint written (or resumed from) */
    size_t written_epoch, written_step; /* the last periodic checkpoint this run wrote (0, 0: none): a stop there
                                         * leaves it as it is */
    uint32_t data_crc;        /* checkpoints: CRC-32 of the training set's samples and labels (which data it was) */
    char *ckpt_options;       /* --checkpoint-dir: the checkpoints' options (JSON text, the same for the whole run) */
    int dir_lock;             /* rank 0: --checkpoint-dir's lock file, held for the whole run (-1: none) */
    char ckpt_desc[300];      /* and their model description */
    char *model_text;         /* a model file's text, read once (checkpoints, the ranks' fingerprint); NULL: built in */
    tt_checkpoint resume_ck;  /* --resume: the checkpoint, until its state is in the trainer */
    char nothing_left[400];   /* --resume of a finished run: the line that says so (empty: there is training to do) */
    /* this rank's first failure that the other ranks do not know yet (rank 0's console, log, trace or checkpoint; a
     * part of opening only this rank did): every writer records its own (run_fail), and the run's flow ends on it at
     * its next agreement (run_agree), on every rank together. Nothing returns between two agreements. */
    tt_pending pending;
    /* a job of K ranks (docs/scaleout.md): rank 0 prints, logs, traces and checkpoints; every rank steps */
    tt_node *nd;
    int K, rank0;
    float *ck_full[TT_CKPT_MAX_SLOTS]; /* ps, rank 0: the optimizer's whole vectors, gathered for a checkpoint */
    /* what every rank's gathers receive, allocated while opening (so no gather waits for a rank whose allocation
     * failed): */
    double *clock_offsets;             /* --trace, K ranks: every rank's clock against rank 0's */
    tt_step_result *trace_results;     /* --trace, K ranks: an epoch's step records of every rank */
    tt_tower_ledger *trace_ledger;     /* and their towers' ledgers */
    int *rank_records;                 /* K + 1 records of 2 * towers ints: every rank's, then this rank's */
} run_state;

/* ---- this rank's first failure, and the ranks' agreement on it (tt_pending) ------------------------------------ */

static inline void run_fail(run_state *rs, tt_status s, const tt_error *err) { tt_pending_fail(&rs->pending, s, err); }
/* One of the run's agreements: every rank calls it at the same point (opening, each epoch, each checkpoint, the test
 * set, the end); the only way a run agrees. */
static inline tt_status run_agree(run_state *rs, tt_status s, tt_error *err)
{
    return tt_pending_agree(rs->nd, &rs->pending, s, err);
}

/* ---- train_ckpt.c: options, save, best, keep, resume ---------------------------------------------------------- */

void resume_notice_busy(const char *dir);
tt_status run_ckpt_options(run_state *rs, tt_error *err);
tt_status run_save(run_state *rs, size_t epoch, size_t step, const char *path, tt_error *err);
tt_status run_save_epoch(run_state *rs, size_t epoch, const tt_epoch_stats *es, tt_error *err);
void run_save_on_stop(run_state *rs, size_t epoch, size_t step, char *note, size_t len);
tt_status run_resume_load(run_state *rs, tt_error *err);
void run_resume_optim(run_state *rs);

/* ---- train_report.c: the banner, the Keras-style lines, the JSON-lines log's records, the trace's steps ------- */
/* The writers record a failed write (run_fail) and return nothing: the run's flow agrees at its next agreement. Each
 * writes only while nothing has failed (the first failure is the run's line; later lines would only repeat it). */

void print_bar(FILE *out, size_t first, size_t step, size_t steps, double elapsed, double loss, double acc, int final);
void print_flush(run_state *rs);
void print_banner(run_state *rs);
void print_epoch(run_state *rs, const tt_epoch_stats *es);
void print_test(run_state *rs, const tt_eval_result *test);
void log_start(run_state *rs);
void log_ranks(run_state *rs);
void log_epoch(run_state *rs, const tt_epoch_stats *es);
int live_fits(run_state *rs);
tt_status live_open(run_state *rs, tt_error *err);
/* 0: the terminal is now too small for the lanes (the frame is erased): the caller draws the bar instead */
int live_draw(run_state *rs, size_t begin, size_t done, double e0, double loss, double acc);
void live_end(run_state *rs);
tt_status tb_prepare(run_state *rs, tt_error *err);
tt_status tb_open_files(run_state *rs, tt_error *err);
void tb_epoch(run_state *rs, const tt_epoch_stats *es);
void tb_epoch_begin(run_state *rs, size_t first);
void tb_steps(run_state *rs, size_t epoch, size_t end);
void log_test(run_state *rs, const tt_eval_result *test);
void log_nothing_left(run_state *rs);
void log_end(run_state *rs, const char *event, const char *fields, const tt_error *why);
void run_trace_steps(run_state *rs, size_t first, size_t end);

#endif
