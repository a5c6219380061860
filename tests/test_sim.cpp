/* test_sim.cpp — the CPU stand-in's own promises (cuda/sim/), each shown by a misuse it must catch or a behaviour
 * it must model: deferred execution (a missing wait reads stale data; a host write to a copy in flight is a race),
 * two streams touching one buffer with nothing ordering them (a race) and the orders that make it fine, kernel
 * pointers on the wrong device or on host memory, launches on another device's stream, copies out of bounds or in
 * the wrong direction, pageable memory in an asynchronous copy, events read before they complete, block order and
 * the grid cap, a busy device, cuBLAS's column-major sgemm and its argument checks, cuBLASLt's matmul with the
 * RELU_BIAS epilogue (one bias entry per row of D), its checks and a heuristic told to offer nothing, NCCL's
 * rendezvous and a rank that never arrives; graphs: capture, replay, what a capture forbids, a graph outliving its
 * memory.
 * Built only with -DTT_CUDA_SIM=ON (CTest test_sim); each test runs in its own process (Check's fork mode), so the
 * stand-in's settings (read from the environment at the first CUDA call) can differ from test to test. */
#include "tt_check.h"
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <chrono>
#include <thread>
#include <vector>

__global__ void k_set(float *x, size_t n, float v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] = v;
}

__global__ void k_copy(float *y, const float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) y[i] = x[i];
}

/* Records the order in which blocks run (thread 0 of each block; the stand-in runs them one after another). */
__global__ void k_order(unsigned *seen, unsigned *next)
{
    if (threadIdx.x == 0) seen[(*next)++] = blockIdx.x;
}

