/* runtime.cpp — the CUDA runtime of the CPU stand-in: devices and their contexts, the memory registry, streams
 * with deferred execution, events, copies and kernel launches, each checked as the instrument's rules say
 * (cuda_runtime.h). Deferred: work queued on a stream runs, in order, only when something waits for it (a stream,
 * event or device sync, a blocking copy, a free), on the thread that waits — so a missing wait reads stale data
 * instead of passing by luck; and every op is checked when issued against the other streams' accesses to the same
 * bytes that CUDA does not order before it ("ordering"), which running late would hide. Device memory is ordinary
 * heap memory (AddressSanitizer sees a kernel read past an allocation); the registry knows each allocation's device
 * and kind.
 * Not for: speed or GPU numerics (docs/cuda.md, "The CPU stand-in"). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sim.h"

struct CUstream_st {
    int device;
    int id;                           /* the ordering check's index: one of the live streams' (reused), from 1 */
    uint64_t base;                    /* op n's place in the ordering is base + n (an id's places never repeat) */
    std::vector<uint64_t> clock;      /* under g_lock: the ordering check's vector clock ("ordering") */
    std::mutex queue_lock;            /* guards q */
    std::deque<std::function<void()>> q;
    uint64_t queued = 0, ran = 0;     /* under queue_lock: ops ever queued, ops run (a wait's position) */
    std::mutex run_lock;              /* held while the queue runs: one thread at a time executes this stream */
    uint64_t launches = 0;            /* kernels queued so far: the shuffle's per-launch seed */
    int refs = 1;                     /* under g_lock: the registry's reference + one per thread draining it from
                                       * outside (a device sync, an event): the last one deletes it */
    CUgraph_st *capture = nullptr;    /* under queue_lock: the graph being captured from this stream, or none */
    bool capture_bad = false;         /* a call during the capture failed: cudaStreamEndCapture refuses it */
};

struct CUgraph_st {
    int device;
    std::vector<tt_sim::node> nodes;
};

struct CUgraphExec_st {
    int device;
    std::vector<tt_sim::node> nodes;
};

struct CUevent_st {
    int device;
    cudaStream_t stream = nullptr; /* where it was last recorded */
    uint64_t recorded = 0;         /* records so far */
    uint64_t completed = 0;        /* the record that has completed (== recorded: done) */
    uint64_t position = 0;         /* the last record's place in its stream's queue (cudaStreamWaitEvent's target) */
    std::vector<uint64_t> clock;   /* under g_lock: its stream's clock at the last record ("ordering") */
    double ms = 0;                 /* the stand-in's clock when it completed */
};

