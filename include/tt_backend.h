/* tt_backend.h — the backend registry: which device backends this build has, which devices the towers use, and
 * how copies between them travel. The only place (with CMake and tt_math.h) that knows whether CUDA was compiled in.
 * Not for: anything a tower does (tt_dev.h). */
#ifndef TT_BACKEND_H
#define TT_BACKEND_H

#include <stdio.h>

#include "tt_dev.h"

#ifdef __cplusplus
extern "C" {
#endif


typedef struct tt_backend {
    const tt_dev_ops *ops;
    int n_devices;               /* devices the towers use: tower t runs on devices[t % n_devices] */
    int devices[TT_MAX_DEVICES]; /* ordinals: --gpus LIST, else every device the backend sees (CPU: {0}) */
    char notice[384];            /* --device auto fell back to the CPU backend: why; "" otherwise */
} tt_backend;

/* Opens backend `name` — "cpu", "cuda", or "auto" (CUDA when this build has it and a usable GPU exists, else the
 * CPU backend with b->notice saying why) — on the devices listed in `gpus` ("0,2"; NULL: all; cuda only).
 * TT_ERR_ARG for an unknown name or a bad list, TT_ERR_DEVICE when the backend is not built in or has no device. */
tt_status tt_backend_open(const char *name, const char *gpus, tt_backend *b, tt_error *err);

/* Comma-separated names of the backends compiled into this build, for --help and --version. */
const char *tt_backend_list(void);

/* The peer matrix of the n devices ords[0..n): enables peer access where the hardware allows (tt_dev_ops.peer_setup)
 * and fills link[i * n + j] (TT_LINK_*) for a copy from ords[j] into ords[i]. A backend without peer_setup (CPU)
 * has one memory: every entry TT_LINK_SAME. */
tt_status tt_backend_links(const tt_dev_ops *ops, const int *ords, int n, int *link, tt_error *err);

/* "peer matrix: cpu (one memory)" or, per device, "  GPU0  -  P  S" lines (P peer, S staged through the host). */
void tt_backend_print_links(FILE *f, const char *indent, const tt_dev_ops *ops, const int *ords, int n,
                            const int *link);

#ifdef __cplusplus
}
#endif
#endif
