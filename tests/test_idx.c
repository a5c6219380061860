/* test_idx.c — the IDX reader and the input layer under it (tt_input.h) on good files (plain, gzip, concatenated
 * gzip members, memory) and on hostile ones: bad magic, wrong type, wrong dimension count, truncated header and
 * data, trailing data (wrong counts), labels out of range, image/label count mismatch both ways, corrupt gzip, gzip
 * members cut short or with a bad CRC, bytes after the last member, headers claiming far more than the file holds
 * (which must not allocate the claimed size), missing files, and things that are not regular files (FIFOs with no
 * writer, which must not block; directories; devices) for data and model files. Every failure must be a status
 * with a message naming the file. */
#include <sys/stat.h>
#include <zlib.h>

#include "tt_data.h"
#include "tt_input.h"
#include "tt_model.h"
#include "tt_test.h"

static char dir[64];
static char path[256];

static const char *file(const char *name)
{
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* IDX bytes: header for ndim dims, then data. */
static size_t make_idx(unsigned char *buf, int ndim, const uint32_t *dims, const unsigned char *data, size_t n)
{
    size_t k = 0;
    buf[k++] = 0;
    buf[k++] = 0;
    buf[k++] = 0x08;
    buf[k++] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++) {
        buf[k++] = (unsigned char)(dims[i] >> 24);
        buf[k++] = (unsigned char)(dims[i] >> 16);
        buf[k++] = (unsigned char)(dims[i] >> 8);
        buf[k++] = (unsigned char)dims[i];
    }
    if (n) memcpy(buf + k, data, n);
    return k + n;
}

static void write_gz(const char *p, const void *data, size_t n)
{
    gzFile f = gzopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gzwrite(f, data, (unsigned)n), (int)n);
    ck_assert_int_eq(gzclose(f), Z_OK);
}

static unsigned char img_data[3 * 2 * 2] = {0, 255, 128, 1, 2, 3, 4, 5, 6, 7, 8, 9};
static unsigned char lab_data[3] = {0, 9, 4};

static void setup(void)
{
    tt_test_tmpdir(dir, sizeof dir);
    unsigned char buf[256];
    uint32_t idims[3] = {3, 2, 2}, ldims[1] = {3};
    size_t n = make_idx(buf, 3, idims, img_data, sizeof img_data);
    tt_test_write(file("images"), buf, n);
    write_gz(file("images.gz"), buf, n);
    tt_test_write(file("images-short"), buf, n - 1);
    tt_test_write(file("images-header"), buf, 10);
    unsigned char longer[300];
    memcpy(longer, buf, n);
    longer[n] = 42;
    tt_test_write(file("images-long"), longer, n + 1);
    buf[2] = 0x0D; /* float data */
    tt_test_write(file("images-float"), buf, n);
    buf[2] = 0x08;
    buf[0] = 0x1f;
    tt_test_write(file("images-magic"), buf, n);
    n = make_idx(buf, 1, ldims, lab_data, sizeof lab_data);
    tt_test_write(file("labels"), buf, n);
    write_gz(file("labels.gz"), buf, n);
    buf[n - 1] = 10;
    tt_test_write(file("labels-range"), buf, n);
    uint32_t ldims2[1] = {2};
    n = make_idx(buf, 1, ldims2, lab_data, 2);
    tt_test_write(file("labels-two"), buf, n);
    tt_test_write(file("garbage.gz"), "\x1f\x8b\x08\x00garbage-not-deflate-data", 28);
}

START_TEST(test_good_plain_and_gzip)
{
    const char *variants[2][2] = {{"images", "labels"}, {"images.gz", "labels.gz"}};
    for (int v = 0; v < 2; v++) {
        tt_dataset ds;
        tt_error err;
        char ip[256], lp[256];
        snprintf(ip, sizeof ip, "%s/%s", dir, variants[v][0]);
        snprintf(lp, sizeof lp, "%s/%s", dir, variants[v][1]);
        ck_assert_int_eq(tt_dataset_load_idx(&ds, ip, lp, 10, &err), TT_OK);
        ck_assert_uint_eq(ds.n, 3);
        ck_assert_uint_eq(ds.dim, 4);
        ck_assert_uint_eq(ds.x[0], 0);
        ck_assert_uint_eq(ds.x[1], 255);
        ck_assert_uint_eq(ds.x[2], 128);
        ck_assert(tt_close(ds.x[2] * ds.scale, 128.0 / 255.0, 1e-7, 0));
        ck_assert_int_eq(ds.y[1], 9);
        tt_dataset_free(&ds);
    }
}
END_TEST

