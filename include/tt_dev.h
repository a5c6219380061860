/* tt_dev.h — the one seam between tower code and hardware.
 *
 * A backend fills one const tt_dev_ops table; a tower holds a tt_dev (table + its own context). Layers, towers and
 * the trainer touch device memory only through the tt_dev_* wrappers below, which check their arguments and fall
 * back where an optional member is NULL. The CPU backend (src/dev/dev_cpu.c) is the oracle; the CUDA backend
 * (cuda/dev_cuda.cu) fills the same table with cuBLAS and kernels built from tt_math.h.
 *
 * The ops are written once, in TT_DEV_OPS below: the table's members, the wrappers' declarations here and their
 * definitions (src/dev/dev.c), the launch counter's table (src/step/launches.c) and the CUDA backend's table are
 * made from that list; docs/architecture.md ("Adding a device op") says what else a new op needs.
 *
 * Conventions: pointers named d_* are device memory of this tower, h_* are host memory. Matrices are row-major.
 * Every operation is issued on the tower's stream and may be asynchronous; tt_dev_sync waits for all of them.
 * Not for: choosing a backend (tt_backend.h) or anything about models. */
#ifndef TT_DEV_H
#define TT_DEV_H

#include "tt_augment.h"
#include "tt_common.h"
#include "tt_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The seam's ops, in the table's order. A generator passes four macros, one for each form an entry takes:
 *   OP(name, launches, skip, check, params...): an op on the tower's stream that returns nothing; every backend has
 *       it. Its wrapper tt_dev_<name>(tt_dev *dev, params) is generated: it returns at once when `skip` holds (0:
 *       never), asserts `check` (1: nothing to check), then calls the op with the tower's context. The launch
 *       counter counts `launches` for it: the kernels the CUDA backend launches (0: a copy, an event or a wait).
 *   RET(name, need, ret, check, params...): the same for an op that returns `ret`; its wrapper returns the op's
 *       value. Not counted (no compute phase calls one).
 *   OWN(name, need, ret, params...): an op on the tower's context whose wrapper is written out in src/dev/dev.c and
 *       declared below (a fallback, a count of allocations, other arguments); counted by hand in
 *       src/step/launches.c where a compute phase calls it (sgemm, the cuBLASLt epilogues).
 *   BACKEND(name, need, ret, params...): a member bound to no tower, its parameters in full (the registry, the
 *       trainer and written-out wrappers call it).
 * need: MUST (every backend fills it: tt_dev_init refuses a table without it, naming it) or MAY (NULL: the backend
 * has none, and the wrapper or caller falls back). params: (type, name) pairs, after the context `void *ctx` that
 * every member but BACKEND's takes first. */
