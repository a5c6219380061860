/* data/dataset.c — turning IDX files into a data set, finding the files of an MNIST-format directory (and those of
 * a cifar10: or npy: directory), the --data dispatch (IDX, cifar10:, npy:), and the train / validation split (the
 * last n_val training samples, as the Keras seed does with validation_split). The CIFAR-10 and .npy readers are
 * src/data/cifar10.c and src/data/npy.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tt_data.h"

size_t tt_dataset_xbytes(const tt_dataset *ds) { return ds->xtype == TT_X_F32 ? sizeof(float) : 1; }

size_t tt_dataset_sample_bytes(const tt_dataset *ds) { return ds->dim * tt_dataset_xbytes(ds); }

void tt_dataset_free(tt_dataset *ds)
{
    tt_free(ds->x);
    tt_free(ds->y);
    memset(ds, 0, sizeof *ds);
}

tt_status tt_dataset_load_idx(tt_dataset *ds, const char *images_path, const char *labels_path, size_t n_classes,
                              tt_error *err)
{
    memset(ds, 0, sizeof *ds);
    size_t n_img, rows, cols, n_lab;
    uint8_t *pix = NULL, *lab = NULL;
    tt_status s = tt_idx_read_images(images_path, &n_img, &rows, &cols, &pix, err);
    if (s) return s;
    s = tt_idx_read_labels(labels_path, n_classes, &n_lab, &lab, err);
    if (s) {
        tt_free(pix);
        return s;
    }
    if (n_img != n_lab) {
        s = tt_fail(err, TT_ERR_FORMAT, "%s: %zu labels but %s has %zu images", labels_path, n_lab, images_path,
                    n_img);
        goto done;
    }
    ds->n = n_img;
    ds->shape = tt_shape3(rows, cols, 1);
    ds->dim = rows * cols;
    ds->xtype = TT_X_U8;
    ds->n_classes = n_classes;
    ds->scale = 1.0f / 255.0f;
    ds->x = pix; /* the data set takes the pixel buffer */
    pix = NULL;
    ds->y = (int32_t *)tt_calloc(n_img, sizeof(int32_t));
    if (!ds->y) {
        tt_dataset_free(ds);
        s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %zu labels", labels_path, n_img);
        goto done;
    }
    for (size_t i = 0; i < n_img; i++) ds->y[i] = lab[i];
done:
    tt_free(pix);
    tt_free(lab);
    return s;
}

tt_status tt_samples_load(const char *path, tt_dataset *ds, tt_error *err)
{
    memset(ds, 0, sizeof *ds);
    const size_t len = strlen(path);
    tt_status s;
    if (len >= 4 && strcmp(path + len - 4, ".npy") == 0) {
        s = tt_npy_read_x(path, ds, err);
    } else {
        size_t rows, cols;
        s = tt_idx_read_images(path, &ds->n, &rows, &cols, &ds->x, err);
        if (!s) {
            ds->shape = tt_shape3(rows, cols, 1);
            ds->dim = rows * cols;
            ds->xtype = TT_X_U8;
            ds->scale = 1.0f / 255.0f;
        }
    }
    if (!s && !ds->n) s = tt_fail(err, TT_ERR_FORMAT, "%s: holds no samples", path);
    if (!s) {
        ds->y = (int32_t *)tt_calloc(ds->n ? ds->n : 1, sizeof(int32_t));
        if (!ds->y) s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %zu samples", path, ds->n);
    }
    if (s) tt_dataset_free(ds);
    return s;
}

/* Finds `<dir>/<stem>` among the usual spellings of MNIST file names. */
static tt_status find_file(const char *dir, const char *stem, const char *alt, char *out, size_t outlen,
                           tt_error *err)
{
    const char *names[4] = {stem, alt, NULL, NULL};
    char gz0[96], gz1[96];
    snprintf(gz0, sizeof gz0, "%s.gz", stem);
    snprintf(gz1, sizeof gz1, "%s.gz", alt);
    const char *all[4] = {gz0, names[0], gz1, names[1]};
    for (int i = 0; i < 4; i++) {
        int len = snprintf(out, outlen, "%s/%s", dir, all[i]);
        if (len < 0 || (size_t)len >= outlen) return tt_fail(err, TT_ERR_ARG, "--data: path too long: %s", dir);
        if (access(out, F_OK) == 0) return TT_OK;
    }
    return tt_fail(err, TT_ERR_IO, "%s: no %s[.gz] (or %s[.gz]) in this directory", dir, stem, alt);
}

