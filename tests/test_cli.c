/* test_cli.c — the towertrain executable as a user meets it: help and version, every kind of bad flag (exit 2, one
 * line naming the flag), bad data and model files (exit 1, one line naming the file), and a small successful run
 * whose JSON log has the promised fields. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <zlib.h>

#include <json-c/json.h>

#include "tt_backend.h"
#include "tt_cli.h"
#include "tt_test.h"
#include "tt_train.h"

static char dir[64];
static char out_path[128], err_path[128];

static int run(const char *args) { return tt_test_run(args, out_path, err_path); }

static void expect(const char *args, int code, const char *fragment)
{
    tt_test_expect(args, code, fragment, out_path, err_path);
}

/* Did the run whose stdout is in out_path train on the CUDA backend? Its banner says "| backend NAME (". */
static int banner_backend_is_cuda(const char *args)
{
    const char *b = strstr(tt_test_slurp(out_path), "| backend ");
    ck_assert_msg(b != NULL, "towertrain %s: no banner naming the backend: %s", args, tt_test_slurp(out_path));
    b += strlen("| backend ");
    ck_assert_msg(strncmp(b, "cuda (", 6) == 0 || strncmp(b, "cpu (", 5) == 0, "backend %.20s", b);
    return b[1] == 'u';
}

/* Can towertrain train on a GPU here (a CUDA build, a driver and a device)? Asked of the executable with the
 * default --device auto, as a user would meet it. Called inside a test (a forked child), never in main. */
static int gpu_usable(void)
{
    char args[512];
    snprintf(args, sizeof args, "train --data %s --val-samples 50 --train-samples 32 --test-samples 8 --epochs 1 "
             "--batch 32 --progress lines", dir);
    int rc = run(args);
    ck_assert_msg(rc == 0, "towertrain %s: exit %d: %s", args, rc, tt_test_slurp(err_path));
    return banner_backend_is_cuda(args);
}

static void write_idx(const char *name, int ndim, const uint32_t *dims, const unsigned char *data, size_t n)
{
    tt_test_write_idx(dir, name, ndim, dims, data, n);
}

/* A tiny MNIST-format directory: 4x4 images whose class is the brightest quadrant... of 10 classes. */
static void make_data(void)
{
    enum { NTR = 300, NTE = 60, D = 16 };
    static unsigned char img[NTR * D], lab[NTR];
    tt_rng r;
    tt_rng_seed(&r, 1, 1);
    for (int i = 0; i < NTR; i++) {
        lab[i] = (unsigned char)(i % 10);
        for (int j = 0; j < D; j++) img[i * D + j] = (unsigned char)(tt_rng_below(&r, 60) + (j == lab[i] ? 190 : 0));
    }
    uint32_t tri[3] = {NTR, 4, 4}, trl[1] = {NTR}, tei[3] = {NTE, 4, 4}, tel[1] = {NTE};
    write_idx("train-images-idx3-ubyte.gz", 3, tri, img, sizeof img);
    write_idx("train-labels-idx1-ubyte.gz", 1, trl, lab, sizeof lab);
    write_idx("t10k-images-idx3-ubyte.gz", 3, tei, img, NTE * D);
    write_idx("t10k-labels-idx1-ubyte.gz", 1, tel, lab, NTE);
}

static void setup(void)
{
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    make_data();
}

START_TEST(test_help_and_version)
{
    expect("--help", 0, "");
    ck_assert(strstr(tt_test_slurp(out_path), "train") != NULL);
    expect("train --help", 0, "");
    ck_assert(strstr(tt_test_slurp(out_path), "--lr-scaling") != NULL);
    /* generated from the tables: the optimizers' defaults (tt_optim_defaults), a choice row's words */
    ck_assert_msg(strstr(tt_test_slurp(out_path), "[Keras default: sgd 0.01, adam/nadam/rmsprop 0.001]") &&
                  strstr(tt_test_slurp(out_path), "--progress MODE       auto | bar | lines | quiet | towers [auto") &&
                  strstr(tt_test_slurp(out_path), "--save-best METRIC    val_loss | val_accuracy: best"),
                  "%s", tt_test_slurp(out_path));
    expect("bench --help", 0, "");
    expect("--version", 0, "");
    ck_assert(strstr(tt_test_slurp(out_path), "BLAS") != NULL);
    ck_assert_int_eq(run(""), 2);
}
END_TEST

START_TEST(test_bad_flags)
{
    expect("frobnicate", 2, "unknown command");
    expect("train --bogus", 2, "train: unknown option '--bogus' (see towertrain train --help)");
    expect("summary --bogus", 2, "summary: --bogus does not apply (it takes --model, --data and --vocab)");
    expect("predict --data x", 2, "predict: --data does not apply (see towertrain predict --help)");
    expect("eval --seed 3", 2, "eval: --seed does not apply (see towertrain eval --help)");
    expect("compare --trace t.json", 2, "compare: --trace does not apply (it runs every placement in turn;");
    /* a choice row takes its words only: --save-best has no 'none' (it is the flag's absence) */
    expect("train --checkpoint-dir d --save-best none", 2, "--save-best: 'none' is not val_loss or val_accuracy");
    expect("train --progress loud", 2, "--progress: 'loud' is not auto, bar, lines, quiet or towers");
    /* the recipes (issue 34): schedules, warm-up, weight decay and the clips — words, ranges, what they need */
    expect("train --lr-schedule linear", 2, "--lr-schedule: 'linear' is not constant, step:B1,...,Bn:V0,...,Vn,");
    expect("train --lr-schedule step:10,5:1,1,1", 2, "--lr-schedule: 'step:10,5:1,1,1': boundaries must increase");
    expect("train --lr-schedule cosine:0", 2, "--lr-schedule: 'cosine:0': STEPS is a step count (1 to 2^53)");
    expect("train --lr-schedule exponential:10:0.5:x", 2, "its third field can only be staircase");
    expect("train --lr-schedule ''", 2, "--lr-schedule: '' is not constant");
    expect("train --weight-decay 2", 2, "--weight-decay");
    expect("train --weight-decay -0.1", 2, "--weight-decay");
    expect("train --clipnorm 0", 2, "--clipnorm");
    expect("train --clipvalue nan", 2, "--clipvalue");
    expect("train --clipnorm 1 --clipvalue 1", 2,
           "--clipvalue: not with --clipnorm (Keras's optimizers take one of clipnorm, global_clipnorm and clipvalue)");
    expect("train --global-clipnorm 1 --clipnorm 1", 2, "--global-clipnorm: not with --clipnorm");
    expect("train --warmup-epochs 0", 2, "--warmup-epochs");
    expect("train --warmup-epochs 2 --train-samples 64 --val-samples 0 --epochs 1 --device cpu", 2,
           "--warmup-epochs: ramps the rate from --lr to the rate --lr-scaling linear scales it to; give --lr-scaling "
           "linear");
    expect("train --clipnorm 1 --reduce device --update device --train-samples 64 --val-samples 0 --epochs 1 "
           "--device cpu", 2, "--clipnorm: the host takes the summed gradient's norm before it updates, so it needs "
           "--update host");
    expect("train --global-clipnorm 1 --sync async --towers 2 --train-samples 64 --val-samples 0 --epochs 1 "
           "--device cpu", 2, "--global-clipnorm: the norm is the summed gradient's, which --sync async does not form");
    expect("train --clipnorm 1 --overlap on --towers 2 --train-samples 64 --val-samples 0 --epochs 1 --device cpu", 2,
           "--clipnorm: --overlap on updates each bucket before the last is pushed");
    expect("summary --lr-schedule constant", 2, "summary: --lr-schedule does not apply");
    expect("train --reduce-lr-on-plateau on --lr-schedule cosine:10 --train-samples 64 --val-samples 16 --epochs 1 "
           "--device cpu", 2, "--reduce-lr-on-plateau: not with --lr-schedule (the rate of every step is the "
           "schedule's");
    expect("train --reduce-lr-on-plateau on --lr-scaling linear --warmup-epochs 1 --train-samples 64 --val-samples 16 "
           "--epochs 1 --device cpu", 2, "--reduce-lr-on-plateau: not with --warmup-epochs");
    expect("train --lr 0.1 --lr-schedule step:5:0.1,0.01 --train-samples 64 --val-samples 0 --epochs 1 --device cpu",
           2, "--lr: not with --lr-schedule step (its values are the rates)");
    expect("eval --weight-decay 0.1", 2, "eval: --weight-decay does not apply");
    /* --precision and its scaler (issue 33): the words, the ranges, what they do not run with, where they apply */
    expect("train --precision fp8", 2, "--precision: 'fp8' is not fp32, bf16 or fp16");
    expect("train --precision fp16 --loss-scale abc", 2,
           "--loss-scale: 'abc' is not dynamic, dynamic:INIT, a scale N or none (INIT and N from 1 to 2^64)");
    expect("train --precision fp16 --loss-scale dynamic:0.5", 2, "--loss-scale: 'dynamic:0.5' is not dynamic");
    expect("train --precision fp16 --loss-scale 1e30", 2, "--loss-scale: '1e30' is not dynamic");
    expect("train --precision fp16 --loss-scale dynamicx", 2, "--loss-scale: 'dynamicx' is not dynamic");
    /* numbers as every flag takes them: no hex, sign or blank */
    expect("train --precision fp16 --loss-scale 0x10", 2, "--loss-scale: '0x10' is not dynamic");
    expect("train --precision fp16 --loss-scale +4", 2, "--loss-scale: '+4' is not dynamic");
    expect("train --precision fp16 --loss-scale ' 2'", 2, "--loss-scale: ' 2' is not dynamic");
    expect("train --precision fp16 --loss-scale dynamic:0x1p3", 2, "--loss-scale: 'dynamic:0x1p3' is not dynamic");
    expect("train --precision fp16 --loss-scale 'dynamic: 8'", 2, "--loss-scale: 'dynamic: 8' is not dynamic");
    expect("train --precision fp16 --loss-scale 18446744073709551617", 2,
           "--loss-scale: '18446744073709551617' is not dynamic"); /* a double rounds it to 2^64: still above it */
    /* the 16-bit rows' options where compare and bench have none: refused as train refuses them */
    expect("compare --device cpu --loss-scale 4", 2, "--loss-scale: for --precision bf16 or fp16");
    expect("compare --device cpu --push-precision fp32", 2, "--push-precision fp32: the gradients are FP32 already");
    expect("bench --device cpu --loss-scale dynamic", 2, "--loss-scale: for --precision bf16 or fp16");
    expect("bench --device cpu --precision fp32 --push-precision fp32", 2,
           "--push-precision fp32: the gradients are FP32 already");
    expect("train --precision fp16 --loss-scale dynamic:", 2, "--loss-scale: 'dynamic:' is not dynamic");
    expect("train --loss-scale dynamic --train-samples 64 --val-samples 0 --epochs 1 --device cpu", 2,
           "--loss-scale: for --precision bf16 or fp16 (FP32 gradients do not underflow as 16-bit ones do)");
    expect("train --push-precision fp32 --train-samples 64 --val-samples 0 --epochs 1 --device cpu", 2,
           "--push-precision fp32: the gradients are FP32 already (give --precision bf16 or fp16)");
    expect("train --precision bf16 --reduce device --train-samples 64 --val-samples 0 --epochs 1 --device cpu", 2,
           "--precision bf16: the host sums the towers' 16-bit pushes and keeps the FP32 master weights, so it needs "
           "--reduce cpu and --update host (not --reduce device --update host)");
    expect("train --precision fp16 --sync ssp:2 --train-samples 64 --val-samples 0 --epochs 1 --device cpu", 2,
           "--precision fp16: the 16-bit pull and push are the synchronous step's (give --sync bsp, or --precision "
           "fp32)");
    expect("train --precision bf16 --overlap on --train-samples 64 --val-samples 0 --epochs 1 --device cpu", 2,
           "--precision bf16: not with --overlap on");
    expect("eval --loss-scale 8", 2, "eval: --loss-scale does not apply (see towertrain eval --help)");
    expect("summary --precision bf16", 2, "summary: --precision does not apply");
    expect("train --batch", 2, "--batch: missing value");
    expect("train --batch abc", 2, "--batch");
    expect("train --batch 0", 2, "--batch");
    expect("train --batch -5", 2, "--batch");
    expect("train --batch 12x", 2, "--batch");
    expect("train --epochs 99999999999999999999999", 2, "--epochs");
    expect("train --towers 5 --batch 4", 2, "--towers 5");
    expect("train --lr -1", 2, "--lr");
    expect("train --lr nan", 2, "--lr");
    expect("train --lr=", 2, "--lr");
    expect("train --optimizer adagrad", 2, "--optimizer: 'adagrad' is not sgd, adam, nadam or rmsprop");
    expect("train --momentum 0.9", 2, "--momentum: applies to --optimizer sgd or rmsprop only");
    expect("train --optimizer sgd --momentum 1.5", 2, "--momentum");
    expect("train --optimizer sgd --nesterov", 2, "--nesterov");
    expect("train --optimizer rmsprop --momentum 0.9 --nesterov", 2, "--nesterov: applies to --optimizer sgd only");
    expect("train --optimizer adam --rho 0.9", 2, "--rho: applies to --optimizer rmsprop only");
    expect("train --optimizer sgd --centered", 2, "--centered: applies to --optimizer rmsprop only");
    expect("train --rho 0.9 --centered", 2, "--rho: applies to --optimizer rmsprop only"); /* adam by default */
    expect("train --optimizer rmsprop --rho 1", 2, "--rho");
    expect("train --optimizer rmsprop --rho 0", 2, "--rho");
    expect("train --optimizer rmsprop --rho -0.5", 2, "--rho");
    expect("train --optimizer rmsprop --centered=yes", 2, "--centered: takes no value");
    expect("train --save-every-epoch", 2, "--save-every-epoch: needs --checkpoint-dir DIR");
    expect("train --save-every-steps 0 --checkpoint-dir /tmp", 2, "--save-every-steps: '0' is not an integer");
    expect("train --save-best val_top5 --checkpoint-dir /tmp", 2, "--save-best: 'val_top5' is not val_loss or");
    expect("train --save-best val_loss --checkpoint-dir /tmp --val-samples 0", 2, "--save-best: needs a validation");
    expect("train --keep 0 --checkpoint-dir /tmp", 2, "--keep: '0' is not an integer");
    expect("train --keep 2", 2, "--keep: needs --checkpoint-dir DIR");
    expect("train --save-every-epoch=1 --checkpoint-dir /tmp", 2, "--save-every-epoch: takes no value");
    expect("bench --checkpoint-dir /tmp", 2, "--checkpoint-dir: applies to towertrain train only, not bench");
    expect("probe --resume /tmp", 2, "--resume: applies to towertrain train only, not probe");
    expect("probe --optimizer rmsprop --rho 0.9", 2, "probe: --rho does not apply");
    expect("probe --optimizer rmsprop --centered", 2, "probe: --centered does not apply");
    expect("train --lr-scaling sqrt", 2, "--lr-scaling");
    expect("train --progress loud", 2, "--progress");
    expect("train --device tpu", 2, "tpu");
    expect("train --reduce gloo", 2, "--reduce: 'gloo' is not cpu, device, allreduce or nccl");
    expect("train extra", 2, "extra");
    expect("bench --towers 1,,2", 2, "--towers");
}
END_TEST

