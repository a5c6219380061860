/* test_run_edges.c — what a neighbour, a signal or a size can do to a run (issue 18, items 5, 7, 9, 10), tried with
 * real processes and real signals: two runs on one checkpoint directory or one output file (the second is refused,
 * naming the first's pid, and the first's files are left as they were; a kill -9 leaves no stale lock); a dangling
 * symbolic link as an output; a second signal after the run's error line adds no line of its own; SIGINT during the
 * final test evaluation stops it at a batch boundary without rewriting the final checkpoint, and resuming a finished
 * run is a clean no-op; a stop whose checkpoint cannot be written still ends as stopped; predict stops printing at the next sample, eval's report at the next row; top-k by a heap keeps today's order and tie rule;
 * --classes and the notice for a stray large label. */
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "tt_cli.h"
#include "tt_test.h"

static char dir[64];
static char out_path[128], err_path[128];

static const struct timespec tick = {0, 10000000}; /* 10 ms */

#define TT_F_SETPIPE_SZ 1031 /* Linux's F_SETPIPE_SZ (<fcntl.h> names it under _GNU_SOURCE only) */

static int run(const char *args) { return tt_test_run(args, out_path, err_path); }

static void expect(const char *args, int code, const char *fragment)
{
    tt_test_expect(args, code, fragment, out_path, err_path);
}

/* Starts `towertrain ARGS` with stdout and stderr redirected to the given paths; returns its pid (the shell execs). */
static pid_t spawn_to(const char *args, const char *out, const char *err)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "exec '%s' %s >'%s' 2>'%s' </dev/null", TT_BIN, args, out, err);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits (up to 60 s) until file `path` holds `what`; 0 if pid ended first or the time ran out. */
static int wait_for_text(pid_t pid, const char *path, const char *what)
{
    for (int i = 0; i < 6000; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) return 0;
        FILE *f = fopen(path, "rb");
        if (f) {
            static char buf[1 << 20];
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = '\0';
            if (strstr(buf, what)) return 1;
        }
        nanosleep(&tick, NULL);
    }
    return 0;
}

static void stop_and_reap(pid_t pid)
{
    int st;
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
}

/* A .npy file: a v1.0 header for `descr` and `shape`, then n bytes of data. */
static void write_npy(const char *name, const char *descr, const char *shape, const void *data, size_t n)
{
    char header[256], path[256];
    int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    while ((10 + len + 1) % 64) header[len++] = ' ';
    header[len++] = '\n';
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    const unsigned char magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)len,
                                     (unsigned char)(len >> 8)};
    ck_assert(fwrite(magic, 1, 10, f) == 10 && fwrite(header, 1, (size_t)len, f) == (size_t)len);
    ck_assert(n == 0 || fwrite(data, 1, n, f) == n);
    ck_assert_int_eq(fclose(f), 0);
}

/* npy:DIR/SUB with n_train + n_test float32 samples of 16 features and the labels given (label k: feature k is
 * bright, so a model learns something). */
static void make_npy(const char *sub, size_t n_train, const int32_t *y_train, size_t n_test, const int32_t *y_test)
{
    char p[256], shape[64];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    const size_t n[2] = {n_train, n_test};
    const int32_t *y[2] = {y_train, y_test};
    const char *names[2][2] = {{"x_train.npy", "y_train.npy"}, {"x_test.npy", "y_test.npy"}};
    tt_rng r;
    tt_rng_seed(&r, 3, 3);
    for (int k = 0; k < 2; k++) {
        float *x = (float *)malloc(n[k] * 16 * sizeof(float));
        ck_assert_ptr_nonnull(x);
        for (size_t i = 0; i < n[k] * 16; i++) x[i] = (float)tt_rng_below(&r, 100) / 400.0f;
        for (size_t i = 0; i < n[k]; i++) x[i * 16 + (size_t)y[k][i] % 16] += 0.75f;
        char file[300];
        snprintf(file, sizeof file, "%s/%s", sub, names[k][0]);
        snprintf(shape, sizeof shape, "(%zu, 16)", n[k]);
        write_npy(file, "<f4", shape, x, n[k] * 16 * sizeof(float));
        snprintf(file, sizeof file, "%s/%s", sub, names[k][1]);
        snprintf(shape, sizeof shape, "(%zu,)", n[k]);
        write_npy(file, "<i4", shape, y[k], n[k] * sizeof(int32_t));
        free(x);
    }
}