#define TT_DEV_OPS(OP, RET, OWN, BACKEND)                                                                              \
    /* Create the per-tower context bound to device `ordinal` (GPU index; ignored by the CPU backend). */              \
    BACKEND(init, MUST, tt_status, (void **, ctx), (int, ordinal), (tt_error *, err))                                  \
    OWN(destroy, MUST, void) /* tt_dev_free */                                                                         \
    /* Free and total memory of device `ordinal`, for the run's memory budget (CUDA: cudaMemGetInfo). NULL: the        \
     * backend's device memory is host RAM (the CPU backend), and the budget counts it there. */                       \
    BACKEND(mem_info, MAY, tt_status, (int, ordinal), (size_t *, free_bytes), (size_t *, total_bytes))                 \
    /* Bind the calling thread to the device (called once at the top of a tower thread; NULL: nothing to bind). */     \
    OWN(bind, MAY, void)                                                                                               \
    /* Device memory. alloc returns NULL on failure (tt_dev_alloc counts what it gives). */                            \
    OWN(alloc, MUST, void *, (size_t, bytes))                                                                          \
    OWN(dfree, MUST, void, (void *, d))                                                                                \
    /* Page-locked host memory for async copies (NULL: tt_malloc / tt_free). */                                        \
    OWN(host_alloc, MAY, void *, (size_t, bytes))                                                                      \
    OWN(host_free, MAY, void, (void *, h))                                                                             \
    /* Copies, issued on the tower's stream. */                                                                        \
    OP(h2d, 0, bytes == 0, d_dst && h_src, (void *, d_dst), (const void *, h_src), (size_t, bytes))                    \
    OP(d2h, 0, bytes == 0, h_dst && d_src, (void *, h_dst), (const void *, d_src), (size_t, bytes))                    \
    OP(d2d, 0, bytes == 0 || d_dst == d_src, d_dst && d_src, (void *, d_dst), (const void *, d_src), (size_t, bytes))  \
    OP(sync, 0, 0, 1) /* waits until every op issued on the tower's streams has run */                                 \
    /* Copy from another tower's device memory (same backend) into this tower's, on this tower's stream. The source    \
     * must be complete (its tower synced) before the call. CPU: memcpy between the towers' RAM; CUDA: peer copy. */   \
    OWN(peer_copy, MUST, void, (void *, d_dst), (void *, src_ctx), (const void *, d_src), (size_t, bytes))             \
    /* --precision bf16 / fp16: the GEMMs issued from now on take operands the caller has rounded to format fmt and   \
     * accumulate in FP32 (TT_FMT_FP32: FP32 operands, as at init). CUDA: cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_  \
     * 16BF or _16F, the tensor cores' path; the cuBLASLt epilogues are not offered then (their wrappers fall back).  \
     * NULL: sgemm as always — exact on such operands (a product of two 16-bit values is exact in FP32): the CPU's.  */ \
    OWN(gemm_format, MAY, void, (int, fmt))                                                                            \
    /* C = alpha * op(A) * op(B) + beta * C, row-major; op(A) is M x K, op(B) is K x N. Counted by hand (the GEMMs'    \
     * flops and shapes too). */                                                                                       \
    OWN(sgemm, MUST, void, (int, trans_a), (int, trans_b), (size_t, M), (size_t, N), (size_t, K), (float, alpha),      \
        (const float *, d_a), (size_t, lda), (const float *, d_b), (size_t, ldb), (float, beta), (float *, d_c),       \
        (size_t, ldc))                                                                                                 \
    OP(fill, 1, n == 0, d_x, (float *, d_x), (size_t, n), (float, value))                                              \
    /* y[i] = tt_add(y[i], x[i]). */                                                                                   \
    OP(add, 1, n == 0, d_y && d_x, (float *, d_y), (const float *, d_x), (size_t, n))                                  \
    /* y[i] = x[i] * scale for raw bytes x (tt_pixel). */                                                              \
    OP(u8_to_f32, 1, n == 0, d_y && d_x, (float *, d_y), (const uint8_t *, d_x), (size_t, n), (float, scale))          \
    /* --augment, a training step's data phase: y (rows, H, W, C) = each image of x shifted and flipped by its own     \
     * draw (tt_augment.h: tt_augment_sample of its data-set index ids[r] under key, then tt_augment_pixel). y does   \
     * not overlap x. */                                                                                               \
    OP(augment, 1, rows == 0, d_y && d_x && d_ids && a && H && W && C && (dev->ops->no_memory || d_y != d_x),          \
       (float *, d_y), (const float *, d_x), (const uint32_t *, d_ids), (size_t, rows), (size_t, H), (size_t, W),      \
       (size_t, C), (const tt_augment *, a), (uint64_t, key))                                                          \
    /* --precision bf16 / fp16 (fmt: tt_math.h's TT_FMT_BF16, TT_FMT_FP16). round16: x[i] = tt_round_fmt(x[i], fmt) in \
     * place — a value stored in 16 bits between layers. widen16: y[i] = tt_from16(x[i], fmt) — weights pulled in 16 \
     * bits. narrow16: y[i] = tt_to16(x[i], fmt) (y NULL: none written) and counts[0], counts[1] = the elements that  \
     * underflowed to zero and that are Inf or NaN in 16 bits (tt_narrow_elem); counts holds TT_NARROW_COUNTS         \
     * uint32 (the rest: the backend's partial counts) — a gradient pushed in 16 bits. */                              \
    OP(round16, 1, n == 0, d_x && fmt != TT_FMT_FP32, (float *, d_x), (size_t, n), (int, fmt))                         \
    OP(widen16, 1, n == 0, d_y && d_x && fmt != TT_FMT_FP32, (float *, d_y), (const uint16_t *, d_x), (size_t, n),     \
       (int, fmt))                                                                                                     \
    OP(narrow16, 2, 0, d_counts && (n == 0 || d_x) && fmt != TT_FMT_FP32, (uint16_t *, d_y), (const float *, d_x),     \
       (size_t, n), (int, fmt), (uint32_t *, d_counts))                                                                \
    /* y[r,c] += b[c] for a (rows, cols) matrix. */                                                                    \
    OP(bias_add, 1, rows == 0 || cols == 0, d_y && d_b, (float *, d_y), (const float *, d_b), (size_t, rows),          \
       (size_t, cols))                                                                                                 \
    /* out[c] = sum_r x[r,c] for a (rows, cols) matrix. */                                                             \
    OP(col_sum, tt_col_sum_launches(rows), cols == 0, d_out && (rows == 0 || d_x), (float *, d_out),                   \
       (const float *, d_x), (size_t, rows), (size_t, cols))                                                           \
    OP(relu_fwd, 1, n == 0, d_y && d_x, (float *, d_y), (const float *, d_x), (size_t, n))                             \
    OP(relu_bwd, 1, n == 0, d_dx && d_dy && d_y, (float *, d_dx), (const float *, d_dy), (const float *, d_y),         \
       (size_t, n))                                                                                                    \
    /* The fused epilogues of a layer whose relu follows it (cuBLASLt's RELU_BIAS and DRELU_BGRAD, as kernels):        \
     * bias_relu: y[r,c] = tt_relu(y[r,c] + b[c]), in place — bias_add then relu_fwd, to the bit, in one pass;         \
     * drelu_bgrad: dz[i] = tt_relu_grad(dy[i], y[i]) and db[c] = sum_r dz[r,c] — relu_bwd then col_sum, to the bit    \
     * (the backend's col_sum order), in one pass; dz may alias dy. */                                                 \
    OP(bias_relu, 1, rows == 0 || cols == 0, d_y && d_b, (float *, d_y), (const float *, d_b), (size_t, rows),         \
       (size_t, cols))                                                                                                 \
    OP(drelu_bgrad, tt_col_sum_launches(rows), cols == 0, d_db && (rows == 0 || (d_dz && d_dy && d_y)),                \
       (float *, d_dz), (float *, d_db), (const float *, d_dy), (const float *, d_y), (size_t, rows), (size_t, cols))  \
    /* BatchNorm over a (rows, cols) matrix whose columns are the channels (tt_math.h's tt_bn_*; the layer is          \
     * src/layers/batchnorm.c). col_dev_sum: out[c] = (scale ? scale[c] : 1) * the sum over r of                       \
     * tt_bn_dev_prod(x[r,c], m_c, w ? w[r,c] : x[r,c] - m_c) with m_c = center[c] * center_scale, in col_sum's order  \
     * (chunks of TT_COL_CHUNK rows from 0.0f, then the chunks' sums); rows may be 0 (zeros). bn_stats, per channel c  \
     * of C: training (s1 != NULL): mean = s1[c] * inv_n, var = s2[c] * inv_n; evaluation (s1 NULL): mean and var the  \
     * moving ones, moving[c] and moving[C + c]. save[c] = mean, save[C + c] = tt_bn_inv(var, epsilon); with tail      \
     * (training only), tail[c] and tail[C + c] = tt_bn_moving_step of mean and var against moving, with factor.       \
     * bn_fwd: y = tt_bn_y(x, save, gamma = gb[c], beta = gb[cols + c]); y may alias x. bn_dx: dx = tt_bn_dx(dy, x,    \
     * save, gamma[c], sdy = sums[cols + c], sdyx = sums[c], inv_n); dx never aliases. */                              \
    OP(col_dev_sum, tt_col_sum_launches(rows), cols == 0, d_out && d_center && (rows == 0 || d_x), (float *, d_out),   \
       (const float *, d_x), (const float *, d_w), (const float *, d_center), (float, center_scale),                   \
       (const float *, d_scale), (size_t, rows), (size_t, cols))                                                       \
    OP(bn_stats, 1, C == 0, d_save && d_moving && (!d_s1 || d_s2) && (!d_tail || d_s1), (float *, d_save),             \
       (float *, d_tail), (const float *, d_s1), (const float *, d_s2), (const float *, d_moving), (size_t, C),        \
       (float, inv_n), (float, epsilon), (float, factor))                                                              \
    OP(bn_fwd, 1, rows == 0 || cols == 0, d_y && d_x && d_save && d_gb, (float *, d_y), (const float *, d_x),          \
       (const float *, d_save), (const float *, d_gb), (size_t, rows), (size_t, cols))                                 \
    OP(bn_dx, 1, rows == 0 || cols == 0,                                                                             \
       d_dx && d_dy && d_x && d_save && d_gamma && d_sums && (dev->ops->no_memory || d_dx != d_dy),                    \
       (float *, d_dx), (const float *, d_dy), (const float *, d_x), (const float *, d_save),                          \
       (const float *, d_gamma), (const float *, d_sums), (size_t, rows), (size_t, cols), (float, inv_n))              \
    /* y (cols, rows) = the transpose of x (rows, cols); y and x do not overlap (unchecked for the launch counter,     \
     * whose buffers are one placeholder). */                                                                          \
    OP(transpose, 1, rows == 0 || cols == 0,                                                                           \
       d_y && d_x && (dev->ops->no_memory || d_y + rows * cols <= d_x || d_x + rows * cols <= d_y), (float *, d_y),    \
       (const float *, d_x), (size_t, rows), (size_t, cols))                                                           \
    /* Per row of (rows, classes) logits: stats[2r] = loss, stats[2r+1] = rank of the label (see tt_math.h); d_dlogits \
     * (may be NULL) = grad_scale * (softmax - onehot). */                                                             \
    OP(softmax_xent, 1, rows == 0, d_stats && d_logits && d_labels && classes >= 1, (float *, d_dlogits),              \
       (float *, d_stats), (const float *, d_logits), (const int32_t *, d_labels), (size_t, rows), (size_t, classes),  \
       (float, grad_scale))                                                                                            \
    /* Convolution and pooling, NHWC (geometry g; tt_math.h's per-patch / per-pixel functions). x and dx are a shard   \
     * of samples (row r at r * H*W*C); its patches are numbered q = r * OH*OW + oh * OW + ow. im2col: cols (n,        \
     * KH*KW*C) = the patches q0 .. q0+n-1; col2im: ADDS those patches' column gradients into dx (the caller zeroes dx \
     * once, then adds its chunks in ascending order); maxpool_fwd: y (rows, OH, OW, C); maxpool_bwd: dx (rows, H, W,  \
     * C), two kernels where the windows do not overlap (dx zeroed, then each dy routed to its maximum), else one. */  \
    OP(im2col, 1, n == 0, d_cols && d_x && g->OH && g->OW && g->SH && g->SW, (float *, d_cols), (const float *, d_x),  \
       (size_t, q0), (size_t, n), (const tt_conv_geom *, g))                                                           \
    OP(col2im, 1, n == 0, d_dx && d_dcols && g->OH && g->OW && g->SH && g->SW, (float *, d_dx),                        \
       (const float *, d_dcols), (size_t, q0), (size_t, n), (const tt_conv_geom *, g))                                 \
    OP(maxpool_fwd, 1, rows == 0, d_y && d_x && g->OH && g->OW && g->SH && g->SW, (float *, d_y),                      \
       (const float *, d_x), (size_t, rows), (const tt_conv_geom *, g))                                                \
    OP(maxpool_bwd, g->SH >= g->KH && g->SW >= g->KW ? 2 : 1, rows == 0, d_dx && d_dy && d_x && d_y && g->SH && g->SW, \
       (float *, d_dx), (const float *, d_dy), (const float *, d_x), (const float *, d_y), (size_t, rows),             \
       (const tt_conv_geom *, g))                                                                                      \
    /* y (rows, cols) = tt_dropout(x) for rows that are data-set samples ids[0..rows) (the same call is the backward:  \
     * the mask is recomputed). y may alias x. */                                                                      \
    OP(dropout, 1, rows == 0 || cols == 0, d_y && d_x && d_ids && rate >= 0.0f && rate < 1.0f, (float *, d_y),         \
       (const float *, d_x), (size_t, rows), (size_t, cols), (float, rate), (uint64_t, key),                           \
       (const uint32_t *, d_ids))                                                                                      \
    /* Embedding over n token ids t (floats): y (n, E) = rows of w (V, E); embed_bwd: dw (V, E) = for every id, the    \
     * sum of the dy rows of its tokens in token order (every element written, n = 0 too; no atomics: the order is     \
     * fixed; its launches: the sort's, tt_embed_bwd_launches). */                                                     \
    OP(embed_fwd, 1, n == 0, d_y && d_w && d_t && V && E, (float *, d_y), (const float *, d_w), (const float *, d_t),  \
       (size_t, n), (size_t, V), (size_t, E))                                                                          \
    OP(embed_bwd, tt_embed_bwd_launches(n), 0, d_dw && V && E && (n == 0 || (d_dy && d_t)), (float *, d_dw),           \
       (const float *, d_dy), (const float *, d_t), (size_t, n), (size_t, V), (size_t, E))                             \
    /* Rows by index (--data-on device: a step's samples and labels gathered on the device from the training set held  \
     * there, by the host's shuffled indices): dst row r (row_bytes bytes) = src row idx[r] of the (n_src, row_bytes)  \
     * table, or zero bytes where idx[r] >= n_src. dst does not overlap src or idx. */                                 \
    OWN(gather_rows, MUST, void, (void *, d_dst), (const void *, d_src), (size_t, n_src), (const uint32_t *, d_idx),   \
        (size_t, rows), (size_t, row_bytes))                                                                           \
    /* The optimizer on this device (--update device, replicated): for every block of TT_UPDATE_BLOCK elements of g,   \
     * bad[block] = 1 if it holds a NaN or an Inf, else 0; unless skip, every element of a finite block gets           \
     * tt_update_elem(u, w, m, v, a, g) (m, v, a may be NULL where the optimizer keeps none). */                       \
    OP(update, skip ? 2 : 3, n == 0, u && d_w && d_g && d_bad, (const tt_update_args *, u), (float *, d_w),            \
       (const float *, d_g), (float *, d_m), (float *, d_v), (float *, d_a), (int32_t *, d_bad), (size_t, n),          \
       (int, skip))                                                                                                    \
    /* Events: marks on the tower's stream, so the ledger is timed without waiting for the device. event_create gives  \
     * NULL on failure (tt_dev_event_create counts what it gives); event_record marks the point the stream has         \
     * reached; event_elapsed gives the seconds from a to b once both have completed (after a sync). CPU: every op     \
     * runs as it is issued, so an event is a clock reading (tt_now). */                                               \
    OWN(event_create, MUST, void *)                                                                                    \
    OWN(event_destroy, MUST, void, (void *, ev))                                                                       \
    OP(event_record, 0, 0, ev, (void *, ev))                                                                           \
    RET(event_elapsed, MUST, double, a && b, (void *, a), (void *, b))                                                 \
    /* event_done: 1 if the stream has run past the event's record (0: not yet; never waits); event_sync waits until   \
     * it has. --overlap on reads a bucket of pushed gradients on the host once its event says it has landed. CPU:     \
     * always done. */                                                                                                 \
    RET(event_done, MUST, int, ev, (void *, ev))                                                                       \
    OP(event_sync, 0, 0, ev, (void *, ev))                                                                             \
    /* Side streams per tower, one per direction, for copies beside the compute (--overlap on: a bucket's push during  \
     * the backward, the next step's weights pulled ahead). side_copy makes the direction's stream wait for `after`    \
     * (an event recorded on the tower's stream; NULL: no wait), copies `bytes` host -> device (to_device) or device   \
     * -> host (pinned host memory), and records `done` there; stream_wait makes the tower's stream wait for the last  \
     * record of `ev` (a side stream's). sync waits for every stream. CPU: side_copy is a memcpy as it is issued,      \
     * stream_wait nothing. */                                                                                         \
    OP(side_copy, 0, 0, done && (bytes == 0 || (dst && src)), (void *, dst), (const void *, src), (size_t, bytes),     \
       (int, to_device), (void *, after), (void *, done))                                                              \
    OP(stream_wait, 0, 0, ev, (void *, ev))                                                                            \
    /* Once per run before any tower exists: enable direct (peer) access between the devices ords[0..n) wherever the   \
     * hardware allows it — idempotent, so a second run in one process is fine — and say for every ordered pair how a  \
     * copy from ords[j] into ords[i] travels: link[i * n + j] = TT_LINK_*. NULL: every tower shares one memory (the   \
     * CPU backend). */                                                                                                \
    BACKEND(peer_setup, MAY, tt_status, (const int *, ords), (int, n), (int *, link), (tt_error *, err))               \
    /* Collectives (NCCL): comm_init, from one thread, makes one communicator over the n towers' contexts (rank r =    \
     * ctxs[r]; every device distinct); comm_reduce is each tower thread's part of a sum over the ranks of d_send (n   \
     * floats) into d_recv of rank root (root >= 0: ncclReduce; other ranks' d_recv may be NULL) or of every rank      \
     * (root < 0: ncclAllReduce), issued on the tower's stream. NULL: the backend has none. */                         \
    BACKEND(comm_init, MAY, tt_status, (void **, comm), (void *const *, ctxs), (int, n), (tt_error *, err))            \
    BACKEND(comm_free, MAY, void, (void *, comm))                                                                      \
    BACKEND(comm_reduce, MAY, void, (void *, comm), (int, rank), (void *, ctx), (const float *, d_send),               \
            (float *, d_recv), (size_t, n), (int, root))                                                               \
    /* Graphs (CUDA graphs; NULL: every op runs as it is issued, and --graphs on is refused). capture_begin: the       \
     * tower's ops and event records from now on are kept, not run (tt_dev_capture_begin: the backend has all four);   \
     * capture_end: the kept sequence as a graph, or NULL where it cannot be replayed (the backend had to grow its     \
     * scratch during the capture: the caller issues the same ops again, uncaptured); graph_launch: the whole sequence \
     * issued again with one call, the ops' arguments as captured — 0 and nothing issued if the graph is stale (the    \
     * backend's scratch moved since: the caller frees it and issues the ops uncaptured); graph_free releases one      \
     * (NULL is fine). No sync may happen in a capture. */                                                             \
    OWN(capture_begin, MAY, void)                                                                                      \
    RET(capture_end, MAY, void *, 1)                                                                                   \
    RET(graph_launch, MAY, int, graph, (void *, graph))                                                                \
    OWN(graph_free, MAY, void, (void *, graph))                                                                        \
    /* The name of device `ordinal`, for reports (`probe --json`): CUDA the GPU's (cudaGetDeviceProperties), CPU the   \
     * processor's model name. NULL: the backend's name stands for it (tt_dev_device_name). */                         \
    BACKEND(device_name, MAY, void, (int, ordinal), (char *, out), (size_t, len))                                      \
    /* --epilogues lt (tt_pass.lt_epilogues): a dense layer's forward as one call, cuBLASLt's BIAS / RELU_BIAS         \
     * epilogues. y (M, N) = act(x (M, K) · w (K, N) + b), row-major, leading dimensions K, N, N: the FP32 GEMM's      \
     * result (alpha 1, beta 0: y is written, never read), then b[c] added to every row's column c (b NULL: no bias),  \
     * then tt_relu (relu 1) or nothing (relu 0). d_mask (relu 1 with a bias only; NULL: none): also write the relu's  \
     * bit-mask there (cuBLASLt's RELU_AUX_BIAS), tt_relu_mask_bytes(M, N) bytes at a 256-byte boundary, for           \
     * gemm_drelu_bgrad to read in the backward. Returns 1 when issued; 0 when the backend offers no algorithm for     \
     * this shape, nothing issued: the wrapper issues sgemm + bias_relu / bias_add / relu_fwd instead (and no mask).   \
     * NULL: always that fallback (the CPU backend, whose fallback is the same arithmetic). */                         \
    OWN(gemm_bias_act, MAY, int, (size_t, M), (size_t, N), (size_t, K), (const float *, d_x), (const float *, d_w),    \
        (const float *, d_b), (float *, d_y), (int, relu), (void *, d_mask))                                           \
    /* --epilogues lt, training: a dense layer's dx GEMM carrying the gradient of the relu before it and of that       \
     * relu's layer's bias (cuBLASLt's DRELU_BGRAD): dx (M, N) = dy (M, K) · wᵀ with w (N, K) row-major (alpha 1, beta \
     * 0), then dz[r,c] = dx[r,c] where the mask's bit (r, c) is set and 0 elsewhere, written to dz (M, N, row-major), \
     * and db[c] = sum_r dz[r,c]. The mask is the one gemm_bias_act wrote (relu 1, a bias, d_mask set) for the layer   \
     * whose output is this layer's input: bit (r, c) set where that relu passed (y[r,c] > 0), in the backend's layout \
     * within tt_relu_mask_bytes(M, N). Returns 1 when issued; 0 when the backend offers no algorithm, nothing issued: \
     * the wrapper issues sgemm + drelu_bgrad. NULL: always that fallback. */                                          \
    OWN(gemm_drelu_bgrad, MAY, int, (size_t, M), (size_t, N), (size_t, K), (const float *, d_dy),                      \
        (const float *, d_w), (const void *, d_mask), (float *, d_dz), (float *, d_db))