namespace tt_sim {

/* ---- configuration ------------------------------------------------------------------------------------------- */

static config g_cfg;
static std::once_flag g_cfg_once;

[[noreturn]] static void bad_env(const char *name, const char *value, const char *want)
{
    fprintf(stderr, "cuda stand-in: %s: '%.64s' is not %s\n", name, value, want);
    exit(2);
}

static uint64_t env_uint(const char *name, uint64_t def, uint64_t lo, uint64_t hi)
{
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end = nullptr;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (*v < '0' || *v > '9' || *end || errno || x < lo || x > hi) {
        char want[96];
        snprintf(want, sizeof want, "a whole number from %llu to %llu", (unsigned long long)lo,
                 (unsigned long long)hi);
        bad_env(name, v, want);
    }
    return x;
}

static void write_report(void);

static void read_config(void)
{
    config &c = g_cfg;
    c.devices = (int)env_uint("TT_SIM_DEVICES", 2, 0, 64);
    const char *o = getenv("TT_SIM_BLOCK_ORDER");
    if (!o || !*o || strcmp(o, "forward") == 0)
        c.block_order = 0;
    else if (strcmp(o, "reverse") == 0)
        c.block_order = 1;
    else if (strcmp(o, "shuffle") == 0)
        c.block_order = 2;
    else
        bad_env("TT_SIM_BLOCK_ORDER", o, "forward, reverse or shuffle");
    c.grid_cap = (unsigned)env_uint("TT_SIM_GRID_CAP", 0, 0, 1u << 30);
    c.seed = env_uint("TT_SIM_SEED", 1, 0, UINT64_MAX);
    c.busy = 0;
    if (const char *b = getenv("TT_SIM_BUSY")) {
        for (const char *p = b; *p;) {
            char *end = nullptr;
            long d = strtol(p, &end, 10);
            if (end == p || *p < '0' || *p > '9' || d >= 64 || (*end && (*end != ',' || !end[1]))) bad_env("TT_SIM_BUSY", b, "a list of device numbers like 0,2");
            c.busy |= 1ull << d;
            p = *end ? end + 1 : end;
        }
    }
    const char *pe = getenv("TT_SIM_PEER");
    if (!pe || !*pe || strcmp(pe, "all") == 0)
        c.peer = 1;
    else if (strcmp(pe, "none") == 0)
        c.peer = 0;
    else
        bad_env("TT_SIM_PEER", pe, "all or none");
    c.mem_bytes = (size_t)env_uint("TT_SIM_MEM_MB", 16384, 1, 1u << 24) << 20;
    c.nccl_timeout = (int)env_uint("TT_SIM_NCCL_TIMEOUT", 60, 1, 86400);
    const char *pg = getenv("TT_SIM_PAGEABLE");
    if (!pg || !*pg || strcmp(pg, "sync") == 0)
        c.pageable_error = 0;
    else if (strcmp(pg, "error") == 0)
        c.pageable_error = 1;
    else
        bad_env("TT_SIM_PAGEABLE", pg, "sync or error");
    c.report = getenv("TT_SIM_REPORT");
    if (c.report && *c.report) atexit(write_report);
}

const config &cfg()
{
    std::call_once(g_cfg_once, read_config);
    return g_cfg;
}

/* ---- errors ------------------------------------------------------------------------------------------------- */

static thread_local cudaError_t t_last TT_SIM_TLS = cudaSuccess;

void say(const char *fmt, ...)
{
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuda stand-in: %s\n", line);
}

cudaError_t set_error(cudaError_t e)
{
    if (e != cudaSuccess) t_last = e;
    return e;
}

/* ---- devices and contexts ---------------------------------------------------------------------------------- */

static thread_local int t_device TT_SIM_TLS = 0; /* CUDA's default: device 0, without a context until something needs one */
static std::mutex g_lock;             /* guards the registries below */
static uint64_t g_contexts;           /* devices with a context */
static uint64_t g_peer[64];           /* g_peer[from] bit to: access enabled from -> to */

int current_device(void) { return t_device; }

extern "C" void openblas_set_num_threads(int); /* OpenBLAS's own */

bool ensure_context(int device)
{
    std::lock_guard<std::mutex> l(g_lock);
    if (g_contexts >> device & 1) return true;
    if (cfg().busy >> device & 1) return false;
    /* a device's work runs on its streams' threads: OpenBLAS's own threads on top would have every stream's GEMM
     * wake every CPU (as the CPU backend, dev_cpu.c), so the first context sets one */
    if (!g_contexts) openblas_set_num_threads(1);
    g_contexts |= 1ull << device;
    return true;
}

static bool valid_device(int d) { return d >= 0 && d < cfg().devices; }

/* The current device's context, or the error a CUDA call gets when it cannot be created. */
static cudaError_t need_context(void)
{
    if (!valid_device(t_device)) return set_error(cudaErrorNoDevice);
    return ensure_context(t_device) ? cudaSuccess : set_error(cudaErrorDevicesUnavailable);
}

bool may_access(int from, int to)
{
    if (from == to) return true;
    std::lock_guard<std::mutex> l(g_lock);
    return g_peer[from] >> to & 1;
}

/* ---- the memory registry ---------------------------------------------------------------------------------- */

/* An op's access to bytes [lo, hi) of a device allocation: the ordering check's record ("ordering"). */
struct access {
    size_t lo, hi;
    int stream, device; /* the stream's id and device */
    uint64_t at;        /* the op's place in its stream's order (base + its place in the queue) */
    bool write;
    const char *what;   /* the op */
};

struct allocation {
    size_t size;
    mem_kind kind;
    int device;
    unsigned flags;
    uint64_t copied_in;           /* pinned: device-to-host copies that have run into it (see host_in_flight) */
    std::vector<access> accesses; /* device: those that a later op of another stream may still race with */
};
static std::map<uintptr_t, allocation> g_mem; /* by base address */
static size_t g_used[64];                     /* device bytes allocated, per device */

mem_range find(const void *p, size_t bytes)
{
    mem_range r = {MEM_NONE, -1, 0, false, 0, 0};
    const uintptr_t a = (uintptr_t)p;
    std::lock_guard<std::mutex> l(g_lock);
    auto it = g_mem.upper_bound(a);
    if (it == g_mem.begin()) return r;
    --it;
    const allocation &m = it->second;
    const size_t off = a - it->first;
    if (off >= m.size && !(m.size == 0 && off == 0)) return r;
    r.kind = m.kind;
    r.device = m.device;
    r.flags = m.flags;
    r.offset = off;
    r.size = m.size;
    r.inside = bytes <= m.size - off;
    return r;
}

static const char *kind_name(mem_kind k)
{
    return k == MEM_DEVICE ? "device memory" : k == MEM_PINNED ? "pinned host memory" : "pageable host memory";
}

bool check_device_range(const char *what, const void *p, size_t bytes, int device)
{
    const mem_range r = find(p, bytes);
    if (r.kind != MEM_DEVICE) {
        say("%s: %p is %s, not device memory", what, p, kind_name(r.kind));
        return false;
    }
    if (!may_access(device, r.device)) {
        say("%s: %p is memory of device %d, which device %d may not access (no peer access enabled)", what, p,
            r.device, device);
        return false;
    }
    if (!r.inside) {
        say("%s: %zu bytes at offset %zu run past the end of a %zu-byte allocation on device %d", what, bytes,
            r.offset, r.size, r.device);
        return false;
    }
    return true;
}

/* ---- streams ---------------------------------------------------------------------------------------------- */

static std::set<cudaStream_t> g_streams; /* live streams, defaults included */
static std::vector<uint64_t> g_id_top;    /* per ordering id (index 0 unused): the last place its streams reached */
static std::vector<int> g_free_ids;       /* the ids of destroyed streams, for the next ones: clocks stay as wide as
                                           * the most streams alive at once */

/* Gives a new stream an ordering id (under g_lock); its places continue after the last of the id's earlier stream,
 * whose work the host waited for at its destroy: every clock made since covers it. */
static void give_id(cudaStream_t s)
{
    if (g_free_ids.empty()) {
        if (g_id_top.empty()) g_id_top.push_back(0);
        g_free_ids.push_back((int)g_id_top.size());
        g_id_top.push_back(0);
    }
    s->id = g_free_ids.back();
    g_free_ids.pop_back();
    s->base = g_id_top[(size_t)s->id];
}
static cudaStream_t g_default[64];        /* each device's default (NULL) stream, made on first use */
static std::set<cudaEvent_t> g_events;

static bool live_stream(cudaStream_t s)
{
    std::lock_guard<std::mutex> l(g_lock);
    return g_streams.count(s) != 0;
}

bool resolve_stream(cudaStream_t *s, int *device)
{
    if (!*s) {
        const int d = t_device;
        if (!valid_device(d)) return false;
        std::lock_guard<std::mutex> l(g_lock);
        if (!g_default[d]) {
            g_default[d] = new CUstream_st;
            g_default[d]->device = d;
            give_id(g_default[d]);
            g_streams.insert(g_default[d]);
        }
        *s = g_default[d];
    } else if (!live_stream(*s)) {
        return false;
    }
    *device = (*s)->device;
    return true;
}

static thread_local uint64_t t_launch_seed TT_SIM_TLS; /* the launch being executed: its block order */
static thread_local cudaStream_t t_capturing TT_SIM_TLS;  /* the stream this thread is capturing, or none */

/* ---- ordering ---------------------------------------------------------------------------------------------
 * Which work comes before which as CUDA defines it, not as the stand-in happens to run it (late, when waited for:
 * one order of the many a GPU may choose — it missed a pull ahead on a side stream that a GPU ran before the
 * tower stream's NaN fill of the same buffer). Vector clocks, indexed by stream id: a stream's clock holds, for each
 * stream, the last of its ops that the stream's next op comes after; an op takes its stream's clock with its own
 * place set. An event record keeps its stream's clock, cudaStreamWaitEvent merges it into the waiting stream's, and
 * a host wait (a stream, event or device sync, a blocking copy, a free, a stream destroyed, an event query that
 * says done) merges what it waited for into the host's clock, which every op issued afterwards merges first — one
 * host for all threads: work the host has seen finish comes before anything issued later, on any thread. Each
 * device allocation keeps its accesses (bytes, stream, place, read or write, the op); an op whose touch overlaps
 * another stream's access, one of the two a write, and whose clock does not cover that access, is a race: one
 * line naming both, then abort. A kernel touches the element each pointer argument points at (written unless
 * const): how far it goes from there the stand-in cannot see. All under g_lock. */

typedef std::vector<uint64_t> vclock;

static vclock g_host; /* what the host has seen complete */

static uint64_t clock_at(const vclock &c, int id) { return (size_t)id < c.size() ? c[(size_t)id] : 0; }

static void merge(vclock &into, const vclock &c)
{
    if (into.size() < c.size()) into.resize(c.size());
    for (size_t i = 0; i < c.size(); i++)
        if (c[i] > into[i]) into[i] = c[i];
}

static void set_place(vclock &c, int id, uint64_t at)
{
    if (c.size() <= (size_t)id) c.resize((size_t)id + 1);
    c[(size_t)id] = at;
}

/* The op at place `at` of stream s (its clock set) touches t: checked against the allocation's accesses, then kept among them. */
static void order_touch(cudaStream_t s, uint64_t at, const char *what, const touch &t)
{
    auto it = g_mem.upper_bound((uintptr_t)t.p);
    if (!t.p || !t.bytes || it == g_mem.begin()) return;
    --it;
    allocation &m = it->second;
    const size_t lo = (uintptr_t)t.p - it->first;
    if (m.kind != MEM_DEVICE || lo >= m.size) return;
    const size_t hi = lo + (t.bytes < m.size - lo ? t.bytes : m.size - lo);
    std::vector<access> &v = m.accesses;
    for (size_t i = 0; i < v.size();) {
        const access &a = v[i];
        const bool ordered = a.stream == s->id || clock_at(s->clock, a.stream) >= a.at;
        if (!ordered && a.lo < hi && lo < a.hi && (a.write || t.write)) {
            fprintf(stderr, "cuda stand-in: %s on stream %d (device %d) %s bytes [%zu, %zu) of the %zu-byte device "
                            "allocation %p, which %s on stream %d (device %d) %s at [%zu, %zu), and no stream "
                            "order, event wait or synchronization orders the two: on a GPU either may run "
                            "first (a race)\n",
                    what, s->id, s->device, t.write ? "writes" : "reads", lo, hi, m.size, (void *)it->first, a.what,
                    a.stream, a.device, a.write ? "wrote" : "read", a.lo, a.hi);
            abort();
        }
        /* gone: the host has seen it complete (every later op comes after it), or this op covers it and comes after
         * it — a write covers any access, a read a read */
        if (clock_at(g_host, a.stream) >= a.at || (ordered && lo <= a.lo && a.hi <= hi && (t.write || !a.write))) {
            v[i] = v.back();
            v.pop_back();
        } else {
            i++;
        }
    }
    v.push_back(access{lo, hi, s->id, s->device, at, t.write, what});
}

uint64_t enqueue(cudaStream_t s, std::function<void()> op, const char *what, std::vector<touch> touches)
{
    std::lock_guard<std::mutex> g(g_lock);
    uint64_t at;
    {
        std::lock_guard<std::mutex> l(s->queue_lock);
        s->q.push_back(std::move(op));
        at = ++s->queued;
    }
    merge(s->clock, g_host);
    set_place(s->clock, s->id, s->base + at);
    for (const touch &t : touches) order_touch(s, s->base + at, what, t);
    return at;
}

static vclock clock_of(cudaStream_t s)
{
    std::lock_guard<std::mutex> l(g_lock);
    return s->clock;
}

/* The host has waited for work whose clock is c: everything issued from now on comes after it. */
static void host_saw(const vclock &c)
{
    std::lock_guard<std::mutex> l(g_lock);
    merge(g_host, c);
}

bool capturing(cudaStream_t s)
{
    std::lock_guard<std::mutex> l(s->queue_lock);
    return s->capture != nullptr;
}

bool submit(cudaStream_t s, node n)
{
    CUgraph_st *g;
    {
        std::lock_guard<std::mutex> l(s->queue_lock);
        g = s->capture;
    }
    if (!g) return n(s, ISSUE_NOW);
    if (!n(s, ISSUE_CHECK)) {
        s->capture_bad = true;
        return false;
    }
    g->nodes.push_back(std::move(n));
    return true;
}

bool forbidden_in_capture(const char *what)
{
    if (!t_capturing) return false;
    say("%s while this thread captures a stream: CUDA forbids it during a capture (a sync, an allocation, a free or a "
        "blocking copy); the capture is invalidated", what);
    t_capturing->capture_bad = true;
    set_error(cudaErrorStreamCaptureUnsupported);
    return true;
}

void launch_enqueue(cudaStream_t s, const char *kernel, uint64_t threads, std::function<void()> grid_run,
                    std::vector<touch> touches)
{
    count(kernel, 1, threads);
    uint64_t seq;
    {
        std::lock_guard<std::mutex> l(s->queue_lock);
        seq = s->launches++;
    }
    enqueue(
        s,
        [seq, run = std::move(grid_run)]() {
            t_launch_seed = seq;
            run();
        },
        kernel, std::move(touches));
}

/* Runs what is queued on s, in order, on this thread, until `upto` ops have run in all (UINT64_MAX: everything). */
static void drain_upto(cudaStream_t s, uint64_t upto)
{
    /* Another thread may be running s: it either gets past `upto` (then there is nothing to do here) or ends its
     * run; never block on it while it runs (two streams waiting on each other from two threads would deadlock,
     * which on a GPU they do not: each stream only waits for the other's position). */
    for (;;) {
        {
            std::lock_guard<std::mutex> l(s->queue_lock);
            if (s->ran >= upto) return;
        }
        if (s->run_lock.try_lock()) break;
        std::this_thread::yield();
    }
    std::lock_guard<std::mutex> run(s->run_lock, std::adopt_lock);
    for (;;) {
        std::function<void()> op;
        {
            std::lock_guard<std::mutex> l(s->queue_lock);
            if (s->q.empty() || s->ran >= upto) return;
            op = std::move(s->q.front());
            s->q.pop_front();
        }
        op();
        std::lock_guard<std::mutex> l(s->queue_lock);
        s->ran++;
    }
}

static void drain(cudaStream_t s) { drain_upto(s, UINT64_MAX); }

/* Drops a reference to s (taken under g_lock); the last one deletes it. */
static void unref(cudaStream_t s)
{
    bool last;
    {
        std::lock_guard<std::mutex> l(g_lock);
        last = --s->refs == 0;
    }
    if (last) delete s;
}

/* The host waits for s: what was queued on it so far runs, and the host has seen it complete ("ordering"). */
static void host_drain(cudaStream_t s)
{
    const vclock c = clock_of(s);
    drain(s);
    host_saw(c);
}

/* Every live stream of `device` (-1: of every device), drained for the host; another thread may destroy one
 * meanwhile. */
static void drain_device(int device)
{
    std::vector<cudaStream_t> v;
    {
        std::lock_guard<std::mutex> l(g_lock);
        for (cudaStream_t s : g_streams)
            if (device < 0 || s->device == device) {
                s->refs++;
                v.push_back(s);
            }
    }
    for (cudaStream_t s : v) {
        host_drain(s);
        unref(s);
    }
}

/* The stream an event was last recorded on, drained (the event's record completes). */
static void drain_event_stream(cudaEvent_t e)
{
    cudaStream_t s;
    {
        std::lock_guard<std::mutex> l(g_lock);
        s = e->stream;
        if (s) s->refs++;
    }
    if (s) {
        drain(s);
        unref(s);
    }
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

const unsigned *block_order(unsigned n)
{
    static thread_local std::vector<unsigned> order;
    order.resize(n);
    const int how = cfg().block_order;
    for (unsigned i = 0; i < n; i++) order[i] = how == 1 ? n - 1 - i : i;
    if (how == 2) { /* Fisher-Yates, seeded by TT_SIM_SEED and the launch's place on its stream: reproducible */
        uint64_t st = mix64(cfg().seed ^ mix64(t_launch_seed));
        for (unsigned i = n; i > 1; i--) {
            st = mix64(st);
            const unsigned j = (unsigned)(st % i);
            const unsigned t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
    }
    return order.data();
}

bool launch_begin(const char *kernel, dim3 grid, dim3 block, cudaStream_t *s, dim3 *run)
{
    int dev = -1;
    if (!resolve_stream(s, &dev)) {
        say("%s: launched on a stream that does not exist (destroyed, or never created)", kernel);
        set_error(cudaErrorInvalidResourceHandle);
        return false;
    }
    if (dev != t_device) {
        say("%s: launched on a stream of device %d while device %d is current", kernel, dev, t_device);
        set_error(cudaErrorInvalidResourceHandle);
        return false;
    }
    const uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !threads || threads > 1024 || block.z > 64 || grid.y > 65535 ||
        grid.z > 65535 || grid.x > 2147483647u) {
        say("%s: launch configuration grid (%u,%u,%u) block (%u,%u,%u) is not valid", kernel, grid.x, grid.y, grid.z,
            block.x, block.y, block.z);
        set_error(cudaErrorInvalidConfiguration);
        return false;
    }
    *run = grid;
    if (cfg().grid_cap && run->x > cfg().grid_cap) run->x = cfg().grid_cap;
    return true;
}

bool check_kernel_pointer(const char *kernel, int arg, const void *p, cudaStream_t s)
{
    if (!p) return true;
    char what[160];
    snprintf(what, sizeof what, "%s: argument %d", kernel, arg + 1);
    if (check_device_range(what, p, 1, s->device)) return true;
    set_error(cudaErrorIllegalAddress);
    return false;
}

} /* namespace tt_sim */

using namespace tt_sim;

/* ---- devices -------------------------------------------------------------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *count)
{
    if (cfg().devices == 0) return set_error(cudaErrorNoDevice); /* *count untouched, as CUDA does */
    *count = cfg().devices;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = t_device;
    return cudaSuccess;
}

