/* sim.h — what the CPU stand-in's runtime (runtime.cpp) shares with its cuBLAS (cublas.cpp) and NCCL (nccl.cpp):
 * the configuration, the memory registry, the current device and its contexts, stream queues, errors and the
 * counters of the report. Not for: the backend, which sees only cuda_runtime.h, cublas_v2.h and nccl.h. */
#ifndef TT_SIM_SIM_H
#define TT_SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include <functional>

#include "cuda_runtime.h"

namespace tt_sim {

/* The stand-in's settings, read once from the environment at the first CUDA call (docs/cuda.md lists them). */
struct config {
    int devices;          /* TT_SIM_DEVICES [2] */
    int block_order;      /* TT_SIM_BLOCK_ORDER: 0 forward [default], 1 reverse, 2 shuffle */
    unsigned grid_cap;    /* TT_SIM_GRID_CAP: at most this many blocks along x (0: no cap) [0] */
    uint64_t seed;        /* TT_SIM_SEED: the shuffle's seed [1] */
    uint64_t busy;        /* TT_SIM_BUSY: devices whose context cannot be created (exclusive, in use elsewhere) */
    int peer;             /* TT_SIM_PEER: 1 every pair can access each other [all], 0 none */
    size_t mem_bytes;     /* TT_SIM_MEM_MB: each device's memory [16384] */
    int nccl_timeout;     /* TT_SIM_NCCL_TIMEOUT: seconds a rank waits for the others [60] */
    int pageable_error;   /* TT_SIM_PAGEABLE: 0 sync [default]: an async copy of pageable host memory is synchronous,
                           * as CUDA makes it; 1 error: it fails (code that claims its copies overlap) */
    const char *report;   /* TT_SIM_REPORT: where to write the counters at exit (a path; - for stderr) */
};
const config &cfg();

/* One line on stderr, "cuda stand-in: ...": the instrument's diagnosis of a misuse. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Records e as the calling thread's last error (cudaGetLastError) and returns it. */
cudaError_t set_error(cudaError_t e);

int current_device(void);
/* The device's context exists (created on first use); false if the device is busy (TT_SIM_BUSY). */
bool ensure_context(int device);

/* What [p, p + bytes) is: inside one allocation (`inside`), of which kind and device. */
enum mem_kind { MEM_NONE = 0, MEM_DEVICE, MEM_PINNED };
struct mem_range {
    mem_kind kind;
    int device;      /* the owner: the device of a device allocation, the device current at a pinned allocation */
    unsigned flags;  /* cudaHostAlloc's flags */
    bool inside;     /* the whole range lies in the allocation */
    size_t offset;   /* p - the allocation's base */
    size_t size;     /* the allocation's size */
};
mem_range find(const void *p, size_t bytes);
/* May code on device `from` touch device memory of `to`: the same device, or peer access enabled from -> to. */
bool may_access(int from, int to);
/* Checks that [p, p + bytes) is device memory that `device` may touch; false with a line naming `what` if not. */
bool check_device_range(const char *what, const void *p, size_t bytes, int device);

/* The stream's device; NULL means the current device's default stream, which *s becomes. false: not a live stream. */
bool resolve_stream(cudaStream_t *s, int *device);
/* Queues op on s and returns its place in the stream's queue (1, 2, ...). `what` names the op; its touches of device
 * memory (cuda_runtime.h) are checked now against the other streams' accesses to the same bytes that nothing orders
 * before it (runtime.cpp, "ordering"): a write and another access unordered is a race on a GPU, one line and abort. */
uint64_t enqueue(cudaStream_t s, std::function<void()> op, const char *what = "", std::vector<touch> touches = {});
/* Whether s is being captured (cudaStreamBeginCapture). */
bool capturing(cudaStream_t s);
/* If this thread is capturing a stream: a line naming `what` (a call CUDA forbids then: a sync, an allocation, a
 * free, a blocking copy), the capture invalidated, cudaErrorStreamCaptureUnsupported recorded, and true. */
bool forbidden_in_capture(const char *what);

/* The report's counters: calls and elements/bytes under a name. */
void count(const char *what, uint64_t calls, uint64_t amount);

} /* namespace tt_sim */

#endif