/* ---- the list's machinery ----------------------------------------------------------------------------------------
 * TT_DEV_EACH(M, p1, ..., pk) applies M to each (type, name) pair (k = 0 to 14): with TT_DEV_PARAM it gives the
 * parameters after the context (", float *d_y, size_t n"), with TT_DEV_ARG the arguments (", d_y, n"). */
#define TT_DEV_PARAM(type, name) , type name
#define TT_DEV_ARG(type, name) , name
#define TT_DEV_DECL(type, name) type name
#define TT_DEV_NONE(...) /* the generator that makes nothing of an entry */
#define TT_DEV_CAT(a, b) TT_DEV_CAT_(a, b)
#define TT_DEV_CAT_(a, b) a##b
#define TT_DEV_EACH(M, ...) TT_DEV_CAT(TT_DEV_EACH_, TT_DEV_COUNT(__VA_ARGS__))(M, __VA_ARGS__)
/* The pairs' count; 0 where the first argument is not a pair (an op on the context alone). */
#define TT_DEV_COUNT(...) TT_DEV_CAT(TT_DEV_COUNT_, TT_DEV_IS_PAIR(TT_DEV_FIRST(__VA_ARGS__, ~)))(__VA_ARGS__)
#define TT_DEV_COUNT_0(...) 0
#define TT_DEV_COUNT_1(...) TT_DEV_15TH(__VA_ARGS__, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, ~)
#define TT_DEV_15TH(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, n, ...) n
#define TT_DEV_FIRST(a, ...) a
#define TT_DEV_IS_PAIR(x) TT_DEV_SECOND(TT_DEV_PROBE x, 0, ~)
#define TT_DEV_PROBE(...) ~, 1
#define TT_DEV_SECOND(...) TT_DEV_SECOND_(__VA_ARGS__)
#define TT_DEV_SECOND_(a, b, ...) b
#define TT_DEV_EACH_0(M, ...)
#define TT_DEV_EACH_1(M, p) M p
#define TT_DEV_EACH_2(M, p, ...) M p TT_DEV_EACH_1(M, __VA_ARGS__)
#define TT_DEV_EACH_3(M, p, ...) M p TT_DEV_EACH_2(M, __VA_ARGS__)
#define TT_DEV_EACH_4(M, p, ...) M p TT_DEV_EACH_3(M, __VA_ARGS__)
#define TT_DEV_EACH_5(M, p, ...) M p TT_DEV_EACH_4(M, __VA_ARGS__)
#define TT_DEV_EACH_6(M, p, ...) M p TT_DEV_EACH_5(M, __VA_ARGS__)
#define TT_DEV_EACH_7(M, p, ...) M p TT_DEV_EACH_6(M, __VA_ARGS__)
#define TT_DEV_EACH_8(M, p, ...) M p TT_DEV_EACH_7(M, __VA_ARGS__)
#define TT_DEV_EACH_9(M, p, ...) M p TT_DEV_EACH_8(M, __VA_ARGS__)
#define TT_DEV_EACH_10(M, p, ...) M p TT_DEV_EACH_9(M, __VA_ARGS__)
#define TT_DEV_EACH_11(M, p, ...) M p TT_DEV_EACH_10(M, __VA_ARGS__)
#define TT_DEV_EACH_12(M, p, ...) M p TT_DEV_EACH_11(M, __VA_ARGS__)
#define TT_DEV_EACH_13(M, p, ...) M p TT_DEV_EACH_12(M, __VA_ARGS__)
#define TT_DEV_EACH_14(M, p, ...) M p TT_DEV_EACH_13(M, __VA_ARGS__)