/* Makes the device current and creates its context (CUDA 12+ does both at cudaSetDevice). */
cudaError_t cudaSetDevice(int device)
{
    if (!valid_device(device)) return set_error(cudaErrorInvalidDevice);
    if (!ensure_context(device)) return set_error(cudaErrorDevicesUnavailable);
    t_device = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    if (forbidden_in_capture("cudaDeviceSynchronize")) return t_last;
    if (need_context() != cudaSuccess) return t_last;
    drain_device(t_device);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (need_context() != cudaSuccess) return t_last;
    std::lock_guard<std::mutex> l(g_lock);
    *total_bytes = cfg().mem_bytes;
    *free_bytes = cfg().mem_bytes - g_used[t_device];
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
    if (!valid_device(device) || !valid_device(peer)) return set_error(cudaErrorInvalidDevice);
    *can = device != peer && cfg().peer;
    return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
    if (need_context() != cudaSuccess) return t_last;
    if (!valid_device(peer) || peer == t_device || flags) return set_error(cudaErrorInvalidDevice);
    if (!cfg().peer) return set_error(cudaErrorPeerAccessUnsupported);
    std::lock_guard<std::mutex> l(g_lock);
    if (g_peer[t_device] >> peer & 1) return set_error(cudaErrorPeerAccessAlreadyEnabled);
    g_peer[t_device] |= 1ull << peer;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (!valid_device(device)) return set_error(cudaErrorInvalidDevice);
    snprintf(prop->name, sizeof prop->name, "towertrain CUDA stand-in (runs on the CPU)");
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last; }

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorDevicesUnavailable: return "CUDA-capable device(s) is/are busy or unavailable";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorPeerAccessUnsupported: return "peer access is not supported between these two devices";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched: return "capture was not ended in the same stream as it began";
    case cudaErrorStreamCaptureWrongThread: return "attempt to terminate a thread-local capture sequence from another thread";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorPeerAccessAlreadyEnabled: return "peer access is already enabled";
    case cudaErrorPeerAccessNotEnabled: return "peer access has not been enabled";
    case cudaErrorTooManyPeers: return "peer mapping resources exhausted";
    }
    return "unrecognized error code";
}

