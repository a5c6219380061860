/* test_assume.c — what-if predictions (tt_assume.h): parsing --assume specs, and one profile's phases against the
 * formulas of docs/whatif.md worked by hand.
 *
 * The hand-worked numbers use the h100-pcie figures as docs/whatif.md lists them (h2d = d2h = peer = 48 GB/s,
 * NCCL busbw 28 GB/s + 40 us, HBM 1800 GB/s, FP32 51 TFLOP/s x 0.3, launch 5 us (a graph node 2 us), copy 8 us,
 * host 230 GB/s, barrier 5 us) and the seed MLP 784-256-relu-256-relu-10:
 *   P = 784*256+256 + 256*256+256 + 256*10+10 = 269,322 parameters, S = 4 P = 1,077,288 bytes;
 *   F = 2*(2*784*256) + 3*(2*256*256) + 3*(2*256*10) = 802,816 + 393,216 + 15,360 = 1,211,392 FLOP per sample;
 *   K = 15 launches: forward 2+2+2 (sgemm, then bias+relu fused or the bias alone), softmax 1, backward 3+3+2
 *   (the relu gradient fused with the bias gradient, or the bias gradient alone; dW, dx; no dx for the first
 *   layer) — 19 before the fused epilogues.
 * They are written as literal arithmetic, not computed by the code under test. Tolerance: 1e-9 relative — the
 * same operations in a different order differ by a few ulps (1e-16), so anything above 1e-9 is a different formula.
 * Not for: the prediction formula itself (tt_probe_predict, exercised by probe/bench) or real hardware. */
#include "tt_assume.h"
#include "tt_test.h"

#define RTOL 1e-9

