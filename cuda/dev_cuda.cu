/* dev_cuda.cu — the CUDA backend: fills the tt_dev_ops table with cudaMalloc'd device memory, async copies on the
 * tower's own stream, cuBLAS sgemm, and kernels that call the very tt_math.h functions the CPU backend loops over
 * (one thread per element or per row). Several towers may share a GPU: each has its own stream and cuBLAS handle.
 * Peer access between GPUs is enabled once per run (peer_setup); with TT_WITH_NCCL the table also has collectives.
 *
 * Errors: a missing driver or device at init, a failed peer setup or communicator is a recoverable status (the CLI
 * says so and exits non-zero); any CUDA, cuBLAS or NCCL failure after that is a broken invariant and aborts with the
 * call, function, file:line and the device. Every kernel launch is followed by a cudaGetLastError check. With
 * TT_CUDA_DEBUG (cmake -DTT_CUDA_DEBUG=ON, or a Debug build) every op first checks that the calling thread's current
 * device is its tower's. docs/cuda.md maps the step onto streams and says what has run where.
 * Not for: anything the CPU backend does not also do — tests/test_backend_ops.c compares the two op by op. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <initializer_list>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TT_WITH_NCCL
#include <nccl.h>
#endif

#include "tt_dev.h"
#include "tt_math.h"

#if CUBLAS_VER_MAJOR < 12
#error "towertrain needs cuBLAS 12 or newer (cublasSgemm_64 for sizes beyond INT_MAX)"
#endif

/* Every kernel launch goes through TT_LAUNCH(kernel, grid, block, stream, args...): nvcc's own syntax here, and the
 * CPU stand-in's queued call where its cuda_runtime.h defines the macro (cuda/sim/, cmake -DTT_CUDA_SIM=ON), so the
 * stand-in compiles this very file. TT_CUDA_BACKEND_NAME is what the banner and --version call the backend. */
#ifndef TT_LAUNCH
#define TT_LAUNCH(kernel, grid, block, stream, ...) kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif
#ifndef TT_CUDA_BACKEND_NAME
#define TT_CUDA_BACKEND_NAME "cuda"
#endif

/* --epilogues lt: one GEMM shape's cuBLASLt plan, made at its first call and kept (cu_gemm_bias_act,
 * cu_gemm_drelu_bgrad). */
typedef struct lt_plan {
    size_t M, N, K;
    int ep;         /* its cublasLtEpilogue_t: the forward's DEFAULT, BIAS, RELU, RELU_BIAS, RELU_AUX_BIAS; the dx
                     * GEMM's DRELU_BGRAD */
    uint32_t align; /* the smallest alignment of the matrices the algorithm was chosen for (bytes, <= 256) */
    uint32_t bias_align; /* and of the bias (or bias gradient) pointer, which the heuristic reads too (0: none) */
    int offered; /* 0: the heuristic offered no algorithm within the workspace (the caller falls back) */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d; /* column-major; forward: W (O x D, ld O), X (D x B, ld D), Yᵀ (O x B, ld O);
                                     * dx: W (O' x O, ld O', transposed), dY (O' x B, ld O'), dZᵀ (O x B, ld O) */
    cublasLtMatmulAlgo_t algo;
} lt_plan;

enum { kLtPlans = 64 }; /* shapes a tower keeps plans for; a shape beyond them falls back to sgemm + kernels */

typedef struct cuda_ctx {
    int device;
    cudaStream_t stream;
    cudaStream_t side[2]; /* copies beside the compute (--overlap on), one stream per direction as a GPU has a copy
                           * engine per direction: [0] device -> host, [1] host -> device */
    cublasHandle_t blas;
    /* Device scratch of the kernels that need some (col_sum's partial sums, embed_bwd's sort keys): grown on demand
     * by ctx_scratch, kept, freed by destroy. Outside the run's memory plan, like cuBLAS's own workspace. */
    void *scratch;
    size_t scratch_bytes;
    uint64_t scratch_gen; /* how often the scratch moved: a graph captured before a move is stale */
    /* Graphs: cuBLAS's workspace of its own (allocated at the first capture: a capture may not allocate), and the
     * capture under way (its event records become record nodes; a scratch that must grow spoils it). */
    void *blas_ws;
    int capturing, capture_spoilt;
    /* cuBLASLt (--epilogues lt): the handle, its fixed workspace (allocated at init, so a captured call never
     * allocates; tt_dev_ops.lt_bytes in the memory plan), and the plans of the shapes seen so far. */
    cublasLtHandle_t lt;
    void *lt_ws;
    lt_plan plans[kLtPlans];
    int n_plans;
    /* --precision bf16 / fp16 (cu_gemm_format): the GEMMs' operands are values of this format, and cu_sgemm runs
     * them through cublasGemmEx with the compute type that uses the tensor cores on them; TT_FMT_FP32: cublasSgemm */
    int gemm_fmt;
} cuda_ctx;

static void cuda_abort(const char *what, const char *why, const char *func, const char *file, int line, int device)
{
    fprintf(stderr, "towertrain: CUDA error on device %d: %s failed: %s in %s at %s:%d\n", device, what, why, func,
            file, line);
    abort();
}