/* npy:DIR/SUB of n_train + n_test samples, labels i % 10. */
static void make_npy10(const char *sub, size_t n_train, size_t n_test)
{
    int32_t *y = (int32_t *)malloc((n_train > n_test ? n_train : n_test) * sizeof(int32_t));
    ck_assert_ptr_nonnull(y);
    for (size_t i = 0; i < (n_train > n_test ? n_train : n_test); i++) y[i] = (int32_t)(i % 10);
    make_npy(sub, n_train, y, n_test, y);
    free(y);
}

static void setup(void)
{
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
}

static off_t file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? st.st_size : -1;
}

/* Two real processes on one --checkpoint-dir, one --log-json, one --trace: the second is refused at start-up with
 * exit 1 and one line naming the first's pid, and touches none of the first's files (the log is not truncated: the
 * lock is taken before the truncation); eval's --log-json too. After kill -9 of the first, the directory and the
 * files are free at once (the kernel dropped the locks). */
START_TEST(test_one_directory_one_run)
{
    make_npy10("d", 400, 40);
    char a_args[1024], args[1024], ck[256], log[256], trace[256], a_out[256], a_err[256], lockf[300], pidstr[32];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    snprintf(log, sizeof log, "%s/a.json", dir);
    snprintf(trace, sizeof trace, "%s/a.trace", dir);
    snprintf(a_out, sizeof a_out, "%s/a.out", dir);
    snprintf(a_err, sizeof a_err, "%s/a.err", dir);
    snprintf(a_args, sizeof a_args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 100000 --batch 2 "
             "--progress quiet --checkpoint-dir %s --log-json %s --trace %s", dir, ck, log, trace);
    pid_t a = spawn_to(a_args, a_out, a_err);
    const int started = wait_for_text(a, log, "\"event\":\"step\"");
    if (!started) stop_and_reap(a);
    ck_assert_msg(started, "the first run did not start stepping: %s", tt_test_slurp(a_err));
    snprintf(pidstr, sizeof pidstr, "(pid %d)", (int)a);
    snprintf(lockf, sizeof lockf, "%s/.towertrain.lock", ck);
    char want[32];
    snprintf(want, sizeof want, "%d\n", (int)a);
    ck_assert_str_eq(tt_test_slurp(lockf), want);
    const off_t log_size = file_size(log), trace_size = file_size(trace);
    /* the same directory */
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 1 --progress quiet "
             "--checkpoint-dir %s --save-every-steps 1", dir, ck);
    expect(args, 1, "--checkpoint-dir");
    ck_assert_msg(strstr(tt_test_slurp(err_path), pidstr), "the line does not name the holder %s: %s", pidstr,
                  tt_test_slurp(err_path));
    ck_assert_msg(strstr(tt_test_slurp(err_path), "in use by another run"), "%s", tt_test_slurp(err_path));
    /* the same log, the same trace (each after another --checkpoint-dir): the first's file is not truncated */
    const char *outs[2] = {"--log-json", "--trace"};
    const char *files[2] = {log, trace};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 1 --progress quiet "
                 "--checkpoint-dir %s/ck%d %s %s", dir, dir, k, outs[k], files[k]);
        expect(args, 1, "in use by another run");
        ck_assert_msg(strstr(tt_test_slurp(err_path), pidstr) && strstr(tt_test_slurp(err_path), outs[k]), "%s", tt_test_slurp(err_path));
        ck_assert_msg(file_size(files[k]) >= (k ? trace_size : log_size) && file_size(files[k]) > 0,
                      "%s was truncated by the refused run", files[k]);
    }
    /* eval's --log-json: refused before anything is read */
    snprintf(args, sizeof args, "eval --device cpu --checkpoint %s/none.safetensors --data npy:%s/d --log-json %s",
             dir, dir, log);
    expect(args, 1, "in use by another run");
    ck_assert_msg(file_size(log) > 0, "eval truncated the log of a running train");
    /* --resume DIR reads without a lock, but says when another run is writing there */
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 1 --progress quiet "
             "--batch 2 --resume %s --checkpoint-dir %s/fork", dir, ck, dir);
    run(args);
    ck_assert_msg(strstr(tt_test_slurp(err_path), "is writing there") && strstr(tt_test_slurp(err_path), pidstr), "%s",
                  tt_test_slurp(err_path));
    /* still the first run's: its start record heads the log */
    ck_assert_msg(strncmp(tt_test_slurp(log), "{\"event\":\"start\"", 16) == 0, "%.200s", tt_test_slurp(log));
    /* kill -9: no stale lock; the directory and the outputs are free at once */
    stop_and_reap(a);
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 1 --progress quiet "
             "--checkpoint-dir %s --log-json %s --trace %s", dir, ck, log, trace);
    expect(args, 0, NULL);
    snprintf(want, sizeof want, "%d\n", (int)a);
    ck_assert_msg(strcmp(tt_test_slurp(lockf), want) != 0, "the lock file still holds the killed run's pid");
}
END_TEST

