/* dev_cuda.cu — the CUDA backend: fills the tt_dev_ops table with cudaMalloc'd device memory, async copies on the
 * tower's own stream, cuBLAS sgemm, and kernels that call the very tt_math.h functions the CPU backend loops over
 * (one thread per element or per row). Several towers may share a GPU: each has its own stream and cuBLAS handle.
 *
 * Errors: a missing driver or device at init is a recoverable TT_ERR_DEVICE (the CLI says so and exits 1); any
 * CUDA or cuBLAS failure after that is a broken invariant and aborts with the call, function, file:line and the
 * device. Every kernel launch is followed by a cudaGetLastError check.
 * Not for: anything the CPU backend does not also do — tests/test_backend_ops.c compares the two op by op. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tt_dev.h"
#include "tt_math.h"

typedef struct cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
} cuda_ctx;

static void cuda_abort(const char *what, const char *why, const char *func, const char *file, int line, int device)
{
    fprintf(stderr, "towertrain: CUDA error on device %d: %s failed: %s in %s at %s:%d\n", device, what, why, func,
            file, line);
    abort();
}

#define CUDA_CHECK(c, call)                                                                                          \
    do {                                                                                                             \
        cudaError_t e_ = (call);                                                                                     \
        if (e_ != cudaSuccess) cuda_abort(#call, cudaGetErrorString(e_), __func__, __FILE__, __LINE__, (c)->device); \
    } while (0)

#define CUBLAS_CHECK(c, call)                                                                                        \
    do {                                                                                                             \
        cublasStatus_t s_ = (call);                                                                                  \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                             \
            cuda_abort(#call, cublasGetStatusString(s_), __func__, __FILE__, __LINE__, (c)->device);                \
    } while (0)

#define LAUNCH_CHECK(c) CUDA_CHECK(c, cudaGetLastError())

static const int kThreads = 256;

static unsigned blocks_for(size_t n)
{
    size_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 65535 * 16 ? (b ? b : 1) : 65535 * 16);
}

/* ---- kernels: each calls the shared math of tt_math.h -------------------------------------------------------- */

__global__ void k_fill(float *x, size_t n, float v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] = v;
}

__global__ void k_add(float *y, const float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = tt_add(y[i], x[i]);
}

__global__ void k_u8_to_f32(float *y, const uint8_t *x, size_t n, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = tt_pixel(x[i], scale);
}

__global__ void k_bias_add(float *y, const float *b, size_t rows, size_t cols)
{
    size_t n = rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] += b[i % cols];
}

/* One thread per column; consecutive threads read consecutive addresses of a row. Summed in row order, as the CPU
 * backend does, so results match to the last bit for the same inputs. */
__global__ void k_col_sum(float *out, const float *x, size_t rows, size_t cols)
{
    size_t c = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.0f;
    for (size_t r = 0; r < rows; r++) s += x[r * cols + c];
    out[c] = s;
}

__global__ void k_relu_fwd(float *y, const float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = tt_relu(x[i]);
}

__global__ void k_relu_bwd(float *dx, const float *dy, const float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dx[i] = tt_relu_grad(dy[i], y[i]);
}

__global__ void k_softmax_xent(float *dlogits, float *stats, const float *logits, const int32_t *labels, size_t rows,
                               size_t classes, float scale)
{
    size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (r >= rows) return;
    int rank;
    float *dz = dlogits ? dlogits + r * classes : NULL;
    stats[2 * r] = tt_softmax_xent_row(logits + r * classes, (int)classes, labels[r], scale, dz, &rank);
    stats[2 * r + 1] = (float)rank;
}

/* ---- the table ----------------------------------------------------------------------------------------------- */

static tt_status cu_init(void **ctxp, int ordinal, tt_error *err)
{
    cudaError_t e = cudaSetDevice(ordinal);
    if (e != cudaSuccess)
        return tt_fail(err, TT_ERR_DEVICE, "cuda device %d: cudaSetDevice: %s", ordinal, cudaGetErrorString(e));
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return tt_fail(err, TT_ERR_NOMEM, "cuda device %d: out of host memory", ordinal);
    c->device = ordinal;
    e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(c);
        return tt_fail(err, TT_ERR_DEVICE, "cuda device %d: cudaStreamCreate: %s", ordinal, cudaGetErrorString(e));
    }
    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(c->stream);
        free(c);
        return tt_fail(err, TT_ERR_DEVICE, "cuda device %d: cublasCreate: %s", ordinal, cublasGetStatusString(bs));
    }
    CUBLAS_CHECK(c, cublasSetStream(c->blas, c->stream));
    /* plain FP32 (no TF32): the CPU backend is the oracle and TF32 would differ from it by ~1e-3 */
    CUBLAS_CHECK(c, cublasSetMathMode(c->blas, CUBLAS_PEDANTIC_MATH));
    *ctxp = c;
    return TT_OK;
}