#define CUDA_CHECK_ON(device, call)                                                                                  \
    do {                                                                                                             \
        cudaError_t e_ = (call);                                                                                     \
        if (e_ != cudaSuccess) cuda_abort(#call, cudaGetErrorString(e_), __func__, __FILE__, __LINE__, (device));    \
    } while (0)
#define CUDA_CHECK(c, call) CUDA_CHECK_ON((c)->device, call)

#define CUBLAS_CHECK(c, call)                                                                                        \
    do {                                                                                                             \
        cublasStatus_t s_ = (call);                                                                                  \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                             \
            cuda_abort(#call, cublasGetStatusString(s_), __func__, __FILE__, __LINE__, (c)->device);                \
    } while (0)

#define LAUNCH_CHECK(c) CUDA_CHECK(c, cudaGetLastError())

/* A broken invariant of an op's arguments (what the tt_dev_* wrappers cannot know: the backend's own limits). */
#define ARG_CHECK(c, cond)                                                                                           \
    do {                                                                                                             \
        if (!(cond)) cuda_abort(#cond, "argument out of range", __func__, __FILE__, __LINE__, (c)->device);          \
    } while (0)

/* Every op starts with TOWER_CTX(ctx). Under TT_CUDA_DEBUG it checks that the calling thread's current device is the
 * tower's: an op issued from a thread bound to another GPU would allocate there or launch on a foreign stream. */
#ifdef TT_CUDA_DEBUG
static cuda_ctx *tower_ctx(void *ctx, const char *op, const char *file, int line)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    int cur = -1;
    cudaError_t e = cudaGetDevice(&cur);
    if (e != cudaSuccess) cuda_abort("cudaGetDevice(&cur)", cudaGetErrorString(e), op, file, line, c->device);
    if (cur != c->device) {
        fprintf(stderr, "towertrain: CUDA debug check: %s runs on device %d, but its tower's device is %d, at %s:%d\n",
                op, cur, c->device, file, line);
        abort();
    }
    return c;
}
#define TOWER_CTX(ctx) tower_ctx((ctx), __func__, __FILE__, __LINE__)
#else
#define TOWER_CTX(ctx) ((cuda_ctx *)(ctx))
#endif

/* At least `bytes` of device scratch for the op being issued on c's stream, valid until the next ctx_scratch call
 * (every user issues its kernels on the same stream, so one op's kernels finish before the next op's read it).
 * Grows on demand: the stream is synced first (its queued kernels may still read the old block), the old block
 * freed, a new one allocated and kept — so it allocates only at the first step of a new largest shape. Outside the
 * run's memory plan, like cuBLAS's own workspace; an allocation failure aborts, as any failure inside a step. */
static void *ctx_scratch(cuda_ctx *c, size_t bytes)
{
    if (bytes <= c->scratch_bytes) return c->scratch;
    if (c->capturing) { /* no allocation in a capture: the graph is not kept, the caller issues its ops again; NULL
                         * tells the op to issue nothing more (it is about to be issued again anyway) */
        c->capture_spoilt = 1;
        return NULL;
    }
    c->scratch_gen++;
    CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
    if (c->scratch) CUDA_CHECK(c, cudaFree(c->scratch));
    c->scratch = NULL;
    c->scratch_bytes = 0;
    CUDA_CHECK(c, cudaMalloc(&c->scratch, bytes));
    c->scratch_bytes = bytes;
    return c->scratch;
}

static const int kThreads = 256;

/* Blocks for n items with kThreads threads each, at most 65535 * 16: every kernel below is a grid-stride loop, so a
 * capped grid still covers any n, and no size is ever truncated into the launch configuration. */
static unsigned blocks_for(size_t n)
{
    size_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 65535 * 16 ? (b ? b : 1) : 65535 * 16);
}

/* Whether a kernel may do its index math in uint32_t: every extent and element count it computes is below 2^31 (so
 * GRID_STRIDE_I cannot wrap either). The launchers pass every product a kernel forms. TT_CUDA_INDEX64=1 in the
 * environment says no to everything, so the tests can run the size_t kernels on shapes of ordinary size. */
static bool fits32(std::initializer_list<size_t> extents)
{
    static const bool wide = getenv("TT_CUDA_INDEX64") && strcmp(getenv("TT_CUDA_INDEX64"), "1") == 0;
    if (wide) return false;
    for (size_t v : extents)
        if (v >= (size_t)1 << 31) return false;
    return true;
}

/* A geometry's extents, and the products the convolution kernels form from them, all fit (see fits32). */
static bool geom_fits32(const tt_conv_geom *g)
{
    return fits32({g->H, g->W, g->C, g->KH, g->KW, g->SH, g->SW, g->PT, g->PL, g->OH, g->OW, g->H * g->W * g->C,
                   g->OH * g->OW * g->C, g->KH * g->KW * g->C});
}

/* ---- kernels: each calls the shared math of tt_math.h -------------------------------------------------------- */

#define GRID_STRIDE(i, n)                                                                                            \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)
/* The same in index type I: with I = uint32_t the launcher guarantees n < 2^31, and the grid's stride is below 2^28,
 * so i never wraps. */
#define GRID_STRIDE_I(I, i, n)                                                                                       \
    for (I i = (I)(blockIdx.x * blockDim.x + threadIdx.x); i < (n); i += (I)(gridDim.x * blockDim.x))

__global__ void k_fill(float *x, size_t n, float v)
{
    GRID_STRIDE(i, n) x[i] = v;
}

__global__ void k_add(float *y, const float *x, size_t n)
{
    GRID_STRIDE(i, n) y[i] = tt_add(y[i], x[i]);
}

/* --update device, replicated, as cpu_update: the blocks' flags cleared (one thread per TT_UPDATE_BLOCK elements),
 * then every non-finite element marks its block (one thread per element, coalesced; threads that mark one block all
 * store the same 1), then the update of every element of an unmarked block (one thread per element). */
__global__ void k_update_clear(int32_t *bad, size_t blocks)
{
    GRID_STRIDE(b, blocks) bad[b] = 0;
}

__global__ void k_update_mark(int32_t *bad, const float *g, size_t n)
{
    GRID_STRIDE(i, n) if (!tt_finite(g[i])) bad[i / TT_UPDATE_BLOCK] = 1;
}

__global__ void k_update(tt_update_args u, float *w, const float *g, float *m, float *v, float *a, const int32_t *bad,
                         size_t n)
{
    GRID_STRIDE(i, n)
    {
        if (bad[i / TT_UPDATE_BLOCK]) continue;
        if (i >= u.n_train) tt_tail_elem(&w[i], g[i]); /* the non-trainable tail: no optimizer */
        else tt_update_elem(&u, &w[i], m ? &m[i] : NULL, v ? &v[i] : NULL, a ? &a[i] : NULL, g[i]);
    }
}

__global__ void k_u8_to_f32(float *y, const uint8_t *x, size_t n, float scale)
{
    GRID_STRIDE(i, n) y[i] = tt_pixel(x[i], scale);
}

/* --augment: one thread per output element (sample r, row i, column j, channel c: channel fastest, so neighbouring
 * threads write neighbouring floats); each draws its sample's transform again (a few integer hashes, the CPU's once per
 * sample: the same bits) and computes its pixel with tt_augment.h's formula. The settings travel by value. I is the
 * index type, as for the convolution kernels. */
template <typename I>
__global__ void k_augment(float *y, const float *x, const uint32_t *ids, I rows, I H, I W, I C, tt_augment a,
                          uint64_t key)
{
    const I WC = W * C, img = H * WC;
    GRID_STRIDE_I(I, q, rows * img)
    {
        const I r = q / img, e = q - r * img, i = e / WC, jc = e - i * WC, j = jc / C;
        const tt_augment_draw d = tt_augment_sample(&a, key, ids[r], H, W);
        y[q] = tt_augment_pixel(x + (size_t)r * img, H, W, C, i, j, jc - j * C, d);
    }
}

/* The 16-bit formats (--precision), one thread per element. The push's narrow counts as it converts: part p of
 * TT_NARROW_PARTS takes elements p, p + PARTS, ... (neighbouring threads, neighbouring floats) into its own pair of
 * partial counts, then one thread adds the pairs in order — no atomics, and totals that no grid can change. */
__global__ void k_round16(float *x, size_t n, int fmt)
{
    GRID_STRIDE(i, n) x[i] = tt_round_fmt(x[i], fmt);
}

__global__ void k_widen16(float *y, const uint16_t *x, size_t n, int fmt)
{
    GRID_STRIDE(i, n) y[i] = tt_from16(x[i], fmt);
}

__global__ void k_narrow16_parts(uint16_t *y, const float *x, size_t n, int fmt, uint32_t *parts)
{
    GRID_STRIDE(p, (size_t)TT_NARROW_PARTS)
    {
        uint32_t under = 0, bad = 0;
        for (size_t i = p; i < n; i += TT_NARROW_PARTS) {
            const uint16_t h = tt_narrow_elem(x[i], fmt, &under, &bad);
            if (y) y[i] = h;
        }
        parts[2 * p] = under;
        parts[2 * p + 1] = bad;
    }
}

__global__ void k_narrow16_total(uint32_t *counts)
{
    GRID_STRIDE(j, (size_t)1)
    {
        uint32_t under = 0, bad = 0;
        for (size_t p = 0; p < TT_NARROW_PARTS; p++) {
            under += counts[2 + 2 * p];
            bad += counts[3 + 2 * p];
        }
        counts[0] = under;
        counts[1] = bad;
    }
}

__global__ void k_bias_add(float *y, const float *b, size_t rows, size_t cols)
{
    size_t n = rows * cols; /* the elements of an allocated matrix: cannot overflow */
    GRID_STRIDE(i, n) y[i] += b[i % cols];
}

/* The column sum in two passes over fixed chunks of kColChunk rows, no atomics, so a result never depends on the
 * grid: pass 1 has one thread per (chunk, column), column fastest (neighbouring threads read neighbouring floats of a
 * row), summing its chunk's rows in order from 0.0f; pass 2 has one thread per column, summing the chunks' sums in
 * chunk order. With one chunk (rows <= kColChunk) pass 1 writes out itself. The CPU backend sums in the same chunks
 * (src/dev/dev_cpu.c, col_sum_chunked), so the two agree to the bit at any size. A conv layer's bias gradient over
 * B*OH*OW rows (100352 for 128 28x28 images) gets 392 chunks per column, each thread 256 coalesced loads; the error
 * is that of 256 + rows/256 sequential additions rather than rows. */
enum { kColChunk = TT_COL_CHUNK };

__global__ void k_col_sum_chunks(float *part, const float *x, size_t rows, size_t cols, size_t chunks)
{
    GRID_STRIDE(i, chunks * cols)
    {
        const size_t k = i / cols, c = i - k * cols, r0 = k * kColChunk;
        const size_t r1 = rows - r0 < kColChunk ? rows : r0 + kColChunk;
        float s = 0.0f;
        for (size_t r = r0; r < r1; r++) s = tt_add(s, x[r * cols + c]);
        part[i] = s;
    }
}

__global__ void k_col_sum_partials(float *out, const float *part, size_t chunks, size_t cols)
{
    GRID_STRIDE(c, cols)
    {
        float s = 0.0f;
        for (size_t k = 0; k < chunks; k++) s = tt_add(s, part[k * cols + c]);
        out[c] = s;
    }
}

/* BatchNorm's sums: k_col_sum_chunks over tt_bn_dev_prod(x, center * center_scale, w or x - center * center_scale),
 * the chunk's sum times scale[c] when it is the only chunk (scale NULL: 1); k_col_dev_sum_partials adds the chunks'
 * sums in chunk order and then scales — the CPU's loop to the bit with one chunk. */
__global__ void k_col_dev_sum_chunks(float *part, const float *x, const float *w, const float *center, float cscale,
                                     const float *scale, size_t rows, size_t cols, size_t chunks)
{
    GRID_STRIDE(i, chunks * cols)
    {
        const size_t k = i / cols, c = i - k * cols, r0 = k * kColChunk;
        const size_t r1 = rows - r0 < kColChunk ? rows : r0 + kColChunk;
        const float m = center[c] * cscale;
        float s = 0.0f;
        if (w)
            for (size_t r = r0; r < r1; r++) s = tt_add(s, tt_bn_dev_prod(x[r * cols + c], m, w[r * cols + c]));
        else
            for (size_t r = r0; r < r1; r++) s = tt_add(s, tt_bn_sq_dev(x[r * cols + c], m));
        part[i] = scale ? s * scale[c] : s;
    }
}

__global__ void k_col_dev_sum_partials(float *out, const float *part, const float *scale, size_t chunks, size_t cols)
{
    GRID_STRIDE(c, cols)
    {
        float s = 0.0f;
        for (size_t k = 0; k < chunks; k++) s = tt_add(s, part[k * cols + c]);
        out[c] = scale ? s * scale[c] : s;
    }
}

__global__ void k_bn_stats(float *save, float *tail, const float *s1, const float *s2, const float *moving, size_t C,
                           float inv_n, float epsilon, float factor)
{
    GRID_STRIDE(c, C) tt_bn_stats_channel(save, tail, s1, s2, moving, C, c, inv_n, epsilon, factor);
}

__global__ void k_bn_fwd(float *y, const float *x, const float *save, const float *gb, size_t rows, size_t cols)
{
    GRID_STRIDE(i, rows * cols)
    {
        const size_t c = i % cols;
        y[i] = tt_bn_y(x[i], save[c], save[cols + c], gb[c], gb[cols + c]);
    }
}

__global__ void k_bn_dx(float *dx, const float *dy, const float *x, const float *save, const float *gamma,
                        const float *sums, size_t rows, size_t cols, float inv_n)
{
    GRID_STRIDE(i, rows * cols)
    {
        const size_t c = i % cols;
        dx[i] = tt_bn_dx(dy[i], x[i], save[c], save[cols + c], gamma[c], sums[cols + c], sums[c], inv_n);
    }
}

/* drelu_bgrad's pass 1: k_col_sum_chunks over dz = tt_relu_grad(dy, y), each dz written by the thread that sums it
 * (dz may alias dy: a thread reads each element before it writes it, and no other thread touches it). */
__global__ void k_drelu_bgrad_chunks(float *part, float *dz, const float *dy, const float *y, size_t rows, size_t cols,
                                     size_t chunks)
{
    GRID_STRIDE(i, chunks * cols)
    {
        const size_t k = i / cols, c = i - k * cols, r0 = k * kColChunk;
        const size_t r1 = rows - r0 < kColChunk ? rows : r0 + kColChunk;
        float s = 0.0f;
        for (size_t r = r0; r < r1; r++) {
            const float v = tt_relu_grad(dy[r * cols + c], y[r * cols + c]);
            dz[r * cols + c] = v;
            s = tt_add(s, v);
        }
        part[i] = s;
    }
}

__global__ void k_bias_relu(float *y, const float *b, size_t rows, size_t cols)
{
    size_t n = rows * cols;
    GRID_STRIDE(i, n) y[i] = tt_relu(y[i] + b[i % cols]);
}

__global__ void k_relu_fwd(float *y, const float *x, size_t n)
{
    GRID_STRIDE(i, n) y[i] = tt_relu(x[i]);
}

__global__ void k_relu_bwd(float *dx, const float *dy, const float *y, size_t n)
{
    GRID_STRIDE(i, n) dx[i] = tt_relu_grad(dy[i], y[i]);
}

/* One thread per element of y (cols, rows): y[c, r] = x[r, c]. */
__global__ void k_transpose(float *y, const float *x, size_t rows, size_t cols)
{
    GRID_STRIDE(i, rows * cols) y[i] = x[tt_transpose_src(i, rows, cols)];
}

/* One thread per row (classes is small: 10 for the seed model). */
__global__ void k_softmax_xent(float *dlogits, float *stats, const float *logits, const int32_t *labels, size_t rows,
                               int classes, float scale)
{
    GRID_STRIDE(r, rows)
    {
        int rank;
        float *dz = dlogits ? dlogits + r * classes : NULL;
        stats[2 * r] = tt_softmax_xent_row(logits + r * classes, classes, labels[r], scale, dz, &rank);
        stats[2 * r + 1] = (float)rank;
    }
}

/* Convolution, pooling and the embedding's gather: the geometry travels by value (kernel parameter space); one thread
 * per output element, channel (or column) fastest, so neighbouring threads touch neighbouring addresses; each calls
 * the per-element form in tt_math.h, which gives exactly the bits of the CPU's row / pixel / scatter forms
 * (tests/test_math.c). I is the index type: uint32_t where every extent and the element count fit (fits32), so the
 * divisions that split an index into coordinates are 32-bit; size_t otherwise. */
template <typename I>
__global__ void k_im2col(float *cols, const float *x, I q0, I n, tt_conv_geom g)
{
    const I C = (I)g.C, KWC = (I)g.KW * C, KC = (I)g.KH * KWC, OW = (I)g.OW, P = (I)g.OH * OW;
    const I in = (I)g.H * (I)g.W * C;
    GRID_STRIDE_I(I, i, n * KC)
    { /* element (patch q0 + j, column (kh, kw, c)) */
        const I j = i / KC, k = i - j * KC, q = q0 + j, r = q / P, o = q - r * P, kh = k / KWC, kwc = k - kh * KWC,
                kw = kwc / C;
        cols[i] = tt_im2col_elem(x + r * in, &g, o / OW, o % OW, kh, kw, kwc - kw * C);
    }
}

/* One thread per element of dx in the samples the patches q0 .. q0+n-1 belong to; each adds the column gradients of
 * its sample's patches in that range, ascending (the CPU scatter's order), to what dx holds. */
template <typename I>
__global__ void k_col2im(float *dx, const float *dcols, I q0, I n, tt_conv_geom g)
{
    const I C = (I)g.C, W = (I)g.W, in = (I)g.H * W * C, P = (I)g.OH * (I)g.OW, KC = (I)g.KH * (I)g.KW * C;
    const I r0 = q0 / P, r1 = (q0 + n + P - 1) / P; /* the samples touched */
    float *dx0 = dx + r0 * in;
    GRID_STRIDE_I(I, i, (r1 - r0) * in)
    {
        const I s = i / in, e = i - s * in, p = e / C, base = (r0 + s) * P; /* base: this sample's first patch */
        const I lo = q0 > base ? q0 - base : 0, hi = q0 + n - base < P ? q0 + n - base : P;
        /* dcols row j holds patch q0 + j; this sample's patch lo is row base + lo - q0 */
        dx0[i] = tt_col2im_elem(dx0[i], dcols + (base + lo - q0) * KC, &g, p / W, p % W, e - p * C, lo, hi);
    }
}

/* One thread per output element (sample, window, channel): the window's maximum for its channel. */
template <typename I>
__global__ void k_maxpool_fwd(float *y, const float *x, I rows, tt_conv_geom g)
{
    const I C = (I)g.C, OW = (I)g.OW, out = (I)g.OH * OW * C, in = (I)g.H * (I)g.W * C;
    GRID_STRIDE_I(I, q, rows * out)
    {
        const I r = q / out, e = q - r * out, o = e / C;
        y[q] = tt_maxpool_elem(x + r * in, &g, o / OW, o % OW, e - o * C);
    }
}

/* Overlapping windows (a stride smaller than the window): one thread per input element, which gathers the dy of the
 * windows that route to it, in ascending window order (the CPU scatter's order). */
template <typename I>
__global__ void k_maxpool_bwd(float *dx, const float *dy, const float *x, const float *y, I rows, tt_conv_geom g)
{
    const I C = (I)g.C, W = (I)g.W, in = (I)g.H * W * C, out = (I)g.OH * (I)g.OW * C;
    GRID_STRIDE_I(I, q, rows * in)
    {
        const I r = q / in, e = q - r * in, p = e / C;
        dx[q] = tt_maxpool_grad(dy + r * out, x + r * in, y + r * out, &g, p / W, p % W, e - p * C);
    }
}

/* Windows that do not overlap (stride >= window in both dimensions; dx zeroed before): one thread per output element
 * (sample, window, channel) finds its argmax once and writes its dy there — the only term that input receives.
 * tt_add(0.0f, dy), not dy: the CPU's scatter adds dy to a zero, which turns -0 into +0 (and flushes a subnormal). */
template <typename I>
__global__ void k_maxpool_route(float *dx, const float *dy, const float *x, const float *y, I rows, tt_conv_geom g)
{
    const I C = (I)g.C, OW = (I)g.OW, in = (I)g.H * (I)g.W * C, out = (I)g.OH * OW * C;
    GRID_STRIDE_I(I, q, rows * out)
    {
        const I r = q / out, e = q - r * out, o = e / C;
        const size_t at = tt_maxpool_argmax(x + r * in, y[q], &g, o / OW, o % OW, e - o * C);
        if (at != (size_t)-1) dx[r * in + at] = tt_add(0.0f, dy[q]);
    }
}

__global__ void k_dropout(float *y, const float *x, size_t rows, size_t cols, float rate, float keep, uint64_t key,
                          const uint32_t *ids)
{
    GRID_STRIDE(q, rows * cols) y[q] = tt_dropout(x[q], key, ids[q / cols], q % cols, rate, keep);
}

/* One thread per element of y (token, column), column fastest. */
template <typename I>
__global__ void k_embed_fwd(float *y, const float *w, const float *t, I n, size_t V, I E)
{
    GRID_STRIDE_I(I, q, n * E)
    {
        const I i = q / E;
        y[q] = tt_embed_elem(w, t[i], V, E, q - i * E);
    }
}

/* --data-on device: one thread per word of the output, row fastest: k_gather_words where the rows are whole 4-byte
 * words and both tables start 4-byte aligned (every float sample, a label, most byte images), k_gather_bytes
 * otherwise. A row whose index is past the table is zeros, as cpu_gather_rows writes. I is the index type (fits32). */
template <typename W, typename I>
__device__ __forceinline__ W gather_word(const W *src, I n_src, const uint32_t *idx, I row_words, I q)
{
    const I r = q / row_words, s = (I)idx[r];
    return s < n_src ? src[s * row_words + (q - r * row_words)] : (W)0;
}

template <typename I>
__global__ void k_gather_words(uint32_t *dst, const uint32_t *src, I n_src, const uint32_t *idx, I rows, I row_words)
{
    GRID_STRIDE_I(I, q, rows * row_words) dst[q] = gather_word(src, n_src, idx, row_words, q);
}

template <typename I>
__global__ void k_gather_bytes(uint8_t *dst, const uint8_t *src, I n_src, const uint32_t *idx, I rows, I row_bytes)
{
    GRID_STRIDE_I(I, q, rows * row_bytes) dst[q] = gather_word(src, n_src, idx, row_bytes, q);
}

/* The embedding's gradient: the n token positions sorted by (id, position) — tt_embed_key, distinct 64-bit keys, so
 * any correct sort is this one: stable and deterministic — then each dW element sums its id's dy rows in ascending
 * token order from 0.0f, as cpu_embed_bwd does: bit-identical, no atomics. The sort: runs of kSortRun keys
 * insertion-sorted by one thread each, then merge passes of doubling width. */
enum { kSortRun = TT_SORT_RUN };

/* One thread per run of kSortRun token positions: their keys, insertion-sorted in place. */
__global__ void k_embed_keys(uint64_t *keys, const float *t, uint32_t n, size_t V)
{
    GRID_STRIDE_I(uint32_t, s, (n + kSortRun - 1) / kSortRun)
    {
        const uint32_t lo = s * kSortRun, hi = n - lo < kSortRun ? n : lo + kSortRun;
        for (uint32_t i = lo; i < hi; i++) {
            const uint64_t k = tt_embed_key(t[i], V, i);
            uint32_t j = i;
            for (; j > lo && keys[j - 1] > k; j--) keys[j] = keys[j - 1];
            keys[j] = k;
        }
    }
}

/* The number of keys in a[0..len) smaller than k (a ascending). */
__device__ static inline uint32_t keys_below(const uint64_t *a, uint32_t len, uint64_t k)
{
    uint32_t lo = 0, hi = len;
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (a[mid] < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* One merge pass, one thread per key: src holds sorted runs of w keys (the last may be short); runs 2m and 2m+1 merge
 * into one run of dst. A key's place there = its index within its own run + the count of smaller keys in the partner
 * run (keys are distinct, so no two keys claim one place). */
__global__ void k_embed_merge(uint64_t *dst, const uint64_t *src, uint32_t n, uint32_t w)
{
    GRID_STRIDE_I(uint32_t, i, n)
    {
        const uint32_t start = i - i % w, left = (i / w) % 2 == 0;
        const uint32_t pair = left ? start : start - w, partner = left ? start + w : start - w;
        const uint32_t plen = !left ? w : partner < n ? (n - partner < w ? n - partner : w) : 0;
        const uint64_t k = src[i];
        dst[pair + (i - start) + keys_below(src + partner, plen, k)] = k;
    }
}

/* One thread per element of dW (id, column e), column fastest: its id's positions are one range of the sorted keys
 * (found by binary search; out-of-range ids have id V and sort after all of them), summed in ascending position. */
template <typename I>
__global__ void k_embed_sum(float *dw, const float *dy, const uint64_t *keys, uint32_t n, I V, I E)
{
    GRID_STRIDE_I(I, q, V * E)
    {
        const I v = q / E, e = q - v * E;
        const uint32_t lo = keys_below(keys, n, (uint64_t)v << 32);
        const uint32_t hi = lo + keys_below(keys + lo, n - lo, (uint64_t)(v + 1) << 32);
        float acc = 0.0f;
        for (uint32_t k = lo; k < hi; k++) acc = tt_add(acc, dy[(I)(uint32_t)keys[k] * E + e]);
        dw[q] = acc;
    }
}

/* ---- the table ----------------------------------------------------------------------------------------------- */

/* The device this thread chose through the backend (bind), -1 if none. Every CUDA call of the project is in this file,
 * so this is the whole story: init, destroy, mem_info, peer_setup and comm_init must make other devices current for
 * a while, and afterwards put back only what was chosen. A thread that never chose stays on the device they used,
 * whose context exists already: "restoring" it to device 0 would create a context there (hundreds of MB, and a
 * failure where GPU 0 is exclusive and busy) even for --gpus 1,2. */
static thread_local int t_device = -1;

static cudaError_t restore_device(void) { return t_device >= 0 ? cudaSetDevice(t_device) : cudaSuccess; }

/* ---- cuBLASLt epilogues (--epilogues lt): a dense layer's forward, and its dx GEMM, as one call --------------------
 *
 * y (M, N) = act(x (M, K) · w (K, N) + b), our matrices row-major (M = B rows of the shard, N = O outputs, K = D
 * inputs). cuBLASLt is column-major, and a row-major matrix is its transpose column-major: y (B x O, row-major) is
 * Yᵀ (O x B, ld O). So D = op(A) op(B) with A = w as column-major O x D (ld O, no transpose) and B = x as column-major
 * D x B (ld D, no transpose): Yᵀ = Wᵀ Xᵀ — the operands cu_sgemm swaps for cublasSgemm, the same call. The bias has
 * m = O entries, one per column of y = per row of column-major D, which is what the BIAS and RELU_BIAS epilogues
 * broadcast (along D's columns); RELU_BIAS adds it before the relu, as bias_relu does. FP32 all through
 * (CUBLAS_COMPUTE_32F, not _FAST_TF32: the CPU backend is the oracle). C = D with beta 0 (C is not read).
 * A training forward whose relu's gradient the next dense layer applies (tt_layer.lt_mask) asks RELU_AUX_BIAS: the
 * relu's bit-mask (one bit per element of D, ld lt_mask_ld(O) bits) into the tower's mask buffer; that layer's dx GEMM
 * (dz = dy Wᵀ, the transposed operand) then asks DRELU_BGRAD with the same mask: dz where its bit is set, and the
 * bias gradient of the relu's layer (D's row sums: dz's column sums) — the relu_bwd + col_sum pass of the kernels
 * folded into the GEMM. cuBLASLt's sum order is its own: the bias gradient may differ from drelu_bgrad's chunked sums
 * in the last bits (test_backend_ops' tolerance; a GPU window confirms it).
 * A shape's plan (descriptors, layouts, the heuristic's algorithm or "none offered") is made at its first call and
 * kept: no query per step. The workspace is fixed, so a call inside a graph capture never allocates. */
static const size_t kLtWorkspace = (size_t)4 << 20;

static void lt_plan_free(cuda_ctx *c, lt_plan *p)
{
    if (p->desc) CUBLAS_CHECK(c, cublasLtMatmulDescDestroy(p->desc));
    if (p->a) CUBLAS_CHECK(c, cublasLtMatrixLayoutDestroy(p->a));
    if (p->b) CUBLAS_CHECK(c, cublasLtMatrixLayoutDestroy(p->b));
    if (p->d) CUBLAS_CHECK(c, cublasLtMatrixLayoutDestroy(p->d));
    memset(p, 0, sizeof *p);
}

/* The largest power of two up to 256 that divides the address: what cuBLASLt may assume of a pointer. A layer's
 * weights are a slice of the flat parameter buffer at any float offset (textcnn's dense kernel starts 8 bytes past a
 * 16-byte boundary), and cuBLASLt's default assumption is 256 bytes: an algorithm chosen for that faults on a less
 * aligned pointer. */
static uint32_t lt_align(const void *p)
{
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a) a >>= 1;
    return a;
}

/* The relu bit-mask's leading dimension over a column-major D of `rows` rows, in bits: cuBLASLt's rule (a multiple
 * of 128, at least the rows) — the layout tt_relu_mask_bytes sizes. */
static int64_t lt_mask_ld(size_t rows) { return (int64_t)((rows + 127) / 128 * 128); }

/* The plan of (M, N, K, epilogue, alignment), made now if new; NULL when the cache is full (the caller falls back).
 * Forward (every epilogue but DRELU_BGRAD): y (M, N) = x (M, K) · w (K, N); dx (DRELU_BGRAD): dz (M, N) = dy (M, K)
 * · wᵀ with w (N, K) — both row-major, so column-major D = op(A) B is N x M with A = w (the dx GEMM's transposed)
 * and B = x or dy (K x M). */
static lt_plan *lt_plan_for(cuda_ctx *c, size_t M, size_t N, size_t K, cublasLtEpilogue_t ep, uint32_t align,
                           const void *bias, const void *mask)
{
    const uint32_t bias_align = bias ? lt_align(bias) : 0;
    for (int i = 0; i < c->n_plans; i++) {
        lt_plan *p = &c->plans[i];
        if (p->M == M && p->N == N && p->K == K && p->ep == (int)ep && p->align == align &&
            p->bias_align == bias_align)
            return p;
    }
    if (c->n_plans == kLtPlans) return NULL;
    lt_plan *p = &c->plans[c->n_plans++];
    memset(p, 0, sizeof *p);
    p->M = M, p->N = N, p->K = K, p->ep = (int)ep, p->align = align, p->bias_align = bias_align;
    const size_t lim = INT_MAX - 127; /* kept within int: the 32-bit sgemm path's bound, the stand-in's, and the
                                       * mask's leading dimension */
    if (M > lim || N > lim || K > lim) return p; /* not offered */
    const int dx = ep == CUBLASLT_EPILOGUE_DRELU_BGRAD;
    const cublasOperation_t op_n = CUBLAS_OP_N, op_a = dx ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(c, cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    CUBLAS_CHECK(c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n));
    CUBLAS_CHECK(c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    if (ep == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || dx) { /* the bit-mask: its leading dimension is the plan's */
        const int64_t mask_ld = lt_mask_ld(N);
        CUBLAS_CHECK(c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &mask_ld,
                                                       sizeof mask_ld));
    }
    /* the heuristic reads the bias and mask pointers' values for the alignment it may assume (cublasLt.h): this
     * call's, so a bias 16 bytes into a 256-byte block gets an algorithm for 16 (the plan is keyed by it; the mask
     * is always at a 256-byte boundary) */
    if (bias) CUBLAS_CHECK(c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                             sizeof bias));
    if (mask) CUBLAS_CHECK(c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &mask,
                                                             sizeof mask));
    if (dx) /* w (N x K row-major): column-major K x N, ld K, transposed */
        CUBLAS_CHECK(c, cublasLtMatrixLayoutCreate(&p->a, CUDA_R_32F, K, N, (int64_t)(K ? K : 1)));
    else /* w: O x D, ld O */
        CUBLAS_CHECK(c, cublasLtMatrixLayoutCreate(&p->a, CUDA_R_32F, N, K, (int64_t)N));
    CUBLAS_CHECK(c, cublasLtMatrixLayoutCreate(&p->b, CUDA_R_32F, K, M, (int64_t)(K ? K : 1))); /* x or dy: K x M */
    CUBLAS_CHECK(c, cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32F, N, M, (int64_t)N)); /* yᵀ or dzᵀ: N x M, ld N */
    cublasLtMatmulPreference_t pref = NULL;
    const uint64_t ws = kLtWorkspace;
    CUBLAS_CHECK(c, cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(c, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                         sizeof ws));
    for (cublasLtMatmulPreferenceAttributes_t at :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        CUBLAS_CHECK(c, cublasLtMatmulPreferenceSetAttribute(pref, at, &align, sizeof align));
    cublasLtMatmulHeuristicResult_t r;
    memset(&r, 0, sizeof r);
    int n = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(c->lt, p->desc, p->a, p->b, p->d, p->d, pref, 1, &r, &n);
    CUBLAS_CHECK(c, cublasLtMatmulPreferenceDestroy(pref));
    /* any answer but an algorithm (NOT_SUPPORTED, or INVALID_VALUE for a layout or alignment it will not take) is
     * "not offered": the op's contract is to fall back, not to end the run */
    if (s == CUBLAS_STATUS_SUCCESS && n >= 1 && r.state == CUBLAS_STATUS_SUCCESS && r.workspaceSize <= kLtWorkspace) {
        p->algo = r.algo;
        p->offered = 1;
    }
    return p;
}

