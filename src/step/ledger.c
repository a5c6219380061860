/* ledger.c — reading the step ledger: verdicts, console split, JSON step records, Chrome trace events. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "tt_ledger.h"

void tt_ledger_verdict(const tt_step_times *s, char *out, size_t len)
{
    struct {
        const char *kind, *what;
        double v;
    } g[6] = {
        {"compute-bound", "forward+backward", s->compute},
        {"transfer-bound", "pull+data+push", s->pull + s->data + s->push},
        {"reduction-bound", "reduce", s->reduce},
        {"optimizer-bound", "update", s->update},
        {"sync-bound", "launch+wait at the barrier", s->launch + s->wait},
        {"network-bound", "the cross-node combine", s->combine},
    };
    int best = 0;
    for (int i = 1; i < 6; i++)
        if (g[i].v > g[best].v) best = i;
    double total = s->total > 0 ? s->total : 1;
    snprintf(out, len, "%s: %s %.0f%% of the step", g[best].kind, g[best].what, 100 * g[best].v / total);
}

void tt_ledger_split_line(FILE *f, const tt_step_times *s)
{
    double total = s->total > 0 ? s->total : 1;
    char verdict[128], combine[32] = "";
    tt_ledger_verdict(s, verdict, sizeof verdict);
    if (s->combine > 0) snprintf(combine, sizeof combine, " | combine %.0f%%", 100 * s->combine / total);
    fprintf(f,
            "  step split: launch %.0f%% | pull %.0f%% | data %.0f%% | compute %.0f%% | push %.0f%% | wait %.0f%% | "
            "reduce %.0f%%%s | update %.0f%% -> %s\n",
            100 * s->launch / total, 100 * s->pull / total, 100 * s->data / total, 100 * s->compute / total,
            100 * s->push / total, 100 * s->wait / total, 100 * s->reduce / total, combine, 100 * s->update / total,
            verdict);
    const double host = s->host_hidden + s->host_exposed;
    if (host > 0) /* --overlap on */
        fprintf(f, "  overlap: pushes %.0f%% beside the backward (a GPU's copy engines; none on the CPU) | host sum + "
                "update: %.0f%% of its work done while towers computed (hidden), %.0f%% after (exposed)\n",
                s->push + s->push_hidden > 0 ? 100 * s->push_hidden / (s->push + s->push_hidden) : 0,
                100 * s->host_hidden / host, 100 * s->host_exposed / host);
}

const tt_phase_field tt_split_phases[TT_SPLIT_PHASES] = {
    {"launch", offsetof(tt_step_times, launch)}, {"pull", offsetof(tt_step_times, pull)},
    {"data", offsetof(tt_step_times, data)},     {"compute", offsetof(tt_step_times, compute)},
    {"push", offsetof(tt_step_times, push)},     {"wait", offsetof(tt_step_times, wait)},
    {"reduce", offsetof(tt_step_times, reduce)}, {"combine", offsetof(tt_step_times, combine)},
    {"update", offsetof(tt_step_times, update)}, {"total", offsetof(tt_step_times, total)}};

const tt_phase_field tt_tower_phase_fields[TT_TOWER_PHASES] = {
    {"pull", offsetof(tt_tower_phases, pull)},         {"data", offsetof(tt_tower_phases, data)},
    {"compute", offsetof(tt_tower_phases, compute)},   {"reduce", offsetof(tt_tower_phases, reduce)},
    {"push", offsetof(tt_tower_phases, push)},         {"push_sum", offsetof(tt_tower_phases, push_sum)},
    {"wait", offsetof(tt_tower_phases, wait)},         {"update", offsetof(tt_tower_phases, update)}};

tt_tower_phases tt_tower_phases_of(const tt_tower_ledger *l)
{
    tt_tower_phases p = {l->pull1 - l->pull0,     l->data1 - l->pull1, l->compute1 - l->data1,
                         l->reduce1 - l->reduce0, l->push1 - l->push0, l->rpush1 - l->rpush0,
                         l->wait,                 l->update1 - l->update0};
    return p;
}