/* A checkpoint directory whose lock file is not a file (a symbolic link, a FIFO, a directory) is refused with a line
 * that says what it is, not ELOOP's "Too many levels of symbolic links" or ftruncate's "Invalid argument"; the link's
 * target is left alone. */
START_TEST(test_lock_file_not_a_file)
{
    make_npy10("d", 100, 20);
    const char *kinds[3] = {"a symbolic link", "a FIFO", "a directory"};
    char ck[256], lockf[300], target[256], args[1024];
    snprintf(target, sizeof target, "%s/target", dir);
    FILE *f = fopen(target, "w");
    ck_assert_ptr_nonnull(f);
    fputs("keep\n", f);
    fclose(f);
    for (int k = 0; k < 3; k++) {
        snprintf(ck, sizeof ck, "%s/ck%d", dir, k);
        snprintf(lockf, sizeof lockf, "%s/.towertrain.lock", ck);
        ck_assert_int_eq(mkdir(ck, 0700), 0);
        ck_assert_int_eq(k == 0 ? symlink(target, lockf) : k == 1 ? mkfifo(lockf, 0600) : mkdir(lockf, 0700), 0);
        snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 1 --progress quiet "
                 "--checkpoint-dir %s", dir, ck);
        expect(args, 1, kinds[k]);
        ck_assert_msg(strstr(tt_test_slurp(err_path), "--checkpoint-dir") && strstr(tt_test_slurp(err_path), "lock file"), "%s",
                      tt_test_slurp(err_path));
    }
    ck_assert_str_eq(tt_test_slurp(target), "keep\n");
}
END_TEST

/* An output that is this run's own --checkpoint-dir lock file: refused as a clash of this run's paths (exit 2), not
 * as "in use by another run (its pid is unknown)" — flock sees two opens in one process as two holders. */
START_TEST(test_output_is_own_lock_file)
{
    make_npy10("d", 100, 20);
    char ck[256], args[1024];
    snprintf(ck, sizeof ck, "%s/own", dir);
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 1 --progress quiet "
             "--checkpoint-dir %s --log-json %s/.towertrain.lock", dir, ck, ck);
    expect(args, 2, "is a file this run holds already (another of its outputs, or a directory's lock file)");
}
END_TEST

/* An output that is a dangling symbolic link is refused, naming what it is (not "File exists", not "No such file"):
 * --checkpoint-dir, --log-json, --trace, eval --log-json. */
START_TEST(test_dangling_symlink_outputs)
{
    make_npy10("d", 100, 20);
    char link[256], args[1024];
    snprintf(link, sizeof link, "%s/dangling", dir);
    ck_assert_int_eq(symlink("/nonexistent-towertrain-dir/out", link), 0);
    const char *opts[3] = {"--checkpoint-dir", "--log-json", "--trace"};
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 1 --progress quiet "
                 "%s %s", dir, opts[k], link);
        expect(args, 1, "is a dangling symbolic link (to '/nonexistent-towertrain-dir/out')");
        ck_assert_msg(strstr(tt_test_slurp(err_path), opts[k]), "%s", tt_test_slurp(err_path));
    }
    snprintf(args, sizeof args, "eval --device cpu --checkpoint %s/x --data npy:%s/d --log-json %s", dir, dir, link);
    expect(args, 1, "--log-json");
    ck_assert_msg(strstr(tt_test_slurp(err_path), "is a dangling symbolic link"), "%s", tt_test_slurp(err_path));
    /* a link to a directory that exists is followed (as open follows it) */
    char target[256], good[256];
    snprintf(target, sizeof target, "%s/realck", dir);
    snprintf(good, sizeof good, "%s/goodlink", dir);
    ck_assert_int_eq(mkdir(target, 0700), 0);
    ck_assert_int_eq(symlink(target, good), 0);
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 1 --progress quiet "
             "--checkpoint-dir %s", dir, good);
    expect(args, 0, NULL);
}
END_TEST

/* A second signal that comes once the run's error line is on its way adds no line of its own: stderr is a FIFO the
 * test has filled, so the stop line (after SIGINT) blocks in its write; SIGTERM comes then; once the FIFO is read,
 * stderr holds exactly the stop line, and the exit code is 143 (the second signal's). */