/* The stream and cuBLAS handle of c, on the current device (c->device). On failure, err names the call; what was
 * created stays in c for the caller to release. */
static tt_status ctx_create(cuda_ctx *c, tt_error *err)
{
    const int d = c->device;
    cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        c->stream = NULL;
        cudaGetLastError();
        return tt_fail(err, TT_ERR_DEVICE, "cuda device %d: cudaStreamCreateWithFlags: %s", d, cudaGetErrorString(e));
    }
    for (int k = 0; k < 2; k++) {
        e = cudaStreamCreateWithFlags(&c->side[k], cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            c->side[k] = NULL;
            cudaGetLastError();
            return tt_fail(err, TT_ERR_DEVICE, "cuda device %d: cudaStreamCreateWithFlags: %s", d,
                           cudaGetErrorString(e));
        }
    }
    cublasHandle_t h = NULL;
    cublasStatus_t bs = cublasCreate(&h);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return tt_fail(err, TT_ERR_DEVICE, "cuda device %d: cublasCreate: %s", d, cublasGetStatusString(bs));
    c->blas = h;
    bs = cublasSetStream(c->blas, c->stream);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return tt_fail(err, TT_ERR_DEVICE, "cuda device %d: cublasSetStream: %s", d, cublasGetStatusString(bs));
    /* plain FP32 (no TF32): the CPU backend is the oracle and TF32 would differ from it by ~1e-3 */
    bs = cublasSetMathMode(c->blas, CUBLAS_PEDANTIC_MATH);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return tt_fail(err, TT_ERR_DEVICE, "cuda device %d: cublasSetMathMode: %s", d, cublasGetStatusString(bs));
    cublasLtHandle_t lh = NULL;
    bs = cublasLtCreate(&lh);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return tt_fail(err, TT_ERR_DEVICE, "cuda device %d: cublasLtCreate: %s", d, cublasGetStatusString(bs));
    c->lt = lh;
    e = cudaMalloc(&c->lt_ws, kLtWorkspace);
    if (e != cudaSuccess) {
        c->lt_ws = NULL;
        cudaGetLastError();
        return tt_fail(err, TT_ERR_DEVICE, "cuda device %d: cudaMalloc of cuBLASLt's workspace (%zu bytes): %s", d,
                       kLtWorkspace, cudaGetErrorString(e));
    }
    return TT_OK;
}

