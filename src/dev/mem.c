/* mem.c — the run's memory budget (see tt_mem.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_mem.h"

void tt_mem_add(tt_mem_plan *p, const char *name, int device, double bytes, tt_mem_driver driver)
{
    for (int i = 0; i < p->n; i++)
        if (p->part[i].device == device && strcmp(p->part[i].name, name) == 0) {
            p->part[i].bytes += bytes;
            return;
        }
    TT_ASSERT(p->n < TT_MEM_MAX_PARTS);
    p->part[p->n].name = name;
    p->part[p->n].device = device;
    p->part[p->n].bytes = bytes;
    p->part[p->n].driver = driver;
    p->n++;
}

double tt_mem_total(const tt_mem_plan *p, int device)
{
    double t = 0;
    for (int i = 0; i < p->n; i++)
        if (p->part[i].device == device) t += p->part[i].bytes;
    return t;
}

/* The number after `key` in a /proc/meminfo-style file, in bytes ("kB" lines), or -1. */
static double meminfo_value(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0) {
            v = 1024.0 * strtod(line + klen, NULL);
            break;
        }
    fclose(f);
    return v;
}

/* A one-number file (cgroup v2): its value, or -1 ("max", missing, unreadable). */
static double number_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = {0};
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok || buf[0] < '0' || buf[0] > '9') return -1;
    return strtod(buf, NULL);
}

double tt_mem_host_available(const char **source)
{
    double avail = meminfo_value("/proc/meminfo", "MemAvailable:");
    const char *src = "MemAvailable";
    double limit = number_file("/sys/fs/cgroup/memory.max"), used = number_file("/sys/fs/cgroup/memory.current");
    if (limit >= 0 && used >= 0 && (avail < 0 || limit - used < avail)) {
        avail = limit > used ? limit - used : 0;
        src = "the cgroup's memory.max";
    }
    const char *cap = getenv("TT_MEM_LIMIT"); /* "as if only this many bytes were free": tests, experiments */
    if (cap && *cap) {
        char *end;
        double v = strtod(cap, &end);
        if (*end == '\0' && v >= 0 && (avail < 0 || v < avail)) {
            avail = v;
            src = "TT_MEM_LIMIT";
        }
    }
    if (source) *source = src;
    return avail;
}

void tt_mem_human(double bytes, char *out, size_t len)
{
    if (bytes >= 1e12) snprintf(out, len, "%.1f TB", bytes / 1e12);
    else if (bytes >= 1e9) snprintf(out, len, "%.1f GB", bytes / 1e9);
    else snprintf(out, len, "%.1f MB", bytes / 1e6);
}

/* What drives the largest part, for the message. */
static void cause(const tt_mem_plan *p, const tt_mem_part *big, char *out, size_t len)
{
    const char *model = p->model ? p->model : "the built-in model";
    switch (big->driver) {
    case TT_MEM_BY_PARAMS:
        snprintf(out, len, "%s%s has %zu parameters", p->model ? "model file " : "", model, p->n_params);
        break;
    case TT_MEM_BY_WIDTH:
        snprintf(out, len, "%zu tower%s x %zu rows through the layers of %s%s; lower --batch", p->towers,
                 p->towers == 1 ? "" : "s", p->rows, p->model ? "model file " : "", model);
        break;
    case TT_MEM_BY_RUN: snprintf(out, len, "grows with the samples and steps of the run"); break;
    case TT_MEM_BY_DATA:
        snprintf(out, len, "%zu training samples of %zu bytes and their labels, uploaded once to each device by "
                 "--data-on device; give --data-on host", p->samples, p->sample_bytes);
        break;
    }
}

static tt_status over_budget(const tt_mem_plan *p, int device, double need, double avail, const char *src,
                             tt_error *err)
{
    const tt_mem_part *big = NULL, *data = NULL;
    for (int i = 0; i < p->n; i++)
        if (p->part[i].device == device) {
            if (!big || p->part[i].bytes > big->bytes) big = &p->part[i];
            if (p->part[i].driver == TT_MEM_BY_DATA) data = &p->part[i];
        }
    char n[32], a[32], b[32], d[32], why[240], also[160] = "";
    tt_mem_human(need, n, sizeof n);
    tt_mem_human(avail, a, sizeof a);
    tt_mem_human(big->bytes, b, sizeof b);
    cause(p, big, why, sizeof why);
    if (data && data != big) { /* the training set there is what --data-on device added: say so even when smaller */
        tt_mem_human(data->bytes, d, sizeof d);
        snprintf(also, sizeof also, "; with %s %s there (--data-on device; give --data-on host)", data->name, d);
    }
    char place[32] = "host";
    if (device != TT_MEM_HOST) snprintf(place, sizeof place, "device %d", device);
    return tt_fail(err, TT_ERR_NOMEM,
                   "the run needs %s of %s memory but %s is available (%s); largest part: %s %s (%s)%s", n, place, a,
                   src, big->name, b, why, also);
}

tt_status tt_mem_check(const tt_mem_plan *p, const tt_dev_ops *ops, tt_error *err)
{
    /* a backend without mem_info keeps its device memory in host RAM */
    tt_mem_plan host = *p;
    if (!ops->mem_info)
        for (int i = 0; i < host.n; i++) host.part[i].device = TT_MEM_HOST;
    const char *src;
    double avail = tt_mem_host_available(&src), need = tt_mem_total(&host, TT_MEM_HOST);
    if (avail >= 0 && need > avail) {
        /* merge the host's parts of the same name so "activations" of every tower count as one part */
        tt_mem_plan merged = *p;
        merged.n = 0;
        for (int i = 0; i < host.n; i++)
            if (host.part[i].device == TT_MEM_HOST)
                tt_mem_add(&merged, host.part[i].name, TT_MEM_HOST, host.part[i].bytes, host.part[i].driver);
        return over_budget(&merged, TT_MEM_HOST, need, avail, src, err);
    }
    if (!ops->mem_info) return TT_OK;
    for (int i = 0; i < p->n; i++) {
        int d = p->part[i].device, seen = 0;
        for (int j = 0; j < i; j++) seen |= p->part[j].device == d;
        if (d == TT_MEM_HOST || seen) continue;
        size_t free_b = 0, total_b = 0;
        if (ops->mem_info(d, &free_b, &total_b) != TT_OK) continue;
        need = tt_mem_total(p, d);
        if (need > (double)free_b) return over_budget(p, d, need, (double)free_b, "free device memory", err);
    }
    return TT_OK;
}
