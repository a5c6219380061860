/* test_checkpoint.c — checkpoints (src/model/checkpoint.c): a run's state written and read back bit for bit, the file
 * readable as plain safetensors by a reader written here from the format alone, every hostile-file refusal as one
 * line naming the file, and the safe write (no torn file, no temporaries left, failures noticed).
 * Not for: when a run saves or what a resume does with the state (train.c's tests). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tt_checkpoint.h"
#include "tt_json.h"
#include "tt_test.h"
#include "fuzz/tt_fuzz.h"

/* A small conv model (its own input line) and an MLP over 12 features and 5 classes. */
static const char CONV_TEXT[] = "input shape=6,6,2\nconv2d filters=3 kernel=3 activation=relu\nmaxpool2d pool=2\n"
                                "conv2d filters=2 kernel=2 padding=same use_bias=false\nflatten\ndense units=4\n";
static const char MLP_TEXT[] = "dense units=7 activation=relu\ndense units=5\n";

static void make_model(tt_model *m, int conv, const char *text)
{
    tt_error err;
    const tt_model_input none = {{0, {0, 0, 0, 0}}, 0, 0};
    ck_assert_msg(tt_model_parse(m, text ? text : conv ? CONV_TEXT : MLP_TEXT, "t", conv ? &none : TT_FLAT_INPUT(12, 5),
                                 &err) == TT_OK, "%s", err.msg);
}

/* The four optimizer configurations of the round trip, each with values that need all nine digits. */
static tt_optim_config optim_case(int i)
{
    tt_optim_config c;
    switch (i) {
    case 0:
        c = tt_optim_defaults(TT_OPT_SGD);
        c.momentum = 0.9f;
        c.nesterov = 1;
        c.lr = 1.0f / 3.0f;
        break;
    case 1:
        c = tt_optim_defaults(TT_OPT_ADAM);
        c.lr = 0.0031415927f;
        c.beta1 = 0.85f;
        break;
    case 2:
        c = tt_optim_defaults(TT_OPT_NADAM);
        c.epsilon = 1.1754944e-38f; /* FLT_MIN: the smallest normal */
        break;
    default:
        c = tt_optim_defaults(TT_OPT_RMSPROP);
        c.centered = 1;
        c.momentum = 0.5f;
        c.rho = 0.95f;
        break;
    }
    return c;
}

/* A checkpoint of m with every field set to something a round trip could get wrong: the largest u64, -0.0, NaN,
 * subnormal and huge floats among the weights. */
static void fill(tt_checkpoint *ck, const tt_model *m, tt_optim_config c, double best, uint64_t seed)
{
    memset(ck, 0, sizeof *ck);
    ck->epoch = 3;
    ck->step = 2;
    ck->steps_per_epoch = 7;
    ck->global_step = 16;
    ck->optim_steps = 16;
    ck->seed = UINT64_MAX;
    ck->batch = 32;
    ck->optim = c;
    ck->u_product = 0.12345678901234568;
    ck->best = best;
    ck->towers = 3;
    snprintf(ck->backend, sizeof ck->backend, "cpu");
    ck->model_desc = (char *)tt_malloc(strlen(CONV_TEXT) + 1);
    memcpy(ck->model_desc, CONV_TEXT, strlen(CONV_TEXT) + 1); /* newlines: escaped in JSON */
    const char opts[] = "{\"base_lr\": 0.1, \"reduce\": \"caf\xc3\xa9 \\\"x\\\"\"}";
    ck->options = (char *)tt_malloc(sizeof opts);
    memcpy(ck->options, opts, sizeof opts);
    ck->n_params = m->n_params;
    const char *names[3];
    ck->n_slots = tt_optim_slot_names(&c, names);
    tt_rng r;
    tt_rng_seed(&r, seed, 1);
    for (int k = -1; k < ck->n_slots; k++) {
        float *v = (float *)tt_malloc(m->n_params * sizeof(float));
        for (size_t i = 0; i < m->n_params; i++) v[i] = 2.0f * tt_rng_uniform(&r) - 1.0f;
        v[0] = -0.0f;
        v[1] = 1e-41f;
        v[2] = 3.4e38f;
        if (k < 0) ck->params = v;
        else {
            snprintf(ck->slot_names[k], sizeof ck->slot_names[k], "%s", names[k]);
            ck->slots[k] = v;
        }
    }
}

static void tmp_path(char *path, size_t len, const char *name)
{
    char dir[512];
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(path, len, "%s/%s", dir, name);
}

/* A refusal: the status, ck left empty, one line starting with the source's name and containing `want`. */
static void refused(tt_status s, const tt_error *err, const tt_checkpoint *ck, const char *name, const char *want)
{
    ck_assert_msg(s != TT_OK, "accepted; expected a refusal containing '%s'", want);
    ck_assert_msg(strncmp(err->msg, name, strlen(name)) == 0, "message does not start with %s: %s", name, err->msg);
    ck_assert_msg(strchr(err->msg, '\n') == NULL, "message of two lines: %s", err->msg);
    for (const char *c = err->msg; *c; c++) /* stderr escapes every other byte: an em dash would read \xe2\x80\x94 */
        ck_assert_msg(*c >= 0x20 && *c < 0x7f, "message holds byte 0x%02x (not printable ASCII): %s",
                      (unsigned)(unsigned char)*c, err->msg);
    ck_assert_msg(strstr(err->msg, want) != NULL, "expected '%s' in: %s", want, err->msg);
    const tt_checkpoint empty = {0};
    ck_assert_msg(memcmp(ck, &empty, sizeof empty) == 0, "a refused checkpoint is not left empty");
}

static void assert_same_state(const tt_checkpoint *a, const tt_checkpoint *b, int with_tensors)
{
    ck_assert_uint_eq(a->epoch, b->epoch);
    ck_assert_uint_eq(a->step, b->step);
    ck_assert_uint_eq(a->steps_per_epoch, b->steps_per_epoch);
    ck_assert_uint_eq(a->global_step, b->global_step);
    ck_assert_uint_eq(a->optim_steps, b->optim_steps);
    ck_assert_uint_eq(a->seed, b->seed);
    ck_assert_uint_eq(a->batch, b->batch);
    ck_assert_uint_eq(a->towers, b->towers);
    ck_assert_str_eq(a->backend, b->backend);
    ck_assert_str_eq(a->model_desc, b->model_desc);
    ck_assert_str_eq(a->options, b->options);
    const tt_optim_config *x = &a->optim, *y = &b->optim;
    ck_assert_int_eq(x->kind, y->kind);
    ck_assert_int_eq(x->nesterov, y->nesterov);
    ck_assert_int_eq(x->centered, y->centered);
    const float fx[] = {x->lr, x->momentum, x->beta1, x->beta2, x->epsilon, x->rho};
    const float fy[] = {y->lr, y->momentum, y->beta1, y->beta2, y->epsilon, y->rho};
    ck_assert_msg(memcmp(fx, fy, sizeof fx) == 0, "optimizer floats differ after the round trip");
    ck_assert_msg(memcmp(&a->u_product, &b->u_product, sizeof(double)) == 0, "u_product %.17g != %.17g", a->u_product,
                  b->u_product);
    ck_assert_msg(isnan(a->best) ? isnan(b->best) : memcmp(&a->best, &b->best, sizeof(double)) == 0,
                  "best %.17g != %.17g", a->best, b->best);
    ck_assert_uint_eq(a->n_params, b->n_params);
    ck_assert_int_eq(a->n_slots, b->n_slots);
    for (int k = 0; k < a->n_slots; k++) ck_assert_str_eq(a->slot_names[k], b->slot_names[k]);
    if (!with_tensors) {
        ck_assert_ptr_null(b->params);
        for (int k = 0; k < TT_CKPT_MAX_SLOTS; k++) ck_assert_ptr_null(b->slots[k]);
        return;
    }
    ck_assert_msg(memcmp(a->params, b->params, a->n_params * sizeof(float)) == 0, "weights differ");
    for (int k = 0; k < a->n_slots; k++)
        ck_assert_msg(memcmp(a->slots[k], b->slots[k], a->n_params * sizeof(float)) == 0, "slot %s differs",
                      a->slot_names[k]);
}