/* Creates the tower's context on device `ordinal` and puts the calling thread back on the device it had bound, if any
 * (restore_device; bind makes the tower's device current), so one thread may create contexts for several devices.
 * Every failure is a TT_ERR_DEVICE status, with what was created released. */
static tt_status cu_init(void **ctxp, int ordinal, tt_error *err)
{
    cudaError_t e = cudaSetDevice(ordinal);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return tt_fail(err, TT_ERR_DEVICE, "cuda device %d: cudaSetDevice: %s", ordinal, cudaGetErrorString(e));
    }
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    tt_status s = c ? TT_OK : tt_fail(err, TT_ERR_NOMEM, "cuda device %d: out of host memory", ordinal);
    if (c) {
        c->device = ordinal;
        s = ctx_create(c, err);
        if (s != TT_OK) { /* best effort: the failure already in err is the one to report */
            if (c->lt_ws) cudaFree(c->lt_ws);
            if (c->lt) cublasLtDestroy(c->lt);
            if (c->blas) cublasDestroy(c->blas);
            for (int k = 0; k < 2; k++)
                if (c->side[k]) cudaStreamDestroy(c->side[k]);
            if (c->stream) cudaStreamDestroy(c->stream);
            cudaGetLastError();
            free(c);
        }
    }
    CUDA_CHECK_ON(ordinal, restore_device()); /* bound before: cannot fail but for a broken driver */
    if (s == TT_OK) *ctxp = c;
    return s;
}