START_TEST(test_bad_files)
{
    char args[1024];
    expect("train --device cpu --data /nonexistent/dir", 1, "/nonexistent/dir");
    snprintf(args, sizeof args, "train --device cpu --data %s/train-images-idx3-ubyte.gz", dir);
    expect(args, 1, "not a directory");
    /* truncate the training labels: the message names the file */
    char p[256];
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", dir);
    uint32_t dims[1] = {300};
    unsigned char few[10] = {0};
    write_idx("train-labels-idx1-ubyte.gz", 1, dims, few, sizeof few);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50", dir);
    expect(args, 1, "train-labels-idx1-ubyte.gz: truncated");
    make_data();
    /* a model file with a bad line */
    snprintf(p, sizeof p, "%s/model.txt", dir);
    tt_test_write_str(p, "dense units=8 activation=relu\ndense unitz=10\n");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --model %s", dir, p);
    expect(args, 1, "model.txt:2: dense: unknown key 'unitz'");
    tt_test_write_str(p, "dense units=8\nconv filters=3\n");
    expect(args, 1, "model.txt:2: unknown layer 'conv'");
    tt_test_write_str(p, "dense units=eight\n");
    expect(args, 1, "model.txt:1:");
    tt_test_write_str(p, "dense units=8\n");
    expect(args, 1, "10 classes");
    tt_test_write_str(p, "input size=16\ninput size=16\ndense units=10\n");
    expect(args, 1, "model.txt:2: input given twice");
    /* the line limit: 511 characters are read, 512 are refused with the line number */
    char line[600];
    memset(line, ' ', sizeof line);
    memcpy(line, "dense units=10", 14);
    line[511] = '\n';
    line[512] = '\0';
    tt_test_write_str(p, line);
    expect(args, 0, "");
    line[511] = ' ';
    line[512] = '\n';
    line[513] = '\0';
    tt_test_write_str(p, line);
    expect(args, 1, "model.txt:1: line too long (at most 511 characters)");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --model /nonexistent/model.txt", dir);
    expect(args, 1, "/nonexistent/model.txt");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 300", dir);
    expect(args, 2, "--val-samples 300");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --log-json /nonexistent/dir/log.json",
             dir);
    expect(args, 1, "--log-json");
    /* the device is opened before the data are read: without a usable GPU (or CUDA in this build) that is the one
     * line; with one, the run gets as far as the data */
    expect("train --device cuda --data /nonexistent", 1, gpu_usable() ? "/nonexistent" : "--device cuda");
}
END_TEST

/* --device auto (the default): CUDA where a usable GPU exists, else the CPU backend — with one notice line naming
 * CUDA's error in a build with CUDA, silently in a CPU-only build. Either way it trains (exit 0); the banner names
 * the backend it chose. --device cuda agrees: it trains exactly where auto chose CUDA. */
START_TEST(test_device_auto)
{
    const int built = strstr(tt_backend_list(), "cuda") != NULL;
    const char *forms[] = {"--device auto ", ""}; /* explicit, and the default */
    char args[1024];
    int gpu = -1;
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "train %s--data %s --val-samples 50 --epochs 1 --batch 32 --progress lines",
                 forms[k], dir);
        int rc = run(args);
        static char e[1 << 16]; /* slurp's buffer is reused for stdout below */
        memcpy(e, tt_test_slurp(err_path), sizeof e);
        ck_assert_msg(rc == 0, "towertrain %s: exit %d: %s", args, rc, e);
        const int on_cuda = banner_backend_is_cuda(args);
        ck_assert_msg(!on_cuda || built, "a build without CUDA trained on it");
        if (gpu < 0) gpu = on_cuda;
        ck_assert_msg(on_cuda == gpu, "--device auto and the default chose different backends");
        if (on_cuda || !built) {
            ck_assert_msg(e[0] == '\0', "towertrain %s on %s: stderr should be empty: %s", args,
                          on_cuda ? "cuda" : "a CPU-only build", e);
        } else {
            static const char head[] = "towertrain: notice: --device auto: ", tail[] = "; training on the CPU backend\n";
            ck_assert_msg(tt_test_count_lines(e) == 1 && strncmp(e, head, strlen(head)) == 0, "want one notice: %s", e);
            const char *end = strstr(e, tail);
            ck_assert_msg(end && end[strlen(tail)] == '\0', "the notice should end '%s': %s", tail, e);
            /* between the two: CUDA's own reason (no driver, no device, ...) */
            ck_assert_msg(end - (e + strlen(head)) >= 10 && strstr(e, "CUDA"), "the notice names no CUDA error: %s", e);
        }
        ck_assert_msg(strstr(tt_test_slurp(out_path), "test: "), "it did not train to the end: %s", tt_test_slurp(out_path));
    }
    snprintf(args, sizeof args, "train --device cuda --data %s --val-samples 50 --epochs 1 --batch 32 --progress quiet",
             dir);
    if (gpu)
        expect(args, 0, "");
    else /* no GPU: the CUDA error (a CUDA build) or the missing backend (a CPU-only build) */
        expect(args, 1, built ? "--device cuda: " : "--device cuda: this build has no CUDA");
    printf("test_device_auto: --device auto trains on %s\n", gpu ? "cuda" : "cpu");
}
END_TEST

/* --device and --gpus values that cannot be used: one line naming the flag, before any data are read. A malformed
 * --gpus list is refused on every machine (exit 2); a well-formed one is checked against the GPUs the driver sees
 * (one it lacks, or a build without CUDA: exit 1, as --device cuda there),
 * so where CUDA is built but no GPU is usable, --device auto trains on the CPU instead and its one notice line says
 * the list is ignored. */
START_TEST(test_device_and_gpus_values)
{
    char args[1024];
    expect("train --device bogus", 2, "--device: unknown backend 'bogus'");
    snprintf(args, sizeof args, "train --device bogus --data %s --val-samples 50 --epochs 1", dir);
    expect(args, 2, "--device: unknown backend 'bogus'");
    snprintf(args, sizeof args, "train --device cpu --gpus 0 --data %s --val-samples 50 --epochs 1", dir);
    expect(args, 2, "--gpus: applies to --device cuda or auto, not cpu");
    const int built = strstr(tt_backend_list(), "cuda") != NULL, gpu = gpu_usable();
    const char *lists[] = {"x", "0,,1", "0,0", ",", "0,", "-1", "1234", "99"};
    const size_t n_malformed = 7; /* all but the last: "99" is a list, of a GPU no machine here has */
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        snprintf(args, sizeof args, "train --gpus '%s' --data %s --val-samples 50 --epochs 1 --progress quiet", lists[i],
                 dir);
        if (i < n_malformed) {
            expect(args, 2, "--gpus");
        } else if (gpu || !built) { /* a well-formed list of a GPU this machine or build lacks: a resource, exit 1 */
            expect(args, 1, "--gpus");
        } else {
            expect(args, 0, "");
            char *e = tt_test_slurp(err_path);
            ck_assert_msg(tt_test_count_lines(e) == 1 && strstr(e, "towertrain: notice: --device auto: ") &&
                              strstr(e, "(--gpus is ignored)"), "--gpus %s without a GPU: %s", lists[i], e);
        }
        snprintf(args, sizeof args, "train --device cuda --gpus '%s' --data %s --val-samples 50 --epochs 1", lists[i],
                 dir);
        if (i < n_malformed)
            expect(args, 2, "--gpus");
        else
            expect(args, 1, gpu ? "--gpus" : "--device cuda");
    }
}
END_TEST

/* --reduce nccl where NCCL cannot run — the CPU backend; several towers on one GPU — is a bad value: exit 2, one line
 * naming nccl, nothing trained. */
START_TEST(test_nccl_refused)
{
    char args[1024];
    for (int towers = 1; towers <= 2; towers++) {
        snprintf(args, sizeof args, "train --device cpu --reduce nccl --towers %d --data %s --val-samples 50 "
                 "--epochs 1", towers, dir);
        expect(args, 2, "nccl");
        ck_assert_msg(strstr(tt_test_slurp(out_path), "test: ") == NULL, "--reduce nccl trained on the CPU backend");
    }
    if (gpu_usable()) { /* one more tower than GPUs: two share one */
        FILE *f = popen("nvidia-smi -L 2>/dev/null | grep -c '^GPU'", "r");
        int n = 0;
        if (f) {
            if (fscanf(f, "%d", &n) != 1) n = 0;
            pclose(f);
        }
        if (n > 0) {
            snprintf(args, sizeof args, "train --device cuda --reduce nccl --towers %d --data %s --val-samples 50 "
                     "--epochs 1", n + 1, dir);
            expect(args, 2, "nccl");
        }
    }
}
END_TEST

/* The start record's fields in their order — the run's own and the options table's at their places (issue 32) —
 * with their JSON types and this run's values: options as numbers or as their words, --slow-tower's list. */
static void start_record_in_order(json_object *o)
{
    static const char *const keys[] = {
        "event", "version", "backend", "towers", "batch", "epochs", "optimizer", "lr", "base_lr", "lr_scaling", "seed",
        "train_samples", "val_samples", "test_samples", "params", "model", "reduce", "update", "flush_denormals",
        "ranks", "node_reduce", "sync", "sync_schedule", "bn_sync", "data_on", "epilogues", "non_trainable_params",
        "slow_tower", "precision", "push_precision", "loss_scale", "augment", "warmup_epochs", "lr_schedule",
        "weight_decay", "clipnorm", "global_clipnorm", "clipvalue", "early_stopping", "reduce_lr_on_plateau"};
    size_t k = 0;
    json_object_object_foreach(o, key, val) {
        (void)val;
        ck_assert_msg(k < sizeof keys / sizeof keys[0] && strcmp(key, keys[k]) == 0, "start record: key %zu is %s", k,
                      key);
        k++;
    }
    ck_assert_uint_eq(k, sizeof keys / sizeof keys[0]);
    static const struct {
        const char *key, *text;
    } want[] = {{"towers", "3"},        {"batch", "32"},         {"epochs", "3"},         {"optimizer", "\"sgd\""},
                {"lr_scaling", "\"linear\""}, {"seed", "1"},       {"model", "\"file\""}, {"reduce", "\"cpu\""},
                {"update", "\"host\""}, {"node_reduce", "\"allreduce\""}, {"sync", "\"bsp\""},
                {"sync_schedule", "\"free\""}, {"bn_sync", "\"off\""}, {"data_on", "\"host\""},
                {"epilogues", "\"kernels\""}, {"ranks", "1"}, {"slow_tower", "[ ]"},
                {"precision", "\"fp32\""}, {"push_precision", "\"same\""}, {"loss_scale", "\"none\""},
                {"augment", "\"none\""}, {"early_stopping", "\"off\""}, {"reduce_lr_on_plateau", "\"off\""}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        json_object *v;
        ck_assert(json_object_object_get_ex(o, want[i].key, &v));
        const char *got = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_SPACED);
        ck_assert_msg(strcmp(got, want[i].text) == 0, "start record: %s is %s, not %s", want[i].key, got, want[i].text);
    }
}

START_TEST(test_small_run_and_json_log)
{
    char args[1024], log[256], model[256];
    snprintf(log, sizeof log, "%s/log.json", dir);
    snprintf(model, sizeof model, "%s/m.txt", dir);
    tt_test_write_str(model, "# a comment\ninput size=16\ndense units=32 activation=relu\ndense units=10 activation=linear\n");
    snprintf(args, sizeof args,
             "train --device cpu --data %s --val-samples 60 --epochs 3 --towers 3 --batch 32 --optimizer sgd --lr 0.1 "
             "--momentum 0.9 --nesterov --lr-scaling linear --log-json %s --model %s",
             dir, log, model);
    expect(args, 0, "");
    char *o = tt_test_slurp(out_path);
    ck_assert_msg(strstr(o, "lr 0.3 (--lr-scaling linear: base 0.1 x 3 towers)") != NULL, "%s", o);
    ck_assert_msg(strstr(o, "8/8 - ") != NULL, "%s", o); /* 240 samples / 32 = 7.5 -> 8 steps */
    ck_assert(strstr(o, "val_accuracy") != NULL);
    /* every line is a JSON object (parsed with json-c); count the events and check the promised fields */
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char line[1 << 14];
    size_t n_start = 0, n_epoch = 0, n_step = 0, n_test = 0;
    while (fgets(line, sizeof line, f)) {
        json_object *o = json_tokener_parse(line);
        ck_assert_msg(o != NULL, "not JSON: %s", line);
        json_object *ev, *v;
        ck_assert(json_object_object_get_ex(o, "event", &ev));
        const char *e = json_object_get_string(ev);
        if (strcmp(e, "start") == 0) {
            n_start++;
            ck_assert(json_object_object_get_ex(o, "reduce", &v));
            start_record_in_order(o);
        } else if (strcmp(e, "epoch") == 0) {
            n_epoch++;
            const char *keys[] = {"epoch", "loss", "accuracy", "val_loss", "val_accuracy", "seconds", "steps",
                                  "verdict", "split"};
            for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
                ck_assert_msg(json_object_object_get_ex(o, keys[k], &v), "epoch lacks %s", keys[k]);
            json_object *split;
            json_object_object_get_ex(o, "split", &split);
            const char *parts[] = {"pull", "compute", "push", "wait", "reduce", "update", "reduce_update"};
            for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
                ck_assert_msg(json_object_object_get_ex(split, parts[k], &v), "split lacks %s", parts[k]);
            json_object_object_get_ex(o, "steps", &v);
            ck_assert_int_eq(json_object_get_int(v), 8); /* 240 samples / 32 = 7.5 -> 8 steps */
        } else if (strcmp(e, "step") == 0) {
            n_step++;
            json_object *towers;
            ck_assert(json_object_object_get_ex(o, "towers", &towers));
            ck_assert_int_eq((int)json_object_array_length(towers), 3);
        } else if (strcmp(e, "test") == 0) {
            n_test++;
            ck_assert(json_object_object_get_ex(o, "top5", &v));
        }
        json_object_put(o);
    }
    fclose(f);
    ck_assert_uint_eq(n_start, 1);
    ck_assert_uint_eq(n_epoch, 3);
    ck_assert_uint_eq(n_step, 24);
    ck_assert_uint_eq(n_test, 1);
}
END_TEST

/* --trace writes a Chrome trace: one lane per tower plus host lanes, copy spans carry bytes. */
/* --optimizer rmsprop with every option it takes (3 state buffers: the memory plan, init and update agree) trains
 * the tiny set to a low loss in a few epochs. */