/* Every optimizer's configuration on a conv model and an MLP: written, read with the model (every tensor, bit for
 * bit) and without (the metadata only), with a NaN best (none yet) and a number. */
START_TEST(test_round_trip)
{
    const int conv = _i / 4;
    tt_model m;
    make_model(&m, conv, NULL);
    tt_checkpoint ck, back;
    fill(&ck, &m, optim_case(_i % 4), _i % 2 ? NAN : -0.0, 100 + (uint64_t)_i);
    ck_assert_int_eq(ck.n_slots, (int)tt_optim_state_floats(&ck.optim));
    char path[600];
    tmp_path(path, sizeof path, "ck.safetensors");
    tt_error err;
    ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(tt_checkpoint_read(path, &m, &back, &err) == TT_OK, "%s", err.msg);
    assert_same_state(&ck, &back, 1);
    tt_checkpoint_free(&back);
    ck_assert_msg(tt_checkpoint_read(path, NULL, &back, &err) == TT_OK, "%s", err.msg);
    assert_same_state(&ck, &back, 0);
    tt_checkpoint_free(&back);
    tt_checkpoint_free(&back); /* twice: an empty one */
    tt_checkpoint_free(&ck);
}
END_TEST

/* The file as another safetensors reader sees it, from the format's description alone: u64 LE header length, a JSON
 * header whose data start 8-byte aligned, "__metadata__" first, then the tensors in layout order with their bytes at
 * data_offsets from the end of the header. */
START_TEST(test_independent_reader)
{
    tt_model m;
    make_model(&m, 1, NULL);
    tt_checkpoint ck;
    fill(&ck, &m, optim_case(1), 0.5, 7);
    char path[600];
    tmp_path(path, sizeof path, "plain.safetensors");
    tt_error err;
    ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
    size_t len;
    uint8_t *b = tt_test_read_file(path, &len);
    const uint64_t n = tt_test_le64(b);
    ck_assert_uint_eq((8 + n) % 8, 0);
    ck_assert_uint_le(8 + n, len);
    char *text = (char *)malloc(n + 1);
    memcpy(text, b + 8, n);
    text[n] = '\0';
    json_object *h = json_tokener_parse(text);
    ck_assert_ptr_nonnull(h);
    const char *order[2 * TT_MAX_TENSORS + 1];
    size_t k = 0;
    json_object_object_foreach(h, key, val) {
        (void)val;
        if (k < sizeof order / sizeof order[0]) order[k++] = key;
    }
    ck_assert_str_eq(order[0], "__metadata__");
    ck_assert_uint_eq(k, 1 + 3 * m.n_tensors); /* weights, momentum, velocity */
    json_object *md, *v, *e, *off;
    ck_assert(json_object_object_get_ex(h, "__metadata__", &md));
    ck_assert(json_object_object_get_ex(md, "format", &v));
    ck_assert_str_eq(json_object_get_string(v), "towertrain-checkpoint");
    ck_assert(json_object_object_get_ex(md, "optimizer", &v));
    ck_assert_str_eq(json_object_get_string(v), "adam");
    ck_assert(json_object_object_get_ex(md, "seed", &v));
    ck_assert_str_eq(json_object_get_string(v), "18446744073709551615");
    ck_assert(json_object_object_get_ex(md, "lr", &v));
    ck_assert_str_eq(json_object_get_string(v), "0.00314159272");
    for (size_t t = 0; t < m.n_tensors; t++) {
        ck_assert_str_eq(order[1 + t], m.tensors[t].name);
        char slot[128];
        snprintf(slot, sizeof slot, "optimizer/velocity/%s", m.tensors[t].name);
        ck_assert_str_eq(order[1 + 2 * m.n_tensors + t], slot);
        for (int which = 0; which < 2; which++) { /* the weight, and its second moment */
            ck_assert(json_object_object_get_ex(h, which ? slot : m.tensors[t].name, &e));
            ck_assert(json_object_object_get_ex(e, "dtype", &v));
            ck_assert_str_eq(json_object_get_string(v), "F32");
            ck_assert(json_object_object_get_ex(e, "shape", &v));
            ck_assert_uint_eq(json_object_array_length(v), (size_t)m.tensors[t].ndim);
            for (int d = 0; d < m.tensors[t].ndim; d++)
                ck_assert_uint_eq((uint64_t)json_object_get_int64(json_object_array_get_idx(v, (size_t)d)),
                                  m.tensors[t].shape[d]);
            ck_assert(json_object_object_get_ex(e, "data_offsets", &off));
            const uint64_t begin = (uint64_t)json_object_get_int64(json_object_array_get_idx(off, 0));
            const uint64_t end = (uint64_t)json_object_get_int64(json_object_array_get_idx(off, 1));
            ck_assert_uint_eq(end - begin, m.tensors[t].size * 4);
            ck_assert_uint_le(8 + n + end, len);
            const float *src = (which ? ck.slots[1] : ck.params) + m.tensors[t].offset;
            ck_assert_msg(memcmp(b + 8 + n + begin, src, end - begin) == 0, "bytes of %s", which ? slot : m.tensors[t].name);
        }
    }
    json_object_put(h);
    free(text);
    free(b);
    tt_checkpoint_free(&ck);
}
END_TEST

/* A valid MLP checkpoint in memory (SGD with momentum: one slot), its header's length and text. */
static uint8_t *valid_file(const tt_model *m, size_t *len, int conv)
{
    tt_checkpoint ck;
    fill(&ck, m, optim_case(0), NAN, 3);
    char path[600];
    tmp_path(path, sizeof path, "v.safetensors");
    tt_error err;
    ck_assert_msg(tt_checkpoint_write(path, m, &ck, &err) == TT_OK, "%s", err.msg);
    tt_checkpoint_free(&ck);
    (void)conv;
    return tt_test_read_file(path, len);
}

/* The file with its header's first `from` replaced by `to`, the length prefix rewritten, the data kept, and the
 * checksum rewritten when the edited header still has its place (tt_checkpoint_seal): the refusal is then the
 * check behind the checksum that the edit is aimed at. */
static uint8_t *edit_header(const uint8_t *b, size_t len, const char *from, const char *to, size_t *out_len)
{
    const uint64_t n = tt_test_le64(b);
    char *text = (char *)malloc(n + 1);
    memcpy(text, b + 8, n);
    text[n] = '\0';
    char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "'%s' not in the header", from);
    const size_t nn = n - strlen(from) + strlen(to);
    uint8_t *o = (uint8_t *)malloc(len - n + nn);
    for (int i = 0; i < 8; i++) o[i] = (uint8_t)((uint64_t)nn >> (8 * i));
    const size_t pre = (size_t)(at - text);
    memcpy(o + 8, text, pre);
    memcpy(o + 8 + pre, to, strlen(to));
    memcpy(o + 8 + pre + strlen(to), at + strlen(from), n - pre - strlen(from));
    memcpy(o + 8 + nn, b + 8 + n, len - 8 - n);
    *out_len = len - n + nn;
    free(text);
    tt_error err;
    (void)tt_checkpoint_seal(o, *out_len, &err);
    return o;
}

