/* node.c — the ranks of a job and their collectives (see tt_node.h). The only file that knows MPI: built with Open
 * MPI when CMake finds it (TT_WITH_MPI); without it, a job is always one rank and the collectives are copies.
 *
 * MPI only ever moves bytes here (Alltoallv, Allgatherv, Gatherv, Bcast, Allgather, a bitwise-OR Allreduce of
 * flags): every floating-point addition is ours, in rank order, so the combine is the same whichever algorithm the
 * library picks. Errors return (MPI_ERRORS_RETURN) as one line naming the call; a rank that dies is the launcher's to
 * notice (mpirun ends the job and names the rank). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tt_math.h"
#include "tt_node.h"
#include "tt_signal.h"

#ifdef TT_WITH_MPI
#include <mpi.h>
#endif

const char *const tt_node_reduce_names[TT_NODE_REDUCE_COUNT + 1] = {"allreduce", "ps", NULL};

int tt_node_reduce_parse(const char *name, tt_node_reduce *r)
{
    for (int i = 0; i < TT_NODE_REDUCE_COUNT; i++)
        if (strcmp(name, tt_node_reduce_names[i]) == 0) {
            *r = (tt_node_reduce)i;
            return 0;
        }
    return -1;
}

const char *tt_node_reduce_name(tt_node_reduce r)
{
    return (unsigned)r < TT_NODE_REDUCE_COUNT ? tt_node_reduce_names[r] : "?";
}

static tt_node g_world = {0, 1, 1, 0, 0.0, NULL, "localhost"};

tt_node *tt_node_world(void) { return &g_world; }

int tt_node_speaks(void) { return g_world.rank == 0; }

int tt_node_launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

void tt_node_slice(size_t P, int K, int r, size_t *lo, size_t *n)
{
    const size_t S = ((P + (size_t)K - 1) / (size_t)K + 15) & ~(size_t)15;
    *lo = (size_t)r * S < P ? (size_t)r * S : P;
    *n = *lo + S < P ? S : P - *lo;
}

#ifdef TT_WITH_MPI
static int g_agreed; /* the failure this process ends with was agreed by every rank (tt_node_agree) */

static MPI_Comm g_comm_world;

/* The rank-order sum of K >= 2 received slices of n floats (recv[j * stride ..] from rank j) into out. */
static void sum_rank_order(float *restrict out, const float *recv, size_t stride, int K, size_t n)
{
    const float *restrict r0 = recv, *restrict r1 = recv + stride; /* K >= 2 */
    for (size_t k = 0; k < n; k++) out[k] = tt_add(r0[k], r1[k]);
    for (int j = 2; j < K; j++) {
        const float *restrict rj = recv + (size_t)j * stride;
        for (size_t k = 0; k < n; k++) out[k] = tt_add(out[k], rj[k]);
    }
}

static MPI_Comm comm_of(const tt_node *nd) { return *(MPI_Comm *)nd->comm; }

/* One line for a failed MPI call. */
static tt_status mpi_fail(tt_error *err, int rc, const char *call)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
    return tt_fail(err, TT_ERR_DEVICE, "cross-node: %s failed on rank %d: %s (a rank may have died)", call,
                   g_world.rank, text);
}

/* MPI counts are ints: a buffer over 2^31 - 1 elements is refused rather than truncated. */
static int fits_int(size_t n) { return n <= (size_t)0x7fffffff; }

