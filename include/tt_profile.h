/* tt_profile.h — a measured profile: what `towertrain probe --json FILE` measured on one machine and backend, as
 * one JSON object (docs/whatif.md, "The probe's JSON" lists every field), and the same object read back, as a
 * hostile file, by `probe --assume FILE` to feed the what-if's cost model with measured figures instead of assumed
 * ones (tt_cost_model.h). The schema is one set of tables in src/step/profile.c that the writer and the reader both
 * walk, so a field is declared once and a written profile always reads back with the same figures.
 * Not for: taking the measurements (tt_probe.h: tt_probe_run, tt_probe_kernels) or predicting (tt_cost_model.h). */
#ifndef TT_PROFILE_H
#define TT_PROFILE_H

#include "tt_out.h"
#include "tt_probe.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TT_PROFILE_SCHEMA "towertrain-probe"
#define TT_PROFILE_VERSION 1
#define TT_PROFILE_MAX_BYTES ((size_t)8 << 20) /* a probe's object is a few KB; a report.json holding one, more */
#define TT_PROFILE_MAX_GEMMS (TT_MAX_LAYERS * TT_MAX_LAYER_GEMMS) /* distinct shapes a step can issue */
#define TT_PROFILE_MAX_STEPS (TT_REDUCE_COUNT * TT_UPDATE_COUNT * 4) /* designs: reduce x update x graphs x overlap */
#define TT_PROFILE_MAX_DIM 2147483647 /* a GEMM dimension: BLAS's int */

/* One distinct GEMM shape of the step: op(A) (m x k) times op(B) (k x n), issued calls_per_step times a step on one
 * tower; timed alone on the tower's device, back to back on its stream: seconds per call, launch included. */
typedef struct tt_profile_gemm {
    size_t trans_a, trans_b, m, n, k, calls;
    double seconds, gflops;
} tt_profile_gemm;

/* One design of the step (--reduce, --update, --graphs, --overlap) run as whole steps by the trainer: the median
 * split (tt_probe_steps), and the phase model's prediction where it has one (the host's update, no graphs, no
 * overlap: tt_probe_predict; else every field NaN, written null). */
typedef struct tt_profile_step {
    char reduce[16], update[16];
    int graphs, overlap;
    tt_step_times measured, predicted;
} tt_profile_step;

/* Every figure of the JSON object. NaN: not measured here (written null): peer_gbs with one device, graph_node_s on
 * a backend without graphs, a placement that cannot run. Times in seconds, rates in GB/s (1e9 bytes/s) or GFLOP/s. */
typedef struct tt_profile {
    char towertrain[256];  /* the build that measured it (tt_build_describe) */
    char backend[48];      /* the backend's name: "cpu", "cuda", "cuda (CPU stand-in)" */
    char device[128];      /* the device's name (a GPU's, or the CPU's model name) */
    char blas[192];        /* the host BLAS and its kernel */
    char model[96];        /* --model as given ("mlp", a file's path) */
    char optimizer[16];
    size_t params, towers, batch, rows, reps, host_threads;
    double train_flops;    /* per sample: tt_model_train_flops */
    /* links: one copy of the gradient (4 params bytes), N towers at once, like CUDA's bandwidthTest; copy_s a 4-byte
     * pinned host->device copy and its wait (a copy's fixed cost) */
    double h2d_pinned_gbs, h2d_pageable_gbs, d2h_pinned_gbs, d2h_pageable_gbs, d2d_gbs, peer_gbs, copy_s;
    /* host: the crew's memcpy of N slots, the step's sum of them, one barrier of the crew, a sleeping thread's wake */
    double memcpy_gbs, sum_gbs, barrier_s, wake_s;
    /* launch: a chain of `chain` 1-float fills on the tower's stream, per fill; the same chain captured and replayed
     * as one graph, per node */
    double launch_s, graph_node_s;
    size_t chain;
    /* the step's GEMMs for a shard of `rows` on this backend, each distinct shape timed alone; their sum per step */
    size_t n_gemms;
    tt_profile_gemm gemms[TT_PROFILE_MAX_GEMMS];
    double gemm_step_s;
    /* the compute phase's other kernels (every launch but the GEMMs: epilogues, the loss, column sums...): the
     * compute phase timed by the trainer with its GEMMs skipped, at `rows` rows; their count */
    size_t kernels;
    double kernels_s;
    /* the step's phases timed one at a time by the trainer (tt_probe_run; --reduce cpu --update host), and each
     * placement's reduce phase (NaN where it cannot run) */
    double pull_s, data_s, compute_s, push_grad_s, push_stats_s, straggle_s, update_s;
    double reduce_s[TT_REDUCE_COUNT];
    size_t n_steps;
    tt_profile_step steps[TT_PROFILE_MAX_STEPS];
} tt_profile;

/* The measured figures into p: the probe's (tt_probe_run, its config) and the kernels' (tt_probe_kernels_run). The
 * strings that name the build, the BLAS, the backend and the model, and the steps, are the caller's to set.
 * (In src/step/probe_kernels.c, beside the measurements: the reader here stands alone, for its fuzz target.) */
void tt_profile_fill(tt_profile *p, const tt_probe_config *c, const tt_probe *pr, const tt_probe_kernels *k);

/* Writes p as one JSON object (a few lines, committed in one write) to o. */
void tt_profile_write(tt_out *o, const tt_profile *p);

/* Reads path as a profile: a regular file (tt_input_open: a FIFO, a directory or a device is refused without
 * blocking; a symbolic link to a regular file is followed, as for every input) of at most TT_PROFILE_MAX_BYTES,
 * strict JSON (tt_json.h), holding either the probe's object or an object with one under "probe", or with one per
 * model under "probe" (tools/gpu-check's report.json: read when it holds one; several are refused, named). In the probe's object every key is required, unknown keys are refused (version 1's set is fixed: a
 * new field is a new version), and every value's type and range is checked. TT_ERR_IO / TT_ERR_FORMAT with one line
 * naming the file and the field ("PATH: gemms[2].m: 0 is outside 1..2147483647"). */
tt_status tt_profile_read(const char *path, tt_profile *p, tt_error *err);

/* The same over text[0..n) (the tests and fuzzers; `name` stands for the path in messages). */
tt_status tt_profile_parse(const char *text, size_t n, const char *name, tt_profile *p, tt_error *err);

#ifdef __cplusplus
}
#endif
#endif