/* Parses an edited copy of a valid MLP checkpoint, with the model and (unless model_only) without, and expects a
 * refusal naming `want`. */
static void edited_refused_as(const char *from, const char *to, const char *want, int model_only)
{
    tt_model m;
    make_model(&m, 0, NULL);
    size_t len, elen;
    uint8_t *b = valid_file(&m, &len, 0);
    uint8_t *e = edit_header(b, len, from, to, &elen);
    tt_checkpoint ck;
    tt_error err = {{0}};
    refused(tt_checkpoint_parse(e, elen, "edited.safetensors", &m, &ck, &err), &err, &ck, "edited.safetensors", want);
    if (!model_only)
        refused(tt_checkpoint_parse(e, elen, "edited.safetensors", NULL, &ck, &err), &err, &ck, "edited.safetensors",
                want);
    free(e);
    free(b);
}

static void edited_refused(const char *from, const char *to, const char *want) { edited_refused_as(from, to, want, 0); }

/* Cut at every length short of the whole: refused, never a crash, ck left empty; the same through a file. */
START_TEST(test_truncated)
{
    tt_model m;
    make_model(&m, 0, NULL);
    size_t len;
    uint8_t *b = valid_file(&m, &len, 0);
    tt_checkpoint ck;
    tt_error err;
    ck_assert_msg(tt_checkpoint_parse(b, len, "whole", &m, &ck, &err) == TT_OK, "%s", err.msg);
    tt_checkpoint_free(&ck);
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *c = (uint8_t *)malloc(cut ? cut : 1); /* exactly cut bytes: ASan sees a read past them */
        memcpy(c, b, cut);
        refused(tt_checkpoint_parse(c, cut, "cut", &m, &ck, &err), &err, &ck, "cut", "");
        refused(tt_checkpoint_parse(c, cut, "cut", NULL, &ck, &err), &err, &ck, "cut", "");
        free(c);
    }
    char path[600];
    tmp_path(path, sizeof path, "short.safetensors");
    tt_test_write(path, b, len - 1);
    refused(tt_checkpoint_read(path, &m, &ck, &err), &err, &ck, path, "checksum mismatch");
    tt_test_write(path, b, 5);
    refused(tt_checkpoint_read(path, &m, &ck, &err), &err, &ck, path, "too short");
    free(b);
}
END_TEST

/* A flipped bit anywhere in the tensors' bytes: the checksum says so. */
START_TEST(test_flipped_data_byte)
{
    tt_model m;
    make_model(&m, 0, NULL);
    size_t len;
    uint8_t *b = valid_file(&m, &len, 0);
    const uint64_t n = tt_test_le64(b);
    const size_t at[] = {8 + n, 8 + n + (len - 8 - n) / 2, len - 1};
    tt_checkpoint ck;
    tt_error err;
    for (size_t i = 0; i < 3; i++) {
        b[at[i]] ^= 0x10;
        refused(tt_checkpoint_parse(b, len, "flip", &m, &ck, &err), &err, &ck, "flip", "checksum mismatch");
        refused(tt_checkpoint_parse(b, len, "flip", NULL, &ck, &err), &err, &ck, "flip", "checksum mismatch");
        b[at[i]] ^= 0x10;
    }
    ck_assert_int_eq(tt_checkpoint_parse(b, len, "flip", &m, &ck, &err), TT_OK);
    tt_checkpoint_free(&ck);
    free(b);
}
END_TEST

/* Header lengths beyond the file and beyond the cap: refused before anything of their size is allocated. */
START_TEST(test_header_length)
{
    tt_model m;
    make_model(&m, 0, NULL);
    size_t len;
    uint8_t *b = valid_file(&m, &len, 0);
    tt_checkpoint ck;
    tt_error err;
    const uint64_t before = tt_alloc_largest_request();
    const uint64_t claims[] = {len - 7, (uint64_t)1 << 26 | 1, (uint64_t)1 << 40, UINT64_MAX};
    const char *wants[] = {"beyond the end of the file", "over the limit", "over the limit", "over the limit"};
    for (int c = 0; c < 4; c++) {
        for (int i = 0; i < 8; i++) b[i] = (uint8_t)(claims[c] >> (8 * i));
        refused(tt_checkpoint_parse(b, len, "hl", &m, &ck, &err), &err, &ck, "hl", wants[c]);
    }
    ck_assert_uint_le(tt_alloc_largest_request(), before > len ? before : len);
    free(b);
}
END_TEST

START_TEST(test_header_not_json)
{
    edited_refused("{\"__metadata__\":{", "{\"__metadata__\"::{", "the header is not JSON");
    edited_refused("{\"__metadata__\":{", "[{\"__metadata__\":{", "the header is not JSON");
    edited_refused("{\"__metadata__\":{\"format\"", "{'__metadata__':{\"format\"", "single quote");
    edited_refused("{\"__metadata__\":{\"format\"", "{\"__metadata__\":{\"for\nmat\"", "control byte 0x0a in a string");
    edited_refused("{\"__metadata__\":{\"format\"", "{\"__metadata__\":{\"form\\u0000at\"", "\\u0000");
    edited_refused("{\"__metadata__\":{\"format\"", "{\"__metadata__\":{\"x\":1,\"format\"", "unknown key 'x'");
    edited_refused("\"dense/bias\":{\"dtype\"", "\"dense/bias\":{\"dtype\":\"F32\",\"dtype\"", "repeats a key");
    edited_refused("\"__metadata__\"", "\"__metadata_\"", "no __metadata__");
    edited_refused("\"format\":\"towertrain-checkpoint\"", "\"format\":\"pt\"", "format is 'pt'");
    edited_refused("\"format_version\":\"2\"", "\"format_version\":\"3\"", "format_version is '3'");
    edited_refused("\"format_version\":\"2\"", "\"format_version\":\"1\"", "format_version is '1' (its header has no "
                   "checksum); this towertrain reads version 2 only: towertrain up to commit 50436ee reads version 1");
    edited_refused("\"epoch\":\"3\"", "\"epoch\":\"3\",\"epoch\":\"3\"", "repeats a key");
    edited_refused("\"epoch\":\"3\"", "\"epoch\":\"3x\"", "key 'epoch' is '3x', not an unsigned integer");
    edited_refused("\"epoch\":\"3\"", "\"epoch\":\"-3\"", "key 'epoch' is '-3'");
    edited_refused("\"epoch\":\"3\"", "\"epoch\":\" 3\"", "key 'epoch' is ' 3'");
    edited_refused("\"epoch\":\"3\"", "\"epoch\":\"18446744073709551616\"", "key 'epoch'");
    edited_refused("\"epoch\":\"3\"", "\"epoch\":3", "key 'epoch' is not a string");
    edited_refused("\"step\":\"2\"", "\"step\":\"8\"", "step 8 is beyond steps_per_epoch 7");
    edited_refused("\"batch\":\"32\",", "", "no key 'batch'");
    edited_refused("\"lr\":\"0.333333343\"", "\"lr\":\"0.3x\"", "key 'lr' is '0.3x', not a finite number");
    edited_refused("\"lr\":\"0.333333343\"", "\"lr\":\"inf\"", "key 'lr'");
    edited_refused("\"lr\":\"0.333333343\"", "\"lr\":\"\"", "key 'lr'");
    edited_refused("\"nesterov\":\"true\"", "\"nesterov\":\"1\"", "not true or false");
    edited_refused("\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"nan\"", "key 'u_product'");
    /* sealed values no run writes: Nadam's product of momenta outside [0, 1], a best metric of +-Inf */
    edited_refused("\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"-5\"", "key 'u_product' is '-5', not a "
                   "number in [0, 1]");
    edited_refused("\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"1.5\"", "key 'u_product' is '1.5'");
    edited_refused("\"best\":\"nan\"", "\"best\":\"inf\"", "key 'best' is 'inf', not a finite number or nan");
    edited_refused("\"best\":\"nan\"", "\"best\":\"-inf\"", "key 'best' is '-inf'");
    edited_refused("\"optimizer\":\"sgd\"", "\"optimizer\":\"lion\"", "key 'optimizer' is 'lion'");
    edited_refused("\"checksum\":\"crc32:", "\"checksum\":\"crc64:", "key 'checksum'");
    edited_refused("\"backend\":\"cpu\"", "\"backend\":\"a-very-long-backend\"", "key 'backend'");
    edited_refused("\"options\":\"{", "\"options\":\"[", "options is not JSON");
    /* a header of many small values: refused before json-c makes an object of each */
    char *many = (char *)malloc(2 * 70000 + 32);
    size_t k = (size_t)sprintf(many, "\"shape\":[12,7");
    for (int i = 0; i < 70000; i++) k += (size_t)sprintf(many + k, ",1");
    sprintf(many + k, "]");
    edited_refused("\"shape\":[12,7]", many, "more than 65536 JSON values");
    free(many);
}
END_TEST