/* ---- memory ----------------------------------------------------------------------------------------------- */

/* A device allocation's bytes are taken from the device's budget first, in the same critical section as the check,
 * so that concurrent cudaMalloc calls cannot together exceed TT_SIM_MEM_MB (nor make cudaMemGetInfo's free figure
 * wrap below zero). NULL: the budget or the heap has no room. */
static void *register_alloc(size_t bytes, mem_kind kind, int device, unsigned flags)
{
    if (kind == MEM_DEVICE) {
        std::lock_guard<std::mutex> l(g_lock);
        if (bytes > cfg().mem_bytes - g_used[device]) return nullptr;
        g_used[device] += bytes;
    }
    /* 256-byte aligned, as cudaMalloc's and cudaHostAlloc's memory is: cuBLASLt's algorithms assume operands that
     * aligned unless told otherwise (the stand-in's cuBLASLt checks it), so a smaller alignment here would refuse
     * what a GPU runs, and hide nothing a GPU would show (posix_memalign: AddressSanitizer still bounds the bytes) */
    void *p = nullptr;
    if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0) p = nullptr;
    std::lock_guard<std::mutex> l(g_lock);
    if (!p) {
        if (kind == MEM_DEVICE) g_used[device] -= bytes;
        return nullptr;
    }
    g_mem[(uintptr_t)p] = allocation{bytes, kind, device, flags, 0, {}};
    return p;
}

