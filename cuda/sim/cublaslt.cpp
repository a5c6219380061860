/* cublaslt.cpp — cuBLASLt's matmul with epilogues for the CPU stand-in (see cublasLt.h for what it is and is not):
 * the descriptors are host objects checked as they are made, the heuristic offers one algorithm (none with
 * TT_SIM_LT_NO_ALGO=1), and cublasLtMatmul is checked against the handle's device, then queued on its stream like
 * cublasSgemm (cublas.cpp): OpenBLAS's cblas_sgemm with the same column-major arguments, then the epilogue per
 * element — so a backend's Lt call and its sgemm + bias kernels agree to the bit here, which a GPU need not. */
#include <cblas.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublasLt.h"
#include "sim.h"
#include "tt_math.h" /* TT_COL_CHUNK: DRELU_BGRAD sums in the order of the CUDA backend's drelu_bgrad */

using namespace tt_sim;

struct cublasLtContext {
    int device;
};

struct cublasLtMatmulDescSim {
    cublasComputeType_t compute;
    cublasOperation_t ta, tb;
    cublasLtEpilogue_t epilogue;
    const float *bias;
    void *aux;      /* RELU_AUX_BIAS writes, DRELU_BGRAD reads: the relu's bit-mask */
    int64_t aux_ld; /* its leading dimension, in bits (elements) */
};

struct cublasLtMatrixLayoutSim {
    uint64_t rows, cols;
    int64_t ld;
};

struct cublasLtMatmulPreferenceSim {
    uint64_t max_workspace;
    uint32_t align[4]; /* A, B, C, D: the alignment the caller promises (cuBLASLt's default: 256) */
};

/* What a GPU's algorithms may assume of the bias pointer of a BIAS epilogue (vector loads): 16 bytes. A bias less
 * aligned faults on a GPU ("misaligned address"); here it is a line and an error. */
static const uint32_t kBiasAlign = 16;

/* What the stand-in's one algorithm asks of the workspace (when the preference allows it): a GPU's split-K
 * algorithms ask for some, and a call that passes less must fail as it would there. */
