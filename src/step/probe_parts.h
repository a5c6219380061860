/* probe_parts.h — private to the probe's files (not a public header): what they share among themselves. probe.c runs
 * the probe (tt_probe_run: the links and rates on its own runner, then the phases) and prints it; probe_phases.c
 * times the step's phases and whole steps by the trainer on synthetic samples; probe_kernels.c times each kernel and
 * GEMM alone for `probe --json`; probe_predict.c turns a probe into predicted steps; probe_net.c measures and models
 * the cross-node combine. The public face of all five is tt_probe.h.
 * Not for: anything outside those files. */
#ifndef TT_PROBE_PARTS_H
#define TT_PROBE_PARTS_H

#include <stddef.h>
#include <stdint.h>

#include "tt_probe.h"

#define PROBE_MAX_REPS 64

/* Reps per measurement: c->reps, 30 when 0 (not capped: the caller caps where its buffers need it). */
static inline size_t probe_reps(const tt_probe_config *c) { return c->reps ? c->reps : 30; }

/* Floats of the A, B and C operands big enough for every one of the n GEMMs g (1 at least each): the step's GEMMs
 * all read and write the same three buffers. */
void probe_gemm_operands(const tt_gemm_shape *g, size_t n, size_t sizes[3]);

/* ---- probe_phases.c ---------------------------------------------------------------------------------------------- */

/* Synthetic samples for the step's phases: PROBE_DATA_ROWS rows of pseudo-random pixels and labels, and a batch of
 * indices drawn at random over them, so the data phase gathers from memory as it does from a shuffled set. */
typedef struct probe_data {
    tt_dataset ds;
    uint32_t *idx;
} probe_data;

tt_status probe_data_make(const tt_model *m, size_t batch, probe_data *d, tt_error *err);
void probe_data_free(probe_data *d);

/* Whether every placement's trainer and the synthetic inputs fit, before anything is measured (a batch too large
 * for the machine is refused at once, not after minutes of GEMMs at its shapes). */
tt_status probe_placements_fit(const tt_probe_config *c, tt_error *err);

/* The step's phases under placement r, timed by the trainer (a trainer of its own) on d; the peer matrix into p
 * (cpu). A placement that cannot run here (nccl on the CPU backend) is skipped: *ran = 0. */
tt_status probe_placement(const tt_probe_config *c, tt_reduce r, const probe_data *d, tt_phase_times *pt,
                          tt_probe *p, int *ran, tt_error *err);

/* tt_probe_run's second half: the step's phases by the trainer's own code, under every placement that can run here,
 * and the optimizer alone (host and device), into p. */
tt_status probe_phases(const tt_probe_config *c, tt_probe *p, tt_error *err);

/* ---- probe_predict.c --------------------------------------------------------------------------------------------- */

/* The expected longest, over c's towers, of `k` steps' sums of (base + tower t's --slow-tower delay), seconds. */
double probe_expected_max(const tt_probe_config *c, double base, size_t k);

#endif