tt_status tt_node_init(int *argc, char ***argv, tt_error *err)
{
    if (!tt_node_launched()) return TT_OK;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return tt_fail(err, TT_ERR_DEVICE, "MPI_Init_thread failed");
    g_world.mpi = 1;
    if (provided < MPI_THREAD_SERIALIZED)
        return tt_fail(err, TT_ERR_DEVICE,
                       "this MPI gives thread level %s, towertrain needs MPI_THREAD_SERIALIZED: the combine runs on "
                       "whichever crew thread reaches it last",
                       provided == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE" : "MPI_THREAD_FUNNELED");
    MPI_Comm_dup(MPI_COMM_WORLD, &g_comm_world);
    MPI_Comm_set_errhandler(g_comm_world, MPI_ERRORS_RETURN);
    g_world.comm = &g_comm_world;
    MPI_Comm_rank(g_comm_world, &g_world.rank);
    MPI_Comm_size(g_comm_world, &g_world.size);
    tt_report_rank(g_world.rank, g_world.size); /* the reporter learns who speaks from this layer, not by asking up */
    if (g_world.size > TT_MAX_RANKS)
        return tt_fail(err, TT_ERR_ARG, "mpirun started %d ranks; a job has at most %d", g_world.size, TT_MAX_RANKS);
    MPI_Comm local;
    if (MPI_Comm_split_type(g_comm_world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
        MPI_Comm_size(local, &g_world.local_size);
        MPI_Comm_free(&local);
    }
    int len = 0;
    char name[MPI_MAX_PROCESSOR_NAME];
    if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS) snprintf(g_world.host, sizeof g_world.host, "%.63s", name);
    /* clocks: every rank reads its clock as the barrier releases; rank 0's reading is the reference. Every collective
     * from MPI_Comm_dup to this Bcast is the start-up every build since the first release makes, in this order: a
     * build that changed it would hang against another before tt_node_check_build could tell them apart */
    double t0 = 0;
    for (int i = 0; i < 3; i++) { /* the last of three: the first barriers also set up the connections */
        MPI_Barrier(g_comm_world);
        t0 = tt_now();
    }
    double ref = t0;
    MPI_Bcast(&ref, 1, MPI_DOUBLE, 0, g_comm_world);
    g_world.clock_offset = ref - t0;
    return TT_OK;
}

int tt_node_finish(int rc)
{
    if (!g_world.mpi) return rc;
    if (rc != 0 && !g_agreed && g_world.size > 1) {
        fflush(stdout);
        MPI_Abort(g_comm_world, rc); /* the other ranks may be waiting in a collective: end the whole job */
    }
    if (g_world.comm) MPI_Comm_free(&g_comm_world);
    MPI_Finalize();
    return rc;
}

/* A message a sub-job's agreement made already ("rank 1: probe: stopped ..." on the ranks of bench's row): it names
 * its rank, and the job's agreement passes it on as it is, not as "rank 0: rank 1: ...". The sub-job's ranks are the
 * job's first ones, in the job's order, so its rank numbers are the job's. */
static int names_a_rank(const char *msg)
{
    if (strncmp(msg, "rank ", 5) != 0) return 0;
    const char *p = msg + 5;
    while (*p >= '0' && *p <= '9') p++;
    return p > msg + 5 && p[0] == ':' && p[1] == ' ';
}

/* The MPI halves of the collectives below: each is called only with more than one rank. */
static tt_status mpi_agree(tt_node *nd, tt_status s, tt_error *err)
{
    /* this record's layout (an int32 and 600 bytes of text) is part of the start-up protocol: the first release
     * agrees with it on a mismatched command, so a build of another layout would hang against it there */
    enum { MSG = 600 };
    struct {
        int32_t status;
        char msg[MSG];
    } mine, *all = (void *)tt_malloc((size_t)nd->size * sizeof mine);
    memset(&mine, 0, sizeof mine);
    mine.status = (int32_t)s;
    if (s) snprintf(mine.msg, sizeof mine.msg, "%.599s", err->msg);
    if (!all) { /* this rank cannot take part: leaving the others in the collective would hang the job */
        tt_report_error("out of memory for the ranks' statuses: aborting the job");
        MPI_Abort(comm_of(nd), 1);
    }
    int rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, comm_of(nd));
    tt_status out = TT_OK;
    if (rc != MPI_SUCCESS) {
        out = mpi_fail(err, rc, "MPI_Allgather (agreeing on every rank's status)");
    } else {
        int failed = 0, same = 1;
        for (int r = 0; r < nd->size; r++) {
            failed += all[r].status != 0;
            same = same && all[r].status == all[0].status;
        }
        for (int r = 0; r < nd->size; r++)
            if (all[r].status) {
                all[r].msg[MSG - 1] = '\0';
                /* every rank alike (a stop by signal): rank 0's words; a sub-job's agreed line: as it is */
                if ((failed == nd->size && same) || names_a_rank(all[r].msg))
                    out = tt_fail(err, (tt_status)all[r].status, "%s", all[r].msg);
                else
                    out = tt_fail(err, (tt_status)all[r].status, "rank %d: %s", r, all[r].msg);
                if (nd->comm == g_world.comm) {
                    g_agreed = 1;
                    tt_report_agreed();
                }
                break;
            }
    }
    tt_free(all);
    return out;
}