static const size_t kAlgoWorkspace = (size_t)1 << 20;
static const uint64_t kAlgoMagic = 0x746c7473696dULL; /* "tltsim": an algo this heuristic returned */

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    const int d = current_device();
    if (d >= cfg().devices || !ensure_context(d)) return CUBLAS_STATUS_NOT_INITIALIZED;
    *h = new cublasLtContext{d};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale)
{
    if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
    if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) {
        say("cublasLtMatmulDescCreate: only CUBLAS_COMPUTE_32F with CUDA_R_32F scales (plain FP32, no TF32)");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    *desc = new cublasLtMatmulDescSim{compute, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr, 0};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t bytes)
{
    if (!desc || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
        int32_t op;
        if (bytes != sizeof op) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&op, buf, sizeof op);
        if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
        (attr == CUBLASLT_MATMUL_DESC_TRANSA ? desc->ta : desc->tb) = (cublasOperation_t)op;
        return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
        uint32_t e;
        if (bytes != sizeof e) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&e, buf, sizeof e);
        if (e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_RELU && e != CUBLASLT_EPILOGUE_BIAS &&
            e != CUBLASLT_EPILOGUE_RELU_BIAS && e != CUBLASLT_EPILOGUE_RELU_AUX_BIAS &&
            e != CUBLASLT_EPILOGUE_DRELU_BGRAD) {
            say("cublasLtMatmulDescSetAttribute: epilogue %u is not one the stand-in has", e);
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        desc->epilogue = (cublasLtEpilogue_t)e;
        return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        if (bytes != sizeof(void *)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&desc->bias, buf, sizeof desc->bias);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
        if (bytes != sizeof(void *)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&desc->aux, buf, sizeof desc->aux);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
        if (bytes != sizeof(int64_t)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&desc->aux_ld, buf, sizeof desc->aux_ld);
        return CUBLAS_STATUS_SUCCESS;
    }
    say("cublasLtMatmulDescSetAttribute: attribute %d is not one the stand-in has", (int)attr);
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc)
{
    delete desc;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld)
{
    if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
    if (type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    /* cuBLASLt: "ld must be at least rows" (column-major, the default order) */
    if (ld < 1 || (uint64_t)ld < rows) {
        say("cublasLtMatrixLayoutCreate: ld %lld below the %llu rows", (long long)ld, (unsigned long long)rows);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *layout = new cublasLtMatrixLayoutSim{rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout)
{
    delete layout;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    *pref = new cublasLtMatmulPreferenceSim{0, {256, 256, 256, 256}};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t bytes)
{
    if (!pref || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && bytes == sizeof(uint64_t)) {
        memcpy(&pref->max_workspace, buf, sizeof(uint64_t));
        return CUBLAS_STATUS_SUCCESS;
    }
    if (attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES &&
        bytes == sizeof(uint32_t)) {
        uint32_t v;
        memcpy(&v, buf, sizeof v);
        if (v == 0 || (v & (v - 1))) return CUBLAS_STATUS_INVALID_VALUE; /* a power of two */
        pref->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}

/* The problem the descriptors describe: op(A) m x k, op(B) k x n, C and D m x n — false (with a line) if the layouts
 * do not fit each other. */
static bool problem(const char *fn, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, uint64_t *m, uint64_t *n, uint64_t *k)
{
    if (!desc || !a || !b || !c || !d) {
        say("%s: a null descriptor", fn);
        return false;
    }
    *m = desc->ta == CUBLAS_OP_N ? a->rows : a->cols;
    *k = desc->ta == CUBLAS_OP_N ? a->cols : a->rows;
    const uint64_t kb = desc->tb == CUBLAS_OP_N ? b->rows : b->cols;
    *n = desc->tb == CUBLAS_OP_N ? b->cols : b->rows;
    if (kb != *k || c->rows != *m || c->cols != *n || d->rows != *m || d->cols != *n || c->ld != d->ld) {
        say("%s: layouts that do not fit: op(A) %llu x %llu, op(B) %llu x %llu, C %llu x %llu (ld %lld), "
            "D %llu x %llu (ld %lld)",
            fn, (unsigned long long)*m, (unsigned long long)*k, (unsigned long long)kb, (unsigned long long)*n,
            (unsigned long long)c->rows, (unsigned long long)c->cols, (long long)c->ld, (unsigned long long)d->rows,
            (unsigned long long)d->cols, (long long)d->ld);
        return false;
    }
    if (*m > INT_MAX || *n > INT_MAX || *k > INT_MAX || a->ld > INT_MAX || b->ld > INT_MAX || d->ld > INT_MAX) {
        say("%s: sizes beyond INT_MAX are more than this stand-in's OpenBLAS (32-bit indices) takes", fn);
        return false;
    }
    return true;
}

static bool uses_aux(cublasLtEpilogue_t e)
{
    return e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DRELU_BGRAD;
}

/* An epilogue with a bit-mask needs its leading dimension set: a multiple of 128 bits, at least D's m rows
 * (cuBLASLt's rule for EPILOGUE_AUX_LD) — false with a line otherwise. */
static bool aux_fits(const char *fn, cublasLtMatmulDesc_t desc, uint64_t m)
{
    if (!uses_aux(desc->epilogue)) return true;
    if (desc->aux_ld <= 0 || desc->aux_ld % 128 || (uint64_t)desc->aux_ld < m || desc->aux_ld > INT_MAX) {
        say("%s: the bit-mask's leading dimension %lld is not a multiple of 128 of at least D's %llu rows", fn,
            (long long)desc->aux_ld, (unsigned long long)m);
        return false;
    }
    return true;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t results[],
                                              int *returned)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    uint64_t m, n, k;
    if (!pref || requested < 1 || !results || !returned ||
        !problem("cublasLtMatmulAlgoGetHeuristic", desc, a, b, c, d, &m, &n, &k))
        return CUBLAS_STATUS_INVALID_VALUE;
    *returned = 0;
    if (!aux_fits("cublasLtMatmulAlgoGetHeuristic", desc, m)) return CUBLAS_STATUS_INVALID_VALUE;
    const char *none = getenv("TT_SIM_LT_NO_ALGO"); /* read at each query: a test may switch it */
    if (none && strcmp(none, "1") == 0) return CUBLAS_STATUS_NOT_SUPPORTED; /* cuBLASLt: no algorithm found */
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = kAlgoMagic;
    results[0].workspaceSize = pref->max_workspace >= kAlgoWorkspace ? kAlgoWorkspace : 0;
    results[0].algo.data[1] = results[0].workspaceSize;
    for (int i = 0; i < 4; i++) results[0].algo.data[2 + i] = pref->align[i]; /* what the algorithm assumes */
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* The bytes a column-major rows x cols matrix with leading dimension ld spans. */
static size_t span_bytes(uint64_t rows, uint64_t cols, int64_t ld)
{
    return rows && cols ? (size_t)((cols - 1) * (uint64_t)ld + rows) * sizeof(float) : 0;
}

static bool check_matrix(const char *name, const void *p, const cublasLtMatrixLayoutSim &l, int device)
{
    if (!l.rows || !l.cols) return true;
    char what[128];
    snprintf(what, sizeof what, "cublasLtMatmul: matrix %s (%llu x %llu, ld %lld)", name,
             (unsigned long long)l.rows, (unsigned long long)l.cols, (long long)l.ld);
    return check_device_range(what, p, span_bytes(l.rows, l.cols, l.ld), device);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
                              const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                              cudaStream_t stream)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    uint64_t m, n, k;
    if (!alpha || !beta || !problem("cublasLtMatmul", desc, a, b, c, d, &m, &n, &k))
        return CUBLAS_STATUS_INVALID_VALUE;
    const cublasLtEpilogue_t ep = desc->epilogue;
    const bool aux_out = ep == CUBLASLT_EPILOGUE_RELU_AUX_BIAS, drelu = ep == CUBLASLT_EPILOGUE_DRELU_BGRAD;
    const bool bias = ep == CUBLASLT_EPILOGUE_BIAS || ep == CUBLASLT_EPILOGUE_RELU_BIAS || aux_out;
    const bool relu = ep == CUBLASLT_EPILOGUE_RELU || ep == CUBLASLT_EPILOGUE_RELU_BIAS || aux_out;
    if (m && n && ((k && (!A || !B)) || !D || ((bias || drelu) && !desc->bias) || ((aux_out || drelu) && !desc->aux))) {
        say("cublasLtMatmul: a null pointer (A %p, B %p, D %p, bias %p, aux %p)", A, B, D, (const void *)desc->bias,
            desc->aux);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!aux_fits("cublasLtMatmul", desc, m)) return CUBLAS_STATUS_INVALID_VALUE;
    if (!algo || algo->data[0] != kAlgoMagic) {
        say("cublasLtMatmul: an algorithm the heuristic did not return");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const void *mats[4] = {A, B, C, D};
    for (int i = 0; i < 4; i++)
        if (mats[i] && (uintptr_t)mats[i] % algo->data[2 + i]) {
            say("cublasLtMatmul: matrix %c at %p is not aligned to the %llu bytes its algorithm was chosen for "
                "(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%c_BYTES): a GPU faults (misaligned address)",
                "ABCD"[i], mats[i], (unsigned long long)algo->data[2 + i], "ABCD"[i]);
            return CUBLAS_STATUS_EXECUTION_FAILED;
        }
    if ((bias || drelu) && desc->bias && (uintptr_t)desc->bias % kBiasAlign) {
        say("cublasLtMatmul: the bias at %p is not %u-byte aligned: a GPU's epilogue faults (misaligned address)",
            (const void *)desc->bias, kBiasAlign);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if ((aux_out || drelu) && desc->aux && (uintptr_t)desc->aux % kBiasAlign) {
        say("cublasLtMatmul: the bit-mask at %p is not %u-byte aligned: a GPU's epilogue faults (misaligned address)",
            desc->aux, kBiasAlign);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if (workspace_bytes < algo->data[1] || (workspace_bytes && !workspace)) {
        say("cublasLtMatmul: a workspace of %zu bytes where the algorithm asks %llu", workspace_bytes,
            (unsigned long long)algo->data[1]);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (current_device() != h->device) {
        say("cublasLtMatmul: called with device %d current, on a handle of device %d", current_device(), h->device);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    cudaStream_t s = stream;
    int dev;
    if (!resolve_stream(&s, &dev)) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (dev != h->device) {
        say("cublasLtMatmul: a stream of device %d, on a handle of device %d", dev, h->device);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    const float al = *(const float *)alpha, be = *(const float *)beta; /* host pointer mode: read at the call */
    const CBLAS_TRANSPOSE oa = desc->ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
    const CBLAS_TRANSPOSE ob = desc->tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
    const int device = h->device;
    const cublasLtMatrixLayoutSim la = *a, lb = *b, lc = *c, ld = *d; /* the call's, as cuBLASLt reads them now */
    const float *fa = (const float *)A, *fb = (const float *)B, *fc = (const float *)C, *pb = desc->bias;
    float *fd = (float *)D;
    float *gb = drelu ? (float *)desc->bias : nullptr; /* DRELU_BGRAD writes the bias pointer: the bias gradient */
    uint8_t *aux = (uint8_t *)desc->aux;
    const uint64_t aux_ld = (uint64_t)desc->aux_ld;
    const size_t aux_bytes = m && n && (aux_out || drelu) ? (size_t)(((n - 1) * aux_ld + m + 7) / 8) : 0;
    const bool reads_c = be != 0.0f; /* beta 0: C is not read (cuBLASLt's rule, as cuBLAS's) */
    const bool ok = submit(s, [=](cudaStream_t st, issue_mode how) {
        if (!check_matrix("A", fa, la, device) ||
            !check_matrix("B", fb, lb, device) ||
            (reads_c && !check_matrix("C", fc, lc, device)) ||
            !check_matrix("D", fd, ld, device) ||
            ((bias || drelu) && m && !check_device_range("cublasLtMatmul: the bias", pb, m * sizeof(float), device)) ||
            (aux_bytes && !check_device_range("cublasLtMatmul: the bit-mask", aux, aux_bytes, device)) ||
            (workspace_bytes && !check_device_range("cublasLtMatmul: the workspace", workspace, workspace_bytes,
                                                    device)))
            return false;
        if (how == ISSUE_CHECK || !m || !n) return true;
        count("cublasLtMatmul", 1, (uint64_t)(2 * m * n * k));
        std::vector<touch> t = {{fa, span_bytes(la.rows, la.cols, la.ld), false},
                                {fb, span_bytes(lb.rows, lb.cols, lb.ld), false},
                                {fd, span_bytes(m, n, ld.ld), true},
                                {workspace, workspace_bytes, true}};
        if (reads_c && fc != fd) t.push_back({fc, span_bytes(m, n, lc.ld), false});
        if (bias) t.push_back({pb, m * sizeof(float), false});
        if (drelu) t.push_back({gb, m * sizeof(float), true});
        if (aux_bytes) t.push_back({aux, aux_bytes, aux_out});
        enqueue(
            st,
            [=]() {
                if (reads_c && fc != fd)
                    for (uint64_t j = 0; j < n; j++) memcpy(fd + j * ld.ld, fc + j * lc.ld, m * sizeof(float));
                cblas_sgemm(CblasColMajor, oa, ob, (int)m, (int)n, (int)k, al, fa, (int)la.ld, fb, (int)lb.ld, be, fd,
                            (int)ld.ld);
                if (drelu) { /* D kept where the relu passed; the bias gradient D's row sums, in chunks of columns */
                    for (uint64_t j = 0; j < n; j++)
                        for (uint64_t i = 0; i < m; i++) {
                            const uint64_t bit = j * aux_ld + i;
                            if (!(aux[bit >> 3] >> (bit & 7) & 1)) fd[j * ld.ld + i] = 0.0f;
                        }
                    for (uint64_t i = 0; i < m; i++) {
                        float total = 0.0f;
                        for (uint64_t j0 = 0; j0 < n; j0 += TT_COL_CHUNK) {
                            float part = 0.0f;
                            for (uint64_t j = j0; j < n && j < j0 + TT_COL_CHUNK; j++) part = part + fd[j * ld.ld + i];
                            total = n <= TT_COL_CHUNK ? part : total + part;
                        }
                        gb[i] = total;
                    }
                    return;
                }
                if (!bias && !relu) return;
                for (uint64_t j = 0; j < n; j++) /* the epilogue: + bias[row], then relu (and its bit) */
                    for (uint64_t i = 0; i < m; i++) {
                        float v = fd[j * ld.ld + i];
                        if (bias) v = v + pb[i];
                        if (relu) v = v > 0.0f ? v : 0.0f;
                        fd[j * ld.ld + i] = v;
                        if (aux_out) {
                            const uint64_t bit = j * aux_ld + i;
                            const uint8_t one = (uint8_t)(1u << (bit & 7));
                            aux[bit >> 3] = v > 0.0f ? (uint8_t)(aux[bit >> 3] | one) : (uint8_t)(aux[bit >> 3] & ~one);
                        }
                    }
            },
            "cublasLtMatmul", std::move(t));
        return true;
    });
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