void tt_step_times_add(tt_step_times *a, const tt_step_times *b)
{
    a->launch += b->launch;
    a->pull += b->pull;
    a->data += b->data;
    a->compute += b->compute;
    a->push += b->push;
    a->wait += b->wait;
    a->towers += b->towers;
    a->reduce += b->reduce;
    a->combine += b->combine;
    a->update += b->update;
    a->total += b->total;
    a->push_hidden += b->push_hidden;
    a->host_hidden += b->host_hidden;
    a->host_exposed += b->host_exposed;
}

void tt_ledger_json_split(tt_out *f, const tt_step_times *s)
{
    for (int k = 0; k < TT_SPLIT_PHASES - 1; k++) /* total last, after the sums below */
        tt_out_json_num(f, tt_split_phases[k].name, tt_phase_value(s, &tt_split_phases[k]), 1);
    tt_out_json_num(f, "reduce_update", s->reduce + s->update, 1);
    if (s->host_hidden + s->host_exposed > 0) { /* --overlap on: push's part during backward; the host's work split */
        tt_out_json_num(f, "push_hidden", s->push_hidden, 1);
        tt_out_json_num(f, "host_hidden", s->host_hidden, 1);
        tt_out_json_num(f, "host_exposed", s->host_exposed, 1);
    }
    tt_out_json_num(f, "total", s->total, 0);
}

tt_status tt_ledger_json_steps(tt_out *f, size_t epoch, const tt_step_result *res, const tt_tower_ledger *led,
                               size_t first, size_t end, size_t N, tt_error *err)
{
    for (size_t k = first; k < end; k++) {
        const tt_step_result *r = &res[k];
        tt_out_printf(f, "{\"event\":\"step\",\"epoch\":%zu,\"step\":%zu,\"samples\":%zu,", epoch, k + 1, r->n);
        tt_out_json_num(f, "learning_rate", r->lr, 1); /* a rate that overflowed to Inf is JSON's null, not "inf" */
        tt_out_json_num(f, "total", r->t.total, 1);
        tt_out_json_num(f, "reduce", r->t.reduce, 1);
        tt_out_json_num(f, "combine", r->t.combine, 1);
        tt_out_json_num(f, "update", r->t.update, 1);
        if (r->applied) { /* --sync ssp, async */
            tt_out_printf(f, "\"applied\":%zu,\"staleness_max\":%u,", r->applied, r->staleness_max);
            tt_out_json_num(f, "staleness_mean", r->staleness_sum / (double)r->applied, 1);
        }
        if (r->averaged) /* --sync weights */
            tt_out_json_num(f, "divergence", r->divergence, 1);
        if (r->grad_elems) /* --precision bf16, fp16 */
            tt_out_printf(f, "\"loss_scale\":%.17g,\"skipped\":%s,\"grad_underflow\":%llu,", r->loss_scale,
                          r->skipped ? "true" : "false", (unsigned long long)r->grad_under);
        if (r->n_buckets) {
            tt_out_json_num(f, "host_hidden", r->t.host_hidden, 1);
            tt_out_json_num(f, "host_exposed", r->t.host_exposed, 1);
            tt_out_printf(f, "\"buckets\":%u,", r->n_buckets);
        }
        tt_out_printf(f, "\"towers\":[");
        for (size_t t = 0; t < N; t++) {
            const tt_tower_ledger *l = &led[k * N + t];
            tt_out_printf(f, "%s{\"tower\":%zu,\"rows\":%zu,", t ? "," : "", l->tower, l->rows);
            if (r->applied) tt_out_printf(f, "\"shard\":%zu,\"staleness\":%u,", t, l->staleness);
            const tt_tower_phases ph = tt_tower_phases_of(l); /* update: --update device, replicated: this tower's */
            for (int p = 0; p < TT_TOWER_PHASES; p++)
                tt_out_json_num(f, tt_tower_phase_fields[p].name, tt_phase_value(&ph, &tt_tower_phase_fields[p]), 1);
            if (l->n_buckets) {
                tt_out_json_num(f, "push_hidden", l->push_hidden, 1);
                tt_out_printf(f, "\"bytes_prepull\":%llu,", (unsigned long long)l->bytes_prepull);
            }
            tt_out_printf(f, "\"bytes_pull\":%llu,\"bytes_data\":%llu,\"bytes_push\":%llu,\"bytes_push_sum\":%llu,"
                          "\"bytes_reduce\":%llu,\"bytes_gather\":%llu}",
                          (unsigned long long)l->bytes_pull, (unsigned long long)l->bytes_data,
                          (unsigned long long)l->bytes_push,
                          (unsigned long long)l->bytes_push_sum, (unsigned long long)l->bytes_reduce,
                          (unsigned long long)l->bytes_gather);
        }
        tt_out_printf(f, "]}\n");
        tt_status s = tt_out_commit(f, err);
        if (s) return s;
    }
    return TT_OK;
}