static void cu_destroy(void *ctx)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    cudaSetDevice(c->device);
    cudaStreamSynchronize(c->stream);
    cublasDestroy(c->blas);
    cudaStreamDestroy(c->stream);
    free(c);
}

static void cu_bind(void *ctx)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUDA_CHECK(c, cudaSetDevice(c->device));
}

/* Free and total memory of a device, for the run's memory budget (called before any tower exists). */
static tt_status cu_mem_info(int ordinal, size_t *free_bytes, size_t *total_bytes)
{
    int prev = 0;
    if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(ordinal) != cudaSuccess) {
        cudaGetLastError();
        return TT_ERR_DEVICE;
    }
    cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
    cudaSetDevice(prev);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return TT_ERR_DEVICE;
    }
    return TT_OK;
}

static void *cu_alloc(void *ctx, size_t bytes)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error so the caller can report it */
        return NULL;
    }
    /* poison with NaN, like the CPU backend, so a missing zeroing shows */
    size_t n = bytes / sizeof(float);
    if (n) {
        k_fill<<<blocks_for(n), kThreads, 0, c->stream>>>((float *)d, n, NAN);
        LAUNCH_CHECK(c);
    }
    return d;
}

static void cu_dfree(void *ctx, void *d)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
    CUDA_CHECK(c, cudaFree(d));
}

static void *cu_host_alloc(void *ctx, size_t bytes)
{
    void *h = NULL;
    (void)ctx;
    if (cudaMallocHost(&h, bytes) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return h;
}

static void cu_host_free(void *ctx, void *h)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUDA_CHECK(c, cudaFreeHost(h));
}

static void cu_h2d(void *ctx, void *d_dst, const void *h_src, size_t bytes)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUDA_CHECK(c, cudaMemcpyAsync(d_dst, h_src, bytes, cudaMemcpyHostToDevice, c->stream));
}

static void cu_d2h(void *ctx, void *h_dst, const void *d_src, size_t bytes)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUDA_CHECK(c, cudaMemcpyAsync(h_dst, d_src, bytes, cudaMemcpyDeviceToHost, c->stream));
}

static void cu_d2d(void *ctx, void *d_dst, const void *d_src, size_t bytes)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUDA_CHECK(c, cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, c->stream));
}

static void cu_sync(void *ctx)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
}

/* Peer copy on the destination's stream; cudaMemcpyPeerAsync stages through the host when peer access is off. */
static void cu_peer_copy(void *ctx, void *d_dst, void *src_ctx, const void *d_src, size_t bytes)
{
    cuda_ctx *c = (cuda_ctx *)ctx, *s = (cuda_ctx *)src_ctx;
    if (c->device == s->device)
        CUDA_CHECK(c, cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, c->stream));
    else
        CUDA_CHECK(c, cudaMemcpyPeerAsync(d_dst, c->device, d_src, s->device, bytes, c->stream));
}

static void cu_add(void *ctx, float *y, const float *x, size_t n)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    k_add<<<blocks_for(n), kThreads, 0, c->stream>>>(y, x, n);
    LAUNCH_CHECK(c);
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands, keep the leading dims. */
static void cu_sgemm(void *ctx, int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *a, size_t lda,
                     const float *b, size_t ldb, float beta, float *cm, size_t ldc)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUBLAS_CHECK(c, cublasSgemm(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N,
                                (int)M, (int)K, &alpha, b, (int)ldb, a, (int)lda, &beta, cm, (int)ldc));
}

static void cu_fill(void *ctx, float *x, size_t n, float v)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    k_fill<<<blocks_for(n), kThreads, 0, c->stream>>>(x, n, v);
    LAUNCH_CHECK(c);
}