static float *dev_floats(size_t n)
{
    void *p = nullptr;
    ck_assert_int_eq(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
    return (float *)p;
}

static float *pinned_floats(size_t n)
{
    void *p = nullptr;
    ck_assert_int_eq(cudaHostAlloc(&p, n * sizeof(float), cudaHostAllocPortable), cudaSuccess);
    return (float *)p;
}

static cudaStream_t new_stream(void)
{
    cudaStream_t s = nullptr;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    return s;
}

/* Work runs when waited for: a read of a copy's destination before the wait sees the old contents. */
START_TEST(test_deferred)
{
    cudaStream_t s = new_stream();
    float *d = dev_floats(4), *h = pinned_floats(4);
    h[0] = 1.0f;
    TT_LAUNCH(k_set, 1, 32, s, d, (size_t)4, 5.0f);
    ck_assert_int_eq(cudaMemcpyAsync(h, d, 4 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert(h[0] == 1.0f); /* not waited for: stale */
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert(h[0] == 5.0f && h[3] == 5.0f);
    /* a download that runs after another one into the same bytes: stream order, not a host write in flight */
    TT_LAUNCH(k_set, 1, 32, s, d, (size_t)4, 6.0f);
    ck_assert_int_eq(cudaMemcpyAsync(h, d, sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(d + 1, h, sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
    TT_LAUNCH(k_set, 1, 32, s, d, (size_t)1, 9.0f);
    ck_assert_int_eq(cudaMemcpyAsync(h, d, sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(h + 1, d + 1, sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert(h[0] == 9.0f && h[1] == 6.0f);
    cudaFree(d);
    cudaFreeHost(h);
    cudaStreamDestroy(s);
}
END_TEST

/* The host writes an upload's source after issuing it, before the wait: on a GPU the copy may already have read it
 * (a race the late-running stand-in alone would hide). The copy, when it runs, ends the process with one line. */
START_TEST(test_h2d_source_written_in_flight)
{
    cudaStream_t s = new_stream();
    float *d = dev_floats(4), *h = pinned_floats(4);
    h[0] = 7.0f;
    ck_assert_int_eq(cudaMemcpyAsync(d, h, sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
    h[0] = 8.0f;
    cudaStreamSynchronize(s); /* aborts */
}
END_TEST

/* The host writes a download's destination after issuing it, before the wait: on a GPU either write may land last. */
START_TEST(test_d2h_destination_written_in_flight)
{
    cudaStream_t s = new_stream();
    float *d = dev_floats(4), *h = pinned_floats(4);
    for (int i = 0; i < 4; i++) h[i] = 1.0f;
    TT_LAUNCH(k_set, 1, 32, s, d, (size_t)4, 5.0f);
    ck_assert_int_eq(cudaMemcpyAsync(h, d, 4 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    memset(h, 0, 4 * sizeof(float));
    cudaStreamSynchronize(s); /* aborts */
}
END_TEST

/* A kernel pointer must be memory of the stream's device, or of a peer whose access was enabled. */
START_TEST(test_kernel_pointers)
{
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    float *d1 = dev_floats(8);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    cudaStream_t s = new_stream();
    float *d0 = dev_floats(8), *h = pinned_floats(8), pageable[8];
    TT_LAUNCH(k_set, 1, 32, s, d1, (size_t)8, 1.0f);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorIllegalAddress);
    TT_LAUNCH(k_set, 1, 32, s, h, (size_t)8, 1.0f);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorIllegalAddress);
    TT_LAUNCH(k_set, 1, 32, s, pageable, (size_t)8, 1.0f);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorIllegalAddress);
    TT_LAUNCH(k_set, 1, 32, s, d0 + 4, (size_t)4, 1.0f); /* inside an allocation: fine */
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    ck_assert_int_eq(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
    ck_assert_int_eq(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorPeerAccessAlreadyEnabled); /* recorded, as CUDA does */
    TT_LAUNCH(k_set, 1, 32, s, d1, (size_t)8, 1.0f); /* a peer's, with access enabled */
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    /* a stream of device 0 while device 1 is current */
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    TT_LAUNCH(k_set, 1, 32, s, d1, (size_t)8, 1.0f);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    TT_LAUNCH(k_set, 0, 32, s, d0, (size_t)8, 1.0f); /* an empty grid */
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    cudaStreamDestroy(s);
}
END_TEST

/* Copies: inside their allocations, in the direction they name, between devices only as peer copies. */
START_TEST(test_copies)
{
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    float *d1 = dev_floats(8);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    cudaStream_t s = new_stream();
    float *d = dev_floats(8), *h = pinned_floats(8);
    const size_t b = 8 * sizeof(float);
    ck_assert_int_eq(cudaMemcpyAsync(d, h, b + 4, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMemcpyAsync(d + 1, h, b, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMemcpyAsync(h, d, b, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue); /* backwards */
    ck_assert_int_eq(cudaMemcpyAsync(d, d1, b, cudaMemcpyDeviceToDevice, s), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMemcpyPeerAsync(d, 0, d1, 0, b, s), cudaErrorInvalidValue); /* d1 is device 1's */
    for (int i = 0; i < 8; i++) h[i] = (float)i;
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    cudaStream_t s1 = new_stream();
    ck_assert_int_eq(cudaMemcpyAsync(d1, h, b, cudaMemcpyHostToDevice, s1), cudaSuccess); /* portable: any device */
    ck_assert_int_eq(cudaStreamSynchronize(s1), cudaSuccess);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyPeerAsync(d, 0, d1, 1, b, s), cudaSuccess);
    memset(h, 0, b);
    ck_assert_int_eq(cudaMemcpyAsync(h, d, b, cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert(h[7] == 7.0f);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s);
}
END_TEST

/* Pageable host memory: CUDA's synchronous copy by default (the stream's earlier work first), an error under
 * TT_SIM_PAGEABLE=error. */
START_TEST(test_pageable)
{
    cudaStream_t s = new_stream();
    float *d = dev_floats(4), h[4] = {0, 0, 0, 0};
    TT_LAUNCH(k_set, 1, 32, s, d, (size_t)4, 3.0f);
    ck_assert_int_eq(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert(h[2] == 3.0f); /* complete when the call returns */
    cudaStreamDestroy(s);
}
END_TEST

START_TEST(test_pageable_error)
{
    setenv("TT_SIM_PAGEABLE", "error", 1);
    cudaStream_t s = new_stream();
    float *d = dev_floats(4), h[4] = {0, 0, 0, 0};
    ck_assert_int_eq(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
    cudaStreamDestroy(s);
}
END_TEST

/* An event's time can be read once its stream has reached it: cudaErrorNotReady before. */
START_TEST(test_events)
{
    cudaStream_t s = new_stream();
    cudaEvent_t a, b;
    ck_assert_int_eq(cudaEventCreate(&a), cudaSuccess);
    ck_assert_int_eq(cudaEventCreate(&b), cudaSuccess);
    float *d = dev_floats(1024), ms = -1;
    ck_assert_int_eq(cudaEventRecord(a, s), cudaSuccess);
    TT_LAUNCH(k_set, 4, 256, s, d, (size_t)1024, 1.0f);
    ck_assert_int_eq(cudaEventRecord(b, s), cudaSuccess);
    ck_assert_int_eq(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert_int_eq(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
    ck_assert(ms >= 0.0f);
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    cudaStream_t s1 = new_stream();
    ck_assert_int_eq(cudaEventRecord(a, s1), cudaErrorInvalidResourceHandle); /* an event of device 0 */
    cudaEventDestroy(a);
    cudaEventDestroy(b);
}
END_TEST

/* cudaStreamWaitEvent: s2's copy waits for s1's kernel up to the record (syncing s2 alone runs s1 that far, and no
 * further: what s1 queued after the record — a kernel on another buffer, which s2's copy does not wait for — is
 * still queued); a record after the wait call is not waited for; an event never recorded is no wait;
 * cudaEventQuery says "not yet" until the record has run and never runs the stream. */
START_TEST(test_stream_wait)
{
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    cudaEvent_t e, never, late;
    ck_assert_int_eq(cudaEventCreate(&e), cudaSuccess);
    ck_assert_int_eq(cudaEventCreate(&never), cudaSuccess);
    ck_assert_int_eq(cudaEventCreate(&late), cudaSuccess);
    float *d = dev_floats(1024), *d2 = dev_floats(1024), *h = pinned_floats(1024);
    TT_LAUNCH(k_set, 4, 256, s1, d, (size_t)1024, 3.0f);
    ck_assert_int_eq(cudaEventRecord(e, s1), cudaSuccess);
    TT_LAUNCH(k_set, 4, 256, s1, d2, (size_t)1024, 5.0f); /* after the record: s2 must not wait for it */
    ck_assert_int_eq(cudaEventQuery(e), cudaErrorNotReady);
    ck_assert_int_eq(cudaStreamWaitEvent(s2, never, 0), cudaSuccess);
    ck_assert_int_eq(cudaStreamWaitEvent(s2, e, 0), cudaSuccess);
    ck_assert_int_eq(cudaEventRecord(late, s1), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(h, d, 1024 * sizeof(float), cudaMemcpyDeviceToHost, s2), cudaSuccess);
    ck_assert_int_eq(cudaStreamWaitEvent(s2, e, 1), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaStreamSynchronize(s2), cudaSuccess);
    for (int i = 0; i < 1024; i++) ck_assert(h[i] == 3.0f);
    ck_assert_int_eq(cudaEventQuery(e), cudaSuccess);
    ck_assert_int_eq(cudaEventQuery(late), cudaErrorNotReady); /* s1 ran up to e only */
    ck_assert_int_eq(cudaStreamSynchronize(s1), cudaSuccess);
    ck_assert_int_eq(cudaEventQuery(late), cudaSuccess);
    ck_assert_int_eq(cudaEventQuery(never), cudaSuccess);
    cudaEventDestroy(e);
    cudaEventDestroy(never);
    cudaEventDestroy(late);
}
END_TEST

/* Two streams that wait on each other's earlier records (s1: set, record e1, wait e2; s2: wait e1, add, record e2),
 * synced from two threads at once: each runs only up to the other's record, so neither blocks the other (a thread
 * holding one stream's queue while it waits for the other's would deadlock; a GPU does not). */
START_TEST(test_stream_wait_two_threads)
{
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    cudaEvent_t e1, e2;
    ck_assert_int_eq(cudaEventCreate(&e1), cudaSuccess);
    ck_assert_int_eq(cudaEventCreate(&e2), cudaSuccess);
    float *d = dev_floats(1 << 22), *h = pinned_floats(1 << 22);
    TT_LAUNCH(k_set, 256, 256, s1, d, (size_t)1 << 22, 3.0f);
    ck_assert_int_eq(cudaEventRecord(e1, s1), cudaSuccess);
    ck_assert_int_eq(cudaStreamWaitEvent(s2, e1, 0), cudaSuccess);
    TT_LAUNCH(k_set, 256, 256, s2, d, (size_t)1 << 21, 4.0f); /* the first half, after s1's set */
    ck_assert_int_eq(cudaEventRecord(e2, s2), cudaSuccess);
    ck_assert_int_eq(cudaStreamWaitEvent(s1, e2, 0), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(h, d, sizeof(float) << 22, cudaMemcpyDeviceToHost, s1), cudaSuccess);
    std::thread x([s1]() { ck_assert_int_eq(cudaStreamSynchronize(s1), cudaSuccess); });
    std::this_thread::sleep_for(std::chrono::milliseconds(2)); /* x is in s1's set when y starts s2 */
    std::thread y([s2]() { ck_assert_int_eq(cudaStreamSynchronize(s2), cudaSuccess); });
    x.join();
    y.join();
    for (int i = 0; i < 1 << 22; i++) ck_assert(h[i] == (i < 1 << 21 ? 4.0f : 3.0f));
    cudaEventDestroy(e1);
    cudaEventDestroy(e2);
}
END_TEST

/* The ordering check: a pull into a fresh buffer on a side stream, with no wait, beside the fill of that buffer on the
 * stream that allocated it — both write it, nothing orders them, and an H200 ran the pull first (test_backend_ops'
 * test_side_copies before its fix; the stand-in, running the side stream late, had run the fill first). Issuing
 * the second ends the process with one line naming both streams, the buffer and both ops. */
START_TEST(test_race_unordered)
{
    cudaStream_t tower = new_stream(), side = new_stream();
    float *d = dev_floats(1024), *h = pinned_floats(1024);
    TT_LAUNCH(k_set, 4, 256, tower, d, (size_t)1024, -1.0f);
    cudaMemcpyAsync(d, h, 1024 * sizeof(float), cudaMemcpyHostToDevice, side); /* aborts */
}
END_TEST

/* A wait orders what came before the record, no more: s2 waits for a record made before s1's kernel read d, then
 * writes d (on a GPU the write may land before the read). */
START_TEST(test_race_after_record)
{
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    cudaEvent_t e;
    ck_assert_int_eq(cudaEventCreate(&e), cudaSuccess);
    float *d = dev_floats(1024), *y = dev_floats(1024), *h = pinned_floats(1024);
    TT_LAUNCH(k_set, 4, 256, s1, d, (size_t)1024, -1.0f);
    ck_assert_int_eq(cudaEventRecord(e, s1), cudaSuccess);
    TT_LAUNCH(k_copy, 4, 256, s1, y, (const float *)d, (size_t)1024);
    ck_assert_int_eq(cudaStreamWaitEvent(s2, e, 0), cudaSuccess);
    cudaMemcpyAsync(d, h, 1024 * sizeof(float), cudaMemcpyHostToDevice, s2); /* aborts */
}
END_TEST

/* ... and quiet where CUDA orders the two: an event recorded after the first and waited for by the second's stream
 * (both ways), a stream sync (on another thread, too: the host is one observer), a device or an event sync; two
 * reads, and writes of disjoint bytes of one allocation, need no order. */
START_TEST(test_race_ordered)
{
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    cudaEvent_t e;
    ck_assert_int_eq(cudaEventCreate(&e), cudaSuccess);
    float *d = dev_floats(1024), *y = dev_floats(1024), *z = dev_floats(1024);
    float *h = pinned_floats(1024), *h2 = pinned_floats(1024);
    for (int i = 0; i < 1024; i++) h[i] = 2.0f;
    TT_LAUNCH(k_set, 4, 256, s1, d, (size_t)1024, -1.0f);
    ck_assert_int_eq(cudaEventRecord(e, s1), cudaSuccess);
    ck_assert_int_eq(cudaStreamWaitEvent(s2, e, 0), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(d, h, 1024 * sizeof(float), cudaMemcpyHostToDevice, s2), cudaSuccess);
    ck_assert_int_eq(cudaEventRecord(e, s2), cudaSuccess);
    ck_assert_int_eq(cudaStreamWaitEvent(s1, e, 0), cudaSuccess);
    TT_LAUNCH(k_copy, 4, 256, s1, y, (const float *)d, (size_t)1024);                              /* reads d */
    ck_assert_int_eq(cudaMemcpyAsync(h2, d, 1024 * sizeof(float), cudaMemcpyDeviceToHost, s2), cudaSuccess); /* too */
    TT_LAUNCH(k_set, 2, 256, s1, z + 512, (size_t)512, 1.0f);
    ck_assert_int_eq(cudaMemcpyAsync(z, h, 512 * sizeof(float), cudaMemcpyHostToDevice, s2), cudaSuccess);
    std::thread([s1]() { ck_assert_int_eq(cudaStreamSynchronize(s1), cudaSuccess); }).join();
    ck_assert_int_eq(cudaMemcpyAsync(y, h, 1024 * sizeof(float), cudaMemcpyHostToDevice, s2), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert(h2[0] == 2.0f && h2[1023] == 2.0f);
    TT_LAUNCH(k_set, 4, 256, s1, d, (size_t)1024, 3.0f);
    ck_assert_int_eq(cudaEventRecord(e, s1), cudaSuccess);
    ck_assert_int_eq(cudaEventSynchronize(e), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(d, h, 1024 * sizeof(float), cudaMemcpyHostToDevice, s2), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s2), cudaSuccess);
    TT_LAUNCH(k_copy, 4, 256, s1, y, (const float *)d, (size_t)1024);
    ck_assert_int_eq(cudaMemcpyAsync(h2, y, 1024 * sizeof(float), cudaMemcpyDeviceToHost, s1), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s1), cudaSuccess);
    ck_assert(h2[0] == 2.0f && h2[1023] == 2.0f);
    cudaEventDestroy(e);
}
END_TEST

/* The order blocks run in, and the grid the kernel sees, for TT_SIM_BLOCK_ORDER / TT_SIM_GRID_CAP. */
static std::vector<unsigned> block_run(const char *order, const char *cap, unsigned blocks)
{
    setenv("TT_SIM_BLOCK_ORDER", order, 1);
    if (cap)
        setenv("TT_SIM_GRID_CAP", cap, 1);
    else
        unsetenv("TT_SIM_GRID_CAP"); /* the case's own setting, whatever the caller's environment says */
    cudaStream_t s = new_stream();
    unsigned *h = nullptr, *d = nullptr;
    const size_t n = blocks + 1;
    ck_assert_int_eq(cudaHostAlloc((void **)&h, n * sizeof(unsigned), 0), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&d, n * sizeof(unsigned)), cudaSuccess);
    memset(h, 0, n * sizeof(unsigned));
    ck_assert_int_eq(cudaMemcpyAsync(d, h, n * sizeof(unsigned), cudaMemcpyHostToDevice, s), cudaSuccess);
    TT_LAUNCH(k_order, blocks, 64, s, d, d + blocks);
    ck_assert_int_eq(cudaMemcpyAsync(h, d, n * sizeof(unsigned), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    return std::vector<unsigned>(h, h + h[blocks]);
}

START_TEST(test_block_reverse)
{
    std::vector<unsigned> v = block_run("reverse", nullptr, 5);
    ck_assert_uint_eq(v.size(), 5);
    for (unsigned i = 0; i < 5; i++) ck_assert_uint_eq(v[i], 4 - i);
}
END_TEST

START_TEST(test_block_shuffle)
{
    std::vector<unsigned> v = block_run("shuffle", nullptr, 64), seen(64, 0);
    ck_assert_uint_eq(v.size(), 64);
    unsigned in_place = 0;
    for (unsigned i = 0; i < 64; i++) {
        seen[v[i]]++;
        in_place += v[i] == i;
    }
    for (unsigned i = 0; i < 64; i++) ck_assert_uint_eq(seen[i], 1); /* a permutation */
    ck_assert_uint_lt(in_place, 16);                                   /* and not the forward order */
}
END_TEST

/* A capped grid runs fewer blocks, and a grid-stride loop still covers every element. */
START_TEST(test_grid_cap)
{
    std::vector<unsigned> v = block_run("forward", "3", 40);
    ck_assert_uint_eq(v.size(), 3);
    cudaStream_t s = new_stream();
    float *d = dev_floats(5000), *h = pinned_floats(5000);
    TT_LAUNCH(k_set, 20, 256, s, d, (size_t)5000, 2.0f);
    ck_assert_int_eq(cudaMemcpyAsync(h, d, 5000 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    for (int i = 0; i < 5000; i++) ck_assert(h[i] == 2.0f);
}
END_TEST

/* An exclusive device in use elsewhere: its context cannot be created; the others work. */
START_TEST(test_busy)
{
    setenv("TT_SIM_DEVICES", "3", 1);
    setenv("TT_SIM_BUSY", "0", 1);
    int d = -1;
    ck_assert_int_eq(cudaGetDevice(&d), cudaSuccess); /* asking creates nothing */
    ck_assert_int_eq(d, 0);
    void *p = nullptr;
    ck_assert_int_eq(cudaMalloc(&p, 16), cudaErrorDevicesUnavailable);
    ck_assert_int_eq(cudaSetDevice(0), cudaErrorDevicesUnavailable);
    ck_assert_int_eq(cudaSetDevice(2), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&p, 16), cudaSuccess);
    ck_assert_int_eq(cudaFree(p), cudaSuccess);
}
END_TEST

/* TT_SIM_MEM_MB is each device's budget, also for allocations made at once from several threads: at most two of
 * eight 512 KiB allocations fit in 1 MiB, and cudaMemGetInfo's free figure never wraps. */
START_TEST(test_memory_budget)
{
    setenv("TT_SIM_MEM_MB", "1", 1);
    int ok[8] = {0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; t++)
        ts.emplace_back([&ok, t]() {
            void *p = nullptr;
            ok[t] = cudaSetDevice(0) == cudaSuccess && cudaMalloc(&p, 512 << 10) == cudaSuccess;
        });
    for (std::thread &t : ts) t.join();
    int n = 0;
    for (int t = 0; t < 8; t++) n += ok[t];
    ck_assert_int_eq(n, 2);
    size_t free_bytes = 0, total = 0;
    ck_assert_int_eq(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
    ck_assert_uint_eq(total, 1 << 20);
    ck_assert_uint_eq(free_bytes, 0);
}
END_TEST

/* cuBLAS: column-major C = A B, its argument checks, and the handle's device. */
START_TEST(test_sgemm)
{
    cudaStream_t s = new_stream();
    cublasHandle_t hb;
    ck_assert_int_eq(cublasCreate(&hb), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cublasSetStream(hb, s), CUBLAS_STATUS_SUCCESS);
    float *d = dev_floats(4 + 6 + 6), *h = pinned_floats(16);
    const float A[4] = {1, 2, 3, 4}, B[6] = {1, 0, 0, 1, 1, 1}; /* column-major: A = [1 3; 2 4], B = [1 0 1; 0 1 1] */
    memcpy(h, A, sizeof A);
    memcpy(h + 4, B, sizeof B);
    ck_assert_int_eq(cudaMemcpyAsync(d, h, 10 * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
    const float one = 1, zero = 0;
    ck_assert_int_eq(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, 2, 3, 2, &one, d, 2, d + 4, 2, &zero, d + 10, 2),
                     CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cudaMemcpyAsync(h + 10, d + 10, 6 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    const float want[6] = {1, 2, 3, 4, 4, 6}; /* A B = [1 3 4; 2 4 6], column-major */
    for (int i = 0; i < 6; i++) ck_assert(h[10 + i] == want[i]);
    ck_assert_int_eq(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, 2, 3, 2, &one, d, 1, d + 4, 2, &zero, d + 10, 2),
                     CUBLAS_STATUS_INVALID_VALUE); /* lda < m */
    ck_assert_int_eq(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, 2, 4, 2, &one, d, 2, d + 4, 2, &zero, d + 10, 2),
                     CUBLAS_STATUS_EXECUTION_FAILED); /* C (2 x 4) runs past the allocation */
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    ck_assert_int_eq(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, 2, 3, 2, &one, d, 2, d + 4, 2, &zero, d + 10, 2),
                     CUBLAS_STATUS_EXECUTION_FAILED); /* the handle is device 0's */
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    cublasDestroy(hb);
}
END_TEST

/* cuBLASLt: column-major D = relu(A B + bias) with the bias one entry per row of D, broadcast along its columns;
 * layouts that do not fit, ld below rows, a missing bias, a workspace smaller than the algorithm asks, D outside
 * device memory; TT_SIM_LT_NO_ALGO=1: no algorithm offered. */
START_TEST(test_lt_matmul)
{
    cudaStream_t s = new_stream();
    cublasLtHandle_t lt;
    ck_assert_int_eq(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
    float *d = dev_floats(4 + 6 + 6 + 2), *h = pinned_floats(32);
    void *ws = nullptr;
    ck_assert_int_eq(cudaMalloc(&ws, 4 << 20), cudaSuccess);
    const float A[4] = {1, 2, 3, 4}, B[6] = {1, 0, 0, 1, 1, 1}, bias[2] = {10, -5}; /* A = [1 3; 2 4] */
    memcpy(h, A, sizeof A);
    memcpy(h + 4, B, sizeof B);
    memcpy(h + 16, bias, sizeof bias);
    ck_assert_int_eq(cudaMemcpyAsync(d, h, 18 * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
    float *dA = d, *dB = d + 4, *dD = d + 10, *db = d + 16;
    cublasLtMatmulDesc_t desc;
    ck_assert_int_eq(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F),
                     CUBLAS_STATUS_NOT_SUPPORTED); /* FP32 only */
    ck_assert_int_eq(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    const cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_RELU_BIAS;
    ck_assert_int_eq(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep),
                     CUBLAS_STATUS_SUCCESS);
    cublasLtMatrixLayout_t la, lb, ldd, bad;
    ck_assert_int_eq(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 2, 3, 2), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cublasLtMatrixLayoutCreate(&ldd, CUDA_R_32F, 2, 3, 2), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cublasLtMatrixLayoutCreate(&bad, CUDA_R_32F, 2, 3, 1), CUBLAS_STATUS_INVALID_VALUE); /* ld<rows */
    ck_assert_int_eq(cublasLtMatrixLayoutCreate(&bad, CUDA_R_32F, 3, 3, 3), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulPreference_t pref;
    ck_assert_int_eq(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    const uint64_t max_ws = 4 << 20;
    ck_assert_int_eq(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                                          sizeof max_ws),
                     CUBLAS_STATUS_SUCCESS);
    /* B, D and the bias are 16, 40 and 64 bytes into one allocation: the algorithm is asked for 8-byte alignment
     * (cuBLASLt's default, 256, is what a plain preference promises: tested below) */
    const uint32_t align8 = 8, align3 = 3;
    for (cublasLtMatmulPreferenceAttributes_t at :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        ck_assert_int_eq(cublasLtMatmulPreferenceSetAttribute(pref, at, &align8, sizeof align8), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align3,
                                                          sizeof align3),
                     CUBLAS_STATUS_INVALID_VALUE); /* not a power of two */
    cublasLtMatmulHeuristicResult_t r;
    int n = -1;
    ck_assert_int_eq(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, bad, bad, pref, 1, &r, &n),
                     CUBLAS_STATUS_INVALID_VALUE); /* C and D 3 x 3 where A B is 2 x 3 */
    setenv("TT_SIM_LT_NO_ALGO", "1", 1);
    ck_assert_int_eq(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ldd, ldd, pref, 1, &r, &n),
                     CUBLAS_STATUS_NOT_SUPPORTED);
    ck_assert_int_eq(n, 0);
    unsetenv("TT_SIM_LT_NO_ALGO");
    ck_assert_int_eq(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ldd, ldd, pref, 1, &r, &n),
                     CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(n, 1);
    ck_assert_uint_gt(r.workspaceSize, 0);
    const float one = 1, zero = 0;
    ck_assert_int_eq(cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, dD, ldd, dD, ldd, &r.algo, ws, max_ws, s),
                     CUBLAS_STATUS_INVALID_VALUE); /* RELU_BIAS with no bias pointer */
    ck_assert_int_eq(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db, sizeof db),
                     CUBLAS_STATUS_SUCCESS);
    { /* an algorithm chosen without alignment preferences assumes 256 bytes: B 16 bytes in is what a GPU faults on */
        cublasLtMatmulPreference_t p256;
        cublasLtMatmulHeuristicResult_t r256;
        int n256 = 0;
        ck_assert_int_eq(cublasLtMatmulPreferenceCreate(&p256), CUBLAS_STATUS_SUCCESS);
        ck_assert_int_eq(cublasLtMatmulPreferenceSetAttribute(p256, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                                              sizeof max_ws),
                         CUBLAS_STATUS_SUCCESS);
        ck_assert_int_eq(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ldd, ldd, p256, 1, &r256, &n256),
                         CUBLAS_STATUS_SUCCESS);
        ck_assert_int_eq(cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, dD, ldd, dD, ldd, &r256.algo, ws,
                                        max_ws, s),
                         CUBLAS_STATUS_EXECUTION_FAILED);
        cublasLtMatmulPreferenceDestroy(p256);
        /* a bias 12 bytes past a 16-byte boundary: the epilogue's vector loads fault on a GPU */
        const float *db4 = d + 15; /* 60 bytes in, inside the block */
        ck_assert_int_eq(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db4, sizeof db4),
                         CUBLAS_STATUS_SUCCESS);
        ck_assert_int_eq(cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, dD, ldd, dD, ldd, &r.algo, ws, max_ws,
                                        s),
                         CUBLAS_STATUS_EXECUTION_FAILED);
        ck_assert_int_eq(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db, sizeof db),
                         CUBLAS_STATUS_SUCCESS);
    }
    ck_assert_int_eq(cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, dD, ldd, dD, ldd, &r.algo, ws,
                                    r.workspaceSize - 1, s),
                     CUBLAS_STATUS_INVALID_VALUE); /* less workspace than the algorithm asks */
    ck_assert_int_eq(cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, h, ldd, h, ldd, &r.algo, ws, max_ws, s),
                     CUBLAS_STATUS_EXECUTION_FAILED); /* D in pinned host memory */
    ck_assert_int_eq(cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, dD, ldd, dD, ldd, &r.algo, ws, max_ws, s),
                     CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cudaMemcpyAsync(h + 20, dD, 6 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    const float want[6] = {11, 0, 13, 0, 14, 1}; /* relu([1 3 4; 2 4 6] + [10; -5]), column-major */
    for (int i = 0; i < 6; i++) ck_assert_msg(h[20 + i] == want[i], "D[%d] = %g, want %g", i, h[20 + i], want[i]);
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    ck_assert_int_eq(cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, dD, ldd, dD, ldd, &r.algo, ws, max_ws, s),
                     CUBLAS_STATUS_EXECUTION_FAILED); /* the handle is device 0's */
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ldd);
    cublasLtMatrixLayoutDestroy(bad);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(lt);
}
END_TEST

/* RELU_AUX_BIAS then DRELU_BGRAD by hand, as the documentation defines them: the forward writes D = relu(A B + bias)
 * and a bit per element of D (set where it passed), the backward keeps its D where the bit is set and writes D's row
 * sums to the bias pointer. Refused as cuBLASLt refuses: a mask leading dimension that is not a multiple of 128 or
 * is under D's rows (at the query and at the call), no mask pointer; a mask under 16 bytes of alignment as a GPU
 * faults; a mask that runs past its allocation as the instrument catches it. */
START_TEST(test_lt_relu_mask)
{
    cudaStream_t s = new_stream();
    cublasLtHandle_t lt;
    ck_assert_int_eq(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
    float *d = dev_floats(64), *h = pinned_floats(128);
    uint8_t *mask = nullptr;
    ck_assert_int_eq(cudaMalloc((void **)&mask, 256), cudaSuccess);
    void *ws = nullptr;
    ck_assert_int_eq(cudaMalloc(&ws, 4 << 20), cudaSuccess);
    /* A = [1 3; 2 4] (2 x 2), B = [1 0 1; 0 1 1] (2 x 3), bias [-2; -5]: A B + bias = [-1 1 2; -3 -1 1] */
    const float A[4] = {1, 2, 3, 4}, B[6] = {1, 0, 0, 1, 1, 1}, bias[2] = {-2, -5};
    memcpy(h, A, sizeof A);
    memcpy(h + 4, B, sizeof B);
    memcpy(h + 16, bias, sizeof bias);
    ck_assert_int_eq(cudaMemcpyAsync(d, h, 18 * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
    float *dA = d, *dB = d + 4, *dD = d + 32, *db = d + 16, *dg = d + 20;
    cublasLtMatrixLayout_t la, lb, ldd;
    ck_assert_int_eq(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 2, 3, 2), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cublasLtMatrixLayoutCreate(&ldd, CUDA_R_32F, 2, 3, 2), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulPreference_t pref;
    ck_assert_int_eq(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    const uint32_t align16 = 16;
    for (cublasLtMatmulPreferenceAttributes_t at :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        ck_assert_int_eq(cublasLtMatmulPreferenceSetAttribute(pref, at, &align16, sizeof align16),
                         CUBLAS_STATUS_SUCCESS);
    const float one = 1, zero = 0;
    cublasLtMatmulDesc_t fwd, bwd;
    cublasLtMatmulHeuristicResult_t rf, rb;
    int n = 0;
    for (int k = 0; k < 2; k++) {
        cublasLtMatmulDesc_t *desc = k ? &bwd : &fwd;
        ck_assert_int_eq(cublasLtMatmulDescCreate(desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
        const cublasLtEpilogue_t ep = k ? CUBLASLT_EPILOGUE_DRELU_BGRAD : CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
        ck_assert_int_eq(cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep),
                         CUBLAS_STATUS_SUCCESS);
        cublasLtMatmulHeuristicResult_t *r = k ? &rb : &rf;
        ck_assert_int_eq(cublasLtMatmulAlgoGetHeuristic(lt, *desc, la, lb, ldd, ldd, pref, 1, r, &n),
                         CUBLAS_STATUS_INVALID_VALUE); /* no mask leading dimension set */
        for (int64_t bad_ld : {(int64_t)64, (int64_t)130}) {
            ck_assert_int_eq(cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &bad_ld,
                                                            sizeof bad_ld),
                             CUBLAS_STATUS_SUCCESS);
            ck_assert_int_eq(cublasLtMatmulAlgoGetHeuristic(lt, *desc, la, lb, ldd, ldd, pref, 1, r, &n),
                             CUBLAS_STATUS_INVALID_VALUE);
        }
        const int64_t ld = 128;
        ck_assert_int_eq(cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld),
                         CUBLAS_STATUS_SUCCESS);
        ck_assert_int_eq(cublasLtMatmulAlgoGetHeuristic(lt, *desc, la, lb, ldd, ldd, pref, 1, r, &n),
                         CUBLAS_STATUS_SUCCESS);
        float *bp = k ? dg : db;
        ck_assert_int_eq(cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp),
                         CUBLAS_STATUS_SUCCESS);
        ck_assert_int_eq(cublasLtMatmul(lt, *desc, &one, dA, la, dB, lb, &zero, dD, ldd, dD, ldd, &r->algo, ws,
                                        4 << 20, s),
                         CUBLAS_STATUS_INVALID_VALUE); /* no mask pointer */
        /* 8 bytes in: under the 16 a GPU's epilogue loads need; 240 in: 3 columns of 128 bits (33 bytes) run past
         * the 256 */
        for (size_t bad_at : {(size_t)8, (size_t)240}) {
            uint8_t *off = mask + bad_at;
            ck_assert_int_eq(cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &off,
                                                            sizeof off),
                             CUBLAS_STATUS_SUCCESS);
            ck_assert_int_eq(cublasLtMatmul(lt, *desc, &one, dA, la, dB, lb, &zero, dD, ldd, dD, ldd, &r->algo, ws,
                                            4 << 20, s),
                             CUBLAS_STATUS_EXECUTION_FAILED);
        }
        ck_assert_int_eq(cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &mask,
                                                        sizeof mask),
                         CUBLAS_STATUS_SUCCESS);
    }
    memset(h + 64, 0xff, 256); /* every bit set first: the forward must clear those that fail */
    ck_assert_int_eq(cudaMemcpyAsync(mask, h + 64, 256, cudaMemcpyHostToDevice, s), cudaSuccess);
    ck_assert_int_eq(cublasLtMatmul(lt, fwd, &one, dA, la, dB, lb, &zero, dD, ldd, dD, ldd, &rf.algo, ws, 4 << 20, s),
                     CUBLAS_STATUS_SUCCESS);
    uint8_t hm[48];
    ck_assert_int_eq(cudaMemcpyAsync(h + 24, dD, 6 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(hm, mask, sizeof hm, cudaMemcpyDeviceToHost), cudaSuccess);
    const float want_y[6] = {0, 0, 1, 0, 2, 1}; /* column-major relu([-1 1 2; -3 -1 1]) */
    for (int i = 0; i < 6; i++) ck_assert_msg(h[24 + i] == want_y[i], "y[%d] = %g", i, h[24 + i]);
    /* bit i + 128 j: column 0 none, column 1 row 0 (bit 128), column 2 rows 0 and 1 (bits 256, 257) */
    ck_assert_uint_eq(hm[0] & 3, 0);
    ck_assert_uint_eq(hm[16] & 3, 1);
    ck_assert_uint_eq(hm[32] & 3, 3);
    /* the backward over the same A and B: D = A B = [1 3 4; 2 4 6], kept where the mask is set: [0 3 4; 0 0 6] */
    ck_assert_int_eq(cublasLtMatmul(lt, bwd, &one, dA, la, dB, lb, &zero, dD, ldd, dD, ldd, &rb.algo, ws, 4 << 20, s),
                     CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cudaMemcpyAsync(h + 32, dD, 6 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(h + 40, dg, 2 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    const float want_dz[6] = {0, 0, 3, 0, 4, 6};
    for (int i = 0; i < 6; i++) ck_assert_msg(h[32 + i] == want_dz[i], "dz[%d] = %g", i, h[32 + i]);
    ck_assert_msg(h[40] == 7 && h[41] == 6, "the bias gradient: %g %g, want 7 6", h[40], h[41]);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ldd);
    cublasLtMatmulDescDestroy(fwd);
    cublasLtMatmulDescDestroy(bwd);
    cublasLtDestroy(lt);
}
END_TEST

/* A graph: the captured calls do not run at the capture; each launch issues them again, with the arguments they were
 * captured with (the kernel's value, the copy's pointers) and reading memory as it is at the launch; an external
 * event record is a node, recorded at every launch; a plain record on a capturing stream is refused. */
START_TEST(test_graph_replay)
{
    cudaStream_t s = new_stream();
    float *d = dev_floats(4), *h = pinned_floats(8);
    cudaEvent_t e0, e1;
    ck_assert_int_eq(cudaEventCreate(&e0), cudaSuccess);
    ck_assert_int_eq(cudaEventCreate(&e1), cudaSuccess);
    for (int i = 0; i < 8; i++) h[i] = 1.0f;
    ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ck_assert_int_eq(cudaEventRecordWithFlags(e0, s, cudaEventRecordExternal), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(d, h + 4, 4 * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
    TT_LAUNCH(k_set, 1, 32, s, d, (size_t)2, 5.0f); /* the first two become 5, the last two keep the upload */
    ck_assert_int_eq(cudaMemcpyAsync(h, d, 4 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaEventRecordWithFlags(e1, s, cudaEventRecordExternal), cudaSuccess);
    cudaGraph_t g;
    ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphExec_t x;
    ck_assert_int_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    ck_assert_int_eq(cudaGraphDestroy(g), cudaSuccess); /* the executable graph keeps its own nodes */
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert(h[0] == 1.0f); /* the capture ran nothing */
    float ms;
    ck_assert_int_eq(cudaEventElapsedTime(&ms, e0, e1), cudaErrorInvalidResourceHandle); /* never recorded yet */
    for (int launch = 0; launch < 2; launch++) {
        for (int i = 0; i < 4; i++) h[i] = 0.0f, h[4 + i] = (float)(10 * launch + i); /* written before the launch */
        ck_assert_int_eq(cudaGraphLaunch(x, s), cudaSuccess);
        ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
        ck_assert(h[0] == 5.0f && h[1] == 5.0f);
        ck_assert(h[2] == (float)(10 * launch + 2) && h[3] == (float)(10 * launch + 3)); /* read at this launch */
        ck_assert_int_eq(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
        ck_assert(ms >= 0.0f);
    }
    /* a plain record while capturing would leave the event out of the graph: refused, the capture invalidated */
    ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ck_assert_int_eq(cudaEventRecord(e0, s), cudaErrorStreamCaptureUnsupported);
    ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    ck_assert(g == nullptr);
    /* external records outside a capture are invalid; the default stream cannot be captured */
    ck_assert_int_eq(cudaEventRecordWithFlags(e0, s, cudaEventRecordExternal), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeThreadLocal),
                     cudaErrorStreamCaptureUnsupported);
    ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaErrorIllegalState); /* not capturing */
    ck_assert_int_eq(cudaGraphExecDestroy(x), cudaSuccess);
    ck_assert_int_eq(cudaGraphExecDestroy(x), cudaErrorInvalidResourceHandle);
}
END_TEST

/* What CUDA forbids while a thread captures — a sync, an allocation, a free, a blocking or pageable copy — fails and
 * invalidates the capture: the end gives no graph. */
START_TEST(test_graph_forbidden)
{
    cudaStream_t s = new_stream();
    float *d = dev_floats(4), pageable[4] = {0, 0, 0, 0};
    cudaGraph_t g;
    for (int what = 0; what < 6; what++) {
        ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        TT_LAUNCH(k_set, 1, 32, s, d, (size_t)4, 1.0f);
        void *p = nullptr;
        cudaError_t e = what == 0   ? cudaStreamSynchronize(s)
                        : what == 1 ? cudaDeviceSynchronize()
                        : what == 2 ? cudaMalloc(&p, 16)
                        : what == 3 ? cudaFree(d)
                        : what == 4 ? cudaMemcpy(pageable, d, sizeof pageable, cudaMemcpyDeviceToHost)
                                    : cudaMemcpyAsync(d, pageable, sizeof pageable, cudaMemcpyHostToDevice, s);
        ck_assert_msg(e == cudaErrorStreamCaptureUnsupported, "case %d: %d", what, (int)e);
        ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
        ck_assert(g == nullptr);
    }
    ck_assert_int_eq(cudaFree(d), cudaSuccess); /* after the capture: allowed, and d was never freed above */
}
END_TEST

/* A graph launched after memory it refers to was freed fails at the launch, naming the node, instead of running on
 * freed memory; cuBLAS in a capture needs cublasSetWorkspace. */
START_TEST(test_graph_stale_and_cublas)
{
    cudaStream_t s = new_stream();
    float *d = dev_floats(16), *h = pinned_floats(16);
    cublasHandle_t hb;
    ck_assert_int_eq(cublasCreate(&hb), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cublasSetStream(hb, s), CUBLAS_STATUS_SUCCESS);
    const float one = 1, zero = 0;
    for (int i = 0; i < 8; i++) h[i] = (float)(i + 1);
    ck_assert_int_eq(cudaMemcpyAsync(d, h, 8 * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
    cudaGraph_t g;
    ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ck_assert_int_eq(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, 2, d + 4, 2, &zero, d + 8, 2),
                     CUBLAS_STATUS_NOT_SUPPORTED); /* no workspace of its own */
    ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaSuccess); /* nothing was captured: an empty graph */
    ck_assert_int_eq(cudaGraphDestroy(g), cudaSuccess);
    float *ws = dev_floats(1024);
    ck_assert_int_eq(cublasSetWorkspace(hb, ws, 1024 * sizeof(float)), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ck_assert_int_eq(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, 2, d + 4, 2, &zero, d + 8, 2),
                     CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cudaMemcpyAsync(h + 8, d + 8, 4 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphExec_t x;
    ck_assert_int_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    ck_assert_int_eq(cudaGraphLaunch(x, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    const float want[4] = {23, 34, 31, 46}; /* [1 3; 2 4] [5 7; 6 8], column-major */
    for (int i = 0; i < 4; i++) ck_assert(h[8 + i] == want[i]);
    ck_assert_int_eq(cudaFree(ws), cudaSuccess); /* the workspace the captured sgemm was given */
    ck_assert_int_eq(cudaGraphLaunch(x, s), cudaErrorIllegalAddress);
    ck_assert_int_eq(cudaFree(d), cudaSuccess);
    ck_assert_int_eq(cudaGraphLaunch(x, s), cudaErrorIllegalAddress);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
    cublasDestroy(hb);
}
END_TEST

/* NCCL: three ranks, each on its own thread and stream, sum in rank order; reduce, all-reduce, broadcast. */
START_TEST(test_nccl)
{
    setenv("TT_SIM_DEVICES", "3", 1);
    ncclComm_t comms[3];
    const int devs[3] = {0, 1, 2};
    ck_assert_int_eq(ncclCommInitAll(comms, 3, devs), ncclSuccess);
    float out[3][4];
    std::vector<std::thread> ts;
    for (int r = 0; r < 3; r++)
        ts.emplace_back([&, r]() {
            ck_assert_int_eq(cudaSetDevice(r), cudaSuccess);
            cudaStream_t s = new_stream();
            float *d = dev_floats(12), *h = pinned_floats(12);
            for (int i = 0; i < 4; i++) h[i] = (float)(r + 1) * (float)(i + 1); /* rank r: (r+1)(i+1) */
            ck_assert_int_eq(cudaMemcpyAsync(d, h, 4 * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
            ck_assert_int_eq(ncclAllReduce(d, d + 4, 4, ncclFloat, ncclSum, comms[r], s), ncclSuccess);
            ck_assert_int_eq(ncclReduce(d, d + 8, 4, ncclFloat, ncclSum, 2, comms[r], s), ncclSuccess);
            ck_assert_int_eq(ncclBroadcast(d + 4, d + 4, 4, ncclFloat, 1, comms[r], s), ncclSuccess);
            ck_assert_int_eq(cudaMemcpyAsync(h, d, 12 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
            ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
            for (int i = 0; i < 4; i++) out[r][i] = h[4 + i];
            if (r == 2)
                for (int i = 0; i < 4; i++) ck_assert(h[8 + i] == 6.0f * (float)(i + 1));
        });
    for (std::thread &t : ts) t.join();
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 4; i++) ck_assert(out[r][i] == 6.0f * (float)(i + 1));
    for (int r = 0; r < 3; r++) ncclCommDestroy(comms[r]);
    const int same[2] = {1, 1};
    ck_assert_int_eq(ncclCommInitAll(comms, 2, same), ncclInvalidUsage); /* one GPU, two ranks */
}
END_TEST

/* A rank that never reaches its collective: the others end the process with a line naming who arrived. */
START_TEST(test_nccl_missing_rank)
{
    setenv("TT_SIM_NCCL_TIMEOUT", "1", 1);
    ncclComm_t comms[2];
    ck_assert_int_eq(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
    cudaStream_t s = new_stream();
    float *d = dev_floats(4);
    ck_assert_int_eq(ncclAllReduce(d, d, 4, ncclFloat, ncclSum, comms[0], s), ncclSuccess);
    cudaStreamSynchronize(s); /* rank 1 never calls: aborts after 1 s */
}
END_TEST

int main(void)
{
    Suite *su = suite_create("cuda stand-in");
    TCase *tc = tcase_create("instrument");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_deferred);
    tcase_add_test_raise_signal(tc, test_h2d_source_written_in_flight, SIGABRT);
    tcase_add_test_raise_signal(tc, test_d2h_destination_written_in_flight, SIGABRT);
    tcase_add_test(tc, test_kernel_pointers);
    tcase_add_test(tc, test_copies);
    tcase_add_test(tc, test_pageable);
    tcase_add_test(tc, test_pageable_error);
    tcase_add_test(tc, test_events);
    tcase_add_test(tc, test_stream_wait);
    tcase_add_test(tc, test_stream_wait_two_threads);
    tcase_add_test_raise_signal(tc, test_race_unordered, SIGABRT);
    tcase_add_test_raise_signal(tc, test_race_after_record, SIGABRT);
    tcase_add_test(tc, test_race_ordered);
    tcase_add_test(tc, test_block_reverse);
    tcase_add_test(tc, test_block_shuffle);
    tcase_add_test(tc, test_grid_cap);
    tcase_add_test(tc, test_busy);
    tcase_add_test(tc, test_memory_budget);
    tcase_add_test(tc, test_sgemm);
    tcase_add_test(tc, test_lt_matmul);
    tcase_add_test(tc, test_lt_relu_mask);
    tcase_add_test(tc, test_graph_replay);
    tcase_add_test(tc, test_graph_forbidden);
    tcase_add_test(tc, test_graph_stale_and_cublas);
    tcase_add_test(tc, test_nccl);
    tcase_add_test_raise_signal(tc, test_nccl_missing_rank, SIGABRT);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_ENV);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
