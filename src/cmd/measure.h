/* measure.h — private to the measuring subcommands (bench.c, probe.c, compare.c): what they share — the backend, the
 * data sets and the model of a run as tt_run would have them (bench, compare), and the exit on a failure (all three).
 * Not for: any command's own options, tables or measurements (each command's file), or the training subcommands
 * (cli.c, eval.c); the commands themselves are declared in tt_cli.h. */
#ifndef TT_CMD_MEASURE_H
#define TT_CMD_MEASURE_H

#include "tt_backend.h"
#include "tt_train.h"

/* What bench and compare share: the backend, the data sets and the model of a run, as tt_run would have them. */
typedef struct measure_setup {
    const tt_dev_ops *ops;
    tt_backend be;
    tt_dataset train, val, test;
    tt_model *model;
    tt_run_result *res;
} measure_setup;

/* Opens the backend (its notice line printed), loads the data sets and builds the model; *m is zeroed first, so
 * measure_close frees it whatever failed. */
tt_status measure_open(const tt_run_config *c, measure_setup *m, tt_error *err);
void measure_close(measure_setup *m);

/* A measuring command's failure: stdout flushed (the table so far stays before the error), err's one line reported,
 * and the exit code of s returned. */
int measure_fail(tt_status s, const tt_error *err);

#endif
