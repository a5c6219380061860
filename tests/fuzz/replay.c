/* replay.c — runs a fuzz target's entry point (LLVMFuzzerTestOneInput) on every file of the corpora named on the
 * command line (files, or directories whose regular files are taken in name order), with the normal compiler and
 * no libFuzzer: how seeds and regression inputs in tests/fuzz/corpus/ keep being tested by CTest. A crash, a
 * sanitizer report or a failed TT_ASSERT ends the run with a non-zero status; so does finding no input at all.
 * Not for: fuzzing (tools/fuzz.sh builds the real fuzzers with clang). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_fuzz.h"
#include "tt_input.h"

#define REPLAY_MAX_BYTES ((uint64_t)16 << 20) /* corpus files are small; libFuzzer's default -max_len is 4 KiB */

/* Reads one corpus file and runs the target on it; returns 0, or -1 (reported) if the file cannot be read. */
static int replay_file(const char *path)
{
    tt_input in;
    tt_error err = {{0}};
    uint64_t size = 0;
    uint8_t *data = NULL;
    tt_status s = tt_input_open(&in, path, &err);
    if (!s && tt_input_left(&in, &size) && size > REPLAY_MAX_BYTES)
        s = tt_fail(&err, TT_ERR_FORMAT, "%s: %llu bytes is too large for a corpus file", path,
                    (unsigned long long)size);
    if (!s) s = tt_input_read_alloc(&in, (size_t)size, "the input", &data, &err);
    tt_input_close(&in);
    if (s) {
        fprintf(stderr, "replay: %s\n", err.msg);
        return -1;
    }
    LLVMFuzzerTestOneInput(data, (size_t)size);
    tt_free(data);
    return 0;
}

/* A directory's regular entries in name order (dot files skipped): adds the inputs run to *count, and sets *bad
 * if the directory or one of its files cannot be read. */
static void replay_dir(const char *dir, long *count, int *bad)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "replay: %s: cannot list the directory\n", dir);
        *bad = 1;
        return;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        int len = snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && len > 0 && (size_t)len < sizeof path) {
            if (replay_file(path)) *bad = 1;
            else ++*count;
        }
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    long count = 0;
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (d) {
            closedir(d);
            replay_dir(argv[i], &count, &bad);
        } else if (replay_file(argv[i])) {
            bad = 1;
        } else {
            count++;
        }
    }
    printf("replay: %ld inputs run%s\n", count, bad ? ", some could not be read" : "");
    return bad || count == 0 ? 1 : 0;
}
