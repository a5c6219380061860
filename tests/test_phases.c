/* test_phases.c — the step as phases: the placement table, the event-timed ledger, the trainer's phase timing that
 * the probe uses, the placement checks (nccl), and the backend registry (--device, --gpus, the peer matrix).
 *
 * The ledger's phase order is a property of the step, not of the clock: every tower's times must come in step
 * order, and a placement with a reduce phase must record the push of the reduced gradient apart from the tower
 * phase's push of the statistics (issue 7: the second once overwrote the first). */
#include <time.h>

#include "tt_backend.h"
#include "tt_probe.h"
#include "tt_signal.h"
#include "tt_test.h"
#include "tt_trainer.h"

static const char *MODEL = "dense units=16 activation=relu\ndense units=5\n";

typedef struct fixture {
    tt_dataset ds;
    tt_model m;
    float *init;
    uint32_t *idx;
} fixture;

static void fixture_make(fixture *f)
{
    tt_error err;
    tt_test_dataset(&f->ds, 64, 12, 5, 3);
    ck_assert_int_eq(tt_model_parse(&f->m, MODEL, "t", TT_FLAT_INPUT(f->ds.dim, f->ds.n_classes), &err), TT_OK);
    f->init = (float *)tt_malloc(f->m.n_params * sizeof(float));
    f->idx = (uint32_t *)tt_malloc(f->ds.n * sizeof(uint32_t));
    ck_assert(f->init && f->idx);
    tt_model_init_params(&f->m, f->init, 5);
    for (size_t i = 0; i < f->ds.n; i++) f->idx[i] = (uint32_t)(f->ds.n - 1 - i);
}

static void fixture_free(fixture *f)
{
    tt_free(f->init);
    tt_free(f->idx);
    tt_dataset_free(&f->ds);
}

/* The CPU backend's events are clock readings: elapsed is the time between the records, never negative. */
START_TEST(test_cpu_events)
{
    tt_dev dev;
    tt_error err;
    ck_assert_int_eq(tt_dev_init(&dev, &tt_dev_cpu_ops, 0, &err), TT_OK);
    void *a = tt_dev_event_create(&dev), *b = tt_dev_event_create(&dev);
    ck_assert(a && b);
    double t0 = tt_now();
    tt_dev_event_record(&dev, a);
    nanosleep(&(struct timespec){0, 2000000}, NULL);
    tt_dev_event_record(&dev, b);
    double t1 = tt_now();
    double e = tt_dev_event_elapsed(&dev, a, b);
    ck_assert_msg(e >= 1.5e-3 && e <= t1 - t0, "elapsed %g over a 2 ms sleep (clock %g)", e, t1 - t0);
    ck_assert(tt_dev_event_elapsed(&dev, b, a) == -e);
    tt_dev_event_destroy(&dev, a);
    tt_dev_event_destroy(&dev, b);
    tt_dev_free(&dev);
}
END_TEST