/* json-c 0.16 takes each of these even with STRICT | VALIDATE_UTF8 (the reason src/model/json.c scans first); the
 * strict parser refuses each, naming it, and takes the valid neighbours. */
START_TEST(test_json_c_is_lax)
{
    static const struct {
        const char *text, *want;
    } lax[] = {{"{\"a\":00}", "leading zero"}, {"{\"a\":-01}", "leading zero"}, {"{\"a\":1.}", "after its '.'"},
               {"{\"a\":NaN}", "'N' where a value"}, {"{\"a\":Infinity}", "'I' where a value"},
               {"{\"a\":\"\xc0\xaf\"}", "not UTF-8"}, {"{\"a\":\"\xe0\x80\xaf\"}", "not UTF-8"},
               {"{\"a\":\"\xed\xa0\x80\"}", "not UTF-8"}, {"{\"a\":\"\xf4\x90\x80\x80\"}", "not UTF-8"},
               {"{\"a\":\"\\ud800\"}", "lone surrogate \\ud800"}, {"{\"a\":\"\\udc00x\"}", "lone surrogate \\udc00"},
               {"{\"a\":\"\\ud800\\u0041\"}", "lone surrogate"}, {"{\"a\":1,\"a\":2}", "repeats a key"},
               {"{\"a\":{\"b\":1,\"\\u0062\":2}}", "repeats a key"}, {"{\"a\":1}x", "'x' where nothing more"}};
    for (size_t k = 0; k < sizeof lax / sizeof lax[0]; k++) {
        json_tokener *tok = json_tokener_new_ex(8);
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        json_object *v = json_tokener_parse_ex(tok, lax[k].text, (int)strlen(lax[k].text));
        const int json_c_took = v != NULL && json_tokener_get_error(tok) == json_tokener_success;
        json_object_put(v);
        json_tokener_free(tok);
        if (k < sizeof lax / sizeof lax[0] - 1) /* the last: json-c stops at the value, we look at the rest */
            ck_assert_msg(json_c_took, "json-c now refuses %s: the pre-scan's note may go", lax[k].text);
        tt_json_scan sc = {0};
        char why[200];
        v = tt_json_parse_object(lax[k].text, strlen(lax[k].text), 8, 1000, &sc, why, sizeof why);
        ck_assert_msg(v == NULL, "%s accepted", lax[k].text);
        ck_assert_msg(strstr(why, lax[k].want) != NULL, "%s: '%s' does not say '%s'", lax[k].text, why, lax[k].want);
    }
    static const char *const good[] = {"{\"a\":\"\\ud83d\\ude00\"}", "{\"a\":[1e5,-0,0.5,1E+2,-1.5e-3]}",
                                       "{\"a\":\"\\/\\\"\\\\\\b\\f\\n\\r\\t\\u00e9 caf\xc3\xa9 \xf0\x9f\x98\x80\"}",
                                       " {\"a\":{},\"b\":[],\"c\":[true,false,null]} \n"};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        tt_json_scan sc = {0};
        char why[200];
        json_object *v = tt_json_parse_object(good[k], strlen(good[k]), 8, 1000, &sc, why, sizeof why);
        ck_assert_msg(v != NULL, "%s refused: %s", good[k], why);
        json_object_put(v);
    }
    static const char *const not_object[][2] = {{"null", "is JSON null, not an object"},
                                                {"[1]", "is JSON an array, not an object"}, {"\"x\"", "a string"}};
    for (size_t k = 0; k < 3; k++) {
        tt_json_scan sc = {0};
        char why[200];
        ck_assert_ptr_null(tt_json_parse_object(not_object[k][0], strlen(not_object[k][0]), 8, 1000, &sc, why, 200));
        ck_assert_msg(strstr(why, not_object[k][1]) != NULL, "%s", why);
    }
}
END_TEST

/* Issue 31, item 3: a header value no run writes is refused where the header is read, sealed so that the checksum
 * passes: an integer with a leading zero, a float spelt otherwise than "%.9g" / "%.17g" writes it (a hex float,
 * "1e-3"), an optimizer parameter outside the range the command line's table gives it (lr 0 or negative, beta_1 2,
 * epsilon -1, momentum 1), a flag without what it needs, and options' classes -0 (0) or 2^32. The reference is the
 * writer's formats and the CLI's ranges as docs/checkpoints.md states them, each case from the issue. */