static void expect_fail(const char *images, const char *labels, tt_status want, const char *fragment)
{
    tt_dataset ds;
    tt_error err = {{0}};
    char ip[256], lp[256];
    snprintf(ip, sizeof ip, "%s/%s", dir, images);
    snprintf(lp, sizeof lp, "%s/%s", dir, labels);
    tt_status s = tt_dataset_load_idx(&ds, ip, lp, 10, &err);
    ck_assert_msg(s == want, "%s/%s: status %d want %d (%s)", images, labels, s, want, err.msg);
    ck_assert_msg(strstr(err.msg, fragment) != NULL, "message '%s' lacks '%s'", err.msg, fragment);
    ck_assert_msg(strstr(err.msg, dir) != NULL, "message '%s' does not name the file", err.msg);
    ck_assert_ptr_null(ds.x);
}

START_TEST(test_bad_magic) { expect_fail("images-magic", "labels", TT_ERR_FORMAT, "bad magic"); }
END_TEST
START_TEST(test_wrong_type) { expect_fail("images-float", "labels", TT_ERR_FORMAT, "not unsigned byte"); }
END_TEST
START_TEST(test_wrong_ndim) { expect_fail("labels", "labels", TT_ERR_FORMAT, "dimensions"); }
END_TEST
START_TEST(test_truncated_data) { expect_fail("images-short", "labels", TT_ERR_FORMAT, "truncated"); }
END_TEST
START_TEST(test_truncated_header) { expect_fail("images-header", "labels", TT_ERR_FORMAT, "truncated"); }
END_TEST
START_TEST(test_wrong_count) { expect_fail("images-long", "labels", TT_ERR_FORMAT, "wrong count"); }
END_TEST
START_TEST(test_label_range) { expect_fail("images", "labels-range", TT_ERR_FORMAT, "out of range"); }
END_TEST
START_TEST(test_count_mismatch) { expect_fail("images", "labels-two", TT_ERR_FORMAT, "2 labels but"); }
END_TEST
START_TEST(test_corrupt_gzip) { expect_fail("garbage.gz", "labels", TT_ERR_FORMAT, ""); }
END_TEST
START_TEST(test_missing_file) { expect_fail("nope", "labels", TT_ERR_IO, "cannot open"); }
END_TEST
START_TEST(test_directory_is_not_a_file) { expect_fail(".", "labels", TT_ERR_IO, "directory"); }
END_TEST

/* A header claiming absurd sizes is refused before any allocation. */
START_TEST(test_huge_header)
{
    unsigned char buf[64];
    uint32_t dims[3] = {4000000000u, 4096, 4096};
    size_t n = make_idx(buf, 3, dims, NULL, 0);
    tt_test_write(file("huge"), buf, n);
    size_t cnt, r, c;
    uint8_t *px;
    tt_error err;
    ck_assert_int_eq(tt_idx_read_images(file("huge"), &cnt, &r, &c, &px, &err), TT_ERR_FORMAT);
    ck_assert_ptr_null(px);
}
END_TEST