/* Removes p (the base of an allocation of `kind`) from the registry; false if it is not one. */
static bool unregister_alloc(void *p, mem_kind kind, int *device)
{
    std::lock_guard<std::mutex> l(g_lock);
    auto it = g_mem.find((uintptr_t)p);
    if (it == g_mem.end() || it->second.kind != kind) return false;
    *device = it->second.device;
    if (kind == MEM_DEVICE) g_used[*device] -= it->second.size;
    g_mem.erase(it);
    return true;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (forbidden_in_capture("cudaMalloc")) return t_last;
    if (need_context() != cudaSuccess) return t_last;
    void *m = register_alloc(bytes, MEM_DEVICE, t_device, 0);
    if (!m) return set_error(cudaErrorMemoryAllocation);
    *p = m;
    count("cudaMalloc", 1, bytes);
    return cudaSuccess;
}

/* Waits for the allocation's device (a free is synchronous in CUDA), then frees. */
cudaError_t cudaFree(void *p)
{
    if (forbidden_in_capture("cudaFree")) return t_last;
    if (!p) return cudaSuccess;
    const mem_range r = find(p, 1);
    if (r.kind != MEM_DEVICE || r.offset) {
        say("cudaFree(%p): not the start of a device allocation (it is %s)", p, kind_name(r.kind));
        return set_error(cudaErrorInvalidValue);
    }
    drain_device(r.device);
    int d;
    unregister_alloc(p, MEM_DEVICE, &d);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags)
{
    if (forbidden_in_capture("cudaHostAlloc")) return t_last;
    if (need_context() != cudaSuccess) return t_last;
    if (flags & ~(unsigned)cudaHostAllocPortable) return set_error(cudaErrorInvalidValue);
    void *m = register_alloc(bytes, MEM_PINNED, t_device, flags);
    if (!m) return set_error(cudaErrorMemoryAllocation);
    *p = m;
    count("cudaHostAlloc", 1, bytes);
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    if (forbidden_in_capture("cudaFreeHost")) return t_last;
    if (!p) return cudaSuccess;
    const mem_range r = find(p, 1);
    if (r.kind != MEM_PINNED || r.offset) {
        say("cudaFreeHost(%p): not the start of a pinned allocation (it is %s)", p, kind_name(r.kind));
        return set_error(cudaErrorInvalidValue);
    }
    drain_device(-1);
    int d;
    unregister_alloc(p, MEM_PINNED, &d);
    free(p);
    return cudaSuccess;
}

/* ---- copies ----------------------------------------------------------------------------------------------- */

/* The host side of an asynchronous copy: inside one pinned allocation, portable or made on the stream's device —
 * or pageable memory (*pageable), which CUDA copies synchronously and TT_SIM_PAGEABLE=error refuses. */
static bool check_host_range(const char *what, const void *p, size_t bytes, int device, bool *pageable)
{
    const mem_range r = find(p, bytes);
    if (r.kind == MEM_DEVICE) {
        say("%s: %p is device memory of device %d, where the copy's direction says host memory", what, p, r.device);
        return false;
    }
    if (r.kind == MEM_NONE) {
        if (cfg().pageable_error)
            say("%s: %p is pageable host memory: an asynchronous copy needs pinned memory (cudaHostAlloc), or a GPU "
                "makes it synchronous (TT_SIM_PAGEABLE=error)", what, p);
        *pageable = true;
        return !cfg().pageable_error;
    }
    if (!r.inside) {
        say("%s: %zu bytes at offset %zu run past the end of a %zu-byte pinned allocation", what, bytes, r.offset,
            r.size);
        return false;
    }
    if (r.device != device && !(r.flags & cudaHostAllocPortable)) {
        say("%s: pinned memory allocated on device %d without cudaHostAllocPortable, used by device %d", what,
            r.device, device);
        return false;
    }
    return true;
}

/* The device-to-host copies that have run into the pinned allocation holding p (0 for other memory); `ran` counts
 * one more first. */
static uint64_t pinned_copied_in(const void *p, bool ran)
{
    std::lock_guard<std::mutex> l(g_lock);
    auto it = g_mem.upper_bound((uintptr_t)p);
    if (it == g_mem.begin()) return 0;
    --it;
    if (it->second.kind != MEM_PINNED || (uintptr_t)p - it->first >= it->second.size) return 0;
    if (ran) it->second.copied_in++;
    return it->second.copied_in;
}

/* The host side of an asynchronous copy of pinned memory, as the call saw it. The host must not write it while the
 * copy is in flight (between the call and the wait that completes it): a GPU may run the copy at any moment in
 * between, so what an upload reads, or what the host finds after a download, would depend on timing. Running every
 * copy late, the stand-in alone would hide such a write (the upload would read the new bytes, the download overwrite
 * them), so the copy checks, when it runs, that the bytes are still those the call saw — unless a device-to-host
 * copy ran into the allocation meanwhile (ordered on a stream, it may change them legitimately). A difference is a
 * race on a GPU: one line, then abort (the backend's call returned long ago). */
struct host_in_flight {
    const void *host;
    std::vector<unsigned char> seen;
    uint64_t copied_in;
    host_in_flight(const void *p, size_t bytes)
        : host(p), seen((const unsigned char *)p, (const unsigned char *)p + bytes), copied_in(pinned_copied_in(p, false))
    {
    }
    void check(const char *what) const
    {
        if (pinned_copied_in(host, false) != copied_in || memcmp(seen.data(), host, seen.size()) == 0) return;
        fprintf(stderr, "cuda stand-in: cudaMemcpyAsync %s of %zu bytes: the host wrote its pinned %s (%p) after "
                        "issuing the copy and before waiting for it; on a GPU the copy may run at any moment in "
                        "between (a race)\n",
                what, seen.size(), strcmp(what, "HostToDevice") == 0 ? "source" : "destination", host);
        abort();
    }
};

static const char *direction_name(cudaMemcpyKind k)
{
    return k == cudaMemcpyHostToDevice ? "h2d" : k == cudaMemcpyDeviceToHost ? "d2h" : "d2d";
}

static const char *copy_name(cudaMemcpyKind k)
{
    return k == cudaMemcpyHostToDevice   ? "cudaMemcpyAsync HostToDevice"
           : k == cudaMemcpyDeviceToHost ? "cudaMemcpyAsync DeviceToHost"
                                         : "cudaMemcpyAsync DeviceToDevice";
}

