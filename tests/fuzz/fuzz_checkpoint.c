/* fuzz_checkpoint.c — libFuzzer target for the checkpoint reader (tt_checkpoint_parse in src/model/checkpoint.c): every
 * input is parsed twice, without a model (the header, metadata and checksum, as a resume learns the model first) and
 * for a fixed small conv model (TT_FUZZ_CKPT_MODEL, built once), which reaches the tensor matching and the copies.
 * Each input is also parsed sealed (tt_checkpoint_seal: its checksum rewritten), so that mutations get past the
 * file's CRC-32. So it drives the length prefix and its caps, the strict JSON scan (src/model/json.c) of the header and
 * of the options, json-c with an explicit length, the typed options, the metadata's number
 * parsers, the tensor entries' dtype, shape and offset checks, the tiling of the data section, the CRC-32 and the
 * shape comparison. A refusal must leave the checkpoint empty and name the input in one line; an accepted one must
 * hold what the reader promises (with the model: every buffer of its size, read here to the last float).
 * Not for: opening files (tests/test_checkpoint.c: FIFOs, directories) or writing them. */
#include <math.h>
#include <stdlib.h>

#include "tt_checkpoint.h"
#include "tt_fuzz.h"

static volatile float g_sink; /* keeps the read of every accepted float */

static const tt_model *fuzz_model(void)
{
    static tt_model m; /* ~40 KB: not on the stack */
    static int ready;
    if (!ready) {
        const tt_model_input none = {{0, {0, 0, 0, 0}}, 0, 0};
        tt_error err;
        TT_ASSERT(tt_model_parse(&m, TT_FUZZ_CKPT_MODEL, "fuzz-model", &none, &err) == TT_OK);
        ready = 1;
    }
    return &m;
}

static tt_status fuzz_parse(const uint8_t *data, size_t size, const tt_model *m)
{
    tt_checkpoint ck;
    tt_error err = {{0}};
    const tt_status s = tt_checkpoint_parse(data, size, "fuzz-ckpt", m, &ck, &err);
    if (s != TT_OK) {
        const tt_checkpoint empty = {0};
        TT_ASSERT(memcmp(&ck, &empty, sizeof ck) == 0);
        tt_fuzz_check_refusal(s, &err, "fuzz-ckpt");
        return s;
    }
    const char *names[3];
    TT_ASSERT(ck.n_slots == tt_optim_slot_names(&ck.optim, names) && ck.n_slots >= 1 && ck.n_slots <= 3);
    TT_ASSERT(ck.n_slots == (int)tt_optim_state_floats(&ck.optim));
    for (int k = 0; k < ck.n_slots; k++) TT_ASSERT(strcmp(ck.slot_names[k], names[k]) == 0);
    TT_ASSERT(memchr(ck.backend, '\0', sizeof ck.backend) != NULL);
    TT_ASSERT(ck.step <= ck.steps_per_epoch && isfinite(ck.u_product) && isfinite(ck.optim.lr));
    if (!m) {
        TT_ASSERT(ck.params == NULL);
        for (int k = 0; k < TT_CKPT_MAX_SLOTS; k++) TT_ASSERT(ck.slots[k] == NULL);
    } else {
        TT_ASSERT(ck.n_params == m->n_params && ck.params != NULL);
        float sum = 0;
        for (int k = -1; k < ck.n_slots; k++) {
            const float *v = k < 0 ? ck.params : ck.slots[k];
            TT_ASSERT(v != NULL);
            for (size_t i = 0; i < ck.n_params; i++) sum += v[i];
        }
        g_sink = sum;
        size_t bad = 0;
        tt_error nf;
        const tt_status fin = tt_checkpoint_check_finite(&ck, m, "fuzz-ckpt", 1, &bad, &nf);
        TT_ASSERT((fin == TT_OK) == (bad == 0) && (sum == sum || bad > 0)); /* a NaN sum needs a non-finite value */
    }
    tt_checkpoint_free(&ck);
    return s;
}

static void fuzz_both(const uint8_t *data, size_t size)
{
    const tt_status bare = fuzz_parse(data, size, NULL);
    const tt_status with_model = fuzz_parse(data, size, fuzz_model());
    TT_ASSERT(with_model != TT_OK || bare == TT_OK); /* the model only adds checks */
}

/* Every input as it is (the checksum refuses almost every mutation), then sealed — its checksum rewritten where its
 * header has a place for one — so the mutations reach the checks behind the checksum too. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_both(data, size);
    uint8_t *copy = (uint8_t *)malloc(size ? size : 1); /* exactly size bytes: ASan sees a read past them */
    tt_error err;
    TT_ASSERT(copy != NULL);
    if (size) memcpy(copy, data, size);
    if (tt_checkpoint_seal(copy, size, &err) == TT_OK) fuzz_both(copy, size);
    free(copy);
    return 0;
}
