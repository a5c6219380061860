/* tt_cli.h — command-line parsing shared by the subcommands: strict number parsing and the train options, read by
 * the run's options table (tt_run_opts, tt_train.h) into a tt_run_config. Every problem is one line naming the
 * option, and TT_ERR_ARG (exit code 2). */
#ifndef TT_CLI_H
#define TT_CLI_H

#include "tt_train.h"

#ifdef __cplusplus
extern "C" {
#endif

tt_status tt_cli_size(const char *opt, const char *v, size_t lo, size_t hi, size_t *out, tt_error *err);
tt_status tt_cli_float(const char *opt, const char *v, double lo, double hi, int lo_open, float *out, tt_error *err);

/* Parses argv[first..argc) as train options into c. Options not in the train set are reported unless `extra`
 * accepts them: extra(opt, value_or_NULL, ctx) returns 1 if it consumed a valued option, 0 if unknown. */
typedef int (*tt_cli_extra_fn)(const char *opt, const char *value, void *ctx, tt_error *err, tt_status *st);
tt_status tt_cli_parse_train(int argc, char **argv, int first, tt_run_config *c, const char *cmd,
                             tt_cli_extra_fn extra, void *ctx, int *help, tt_error *err);

/* Usage text of the train options. */
void tt_cli_train_help(FILE *f);

int tt_cmd_train(int argc, char **argv);
int tt_cmd_bench(int argc, char **argv);
int tt_cmd_probe(int argc, char **argv);
int tt_cmd_compare(int argc, char **argv);
int tt_cmd_summary(int argc, char **argv);
int tt_cmd_eval(int argc, char **argv);
int tt_cmd_predict(int argc, char **argv);

/* predict's top-k: the indices of the k largest of p[0..C) (k <= C), the largest first, ties to the lower index; a NaN
 * ranks below every number (NaNs among themselves by index). O(C log k): a heap of the k best so far, its worst on
 * top. heap: scratch of k entries. */
void tt_top_k(const float *p, size_t C, size_t k, size_t *top, size_t *heap);

#ifdef __cplusplus
}
#endif
#endif