/* Members: ret (*name)(void *ctx, params) — BACKEND's: ret (*name)(params). */
#define TT_DEV_MEMBER(name, ret, ...) ret (*name)(void *ctx TT_DEV_EACH(TT_DEV_PARAM, __VA_ARGS__));
#define TT_DEV_MEMBER_OP(name, launches, skip, check, ...) TT_DEV_MEMBER(name, void, __VA_ARGS__)
#define TT_DEV_MEMBER_RET(name, need, ret, check, ...) TT_DEV_MEMBER(name, ret, __VA_ARGS__)
#define TT_DEV_MEMBER_OWN(name, need, ret, ...) TT_DEV_MEMBER(name, ret, __VA_ARGS__)
#define TT_DEV_MEMBER_BACKEND(name, need, ret, first, ...)                                                             \
    ret (*name)(TT_DEV_DECL first TT_DEV_EACH(TT_DEV_PARAM, __VA_ARGS__));

typedef struct tt_dev_ops {
    const char *name;
    /* The largest GEMM a layer should issue at a time, as M*N*K (0: no limit): a convolution cuts its patches into
     * chunks that size and runs im2col + its GEMMs chunk by chunk. The CPU wants GEMMs OpenBLAS runs without packing
     * (its small-matrix kernels, M*N*K <= 10^6 on AVX-512 cores) on columns that stay in cache; a GPU wants one large
     * GEMM per shard. */
    size_t chunk_mnk;
    /* 1 for the launch counter only (src/step/launches.c): its ops touch no memory and every buffer it is given is
     * one placeholder address, so the seam skips its checks on where buffers lie (a transpose's overlap). */
    int no_memory;
    /* 1: every op runs on the calling thread as it is issued (the CPU backend): a copy on the side stream takes the
     * issuing tower's own time; 0: ops run beside the host (a GPU's streams). */
    int inline_ops;
    size_t capture_bytes; /* device memory a tower's first capture allocates (CUDA: cuBLAS's own workspace) */
    size_t lt_bytes;      /* device memory a tower's context holds for gemm_bias_act from init (CUDA: cuBLASLt's
                           * workspace), counted in the run's memory plan */
    TT_DEV_OPS(TT_DEV_MEMBER_OP, TT_DEV_MEMBER_RET, TT_DEV_MEMBER_OWN, TT_DEV_MEMBER_BACKEND)
} tt_dev_ops;
#undef TT_DEV_MEMBER
#undef TT_DEV_MEMBER_OP
#undef TT_DEV_MEMBER_RET
#undef TT_DEV_MEMBER_OWN
#undef TT_DEV_MEMBER_BACKEND

