/* cuda_runtime.h — the CUDA runtime as towertrain's CPU stand-in provides it (cmake -DTT_CUDA_SIM=ON).
 *
 * cuda/dev_cuda.cu is compiled by g++ against this header instead of NVIDIA's: the same source, with kernels as
 * plain functions and every launch (TT_LAUNCH) queued on its stream as a loop over blocks and threads. What the
 * stand-in proves and what it cannot (GPU numerics, concurrency, speed) is in docs/cuda.md, "The CPU stand-in".
 *
 * Only what the backend calls is here, with CUDA's names, types and error numbers. The instrument's rules beyond
 * CUDA's (every kernel pointer on the stream's device or an enabled peer; every copy in bounds, in the direction it
 * names, from pinned memory when asynchronous; streams and events used on their own device) make a call fail with a
 * CUDA error and one line on stderr that starts "cuda stand-in:" and says what was wrong; an op that touches bytes
 * another stream touched, one of them writing, with no stream order, event wait or sync between them, is a race:
 * one such line, then abort.
 * Not for: anything but the stand-in build; it is C++17 (lambdas, tuples, thread_local). */
#ifndef TT_SIM_CUDA_RUNTIME_H
#define TT_SIM_CUDA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#define CUDART_VERSION 13000

/* CUDA's function qualifiers: kernels and device functions are ordinary host functions here. */
#define __global__
#define __host__
#define __device__
#define __forceinline__ inline

/* What the banner and --version call this backend (dev_cuda.cu's table name), so no one mistakes it for a GPU. */
#define TT_CUDA_BACKEND_NAME "cuda (CPU stand-in)"

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35,
    cudaErrorDevicesUnavailable = 46,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorPeerAccessUnsupported = 217,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalState = 401,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorPeerAccessAlreadyEnabled = 704,
    cudaErrorPeerAccessNotEnabled = 705,
    cudaErrorTooManyPeers = 711,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorStreamCaptureWrongThread = 908,
} cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;

/* Stream capture (CUDA graphs). Every mode behaves as cudaStreamCaptureModeThreadLocal here: while a thread
 * captures, that thread may not sync, allocate, free or copy synchronously (the capture is invalidated). */
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
#define cudaEventRecordDefault 0x00
#define cudaEventRecordExternal 0x01 /* while capturing: an event record node; outside a capture: invalid */

/* A launch's shape (dim3) and a thread's coordinates (uint3: an aggregate, so the thread-local copies below need no
 * constructor call on each access). */
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct uint3 {
    unsigned x, y, z;
};
/* Defined in every translation unit (inline): constant-initialised, so no TLS wrapper call guards each access. The
 * initial-exec model reads them at a fixed offset from the thread pointer: in the shared library the bundle carries
 * (TT_CUDA_SHARED) the default model calls __tls_get_addr on every access — which ASan intercepts —, and that was
 * 45% of a cnn step on the stand-in. The library is linked, never dlopen'd, so its static TLS is there at start. */
#define TT_SIM_TLS __attribute__((tls_model("initial-exec")))
inline thread_local uint3 blockIdx TT_SIM_TLS, threadIdx TT_SIM_TLS, blockDim TT_SIM_TLS, gridDim TT_SIM_TLS;

/* Only the name: all the backend reads of it. */
struct cudaDeviceProp {
    char name[256];
};
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer);
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t e);

cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t bytes,
                                cudaStream_t s);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned flags);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);

/* ---- graphs -----------------------------------------------------------------------------------------------------
 * While a stream is captured, every call that would queue work on it (a launch, an async copy, an sgemm, an
 * external event record) is checked as when issued and kept as a node instead of queued; cudaGraphLaunch issues the
 * nodes again, in order, on the stream it is given — each one checked again, so a graph that refers to memory
 * freed or re-allocated since its capture fails there (cudaErrorIllegalAddress) with a line, instead of running on
 * it (the nodes before it have been queued). A plain
 * cudaEventRecord on a capturing stream is refused (its record would not be part of the graph). NCCL calls are
 * not captured (refused). Counted in the report: "cudaGraphLaunch" (amount: nodes), and each node as its call. */
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x);
cudaError_t cudaGraphDestroy(cudaGraph_t g);

/* ---- kernel launches --------------------------------------------------------------------------------------------
 * TT_LAUNCH(k, grid, block, stream, args...) converts the arguments to the kernel's parameter types (as a launch
 * does), checks the launch and every pointer argument now, and queues one call that runs the grid when the stream is
 * waited for: blocks in the order TT_SIM_BLOCK_ORDER says (forward, reverse, shuffle), at most TT_SIM_GRID_CAP of
 * them along x (the kernel sees the capped gridDim), threads in ascending order within a block. */
