/* test_formats.c — the CIFAR-10 binary reader and the NumPy .npy reader (src/data/cifar10.c, src/data/npy.c) on files
 * the test writes: every accepted dtype and shape, sample by sample (CIFAR's planes reordered to channels last,
 * int64 tokens converted exactly, n_classes over train and test), and every kind of hostile file: truncated data,
 * trailing bytes, bad magic and version, malformed, unknown, missing and duplicate header keys, Fortran order,
 * big-endian and unsupported dtypes, shapes with a 0 or overflowing, headers that lie about their sizes (which must
 * allocate nothing of what they claim), x/y count mismatches, negative and huge labels, integers beyond 2^24,
 * non-finite floats, train/test disagreements, FIFOs, missing files, CIFAR sizes that are not whole records and
 * labels out of range. Every failure must be a status with one line naming the file.
 * The .npy writer below lays files out as NumPy's numpy.lib.format does (checked against NumPy 2.4's np.save bytes
 * for the headers used here); tests/fuzz/corpus/npy/ holds files NumPy itself wrote.
 * Also the JSON files towertrain reads (a checkpoint's header and the options inside it, a measured profile): a
 * \u escape of a high surrogate must be followed at once by a low one, held against the rule written out here.
 * Not for: the IDX reader and the input layer (test_idx.c). */
#include <json-c/json.h>
#include <sys/stat.h>

#include "tt_checkpoint.h"
#include "tt_data.h"
#include "tt_input.h"
#include "tt_json.h"
#include "tt_profile.h"
#include "tt_test.h"

static char dir[64];
static char path[256];