START_TEST(test_rmsprop_run)
{
    char args[512];
    snprintf(args, sizeof args,
             "train --device cpu --data %s --val-samples 60 --epochs 4 --towers 2 --batch 32 --optimizer rmsprop "
             "--lr 0.01 --rho 0.8 --momentum 0.5 --centered --progress lines",
             dir);
    expect(args, 0, "");
    char *o = tt_test_slurp(out_path);
    ck_assert_msg(strstr(o, "optimizer: rmsprop, lr 0.01") != NULL, "%s", o);
    const char *t = strstr(o, "test: 60 samples - loss: ");
    ck_assert_msg(t != NULL, "%s", o);
    double loss = atof(t + strlen("test: 60 samples - loss: "));
    ck_assert_msg(loss < 0.5, "test loss %g after 4 epochs of rmsprop: %s", loss, o);
}
END_TEST

START_TEST(test_trace_file)
{
    char args[1024], trace[256];
    snprintf(trace, sizeof trace, "%s/trace.json", dir);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --epochs 2 --towers 2 --batch 32 "
             "--reduce device --trace %s --progress quiet", dir, trace);
    expect(args, 0, "");
    json_object *o = json_object_from_file(trace);
    ck_assert_msg(o != NULL, "trace is not JSON");
    json_object *events;
    ck_assert(json_object_object_get_ex(o, "traceEvents", &events));
    size_t n = json_object_array_length(events), pulls = 0, reduces = 0, lanes = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(events, i), *name, *args_o, *bytes, *ph;
        json_object_object_get_ex(e, "name", &name);
        json_object_object_get_ex(e, "ph", &ph);
        const char *nm = json_object_get_string(name);
        if (strcmp(nm, "thread_name") == 0) lanes++;
        if (strcmp(nm, "pull") == 0 || strcmp(nm, "reduce") == 0) {
            ck_assert_str_eq(json_object_get_string(ph), "X");
            ck_assert(json_object_object_get_ex(e, "args", &args_o));
            ck_assert(json_object_object_get_ex(args_o, "bytes", &bytes));
            ck_assert(json_object_get_int64(bytes) > 0);
            pulls += nm[0] == 'p';
            reduces += nm[0] == 'r';
        }
    }
    ck_assert_uint_eq(lanes, 2 + 3);   /* 2 towers, host reducer, optimizer, run */
    ck_assert_uint_eq(pulls, 2 * 16); /* 2 towers x 8 steps x 2 epochs */
    ck_assert_uint_eq(reduces, 16);   /* tower 0 gathers, once per step */
    json_object_put(o);
    /* --update replicated: every tower's lane shows its update (the all-gather's bytes with it), the optimizer lane
     * none, and no tower pulls */
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --epochs 2 --towers 2 --batch 32 "
             "--reduce allreduce --update replicated --trace %s --progress quiet", dir, trace);
    expect(args, 0, "");
    o = json_object_from_file(trace);
    ck_assert_msg(o != NULL, "trace is not JSON");
    ck_assert(json_object_object_get_ex(o, "traceEvents", &events));
    size_t updates[2] = {0, 0}, host_updates = 0;
    pulls = 0;
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        json_object *e = json_object_array_get_idx(events, i), *name, *tid, *args_o, *bytes;
        json_object_object_get_ex(e, "name", &name);
        const char *nm = json_object_get_string(name);
        pulls += strcmp(nm, "pull") == 0;
        if (strcmp(nm, "update") != 0 || !json_object_object_get_ex(e, "tid", &tid)) continue;
        const int64_t lane = json_object_get_int64(tid);
        if (lane > 1) {
            host_updates++;
            continue;
        }
        updates[lane]++;
        ck_assert(json_object_object_get_ex(e, "args", &args_o) &&
                  json_object_object_get_ex(args_o, "bytes gathered", &bytes) && json_object_get_int64(bytes) > 0);
    }
    ck_assert_msg(updates[0] == 16 && updates[1] == 16 && host_updates == 0 && pulls == 0,
                  "tower updates %zu %zu, host updates %zu, pulls %zu", updates[0], updates[1], host_updates, pulls);
    json_object_put(o);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --trace /nonexistent/dir/t.json", dir);
    expect(args, 1, "--trace");
}
END_TEST

/* --augment (issue 34, item 4) as a user meets it: every bad spec, a model whose input is not an image and the
 * commands it does not apply to refused in one line (exit 2); the preset and a list trained, named by the banner and
 * the start record, the same words either way. */
START_TEST(test_augment_cli)
{
    static const struct {
        const char *spec, *says;
    } bad[] = {
        {"bogus", "--augment: 'bogus' is not width=F, height=F or flip"},
        {"''", "--augment: '' has an empty item"},
        {"flip,", "--augment: 'flip,' has an empty item"},
        {",flip", "--augment: ',flip' has an empty item"},
        {"width", "--augment: 'width' is not width=F, height=F or flip"},
        {"flipped", "--augment: 'flipped' is not width=F, height=F or flip"},
        {"cifar10,flip", "--augment: 'cifar10' is not width=F, height=F or flip"},
        {"width=", "--augment width: '' is not a number in [0, 1]"},
        {"width=1", "--augment width: '1' is the whole image: give a fraction below 1"},
        {"height=2", "--augment height: '2' is not a number in [0, 1]"},
        {"height=-0.1", "--augment height: '-0.1' is not a number in [0, 1]"},
        {"width=0x0.1", "--augment width: '0x0.1' is not a number in [0, 1]"},
        {"width=nan", "--augment width: 'nan' is not a number in [0, 1]"},
        {"width=1e-40", "--augment width: '1e-40' is 0 or subnormal as a float32"},
        {"width=0.1,width=0.2", "--augment: width is given twice"},
        {"flip,height=0.1,flip", "--augment: flip is given twice"},
        {"width=0.10000000000000000000000000000000000000000000000001x", "--augment width: '0.1000"},
    };
    char args[1024];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "train --device cpu --data %s --augment %s", dir, bad[i].spec);
        expect(args, 2, bad[i].says);
    }
    expect("train --augment flip --augment none", 2, "--augment: given twice");
    expect("eval --augment flip", 2, "eval: --augment does not apply");
    expect("bench --augment flip", 2, "--augment: applies to towertrain train only, not bench");
    expect("probe --augment flip", 2, "--augment: applies to towertrain train only, not probe");
    expect("summary --augment flip", 2, "summary: --augment does not apply");
    char model[300];
    snprintf(model, sizeof model, "%s/flat_model.txt", dir);
    tt_test_write_str(model, "input size=16\ndense units=10\n");
    snprintf(args, sizeof args, "train --device cpu --data %s --model %s --val-samples 60 --epochs 1 --augment flip", dir,
             model);
    expect(args, 2, "--augment: the model's input is 16, not an image (height x width x channels): shifts and flips "
                    "are for image data (give --augment none)");
    char log[256], first[4096];
    snprintf(log, sizeof log, "%s/augment.json", dir);
    for (int k = 0; k < 2; k++) { /* the preset, then its settings spelt out: one run */
        snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --epochs 1 --towers 2 --batch 16 "
                 "--progress lines --augment %s --log-json %s", dir, k ? "flip,height=0.1,width=0.1" : "cifar10", log);
        expect(args, 0, "");
        const char *o = tt_test_slurp(out_path);
        ck_assert_msg(strstr(o, "\naugment: width=0.1,height=0.1,flip (ImageDataGenerator's shifts") != NULL, "%s", o);
        const char *t = strstr(o, "test: ");
        ck_assert_ptr_nonnull(t);
        if (!k) snprintf(first, sizeof first, "%s", t);
        else ck_assert_str_eq(t, first);
        ck_assert_msg(strstr(tt_test_slurp(log), ",\"augment\":\"width=0.1,height=0.1,flip\",") != NULL, "%s",
                      tt_test_slurp(log));
    }
}
END_TEST

/* --slow-tower (issue 22, item 1): the delay's schedule (in range, from the seed, per tower and step); a run with a
 * straggler gives the same figures as one without (only time moves) and its barrier shows as the others' wait in
 * the log; probe predicts it; bad lists, a tower out of range and --graphs on are refused in one line. */
START_TEST(test_slow_tower)
{
    const tt_slow_tower slow[2] = {{1, 3, 0}, {2, 1, 4}};
    ck_assert(tt_slow_delay(slow, 2, 7, 0, 5) == 0);
    ck_assert(tt_slow_delay(slow, 2, 7, 1, 5) == 3e-3);
    double lo = 1, hi = 0;
    for (uint64_t st = 0; st < 200; st++) {
        const double d = tt_slow_delay(slow, 2, 7, 2, st);
        ck_assert(d == tt_slow_delay(slow, 2, 7, 2, st)); /* a schedule, not a clock */
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    ck_assert_msg(lo >= 1e-3 && hi <= 5e-3 && hi - lo > 3e-3, "jitter range [%g, %g]", lo, hi);
    ck_assert(tt_slow_delay(slow, 2, 8, 2, 3) != tt_slow_delay(slow, 2, 7, 2, 3));
    char args[1024], log[256], plain[4096];
    snprintf(log, sizeof log, "%s/slow.json", dir);
    const char *base = "train --device cpu --data %s --val-samples 60 --epochs 1 --towers 2 --batch 16 --progress lines";
    snprintf(args, sizeof args, base, dir);
    expect(args, 0, "");
    const char *t = strstr(tt_test_slurp(out_path), "test: ");
    ck_assert_ptr_nonnull(t);
    snprintf(plain, sizeof plain, "%s", t);
    snprintf(args + strlen(args), sizeof args - strlen(args), " --checkpoint-dir %s/ck-plain", dir);
    expect(args, 0, "");
    snprintf(args, sizeof args, base, dir);
    snprintf(args + strlen(args), sizeof args - strlen(args),
             " --slow-tower 1:4~2 --log-json %s --checkpoint-dir %s/ck-slow", log, dir);
    expect(args, 0, "");
    ck_assert_msg(strstr(tt_test_slurp(out_path), plain) != NULL, "a straggler changed the figures: %s",
                  tt_test_slurp(out_path));
    char a_path[512], b_path[512];
    snprintf(a_path, sizeof a_path, "%s/ck-plain/ckpt-e000001-s000000015.safetensors", dir);
    snprintf(b_path, sizeof b_path, "%s/ck-slow/ckpt-e000001-s000000015.safetensors", dir);
    size_t na, nb;
    uint8_t *ca = tt_test_read_file(a_path, &na), *cb = tt_test_read_file(b_path, &nb);
    ck_assert_msg(na == nb && memcmp(ca, cb, na) == 0, "the checkpoints differ: the weights moved with the delay");
    free(ca);
    free(cb);
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char line[1 << 14];
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        json_object *j = json_tokener_parse(line), *ev, *split, *w, *steps;
        if (j && json_object_object_get_ex(j, "event", &ev) && strcmp(json_object_get_string(ev), "epoch") == 0) {
            ck_assert(json_object_object_get_ex(j, "split", &split) && json_object_object_get_ex(split, "wait", &w) &&
                      json_object_object_get_ex(j, "steps", &steps));
            /* tower 0 waits 4..6 ms a step for tower 1: the towers' mean wait is at least 2 ms a step */
            const double per = json_object_get_double(w) / (double)json_object_get_int(steps);
            ck_assert_msg(per >= 1.9e-3, "wait %g s a step with a 4 ms straggler", per);
            seen = 1;
        }
        json_object_put(j);
    }
    fclose(f);
    ck_assert(seen);
    snprintf(args, sizeof args, "probe --device cpu --towers 2 --batch 16 --reps 3 --slow-tower 0:20");
    expect(args, 0, "");
    ck_assert_msg(strstr(tt_test_slurp(out_path), "--slow-tower: the most delayed tower sleeps 20.000 a step "
                         "(expected), the towers' mean 10.000: predicted as compute +10.000, wait +10.000"),
                  "%s", tt_test_slurp(out_path));
    /* the prediction: the cpu placement's step holds the 20 ms (the others wait for tower 0 as long as it sleeps) */
    const char *pred = strstr(tt_test_slurp(out_path), "predicted step (ms):");
    ck_assert_ptr_nonnull(pred);
    const char *row = strstr(pred, "\n       cpu ");
    ck_assert_ptr_nonnull(row);
    double col[8];
    ck_assert_int_eq(sscanf(row, " cpu %lf %lf %lf %lf %lf %lf %lf %lf", &col[0], &col[1], &col[2], &col[3], &col[4],
                            &col[5], &col[6], &col[7]), 8);
    ck_assert_msg(col[2] >= 10 && col[4] >= 10 && col[7] >= 20, "predicted compute %g, wait %g, total %g ms", col[2],
                  col[4], col[7]);
    static const char *const bad[] = {"1", "1:", "x:5", "1:5~", "1:-5", "1:5,", "1:70000", "0:1,0:2"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        snprintf(args, sizeof args, "train --device cpu --data %s --towers 2 --slow-tower '%s'", dir, bad[k]);
        expect(args, 2, "--slow-tower: ");
    }
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --towers 2 --slow-tower 2:5", dir);
    expect(args, 2, "--slow-tower 2: there are 2 towers (0..1)");
    snprintf(args, sizeof args, "probe --assume h100-pcie --slow-tower 0:5");
    expect(args, 2, "probe --assume: --slow-tower does not apply");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --towers 2 --slow-tower 1:5 --graphs on", dir);
    expect(args, 2, "--graphs on"); /* on the CPU backend graphs are refused first; with CUDA: not with --slow-tower */
    /* --epilogues: lt is accepted on the CPU backend (its path is the fallback, sgemm + the fused kernels), a word
     * that is neither kernels nor lt is one line and exit 2 */
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --batch 16 --epochs 1 --progress lines "
             "--epilogues lt --log-json %s/lt.json", dir, dir);
    expect(args, 0, "");
    /* the choice is in the log's start record and the banner: a GPU window's logs say which path ran */
    char lt_log[512];
    snprintf(lt_log, sizeof lt_log, "%s/lt.json", dir);
    ck_assert_msg(strstr(tt_test_slurp(lt_log), "\"epilogues\":\"lt\""), "%s", tt_test_slurp(lt_log));
    ck_assert_msg(strstr(tt_test_slurp(out_path), "--epilogues lt"), "%s", tt_test_slurp(out_path));
    snprintf(args, sizeof args, "train --device cpu --data %s --epilogues bogus", dir);
    expect(args, 2, "--epilogues: 'bogus' is not kernels or lt");
    /* a stop does not wait out a long delay: SIGINT while tower 0 sleeps 30 s ends the run within a second or two */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "exec '%s' train --device cpu --data %s --val-samples 60 --towers 2 --batch 16 "
             "--progress lines --slow-tower 0:30000 >'%s' 2>'%s' </dev/null", TT_BIN, dir, out_path, err_path);
    const pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    const struct timespec wait1 = {1, 500000000};
    nanosleep(&wait1, NULL); /* the data are loaded and tower 0 asleep */
    const double bound = tt_test_prompt(5.0), t0 = tt_now();
    kill(pid, SIGINT);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %d: %s", st, tt_test_slurp(err_path));
    ck_assert_msg(tt_now() - t0 < bound, "the stop waited %.1f s for the delay", tt_now() - t0);
}
END_TEST

/* --overlap on with 8 KiB buckets cuts this model's gradient in two ([6144, 21450) and [0, 6144)): the run's test
 * line equals --overlap off's, the console has the overlap line, the log the hidden/exposed split and every step's
 * bucket count, the trace each tower's bucket pushes and the host's bucket spans; bad values and the combinations it
 * cannot serve are refused with one line. */
