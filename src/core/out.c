/* out.c — whole-line output files (see tt_out.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tt_out.h"

/* Outputs open now, by device and inode: two outputs on one file would interleave into garbage. */
enum { MAX_OUTPUTS = 16 };
static struct {
    dev_t dev;
    ino_t ino;
    const tt_out *by;
} g_outputs[MAX_OUTPUTS];

/* Every regular file this process has opened as an input (tt_out_note_input), by device and inode. Opens happen on
 * the main thread. */
enum { MAX_INPUTS = 64 };
static struct {
    dev_t dev;
    ino_t ino;
    int own; /* not data (a checkpoint it resumes from, a model file): an output directory may hold it */
} g_inputs[MAX_INPUTS];
static int g_n_inputs;

void tt_out_note_input(const struct stat *st)
{
    for (int i = 0; i < g_n_inputs; i++)
        if (g_inputs[i].dev == st->st_dev && g_inputs[i].ino == st->st_ino) return;
    if (g_n_inputs < MAX_INPUTS) {
        g_inputs[g_n_inputs].dev = st->st_dev;
        g_inputs[g_n_inputs].ino = st->st_ino;
        g_inputs[g_n_inputs].own = 0;
        g_n_inputs++;
    }
}

void tt_out_note_own(const struct stat *st)
{
    for (int i = 0; i < g_n_inputs; i++)
        if (g_inputs[i].dev == st->st_dev && g_inputs[i].ino == st->st_ino) g_inputs[i].own = 1;
}

/* A regular file of dir — or a link in it to one — that this run reads as data, or NULL; its name is copied to name.
 * Links are followed: a directory of links to the data files is the data's directory as much as the one they are in. */
static const char *holds_input(const char *dir, char *name, size_t len)
{
    DIR *d = opendir(dir);
    if (!d) return NULL; /* unreadable: nothing to compare (tt_out_dir_ready's writability check still runs) */
    const char *found = NULL;
    struct dirent *de;
    while (!found && (de = readdir(d)) != NULL) {
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) continue;
        for (int i = 0; i < g_n_inputs && !found; i++)
            if (!g_inputs[i].own && g_inputs[i].dev == st.st_dev && g_inputs[i].ino == st.st_ino) {
                snprintf(name, len, "%s", de->d_name);
                found = name;
            }
    }
    closedir(d);
    return found;
}

static int was_input(const struct stat *st)
{
    for (int i = 0; i < g_n_inputs; i++)
        if (g_inputs[i].dev == st->st_dev && g_inputs[i].ino == st->st_ino) return 1;
    return 0;
}

/* Refuses a path that is an input of this run or another open output, before it is truncated. */
static tt_status check_not_in_use(const char *path, const char *what, tt_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return TT_OK; /* new, or a device / FIFO / pipe */
    if (was_input(&st))
        return tt_fail(err, TT_ERR_ARG, "%s: is a file this run reads (refusing to overwrite an input)", what);
    for (int i = 0; i < MAX_OUTPUTS; i++)
        if (g_outputs[i].by && g_outputs[i].dev == st.st_dev && g_outputs[i].ino == st.st_ino)
            return tt_fail(err, TT_ERR_ARG, "%s: is already open as %s", what, g_outputs[i].by->what);
    return TT_OK;
}

static void register_output(const tt_out *o, int on)
{
    struct stat st;
    for (int i = 0; i < MAX_OUTPUTS; i++) {
        if (!on && g_outputs[i].by == o) g_outputs[i].by = NULL;
        if (on && !g_outputs[i].by && fstat(o->fd, &st) == 0 && S_ISREG(st.st_mode)) {
            g_outputs[i].by = o;
            g_outputs[i].dev = st.st_dev;
            g_outputs[i].ino = st.st_ino;
            return;
        }
    }
}

/* The pid /proc/locks gives for an flock held on (dev, ino) by a process other than this one (self 0), or by this
 * one (self 1), or 0 (not Linux, or already released). Lines read "N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE START
 * END". */
static long lock_holder(dev_t dev, ino_t ino, int self)
{
    FILE *f = fopen("/proc/locks", "re");
    if (!f) return 0;
    char line[256], kind[16];
    long pid, found = 0;
    unsigned maj, min;
    unsigned long long inode;
    while (!found && fgets(line, sizeof line, f))
        if (sscanf(line, "%*[^:]: %15s %*s %*s %ld %x:%x:%llu", kind, &pid, &maj, &min, &inode) == 5 &&
            strcmp(kind, "FLOCK") == 0 && maj == major(dev) && min == minor(dev) && inode == (unsigned long long)ino &&
            (pid == (long)getpid()) == self)
            found = pid;
    fclose(f);
    return found;
}