namespace tt_sim {

/* Checks a launch's stream and shape and returns the grid to run (capped), or false with the error recorded. */
bool launch_begin(const char *kernel, dim3 grid, dim3 block, cudaStream_t *s, dim3 *run_grid);
/* Checks pointer argument `arg` of `kernel` (NULL passes) against the memory the stream's device may touch. */
bool check_kernel_pointer(const char *kernel, int arg, const void *p, cudaStream_t s);
/* What a queued op touches: bytes [p, p + bytes), written or only read (the ordering check: docs/cuda.md). */
struct touch {
    const void *p;
    size_t bytes;
    bool write;
};
/* A kernel's pointer argument as a touch: the element it points at — the stand-in cannot tell how far a kernel reads
 * or writes from it — written unless the pointer is to const. */
template <typename T> void add_touch(std::vector<touch> &t, const T &v)
{
    if constexpr (std::is_pointer<T>::value) {
        typedef typename std::remove_pointer<T>::type E;
        if constexpr (std::is_void<E>::value)
            t.push_back(touch{(const void *)v, 1, !std::is_const<E>::value});
        else
            t.push_back(touch{(const void *)v, sizeof(E), !std::is_const<E>::value});
    }
}
/* Queues `grid_run` on s (counted under `kernel` with `threads` threads for the report), touching `touches`. */
void launch_enqueue(cudaStream_t s, const char *kernel, uint64_t threads, std::function<void()> grid_run,
                    std::vector<touch> touches);
/* How a call's work is issued: checked only (while its stream is captured), now (queued), or again by a graph. */
enum issue_mode { ISSUE_CHECK, ISSUE_NOW, ISSUE_GRAPH };
/* One call's issuing: its checks against the memory and stream as they are now, then (unless ISSUE_CHECK) its
 * counting and queueing on st. false: a check failed (the error recorded, a line said). */
typedef std::function<bool(cudaStream_t st, issue_mode how)> node;
/* Issues n on s now; while s is captured, checks it and keeps it in the capture (a failed check invalidates the
 * capture). Returns n's verdict. */
bool submit(cudaStream_t s, node n);
/* The order in which to run n blocks for the launch being executed (forward, reversed or a seeded shuffle). */
const unsigned *block_order(unsigned n);

template <typename T> bool check_arg(const char *kernel, int arg, const T &v, cudaStream_t s)
{
    if constexpr (std::is_pointer<T>::value)
        return check_kernel_pointer(kernel, arg, (const void *)v, s);
    else
        return true;
}

/* Every block of the grid, every thread of the block, one call of f each, with the coordinates set. */
template <typename F> void run_grid(dim3 grid, dim3 block, F &&f)
{
    const unsigned nb = grid.x * grid.y * grid.z;
    const unsigned *order = block_order(nb);
    gridDim = uint3{grid.x, grid.y, grid.z};
    blockDim = uint3{block.x, block.y, block.z};
    for (unsigned i = 0; i < nb; i++) {
        const unsigned b = order[i];
        blockIdx = uint3{b % grid.x, b / grid.x % grid.y, b / grid.x / grid.y};
        for (unsigned z = 0; z < block.z; z++)
            for (unsigned y = 0; y < block.y; y++)
                for (unsigned x = 0; x < block.x; x++) {
                    threadIdx = uint3{x, y, z};
                    f();
                }
    }
}

template <typename... P, typename... A>
void launch(const char *kernel, void (*k)(P...), dim3 grid, dim3 block, cudaStream_t s, A &&...a)
{
    dim3 g;
    if (!launch_begin(kernel, grid, block, &s, &g)) return;
    std::tuple<typename std::decay<P>::type...> args(std::forward<A>(a)...);
    const uint64_t threads = (uint64_t)g.x * g.y * g.z * block.x * block.y * block.z;
    std::function<void()> run = [k, args, g, block]() { run_grid(g, block, [&]() { std::apply(k, args); }); };
    submit(s, [kernel, args, threads, run](cudaStream_t st, issue_mode how) {
        bool ok = true;
        int i = 0;
        std::apply([&](const auto &...v) { ((ok = check_arg(kernel, i++, v, st) && ok), ...); }, args);
        if (!ok || how == ISSUE_CHECK) return ok;
        std::vector<touch> t;
        std::apply([&](const auto &...v) { (add_touch(t, v), ...); }, args);
        launch_enqueue(st, kernel, threads, run, std::move(t));
        return true;
    });
}

} /* namespace tt_sim */

#define TT_LAUNCH(kernel, grid, block, stream, ...)                                                                  \
    tt_sim::launch(#kernel, kernel, dim3(grid), dim3(block), (stream), __VA_ARGS__)

#endif