/* The checks of an async copy, as the stream and memory are now; *pageable: a host end is pageable memory. */
static bool check_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, int dev, bool *pageable)
{
    switch (kind) {
    case cudaMemcpyHostToDevice:
        return check_host_range("cudaMemcpyAsync HostToDevice: source", src, bytes, dev, pageable) &&
               check_device_range("cudaMemcpyAsync HostToDevice: destination", dst, bytes, dev);
    case cudaMemcpyDeviceToHost:
        return check_device_range("cudaMemcpyAsync DeviceToHost: source", src, bytes, dev) &&
               check_host_range("cudaMemcpyAsync DeviceToHost: destination", dst, bytes, dev, pageable);
    default: { /* between devices the backend says so (cudaMemcpyPeerAsync); here both ends are the stream's device's */
        const bool ok = find(src, bytes).device == dev && find(dst, bytes).device == dev &&
                        check_device_range("cudaMemcpyAsync DeviceToDevice: source", src, bytes, dev) &&
                        check_device_range("cudaMemcpyAsync DeviceToDevice: destination", dst, bytes, dev);
        if (!ok && find(src, bytes).kind == MEM_DEVICE && find(dst, bytes).kind == MEM_DEVICE)
            say("cudaMemcpyAsync DeviceToDevice on device %d: source on device %d, destination on device %d (a copy "
                "between devices is cudaMemcpyPeerAsync)", dev, find(src, bytes).device, find(dst, bytes).device);
        return ok;
    }
    }
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s)
{
    int dev = -1;
    if (!resolve_stream(&s, &dev)) {
        say("cudaMemcpyAsync: the stream does not exist (destroyed, or never created)");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    if (dev != t_device) {
        say("cudaMemcpyAsync: issued on a stream of device %d while device %d is current", dev, t_device);
        return set_error(cudaErrorInvalidResourceHandle);
    }
    if (!bytes) return cudaSuccess;
    if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice) {
        say("cudaMemcpyAsync: direction %d is not one the backend may use", (int)kind);
        return set_error(cudaErrorInvalidMemcpyDirection);
    }
    const bool ok = submit(s, [dst, src, bytes, kind, dev](cudaStream_t st, issue_mode how) {
        bool pageable = false;
        if (!check_copy(dst, src, bytes, kind, dev, &pageable)) {
            set_error(cudaErrorInvalidValue);
            return false;
        }
        if (pageable && how != ISSUE_NOW) { /* CUDA refuses it in a capture; a graph's host memory must stay pinned */
            say("cudaMemcpyAsync %s of %zu bytes: pageable host memory %s", direction_name(kind), bytes,
                how == ISSUE_CHECK ? "while capturing (CUDA refuses it: cudaErrorStreamCaptureUnsupported)"
                                   : "in a graph launch (it was pinned at the capture: freed since?)");
            set_error(cudaErrorStreamCaptureUnsupported);
            return false;
        }
        if (how == ISSUE_CHECK) return true;
        const std::vector<touch> t = {{src, bytes, false}, {dst, bytes, true}}; /* host ends are not tracked */
        if (pageable) { /* CUDA: the stream's earlier work first, then the copy, before the call returns */
            count(kind == cudaMemcpyHostToDevice ? "h2d (pageable: synchronous)" : "d2h (pageable: synchronous)", 1,
                  bytes);
            enqueue(st, [dst, src, bytes]() { memcpy(dst, src, bytes); }, copy_name(kind), t);
            host_drain(st);
            return true;
        }
        count(direction_name(kind), 1, bytes);
        if (kind == cudaMemcpyDeviceToDevice) {
            enqueue(st, [dst, src, bytes]() { memcpy(dst, src, bytes); }, copy_name(kind), t);
            return true;
        }
        const bool up = kind == cudaMemcpyHostToDevice;
        auto host = std::make_shared<const host_in_flight>(up ? src : (const void *)dst, bytes);
        enqueue(
            st,
            [dst, src, bytes, up, host]() {
                host->check(up ? "HostToDevice" : "DeviceToHost");
                memcpy(dst, src, bytes);
                if (!up) pinned_copied_in(dst, true);
            },
            copy_name(kind), t);
        return true;
    });
    return ok ? cudaSuccess : t_last;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    cudaStream_t s = nullptr; /* the current device's default stream, then waited for */
    int dev;
    if (forbidden_in_capture("cudaMemcpy")) return t_last;
    if (need_context() != cudaSuccess || !resolve_stream(&s, &dev)) return set_error(cudaErrorInvalidDevice);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, s);
    if (e == cudaSuccess) host_drain(s);
    return e;
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t bytes,
                                cudaStream_t s)
{
    int dev = -1;
    if (!resolve_stream(&s, &dev)) {
        say("cudaMemcpyPeerAsync: the stream does not exist (destroyed, or never created)");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    if (!valid_device(dst_device) || !valid_device(src_device)) return set_error(cudaErrorInvalidDevice);
    if (dev != t_device) {
        say("cudaMemcpyPeerAsync: issued on a stream of device %d while device %d is current", dev, t_device);
        return set_error(cudaErrorInvalidResourceHandle);
    }
    if (!bytes) return cudaSuccess;
    const bool ok = submit(s, [=](cudaStream_t st, issue_mode how) {
        /* each end must be memory of the device the call names (the copy may be staged: no peer access needed) */
        const mem_range d = find(dst, bytes), r = find(src, bytes);
        if (d.kind != MEM_DEVICE || d.device != dst_device || !d.inside || r.kind != MEM_DEVICE ||
            r.device != src_device || !r.inside) {
            say("cudaMemcpyPeerAsync of %zu bytes from device %d to device %d: the source is %s of device %d%s, the "
                "destination %s of device %d%s", bytes, src_device, dst_device, kind_name(r.kind), r.device,
                r.inside ? "" : " (out of bounds)", kind_name(d.kind), d.device, d.inside ? "" : " (out of bounds)");
            set_error(cudaErrorInvalidValue);
            return false;
        }
        if (how == ISSUE_CHECK) return true;
        count(may_access(dst_device, src_device) ? "peer (direct)" : "peer (staged)", 1, bytes);
        enqueue(st, [dst, src, bytes]() { memcpy(dst, src, bytes); }, "cudaMemcpyPeerAsync",
                {{src, bytes, false}, {dst, bytes, true}});
        return true;
    });
    return ok ? cudaSuccess : t_last;
}

/* ---- streams and events ------------------------------------------------------------------------------------ */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    if (need_context() != cudaSuccess) return t_last;
    if (flags & ~(unsigned)cudaStreamNonBlocking) return set_error(cudaErrorInvalidValue);
    cudaStream_t n = new CUstream_st;
    n->device = t_device;
    std::lock_guard<std::mutex> l(g_lock);
    give_id(n);
    g_streams.insert(n);
    *s = n;
    return cudaSuccess;
}

