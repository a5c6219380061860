/* train_opts.c — the options table of a run (tt_run_opts, tt_train.h): every option, in --help's order, with how the
 * command line reads it, where its value goes, and which records carry it; and the walks every reader shares: a row's
 * value as a number and as words, its record key, the copy into the trainer's configuration, the table's own check.
 * Not for: reading a command line or printing --help (src/cmd/cli.c), or writing the records (train_ranks.c,
 * train_report.c, train_ckpt.c: each gives its own fields' places and walks the rows at the others). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_train.h"

#define CFG(f) .field = offsetof(tt_run_config, f), .field_size = sizeof(((tt_run_config *)0)->f)
#define TC(f) .trainer = 1 + offsetof(tt_trainer_config, f), .trainer_size = sizeof(((tt_trainer_config *)0)->f)
#define RANKS(p) [TT_AT_RANKS] = (p)
#define LOG(p) [TT_AT_LOG] = (p)
#define CKPT(p) [TT_AT_CKPT] = (p)

const char *const tt_lr_scaling_names[] = {"none", "linear", NULL};
const char *const tt_progress_names[] = {"auto", "bar", "lines", "quiet", "towers", NULL};
const char *const tt_save_best_names[] = {"none", "val_loss", "val_accuracy", NULL};
const char *const tt_precision_names[] = {"fp32", "bf16", "fp16", NULL};
const char *const tt_push_precision_names[] = {"same", "fp32", NULL};

const tt_augment tt_augment_cifar10 = {.width = 0.1f, .height = 0.1f, .flip = 1};

const char *tt_augment_words(const tt_augment *a, char *out, size_t len)
{
    if (!tt_augment_on(a)) {
        snprintf(out, len, "none");
        return out;
    }
    char w[32], h[32];
    snprintf(out, len, "width=%s,height=%s%s", tt_float_str(a->width, w, sizeof w),
             tt_float_str(a->height, h, sizeof h), a->flip ? ",flip" : "");
    return out;
}

/* --augment as one number (what the ranks compare and the records carry as words): the width's float bits above, the
 * height's below, the flip in the height's sign bit (a range is never negative). */
static uint64_t augment_value(const tt_augment *a)
{
    uint32_t w, h;
    memcpy(&w, &a->width, sizeof w);
    memcpy(&h, &a->height, sizeof h);
    return (uint64_t)w << 32 | h | (uint64_t)(a->flip != 0) << 31;
}

static tt_augment augment_of(uint64_t v)
{
    tt_augment a = {0, 0, (int)(v >> 31 & 1)};
    const uint32_t w = (uint32_t)(v >> 32), h = (uint32_t)v & 0x7fffffffu;
    memcpy(&a.width, &w, sizeof w);
    memcpy(&a.height, &h, sizeof h);
    return a;
}

tt_loss_scale tt_run_loss_scale(const tt_run_config *c)
{
    if (c->loss_scale.scale > 0) return c->loss_scale;
    return c->precision == TT_FMT_FP16 ? (tt_loss_scale){1, TT_SCALE_INIT, 0} : (tt_loss_scale){0, 0, 0};
}

const char *tt_loss_scale_words(const tt_loss_scale *ls, char *out, size_t len)
{
    if (ls->dynamic) snprintf(out, len, "dynamic:%.17g", ls->scale);
    else if (ls->scale > 1) snprintf(out, len, "%.17g", ls->scale);
    else snprintf(out, len, "none");
    return out;
}

