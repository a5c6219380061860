/* test_idx.c — the IDX reader on good files (plain and gzip) and on hostile ones: bad magic, wrong type, wrong
 * dimension count, truncated header and data, trailing data (wrong counts), labels out of range, image/label count
 * mismatch, corrupt gzip, missing files. Every failure must be a status with a message naming the file. */
#include <sys/stat.h>
#include <zlib.h>

#include "tt_data.h"
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
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
