/* tt_tensorboard.h — TensorBoard event files of scalars, laid out as Keras's TensorBoard callback lays them out.
 *
 * DIR/train/ and DIR/validation/ each get one file events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2: TFRecord
 * framing (a little-endian uint64 length, its masked CRC-32C, the bytes, their masked CRC-32C) around Event protocol
 * buffers (proto/tensorboard.proto, packed by protobuf-c): first file_version "brain.Event:2", then one scalar per
 * event as TF2 writes it — a 0-d DT_FLOAT tensor with the "scalars" plugin's metadata — so TensorBoard shows the tags
 * beside a Keras run's (epoch_loss, epoch_accuracy, ...). Each file is a tt_out: records are built in memory and
 * written whole at tt_tb_commit, so a signal or a crash never leaves half a record, and the first failed write is
 * reported there, naming the file. Not for: images, histograms, graphs, or reading event files back. */
#ifndef TT_TENSORBOARD_H
#define TT_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

#include "tt_out.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The two runs a Keras training writes, as subdirectories of the log directory. */
typedef enum { TT_TB_TRAIN, TT_TB_VALIDATION, TT_TB_RUNS } tt_tb_run;
extern const char *const tt_tb_run_names[TT_TB_RUNS]; /* "train", "validation" */

typedef struct tt_tb {
    tt_out f[TT_TB_RUNS]; /* zeroed: closed */
} tt_tb;

/* Opens DIR/train and DIR/validation (created if missing; DIR itself must exist: tt_out_dir_ready) and a new event
 * file in each, named for the wall time, this host and pid, and n (the first free one: two opens in one second
 * never share a file); writes each file's file_version record. what names DIR in messages ("--tensorboard DIR"). */
tt_status tt_tb_open(tt_tb *tb, const char *dir, const char *what, tt_error *err);

/* Appends one scalar event (tag, step, wall-clock seconds since the Unix epoch) to the run's pending records. */
void tt_tb_scalar(tt_tb *tb, tt_tb_run run, const char *tag, int64_t step, double wall_time, double value);

/* Writes every pending record, each file in one write. */
tt_status tt_tb_commit(tt_tb *tb, tt_error *err);

/* Commits and closes both files (a zeroed or closed tt_tb is fine); the first error wins. */
tt_status tt_tb_close(tt_tb *tb, tt_error *err);

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord frames use it: crc = 0 to start. */
uint32_t tt_crc32c(uint32_t crc, const void *p, size_t n);

#ifdef __cplusplus
}
#endif
#endif