/* Every placement's ledger: phases in step order per tower; the pushes counted where they happen. */
START_TEST(test_ledger_order_and_pushes)
{
    fixture f;
    fixture_make(&f);
    const size_t N = 3, B = 16, steps = 4, P = f.m.n_params;
    for (int red = 0; red < TT_REDUCE_NCCL; red++) {
        tt_trainer_config tc = tt_test_config(N, B, tt_optim_defaults(TT_OPT_ADAM), (tt_reduce)red);
        tt_trainer *tr = NULL;
        tt_error err;
        ck_assert_msg(tt_trainer_init(&tr, &f.m, &tc, f.init, &err) == TT_OK, "%s", err.msg);
        tt_step_result res[4];
        tt_tower_ledger led[4 * 3];
        ck_assert_int_eq(tt_trainer_start_steps(tr, &f.ds, f.idx, B * steps, res, steps, led, &err), TT_OK);
        ck_assert_int_eq(tt_trainer_wait(tr, -1, NULL), 1);
        ck_assert_int_eq(tt_trainer_halted(tr), TT_HALT_NONE);
        for (size_t k = 0; k < steps; k++)
            for (size_t t = 0; t < N; t++) {
                const tt_tower_ledger *l = &led[k * N + t];
                const char *name = tt_reduce_name((tt_reduce)red);
                ck_assert_msg(res[k].t.step0 <= l->pull0 && l->pull0 <= l->pull1 && l->pull1 <= l->data1 &&
                                  l->data1 <= l->compute1 && l->compute1 <= l->push0 && l->push0 <= l->push1 &&
                                  l->push1 <= l->reduce0 && l->reduce0 <= l->reduce1 && l->reduce1 <= l->rpush0 &&
                                  l->rpush0 <= l->rpush1 && l->rpush1 <= res[k].t.step1,
                              "%s step %zu tower %zu: phases out of order", name, k, t);
                const uint64_t stats = 2 * l->rows * sizeof(float), grad = P * sizeof(float);
                /* the tower phase's push: the statistics, plus the gradient into the tower's slot (cpu) */
                ck_assert_msg(l->bytes_push == stats + (red == TT_REDUCE_CPU ? grad : 0), "%s tower %zu pushed %llu",
                              name, t, (unsigned long long)l->bytes_push);
                /* the reduced gradient's push: all of it by tower 0 (device), a slice by every tower (allreduce) */
                uint64_t want = red == TT_REDUCE_DEVICE ? (t == 0 ? grad : 0) : 0;
                if (red == TT_REDUCE_ALLREDUCE) { /* slices of 16-float multiples */
                    const size_t S = ((P + N - 1) / N + 15) & ~(size_t)15, lo = t * S < P ? t * S : P;
                    want = (lo + S < P ? S : P - lo) * sizeof(float);
                }
                ck_assert_msg(l->bytes_push_sum == want, "%s tower %zu pushed a sum of %llu, want %llu", name, t,
                              (unsigned long long)l->bytes_push_sum, (unsigned long long)want);
                if (red == TT_REDUCE_CPU) ck_assert(l->rpush1 == l->rpush0 && l->reduce1 == l->reduce0);
                if (red == TT_REDUCE_DEVICE && t == 0) ck_assert(l->bytes_reduce == (N - 1) * grad);
            }
        if (red == TT_REDUCE_ALLREDUCE) { /* the slices pushed add up to the whole gradient */
            uint64_t sum = 0;
            for (size_t t = 0; t < N; t++) sum += led[t].bytes_push_sum;
            ck_assert_uint_eq(sum, P * sizeof(float));
        }
        tt_trainer_free(tr);
    }
    fixture_free(&f);
}
END_TEST

/* The trainer times its own phases: every phase of the placement takes time, the host's split adds up, the
 * weights stay finite, and a stop request ends the measurement. */
START_TEST(test_time_phases)
{
    fixture f;
    fixture_make(&f);
    const size_t N = 2, B = 32;
    for (int red = 0; red < TT_REDUCE_NCCL; red++) {
        tt_trainer_config tc = tt_test_config(N, B, tt_optim_defaults(TT_OPT_ADAM), (tt_reduce)red);
        atomic_int stop = 0;
        tc.stop = &stop;
        tt_trainer *tr = NULL;
        tt_error err;
        ck_assert_msg(tt_trainer_init(&tr, &f.m, &tc, f.init, &err) == TT_OK, "%s", err.msg);
        tt_trainer_request_stop(tr); /* a request left from before the timing is void: the timing runs */
        tt_phase_times pt;
        ck_assert_msg(tt_trainer_time_phases(tr, &f.ds, f.idx, B, 5, &pt, &err) == TT_OK, "%s", err.msg);
        const char *name = tt_reduce_name((tt_reduce)red);
        ck_assert_msg(pt.pull > 0 && pt.data > 0 && pt.compute > 0 && pt.push > 0 && pt.host > 0,
                      "%s: pull %g data %g compute %g push %g host %g", name, pt.pull, pt.data, pt.compute, pt.push,
                      pt.host);
        ck_assert_msg(red == TT_REDUCE_CPU ? pt.reduce == 0 : pt.reduce > 0, "%s: reduce %g", name, pt.reduce);
        ck_assert_msg(pt.straggle >= 0 && pt.host_sum >= 0 && pt.host_update > 0, "%s", name);
        ck_assert(tt_close(pt.host_sum + pt.host_update, pt.host, 1e-12, 1e-9));
        ck_assert_uint_eq(pt.reps, 5);
        ck_assert(tt_all_finite(tt_trainer_params(tr), f.m.n_params));
        double moved = 0; /* the host phase is the step's: the optimizer ran (reps + 1 times) */
        for (size_t i = 0; i < f.m.n_params; i++) moved = fmax(moved, fabs((double)tt_trainer_params(tr)[i] - f.init[i]));
        ck_assert_msg(moved > 1e-4, "%s: the timed host phases moved no weight (max %g)", name, moved);
        /* the next run of steps is unaffected by the timing */
        tt_step_result res;
        ck_assert_int_eq(tt_trainer_step(tr, &f.ds, f.idx, B, &res, &err), TT_OK);
        ck_assert_uint_eq(res.n, B);
        atomic_store(&stop, 1); /* the signal flag: the timing stops at the end of a rep */
        ck_assert_int_eq(tt_trainer_time_phases(tr, &f.ds, f.idx, B, 50, &pt, &err), TT_ERR_STOPPED);
        tt_trainer_free(tr);
    }
    fixture_free(&f);
}
END_TEST