static const char *file(const char *name)
{
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* ---- a .npy writer -------------------------------------------------------------------------------------------- */

/* DIR/name: "\x93NUMPY", version major.0, the header length (2 bytes in 1.0, 4 after), `header` padded with spaces
 * and a final newline so that preamble + header is a multiple of 64 (as NumPy pads), then data[0..n). */
static void write_npy_raw(const char *name, int major, const char *header, const void *data, size_t n)
{
    size_t pre = major == 1 ? 10 : 12, hlen = strlen(header) + 1;
    hlen += (64 - (pre + hlen) % 64) % 64;
    unsigned char *buf = (unsigned char *)malloc(pre + hlen + n);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (unsigned char)(hlen >> (8 * i));
    memset(buf + pre, ' ', hlen);
    memcpy(buf + pre, header, strlen(header));
    buf[pre + hlen - 1] = '\n';
    if (n) memcpy(buf + pre + hlen, data, n);
    tt_test_write(file(name), buf, pre + hlen + n);
    free(buf);
}

/* The header NumPy writes for a C-order array: {'descr': 'D', 'fortran_order': False, 'shape': (S), } */
static void write_npy(const char *name, int major, const char *descr, const char *shape, const void *data, size_t n)
{
    char header[256];
    snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    write_npy_raw(name, major, header, data, n);
}

/* Little-endian element writers (the test must not depend on the host's order any more than the reader does). */
static void put_le(unsigned char *p, uint64_t v, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_f32(unsigned char *p, float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    put_le(p, b, 4);
}

/* The baseline set, written before every test: x u8 images (3, 2, 2) and (2, 2, 2); y_train '|u1' (3,),
 * y_test '<i4' (2, 1) whose largest label, 7, is above the training labels' (4): n_classes must be 8. Versions
 * 1.0, 2.0 and 3.0. */
static const unsigned char x_tr[12] = {0, 255, 128, 1, 2, 3, 4, 5, 6, 7, 8, 9};
static const unsigned char x_te[8] = {10, 20, 30, 40, 50, 60, 70, 80};
static const unsigned char y_tr[3] = {4, 0, 2};

static void write_baseline(void)
{
    unsigned char y_te[8];
    put_le(y_te, 7, 4);
    put_le(y_te + 4, 1, 4);
    write_npy("x_train.npy", 1, "|u1", "(3, 2, 2)", x_tr, sizeof x_tr);
    write_npy("y_train.npy", 1, "|u1", "(3,)", y_tr, sizeof y_tr);
    write_npy("x_test.npy", 2, "|u1", "(2, 2, 2)", x_te, sizeof x_te);
    write_npy("y_test.npy", 3, "<i4", "(2, 1)", y_te, sizeof y_te);
}

static void setup(void)
{
    tt_test_tmpdir(dir, sizeof dir);
    write_baseline();
}

/* Loading DIR as npy: must fail with `want`, one line naming DIR/`name` and holding `fragment`, no data left. */
static void expect_npy_fail(tt_status want, const char *name, const char *fragment)
{
    tt_dataset tr, te;
    tt_error err = {{0}};
    tt_status s = tt_dataset_load_npy(dir, &tr, &te, &err);
    ck_assert_msg(s == want, "%s: status %d want %d (%s)", name, s, want, err.msg);
    ck_assert_msg(strstr(err.msg, fragment) != NULL, "message '%s' lacks '%s'", err.msg, fragment);
    ck_assert_msg(strstr(err.msg, file(name)) == err.msg, "message '%s' does not start with %s", err.msg, file(name));
    ck_assert_msg(strchr(err.msg, '\n') == NULL, "message '%s' is not one line", err.msg);
    ck_assert(tr.x == NULL && tr.y == NULL && te.x == NULL && te.y == NULL && tr.n == 0 && te.n == 0);
}

/* ---- good .npy files ------------------------------------------------------------------------------------------ */

START_TEST(test_npy_u8_images)
{
    tt_dataset tr, te;
    tt_error err = {{0}};
    ck_assert_msg(tt_dataset_load_npy(dir, &tr, &te, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(tr.n, 3);
    ck_assert_uint_eq(te.n, 2);
    ck_assert_int_eq(tr.shape.ndim, 3); /* (n, H, W) -> (H, W, 1) */
    ck_assert(tr.shape.d[0] == 2 && tr.shape.d[1] == 2 && tr.shape.d[2] == 1);
    ck_assert(tt_shape_eq(&tr.shape, &te.shape));
    ck_assert_uint_eq(tr.dim, 4);
    ck_assert_int_eq(tr.xtype, TT_X_U8);
    ck_assert(tr.scale == 1.0f / 255.0f && te.scale == 1.0f / 255.0f);
    ck_assert_mem_eq(tr.x, x_tr, sizeof x_tr);
    ck_assert_mem_eq(te.x, x_te, sizeof x_te);
    ck_assert(tr.y[0] == 4 && tr.y[1] == 0 && tr.y[2] == 2);
    ck_assert(te.y[0] == 7 && te.y[1] == 1);
    ck_assert_uint_eq(tr.n_classes, 8); /* the test set's 7, not the training set's 4 */
    ck_assert_uint_eq(te.n_classes, 8);
    tt_dataset_free(&tr);
    tt_dataset_free(&te);
}
END_TEST

/* float32 vectors (n, L) -> (L), labels '<i8' (n, 1); values as they are (bit for bit), '<u1' read as '|u1'. */
START_TEST(test_npy_f32_vectors)
{
    const float v[6] = {-1.5f, 0.0f, 3.25e-30f, 1e30f, -0.0f, 0.1f};
    unsigned char xb[24], yb[16];
    for (int i = 0; i < 6; i++) put_f32(xb + 4 * i, v[i]);
    put_le(yb, 2, 8);
    put_le(yb + 8, 0, 8);
    write_npy("x_train.npy", 2, "<f4", "(2, 3)", xb, sizeof xb);
    write_npy("y_train.npy", 1, "<i8", "(2, 1)", yb, sizeof yb);
    write_npy("x_test.npy", 1, "<f4", "(1, 3)", xb + 12, 12);
    write_npy("y_test.npy", 1, "<u1", "(1,)", "\x01", 1);
    tt_dataset tr, te;
    tt_error err = {{0}};
    ck_assert_msg(tt_dataset_load_npy(dir, &tr, &te, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(tr.xtype, TT_X_F32);
    ck_assert(tr.scale == 1.0f);
    ck_assert_int_eq(tr.shape.ndim, 1);
    ck_assert_uint_eq(tr.shape.d[0], 3);
    ck_assert_uint_eq(tr.dim, 3);
    ck_assert_uint_eq(tt_dataset_sample_bytes(&tr), 12);
    ck_assert_mem_eq(tr.x, v, sizeof v); /* bit-identical, -0.0 included */
    ck_assert_mem_eq(te.x, v + 3, 12);
    ck_assert(tr.y[0] == 2 && tr.y[1] == 0 && te.y[0] == 1);
    ck_assert_uint_eq(tr.n_classes, 3);
    tt_dataset_free(&tr);
    tt_dataset_free(&te);
}
END_TEST

/* int64 token ids: every |v| < 2^24 is exact in float32, 2^24 - 1 and -(2^24 - 1) included; int32 images
 * (n, H, W, C) -> (H, W, C). The data span more than one conversion chunk (16 KiB). */
START_TEST(test_npy_int_tokens)
{
    enum { N = 3, L = 1000 }; /* 24,000 bytes of int64 */
    static unsigned char xb[N * L * 8];
    int64_t want[N * L];
    for (int i = 0; i < N * L; i++) {
        want[i] = (int64_t)i * 5591 % 16777216 * (i % 2 ? -1 : 1);
        put_le(xb + 8 * i, (uint64_t)want[i], 8);
    }
    want[1] = 16777215;
    put_le(xb + 8, 16777215, 8);
    want[N * L - 1] = -16777215;
    put_le(xb + 8 * (N * L - 1), (uint64_t)(int64_t)-16777215, 8);
    write_npy("x_train.npy", 1, "<i8", "(3, 1000)", xb, sizeof xb);
    write_npy("y_train.npy", 1, "|u1", "(3,)", y_tr, 3);
    write_npy("x_test.npy", 2, "<i8", "(1, 1000)", xb, L * 8);
    write_npy("y_test.npy", 1, "|u1", "(1,)", y_tr, 1);
    tt_dataset tr, te;
    tt_error err = {{0}};
    ck_assert_msg(tt_dataset_load_npy(dir, &tr, &te, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(tr.xtype, TT_X_F32);
    ck_assert(tr.shape.ndim == 1 && tr.shape.d[0] == L);
    const float *x = (const float *)(const void *)tr.x;
    for (int i = 0; i < N * L; i++)
        ck_assert_msg(x[i] == (float)want[i] && (int64_t)x[i] == want[i], "element %d: %.1f, want %lld", i, x[i],
                      (long long)want[i]);
    ck_assert_uint_eq(tr.n_classes, 5);
    tt_dataset_free(&tr);
    tt_dataset_free(&te);

    int32_t img[2 * 2 * 3 * 2];
    unsigned char ib[sizeof img];
    for (int i = 0; i < 24; i++) {
        img[i] = (i - 12) * 1000003 % 16777216;
        put_le(ib + 4 * i, (uint32_t)img[i], 4);
    }
    write_npy("x_train.npy", 1, "<i4", "(2, 2, 3, 2)", ib, sizeof ib);
    write_npy("y_train.npy", 1, "|u1", "(2,)", y_tr, 2);
    write_npy("x_test.npy", 1, "<i4", "(1, 2, 3, 2)", ib, 48);
    ck_assert_msg(tt_dataset_load_npy(dir, &tr, &te, &err) == TT_OK, "%s", err.msg);
    ck_assert(tr.shape.ndim == 3 && tr.shape.d[0] == 2 && tr.shape.d[1] == 3 && tr.shape.d[2] == 2);
    ck_assert_uint_eq(tr.dim, 12);
    x = (const float *)(const void *)tr.x;
    for (int i = 0; i < 24; i++) ck_assert_msg(x[i] == (float)img[i], "element %d: %.1f, want %d", i, x[i], img[i]);
    tt_dataset_free(&tr);
    tt_dataset_free(&te);
}
END_TEST

/* The memory entry points (the fuzzer's) read what the files hold and name the buffer in their messages. */
START_TEST(test_npy_memory_readers)
{
    unsigned char buf[256];
    FILE *f = fopen(file("x_train.npy"), "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    tt_dataset ds;
    tt_error err = {{0}};
    ck_assert_int_eq(tt_npy_read_x_mem(buf, n, "mem-x", &ds, &err), TT_OK);
    ck_assert_uint_eq(ds.n, 3);
    ck_assert_mem_eq(ds.x, x_tr, sizeof x_tr);
    tt_dataset_free(&ds);
    ck_assert_int_eq(tt_npy_read_x_mem(buf, n - 1, "mem-x", &ds, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "mem-x: truncated") == err.msg, "%s", err.msg);
    ck_assert_ptr_null(ds.x);
    size_t cnt = 0, max = 0;
    int32_t *labels = NULL;
    ck_assert_int_eq(tt_npy_read_y_mem(buf, n, "mem-y", &cnt, &labels, &max, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "mem-y: shape (3, 2, 2): labels must be (n,) or (n, 1)"), "%s", err.msg);
    ck_assert_ptr_null(labels);
    f = fopen(file("y_test.npy"), "rb");
    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_int_eq(tt_npy_read_y_mem(buf, n, "mem-y", &cnt, &labels, &max, &err), TT_OK);
    ck_assert(cnt == 2 && max == 7 && labels[0] == 7 && labels[1] == 1);
    tt_free(labels);
}
END_TEST

/* ---- hostile .npy files --------------------------------------------------------------------------------------- */

START_TEST(test_npy_truncated_and_trailing)
{
    write_npy("x_train.npy", 1, "|u1", "(3, 2, 2)", x_tr, 11);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy",
                    "truncated: the header says shape (3, 2, 2) of '|u1' (12 bytes of data), the file has 11 bytes");
    unsigned char more[13];
    memcpy(more, x_tr, 12);
    more[12] = 0;
    write_npy("x_train.npy", 1, "|u1", "(3, 2, 2)", more, 13);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "trailing bytes: the header says shape (3, 2, 2) of '|u1' "
                    "(12 bytes of data), the file has 13 bytes after the header");
    write_baseline();
    write_npy("y_test.npy", 1, "<i4", "(2, 1)", "\x07\0\0\0\x01\0\0", 7); /* labels: one byte short */
    expect_npy_fail(TT_ERR_FORMAT, "y_test.npy", "truncated: the header says shape (2, 1) of '<i4' (8 bytes");
    tt_test_write(file("y_test.npy"), "\x93NUMPY\x01", 7); /* inside the preamble */
    expect_npy_fail(TT_ERR_FORMAT, "y_test.npy", "truncated: the file ends after 7 of the 8 bytes of the .npy");
}
END_TEST

START_TEST(test_npy_bad_magic_and_version)
{
    tt_test_write(file("x_train.npy"), "\x93NUMPZ\x01\0\x10\0{}              ", 26);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "bad magic: not a .npy file");
    tt_test_write(file("x_train.npy"), "PK\x03\x04 an npz, a zip file", 24);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "bad magic");
    const char versions[3][2] = {{4, 0}, {1, 1}, {0, 0}};
    const char *said[3] = {"version 4.0 is not", "version 1.1 is not", "version 0.0 is not"};
    for (int i = 0; i < 3; i++) {
        unsigned char b[16] = "\x93NUMPY";
        b[6] = (unsigned char)versions[i][0];
        b[7] = (unsigned char)versions[i][1];
        tt_test_write(file("x_train.npy"), b, 16);
        expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", said[i]);
    }
}
END_TEST

/* Headers NumPy would never write, each refused with its reason (x_train's header; the data are right for a
 * (3, 2, 2) '|u1' array so only the header can be wrong). */
START_TEST(test_npy_malformed_headers)
{
    static const char *const cases[][2] = {
        {"{\"descr\": '|u1', 'fortran_order': False, 'shape': (3, 2, 2), }", "expected a single-quoted string"},
        {"{'descr': '|u1', 'fortran_order': false, 'shape': (3, 2, 2), }", "expected True or False"},
        {"{'descr': '|u1', 'fortran_order': 0, 'shape': (3, 2, 2), }", "expected True or False"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': [3, 2, 2], }", "expected a tuple"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (12), }", "the shape (12) is not a tuple"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (3, -2, 2), }", "expected a dimension"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (03, 2, 2), }", "without leading zeros"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2,,), }", "expected a dimension"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (3 2, 2), }", "expected ',' or ')' in the shape"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (3L, 2L, 2L), }", "expected ',' or ')' in the shape"},
        {"{'descr': '|u1' 'fortran_order': False, 'shape': (3, 2, 2), }", "expected ',' or '}' after a value"},
        {"{'descr' '|u1', 'fortran_order': False, 'shape': (3, 2, 2), }", "expected ':' after a key"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2), ", "found the end of the header"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2), } x", "expected only blanks after the dict"},
        {"{'descr': '|u\\x31', 'fortran_order': False, 'shape': (3, 2, 2), }", "escapes in strings are not supported"},
        {"{'descr': [('a', '|u1')], 'fortran_order': False, 'shape': (3, 2, 2), }", "a structured dtype"},
        {"{'desc\nr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2), }", "a blank other than ' ' inside a string"},
        {"{'descr': '|u\t1', 'fortran_order': False, 'shape': (3, 2, 2), }", "a blank other than ' ' inside a string"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2), 'extra': 1, }", "unknown key 'extra'"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2), 'Shape': (3,), }", "unknown key 'Shape'"},
        {"{'descr': '|u1', 'fortran_order': False, }", "no 'shape' key"},
        {"{'fortran_order': False, 'shape': (3, 2, 2), }", "no 'descr' key"},
        {"{'descr': '|u1', 'shape': (3, 2, 2), }", "no 'fortran_order' key"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2), 'descr': '|u1', }", "duplicate key 'descr'"},
        {"{'shape': (3, 2, 2), 'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2)}", "duplicate key 'shape'"},
        {"{}", "no 'descr' key"},
        {"", "expected '{'"},
        {"(3, 2, 2)", "expected '{'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_npy_raw("x_train.npy", 1 + (int)(i % 2), cases[i][0], x_tr, sizeof x_tr);
        expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", cases[i][1]);
    }
    char bin[] = "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 2), }\x01";
    write_npy_raw("x_train.npy", 1, bin, x_tr, sizeof x_tr);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "byte 62 is 0x01 (a .npy header is ASCII text)");
    /* the same dict in another legal layout (no trailing comma, other blanks, key order) is accepted */
    write_npy_raw("x_train.npy", 1, "{'shape':(3,2,2),\n 'fortran_order':False,'descr':'|u1'}", x_tr, sizeof x_tr);
    tt_dataset tr, te;
    tt_error err = {{0}};
    ck_assert_msg(tt_dataset_load_npy(dir, &tr, &te, &err) == TT_OK, "%s", err.msg);
    ck_assert_mem_eq(tr.x, x_tr, sizeof x_tr);
    tt_dataset_free(&tr);
    tt_dataset_free(&te);
}
END_TEST