/* ---- Chrome trace events (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU) ---- */

enum { LANE_HOST_REDUCE = 1000, LANE_OPTIMIZER = 1001, LANE_RUN = 1002, LANE_COMBINE = 1003, LANE_SIDE = 2000,
       LANE_AHEAD = 3000 };

static void lane_name(tt_trace *t, int pid, int tid, const char *name)
{
    tt_out_printf(&t->out, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
            t->first ? "" : ",\n", pid, tid, name);
    t->first = 0;
    tt_out_printf(&t->out, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
            pid, tid, tid);
}

void tt_trace_rank(tt_trace *t, int rank, double offset)
{
    t->pid = rank + 1;
    t->shift = offset;
}

tt_status tt_trace_open(tt_trace *t, const char *path, size_t n_towers, int ranks, const char *backend,
                        const char *reduce, tt_error *err)
{
    memset(t, 0, sizeof *t);
    char what[180];
    snprintf(what, sizeof what, "--trace %s", path);
    tt_status s = tt_out_open(&t->out, path, what, 4096 + 256 * n_towers, err);
    if (s) return s;
    t->origin = tt_now();
    t->first = 1;
    t->n_towers = n_towers;
    t->pid = 1;
    tt_out_printf(&t->out, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"backend\":\"%s\",\"reduce\":\"%s\",\"ranks\":%d},\"traceEvents\":[\n",
            backend, reduce, ranks);
    for (int r = 0; r < ranks; r++) { /* one process per rank */
        tt_out_printf(&t->out, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"towertrain",
                      r ? ",\n" : "", r + 1);
        if (ranks > 1) tt_out_printf(&t->out, " rank %d", r);
        tt_out_printf(&t->out, " (%s, --reduce %s)\"}}", backend, reduce);
        t->first = 0;
        for (size_t i = 0; i < n_towers; i++) {
            char name[32];
            snprintf(name, sizeof name, "tower %zu", i);
            lane_name(t, r + 1, (int)i, name);
        }
        lane_name(t, r + 1, LANE_HOST_REDUCE, "host reducer");
        if (ranks > 1) lane_name(t, r + 1, LANE_COMBINE, "cross-node combine");
        lane_name(t, r + 1, LANE_OPTIMIZER, "optimizer");
        if (r == 0) lane_name(t, 1, LANE_RUN, "run");
    }
    return tt_out_commit(&t->out, err);
}

static void span(tt_trace *t, int tid, const char *name, double t0, double t1, const char *arg, uint64_t bytes)
{
    if (!(t1 > t0)) return;
    tt_out_printf(&t->out, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f", name,
                  t->pid, tid, 1e6 * (t0 + t->shift - t->origin), 1e6 * (t1 - t0));
    if (arg) tt_out_printf(&t->out, ",\"args\":{\"%s\":%llu}", arg, (unsigned long long)bytes);
    tt_out_printf(&t->out, "}");
}