/* Work still queued runs first (CUDA lets it complete before the stream's resources go). */
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (forbidden_in_capture("cudaStreamDestroy")) return t_last;
    if (!s || !live_stream(s)) {
        say("cudaStreamDestroy: the stream does not exist (destroyed twice, or the default stream)");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    {
        std::lock_guard<std::mutex> l(g_lock);
        g_streams.erase(s);
        for (cudaEvent_t e : g_events)
            if (e->stream == s) e->stream = nullptr;
    }
    host_drain(s);
    {
        std::lock_guard<std::mutex> l(g_lock);
        std::lock_guard<std::mutex> q(s->queue_lock);
        g_id_top[(size_t)s->id] = s->base + s->queued;
        g_free_ids.push_back(s->id);
    }
    unref(s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    int dev;
    if (forbidden_in_capture("cudaStreamSynchronize")) return t_last;
    if (!resolve_stream(&s, &dev)) {
        say("cudaStreamSynchronize: the stream does not exist (destroyed, or never created)");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    host_drain(s);
    return cudaSuccess;
}

static bool live_event(cudaEvent_t e)
{
    std::lock_guard<std::mutex> l(g_lock);
    return g_events.count(e) != 0;
}

static double clock_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    if (need_context() != cudaSuccess) return t_last;
    cudaEvent_t n = new CUevent_st;
    n->device = t_device;
    std::lock_guard<std::mutex> l(g_lock);
    g_events.insert(n);
    *e = n;
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    if (!live_event(e)) {
        say("cudaEventDestroy: the event does not exist (destroyed twice, or never created)");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    drain_event_stream(e); /* its pending record completes first, as CUDA defers the release */
    {
        std::lock_guard<std::mutex> l(g_lock);
        g_events.erase(e);
    }
    delete e;
    return cudaSuccess;
}

/* The event and the stream exist and share a device. */
static bool check_record(const char *call, cudaEvent_t e, cudaStream_t *s)
{
    int dev;
    if (!live_event(e) || !resolve_stream(s, &dev)) {
        say("%s: the event or the stream does not exist", call);
        set_error(cudaErrorInvalidResourceHandle);
        return false;
    }
    if (e->device != dev) {
        say("%s: an event of device %d recorded on a stream of device %d", call, e->device, dev);
        set_error(cudaErrorInvalidResourceHandle);
        return false;
    }
    return true;
}

/* Queues the event's completion on s: it completes when the stream's earlier work has run. */
static void record_now(cudaEvent_t e, cudaStream_t s)
{
    uint64_t n;
    {
        std::lock_guard<std::mutex> l(g_lock);
        n = ++e->recorded;
        e->stream = s;
    }
    const uint64_t at = enqueue(
        s,
        [e, n]() {
            std::lock_guard<std::mutex> l(g_lock);
            if (e->recorded == n) { /* not recorded again since */
                e->completed = n;
                e->ms = clock_ms();
            }
        },
        "cudaEventRecord");
    std::lock_guard<std::mutex> l(g_lock);
    if (e->recorded == n) {
        e->position = at;
        e->clock = s->clock;
        set_place(e->clock, s->id, s->base + at);
    }
}

/* The stream of the event's last record (a reference taken: the caller unrefs it), the record's place in its queue
 * and its clock; NULL for an event never recorded. */
static cudaStream_t last_record(cudaEvent_t e, uint64_t *upto, vclock *clock)
{
    std::lock_guard<std::mutex> l(g_lock);
    cudaStream_t s = e->stream;
    *upto = e->position;
    *clock = e->clock;
    if (s) s->refs++;
    return s;
}

/* The stream s waits for the event's last record (at the time of the call; one never recorded: no wait), as CUDA's
 * cross-stream dependency: when s's queue reaches this point, the recording stream's queue runs up to the record
 * first. A stream that waits on one that waits on it would deadlock, here as on a GPU. */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    int dev;
    if (flags) return set_error(cudaErrorInvalidValue);
    if (!live_event(e) || !resolve_stream(&s, &dev)) {
        say("cudaStreamWaitEvent: the event or the stream does not exist");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    if (capturing(s)) { /* a fork or join of a multi-stream capture: not modelled, and not used by the trainer */
        say("cudaStreamWaitEvent on a capturing stream: the stand-in does not model multi-stream captures");
        s->capture_bad = true;
        return set_error(cudaErrorStreamCaptureUnsupported);
    }
    uint64_t upto;
    vclock c;
    cudaStream_t t = last_record(e, &upto, &c);
    if (!t) return cudaSuccess;
    {
        std::lock_guard<std::mutex> l(g_lock);
        merge(s->clock, c); /* s's next ops come after the record */
    }
    if (t == s) { /* the stream's own order already keeps it */
        unref(t);
        return cudaSuccess;
    }
    enqueue(
        s,
        [t, upto]() {
            drain_upto(t, upto);
            unref(t);
        },
        "cudaStreamWaitEvent");
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!check_record("cudaEventRecord", e, &s)) return t_last;
    if (capturing(s)) {
        say("cudaEventRecord on a capturing stream: the record would not be part of the graph, so the event would "
            "keep its old time at every launch (record it with cudaEventRecordExternal)");
        s->capture_bad = true;
        return set_error(cudaErrorStreamCaptureUnsupported);
    }
    record_now(e, s);
    return cudaSuccess;
}

/* cudaEventRecordExternal: an event record node of the capture, recorded at every launch of the graph. */
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned flags)
{
    if (flags == cudaEventRecordDefault) return cudaEventRecord(e, s);
    if (flags != cudaEventRecordExternal) return set_error(cudaErrorInvalidValue);
    if (!check_record("cudaEventRecordWithFlags", e, &s)) return t_last;
    if (!capturing(s)) {
        say("cudaEventRecordWithFlags: cudaEventRecordExternal outside a capture (CUDA: invalid)");
        return set_error(cudaErrorInvalidValue);
    }
    submit(s, [e](cudaStream_t st, issue_mode how) {
        cudaStream_t t = st;
        if (!check_record("cudaEventRecordWithFlags (graph node)", e, &t)) return false;
        if (how != ISSUE_CHECK) record_now(e, st);
        return true;
    });
    return cudaSuccess;
}

/* Runs the recording stream up to the event's last record, and no further (as a GPU, which need not have run what
 * was queued after it). */
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (forbidden_in_capture("cudaEventSynchronize")) return t_last;
    if (!live_event(e)) return set_error(cudaErrorInvalidResourceHandle);
    uint64_t upto;
    vclock c;
    cudaStream_t s = last_record(e, &upto, &c);
    if (s) {
        drain_upto(s, upto);
        unref(s);
        host_saw(c);
    }
    return cudaSuccess;
}