/* ---- a CPU backend whose ops take known times: the ledger and the phase timing must see them ---------------- */

enum { SLOW_COPY_US = 1000, SLOW_SCALE_US = 2000, SLOW_EXTRA_US = 20000 }; /* tower 1's data phase is slower */

static void *slow_ctx[8]; /* tower t's context (device ordinal t): which tower an op runs for */

static void pause_us(long us) { nanosleep(&(struct timespec){us / 1000000, (us % 1000000) * 1000}, NULL); }

static tt_status slow_init(void **ctx, int ordinal, tt_error *err)
{
    tt_status s = tt_dev_cpu_ops.init(ctx, ordinal, err);
    if (!s && ordinal < 8) slow_ctx[ordinal] = *ctx;
    return s;
}

static void slow_h2d(void *ctx, void *d, const void *h, size_t n)
{
    pause_us(SLOW_COPY_US);
    tt_dev_cpu_ops.h2d(ctx, d, h, n);
}

static void slow_d2h(void *ctx, void *h, const void *d, size_t n)
{
    pause_us(SLOW_COPY_US);
    tt_dev_cpu_ops.d2h(ctx, h, d, n);
}

static void slow_peer(void *ctx, void *d, void *src_ctx, const void *s, size_t n)
{
    pause_us(SLOW_COPY_US);
    tt_dev_cpu_ops.peer_copy(ctx, d, src_ctx, s, n);
}

static void slow_u8(void *ctx, float *y, const uint8_t *x, size_t n, float scale)
{
    pause_us(SLOW_SCALE_US + (ctx == slow_ctx[1] ? SLOW_EXTRA_US : 0));
    tt_dev_cpu_ops.u8_to_f32(ctx, y, x, n, scale);
}

static tt_dev_ops slow_ops(void)
{
    tt_dev_ops o = tt_dev_cpu_ops;
    o.name = "slow-cpu";
    o.init = slow_init;
    o.h2d = slow_h2d;
    o.d2h = slow_d2h;
    o.peer_copy = slow_peer;
    o.u8_to_f32 = slow_u8;
    return o;
}

/* The ledger's spans are the phases' own times: a pull is one copy, the data phase two copies and the scaling, a
 * push one (stats) or two copies, the device reduce one peer copy and the push of the sum one copy. */