static void cu_u8_to_f32(void *ctx, float *y, const uint8_t *x, size_t n, float scale)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    k_u8_to_f32<<<blocks_for(n), kThreads, 0, c->stream>>>(y, x, n, scale);
    LAUNCH_CHECK(c);
}

static void cu_bias_add(void *ctx, float *y, const float *b, size_t rows, size_t cols)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    k_bias_add<<<blocks_for(rows * cols), kThreads, 0, c->stream>>>(y, b, rows, cols);
    LAUNCH_CHECK(c);
}

static void cu_col_sum(void *ctx, float *out, const float *x, size_t rows, size_t cols)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    k_col_sum<<<(unsigned)((cols + kThreads - 1) / kThreads), kThreads, 0, c->stream>>>(out, x, rows, cols);
    LAUNCH_CHECK(c);
}

static void cu_relu_fwd(void *ctx, float *y, const float *x, size_t n)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    k_relu_fwd<<<blocks_for(n), kThreads, 0, c->stream>>>(y, x, n);
    LAUNCH_CHECK(c);
}

static void cu_relu_bwd(void *ctx, float *dx, const float *dy, const float *y, size_t n)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    k_relu_bwd<<<blocks_for(n), kThreads, 0, c->stream>>>(dx, dy, y, n);
    LAUNCH_CHECK(c);
}

static void cu_softmax_xent(void *ctx, float *dlogits, float *stats, const float *logits, const int32_t *labels,
                            size_t rows, size_t classes, float scale)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    k_softmax_xent<<<(unsigned)((rows + kThreads - 1) / kThreads), kThreads, 0, c->stream>>>(dlogits, stats, logits,
                                                                                            labels, rows, classes, scale);
    LAUNCH_CHECK(c);
}

/* Events on the tower's stream, for the ledger (no sync at record time). */
static void *cu_event_create(void *ctx)
{
    cudaEvent_t ev;
    (void)ctx;
    if (cudaEventCreate(&ev) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return (void *)ev;
}

static void cu_event_destroy(void *ctx, void *ev)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUDA_CHECK(c, cudaEventDestroy((cudaEvent_t)ev));
}

static void cu_event_record(void *ctx, void *ev)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    CUDA_CHECK(c, cudaEventRecord((cudaEvent_t)ev, c->stream));
}

static double cu_event_elapsed(void *ctx, void *a, void *b)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    float ms = 0;
    CUDA_CHECK(c, cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b));
    return 1e-3 * (double)ms;
}

extern "C" {

int tt_cuda_device_count(tt_error *err)
{
    int n = 0; /* cudaGetDeviceCount leaves n alone when it fails (no driver) */
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        tt_fail(err, TT_ERR_DEVICE, "no usable CUDA device (%s)", cudaGetErrorString(e));
        return 0;
    }
    if (n == 0) tt_fail(err, TT_ERR_DEVICE, "the driver reports no CUDA device");
    return n;
}

extern const tt_dev_ops tt_dev_cuda_ops;
/* In tt_dev_ops member order (C++17 has no designated initializers). */
const tt_dev_ops tt_dev_cuda_ops = {
    "cuda",          /* name */
    cu_init,         /* init */
    cu_destroy,      /* destroy */
    cu_mem_info,     /* mem_info */
    cu_bind,         /* bind */
    cu_alloc,        /* alloc */
    cu_dfree,        /* dfree */
    cu_host_alloc,   /* host_alloc */
    cu_host_free,    /* host_free */
    cu_h2d,          /* h2d */
    cu_d2h,          /* d2h */
    cu_d2d,          /* d2d */
    cu_sync,         /* sync */
    cu_peer_copy,    /* peer_copy */
    cu_sgemm,        /* sgemm */
    cu_fill,         /* fill */
    cu_add,          /* add */
    cu_u8_to_f32,    /* u8_to_f32 */
    cu_bias_add,     /* bias_add */
    cu_col_sum,      /* col_sum */
    cu_relu_fwd,     /* relu_fwd */
    cu_relu_bwd,     /* relu_bwd */
    cu_softmax_xent, /* softmax_xent */
    cu_event_create,  /* event_create */
    cu_event_destroy, /* event_destroy */
    cu_event_record,  /* event_record */
    cu_event_elapsed, /* event_elapsed */
    NULL,             /* peer_setup */
    NULL,             /* comm_init */
    NULL,             /* comm_free */
    NULL,             /* comm_reduce */
};

} /* extern "C" */
