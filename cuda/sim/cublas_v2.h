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

#endif
