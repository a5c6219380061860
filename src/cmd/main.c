/* main.c — the towertrain executable: picks fast BLAS kernels, then dispatches to a subcommand. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tt_backend.h"
#include "tt_blas.h"
#include "tt_build.h"
#include "tt_cli.h"
#include "tt_node.h"
#include "tt_signal.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: towertrain <command> [options]\n\n"
               "Data-parallel training with towers: the master weights and the optimizer live on the host; each\n"
               "tower (a thread bound to a device) pulls the weights, computes its shard's gradient and pushes it\n"
               "back; the host sums the gradients and applies the optimizer.\n\n"
               "commands:\n"
               "  train     train a model (towertrain train --help)\n"
               "  bench     sweep towers x batch x placement: s/epoch, step split, prediction, GEMM floor, CSV\n"
               "  probe     measure copy, sum and sgemm speeds and predict each placement's step time\n"
               "  compare   train the same steps under each reduction placement: times and max |dw|\n"
               "  summary   the model's layers, output shapes and parameters, as Keras's model.summary()\n"
               "  eval      a checkpoint's loss, accuracy, per-class precision/recall, confusion matrix\n"
               "  predict   a checkpoint's top-k classes and probabilities for every sample of a file\n"
               "  --help    this text\n"
               "  --version version, backends and BLAS\n\n"
               "exit codes (README.md has the table): 0 done | 1 a file, device, memory or write problem | 2 a bad\n"
               "flag or value | 3 training diverged (NaN/Inf) | 130, 143 stopped by SIGINT, SIGTERM (a second signal\n"
               "exits at once)\n");
}

/* Runs a subcommand and returns its exit code. */
static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    tt_node *nd = tt_node_world();
    if (nd->size > 1) { /* every rank must run the same build and command (and --help alike), or one waits for the
                          * others: the first exchange after start-up (docs/scaleout.md, "The start-up exchange") */
        int help = 0;
        for (int i = 2; i < argc; i++) help |= strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
        tt_error err;
        tt_status s = tt_node_check_build(nd, cmd, help, &err);
        if (s) {
            tt_report_error(err.msg);
            return tt_status_exit_code(s);
        }
    }
    if (nd->size > 1 && strcmp(cmd, "train") != 0 && strcmp(cmd, "bench") != 0 && strcmp(cmd, "probe") != 0) {
        tt_error err;
        tt_status s = tt_fail(&err, TT_ERR_ARG,
                              "towertrain %.40s runs in one process: only train, bench and probe run as a job of "
                              "%d ranks (start it without mpirun)", cmd, nd->size);
        s = tt_node_agree(nd, s, &err);
        tt_report_error(err.msg);
        return tt_status_exit_code(s);
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        tt_build_record b;
        char build[400];
        tt_build_record_of(&b);
        tt_build_describe(&b, build, sizeof build);
        printf("towertrain %s\nbackends: %s\nBLAS: %s\nbuild: %s\n", TT_VERSION, tt_backend_list(), tt_blas_describe(),
               build);
        return 0;
    }
    if (strcmp(cmd, "train") == 0) return tt_cmd_train(argc, argv);
    if (strcmp(cmd, "bench") == 0) return tt_cmd_bench(argc, argv);
    if (strcmp(cmd, "probe") == 0) return tt_cmd_probe(argc, argv);
    if (strcmp(cmd, "compare") == 0) return tt_cmd_compare(argc, argv);
    if (strcmp(cmd, "summary") == 0) return tt_cmd_summary(argc, argv);
    if (strcmp(cmd, "eval") == 0) return tt_cmd_eval(argc, argv);
    if (strcmp(cmd, "predict") == 0) return tt_cmd_predict(argc, argv);
    tt_error err;
    tt_fail(&err, TT_ERR_ARG, "unknown command '%.100s' (try towertrain --help)", cmd);
    tt_report_error(err.msg);
    return 2;
}

int main(int argc, char **argv)
{
    tt_blas_autoselect(argv);
    tt_blas_single_thread();
    tt_signal_install();
    tt_fpu_flush_denormals();
    tt_error err;
    tt_status s = tt_node_init(&argc, &argv, &err); /* under mpirun: join the job (docs/scaleout.md) */
    if (s) {
        tt_report_error(err.msg);
        return tt_node_finish(tt_status_exit_code(s)); /* MPI that fails to start is 1, too many ranks 2 */
    }
    int rc = dispatch(argc, argv);
    /* whatever the command printed must have reached stdout: /dev/full or a closed pipe is an error, not a 0 */
    if (tt_flush_stdout(stdout, &err) != TT_OK && rc == 0) {
        tt_report_error(err.msg);
        rc = 1;
    }
    return tt_node_finish(rc);
}
