/* data/load.c — the --data dispatch and predict's --input: which reader a data set's spec or a samples file goes to.
 * It sits above the readers (idx.c, cifar10.c, npy.c), which never call back into it.
 * Not for: reading any format, or the data set's own operations (src/data/dataset.c). */
#include <string.h>

#include "tt_data.h"

tt_status tt_dataset_load(const char *spec, tt_dataset *train, tt_dataset *test, tt_error *err)
{
    if (strncmp(spec, "cifar10:", 8) == 0) return tt_dataset_load_cifar10(spec + 8, train, test, err);
    if (strncmp(spec, "npy:", 4) == 0) return tt_dataset_load_npy(spec + 4, train, test, err);
    return tt_dataset_load_dir(spec, train, test, err);
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