START_TEST(test_overlap_run)
{
    char args[1024], log[256], trace[256], model[256], off[4096];
    snprintf(log, sizeof log, "%s/overlap.json", dir);
    snprintf(trace, sizeof trace, "%s/overlap-trace.json", dir);
    snprintf(model, sizeof model, "%s/wide.txt", dir);
    tt_test_write_str(model, "input size=16\ndense units=256 activation=relu\ndense units=64 activation=relu\n"
                             "dense units=10\n");
    const char *base = "train --device cpu --data %s --val-samples 60 --epochs 2 --towers 2 --batch 32 --model %s "
                       "--progress lines --overlap %s";
    snprintf(args, sizeof args, base, dir, model, "off");
    expect(args, 0, "");
    const char *t = strstr(tt_test_slurp(out_path), "test: ");
    ck_assert_ptr_nonnull(t);
    snprintf(off, sizeof off, "%s", t);
    snprintf(args, sizeof args, base, dir, model, "on");
    snprintf(args + strlen(args), sizeof args - strlen(args), " --bucket-kib 8 --log-json %s --trace %s", log, trace);
    expect(args, 0, "");
    const char *o = tt_test_slurp(out_path);
    ck_assert_msg(strstr(o, off) != NULL, "--overlap on: %s\n--overlap off: %s", o, off);
    ck_assert_msg(strstr(o, "  overlap: pushes 0% beside the backward (a GPU's copy engines; none on the CPU) | host "
                         "sum + update: ") != NULL, "%s", o);
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char line[1 << 14];
    size_t epochs = 0, steps = 0;
    while (fgets(line, sizeof line, f)) {
        json_object *j = json_tokener_parse(line), *ev, *v, *split, *towers;
        ck_assert_msg(j != NULL && json_object_object_get_ex(j, "event", &ev), "not JSON: %s", line);
        if (strcmp(json_object_get_string(ev), "epoch") == 0) {
            epochs++;
            ck_assert(json_object_object_get_ex(j, "split", &split));
            const char *keys[] = {"push_hidden", "host_hidden", "host_exposed"};
            for (int k = 0; k < 3; k++)
                ck_assert_msg(json_object_object_get_ex(split, keys[k], &v) && json_object_get_double(v) >= 0,
                              "split lacks %s: %s", keys[k], line);
        } else if (strcmp(json_object_get_string(ev), "step") == 0) {
            steps++;
            ck_assert_msg(json_object_object_get_ex(j, "buckets", &v) && json_object_get_int(v) == 2, "%s", line);
            ck_assert(json_object_object_get_ex(j, "towers", &towers));
            json_object *t0 = json_object_array_get_idx(towers, 0);
            ck_assert_msg(json_object_object_get_ex(t0, "push_hidden", &v) && json_object_get_double(v) > 0, "%s",
                          line);
            ck_assert(json_object_object_get_ex(t0, "bytes_prepull", &v));
        }
        json_object_put(j);
    }
    fclose(f);
    ck_assert_uint_eq(epochs, 2);
    ck_assert_uint_eq(steps, 16); /* 240 samples / 32 -> 8 steps x 2 epochs */
    json_object *tr = json_object_from_file(trace), *events;
    ck_assert_msg(tr != NULL && json_object_object_get_ex(tr, "traceEvents", &events), "trace is not JSON");
    size_t pushes[2] = {0, 0}, host = 0, aheads = 0;
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        json_object *e = json_object_array_get_idx(events, i), *name, *tid;
        json_object_object_get_ex(e, "name", &name);
        const char *nm = json_object_get_string(name);
        if (!json_object_object_get_ex(e, "tid", &tid)) continue;
        const int64_t lane = json_object_get_int64(tid);
        if (strncmp(nm, "push bucket ", 12) == 0 && lane >= 2000 && lane < 2002) pushes[lane - 2000]++;
        host += strncmp(nm, "sum+update bucket ", 18) == 0;
        aheads += strcmp(nm, "pull ahead") == 0 && lane >= 3000 && lane < 3002;
    }
    json_object_put(tr);
    /* 2 buckets x 16 steps on each tower lane; on the host lane, those whose span is not empty */
    /* on each tower's side-copies lane; every step but each run's last pulls the next step's weights ahead */
    ck_assert_msg(pushes[0] == 32 && pushes[1] == 32 && host > 0 && host <= 32 && aheads == 2 * 14,
                  "pushes %zu %zu, host %zu, pulls ahead %zu", pushes[0], pushes[1], host, aheads);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --overlap maybe", dir);
    expect(args, 2, "--overlap: 'maybe' is not");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --overlap on --bucket-kib 4", dir);
    expect(args, 2, "--bucket-kib");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --bucket-kib 64", dir);
    expect(args, 2, "--bucket-kib: the buckets are --overlap on's");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --overlap on --reduce device", dir);
    expect(args, 2, "--overlap on: the host sums and updates each bucket as the towers push it, so it needs --reduce "
                    "cpu and --update host (not --reduce device --update host)");
}
END_TEST

/* bench (CSV), compare (placements agree exactly) and probe (a prediction per placement) on the tiny data set. */
START_TEST(test_measuring_commands)
{
    char args[1024], csv[256];
    snprintf(csv, sizeof csv, "%s/bench.csv", dir);
    snprintf(args, sizeof args, "bench --device cpu --data %s --val-samples 60 --epochs 2 --towers 1,2 --batch 16,32 "
             "--reduce cpu,allreduce --reps 3 --csv %s", dir, csv);
    expect(args, 0, "");
    char *o = tt_test_slurp(out_path);
    ck_assert_msg(strstr(o, "pred ms") != NULL && strstr(o, "allreduce") != NULL, "%s", o);
    FILE *f = fopen(csv, "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    size_t rows = 0;
    while (fgets(line, sizeof line, f)) rows++;
    fclose(f);
    ck_assert_uint_eq(rows, 1 + 2 * 2 * 2); /* header + towers x batches x placements */
    /* --precision as bench's axis: a row per format where the design runs with it, the CSV's last column */
    snprintf(args, sizeof args, "bench --device cpu --data %s --val-samples 60 --epochs 1 --towers 2 --batch 32 "
             "--reduce cpu,device --precision fp32,bf16,fp16 --loss-scale dynamic:1024 --reps 2 --csv %s.p", dir, csv);
    expect(args, 0, "");
    o = tt_test_slurp(out_path);
    ck_assert_msg(strstr(o, "precision bf16: ") && strstr(o, "precision fp16: ") && strstr(o, "precision fp32: ") &&
                      strstr(o, "(skipped: --precision bf16: the host sums"), "%s", o);
    char pcsv[300];
    snprintf(pcsv, sizeof pcsv, "%s.p", csv);
    char *c = tt_test_slurp(pcsv);
    ck_assert_msg(strstr(c, ",data_on,precision\n") && strstr(c, ",host,bf16\n") && strstr(c, ",host,fp16\n") &&
                      tt_test_count_lines(c) == 1 + 4, "%s", c); /* cpu x 3 formats, device x fp32 */
    expect("bench --precision fp32,fp8", 2, "--precision: 'fp32,fp8' is not a list of fp32, bf16 and fp16");
    expect("bench --precision bf16,bf16", 2, "--precision: bf16 is listed twice");
    expect("bench --precision bf16,", 2, "--precision: 'bf16,' ends with a comma");
    snprintf(args, sizeof args, "bench --device cpu --data %s --val-samples 60 --scaling weak --towers 2 --batch 8 "
             "--epochs 1 --reps 2", dir);
    expect(args, 0, "");
    ck_assert_msg(strstr(tt_test_slurp(out_path), "     2     16 ") != NULL, "weak scaling: 2 towers x 8 = batch 16");
    /* with 5 or more epochs a row compares epochs 2-4 with the later ones (subnormals, leaks, growing state) */
    snprintf(args, sizeof args, "bench --device cpu --data %s --val-samples 60 --towers 2 --batch 32 --epochs 5 "
             "--reps 2", dir);
    expect(args, 0, "");
    ck_assert_msg(strstr(tt_test_slurp(out_path), "epochs 2-4 vs 5-5: s/epoch") != NULL, "%s", tt_test_slurp(out_path));
    snprintf(args, sizeof args, "compare --device cpu --data %s --val-samples 60 --towers 3 --batch 32 --bucket-kib 8",
             dir);
    expect(args, 0, "");
    ck_assert_msg(strstr(tt_test_slurp(out_path), "max |dw| between any two placements: 0 ") != NULL, "%s", tt_test_slurp(out_path));
    ck_assert_msg(strstr(tt_test_slurp(out_path), "       cpu       host      on ") != NULL &&
                  strstr(tt_test_slurp(out_path), "       cpu       host     off ") != NULL, "%s", tt_test_slurp(out_path));
    /* --precision as compare's axis: the 16-bit designs agree exactly, the FP32 push and the FP32 step do not */
    snprintf(args, sizeof args, "compare --device cpu --data %s --val-samples 60 --towers 3 --batch 32 --precision fp16 "
             "--loss-scale 1024", dir); /* the FP32 row runs without the scale */
    expect(args, 0, "");
    o = tt_test_slurp(out_path);
    ck_assert_msg(strstr(o, "max |dw| between any two placements: 0 ") != NULL &&
                      strstr(o, "       cpu       host     off    host      fp16 ") != NULL &&
                      strstr(o, "       cpu       host     off  device      fp16 ") != NULL &&
                      strstr(o, "       cpu       host     off    host   fp16/32 ") != NULL &&
                      strstr(o, "       cpu       host     off    host      fp32 ") != NULL,
                  "%s", o);
    expect("probe --device cpu --towers 2 --batch 64 --reps 3 --bucket-kib 8", 0, "");
    o = tt_test_slurp(out_path);
    ck_assert_msg(strstr(o, "predicted step") != NULL && strstr(o, "allreduce") != NULL, "%s", o);
    /* and every design the CPU backend runs, as whole steps: 6 rows (no graphs, no NCCL here) */
    const char *designs[] = {"       cpu       host    off     off |", "       cpu       host    off      on |",
                             "    device       host    off     off |", "    device     device    off     off |",
                             " allreduce       host    off     off |", " allreduce replicated    off     off |"};
    const char *table = strstr(o, "measured whole steps");
    ck_assert_msg(table != NULL, "%s", o);
    for (size_t i = 0; i < sizeof designs / sizeof designs[0]; i++)
        ck_assert_msg(strstr(table, designs[i]) != NULL, "no row '%s' in: %s", designs[i], table);
    ck_assert_msg(strstr(table, "nccl") == NULL && strstr(table, "  on     off |") == NULL, "%s", table);
    expect("bench --scaling sideways", 2, "--scaling");
    snprintf(args, sizeof args, "bench --device cpu --data %s --val-samples 60 --csv /nonexistent/dir/b.csv", dir);
    expect(args, 1, "--csv /nonexistent/dir/b.csv");
    expect("bench --reduce cpu,gpu", 2, "gpu");
    expect("probe --reps 0", 2, "--reps");
}
END_TEST


/* Integers are digits only; floats must survive float32; an option may be given once. */
START_TEST(test_strict_numbers_and_repeats)
{
    expect("train --towers ' 5'", 2, "--towers");
    expect("train --towers '5 '", 2, "--towers");
    expect("train --towers '\t5'", 2, "'\\x095'"); /* a raw tab, shown escaped */
    expect("train --towers +5", 2, "--towers");
    expect("train --epochs 0x10", 2, "--epochs");
    expect("train --lr ' 0.1'", 2, "--lr");
    expect("train --lr '0.1 '", 2, "--lr");
    expect("train --lr +0.5", 2, "--lr"); /* floats: no sign and no hex, as integers */
    expect("train --lr 0x1p-3", 2, "--lr");
    expect("train --lr infinity", 2, "--lr");
    expect("train --lr 1e-46", 2, "0 or subnormal as a float32");
    expect("train --lr 1e-39", 2, "0 or subnormal as a float32"); /* a float32 subnormal: flush-to-zero reads it as 0 */
    expect("train --optimizer sgd --momentum 1e-50", 2, "--momentum");
    expect("train --lr 1e-3 --lr 1e-2", 2, "--lr: given twice");
    expect("train --lr=1e-3 --lr 1e-2", 2, "--lr: given twice");
    expect("train --optimizer sgd --momentum 0.9 --nesterov --nesterov", 2, "--nesterov: given twice");
    expect("train --optimizer rmsprop --centered --centered", 2, "--centered: given twice");
    expect("bench --towers 1 --towers 2", 2, "--towers: given twice");
    expect("probe --reps 2 --reps 3", 2, "--reps: given twice");
    expect("train --log-json --nesterov", 2, "--log-json: missing value"); /* an option is not a value */
    expect("probe --val-samples 5", 2, "probe: --val-samples does not apply"); /* nor silently ignored */
    expect("compare --reduce cpu", 2, "compare: --reduce does not apply");
    expect("bench --trace t.json", 2, "bench: --trace does not apply");
    expect("bench --reps 65", 2, "--reps");
    char args[512];
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --train-samples 251", dir);
    expect(args, 2, "--train-samples 251");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --test-samples 61", dir);
    expect(args, 2, "--test-samples 61");
}
END_TEST

/* The number parsers themselves, as any caller may use them (bench's lists, a future option with a wide range):
 * the float checks must hold on a thread without flush-to-zero (this one: Check's test process never sets it; the
 * executable sets it in main, where it would turn a subnormal into 0 on its own) and for ranges beyond float32. */
START_TEST(test_number_parsers)
{
    tt_error err;
    float f = -1.0f;
    ck_assert_int_eq(tt_cli_float("--x", "0.25", 0, 1e300, 1, &f, &err), TT_OK);
    ck_assert_float_eq(f, 0.25f);
    ck_assert_int_eq(tt_cli_float("--x", "1e30", 0, 1e300, 1, &f, &err), TT_OK);
    ck_assert_float_eq(f, 1e30f);
    ck_assert_int_eq(tt_cli_float("--x", "0", 0, 1, 0, &f, &err), TT_OK); /* 0 itself where the range allows it */
    ck_assert_float_eq(f, 0.0f);
    ck_assert_int_eq(tt_cli_float("--x", "1.2e-38", 0, 1, 1, &f, &err), TT_OK); /* just above FLT_MIN */
    const char *zero[] = {"1e-39", "1e-45", "1e-50"}; /* subnormal as a float32, or 0 */
    for (int i = 0; i < 3; i++) {
        f = -1.0f;
        ck_assert_msg(tt_cli_float("--x", zero[i], 0, 1, 1, &f, &err) == TT_ERR_ARG, "%s accepted as %g", zero[i],
                      (double)f);
        ck_assert_msg(strstr(err.msg, "0 or subnormal as a float32"), "%s: %s", zero[i], err.msg);
        ck_assert_float_eq(f, -1.0f); /* untouched */
    }
    const char *huge[] = {"1e39", "3.5e38", "1e300"};
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(tt_cli_float("--x", huge[i], 0, 1e308, 1, &f, &err) == TT_ERR_ARG, "%s accepted", huge[i]);
        ck_assert_msg(strstr(err.msg, "overflows a float32"), "%s: %s", huge[i], err.msg);
    }
    const char *bad[] = {"", " 1", "1 ", "\t1", "1e", "nan", "inf", "-0.5", "1e400"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(tt_cli_float("--x", bad[i], 0, 1e300, 1, &f, &err) == TT_ERR_ARG, "'%s' accepted", bad[i]);
    size_t n = 0;
    ck_assert_int_eq(tt_cli_size("--n", "42", 1, 100, &n, &err), TT_OK);
    ck_assert_uint_eq(n, 42);
    const char *not_int[] = {"", " 1", "1 ", "+1", "-1", "1.0", "0x10", "101", "0", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof not_int / sizeof not_int[0]; i++)
        ck_assert_msg(tt_cli_size("--n", not_int[i], 1, 100, &n, &err) == TT_ERR_ARG, "'%s' accepted", not_int[i]);
}
END_TEST

/* tt_escape: printable ASCII as is; control characters, DEL and bytes >= 0x80 (UTF-8 included: a name is shown
 * byte by byte rather than trusted to be valid) as \xHH; never a cut escape; never past the buffer. */
START_TEST(test_escape)
{
    char out[64];
    tt_escape("plain name.gz", out, sizeof out);
    ck_assert_str_eq(out, "plain name.gz");
    tt_escape("a\x1b[31m\x7f\x80\xc3\xa9\x9b\n", out, sizeof out);
    ck_assert_str_eq(out, "a\\x1b[31m\\x7f\\x80\\xc3\\xa9\\x9b\\x0a");
    /* a small buffer: whole characters and whole escapes only, terminated, and the byte after it untouched */
    const char *in = "ab\x01" "cd";
    const char *want[] = {"",         "a",         "ab",          "ab",          "ab",         "ab",
                          "ab\\x01", "ab\\x01c", "ab\\x01cd", "ab\\x01cd", "ab\\x01cd"};
    for (size_t len = 1; len <= 11; len++) {
        memset(out, '#', sizeof out);
        tt_escape(in, out, len);
        ck_assert_msg(strcmp(out, want[len - 1]) == 0, "len %zu: '%s', want '%s'", len, out, want[len - 1]);
        ck_assert_msg(out[len] == '#', "len %zu: wrote past the buffer", len);
    }
    memset(out, '#', sizeof out);
    tt_escape("x", out, 0); /* nothing at all */
    ck_assert(out[0] == '#');
}
END_TEST

/* Control characters from files and flags reach the terminal escaped, never raw. */
START_TEST(test_errors_escape_control_characters)
{
    char args[512], p[256];
    snprintf(p, sizeof p, "%s/esc.txt", dir);
    tt_test_write_str(p, "dense units=\x1b[31mred\n");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --model %s", dir, p);
    expect(args, 1, "\\x1b[31mred");
    ck_assert(strchr(tt_test_slurp(err_path), 0x1b) == NULL);
    expect("'bogus\x1b]0;title\x07'", 2, "bogus\\x1b]0;title\\x07");
    ck_assert(strchr(tt_test_slurp(err_path), 0x1b) == NULL && strchr(tt_test_slurp(err_path), 0x07) == NULL);
    expect("train --device cpu --data 'a\nb'", 1, "a\\x0ab"); /* a newline in a name: still one line */
}
END_TEST

/* Every line of a JSON-lines log is whole and parses; returns the last one parsed (caller puts it). A key
 * `below_one` (may be NULL) must be < 1 wherever it appears. */
static json_object *check_log_lines(const char *log, const char *below_one)
{
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    static char line[1 << 16];
    json_object *last = NULL;
    for (size_t n = 1; fgets(line, sizeof line, f); n++) {
        ck_assert_msg(strchr(line, '\n') != NULL, "%s: line %zu cut short: %s", log, n, line);
        json_object *o = json_tokener_parse(line), *v;
        ck_assert_msg(o != NULL, "%s: line %zu is not JSON: %s", log, n, line);
        if (below_one && json_object_object_get_ex(o, below_one, &v))
            ck_assert_msg(json_object_get_double(v) < 1.0, "%s: line %zu: %s", log, n, line);
        json_object_put(last);
        last = o;
    }
    fclose(f);
    ck_assert_ptr_nonnull(last);
    return last;
}

/* A diverging run stops at the failing step: exit 3, one line, a final "error" record, never accuracy 1.0. */
START_TEST(test_divergence_exit_3)
{
    char args[768], log[256], model[256];
    snprintf(log, sizeof log, "%s/nan.json", dir);
    snprintf(model, sizeof model, "%s/linear3.txt", dir);
    /* three linear layers: the weights' product grows geometrically at this rate (ReLUs would just die) */
    tt_test_write_str(model, "dense units=32\ndense units=32\ndense units=10\n");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --epochs 5 --batch 16 --optimizer sgd "
             "--lr 1000 --momentum 0.9 --towers 2 --log-json %s --model %s", dir, log, model);
    expect(args, 3, "is not finite");
    ck_assert_msg(strstr(tt_test_slurp(err_path), "step ") && strstr(tt_test_slurp(err_path), "towers"), "%s", tt_test_slurp(err_path));
    ck_assert_msg(strstr(tt_test_slurp(out_path), "accuracy: 1.0000") == NULL, "%s", tt_test_slurp(out_path));
    json_object *o = check_log_lines(log, "accuracy"), *ev, *towers;
    ck_assert(json_object_object_get_ex(o, "event", &ev));
    ck_assert_str_eq(json_object_get_string(ev), "error");
    ck_assert(json_object_object_get_ex(o, "towers", &towers));
    ck_assert(json_object_array_length(towers) >= 1);
    json_object_put(o);
}
END_TEST

