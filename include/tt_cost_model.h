/* tt_cost_model.h — the step's cost model without a GPU (`probe --assume`, src/step/cost_model.c): what-if
 * predictions, the prediction of tt_probe_predict fed with assumed, recorded or measured link and device figures
 * instead of the phases measured here; and the step's launches and GEMM shapes, counted (src/step/launches.c). Its
 * names are tt_assume_*, after --assume and the figures it assumes (tt_assume).
 *
 * A tt_assume holds the figures of one machine: a named profile (an H100 on PCIe Gen5, an A100 on PCIe Gen4, an
 * H100 SXM5 on NVLink 4, and the one GPU the project has measured, an H200, from its recorded figures; docs/whatif.md
 * gives each figure's source and how it was derated), or a measured profile read from a file that `probe --json`
 * wrote (tt_profile.h), optionally with some figures overridden. A measured profile brings a table of GEMM shapes
 * with their measured times: the compute phase prices each GEMM it issues from the table where the shape matches
 * exactly, and by gemm_eff x fp32_tflops (the fallback, counted and printed) where not.
 * tt_assume_probe turns the figures into the phases of a step for N towers (one GPU each) and a global batch B — the
 * same tt_probe fields that `towertrain probe` measures — and tt_assume_report prints, for 1..8 GPUs, strong and weak
 * scaling, the predicted step of every placement with its split.
 * Not for: measuring anything (tt_probe.h), or claiming what a real machine does: these are predictions from
 * assumed figures, to be checked against a measured run (tools/gpu-check prints both). */
#ifndef TT_COST_MODEL_H
#define TT_COST_MODEL_H

#include <stdio.h>

#include "tt_model.h"
#include "tt_optim.h"
#include "tt_probe.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TT_ASSUME_MAX_GEMMS (TT_MAX_LAYERS * TT_MAX_LAYER_GEMMS)

/* One measured GEMM shape: op(A) (M x K) times op(B) (K x N), and its time per call beyond one kernel launch — the
 * seconds it took back to back on its stream, less the launch figure of the same measurement (a GEMM costs body_s +
 * one launch, or one graph node, like every kernel of the compute phase). */
typedef struct tt_assume_gemm {
    int ta, tb;
    size_t M, N, K;
    double body_s;
} tt_assume_gemm;

/* The figures of one machine. GB/s are 1e9 bytes per second, one direction, the convention of CUDA's bandwidthTest;
 * every link figure is per GPU. */