/* A directory with MNIST-style names (the dotted variant) loads; one with a file missing names it. */
START_TEST(test_load_dir)
{
    char sub[128], p1[300], p2[300];
    snprintf(sub, sizeof sub, "%s/mnist", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    const char *names[4][2] = {{"images", "train-images.idx3-ubyte"}, {"labels", "train-labels.idx1-ubyte"},
                               {"images.gz", "t10k-images-idx3-ubyte.gz"}, {"labels.gz", "t10k-labels-idx1-ubyte.gz"}};
    tt_dataset tr, te;
    tt_error err;
    for (int i = 0; i < 4; i++) {
        snprintf(p1, sizeof p1, "%s/%s", dir, names[i][0]);
        snprintf(p2, sizeof p2, "%s/%s", sub, names[i][1]);
        if (i == 3) {
            ck_assert_int_eq(tt_dataset_load_dir(sub, &tr, &te, &err), TT_ERR_IO);
            ck_assert_msg(strstr(err.msg, "t10k-labels") != NULL, "%s", err.msg);
        }
        ck_assert_int_eq(link(p1, p2), 0);
    }
    ck_assert_int_eq(tt_dataset_load_dir(sub, &tr, &te, &err), TT_OK);
    ck_assert_uint_eq(tr.n, 3);
    ck_assert_uint_eq(te.n, 3);
    tt_dataset val;
    ck_assert_int_eq(tt_dataset_split_tail(&tr, 1, &val, &err), TT_OK);
    ck_assert_uint_eq(tr.n, 2);
    ck_assert_uint_eq(val.n, 1);
    ck_assert_int_eq(val.y[0], 4); /* the last training sample */
    tt_dataset_free(&val);
    ck_assert_int_eq(tt_dataset_split_tail(&tr, 2, &val, &err), TT_ERR_ARG);
    tt_dataset_free(&tr);
    tt_dataset_free(&te);
    tt_dataset_free(&val);
}
END_TEST

/* ---- hostile files under the input layer ---------------------------------------------------------------------- */

/* The bytes of a file written by the test (small files only). */
static size_t slurp(const char *name, unsigned char *buf, size_t cap)
{
    FILE *f = fopen(file(name), "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, cap, f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_uint_lt(n, cap);
    return n;
}

/* tt_idx_read_images on one file must fail with `want`, a message naming the file and holding `fragment`. */
static void expect_images_fail(const char *name, tt_status want, const char *fragment)
{
    size_t cnt = 0, r = 0, c = 0;
    uint8_t *px = (uint8_t *)&cnt;
    tt_error err = {{0}};
    tt_status s = tt_idx_read_images(file(name), &cnt, &r, &c, &px, &err);
    ck_assert_msg(s == want, "%s: status %d want %d (%s)", name, s, want, err.msg);
    ck_assert_msg(strstr(err.msg, fragment) != NULL, "message '%s' lacks '%s'", err.msg, fragment);
    ck_assert_msg(strstr(err.msg, file(name)) != NULL, "message '%s' does not name %s", err.msg, file(name));
    ck_assert_ptr_null(px);
}

/* A FIFO with no writer: opening it for reading must not wait for one. */
START_TEST(test_fifo_data_files)
{
    ck_assert_int_eq(mkfifo(file("fifo"), 0600), 0);
    const double bound = tt_test_prompt(1.0), t0 = tt_now();
    expect_fail("fifo", "labels", TT_ERR_IO, "not a regular file (a FIFO)");
    expect_fail("images", "fifo", TT_ERR_IO, "not a regular file (a FIFO)");
    ck_assert_msg(tt_now() - t0 < bound, "refusing two FIFOs took %.2f s", tt_now() - t0);
}
END_TEST

START_TEST(test_fifo_model_file)
{
    ck_assert_int_eq(mkfifo(file("model-fifo"), 0600), 0);
    tt_model m;
    tt_error err = {{0}};
    const double bound = tt_test_prompt(1.0), t0 = tt_now();
    ck_assert_int_eq(tt_model_load(&m, file("model-fifo"), TT_FLAT_INPUT(4, 10), &err), TT_ERR_IO);
    ck_assert_msg(tt_now() - t0 < bound, "refusing a FIFO took %.2f s", tt_now() - t0);
    ck_assert_msg(strstr(err.msg, file("model-fifo")) && strstr(err.msg, "not a regular file (a FIFO)"), "%s",
                  err.msg);
}
END_TEST

/* Model files keep their limits through tt_input_read_text: directories, over 1 MiB, NUL bytes. */
START_TEST(test_model_file_limits)
{
    tt_model m;
    tt_error err = {{0}};
    ck_assert_int_eq(tt_model_load(&m, dir, TT_FLAT_INPUT(4, 10), &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, "(a directory)"), "%s", err.msg);
    tt_test_write(file("model-nul"), "dense units=10\n\0", 16);
    ck_assert_int_eq(tt_model_load(&m, file("model-nul"), TT_FLAT_INPUT(4, 10), &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, file("model-nul")) && strstr(err.msg, "NUL byte"), "%s", err.msg);
    size_t big = ((size_t)1 << 20) + 1;
    char *text = (char *)malloc(big);
    ck_assert_ptr_nonnull(text);
    memset(text, '#', big);
    tt_test_write(file("model-big"), text, big);
    ck_assert_int_eq(tt_model_load(&m, file("model-big"), TT_FLAT_INPUT(4, 10), &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, file("model-big")) && strstr(err.msg, "larger than"), "%s", err.msg);
    for (size_t i = 1; i < big; i += 2) text[i] = '\n'; /* exactly 1 MiB: "#" comment lines, then a layer */
    memcpy(text + big - 16, "\ndense units=10", 15);
    tt_test_write(file("model-1mib"), text, big - 1);
    free(text);
    ck_assert_int_eq(tt_model_load(&m, file("model-1mib"), TT_FLAT_INPUT(4, 10), &err), TT_OK);
    ck_assert_uint_eq(m.n_layers, 1);
}
END_TEST

START_TEST(test_not_regular_files)
{
    expect_fail("images", ".", TT_ERR_IO, "not a regular file (a directory)");
    size_t cnt, r, c;
    uint8_t *px;
    tt_error err = {{0}};
    ck_assert_int_eq(tt_idx_read_images("/dev/null", &cnt, &r, &c, &px, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "/dev/null: not a regular file (a character device)"), "%s", err.msg);
}
END_TEST

/* Cutting 1..10 bytes off a gzip file removes part of its trailer (8 bytes: CRC-32, length) or of the deflate
 * data: zlib's gzread calls that a clean end, the reader must not. */
START_TEST(test_gzip_cut_short)
{
    unsigned char gz[512];
    size_t n = slurp("images.gz", gz, sizeof gz);
    const size_t cuts[4] = {1, 4, 8, 10};
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "images-cut%zu.gz", cuts[i]);
        tt_test_write(file(name), gz, n - cuts[i]);
        expect_images_fail(name, TT_ERR_FORMAT, "truncated gzip member (the file ends before the gzip trailer)");
    }
}
END_TEST

