/* tt_out.h — an output file written in whole lines, for the JSON log, the trace and the bench CSV.
 *
 * Text is built in memory and handed to write(2) only at a line boundary (tt_out_commit), one write per commit, so
 * a reader — or a run cut short by a signal — never sees half a line. The first failed write (a full disk,
 * /dev/full, a closed pipe: SIGPIPE is ignored by the CLI) is reported at that commit, naming the file and the
 * reason, and every later call is a no-op: the caller stops the run when it happens, not after training.
 * A binary file of whole records (TensorBoard's event files) is written the same way, a record for a line
 * (tt_out_bytes). Not for: the console (stdout stays a FILE*, checked at every flush). */
#ifndef TT_OUT_H
#define TT_OUT_H

#include <stddef.h>

#include "tt_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tt_out {
    int fd;
    /* open exactly while buf != NULL, so a zeroed tt_out is a closed one */
    char what[200]; /* "--log-json PATH", for messages */
    char *buf;      /* text since the last commit */
    size_t len, cap;
    unsigned long long committed; /* bytes in the file after the last whole commit */
    int err_no;     /* errno of the first failed write or of a failed allocation; 0 while all is well */
} tt_out;

/* Creates or truncates path. cap is the longest text expected between two commits (the buffer grows if needed).
 * A regular file is locked (flock LOCK_EX|LOCK_NB on the file itself) BEFORE it is truncated, and stays locked until
 * tt_out_close or the process's death: a file another run is writing is refused (TT_ERR_IO, naming its pid) and left
 * as it was. A dangling symbolic link is refused too (tt_out_check_path). */
tt_status tt_out_open(tt_out *o, const char *path, const char *what, size_t cap, tt_error *err);

/* An output path that is a dangling symbolic link: TT_ERR_IO, "WHAT: is a dangling symbolic link (to 'T')". Outputs
 * follow symbolic links to what exists; one that points at nothing is refused rather than followed, so a link into an
 * unmounted disk never creates the run's files on the disk underneath. */
tt_status tt_out_check_path(const char *path, const char *what, tt_error *err);

/* Notes a regular file (device and inode of st) this process opened as an input (tt_input_open calls it): an output
 * on it is refused, so a --log-json pointed at a data file cannot truncate it. The inputs' floor hands this down;
 * output code never asks the data readers. */
struct stat;
void tt_out_note_input(const struct stat *st);
/* The same file noted as not data — a checkpoint --resume reads, a model file, a profile (tt_input_read_text): still
 * never an output, but an output directory may hold it (tt_out_dir_ready refuses a directory holding any other input:
 * the data's directory). */
void tt_out_note_own(const struct stat *st);

/* flock(LOCK_EX|LOCK_NB) on fd, taken for the life of the descriptor (the kernel drops it when the process dies, so a
 * kill -9 leaves no stale lock). Held by another process: TT_ERR_IO, "WHAT: in use by another run (pid N)": N is
 * *pid_hint when it is > 0, else the holder that /proc/locks names. */
tt_status tt_out_lock(int fd, const char *what, long pid_hint, tt_error *err);

/* An output directory (what: "--checkpoint-dir DIR", for messages) before a run writes into it: created if missing
 * (one level), and a writable directory — a run fails now, not after its first epoch. A dangling link is refused, and
 * so is a directory that holds a file this run reads as data (TT_ERR_ARG, naming it): the run's files never land
 * beside its data set. */
tt_status tt_out_dir_ready(const char *dir, const char *what, tt_error *err);

/* One directory, one run: an flock on DIR/.towertrain.lock (this pid written in it), held while *fd stays open and
 * dropped by the kernel when the process dies; a directory another run holds is refused (TT_ERR_IO, its pid). A lock
 * file that is a link, a FIFO or a device is refused, never followed or waited on. */
tt_status tt_out_dir_lock(const char *dir, const char *what, int *fd, tt_error *err);

/* The pid a lock file holds ("PID\n"), or 0. */
long tt_out_lock_file_pid(int fd);

/* Appends formatted text to the pending line(s). */
void tt_out_printf(tt_out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* "key":number, or "key":null when v is not finite (JSON has no NaN); a comma after it when comma != 0. */
void tt_out_json_num(tt_out *o, const char *key, double v, int comma);

/* "key":"string" with ", \\ and control characters escaped; well-formed UTF-8 passes through, any other byte
 * becomes \ufffd, so the line is valid JSON whatever the string held. */
void tt_out_json_str(tt_out *o, const char *key, const char *v, int comma);

/* Appends n bytes as they are: whole records of a binary file (TensorBoard's event files, src/core/tensorboard.c),
 * committed like lines. */
void tt_out_bytes(tt_out *o, const void *p, size_t n);

/* Writes the pending text (which must end at a line boundary) in one write. A commit that fails after part of it
 * reached the file (a short write into a full disk or past a file-size limit) cuts the file back to the last whole
 * commit, so what a reader finds ends at a line's or a record's end. */
tt_status tt_out_commit(tt_out *o, tt_error *err);

/* Drops the pending text (a record that will not be finished: a stop mid-way), so that close writes none of it. */
void tt_out_discard(tt_out *o);

/* Commits what is pending and closes; reports a failed write or close. Accepts a closed or zeroed tt_out. */
tt_status tt_out_close(tt_out *o, tt_error *err);

#ifdef __cplusplus
}
#endif
#endif
