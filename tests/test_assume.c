/* test_assume.c — what-if predictions (tt_cost_model.h): parsing --assume specs, and one profile's phases against the
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
 * Measured profiles (tt_profile.h): `probe --json` on the CPU backend writes every GEMM shape of the mlp — checked
 * against the shapes written out by hand below —, reads back as the same figures, hostile files are refused with one
 * line naming the field, the GEMM table prices the step, and h200-measured's predictions are pinned to the table of
 * docs/whatif.md ("Predicted against measured on the H200"): a model change must update that table.
 * Not for: the prediction formula itself (tt_probe_predict, exercised by probe/bench) or real hardware. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "tt_cost_model.h"
#include "tt_profile.h"
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
    ck_assert_str_eq(tt_assume_profiles(), "h100-pcie, a100-pcie, h100-sxm, h200-measured");
    ck_assert_msg(tt_assume_parse("h200-measured", &a, &err) == TT_OK, "%s", err.msg);
    ck_assert(a.h2d_gbs == 34.2 && a.d2h_gbs == 34.4 && a.peer_gbs == 51.3 && a.fp32_tflops == 67 && a.n_gemms == 3);
    ck_assert(a.launch_us == 5.2 && fabs(a.graph_node_us - 3.6) < 1e-12 && a.barrier_us == 18);
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
        {"h100-pcie,h2d_gbs=1,", "empty item"},
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
        /* --epilogues lt: each dense layer's sgemm + bias kernel is one cuBLASLt launch (every built-in model has
         * some), and a dense relu's drelu_bgrad kernel goes into the next dense layer's dx GEMM where nothing is
         * between them (the mlp's two; the cnn's has a dropout after it); the stand-in's cublasLtMatmul count is
         * checked by test_sim_train */
        size_t dense = 0, linked = 0;
        for (size_t l = 0; l < m.n_layers; l++) dense += m.layers[l].kind == &tt_layer_dense;
        for (size_t l = 0; l < m.n_layers; l++) linked += (size_t)m.layers[l].lt_mask;
        ck_assert_uint_ge(dense, 1);
        ck_assert_uint_eq(linked, strcmp(cases[i].model, "mlp") == 0 ? 2 : 0);
        ck_assert_msg(tt_assume_kernels_lt(&m, cases[i].rows, 1) == cases[i].launches - dense - linked,
                      "%s --epilogues lt: %zu launches, want %zu", cases[i].model,
                      tt_assume_kernels_lt(&m, cases[i].rows, 1), cases[i].launches - dense - linked);
    }
    /* every built-in model on its default input, shards of 1 to 300 rows: the counter runs through every layer's
     * walk (its placeholder buffers once tripped the seam's transpose-overlap check: textcnn at 8, 32, 64 rows), and
     * more rows never mean fewer launches (a column sum or the embedding's sort only gains passes); cnn-bn's
     * batchnorm once tripped bn_dx's dx != dy check the same way (probe --assume --model cnn-bn aborted) */
    const char *names[] = {"mlp", "cnn", "cnn-bn", "textcnn"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
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

/* --precision bf16 for N = 4, B = 256 on h100-pcie, by hand: the seed MLP (no non-trainable tail) pulls and pushes
 * 2 bytes a parameter (538644) plus its conversion kernels (a widen; a narrow and its total: 6 bytes a parameter over
 * HBM each way), computes at the BF16 peak (756 TFLOP/s x 0.3) with the compute phase's 7 conversions (the input,
 * 3 outputs, the loss gradient, 2 dx), the host sums 4 slots of 538644 bytes and converts the updated weights (6 bytes
 * each); the device placements do not run with it (not modelled); --push-precision fp32 pushes 1077288 bytes. */
START_TEST(test_precision_by_hand)
{
    tt_model m;
    seed_mlp(&m);
    tt_assume a;
    tt_error err;
    ck_assert_msg(tt_assume_parse("h100-pcie", &a, &err) == TT_OK, "%s", err.msg);
    ck_assert(a.bf16_tflops == 756 && a.fp16_tflops == 756);
    a.precision = TT_FMT_BF16;
    tt_probe p;
    tt_assume_probe(&a, &m, 4, 256, TT_OPT_ADAM, &p);
    const double conv = 6.0 * 269322 / 1800e9;
    close_to(p.pull, 8e-6 + 538644.0 / 48e9 + 5e-6 + conv, "pull");
    close_to(p.push_grad, 8e-6 + 538644.0 / 48e9 + 10e-6 + conv, "push_grad");
    close_to(p.compute, 1211392.0 * 64 / (756e12 * 0.3) + 22 * 5e-6, "compute");
    close_to(p.reduce[TT_REDUCE_CPU], 4.0 * 538644 / 230e9, "reduce_cpu");
    close_to(p.update, 28.0 * 269322 / 230e9 + 6.0 * 269322 / 230e9, "update");
    ck_assert(p.can[TT_REDUCE_CPU] && !p.can[TT_REDUCE_DEVICE] && !p.can[TT_REDUCE_ALLREDUCE] && !p.can[TT_REDUCE_NCCL]);
    tt_step_times t;
    ck_assert(!tt_assume_update_step(&a, &m, 4, 256, TT_OPT_ADAM, TT_REDUCE_DEVICE, TT_UPDATE_HOST, &t));
    ck_assert(tt_assume_update_step(&a, &m, 4, 256, TT_OPT_ADAM, TT_REDUCE_CPU, TT_UPDATE_HOST, &t));
    a.push_fp32 = 1;
    tt_assume_probe(&a, &m, 4, 256, TT_OPT_ADAM, &p);
    close_to(p.push_grad, 8e-6 + 1077288.0 / 48e9 + 10e-6 + conv, "push_grad in FP32");
    close_to(p.pull, 8e-6 + 538644.0 / 48e9 + 5e-6 + conv, "pull, FP32 push");
}
END_TEST

/* --update device and replicated for N = 4, B = 256 on h100-pcie, by hand (cost_model.c's head comment): no pull (or
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


/* ---- measured profiles ------------------------------------------------------------------------------------------ */

/* The seed MLP's GEMMs at a shard of B rows, written out by hand from the layers' formulas (src/layers/dense.c:
 * y = x W, dW = xᵀ dy, dx = dy Wᵀ; no dx for the first layer), in the order the step issues them: forward 784->256,
 * 256->256, 256->10; backward from the last layer (dW, then dx), the first layer's dW last. op(A) is M x K. */
static size_t mlp_shapes(size_t B, tt_gemm_shape *g)
{
    const tt_gemm_shape want[] = {
        {0, 0, B, 256, 784, 1}, {0, 0, B, 256, 256, 1}, {0, 0, B, 10, 256, 1}, /* y = x W */
        {1, 0, 256, 10, B, 1},  {0, 1, B, 256, 10, 1},                         /* layer 3: dW, dx */
        {1, 0, 256, 256, B, 1}, {0, 1, B, 256, 256, 1},                        /* layer 2: dW, dx */
        {1, 0, 784, 256, B, 1},                                                /* layer 1: dW */
    };
    memcpy(g, want, sizeof want);
    return sizeof want / sizeof want[0];
}

static int same_shape(const tt_gemm_shape *a, const tt_gemm_shape *b)
{
    return a->ta == b->ta && a->tb == b->tb && a->M == b->M && a->N == b->N && a->K == b->K;
}

/* The counter's distinct shapes against the hand-written list, and against the layers' GEMM tables (tt_model_gemms,
 * what the probe's GEMM floor runs) for the mlp and for the cnn cut as the CPU backend cuts it (chunks of 10^6). */
START_TEST(test_gemm_list)
{
    tt_model m;
    seed_mlp(&m);
    tt_gemm_shape want[8], got[TT_ASSUME_MAX_GEMMS];
    for (size_t B = 1; B <= 300; B += 37) {
        size_t launches = 0;
        const size_t n = tt_assume_gemm_list(&m, B, 0, got, TT_ASSUME_MAX_GEMMS, &launches);
        ck_assert_uint_eq(mlp_shapes(B, want), 8);
        ck_assert_msg(n == 8, "B %zu: %zu shapes", B, n);
        size_t calls = 0;
        for (size_t i = 0; i < n; i++) calls += got[i].calls;
        ck_assert_uint_eq(calls, 8);
        for (size_t i = 0; i < 8; i++) {
            size_t j = 0;
            while (j < n && !same_shape(&got[j], &want[i])) j++;
            ck_assert_msg(j < n, "B %zu: the hand's shape %zu (%d,%d,%zu,%zu,%zu) is not counted", B, i, want[i].ta,
                          want[i].tb, want[i].M, want[i].N, want[i].K);
        }
        ck_assert_uint_eq(launches, tt_assume_kernels(&m, B));
    }
    const char *names[] = {"mlp", "cnn", "textcnn"};
    for (size_t i = 0; i < 3; i++) {
        tt_model mm;
        tt_error err;
        tt_model_input in;
        ck_assert_msg(tt_model_default_input(names[i], &in, &err) == TT_OK, "%s", err.msg);
        ck_assert_msg(tt_model_builtin(&mm, names[i], &in, &err) == TT_OK, "%s", err.msg);
        for (size_t chunk = 0; chunk <= 1000000; chunk += 1000000) {
            tt_gemm_shape table[TT_ASSUME_MAX_GEMMS];
            const size_t nt = tt_model_gemms(&mm, 64, chunk, table, TT_ASSUME_MAX_GEMMS);
            const size_t n = tt_assume_gemm_list(&mm, 64, chunk, got, TT_ASSUME_MAX_GEMMS, NULL);
            size_t calls_t = 0, calls_c = 0;
            for (size_t k = 0; k < nt; k++) {
                calls_t += table[k].calls;
                size_t per = 0; /* the layers' tables list a shape per layer: add up the same shape's calls */
                for (size_t q = 0; q < nt; q++) per += same_shape(&table[q], &table[k]) ? table[q].calls : 0;
                size_t j = 0;
                while (j < n && !same_shape(&got[j], &table[k])) j++;
                ck_assert_msg(j < n && got[j].calls == per, "%s, chunk %zu: table shape %zu counted %zu times, not %zu",
                              names[i], chunk, k, j < n ? got[j].calls : 0, per);
            }
            for (size_t j = 0; j < n; j++) calls_c += got[j].calls;
            ck_assert_msg(calls_t == calls_c, "%s, chunk %zu: %zu calls in the tables, %zu counted", names[i], chunk,
                          calls_t, calls_c);
        }
    }
}
END_TEST

static char tmp[64];

static void tmp_setup(void) { tt_test_tmpdir(tmp, sizeof tmp); }

static char *path_in_tmp(const char *name)
{
    static char p[16][160]; /* a few alive at once */
    static int k;
    k = (k + 1) % 16;
    snprintf(p[k], sizeof p[k], "%s/%s", tmp, name);
    return p[k];
}

/* A profile of the seed MLP at 256 rows (1 tower, batch 256), each GEMM shape taking `sec[i]` a call, written as
 * probe --json writes it. */
static void mlp_profile(tt_profile *p, const double *sec)
{
    memset(p, 0, sizeof *p);
    snprintf(p->towertrain, sizeof p->towertrain, "test");
    snprintf(p->backend, sizeof p->backend, "cuda");
    snprintf(p->device, sizeof p->device, "a GPU made up by test_assume");
    snprintf(p->blas, sizeof p->blas, "none");
    snprintf(p->model, sizeof p->model, "mlp");
    snprintf(p->optimizer, sizeof p->optimizer, "adam");
    p->params = 269322;
    p->train_flops = 1211392;
    p->towers = 1, p->batch = 256, p->rows = 256, p->reps = 3, p->host_threads = 4;
    p->h2d_pinned_gbs = 20, p->h2d_pageable_gbs = 6, p->d2h_pinned_gbs = 21, p->d2h_pageable_gbs = 6;
    p->d2d_gbs = 40, p->peer_gbs = NAN, p->copy_s = 9e-6;
    p->memcpy_gbs = 50, p->sum_gbs = 40, p->barrier_s = 10e-6, p->wake_s = 30e-6;
    p->launch_s = 4e-6, p->graph_node_s = 2.5e-6, p->chain = 1000;
    tt_gemm_shape g[8];
    p->n_gemms = mlp_shapes(256, g);
    for (size_t i = 0; i < p->n_gemms; i++) {
        p->gemms[i] = (tt_profile_gemm){(size_t)g[i].ta, (size_t)g[i].tb, g[i].M, g[i].N, g[i].K, 1, sec[i],
                                        2.0 * (double)g[i].M * (double)g[i].N * (double)g[i].K / sec[i] / 1e9};
        p->gemm_step_s += sec[i];
    }
    p->kernels = 7, p->kernels_s = 60e-6;
    p->pull_s = 50e-6, p->data_s = 20e-6, p->compute_s = 0.2e-3, p->push_grad_s = 45e-6, p->push_stats_s = 9e-6;
    p->straggle_s = 0, p->update_s = 40e-6;
    p->reduce_s[TT_REDUCE_CPU] = 8e-6, p->reduce_s[TT_REDUCE_DEVICE] = 40e-6;
    p->reduce_s[TT_REDUCE_ALLREDUCE] = 50e-6, p->reduce_s[TT_REDUCE_NCCL] = NAN;
    p->n_steps = 2;
    tt_profile_step *st = &p->steps[0];
    snprintf(st->reduce, sizeof st->reduce, "cpu");
    snprintf(st->update, sizeof st->update, "host");
    st->measured = (tt_step_times){.pull = 50e-6, .data = 20e-6, .compute = 0.2e-3, .total = 0.4e-3};
    st->predicted = (tt_step_times){.pull = 50e-6, .data = 20e-6, .compute = 0.2e-3, .total = 0.39e-3};
    st = &p->steps[1];
    snprintf(st->reduce, sizeof st->reduce, "device");
    snprintf(st->update, sizeof st->update, "device");
    st->graphs = 1;
    st->measured = (tt_step_times){.data = 20e-6, .compute = 0.18e-3, .total = 0.3e-3};
    double *q = &st->predicted.launch;
    for (double *x = q; x <= &st->predicted.total; x++) *x = NAN;
}

static void write_profile(const char *path, const tt_profile *p)
{
    tt_out o;
    tt_error err;
    ck_assert_msg(tt_out_open(&o, path, "test profile", 1 << 16, &err) == TT_OK, "%s", err.msg);
    tt_profile_write(&o, p);
    ck_assert_msg(tt_out_close(&o, &err) == TT_OK, "%s", err.msg);
}

static const double SEC[8] = {14e-6, 18e-6, 12e-6, 10e-6, 11e-6, 16e-6, 17e-6, 20e-6};

/* A profile read back gives the figures written, to the bit (%.17g), and a second write of what was read is the
 * same file; the what-if takes its figures as docs/whatif.md says. */
START_TEST(test_profile_round_trip)
{
    tt_profile *p = (tt_profile *)tt_calloc(2, sizeof *p);
    ck_assert_ptr_nonnull(p);
    mlp_profile(&p[0], SEC);
    char f1[160], f2[160]; /* kept: path_in_tmp's buffers are reused */
    snprintf(f1, sizeof f1, "%s", path_in_tmp("p1.json"));
    snprintf(f2, sizeof f2, "%s", path_in_tmp("p2.json"));
    write_profile(f1, &p[0]);
    tt_error err;
    ck_assert_msg(tt_profile_read(f1, &p[1], &err) == TT_OK, "%s", err.msg);
    write_profile(f2, &p[1]);
    size_t n1, n2;
    uint8_t *t1 = tt_test_read_file(f1, &n1), *t2 = tt_test_read_file(f2, &n2);
    ck_assert_msg(n1 == n2 && memcmp(t1, t2, n1) == 0, "the profile read back writes differently");
    free(t1);
    free(t2);
    ck_assert(p[1].h2d_pinned_gbs == 20 && p[1].copy_s == 9e-6 && isnan(p[1].peer_gbs) && p[1].n_gemms == 8);
    ck_assert(p[1].gemms[7].m == 784 && p[1].gemms[7].trans_a == 1 && p[1].gemms[7].seconds == 20e-6);
    ck_assert(p[1].n_steps == 2 && p[1].steps[1].graphs == 1 && isnan(p[1].steps[1].predicted.total));
    ck_assert(isnan(p[1].reduce_s[TT_REDUCE_NCCL]) && p[1].reduce_s[TT_REDUCE_DEVICE] == 40e-6);
    /* the reader's own lists of names are the trainer's: every placement and update is a step a profile can hold */
    for (int r = 0; r < TT_REDUCE_COUNT; r++)
        for (int u = 0; u < TT_UPDATE_COUNT; u++) {
            tt_profile *q = &p[0];
            snprintf(q->steps[0].reduce, sizeof q->steps[0].reduce, "%s", tt_reduce_name((tt_reduce)r));
            snprintf(q->steps[0].update, sizeof q->steps[0].update, "%s", tt_update_name((tt_update)u));
            char name[32];
            snprintf(name, sizeof name, "names-%d-%d.json", r, u); /* a new file: one read is an input of the run */
            write_profile(path_in_tmp(name), q);
            ck_assert_msg(tt_profile_read(path_in_tmp(name), &p[1], &err) == TT_OK, "%s", err.msg);
        }

    /* the what-if's figures: links and latencies as measured, the host from the update (Adam: 28 bytes a
     * parameter), gemm_eff from the table, the profile's own (h100-pcie) for what the file does not measure */
    tt_assume a;
    ck_assert_msg(tt_assume_parse(f1, &a, &err) == TT_OK, "%s", err.msg);
    ck_assert_str_eq(a.name, "h100-pcie");
    ck_assert(a.h2d_gbs == 20 && a.d2h_gbs == 21 && a.peer_gbs == 40 && a.fp32_tflops == 51 && a.hbm_gbs == 1800);
    close_to(a.copy_us, 9, "copy_us");
    close_to(a.launch_us, 4, "launch_us");
    close_to(a.graph_node_us, 2.5, "graph_node_us");
    close_to(a.barrier_us, 10, "barrier_us");
    close_to(a.host_gbs, 28.0 * 269322 / 40e-6 / 1e9, "host_gbs");
    ck_assert_uint_eq(a.n_gemms, 8);
    double body = 0;
    for (size_t i = 0; i < 8; i++) {
        close_to(a.gemms[i].body_s, SEC[i] - 4e-6, "a GEMM's body: its time less a launch");
        body += SEC[i] - 4e-6;
    }
    close_to(a.gemm_eff, 256.0 * 1211392 / (51e12 * body), "gemm_eff: the table's flops over its bodies");
    close_to(a.other_body_s, 60e-6 - 7 * 4e-6, "the other kernels less their launches");
    ck_assert_msg(strstr(a.source, "p1.json") && strstr(a.source, "made up"), "%s", a.source);
    /* a profile first, keys before the file: the keys win, the file over the profile, the profile for the rest */
    char spec[256];
    snprintf(spec, sizeof spec, "h100-sxm,launch_us=2,%s", f1);
    ck_assert_msg(tt_assume_parse(spec, &a, &err) == TT_OK, "%s", err.msg);
    ck_assert(a.launch_us == 2 && a.h2d_gbs == 20 && a.fp32_tflops == 67 && a.hbm_gbs == 3015);
    ck_assert_str_eq(a.name, "h100-sxm");
    /* the file's name runs to the end of the spec: a key after it is part of the name */
    snprintf(spec, sizeof spec, "%s,launch_us=2", f1);
    ck_assert_int_eq(tt_assume_parse(spec, &a, &err), TT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "p1.json,launch_us=2"), "%s", err.msg);
    snprintf(spec, sizeof spec, "launch_us=2,launch_us=3,%s", f1);
    ck_assert_int_eq(tt_assume_parse(spec, &a, &err), TT_ERR_ARG);
    ck_assert_int_eq(tt_assume_parse("nowhere.json", &a, &err), TT_ERR_IO);
    ck_assert_int_eq(tt_assume_parse("v100,./nowhere", &a, &err), TT_ERR_ARG);
    tt_free(p);
}
END_TEST

