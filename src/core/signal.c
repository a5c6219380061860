/* signal.c — the stop flag raised by SIGINT / SIGTERM (see tt_signal.h). The handler only touches a lock-free
 * atomic and, on a second signal, calls _exit: both async-signal-safe. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tt_signal.h"

static atomic_int g_caught; /* 0, or the first signal */
static atomic_int g_line;   /* the process's error line: 0 not yet, 1 being written, 2 written */
static atomic_int g_second; /* the second signal, once one came */

/* The second signal's deadline (SECOND_GRACE_S after it): a stderr that nobody reads keeps the line's write, or the
 * handler's own, blocked for ever, and SIGKILL must not be the only way out. */
enum { SECOND_GRACE_S = 2 };
static void on_alarm(int sig)
{
    const int second = atomic_load(&g_second);
    _exit(128 + (second ? second : sig));
}

static void on_signal(int sig)
{
    int none = 0;
    if (atomic_compare_exchange_strong(&g_caught, &none, sig)) return;
    int no_second = 0; /* (none now holds the first signal: a failed exchange writes what it found) */
    if (!atomic_compare_exchange_strong(&g_second, &no_second, sig)) _exit(128 + sig); /* a third: at once, quietly */
    alarm(SECOND_GRACE_S); /* async-signal-safe; whatever blocks below, SIGALRM ends the process with 128 + sig */
    const int line = atomic_load(&g_line);
    if (line == 1) return; /* the line is going out: it is finished first (tt_signal_error_line exits then) */
    if (line == 0) { /* the one line on stderr, naming the signal; write(2) is async-signal-safe */
        static const char term[] = "towertrain: SIGTERM, a second signal: exiting at once (the stop is not finished)\n",
                          intr[] = "towertrain: SIGINT, a second signal: exiting at once (the stop is not finished)\n";
        ssize_t w = sig == SIGTERM ? write(STDERR_FILENO, term, sizeof term - 1) : write(STDERR_FILENO, intr, sizeof intr - 1);
        (void)w;
    }
    _exit(128 + sig);
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
}

void tt_signal_error_line(int begin)
{
    atomic_store(&g_line, begin ? 1 : 2);
    const int second = atomic_load(&g_second);
    if (!begin && second) _exit(128 + second); /* it came while the line was written: it ends the process now */
}

int tt_signal_caught(void) { return atomic_load(&g_caught); }

const atomic_int *tt_signal_flag(void) { return &g_caught; }

const char *tt_signal_name(int sig)
{
    static char buf[24];
    if (sig == SIGINT) return "SIGINT";
    if (sig == SIGTERM) return "SIGTERM";
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}