START_TEST(test_gzip_bad_crc_and_length)
{
    unsigned char gz[512];
    size_t n = slurp("images.gz", gz, sizeof gz);
    gz[n - 8] ^= 0x01; /* the first byte of the CRC-32 */
    tt_test_write(file("images-crc.gz"), gz, n);
    expect_images_fail("images-crc.gz", TT_ERR_FORMAT, "corrupt gzip data (incorrect data check)");
    gz[n - 8] ^= 0x01;
    gz[n - 1] ^= 0x40; /* the last byte of the length (ISIZE) */
    tt_test_write(file("images-isize.gz"), gz, n);
    expect_images_fail("images-isize.gz", TT_ERR_FORMAT, "corrupt gzip data (incorrect length check)");
}
END_TEST

START_TEST(test_gzip_trailing_bytes)
{
    unsigned char gz[512];
    size_t n = slurp("images.gz", gz, sizeof gz);
    memcpy(gz + n, "twelve bytes", 12);
    tt_test_write(file("images-tail.gz"), gz, n + 12);
    expect_images_fail("images-tail.gz", TT_ERR_FORMAT, "12 bytes after the last gzip member");
    gz[n] = 0; /* a single zero byte (padding some tools add) is still not a gzip member */
    tt_test_write(file("images-zero.gz"), gz, n + 1);
    expect_images_fail("images-zero.gz", TT_ERR_FORMAT, "1 byte after the last gzip member");
    gz[n] = 0x1f; /* the start of a member that never comes */
    gz[n + 1] = 0x8b;
    tt_test_write(file("images-magic-only.gz"), gz, n + 2);
    expect_images_fail("images-magic-only.gz", TT_ERR_FORMAT, "truncated gzip member");
}
END_TEST