#define TT_MAX_DEVICES 64 /* devices one run can use */

/* How a copy between two towers' devices travels (tt_dev_ops.peer_setup). */
enum { TT_LINK_SAME = 0, TT_LINK_PEER = 1, TT_LINK_STAGED = 2 };

/* One tower's handle on its device. */
typedef struct tt_dev {
    const tt_dev_ops *ops;
    void *ctx;
    int ordinal;
    uint64_t n_alloc; /* device allocations made through this handle (the step loop must make none) */
} tt_dev;

/* The first op a backend's table lacks of those every table must have (need MUST, and every OP), by its name; NULL
 * when it has them all. */
const char *tt_dev_ops_missing(const tt_dev_ops *ops);
/* Refuses (TT_ERR_DEVICE) a table that lacks an op it must have (tt_dev_ops_missing). */
tt_status tt_dev_init(tt_dev *dev, const tt_dev_ops *ops, int ordinal, tt_error *err);
void tt_dev_free(tt_dev *dev); /* accepts a zeroed or half-built handle; safe to call twice */

/* The wrappers of the OP and RET entries: tt_dev_<name>(tt_dev *dev, params), e.g.
 * void tt_dev_fill(tt_dev *dev, float *d_x, size_t n, float value). */
#define TT_DEV_PROTO_OP(name, launches, skip, check, ...)                                                              \
    void tt_dev_##name(tt_dev *dev TT_DEV_EACH(TT_DEV_PARAM, __VA_ARGS__));