START_TEST(test_second_signal_after_the_line)
{
    make_npy10("d", 400, 40);
    char fifo[256], log[256], args[1024];
    snprintf(fifo, sizeof fifo, "%s/err.fifo", dir);
    snprintf(log, sizeof log, "%s/s.json", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ck_assert_int_ge(rd, 0);
    int wr = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ck_assert_int_ge(wr, 0);
    static char fill[4096];
    memset(fill, 'x', sizeof fill);
    size_t filled = 0;
    for (size_t chunk = sizeof fill; chunk >= 1; chunk /= 2)
        for (ssize_t w; (w = write(wr, fill, chunk)) > 0;) filled += (size_t)w;
    close(wr);
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 100000 --batch 2 "
             "--progress quiet --log-json %s", dir, log);
    pid_t pid = spawn_to(args, out_path, fifo);
    int started = wait_for_text(pid, log, "\"event\":\"step\"");
    if (started) kill(pid, SIGINT);
    int stopped = started && wait_for_text(pid, log, "\"event\":\"stopped\"");
    if (stopped) {
        const struct timespec settle = {0, 300000000}; /* into the blocked write of the stop line */
        nanosleep(&settle, NULL);
        kill(pid, SIGTERM);
        nanosleep(&settle, NULL);
    }
    /* read everything: the filler, then what the run wrote, until it exits and closes the FIFO */
    static char got[1 << 16];
    size_t n = 0, skipped = 0;
    for (int i = 0; i < 3000; i++) {
        char buf[4096];
        ssize_t r = read(rd, buf, sizeof buf);
        if (r == 0) break;
        if (r < 0) {
            nanosleep(&tick, NULL);
            continue;
        }
        for (ssize_t k = 0; k < r; k++) {
            if (skipped < filled) skipped++;
            else if (n < sizeof got - 1) got[n++] = buf[k];
        }
    }
    got[n] = '\0';
    close(rd);
    int st;
    if (waitpid(pid, &st, WNOHANG) != pid) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    ck_assert_msg(started && stopped, "the run did not start or did not stop: %s", got);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 143, "status 0x%x, want exit 143 (the second signal)", st);
    ck_assert_msg(tt_test_count_lines(got) == 1 && strstr(got, "stopped by SIGINT") && !strstr(got, "second signal"),
                  "stderr should hold the stop line alone: '%s'", got);
}
END_TEST

/* A stop whose checkpoint cannot be written (the directory was removed under the run): the stop's one line says so,
 * and the run still ends as stopped (exit 130), not with the failed write's code: the write's failure is the stop
 * line's to tell, agreed and then cleared (tt_pending_agree), not left to replace the stop. */
START_TEST(test_stop_with_unwritable_checkpoint)
{
    make_npy10("d", 400, 40);
    char ck[256], log[256], args[1024], cmd[600];
    snprintf(ck, sizeof ck, "%s/gone", dir);
    snprintf(log, sizeof log, "%s/gone.json", dir);
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 100000 --batch 2 "
             "--progress quiet --log-json %s --checkpoint-dir %s", dir, log, ck);
    pid_t pid = spawn_to(args, out_path, err_path);
    int started = wait_for_text(pid, log, "\"event\":\"step\"");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", ck);
    ck_assert_int_eq(system(cmd), 0);
    if (started) kill(pid, SIGINT);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    const char *e = tt_test_slurp(err_path);
    ck_assert_msg(started, "the run did not start: %s", e);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status 0x%x, want exit 130 (stopped): %s", st, e);
    ck_assert_msg(tt_test_count_lines(e) == 1 && strstr(e, "stopped by SIGINT") && strstr(e, "; no checkpoint: "),
                  "stderr should hold the stop line, saying the checkpoint was not written: '%s'", e);
}
END_TEST

/* A stderr that nobody ever reads (a full pipe): the stop line's write blocks for good. A second signal still ends
 * the process, within its 2 s grace, with 128 + that signal; before, it waited on the blocked write for ever. */