typedef struct tt_assume {
    char name[32];         /* the profile the figures start from (a measured profile: the one it lacks figures from) */
    char source[192];      /* a measured profile: "FILE (DEVICE, backend B)"; "" for a profile's figures alone */
    double h2d_gbs;        /* host -> device copy from pinned memory, one GPU's PCIe link */
    double d2h_gbs;        /* device -> host copy into pinned memory */
    double peer_gbs;       /* device -> device copy between two GPUs (PCIe P2P or NVLink), as the receiver sees it */
    double nccl_busbw_gbs; /* NCCL bus bandwidth (nccl-tests; for ncclReduce busbw = algbw = size / time) */
    double nccl_us;        /* NCCL's fixed cost per collective (its small-message time) */
    double hbm_gbs;        /* device memory bandwidth (kernels that stream: adds, conversions) */
    double fp32_tflops;    /* FP32 peak without tensor cores (cuBLAS runs plain FP32, no TF32) */
    double bf16_tflops;    /* --precision bf16, fp16: the tensor cores' dense peak in that format, FP32 accumulation */
    double fp16_tflops;
    double gemm_eff;       /* fraction of fp32_tflops the step's small GEMMs reach, in (0, 1] */
    double launch_us;      /* per kernel: launch plus the floor of a tiny kernel */
    double graph_node_us;  /* per kernel node of a replayed CUDA graph: the kernel's floor without its launch */
    double copy_us;        /* per copy: issue, DMA start and the wait for its completion */
    double host_gbs;       /* host memory bandwidth, all cores (the sum, the update, the DMA of every link) */
    double barrier_us;     /* one barrier of the host crew */
    unsigned overridden;   /* bit k: the spec set key k (tt_assume_report names them) */
    unsigned measured;     /* bit k: key k came from the measured profile */
    /* measured: the GEMM table, and the compute phase's other kernels (all but its GEMMs: epilogues, the loss,
     * column sums) of one model at one shard — that model's parameter count, the rows, their count — beyond their
     * launches */
    size_t n_gemms;
    tt_assume_gemm gemms[TT_ASSUME_MAX_GEMMS];
    size_t other_params, other_rows, other_count;
    double other_body_s;
    int graphs;            /* predict --graphs on: a tower's step is one graph launch (launch_us) whose kernels cost
                            * graph_node_us each (set by the command, not by the spec) */
    int overlap;           /* predict --overlap on (--reduce cpu, --update host, no graphs): the buckets' pushes,
                            * sums, updates and next pulls hidden behind the backward where they can be */
    size_t bucket_bytes;   /* its buckets (probe --bucket-kib; 0: TT_BUCKET_BYTES), set by the command */
    int precision;         /* predict --precision (TT_FMT_*): 16-bit pulls and pushes of the trainable weights, GEMMs
                            * at the format's tensor peak, the conversion kernels; --reduce cpu, --update host only */
    int push_fp32;         /* --push-precision fp32: the push stays FP32 (set by the command) */
} tt_assume;

/* Parses "h100-pcie", "a100-pcie,peer_gbs=20", "h2d_gbs=25,d2h_gbs=25,..." (a profile name first, then overrides;
 * or keys alone on top of the default profile, h100-pcie) into a. An item that names a file — it holds a '/' or ends
 * in ".json" — is a measured profile, and the file's name runs from there to the end of the spec, commas and all:
 * "./probe.json", "launch_us=2,/tmp/report.json", "h100-sxm,gemm_eff=0.1,run/probe.json". Its figures replace the
 * profile's (which still gives what the file does not measure: the FP32 peak, HBM, NCCL), and KEY=VALUE items win
 * over both. TT_ERR_ARG with one clear line naming the bad key/value: an unknown profile or key, a value that is not
 * a finite number, a rate that is not > 0 (latencies may be 0), gemm_eff above 1, a key given twice; the file's own
 * problems are tt_profile_read's (TT_ERR_IO, TT_ERR_FORMAT: exit 1). */
tt_status tt_assume_parse(const char *spec, tt_assume *a, tt_error *err);

/* The compute phase of one tower at `rows` rows, priced (cost_model.c's head comment): its kernels' time beyond their
 * launches — the GEMMs' from the measured table where the shape matches, else 2MNK / (fp32_tflops * gemm_eff), and
 * the other kernels' measured time where the model and rows are the measured ones, else 0 — and the counts behind
 * it, so the report can say how much came from the table and how much from the fallback. */
typedef struct tt_assume_compute {
    double gemm_s;     /* the GEMMs, beyond their launches */
    double other_s;    /* the other kernels, beyond their launches (0 unless measured) */
    size_t kernels;    /* every launch of the phase (tt_assume_kernels) */
    size_t gemm_calls; /* GEMM calls, of them from_table priced from the measured table (the rest by gemm_eff) */
    size_t from_table;
    int other_measured;
} tt_assume_compute;
void tt_assume_compute_cost(const tt_assume *a, const tt_model *m, size_t rows, tt_assume_compute *c);

/* The cost model's inputs for N towers (one GPU each) and global batch B, from the figures alone: fills every field
 * of *p that tt_probe_predict reads (waves = 1 and straggle = 0: identical GPUs, one host thread per tower), plus
 * rows, crew and the rates (h2d/d2h/peer/host/gemm) that tt_probe_print shows; can[r] says whether placement r has
 * a formula here (one without is not modelled: reduce[r] 0, and the report shows '-'). */