/* Starts `towertrain ARGS` in the background (stdout and stderr to out_path / err_path) and returns its pid. */
static pid_t spawn(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "exec '%s' %s >'%s' 2>'%s' </dev/null", TT_BIN, args, out_path, err_path);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Starts towertrain in the background, waits until its log holds `lines` lines, sends sig and returns the exit
 * code. */
static int run_and_signal(const char *args, const char *log, size_t lines, int sig)
{
    pid_t pid = spawn(args);
    int st;
    for (int i = 0; i < 3000; i++) { /* up to 30 s */
        if (waitpid(pid, &st, WNOHANG) == pid) ck_abort_msg("towertrain ended before the signal: %s", tt_test_slurp(err_path));
        FILE *f = fopen(log, "r");
        size_t n = 0;
        if (f) {
            int ch;
            while ((ch = fgetc(f)) != EOF) n += ch == '\n';
            fclose(f);
        }
        if (n >= lines) break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, sig);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st), "killed by signal %d instead of exiting", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return WEXITSTATUS(st);
}

/* SIGINT mid-epoch: the step in flight finishes, every log line parses, the last is "stopped", the trace parses,
 * exit 130; SIGTERM the same with 143. Batch 2 over 250 samples: an epoch is 125 steps. */
START_TEST(test_signals_stop_cleanly)
{
    const int sigs[2] = {SIGINT, SIGTERM}, codes[2] = {130, 143};
    for (int k = 0; k < 2; k++) {
        char args[1024], log[256], trace[256];
        snprintf(log, sizeof log, "%s/sig%d.json", dir, k);
        snprintf(trace, sizeof trace, "%s/sig%d.trace", dir, k);
        snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --epochs 1000 --batch 2 --towers 2 "
                 "--log-json %s --trace %s --progress bar", dir, log, trace);
        int rc = run_and_signal(args, log, 300, sigs[k]); /* start + one epoch of step records, and more */
        char *e = tt_test_slurp(err_path);
        ck_assert_msg(rc == codes[k], "exit %d want %d: %s", rc, codes[k], e);
        ck_assert_msg(strstr(e, k ? "stopped by SIGTERM" : "stopped by SIGINT"), "%s", e);
        size_t nl = 0;
        for (char *q = e; *q; q++) nl += *q == '\n';
        ck_assert_uint_eq(nl, 1);
        json_object *last = check_log_lines(log, NULL), *ev;
        ck_assert(json_object_object_get_ex(last, "event", &ev));
        ck_assert_str_eq(json_object_get_string(ev), "stopped");
        json_object_put(last);
        json_object *t = json_object_from_file(trace);
        ck_assert_msg(t != NULL, "the trace is not valid JSON after %s", k ? "SIGTERM" : "SIGINT");
        json_object_put(t);
    }
}
END_TEST

/* Issue 31, item 2: what --resume makes of every option is a column of the options table. train --help lists it; a
 * checkpoint keeps the values of the options that must be the same ("same" in its options: --sync, --sync-schedule,
 * --bn-sync, --save-best), and a resume with another is refused in one line naming both (exit 2), while an option
 * that may change (--towers, --reduce, --update; --bn-sync for a model without batchnorm) changes and the run
 * continues — but not the towers where each tower's rows set what it computes (batchnorm per tower). The reference
 * for the lists is the issue's own examples (bsp resumed with async or weights:2, --bn-sync toggled) and a review's
 * (batchnorm per tower on other towers), not the table. */
START_TEST(test_resume_same_options)
{
    char args[1024], ck[256];
    ck_assert_int_eq(run("train --help"), 0);
    const char *h = tt_test_slurp(out_path);
    const char *same = strstr(h, "must be the same (each checkpoint keeps it"), *own = strstr(h, "checked its own way"),
               *free_ = strstr(h, "may change");
    ck_assert_msg(same && own && free_ && same < own && own < free_, "train --help: no resume footer: %s", h);
    const char *must[] = {"--sync,", "--bn-sync,", "--sync-schedule,", "--save-best", "--augment,"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
        const char *at = strstr(same, must[i]);
        ck_assert_msg(at && at < own, "train --help: %s is not among the options that must be the same", must[i]);
    }
    const char *may[] = {"--towers", "--reduce", "--update", "--graphs", "--data-on", "--overlap"};
    for (size_t i = 0; i < sizeof may / sizeof may[0]; i++)
        ck_assert_msg(strstr(free_, may[i]) != NULL, "train --help: %s is not among those that may change", may[i]);
    ck_assert_msg(strstr(free_, "--resume") == NULL, "train --help: --resume listed as an option it may change");
    snprintf(ck, sizeof ck, "%s/same_ck", dir);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --train-samples 40 --epochs 1 --batch 8 "
             "--towers 2 --checkpoint-dir %s --progress quiet", dir, ck);
    ck_assert_msg(run(args) == 0, "%s", tt_test_slurp(err_path));
    const struct {
        const char *flags, *theirs, *mine;
    } bad[] = {{"--sync async", "--sync bsp", "async"},
               {"--sync weights:2", "--sync bsp", "weights:2"},
               {"--save-best val_loss --checkpoint-dir", "--save-best none", "val_loss"}, /* + a new directory */
               {"--augment cifar10", "--augment none", "width=0.1,height=0.1,flip"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char extra[300] = "";
        if (strstr(bad[i].flags, "--checkpoint-dir")) snprintf(extra, sizeof extra, "%s/same_best%zu", dir, i);
        snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --train-samples 40 --epochs 2 "
                 "--batch 8 --towers 2 --resume %s %s %s --progress quiet", dir, ck, bad[i].flags, extra);
        const int rc = run(args);
        const char *e = tt_test_slurp(err_path);
        ck_assert_msg(rc == 2, "resumed with %s: exit %d (%s)", bad[i].flags, rc, e);
        ck_assert_msg(strstr(e, bad[i].theirs) && strstr(e, bad[i].mine) && tt_test_count_lines(e) == 1,
                      "resumed with %s: '%s' does not name both values in one line", bad[i].flags, e);
    }
    /* what may change: 1 tower, the sum on the device, the update on the device — the run goes on; and --bn-sync,
     * which a model without batchnorm computes nothing with */
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --train-samples 40 --epochs 2 --batch 8 "
             "--towers 1 --reduce device --update device --bn-sync on --resume %s --progress quiet", dir, ck);
    ck_assert_msg(run(args) == 0, "resumed with other towers and placements: %s", tt_test_slurp(err_path));
    /* a model with batchnorm statistics per tower (--bn-sync off): the towers set what it computes, so they stay */
    char model[300], ck_bn[300];
    snprintf(model, sizeof model, "%s/bn_model.txt", dir);
    tt_test_write_str(model, "dense units=6\nbatchnorm\nrelu\ndense units=10\n");
    snprintf(ck_bn, sizeof ck_bn, "%s/same_bn", dir);
    snprintf(args, sizeof args, "train --device cpu --data %s --model %s --val-samples 10 --train-samples 40 --epochs 1 "
             "--batch 8 --towers 2 --checkpoint-dir %s --progress quiet", dir, model, ck_bn);
    ck_assert_msg(run(args) == 0, "%s", tt_test_slurp(err_path));
    snprintf(args, sizeof args, "train --device cpu --data %s --model %s --val-samples 10 --train-samples 40 --epochs 2 "
             "--batch 8 --towers 1 --resume %s --progress quiet", dir, model, ck_bn);
    int rc = run(args);
    ck_assert_msg(rc == 2 && strstr(tt_test_slurp(err_path), "trained with 2 towers, this run has 1") &&
                      tt_test_count_lines(tt_test_slurp(err_path)) == 1,
                  "batchnorm per tower resumed on 1 tower: exit %d (%s)", rc, tt_test_slurp(err_path));
    /* and its statistics switched to the global batch's (--bn-sync toggled, the issue's case): refused, both named */
    snprintf(args, sizeof args, "train --device cpu --data %s --model %s --val-samples 10 --train-samples 40 --epochs 2 "
             "--batch 8 --towers 2 --bn-sync on --resume %s --progress quiet", dir, model, ck_bn);
    rc = run(args);
    ck_assert_msg(rc == 2 && strstr(tt_test_slurp(err_path), "--bn-sync off") &&
                      strstr(tt_test_slurp(err_path), "this run has on"),
                  "batchnorm resumed with --bn-sync on: exit %d (%s)", rc, tt_test_slurp(err_path));
}
END_TEST

/* Issue 31, item 4: an output directory that is the data's — --checkpoint-dir or --tensorboard equal to the --data
 * directory, or --tensorboard whose train/ subdirectory holds the data — is refused in one line naming the file it
 * holds (exit 2), before anything is written there: no lock file, no train/ or validation/ beside the data. A
 * checkpoint directory that holds the checkpoint --resume reads is the run's own and stays fine (test above). */