/* Called from any thread: makes the tower's device current for the teardown, then restores the caller's. */
static void cu_destroy(void *ctx)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUDA_CHECK(c, cudaSetDevice(c->device));
    CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
    for (int k = 0; k < 2; k++) CUDA_CHECK(c, cudaStreamSynchronize(c->side[k]));
    if (c->scratch) CUDA_CHECK(c, cudaFree(c->scratch));
    CUBLAS_CHECK(c, cublasDestroy(c->blas));
    for (int i = 0; i < c->n_plans; i++) lt_plan_free(c, &c->plans[i]);
    CUBLAS_CHECK(c, cublasLtDestroy(c->lt));
    CUDA_CHECK(c, cudaFree(c->lt_ws));
    if (c->blas_ws) CUDA_CHECK(c, cudaFree(c->blas_ws));
    for (int k = 0; k < 2; k++) CUDA_CHECK(c, cudaStreamDestroy(c->side[k]));
    CUDA_CHECK(c, cudaStreamDestroy(c->stream));
    CUDA_CHECK(c, restore_device());
    free(c);
}

static void cu_bind(void *ctx)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUDA_CHECK(c, cudaSetDevice(c->device));
    t_device = c->device;
}

/* The GPU's name ("NVIDIA H200"), for reports; empty if the driver will not say. */
static void cu_device_name(int ordinal, char *out, size_t len)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    snprintf(out, len, "%.*s", (int)sizeof prop.name, prop.name);
}

/* Free and total memory of a device, for the run's memory budget (called before any tower exists). */
static tt_status cu_mem_info(int ordinal, size_t *free_bytes, size_t *total_bytes)
{
    if (cudaSetDevice(ordinal) != cudaSuccess) {
        cudaGetLastError();
        return TT_ERR_DEVICE;
    }
    cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
    cudaError_t r = restore_device();
    if (e != cudaSuccess || r != cudaSuccess) {
        cudaGetLastError();
        return TT_ERR_DEVICE;
    }
    return TT_OK;
}

static void *cu_alloc(void *ctx, size_t bytes)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess) {
        cudaGetLastError(); /* clear the (non-sticky) error so the caller can report it */
        return NULL;
    }
    /* poison with NaN, like the CPU backend, so a missing zeroing shows */
    size_t n = bytes / sizeof(float);
    if (n) {
        TT_LAUNCH(k_fill, blocks_for(n), kThreads, c->stream, (float *)d, n, NAN);
        LAUNCH_CHECK(c);
    }
    return d;
}

static void cu_dfree(void *ctx, void *d)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
    CUDA_CHECK(c, cudaFree(d));
}

/* Portable: one tower allocates a buffer (the master weights) that towers on every GPU copy from; without the flag
 * only the allocating device's context would treat it as pinned, and the others' copies would be staged. */
static void *cu_host_alloc(void *ctx, size_t bytes)
{
    (void)TOWER_CTX(ctx);
    void *h = NULL;
    if (cudaHostAlloc(&h, bytes, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return h;
}

static void cu_host_free(void *ctx, void *h)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    CUDA_CHECK(c, cudaFreeHost(h));
}

static void cu_h2d(void *ctx, void *d_dst, const void *h_src, size_t bytes)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    CUDA_CHECK(c, cudaMemcpyAsync(d_dst, h_src, bytes, cudaMemcpyHostToDevice, c->stream));
}

static void cu_d2h(void *ctx, void *h_dst, const void *d_src, size_t bytes)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    CUDA_CHECK(c, cudaMemcpyAsync(h_dst, d_src, bytes, cudaMemcpyDeviceToHost, c->stream));
}

static void cu_d2d(void *ctx, void *d_dst, const void *d_src, size_t bytes)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    CUDA_CHECK(c, cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, c->stream));
}

static void cu_sync(void *ctx)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
    for (int k = 0; k < 2; k++) CUDA_CHECK(c, cudaStreamSynchronize(c->side[k]));
}

/* The side streams: a copy engine's DMA beside the kernels of the tower's stream, each direction on its own (a push
 * waiting for the backward never holds up a pull). */
static void cu_side_copy(void *ctx, void *dst, const void *src, size_t bytes, int to_device, void *after, void *done)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    cudaStream_t s = c->side[to_device != 0];
    if (after) CUDA_CHECK(c, cudaStreamWaitEvent(s, (cudaEvent_t)after, 0));
    if (bytes)
        CUDA_CHECK(c, cudaMemcpyAsync(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(c, cudaEventRecord((cudaEvent_t)done, s));
}

static void cu_stream_wait(void *ctx, void *ev)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    CUDA_CHECK(c, cudaStreamWaitEvent(c->stream, (cudaEvent_t)ev, 0));
}

/* Peer copy on the destination's stream. Towers on one GPU share its memory: a plain device-to-device copy. Between
 * GPUs, cudaMemcpyPeerAsync takes the direct path (NVLink or PCIe peer-to-peer) where peer_setup enabled access for
 * the pair, and is staged through host memory by the driver otherwise — the copy is correct either way, only its
 * speed differs (the banner's peer matrix says which). */
static void cu_peer_copy(void *ctx, void *d_dst, void *src_ctx, const void *d_src, size_t bytes)
{
    cuda_ctx *c = TOWER_CTX(ctx), *s = (cuda_ctx *)src_ctx;
    if (c->device == s->device)
        CUDA_CHECK(c, cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, c->stream));
    else
        CUDA_CHECK(c, cudaMemcpyPeerAsync(d_dst, c->device, d_src, s->device, bytes, c->stream));
}

static void cu_update(void *ctx, const tt_update_args *u, float *w, const float *g, float *m, float *v, float *a,
                      int32_t *bad, size_t n, int skip)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    const size_t blocks = (n + TT_UPDATE_BLOCK - 1) / TT_UPDATE_BLOCK;
    TT_LAUNCH(k_update_clear, blocks_for(blocks), kThreads, c->stream, bad, blocks);
    LAUNCH_CHECK(c);
    TT_LAUNCH(k_update_mark, blocks_for(n), kThreads, c->stream, bad, g, n);
    LAUNCH_CHECK(c);
    if (skip) return;
    TT_LAUNCH(k_update, blocks_for(n), kThreads, c->stream, *u, w, g, m, v, a, (const int32_t *)bad, n);
    LAUNCH_CHECK(c);
}

static void cu_add(void *ctx, float *y, const float *x, size_t n)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_add, blocks_for(n), kThreads, c->stream, y, x, n);
    LAUNCH_CHECK(c);
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands, keep the leading dims.
 * cublasSgemm takes int sizes: when any size or leading dimension exceeds INT_MAX the 64-bit API (cuBLAS 12+) takes
 * the call instead, so nothing is ever truncated. */
static void cu_sgemm(void *ctx, int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *a, size_t lda,
                     const float *b, size_t ldb, float beta, float *cm, size_t ldc)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const size_t lim = INT_MAX;
    if (c->gemm_fmt != TT_FMT_FP32) { /* FP32 storage of 16-bit values: converted to 16 bits exactly, FP32 sums */
        const cublasComputeType_t ct =
            c->gemm_fmt == TT_FMT_FP16 ? CUBLAS_COMPUTE_32F_FAST_16F : CUBLAS_COMPUTE_32F_FAST_16BF;
        const size_t lim64 = INT64_MAX;
        ARG_CHECK(c, M <= lim64 && N <= lim64 && K <= lim64 && lda <= lim64 && ldb <= lim64 && ldc <= lim64);
        CUBLAS_CHECK(c, cublasGemmEx_64(c->blas, op_b, op_a, (int64_t)N, (int64_t)M, (int64_t)K, &alpha, b, CUDA_R_32F,
                                        (int64_t)ldb, a, CUDA_R_32F, (int64_t)lda, &beta, cm, CUDA_R_32F,
                                        (int64_t)ldc, ct, CUBLAS_GEMM_DEFAULT));
        return;
    }
    if (M <= lim && N <= lim && K <= lim && lda <= lim && ldb <= lim && ldc <= lim) {
        CUBLAS_CHECK(c, cublasSgemm(c->blas, op_b, op_a, (int)N, (int)M, (int)K, &alpha, b, (int)ldb, a, (int)lda,
                                    &beta, cm, (int)ldc));
        return;
    }
    const size_t lim64 = INT64_MAX;
    ARG_CHECK(c, M <= lim64 && N <= lim64 && K <= lim64 && lda <= lim64 && ldb <= lim64 && ldc <= lim64);
    CUBLAS_CHECK(c, cublasSgemm_64(c->blas, op_b, op_a, (int64_t)N, (int64_t)M, (int64_t)K, &alpha, b, (int64_t)ldb,
                                   a, (int64_t)lda, &beta, cm, (int64_t)ldc));
}

/* Plan p's matmul on the tower's stream: D = op(A) B (alpha 1, beta 0, C = D), with the call's bias (or bias
 * gradient) and mask pointers set on its descriptor first (NULL: the epilogue has none). */
static void lt_issue(cuda_ctx *c, lt_plan *p, const float *a, const float *b, float *d, const void *bias,
                     const void *mask)
{
    if (bias) CUBLAS_CHECK(c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                             sizeof bias));
    if (mask) CUBLAS_CHECK(c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &mask,
                                                             sizeof mask));
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(c, cublasLtMatmul(c->lt, p->desc, &alpha, a, p->a, b, p->b, &beta, d, p->d, d, p->d, &p->algo,
                                   c->lt_ws, kLtWorkspace, c->stream));
}