START_TEST(test_npy_fortran_and_dtypes)
{
    write_npy_raw("x_train.npy", 1, "{'descr': '|u1', 'fortran_order': True, 'shape': (3, 2, 2), }", x_tr, 12);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "fortran_order is True (column-major data)");
    write_baseline();
    write_npy("y_test.npy", 1, ">i4", "(2, 1)", "\0\0\0\x07\0\0\0\x01", 8);
    expect_npy_fail(TT_ERR_FORMAT, "y_test.npy", "big-endian dtype '>i4' is not supported");
    write_baseline();
    write_npy("x_train.npy", 1, ">f4", "(3, 1)", x_tr, 12);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "big-endian dtype '>f4'");
    static const char *const bad_x[] = {"<f8", "|i1", "<u2", "|b1", "<i2", "|f4", "<U1", "|O", "=f4", "f4"};
    for (size_t i = 0; i < sizeof bad_x / sizeof bad_x[0]; i++) {
        write_npy("x_train.npy", 1, bad_x[i], "(3, 2, 2)", x_tr, 12);
        char want[64];
        snprintf(want, sizeof want, "dtype '%s' is not supported for samples", bad_x[i]);
        expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", want);
    }
    write_baseline();
    write_npy("y_train.npy", 1, "<f4", "(3,)", x_tr, 12); /* labels must be integers */
    expect_npy_fail(TT_ERR_FORMAT, "y_train.npy", "dtype '<f4' is not supported for labels");
}
END_TEST

