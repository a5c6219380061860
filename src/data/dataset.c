/* data/dataset.c — the data set itself, below every reader: its sizes, freeing it, finding the files of a reader's
 * directory (cifar10:, npy:), the train / validation split (the last n_val training samples, as the Keras seed does
 * with validation_split), the class count and the token-id check.
 * Not for: reading any format (idx.c, cifar10.c, npy.c) or choosing one (load.c, the --data dispatch above them). */
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
