/* tt_fuzz.h — the libFuzzer entry point every target in tests/fuzz/ defines, and the checks they share.
 * Built two ways: with clang's -fsanitize=fuzzer by tools/fuzz.sh (libFuzzer supplies main), and with the normal
 * compiler against tests/fuzz/replay.c, which calls the entry point on every file of a corpus (a CTest test).
 * Not for: anything but the fuzz targets and their replay. */
#ifndef TT_FUZZ_H
#define TT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tt_common.h"

/* Runs the code under test on data[0..size); returns 0 (libFuzzer's convention). A crash, a sanitizer report or
 * a failed TT_ASSERT is a finding. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A refused input must come back as a status with a one-line message that names the input. */
static inline void tt_fuzz_check_refusal(tt_status s, const tt_error *err, const char *name)
{
    TT_ASSERT(s == TT_ERR_FORMAT || s == TT_ERR_IO || s == TT_ERR_NOMEM || s == TT_ERR_MODEL);
    TT_ASSERT(strncmp(err->msg, name, strlen(name)) == 0);
    TT_ASSERT(strchr(err->msg, '\n') == NULL);
}

/* The model fuzz_checkpoint reads checkpoints for, and that tests/fuzz/make_checkpoint_seeds.c writes its seeds for
 * (a model file's text: its input line gives the shape). 47 parameters: seeds of at most 1 KB of tensors. */
#define TT_FUZZ_CKPT_MODEL "input shape=4,4,1\nconv2d filters=2 kernel=3\nflatten\ndense units=3\n"

#endif