#define TT_DEV_PROTO_RET(name, need, ret, check, ...)                                                                  \
    ret tt_dev_##name(tt_dev *dev TT_DEV_EACH(TT_DEV_PARAM, __VA_ARGS__));
TT_DEV_OPS(TT_DEV_PROTO_OP, TT_DEV_PROTO_RET, TT_DEV_NONE, TT_DEV_NONE)
#undef TT_DEV_PROTO_OP
#undef TT_DEV_PROTO_RET

/* The wrappers of the OWN entries, written out in src/dev/dev.c. */
void tt_dev_bind(tt_dev *dev);
void *tt_dev_alloc(tt_dev *dev, size_t bytes);       /* NULL on failure */
float *tt_dev_alloc_f32(tt_dev *dev, size_t n);       /* NULL on failure or overflow */
void tt_dev_dfree(tt_dev *dev, void *d);
void *tt_dev_host_alloc(tt_dev *dev, size_t bytes);  /* NULL on failure */
void tt_dev_host_free(tt_dev *dev, void *h);
void tt_dev_peer_copy(tt_dev *dst, void *d_dst, tt_dev *src, const void *d_src, size_t bytes);
void tt_dev_gemm_format(tt_dev *dev, int fmt); /* NULL op: nothing to set */
void tt_dev_sgemm(tt_dev *dev, int trans_a, int trans_b, size_t M, size_t N, size_t K, float alpha, const float *d_a,
                  size_t lda, const float *d_b, size_t ldb, float beta, float *d_c, size_t ldc);
