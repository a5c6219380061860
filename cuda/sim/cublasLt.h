/* cublasLt.h — the part of cuBLASLt towertrain's CUDA backend calls (--epilogues lt), as the CPU stand-in provides
 * it: one FP32 matmul D = epilogue(alpha * op(A) op(B) + beta * C), column-major, with the DEFAULT, RELU, BIAS and
 * RELU_BIAS epilogues (the bias a vector of D's rows, broadcast along its columns, added before the relu), the
 * RELU_AUX_BIAS forward (RELU_BIAS that also writes the relu's bit-mask into the aux buffer: bit i + j * ld set where
 * D(i, j) > 0 after the bias, ld the EPILOGUE_AUX_LD in bits — a multiple of 128, at least D's rows — bits in
 * ascending order within each byte) and the DRELU_BGRAD backward (D(i, j) kept where the mask's bit is set, 0
 * elsewhere, and the bias pointer written with D's row sums: the bias gradient), queued on the call's stream and run
 * by OpenBLAS (cblas_sgemm, CblasColMajor: the very call cublas.cpp makes for cublasSgemm) followed by the epilogue
 * per element (DRELU_BGRAD's sums in drelu_bgrad's order: chunks of TT_COL_CHUNK columns from 0.0f, then the chunks'
 * sums — a GPU's order is its own). Checked as cuBLASLt checks (CUBLAS_STATUS_INVALID_VALUE: null handles and
 * pointers, layouts that do not fit the operation, ld below rows, a workspace smaller than the algorithm asks) and as
 * the instrument checks everything (every matrix, the bias and the workspace inside memory of the handle's device; a
 * line on stderr says what was wrong). The heuristic offers one algorithm for every valid FP32 problem — none with
 * TT_SIM_LT_NO_ALGO=1 (read at each query), so the backend's fallback is exercised. Not for: anything but the
 * stand-in build (cmake -DTT_CUDA_SIM=ON); types, scales or epilogues other than these
 * (CUBLAS_STATUS_NOT_SUPPORTED). */
#ifndef TT_SIM_CUBLASLT_H
#define TT_SIM_CUBLASLT_H

#include <stddef.h>
#include <stdint.h>

#include "cublas_v2.h"


typedef enum {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
} cublasLtMatmulDescAttributes_t;

typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_RELU_BIAS = 6,
    CUBLASLT_EPILOGUE_RELU_AUX_BIAS = 134,
    CUBLASLT_EPILOGUE_DRELU_BGRAD = 152,
} cublasLtEpilogue_t;

/* cuBLASLt's values: the workspace limit (uint64_t) and the smallest alignment, in bytes, that A, B, C and D's
 * pointers will have (uint32_t; 256 when not set: an algorithm chosen without them may assume it) */
typedef enum {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;

typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct cublasLtMatmulDescSim *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutSim *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceSim *cublasLtMatmulPreference_t;

/* Opaque, as cuBLASLt's: kept by value in the caller's cache. */
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t bytes);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t bytes);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t results[],
                                              int *returned);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
                              const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                              cudaStream_t stream);

#endif