START_TEST(test_npy_shapes)
{
    static const char *const cases[][3] = {
        {"x_train.npy", "(12,)", "shape (12,): samples must be (n, L), (n, H, W) or (n, H, W, C)"},
        {"x_train.npy", "()", "shape (): samples must be"},
        {"x_train.npy", "(3, 2, 2, 1, 1)", "shape (3, 2, 2, 1, 1): samples must be"},
        {"x_train.npy", "(0, 2, 2)", "shape (0, 2, 2) holds no data (a 0 dimension)"},
        {"x_train.npy", "(3, 0, 2)", "holds no data"},
        {"x_train.npy", "(4294967296, 4294967296, 2)", "shape (4294967296, 4294967296, 2) is too large"},
        {"x_train.npy", "(1, 18446744073709551615)", "of '|u1' (18446744073709551615 bytes of data)"},
        {"x_train.npy", "(18446744073709551616, 1)", "a shape dimension at byte"},
        {"y_train.npy", "(3, 2)", "shape (3, 2): labels must be (n,) or (n, 1)"},
        {"y_train.npy", "(3, 1, 1)", "labels must be"},
        {"y_train.npy", "()", "labels must be"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_baseline();
        write_npy(cases[i][0], 1, "|u1", cases[i][1], x_tr, 12);
        expect_npy_fail(TT_ERR_FORMAT, cases[i][0], cases[i][2]);
    }
    write_baseline(); /* (n, 1) 8-byte labels whose element count overflows only once multiplied by 8 */
    write_npy("y_train.npy", 1, "<i8", "(2305843009213693952, 1)", x_tr, 12);
    expect_npy_fail(TT_ERR_FORMAT, "y_train.npy", "of '<i8' is too large (its size overflows)");
    write_baseline();
    write_npy("x_train.npy", 1, "|u1", "(100000001, 1)", x_tr, 12);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "more than 100000000 samples");
    write_baseline();
    char many[160] = "(3";
    for (int i = 0; i < 32; i++) strcat(many, ", 1");
    strcat(many, ")");
    write_npy("x_train.npy", 1, "|u1", many, x_tr, 12);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "the shape has more than 32 dimensions");
}
END_TEST

/* Headers that lie about sizes: a shape claiming 1 TB over 12 bytes of data, a header length of 2 GiB, a header
 * length the file cannot hold. None may ask for more than the input layer's read buffer (Check forks each test,
 * so the largest-request mark is this test's own). */
START_TEST(test_npy_lying_headers)
{
    write_npy("x_train.npy", 2, "|u1", "(1000000, 1000, 1000)", x_tr, 12);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "truncated: the header says shape (1000000, 1000, 1000) of '|u1' "
                    "(1000000000000 bytes of data), the file has 12 bytes after the header");
    write_npy("x_train.npy", 1, "<i8", "(100000000, 1000)", x_tr, 12);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "truncated: the header says shape (100000000, 1000) of '<i8'");
    write_baseline();
    write_npy("y_train.npy", 1, "<i8", "(100000000,)", y_tr, 3);
    expect_npy_fail(TT_ERR_FORMAT, "y_train.npy", "(800000000 bytes of data), the file has 3 bytes");
    unsigned char b[64] = "\x93NUMPY\x02\x00";
    put_le(b + 8, (uint64_t)1 << 31, 4);
    tt_test_write(file("x_train.npy"), b, sizeof b);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "the preamble claims a header of 2147483648 bytes (more than "
                    "1048576)");
    put_le(b + 8, 1000, 4);
    tt_test_write(file("x_train.npy"), b, sizeof b);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "truncated: the preamble claims a header of 1000 bytes, the file "
                    "has 52 after the preamble");
    ck_assert_uint_le(tt_alloc_largest_request(), TT_INPUT_RAW_BUF);
}
END_TEST

START_TEST(test_npy_count_mismatch)
{
    write_npy("y_train.npy", 1, "|u1", "(2,)", y_tr, 2);
    expect_npy_fail(TT_ERR_FORMAT, "y_train.npy", "2 labels but");
    write_baseline();
    unsigned char y3[12] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0};
    write_npy("y_test.npy", 1, "<i4", "(3, 1)", y3, 12);
    expect_npy_fail(TT_ERR_FORMAT, "y_test.npy", "3 labels but");
}
END_TEST

