/* ckpt_dir.c — a checkpoint directory (--checkpoint-dir, --resume DIR): file names that sort by progress, the newest
 * valid checkpoint, and pruning to --keep.
 *
 * Periodic checkpoints (epoch ends, --save-every-steps, a stop by signal) are ckpt-e<epoch>-s<step>.safetensors with
 * the epoch in 6 digits and the steps done in it in 9, so names sort as the run progresses; --save-best writes
 * best.safetensors. Only names of exactly that form are ever listed or deleted, and the temporaries a killed write
 * leaves ("." + a checkpoint's name + "." + mkstemp's 6 random characters), which pruning deletes: other files in the
 * directory are left alone. One run writes to a directory at a time: it holds an flock on DIR/.towertrain.lock (with
 * its pid in it, for the second run's message) from start-up to its end, and the kernel drops it when the process
 * dies. Not for: the file format (checkpoint.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tt_out.h"
#include "tt_train.h"

enum { CKPT_MAX_FILES = 100000 };

void tt_ckpt_path(char *buf, size_t len, const char *dir, uint64_t epoch, uint64_t step)
{
    snprintf(buf, len, "%s/ckpt-e%06llu-s%09llu.safetensors", dir, (unsigned long long)epoch,
             (unsigned long long)step);
}

/* n decimal digits at s, into *v; 1 if they are exactly that. */
static int digits(const char *s, int n, uint64_t *v)
{
    uint64_t x = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    *v = x;
    return 1;
}

/* 1 if name is ckpt-eEEEEEE-sSSSSSSSSS.safetensors. */
static int parse_name(const char *name, uint64_t *epoch, uint64_t *step)
{
    static const char suffix[] = ".safetensors";
    if (strlen(name) != 6 + 6 + 2 + 9 + sizeof suffix - 1) return 0;
    return strncmp(name, "ckpt-e", 6) == 0 && digits(name + 6, 6, epoch) && strncmp(name + 12, "-s", 2) == 0 &&
           digits(name + 14, 9, step) && strcmp(name + 23, suffix) == 0;
}

typedef struct ckpt_entry {
    uint64_t epoch, step;
    char name[40];
} ckpt_entry;

static int entry_cmp(const void *a, const void *b)
{
    const ckpt_entry *x = (const ckpt_entry *)a, *y = (const ckpt_entry *)b;
    if (x->epoch != y->epoch) return x->epoch < y->epoch ? -1 : 1;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return 0;
}

/* The directory's periodic checkpoints, oldest first (caller frees *out). */
static tt_status list_dir(const char *dir, ckpt_entry **out, size_t *n, tt_error *err)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return tt_fail(err, TT_ERR_IO, "%s: cannot open the checkpoint directory: %s", dir, strerror(errno));
    size_t cap = 0;
    ckpt_entry *v = NULL;
    tt_status s = TT_OK;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        uint64_t e, st;
        if (!parse_name(de->d_name, &e, &st)) continue;
        if (*n == CKPT_MAX_FILES) {
            s = tt_fail(err, TT_ERR_IO, "%s: more than %d checkpoints", dir, CKPT_MAX_FILES);
            break;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ckpt_entry *w = (ckpt_entry *)tt_malloc(cap * sizeof *v);
            if (!w) {
                s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory listing checkpoints", dir);
                break;
            }
            if (*n) memcpy(w, v, *n * sizeof *v);
            tt_free(v);
            v = w;
        }
        v[*n].epoch = e;
        v[*n].step = st;
        memcpy(v[*n].name, de->d_name, strlen(de->d_name) + 1); /* parse_name: 35 characters */
        (*n)++;
        errno = 0;
    }
    if (!s && errno) s = tt_fail(err, TT_ERR_IO, "%s: reading the directory: %s", dir, strerror(errno));
    closedir(d);
    if (s) {
        tt_free(v);
        *n = 0;
        return s;
    }
    if (*n) qsort(v, *n, sizeof *v, entry_cmp);
    *out = v;
    return TT_OK;
}