tt_status tt_dataset_load_dir(const char *dir, tt_dataset *train, tt_dataset *test, tt_error *err)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (strcmp(dir, "fashion-mnist") == 0) {
        struct stat st;
        if (stat(TT_FASHION_MNIST_DIR, &st) != 0)
            return tt_fail(err, TT_ERR_IO,
                           "--data fashion-mnist: %s not found (install it: apt-get install dataset-fashion-mnist)",
                           TT_FASHION_MNIST_DIR);
        dir = TT_FASHION_MNIST_DIR;
    }
    struct stat st;
    if (stat(dir, &st) != 0) return tt_fail(err, TT_ERR_IO, "--data %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return tt_fail(err, TT_ERR_IO, "--data %s: not a directory", dir);
    char ti[4200], tl[4200], ei[4200], el[4200];
    tt_status s = find_file(dir, "train-images-idx3-ubyte", "train-images.idx3-ubyte", ti, sizeof ti, err);
    if (!s) s = find_file(dir, "train-labels-idx1-ubyte", "train-labels.idx1-ubyte", tl, sizeof tl, err);
    if (!s) s = find_file(dir, "t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte", ei, sizeof ei, err);
    if (!s) s = find_file(dir, "t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte", el, sizeof el, err);
    if (!s) s = tt_dataset_load_idx(train, ti, tl, 10, err);
    if (!s) s = tt_dataset_load_idx(test, ei, el, 10, err);
    if (!s && !tt_shape_eq(&train->shape, &test->shape))
        s = tt_fail(err, TT_ERR_FORMAT, "%s: test images are %zux%zu but training images are %zux%zu", ei,
                    test->shape.d[0], test->shape.d[1], train->shape.d[0], train->shape.d[1]);
    if (s) {
        tt_dataset_free(train);
        tt_dataset_free(test);
    }
    return s;
}

tt_status tt_dataset_split_tail(tt_dataset *src, size_t n_val, tt_dataset *val, tt_error *err)
{
    memset(val, 0, sizeof *val);
    if (n_val >= src->n)
        return tt_fail(err, TT_ERR_ARG, "--val-samples %zu: must be smaller than the %zu training samples", n_val,
                       src->n);
    *val = *src;
    val->n = n_val;
    val->x = NULL;
    val->y = NULL;
    if (n_val == 0) return TT_OK;
    size_t first = src->n - n_val, sb = tt_dataset_sample_bytes(src);
    val->x = (uint8_t *)tt_malloc(n_val * sb);
    val->y = (int32_t *)tt_calloc(n_val, sizeof(int32_t));
    if (!val->x || !val->y) {
        tt_dataset_free(val);
        return tt_fail(err, TT_ERR_NOMEM, "out of memory for %zu validation samples", n_val);
    }
    memcpy(val->x, src->x + first * sb, n_val * sb);
    memcpy(val->y, src->y + first, n_val * sizeof(int32_t));
    src->n = first;
    return TT_OK;
}

void tt_dataset_truncate(tt_dataset *ds, size_t n)
{
    if (n < ds->n) ds->n = n;
}