/* counts and displacements of every rank's slice */
static void slice_table(size_t P, int K, int *cnt, int *dsp)
{
    for (int j = 0; j < K; j++) {
        size_t jl, jn;
        tt_node_slice(P, K, j, &jl, &jn);
        cnt[j] = (int)jn;
        dsp[j] = (int)jl;
    }
}

static tt_status mpi_reduce_scatter(tt_node *nd, const float *sum, float *recv, float *out, size_t P, tt_error *err)
{
    const int K = nd->size;
    if (K < 2 || K > TT_MAX_RANKS) return tt_fail(err, TT_ERR_ARG, "cross-node: %d ranks", K);
    size_t lo, n, S;
    tt_node_slice(P, K, 0, &lo, &S); /* the slice stride: rank 0's is the largest */
    tt_node_slice(P, K, nd->rank, &lo, &n);
    if (!fits_int(P) || !fits_int((size_t)K * S))
        return tt_fail(err, TT_ERR_DEVICE, "cross-node: %zu parameters are more than one MPI call can move", P);
    int sc[TT_MAX_RANKS], sd[TT_MAX_RANKS], rcnt[TT_MAX_RANKS], rd[TT_MAX_RANKS];
    slice_table(P, K, sc, sd); /* my sum's slice j goes to rank j */
    for (int j = 0; j < K; j++) {
        rcnt[j] = (int)n; /* rank j's slice of mine arrives at recv[j * S] */
        rd[j] = (int)((size_t)j * S);
    }
    int rc = MPI_Alltoallv(sum, sc, sd, MPI_FLOAT, recv, rcnt, rd, MPI_FLOAT, comm_of(nd));
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "MPI_Alltoallv (reduce-scatter of the node sums)");
    sum_rank_order(out, recv, S, K, n);
    return TT_OK;
}

static tt_status mpi_allgather_slices(tt_node *nd, float *buf, size_t P, tt_error *err)
{
    if (!fits_int(P)) return tt_fail(err, TT_ERR_DEVICE, "cross-node: %zu parameters are more than one MPI call can move", P);
    int cnt[TT_MAX_RANKS], dsp[TT_MAX_RANKS];
    slice_table(P, nd->size, cnt, dsp);
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, dsp, MPI_FLOAT, comm_of(nd));
    return rc == MPI_SUCCESS ? TT_OK : mpi_fail(err, rc, "MPI_Allgatherv (gathering the slices)");
}

static tt_status mpi_gather_slices(tt_node *nd, const float *mine, float *full, size_t P, tt_error *err)
{
    if (!fits_int(P)) return tt_fail(err, TT_ERR_DEVICE, "cross-node: %zu parameters are more than one MPI call can move", P);
    int cnt[TT_MAX_RANKS], dsp[TT_MAX_RANKS];
    slice_table(P, nd->size, cnt, dsp);
    int rc = MPI_Gatherv(mine, cnt[nd->rank], MPI_FLOAT, full, cnt, dsp, MPI_FLOAT, 0, comm_of(nd));
    return rc == MPI_SUCCESS ? TT_OK : mpi_fail(err, rc, "MPI_Gatherv (the optimizer state's shards)");
}

static tt_status mpi_allgather(tt_node *nd, const void *mine, void *all, size_t bytes, tt_error *err)
{
    if (!fits_int(bytes)) return tt_fail(err, TT_ERR_DEVICE, "cross-node: %zu bytes per rank is too many", bytes);
    int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, comm_of(nd));
    return rc == MPI_SUCCESS ? TT_OK : mpi_fail(err, rc, "MPI_Allgather");
}