START_TEST(test_header_values_as_written)
{
    tt_model m;
    make_model(&m, 0, NULL);
    size_t len, elen;
    uint8_t *b = valid_file(&m, &len, 0);
    static const char *const edits[][3] = {
        {"\"epoch\":\"3\"", "\"epoch\":\"03\"", "key 'epoch' is '03'"},
        {"\"batch\":\"32\"", "\"batch\":\"032\"", "key 'batch' is '032'"},
        {"\"lr\":\"0.333333343\"", "\"lr\":\"0x1p-10\"", "key 'lr' is '0x1p-10'"},
        {"\"lr\":\"0.333333343\"", "\"lr\":\"1e-3\"", "key 'lr' is '1e-3'"},
        {"\"lr\":\"0.333333343\"", "\"lr\":\"0\"", "key 'lr' is '0'"},
        {"\"lr\":\"0.333333343\"", "\"lr\":\"-0.5\"", "key 'lr' is '-0.5'"},
        {"\"beta_1\":\"0.899999976\"", "\"beta_1\":\"2\"", "key 'beta_1' is '2'"},
        {"\"epsilon\":\"1.00000001e-07\"", "\"epsilon\":\"-1\"", "key 'epsilon' is '-1'"},
        {"\"momentum\":\"0.899999976\"", "\"momentum\":\"1\"", "key 'momentum' is '1'"},
        {"\"momentum\":\"0.899999976\"", "\"momentum\":\"0\"", "key 'nesterov' is 'true'"}, /* it needs momentum */
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.50\"", "key 'u_product' is '0.50'"},
        {"{\\\"base_lr\\\": 0.1,", "{\\\"classes\\\": -0, \\\"base_lr\\\": 0.1,", "key 'classes' holds 0"},
        {"{\\\"base_lr\\\": 0.1,", "{\\\"classes\\\": 4294967296, \\\"base_lr\\\": 0.1,", "key 'classes' holds 4294967296"},
        {"{\\\"base_lr\\\": 0.1,", "{\\\"vocab\\\": 16777217, \\\"base_lr\\\": 0.1,", "key 'vocab' holds 16777217"},
        /* the "same" list as a run writes it: "--option value", each option once */
        {"{\\\"base_lr\\\": 0.1,", "{\\\"same\\\": [\\\" --sync bsp\\\"], \\\"base_lr\\\": 0.1,", "key 'same' holds ' --sync bsp'"},
        {"{\\\"base_lr\\\": 0.1,", "{\\\"same\\\": [\\\"--sync\\\"], \\\"base_lr\\\": 0.1,", "key 'same' holds '--sync'"},
        {"{\\\"base_lr\\\": 0.1,",
         "{\\\"same\\\": [\\\"--sync bsp\\\", \\\"--sync ssp:2\\\"], \\\"base_lr\\\": 0.1,", "key 'same' holds '--sync ssp:2'"},
        /* the recipes' keys (issue 34): only as a run writes them */
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"lr_schedule\":\"cosine:abc\"", "key 'lr_schedule' is 'cosine:abc'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"lr_schedule\":\"constant\"", "key 'lr_schedule' is 'constant'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"lr_schedule\":\"cosine:10:0.100\"", "key 'lr_schedule' is 'cosine:10:0.100'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"lr_schedule\":\"step:5,3:1,1,1\"", "key 'lr_schedule' is 'step:5,3:1,1,1'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"lr_scale\":\"1\"", "key 'lr_scale' is '1'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"lr_scale\":\"2.5\"", "key 'lr_scale' is '2.5'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"lr_scale\":\"4e6\"", "key 'lr_scale' is '4e6'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"lr_warmup_steps\":\"x\"", "key 'lr_warmup_steps' is 'x'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"weight_decay\":\"0\"", "key 'weight_decay' is '0'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"weight_decay\":\"2\"", "key 'weight_decay' is '2'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"clipnorm\":\"-1\"", "key 'clipnorm' is '-1'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"global_clipnorm\":\"nan\"", "key 'global_clipnorm' is 'nan'"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"clipnorm\":\"1\",\"clipvalue\":\"1\"", "both clipnorm and clipvalue are set"},
    };
    tt_checkpoint ck;
    tt_error err = {{0}};
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        uint8_t *e = edit_header(b, len, edits[k][0], edits[k][1], &elen);
        refused(tt_checkpoint_parse(e, elen, "edited", &m, &ck, &err), &err, &ck, "edited", edits[k][2]);
        free(e);
    }
    /* the same places with values a run writes: accepted */
    static const char *const fine[][2] = {
        {"\"towers\":\"3\"", "\"towers\":\"10\""},
        {"\"lr\":\"0.333333343\"", "\"lr\":\"1024000\""}, /* 1e3 x 1024 towers: --lr-scaling linear's most */
        {"{\\\"base_lr\\\": 0.1,", "{\\\"classes\\\": 16777216, \\\"base_lr\\\": 0.1,"},
        {"{\\\"base_lr\\\": 0.1,", "{\\\"same\\\": [\\\"--sync bsp\\\", \\\"--bn-sync off\\\"], \\\"base_lr\\\": 0.1,"},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"lr_schedule\":\"cosine:10:0.1\""},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"lr_schedule\":\"step:5,9:0.1,0.01,0.001\",\"lr_scale\":\"4\",\"lr_warmup_steps\":\"7\""},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"weight_decay\":\"0.00400000019\""},
        {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.12345678901234568\",\"global_clipnorm\":\"1\""},
    };
    for (size_t k = 0; k < sizeof fine / sizeof fine[0]; k++) {
        uint8_t *e = edit_header(b, len, fine[k][0], fine[k][1], &elen);
        ck_assert_msg(tt_checkpoint_parse(e, elen, "edited", &m, &ck, &err) == TT_OK, "%s: %s", fine[k][1], err.msg);
        tt_checkpoint_free(&ck);
        free(e);
    }
    free(b);
}
END_TEST

/* The checksum covers the header: an edit left unsealed is refused as a mismatch, whatever it edits; the checksum
 * key spelt with an escape, or given twice, has no place; the typed options refuse a null (issue 18's crash). */
START_TEST(test_header_checksum)
{
    tt_model m;
    make_model(&m, 0, NULL);
    size_t len, elen;
    uint8_t *b = valid_file(&m, &len, 0);
    tt_checkpoint ck;
    tt_error err = {{0}};
    /* each accepted once sealed (any value a run could have written: "%.17g"): unsealed, each is a checksum mismatch */
    static const char *const edits[][2] = {{"\"best\":\"nan\"", "\"best\":\"1.0000000000000001e+300\""},
                                           {"\"u_product\":\"0.12345678901234568\"", "\"u_product\":\"0.5\""},
                                           {"\"seed\"", "\"seed\" "}};
    for (size_t k = 0; k < 3; k++) {
        uint8_t *e = edit_header(b, len, edits[k][0], edits[k][1], &elen);
        ck_assert_msg(tt_checkpoint_parse(e, elen, "sealed", &m, &ck, &err) == TT_OK, "%s", err.msg);
        tt_checkpoint_free(&ck);
        const char *sum = strstr((const char *)b + 8, "\"checksum\":\"crc32:");
        memcpy(strstr((char *)e + 8, "\"checksum\":\"crc32:"), sum, 26); /* the old checksum back */
        refused(tt_checkpoint_parse(e, elen, "edited", &m, &ck, &err), &err, &ck, "edited", "checksum mismatch");
        free(e);
    }
    edited_refused("\"checksum\"", "\"check\\u0073um\"", "no single __metadata__ key \"checksum\"");
    edited_refused("{\"__metadata__\":{", "{\"__metadata__\":{\"checksum\":\"crc32:00000000\",", "repeats a key");
    edited_refused("\\\"base_lr\\\": 0.1", "\\\"base_lr\\\":null", "options: key 'base_lr' is null, not a finite number");
    edited_refused("\\\"base_lr\\\": 0.1", "\\\"base_lr\\\":1e999", "options: key 'base_lr' is a number beyond a double, not "
                   "a finite");
    edited_refused("\\\"base_lr\\\": 0.1", "\\\"base_lr\\\": 0.1,\\\"base_lr\\\": 0.1", "options repeats a key");
    edited_refused("\\\"base_lr\\\"", "\\\"bas\\\\u0065_lr\\\":1,\\\"base_lr\\\"", "options repeats a key");
    free(b);
}
END_TEST