/* y (M, N) = act(x (M, K) · w (K, N) + b) (tt_dev_ops.gemm_bias_act): lt 1 offers it to the backend as one call;
 * lt 0, no such op or no algorithm for the shape: sgemm then bias_relu (relu, b), bias_add (b) or relu_fwd (relu).
 * b may be NULL (no bias). d_mask (relu and b only; NULL: none): the backend also writes the relu's bit-mask there.
 * Returns 1 only when the backend took the call with a mask (the mask is written); 0 otherwise. */
int tt_dev_gemm_bias_act(tt_dev *dev, int lt, size_t M, size_t N, size_t K, const float *d_x, const float *d_w,
                         const float *d_b, float *d_y, int relu, void *d_mask);
/* The bytes of a relu bit-mask over a (rows, cols) matrix (tt_dev_ops.gemm_bias_act's d_mask): cuBLASLt's layout,
 * one bit per element, each row's bits padded to a multiple of 128 (its leading dimension's rule), the whole rounded
 * up to 256 bytes so masks laid end to end each start where cuBLASLt may assume an allocation's alignment; 0 on
 * overflow. */
size_t tt_relu_mask_bytes(size_t rows, size_t cols);
/* dz (M, N) = drelu(dy (M, K) · wᵀ) and db = its column sums (tt_dev_ops.gemm_drelu_bgrad): lt 1 with a mask offers
 * it to the backend as one call; otherwise, or with no algorithm: sgemm into dz, then drelu_bgrad over y (the relu's
 * output, whose signs the mask holds) — the very calls of a dense layer's dx GEMM followed by the previous layer's
 * tt_bias_epilogue_bwd, so the fallback is the kernels' path to the bit. */
void tt_dev_gemm_drelu_bgrad(tt_dev *dev, int lt, size_t M, size_t N, size_t K, const float *d_dy, const float *d_w,
                             const void *d_mask, const float *d_y, float *d_dz, float *d_db);
void tt_dev_gather_rows(tt_dev *dev, void *d_dst, const void *d_src, size_t n_src, const uint32_t *d_idx, size_t rows,
                        size_t row_bytes);
void tt_dev_capture_begin(tt_dev *dev);  /* the backend has graphs (ops->capture_begin) */
void tt_dev_graph_free(tt_dev *dev, void *graph);  /* NULL is fine */
void tt_dev_device_name(const tt_dev_ops *ops, int ordinal, char *out, size_t len); /* never empty */
void *tt_dev_event_create(tt_dev *dev); /* NULL on failure */
void tt_dev_event_destroy(tt_dev *dev, void *ev);

/* The CPU backend's table (always built). */
extern const tt_dev_ops tt_dev_cpu_ops;

#ifdef __cplusplus
}
#endif
#endif