/* In --help's order. */
const tt_run_opt tt_run_opts[TT_RUN_N_OPTS] = {
    {.name = "--data", .arg = "SPEC", .kind = TT_OPT_STR, CFG(data),
     .cmds = TT_CMDS_MEASURE | TT_CMD(SUMMARY) | TT_CMD(EVAL), .resume = TT_RESUME_OWN,
     .help = "fashion-mnist (Debian's dataset-fashion-mnist), an MNIST-format directory,\n"
             "cifar10:DIR (CIFAR-10 binary) or npy:DIR (x_train.npy, y_train.npy, x_test.npy,\n"
             "y_test.npy); docs/data.md [fashion-mnist]"},
    {.name = "--model", .arg = "NAME|FILE", .kind = TT_OPT_STR, CFG(model), .cmds = TT_CMDS_MODEL,
     .resume = TT_RESUME_OWN,
     .help = "built-in mlp (256-relu-256-relu), cnn (the Keras cifar10_cnn example) or\n"
             "textcnn (embedding + conv1d, the Reuters seed), or a model file\n"
             "(docs/model-file.md) [mlp]"},
    {.name = "--vocab", .arg = "N", .kind = TT_OPT_SIZE, CFG(vocab), .lo = 1, .hi = TT_MAX_VOCAB, .cmds = TT_CMDS_MODEL,
     .resume = TT_RESUME_OWN, .help = "an embedding's vocabulary (token ids 0..N-1) [the data's largest id + 1]"},
    {.name = "--classes", .arg = "N", .kind = TT_OPT_SIZE, CFG(classes), .lo = 1, .hi = TT_MAX_CLASSES,
     .cmds = TT_CMDS_MEASURE | TT_CMD(EVAL), .resume = TT_RESUME_OWN,
     .help = "the class count: labels 0..N-1, a larger label is refused; classes may have no\n"
             "samples [the largest label + 1; a notice when that is over 10x the labels seen]"},
    {.name = "--device", .arg = "NAME", .kind = TT_OPT_BACKEND, CFG(device), .cmds = TT_CMDS_USE,
     .resume = TT_RESUME_FREE,
     .help = "backend: %s; auto = cuda when a usable GPU exists, else cpu [auto]"},
    {.name = "--gpus", .arg = "LIST", .kind = TT_OPT_STR, CFG(gpus), .cmds = TT_CMDS_USE, .resume = TT_RESUME_FREE,
     .help = "GPUs the towers use, e.g. 0,1; more towers than GPUs share them round-robin,\n"
             "each tower with its own stream [every GPU]"},
    {.name = "--towers", .arg = "N", .kind = TT_OPT_SIZE, CFG(towers), .lo = 1, .hi = 1024, .cmds = TT_CMDS_USE,
     .resume = TT_RESUME_FREE, .at = {RANKS(4), LOG(3)}, TC(n_towers),
     .help = "data-parallel towers, one thread each [1]"},
    {.name = "--batch", .arg = "N", .kind = TT_OPT_SIZE, CFG(batch), .lo = 1, .hi = 1 << 20, .cmds = TT_CMDS_USE,
     .resume = TT_RESUME_OWN, .at = {RANKS(3), LOG(4)},
     .help = "global batch, split across the towers (sizes differ by at most 1) [256]"},
    {.name = "--epochs", .arg = "N", .kind = TT_OPT_SIZE, CFG(epochs), .lo = 1, .hi = 100000, .cmds = TT_CMDS_RUNS,
     .resume = TT_RESUME_OWN, .at = {RANKS(14), LOG(5), CKPT(9)}, .help = "[10]"},
    {.name = "--optimizer", .arg = "NAME", .kind = TT_OPT_OPTIM, CFG(optim), .cmds = TT_CMDS_MEASURE,
     .resume = TT_RESUME_OWN, .at = {RANKS(11), LOG(6)}, TC(optim), .help = "%s, Keras semantics and defaults [adam]"},
    {.name = "--lr-scaling", .arg = "RULE", .kind = TT_OPT_CHOICE, CFG(lr_scaling), .choices = tt_lr_scaling_names,
     .cmds = TT_CMDS_RUNS, .resume = TT_RESUME_OWN, .at = {LOG(9), CKPT(11)},
     .help = "none: lr as given; linear: lr x towers (Goyal et al. 2017) [none]"},
    {.name = "--lr-schedule", .arg = "SPEC", .kind = TT_OPT_LRSCHED, CFG(lr_schedule), .cmds = TT_CMDS_RUNS,
     .resume = TT_RESUME_OWN,
     .help = "the rate of each optimizer step t, Keras 3's schedules from --lr (docs/optimizers.md):\n"
             "constant; step:B1,...,Bn:V0,...,Vn (PiecewiseConstantDecay: V0 while t <= B1, ...);\n"
             "exponential:STEPS:RATE[:staircase] (ExponentialDecay);\n"
             "cosine:STEPS[:ALPHA[:TARGET:WARMUP_STEPS]] (CosineDecay, warmup_target,\n"
             "warmup_steps); --lr-scaling linear scales every rate [constant]"},
    {.name = "--warmup-epochs", .arg = "N", .kind = TT_OPT_SIZE, CFG(warmup_epochs), .lo = 1, .hi = 100000,
     .cmds = TT_CMDS_RUNS, .resume = TT_RESUME_OWN, .at = {LOG(32)},
     .help = "Goyal et al.'s gradual warm-up: the rate ramps linearly, step by step, from --lr to\n"
             "--lr-scaling linear's scaled rate over the first N epochs (needs --lr-scaling\n"
             "linear) [none]"},
    {.name = "--seed", .arg = "N", .kind = TT_OPT_U64, CFG(seed), .hi = SIZE_MAX, .cmds = TT_CMDS_RUNS,
     .resume = TT_RESUME_OWN, .at = {RANKS(10), LOG(10)}, TC(seed),
     .help = "initialisation and shuffling; same seed + towers = bit-identical run [1]"},
    {.name = "--val-samples", .arg = "N", .kind = TT_OPT_SIZE, CFG(val_samples), .hi = 100000000,
     .cmds = TT_CMDS_RUNS | TT_CMD(EVAL), .resume = TT_RESUME_OWN,
     .help = "validation = the last N training samples, 0 for none [10000]"},
    {.name = "--train-samples", .arg = "N", .kind = TT_OPT_SIZE, CFG(train_samples), .lo = 1, .hi = 100000000,
     .cmds = TT_CMDS_RUNS, .resume = TT_RESUME_OWN,
     .help = "train on the first N remaining training samples only [all]"},
    {.name = "--test-samples", .arg = "N", .kind = TT_OPT_SIZE, CFG(test_samples), .lo = 1, .hi = 100000000,
     .cmds = TT_CMDS_RUNS | TT_CMD(EVAL), .resume = TT_RESUME_FREE,
     .help = "test on the first N test samples only [all]"},
    {.name = "--log-json", .arg = "FILE", .kind = TT_OPT_FILE, CFG(log_json), .cmds = TT_CMD(TRAIN) | TT_CMD(EVAL),
     .resume = TT_RESUME_FREE, .at = {RANKS(24)},
     .help = "JSON lines: a start object, one per epoch, one for the test set"},
    {.name = "--progress", .arg = "MODE", .kind = TT_OPT_CHOICE, CFG(progress), .choices = tt_progress_names,
     .cmds = TT_CMDS_RUNS, .resume = TT_RESUME_FREE,
     .help = "%s [auto: a bar on a terminal];\n"
             "towers: a live lane per tower and the host's, on a terminal (docs/tutorial.md)"},
    {.name = "--host-threads", .arg = "N", .kind = TT_OPT_INT, CFG(host_threads), .lo = 1, .hi = 256,
     .cmds = TT_CMDS_USE, .resume = TT_RESUME_FREE,
     .help = "host threads for the gradient sum and the optimizer [CPUs]"},
    {.name = "--reduce", .arg = "PLACE", .kind = TT_OPT_REDUCE, CFG(reduce), .cmds = TT_CMD(TRAIN) | TT_CMD(BENCH),
     .resume = TT_RESUME_FREE, .at = {RANKS(16), LOG(16), CKPT(10)}, TC(reduce)},
    {.name = "--update", .arg = "PLACE", .kind = TT_OPT_UPDATE, CFG(update), .choices = tt_update_names,
     .cmds = TT_CMD(TRAIN) | TT_CMD(BENCH), .resume = TT_RESUME_FREE, .at = {LOG(17)}, TC(update)},
    {.name = "--graphs", .arg = "MODE", .kind = TT_OPT_CHOICE, CFG(graphs), .choices = tt_graphs_names,
     .cmds = TT_CMD(TRAIN) | TT_CMD(PROBE), .resume = TT_RESUME_FREE, TC(graphs),
     .help = "%s: on replays each tower's step as one CUDA graph (--device cuda) [off]"},
    {.name = "--epilogues", .arg = "MODE", .kind = TT_OPT_CHOICE, CFG(epilogues), .choices = tt_epilogues_names,
     .cmds = TT_CMD(TRAIN), .resume = TT_RESUME_FREE, .at = {RANKS(32), LOG(25)}, TC(epilogues),
     .help = "%s: lt runs a dense layer's GEMM, bias and relu as one cuBLASLt\n"
             "call, and a relu's gradient in the next dense layer's dX GEMM, where cuBLASLt\n"
             "offers an algorithm (--device cuda; not yet validated on a GPU; elsewhere, and\n"
             "without one, sgemm + the fused kernels) [kernels]"},
    {.name = "--overlap", .arg = "MODE", .kind = TT_OPT_CHOICE, CFG(overlap), .choices = tt_overlap_names,
     .cmds = TT_CMD(TRAIN) | TT_CMD(BENCH), .resume = TT_RESUME_FREE, TC(overlap),
     .help = "%s: on pushes the gradient in buckets during backward; the host sums and\n"
             "updates each bucket while the towers compute the layers below (--reduce cpu,\n"
             "--update host) [off]"},
    {.name = "--bucket-kib", .arg = "N", .kind = TT_OPT_SIZE, CFG(bucket_kib), .lo = 8, .hi = 1048576,
     .cmds = TT_CMD(TRAIN) | TT_CMD(BENCH) | TT_CMD(COMPARE) | TT_CMD(PROBE), .resume = TT_RESUME_FREE,
     .help = "--overlap on: the gradient's buckets, in KiB of whole layers (probe: its\n"
             "--overlap on designs, measured and predicted) [4096]"},
    {.name = "--data-on", .arg = "PLACE", .kind = TT_OPT_CHOICE, CFG(data_on), .choices = tt_data_on_names,
     .cmds = TT_CMDS_MEASURE, .resume = TT_RESUME_FREE, .at = {RANKS(31), LOG(24)}, TC(data_on),
     .help = "%s: where a step's rows come from: host gathers them and\n"
             "copies them in; device holds the training set on every device (uploaded once)\n"
             "and gathers them there from the shuffled indices, so a step copies in 4 bytes\n"
             "a row; validation and test take the host's path (docs/architecture.md) [host]"},
    {.name = "--augment", .arg = "SPEC", .kind = TT_OPT_AUGMENT, CFG(augment),
     .cmds = TT_CMD(TRAIN) | TT_CMD(ONLY_TRAIN), .resume = TT_RESUME_SAME, .at = {RANKS(36), LOG(31)}, TC(augment),
     .help = "none, cifar10 (the seed's cifar10_cnn: width=0.1,height=0.1,flip) or a list of\n"
             "width=F (a random shift of up to F x the width), height=F and flip (a\n"
             "horizontal flip, half the time), F in [0, 1): Keras's ImageDataGenerator\n"
             "(fill_mode nearest), applied to each training image on its tower's device,\n"
             "drawn from the seed, the epoch and the sample (docs/data.md) [none]"},
    {.name = "--node-reduce", .arg = "MODE", .kind = TT_OPT_CHOICE, CFG(node_reduce), .choices = tt_node_reduce_names,
     .cmds = TT_CMDS_RUNS, .resume = TT_RESUME_FREE, .at = {RANKS(15), LOG(20)}, TC(node_reduce),
     .help = "under mpirun -np K: how the ranks combine their node sums (docs/scaleout.md):\n"
             "allreduce (every rank gets the global sum and updates its own copy) or ps (rank\n"
             "r updates slice r and holds 1/K of the optimizer state; the weights are\n"
             "gathered) [allreduce]"},
    {.name = "--trace", .arg = "FILE", .kind = TT_OPT_FILE, CFG(trace), .cmds = TT_CMD(TRAIN), .resume = TT_RESUME_FREE,
     .at = {RANKS(23)}, .help = "Chrome trace-event JSON of every step (open in Perfetto or chrome://tracing)"},
    {.name = "--slow-tower", .arg = "T:MS[~J],...", .kind = TT_OPT_SLOW, CFG(slow),
     .cmds = TT_CMD(TRAIN) | TT_CMD(BENCH) | TT_CMD(PROBE), .resume = TT_RESUME_FREE, .at = {RANKS(27), LOG(27)},
     TC(slow),
     .help = "stragglers on purpose: tower T's compute delayed MS milliseconds each step (~J: a\n"
             "delay drawn from [MS, MS+J] each step, from the seed); its barrier shows as the\n"
             "others' wait; probe predicts it (docs/tutorial.md)"},
    {.name = "--sync", .arg = "MODE", .kind = TT_OPT_SYNC, CFG(sync), .cmds = TT_CMD(TRAIN), .resume = TT_RESUME_SAME,
     .at = {RANKS(28), LOG(21)}, TC(sync)}, /* the whole tt_sync: --sync-schedule's round_robin too */
    {.name = "--sync-schedule", .arg = "MODE", .kind = TT_OPT_CHOICE, CFG(sync.round_robin),
     .choices = tt_sync_schedule_names, .cmds = TT_CMD(TRAIN), .resume = TT_RESUME_SAME, .at = {RANKS(29), LOG(22)},
     .help = "%s: round-robin makes ssp and async reproducible (the towers take\n"
             "the shards, pull and apply in turn; for tests) [free]"},
    {.name = "--bn-sync", .arg = "MODE", .kind = TT_OPT_CHOICE, CFG(bn_sync), .choices = tt_bn_sync_names,
     .cmds = TT_CMD(TRAIN), .resume = TT_RESUME_SAME, .at = {RANKS(30), LOG(23)}, TC(bn_sync),
     .help = "%s: on takes batchnorm statistics over the global batch, the towers\n"
             "exchanging their sums (SyncBatchNorm: N towers compute what 1 tower would;\n"
             "bsp, one rank, no graphs); off over each tower's own rows, as TF's towers and\n"
             "multi_gpu_model did (docs/models.md) [off]"},
    {.name = "--precision", .arg = "FMT", .kind = TT_OPT_CHOICE, CFG(precision), .choices = tt_precision_names,
     .cmds = TT_CMDS_USE, .resume = TT_RESUME_FREE, .at = {RANKS(33), LOG(28), CKPT(14)}, TC(precision),
     .help = "%s: bf16 and fp16 train in mixed precision — FP32 master weights and\n"
             "optimizer on the host, 16-bit weights pulled, activations and GEMM operands in\n"
             "16 bits with FP32 sums, 16-bit gradients pushed and summed in FP32\n"
             "(docs/precision.md); eval and predict round as a tower does [fp32]"},
    {.name = "--push-precision", .arg = "FMT", .kind = TT_OPT_CHOICE, CFG(push_fp32),
     .choices = tt_push_precision_names, .cmds = TT_CMDS_MEASURE, .resume = TT_RESUME_FREE,
     .at = {RANKS(34), LOG(29)}, TC(push_fp32),
     .help = "%s: fp32 pushes a 16-bit tower's gradients in FP32, to compare [same]"},
    {.name = "--loss-scale", .arg = "SCALE", .kind = TT_OPT_SCALE, CFG(loss_scale), .cmds = TT_CMDS_MEASURE,
     .resume = TT_RESUME_FREE, .at = {RANKS(35), LOG(30), CKPT(15)},
     .help = "dynamic[:INIT], N or none: the loss scaled so that 16-bit gradients do not\n"
             "underflow; dynamic skips a step whose gradient overflows and halves the scale,\n"
             "and doubles it after 2000 finite steps (PyTorch's GradScaler) [fp16:\n"
             "dynamic:65536; bf16: none]"},
    {.name = "--tensorboard", .arg = "DIR", .kind = TT_OPT_FILE, CFG(tensorboard), .cmds = TT_CMD(TRAIN),
     .resume = TT_RESUME_FREE, .at = {RANKS(25)},
     .help = "TensorBoard event files in DIR/train and DIR/validation, as Keras's callback\n"
             "writes them: epoch_loss, epoch_accuracy, epoch_top5, epoch_learning_rate and\n"
             "the step split, per tower too (docs/tensorboard.md)"},
    {.name = "--tensorboard-every-steps", .arg = "N", .kind = TT_OPT_SIZE, CFG(tensorboard_every_steps), .lo = 1,
     .hi = 1000000000, .cmds = TT_CMD(TRAIN), .resume = TT_RESUME_FREE, .at = {RANKS(26)},
     .help = "--tensorboard: the same every N steps (batch_loss, ...) [per epoch only]"},
    /* callbacks (tt_callbacks.h): train's alone; a resumed run must have them as the checkpoint's had them */
    {.name = "--early-stopping", .arg = "SPEC", .kind = TT_OPT_CALLBACK, CFG(early_stopping),
     .lo = TT_CB_EARLY_STOPPING, .cmds = TT_CMD(TRAIN) | TT_CMD(ONLY_TRAIN), .resume = TT_RESUME_OWN,
     .at = {RANKS(37), LOG(38), CKPT(16)},
     .help = "stop when the monitored metric stops improving (Keras's EarlyStopping): on,\n"
             "or key=value,... of monitor (loss, accuracy, top5, val_loss, val_accuracy,\n"
             "val_top5) [val_loss], mode auto|min|max [auto], min_delta [0], patience [0],\n"
             "baseline [none], restore_best_weights, start_from_epoch [0]; e.g.\n"
             "monitor=val_loss,patience=3,restore_best_weights (docs/optimizers.md)"},
    {.name = "--reduce-lr-on-plateau", .arg = "SPEC", .kind = TT_OPT_CALLBACK, CFG(reduce_lr), .lo = TT_CB_REDUCE_LR,
     .cmds = TT_CMD(TRAIN) | TT_CMD(ONLY_TRAIN), .resume = TT_RESUME_OWN, .at = {RANKS(38), LOG(39), CKPT(17)},
     .help = "reduce the rate when the monitored metric stops improving (Keras's\n"
             "ReduceLROnPlateau): on, or key=value,... of monitor [val_loss], mode [auto],\n"
             "factor [0.1], patience [10], min_delta [1e-4], cooldown [0], min_lr [0]; e.g.\n"
             "factor=0.5,patience=2,min_lr=1e-5"},
    {.name = "--checkpoint-dir", .arg = "DIR", .kind = TT_OPT_STR, CFG(checkpoint_dir), .cmds = TT_CMDS_CHECKPOINT,
     .resume = TT_RESUME_FREE, .at = {RANKS(18)},
     .help = "where checkpoints go (safetensors; docs/checkpoints.md); the end of training and a\n"
             "stop by SIGINT or SIGTERM (at the step boundary) then write one; a directory\n"
             "holding a later run's checkpoints is refused"},
    {.name = "--save-every-epoch", .kind = TT_OPT_FLAG, CFG(save_every_epoch), .cmds = TT_CMDS_CHECKPOINT,
     .resume = TT_RESUME_FREE, .at = {RANKS(19)}, .help = "a checkpoint after every epoch"},
    {.name = "--save-every-steps", .arg = "N", .kind = TT_OPT_SIZE, CFG(save_every_steps), .lo = 1, .hi = 1000000000,
     .cmds = TT_CMDS_CHECKPOINT, .resume = TT_RESUME_FREE, .at = {RANKS(20)},
     .help = "a checkpoint after every N steps of the run"},
    {.name = "--save-best", .arg = "METRIC", .kind = TT_OPT_CHOICE, CFG(save_best), .lo = 1,
     .choices = tt_save_best_names, .cmds = TT_CMDS_CHECKPOINT, .resume = TT_RESUME_SAME, .at = {RANKS(21)},
     .help = "%s: best.safetensors whenever it improves"},
    {.name = "--keep", .arg = "N", .kind = TT_OPT_SIZE, CFG(keep), .lo = 1, .hi = 100000, .cmds = TT_CMDS_CHECKPOINT,
     .resume = TT_RESUME_FREE, .help = "periodic checkpoints kept, the newest [3]"},
    {.name = "--resume", .arg = "FILE|DIR", .kind = TT_OPT_RESUME, CFG(resume), .cmds = TT_CMDS_CHECKPOINT,
     .resume = TT_RESUME_SELF, .at = {RANKS(22)},
     .help = "continue a run from a checkpoint (a directory: its newest valid one); give the\n"
             "run's --model, --batch, --seed and optimizer again; --epochs counts the total"},
    {.name = "--resume-weights-only", .arg = "FILE|DIR", .kind = TT_OPT_RESUME, CFG(resume), .cmds = TT_CMDS_CHECKPOINT,
     .resume = TT_RESUME_SELF,
     .help = "start from a checkpoint's weights only, on purpose: another model with\n"
             "the same tensors, other options; a fresh optimizer, from epoch 1"},
};