START_TEST(test_npy_bad_labels)
{
    unsigned char yb[24];
    put_le(yb, 1, 8);
    put_le(yb + 8, 0, 8);
    put_le(yb + 16, (uint64_t)(int64_t)-1, 8);
    write_npy("y_train.npy", 1, "<i8", "(3,)", yb, 24);
    expect_npy_fail(TT_ERR_FORMAT, "y_train.npy", "label -1 of sample 2 is negative");
    put_le(yb + 16, (uint64_t)1 << 32, 8); /* 2^32: an int32 view would see 0 */
    write_npy("y_train.npy", 1, "<i8", "(3,)", yb, 24);
    expect_npy_fail(TT_ERR_FORMAT, "y_train.npy", "label 4294967296 of sample 2: more than 1000000 classes");
    put_le(yb + 16, 1000000, 8);
    write_npy("y_train.npy", 1, "<i8", "(3,)", yb, 24);
    expect_npy_fail(TT_ERR_FORMAT, "y_train.npy", "label 1000000 of sample 2: more than 1000000 classes");
    put_le(yb + 16, 999999, 8); /* the largest label allowed: 1,000,000 classes */
    write_npy("y_train.npy", 1, "<i8", "(3,)", yb, 24);
    tt_dataset tr, te;
    tt_error err = {{0}};
    ck_assert_msg(tt_dataset_load_npy(dir, &tr, &te, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(tr.n_classes, 1000000);
    ck_assert_int_eq(tr.y[2], 999999);
    tt_dataset_free(&tr);
    tt_dataset_free(&te);
    unsigned char y4[8];
    put_le(y4, 1, 4);
    put_le(y4 + 4, 0x80000000u, 4); /* int32 -2^31 */
    write_npy("y_test.npy", 1, "<i4", "(2, 1)", y4, 8);
    expect_npy_fail(TT_ERR_FORMAT, "y_test.npy", "label -2147483648 of sample 1 is negative");
}
END_TEST

/* Integers must be below 2^24 in magnitude: 2^24 itself, -2^24, 2^40 and 2^32 + 5 (whose low word alone is 5). */
START_TEST(test_npy_token_range)
{
    const int64_t bad[4] = {16777216, -16777216, (int64_t)1 << 40, ((int64_t)1 << 32) + 5};
    const char *said[4] = {"element 5 (sample 1) is 16777216: integer samples must be below 2^24",
                           "element 5 (sample 1) is -16777216", "element 5 (sample 1) is 1099511627776",
                           "element 5 (sample 1) is 4294967301"};
    for (int i = 0; i < 4; i++) {
        unsigned char xb[96] = {0};
        put_le(xb + 40, (uint64_t)bad[i], 8);
        write_npy("x_train.npy", 1, "<i8", "(3, 4)", xb, sizeof xb);
        write_npy("x_test.npy", 1, "<i8", "(2, 4)", xb, 64);
        expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", said[i]);
    }
    unsigned char xb[48] = {0};
    put_le(xb + 44, 0xff000000u, 4); /* int32 -2^24 */
    write_npy("x_train.npy", 1, "<i4", "(3, 4)", xb, sizeof xb);
    write_npy("x_test.npy", 1, "<i4", "(2, 4)", xb, 32);
    expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", "element 11 (sample 2) is -16777216");
}
END_TEST

START_TEST(test_npy_non_finite)
{
    const uint32_t bits[3] = {0x7fc00000u, 0x7f800000u, 0xff800000u};
    const char *said[3] = {"element 3 (sample 1) is NaN: float samples must be finite", "is +inf", "is -inf"};
    for (int i = 0; i < 3; i++) {
        unsigned char xb[24] = {0};
        put_le(xb + 12, bits[i], 4);
        write_npy("x_train.npy", 1, "<f4", "(2, 3)", xb, 24);
        write_npy("y_train.npy", 1, "|u1", "(2,)", y_tr, 2);
        write_npy("x_test.npy", 1, "<f4", "(1, 3)", xb, 12);
        write_npy("y_test.npy", 1, "|u1", "(1,)", y_tr, 1);
        expect_npy_fail(TT_ERR_FORMAT, "x_train.npy", said[i]);
    }
    unsigned char xb[24] = {0};
    put_le(xb + 20, 0x7f7fffffu, 4); /* FLT_MAX is finite */
    put_le(xb + 16, 0x00000001u, 4); /* and so is the smallest subnormal */
    write_npy("x_train.npy", 1, "<f4", "(2, 3)", xb, 24);
    tt_dataset tr, te;
    tt_error err = {{0}};
    ck_assert_msg(tt_dataset_load_npy(dir, &tr, &te, &err) == TT_OK, "%s", err.msg);
    tt_dataset_free(&tr);
    tt_dataset_free(&te);
}
END_TEST

START_TEST(test_npy_train_test_disagree)
{
    write_npy("x_test.npy", 1, "|u1", "(2, 4)", x_te, 8); /* (4) vectors against (2, 2, 1) images */
    expect_npy_fail(TT_ERR_FORMAT, "x_test.npy", "samples of shape 4 but");
    write_npy("x_test.npy", 1, "|u1", "(2, 2, 2, 1)", x_te, 8); /* (2, 2, 1) both ways: the same samples */
    tt_dataset tr, te;
    tt_error err = {{0}};
    ck_assert_msg(tt_dataset_load_npy(dir, &tr, &te, &err) == TT_OK, "%s", err.msg);
    tt_dataset_free(&tr);
    tt_dataset_free(&te);
    unsigned char x16[16] = {0};
    write_npy("x_test.npy", 1, "|u1", "(2, 2, 4)", x16, 16);
    expect_npy_fail(TT_ERR_FORMAT, "x_test.npy", "samples of shape 2x4x1 but");
    unsigned char f[32] = {0};
    write_npy("x_test.npy", 1, "<f4", "(2, 2, 2)", f, 32);
    expect_npy_fail(TT_ERR_FORMAT, "x_test.npy", "dtype '<f4' but");
}
END_TEST

START_TEST(test_npy_missing_and_not_regular)
{
    ck_assert_int_eq(unlink(file("y_test.npy")), 0);
    expect_npy_fail(TT_ERR_IO, "y_test.npy", "missing (--data npy:DIR needs x_train.npy, y_train.npy, x_test.npy and "
                    "y_test.npy in DIR)");
    write_baseline();
    ck_assert_int_eq(unlink(file("x_test.npy")), 0);
    ck_assert_int_eq(mkfifo(file("x_test.npy"), 0600), 0);
    const double bound = tt_test_prompt(1.0), t0 = tt_now();
    expect_npy_fail(TT_ERR_IO, "x_test.npy", "not a regular file (a FIFO)");
    ck_assert_msg(tt_now() - t0 < bound, "refusing a FIFO took %.2f s", tt_now() - t0);
    ck_assert_int_eq(unlink(file("x_test.npy")), 0);
    ck_assert_int_eq(mkdir(file("x_test.npy"), 0700), 0);
    expect_npy_fail(TT_ERR_IO, "x_test.npy", "not a regular file (a directory)");
    tt_dataset tr, te;
    tt_error err = {{0}};
    ck_assert_int_eq(tt_dataset_load_npy(file("x_train.npy"), &tr, &te, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "not a directory"), "%s", err.msg);
    ck_assert_int_eq(tt_dataset_load_npy(file("nowhere"), &tr, &te, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "nowhere"), "%s", err.msg);
    char spec[300];
    snprintf(spec, sizeof spec, "npy:%s", file("nowhere")); /* the --data dispatch reaches the reader */
    ck_assert_int_eq(tt_dataset_load(spec, &tr, &te, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "--data npy:"), "%s", err.msg);
}
END_TEST

/* ---- CIFAR-10 ------------------------------------------------------------------------------------------------- */

/* Record r of file f: label (f + r) % 10, and channel c's pixel p = (f * 31 + r * 7 + c * 101 + p) % 256 — so every
 * byte says which file, record, channel and pixel it came from. */
static unsigned char cifar_pixel(int f, size_t r, size_t c, size_t p)
{
    return (unsigned char)((f * 31 + r * 7 + c * 101 + p) % 256);
}

static void write_cifar(const char *name, int f, size_t records)
{
    unsigned char *b = (unsigned char *)malloc(records * TT_CIFAR10_RECORD);
    ck_assert_ptr_nonnull(b);
    for (size_t r = 0; r < records; r++) {
        unsigned char *rec = b + r * TT_CIFAR10_RECORD;
        rec[0] = (unsigned char)((f + r) % 10);
        for (size_t c = 0; c < 3; c++)
            for (size_t p = 0; p < 1024; p++) rec[1 + c * 1024 + p] = cifar_pixel(f, r, c, p);
    }
    tt_test_write(file(name), b, records * TT_CIFAR10_RECORD);
    free(b);
}

static const char *const g_cifar_names[6] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                             "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
static const size_t g_cifar_records[6] = {1, 2, 1, 1, 3, 2};

static void write_cifar_dir(void)
{
    for (int f = 0; f < 6; f++) write_cifar(g_cifar_names[f], f, g_cifar_records[f]);
}

/* ds's sample s is record r of file f, channels last: x[(row * 32 + col) * 3 + c] = plane c's pixel row * 32 + col. */
static void check_cifar_sample(const tt_dataset *ds, size_t s, int f, size_t r)
{
    ck_assert_msg(ds->y[s] == (int32_t)((f + r) % 10), "sample %zu: label %d", s, ds->y[s]);
    const uint8_t *img = ds->x + s * 3072;
    for (size_t row = 0; row < 32; row++)
        for (size_t col = 0; col < 32; col++)
            for (size_t c = 0; c < 3; c++) {
                size_t p = row * 32 + col;
                if (img[p * 3 + c] != cifar_pixel(f, r, c, p)) /* not ck_assert: 30,000 checks, one message */
                    ck_abort_msg("sample %zu (file %d record %zu) row %zu col %zu channel %zu: %u, want %u", s, f, r,
                                 row, col, c, img[p * 3 + c], cifar_pixel(f, r, c, p));
            }
}

START_TEST(test_cifar_good)
{
    write_cifar_dir();
    tt_dataset tr, te;
    tt_error err = {{0}};
    char spec[128];
    snprintf(spec, sizeof spec, "cifar10:%s", dir);
    ck_assert_msg(tt_dataset_load(spec, &tr, &te, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(tr.n, 8);
    ck_assert_uint_eq(te.n, 2);
    ck_assert(tr.shape.ndim == 3 && tr.shape.d[0] == 32 && tr.shape.d[1] == 32 && tr.shape.d[2] == 3);
    ck_assert(tt_shape_eq(&tr.shape, &te.shape));
    ck_assert_uint_eq(tr.dim, 3072);
    ck_assert_int_eq(tr.xtype, TT_X_U8);
    ck_assert(tr.scale == 1.0f / 255.0f);
    ck_assert(tr.n_classes == 10 && te.n_classes == 10);
    size_t s = 0; /* the training files in order 1..5, records in file order */
    for (int f = 0; f < 5; f++)
        for (size_t r = 0; r < g_cifar_records[f]; r++) check_cifar_sample(&tr, s++, f, r);
    check_cifar_sample(&te, 0, 5, 0);
    check_cifar_sample(&te, 1, 5, 1);
    tt_dataset_free(&tr);
    tt_dataset_free(&te);
}
END_TEST

/* Loading DIR as cifar10: must fail with `want`, one line naming DIR/`name` and holding `fragment`. */
static void expect_cifar_fail(tt_status want, const char *name, const char *fragment)
{
    tt_dataset tr, te;
    tt_error err = {{0}};
    tt_status s = tt_dataset_load_cifar10(dir, &tr, &te, &err);
    ck_assert_msg(s == want, "%s: status %d want %d (%s)", name, s, want, err.msg);
    ck_assert_msg(strstr(err.msg, fragment) != NULL, "message '%s' lacks '%s'", err.msg, fragment);
    ck_assert_msg(strstr(err.msg, file(name)) == err.msg, "message '%s' does not start with %s", err.msg, file(name));
    ck_assert(tr.x == NULL && tr.y == NULL && te.x == NULL && te.y == NULL);
}

START_TEST(test_cifar_bad_sizes)
{
    write_cifar_dir();
    unsigned char *b = (unsigned char *)calloc(2 * TT_CIFAR10_RECORD + 5, 1);
    ck_assert_ptr_nonnull(b);
    tt_test_write(file("data_batch_3.bin"), b, 2 * TT_CIFAR10_RECORD + 5);
    expect_cifar_fail(TT_ERR_FORMAT, "data_batch_3.bin", "6151 bytes is not a whole number of 3073-byte CIFAR-10 "
                      "records (1 label byte + 3072 pixel bytes): 2 records and 5 bytes over");
    tt_test_write(file("data_batch_3.bin"), b, TT_CIFAR10_RECORD - 1);
    expect_cifar_fail(TT_ERR_FORMAT, "data_batch_3.bin", "3072 bytes is not a whole number");
    write_cifar_dir();
    tt_test_write(file("test_batch.bin"), b, 0);
    expect_cifar_fail(TT_ERR_FORMAT, "test_batch.bin", "empty file: no CIFAR-10 records");
    free(b);
}
END_TEST

START_TEST(test_cifar_label_range)
{
    write_cifar_dir();
    write_cifar("data_batch_5.bin", 9, 3); /* labels 9, 0, 1 */
    tt_dataset tr, te;
    tt_error err = {{0}};
    ck_assert_msg(tt_dataset_load_cifar10(dir, &tr, &te, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(tr.y[5], 9);
    tt_dataset_free(&tr);
    tt_dataset_free(&te);
    write_cifar("data_batch_5.bin", 10, 3); /* labels 0, 1, 2 */
    FILE *f = fopen(file("data_batch_5.bin"), "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, TT_CIFAR10_RECORD, SEEK_SET), 0); /* record 1's label byte */
    ck_assert_int_eq(fputc(10, f), 10);
    ck_assert_int_eq(fclose(f), 0);
    expect_cifar_fail(TT_ERR_FORMAT, "data_batch_5.bin", "record 1 (from 0): label 10 is out of range 0..9");
}
END_TEST

START_TEST(test_cifar_missing_and_fifo)
{
    write_cifar_dir();
    ck_assert_int_eq(unlink(file("test_batch.bin")), 0);
    expect_cifar_fail(TT_ERR_IO, "test_batch.bin", "missing (--data cifar10:DIR needs data_batch_1.bin, ");
    write_cifar_dir();
    ck_assert_int_eq(unlink(file("data_batch_2.bin")), 0);
    ck_assert_int_eq(mkfifo(file("data_batch_2.bin"), 0600), 0);
    const double bound = tt_test_prompt(1.0), t0 = tt_now();
    expect_cifar_fail(TT_ERR_IO, "data_batch_2.bin", "not a regular file (a FIFO)");
    ck_assert_msg(tt_now() - t0 < bound, "refusing a FIFO took %.2f s", tt_now() - t0);
}
END_TEST

/* The memory entry point: one batch file's bytes, a whole number of records or a refusal naming the buffer. */
START_TEST(test_cifar_memory_reader)
{
    unsigned char *b = (unsigned char *)calloc(2 * TT_CIFAR10_RECORD, 1);
    ck_assert_ptr_nonnull(b);
    b[0] = 3;
    b[1 + 1024 + 5] = 200; /* green of pixel 5 */
    b[TT_CIFAR10_RECORD] = 9;
    b[TT_CIFAR10_RECORD + 1 + 2048 + 1023] = 7; /* blue of the last pixel of record 1 */
    tt_dataset ds;
    tt_error err = {{0}};
    ck_assert_int_eq(tt_cifar10_read_mem(b, 2 * TT_CIFAR10_RECORD, "mem-cifar", &ds, &err), TT_OK);
    ck_assert(ds.n == 2 && ds.y[0] == 3 && ds.y[1] == 9);
    ck_assert_uint_eq(ds.x[5 * 3 + 1], 200);
    ck_assert_uint_eq(ds.x[3072 + 1023 * 3 + 2], 7);
    tt_dataset_free(&ds);
    ck_assert_int_eq(tt_cifar10_read_mem(b, 2 * TT_CIFAR10_RECORD - 1, "mem-cifar", &ds, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "mem-cifar: 6145 bytes is not a whole number") == err.msg, "%s", err.msg);
    ck_assert_ptr_null(ds.x);
    free(b);
}
END_TEST

/* ---- JSON inputs: surrogate escapes ----------------------------------------------------------------------------- */

/* The rule, from RFC 8259 section 7 and Unicode's UTF-16 (D91): \uD800..\uDBFF is the first half of a pair and must be
 * followed at once by \uDC00..\uDFFF; anything else after it (another high half included) leaves it lone. json-c 0.16
 * takes two high halves in a row and makes U+FFFD of them without a word (checked below), so src/model/json.c's scan
 * is the only thing that refuses them; this holds it there, in the scan itself and in every JSON file read through it. */
static int surrogate_pair(unsigned hi, unsigned next)
{
    return hi >= 0xd800 && hi <= 0xdbff && next >= 0xdc00 && next <= 0xdfff;
}

/* The pair's code point as UTF-8, computed here (4 bytes: every pair is beyond U+FFFF). */
static void pair_utf8(unsigned hi, unsigned lo, char out[5])
{
    const unsigned cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    out[4] = '\0';
}

START_TEST(test_json_high_surrogate_pairs)
{
    static const unsigned highs[] = {0xd800, 0xdab1, 0xdbff};
    static const unsigned nexts[] = {0xd800, 0xdbff, 0xdb00, 0xdc00, 0xdd1e, 0xdfff, 0xd7ff, 0xe000, 0x0041};
    for (size_t h = 0; h < sizeof highs / sizeof *highs; h++)
        for (size_t k = 0; k < sizeof nexts / sizeof *nexts; k++)
            for (int in_key = 0; in_key < 2; in_key++) { /* in a string value, and in an object's key */
                char text[64], why[200];
                if (in_key) snprintf(text, sizeof text, "{\"\\u%04x\\u%04x\":1}", highs[h], nexts[k]);
                else snprintf(text, sizeof text, "{\"a\":\"x\\u%04x\\u%04xy\"}", highs[h], nexts[k]);
                tt_json_scan sc = {0};
                json_object *v = tt_json_parse_object(text, strlen(text), 8, 1000, &sc, why, sizeof why);
                if (!surrogate_pair(highs[h], nexts[k])) {
                    char want[40];
                    snprintf(want, sizeof want, "a lone surrogate \\u%04x", highs[h]);
                    ck_assert_msg(v == NULL, "%s accepted: a high surrogate followed by \\u%04x", text, nexts[k]);
                    ck_assert_msg(strstr(why, want) != NULL, "%s: '%s' does not say '%s'", text, why, want);
                    continue;
                }
                ck_assert_msg(v != NULL, "%s refused: %s", text, why);
                char cp[5], want[8];
                pair_utf8(highs[h], nexts[k], cp);
                snprintf(want, sizeof want, in_key ? "%s" : "x%sy", cp);
                const char *got = NULL;
                json_object_object_foreach(v, key, val) got = in_key ? key : json_object_get_string(val);
                ck_assert_msg(got && strcmp(got, want) == 0, "%s: not the pair's code point", text);
                json_object_put(v);
            }
    /* json-c alone takes the two high halves (the reason the scan above must refuse them) */
    static const char twice[] = "{\"a\":\"\\ud800\\ud800\"}";
    json_tokener *tok = json_tokener_new_ex(8);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    json_object *v = json_tokener_parse_ex(tok, twice, (int)strlen(twice));
    ck_assert_msg(v != NULL && json_tokener_get_error(tok) == json_tokener_success,
                  "json-c now refuses two high surrogates: tt_json.h's note may say so");
    json_object_put(v);
    json_tokener_free(tok);
}
END_TEST

/* The file with the first `from` in its bytes replaced by `to` (a checkpoint's header length rewritten, and its
 * checksum where the header still reads: a refusal must then be the JSON's, not the checksum's). */
static uint8_t *edited(const uint8_t *b, size_t len, int checkpoint, const char *from, const char *to, size_t *out_len)
{
    const size_t skip = checkpoint ? 8 : 0, nf = strlen(from), nt = strlen(to);
    const uint8_t *at = NULL;
    for (size_t i = skip; !at && i + nf <= len; i++)
        if (memcmp(b + i, from, nf) == 0) at = b + i;
    ck_assert_msg(at != NULL, "'%s' is not in the file", from);
    *out_len = len - nf + nt;
    uint8_t *o = (uint8_t *)malloc(*out_len + 1);
    const size_t pre = (size_t)(at - b);
    memcpy(o, b, pre);
    memcpy(o + pre, to, nt);
    memcpy(o + pre + nt, at + nf, len - pre - nf);
    o[*out_len] = '\0';
    if (checkpoint) {
        const uint64_t n = tt_test_le64(b) - nf + nt; /* the edit lies inside the header */
        for (int i = 0; i < 8; i++) o[i] = (uint8_t)(n >> (8 * i));
        tt_error err; /* the sealer reads the header as the reader does: a header it refuses keeps the old sum */
        (void)tt_checkpoint_seal(o, *out_len, &err);
    }
    return o;
}

/* A checkpoint whose backend name and whose options (a JSON object inside a header string: the escape's backslash is
 * itself escaped there) hold \ud800\ud800, and a measured profile whose device name does: each refused naming the
 * lone surrogate, through the bytes' parser and through the file's reader; the same files with a real pair are taken,
 * so the surrogate is the only thing wrong with them. */
START_TEST(test_json_high_surrogates_in_every_reader)
{
    tt_model m;
    tt_error err = {{0}};
    ck_assert_msg(tt_model_parse(&m, "dense units=7 activation=relu\ndense units=5\n", "t", TT_FLAT_INPUT(12, 5),
                                 &err) == TT_OK, "%s", err.msg);
    tt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.epoch = ck.step = ck.steps_per_epoch = ck.global_step = ck.optim_steps = 1;
    ck.batch = 32;
    ck.towers = 1;
    ck.optim = tt_optim_defaults(TT_OPT_SGD);
    ck.best = NAN;
    snprintf(ck.backend, sizeof ck.backend, "cpu");
    ck.options = (char *)"{\"reduce\":\"qrs\"}";
    ck.n_params = m.n_params;
    float *zeros = (float *)calloc(m.n_params, sizeof(float)); /* the weights and every optimizer slot */
    ck.params = zeros;
    const char *names[3];
    ck.n_slots = tt_optim_slot_names(&ck.optim, names);
    for (int k = 0; k < ck.n_slots; k++) {
        snprintf(ck.slot_names[k], sizeof ck.slot_names[k], "%s", names[k]);
        ck.slots[k] = zeros;
    }
    ck_assert_msg(tt_checkpoint_write(file("s.safetensors"), &m, &ck, &err) == TT_OK, "%s", err.msg);
    free(zeros);
    size_t len;
    uint8_t *b = tt_test_read_file(file("s.safetensors"), &len);
    static const struct {
        const char *from, *bad, *good, *want;
    } ck_edits[] = {
        {"\"backend\":\"cpu\"", "\"backend\":\"c\\ud800\\ud800u\"", "\"backend\":\"c\\ud83d\\ude00u\"",
         "the header is not JSON: a lone surrogate \\ud800"},
        {"qrs", "q\\\\udbff\\\\ud800s", "q\\\\udbff\\\\udfffs", "options is not JSON: a lone surrogate \\udbff"},
    };
    for (size_t k = 0; k < sizeof ck_edits / sizeof *ck_edits; k++) {
        for (int bad = 1; bad >= 0; bad--) {
            size_t elen;
            uint8_t *e = edited(b, len, 1, ck_edits[k].from, bad ? ck_edits[k].bad : ck_edits[k].good, &elen);
            tt_checkpoint got;
            tt_status s = tt_checkpoint_parse(e, elen, "edited.safetensors", &m, &got, &err);
            tt_test_write(file("e.safetensors"), e, elen);
            tt_checkpoint got2;
            tt_error err2 = {{0}};
            tt_status s2 = tt_checkpoint_read(file("e.safetensors"), NULL, &got2, &err2);
            if (bad) {
                ck_assert_msg(s == TT_ERR_FORMAT && strstr(err.msg, ck_edits[k].want), "%s: %s", ck_edits[k].bad,
                              s ? err.msg : "accepted");
                ck_assert_msg(strstr(err.msg, "edited.safetensors") == err.msg, "%s", err.msg);
                ck_assert_msg(s2 == TT_ERR_FORMAT && strstr(err2.msg, ck_edits[k].want) &&
                              strstr(err2.msg, file("e.safetensors")) == err2.msg, "%s: %s", ck_edits[k].bad,
                              s2 ? err2.msg : "accepted");
            } else {
                ck_assert_msg(s == TT_OK && s2 == TT_OK, "%s: %s", ck_edits[k].good, s ? err.msg : err2.msg);
                tt_checkpoint_free(&got);
                tt_checkpoint_free(&got2);
            }
            free(e);
        }
    }
    free(b);
    /* a measured profile: the seed of the profile reader's fuzz corpus, next to this file */
    char seed[1024];
    const char *slash = strrchr(__FILE__, '/');
    snprintf(seed, sizeof seed, "%.*sfuzz/corpus/profile/ok-cpu-mlp.json", slash ? (int)(slash - __FILE__ + 1) : 0,
             __FILE__);
    b = tt_test_read_file(seed, &len);
    tt_profile *p = (tt_profile *)malloc(sizeof *p);
    ck_assert_msg(tt_profile_parse((const char *)b, len, "seed", p, &err) == TT_OK, "%s", err.msg);
    for (int bad = 1; bad >= 0; bad--) {
        size_t elen;
        uint8_t *e = edited(b, len, 0, "\"device\":\"AMD EPYC\"",
                            bad ? "\"device\":\"AMD \\ud800\\ud800EPYC\"" : "\"device\":\"AMD \\ud800\\udc00EPYC\"",
                            &elen);
        tt_status s = tt_profile_parse((const char *)e, elen, "edited.json", p, &err);
        tt_test_write(file("e.json"), e, elen);
        tt_error err2 = {{0}};
        tt_status s2 = tt_profile_read(file("e.json"), p, &err2);
        if (bad) {
            ck_assert_msg(s == TT_ERR_FORMAT && strstr(err.msg, "edited.json") == err.msg &&
                          strstr(err.msg, "lone surrogate \\ud800"), "%s", s ? err.msg : "accepted");
            ck_assert_msg(s2 == TT_ERR_FORMAT && strstr(err2.msg, "lone surrogate \\ud800"), "%s",
                          s2 ? err2.msg : "accepted");
        } else {
            ck_assert_msg(s == TT_OK && s2 == TT_OK, "%s", s ? err.msg : err2.msg);
            ck_assert_str_eq(p->device, "AMD \xf0\x90\x80\x80" "EPYC"); /* U+10000 */
        }
        free(e);
    }
    free(p);
    free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("formats");
    TCase *npy = tcase_create("npy");
    tcase_add_checked_fixture(npy, setup, NULL);
    tcase_add_test(npy, test_npy_u8_images);
    tcase_add_test(npy, test_npy_f32_vectors);
    tcase_add_test(npy, test_npy_int_tokens);
    tcase_add_test(npy, test_npy_memory_readers);
    tcase_add_test(npy, test_npy_truncated_and_trailing);
    tcase_add_test(npy, test_npy_bad_magic_and_version);
    tcase_add_test(npy, test_npy_malformed_headers);
    tcase_add_test(npy, test_npy_fortran_and_dtypes);
    tcase_add_test(npy, test_npy_shapes);
    tcase_add_test(npy, test_npy_lying_headers);
    tcase_add_test(npy, test_npy_count_mismatch);
    tcase_add_test(npy, test_npy_bad_labels);
    tcase_add_test(npy, test_npy_token_range);
    tcase_add_test(npy, test_npy_non_finite);
    tcase_add_test(npy, test_npy_train_test_disagree);
    suite_add_tcase(s, npy);
    TCase *cifar = tcase_create("cifar10");
    tcase_add_checked_fixture(cifar, setup, NULL);
    tcase_add_test(cifar, test_cifar_good);
    tcase_add_test(cifar, test_cifar_bad_sizes);
    tcase_add_test(cifar, test_cifar_label_range);
    tcase_add_test(cifar, test_cifar_memory_reader);
    suite_add_tcase(s, cifar);
    /* FIFOs: a reader that blocks would sit here until this timeout; each test also asserts it took < 1 s */
    TCase *fifo = tcase_create("fifo");
    tcase_add_checked_fixture(fifo, setup, NULL);
    tcase_set_timeout(fifo, 10);
    tcase_add_test(fifo, test_npy_missing_and_not_regular);
    tcase_add_test(fifo, test_cifar_missing_and_fifo);
    suite_add_tcase(s, fifo);
    TCase *json = tcase_create("json");
    tcase_add_checked_fixture(json, setup, NULL);
    tcase_add_test(json, test_json_high_surrogate_pairs);
    tcase_add_test(json, test_json_high_surrogates_in_every_reader);
    suite_add_tcase(s, json);
    return tt_test_run_suite(s);
}
