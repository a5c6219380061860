/* nccl.cpp — NCCL's collectives for the CPU stand-in, as a rendezvous of the ranks' streams (nccl.h says how).
 * Every rank's call is checked when issued (its stream on the communicator's device, its buffers there and in
 * bounds); when a rank's stream reaches the call, the rank waits for the others, and the last to arrive checks that
 * every rank called the same collective (kind, count, root) and writes every result: sums in rank order.
 * Not for: several processes (ncclCommInitRank) or reductions other than a float sum (the backend uses neither). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl.h"
#include "sim.h"

using namespace tt_sim;

namespace {

enum coll_kind { REDUCE, ALL_REDUCE, BROADCAST };
const char *const coll_names[] = {"ncclReduce", "ncclAllReduce", "ncclBroadcast"};

struct call {
    coll_kind kind;
    size_t count;
    int root;
    const float *send;
    float *recv;
};

/* The ranks of one ncclCommInitAll: a collective completes when all n have arrived. */
struct clique {
    int n;
    std::mutex m;
    std::condition_variable cv;
    uint64_t generation = 0; /* collectives completed */
    int arrived = 0;
    std::vector<call> calls; /* (n) this collective's call of each rank */
    std::vector<char> here;  /* (n) which ranks have arrived */
    std::vector<float> sum;  /* scratch: the result, before it is written (buffers may alias) */
};

thread_local std::string t_nccl_error;

ncclResult_t nccl_fail(ncclResult_t r, const char *what)
{
    t_nccl_error = what;
    say("%s", what);
    return r;
}

/* The last rank to arrive: every rank made the same call; results written in rank order. */
void complete(clique &q)
{
    const call &c0 = q.calls[0];
    for (int r = 1; r < q.n; r++) {
        const call &c = q.calls[r];
        if (c.kind != c0.kind || c.count != c0.count || c.root != c0.root) {
            fprintf(stderr, "cuda stand-in: NCCL: rank 0 called %s(count %zu, root %d) but rank %d %s(count %zu, "
                            "root %d): every rank must make the same collective\n",
                    coll_names[c0.kind], c0.count, c0.root, r, coll_names[c.kind], c.count, c.root);
            abort();
        }
    }
    const size_t n = c0.count;
    q.sum.resize(n);
    if (c0.kind == BROADCAST) {
        memcpy(q.sum.data(), q.calls[c0.root].send, n * sizeof(float));
    } else {
        memcpy(q.sum.data(), q.calls[0].send, n * sizeof(float));
        for (int r = 1; r < q.n; r++)
            for (size_t i = 0; i < n; i++) q.sum[i] += q.calls[r].send[i];
    }
    for (int r = 0; r < q.n; r++)
        if (c0.kind != REDUCE || r == c0.root) memcpy(q.calls[r].recv, q.sum.data(), n * sizeof(float));
}

void rendezvous(clique &q, int rank, const call &c)
{
    std::unique_lock<std::mutex> l(q.m);
    const uint64_t gen = q.generation;
    q.calls[rank] = c;
    q.here[rank] = 1;
    if (++q.arrived == q.n) {
        complete(q);
        q.arrived = 0;
        for (char &h : q.here) h = 0;
        q.generation++;
        q.cv.notify_all();
        return;
    }
    const auto limit = std::chrono::seconds(cfg().nccl_timeout);
    if (!q.cv.wait_for(l, limit, [&] { return q.generation != gen; })) {
        std::string who;
        for (int r = 0; r < q.n; r++)
            if (q.here[r]) who += (who.empty() ? "" : ",") + std::to_string(r);
        fprintf(stderr, "cuda stand-in: NCCL: rank %d waited %d s in %s for the other ranks; arrived: %s of %d (a "
                        "rank that never calls or never waits for its stream hangs NCCL on a GPU too)\n",
                rank, cfg().nccl_timeout, coll_names[c.kind], who.c_str(), q.n);
        abort();
    }
}

} /* namespace */