const tt_run_opt *tt_run_opt_find(const char *name)
{
    for (int i = 0; i < TT_RUN_N_OPTS; i++)
        if (strcmp(name, tt_run_opts[i].name) == 0) return &tt_run_opts[i];
    return NULL;
}

const tt_run_opt *tt_run_opt_at(tt_opt_record r, int place)
{
    for (int i = 0; i < TT_RUN_N_OPTS; i++)
        if (place > 0 && tt_run_opts[i].at[r] == place) return &tt_run_opts[i];
    return NULL;
}

/* A --slow-tower list: the array, then its count (n_slow), in tt_run_config and tt_trainer_config alike. */
_Static_assert(offsetof(tt_run_config, n_slow) == offsetof(tt_run_config, slow) + sizeof(tt_slow_tower[TT_MAX_SLOW]) &&
                   offsetof(tt_trainer_config, n_slow) ==
                       offsetof(tt_trainer_config, slow) + sizeof(tt_slow_tower[TT_MAX_SLOW]),
               "--slow-tower's count follows its list");

/* The size of a kind's value. */
static size_t kind_size(tt_opt_kind k)
{
    switch (k) {
    case TT_OPT_STR:
    case TT_OPT_FILE:
    case TT_OPT_BACKEND:
    case TT_OPT_RESUME: return sizeof(const char *);
    case TT_OPT_SIZE: return sizeof(size_t);
    case TT_OPT_U64: return sizeof(uint64_t);
    case TT_OPT_INT:
    case TT_OPT_FLAG:
    case TT_OPT_CHOICE:
    case TT_OPT_UPDATE: return sizeof(int);
    case TT_OPT_REDUCE: return sizeof(tt_reduce);
    case TT_OPT_SYNC: return sizeof(tt_sync);
    case TT_OPT_SLOW: return sizeof(tt_slow_tower[TT_MAX_SLOW]);
    case TT_OPT_OPTIM: return sizeof(tt_optim_config);
    case TT_OPT_SCALE: return sizeof(tt_loss_scale);
    case TT_OPT_LRSCHED: return sizeof(tt_lr_schedule);
    case TT_OPT_AUGMENT: return sizeof(tt_augment);
    case TT_OPT_CALLBACK: return sizeof(tt_callback);
    case TT_OPT_KINDS: break;
    }
    return 0;
}

