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
#if defined(TT_WITH_CUDA) && defined(TT_CUDA_SIM)
    return "auto,cpu,cuda (CPU stand-in)";
#elif defined(TT_WITH_CUDA)
    return "auto,cpu,cuda";
#else
    return "auto,cpu";
#endif
}

static void open_cpu(tt_backend *b)
{
    b->ops = &tt_dev_cpu_ops;
    b->n_devices = 1;
    b->devices[0] = 0;
}

/* "0,2,3" into b->devices: each ordinal once. The list is checked before any device is asked for, so a bad list is
 * an error on every machine; the ordinals are checked against the devices afterwards. */
static tt_status parse_gpus(const char *gpus, tt_backend *b, tt_error *err)
{
    b->n_devices = 0;
    for (const char *p = gpus;;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len > 3 || strspn(p, "0123456789") < len)
            return tt_fail(err, TT_ERR_ARG, "--gpus: '%.64s' is not a list of GPU numbers like 0,1", gpus);
        int g = 0;
        for (size_t i = 0; i < len; i++) g = 10 * g + (p[i] - '0');
        for (int i = 0; i < b->n_devices; i++)
            if (b->devices[i] == g)
                return tt_fail(err, TT_ERR_ARG,
                               "--gpus: GPU %d is listed twice (more towers than GPUs share them round-robin)", g);
        if (b->n_devices == TT_MAX_DEVICES)
            return tt_fail(err, TT_ERR_ARG, "--gpus: at most %d GPUs", TT_MAX_DEVICES);
        b->devices[b->n_devices++] = g;
        p += len;
        if (!*p) return TT_OK;
        p++; /* the comma */
    }
}

tt_status tt_backend_open(const char *name, const char *gpus, tt_backend *b, tt_error *err)
{
    memset(b, 0, sizeof *b);
    const int is_auto = strcmp(name, "auto") == 0, is_cuda = strcmp(name, "cuda") == 0;
    if (strcmp(name, "cpu") == 0) {
        if (gpus) return tt_fail(err, TT_ERR_ARG, "--gpus: applies to --device cuda or auto, not cpu");
        open_cpu(b);
        return TT_OK;
    }
    if (!is_auto && !is_cuda)
        return tt_fail(err, TT_ERR_ARG, "--device: unknown backend '%.64s' (this build has: %s)", name,
                       tt_backend_list());
    tt_status s = gpus ? parse_gpus(gpus, b, err) : TT_OK;
    if (s) return s;
#ifdef TT_WITH_CUDA
    tt_error cerr = {{0}};
    int n = tt_cuda_device_count(&cerr);
    if (n > 0) {
        b->ops = &tt_dev_cuda_ops;
        for (int i = 0; gpus && i < b->n_devices; i++)
            if (b->devices[i] >= n)
                return tt_fail(err, TT_ERR_DEVICE, "--gpus: GPU %d does not exist (the driver sees %d: 0 to %d)",
                               b->devices[i], n, n - 1);
        if (gpus) return TT_OK;
        b->n_devices = n < TT_MAX_DEVICES ? n : TT_MAX_DEVICES;
        for (int i = 0; i < b->n_devices; i++) b->devices[i] = i;
        return TT_OK;
    }
    if (is_cuda) return tt_fail(err, TT_ERR_DEVICE, "--device cuda: %s", cerr.msg);
    memset(b->devices, 0, sizeof b->devices);
    open_cpu(b);
    snprintf(b->notice, sizeof b->notice, "--device auto: %.300s; training on the CPU backend%s", cerr.msg,
             gpus ? " (--gpus is ignored)" : "");
    return TT_OK;
#else
    if (is_cuda)
        return tt_fail(err, TT_ERR_DEVICE, "--device cuda: this build has no CUDA backend (rebuild with -DTT_CUDA=ON)");
    if (gpus) return tt_fail(err, TT_ERR_DEVICE, "--gpus: this build has no CUDA backend (rebuild with -DTT_CUDA=ON)");
    open_cpu(b); /* a CPU-only build: auto is the CPU, and there is nothing to explain */
    return TT_OK;
#endif
}

tt_status tt_backend_links(const tt_dev_ops *ops, const int *ords, int n, int *link, tt_error *err)
{
    if (ops->peer_setup) return ops->peer_setup(ords, n, link, err);
    for (int i = 0; i < n * n; i++) link[i] = TT_LINK_SAME;
    return TT_OK;
}

void tt_backend_print_links(FILE *f, const char *indent, const tt_dev_ops *ops, const int *ords, int n,
                            const int *link)
{
    if (!ops->peer_setup) {
        fprintf(f, "%speer matrix: %s backend, one memory (copies between towers are memcpy)\n", indent, ops->name);
        return;
    }
    fprintf(f, "%speer matrix (row: into, column: from; P direct peer access, S staged through host memory):\n%s     ",
            indent, indent);
    for (int j = 0; j < n; j++) fprintf(f, " %4d", ords[j]);
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s GPU%-2d", indent, ords[i]);
        for (int j = 0; j < n; j++) {
            int l = link[i * n + j];
            fprintf(f, " %4s", l == TT_LINK_SAME ? "-" : l == TT_LINK_PEER ? "P" : "S");
        }
        fputc('\n', f);
    }
}