START_TEST(test_second_signal_with_stuck_stderr)
{
    make_npy10("d", 400, 40);
    char fifo[256], log[256], args[1024];
    snprintf(fifo, sizeof fifo, "%s/stuck.fifo", dir);
    snprintf(log, sizeof log, "%s/stuck.json", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* held open, never read */
    ck_assert_int_ge(rd, 0);
    int wr = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ck_assert_int_ge(wr, 0);
    static char fill[4096];
    memset(fill, 'x', sizeof fill);
    for (size_t chunk = sizeof fill; chunk >= 1; chunk /= 2)
        for (ssize_t w; (w = write(wr, fill, chunk)) > 0;) {
        }
    close(wr);
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 100000 --batch 2 "
             "--progress quiet --log-json %s", dir, log);
    pid_t pid = spawn_to(args, out_path, fifo);
    int started = wait_for_text(pid, log, "\"event\":\"step\"");
    if (started) kill(pid, SIGINT);
    int stopped = started && wait_for_text(pid, log, "\"event\":\"stopped\"");
    const struct timespec settle = {0, 300000000}; /* into the blocked write of the stop line */
    if (stopped) {
        nanosleep(&settle, NULL);
        kill(pid, SIGTERM);
    }
    int st = 0, ended = 0;
    for (int i = 0; stopped && i < 1000 && !ended; i++) { /* 10 s */
        ended = waitpid(pid, &st, WNOHANG) == pid;
        if (!ended) nanosleep(&tick, NULL);
    }
    if (!ended) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    close(rd);
    ck_assert_msg(started && stopped, "the run did not start or did not stop");
    ck_assert_msg(ended, "a second signal did not end a run whose stderr nobody reads (10 s)");
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 143, "status 0x%x, want exit 143 (the second signal)", st);
}
END_TEST

/* SIGINT while train evaluates the test set at the end: the evaluation stops at a batch boundary (no test figures,
 * exit 130 soon), the final checkpoint is left as it was (same inode, same bytes: not rewritten), and resuming the
 * finished run is a clean no-op: exit 0, one line, no error. The model is wide and the test set large so that the
 * evaluation takes a while (~1-2 s); the signal goes once the final checkpoint's record is in the log. */
START_TEST(test_signal_in_final_evaluation)
{
    int32_t y_train[64], *y_test = (int32_t *)malloc(12000 * sizeof(int32_t));
    ck_assert_ptr_nonnull(y_test);
    for (int i = 0; i < 64; i++) y_train[i] = i % 10;
    for (int i = 0; i < 12000; i++) y_test[i] = i % 10;
    make_npy("d", 64, y_train, 12000, y_test);
    free(y_test);
    char model[256], ck[256], log[256], args[1024], f[512];
    snprintf(model, sizeof model, "%s/wide.model", dir);
    tt_test_write_str(model, "input shape=16\ndense units=2048\nrelu\ndense units=2048\nrelu\ndense units=10\n"
                             "softmax\n");
    snprintf(ck, sizeof ck, "%s/ck", dir);
    snprintf(log, sizeof log, "%s/f.json", dir);
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --model %s --val-samples 0 --epochs 1 --batch 64 "
             "--progress lines --checkpoint-dir %s --log-json %s", dir, model, ck, log);
    pid_t pid = spawn_to(args, out_path, err_path);
    const int saved = wait_for_text(pid, log, "\"event\":\"checkpoint\"");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (saved) kill(pid, SIGINT);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    ck_assert_msg(saved, "the run ended before its final checkpoint: %s", tt_test_slurp(err_path));
    char *e = tt_test_slurp(err_path);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status 0x%x: %s", st, e);
    ck_assert_msg(tt_test_count_lines(e) == 1, "%s", e);
    ck_assert_msg(strstr(e, "while the test set was evaluated (stopped at a batch boundary"), "%s", e);
    ck_assert_msg(strstr(e, "(written before the stop)"), "the stop line should name the checkpoint kept: %s", e);
    ck_assert_msg(!strstr(tt_test_slurp(out_path), "test: "), "test figures printed after the stop: %s", tt_test_slurp(out_path));
    ck_assert_msg(took < 5.0, "%.2f s from SIGINT to exit: the evaluation did not stop at a batch boundary", took);
    /* the checkpoint: the one the run wrote before its evaluation, not rewritten (a rewrite renames a new inode in) */
    snprintf(f, sizeof f, "%s/ckpt-e000001-s000000001.safetensors", ck);
    struct stat before;
    ck_assert_int_eq(stat(f, &before), 0);
    ck_assert_msg(strstr(tt_test_slurp(log), "\"event\":\"stopped\""), "no stopped record");
    {   /* exactly one checkpoint record: the stop wrote none */
        const char *p = tt_test_slurp(log);
        int records = 0;
        for (const char *q = p; (q = strstr(q, "\"event\":\"checkpoint\"")) != NULL; q++) records++;
        ck_assert_int_eq(records, 1);
    }
    /* resuming the finished run: nothing left to train, exit 0, one line, nothing on stderr */
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --model %s --val-samples 0 --epochs 1 --batch 64 "
             "--progress lines --resume %s --checkpoint-dir %s", dir, model, ck, ck);
    int rc = run(args);
    ck_assert_msg(rc == 0, "resuming a finished run: exit %d: %s", rc, tt_test_slurp(err_path));
    ck_assert_msg(tt_test_slurp(err_path)[0] == '\0', "stderr: %s", tt_test_slurp(err_path));
    const char *o = tt_test_slurp(out_path);
    ck_assert_msg(strstr(o, "nothing left to train (epochs 1 of 1 done)"), "%s", o);
    ck_assert_msg(!strstr(o, "Epoch ") && !strstr(o, "test: "), "a finished run trained or tested again: %s", o);
    struct stat after;
    ck_assert_int_eq(stat(f, &after), 0);
    ck_assert_msg(after.st_ino == before.st_ino && after.st_mtime == before.st_mtime, "the no-op rewrote %s", f);
}
END_TEST