uint64_t tt_run_opt_value(const tt_run_opt *o, const tt_run_config *c)
{
    const char *at = (const char *)c + o->field;
    const char *s;
    size_t z;
    int i;
    uint64_t u;
    tt_reduce r;
    tt_sync sy;
    tt_optim_config oc;
    switch (o->kind) {
    case TT_OPT_STR:
    case TT_OPT_FILE:
    case TT_OPT_BACKEND:
    case TT_OPT_RESUME: memcpy(&s, at, sizeof s); return s != NULL;
    case TT_OPT_SIZE: memcpy(&z, at, sizeof z); return z;
    case TT_OPT_U64: memcpy(&u, at, sizeof u); return u;
    case TT_OPT_INT:
    case TT_OPT_FLAG:
    case TT_OPT_CHOICE:
    case TT_OPT_UPDATE: memcpy(&i, at, sizeof i); return (uint64_t)i;
    case TT_OPT_REDUCE: memcpy(&r, at, sizeof r); return (uint64_t)r;
    case TT_OPT_SYNC: memcpy(&sy, at, sizeof sy); return (uint64_t)sy.kind << 32 | sy.k;
    case TT_OPT_SLOW: return tt_crc32(0, c->slow, c->n_slow * sizeof c->slow[0]);
    case TT_OPT_OPTIM: memcpy(&oc, at, sizeof oc); return (uint64_t)oc.kind;
    case TT_OPT_SCALE: { /* the scale's bits, dynamic in the sign bit (a scale is positive), as the run uses it */
        const tt_loss_scale ls = tt_run_loss_scale(c);
        memcpy(&u, &ls.scale, sizeof u);
        return u | (uint64_t)(ls.dynamic != 0) << 63;
    }
    case TT_OPT_LRSCHED: { /* the CRC-32 of its words */
        char w[TT_SCHED_WORDS];
        tt_lr_schedule_words(&c->lr_schedule, w, sizeof w);
        return tt_crc32(0, w, strlen(w));
    }
    case TT_OPT_AUGMENT: return augment_value(&c->augment);
    case TT_OPT_CALLBACK: { /* its canonical SPEC's CRC-32: the same settings however the SPEC was written */
        tt_callback cb;
        char words[TT_CALLBACK_WORDS];
        memcpy(&cb, at, sizeof cb);
        tt_callback_words(&cb, words, sizeof words);
        return tt_crc32(0, words, strlen(words));
    }
    case TT_OPT_KINDS: break;
    }
    return 0;
}

