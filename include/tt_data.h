/* tt_data.h — MNIST-format (IDX) data sets.
 *
 * The IDX reader accepts gzip-compressed and plain files (read through tt_input.h) and treats every file as
 * hostile: magic, dimensions and sizes are checked before anything is allocated, every read is checked, a gzip
 * member cut short or corrupt is an error, and trailing bytes (after the data or after the last gzip member) are
 * an error. A data set keeps the raw unsigned-byte pixels (4x less memory and 4x fewer bytes to copy to a
 * device than floats) plus int32 labels; towers scale pixels to [0,1] on their device (tt_dev_u8_to_f32).
 * Not for: shuffling or batching (the trainer does that with an index permutation). */
#ifndef TT_DATA_H
#define TT_DATA_H

#include "tt_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TT_IDX_MAX_ITEMS 100000000u /* refuse headers claiming more items than this */
#define TT_IDX_MAX_SIDE 4096u

typedef struct tt_dataset {
    size_t n;         /* samples */
    size_t dim;       /* features per sample (rows * cols) */
    size_t rows, cols;
    size_t n_classes; /* labels are in [0, n_classes) */
    uint8_t *x;       /* (n, dim) raw pixels; the model sees x * scale */
    float scale;      /* 1/255: pixels to [0,1] */
    int32_t *y;       /* (n) */
} tt_dataset;

/* Reads an IDX3 unsigned-byte image file: *n images of rows x cols, pixels (n*rows*cols bytes, tt_malloc'd). */
tt_status tt_idx_read_images(const char *path, size_t *n, size_t *rows, size_t *cols, uint8_t **pixels,
                             tt_error *err);

/* Reads an IDX1 unsigned-byte label file; every label must be < n_classes. */
tt_status tt_idx_read_labels(const char *path, size_t n_classes, size_t *n, uint8_t **labels, tt_error *err);

/* The same two readers over a file's bytes in memory (data[0..len), gzip or plain; name is used in messages):
 * how the fuzzers reach the reader. */
tt_status tt_idx_read_images_mem(const void *data, size_t len, const char *name, size_t *n, size_t *rows,
                                 size_t *cols, uint8_t **pixels, tt_error *err);
tt_status tt_idx_read_labels_mem(const void *data, size_t len, const char *name, size_t n_classes, size_t *n,
                                 uint8_t **labels, tt_error *err);

/* Reads an image file and a label file into a data set (counts must match). */
tt_status tt_dataset_load_idx(tt_dataset *ds, const char *images_path, const char *labels_path, size_t n_classes,
                              tt_error *err);

/* Train and test sets of an MNIST-format directory: `dir` is a directory, or "fashion-mnist" for Debian's
 * dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist). File names may be the canonical
 * `train-images-idx3-ubyte[.gz]` or the `train-images.idx3-ubyte` variant. */
tt_status tt_dataset_load_dir(const char *dir, tt_dataset *train, tt_dataset *test, tt_error *err);

/* Splits the last n_val samples of src off into val (copies); src keeps the first n - n_val. */
tt_status tt_dataset_split_tail(tt_dataset *src, size_t n_val, tt_dataset *val, tt_error *err);

/* Keeps only the first n samples (n <= ds->n). */
void tt_dataset_truncate(tt_dataset *ds, size_t n);

void tt_dataset_free(tt_dataset *ds);

#define TT_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

#ifdef __cplusplus
}
#endif
#endif