/* Concatenated members are one stream (gzip(1), RFC 1952 2.2): split inside the header and inside the data. */
START_TEST(test_gzip_concatenated_members)
{
    unsigned char buf[256], a[512], b[512], both[1024];
    uint32_t dims[3] = {3, 2, 2};
    size_t n = make_idx(buf, 3, dims, img_data, sizeof img_data);
    const size_t splits[2] = {6, 20};
    for (int i = 0; i < 2; i++) {
        write_gz(file("part-a.gz"), buf, splits[i]);
        write_gz(file("part-b.gz"), buf + splits[i], n - splits[i]);
        size_t na = slurp("part-a.gz", a, sizeof a), nb = slurp("part-b.gz", b, sizeof b);
        memcpy(both, a, na);
        memcpy(both + na, b, nb);
        tt_test_write(file("images-2m.gz"), both, na + nb);
        size_t cnt = 0, r = 0, c = 0;
        uint8_t *px = NULL;
        tt_error err = {{0}};
        ck_assert_msg(tt_idx_read_images(file("images-2m.gz"), &cnt, &r, &c, &px, &err) == TT_OK, "%s", err.msg);
        ck_assert_uint_eq(cnt, 3);
        ck_assert_mem_eq(px, img_data, sizeof img_data);
        tt_free(px);
    }
}
END_TEST

/* A plain file's header must match its size exactly, and a lying header allocates nothing of what it claims. */
START_TEST(test_plain_header_counts)
{
    unsigned char buf[256];
    uint32_t more[3] = {4, 2, 2}, fewer[3] = {2, 2, 2}, big[3] = {100000, 28, 28};
    tt_test_write(file("claims-more"), buf, make_idx(buf, 3, more, img_data, sizeof img_data));
    expect_images_fail("claims-more", TT_ERR_FORMAT, "truncated: the header says 4 images (16 bytes of data)");
    tt_test_write(file("claims-fewer"), buf, make_idx(buf, 3, fewer, img_data, sizeof img_data));
    expect_images_fail("claims-fewer", TT_ERR_FORMAT, "wrong count: the header says 2 images");
    tt_test_write(file("claims-big"), buf, make_idx(buf, 3, big, img_data, sizeof img_data));
    expect_images_fail("claims-big", TT_ERR_FORMAT, "truncated");
    ck_assert_uint_lt(tt_alloc_largest_request(), 78400000); /* what the last header claims */
}
END_TEST

/* A gzip header claiming 33,554,432 images of 28x28 (26.3 GB, under the 64 GiB cap) with 12 bytes of data must
 * fail as truncated after reading the real data, and the buffer must never have grown past its first size. (Check
 * forks each test, so the largest-request mark is this test's own; no earlier test asks for more than about 1 MiB.) */
START_TEST(test_gzip_huge_claim)
{
    unsigned char buf[256];
    uint32_t dims[3] = {33554432u, 28, 28};
    write_gz(file("images-26gb.gz"), buf, make_idx(buf, 3, dims, img_data, sizeof img_data));
    expect_images_fail("images-26gb.gz", TT_ERR_FORMAT,
                       "truncated: the decompressed data end after 12 of the 26306674688 bytes of the images");
    ck_assert_uint_le(tt_alloc_largest_request(), TT_INPUT_FIRST_ALLOC);
}
END_TEST