/* The word of a choice's value, "?" for one beyond its list. */
static const char *choice_word(const char *const *choices, uint64_t v)
{
    for (uint64_t i = 0; choices[i]; i++)
        if (i == v) return choices[i];
    return "?";
}

const char *tt_run_opt_words(const tt_run_opt *o, uint64_t v, char *out, size_t len)
{
    switch (o->kind) {
    case TT_OPT_STR:
    case TT_OPT_FILE:
    case TT_OPT_BACKEND:
    case TT_OPT_RESUME: snprintf(out, len, "%s", v ? "given" : "not given"); break;
    case TT_OPT_CHOICE:
    case TT_OPT_UPDATE: snprintf(out, len, "%s", choice_word(o->choices, v)); break;
    case TT_OPT_REDUCE: snprintf(out, len, "%s", v < TT_REDUCE_COUNT ? tt_reduce_name((tt_reduce)v) : "?"); break;
    case TT_OPT_SYNC: {
        const tt_sync sy = {(tt_sync_kind)(v >> 32), (size_t)(uint32_t)v, 0};
        tt_sync_format(&sy, out, len);
        break;
    }
    case TT_OPT_SLOW:
    case TT_OPT_LRSCHED: snprintf(out, len, "%08llx", (unsigned long long)v); break;
    case TT_OPT_CALLBACK: snprintf(out, len, "%08llx", (unsigned long long)v); break;
    case TT_OPT_OPTIM: snprintf(out, len, "%s", v < 16 ? tt_optim_kind_name((tt_optim_kind)v) : "?"); break;
    case TT_OPT_SCALE: {
        tt_loss_scale ls = {(int)(v >> 63), 0, 0};
        const uint64_t bits = v & ~(1ull << 63);
        memcpy(&ls.scale, &bits, sizeof bits);
        tt_loss_scale_words(&ls, out, len);
        break;
    }
    case TT_OPT_AUGMENT: {
        const tt_augment a = augment_of(v);
        tt_augment_words(&a, out, len);
        break;
    }
    default: snprintf(out, len, "%llu", (unsigned long long)v); break;
    }
    return out;
}

