/* test_safe_write.c — the order of a checkpoint's safe write (tt_checkpoint_write, docs/checkpoints.md): every byte
 * of the new file written, then the file fsync'd, then renamed over the path, then the path's directory fsync'd.
 * No test can crash the machine between two calls, so the order is what is checked: this executable is linked with
 * `-Wl,--wrap=` for write, pwrite, fsync, fdatasync, close and rename (tests/CMakeLists.txt), so every such call the
 * library makes passes through a recorder here first — the file each one touched (device and inode, from fstat),
 * its index in the sequence — and then on to the C library. A write whose fsync was dropped, a rename moved before
 * the fsync, a directory fsync dropped or aimed at another directory: each breaks one of the assertions below.
 * Not for: the file's contents (test_checkpoint.c) or what a crash leaves (test_cli.c's kill -9 runs). */
#include <pthread.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "tt_checkpoint.h"
#include "tt_test.h"
#include "tt_train.h"

/* ---- the recorder --------------------------------------------------------------------------------------------- */

typedef enum { EV_WRITE, EV_SYNC, EV_CLOSE, EV_RENAME } ev_kind;

typedef struct io_event {
    ev_kind kind;
    dev_t dev;
    ino_t ino;  /* the file written, synced or closed; for a rename, the file now at the new name */
    int is_dir; /* a sync of a directory */
    char to[512]; /* rename: the new name */
} io_event;

enum { MAX_EVENTS = 1 << 14 };
static io_event g_ev[MAX_EVENTS];
static size_t g_n;
static int g_on;          /* recording: only around the code under test (Check's own writes are not recorded) */
static int g_overflow;    /* more events than room: the test fails rather than judge a cut sequence */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t off);
int __real_fsync(int fd);
int __real_fdatasync(int fd);
int __real_close(int fd);
int __real_rename(const char *from, const char *to);
ssize_t __wrap_write(int fd, const void *buf, size_t n);
ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off);
int __wrap_fsync(int fd);
int __wrap_fdatasync(int fd);
int __wrap_close(int fd);
int __wrap_rename(const char *from, const char *to);

static void record_fd(ev_kind kind, int fd)
{
    struct stat st;
    if (!__atomic_load_n(&g_on, __ATOMIC_SEQ_CST) || fstat(fd, &st) != 0) return;
    const io_event ev = {.kind = kind, .dev = st.st_dev, .ino = st.st_ino, .is_dir = S_ISDIR(st.st_mode)};
    pthread_mutex_lock(&g_mu);
    if (g_n == MAX_EVENTS) g_overflow = 1;
    else g_ev[g_n++] = ev;
    pthread_mutex_unlock(&g_mu);
}

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
    record_fd(EV_WRITE, fd);
    return __real_write(fd, buf, n);
}

ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    record_fd(EV_WRITE, fd);
    return __real_pwrite(fd, buf, n, off);
}

int __wrap_fsync(int fd)
{
    const int r = __real_fsync(fd); /* recorded once done: the data are on disk from here on */
    if (r == 0) record_fd(EV_SYNC, fd);
    return r;
}

int __wrap_fdatasync(int fd)
{
    const int r = __real_fdatasync(fd);
    if (r == 0) record_fd(EV_SYNC, fd);
    return r;
}

int __wrap_close(int fd)
{
    record_fd(EV_CLOSE, fd);
    return __real_close(fd);
}

int __wrap_rename(const char *from, const char *to)
{
    const int r = __real_rename(from, to);
    struct stat st;
    if (r == 0 && __atomic_load_n(&g_on, __ATOMIC_SEQ_CST) && lstat(to, &st) == 0) {
        pthread_mutex_lock(&g_mu);
        if (g_n == MAX_EVENTS) g_overflow = 1;
        else {
            io_event *e = &g_ev[g_n++];
            memset(e, 0, sizeof *e);
            e->kind = EV_RENAME;
            e->dev = st.st_dev;
            e->ino = st.st_ino;
            snprintf(e->to, sizeof e->to, "%s", to);
        }
        pthread_mutex_unlock(&g_mu);
    }
    return r;
}

static void record_start(void)
{
    g_n = 0;
    g_overflow = 0;
    __atomic_store_n(&g_on, 1, __ATOMIC_SEQ_CST);
}

static void record_stop(void) { __atomic_store_n(&g_on, 0, __ATOMIC_SEQ_CST); }

/* ---- the order ------------------------------------------------------------------------------------------------ */

static const char *kind_name(ev_kind k)
{
    static const char *const names[] = {"write", "fsync", "close", "rename"};
    return names[k];
}

/* The recorded sequence, for a failure's message. */
static void dump(char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < g_n && used + 80 < len; i++)
        used += (size_t)snprintf(out + used, len - used, " %zu:%s(ino %lu%s)", i, kind_name(g_ev[i].kind),
                                 (unsigned long)g_ev[i].ino, g_ev[i].is_dir ? ", dir" : "");
}

/* The file now at `path` reached it by a safe write: written (at least once), synced after its last write, renamed to
 * `path` after that sync, and the directory holding `path` synced after the rename. */
