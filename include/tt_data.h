/* tt_data.h — data sets: MNIST-format IDX files, the CIFAR-10 binary format and NumPy .npy files.
 *
 * Every reader treats its files as hostile (through tt_input.h): magic, dimensions and sizes are checked before
 * anything is allocated, every read is checked, a gzip member cut short or corrupt is an error, and trailing bytes
 * (after the data or after the last gzip member) are an error. A data set keeps its samples as stored when they are
 * unsigned bytes (4x less memory and 4x fewer bytes to copy to a device than floats; towers scale them on their
 * device, tt_dev_u8_to_f32) and as float32 otherwise (float32 files as they are; int32/int64 files — token ids —
 * converted exactly, which needs |v| < 2^24), plus int32 labels in [0, n_classes).
 * Not for: shuffling or batching (the trainer does that with an index permutation). */
#ifndef TT_DATA_H
#define TT_DATA_H

#include "tt_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TT_IDX_MAX_ITEMS 100000000u /* refuse headers claiming more items than this */
#define TT_IDX_MAX_SIDE 4096u

/* How a data set stores its samples. */
typedef enum {
    TT_X_U8 = 0, /* unsigned bytes (pixels): the model sees x * scale */
    TT_X_F32     /* float32, as the model sees them (float data; integer token ids converted exactly) */
} tt_xtype;

typedef struct tt_dataset {
    size_t n;         /* samples */
    size_t dim;       /* features per sample: the product of shape */
    tt_shape shape;   /* one sample: (H, W, C) images, (L) token sequences, (D) vectors */
    tt_xtype xtype;   /* element type of x */
    size_t n_classes; /* labels are in [0, n_classes) */
    uint8_t *x;       /* (n, dim) elements of xtype (tt_dataset_xbytes bytes each) */
    float scale;      /* TT_X_U8: bytes to model inputs (1/255: pixels to [0,1]); TT_X_F32: 1 */
    int32_t *y;       /* (n) */
} tt_dataset;

/* Bytes of one element of x (1 or 4), and of one sample. */
size_t tt_dataset_xbytes(const tt_dataset *ds);
size_t tt_dataset_sample_bytes(const tt_dataset *ds);

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
 * `train-images-idx3-ubyte[.gz]` or the `train-images.idx3-ubyte` variant. Samples are (rows, cols, 1) images. */
tt_status tt_dataset_load_dir(const char *dir, tt_dataset *train, tt_dataset *test, tt_error *err);

/* CIFAR-10 binary version (https://www.cs.toronto.edu/~kriz/cifar.html): DIR/data_batch_1.bin .. data_batch_5.bin
 * (train, in that order) and DIR/test_batch.bin; records of 1 label byte (0..9) + 3072 bytes (1024 red, 1024 green,
 * 1024 blue, row-major 32x32), stored as (32, 32, 3) channels-last byte images. */
tt_status tt_dataset_load_cifar10(const char *dir, tt_dataset *train, tt_dataset *test, tt_error *err);

/* NumPy .npy (format 1.0/2.0/3.0, C order): DIR/x_train.npy y_train.npy x_test.npy y_test.npy. x: uint8, float32,
 * int32 or int64, shape (n, ...) — one sample is the rest of the shape ((n, L) token sequences, (n, H, W) images
 * as (H, W, 1), (n, H, W, C)); y: uint8, int32 or int64 of shape (n) or (n, 1), labels >= 0; n_classes = the
 * largest label + 1 over train and test. */
tt_status tt_dataset_load_npy(const char *dir, tt_dataset *train, tt_dataset *test, tt_error *err);

#define TT_CIFAR10_RECORD 3073u             /* bytes of one CIFAR-10 record: 1 label + 32 x 32 x 3 pixels */
#define TT_NPY_MAX_HEADER ((size_t)1 << 20) /* refuse .npy headers longer than this (NumPy's own limit is 10,000) */
#define TT_NPY_MAX_CLASSES 1000000u         /* refuse .npy labels from this on: no more classes than this */

/* One CIFAR-10 batch file's bytes in memory (data[0..len); name is used in messages) as a data set of n (32, 32, 3)
 * byte images, n_classes 10: how the fuzzer and the tests reach the reader. */
tt_status tt_cifar10_read_mem(const void *data, size_t len, const char *name, tt_dataset *ds, tt_error *err);

/* One .npy file's bytes in memory read as samples (x): fills ds->n, shape, dim, xtype, scale and x (y NULL,
 * n_classes 0; tt_dataset_free frees it). The fuzzer's and the tests' way in. */
tt_status tt_npy_read_x_mem(const void *data, size_t len, const char *name, tt_dataset *ds, tt_error *err);
/* The same from a file. */
tt_status tt_npy_read_x(const char *path, tt_dataset *ds, tt_error *err);

/* Samples without labels, for `towertrain predict --input FILE`: a .npy file (by its name) as tt_npy_read_x reads
 * it, else an IDX image file (gzip or plain) as (rows, cols, 1) bytes scaled by 1/255 as the IDX data sets are.
 * Labels are all 0 (n_classes 0). In src/data/load.c with the --data dispatch. */
tt_status tt_samples_load(const char *path, tt_dataset *ds, tt_error *err);

/* One .npy file's bytes in memory read as labels (y): *n int32 labels (tt_malloc'd *labels), each in
 * [0, TT_NPY_MAX_CLASSES), and the largest of them in *max_label. */
tt_status tt_npy_read_y_mem(const void *data, size_t len, const char *name, size_t *n, int32_t **labels,
                            size_t *max_label, tt_error *err);

/* For the readers of a directory of fixed file names (cifar10:DIR, npy:DIR): checks that dir is a directory and
 * holds every names[i] (TT_ERR_IO, one line naming the first missing file and all the names the kind needs), and
 * writes names[i]'s path into paths + i * TT_DATA_PATH_MAX. `kind` ("npy") names the --data prefix in messages. */
#define TT_DATA_PATH_MAX 4200
tt_status tt_data_dir_files(const char *kind, const char *dir, const char *const *names, size_t n, char *paths,
                            tt_error *err);

/* The --data argument: "fashion-mnist", an MNIST-format directory, "cifar10:DIR" or "npy:DIR" (src/data/load.c, the
 * dispatch above the readers). */
tt_status tt_dataset_load(const char *spec, tt_dataset *train, tt_dataset *test, tt_error *err);

/* For data sets of token ids: 0 and *max = the largest sample value if every value is an integer in
 * 0 .. TT_TOKEN_LIMIT - 1 (always for TT_X_U8), else -1 (*max is then the first offending value). The limit, 2^24,
 * is float32's last run of exact integers (integer samples must be below it in magnitude to be read exactly), and an
 * embedding's largest vocabulary. */
#define TT_TOKEN_LIMIT 16777216.0f
int tt_dataset_token_max(const tt_dataset *ds, double *max);

/* The class count of a train and test pair. classes > 0 (--classes N) states it: every label must be below it (else
 * TT_ERR_FORMAT naming the split, the sample and the label), and it may exceed the largest label + 1 (classes with no
 * samples). classes == 0 keeps the readers' count; when that (the largest label + 1) is more than 10x the distinct
 * labels seen, *notice gets one line saying so (else it is empty): one stray label of 999,999 in a 10-class set
 * would make a 1,000,000-output model without a word. */
tt_status tt_dataset_classes(tt_dataset *train, tt_dataset *test, size_t classes, char *notice, size_t len,
                             tt_error *err);

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