int tt_run_opt_is_number(const tt_run_opt *o)
{
    return o->kind == TT_OPT_SIZE || o->kind == TT_OPT_U64 || o->kind == TT_OPT_INT || o->kind == TT_OPT_FLAG;
}

void tt_run_opt_key(const tt_run_opt *o, char *out, size_t len)
{
    snprintf(out, len, "%s", o->name + 2);
    for (char *p = out; *p; p++)
        if (*p == '-') *p = '_';
}

void tt_run_opts_to_trainer(const tt_run_config *c, tt_trainer_config *tc)
{
    for (int i = 0; i < TT_RUN_N_OPTS; i++) {
        const tt_run_opt *o = &tt_run_opts[i];
        if (!o->trainer) continue;
        const size_t n = o->kind == TT_OPT_SLOW ? o->trainer_size + sizeof(size_t) : o->trainer_size; /* and n_slow */
        memcpy((char *)tc + o->trainer - 1, (const char *)c + o->field, n);
    }
}

void tt_run_opts_check(void)
{
    for (int i = 0; i < TT_RUN_N_OPTS; i++) {
        const tt_run_opt *o = &tt_run_opts[i];
        TT_ASSERT(o->name && strncmp(o->name, "--", 2) == 0 && o->field_size == kind_size(o->kind));
        TT_ASSERT(!o->trainer || o->trainer_size == o->field_size);
        TT_ASSERT(!(o->cmds & TT_CMD(TRAIN)) || o->resume != TT_RESUME_NONE);
        TT_ASSERT(o->resume != TT_RESUME_SAME || o->kind == TT_OPT_SYNC || o->kind == TT_OPT_CHOICE ||
                  o->kind == TT_OPT_AUGMENT);
        TT_ASSERT(!o->choices == !(o->kind == TT_OPT_CHOICE || o->kind == TT_OPT_UPDATE));
        for (int r = 0; r < TT_AT_RECORDS; r++)
            TT_ASSERT(o->at[r] >= 0 && (!o->at[r] || tt_run_opt_at((tt_opt_record)r, o->at[r]) == o));
        /* the log's start record and the checkpoints carry numbers and words (and the log --slow-tower's list, both
         * a callback's canonical SPEC) */
        const int words = o->kind == TT_OPT_CHOICE || o->kind == TT_OPT_UPDATE || o->kind == TT_OPT_REDUCE ||
                          o->kind == TT_OPT_SYNC || o->kind == TT_OPT_OPTIM || o->kind == TT_OPT_SCALE ||
                          o->kind == TT_OPT_AUGMENT;
        TT_ASSERT(!o->at[TT_AT_CKPT] || tt_run_opt_is_number(o) || words || o->kind == TT_OPT_CALLBACK);
        TT_ASSERT(!o->at[TT_AT_LOG] || tt_run_opt_is_number(o) || words || o->kind == TT_OPT_SLOW ||
                  o->kind == TT_OPT_CALLBACK);
    }
}