static tt_status mpi_bcast(tt_node *nd, void *buf, size_t bytes, tt_error *err)
{
    const size_t piece = (size_t)1 << 30; /* counts are ints: a large checkpoint goes in pieces */
    for (size_t off = 0; off < bytes; off += piece) {
        size_t n = bytes - off < piece ? bytes - off : piece;
        int rc = MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, 0, comm_of(nd));
        if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "MPI_Bcast");
    }
    return TT_OK;
}

static tt_status mpi_or(tt_node *nd, uint32_t *v, int n, tt_error *err)
{
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_UINT32_T, MPI_BOR, comm_of(nd));
    return rc == MPI_SUCCESS ? TT_OK : mpi_fail(err, rc, "MPI_Allreduce (agreeing on the step's halt flags)");
}

static tt_status mpi_idle_barrier(tt_node *nd, tt_error *err)
{
    MPI_Request req;
    int rc = MPI_Ibarrier(comm_of(nd), &req), done = 0;
    const struct timespec nap = {0, 1000000}; /* 1 ms */
    while (rc == MPI_SUCCESS && !done) {
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done) nanosleep(&nap, NULL);
    }
    return rc == MPI_SUCCESS ? TT_OK : mpi_fail(err, rc, "MPI_Ibarrier");
}

static tt_status mpi_split(tt_node *nd, int k, tt_node *sub, tt_error *err)
{
    MPI_Comm *c = (MPI_Comm *)tt_malloc(sizeof(MPI_Comm));
    if (!c) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    int in = nd->rank < k;
    int rc = MPI_Comm_split(comm_of(nd), in ? 0 : MPI_UNDEFINED, nd->rank, c);
    if (rc != MPI_SUCCESS || !in) {
        tt_free(c);
        return rc != MPI_SUCCESS ? mpi_fail(err, rc, "MPI_Comm_split") : TT_OK; /* not in: size 0, sits out */
    }
    MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
    *sub = *nd;
    sub->comm = c;
    MPI_Comm_rank(*c, &sub->rank);
    MPI_Comm_size(*c, &sub->size);
    return TT_OK;
}

static void mpi_comm_free(tt_node *sub)
{
    MPI_Comm_free((MPI_Comm *)sub->comm);
    tt_free(sub->comm);
}