/* A gzip payload bigger than the first buffer grows to exactly the claimed size with the data intact. */
START_TEST(test_gzip_growing_buffer)
{
    uint32_t dims[3] = {1500, 64, 64}; /* 6,144,000 bytes: one doubling past TT_INPUT_FIRST_ALLOC */
    size_t bytes = (size_t)dims[0] * dims[1] * dims[2];
    unsigned char *idx = (unsigned char *)malloc(16 + bytes), *data = (unsigned char *)malloc(bytes);
    ck_assert(idx && data && bytes > TT_INPUT_FIRST_ALLOC);
    for (size_t i = 0; i < bytes; i++) data[i] = (unsigned char)(i * 2654435761u >> 13);
    write_gz(file("images-big.gz"), idx, make_idx(idx, 3, dims, data, bytes));
    size_t cnt = 0, r = 0, c = 0;
    uint8_t *px = NULL;
    tt_error err = {{0}};
    ck_assert_msg(tt_idx_read_images(file("images-big.gz"), &cnt, &r, &c, &px, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(cnt, 1500);
    ck_assert_int_eq(memcmp(px, data, bytes), 0);
    ck_assert_uint_le(tt_alloc_largest_request(), bytes);
    tt_free(px);
    free(idx);
    free(data);
}
END_TEST

/* Every image side is 1..TT_IDX_MAX_SIDE: a side of 0 would make images of no pixels, and a data set of nothing. */
START_TEST(test_zero_side)
{
    unsigned char buf[64];
    const uint32_t dims[2][3] = {{3, 0, 2}, {3, 2, 0}};
    for (int i = 0; i < 2; i++) {
        tt_test_write(file("images-side0"), buf, make_idx(buf, 3, dims[i], NULL, 0));
        expect_images_fail("images-side0", TT_ERR_FORMAT, "image side 0 is out of range 1..");
    }
}
END_TEST

START_TEST(test_more_labels_than_images)
{
    unsigned char buf[256], four[4] = {1, 2, 3, 4};
    uint32_t dims[1] = {4};
    tt_test_write(file("labels-four"), buf, make_idx(buf, 1, dims, four, sizeof four));
    expect_fail("images", "labels-four", TT_ERR_FORMAT, "4 labels but");
}
END_TEST

/* The memory readers (the fuzzers' entry) give what the file readers give, and name the buffer in messages. */
START_TEST(test_memory_readers)
{
    unsigned char gz[512];
    size_t n = slurp("images.gz", gz, sizeof gz);
    size_t cnt = 0, r = 0, c = 0;
    uint8_t *px = NULL, *lab = NULL;
    tt_error err = {{0}};
    ck_assert_int_eq(tt_idx_read_images_mem(gz, n, "mem-images", &cnt, &r, &c, &px, &err), TT_OK);
    ck_assert_uint_eq(cnt * r * c, sizeof img_data);
    ck_assert_mem_eq(px, img_data, sizeof img_data);
    tt_free(px);
    n = slurp("labels", gz, sizeof gz);
    ck_assert_int_eq(tt_idx_read_labels_mem(gz, n, "mem-labels", 10, &cnt, &lab, &err), TT_OK);
    ck_assert_mem_eq(lab, lab_data, sizeof lab_data);
    tt_free(lab);
    ck_assert_int_eq(tt_idx_read_labels_mem(gz, n - 1, "mem-labels", 10, &cnt, &lab, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "mem-labels: truncated"), "%s", err.msg);
    ck_assert_ptr_null(lab);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("idx");
    TCase *tc = tcase_create("reader");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_good_plain_and_gzip);
    tcase_add_test(tc, test_bad_magic);
    tcase_add_test(tc, test_wrong_type);
    tcase_add_test(tc, test_wrong_ndim);
    tcase_add_test(tc, test_truncated_data);
    tcase_add_test(tc, test_truncated_header);
    tcase_add_test(tc, test_wrong_count);
    tcase_add_test(tc, test_label_range);
    tcase_add_test(tc, test_count_mismatch);
    tcase_add_test(tc, test_corrupt_gzip);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_directory_is_not_a_file);
    tcase_add_test(tc, test_huge_header);
    tcase_add_test(tc, test_load_dir);
    tcase_add_test(tc, test_model_file_limits);
    tcase_add_test(tc, test_not_regular_files);
    tcase_add_test(tc, test_gzip_cut_short);
    tcase_add_test(tc, test_gzip_bad_crc_and_length);
    tcase_add_test(tc, test_gzip_trailing_bytes);
    tcase_add_test(tc, test_gzip_concatenated_members);
    tcase_add_test(tc, test_plain_header_counts);
    tcase_add_test(tc, test_gzip_huge_claim);
    tcase_add_test(tc, test_gzip_growing_buffer);
    tcase_add_test(tc, test_zero_side);
    tcase_add_test(tc, test_more_labels_than_images);
    tcase_add_test(tc, test_memory_readers);
    suite_add_tcase(s, tc);
    /* FIFOs: a reader that blocks would sit here until this timeout; each test also asserts it took < 1 s */
    TCase *fifo = tcase_create("fifo");
    tcase_add_checked_fixture(fifo, setup, NULL);
    tcase_set_timeout(fifo, 10);
    tcase_add_test(fifo, test_fifo_data_files);
    tcase_add_test(fifo, test_fifo_model_file);
    suite_add_tcase(s, fifo);
    return tt_test_run_suite(s);
}