tt_status tt_ckpt_newest(const char *dir, const tt_model *m, tt_checkpoint *ck, char *path, size_t len,
                         size_t *skipped, tt_error *err)
{
    ckpt_entry *v;
    size_t n;
    *skipped = 0;
    tt_status s = list_dir(dir, &v, &n, err);
    if (s) return s;
    tt_error first = {{0}};
    for (size_t k = n; k-- > 0;) {
        snprintf(path, len, "%s/%s", dir, v[k].name);
        tt_error e;
        if (tt_checkpoint_read(path, m, ck, &e) == TT_OK) {
            tt_free(v);
            return TT_OK;
        }
        if (!first.msg[0]) first = e;
        (*skipped)++;
    }
    tt_free(v);
    if (!n) return tt_fail(err, TT_ERR_IO, "%s: no checkpoint here (ckpt-e*-s*.safetensors)", dir);
    return tt_fail(err, TT_ERR_FORMAT, "%s: none of its %zu checkpoints is valid (the newest: %s)", dir, n, first.msg);
}

/* 1 if name is a temporary of a checkpoint's write (periodic or best): "." + the name + "." + 6 characters. */
static int temp_name(const char *name)
{
    uint64_t e, s;
    char base[40];
    const size_t len = strlen(name);
    if (len == 1 + 16 + 7 && strncmp(name, ".best.safetensors.", 18) == 0) return 1; /* best.safetensors's */
    if (len != 1 + 35 + 7 || name[0] != '.' || name[36] != '.') return 0;
    memcpy(base, name + 1, 35);
    base[35] = '\0';
    return parse_name(base, &e, &s);
}

/* Deletes what killed writes left behind. */
static void prune_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char path[4096];
    while ((de = readdir(d)) != NULL)
        if (temp_name(de->d_name)) {
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
    closedir(d);
}

tt_status tt_ckpt_prune(const char *dir, size_t keep, tt_error *err)
{
    prune_temps(dir);
    ckpt_entry *v;
    size_t n;
    tt_status s = list_dir(dir, &v, &n, err);
    for (size_t k = 0; !s && k + keep < n; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, v[k].name);
        if (unlink(path) != 0 && errno != ENOENT)
            s = tt_fail(err, TT_ERR_IO, "%s: cannot delete an old checkpoint (--keep %zu): %s", path, keep,
                        strerror(errno));
    }
    tt_free(v);
    return s;
}

tt_status tt_ckpt_dir_ready(const char *dir, tt_error *err)
{
    if (!*dir) return tt_fail(err, TT_ERR_ARG, "--checkpoint-dir: empty directory name");
    char what[4200];
    snprintf(what, sizeof what, "--checkpoint-dir %s", dir);
    return tt_out_dir_ready(dir, what, err);
}

/* Steps done after `step` steps of epoch `epoch` (epochs of n steps). */
static uint64_t progress(uint64_t epoch, uint64_t step, uint64_t n) { return (epoch ? epoch - 1 : 0) * n + step; }

tt_status tt_ckpt_none_ahead(const char *dir, uint64_t epoch, uint64_t step, uint64_t steps_per_epoch, tt_error *err)
{
    ckpt_entry *v;
    size_t n;
    tt_status s = list_dir(dir, &v, &n, err);
    if (s) return s;
    if (n && progress(v[n - 1].epoch, v[n - 1].step, steps_per_epoch) > progress(epoch, step, steps_per_epoch))
        s = tt_fail(err, TT_ERR_ARG, "--checkpoint-dir %.300s: holds %s, beyond where this run starts (epoch %llu, "
                    "step %llu): another run's? --resume it, or give an empty directory", dir, v[n - 1].name,
                    (unsigned long long)epoch, (unsigned long long)step);
    tt_free(v);
    return s;
}

tt_status tt_ckpt_dir_lock(const char *dir, int *fd, tt_error *err)
{
    char what[4300];
    snprintf(what, sizeof what, "--checkpoint-dir %s", dir);
    return tt_out_dir_lock(dir, what, fd, err);
}

long tt_ckpt_dir_holder(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/.towertrain.lock", dir);
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return 0; /* never locked: no run has written here */
    long pid = 0;
    if (flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        pid = tt_out_lock_file_pid(fd);
        if (pid == (long)getpid()) pid = 0; /* this run's own --checkpoint-dir */
        else if (pid <= 0) pid = -1;
    }
    close(fd); /* drops the probe's shared lock, if it got one */
    return pid;
}