START_TEST(test_output_dir_not_the_data)
{
    char args[1024], sub[300], sub_train[320];
    const char *outs[] = {"--checkpoint-dir", "--tensorboard"};
    for (size_t k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --train-samples 40 --epochs 1 "
                 "--batch 8 %s %s --progress quiet", dir, outs[k], dir);
        const int rc = run(args);
        const char *e = tt_test_slurp(err_path);
        ck_assert_msg(rc == 2, "%s DIR of the data: exit %d (%s)", outs[k], rc, e);
        ck_assert_msg(strstr(e, "a file this run reads as data") && strstr(e, "-ubyte") &&
                          tt_test_count_lines(e) == 1, "%s DIR of the data: '%s'", outs[k], e);
        char p[400];
        struct stat st;
        snprintf(p, sizeof p, "%s/.towertrain.lock", dir);
        ck_assert_msg(stat(p, &st) != 0, "%s DIR of the data: a lock file was left beside the data", outs[k]);
        snprintf(p, sizeof p, "%s/train", dir);
        ck_assert_msg(stat(p, &st) != 0, "%s DIR of the data: train/ was made beside the data", outs[k]);
    }
    /* the data one level down: --tensorboard's train/ would be the data's directory */
    snprintf(sub, sizeof sub, "%s/tbparent", dir);
    snprintf(sub_train, sizeof sub_train, "%s/train", sub);
    ck_assert(mkdir(sub, 0700) == 0 && mkdir(sub_train, 0700) == 0);
    const char *files[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                           "t10k-labels-idx1-ubyte.gz"};
    for (size_t i = 0; i < 4; i++) {
        char from[400], to[400];
        snprintf(from, sizeof from, "%s/%s", dir, files[i]);
        snprintf(to, sizeof to, "%s/%s", sub_train, files[i]);
        size_t n;
        uint8_t *b = tt_test_read_file(from, &n);
        ck_assert_msg(b != NULL, "%s: the test's data set lacks it", from);
        tt_test_write(to, b, n);
        free(b);
    }
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --train-samples 40 --epochs 1 "
             "--batch 8 --tensorboard %s --progress quiet", sub_train, sub);
    int rc = run(args);
    ck_assert_msg(rc == 2 && strstr(tt_test_slurp(err_path), "a file this run reads as data"),
                  "--tensorboard whose train/ is the data's: exit %d (%s)", rc, tt_test_slurp(err_path));
    /* a directory of symbolic links to the data files is the data's directory too */
    char links[320];
    snprintf(links, sizeof links, "%s/links", dir);
    ck_assert(mkdir(links, 0700) == 0);
    for (size_t i = 0; i < 4; i++) {
        char from[400], to[400];
        snprintf(from, sizeof from, "%s/%s", dir, files[i]);
        snprintf(to, sizeof to, "%s/%s", links, files[i]);
        ck_assert(symlink(from, to) == 0);
    }
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --train-samples 40 --epochs 1 "
             "--batch 8 --checkpoint-dir %s --progress quiet", links, links);
    rc = run(args);
    ck_assert_msg(rc == 2 && strstr(tt_test_slurp(err_path), "a file this run reads as data"),
                  "--checkpoint-dir of links to the data: exit %d (%s)", rc, tt_test_slurp(err_path));
}
END_TEST

/* SIGINT with --checkpoint-dir: the run writes a checkpoint at the step boundary, its one line names it, and a run
 * with --resume DIR continues from it to the end. */
START_TEST(test_signal_writes_checkpoint)
{
    char args[1024], log[256], ck[256];
    snprintf(log, sizeof log, "%s/sigck.json", dir);
    snprintf(ck, sizeof ck, "%s/sigck", dir);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --epochs 1000 --batch 2 --towers 2 "
             "--log-json %s --checkpoint-dir %s --progress lines", dir, log, ck);
    int rc = run_and_signal(args, log, 300, SIGINT);
    char *e = tt_test_slurp(err_path);
    ck_assert_msg(rc == 130, "exit %d: %s", rc, e);
    ck_assert_msg(strstr(e, "stopped by SIGINT") && strstr(e, "; checkpoint "), "%s", e);
    DIR *d = opendir(ck);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    unsigned long long epoch = 0, step = 0;
    int found = 0;
    while ((de = readdir(d)) != NULL)
        if (sscanf(de->d_name, "ckpt-e%6llu-s%9llu.safetensors", &epoch, &step) == 2) found++;
    closedir(d);
    ck_assert_msg(found == 1, "%d checkpoints after one stop", found);
    ck_assert_msg(strstr(e, "ckpt-e") != NULL, "the line does not name the file: %s", e);
    /* resume to the end of the next epoch, saving it; and the same epochs straight: the same weights and optimizer
     * state to the bit (the data sections of the two final checkpoints are equal) */
    char ck2[256], ck3[256], f2[512], f3[512];
    snprintf(ck2, sizeof ck2, "%s/sigck_resumed", dir);
    snprintf(ck3, sizeof ck3, "%s/sigck_straight", dir);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --epochs %llu --batch 2 --towers 2 "
             "--resume %s --checkpoint-dir %s --save-every-epoch --progress lines", dir, epoch + 1, ck, ck2);
    ck_assert_msg(run(args) == 0, "the resumed run failed: %s", tt_test_slurp(err_path));
    char *o = tt_test_slurp(out_path);
    ck_assert_msg(strstr(o, "resume: ") != NULL, "%s", o);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --epochs %llu --batch 2 --towers 2 "
             "--checkpoint-dir %s --save-every-epoch --keep 1 --progress quiet", dir, epoch + 1, ck3);
    ck_assert_msg(run(args) == 0, "the straight run failed: %s", tt_test_slurp(err_path));
    snprintf(f2, sizeof f2, "%s/ckpt-e%06llu-s000000145.safetensors", ck2, epoch + 1);
    snprintf(f3, sizeof f3, "%s/ckpt-e%06llu-s000000145.safetensors", ck3, epoch + 1);
    size_t n2, n3;
    uint8_t *b2 = tt_test_read_file(f2, &n2), *b3 = tt_test_read_file(f3, &n3);
    ck_assert_msg(n2 > 8 && n3 > 8, "%s or %s is too short", f2, f3);
    const uint64_t h2 = tt_test_le64(b2), h3 = tt_test_le64(b3);
    ck_assert(8 + h2 <= n2 && 8 + h3 <= n3);
    ck_assert_msg(n2 - 8 - h2 == n3 - 8 - h3 && memcmp(b2 + 8 + h2, b3 + 8 + h3, n2 - 8 - h2) == 0,
                  "stopped by SIGINT after epoch %llu step %llu and resumed: not the straight run's weights", epoch,
                  step);
    free(b2);
    free(b3);
}
END_TEST

/* A .npy file of uint8 samples of the given shape ("(2, 5)"), n bytes of value 7 (version 1, header padded to 128). */
static void write_u1_npy(const char *path, const char *shape, size_t n)
{
    unsigned char buf[128 + 64];
    ck_assert(n <= 64);
    memset(buf, ' ', 128);
    memcpy(buf, "\x93NUMPY\x01\x00\x76\x00", 10);
    int len = snprintf((char *)buf + 10, 118, "{'descr': '|u1', 'fortran_order': False, 'shape': %s, }", shape);
    buf[10 + len] = ' ';
    buf[127] = '\n';
    memset(buf + 128, 7, n);
    tt_test_write(path, buf, 128 + n);
}

/* eval and predict on a checkpoint of a short run: eval's test figures are the ones train printed, every class has a
 * row, predict gives one line per sample with k probabilities in descending order; and their refusals. */
START_TEST(test_eval_and_predict)
{
    char args[1024], ck[256], path[512], log[256], npy[256];
    snprintf(ck, sizeof ck, "%s/evalck", dir);
    snprintf(path, sizeof path, "%s/ckpt-e000002-s000000010.safetensors", ck);
    snprintf(log, sizeof log, "%s/eval.json", dir);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --epochs 2 --batch 24 --towers 2 "
             "--checkpoint-dir %s --save-every-epoch --progress lines", dir, ck);
    ck_assert_msg(run(args) == 0, "%s", tt_test_slurp(err_path));
    char *o = tt_test_slurp(out_path), *t = strstr(o, "test: 60 samples - loss: ");
    ck_assert_msg(t != NULL, "%s", o);
    char want[64];
    float loss, acc;
    ck_assert_int_eq(sscanf(t, "test: 60 samples - loss: %f - accuracy: %f", &loss, &acc), 2);
    snprintf(want, sizeof want, "loss %.4f - accuracy %.4f", (double)loss, (double)acc);
    snprintf(args, sizeof args, "eval --device cpu --checkpoint %s --data %s --towers 3 --log-json %s", path, dir, log);
    ck_assert_msg(run(args) == 0, "%s", tt_test_slurp(err_path));
    o = tt_test_slurp(out_path);
    ck_assert_msg(strstr(o, want) != NULL, "eval does not give train's test figures (%s): %s", want, o);
    ck_assert_msg(strstr(o, "confusion matrix") && strstr(o, "\n     9 "), "%s", o);
    json_object *e = json_object_from_file(log), *v;
    ck_assert_ptr_nonnull(e);
    ck_assert(json_object_object_get_ex(e, "confusion", &v) && json_object_array_length(v) == 10);
    json_object_put(e);
    /* predict on the test images: 60 lines + a header, the top 3 in descending order */
    snprintf(args, sizeof args, "predict --device cpu --checkpoint %s --input %s/t10k-images-idx3-ubyte.gz --top-k 3 "
             "--format jsonl", path, dir);
    ck_assert_msg(run(args) == 0, "%s", tt_test_slurp(err_path));
    o = tt_test_slurp(out_path);
    ck_assert_uint_eq(tt_test_count_lines(o), 60);
    for (char *line = o; *line; line = strchr(line, '\n') + 1) {
        char *nl = strchr(line, '\n');
        *nl = '\0';
        json_object *j = json_tokener_parse(line), *top;
        ck_assert_msg(j && json_object_object_get_ex(j, "top", &top) && json_object_array_length(top) == 3, "%s",
                      line);
        double prev = 2;
        for (size_t k = 0; k < 3; k++) {
            json_object *p;
            ck_assert(json_object_object_get_ex(json_object_array_get_idx(top, k), "p", &p));
            ck_assert_msg(json_object_get_double(p) <= prev, "not descending: %s", line);
            prev = json_object_get_double(p);
        }
        json_object_put(j);
        *nl = '\n';
    }
    /* a model file's checkpoint carries the file's text: eval works with the file gone */
    char mf[256], ck4[256];
    snprintf(mf, sizeof mf, "%s/gone.txt", dir);
    snprintf(ck4, sizeof ck4, "%s/fileck", dir);
    tt_test_write_str(mf, "# a model file\ndense units=8 activation=relu\ndense units=10\n");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 60 --epochs 1 --batch 24 --model %s "
             "--checkpoint-dir %s --progress quiet", dir, mf, ck4);
    ck_assert_msg(run(args) == 0, "%s", tt_test_slurp(err_path));
    unlink(mf);
    snprintf(args, sizeof args, "eval --device cpu --checkpoint %s/ckpt-e000001-s000000010.safetensors --data %s",
             ck4, dir);
    ck_assert_msg(run(args) == 0, "eval of a model file's checkpoint after the file was deleted: %s",
                  tt_test_slurp(err_path));
    /* refusals: one line naming the problem */
    snprintf(npy, sizeof npy, "%s/wrong.npy", dir);
    write_u1_npy(npy, "(2, 5)", 10);
    expect("eval --data /tmp", 2, "eval: --checkpoint FILE is required");
    snprintf(args, sizeof args, "predict --checkpoint %s", path);
    expect(args, 2, "predict: --input FILE is required");
    snprintf(args, sizeof args, "predict --checkpoint %s --input %s --epochs 3", path, npy);
    expect(args, 2, "predict: --epochs does not apply");
    snprintf(args, sizeof args, "predict --device cpu --checkpoint %s --input %s", path, npy);
    expect(args, 1, "the samples are 5, the checkpoint's model takes 4x4x1");
    snprintf(args, sizeof args, "eval --device cpu --checkpoint %s/nope.safetensors --data %s", ck, dir);
    expect(args, 1, "nope.safetensors");
    snprintf(args, sizeof args, "predict --device cpu --checkpoint %s --input %s --top-k 0", path, npy);
    expect(args, 2, "--top-k: '0' is not an integer");
    /* the samples' shape: (4, 4) is the model's 4x4x1; 16 flat values are not, though as many */
    char npy2[256];
    snprintf(npy2, sizeof npy2, "%s/flat.npy", dir);
    write_u1_npy(npy2, "(2, 16)", 32);
    snprintf(args, sizeof args, "predict --device cpu --checkpoint %s --input %s", path, npy2);
    expect(args, 1, "the samples are 16, the checkpoint's model takes 4x4x1");
    snprintf(npy2, sizeof npy2, "%s/square.npy", dir);
    write_u1_npy(npy2, "(2, 4, 4)", 32);
    snprintf(args, sizeof args, "predict --device cpu --checkpoint %s --input %s", path, npy2);
    ck_assert_msg(run(args) == 0, "(2, 4, 4) samples for a 4x4x1 model: %s", tt_test_slurp(err_path));
    snprintf(args, sizeof args, "predict --device cpu --checkpoint %s --input %s --vocab 5", path, npy2);
    expect(args, 2, "--vocab: the checkpoint's model does not start with an embedding");
}
END_TEST

/* The greatest periodic checkpoint name in dir ("" if none). */
static void newest_name(const char *d, char *out, size_t len)
{
    out[0] = '\0';
    DIR *dh = opendir(d);
    if (!dh) return;
    struct dirent *de;
    while ((de = readdir(dh)) != NULL)
        if (strncmp(de->d_name, "ckpt-e", 6) == 0 && strcmp(de->d_name, out) > 0) snprintf(out, len, "%s", de->d_name);
    closedir(dh);
}

/* kill -9 at random moments of a run that writes a checkpoint after every step (--keep 2), again and again, each run
 * resuming from the directory: after every kill the newest checkpoint there reads as valid (checksum included), and
 * it is never older than the one before — a torn write never replaces a good file, and no work is lost beyond the
 * last completed checkpoint. */
START_TEST(test_kill_during_checkpoint_writes)
{
    char ck[256], args[1024], path[4096];
    snprintf(ck, sizeof ck, "%s/killck", dir);
    uint64_t last = 0;
    int survivors = 0;
    tt_rng r;
    tt_rng_seed(&r, 77, 1);
    for (int k = 0; k < 25; k++) {
        snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --epochs 100000 --batch 2 "
                 "--towers 2 --checkpoint-dir %s --save-every-steps 1 --keep 2 --progress quiet%s%s", dir, ck,
                 survivors ? " --resume " : "", survivors ? ck : "");
        char before[256], now[256];
        newest_name(ck, before, sizeof before);
        pid_t pid = spawn(args);
        /* once this run has written a checkpoint of its own (so it is in its stream of writes, however slow a
         * sanitizer build starts), kill it 0-40 ms later */
        for (int i = 0; i < 2000; i++) {
            newest_name(ck, now, sizeof now);
            if (strcmp(now, before) != 0) break;
            struct timespec poll = {0, 10000000};
            nanosleep(&poll, NULL);
        }
        struct timespec ts = {0, (long)tt_rng_below(&r, 40) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFSIGNALED(st), "the run ended before the kill: %s", tt_test_slurp(err_path));
        tt_checkpoint c;
        tt_error err;
        size_t skipped;
        if (tt_ckpt_newest(ck, NULL, &c, path, sizeof path, &skipped, &err) != TT_OK) {
            ck_assert_msg(!survivors, "after a kill, no valid checkpoint is left: %s", err.msg);
            continue; /* killed before the first one */
        }
        ck_assert_msg(skipped == 0, "kill %d: %zu newer checkpoints are torn", k, skipped);
        ck_assert_msg(c.global_step >= last, "kill %d: the newest checkpoint went back from step %llu to %llu", k,
                      (unsigned long long)last, (unsigned long long)c.global_step);
        last = c.global_step;
        survivors++;
        tt_checkpoint_free(&c);
    }
    ck_assert_msg(survivors == 25, "only %d of 25 runs wrote a checkpoint before the kill", survivors);
    /* a run's saves delete the temporaries earlier kills left: at most the last kill's is there */
    DIR *dh = opendir(ck);
    ck_assert_ptr_nonnull(dh);
    struct dirent *de;
    int temps = 0, ckpts = 0;
    while ((de = readdir(dh)) != NULL) {
        temps += strncmp(de->d_name, ".ckpt-e", 7) == 0;
        ckpts += strncmp(de->d_name, "ckpt-e", 6) == 0;
    }
    closedir(dh);
    ck_assert_msg(temps <= 1, "%d temporaries left behind", temps);
    ck_assert_msg(ckpts <= 3, "%d checkpoints with --keep 2 (a kill between a write and its pruning leaves 3)", ckpts);
}
END_TEST