START_TEST(test_ledger_spans_are_the_phases)
{
    fixture f;
    fixture_make(&f);
    const tt_dev_ops ops = slow_ops();
    const double c = SLOW_COPY_US * 1e-6, u = SLOW_SCALE_US * 1e-6, x = SLOW_EXTRA_US * 1e-6, tol = 0.9;
    for (int red = TT_REDUCE_CPU; red <= TT_REDUCE_DEVICE; red++) {
        tt_trainer_config tc = tt_test_config(2, 16, tt_optim_defaults(TT_OPT_SGD), (tt_reduce)red);
        tc.ops = &ops;
        tc.n_devices = 2; /* tower t runs on "device" t: the slow ops tell the towers apart */
        tt_trainer *tr = NULL;
        tt_error err;
        ck_assert_msg(tt_trainer_init(&tr, &f.m, &tc, f.init, &err) == TT_OK, "%s", err.msg);
        tt_step_result res[2];
        tt_tower_ledger led[2 * 2];
        ck_assert_int_eq(tt_trainer_start_steps(tr, &f.ds, f.idx, 32, res, 2, led, &err), TT_OK);
        tt_trainer_wait(tr, -1, NULL);
        for (size_t k = 0; k < 4; k++) {
            const tt_tower_ledger *l = &led[k];
            const double data = 2 * c + u + (k % 2 ? x : 0);
            ck_assert_msg(l->pull1 - l->pull0 >= tol * c, "pull %g", l->pull1 - l->pull0);
            ck_assert_msg(l->data1 - l->pull1 >= tol * data, "data %g < %g", l->data1 - l->pull1, data);
            ck_assert_msg(l->push1 - l->push0 >= tol * c * (red == TT_REDUCE_CPU ? 2 : 1), "push %g",
                          l->push1 - l->push0);
            if (red == TT_REDUCE_DEVICE && k % 2 == 0) { /* tower 0 */
                ck_assert_msg(l->reduce1 - l->reduce0 >= tol * c, "reduce %g", l->reduce1 - l->reduce0);
                ck_assert_msg(l->rpush1 - l->rpush0 >= tol * c, "push of the sum %g", l->rpush1 - l->rpush0);
            }
        }
        /* each phase timed alone: the mean tower's time; the reduce and host phases: the wall */
        tt_phase_times pt;
        ck_assert_msg(tt_trainer_time_phases(tr, &f.ds, f.idx, 16, 5, &pt, &err) == TT_OK, "%s", err.msg);
        ck_assert_msg(pt.pull >= tol * c && pt.data >= tol * (2 * c + u + x / 2), "pull %g data %g", pt.pull,
                      pt.data);
        /* tower 1's data phase is x longer: the slowest beyond the mean is x / 2. Noise in tower 0's phases (a
         * sanitizer, a busy machine) shrinks it, noise in tower 1's grows it: the bounds tell x / 2 from 0 and from x,
         * with 5 ms of slack either way (a busy machine delays each wake-up by up to a time slice). */
        ck_assert_msg(pt.straggle >= 0.5 * x / 2 && pt.straggle < 0.75 * x, "straggle %g, want ~%g", pt.straggle,
                      x / 2);
        if (red == TT_REDUCE_DEVICE) /* tower 0 alone works: the wall, not the mean over the towers */
            ck_assert_msg(pt.reduce >= tol * 2 * c, "device reduce %g: one peer copy + the push of the sum", pt.reduce);
        tt_trainer_free(tr);
    }
    fixture_free(&f);
}
END_TEST

/* A table that claims collectives, for the placement checks (never initialised). */
static tt_status fake_comm_init(void **comm, void *const *ctxs, int n, tt_error *err)
{
    (void)comm;
    (void)ctxs;
    (void)n;
    return tt_fail(err, TT_ERR_DEVICE, "fake");
}

START_TEST(test_nccl_checks)
{
    tt_error err;
    tt_trainer_config tc = tt_test_config(2, 8, tt_optim_defaults(TT_OPT_SGD), TT_REDUCE_NCCL);
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "nccl") && strstr(err.msg, "cpu backend"), "%s", err.msg);
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    fixture f;
    fixture_make(&f);
    ck_assert_int_eq(tt_trainer_plan(&f.m, &tc, &plan, &err), TT_ERR_ARG);
    tt_trainer *tr = NULL;
    ck_assert_int_eq(tt_trainer_init(&tr, &f.m, &tc, f.init, &err), TT_ERR_ARG);
    tt_trainer_free(tr);
    tt_dev_ops ops = tt_dev_cpu_ops;
    ops.comm_init = fake_comm_init;
    tc.ops = &ops;
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_ERR_ARG); /* 2 towers on 1 device */
    ck_assert_msg(strstr(err.msg, "one GPU per tower"), "%s", err.msg);
    tc.n_devices = 2;
    ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_OK);
    for (int r = 0; r < TT_REDUCE_NCCL; r++) {
        tc = tt_test_config(3, 8, tt_optim_defaults(TT_OPT_SGD), (tt_reduce)r);
        ck_assert_int_eq(tt_trainer_check(&tc, &err), TT_OK);
    }
    tt_reduce r;
    ck_assert(tt_reduce_parse("nccl", &r) == 0 && r == TT_REDUCE_NCCL);
    ck_assert(tt_reduce_parse("NCCL", &r) == -1);
    fixture_free(&f);
}
END_TEST