/* Tensor entries: dtypes, shapes, offsets that overlap, leave gaps or lie. */
START_TEST(test_bad_tensor_entries)
{
    tt_model m;
    make_model(&m, 0, NULL);
    const size_t K = m.tensors[0].size * 4, B = m.tensors[1].size * 4; /* dense/kernel, dense/bias bytes */
    char from[96], to[96];
    edited_refused("\"dtype\":\"F32\"", "\"dtype\":\"F16\"", "tensor dense/kernel has dtype 'F16'");
    edited_refused("\"dtype\":\"F32\"", "\"dtype\":32", "has dtype '(not a string)'");
    edited_refused("\"shape\":[12,7]", "\"shape\":[12,-7]", "shape dimension 1");
    edited_refused("\"shape\":[12,7]", "\"shape\":[12,7.0]", "shape dimension 1");
    edited_refused("\"shape\":[12,7]", "\"shape\":[12,7,1,1,1,1,1,1,1]", "at most 8 dimensions");
    edited_refused("\"shape\":[12,7]", "\"shape\":[4294967296,4294967296]", "larger than the data section");
    edited_refused("\"shape\":[12,7]", "\"shape\":[281474976710657,1]", "shape dimension 0");
    edited_refused_as("\"shape\":[12,7]", "\"shape\":[7,12]",
                      "tensor dense/kernel has shape (7, 12), the model has (12, 7)", 1);
    edited_refused("\"shape\":[12,7]", "\"shape\":[12,6]", "does not fit its bytes");
    edited_refused("\"dtype\":\"F32\",", "", "not an object of exactly dtype, shape and data_offsets");
    edited_refused("\"dtype\":\"F32\",", "\"dtype\":\"F32\",\"x\":1,", "not an object of exactly");
    /* dense/bias moved 4 bytes into dense/kernel: overlap */
    snprintf(from, sizeof from, "[%zu,%zu]", K, K + B);
    snprintf(to, sizeof to, "[%zu,%zu]", K - 4, K + B - 4);
    edited_refused(from, to, "overlap");
    snprintf(to, sizeof to, "[%zu,%zu]", K + 4, K + B + 4);
    edited_refused(from, to, "leave a gap");
    snprintf(to, sizeof to, "[%zu,%zu]", K + B, K);
    edited_refused(from, to, "data_offsets is not [begin, end]");
    snprintf(to, sizeof to, "[%zu,99999999999]", K);
    edited_refused(from, to, "tensor dense/bias ends at byte 99999999999 of the data section");
    snprintf(to, sizeof to, "[%zu,-1]", K);
    edited_refused(from, to, "data_offsets is not [begin, end]");
    snprintf(to, sizeof to, "[%zu]", K);
    edited_refused(from, to, "data_offsets is not [begin, end]");
    snprintf(from, sizeof from, "\"data_offsets\":[0,%zu]", K);
    snprintf(to, sizeof to, "\"data_offsets\":[4,%zu]", K + 4);
    edited_refused(from, to, "starts with 4 bytes no tensor holds");
}
END_TEST

/* The model decides: a different width, a missing layer, a tensor it does not have, another optimizer's slots. */
START_TEST(test_model_mismatch)
{
    tt_model m, wider, deeper, nobias;
    make_model(&m, 0, NULL);
    make_model(&wider, 0, "dense units=8 activation=relu\ndense units=5\n");
    make_model(&deeper, 0, "dense units=7 activation=relu\ndense units=5\ndense units=5\n");
    make_model(&nobias, 0, "dense units=7 use_bias=false activation=relu\ndense units=5\n");
    size_t len;
    uint8_t *b = valid_file(&m, &len, 0);
    tt_checkpoint ck;
    tt_error err;
    refused(tt_checkpoint_parse(b, len, "ck.safetensors", &wider, &ck, &err), &err, &ck, "ck.safetensors",
            "ck.safetensors: tensor dense/kernel has shape (12, 7), the model has (12, 8)");
    refused(tt_checkpoint_parse(b, len, "ck.safetensors", &deeper, &ck, &err), &err, &ck, "ck.safetensors",
            "ck.safetensors: has no tensor dense_2/kernel (the model has it: a different --model?)");
    refused(tt_checkpoint_parse(b, len, "ck.safetensors", &nobias, &ck, &err), &err, &ck, "ck.safetensors",
            "ck.safetensors: tensor dense/bias is not one of the model's");
    /* the metadata say Adam: two slots expected, the file has SGD's one */
    uint8_t *e = NULL;
    size_t elen;
    e = edit_header(b, len, "\"optimizer\":\"sgd\"", "\"optimizer\":\"adam\"", &elen);
    refused(tt_checkpoint_parse(e, elen, "ck.safetensors", &m, &ck, &err), &err, &ck, "ck.safetensors",
            "has no tensor optimizer/velocity/dense/kernel (optimizer adam keeps it");
    refused(tt_checkpoint_parse(e, elen, "ck.safetensors", NULL, &ck, &err), &err, &ck, "ck.safetensors",
            "not n_params");
    free(e);
    e = edit_header(b, len, "\"n_params\":\"", "\"n_params\":\"1", &elen);
    refused(tt_checkpoint_parse(e, elen, "ck.safetensors", &m, &ck, &err), &err, &ck, "ck.safetensors",
            "n_params is 1");
    free(e);
    free(b);
}
END_TEST

/* Only regular files: a directory and a FIFO are refused at once (a FIFO without a writer must not block). */
START_TEST(test_not_regular)
{
    char dir[512], fifo[600];
    tt_test_tmpdir(dir, sizeof dir);
    tt_checkpoint ck;
    tt_error err;
    refused(tt_checkpoint_read(dir, NULL, &ck, &err), &err, &ck, dir, "not a regular file (a directory)");
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    refused(tt_checkpoint_read(fifo, NULL, &ck, &err), &err, &ck, fifo, "not a regular file (a FIFO)");
    snprintf(fifo, sizeof fifo, "%s/missing", dir);
    refused(tt_checkpoint_read(fifo, NULL, &ck, &err), &err, &ck, fifo, "No such file");
}
END_TEST

/* Names in dir other than `keep`: what a write left behind. */
static int others_in(const char *dir, const char *keep)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, keep)) n++;
    closedir(d);
    return n;
}

/* Writing over an existing checkpoint replaces it whole and leaves nothing else in the directory; a directory that
 * does not exist is one clear line. */
