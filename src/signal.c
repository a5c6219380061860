/* signal.c — the stop flag raised by SIGINT / SIGTERM (see tt_signal.h). The handler only touches a lock-free
 * atomic and, on a second signal, calls _exit: both async-signal-safe. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tt_signal.h"

static atomic_int g_caught; /* 0, or the first signal */

static void on_signal(int sig)
{
    int none = 0;
    if (atomic_compare_exchange_strong(&g_caught, &none, sig)) return;
    static const char line[] = "towertrain: a second signal: exiting at once\n"; /* write(2) is async-signal-safe */
    ssize_t w = write(STDERR_FILENO, line, sizeof line - 1);
    (void)w;
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