static void seed_mlp(tt_model *m)
{
    tt_error err;
    ck_assert_msg(tt_model_mlp(m, 784, 10, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(m->n_params, 269322);
}

static void close_to(double got, double want, const char *what)
{
    ck_assert_msg(tt_close(got, want, 0, RTOL), "%s: got %.12g s, want %.12g s", what, got, want);
}

/* ---- parsing ------------------------------------------------------------------------------------------------- */

START_TEST(test_parse_valid)
{
    tt_assume a;
    tt_error err;
    ck_assert_msg(tt_assume_parse("h100-pcie", &a, &err) == TT_OK, "%s", err.msg);
    ck_assert_str_eq(a.name, "h100-pcie");
    ck_assert(a.h2d_gbs == 48 && a.peer_gbs == 48 && a.fp32_tflops == 51 && a.overridden == 0);

    ck_assert_msg(tt_assume_parse("a100-pcie,peer_gbs=20", &a, &err) == TT_OK, "%s", err.msg);
    ck_assert_str_eq(a.name, "a100-pcie");
    ck_assert(a.peer_gbs == 20 && a.h2d_gbs == 24 && a.fp32_tflops == 19.5 && a.overridden != 0);

    /* keys alone: on top of the default profile, h100-pcie */
    ck_assert_msg(tt_assume_parse("h2d_gbs=25,d2h_gbs=25.5,launch_us=0", &a, &err) == TT_OK, "%s", err.msg);
    ck_assert_str_eq(a.name, "h100-pcie");
    ck_assert(a.h2d_gbs == 25 && a.d2h_gbs == 25.5 && a.launch_us == 0 && a.peer_gbs == 48);

    ck_assert_msg(tt_assume_parse("h100-sxm,gemm_eff=1,nccl_us=0", &a, &err) == TT_OK, "%s", err.msg);
    ck_assert(a.peer_gbs == 380 && a.gemm_eff == 1 && a.nccl_us == 0);
    ck_assert_str_eq(tt_assume_profiles(), "h100-pcie, a100-pcie, h100-sxm");
}
END_TEST

/* Every bad spec: TT_ERR_ARG, and the message names the culprit. */
START_TEST(test_parse_invalid)
{
    static const struct {
        const char *spec, *named;
    } BAD[] = {
        {"", "empty"},
        {"v100", "unknown profile 'v100'"},
        {"h100-pcie,foo=1", "unknown key 'foo'"},
        {"bogus_gbs=3", "unknown key 'bogus_gbs'"},
        {"h2d_gbs=abc", "h2d_gbs: 'abc' is not a number"},
        {"h2d_gbs=", "h2d_gbs: '' is not a number"},
        {"h2d_gbs=12x", "h2d_gbs: '12x' is not a number"},
        {"h2d_gbs=0x10", "h2d_gbs: '0x10' is not a number"},
        {"peer_gbs=nan", "peer_gbs: 'nan' is not a number"},
        {"hbm_gbs=inf", "hbm_gbs: 'inf' is not a number"},
        {"hbm_gbs=1e999", "hbm_gbs: '1e999' is not finite"},
        {"h2d_gbs=0", "h2d_gbs: '0' must be > 0"},
        {"a100-pcie,fp32_tflops=-3", "fp32_tflops: '-3' must be > 0"},
        {"launch_us=-1", "launch_us: '-1' must be >= 0"},
        {"gemm_eff=1.5", "gemm_eff: '1.5' is outside the plausible range"},
        {"host_gbs=1e-300", "host_gbs: '1e-300' is outside the plausible range"},
        {"h100-pcie,peer_gbs=1e-61", "peer_gbs: '1e-61' is outside the plausible range"},
        {"launch_us=1e308", "launch_us: '1e308' is outside the plausible range"},
        {"fp32_tflops=1e9", "fp32_tflops: '1e9' is outside the plausible range"},
        {"h2d_gbs=1,d2h_gbs=2,h2d_gbs=3", "key h2d_gbs given twice"},
        {"h100-pcie,a100-pcie", "'a100-pcie' is not KEY=VALUE"},
        {"h100-pcie,", "empty item"},
        {"h2d_gbs=1,,d2h_gbs=2", "empty item"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        tt_assume a;
        tt_error err;
        err.msg[0] = '\0';
        ck_assert_msg(tt_assume_parse(BAD[i].spec, &a, &err) == TT_ERR_ARG, "'%s' was accepted", BAD[i].spec);
        ck_assert_msg(strstr(err.msg, BAD[i].named) != NULL, "'%s': message '%s' does not say '%s'", BAD[i].spec,
                      err.msg, BAD[i].named);
        ck_assert_msg(strncmp(err.msg, "--assume: ", 10) == 0 && !strchr(err.msg, '\n'), "'%s'", err.msg);
    }
}
END_TEST

/* ---- the phases, by hand ------------------------------------------------------------------------------------- */

/* The seed MLP and the h100-pcie profile: the by-hand cases' starting point. */
static void h100_pcie(tt_model *m, tt_assume *a)
{
    tt_error err;
    seed_mlp(m);
    ck_assert_msg(tt_assume_parse("h100-pcie", a, &err) == TT_OK, "%s", err.msg);
}

/* The launch counter (src/step/launches.c) against the CUDA stand-in's own count of one training step on one tower
 * (docs/cuda.md, "What a step costs", from tools/cuda-costs), less the data phase's u8_to_f32: mlp on Fashion-MNIST
 * at 256 rows 16 - 1, cnn at 128 rows 64 - 1, textcnn on tools/make-langid's sequences (24 tokens) at 128 rows 44.
 * The counter runs the model's own step, so these move when the step does (the fused epilogues took 4, 10 and 4). */
START_TEST(test_launches_match_stand_in)
{
    struct {
        const char *model;
        tt_shape in;
        size_t classes, vocab, rows, launches;
    } cases[] = {{"mlp", {1, {784}}, 10, 0, 256, 15},
                 {"cnn", {3, {28, 28, 1}}, 10, 0, 128, 63},
                 {"textcnn", {1, {24}}, 5, 200, 128, 44}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tt_model m;
        tt_error err;
        tt_model_input in = {cases[i].in, cases[i].classes, cases[i].vocab};
        ck_assert_msg(tt_model_builtin(&m, cases[i].model, &in, &err) == TT_OK, "%s", err.msg);
        ck_assert_msg(tt_assume_kernels(&m, cases[i].rows) == cases[i].launches, "%s: %zu launches, want %zu",
                      cases[i].model, tt_assume_kernels(&m, cases[i].rows), cases[i].launches);
    }
    /* every built-in model on its default input, shards of 1 to 300 rows: the counter runs through every layer's
     * walk (its placeholder buffers once tripped the seam's transpose-overlap check: textcnn at 8, 32, 64 rows), and
     * more rows never mean fewer launches (a column sum or the embedding's sort only gains passes) */
    const char *names[] = {"mlp", "cnn", "textcnn"};
    for (size_t i = 0; i < 3; i++) {
        tt_model m;
        tt_error err;
        tt_model_input in;
        ck_assert_msg(tt_model_default_input(names[i], &in, &err) == TT_OK, "%s", err.msg);
        ck_assert_msg(tt_model_builtin(&m, names[i], &in, &err) == TT_OK, "%s", err.msg);
        size_t last = 0;
        for (size_t rows = 1; rows <= 300; rows++) {
            const size_t k = tt_assume_kernels(&m, rows);
            ck_assert_msg(k >= last && k > 0, "%s at %zu rows: %zu launches after %zu", names[i], rows, k, last);
            last = k;
        }
    }
}
END_TEST

START_TEST(test_probe_by_hand)
{
    tt_model m;
    seed_mlp(&m);
    ck_assert_uint_eq(tt_assume_kernels(&m, 64), 15);
    ck_assert(tt_model_train_flops(&m) == 1211392.0);
    tt_assume a;
    tt_error err;
    ck_assert_msg(tt_assume_parse("h100-pcie", &a, &err) == TT_OK, "%s", err.msg);
    tt_probe p;
    tt_assume_probe(&a, &m, 4, 256, TT_OPT_ADAM, &p); /* N = 4, B = 256: R = 64 rows */
    ck_assert_uint_eq(p.rows, 64);
    ck_assert_int_eq(p.waves, 1);
    ck_assert(p.straggle == 0);
    /* pull: the link, 1077288 / 48e9 = 22.44 us, beats the host cap 4 * 1077288 / 230e9 = 18.74 us */
    close_to(p.pull, 8e-6 + 1077288.0 / 48e9, "pull");
    /* data: gather 4*64*784 bytes from host memory; rows in 64*784 / 48e9 = 1.045 us (host cap 4*50176/230e9 =
     * 0.873 us); u8 -> f32 reads 1 and writes 4 bytes per pixel; labels 256 / 48e9 (cap 1024/230e9 smaller) */
    close_to(p.data, 4.0 * 64 * 784 / 230e9 + (8e-6 + 50176.0 / 48e9) + (5e-6 + 5.0 * 50176 / 1800e9) +
                         (8e-6 + 256.0 / 48e9),
             "data");
    /* compute: 1211392 FLOP x 64 rows at 51 TFLOP/s x 0.3 = 5.067 us, plus 15 launches of 5 us */
    close_to(p.compute, 1211392.0 * 64 / (51e12 * 0.3) + 15 * 5e-6, "compute");
    {
        /* --graphs on: the step is one graph launch (5 us), its kernels nodes of 2 us (graph_node_us): the 15 of the
         * compute phase and the data phase's u8 -> f32 */
        tt_assume ag = a;
        ag.graphs = 1;
        tt_probe pg;
        tt_assume_probe(&ag, &m, 4, 256, TT_OPT_ADAM, &pg);
        close_to(pg.compute, 1211392.0 * 64 / (51e12 * 0.3) + 15 * 2e-6 + 5e-6, "compute with graphs");
        close_to(pg.data, 4.0 * 64 * 784 / 230e9 + (8e-6 + 50176.0 / 48e9) + (2e-6 + 5.0 * 50176 / 1800e9) +
                              (8e-6 + 256.0 / 48e9),
                 "data with graphs");
    }
    close_to(p.gemm_step, 1211392.0 * 64 / 15.3e12, "gemm_step");
    close_to(p.push_grad, 8e-6 + 1077288.0 / 48e9, "push_grad");
    /* stats: 2 floats per row = 512 bytes: 512/48e9 against the cap 4*512/230e9 */
    close_to(p.push_stats, 8e-6 + 512.0 / 48e9, "push_stats");
    close_to(p.barrier, 5e-6, "barrier");
    /* cpu: the host reads 4 slots */
    close_to(p.reduce[TT_REDUCE_CPU], 4.0 * 1077288 / 230e9, "reduce_cpu");
    /* device: 3 peer copies into tower 0 and 3 adds (read 2, write 1), then one push (cap 1077288/230e9 smaller) */
    close_to(p.reduce[TT_REDUCE_DEVICE], 3 * (8e-6 + 1077288.0 / 48e9) + 3 * (5e-6 + 3.0 * 1077288 / 1800e9) +
                                  (8e-6 + 1077288.0 / 48e9),
             "reduce_device");
    /* allreduce: slice = ceil(269322 / 4) = 67331 floats, rounded up to 16: 67344 floats = 269376 bytes; tower 0
     * copies its own slice locally (read + write), receives 3 slices, adds 3, pushes its slice: 269376 / 48e9 =
     * 5.61 us beats the cap 4 * 269376 / 230e9 = 4.68 us */
    close_to(p.reduce[TT_REDUCE_ALLREDUCE], (8e-6 + 2.0 * 269376 / 1800e9) + 3 * (8e-6 + 269376.0 / 48e9) +
                                     3 * (5e-6 + 3.0 * 269376 / 1800e9) + (8e-6 + 269376.0 / 48e9),
             "reduce_allreduce");
    /* nccl: ncclReduce, busbw = algbw = S / t, plus the push of the sum */
    close_to(p.reduce[TT_REDUCE_NCCL], 40e-6 + 1077288.0 / 28e9 + (8e-6 + 1077288.0 / 48e9), "reduce_nccl");
    /* Adam: w, m, v read and written, g read = 28 bytes per parameter */
    close_to(p.update, 28.0 * 269322 / 230e9, "update");

    /* the whole step under cpu, through tt_probe_predict: towers (pull, data, compute, both pushes, barrier), then
     * the host's sum and the update with its barrier */
    tt_step_times t;
    tt_probe_predict(&p, TT_REDUCE_CPU, &t);
    const double tower = (8e-6 + 1077288.0 / 48e9) +
                         (4.0 * 64 * 784 / 230e9 + (8e-6 + 50176.0 / 48e9) + (5e-6 + 5.0 * 50176 / 1800e9) +
                          (8e-6 + 256.0 / 48e9)) +
                         (1211392.0 * 64 / 15.3e12 + 75e-6) + (8e-6 + 1077288.0 / 48e9) + (8e-6 + 512.0 / 48e9);
    close_to(t.total, tower + 5e-6 + 4.0 * 1077288 / 230e9 + 28.0 * 269322 / 230e9 + 5e-6, "cpu step");
}
END_TEST

/* --update device and replicated for N = 4, B = 256 on h100-pcie, by hand (assume.c's head comment): no pull (or
 * tower 0's, over peer links), only the statistics pushed, the reduce without its push of the sum, the update on
 * HBM; host is tt_probe_predict's step; a placement that leaves no sum where the update runs is not a step. */
START_TEST(test_update_by_hand)
{
    tt_model m;
    tt_assume a;
    h100_pcie(&m, &a);
    tt_probe p;
    tt_assume_probe(&a, &m, 4, 256, TT_OPT_ADAM, &p);
    const double S = 1077288.0, L = 269376.0, P = 269322.0;
    const double tail = p.data + p.compute + (8e-6 + 512.0 / 48e9) + 5e-6; /* data, compute, stats, barrier */
    const double upd = 3 * 5e-6 + 28.0 * P / 1800e9 + 8e-6 + 5e-6;          /* Adam on HBM, flags back, barrier B */
    tt_step_times t, h;
    ck_assert(tt_assume_update_step(&a, &m, 4, 256, TT_OPT_ADAM, TT_REDUCE_DEVICE, TT_UPDATE_DEVICE, &t));
    close_to(t.pull, 8e-6 + 3 * S / 48e9, "device: the pull from tower 0");
    close_to(t.reduce, 3 * (8e-6 + S / 48e9) + 3 * (5e-6 + 3 * S / 1800e9) + 5e-6, "device: the reduce, no push");
    close_to(t.update, upd, "device: the update on GPU 0");
    close_to(t.total, t.pull + tail + t.reduce + upd, "device: the step");
    ck_assert(tt_assume_update_step(&a, &m, 4, 256, TT_OPT_ADAM, TT_REDUCE_ALLREDUCE, TT_UPDATE_REPLICATED, &t));
    ck_assert(t.pull == 0);
    close_to(t.reduce, (8e-6 + 2 * L / 1800e9) + 3 * (8e-6 + L / 48e9 + 5e-6 + 3 * L / 1800e9) +
                           3 * (8e-6 + L / 48e9) + 5e-6,
             "replicated: the reduce-scatter and the all-gather");
    close_to(t.total, tail + t.reduce + upd, "replicated, allreduce: the step");
    ck_assert(tt_assume_update_step(&a, &m, 4, 256, TT_OPT_ADAM, TT_REDUCE_NCCL, TT_UPDATE_REPLICATED, &t));
    close_to(t.reduce, 40e-6 + 2 * 3.0 / 4 * S / 28e9 + 5e-6, "replicated: ncclAllReduce");
    ck_assert(tt_assume_update_step(&a, &m, 4, 256, TT_OPT_ADAM, TT_REDUCE_CPU, TT_UPDATE_HOST, &t));
    tt_probe_predict(&p, TT_REDUCE_CPU, &h);
    ck_assert(t.total == h.total);
    ck_assert(!tt_assume_update_step(&a, &m, 4, 256, TT_OPT_ADAM, TT_REDUCE_ALLREDUCE, TT_UPDATE_DEVICE, &t));
    ck_assert(!tt_assume_update_step(&a, &m, 4, 256, TT_OPT_ADAM, TT_REDUCE_CPU, TT_UPDATE_REPLICATED, &t));
    ck_assert(t.total == 0);
    /* one GPU: the optimizer beside the gradient saves the pull, the push of the sum and the host's pass */
    tt_step_times one_host, one_dev;
    ck_assert(tt_assume_update_step(&a, &m, 1, 256, TT_OPT_ADAM, TT_REDUCE_CPU, TT_UPDATE_HOST, &one_host));
    ck_assert(tt_assume_update_step(&a, &m, 1, 256, TT_OPT_ADAM, TT_REDUCE_DEVICE, TT_UPDATE_DEVICE, &one_dev));
    ck_assert_msg(one_dev.total < one_host.total, "1 GPU: device %g, host %g", one_dev.total, one_host.total);
}
END_TEST

/* --overlap on: the buckets and their costs come from the trainer's cut and the counted step (the forward's and each
 * bucket's launches add up to the compute phase's); one bucket (the seed MLP) hides nothing and costs what off
 * costs; the cnn's two buckets (the dense layers, then the convolutions) by hand: the host's work on bucket 0 runs
 * under the convolutions' backward, the next pull after the towers' own pushes. Refused where the trainer refuses. */
START_TEST(test_overlap_by_hand)
{
    tt_model m;
    tt_assume a;
    h100_pcie(&m, &a);
    tt_step_times on, off;
    ck_assert(tt_assume_update_step(&a, &m, 4, 256, TT_OPT_ADAM, TT_REDUCE_CPU, TT_UPDATE_HOST, &off));
    const double hid1 = tt_assume_overlap_step(&a, &m, 4, 256, TT_OPT_ADAM, &on);
    close_to(on.total, off.total - 5e-6, "one bucket: the step as --overlap off, with one barrier, not two");
    ck_assert_msg(fabs(hid1) < 1e-9, "one bucket hides %g", hid1);
    a.overlap = 1;
    ck_assert(!tt_assume_update_step(&a, &m, 4, 256, TT_OPT_ADAM, TT_REDUCE_ALLREDUCE, TT_UPDATE_HOST, &on));
    a.graphs = 1;
    ck_assert(!tt_assume_update_step(&a, &m, 4, 256, TT_OPT_ADAM, TT_REDUCE_CPU, TT_UPDATE_HOST, &on));
    a.graphs = a.overlap = 0;

    tt_model cnn;
    tt_error err;
    tt_model_input in;
    ck_assert_msg(tt_model_default_input("cnn", &in, &err) == TT_OK, "%s", err.msg); /* CIFAR-10's 32x32x3 */
    ck_assert_msg(tt_model_builtin(&cnn, "cnn", &in, &err) == TT_OK, "%s", err.msg);
    tt_bucket_cost bc;
    tt_assume_buckets(&cnn, 32, 0, &bc);
    size_t edge[TT_MAX_BUCKETS + 1];
    ck_assert_uint_eq(bc.nb, tt_trainer_bucket_edges(&cnn, 0, edge));
    ck_assert_uint_eq(bc.nb, 2);
    ck_assert(memcmp(edge, bc.edge, 3 * sizeof *edge) == 0 && edge[0] == cnn.n_params && edge[2] == 0);
    ck_assert_uint_eq(bc.launches, tt_assume_kernels(&cnn, 32));
    ck_assert(bc.bwd_launches[0] > 0 && bc.bwd_launches[1] > 0 && bc.launches > bc.bwd_launches[0] + bc.bwd_launches[1]);
    tt_probe p;
    tt_assume_probe(&a, &cnn, 8, 256, TT_OPT_ADAM, &p);
    const double N = 8, S = 4.0 * (double)cnn.n_params, S0 = 4.0 * (double)(edge[0] - edge[1]), S1 = S - S0;
    const double per_flop = p.gemm_step / bc.flops, k = 5e-6;
    const double b0 = bc.bwd_flops[0] * per_flop + (double)bc.bwd_launches[0] * k;
    const double b1 = bc.bwd_flops[1] * per_flop + (double)bc.bwd_launches[1] * k;
    const double c0 = 8e-6 + fmax(S0 / 48e9, N * S0 / 230e9), c1 = 8e-6 + fmax(S1 / 48e9, N * S1 / 230e9);
    const double work = N * S / 230e9 + 28.0 * (double)cnn.n_params / 230e9; /* the sum of 8 slots, Adam */
    /* the tower's stream, the push stream, the host, the pull stream */
    const double fwd = p.compute - b0 - b1, T0 = fwd + b0, T1 = T0 + b1, L0 = T0 + c0, L1 = fmax(T1, L0) + c1;
    ck_assert(fwd > 0 && b0 > 0 && b1 > b0); /* the convolutions' backward is the longer */
    const double H0 = L0 + work * S0 / S, H1 = fmax(L1, H0) + work * S1 / S;
    const double U0 = H0 + (8e-6 + fmax(S0 / 48e9, N * S0 / 230e9)), U1 = fmax(H1, U0) + (8e-6 + fmax(S1 / 48e9, N * S1 / 230e9));
    const double hidden = tt_assume_overlap_step(&a, &cnn, 8, 256, TT_OPT_ADAM, &on);
    close_to(on.total, p.data + T1 + (U1 - T1) + p.push_stats + 5e-6, "cnn, 8 GPUs: the step (one barrier)");
    close_to(on.compute, p.compute, "cnn: compute as --overlap off's");
    close_to(on.push, L1 - T1 + p.push_stats, "cnn: the last push's landing after the backward, and the statistics");
    close_to(on.push_hidden, c0 + c1 - (L1 - T1), "cnn: the pushes under the backward");
    close_to(on.pull, U1 - H1, "cnn: the pull after the host's last update");
    close_to(hidden, 1 - (U1 - T1) / (p.pull + p.push_grad + N * S / 230e9 + p.update), "cnn: hidden");
    ck_assert(tt_assume_update_step(&a, &cnn, 8, 256, TT_OPT_ADAM, TT_REDUCE_CPU, TT_UPDATE_HOST, &off));
    ck_assert_msg(on.total < off.total && hidden > 0.3 && hidden < 1, "cnn at 8 GPUs: on %g, off %g, hidden %g",
                  on.total, off.total, hidden);
}
END_TEST

/* The host cap, the one-tower cases and SGD's update. */
START_TEST(test_probe_edges)
{
    tt_model m;
    tt_assume a;
    h100_pcie(&m, &a);
    tt_probe p;
    tt_assume_probe(&a, &m, 8, 256, TT_OPT_SGD, &p);
    /* 8 pulls at once: host memory, 8 * 1077288 / 230e9 = 37.47 us, is slower than one link's 22.44 us */
    close_to(p.pull, 8e-6 + 8.0 * 1077288 / 230e9, "pull, 8 GPUs");
    close_to(p.push_grad, 8e-6 + 8.0 * 1077288 / 230e9, "push_grad, 8 GPUs");
    /* SGD: w and the velocity read and written, g read = 20 bytes per parameter */
    close_to(p.update, 20.0 * 269322 / 230e9, "update, sgd");

    tt_assume_probe(&a, &m, 1, 256, TT_OPT_ADAM, &p);
    /* one tower: device is the push alone; nccl its fixed cost and the push; allreduce a local copy and the push */
    close_to(p.reduce[TT_REDUCE_DEVICE], 8e-6 + 1077288.0 / 48e9, "reduce_device, 1 GPU");
    close_to(p.reduce[TT_REDUCE_NCCL], 40e-6 + 8e-6 + 1077288.0 / 48e9, "reduce_nccl, 1 GPU");
    close_to(p.reduce[TT_REDUCE_ALLREDUCE], (8e-6 + 2.0 * 1077288 / 1800e9) + (8e-6 + 1077288.0 / 48e9),
             "reduce_allreduce, 1 GPU");
}
END_TEST

/* Strong scaling: each GPU's compute falls with N (smaller shards), the host's sum grows (more slots). */
START_TEST(test_probe_monotonic)
{
    tt_model m;
    seed_mlp(&m);
    const char *specs[] = {"h100-pcie", "a100-pcie", "h100-sxm"};
    for (size_t s = 0; s < 3; s++) {
        tt_assume a;
        tt_error err;
        ck_assert_msg(tt_assume_parse(specs[s], &a, &err) == TT_OK, "%s", err.msg);
        tt_probe prev;
        tt_assume_probe(&a, &m, 1, 256, TT_OPT_ADAM, &prev);
        for (size_t n = 2; n <= 8; n++) {
            tt_probe p;
            tt_assume_probe(&a, &m, n, 256, TT_OPT_ADAM, &p);
            ck_assert_msg(p.compute < prev.compute, "%s: compute at %zu GPUs", specs[s], n);
            ck_assert_msg(p.reduce[TT_REDUCE_CPU] > prev.reduce[TT_REDUCE_CPU], "%s: cpu reduce at %zu GPUs", specs[s],
                          n);
            ck_assert_msg(p.reduce[TT_REDUCE_DEVICE] > prev.reduce[TT_REDUCE_DEVICE], "%s: device reduce at %zu GPUs",
                          specs[s], n);
            ck_assert_msg(p.update == prev.update, "%s: the update does not depend on N", specs[s]);
            prev = p;
        }
    }
}
END_TEST

START_TEST(test_report)
{
    tt_model m;
    seed_mlp(&m);
    tt_assume a;
    tt_error err;
    ck_assert_msg(tt_assume_parse("a100-pcie,peer_gbs=20", &a, &err) == TT_OK, "%s", err.msg);
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert_msg(tt_assume_report(f, &a, &m, 256, TT_OPT_ADAM, &err) == TT_OK, "%s", err.msg);
    ck_assert_int_eq(tt_assume_report(f, &a, &m, 0, TT_OPT_ADAM, &err), TT_ERR_ARG);
    rewind(f);
    static char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    ck_assert(n > 0 && n < sizeof text - 1);
    text[n] = '\0';
    fclose(f);
    const char *want[] = {"PREDICTED", "a100-pcie", "overridden: peer_gbs", "cpu", "device", "allreduce", "nccl",
                          "strong scaling", "weak scaling", "strong: ", "weak: ", "samples/s",
                          "where the optimizer runs (--update", "replicated"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(text, want[i]) != NULL, "the report lacks '%s':\n%s", want[i], text);
    /* every line fits 120 columns; rows for 1..8 GPUs in each mode */
    size_t rows = 0, update_rows = 0;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        ck_assert_ptr_nonnull(nl);
        ck_assert_msg(nl - line <= 120, "a line of %d columns: %.*s", (int)(nl - line), (int)(nl - line), line);
        char one[128];
        snprintf(one, sizeof one, "%.*s", (int)(nl - line), line);
        const int gpu_row = strlen(one) > 5 && one[3] >= '1' && one[3] <= '8' && one[4] == ' ';
        rows += gpu_row && strchr(one, 'x') != NULL;
        update_rows += gpu_row && one[5] == '|' && strstr(one, "samples/s") != NULL;
        line = nl + 1;
    }
    ck_assert_uint_eq(rows, 16);
    ck_assert_uint_eq(update_rows, 16); /* the --update table: 1..8 GPUs in each mode */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("assume");
    TCase *tc = tcase_create("what-if");
    tcase_add_test(tc, test_parse_valid);
    tcase_add_test(tc, test_parse_invalid);
    tcase_add_test(tc, test_probe_by_hand);
    tcase_add_test(tc, test_launches_match_stand_in);
    tcase_add_test(tc, test_probe_edges);
    tcase_add_test(tc, test_update_by_hand);
    tcase_add_test(tc, test_overlap_by_hand);
    tcase_add_test(tc, test_probe_monotonic);
    tcase_add_test(tc, test_report);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
