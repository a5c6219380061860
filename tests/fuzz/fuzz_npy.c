/* fuzz_npy.c — libFuzzer target for the .npy reader and the CIFAR-10 reader (src/data/npy.c, src/data/cifar10.c)
 * over the input layer: every input is given, from memory, to the .npy sample reader (x), the .npy label reader (y)
 * and the CIFAR-10 batch reader, so it reaches the preamble, the header dict parser, the dtype and shape checks, the
 * size checks and the conversions of each. Accepted data are read to the last byte (so the sanitizers see any short
 * buffer) and checked for what the readers promise; refusals must name the input in one line.
 * Not for: the data set layer (file names, train/test agreement, n_classes), tested in tests/test_formats.c. */
#include <math.h>

#include "tt_data.h"
#include "tt_fuzz.h"

static volatile double g_sink; /* keeps the read of every accepted element */

static void fuzz_x(const uint8_t *data, size_t size)
{
    tt_dataset ds;
    tt_error err = {{0}};
    tt_status s = tt_npy_read_x_mem(data, size, "fuzz-x", &ds, &err);
    if (s != TT_OK) {
        TT_ASSERT(ds.x == NULL && ds.n == 0);
        tt_fuzz_check_refusal(s, &err, "fuzz-x");
        return;
    }
    TT_ASSERT(ds.x && ds.y == NULL && ds.n >= 1 && ds.n <= TT_IDX_MAX_ITEMS);
    TT_ASSERT(ds.shape.ndim == 1 || ds.shape.ndim == 3);
    TT_ASSERT(ds.dim >= 1 && ds.dim == tt_shape_elems(&ds.shape));
    double sum = 0;
    if (ds.xtype == TT_X_U8) {
        TT_ASSERT(ds.scale == 1.0f / 255.0f);
        for (size_t i = 0; i < ds.n * ds.dim; i++) sum += ds.x[i];
    } else {
        TT_ASSERT(ds.xtype == TT_X_F32 && ds.scale == 1.0f);
        const float *x = (const float *)(const void *)ds.x;
        for (size_t i = 0; i < ds.n * ds.dim; i++) {
            TT_ASSERT(isfinite(x[i])); /* float data are refused when not finite; integers are below 2^24 */
            sum += x[i];
        }
    }
    g_sink = sum;
    tt_dataset_free(&ds);
}

static void fuzz_y(const uint8_t *data, size_t size)
{
    size_t n = 0, max = 0;
    int32_t *labels = NULL;
    tt_error err = {{0}};
    tt_status s = tt_npy_read_y_mem(data, size, "fuzz-y", &n, &labels, &max, &err);
    if (s != TT_OK) {
        TT_ASSERT(labels == NULL);
        tt_fuzz_check_refusal(s, &err, "fuzz-y");
        return;
    }
    TT_ASSERT(labels && n >= 1 && n <= TT_IDX_MAX_ITEMS && max < TT_NPY_MAX_CLASSES);
    size_t seen = 0;
    for (size_t i = 0; i < n; i++) {
        TT_ASSERT(labels[i] >= 0 && (size_t)labels[i] <= max);
        seen = (size_t)labels[i] > seen ? (size_t)labels[i] : seen;
    }
    TT_ASSERT(seen == max);
    tt_free(labels);
}

static void fuzz_cifar(const uint8_t *data, size_t size)
{
    tt_dataset ds;
    tt_error err = {{0}};
    tt_status s = tt_cifar10_read_mem(data, size, "fuzz-cifar", &ds, &err);
    if (s != TT_OK) {
        TT_ASSERT(ds.x == NULL && ds.y == NULL);
        tt_fuzz_check_refusal(s, &err, "fuzz-cifar");
        return;
    }
    TT_ASSERT(ds.n * TT_CIFAR10_RECORD == size && ds.dim == 3072 && ds.n_classes == 10);
    unsigned sum = 0;
    for (size_t i = 0; i < ds.n; i++) {
        TT_ASSERT(ds.y[i] >= 0 && ds.y[i] < 10);
        for (size_t j = 0; j < 3072; j++) sum += ds.x[i * 3072 + j];
    }
    g_sink = sum;
    tt_dataset_free(&ds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_x(data, size);
    fuzz_y(data, size);
    fuzz_cifar(data, size);
    return 0;
}