/* Never runs the stream: a record still queued answers cudaErrorNotReady (not kept as the last error, as in CUDA),
 * so a caller that polls must also wait somewhere. An event never recorded has completed. */
cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (forbidden_in_capture("cudaEventQuery")) return t_last;
    if (!live_event(e)) return set_error(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> l(g_lock);
    if (e->completed != e->recorded) return cudaErrorNotReady;
    merge(g_host, e->clock); /* the host has seen the record complete */
    return cudaSuccess;
}

/* Both events must have completed: cudaErrorNotReady otherwise (a missing wait), as CUDA says. */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!live_event(a) || !live_event(b)) return set_error(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> l(g_lock);
    if (!a->recorded || !b->recorded) return set_error(cudaErrorInvalidResourceHandle);
    if (a->completed != a->recorded || b->completed != b->recorded) {
        say("cudaEventElapsedTime: an event has not completed (its stream was not waited for)");
        return set_error(cudaErrorNotReady);
    }
    *ms = (float)(b->ms - a->ms);
    return cudaSuccess;
}

/* ---- graphs ---------------------------------------------------------------------------------------------- */

static std::set<cudaGraph_t> g_graphs;
static std::set<cudaGraphExec_t> g_execs;

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
    int dev;
    if ((unsigned)mode > cudaStreamCaptureModeRelaxed) return set_error(cudaErrorInvalidValue);
    if (!s || !resolve_stream(&s, &dev)) {
        say("cudaStreamBeginCapture: %s", s ? "the stream does not exist" : "the default (legacy) stream cannot be captured");
        return set_error(s ? cudaErrorInvalidResourceHandle : cudaErrorStreamCaptureUnsupported);
    }
    if (t_capturing || capturing(s)) {
        say("cudaStreamBeginCapture: %s", t_capturing ? "this thread is capturing a stream already"
                                                      : "the stream is being captured already");
        return set_error(cudaErrorIllegalState);
    }
    {
        std::lock_guard<std::mutex> l(s->queue_lock);
        s->capture = new CUgraph_st{dev, {}};
        s->capture_bad = false;
    }
    t_capturing = s;
    return cudaSuccess;
}

/* The capture's graph, or NULL and cudaErrorStreamCaptureInvalidated where a call during it failed. */
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    int dev;
    *g = nullptr;
    if (!s || !resolve_stream(&s, &dev) || !capturing(s)) {
        say("cudaStreamEndCapture: the stream is not being captured");
        return set_error(cudaErrorIllegalState);
    }
    if (t_capturing != s) {
        say("cudaStreamEndCapture: called from another thread than the one that began the capture");
        return set_error(cudaErrorStreamCaptureWrongThread);
    }
    CUgraph_st *graph;
    {
        std::lock_guard<std::mutex> l(s->queue_lock);
        graph = s->capture;
        s->capture = nullptr;
    }
    t_capturing = nullptr;
    if (s->capture_bad) {
        delete graph;
        return set_error(cudaErrorStreamCaptureInvalidated);
    }
    std::lock_guard<std::mutex> l(g_lock);
    g_graphs.insert(graph);
    *g = graph;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
    if (flags) return set_error(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> l(g_lock);
    if (!g_graphs.count(g)) {
        say("cudaGraphInstantiate: the graph does not exist");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    *x = new CUgraphExec_st{g->device, g->nodes};
    g_execs.insert(*x);
    return cudaSuccess;
}

/* Issues every node again, in capture order, on s: each one checked as when it was captured. */
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s)
{
    int dev;
    {
        std::lock_guard<std::mutex> l(g_lock);
        if (!g_execs.count(x)) {
            say("cudaGraphLaunch: the executable graph does not exist");
            return set_error(cudaErrorInvalidResourceHandle);
        }
    }
    if (!resolve_stream(&s, &dev)) return set_error(cudaErrorInvalidResourceHandle);
    if (dev != x->device || dev != t_device) {
        say("cudaGraphLaunch: a graph of device %d launched on a stream of device %d with device %d current",
            x->device, dev, t_device);
        return set_error(cudaErrorInvalidResourceHandle);
    }
    if (capturing(s)) {
        say("cudaGraphLaunch: on a stream being captured (the stand-in has no child graphs)");
        return set_error(cudaErrorStreamCaptureUnsupported);
    }
    count("cudaGraphLaunch", 1, x->nodes.size());
    for (size_t i = 0; i < x->nodes.size(); i++)
        if (!x->nodes[i](s, ISSUE_GRAPH)) {
            say("cudaGraphLaunch: node %zu of %zu failed the check above: the graph refers to memory that changed "
                "since its capture (on a GPU: an illegal address, or silently wrong data)", i + 1, x->nodes.size());
            return set_error(cudaErrorIllegalAddress);
        }
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
    std::lock_guard<std::mutex> l(g_lock);
    if (!g_execs.erase(x)) {
        say("cudaGraphExecDestroy: the executable graph does not exist (destroyed twice?)");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    delete x; /* the work it queued holds its own copies of the nodes' calls */
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    std::lock_guard<std::mutex> l(g_lock);
    if (!g_graphs.erase(g)) {
        say("cudaGraphDestroy: the graph does not exist (destroyed twice?)");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    delete g;
    return cudaSuccess;
}

/* ---- the report ------------------------------------------------------------------------------------------- */

namespace tt_sim {

struct counter {
    uint64_t calls, amount;
};
static std::mutex g_count_lock;
static std::map<std::string, counter> g_counts;

void count(const char *what, uint64_t calls, uint64_t amount)
{
    if (!cfg().report || !*cfg().report) return;
    std::lock_guard<std::mutex> l(g_count_lock);
    counter &c = g_counts[what];
    c.calls += calls;
    c.amount += amount;
}

/* One line per counter: name, calls, and threads (kernels), bytes (copies, allocations) or flops (sgemm). */
static void write_report(void)
{
    const char *path = cfg().report;
    FILE *f = strcmp(path, "-") == 0 ? stderr : fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cuda stand-in: TT_SIM_REPORT: %s: %s\n", path, strerror(errno));
        return;
    }
    std::lock_guard<std::mutex> l(g_count_lock);
    fprintf(f, "# cuda stand-in counters: name, calls, amount (kernels: threads launched; copies and allocations: "
               "bytes; sgemm: flops; collectives: bytes per rank)\n");
    for (const auto &kv : g_counts)
        fprintf(f, "%s\t%llu\t%llu\n", kv.first.c_str(), (unsigned long long)kv.second.calls,
                (unsigned long long)kv.second.amount);
    if (f != stderr && fclose(f) != 0) fprintf(stderr, "cuda stand-in: TT_SIM_REPORT: %s: write failed\n", path);
}

} /* namespace tt_sim */
