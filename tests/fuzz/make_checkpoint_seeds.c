/* make_checkpoint_seeds.c — writes the seed corpus of fuzz_checkpoint (tests/fuzz/corpus/checkpoint/) with the real
 * writer, for the fuzz target's model (TT_FUZZ_CKPT_MODEL): "ok-*" files, one per optimizer's slot layout, that the
 * reader must accept, and "bad-*" files, each broken in one way, that it must refuse (tests/test_checkpoint.c checks
 * both against the committed corpus). Every file is under 4 KB, libFuzzer's default -max_len.
 *   build/tests/make_checkpoint_seeds tests/fuzz/corpus/checkpoint
 * Not for: tests (it asserts nothing beyond its own writes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_checkpoint.h"
#include "tt_fuzz.h"

static const char *g_dir;
static int g_nan_at = -1; /* a weight made NaN in the next seed */
static int g_callbacks;   /* the next seed holds the callbacks' state and the best epoch's weights */

static void die(const char *what)
{
    fprintf(stderr, "make_checkpoint_seeds: %s\n", what);
    exit(1);
}

static void put(const char *name, const uint8_t *b, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) die(path);
}

/* Writes a checkpoint of m with optimizer c through tt_checkpoint_write and returns its bytes (malloc'd). */
static uint8_t *seed(const char *name, const tt_model *m, tt_optim_config c, double best, int texts, size_t *len)
{
    tt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.epoch = 2;
    ck.step = 1;
    ck.steps_per_epoch = 4;
    ck.global_step = 5;
    ck.optim_steps = 5; /* one a step (the seeds before the key have none: absent, it is global_step) */
    ck.seed = 42;
    ck.batch = 8;
    ck.optim = c;
    ck.u_product = c.kind == TT_OPT_NADAM ? 0.41 : 1.0;
    ck.best = best;
    ck.towers = 2;
    snprintf(ck.backend, sizeof ck.backend, "cpu");
    ck.model_desc = texts ? (char *)TT_FUZZ_CKPT_MODEL : NULL;
    ck.options = texts ? (char *)"{\"epochs\": 3, \"train_crc32\": \"0badf00d\"}" : NULL;
    ck.n_params = m->n_params;
    const char *names[3];
    ck.n_slots = tt_optim_slot_names(&c, names);
    float *bufs[5] = {NULL, NULL, NULL, NULL, NULL};
    if (g_callbacks) /* EarlyStopping with restore_best_weights and ReduceLROnPlateau, after epoch 1 */
        ck.cb = (tt_ckpt_callbacks){.early = 1, .plateau = 1, .es_has_best = 1, .es_best = 0.375, .es_wait = 1,
                                    .es_best_epoch = 1, .es_kept = 1, .rl_has_best = 1, .rl_best = 0.5,
                                    .rl_wait = 1, .rl_cooldown = 2, .lr = 0.0005f};
    const int nb = ck.n_slots + (g_callbacks ? 1 : 0); /* the last buffer: the best weights */
    for (int k = 0; k <= nb; k++) {
        bufs[k] = (float *)tt_malloc(m->n_params * sizeof(float));
        if (!bufs[k]) die("out of memory");
        for (size_t i = 0; i < m->n_params; i++) bufs[k][i] = (float)((int)(i * 7 + (size_t)k * 3) % 19 - 9) / 8.0f;
    }
    if (g_nan_at >= 0) bufs[0][g_nan_at] = NAN;
    ck.params = bufs[0];
    ck.best_params = g_callbacks ? bufs[nb] : NULL;
    for (int k = 0; k < ck.n_slots; k++) {
        snprintf(ck.slot_names[k], sizeof ck.slot_names[k], "%s", names[k]);
        ck.slots[k] = bufs[k + 1];
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    tt_error err;
    if (tt_checkpoint_write(path, m, &ck, &err) != TT_OK) die(err.msg);
    for (int k = 0; k <= nb; k++) tt_free(bufs[k]);
    FILE *f = fopen(path, "rb");
    uint8_t *b = (uint8_t *)malloc(1 << 16);
    if (!f || !b) die(path);
    *len = fread(b, 1, 1 << 16, f);
    fclose(f);
    if (*len >= 4096) die("a seed over 4 KB");
    return b;
}

/* A safetensors file's header length: the little-endian u64 it starts with. */
static uint64_t header_length(const uint8_t *b)
{
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
    return n;
}

/* b with the header's first `from` replaced by `to` (length prefix rewritten, data kept), written as name; sealed
 * (the checksum rewritten, where the edited header still has its place) unless `raw`: then the checksum refuses it,
 * else the check the edit is aimed at. */
static void edited_as(const char *name, const uint8_t *b, size_t len, const char *from, const char *to, int raw)
{
    const uint64_t n = header_length(b);
    const char *h = (const char *)b + 8;
    const char *at = NULL;
    for (size_t i = 0; !at && i + strlen(from) <= n; i++)
        if (memcmp(h + i, from, strlen(from)) == 0) at = h + i;
    if (!at) die(from);
    const size_t nn = n - strlen(from) + strlen(to), pre = (size_t)(at - h);
    uint8_t *o = (uint8_t *)malloc(len - n + nn);
    for (int i = 0; i < 8; i++) o[i] = (uint8_t)((uint64_t)nn >> (8 * i));
    memcpy(o + 8, h, pre);
    memcpy(o + 8 + pre, to, strlen(to));
    memcpy(o + 8 + pre + strlen(to), at + strlen(from), n - pre - strlen(from));
    memcpy(o + 8 + nn, b + 8 + n, len - 8 - n);
    tt_error err;
    if (!raw) (void)tt_checkpoint_seal(o, len - n + nn, &err);
    put(name, o, len - n + nn);
    free(o);
}

static void edited(const char *name, const uint8_t *b, size_t len, const char *from, const char *to)
{
    edited_as(name, b, len, from, to, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) die("usage: make_checkpoint_seeds DIR");
    g_dir = argv[1];
    tt_model m, other;
    const tt_model_input none = {{0, {0, 0, 0, 0}}, 0, 0};
    tt_error err;
    if (tt_model_parse(&m, TT_FUZZ_CKPT_MODEL, "seed", &none, &err) != TT_OK) die(err.msg);
    if (tt_model_parse(&other, "input shape=4,4,1\nconv2d filters=3 kernel=3\nflatten\ndense units=3\n", "seed", &none,
                       &err) != TT_OK)
        die(err.msg);
    tt_optim_config sgd = tt_optim_defaults(TT_OPT_SGD), adam = tt_optim_defaults(TT_OPT_ADAM);
    tt_optim_config nadam = tt_optim_defaults(TT_OPT_NADAM), rms = tt_optim_defaults(TT_OPT_RMSPROP);
    sgd.momentum = 0.9f;
    sgd.nesterov = 1;
    tt_optim_config rms3 = rms;
    rms3.momentum = 0.5f;
    rms3.centered = 1;
    size_t len, n;
    uint8_t *b;
    free(seed("ok-adam.safetensors", &m, adam, 0.25, 1, &len));
    free(seed("ok-nadam-no-texts.safetensors", &m, nadam, NAN, 0, &len));
    free(seed("ok-rmsprop.safetensors", &m, rms, NAN, 1, &len));
    free(seed("ok-rmsprop-centered-momentum.safetensors", &m, rms3, 1.5, 1, &len));
    free(seed("bad-other-model.safetensors", &other, sgd, NAN, 1, &len)); /* conv2d/kernel (3, 3, 1, 3) */
    b = seed("ok-sgd-momentum.safetensors", &m, sgd, NAN, 1, &len);
    n = header_length(b);
    put("bad-truncated.safetensors", b, len - 3);
    put("bad-header-only.safetensors", b, 8 + n);
    b[len - 1] ^= 1;
    put("bad-flipped-data-byte.safetensors", b, len);
    b[len - 1] ^= 1;
    uint8_t big[16];
    memcpy(big, b, 16);
    big[5] = 1; /* 2^40 */
    put("bad-header-length-huge.safetensors", big, sizeof big);
    edited("bad-not-json.safetensors", b, len, "{\"__metadata__\":", "{\"__metadata__\"::");
    edited("bad-dtype-f16.safetensors", b, len, "\"dtype\":\"F32\"", "\"dtype\":\"F16\"");
    edited("bad-overlap.safetensors", b, len, "[72,80]", "[68,76]"); /* conv2d/bias into conv2d/kernel */
    edited("bad-gap.safetensors", b, len, "[72,80]", "[76,84]");
    edited("bad-duplicate-key.safetensors", b, len, "\"seed\":\"42\"", "\"seed\":\"42\",\"seed\":\"42\"");
    edited("bad-epoch-not-integer.safetensors", b, len, "\"epoch\":\"2\"", "\"epoch\":\"2.0\"");
    edited("bad-shape-huge.safetensors", b, len, "\"shape\":[3,3,1,2]", "\"shape\":[4294967296,4294967296,1,2]");
    edited("bad-slots-of-adam.safetensors", b, len, "\"optimizer\":\"sgd\"", "\"optimizer\":\"adam\"");
    edited("bad-single-quotes.safetensors", b, len, "\"format\"", "'format'");
    /* issue 18: the header's checksum, strict JSON (header and options), typed options */
    edited_as("bad-header-edited-unsealed.safetensors", b, len, "\"seed\":\"42\"", "\"seed\":\"43\"", 1);
    edited("bad-format-version-1.safetensors", b, len, "\"format_version\":\"2\"", "\"format_version\":\"1\"");
    edited("bad-checksum-escaped-key.safetensors", b, len, "\"checksum\"", "\"check\\u0073um\"");
    edited("bad-overlong-utf8.safetensors", b, len, "\"backend\":\"cpu\"", "\"backend\":\"c\xc0\xafu\"");
    edited("bad-encoded-surrogate.safetensors", b, len, "\"backend\":\"cpu\"", "\"backend\":\"c\xed\xa0\x80u\"");
    edited("bad-lone-surrogate-escape.safetensors", b, len, "\"backend\":\"cpu\"", "\"backend\":\"c\\ud800u\"");
    edited("bad-leading-zero.safetensors", b, len, "\"data_offsets\":[0,", "\"data_offsets\":[00,");
    edited("bad-nan-literal.safetensors", b, len, "\"data_offsets\":[0,", "\"data_offsets\":[NaN,");
    edited("bad-duplicate-key-nested.safetensors", b, len, "\"dtype\":\"F32\"", "\"dtype\":\"F32\",\"dt\\u0079pe\":\"F32\"");
    edited("bad-options-null.safetensors", b, len, "\\\"train_crc32\\\": \\\"0badf00d\\\"", "\\\"train_crc32\\\": null");
    edited("bad-options-duplicate-key.safetensors", b, len, "{\\\"epochs\\\": 3", "{\\\"epochs\\\": 3, \\\"epochs\\\": 3");
    edited("bad-options-leading-zero.safetensors", b, len, "\\\"epochs\\\": 3", "\\\"epochs\\\": 03");
    edited("bad-options-unknown-key.safetensors", b, len, "\\\"epochs\\\"", "\\\"epochz\\\"");
    edited("bad-options-lone-surrogate.safetensors", b, len, "0badf00d", "0badf\\\\udc00");
    const uint8_t null_header[16] = {8, 0, 0, 0, 0, 0, 0, 0, 'n', 'u', 'l', 'l', ' ', ' ', ' ', ' '};
    put("bad-header-null.safetensors", null_header, sizeof null_header);
    free(b);
    /* the callbacks' state (--early-stopping, --reduce-lr-on-plateau) and the best epoch's weights */
    g_callbacks = 1;
    b = seed("ok-adam-callbacks.safetensors", &m, adam, NAN, 1, &len);
    g_callbacks = 0;
    edited("bad-callbacks-best-weights-false.safetensors", b, len, "\"es_best_weights\":\"true\"",
           "\"es_best_weights\":\"false\""); /* its tensors are then no one's */
    edited("bad-callbacks-no-es-wait.safetensors", b, len, "\"es_wait\":\"1\",", "");
    edited("bad-callbacks-wait-beyond-epoch.safetensors", b, len, "\"es_wait\":\"1\"", "\"es_wait\":\"3\"");
    edited("bad-callbacks-stopped-mid-epoch.safetensors", b, len, "\"es_stopped_epoch\":\"0\"",
           "\"es_stopped_epoch\":\"2\"");
    edited("bad-callbacks-negative-lr.safetensors", b, len, "\"plateau_lr\":\"0.000500000024\"",
           "\"plateau_lr\":\"-1\"");
    edited("bad-callbacks-best-inf.safetensors", b, len, "\"es_best\":\"0.375\"", "\"es_best\":\"inf\"");
    free(b);
    g_nan_at = 5; /* read as valid; --resume refuses it, eval warns (tests/test_resume.c, tests/test_cli.c) */
    free(seed("ok-nan-weight.safetensors", &m, adam, NAN, 1, &len));
    g_nan_at = -1;
    return 0;
}