void tt_assume_probe(const tt_assume *a, const tt_model *m, size_t towers, size_t batch, tt_optim_kind opt,
                     tt_probe *p);

/* The predicted step of N towers under placement r with the optimizer at u (--update; cost_model.c's head comment has
 * the formulas): 0 and *t zeroed where u cannot run with r or r is not modelled, else 1. */
int tt_assume_update_step(const tt_assume *a, const tt_model *m, size_t towers, size_t batch, tt_optim_kind opt,
                          tt_reduce r, tt_update u, tt_step_times *t);

/* --overlap on's predicted step (the head comment of cost_model.c has the formula; --reduce cpu, --update host, no
 * graphs) into *t; returns the share of --overlap off's synchronisation (pull, push, sum, update) it hides. */
double tt_assume_overlap_step(const tt_assume *a, const tt_model *m, size_t towers, size_t batch, tt_optim_kind opt,
                              tt_step_times *t);

/* The what-if report: for towers 1..8, strong scaling (global batch `batch`) and weak scaling (batch per tower), the
 * predicted step (ms) of every placement with the split of the best one, plus samples/s and speed-up vs 1 GPU; a
 * header naming the profile and every figure used, and per mode one line on where adding GPUs stops helping and
 * which phase dominates. TT_ERR_ARG for batch 0; TT_ERR_IO if writing to f failed. */
tt_status tt_assume_report(FILE *f, const tt_assume *a, const tt_model *m, size_t batch, tt_optim_kind opt,
                           tt_error *err);

/* The profile names, for --help ("h100-pcie, a100-pcie, h100-sxm, h200-measured"). */
const char *tt_assume_profiles(void);
/* The keys a spec may set, in the order of tt_assume.overridden's and .measured's bits (the report names them). */
size_t tt_assume_n_keys(void);
const char *tt_assume_key_name(size_t k); /* NULL beyond the last */

/* Kernels and GEMMs one tower launches in its compute phase (forward, loss, backward) for a shard of `rows`, as the
 * CUDA backend launches them, counted by running the model's own step on a counter (src/step/launches.c): the
 * launch_us term of the compute phase. The step with --epilogues kernels (the default); tt_assume_kernels_lt with
 * lt_epilogues 1 counts --epilogues lt's, where every dense layer's GEMM and bias/relu is one cuBLASLt launch (as
 * where cuBLASLt offers an algorithm for every shape). */
size_t tt_assume_kernels(const tt_model *m, size_t rows);
size_t tt_assume_kernels_lt(const tt_model *m, size_t rows, int lt_epilogues);

/* The distinct GEMM shapes of that compute phase, in the order first issued, each with how often it comes (calls),
 * with the GEMMs cut as a backend with chunk_mnk cuts them (0: a GPU, one GEMM per shard); *launches (may be NULL):
 * every launch of the phase at that cut. max must be at least TT_MAX_LAYERS * TT_MAX_LAYER_GEMMS. */
size_t tt_assume_gemm_list(const tt_model *m, size_t rows, size_t chunk_mnk, tt_gemm_shape *out, size_t max,
                           size_t *launches);

/* --overlap on: the trainer's buckets for this model (tt_trainer_bucket_edges) and, from the same counted step, the
 * kernels and GEMM flops of the whole compute phase and of each bucket's part of the backward (the layers between
 * its edge and the last bucket's; the last bucket takes the rest) — what the what-if hides the host's work behind. */
typedef struct tt_bucket_cost {
    size_t nb;
    size_t edge[TT_MAX_BUCKETS + 1];
    size_t launches;
    double flops;
    size_t bwd_launches[TT_MAX_BUCKETS];
    double bwd_flops[TT_MAX_BUCKETS];
} tt_bucket_cost;
void tt_assume_buckets(const tt_model *m, size_t rows, size_t bucket_bytes, tt_bucket_cost *out);

#ifdef __cplusplus
}
#endif
#endif