static tt_status mpi_pingpong(tt_node *nd, int peer, size_t bytes, int reps, double *one_way, tt_error *err)
{
    if (!fits_int(bytes) || reps < 1) return tt_fail(err, TT_ERR_ARG, "ping-pong of %zu bytes", bytes);
    char *buf = (char *)tt_calloc(bytes ? bytes : 1, 1);
    double *v = (double *)tt_calloc((size_t)reps, sizeof(double));
    tt_status s = TT_OK;
    if (!buf || !v) s = tt_fail(err, TT_ERR_NOMEM, "ping-pong: out of memory for %zu bytes", bytes);
    const int other = nd->rank == 0 ? peer : 0;
    for (int i = -1; !s && i < reps; i++) { /* i = -1 warms the connection up */
        double t0 = tt_now();
        int rc;
        if (nd->rank == 0) {
            rc = MPI_Send(buf, (int)bytes, MPI_BYTE, other, 7, comm_of(nd));
            if (rc == MPI_SUCCESS) rc = MPI_Recv(buf, (int)bytes, MPI_BYTE, other, 7, comm_of(nd), MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Recv(buf, (int)bytes, MPI_BYTE, other, 7, comm_of(nd), MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS) rc = MPI_Send(buf, (int)bytes, MPI_BYTE, other, 7, comm_of(nd));
        }
        if (rc != MPI_SUCCESS) s = mpi_fail(err, rc, "ping-pong");
        if (i >= 0) v[i] = (tt_now() - t0) / 2;
    }
    if (!s) *one_way = tt_median(v, (size_t)reps);
    tt_free(buf);
    tt_free(v);
    return s;
}

/* The MPI half of a collective (only ever reached with more than one rank). */
#define MPI_PART(call) (call)

#else /* a build without MPI: every job is one rank, so the MPI halves are never reached */

tt_status tt_node_init(int *argc, char ***argv, tt_error *err)
{
    (void)argc;
    (void)argv;
    const char *k = getenv("OMPI_COMM_WORLD_SIZE");
    if (k && strcmp(k, "1") != 0)
        return tt_fail(err, TT_ERR_ARG,
                       "mpirun started %s ranks, but this towertrain was built without MPI (install libopenmpi-dev "
                       "and rebuild: CMake then finds it)",
                       k);
    return TT_OK;
}

int tt_node_finish(int rc) { return rc; }

static tt_status no_mpi(tt_error *err) { return tt_fail(err, TT_ERR_DEVICE, "this towertrain was built without MPI"); }
#define MPI_PART(call) no_mpi(err)
#define mpi_comm_free(sub) ((void)(sub))

#endif

/* ---- the collectives: one rank is a copy (or nothing), more go through MPI ------------------------------------- */

tt_status tt_node_agree(tt_node *nd, tt_status s, tt_error *err)
{
    if (nd->size <= 1 || !nd->mpi) return s;
    return MPI_PART(mpi_agree(nd, s, err));
}

int tt_node_stop_signal(tt_node *nd)
{
    const int mine = tt_signal_caught();
    if (nd->size <= 1) return mine;
    uint32_t bits = mine > 0 && mine < 32 ? 1u << mine : 0;
    tt_error e;
    if (tt_node_or(nd, &bits, 1, &e)) return mine;
    for (int sig = 1; sig < 32; sig++)
        if (bits & (1u << sig)) {
            tt_status_stop_signal(sig);
            return sig;
        }
    return 0;
}

void tt_pending_fail(tt_pending *p, tt_status s, const tt_error *err)
{
    if (s && !p->s) {
        p->s = s;
        p->err = *err;
    }
}

tt_status tt_pending_agree(tt_node *nd, tt_pending *p, tt_status s, tt_error *err)
{
    tt_pending_fail(p, s, err);
    tt_error e = p->err;
    if ((s = tt_node_agree(nd, p->s, &e))) *err = e; /* the same failure on every rank now */
    p->s = TT_OK;
    return s;
}

/* One rank's words for an option, as tt_node_same_words exchanges them: the whole value's length and FNV-1a hash
 * (what is compared) and its first characters (what is shown). */
enum { WORD_SHOWN = 64 };
typedef struct node_word {
    uint32_t given, len;
    uint64_t hash;
    char text[WORD_SHOWN + 8];
} node_word;

static void word_of(const char *v, node_word *w)
{
    memset(w, 0, sizeof *w);
    if (!v) return;
    w->given = 1;
    w->hash = 0xcbf29ce484222325ull;
    for (const char *p = v; *p; p++) w->hash = (w->hash ^ (unsigned char)*p) * 0x100000001b3ull;
    const size_t len = strlen(v);
    w->len = len > 0xffffffffu ? 0xffffffffu : (uint32_t)len;
    snprintf(w->text, sizeof w->text, "%.*s%s", WORD_SHOWN, v, len > WORD_SHOWN ? "..." : "");
}

static void word_say(const node_word *w, char *out, size_t len)
{
    char esc[4 * WORD_SHOWN + 16];
    tt_escape(w->text, esc, sizeof esc);
    snprintf(out, len, "%s", w->given ? esc : "not given");
}

tt_status tt_node_same_words(tt_node *nd, const char *who, const char *why, const tt_node_word *w, int n,
                             tt_error *err)
{
    if (nd->size <= 1 || !nd->mpi) return TT_OK;
    TT_ASSERT(n >= 1 && n <= TT_NODE_WORDS);
    node_word mine[TT_NODE_WORDS];
    for (int i = 0; i < n; i++) word_of(w[i].value, &mine[i]);
    /* room for every rank's words without an allocation that one rank could fail alone (the others would wait in
     * the collective): the main thread's, before any rank branches on the options */
    static node_word all[TT_MAX_RANKS * TT_NODE_WORDS];
    tt_status s = tt_node_allgather(nd, mine, all, (size_t)n * sizeof *mine, err);
    for (int i = 0; !s && i < n; i++)
        for (int r = 1; !s && r < nd->size; r++) {
            const node_word *a = &all[i], *b = &all[(size_t)r * (size_t)n + (size_t)i];
            if (a->given == b->given && a->len == b->len && a->hash == b->hash) continue;
            char at0[4 * WORD_SHOWN + 32], atr[4 * WORD_SHOWN + 32];
            word_say(a, at0, sizeof at0);
            word_say(b, atr, sizeof atr);
            s = tt_fail(err, TT_ERR_ARG, "%s: the ranks disagree on %s: rank 0 %s, rank %d %s (%s)", who, w[i].name,
                        at0, r, atr, why);
        }
    return tt_node_agree(nd, s, err);
}

tt_status tt_node_reduce_scatter(tt_node *nd, const float *sum, float *recv, float *out, size_t P, tt_error *err)
{
    if (nd->size <= 1) {
        memcpy(out, sum, P * sizeof(float));
        return TT_OK;
    }
    return MPI_PART(mpi_reduce_scatter(nd, sum, recv, out, P, err));
}

tt_status tt_node_allgather_slices(tt_node *nd, float *buf, size_t P, tt_error *err)
{
    return nd->size <= 1 ? TT_OK : MPI_PART(mpi_allgather_slices(nd, buf, P, err));
}

tt_status tt_node_gather_slices(tt_node *nd, const float *mine, float *full, size_t P, tt_error *err)
{
    if (nd->size <= 1) {
        memcpy(full, mine, P * sizeof(float));
        return TT_OK;
    }
    return MPI_PART(mpi_gather_slices(nd, mine, full, P, err));
}

tt_status tt_node_allgather(tt_node *nd, const void *mine, void *all, size_t bytes, tt_error *err)
{
    if (nd->size <= 1) {
        memcpy(all, mine, bytes);
        return TT_OK;
    }
    return MPI_PART(mpi_allgather(nd, mine, all, bytes, err));
}

tt_status tt_node_sum(tt_node *nd, double *v, int n, tt_error *err)
{
    TT_ASSERT(n >= 1 && n <= 4);
    if (nd->size <= 1) return TT_OK;
    double mine[4], all[4 * TT_MAX_RANKS];
    memcpy(mine, v, (size_t)n * sizeof(double));
    tt_status s = tt_node_allgather(nd, mine, all, (size_t)n * sizeof(double), err);
    if (s) return s;
    for (int i = 0; i < n; i++) {
        v[i] = 0;
        for (int r = 0; r < nd->size; r++) v[i] += all[r * n + i]; /* rank order */
    }
    return TT_OK;
}

tt_status tt_node_bcast(tt_node *nd, void *buf, size_t bytes, tt_error *err)
{
    return nd->size <= 1 ? TT_OK : MPI_PART(mpi_bcast(nd, buf, bytes, err));
}

tt_status tt_node_or(tt_node *nd, uint32_t *v, int n, tt_error *err)
{
    return nd->size <= 1 ? TT_OK : MPI_PART(mpi_or(nd, v, n, err));
}

tt_status tt_node_idle_barrier(tt_node *nd, tt_error *err)
{
    return nd->size <= 1 ? TT_OK : MPI_PART(mpi_idle_barrier(nd, err));
}

tt_status tt_node_split(tt_node *nd, int k, tt_node *sub, tt_error *err)
{
    memset(sub, 0, sizeof *sub);
    if (k < 1 || k > (nd->size > 1 ? nd->size : 1))
        return tt_fail(err, TT_ERR_ARG, "%d ranks of a job of %d", k, nd->size);
    if (nd->size <= 1 || !nd->mpi) {
        *sub = *nd;
        sub->comm = NULL;
        return TT_OK;
    }
    return MPI_PART(mpi_split(nd, k, sub, err));
}

void tt_node_free(tt_node *sub)
{
    if (sub->comm && sub->comm != g_world.comm) mpi_comm_free(sub);
    memset(sub, 0, sizeof *sub);
}

tt_status tt_node_pingpong(tt_node *nd, int peer, size_t bytes, int reps, double *one_way, tt_error *err)
{
    *one_way = 0;
    if (nd->size <= 1 || peer <= 0 || peer >= nd->size || (nd->rank != 0 && nd->rank != peer)) return TT_OK;
    return MPI_PART(mpi_pingpong(nd, peer, bytes, reps, one_way, err));
}