START_TEST(test_backend_open)
{
    tt_backend b;
    tt_error err;
    ck_assert_int_eq(tt_backend_open("cpu", NULL, &b, &err), TT_OK);
    ck_assert(b.ops == &tt_dev_cpu_ops && b.n_devices == 1 && b.devices[0] == 0 && !b.notice[0]);
    ck_assert_int_eq(tt_backend_open("cpu", "0", &b, &err), TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "--gpus"), "%s", err.msg);
    ck_assert_int_eq(tt_backend_open("gpu", NULL, &b, &err), TT_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "--device") && strstr(err.msg, "gpu"), "%s", err.msg);
    /* auto always opens something: CUDA where a GPU is usable, else the CPU (a CUDA build says why) */
    ck_assert_int_eq(tt_backend_open("auto", NULL, &b, &err), TT_OK);
    ck_assert(b.n_devices >= 1);
    if (b.ops == &tt_dev_cpu_ops && strstr(tt_backend_list(), "cuda"))
        ck_assert_msg(strstr(b.notice, "--device auto") && strstr(b.notice, "CPU backend"), "%s", b.notice);
    if (b.ops != &tt_dev_cpu_ops) { /* a GPU is here: --gpus lists are checked against it */
        ck_assert_int_eq(tt_backend_open("cuda", "0", &b, &err), TT_OK);
        ck_assert(b.n_devices == 1 && b.devices[0] == 0);
        ck_assert_int_eq(tt_backend_open("cuda", "0,0", &b, &err), TT_ERR_ARG);
        /* a GPU the driver does not see: the machine lacks it (exit 1) */
        ck_assert_int_eq(tt_backend_open("cuda", "999", &b, &err), TT_ERR_DEVICE);
        ck_assert_int_eq(tt_backend_open("cuda", "0,", &b, &err), TT_ERR_ARG);
        ck_assert_int_eq(tt_backend_open("cuda", "a", &b, &err), TT_ERR_ARG);
    }
    /* the CPU backend's peer matrix: one memory */
    int ords[2] = {0, 0}, link[4] = {9, 9, 9, 9};
    ck_assert_int_eq(tt_backend_links(&tt_dev_cpu_ops, ords, 2, link, &err), TT_OK);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(link[i], TT_LINK_SAME);
}
END_TEST

/* The probe on the CPU backend: every placement but nccl ran, and each predicted step is the sum of its split. */
START_TEST(test_probe_placements)
{
    fixture f;
    fixture_make(&f);
    tt_probe_config pc;
    memset(&pc, 0, sizeof pc);
    pc.model = &f.m;
    pc.ops = &tt_dev_cpu_ops;
    pc.n_devices = 1;
    pc.towers = 2;
    pc.batch = 32;
    pc.optim = tt_optim_defaults(TT_OPT_ADAM);
    pc.reps = 3;
    tt_probe p;
    tt_error err;
    ck_assert_msg(tt_probe_run(&pc, &p, &err) == TT_OK, "%s", err.msg);
    ck_assert(p.can[TT_REDUCE_CPU] && p.can[TT_REDUCE_DEVICE] && p.can[TT_REDUCE_ALLREDUCE] && !p.can[TT_REDUCE_NCCL]);
    ck_assert(p.compute > 0 && p.reduce[TT_REDUCE_CPU] > 0 && p.reduce[TT_REDUCE_DEVICE] > 0 &&
              p.reduce[TT_REDUCE_ALLREDUCE] > 0 && p.update > 0);
    ck_assert_int_eq(p.n_links, 1);
    for (int r = 0; r < TT_REDUCE_NCCL; r++) {
        tt_step_times t;
        tt_probe_predict(&p, (tt_reduce)r, &t);
        double parts = t.pull + t.data + t.compute + t.push + t.wait + t.reduce + t.update;
        ck_assert(tt_close(parts, t.total, 1e-12, 1e-9) && t.total > 0);
    }
    fixture_free(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("phases");
    TCase *tc = tcase_create("phases");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_cpu_events);
    tcase_add_test(tc, test_ledger_order_and_pushes);
    tcase_add_test(tc, test_time_phases);
    tcase_add_test(tc, test_ledger_spans_are_the_phases);
    tcase_add_test(tc, test_nccl_checks);
    tcase_add_test(tc, test_backend_open);
    tcase_add_test(tc, test_probe_placements);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