/* Runs `towertrain ARGS` with stdout into a FIFO that the test reads only after the output has begun and SIGINT
 * was sent (the command then blocks in a write mid-output); then reads everything. Returns the wait status; *lines,
 * *last: the lines read and the last byte. */
static int signal_while_printing(const char *args, size_t *lines, char *last)
{
    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s/out.fifo", dir);
    unlink(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ck_assert_int_ge(rd, 0);
    fcntl(rd, TT_F_SETPIPE_SZ, 4096); /* a page: the command blocks after a few lines, not after 64 KiB */
    pid_t pid = spawn_to(args, fifo, err_path);
    struct pollfd pf = {rd, POLLIN, 0};
    const int printing = poll(&pf, 1, 60000) == 1 && (pf.revents & POLLIN); /* the first lines are out */
    const struct timespec settle = {0, 200000000};
    if (printing) {
        nanosleep(&settle, NULL); /* the pipe fills; the command blocks in a write */
        kill(pid, SIGINT);
        nanosleep(&settle, NULL);
    }
    *lines = 0;
    *last = '\n';
    for (int i = 0; i < 6000; i++) {
        static char buf[65536];
        ssize_t r = read(rd, buf, sizeof buf);
        if (r == 0) break;
        if (r < 0) {
            nanosleep(&tick, NULL);
            continue;
        }
        for (ssize_t k = 0; k < r; k++) *lines += buf[k] == '\n';
        *last = buf[r - 1];
    }
    close(rd);
    int st;
    if (waitpid(pid, &st, WNOHANG) != pid) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    ck_assert_msg(printing, "towertrain %s printed nothing within 60 s: %s", args, tt_test_slurp(err_path));
    return st;
}

/* predict stops printing at the next sample on SIGINT: stdout is a FIFO the test does not read until the signal is
 * sent (predict then blocks in a write mid-output); after the signal the test reads everything. Exit 130, one line
 * naming how far it got, far fewer lines than samples, each whole. */
START_TEST(test_predict_stops_at_next_sample)
{
    make_npy10("d", 100, 20);
    char ck[256], args[1024], in[256];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 1 --progress quiet "
             "--checkpoint-dir %s", dir, ck);
    expect(args, 0, NULL);
    enum { N = 60000 };
    float *x = (float *)calloc((size_t)N * 16, sizeof(float));
    ck_assert_ptr_nonnull(x);
    write_npy("many.npy", "<f4", "(60000, 16)", x, (size_t)N * 16 * sizeof(float));
    free(x);
    snprintf(in, sizeof in, "%s/many.npy", dir);
    snprintf(args, sizeof args, "predict --device cpu --checkpoint %s/ckpt-e000001-s000000001.safetensors --input %s "
             "--top-k 3", ck, in);
    size_t lines;
    char last;
    const int st = signal_while_printing(args, &lines, &last);
    char *e = tt_test_slurp(err_path);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status 0x%x (%zu lines printed): %s", st, lines, e);
    ck_assert_msg(tt_test_count_lines(e) == 1 && strstr(e, "predict: stopped by SIGINT after "), "%s", e);
    ck_assert_msg(lines < N / 2, "%zu lines printed after SIGINT: predict did not stop at the next sample", lines);
    ck_assert_msg(lines > 0 && last == '\n', "the output ends mid-line");
}
END_TEST

/* eval's report stops at the next row on SIGINT too: 2,000 classes make a 2,000 x 2,000 confusion matrix (28 MB of
 * text). Exit 130, one line, whole lines, and the --log-json record (unfinished) not written. */