struct ncclComm {
    std::shared_ptr<clique> q;
    int rank, device;
};

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int n, const int *devices)
{
    if (!comms || n < 1) return nccl_fail(ncclInvalidArgument, "ncclCommInitAll: no communicators asked for");
    auto q = std::make_shared<clique>();
    q->n = n;
    q->calls.resize((size_t)n);
    q->here.assign((size_t)n, 0);
    for (int r = 0; r < n; r++) {
        const int d = devices ? devices[r] : r;
        if (d < 0 || d >= cfg().devices) return nccl_fail(ncclInvalidArgument, "ncclCommInitAll: invalid device");
        for (int p = 0; p < r; p++)
            if ((devices ? devices[p] : p) == d)
                return nccl_fail(ncclInvalidUsage, "ncclCommInitAll: duplicate GPU detected");
        if (!ensure_context(d))
            return nccl_fail(ncclUnhandledCudaError, "ncclCommInitAll: a device's context cannot be created (busy)");
    }
    for (int r = 0; r < n; r++) comms[r] = new ncclComm{q, r, devices ? devices[r] : r};
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    delete comm;
    return ncclSuccess;
}

/* Checks rank comm's part of a collective and queues its rendezvous on s. */
static ncclResult_t issue(coll_kind kind, const void *send, void *recv, size_t count, ncclDataType_t type,
                          ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t s)
{
    char what[160];
    if (!comm) return nccl_fail(ncclInvalidArgument, "NCCL: no communicator");
    if (type != ncclFloat || op != ncclSum || root < (kind == ALL_REDUCE ? -1 : 0) || root >= comm->q->n) {
        snprintf(what, sizeof what, "%s: only a float sum is supported, root %d of %d ranks", coll_names[kind], root,
                 comm->q->n);
        return nccl_fail(ncclInvalidArgument, what);
    }
    int dev;
    if (!resolve_stream(&s, &dev) || dev != comm->device) {
        snprintf(what, sizeof what, "%s: rank %d's stream is not on its device %d", coll_names[kind], comm->rank,
                 comm->device);
        return nccl_fail(ncclInvalidArgument, what);
    }
    const size_t bytes = count * sizeof(float);
    const bool sends = kind != BROADCAST || comm->rank == root, receives = kind != REDUCE || comm->rank == root;
    snprintf(what, sizeof what, "%s rank %d: send buffer", coll_names[kind], comm->rank);
    if (sends && count && !check_device_range(what, send, bytes, comm->device))
        return nccl_fail(ncclInvalidArgument, what);
    snprintf(what, sizeof what, "%s rank %d: receive buffer", coll_names[kind], comm->rank);
    if (receives && count && !check_device_range(what, recv, bytes, comm->device))
        return nccl_fail(ncclInvalidArgument, what);
    if (capturing(s)) {
        snprintf(what, sizeof what, "%s rank %d: its stream is being captured (the stand-in captures no NCCL call)",
                 coll_names[kind], comm->rank);
        return nccl_fail(ncclInvalidUsage, what);
    }
    tt_sim::count(coll_names[kind], 1, bytes);
    const call c = {kind, count, kind == ALL_REDUCE ? -1 : root, (const float *)send, (float *)recv};
    std::shared_ptr<clique> q = comm->q;
    const int rank = comm->rank;
    enqueue(s, [q, rank, c]() { rendezvous(*q, rank, c); }, coll_names[kind],
            {{send, sends ? bytes : 0, false}, {recv, receives ? bytes : 0, true}});
    return ncclSuccess;
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t s)
{
    return issue(REDUCE, send, recv, count, type, op, root, comm, s);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s)
{
    return issue(ALL_REDUCE, send, recv, count, type, op, -1, comm, s);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t s)
{
    return issue(BROADCAST, send, recv, count, type, ncclSum, root, comm, s);
}

ncclResult_t ncclGroupStart(void)
{
    return nccl_fail(ncclInvalidUsage, "ncclGroupStart: group calls are not supported by the stand-in (nccl.h)");
}

ncclResult_t ncclGroupEnd(void)
{
    return nccl_fail(ncclInvalidUsage, "ncclGroupEnd: group calls are not supported by the stand-in (nccl.h)");
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    }
    return "unknown result code";
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return t_nccl_error.c_str();
}