/* Is process pid running towertrain, and does it hold a descriptor for the file `want`? (Compared by device and
 * inode through /proc/PID/exe and /proc/PID/fd: between fork and exec, the child is a copy of this test process.) */
static int towertrain_holds(pid_t pid, const struct stat *want)
{
    char link[64];
    struct stat exe, bin;
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    if (stat(link, &exe) != 0 || stat(TT_BIN, &bin) != 0 || exe.st_dev != bin.st_dev || exe.st_ino != bin.st_ino)
        return 0;
    for (int fd = 0; fd < 64; fd++) {
        struct stat st;
        snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)pid, fd);
        if (stat(link, &st) == 0 && st.st_dev == want->st_dev && st.st_ino == want->st_ino) return 1;
    }
    return 0;
}

/* A second signal exits at once, even where the run cannot reach the end of a step: here it is blocked writing its
 * log into a FIFO that the test has filled and never reads. Once towertrain has opened the log (its descriptor shows
 * in /proc), every way out of the run writes to the log first, so SIGINT — which only raises the flag — leaves it
 * blocked (checked 0.2 s later), and SIGTERM must then end it with exit 143 at once (bound: 10 s, for a loaded
 * machine). */
START_TEST(test_second_signal_exits_at_once)
{
    char fifo[256], args[1024];
    snprintf(fifo, sizeof fifo, "%s/log.fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    struct stat fifo_st;
    ck_assert_int_eq(stat(fifo, &fifo_st), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* the reader that never reads */
    ck_assert_int_ge(rd, 0);
    int wr = open(fifo, O_WRONLY | O_NONBLOCK);
    ck_assert_int_ge(wr, 0);
    static char fill[4096];
    memset(fill, 'x', sizeof fill);
    size_t filled = 0;
    for (size_t chunk = sizeof fill; chunk >= 1; chunk /= 2) /* to the last byte the pipe takes */
        for (ssize_t w; (w = write(wr, fill, chunk)) > 0;) filled += (size_t)w;
    ck_assert_msg(filled >= 4096, "the FIFO took only %zu bytes", filled);
    close(wr);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 10 --epochs 1000 --batch 2 --towers 2 "
             "--progress quiet --log-json %s", dir, fifo);
    pid_t pid = spawn(args);
    int st = 0, opened = 0, gone = 0, alive_after_sigint = 0, exited = 0;
    const struct timespec tick = {0, 10000000}, pause = {0, 200000000};
    for (int i = 0; i < 3000 && !opened && !gone; i++) { /* up to 30 s */
        gone = waitpid(pid, &st, WNOHANG) == pid;
        opened = !gone && towertrain_holds(pid, &fifo_st);
        if (!opened) nanosleep(&tick, NULL);
    }
    if (opened) {
        kill(pid, SIGINT);
        nanosleep(&pause, NULL);
        alive_after_sigint = waitpid(pid, &st, WNOHANG) == 0;
        if (alive_after_sigint) {
            kill(pid, SIGTERM);
            for (int i = 0; i < 1000 && !(exited = waitpid(pid, &st, WNOHANG) == pid); i++) nanosleep(&tick, NULL);
        }
    }
    if (!gone && !exited && !(opened && !alive_after_sigint)) { /* never leave it blocked behind */
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    close(rd);
    ck_assert_msg(!gone, "towertrain ended before it opened its log: %s", tt_test_slurp(err_path));
    ck_assert_msg(opened, "towertrain did not open its log within 30 s");
    ck_assert_msg(alive_after_sigint, "one SIGINT ended a run blocked in a write (status 0x%x; it should only raise "
                  "the flag)", st);
    ck_assert_msg(exited, "a second signal did not end the run within 10 s");
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 143, "the second signal (SIGTERM): status 0x%x, want exit 143",
                  st);
    ck_assert_msg(strstr(tt_test_slurp(err_path), "a second signal: exiting at once"), "%s", tt_test_slurp(err_path));
}
END_TEST

/* A write that fails — /dev/full, a closed pipe — is one line and exit 1 when it happens. */
START_TEST(test_failed_writes)
{
    char args[1024], cmd[2048];
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --epochs 2 --log-json /dev/full", dir);
    expect(args, 1, "--log-json /dev/full: write failed: No space left on device");
    /* the trace fails; the log still ends with a record of why */
    char tlog[256];
    snprintf(tlog, sizeof tlog, "%s/tfull.json", dir);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --epochs 2 --trace /dev/full "
             "--log-json %s", dir, tlog);
    expect(args, 1, "--trace /dev/full: write failed");
    json_object *last = check_log_lines(tlog, NULL), *ev, *kind;
    ck_assert(json_object_object_get_ex(last, "event", &ev) && json_object_object_get_ex(last, "kind", &kind));
    ck_assert_str_eq(json_object_get_string(ev), "error");
    ck_assert_str_eq(json_object_get_string(kind), "io");
    json_object_put(last);
    snprintf(args, sizeof args, "bench --device cpu --data %s --val-samples 50 --epochs 1 --towers 1 --reps 2 "
             "--csv /dev/full", dir);
    expect(args, 1, "--csv /dev/full: write failed");
    ck_assert_msg(strstr(tt_test_slurp(out_path), "towertrain bench |") != NULL, /* the banner still says what ran */
                  "%s", tt_test_slurp(out_path));
    /* --resume with a stdout that fails at the banner: the checkpoint is never read, nothing leaks (ASan) */
    char ckd[256];
    snprintf(ckd, sizeof ckd, "%s/full-ck", dir);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --epochs 1 --checkpoint-dir %s "
             "--progress quiet", dir, ckd);
    expect(args, 0, "");
    snprintf(cmd, sizeof cmd, "'%s' train --device cpu --data %s --val-samples 50 --epochs 2 --resume %s "
             ">/dev/full 2>'%s'", TT_BIN, dir, ckd, err_path);
    int rst = system(cmd);
    ck_assert_msg(WIFEXITED(rst) && WEXITSTATUS(rst) == 1 && tt_test_count_lines(tt_test_slurp(err_path)) == 1 &&
                  strstr(tt_test_slurp(err_path), "stdout: write failed"), "status 0x%x: %s", rst,
                  tt_test_slurp(err_path));
    /* stdout itself: the banner's flush fails, so the run stops there, before any training (its log holds the
     * "start" record only), not after training with the exit's own check */
    char log[256], trace[256];
    snprintf(log, sizeof log, "%s/full.json", dir);
    snprintf(trace, sizeof trace, "%s/full.trace", dir);
    snprintf(cmd, sizeof cmd,
             "'%s' train --device cpu --data %s --val-samples 50 --epochs 2 --log-json '%s' --trace '%s' "
             ">/dev/full 2>'%s'", TT_BIN, dir, log, trace, err_path);
    int st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    ck_assert_msg(strstr(tt_test_slurp(log), "\"event\":\"start\"") && !strstr(tt_test_slurp(log), "\"event\":\"epoch\""),
                  "a run whose stdout fails trained on: %s", tt_test_slurp(log));
    /* no step ran: the trace (opened after the banner, written before an epoch's console line) holds none */
    struct stat tst;
    ck_assert_msg(stat(trace, &tst) != 0 || strstr(tt_test_slurp(trace), "forward+backward") == NULL,
                  "a run whose stdout failed at the banner trained an epoch");
    ck_assert_msg(strstr(tt_test_slurp(err_path), "stdout: write failed: No space left on device"), "%s", tt_test_slurp(err_path));
    snprintf(cmd, sizeof cmd, "'%s' --help >/dev/full 2>'%s'", TT_BIN, err_path);
    st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    /* a pipe whose reader has gone: EPIPE, not death by SIGPIPE and not exit 0 */
    char rc_path[256];
    snprintf(rc_path, sizeof rc_path, "%s/rc", dir);
    snprintf(cmd, sizeof cmd, "{ '%s' train --device cpu --data %s --val-samples 50 --epochs 200 --batch 8 "
             "--progress lines 2>'%s'; echo $? >'%s'; } | head -c 1 >/dev/null", TT_BIN, dir, err_path, rc_path);
    st = system(cmd);
    ck_assert(WIFEXITED(st));
    ck_assert_msg(atoi(tt_test_slurp(rc_path)) == 1, "exit %s after its reader left", tt_test_slurp(rc_path));
    ck_assert_msg(strstr(tt_test_slurp(err_path), "stdout: write failed: Broken pipe"), "%s", tt_test_slurp(err_path));
    /* a live bar whose reader leaves after the first one: the failed write is noticed while the crew runs (a wide
     * model at batch 1 makes an epoch last well over the bar's 0.1 s), the run halts at the next step and says so
     * as the failed write (exit 1), not as a stop */
    char wide[256];
    snprintf(wide, sizeof wide, "%s/wide.txt", dir);
    const char *wide_model = "dense units=2048 activation=relu\ndense units=2048 activation=relu\ndense units=10\n";
    tt_test_write(wide, wide_model, strlen(wide_model));
    snprintf(cmd, sizeof cmd, "{ '%s' train --device cpu --data %s --model %s --val-samples 50 --epochs 20 --batch 1 "
             "--progress bar 2>'%s'; echo $? >'%s'; } | awk '/^Epoch 1\\//{exit}'", TT_BIN, dir, wide, err_path,
             rc_path);
    st = system(cmd);
    ck_assert(WIFEXITED(st));
    ck_assert_msg(atoi(tt_test_slurp(rc_path)) == 1, "exit %s after its reader left mid-epoch: %s",
                  tt_test_slurp(rc_path), tt_test_slurp(err_path));
    ck_assert_msg(strstr(tt_test_slurp(err_path), "stdout: write failed: Broken pipe") &&
                  tt_test_count_lines(tt_test_slurp(err_path)) == 1, "%s", tt_test_slurp(err_path));
}
END_TEST

/* Crashes found in passing: a progress bar with no console, the probe's staging for large shards. */
START_TEST(test_crash_regressions)
{
    char args[1024], model[256];
    snprintf(args, sizeof args, "compare --device cpu --data %s --val-samples 50 --progress bar", dir);
    expect(args, 0, "");
    snprintf(model, sizeof model, "%s/small.txt", dir);
    tt_test_write_str(model, "dense units=10\n");
    snprintf(args, sizeof args, "probe --device cpu --batch 4096 --reps 2 --model %s", model);
    expect(args, 0, ""); /* under ASan a write past the pinned staging buffer fails here */
}
END_TEST

/* The memory budget: a model too big for any machine is refused before allocation, naming the model file; a batch
 * larger than the data is sized by the data. */
START_TEST(test_memory_budget)
{
    char args[1024], model[256], line[64];
    snprintf(model, sizeof model, "%s/huge.txt", dir);
    FILE *f = fopen(model, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 20; i++) fputs("dense units=65536 activation=relu\n", f);
    snprintf(line, sizeof line, "dense units=10\n");
    fputs(line, f);
    fclose(f);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --model %s", dir, model);
    expect(args, 1, "model file");
    ck_assert_msg(strstr(tt_test_slurp(err_path), "largest part") && strstr(tt_test_slurp(err_path), "huge.txt"), "%s",
                  tt_test_slurp(err_path));
    snprintf(args, sizeof args, "probe --device cpu --model %s", model);
    expect(args, 1, "huge.txt");
    snprintf(args, sizeof args, "bench --device cpu --data %s --val-samples 50 --model %s", dir, model);
    expect(args, 1, "huge.txt");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --epochs 1 --batch 1048576 --towers 2",
             dir);
    expect(args, 0, "");
    ck_assert_msg(strstr(tt_test_slurp(out_path), "shards sized for 250"), "%s", tt_test_slurp(out_path));
}
END_TEST

/* Runs expect() and fails if it took a second or more: what must be refused must not be waited on. */
static void expect_fast(const char *args, int code, const char *fragment)
{
    const double bound = tt_test_prompt(1.0), t0 = tt_now();
    expect(args, code, fragment);
    ck_assert_msg(tt_now() - t0 < bound, "towertrain %s took %.2f s (bound %.1f s on this machine now)", args,
                  tt_now() - t0, bound);
}

/* A probe is refused before it measures anything when one of the trainers it will build does not fit (cnn at
 * 4096 rows: 5 GB; it used to measure the step's GEMMs at those shapes first, 16 s here — hours at --batch 100000),
 * and a signal during its GEMM measurement stops it within one GEMM call, not one whole step's GEMMs (3 s here). */
START_TEST(test_probe_refuses_and_stops_promptly)
{
    setenv("TT_MEM_LIMIT", "1000000000", 1);
    expect_fast("probe --device cpu --model cnn --batch 4096 --reps 2", 1, "largest part: activations");
    unsetenv("TT_MEM_LIMIT");
    char model[256], args[1024];
    snprintf(model, sizeof model, "%s/heavy.txt", dir); /* 2.5 GFLOP a sample, 0.5 MB of activations */
    tt_test_write_str(model, "input shape=16,16,256\nconv2d filters=256 kernel=5 padding=same\nflatten\n"
                             "dense units=10\n");
    snprintf(args, sizeof args, "probe --device cpu --model %s --batch 256 --reps 2", model);
    pid_t pid = spawn(args);
    struct timespec ts = {3, 0}; /* the link measurements take milliseconds: by now it is in the GEMMs' first rep */
    nanosleep(&ts, NULL);
    int st;
    ck_assert_msg(waitpid(pid, &st, WNOHANG) == 0, "the probe ended before the signal: %s", tt_test_slurp(err_path));
    const double bound = tt_test_prompt(1.0), t0 = tt_now();
    kill(pid, SIGINT);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    const double took = tt_now() - t0;
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status 0x%x: %s", st, tt_test_slurp(err_path));
    ck_assert_msg(strstr(tt_test_slurp(err_path), "stopped by SIGINT"), "%s", tt_test_slurp(err_path));
    ck_assert_msg(took < bound, "the probe took %.2f s to stop after SIGINT (bound %.1f s)", took, bound);
}
END_TEST