START_TEST(test_eval_report_stops_at_next_row)
{
    enum { C = 2000, NTR = 2000 };
    int32_t *y = (int32_t *)malloc(NTR * sizeof(int32_t));
    ck_assert_ptr_nonnull(y);
    for (int i = 0; i < NTR; i++) y[i] = i % C;
    make_npy("d", NTR, y, NTR, y);
    free(y);
    char ck[256], args[1024], log[256];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    snprintf(log, sizeof log, "%s/eval.json", dir);
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/d --val-samples 0 --epochs 1 --progress quiet "
             "--checkpoint-dir %s", dir, ck);
    expect(args, 0, NULL);
    snprintf(args, sizeof args, "eval --device cpu --checkpoint %s/ckpt-e000001-s000000008.safetensors --data npy:%s/d "
             "--log-json %s", ck, dir, log);
    size_t lines;
    char last;
    const int st = signal_while_printing(args, &lines, &last);
    char *e = tt_test_slurp(err_path);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status 0x%x (%zu lines printed): %s", st, lines, e);
    ck_assert_msg(tt_test_count_lines(e) == 1 && strstr(e, "eval: stopped by SIGINT while printing the report"), "%s", e);
    ck_assert_msg(lines < C / 2, "%zu lines printed after SIGINT: eval did not stop at the next row", lines);
    ck_assert_msg(lines > 0 && last == '\n', "the output ends mid-line");
    ck_assert_msg(file_size(log) == 0, "the unfinished eval record was written (%lld bytes)", (long long)file_size(log));
}
END_TEST

/* The reference: indices sorted by (a NaN last, the larger p first, the lower index first), the first k. */
static const float *g_ref_p;
static int ref_cmp(const void *a, const void *b)
{
    const size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const int ni = isnan(g_ref_p[i]), nj = isnan(g_ref_p[j]);
    if (ni != nj) return ni - nj;
    if (!ni && g_ref_p[i] != g_ref_p[j]) return g_ref_p[i] > g_ref_p[j] ? -1 : 1;
    return i < j ? -1 : 1;
}

/* The selection predict used before the heap (ties to the lower class), for rows without NaN. */
static void old_select(const float *p, size_t C, size_t K, size_t *top)
{
    for (size_t k = 0; k < K; k++) {
        size_t best = C;
        for (size_t j = 0; j < C; j++) {
            int taken = 0;
            for (size_t q = 0; q < k; q++) taken |= top[q] == j;
            if (!taken && (best == C || p[j] > p[best])) best = j;
        }
        top[k] = best;
    }
}

/* tt_top_k against a full sort over rows with many ties (values from a handful), NaNs, -0 and +0, every k from 1 to
 * C on small rows and a spread of k on large ones; against the old selection where the row has no NaN. */
START_TEST(test_top_k_order_and_ties)
{
    tt_rng r;
    tt_rng_seed(&r, 18, 10);
    static float p[3000];
    static size_t top[3000], heap[3000], ref[3000], old[3000];
    const size_t sizes[] = {1, 2, 3, 7, 16, 33, 100, 3000};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const size_t C = sizes[si];
        for (int rep = 0; rep < 20; rep++) {
            const int nan_row = rep % 4 == 3, levels = 1 + rep % 5;
            for (size_t j = 0; j < C; j++) {
                p[j] = (float)tt_rng_below(&r, (uint32_t)levels) / 4.0f; /* ties everywhere */
                if (p[j] == 0 && tt_rng_below(&r, 2)) p[j] = -0.0f;
                if (nan_row && tt_rng_below(&r, 5) == 0) p[j] = NAN;
            }
            for (size_t j = 0; j < C; j++) ref[j] = j;
            g_ref_p = p;
            qsort(ref, C, sizeof *ref, ref_cmp);
            for (size_t K = 1; K <= C; K += C <= 40 ? 1 : C / 7 + 1) {
                tt_top_k(p, C, K, top, heap);
                for (size_t k = 0; k < K; k++)
                    ck_assert_msg(top[k] == ref[k], "C %zu K %zu rep %d: top[%zu] = %zu, want %zu", C, K, rep, k,
                                  top[k], ref[k]);
                if (!nan_row && C <= 100) {
                    old_select(p, C, K, old);
                    for (size_t k = 0; k < K; k++) ck_assert_uint_eq(top[k], old[k]);
                }
            }
        }
    }
    /* all equal: the classes in order */
    for (size_t j = 0; j < 50; j++) p[j] = 0.02f;
    tt_top_k(p, 50, 50, top, heap);
    for (size_t j = 0; j < 50; j++) ck_assert_uint_eq(top[j], j);
}
END_TEST

