/* fuzz_idx.c — libFuzzer target for the IDX reader and the input layer under it (src/data/idx.c, src/data/input.c):
 * every input is given, from memory, to both the image reader and the label reader (10 classes), so plain and
 * gzip files of either kind reach the header checks, the size checks, the growing gzip buffer and the end checks.
 * Accepted data are read to the last byte (so the sanitizers see any short buffer) and checked for what the
 * readers promise; refusals must name the input.
 * Not for: the data set layer (paths, pairing images with labels), which is tested in tests/test_idx.c. */
#include "tt_data.h"
#include "tt_fuzz.h"

static volatile unsigned g_sink; /* keeps the read of every accepted byte */

static void fuzz_images(const uint8_t *data, size_t size)
{
    size_t n = 0, rows = 0, cols = 0;
    uint8_t *px = NULL;
    tt_error err = {{0}};
    tt_status s = tt_idx_read_images_mem(data, size, "fuzz-images", &n, &rows, &cols, &px, &err);
    if (s != TT_OK) {
        TT_ASSERT(px == NULL);
        tt_fuzz_check_refusal(s, &err, "fuzz-images");
        return;
    }
    TT_ASSERT(px && n >= 1 && n <= TT_IDX_MAX_ITEMS && rows >= 1 && rows <= TT_IDX_MAX_SIDE && cols >= 1 &&
              cols <= TT_IDX_MAX_SIDE);
    unsigned sum = 0;
    for (size_t i = 0; i < n * rows * cols; i++) sum += px[i];
    g_sink = sum;
    tt_free(px);
}

static void fuzz_labels(const uint8_t *data, size_t size)
{
    size_t n = 0;
    uint8_t *labels = NULL;
    tt_error err = {{0}};
    tt_status s = tt_idx_read_labels_mem(data, size, "fuzz-labels", 10, &n, &labels, &err);
    if (s != TT_OK) {
        TT_ASSERT(labels == NULL);
        tt_fuzz_check_refusal(s, &err, "fuzz-labels");
        return;
    }
    TT_ASSERT(labels && n >= 1 && n <= TT_IDX_MAX_ITEMS);
    for (size_t i = 0; i < n; i++) TT_ASSERT(labels[i] < 10);
    tt_free(labels);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_images(data, size);
    fuzz_labels(data, size);
    return 0;
}