static void check_safe_order(const char *path)
{
    char seq[4096];
    dump(seq, sizeof seq);
    ck_assert_msg(!g_overflow, "more than %d calls recorded", MAX_EVENTS);
    struct stat f, d;
    ck_assert_msg(stat(path, &f) == 0, "%s: missing", path);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    ck_assert_ptr_nonnull(slash);
    *slash = '\0';
    ck_assert_int_eq(stat(dir, &d), 0);
    /* the file's last write and its (last) rename to path; then the first fsync of the file after that write, and the
     * first fsync of path's directory after that rename */
    size_t last_write = SIZE_MAX, sync = SIZE_MAX, ren = SIZE_MAX, dsync = SIZE_MAX;
    for (size_t i = 0; i < g_n; i++) {
        const io_event *e = &g_ev[i];
        const int file = e->dev == f.st_dev && e->ino == f.st_ino;
        if (file && e->kind == EV_WRITE) last_write = i;
        if (file && e->kind == EV_RENAME && strcmp(e->to, path) == 0) ren = i;
    }
    ck_assert_msg(last_write != SIZE_MAX, "%s: no write to the file recorded:%s", path, seq);
    ck_assert_msg(ren != SIZE_MAX, "%s: the file did not reach its name by a rename:%s", path, seq);
    for (size_t i = last_write + 1; i < g_n && sync == SIZE_MAX; i++)
        if (g_ev[i].kind == EV_SYNC && g_ev[i].dev == f.st_dev && g_ev[i].ino == f.st_ino) sync = i;
    for (size_t i = ren + 1; i < g_n && dsync == SIZE_MAX; i++)
        if (g_ev[i].kind == EV_SYNC && g_ev[i].is_dir && g_ev[i].dev == d.st_dev && g_ev[i].ino == d.st_ino) dsync = i;
    ck_assert_msg(sync != SIZE_MAX, "%s: the file's data were not fsync'd after its last write (call %zu):%s", path,
                  last_write, seq);
    ck_assert_msg(ren > sync, "%s: renamed (call %zu) before its data were fsync'd (call %zu):%s", path, ren, sync,
                  seq);
    ck_assert_msg(dsync != SIZE_MAX, "%s: its directory %s was not fsync'd after the rename (call %zu):%s", path, dir,
                  ren, seq);
}

/* A small model and a checkpoint of it with Adam's two slots. */
static const char *MODEL = "input shape=4\ndense units=3\n";

static void make_ck(tt_model *m, tt_checkpoint *ck, float value)
{
    tt_error err;
    tt_model_input in = {tt_shape1(4), 3, 0};
    ck_assert_msg(tt_model_parse(m, MODEL, "t", &in, &err) == TT_OK, "%s", err.msg);
    memset(ck, 0, sizeof *ck);
    ck->epoch = ck->step = ck->steps_per_epoch = ck->global_step = ck->optim_steps = 1;
    ck->seed = 1;
    ck->batch = 8;
    ck->optim = tt_optim_defaults(TT_OPT_ADAM);
    ck->u_product = 1.0;
    ck->best = NAN;
    ck->towers = 1;
    snprintf(ck->backend, sizeof ck->backend, "cpu");
    ck->n_params = m->n_params;
    const char *names[3];
    ck->n_slots = tt_optim_slot_names(&ck->optim, names);
    ck->params = (float *)tt_malloc(m->n_params * sizeof(float));
    for (size_t i = 0; i < m->n_params; i++) ck->params[i] = value + (float)i;
    for (int k = 0; k < ck->n_slots; k++) {
        snprintf(ck->slot_names[k], sizeof ck->slot_names[k], "%s", names[k]);
        ck->slots[k] = ck->params;
    }
}

/* tt_checkpoint_write, to a new name and over an old file: both in the safe order. */
START_TEST(test_checkpoint_write_order)
{
    char dir[512], path[1024];
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/one.safetensors", dir);
    tt_model m;
    tt_checkpoint ck;
    tt_error err;
    for (int k = 0; k < 2; k++) { /* k = 1: over the file k = 0 wrote */
        make_ck(&m, &ck, (float)k);
        record_start();
        const tt_status s = tt_checkpoint_write(path, &m, &ck, &err);
        record_stop();
        ck_assert_msg(s == TT_OK, "%s", err.msg);
        check_safe_order(path);
        tt_free(ck.params);
    }
}
END_TEST

/* A training run's checkpoints (--save-every-epoch and --save-best: the periodic files and best.safetensors) all
 * arrive in the safe order. */
START_TEST(test_run_checkpoints_order)
{
    char dir[512], path[1024];
    tt_test_tmpdir(dir, sizeof dir);
    tt_dataset train, val, test;
    tt_test_dataset(&train, 40, 4, 3, 1);
    tt_test_dataset(&val, 12, 4, 3, 2);
    tt_test_dataset(&test, 12, 4, 3, 3);
    char model[1024];
    snprintf(model, sizeof model, "%s/model.txt", dir);
    tt_test_write_str(model, MODEL);
    tt_run_config c;
    tt_run_config_defaults(&c);
    c.model = model;
    c.device = "cpu";
    c.towers = 1;
    c.batch = 16;
    c.epochs = 2;
    c.progress = TT_PROGRESS_QUIET;
    c.checkpoint_dir = dir;
    c.save_every_epoch = 1;
    c.save_best = TT_SAVE_BEST_VAL_LOSS;
    c.keep = 10;
    tt_run_result *res = (tt_run_result *)tt_calloc(1, sizeof *res);
    tt_error err;
    record_start();
    const tt_status s = tt_run_on(&c, &train, &val, &test, NULL, res, &err);
    record_stop();
    ck_assert_msg(s == TT_OK, "%s", err.msg);
    tt_free(res->final_params);
    tt_free(res);
    tt_ckpt_path(path, sizeof path, dir, 2, 3); /* the last written: its events are the newest */
    check_safe_order(path);
    snprintf(path, sizeof path, "%s/best.safetensors", dir);
    check_safe_order(path);
    tt_dataset_free(&train);
    tt_dataset_free(&val);
    tt_dataset_free(&test);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safe_write");
    TCase *tc = tcase_create("order");
    tcase_add_test(tc, test_checkpoint_write_order);
    tcase_add_test(tc, test_run_checkpoints_order);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