/* One cuBLASLt call on the tower's stream (see "cuBLASLt epilogues" above); 0, nothing issued, where the shape has no
 * algorithm (or no room in the plan cache): the wrapper issues sgemm + the fused kernels. */
static int cu_gemm_bias_act(void *ctx, size_t M, size_t N, size_t K, const float *x, const float *w, const float *b,
                            float *y, int relu, void *mask)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    if (c->gemm_fmt != TT_FMT_FP32) return 0; /* 16-bit operands: cublasGemmEx and the kernels' epilogues */
    /* the bias of a BIAS epilogue is read with vector loads: under 16 bytes of alignment, the kernels do it (and a
     * mask is only ever asked with a bias and the relu, at a 256-byte boundary: tt_relu_mask_bytes) */
    if (b && lt_align(b) < 16) return 0;
    if (mask && (!relu || !b || lt_align(mask) < 256)) return 0;
    uint32_t align = lt_align(x);
    align = lt_align(w) < align ? lt_align(w) : align;
    align = lt_align(y) < align ? lt_align(y) : align;
    const cublasLtEpilogue_t ep = mask ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS
                                  : relu ? (b ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                                         : (b ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    lt_plan *p = lt_plan_for(c, M, N, K, ep, align, b, mask);
    if (!p || !p->offered) return 0;
    lt_issue(c, p, w, x, y, b, mask);
    return 1;
}

/* The dx GEMM with DRELU_BGRAD on the tower's stream: dz (M, N) = drelu(dy (M, K) · wᵀ) by the forward's bit-mask,
 * db = its column sums (cuBLASLt's "bias gradient", one per row of column-major D: per column of dz). 0, nothing
 * issued, where the shape has no algorithm: the wrapper issues sgemm + drelu_bgrad. */
static int cu_gemm_drelu_bgrad(void *ctx, size_t M, size_t N, size_t K, const float *dy, const float *w,
                               const void *mask, float *dz, float *db)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    if (c->gemm_fmt != TT_FMT_FP32) return 0; /* 16-bit operands: never offered (the forward wrote no mask) */
    if (lt_align(db) < 16 || lt_align(mask) < 256) return 0; /* as the forward's bias and mask */
    uint32_t align = lt_align(dy);
    align = lt_align(w) < align ? lt_align(w) : align;
    align = lt_align(dz) < align ? lt_align(dz) : align;
    lt_plan *p = lt_plan_for(c, M, N, K, CUBLASLT_EPILOGUE_DRELU_BGRAD, align, db, mask);
    if (!p || !p->offered) return 0;
    lt_issue(c, p, w, dy, dz, db, mask);
    return 1;
}

static void cu_fill(void *ctx, float *x, size_t n, float v)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_fill, blocks_for(n), kThreads, c->stream, x, n, v);
    LAUNCH_CHECK(c);
}

static void cu_u8_to_f32(void *ctx, float *y, const uint8_t *x, size_t n, float scale)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_u8_to_f32, blocks_for(n), kThreads, c->stream, y, x, n, scale);
    LAUNCH_CHECK(c);
}

static void cu_augment(void *ctx, float *y, const float *x, const uint32_t *ids, size_t rows, size_t H, size_t W,
                       size_t C, const tt_augment *a, uint64_t key)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    const size_t n = rows * H * W * C;
    if (fits32({rows, H, W, C, n}))
        TT_LAUNCH(k_augment<uint32_t>, blocks_for(n), kThreads, c->stream, y, x, ids, (uint32_t)rows, (uint32_t)H,
                  (uint32_t)W, (uint32_t)C, *a, key);
    else
        TT_LAUNCH(k_augment<size_t>, blocks_for(n), kThreads, c->stream, y, x, ids, rows, H, W, C, *a, key);
    LAUNCH_CHECK(c);
}

static void cu_round16(void *ctx, float *x, size_t n, int fmt)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_round16, blocks_for(n), kThreads, c->stream, x, n, fmt);
    LAUNCH_CHECK(c);
}

static void cu_widen16(void *ctx, float *y, const uint16_t *x, size_t n, int fmt)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_widen16, blocks_for(n), kThreads, c->stream, y, x, n, fmt);
    LAUNCH_CHECK(c);
}

static void cu_narrow16(void *ctx, uint16_t *y, const float *x, size_t n, int fmt, uint32_t *counts)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_narrow16_parts, blocks_for(TT_NARROW_PARTS), kThreads, c->stream, y, x, n, fmt, counts + 2);
    LAUNCH_CHECK(c);
    TT_LAUNCH(k_narrow16_total, 1, 1, c->stream, counts);
    LAUNCH_CHECK(c);
}

/* The GEMMs' operand format from now on (cu_sgemm). In 16 bits the handle leaves CUBLAS_PEDANTIC_MATH (which keeps
 * FP32 GEMMs off TF32): every GEMM then names its compute type itself, and pedantic math might keep a FAST_16BF one
 * off the tensor cores. FP32 again: pedantic again. */
static void cu_gemm_format(void *ctx, int fmt)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    c->gemm_fmt = fmt;
    CUBLAS_CHECK(c, cublasSetMathMode(c->blas, fmt == TT_FMT_FP32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));
}

static void cu_bias_add(void *ctx, float *y, const float *b, size_t rows, size_t cols)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_bias_add, blocks_for(rows * cols), kThreads, c->stream, y, b, rows, cols);
    LAUNCH_CHECK(c);
}

/* rows <= kColChunk (rows = 0 too: zeros): pass 1 alone, into out. Otherwise pass 1 into scratch, then pass 2. */
static void cu_col_sum(void *ctx, float *out, const float *x, size_t rows, size_t cols)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    const size_t chunks = rows > kColChunk ? (rows + kColChunk - 1) / kColChunk : 1;
    float *part = chunks > 1 ? (float *)ctx_scratch(c, chunks * cols * sizeof(float)) : out;
    if (!part) return; /* a spoilt capture */
    TT_LAUNCH(k_col_sum_chunks, blocks_for(chunks * cols), kThreads, c->stream, part, x, rows, cols, chunks);
    LAUNCH_CHECK(c);
    if (chunks > 1) {
        TT_LAUNCH(k_col_sum_partials, blocks_for(cols), kThreads, c->stream, out, part, chunks, cols);
        LAUNCH_CHECK(c);
    }
}

static void cu_bias_relu(void *ctx, float *y, const float *b, size_t rows, size_t cols)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_bias_relu, blocks_for(rows * cols), kThreads, c->stream, y, b, rows, cols);
    LAUNCH_CHECK(c);
}

/* cu_col_sum's two passes, the first computing dz as it sums: one launch, two beyond one chunk. */
static void cu_drelu_bgrad(void *ctx, float *dz, float *db, const float *dy, const float *y, size_t rows,
                           size_t cols)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    const size_t chunks = rows > kColChunk ? (rows + kColChunk - 1) / kColChunk : 1;
    float *part = chunks > 1 ? (float *)ctx_scratch(c, chunks * cols * sizeof(float)) : db;
    if (!part) return; /* a spoilt capture */
    TT_LAUNCH(k_drelu_bgrad_chunks, blocks_for(chunks * cols), kThreads, c->stream, part, dz, dy, y, rows, cols,
              chunks);
    LAUNCH_CHECK(c);
    if (chunks > 1) {
        TT_LAUNCH(k_col_sum_partials, blocks_for(cols), kThreads, c->stream, db, part, chunks, cols);
        LAUNCH_CHECK(c);
    }
}

/* cu_col_sum's two passes over BatchNorm's products of deviations: one launch up to kColChunk rows, two beyond. */
static void cu_col_dev_sum(void *ctx, float *out, const float *x, const float *w, const float *center, float cscale,
                           const float *scale, size_t rows, size_t cols)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    const size_t chunks = rows > kColChunk ? (rows + kColChunk - 1) / kColChunk : 1;
    float *part = chunks > 1 ? (float *)ctx_scratch(c, chunks * cols * sizeof(float)) : out;
    if (!part) return; /* a spoilt capture */
    TT_LAUNCH(k_col_dev_sum_chunks, blocks_for(chunks * cols), kThreads, c->stream, part, x, w, center, cscale,
              chunks > 1 ? NULL : scale, rows, cols, chunks);
    LAUNCH_CHECK(c);
    if (chunks > 1) {
        TT_LAUNCH(k_col_dev_sum_partials, blocks_for(cols), kThreads, c->stream, out, part, scale, chunks, cols);
        LAUNCH_CHECK(c);
    }
}

static void cu_bn_stats(void *ctx, float *save, float *tail, const float *s1, const float *s2, const float *moving,
                        size_t C, float inv_n, float epsilon, float factor)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_bn_stats, blocks_for(C), kThreads, c->stream, save, tail, s1, s2, moving, C, inv_n, epsilon, factor);
    LAUNCH_CHECK(c);
}

static void cu_bn_fwd(void *ctx, float *y, const float *x, const float *save, const float *gb, size_t rows,
                      size_t cols)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_bn_fwd, blocks_for(rows * cols), kThreads, c->stream, y, x, save, gb, rows, cols);
    LAUNCH_CHECK(c);
}

static void cu_bn_dx(void *ctx, float *dx, const float *dy, const float *x, const float *save, const float *gamma,
                     const float *sums, size_t rows, size_t cols, float inv_n)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_bn_dx, blocks_for(rows * cols), kThreads, c->stream, dx, dy, x, save, gamma, sums, rows, cols, inv_n);
    LAUNCH_CHECK(c);
}

static void cu_relu_fwd(void *ctx, float *y, const float *x, size_t n)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_relu_fwd, blocks_for(n), kThreads, c->stream, y, x, n);
    LAUNCH_CHECK(c);
}

static void cu_relu_bwd(void *ctx, float *dx, const float *dy, const float *y, size_t n)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_relu_bwd, blocks_for(n), kThreads, c->stream, dx, dy, y, n);
    LAUNCH_CHECK(c);
}

static void cu_transpose(void *ctx, float *y, const float *x, size_t rows, size_t cols)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_transpose, blocks_for(rows * cols), kThreads, c->stream, y, x, rows, cols);
    LAUNCH_CHECK(c);
}

static void cu_softmax_xent(void *ctx, float *dlogits, float *stats, const float *logits, const int32_t *labels,
                            size_t rows, size_t classes, float scale)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    ARG_CHECK(c, classes <= (size_t)INT_MAX); /* tt_softmax_xent_row counts classes in int */
    TT_LAUNCH(k_softmax_xent, blocks_for(rows), kThreads, c->stream, dlogits, stats, logits, labels, rows, (int)classes,
                                                                 scale);
    LAUNCH_CHECK(c);
}

