/* cublas.cpp — cuBLAS's sgemm for the CPU stand-in: checked as cuBLAS checks its arguments, every matrix checked
 * against the memory the handle's device may touch, then queued on the handle's stream and run by OpenBLAS with the
 * same column-major call (cblas_sgemm, CblasColMajor). Not for: other BLAS routines (the backend calls none). */
#include <cblas.h>
#include <limits.h>
#include <stdio.h>

#include <vector>

#include "cublas_v2.h"
#include "sim.h"
#include "tt_math.h"

struct cublasContext {
    int device;
    cudaStream_t stream; /* NULL: the device's default stream */
    cublasMath_t math;
    void *workspace;     /* cublasSetWorkspace's, or NULL: cuBLAS's own (which a capture may not allocate) */
    size_t workspace_bytes;
};

using namespace tt_sim;

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    const int d = current_device();
    if (d >= cfg().devices || !ensure_context(d)) return CUBLAS_STATUS_NOT_INITIALIZED;
    *h = new cublasContext{d, nullptr, CUBLAS_DEFAULT_MATH, nullptr, 0};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    int dev;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!resolve_stream(&s, &dev) || dev != h->device) {
        say("cublasSetStream: the stream is not one of the handle's device %d", h->device);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

/* The workspace cuBLAS uses instead of allocating its own (which is what makes a call legal in a stream capture):
 * device memory of the handle's device, or NULL with 0 bytes to go back to cuBLAS's own. */
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *workspace, size_t bytes)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((workspace == nullptr) != (bytes == 0) ||
        (workspace && !check_device_range("cublasSetWorkspace", workspace, bytes, h->device)))
        return CUBLAS_STATUS_INVALID_VALUE;
    h->workspace = workspace;
    h->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

/* The bytes a column-major rows x cols matrix with leading dimension ld spans. */
static size_t matrix_bytes(int64_t rows, int64_t cols, int64_t ld)
{
    return rows && cols ? (size_t)((cols - 1) * ld + rows) * sizeof(float) : 0;
}

/* A column-major rows x cols matrix with leading dimension ld must lie in memory the device may touch. */
static bool check_matrix(const char *name, const float *p, int64_t rows, int64_t cols, int64_t ld, int device)
{
    if (!rows || !cols) return true;
    char what[128];
    snprintf(what, sizeof what, "cublasSgemm: matrix %s (%lld x %lld, ld %lld)", name, (long long)rows,
             (long long)cols, (long long)ld);
    return check_device_range(what, p, matrix_bytes(rows, cols, ld), device);
}

/* A copy of the span of a column-major matrix (ld) with every element rounded to format fmt. */
static std::vector<float> rounded(const float *p, int64_t rows, int64_t cols, int64_t ld, int fmt)
{
    std::vector<float> v(matrix_bytes(rows, cols, ld) / sizeof(float));
    for (size_t i = 0; i < v.size(); i++) v[i] = tt_round_fmt(p[i], fmt);
    return v;
}

