/* cublas_v2.h — the part of cuBLAS towertrain's CUDA backend calls, as the CPU stand-in provides it: sgemm with
 * cuBLAS's column-major semantics, run by OpenBLAS when the handle's stream is waited for. Arguments are checked as
 * cuBLAS checks them (CUBLAS_STATUS_INVALID_VALUE), and every matrix must lie inside memory of the handle's device
 * (the instrument's rule; a line on stderr says what was wrong). Alpha and beta are read at the call (host pointer
 * mode, cuBLAS's default). Not for: anything but the stand-in build (cmake -DTT_CUDA_SIM=ON). */
#ifndef TT_SIM_CUBLAS_V2_H
#define TT_SIM_CUBLAS_V2_H

#include <stdint.h>

#include "cuda_runtime.h"

#define CUBLAS_VER_MAJOR 13

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;

typedef struct cublasContext *cublasHandle_t;

/* The data and compute types, with CUDA's values (library_types.h, cublas_api.h). */
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef cudaDataType cudaDataType_t;
typedef enum {
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *workspace, size_t bytes);
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc);
cublasStatus_t cublasSgemm_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                              int64_t k, const float *alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                              const float *beta, float *C, int64_t ldc);

/* cublasGemmEx with FP32 matrices (A, B, C all CUDA_R_32F; other types: CUBLAS_STATUS_NOT_SUPPORTED). Compute type
 * CUBLAS_COMPUTE_32F is sgemm; _FAST_16BF and _FAST_16F down-convert A and B to that format (round to nearest even,
 * tt_math.h's conversions) and accumulate in FP32, as the tensor cores do — on operands already in the format, the
 * conversion is exact and the result is sgemm's on them. */
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t at, int lda, const void *B,
                            cudaDataType_t bt, int ldb, const void *beta, void *C, cudaDataType_t ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmEx_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                               int64_t k, const void *alpha, const void *A, cudaDataType_t at, int64_t lda,
                               const void *B, cudaDataType_t bt, int64_t ldb, const void *beta, void *C,
                               cudaDataType_t ct, int64_t ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo);

#endif
