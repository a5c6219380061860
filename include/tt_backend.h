/* tt_backend.h — the backend registry: which device backends this build has and how many devices each sees.
 * The only place (with CMake and tt_math.h) that knows whether CUDA was compiled in. */
#ifndef TT_BACKEND_H
#define TT_BACKEND_H

#include "tt_dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Looks a backend up by name ("cpu", "cuda"). Returns TT_ERR_ARG for an unknown name, TT_ERR_DEVICE when the
 * backend is known but not built in or has no device; *n_devices is the number of devices it can use (the CPU
 * backend reports 1: every tower shares the host's cores). */
tt_status tt_backend_find(const char *name, const tt_dev_ops **ops, int *n_devices, tt_error *err);

/* Comma-separated names of the backends compiled into this build, for --help and --version. */
const char *tt_backend_list(void);

#ifdef __cplusplus
}
#endif
#endif