/* The GEMM table prices the step: one shape 10x slower adds 9x its time to the compute phase at the measured
 * shard (and every call came from the table); at another shard every call is the fallback's. */
START_TEST(test_profile_table_used)
{
    tt_profile *p = (tt_profile *)tt_calloc(1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    mlp_profile(p, SEC);
    const char *f1 = path_in_tmp("t1.json"), *f2 = path_in_tmp("t2.json");
    write_profile(f1, p);
    double slow[8];
    memcpy(slow, SEC, sizeof slow);
    slow[5] *= 10; /* layer 2's dW: 16 us -> 160 us */
    mlp_profile(p, slow);
    write_profile(f2, p);
    tt_free(p);
    tt_model m;
    seed_mlp(&m);
    tt_assume a, b;
    tt_error err;
    ck_assert_msg(tt_assume_parse(f1, &a, &err) == TT_OK, "%s", err.msg);
    ck_assert_msg(tt_assume_parse(f2, &b, &err) == TT_OK, "%s", err.msg);
    tt_probe pa, pb;
    tt_assume_probe(&a, &m, 1, 256, TT_OPT_ADAM, &pa);
    tt_assume_probe(&b, &m, 1, 256, TT_OPT_ADAM, &pb);
    close_to(pb.compute - pa.compute, 9 * 16e-6, "one GEMM 10x slower: the compute phase");
    /* the whole compute phase by hand: the bodies, the other kernels' body, 15 launches */
    double bodies = 0;
    for (size_t i = 0; i < 8; i++) bodies += SEC[i] - 4e-6;
    close_to(pa.compute, bodies + (60e-6 - 28e-6) + 15 * 4e-6, "compute from the table");
    tt_assume_compute cc;
    tt_assume_compute_cost(&a, &m, 256, &cc);
    ck_assert(cc.from_table == 8 && cc.gemm_calls == 8 && cc.kernels == 15 && cc.other_measured);
    tt_assume_compute_cost(&a, &m, 128, &cc); /* 2 GPUs: no shape of 128 rows measured */
    ck_assert(cc.from_table == 0 && cc.gemm_calls == 8 && !cc.other_measured && cc.other_s == 0);
    close_to(cc.gemm_s, 128.0 * 1211392 / (51e12 * a.gemm_eff), "the fallback at 128 rows: the table's mean rate");
    /* --graphs on: each of the 15 kernels a node, plus one graph launch */
    a.graphs = 1;
    tt_assume_probe(&a, &m, 1, 256, TT_OPT_ADAM, &pa);
    close_to(pa.compute, bodies + 32e-6 + 15 * 2.5e-6 + 4e-6, "compute with graphs");
}
END_TEST

/* What probe --json writes on the CPU backend: one parseable object, every GEMM shape of the mlp at its shard (the
 * hand's list), launch figures > 0, and a file that --assume reads with the same figures. */
START_TEST(test_probe_json_cpu)
{
    char args[512], out[160], errp[160];
    const char *json = path_in_tmp("probe.json");
    snprintf(out, sizeof out, "%s/stdout", tmp);
    snprintf(errp, sizeof errp, "%s/stderr", tmp);
    snprintf(args, sizeof args, "probe --device cpu --batch 64 --reps 2 --json %s", json);
    tt_test_expect(args, 0, "", out, errp);
    ck_assert_msg(strstr(tt_test_slurp(out), "profile written (--json "), "%s", tt_test_slurp(out));
    json_object *top = json_object_from_file(json);
    ck_assert_msg(top != NULL, "%s is not JSON", json);
    json_object *v, *g, *l;
    ck_assert(json_object_object_get_ex(top, "schema", &v) &&
              strcmp(json_object_get_string(v), "towertrain-probe") == 0);
    ck_assert(json_object_object_get_ex(top, "backend", &v) && strcmp(json_object_get_string(v), "cpu") == 0);
    ck_assert(json_object_object_get_ex(top, "rows", &v) && json_object_get_int64(v) == 64);
    ck_assert(json_object_object_get_ex(top, "gemms", &g) && json_object_array_length(g) == 8);
    tt_gemm_shape want[8];
    mlp_shapes(64, want);
    for (size_t i = 0; i < 8; i++) {
        json_object *item = json_object_array_get_idx(g, i), *x;
        size_t f[6];
        const char *keys[] = {"trans_a", "trans_b", "m", "n", "k", "calls_per_step"};
        for (int k = 0; k < 6; k++) {
            ck_assert(json_object_object_get_ex(item, keys[k], &x));
            f[k] = (size_t)json_object_get_int64(x);
        }
        const tt_gemm_shape got = {(int)f[0], (int)f[1], f[2], f[3], f[4], f[5]};
        ck_assert_msg(same_shape(&got, &want[i]) && got.calls == 1, "gemms[%zu]: (%zu,%zu,%zu,%zu,%zu) x%zu", i, f[0],
                      f[1], f[2], f[3], f[4], f[5]);
        ck_assert(json_object_object_get_ex(item, "seconds", &x) && json_object_get_double(x) > 0);
        ck_assert(json_object_object_get_ex(item, "gflops", &x) && json_object_get_double(x) > 0);
    }
    ck_assert(json_object_object_get_ex(top, "launch", &l));
    ck_assert(json_object_object_get_ex(l, "kernel_s", &v) && json_object_get_double(v) > 0);
    /* the CPU backend has no graphs */
    ck_assert(json_object_object_get_ex(l, "graph_node_s", &v) && json_object_is_type(v, json_type_null));
    ck_assert(json_object_object_get_ex(top, "kernels", &l) && json_object_object_get_ex(l, "count", &v) &&
              json_object_get_int64(v) == 7);
    ck_assert(json_object_object_get_ex(top, "steps", &v) && json_object_array_length(v) >= 4);
    json_object_put(top);
    tt_profile *p = (tt_profile *)tt_calloc(1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    tt_error err;
    ck_assert_msg(tt_profile_read(json, p, &err) == TT_OK, "%s", err.msg);
    tt_assume a;
    ck_assert_msg(tt_assume_parse(json, &a, &err) == TT_OK, "%s", err.msg);
    ck_assert(a.h2d_gbs == p->h2d_pinned_gbs && a.d2h_gbs == p->d2h_pinned_gbs && a.launch_us == p->launch_s * 1e6);
    ck_assert(a.n_gemms == 8 && a.other_rows == 64 && a.other_count == 7);
    tt_free(p);
    /* the what-if on it, and the refusals around --json */
    snprintf(args, sizeof args, "probe --assume %s", json);
    tt_test_expect(args, 0, "", out, errp);
    ck_assert_msg(strstr(tt_test_slurp(out), "PREDICTED from measured figures"), "%s", tt_test_slurp(out));
    /* the what-if from this measured profile, as data: the predictions gpu-check --bundle holds against the steps */
    snprintf(args, sizeof args, "probe --assume %s --json %s", json, path_in_tmp("x.json"));
    tt_test_expect(args, 0, "", out, errp);
    ck_assert_msg(strstr(tt_test_slurp(path_in_tmp("x.json")), "\"schema\":\"towertrain-whatif\""), "%s",
                  tt_test_slurp(path_in_tmp("x.json")));
    snprintf(args, sizeof args, "probe --device cpu --batch 64 --reps 2 --json %s", tmp); /* a directory */
    tt_test_expect(args, 1, "--json", out, errp);
}
END_TEST

/* Hostile profiles: each mutation of a valid one is refused (TT_ERR_FORMAT) with one line naming the field. */
START_TEST(test_profile_hostile)
{
    tt_profile *p = (tt_profile *)tt_calloc(1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    mlp_profile(p, SEC);
    const char *good = path_in_tmp("good.json");
    write_profile(good, p);
    size_t n;
    char *text = (char *)tt_test_read_file(good, &n);
    {
        tt_error e0;
        ck_assert_msg(tt_profile_parse(text, n, "good", p, &e0) == TT_OK, "the valid profile: %s", e0.msg);
    }
    static const struct {
        const char *from, *to, *named;
    } BAD[] = {
        {"\"m\":256, \"n\":10, \"k\":256", "\"m\":\"256\", \"n\":10, \"k\":256",
         "gemms[2].m: a string, not an integer"},
        {"\"h2d_pinned_gbs\":20", "\"h2d_pinned_gbs\":-3", "links.h2d_pinned_gbs: -3 is not > 0"},
        {"\"h2d_pinned_gbs\":20", "\"h2d_pinned_gbs\":0", "links.h2d_pinned_gbs: 0 is not > 0"},
        {"\"h2d_pinned_gbs\":20", "\"h2d_pinned_gbs\":NaN", "is not JSON"},
        {"\"h2d_pinned_gbs\":20", "\"h2d_pinned_gbs\":null", "links.h2d_pinned_gbs: null, not a number"},
        {"\"h2d_pinned_gbs\":20", "\"h2d_pinned_gbs\":1e999", "links.h2d_pinned_gbs"},
        {"\"kernel_s\":3.9999999999999998e-06", "\"kernel_s\":0", "launch.kernel_s: 0 is not > 0"},
        {"\"seconds\":1.4", "\"seconds\":-1.4", "gemms[0].seconds: -1.4"},
        {", \"copy_s\":9.0000000000000002e-06", "", "links.copy_s: missing"},
        {"\"device\":", "\"bogus\":1, \"device\":", "bogus: an unknown key"},
        {"\"m\":256, \"n\":256, \"k\":784", "\"m\":0, \"n\":256, \"k\":784", "gemms[0].m: 0 is outside 1..2147483647"},
        {"\"m\":256, \"n\":256, \"k\":784", "\"m\":3000000000, \"n\":256, \"k\":784",
         "gemms[0].m: 3000000000 is outside"},
        {"\"m\":256, \"n\":256, \"k\":784", "\"m\":2000000000, \"n\":2000000000, \"k\":784",
         "gemms[0]: m x n x k = 2000000000 x 2000000000 x 784 is beyond"},
        {"\"m\":256, \"n\":256, \"k\":784", "\"m\":256, \"n\":256, \"k\":256", "gemms[1]: the shape of gemms[0] again"},
        {"\"m\":256, \"n\":256, \"k\":784", "\"m\":256, \"m\":256, \"k\":784", "repeats a key"},
        {"\"trans_a\":0", "\"trans_a\":2", "gemms[0].trans_a: 2 is outside 0..1"},
        {"\"schema\":\"towertrain-probe\"", "\"schema\":\"other\"", "not a towertrain probe profile"},
        {"\"version\":1", "\"version\":2", "version: 2, this build reads version 1"},
        {"\"rows\":256", "\"rows\":255", "rows: 255, but a batch of 256"},
        {"\"optimizer\":\"adam\"", "\"optimizer\":\"lion\"", "optimizer: not an optimizer"},
        {"\"reduce\":\"cpu\"", "\"reduce\":\"ring\"", "steps[0].reduce: 'ring' is not one of its names"},
        {"\"graphs\":true", "\"graphs\":1", "steps[1].graphs: an integer, not true or false"},
        {"\"gemms\":[", "\"gemms\":{\"a\":1}, \"x\":[", "gemms: an object, not an array"},
        {"\"phases\":{", "\"phases\":[], \"y\":{", "phases: an array, not an object"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        const char *at = strstr(text, BAD[i].from);
        ck_assert_msg(at != NULL, "case %zu: '%s' is not in the valid profile:\n%s", i, BAD[i].from, text);
        static char bad[1 << 16];
        const size_t pre = (size_t)(at - text), fl = strlen(BAD[i].from), tl = strlen(BAD[i].to);
        ck_assert(n - fl + tl < sizeof bad);
        memcpy(bad, text, pre);
        memcpy(bad + pre, BAD[i].to, tl);
        memcpy(bad + pre + tl, at + fl, n - pre - fl);
        tt_error err;
        err.msg[0] = '\0';
        const tt_status st = tt_profile_parse(bad, n - fl + tl, "bad.json", p, &err);
        ck_assert_msg(st == TT_ERR_FORMAT, "case %zu (%s): status %d: %s", i, BAD[i].to, st, err.msg);
        ck_assert_msg(strstr(err.msg, BAD[i].named) && strncmp(err.msg, "bad.json: ", 10) == 0 &&
                          !strchr(err.msg, '\n'),
                      "case %zu: '%s' does not say '%s'", i, err.msg, BAD[i].named);
    }
    /* truncated anywhere: refused, never half-read */
    for (size_t cut = 0; cut < n; cut += 97) {
        tt_error err;
        ck_assert_msg(tt_profile_parse(text, cut, "cut.json", p, &err) == TT_ERR_FORMAT, "cut at %zu accepted", cut);
    }
    /* a report holding the probe's object under "probe": read; other keys of the report are its own */
    static char report[1 << 17];
    snprintf(report, sizeof report, "{\"tool\":\"gpu-check\", \"ok\":true, \"probe\":%.*s}", (int)n, text);
    tt_error err;
    ck_assert_msg(tt_profile_parse(report, strlen(report), "report.json", p, &err) == TT_OK, "%s", err.msg);
    ck_assert(p->n_gemms == 8 && p->h2d_pinned_gbs == 20);
    /* tools/gpu-check --bundle keeps one per model under "probe": one is read, of two none is chosen */
    snprintf(report, sizeof report, "{\"tool\":\"gpu-check\", \"probe\":{\"mlp\":%.*s}}", (int)n, text);
    ck_assert_msg(tt_profile_parse(report, strlen(report), "report.json", p, &err) == TT_OK, "%s", err.msg);
    ck_assert(p->n_gemms == 8);
    snprintf(report, sizeof report, "{\"probe\":{\"mlp\":%.*s, \"cnn\":%.*s}}", (int)n, text, (int)n, text);
    ck_assert_int_eq(tt_profile_parse(report, strlen(report), "report.json", p, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "probe: holds 2 profiles (mlp, cnn)"), "%s", err.msg);
    snprintf(report, sizeof report, "{\"probe\":{\"mlp\":{\"schema\":\"towertrain-probe\", \"version\":1}}}");
    ck_assert_int_eq(tt_profile_parse(report, strlen(report), "report.json", p, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "report.json: probe.mlp.towertrain: missing"), "%s", err.msg);
    snprintf(report, sizeof report, "{\"probe\":3}");
    ck_assert_int_eq(tt_profile_parse(report, strlen(report), "report.json", p, &err), TT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "probe: not an object"), "%s", err.msg);
    snprintf(report, sizeof report, "[1, 2]");
    ck_assert_int_eq(tt_profile_parse(report, strlen(report), "list.json", p, &err), TT_ERR_FORMAT);

    /* files: a directory, a FIFO (refused without blocking), a dangling link, one over the size limit; a link to
     * the good file is followed, as for every input */
    const char *dirp = path_in_tmp("adir.json"), *fifo = path_in_tmp("fifo.json"), *dang = path_in_tmp("dangling.json");
    const char *huge = path_in_tmp("huge.json"), *link = path_in_tmp("link.json");
    ck_assert(mkdir(dirp, 0755) == 0 && mkfifo(fifo, 0644) == 0 && symlink("nowhere.json", dang) == 0);
    ck_assert(symlink(good, link) == 0);
    const int fd = open(huge, O_WRONLY | O_CREAT, 0644);
    ck_assert(fd >= 0 && ftruncate(fd, (off_t)TT_PROFILE_MAX_BYTES + 1) == 0 && close(fd) == 0);
    const struct {
        const char *path, *named;
        tt_status st;
    } FILES[] = {{dirp, "not a regular file (a directory)", TT_ERR_IO},
                 {fifo, "not a regular file (a FIFO)", TT_ERR_IO},
                 {dang, "dangling.json", TT_ERR_IO},
                 {huge, "larger than the limit", TT_ERR_FORMAT}};
    for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
        tt_assume a;
        err.msg[0] = '\0';
        ck_assert_msg(tt_assume_parse(FILES[i].path, &a, &err) == FILES[i].st, "%s: %s", FILES[i].path, err.msg);
        ck_assert_msg(strstr(err.msg, FILES[i].named) && !strchr(err.msg, '\n'), "%s: '%s'", FILES[i].path, err.msg);
    }
    tt_assume a;
    ck_assert_msg(tt_assume_parse(link, &a, &err) == TT_OK, "%s", err.msg);
    free(text);
    tt_free(p);
}
END_TEST

/* h200-measured against docs/whatif.md's table "Predicted against measured on the H200": the mlp (784-256-256-10,
 * 1 tower, batch 256, Adam) under each design the H200 ran, and the cnn (CIFAR-10's 32x32x3, batch 128). The
 * numbers here are the doc's, to the 0.001 ms it prints: a change to the model or the profile moves them, and the
 * doc must move with it. */
START_TEST(test_h200_measured_pinned)
{
    tt_assume a;
    tt_error err;
    ck_assert_msg(tt_assume_parse("h200-measured", &a, &err) == TT_OK, "%s", err.msg);
    const struct {
        const char *model;
        size_t batch;
        tt_reduce r;
        tt_update u;
        int graphs, overlap;
        double ms;
    } ROWS[] = {
        {"mlp", 256, TT_REDUCE_CPU, TT_UPDATE_HOST, 0, 0, 0.408},
        {"mlp", 256, TT_REDUCE_CPU, TT_UPDATE_HOST, 1, 0, 0.387},
        {"mlp", 256, TT_REDUCE_CPU, TT_UPDATE_HOST, 0, 1, 0.390},
        {"mlp", 256, TT_REDUCE_DEVICE, TT_UPDATE_DEVICE, 1, 0, 0.304},
        {"mlp", 256, TT_REDUCE_NCCL, TT_UPDATE_DEVICE, 1, 0, 0.344},
        {"cnn", 128, TT_REDUCE_CPU, TT_UPDATE_HOST, 0, 0, 3.945},
        {"cnn", 128, TT_REDUCE_DEVICE, TT_UPDATE_DEVICE, 1, 0, 3.367},
    };
    for (size_t i = 0; i < sizeof ROWS / sizeof ROWS[0]; i++) {
        tt_model m;
        tt_model_input in;
        ck_assert_msg(tt_model_default_input(ROWS[i].model, &in, &err) == TT_OK, "%s", err.msg);
        ck_assert_msg(tt_model_builtin(&m, ROWS[i].model, &in, &err) == TT_OK, "%s", err.msg);
        tt_assume ag = a;
        ag.graphs = ROWS[i].graphs;
        ag.overlap = ROWS[i].overlap;
        tt_step_times t;
        ck_assert(tt_assume_update_step(&ag, &m, 1, ROWS[i].batch, TT_OPT_ADAM, ROWS[i].r, ROWS[i].u, &t));
        ck_assert_msg(fabs(1e3 * t.total - ROWS[i].ms) <= 0.0005 + 1e-9,
                      "row %zu (%s): predicted %.4f ms, the doc says %.3f", i, ROWS[i].model, 1e3 * t.total,
                      ROWS[i].ms);
    }
    /* the mlp's compute phase: 3 GEMMs from the table, 5 by gemm_eff, its 7 other kernels measured */
    tt_model m;
    seed_mlp(&m);
    tt_assume_compute cc;
    tt_assume_compute_cost(&a, &m, 256, &cc);
    ck_assert(cc.from_table == 3 && cc.gemm_calls == 8 && cc.other_measured && cc.kernels == 15);
}
END_TEST

/* The fuzz target's seeds (tests/fuzz/corpus/profile): every ok-* is read, every bad-* refused, so the corpus does
 * not go stale when the schema changes. */
START_TEST(test_profile_corpus)
{
    DIR *d = opendir(TT_PROFILE_CORPUS);
    ck_assert_ptr_nonnull(d);
    tt_profile *p = (tt_profile *)tt_calloc(1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    size_t ok = 0, bad = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const int want_ok = strncmp(e->d_name, "ok-", 3) == 0, want_bad = strncmp(e->d_name, "bad-", 4) == 0;
        if (!want_ok && !want_bad) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", TT_PROFILE_CORPUS, e->d_name);
        tt_error err;
        const tt_status s = tt_profile_read(path, p, &err);
        ck_assert_msg(want_ok ? s == TT_OK : s == TT_ERR_FORMAT, "%s: status %d (%s)", e->d_name, s, err.msg);
        ok += want_ok, bad += want_bad;
    }
    closedir(d);
    tt_free(p);
    ck_assert_msg(ok >= 2 && bad >= 8, "%zu ok, %zu bad seeds", ok, bad);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("assume");
    TCase *tc = tcase_create("what-if");
    tcase_add_test(tc, test_parse_valid);
    tcase_add_test(tc, test_parse_invalid);
    tcase_add_test(tc, test_probe_by_hand);
    tcase_add_test(tc, test_precision_by_hand);
    tcase_add_test(tc, test_launches_match_stand_in);
    tcase_add_test(tc, test_probe_edges);
    tcase_add_test(tc, test_update_by_hand);
    tcase_add_test(tc, test_overlap_by_hand);
    tcase_add_test(tc, test_probe_monotonic);
    tcase_add_test(tc, test_report);
    tcase_add_test(tc, test_gemm_list);
    tcase_add_test(tc, test_h200_measured_pinned);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("measured profiles");
    tcase_add_checked_fixture(tp, tmp_setup, NULL);
    tcase_add_test(tp, test_profile_round_trip);
    tcase_add_test(tp, test_profile_table_used);
    tcase_add_test(tp, test_profile_hostile);
    tcase_add_test(tp, test_profile_corpus);
    tcase_add_test(tp, test_probe_json_cpu);
    suite_add_tcase(s, tp);
    return tt_test_run_suite(s);
}