/* fmt (tt_math.h's TT_FMT_*): A and B are down-converted to it first (cublasGemmEx's _FAST_16BF, _FAST_16F). */
static cublasStatus_t sgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                            int64_t k, const float *alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                            const float *beta, float *C, int64_t ldc, int fmt = TT_FMT_FP32)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    /* cuBLAS's own argument checks (cublas<t>gemm: "the parameters m, n, k < 0", "lda < max(1, m) if transa ==
     * CUBLAS_OP_N and lda < max(1, k) otherwise", and alike for ldb, ldc) */
    const int64_t ra = ta == CUBLAS_OP_N ? m : k, ca = ta == CUBLAS_OP_N ? k : m;
    const int64_t rb = tb == CUBLAS_OP_N ? k : n, cb = tb == CUBLAS_OP_N ? n : k;
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) || m < 0 || n < 0 ||
        k < 0 || lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) || ldc < (m > 1 ? m : 1) || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (current_device() != h->device) {
        say("cublasSgemm: called with device %d current, on a handle of device %d", current_device(), h->device);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX) {
        say("cublasSgemm_64: sizes beyond INT_MAX are more than this stand-in's OpenBLAS (32-bit indices) takes");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    cudaStream_t s = h->stream;
    int dev;
    if (!resolve_stream(&s, &dev)) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (capturing(s) && !h->workspace) {
        say("cublasSgemm while its stream is captured, with no cublasSetWorkspace: cuBLAS would allocate its own "
            "workspace inside the capture");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    const float al = *alpha, be = *beta; /* host pointer mode: read at the call */
    const CBLAS_TRANSPOSE oa = ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
    const CBLAS_TRANSPOSE ob = tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
    const int device = h->device;
    const void *ws = h->workspace;
    const size_t ws_bytes = h->workspace_bytes;
    const bool ok = submit(s, [=](cudaStream_t st, issue_mode how) {
        if (!check_matrix("A", A, ra, ca, lda, device) || !check_matrix("B", B, rb, cb, ldb, device) ||
            !check_matrix("C", C, m, n, ldc, device) ||
            (how == ISSUE_GRAPH && ws && !check_device_range("cublasSgemm: the workspace", ws, ws_bytes, device)))
            return false;
        if (how == ISSUE_CHECK || !m || !n) return true;
        count("cublasSgemm", 1, (uint64_t)(2 * m * n * k));
        enqueue(
            st,
            [=]() {
                if (fmt == TT_FMT_FP32) {
                    cblas_sgemm(CblasColMajor, oa, ob, (int)m, (int)n, (int)k, al, A, (int)lda, B, (int)ldb, be, C,
                                (int)ldc);
                    return;
                }
                const std::vector<float> a16 = rounded(A, ra, ca, lda, fmt), b16 = rounded(B, rb, cb, ldb, fmt);
                cblas_sgemm(CblasColMajor, oa, ob, (int)m, (int)n, (int)k, al, a16.data(), (int)lda, b16.data(),
                            (int)ldb, be, C, (int)ldc);
            },
            "cublasSgemm",
            {{A, matrix_bytes(ra, ca, lda), false}, {B, matrix_bytes(rb, cb, ldb), false},
             {C, matrix_bytes(m, n, ldc), true}, {ws, ws_bytes, true}});
        return true;
    });
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc)
{
    return sgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

cublasStatus_t cublasSgemm_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                              int64_t k, const float *alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                              const float *beta, float *C, int64_t ldc)
{
    return sgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

static cublasStatus_t gemm_ex(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                              int64_t k, const void *alpha, const void *A, cudaDataType_t at, int64_t lda,
                              const void *B, cudaDataType_t bt, int64_t ldb, const void *beta, void *C,
                              cudaDataType_t ct, int64_t ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    if (at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F || algo != CUBLAS_GEMM_DEFAULT) {
        say("cublasGemmEx: only FP32 matrices and CUBLAS_GEMM_DEFAULT are in this stand-in");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    const int fmt = compute == CUBLAS_COMPUTE_32F_FAST_16BF  ? TT_FMT_BF16
                    : compute == CUBLAS_COMPUTE_32F_FAST_16F ? TT_FMT_FP16
                    : compute == CUBLAS_COMPUTE_32F          ? TT_FMT_FP32
                                                             : -1;
    if (fmt < 0) {
        say("cublasGemmEx: compute type %d is not in this stand-in", (int)compute);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return sgemm(h, ta, tb, m, n, k, (const float *)alpha, (const float *)A, lda, (const float *)B, ldb,
                 (const float *)beta, (float *)C, ldc, fmt);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t at, int lda, const void *B,
                            cudaDataType_t bt, int ldb, const void *beta, void *C, cudaDataType_t ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    return gemm_ex(h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, compute, algo);
}

cublasStatus_t cublasGemmEx_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                               int64_t k, const void *alpha, const void *A, cudaDataType_t at, int64_t lda,
                               const void *B, cudaDataType_t bt, int64_t ldb, const void *beta, void *C,
                               cudaDataType_t ct, int64_t ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    return gemm_ex(h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, compute, algo);
}