tt_status tt_trace_steps(tt_trace *t, const tt_step_result *res, const tt_tower_ledger *led, size_t first, size_t end,
                         tt_error *err)
{
    const size_t N = t->n_towers;
    for (size_t k = first; k < end; k++) {
        for (size_t i = 0; i < N; i++) {
            const tt_tower_ledger *l = &led[k * N + i];
            int tid = (int)l->tower; /* ssp, async: shard i of the step, on the tower that took it */
            span(t, tid, "pull", l->pull0, l->pull1, "bytes", l->bytes_pull);
            span(t, tid, "data", l->pull1, l->data1, "bytes", l->bytes_data);
            span(t, tid, "forward+backward", l->data1, l->compute1, "rows", l->rows);
            span(t, tid, "reduce", l->reduce0, l->reduce1, "bytes", l->bytes_reduce);
            span(t, tid, "push", l->push0, l->push1, "bytes", l->bytes_push);
            span(t, tid, "push sum", l->rpush0, l->rpush1, "bytes", l->bytes_push_sum);
            span(t, tid, "update", l->update0, l->update1, "bytes gathered", l->bytes_gather);
            if (l->n_buckets && !t->copy_lanes) { /* --overlap on: each tower's side streams get a lane each */
                for (size_t j = 0; j < N; j++) {
                    char lane[40];
                    snprintf(lane, sizeof lane, "tower %zu pushes", j);
                    lane_name(t, t->pid, LANE_SIDE + (int)j, lane);
                    snprintf(lane, sizeof lane, "tower %zu pulls ahead", j);
                    lane_name(t, t->pid, LANE_AHEAD + (int)j, lane);
                }
                t->copy_lanes = 1;
            }
            for (unsigned b = 0; b < l->n_buckets; b++) { /* each bucket from its layers' end to its landing */
                char name[32];
                snprintf(name, sizeof name, "push bucket %u", b);
                span(t, LANE_SIDE + tid, name, l->bucket[b][0], l->bucket[b][1], NULL, 0);
            }
            span(t, LANE_AHEAD + tid, "pull ahead", l->ahead0, l->ahead1, "bytes", l->bytes_prepull);
        }
        const tt_step_result *r = &res[k];
        const tt_step_times *s = &r->t;
        if (r->n_buckets) { /* --overlap on: each bucket's sum + update on the host lane, from where the last ended
                             * (the crew may work on two at once: the lane shows them one after the other) */
            double from = 0;
            for (unsigned b = 0; b < r->n_buckets; b++) {
                char name[40];
                snprintf(name, sizeof name, "sum+update bucket %u", b);
                span(t, LANE_HOST_REDUCE, name, r->bucket[b][0] > from ? r->bucket[b][0] : from, r->bucket[b][1],
                     NULL, 0);
                from = r->bucket[b][1] > from ? r->bucket[b][1] : from;
            }
        } else {
            span(t, LANE_HOST_REDUCE, "sum slots", s->reduce0, s->reduce1, NULL, 0);
            span(t, LANE_OPTIMIZER, "update", s->update0, s->update1, NULL, 0);
        }
        span(t, LANE_COMBINE, "cross-node combine", s->combine0, s->combine1, NULL, 0);
        if (r->grad_elems) { /* --precision bf16, fp16: the loss scale as a counter, and a skipped step's mark */
            tt_out_printf(&t->out, ",\n{\"name\":\"loss scale\",\"ph\":\"C\",\"pid\":%d,\"ts\":%.3f,"
                          "\"args\":{\"scale\":%.17g}}", t->pid, 1e6 * (s->step0 + t->shift - t->origin), r->loss_scale);
            if (r->skipped)
                span(t, LANE_OPTIMIZER, "skipped: the gradient overflowed in 16 bits", s->step0 + s->towers, s->step1,
                     NULL, 0);
        }
        tt_status st = tt_out_commit(&t->out, err); /* a step's events at a time: each ends at an event boundary */
        if (st) return st;
    }
    return TT_OK;
}

void tt_trace_span(tt_trace *t, const char *name, double t0, double t1) { span(t, LANE_RUN, name, t0, t1, NULL, 0); }

tt_status tt_trace_close(tt_trace *t, tt_error *err)
{
    if (!t->out.buf) return TT_OK;
    tt_out_printf(&t->out, "\n]}\n");
    return tt_out_close(&t->out, err);
}