tt_status tt_data_dir_files(const char *kind, const char *dir, const char *const *names, size_t n, char *paths,
                            tt_error *err)
{
    struct stat st;
    if (stat(dir, &st) != 0) return tt_fail(err, TT_ERR_IO, "--data %s:%s: %s", kind, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return tt_fail(err, TT_ERR_IO, "--data %s:%s: not a directory", kind, dir);
    for (size_t i = 0; i < n; i++) {
        char *p = paths + i * TT_DATA_PATH_MAX;
        int len = snprintf(p, TT_DATA_PATH_MAX, "%s/%s", dir, names[i]);
        if (len < 0 || (size_t)len >= TT_DATA_PATH_MAX)
            return tt_fail(err, TT_ERR_ARG, "--data %s:%s: path too long", kind, dir);
    }
    /* every file is looked for before any is read, so a missing last file does not cost reading the first ones */
    for (size_t i = 0; i < n; i++) {
        if (access(paths + i * TT_DATA_PATH_MAX, F_OK) == 0) continue;
        char all[512] = "";
        for (size_t j = 0, k = 0; j < n && k < sizeof all; j++)
            k += (size_t)snprintf(all + k, sizeof all - k, "%s%s", j ? (j + 1 == n ? " and " : ", ") : "", names[j]);
        return tt_fail(err, TT_ERR_IO, "%s: missing (--data %s:DIR needs %s in DIR)", paths + i * TT_DATA_PATH_MAX,
                       kind, all);
    }
    return TT_OK;
}

static int cmp_label(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Distinct labels over both sets (a sorted copy: the labels may be as large as int32 allows), or 0 if out of memory. */
static size_t distinct_labels(const tt_dataset *train, const tt_dataset *test)
{
    const size_t n = train->n + test->n;
    int32_t *y = (int32_t *)tt_malloc((n ? n : 1) * sizeof *y);
    if (!y) return 0;
    if (train->n) memcpy(y, train->y, train->n * sizeof *y);
    if (test->n) memcpy(y + train->n, test->y, test->n * sizeof *y);
    qsort(y, n, sizeof *y, cmp_label);
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += i == 0 || y[i] != y[i - 1];
    tt_free(y);
    return d;
}

tt_status tt_dataset_classes(tt_dataset *train, tt_dataset *test, size_t classes, char *notice, size_t len,
                             tt_error *err)
{
    notice[0] = '\0';
    if (classes) {
        const tt_dataset *sets[2] = {train, test};
        static const char *const names[2] = {"training", "test"};
        for (int k = 0; k < 2; k++)
            for (size_t i = 0; i < sets[k]->n; i++)
                if ((size_t)sets[k]->y[i] >= classes)
                    return tt_fail(err, TT_ERR_FORMAT, "--classes %zu: %s sample %zu has label %ld (labels must be "
                                   "0..%zu)", classes, names[k], i, (long)sets[k]->y[i], classes - 1);
        train->n_classes = test->n_classes = classes;
        return TT_OK;
    }
    const size_t implied = train->n_classes;
    if (implied <= 10) return TT_OK; /* never more than 10x: at least one label was seen */
    const size_t distinct = distinct_labels(train, test);
    if (distinct && implied > 10 * distinct)
        snprintf(notice, len, "the largest label, %zu, makes %zu classes, but the data hold only %zu distinct labels: "
                 "the model gets %zu outputs (--classes N states the count; a label >= N is then refused)", implied - 1,
                 implied, distinct, implied);
    return TT_OK;
}

tt_status tt_dataset_load(const char *spec, tt_dataset *train, tt_dataset *test, tt_error *err)
{
    if (strncmp(spec, "cifar10:", 8) == 0) return tt_dataset_load_cifar10(spec + 8, train, test, err);
    if (strncmp(spec, "npy:", 4) == 0) return tt_dataset_load_npy(spec + 4, train, test, err);
    return tt_dataset_load_dir(spec, train, test, err);
}

int tt_dataset_token_max(const tt_dataset *ds, double *max)
{
    *max = 0;
    const size_t n = ds->n * ds->dim;
    if (ds->xtype == TT_X_U8) {
        uint8_t m = 0;
        for (size_t i = 0; i < n; i++) m = ds->x[i] > m ? ds->x[i] : m;
        *max = m;
        return 0;
    }
    const float *x = (const float *)(const void *)ds->x;
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(x[i] >= 0.0f) || x[i] >= TT_TOKEN_LIMIT || x[i] != floorf(x[i])) {
            *max = x[i];
            return -1;
        }
        m = x[i] > m ? x[i] : m;
    }
    *max = m;
    return 0;
}