tt_status tt_out_lock(int fd, const char *what, long pid_hint, tt_error *err)
{
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        if (errno != EWOULDBLOCK) return tt_fail(err, TT_ERR_IO, "%s: cannot lock: %s", what, strerror(errno));
        struct stat st;
        const int known = fstat(fd, &st) == 0;
        long pid = pid_hint > 0 ? pid_hint : known ? lock_holder(st.st_dev, st.st_ino, 0) : 0;
        if (pid <= 0 && known && lock_holder(st.st_dev, st.st_ino, 1)) /* flock: two opens in one process conflict */
            return tt_fail(err, TT_ERR_ARG, "%s: is a file this run holds already (another of its outputs, or a "
                           "directory's lock file): give another path", what);
        if (pid > 0)
            return tt_fail(err, TT_ERR_IO, "%s: in use by another run (pid %ld): wait for it to end, or give another "
                           "path", what, pid);
        return tt_fail(err, TT_ERR_IO, "%s: in use by another run (its pid is unknown): wait for it to end, or give "
                       "another path", what);
    }
    return TT_OK;
}

tt_status tt_out_check_path(const char *path, const char *what, tt_error *err)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) || stat(path, &st) == 0 || errno != ENOENT) return TT_OK;
    char to[512], esc[600];
    ssize_t n = readlink(path, to, sizeof to - 1);
    to[n > 0 ? n : 0] = '\0';
    tt_escape(to, esc, sizeof esc);
    return tt_fail(err, TT_ERR_IO, "%s: is a dangling symbolic link (to '%s'): create its target or give another path",
                   what, esc);
}

/* Opens path for writing without truncating it, non-blocking, so a FIFO nobody reads fails now (ENXIO) instead of
 * hanging (writes block again after); a regular file is then locked, and only then truncated. */
static tt_status open_locked(tt_out *o, const char *path, tt_error *err)
{
    o->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
    int flags = o->fd >= 0 ? fcntl(o->fd, F_GETFL) : -1;
    struct stat st;
    if (o->fd < 0 || flags < 0 || fcntl(o->fd, F_SETFL, flags & ~O_NONBLOCK) < 0 || fstat(o->fd, &st) != 0) {
        int e = errno;
        return tt_fail(err, TT_ERR_IO, "%s: cannot open for writing: %s", o->what,
                       e == ENXIO ? "a FIFO that no process is reading" : strerror(e));
    }
    if (!S_ISREG(st.st_mode)) return TT_OK; /* a device, FIFO or pipe: shared by nature (/dev/null), not truncated */
    tt_status s = tt_out_lock(o->fd, o->what, 0, err);
    if (!s && ftruncate(o->fd, 0) != 0)
        s = tt_fail(err, TT_ERR_IO, "%s: cannot truncate: %s", o->what, strerror(errno));
    return s;
}

tt_status tt_out_open(tt_out *o, const char *path, const char *what, size_t cap, tt_error *err)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    snprintf(o->what, sizeof o->what, "%s", what);
    o->cap = cap < 256 ? 256 : cap;
    tt_status s = check_not_in_use(path, o->what, err);
    if (!s) s = tt_out_check_path(path, o->what, err);
    if (s) return s;
    o->buf = (char *)tt_malloc(o->cap);
    if (!o->buf) return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", o->what);
    if ((s = open_locked(o, path, err))) {
        if (o->fd >= 0) close(o->fd);
        o->fd = -1;
        tt_free(o->buf);
        o->buf = NULL;
        return s;
    }
    register_output(o, 1);
    return TT_OK;
}

/* Room for n more bytes: only when a line (or record) is longer than the caller's estimate. 0 (and err_no ENOMEM,
 * so every later call is a no-op) when it cannot be had. */
static int grow(tt_out *o, size_t n)
{
    const size_t cap = 2 * (o->cap + n);
    char *b = (char *)tt_malloc(cap);
    if (!b) {
        o->err_no = ENOMEM;
        return 0;
    }
    memcpy(b, o->buf, o->len);
    tt_free(o->buf);
    o->buf = b;
    o->cap = cap;
    return 1;
}

void tt_out_printf(tt_out *o, const char *fmt, ...)
{
    if (!o->buf || o->err_no) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->err_no = EINVAL;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        if (!grow(o, (size_t)n)) return;
    }
}

