/* signal.c — the stop flag raised by SIGINT / SIGTERM (see tt_signal.h). The handler only touches a lock-free
 * atomic and, on a second signal, calls _exit: both async-signal-safe. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tt_signal.h"

static atomic_int g_caught; /* 0, or the first signal */
static atomic_int g_said;   /* the process's error line is out (or going out): a second signal adds none */

static void on_signal(int sig)
{
    int none = 0;
    if (atomic_compare_exchange_strong(&g_caught, &none, sig)) return;
    if (!atomic_load(&g_said)) { /* the one line on stderr, naming the signal; write(2) is async-signal-safe */
        static const char term[] = "towertrain: SIGTERM, a second signal: exiting at once (the stop was not finished)\n";
        static const char intr[] = "towertrain: SIGINT, a second signal: exiting at once (the stop was not finished)\n";
        const char *line = sig == SIGTERM ? term : intr;
        ssize_t w = write(STDERR_FILENO, line, strlen(line));
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
    signal(SIGPIPE, SIG_IGN);
}

void tt_signal_error_line(int begin)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    if (begin) {
        atomic_store(&g_said, 1);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
    } else {
        pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* a signal that came meanwhile exits now, quietly */
    }
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
