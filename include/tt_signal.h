/* tt_signal.h — SIGINT and SIGTERM as a request to stop cleanly.
 *
 * The first SIGINT or SIGTERM only raises a flag: the trainer finishes the step in flight, the run writes a
 * "stopped" record to its JSON log and closes its trace as valid JSON, says where it stopped, and the CLI exits with
 * 128 + the signal (130 for SIGINT, 143 for SIGTERM). A second signal ends the process at once with 128 + that second
 * signal, and stderr still holds one line: the second signal's, naming it, or — once the run's own error line is out
 * (tt_signal_error_line) — none more. A stderr nobody reads cannot hold the process: 2 s after the second signal
 * (SIGALRM) it ends with that code whatever write is blocked, and a third signal ends it at once.
 * SIGPIPE is ignored, so a closed pipe on stdout or a log is a failed write with EPIPE that the writer reports.
 * SIGTSTP, SIGHUP and SIGQUIT keep their default actions, but first put the terminal back (tt_signal_restore).
 * Not for: library users who handle signals themselves (they pass their own flag in tt_trainer_config.stop). */
#ifndef TT_SIGNAL_H
#define TT_SIGNAL_H

#include <stdatomic.h>

#ifdef __cplusplus
extern "C" {
#endif

void tt_signal_install(void);

/* Around the process's error line (tt_report_error): begin = 1 before it is written, 0 after. A second signal that
 * comes meanwhile waits for the line to be whole (2 s at most), then ends the process (128 + it) without a line of its
 * own; one that comes after it exits at once, quietly. */
void tt_signal_error_line(int begin);

/* A terminal to put back on an immediate exit (a second or third signal, or the second's deadline): s (a string that
 * outlives the call, e.g. "show the cursor") is written to fd before _exit. NULL: nothing (the owner restored it). */
void tt_signal_restore(int fd, const char *s);

/* How many times the process was stopped (SIGTSTP: Ctrl-Z) and continued: the terminal is put back (the restore
 * string written) before each stop, so a live view draws afresh after it. SIGHUP and SIGQUIT write it too before
 * their default action; a signal the process inherited as ignored (nohup) stays ignored. */
int tt_signal_continued(void);

/* The first SIGINT/SIGTERM caught so far, or 0. */
int tt_signal_caught(void);

/* The flag the trainer polls at the end of every step (non-zero once a signal arrived). */
const atomic_int *tt_signal_flag(void);

/* "SIGINT", "SIGTERM", or "signal N". */
const char *tt_signal_name(int sig);

#ifdef __cplusplus
}
#endif
#endif