/* A FIFO in place of a data file, a model file or the log is refused at once; nothing waits for a writer or a
 * reader. A gzip that inflates past the memory available stops with one line. */
START_TEST(test_hostile_files)
{
    char args[1024], p[256], fifo[256];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --model %s", dir, fifo);
    expect_fast(args, 1, "not a regular file");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --epochs 1 --log-json %s", dir, fifo);
    expect_fast(args, 1, "no process is reading");
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", dir);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(rename(fifo, p), 0);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50", dir);
    expect_fast(args, 1, "t10k-labels-idx1-ubyte.gz: not a regular file");
    unlink(p);
    make_data();
    /* an output that is an input of the run, or another output, is refused before it is truncated */
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", dir);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --epochs 1 --log-json %s", dir, p);
    expect(args, 2, "refusing to overwrite an input");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --epochs 1", dir);
    expect(args, 0, ""); /* the data are intact */
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 50 --epochs 1 --log-json %s/same "
             "--trace %s/same", dir, dir, dir);
    expect(args, 2, "is already open as --log-json");
    /* 20,000 all-zero 28x28 images: 15.7 MB that deflate to a few KB, with 8 MB allowed */
    uint32_t dims[3] = {20000, 28, 28};
    unsigned char *zeros = (unsigned char *)calloc(20000 * 784, 1);
    ck_assert_ptr_nonnull(zeros);
    write_idx("train-images-idx3-ubyte.gz", 3, dims, zeros, 20000 * 784);
    free(zeros);
    setenv("TT_MEM_LIMIT", "8000000", 1);
    expect(args, 1, "do not fit in the 8.0 MB of host memory available (TT_MEM_LIMIT)");
    unsetenv("TT_MEM_LIMIT");
    make_data();
    /* the run's own budget under the same kind of limit names its largest part */
    setenv("TT_MEM_LIMIT", "100000", 1);
    expect(args, 1, "largest part");
    unsetenv("TT_MEM_LIMIT");
}
END_TEST

/* towertrain summary: Keras's parameter counts for the built-in models (the seed's Reuters textcnn layer by layer,
 * the Keras cifar10_cnn example), a model built for --data, and its refusals; a conv model file trains. */
static void expect_stdout(const char *args, const char *const *fragments)
{
    expect(args, 0, "");
    const char *o = tt_test_slurp(out_path);
    for (const char *const *f = fragments; *f; f++)
        ck_assert_msg(strstr(o, *f) != NULL, "towertrain %s: stdout lacks '%s':\n%s", args, *f, o);
}

START_TEST(test_summary_and_models)
{
    static const char *const textcnn[] = {"embedding (Embedding)", "(None, 300, 7)", "216,874", "conv1d (Conv1D)",
                                          "2,304", "conv1d_1 (Conv1D)", "6,176", "dense (Dense)", "(None, 46)",
                                          "107,502", "Total params: 332,856", NULL};
    expect_stdout("summary --model textcnn", textcnn);
    static const char *const cnn[] = {"conv2d_3 (Conv2D)", "(None, 13, 13, 64)", "36,928", "(None, 2304)",
                                      "1,180,160", "Total params: 1,250,858", NULL};
    expect_stdout("summary --model cnn", cnn);
    static const char *const vocab[] = {"(None, 300, 7)", "700", NULL}; /* --vocab 100: 100 x 7 embeddings */
    expect_stdout("summary --model textcnn --vocab 100", vocab);
    char args[512], p[256];
    snprintf(p, sizeof p, "%s/conv.txt", dir);
    tt_test_write_str(p, "input shape=4,4,1\nconv2d filters=3 kernel=3 padding=same activation=relu\nmaxpool2d\n"
                         "dropout rate=0.2\nflatten\ndense units=10 activation=softmax\n");
    static const char *const file[] = {"(None, 4, 4, 3)", "(None, 2, 2, 3)", "Total params: 160", "using default",
                                       NULL};
    snprintf(args, sizeof args, "summary --model %s", p);
    expect_stdout(args, file);
    snprintf(args, sizeof args, "summary --model %s --data %s", p, dir);
    expect_stdout(args, file);
    snprintf(args, sizeof args,
             "train --device cpu --data %s --val-samples 50 --epochs 2 --towers 2 --batch 32 --model %s", dir, p);
    expect(args, 0, "");
    /* every measuring command takes a conv model: its GEMMs, scratch and shapes come from the layers */
    snprintf(args, sizeof args, "probe --device cpu --model %s --towers 2 --batch 16 --reps 2", p);
    expect(args, 0, "");
    snprintf(args, sizeof args, "probe --device cpu --model %s --data %s --towers 2 --batch 16 --reps 2", p, dir);
    expect(args, 0, "");
    snprintf(args, sizeof args, "bench --device cpu --model %s --data %s --val-samples 50 --towers 1,2 --batch 32 "
             "--epochs 1 --reps 2", p, dir);
    expect(args, 0, "");
    ck_assert_msg(strstr(tt_test_slurp(out_path), "ratio") != NULL, "%s", tt_test_slurp(out_path));
    snprintf(args, sizeof args, "compare --device cpu --model %s --data %s --val-samples 50 --batch 32", p, dir);
    expect(args, 0, "");
    ck_assert_msg(strstr(tt_test_slurp(out_path), "max |dw| between any two placements: 0 ") != NULL, "%s", tt_test_slurp(out_path));
    snprintf(args, sizeof args, "summary --model cnn --data %s", dir); /* 4x4 images: the cnn does not fit */
    expect(args, 1, "window does not fit");
    snprintf(args, sizeof args, "summary --model textcnn --data %s", dir);
    expect(args, 1, "built-in textcnn: needs sequences of token ids");
    expect("summary --model mlp --epochs 3", 2, "summary: --epochs does not apply");
    expect("summary --model mlp --vocab 0", 2, "--vocab");
    expect("summary --model /nonexistent/m.txt", 1, "/nonexistent/m.txt");
    tt_test_write_str(p, "conv2d filters=3 kernel=9\nflatten\ndense units=10\n");
    snprintf(args, sizeof args, "summary --model %s --data %s", p, dir);
    expect(args, 1, "a 9x9 window does not fit");
    tt_test_write_str(p, "flatten\ndense units=10\nsoftmax\nrelu\n");
    expect(args, 1, "softmax must be the last layer");
    tt_test_write_str(p, "dropout rate=1.5\n");
    expect(args, 1, "rate must be a number in [0, 0.99]");
    tt_test_write_str(p, "dropout rate=1e-50\nflatten\ndense units=10\n"); /* 0 as a float32: not what was written */
    expect(args, 1, "rate must be a number");
    tt_test_write_str(p, "input shape=16777216,16777216,16777216\nflatten\ndense units=10\n");
    expect(args, 1, "input: a sample of more than");
    tt_test_write_str(p, "input size=16\nconv2d filters=2 kernel=2\nflatten\ndense units=10\n"); /* 4x4 seen flat */
    expect(args, 1, "conv2d needs an (H, W, C) input, got 16");
    tt_test_write_str(p, "conv2d filters=3 kernel=3 padding=full\n");
    expect(args, 1, "padding must be same or valid");
    tt_test_write_str(p, "dense units=10\nembedding dim=3\n");
    expect(args, 1, "an embedding must be the first layer");
    tt_test_write_str(p, "conv2d filters=3 kernel=2\nconv2d filters=3 kernel=2\ndense units=10\n");
    expect(args, 1, "dense needs a flat input");
    /* parameter counts whose size_t product wraps to 0: refused, not counted as the bias alone */
    snprintf(args, sizeof args, "summary --model %s", p);
    tt_test_write_str(p, "input shape=1,1,16777216\nconv2d filters=65536 kernel=4096 padding=same\nflatten\n"
                         "dense units=10\n"); /* 4096 * 4096 * 2^24 * 65536 = 2^64 */
    expect(args, 1, "conv2d: too many parameters");
    tt_test_write_str(p, "input shape=16777216,16777216\ndense units=65536\ndense units=10\n"); /* 2^48 inputs */
    expect(args, 1, "input: a sample of more than"); /* refused before its 2^64 parameters are counted */
    tt_test_write_str(p, "input shape=8,,8\nflatten\ndense units=10\n"); /* not silently 8,8 */
    expect(args, 1, "input: shape must be 1 to 3 positive integers");
    tt_test_write_str(p, "input shape=\nflatten\ndense units=10\n");
    expect(args, 1, "input: shape must be 1 to 3 positive integers");
    /* --vocab names the first embedding's vocabulary: not for a model without one, not against a file's vocab= */
    expect("summary --model cnn --vocab 5", 2, "--vocab: built-in cnn does not start with an embedding");
    tt_test_write_str(p, "input shape=20\nembedding dim=4 vocab=100\nflatten\ndense units=3\n");
    snprintf(args, sizeof args, "summary --model %s --vocab 10", p);
    expect(args, 2, "sets vocab=100 for its embedding");
}
END_TEST

/* probe --json and --assume FILE at the command line: one line each, the exit code of README's table — a bad flag or
 * spec 2, a file that is not a profile 1. (test_assume reads and refuses the profiles themselves.) */
START_TEST(test_probe_json_and_measured_profiles)
{
    char args[1024], path[256];
    expect("probe --help", 0, "");
    ck_assert_msg(strstr(tt_test_slurp(out_path), "--json FILE") && strstr(tt_test_slurp(out_path), "h200-measured"),
                  "probe --help: %s", tt_test_slurp(out_path));
    expect("probe --json", 2, "--json: missing value");
    snprintf(args, sizeof args, "probe --json %s/a.json --json %s/b.json", dir, dir);
    expect(args, 2, "--json: given twice");
    /* --assume with --json: every design's predicted step for 1-8 GPUs, one object (tools/gpu-check --bundle holds
     * them against the steps it measured) */
    snprintf(path, sizeof path, "%s/whatif.json", dir);
    snprintf(args, sizeof args, "probe --assume h200-measured --json %s", path);
    expect(args, 0, "");
    json_object *wj = json_object_from_file(path);
    ck_assert_msg(wj != NULL, "probe --assume --json: %s is not JSON", path);
    json_object *v, *designs;
    ck_assert(json_object_object_get_ex(wj, "schema", &v) &&
              strcmp(json_object_get_string(v), "towertrain-whatif") == 0);
    ck_assert(json_object_object_get_ex(wj, "designs", &designs) && json_object_is_type(designs, json_type_array));
    int towers_seen[9] = {0}, base = 0;
    for (size_t i = 0; i < json_object_array_length(designs); i++) {
        json_object *d = json_object_array_get_idx(designs, i), *t, *r, *u, *g, *o, *total;
        ck_assert(json_object_object_get_ex(d, "towers", &t) && json_object_object_get_ex(d, "reduce", &r) &&
                  json_object_object_get_ex(d, "update", &u) && json_object_object_get_ex(d, "graphs", &g) &&
                  json_object_object_get_ex(d, "overlap", &o) && json_object_object_get_ex(d, "total_s", &total));
        const int n = json_object_get_int(t);
        ck_assert(n >= 1 && n <= 8);
        towers_seen[n] = 1;
        ck_assert_msg(json_object_get_double(total) > 0, "a design's step is not > 0");
        if (json_object_get_boolean(o)) /* --overlap on: --reduce cpu, --update host, no graphs, as train refuses */
            ck_assert(strcmp(json_object_get_string(r), "cpu") == 0 && !json_object_get_boolean(g) &&
                      strcmp(json_object_get_string(u), "host") == 0);
        base += n == 1 && strcmp(json_object_get_string(r), "cpu") == 0 &&
                strcmp(json_object_get_string(u), "host") == 0 && !json_object_get_boolean(g) &&
                !json_object_get_boolean(o);
    }
    for (int n = 1; n <= 8; n++) ck_assert_msg(towers_seen[n], "no design of %d GPUs", n);
    ck_assert_int_eq(base, 1);
    json_object_put(wj);
    snprintf(args, sizeof args, "probe --assume %s/", dir); /* a directory: a file by its '/' */
    expect(args, 1, "not a regular file (a directory)");
    snprintf(path, sizeof path, "%s/junk.json", dir);
    tt_test_write_str(path, "{\"schema\":\"towertrain-probe\", \"version\":1,");
    snprintf(args, sizeof args, "probe --assume %s", path);
    expect(args, 1, "junk.json: the profile is not JSON");
    ck_assert_uint_eq(tt_test_count_lines(tt_test_slurp(err_path)), 1);
    tt_test_write_str(path, "{\"schema\":\"towertrain-probe\", \"version\":7}");
    expect(args, 1, "junk.json: version: 7, this build reads version 1");
    snprintf(args, sizeof args, "probe --assume h100-pcie,bogus=1,%s", path); /* the file is read first, then keys */
    expect(args, 1, "junk.json: version");
    snprintf(args, sizeof args, "probe --assume h100-pcie,bogus=1");
    expect(args, 2, "--assume: unknown key 'bogus'");
    expect("probe --assume h200-measured --batch 128", 0, "");
    ck_assert_msg(strstr(tt_test_slurp(out_path), "PREDICTED from figures recorded on that GPU") &&
                      strstr(tt_test_slurp(out_path), "measured GEMM table: 3 shapes"),
                  "%s", tt_test_slurp(out_path));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_help_and_version);
    tcase_add_test(tc, test_bad_flags);
    tcase_add_test(tc, test_bad_files);
    tcase_add_test(tc, test_device_auto);
    tcase_add_test(tc, test_device_and_gpus_values);
    tcase_add_test(tc, test_nccl_refused);
    tcase_add_test(tc, test_small_run_and_json_log);
    tcase_add_test(tc, test_rmsprop_run);
    tcase_add_test(tc, test_trace_file);
    tcase_add_test(tc, test_overlap_run);
    tcase_add_test(tc, test_measuring_commands);
    tcase_add_test(tc, test_strict_numbers_and_repeats);
    tcase_add_test(tc, test_number_parsers);
    tcase_add_test(tc, test_escape);
    tcase_add_test(tc, test_errors_escape_control_characters);
    tcase_add_test(tc, test_divergence_exit_3);
    tcase_add_test(tc, test_signals_stop_cleanly);
    tcase_add_test(tc, test_signal_writes_checkpoint);
    tcase_add_test(tc, test_resume_same_options);
    tcase_add_test(tc, test_output_dir_not_the_data);
    tcase_add_test(tc, test_kill_during_checkpoint_writes);
    tcase_add_test(tc, test_eval_and_predict);
    tcase_add_test(tc, test_second_signal_exits_at_once);
    tcase_add_test(tc, test_failed_writes);
    tcase_add_test(tc, test_crash_regressions);
    tcase_add_test(tc, test_memory_budget);
    tcase_add_test(tc, test_probe_refuses_and_stops_promptly);
    tcase_add_test(tc, test_probe_json_and_measured_profiles);
    tcase_add_test(tc, test_hostile_files);
    tcase_add_test(tc, test_augment_cli);
    tcase_add_test(tc, test_slow_tower);
    tcase_add_test(tc, test_summary_and_models);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