/* One past the last sample that patches q0 .. q0+n-1 belong to. */
static size_t conv_samples_end(size_t q0, size_t n, const tt_conv_geom *g)
{
    const size_t P = g->OH * g->OW;
    return (q0 + n + P - 1) / P;
}

static void cu_im2col(void *ctx, float *cols, const float *x, size_t q0, size_t n, const tt_conv_geom *g)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    const size_t total = n * g->KH * g->KW * g->C, x_end = conv_samples_end(q0, n, g) * g->H * g->W * g->C;
    if (geom_fits32(g) && fits32({q0 + n, total, x_end}))
        TT_LAUNCH(k_im2col<uint32_t>, blocks_for(total), kThreads, c->stream, cols, x, (uint32_t)q0, (uint32_t)n, *g);
    else
        TT_LAUNCH(k_im2col<size_t>, blocks_for(total), kThreads, c->stream, cols, x, q0, n, *g);
    LAUNCH_CHECK(c);
}

static void cu_col2im(void *ctx, float *dx, const float *dcols, size_t q0, size_t n, const tt_conv_geom *g)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    const size_t in = g->H * g->W * g->C, r1 = conv_samples_end(q0, n, g);
    const size_t total = (r1 - q0 / (g->OH * g->OW)) * in, P = g->OH * g->OW;
    if (geom_fits32(g) && fits32({q0 + n + P, r1 * in, n * g->KH * g->KW * g->C}))
        TT_LAUNCH(k_col2im<uint32_t>, blocks_for(total), kThreads, c->stream, dx, dcols, (uint32_t)q0, (uint32_t)n, *g);
    else
        TT_LAUNCH(k_col2im<size_t>, blocks_for(total), kThreads, c->stream, dx, dcols, q0, n, *g);
    LAUNCH_CHECK(c);
}

static void cu_maxpool_fwd(void *ctx, float *y, const float *x, size_t rows, const tt_conv_geom *g)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    const size_t total = rows * g->OH * g->OW * g->C;
    if (geom_fits32(g) && fits32({total, rows * g->H * g->W * g->C}))
        TT_LAUNCH(k_maxpool_fwd<uint32_t>, blocks_for(total), kThreads, c->stream, y, x, (uint32_t)rows, *g);
    else
        TT_LAUNCH(k_maxpool_fwd<size_t>, blocks_for(total), kThreads, c->stream, y, x, rows, *g);
    LAUNCH_CHECK(c);
}

/* Windows that do not overlap (the common case: pool size = strides, and every global pool): zero dx, then route
 * each window's dy to its argmax, O(window) per output. Overlapping windows: the gather, O(windows per input *
 * window) per input. */
static void cu_maxpool_bwd(void *ctx, float *dx, const float *dy, const float *x, const float *y, size_t rows,
                           const tt_conv_geom *g)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    const size_t in = rows * g->H * g->W * g->C, out = rows * g->OH * g->OW * g->C;
    const bool i32 = geom_fits32(g) && fits32({in, out});
    if (g->SH >= g->KH && g->SW >= g->KW) {
        TT_LAUNCH(k_fill, blocks_for(in), kThreads, c->stream, dx, in, 0.0f);
        LAUNCH_CHECK(c);
        if (i32)
            TT_LAUNCH(k_maxpool_route<uint32_t>, blocks_for(out), kThreads, c->stream, dx, dy, x, y, (uint32_t)rows,
                      *g);
        else
            TT_LAUNCH(k_maxpool_route<size_t>, blocks_for(out), kThreads, c->stream, dx, dy, x, y, rows, *g);
    } else if (i32) {
        TT_LAUNCH(k_maxpool_bwd<uint32_t>, blocks_for(in), kThreads, c->stream, dx, dy, x, y, (uint32_t)rows, *g);
    } else {
        TT_LAUNCH(k_maxpool_bwd<size_t>, blocks_for(in), kThreads, c->stream, dx, dy, x, y, rows, *g);
    }
    LAUNCH_CHECK(c);
}

static void cu_dropout(void *ctx, float *y, const float *x, size_t rows, size_t cols, float rate, uint64_t key,
                       const uint32_t *ids)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    TT_LAUNCH(k_dropout, blocks_for(rows * cols), kThreads, c->stream, y, x, rows, cols, rate, 1.0f / (1.0f - rate), key,
                                                                   ids);
    LAUNCH_CHECK(c);
}

static void cu_embed_fwd(void *ctx, float *y, const float *w, const float *t, size_t n, size_t V, size_t E)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    if (fits32({n, E, n * E}))
        TT_LAUNCH(k_embed_fwd<uint32_t>, blocks_for(n * E), kThreads, c->stream, y, w, t, (uint32_t)n, V, (uint32_t)E);
    else
        TT_LAUNCH(k_embed_fwd<size_t>, blocks_for(n * E), kThreads, c->stream, y, w, t, n, V, E);
    LAUNCH_CHECK(c);
}

/* Keys in the first half of the scratch, merge passes ping-ponging between its halves (n uint64 each), then the sums.
 * Token positions travel in 31 bits and ids in 32 (tt_embed_key). */
static void cu_embed_bwd(void *ctx, float *dw, const float *dy, const float *t, size_t n, size_t V, size_t E)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    ARG_CHECK(c, n < (size_t)1 << 31 && V < (size_t)1 << 32);
    uint64_t *a = (uint64_t *)ctx_scratch(c, 2 * (n ? n : 1) * sizeof(uint64_t));
    if (!a) return; /* a spoilt capture */
    uint64_t *b = a + n;
    const uint32_t n32 = (uint32_t)n;
    if (n) {
        TT_LAUNCH(k_embed_keys, blocks_for((n + kSortRun - 1) / kSortRun), kThreads, c->stream, a, t, n32, V);
        LAUNCH_CHECK(c);
    }
    for (size_t w = kSortRun; w < n; w *= 2) {
        TT_LAUNCH(k_embed_merge, blocks_for(n), kThreads, c->stream, b, a, n32, (uint32_t)w);
        LAUNCH_CHECK(c);
        uint64_t *sorted = b;
        b = a;
        a = sorted;
    }
    if (fits32({V, E, V * E, n * E}))
        TT_LAUNCH(k_embed_sum<uint32_t>, blocks_for(V * E), kThreads, c->stream, dw, dy, a, n32, (uint32_t)V,
                  (uint32_t)E);
    else
        TT_LAUNCH(k_embed_sum<size_t>, blocks_for(V * E), kThreads, c->stream, dw, dy, a, n32, V, E);
    LAUNCH_CHECK(c);
}

static void cu_gather_rows(void *ctx, void *dst, const void *src, size_t n_src, const uint32_t *idx, size_t rows,
                           size_t row_bytes)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    const bool words = row_bytes % 4 == 0 && (uintptr_t)dst % 4 == 0 && (uintptr_t)src % 4 == 0;
    const size_t w = words ? row_bytes / 4 : row_bytes, n = rows * w; /* per row, and in the output */
    const bool narrow = fits32({n_src, rows, w, n, n_src * w});
    if (words && narrow)
        TT_LAUNCH(k_gather_words<uint32_t>, blocks_for(n), kThreads, c->stream, (uint32_t *)dst, (const uint32_t *)src,
                  (uint32_t)n_src, idx, (uint32_t)rows, (uint32_t)w);
    else if (words)
        TT_LAUNCH(k_gather_words<size_t>, blocks_for(n), kThreads, c->stream, (uint32_t *)dst, (const uint32_t *)src,
                  n_src, idx, rows, w);
    else if (narrow)
        TT_LAUNCH(k_gather_bytes<uint32_t>, blocks_for(n), kThreads, c->stream, (uint8_t *)dst, (const uint8_t *)src,
                  (uint32_t)n_src, idx, (uint32_t)rows, (uint32_t)w);
    else
        TT_LAUNCH(k_gather_bytes<size_t>, blocks_for(n), kThreads, c->stream, (uint8_t *)dst, (const uint8_t *)src,
                  n_src, idx, rows, w);
    LAUNCH_CHECK(c);
}

/* Events on the tower's stream, for the ledger (no sync at record time). An event belongs to the device current at
 * its creation, which must be the one whose stream records it: the tower's (checked under TT_CUDA_DEBUG). */
static void *cu_event_create(void *ctx)
{
    (void)TOWER_CTX(ctx);
    cudaEvent_t ev;
    if (cudaEventCreate(&ev) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return (void *)ev;
}

static void cu_event_destroy(void *ctx, void *ev)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    CUDA_CHECK(c, cudaEventDestroy((cudaEvent_t)ev));
}

/* In a capture an event record becomes a record node (cudaEventRecordExternal): it is recorded at every launch. */
static void cu_event_record(void *ctx, void *ev)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    if (c->capturing)
        CUDA_CHECK(c, cudaEventRecordWithFlags((cudaEvent_t)ev, c->stream, cudaEventRecordExternal));
    else
        CUDA_CHECK(c, cudaEventRecord((cudaEvent_t)ev, c->stream));
}

/* ---- graphs: a tower's step captured once, replayed with one launch ----------------------------------------- */

/* cuBLAS's workspace for captured sgemms: NVIDIA's recommended size for Hopper (4 MiB for earlier GPUs), so a
 * captured GEMM never asks cuBLAS to allocate. Outside the run's memory plan, like the scratch. */
static const size_t kBlasWorkspace = (size_t)32 << 20;

typedef struct cuda_graph {
    cudaGraphExec_t exec;
    uint64_t scratch_gen; /* the scratch it captured */
} cuda_graph;

/* Thread-local capture mode: only this tower thread's own syncs and allocations would break it (none happen: the
 * stand-in checks), not another tower's. */
static void cu_capture_begin(void *ctx)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    if (!c->blas_ws) { /* once, before the first capture, with the stream idle (no GEMM in flight uses the old one) */
        CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
        CUDA_CHECK(c, cudaMalloc(&c->blas_ws, kBlasWorkspace));
        CUBLAS_CHECK(c, cublasSetWorkspace(c->blas, c->blas_ws, kBlasWorkspace));
    }
    CUDA_CHECK(c, cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    c->capturing = 1;
    c->capture_spoilt = 0;
}

