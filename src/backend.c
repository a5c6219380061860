/* backend.c — the backend registry. The only C file that asks whether CUDA was compiled in. */
#include "tt_backend.h"

#include <string.h>

#ifdef TT_WITH_CUDA
/* cuda/dev_cuda.cu */
extern const tt_dev_ops tt_dev_cuda_ops;
int tt_cuda_device_count(tt_error *err);
#endif

const char *tt_backend_list(void)
{
#ifdef TT_WITH_CUDA
    return "cpu,cuda";
#else
    return "cpu";
#endif
}

tt_status tt_backend_find(const char *name, const tt_dev_ops **ops, int *n_devices, tt_error *err)
{
    if (strcmp(name, "cpu") == 0) {
        *ops = &tt_dev_cpu_ops;
        *n_devices = 1;
        return TT_OK;
    }
    if (strcmp(name, "cuda") == 0) {
#ifdef TT_WITH_CUDA
        int n = tt_cuda_device_count(err);
        if (n <= 0) return TT_ERR_DEVICE;
        *ops = &tt_dev_cuda_ops;
        *n_devices = n;
        return TT_OK;
#else
        return tt_fail(err, TT_ERR_DEVICE, "--device cuda: this build has no CUDA backend (rebuild with -DTT_CUDA=ON)");
#endif
    }
    return tt_fail(err, TT_ERR_ARG, "--device: unknown backend '%s' (this build has: %s)", name, tt_backend_list());
}