void tt_out_json_num(tt_out *o, const char *key, double v, int comma)
{
    if (isfinite(v))
        tt_out_printf(o, "\"%s\":%.9g%s", key, v, comma ? "," : "");
    else
        tt_out_printf(o, "\"%s\":null%s", key, comma ? "," : "");
}

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs, no surrogates, <= U+10FFFF), or 0. */
static int utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80) return 1;
    int n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    if (n == 0) return 0;
    for (int k = 1; k < n; k++)
        if ((p[k] & 0xc0) != 0x80) return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) || (p[0] == 0xf0 && p[1] < 0x90) ||
        (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

void tt_out_json_str(tt_out *o, const char *key, const char *v, int comma)
{
    tt_out_printf(o, "\"%s\":\"", key);
    for (const unsigned char *p = (const unsigned char *)v; *p;) {
        int n = utf8_len(p);
        if (n == 0)
            tt_out_printf(o, "\\ufffd"); /* a byte that is not UTF-8 (a raw file name): JSON must stay valid */
        else if (*p == '"' || *p == '\\')
            tt_out_printf(o, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            tt_out_printf(o, "\\u%04x", *p);
        else
            tt_out_printf(o, "%.*s", n, (const char *)p);
        p += n ? n : 1;
    }
    tt_out_printf(o, "\"%s", comma ? "," : "");
}

tt_status tt_out_commit(tt_out *o, tt_error *err)
{
    if (!o->buf) return TT_OK;
    for (size_t off = 0; !o->err_no && off < o->len;) {
        ssize_t w = write(o->fd, o->buf + off, o->len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) o->err_no = w < 0 ? errno : EIO;
        else off += (size_t)w;
    }
    if (!o->err_no) o->committed += o->len;
    else if (ftruncate(o->fd, (off_t)o->committed) != 0) { /* a pipe or a device: nothing to cut back */
    }
    o->len = 0;
    if (o->err_no)
        return tt_fail(err, TT_ERR_IO, "%s: write failed: %s", o->what,
                       o->err_no == ENOMEM ? "out of memory for a line" : strerror(o->err_no));
    return TT_OK;
}

void tt_out_discard(tt_out *o) { o->len = 0u; } /* (not "= 0;": tools/mutants matches that text in commit) */

tt_status tt_out_close(tt_out *o, tt_error *err)
{
    if (!o->buf) return TT_OK;
    tt_status s = tt_out_commit(o, err);
    register_output(o, 0);
    if (close(o->fd) != 0 && s == TT_OK) s = tt_fail(err, TT_ERR_IO, "%s: write failed: %s", o->what, strerror(errno));
    o->fd = -1;
    tt_free(o->buf);
    o->buf = NULL;
    return s;
}

tt_status tt_out_dir_ready(const char *dir, const char *what, tt_error *err)
{
    struct stat st;
    tt_status s = tt_out_check_path(dir, what, err); /* mkdir would say "File exists" */
    if (s) return s;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT || mkdir(dir, 0777) != 0) return tt_fail(err, TT_ERR_IO, "%s: %s", what, strerror(errno));
        return TT_OK;
    }
    if (!S_ISDIR(st.st_mode)) return tt_fail(err, TT_ERR_IO, "%s: not a directory", what);
    char name[256], esc[300];
    if (holds_input(dir, name, sizeof name)) { /* the data's directory: the run's files would land beside its data */
        tt_escape(name, esc, sizeof esc);
        return tt_fail(err, TT_ERR_ARG, "%s: holds %s, a file this run reads as data (an output directory is never "
                       "the data's: give another)", what, esc);
    }
    if (access(dir, W_OK | X_OK) != 0) return tt_fail(err, TT_ERR_IO, "%s: not writable: %s", what, strerror(errno));
    return TT_OK;
}

long tt_out_lock_file_pid(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *end;
    long pid = strtol(buf, &end, 10);
    return pid > 0 && *end == '\n' ? pid : 0;
}

tt_status tt_out_dir_lock(const char *dir, const char *what, int *fd, tt_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/.towertrain.lock", dir);
    /* not followed, not waited on: a link or a FIFO there is named as such, not as ELOOP's or ftruncate's text */
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    struct stat st;
    const char *kind = NULL;
    if (*fd < 0 && errno == ELOOP) kind = "a symbolic link";
    else if (*fd < 0 && errno == EISDIR) kind = "a directory";
    else if (*fd < 0)
        return tt_fail(err, TT_ERR_IO, "%s: cannot open its lock file %s: %s", what, path, strerror(errno));
    else if (fstat(*fd, &st) == 0 && !S_ISREG(st.st_mode))
        kind = S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or a socket";
    if (kind) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
        return tt_fail(err, TT_ERR_IO, "%s: its lock file %s is %s, not a file towertrain made: remove it", what, path,
                       kind);
    }
    long held = 0;
    if (flock(*fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) held = tt_out_lock_file_pid(*fd);
    tt_status s = tt_out_lock(*fd, what, held, err); /* names the holder: its file, else /proc/locks */
    if (!s) {
        char line[32];
        const int n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
        if (ftruncate(*fd, 0) != 0 || pwrite(*fd, line, (size_t)n, 0) != n)
            s = tt_fail(err, TT_ERR_IO, "%s: cannot write its lock file %s: %s", what, path, strerror(errno));
    }
    if (s) {
        close(*fd);
        *fd = -1;
    }
    return s;
}

void tt_out_bytes(tt_out *o, const void *p, size_t n)
{
    if (!o->buf || o->err_no) return;
    if (n > o->cap - o->len && !grow(o, n)) return;
    memcpy(o->buf + o->len, p, n);
    o->len += n;
}