static void *cu_capture_end(void *ctx)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    cudaGraph_t g = NULL;
    c->capturing = 0;
    CUDA_CHECK(c, cudaStreamEndCapture(c->stream, &g)); /* invalidated: an op broke the capture's rules (a bug) */
    cuda_graph *cg = c->capture_spoilt ? NULL : (cuda_graph *)calloc(1, sizeof *cg);
    if (cg) {
        CUDA_CHECK(c, cudaGraphInstantiate(&cg->exec, g, 0));
        cg->scratch_gen = c->scratch_gen;
    }
    CUDA_CHECK(c, cudaGraphDestroy(g));
    return cg;
}

static int cu_graph_launch(void *ctx, void *graph)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    cuda_graph *cg = (cuda_graph *)graph;
    if (cg->scratch_gen != c->scratch_gen) return 0;
    CUDA_CHECK(c, cudaGraphLaunch(cg->exec, c->stream));
    return 1;
}

static void cu_graph_free(void *ctx, void *graph)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    cuda_graph *cg = (cuda_graph *)graph;
    CUDA_CHECK(c, cudaGraphExecDestroy(cg->exec));
    free(cg);
}

/* Both events must have completed (the caller synced the stream): cudaErrorNotReady here is a broken invariant. */
static double cu_event_elapsed(void *ctx, void *a, void *b)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    float ms = 0;
    CUDA_CHECK(c, cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b));
    return 1e-3 * (double)ms;
}

/* cudaErrorNotReady is the answer "not yet", not a failure (it is not kept as the last error). */
static int cu_event_done(void *ctx, void *ev)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaErrorNotReady) return 0;
    CUDA_CHECK(c, e);
    return 1;
}

static void cu_event_sync(void *ctx, void *ev)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    CUDA_CHECK(c, cudaEventSynchronize((cudaEvent_t)ev));
}

/* ---- peer access ---------------------------------------------------------------------------------------------- */

/* How a copy from device `from` into device `into` travels; enables direct access for the pair where the hardware
 * allows it. The current device is left at `into` (the caller restores its own). */
static tt_status peer_link(int into, int from, int *link, tt_error *err)
{
    if (into == from) { /* virtual towers on one GPU: one memory */
        *link = TT_LINK_SAME;
        return TT_OK;
    }
    int can = 0;
    cudaError_t e = cudaDeviceCanAccessPeer(&can, into, from);
    if (e == cudaSuccess && !can) {
        *link = TT_LINK_STAGED;
        return TT_OK;
    }
    if (e == cudaSuccess) e = cudaSetDevice(into);
    if (e == cudaSuccess) e = cudaDeviceEnablePeerAccess(from, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled || e == cudaErrorTooManyPeers) {
        /* already on (a second run in this process, or a duplicate pair): fine. Too many peers (a device has a
         * hardware limit, typically 8): the copy is still correct, staged through the host */
        cudaGetLastError();
        *link = e == cudaErrorTooManyPeers ? TT_LINK_STAGED : TT_LINK_PEER;
        return TT_OK;
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return tt_fail(err, TT_ERR_DEVICE, "peer setup: GPU %d access to GPU %d: %s", into, from,
                       cudaGetErrorString(e));
    }
    *link = TT_LINK_PEER;
    return TT_OK;
}

/* Once per run, before any tower exists: link[i * n + j] for every ordered pair; the caller's bound device is
 * restored whatever happens (restore_device). */
static tt_status cu_peer_setup(const int *ords, int n, int *link, tt_error *err)
{
    tt_status s = TT_OK;
    for (int i = 0; i < n && s == TT_OK; i++)
        for (int j = 0; j < n && s == TT_OK; j++) s = peer_link(ords[i], ords[j], &link[i * n + j], err);
    cudaError_t e = restore_device();
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (s == TT_OK)
            s = tt_fail(err, TT_ERR_DEVICE, "peer setup: cudaSetDevice(%d): %s", t_device, cudaGetErrorString(e));
    }
    return s;
}

/* ---- collectives (NCCL) -------------------------------------------------------------------------------------- */

#ifdef TT_WITH_NCCL
#define NCCL_CHECK_ON(device, call)                                                                                  \
    do {                                                                                                             \
        ncclResult_t r_ = (call);                                                                                    \
        if (r_ != ncclSuccess) cuda_abort(#call, ncclGetErrorString(r_), __func__, __FILE__, __LINE__, (device));    \
    } while (0)

/* One communicator per rank (tower), made together by ncclCommInitAll in one process. */
typedef struct cuda_comm {
    int n;
    int *devices;      /* (n) the GPU of each rank */
    ncclComm_t *comms; /* (n) rank r's communicator */
} cuda_comm;

static void comm_release(cuda_comm *m)
{
    free(m->devices);
    free(m->comms);
    free(m);
}

static tt_status cu_comm_init(void **commp, void *const *ctxs, int n, tt_error *err)
{
    *commp = NULL;
    cuda_comm *m = (cuda_comm *)calloc(1, sizeof *m);
    if (m) {
        m->devices = (int *)calloc((size_t)n, sizeof *m->devices);
        m->comms = (ncclComm_t *)calloc((size_t)n, sizeof *m->comms);
    }
    if (!m || !m->devices || !m->comms) {
        if (m) comm_release(m);
        return tt_fail(err, TT_ERR_NOMEM, "--reduce nccl: out of host memory for %d communicators", n);
    }
    m->n = n;
    /* NCCL ranks are devices: two towers on one GPU would be two ranks on one device, which NCCL refuses */
    for (int r = 0; r < n; r++) {
        m->devices[r] = ((const cuda_ctx *)ctxs[r])->device;
        for (int q = 0; q < r; q++)
            if (m->devices[q] == m->devices[r]) {
                const int g = m->devices[r];
                comm_release(m);
                return tt_fail(err, TT_ERR_ARG,
                               "--reduce nccl: needs one GPU per tower (towers %d and %d share GPU %d)", q, r, g);
            }
    }
    ncclResult_t res = ncclCommInitAll(m->comms, n, m->devices);
    CUDA_CHECK_ON(t_device, restore_device()); /* NCCL visits every device; restore the caller's bound one */
    if (res != ncclSuccess) {
        comm_release(m);
        return tt_fail(err, TT_ERR_DEVICE, "--reduce nccl: ncclCommInitAll over %d GPUs: %s (%s)", n,
                       ncclGetErrorString(res), ncclGetLastError(NULL));
    }
    *commp = m;
    return TT_OK;
}

static void cu_comm_free(void *comm)
{
    cuda_comm *m = (cuda_comm *)comm;
    if (!m) return;
    for (int r = 0; r < m->n; r++) NCCL_CHECK_ON(m->devices[r], ncclCommDestroy(m->comms[r]));
    comm_release(m);
}

/* Rank `rank`'s part of the sum, on its tower's stream, called from its tower's thread: one thread per device is
 * what NCCL supports without ncclGroupStart/End. The count is a size_t for NCCL too: nothing is narrowed. */
static void cu_comm_reduce(void *comm, int rank, void *ctx, const float *d_send, float *d_recv, size_t n, int root)
{
    cuda_ctx *c = TOWER_CTX(ctx);
    cuda_comm *m = (cuda_comm *)comm;
    ARG_CHECK(c, rank >= 0 && rank < m->n && root < m->n && m->devices[rank] == c->device);
    if (root >= 0)
        NCCL_CHECK_ON(c->device, ncclReduce(d_send, d_recv, n, ncclFloat, ncclSum, root, m->comms[rank], c->stream));
    else
        NCCL_CHECK_ON(c->device, ncclAllReduce(d_send, d_recv, n, ncclFloat, ncclSum, m->comms[rank], c->stream));
}
#endif

/* The minimum Linux driver for a CUDA major version (minor version compatibility: "CUDA 13.x >= 580";
 * docs/cuda.md cites the table). 0 where this file does not know it. */
static int min_driver_for(int cuda_major)
{
    return cuda_major == 13 ? 580 : cuda_major == 12 ? 525 : 0;
}

/* cudaErrorInsufficientDriver: either no driver at all (libcuda.so.1 not found: version 0) or one too old. */
static void driver_message(tt_error *err)
{
    int drv = 0, rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = CUDART_VERSION;
    cudaGetLastError();
    const int need = min_driver_for(rt / 1000);
    char want[96];
    if (need)
        snprintf(want, sizeof want, "an NVIDIA driver >= %d", need);
    else
        snprintf(want, sizeof want, "an NVIDIA driver for CUDA %d.%d or newer", rt / 1000, rt % 1000 / 10);
    if (drv == 0)
        tt_fail(err, TT_ERR_DEVICE,
                "no NVIDIA driver is loaded (libcuda.so.1 could not be loaded); this build (CUDA runtime %d.%d) needs "
                "%s and a GPU", rt / 1000, rt % 1000 / 10, want);
    else
        tt_fail(err, TT_ERR_DEVICE,
                "the NVIDIA driver supports CUDA %d.%d, but this build (CUDA runtime %d.%d) needs %s", drv / 1000,
                drv % 1000 / 10, rt / 1000, rt % 1000 / 10, want);
}

extern "C" {

/* The number of CUDA devices, or 0 with the reason in err (which the backend registry prefixes with the flag). */
int tt_cuda_device_count(tt_error *err)
{
    int n = 0; /* cudaGetDeviceCount leaves n alone when it fails (no driver) */
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver) {
        cudaGetLastError();
        driver_message(err);
        return 0;
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        tt_fail(err, TT_ERR_DEVICE, "no usable CUDA device (%s)", cudaGetErrorString(e));
        return 0;
    }
    if (n == 0) tt_fail(err, TT_ERR_DEVICE, "the driver reports no CUDA device");
    return n;
}

#ifndef TT_WITH_NCCL /* built without NCCL: no collectives, so --reduce nccl is refused */
#define cu_comm_init NULL
#define cu_comm_free NULL
#define cu_comm_reduce NULL
#endif

/* Every op of the list (include/tt_dev.h, TT_DEV_OPS) is cu_<its name>: a missing one does not compile. Designated
 * initialisers in member order, as C++20 has them (g++ and nvcc take them in C++17 as an extension). */
#define CU_ENTRY(name, ...) .name = cu_##name,
extern const tt_dev_ops tt_dev_cuda_ops;
const tt_dev_ops tt_dev_cuda_ops = {
    .name = TT_CUDA_BACKEND_NAME,
    .chunk_mnk = 0,  /* no limit: one GEMM per shard */
    .no_memory = 0,
    .inline_ops = 0, /* the streams run beside the host */
    .capture_bytes = kBlasWorkspace,
    .lt_bytes = kLtWorkspace,
    TT_DEV_OPS(CU_ENTRY, CU_ENTRY, CU_ENTRY, CU_ENTRY)
};

} /* extern "C" */