START_TEST(test_write_replaces)
{
    tt_model m;
    make_model(&m, 0, NULL);
    char dir[512], path[600];
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    tt_test_write_str(path, "an old file that is not a checkpoint");
    tt_checkpoint a, b, back;
    fill(&a, &m, optim_case(3), 1.0, 1);
    fill(&b, &m, optim_case(1), 2.0, 2);
    tt_error err;
    ck_assert_msg(tt_checkpoint_write(path, &m, &a, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(tt_checkpoint_write(path, &m, &b, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(others_in(dir, "ck.safetensors"), 0);
    ck_assert_msg(tt_checkpoint_read(path, &m, &back, &err) == TT_OK, "%s", err.msg);
    assert_same_state(&b, &back, 1);
    tt_checkpoint_free(&back);

    char missing[700];
    snprintf(missing, sizeof missing, "%s/no/such/dir/ck.safetensors", dir);
    ck_assert_int_eq(tt_checkpoint_write(missing, &m, &a, &err), TT_ERR_IO);
    ck_assert_msg(strncmp(err.msg, missing, strlen(missing)) == 0 && strstr(err.msg, "cannot create a temporary") &&
                  strstr(err.msg, "No such file or directory") && !strchr(err.msg, '\n'), "%s", err.msg);
    /* a directory at the path: the rename fails, the temporary is removed */
    snprintf(missing, sizeof missing, "%s/sub", dir);
    ck_assert_int_eq(mkdir(missing, 0700), 0);
    ck_assert_int_eq(tt_checkpoint_write(missing, &m, &a, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "cannot rename") != NULL, "%s", err.msg);
    ck_assert_int_eq(others_in(dir, "ck.safetensors"), 1); /* sub only */
    /* what is given must make a readable file: the optimizer's slots */
    a.n_slots = 1;
    ck_assert_int_eq(tt_checkpoint_write(path, &m, &a, &err), TT_ERR_ARG);
    a.n_slots = 3;
    tt_checkpoint_free(&a);
    tt_checkpoint_free(&b);
}
END_TEST

/* A write that fails half way (the file size limit: EFBIG, as a full disk gives ENOSPC) is reported, leaves the old
 * checkpoint untouched and removes its temporary. In a child: the limit must not outlive the case. A read-only
 * directory is tried too where the test does not run as root (root writes anyway). */
START_TEST(test_write_failure)
{
    tt_model m;
    make_model(&m, 1, NULL);
    char dir[512], path[600];
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    tt_test_write_str(path, "the old checkpoint");
    const pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {1000, 1000};
        tt_checkpoint ck;
        fill(&ck, &m, optim_case(1), 1.0, 1); /* several KB */
        tt_error err;
        int ok = setrlimit(RLIMIT_FSIZE, &rl) == 0 && tt_checkpoint_write(path, &m, &ck, &err) == TT_ERR_IO &&
                 strstr(err.msg, "cannot write") && strstr(err.msg, "File too large") && !strchr(err.msg, '\n');
        if (!ok) fprintf(stderr, "write failure: %s\n", err.msg);
        _exit(ok ? 0 : 1);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the failed write was not reported as expected");
    size_t len;
    uint8_t *b = tt_test_read_file(path, &len);
    ck_assert_msg(len == strlen("the old checkpoint") && memcmp(b, "the old checkpoint", len) == 0,
                  "the old checkpoint was changed");
    free(b);
    ck_assert_int_eq(others_in(dir, "ck.safetensors"), 0);

    if (geteuid() == 0) {
        printf("SKIP: test_write_failure: read-only directory case (running as root, which writes there anyway)\n");
        return;
    }
    ck_assert_int_eq(chmod(dir, 0500), 0);
    tt_checkpoint ck;
    fill(&ck, &m, optim_case(1), 1.0, 1);
    tt_error err;
    ck_assert_int_eq(tt_checkpoint_write(path, &m, &ck, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "Permission denied") != NULL, "%s", err.msg);
    chmod(dir, 0700);
    tt_checkpoint_free(&ck);
}
END_TEST

/* The fuzz target's seeds (tests/fuzz/make_checkpoint_seeds.c) still mean what their names say: ok-* accepted with
 * its model and without, bad-* refused with it; all under libFuzzer's 4 KB. A format change that forgets to
 * regenerate them fails here. */
START_TEST(test_seed_corpus)
{
    tt_model m;
    const tt_model_input none = {{0, {0, 0, 0, 0}}, 0, 0};
    tt_error err;
    ck_assert_msg(tt_model_parse(&m, TT_FUZZ_CKPT_MODEL, "seed", &none, &err) == TT_OK, "%s", err.msg);
    DIR *d = opendir(TT_CKPT_CORPUS);
    ck_assert_ptr_nonnull(d);
    int ok = 0, bad = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", TT_CKPT_CORPUS, de->d_name);
        size_t len;
        free(tt_test_read_file(path, &len));
        ck_assert_msg(len < 4096, "%s: %zu bytes, over libFuzzer's default -max_len", path, len);
        tt_checkpoint ck;
        if (strncmp(de->d_name, "ok-", 3) == 0) {
            ck_assert_msg(tt_checkpoint_read(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
            tt_checkpoint_free(&ck);
            ck_assert_msg(tt_checkpoint_read(path, NULL, &ck, &err) == TT_OK, "%s", err.msg);
            tt_checkpoint_free(&ck);
            ok++;
        } else {
            ck_assert_msg(strncmp(de->d_name, "bad-", 4) == 0, "%s: neither ok- nor bad-", path);
            refused(tt_checkpoint_read(path, &m, &ck, &err), &err, &ck, path, "");
            bad++;
        }
    }
    closedir(d);
    ck_assert_int_ge(ok, 5);
    ck_assert_int_ge(bad, 10);
}
END_TEST

/* A run's position the reader refuses: epoch 0 (no epoch is 0), an epoch a resume would wrap to 0 at its +1, epochs
 * of no steps. */
START_TEST(test_bad_position)
{
    tt_model m;
    make_model(&m, 0, NULL);
    static const struct {
        uint64_t epoch, step, steps;
        const char *want;
    } cases[] = {{0, 2, 7, "epoch 0 is not in 1.."}, {UINT64_MAX, 7, 7, "is not in 1.."}, {1, 0, 0, "steps_per_epoch is 0"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tt_checkpoint ck, back;
        fill(&ck, &m, optim_case(0), NAN, 7);
        ck.epoch = cases[k].epoch;
        ck.step = cases[k].step;
        ck.steps_per_epoch = cases[k].steps;
        char path[600];
        tmp_path(path, sizeof path, "ck.safetensors");
        tt_error err;
        ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
        refused(tt_checkpoint_read(path, NULL, &back, &err), &err, &back, path, cases[k].want);
        refused(tt_checkpoint_read(path, &m, &back, &err), &err, &back, path, cases[k].want);
        tt_checkpoint_free(&ck);
    }
    /* a global step that is not where epoch and step say the run is (the optimizer's t would be off) */
    tt_checkpoint ck, back;
    fill(&ck, &m, optim_case(0), NAN, 7);
    ck.global_step++;
    char path[600];
    tmp_path(path, sizeof path, "ck.safetensors");
    tt_error err;
    ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
    refused(tt_checkpoint_read(path, NULL, &back, &err), &err, &back, path, "global_step 17 is not (epoch - 1)");
    /* the optimizer's count: from global_step (one update a step) to global_step x 1024 (--sync ssp, async: one
     * per gradient applied alone, up to --towers' largest; runs resumed with other tower counts add up), nothing
     * else (a wrapped t would make Adam's bias correction 0/0) */
    ck.global_step--;
    const uint64_t counts[] = {15, 16 * 1024 + 1, UINT64_MAX, 16, 48, 16 * 1024};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        ck.optim_steps = counts[k];
        ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
        if (k < 3) {
            refused(tt_checkpoint_read(path, NULL, &back, &err), &err, &back, path, "optim_steps");
        } else {
            ck_assert_msg(tt_checkpoint_read(path, NULL, &back, &err) == TT_OK, "optim_steps %llu: %s",
                          (unsigned long long)counts[k], err.msg);
            ck_assert_uint_eq(back.optim_steps, counts[k]);
            tt_checkpoint_free(&back);
        }
    }
    /* the loss scaler (--precision): its three keys written together and read back; a skipped step is not an
     * optimizer step (optim_steps + skipped >= global_step); a scale a run cannot write (below 1, beyond 2^64), more
     * skips than steps, or too few optimizer steps for them: refused */
    const struct {
        double scale;
        uint64_t skipped, optim;
        const char *want; /* NULL: accepted */
    } sc[] = {{65536, 0, 16, NULL},       {1, 3, 13, NULL},         {0x1p64, 16, 0, NULL},
              {0.5, 0, 16, "loss_scale"}, {0x1p65, 0, 16, "loss_scale"}, {1024, 17, 16, "loss_scale_skipped"},
              {1024, 3, 12, "optim_steps"}};
    for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++) {
        ck.loss_scale = sc[k].scale;
        ck.scale_good = 7;
        ck.scale_skipped = sc[k].skipped;
        ck.optim_steps = sc[k].optim;
        ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
        if (sc[k].want) {
            refused(tt_checkpoint_read(path, NULL, &back, &err), &err, &back, path, sc[k].want);
            continue;
        }
        ck_assert_msg(tt_checkpoint_read(path, NULL, &back, &err) == TT_OK, "scaler %zu: %s", k, err.msg);
        ck_assert(back.loss_scale == sc[k].scale && back.scale_good == 7 && back.scale_skipped == sc[k].skipped);
        tt_checkpoint_free(&back);
    }
    tt_checkpoint_free(&ck);
}
END_TEST

/* --early-stopping and --reduce-lr-on-plateau: the callbacks' state and the best epoch's weights written and read back
 * bit for bit (with the model and without: the data section's size counts the best weights); each callback's keys
 * only when it is on; then the values a run cannot write, sealed so the checksum passes: a key without its callback's
 * others, a wait or a best epoch beyond the checkpoint's epoch, a best epoch without a best, a stop before the epoch's
 * end, a rate below 0 or not finite, an Inf best, best weights declared and absent (or present and not declared). */
START_TEST(test_callbacks_state)
{
    tt_model m;
    make_model(&m, 0, NULL);
    tt_checkpoint ck, back;
    fill(&ck, &m, optim_case(1), NAN, 11); /* epoch 3, step 2 of 7 */
    ck.cb = (tt_ckpt_callbacks){.early = 1, .plateau = 1, .es_has_best = 1, .es_best = 0.1, .es_wait = 2,
                                .es_best_epoch = 2, .es_kept = 1, .rl_has_best = 1, .rl_best = NAN, .rl_wait = 1,
                                .rl_cooldown = 4, .lr = 0.000125f};
    float *best = (float *)tt_malloc(m.n_params * sizeof(float));
    for (size_t i = 0; i < m.n_params; i++) best[i] = (float)i * 0.25f - 1.0f;
    ck.best_params = best;
    char path[600];
    tmp_path(path, sizeof path, "cb.safetensors");
    tt_error err;
    ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
    for (int with = 0; with < 2; with++) {
        ck_assert_msg(tt_checkpoint_read(path, with ? &m : NULL, &back, &err) == TT_OK, "%s", err.msg);
        assert_same_state(&ck, &back, with);
        const tt_ckpt_callbacks *a = &ck.cb, *b = &back.cb;
        ck_assert(b->early && b->plateau && b->es_has_best && b->rl_has_best && b->es_kept);
        ck_assert(a->es_best == b->es_best && isnan(b->rl_best) && a->lr == b->lr);
        ck_assert(a->es_wait == b->es_wait && a->es_best_epoch == b->es_best_epoch && !b->es_stopped_epoch &&
                  a->rl_wait == b->rl_wait && a->rl_cooldown == b->rl_cooldown);
        if (with) ck_assert(memcmp(back.best_params, best, m.n_params * sizeof(float)) == 0);
        else ck_assert_ptr_null(back.best_params);
        tt_checkpoint_free(&back);
    }
    /* no callbacks: none of their keys, no best weights */
    tt_ckpt_callbacks none = {0};
    const tt_ckpt_callbacks on = ck.cb;
    ck.cb = none;
    ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
    size_t len;
    char *text = (char *)tt_test_read_file(path, &len);
    text[8 + tt_test_le64((const uint8_t *)text)] = '\0'; /* the header */
    ck_assert_msg(!strstr(text + 8, "\"es_") && !strstr(text + 8, "\"plateau_") && !strstr(text + 8, "early_stopping/"),
                  "%s", text + 8);
    free(text);
    ck.cb = on;
    ck.best_params = NULL; /* declared and absent: the writer refuses to write what no reader takes */
    ck_assert_int_eq(tt_checkpoint_write(path, &m, &ck, &err), TT_ERR_ARG);
    ck.best_params = best;
    ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
    uint8_t *b = tt_test_read_file(path, &len);
    static const char *const edits[][3] = {
        {"\"es_wait\":\"2\",", "", "es_best_epoch without es_wait"},
        {"\"plateau_wait\":\"1\",", "", "plateau_cooldown without plateau_wait"},
        {"\"es_wait\":\"2\"", "\"es_wait\":\"4\"", "key 'es_wait' is '4', not an integer up to 3"},
        {"\"es_best_epoch\":\"2\"", "\"es_best_epoch\":\"4\"", "key 'es_best_epoch' is '4'"},
        {"\"es_best\":\"0.10000000000000001\",", "", "es_best_epoch 2 without es_best"},
        {"\"es_stopped_epoch\":\"0\"", "\"es_stopped_epoch\":\"3\"", "es_stopped_epoch 3 is not this "
                                                                         "checkpoint's finished epoch"},
        {"\"es_best_weights\":\"true\"", "\"es_best_weights\":\"yes\"", "key 'es_best_weights' is 'yes'"},
        {"\"es_best_weights\":\"true\"", "\"es_best_weights\":\"false\"", "tensor early_stopping/best_weights/"},
        {"\"plateau_lr\":\"0.000125000006\"", "\"plateau_lr\":\"-1\"", "key 'plateau_lr' is '-1', not a rate"},
        {"\"plateau_lr\":\"0.000125000006\"", "\"plateau_lr\":\"inf\"", "key 'plateau_lr' is 'inf'"},
        {"\"es_best\":\"0.10000000000000001\"", "\"es_best\":\"inf\"", "key 'es_best' is 'inf'"},
        {"\"early_stopping/best_weights/dense/bias\"", "\"early_stopping/best_weights/dense/bias_\"",
         "has no tensor early_stopping/best_weights/dense/bias (its metadata say es_best_weights true"},
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        size_t elen;
        uint8_t *e = edit_header(b, len, edits[k][0], edits[k][1], &elen);
        refused(tt_checkpoint_parse(e, elen, "edited", &m, &back, &err), &err, &back, "edited", edits[k][2]);
        free(e);
    }
    free(b);
    tt_free(best);
    ck.best_params = NULL;
    tt_checkpoint_free(&ck);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_add_loop_test(tc, test_round_trip, 0, 8);
    tcase_add_test(tc, test_independent_reader);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_flipped_data_byte);
    tcase_add_test(tc, test_header_length);
    tcase_add_test(tc, test_header_not_json);
    tcase_add_test(tc, test_bad_tensor_entries);
    tcase_add_test(tc, test_model_mismatch);
    tcase_add_test(tc, test_not_regular);
    tcase_add_test(tc, test_write_replaces);
    tcase_add_test(tc, test_write_failure);
    tcase_add_test(tc, test_seed_corpus);
    tcase_add_test(tc, test_bad_position);
    tcase_add_test(tc, test_json_c_is_lax);
    tcase_add_test(tc, test_header_checksum);
    tcase_add_test(tc, test_header_values_as_written);
    tcase_add_test(tc, test_callbacks_state);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
