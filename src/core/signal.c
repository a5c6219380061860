/* signal.c — the stop flag raised by SIGINT / SIGTERM (see tt_signal.h). The handler only touches a lock-free
 * atomic and, on a second signal, calls _exit: both async-signal-safe. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tt_signal.h"

static atomic_int g_caught; /* 0, or the first signal */
static atomic_int g_line;   /* the process's error line: 0 not yet, 1 being written, 2 written */
static atomic_int g_second; /* the second signal, once one came */
/* what an immediate exit writes first, and where: a terminal put back as it was (tt_signal_restore) */
static _Atomic(const char *) g_restore;
static atomic_int g_restore_fd = -1;

/* Async-signal-safe: write(2) of a string set while no signal handler ran. */
static void restore_terminal(void)
{
    const char *s = atomic_load(&g_restore);
    const int fd = atomic_load(&g_restore_fd);
    if (!s || fd < 0) return;
    size_t n = 0;
    while (s[n]) n++;
    ssize_t w = write(fd, s, n);
    (void)w;
}

/* The second signal's deadline (SECOND_GRACE_S after it): a stderr that nobody reads keeps the line's write, or the
 * handler's own, blocked for ever, and SIGKILL must not be the only way out. */
enum { SECOND_GRACE_S = 2 };
static void on_alarm(int sig)
{
    const int second = atomic_load(&g_second);
    restore_terminal();
    _exit(128 + (second ? second : sig));
}

static void on_signal(int sig)
{
    int none = 0;
    if (atomic_compare_exchange_strong(&g_caught, &none, sig)) return;
    int no_second = 0; /* (none now holds the first signal: a failed exchange writes what it found) */
    if (!atomic_compare_exchange_strong(&g_second, &no_second, sig)) { /* a third: at once, quietly */
        restore_terminal();
        _exit(128 + sig);
    }
    alarm(SECOND_GRACE_S); /* async-signal-safe; whatever blocks below, SIGALRM ends the process with 128 + sig */
    const int line = atomic_load(&g_line);
    if (line == 1) return; /* the line is going out: it is finished first (tt_signal_error_line exits then) */
    if (line == 0) { /* the one line on stderr, naming the signal; write(2) is async-signal-safe */
        static const char term[] = "towertrain: SIGTERM, a second signal: exiting at once (the stop is not finished)\n",
                          intr[] = "towertrain: SIGINT, a second signal: exiting at once (the stop is not finished)\n";
        restore_terminal();
        ssize_t w = sig == SIGTERM ? write(STDERR_FILENO, term, sizeof term - 1) : write(STDERR_FILENO, intr, sizeof intr - 1);
        (void)w;
    }
    restore_terminal();
    _exit(128 + sig);
}

static atomic_int g_continued; /* times the process was stopped by SIGTSTP and continued */

/* Re-raises sig with its default action (it was blocked while its handler runs: unblocked first). */
static void raise_default(int sig)
{
    signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
}

static void on_stop(int sig);

static void install(int sig, void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

/* Ctrl-Z: the terminal put back (the live view erased, the cursor shown), then the stop itself; once continued, the
 * handler again, and a count the view reads to draw afresh. */
static void on_stop(int sig)
{
    const int saved = errno;
    restore_terminal();
    raise_default(sig); /* the process stops here until SIGCONT */
    install(sig, on_stop);
    atomic_fetch_add(&g_continued, 1);
    errno = saved;
}

/* SIGHUP, SIGQUIT: the terminal put back, then the default action (the end; a core for SIGQUIT). */
static void on_fatal(int sig)
{
    restore_terminal();
    raise_default(sig);
}

int tt_signal_continued(void) { return atomic_load(&g_continued); }

/* A handler for sig unless it is ignored (nohup's SIGHUP stays ignored). */
static void install_unless_ignored(int sig, void (*handler)(int))
{
    struct sigaction old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN) return;
    install(sig, handler);
}

void tt_signal_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* reads and writes carry on; the run checks the flag between steps */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    install_unless_ignored(SIGTSTP, on_stop);
    install_unless_ignored(SIGHUP, on_fatal);
    install_unless_ignored(SIGQUIT, on_fatal);
}

void tt_signal_error_line(int begin)
{
    atomic_store(&g_line, begin ? 1 : 2);
    const int second = atomic_load(&g_second);
    if (!begin && second) _exit(128 + second); /* it came while the line was written: it ends the process now */
}

int tt_signal_caught(void) { return atomic_load(&g_caught); }

void tt_signal_restore(int fd, const char *s)
{
    atomic_store(&g_restore, s);
    atomic_store(&g_restore_fd, s ? fd : -1);
}

const atomic_int *tt_signal_flag(void) { return &g_caught; }

const char *tt_signal_name(int sig)
{
    static char buf[24];
    if (sig == SIGINT) return "SIGINT";
    if (sig == SIGTERM) return "SIGTERM";
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}