/* A large selection in the right order: 200,000 classes, k = 20,000 (O(C log k): milliseconds; the old O(C k^2)
 * selection, ~10^14 steps, would not end within the suite's CTest timeout). No time is asserted here — speed figures
 * are benchmarks (docs/checkpoints.md, predict's top-k table), not unit tests. */
START_TEST(test_top_k_large)
{
    enum { C = 200000, K = 20000 };
    float *p = (float *)malloc(C * sizeof(float));
    size_t *top = (size_t *)malloc(2 * K * sizeof(size_t));
    ck_assert(p && top);
    tt_rng r;
    tt_rng_seed(&r, 5, 5);
    for (size_t j = 0; j < C; j++) p[j] = (float)tt_rng_below(&r, 1000);
    tt_top_k(p, C, K, top, top + K);
    for (size_t k = 1; k < K; k++)
        ck_assert(p[top[k - 1]] > p[top[k]] || (p[top[k - 1]] == p[top[k]] && top[k - 1] < top[k]));
    /* nothing left out is better than the last one taken */
    size_t taken = 0;
    for (size_t j = 0; j < C; j++) taken += p[j] > p[top[K - 1]];
    ck_assert_msg(taken < K, "%zu classes beat the k-th", taken);
    free(p);
    free(top);
}
END_TEST

/* A stray large label: a notice (one line; the run goes on), --classes N refuses labels >= N naming the sample and
 * the label (exit 1), and a --classes larger than the labels gives that many outputs. */
START_TEST(test_classes_and_stray_labels)
{
    int32_t y[300], yt[50];
    for (int i = 0; i < 300; i++) y[i] = i % 10;
    for (int i = 0; i < 50; i++) yt[i] = i % 10;
    y[17] = 9999;
    make_npy("stray", 300, y, 50, yt);
    make_npy10("clean", 300, 50);
    char args[1024];
    snprintf(args, sizeof args, "summary --data npy:%s/stray", dir);
    int rc = run(args);
    char *e = tt_test_slurp(err_path);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, e);
    ck_assert_msg(tt_test_count_lines(e) == 1 && strstr(e, "notice: --data npy:") &&
                  strstr(e, "the largest label, 9999, makes 10000 classes, but the data hold only 11 distinct labels"),
                  "%s", e);
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/stray --val-samples 0 --epochs 1 --progress quiet "
             "--classes 10", dir);
    expect(args, 1, "--classes 10: training sample 17 has label 9999 (labels must be 0..9)");
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/stray --val-samples 0 --epochs 1 --progress quiet "
             "--classes 9999", dir); /* the boundary: label N is refused, N - 1 is not */
    expect(args, 1, "--classes 9999: training sample 17 has label 9999 (labels must be 0..9998)");
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/stray --val-samples 0 --epochs 1 --progress quiet "
             "--classes 10000 --batch 300", dir);
    expect(args, 0, NULL);
    ck_assert_msg(tt_test_slurp(err_path)[0] == '\0', "--classes states the count: no notice wanted: %s", tt_test_slurp(err_path));
    /* no notice for a clean set; --classes 12: twelve outputs, two of them with no samples */
    snprintf(args, sizeof args, "train --device cpu --data npy:%s/clean --val-samples 0 --epochs 1 --progress lines "
             "--classes 12", dir);
    expect(args, 0, NULL);
    ck_assert_msg(tt_test_slurp(err_path)[0] == '\0', "%s", tt_test_slurp(err_path));
    ck_assert_msg(strstr(tt_test_slurp(out_path), "12 classes"), "%s", tt_test_slurp(out_path));
    expect("train --classes 0", 2, "--classes: '0' is not an integer");
    expect("summary --classes 5", 2, "--classes");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_edges");
    TCase *tc = tcase_create("run_edges");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_one_directory_one_run);
    tcase_add_test(tc, test_dangling_symlink_outputs);
    tcase_add_test(tc, test_lock_file_not_a_file);
    tcase_add_test(tc, test_output_is_own_lock_file);
    tcase_add_test(tc, test_second_signal_after_the_line);
    tcase_add_test(tc, test_second_signal_with_stuck_stderr);
    tcase_add_test(tc, test_stop_with_unwritable_checkpoint);
    tcase_add_test(tc, test_signal_in_final_evaluation);
    tcase_add_test(tc, test_predict_stops_at_next_sample);
    tcase_add_test(tc, test_eval_report_stops_at_next_row);
    tcase_add_test(tc, test_top_k_order_and_ties);
    tcase_add_test(tc, test_top_k_large);
    tcase_add_test(tc, test_classes_and_stray_labels);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
