/* test_compat.c — the compatibility table (src/step/compat.c): every refusal of tt_trainer_check, word for word, for
 * a configuration that breaks exactly one rule, and the first rule winning where two break. The expected lines are
 * the ones the checks wrote before they became a table (commit d0cbea4's trainer.c), so a row that changes its words
 * fails here. Also: the configurations next to each refused one (the one fact taken away) pass. */
#include "tt_test.h"

#include "tt_node.h"

static tt_status fake_peer_setup(const int *ords, int n, int *link, tt_error *err)
{
    (void)ords, (void)n, (void)link, (void)err;
    return TT_OK;
}
static tt_status fake_comm_init(void **comm, void *const *ctxs, int n, tt_error *err)
{
    (void)comm, (void)ctxs, (void)n, (void)err;
    return TT_OK;
}
static void fake_capture_begin(void *ctx) { (void)ctx; }

static tt_dev_ops g_gpu;       /* a GPU backend as the checks see it: peers and graphs, no NCCL */
static tt_dev_ops g_gpu_nccl;  /* and with NCCL */
static tt_node g_two_ranks;    /* a job of two ranks */
static tt_dataset g_set;

static void setup(void)
{
    g_gpu = tt_dev_cpu_ops;
    g_gpu.name = "cuda";
    g_gpu.peer_setup = fake_peer_setup;
    g_gpu.capture_begin = fake_capture_begin;
    g_gpu.comm_init = NULL;
    g_gpu_nccl = g_gpu;
    g_gpu_nccl.comm_init = fake_comm_init;
    memset(&g_two_ranks, 0, sizeof g_two_ranks);
    g_two_ranks.size = 2;
}

/* The plainest configuration: 2 towers on 2 GPUs of the cpu backend, bsp, cpu + host. */
static tt_trainer_config base(void)
{
    tt_trainer_config c;
    memset(&c, 0, sizeof c);
    c.ops = &tt_dev_cpu_ops;
    c.n_devices = 2;
    c.n_towers = 2;
    c.batch = 8;
    c.optim.kind = TT_OPT_SGD;
    return c;
}

typedef struct compat_case {
    const char *name;
    void (*make)(tt_trainer_config *c); /* from base() */
    const char *say;                    /* the refusal, word for word (NULL: accepted) */
} compat_case;

#define ROWS                                                                                                        \
    X(cpu_no_nccl, c->reduce = TT_REDUCE_NCCL,                                                                      \
      "--reduce nccl: the cpu backend has no NCCL (use --reduce cpu, device or allreduce)")                         \
    X(gpu_no_nccl, (c->ops = &g_gpu, c->reduce = TT_REDUCE_NCCL),                                                   \
      "--reduce nccl: the cuda backend of this build has no NCCL (rebuild with NCCL found) (use --reduce cpu, "      \
      "device or allreduce)")                                                                                       \
    X(nccl_shared, (c->ops = &g_gpu_nccl, c->reduce = TT_REDUCE_NCCL, c->n_towers = 3),                             \
      "--reduce nccl: needs one GPU per tower, and 3 towers share 2 GPUs (use --towers 2, or --reduce "             \
      "device/allreduce for virtual towers)")                                                                       \
    X(nccl_one_gpu, (c->ops = &g_gpu_nccl, c->reduce = TT_REDUCE_NCCL, c->n_devices = 1),                           \
      "--reduce nccl: needs one GPU per tower, and 2 towers share 1 GPU (use --towers 1, or --reduce "              \
      "device/allreduce for virtual towers)")                                                                       \
    X(nccl_ok, (c->ops = &g_gpu_nccl, c->reduce = TT_REDUCE_NCCL), NULL)                                            \
    X(slow_graphs, (c->ops = &g_gpu, c->graphs = 1, c->n_slow = 1),                                                 \
      "--slow-tower: not with --graphs on (a replayed graph runs without the host, so nothing can delay its "       \
      "compute)")                                                                                                   \
    X(slow_range, (c->n_slow = 1, c->slow[0].tower = 2), "--slow-tower 2: there are 2 towers (0..1)")               \
    X(slow_range_one, (c->n_slow = 1, c->slow[0].tower = 1, c->n_towers = 1), "--slow-tower 1: there is 1 tower (0)") \
    X(graphs_cpu, c->graphs = 1,                                                                                    \
      "--graphs on: the cpu backend runs every op as it is issued, there is no graph to capture (CUDA graphs: "     \
      "--device cuda)")                                                                                             \
    X(graphs_shared, (c->ops = &g_gpu, c->graphs = 1, c->n_devices = 1),                                            \
      "--graphs on: needs one GPU per tower, and 2 towers share 1 GPU (use --towers 1, or --graphs off for "        \
      "virtual towers)")                                                                                            \
    X(graphs_ok, (c->ops = &g_gpu, c->graphs = 1), NULL)                                                            \
    X(buckets_off, c->bucket_bytes = 1024,                                                                          \
      "--bucket-kib: the buckets are --overlap on's (give --overlap on, or no --bucket-kib)")                       \
    X(overlap_ok, (c->overlap = 1, c->bucket_bytes = 1024), NULL)                                                   \
    X(overlap_device, (c->overlap = 1, c->reduce = TT_REDUCE_DEVICE),                                               \
      "--overlap on: the host sums and updates each bucket as the towers push it, so it needs --reduce cpu and "    \
      "--update host (not --reduce device --update host)")                                                          \
    X(overlap_graphs, (c->ops = &g_gpu, c->overlap = 1, c->graphs = 1),                                             \
      "--overlap on: a tower waits for each bucket's push in the middle of its step, which one graph launch "       \
      "cannot (use --graphs off)")                                                                                  \
    X(overlap_ranks, (c->overlap = 1, c->node = &g_two_ranks),                                                      \
      "--overlap on: under mpirun the ranks combine whole node sums (give --overlap off)")                          \
    X(data_on_no_set, c->data_on = 1, "--data-on device: the trainer was given no training set to hold")            \
    X(data_on_ok, (c->data_on = 1, c->train_set = &g_set), NULL)                                                    \
    X(update_device_cpu, c->update = TT_UPDATE_DEVICE,                                                              \
      "--update device: needs --reduce device or nccl (the sum must end on tower 0's device), not cpu")             \
    X(update_replicated_device, (c->update = TT_UPDATE_REPLICATED, c->reduce = TT_REDUCE_DEVICE),                   \
      "--update replicated: needs --reduce allreduce or nccl (every tower needs the sum), not device")               \
    X(update_device_ok, (c->update = TT_UPDATE_DEVICE, c->reduce = TT_REDUCE_DEVICE), NULL)                         \
    X(update_ranks, (c->update = TT_UPDATE_DEVICE, c->reduce = TT_REDUCE_DEVICE, c->node = &g_two_ranks),           \
      "--update device: under mpirun the ranks combine their sums on the host (give --update host)")                \
    X(round_robin_bsp, c->sync.round_robin = 1,                                                                     \
      "--sync-schedule round-robin: only for --sync ssp:S or async (bsp has one schedule already)")                 \
    X(round_robin_weights, (c->sync.kind = TT_SYNC_WEIGHTS, c->sync.k = 4, c->sync.round_robin = 1),                \
      "--sync-schedule round-robin: only for --sync ssp:S or async (weights:4 has one schedule already)")           \
    X(round_robin_ok, (c->sync.kind = TT_SYNC_ASYNC, c->sync.round_robin = 1), NULL)                                \
    X(ssp_zero, (c->sync.kind = TT_SYNC_SSP, c->sync.k = 0), "--sync ssp:0: the number must be at least 1")         \
    X(ssp_device, (c->sync.kind = TT_SYNC_SSP, c->sync.k = 2, c->reduce = TT_REDUCE_DEVICE),                        \
      "--sync ssp:2: the host applies each tower's gradient from its slot, so it needs --reduce cpu and --update "   \
      "host (not --reduce device --update host)")                                                                   \
    X(weights_update, (c->sync.kind = TT_SYNC_WEIGHTS, c->sync.k = 3, c->reduce = TT_REDUCE_DEVICE,                 \
                       c->update = TT_UPDATE_DEVICE),                                                               \
      "--sync weights:3: the towers update their own weights and the host averages them, so it needs --reduce cpu " \
      "and --update host (not --reduce device --update device)")                                                    \
    X(async_overlap, (c->sync.kind = TT_SYNC_ASYNC, c->overlap = 1),                                                \
      "--sync async: not with --overlap on (its buckets are summed over every tower of a step)")                    \
    X(async_graphs, (c->ops = &g_gpu, c->sync.kind = TT_SYNC_ASYNC, c->graphs = 1),                                 \
      "--sync async: not with --graphs on (a tower's step waits for the master variables' lock, which one graph "   \
      "launch cannot)")                                                                                             \
    X(async_ranks, (c->sync.kind = TT_SYNC_ASYNC, c->node = &g_two_ranks),                                          \
      "--sync async: under mpirun the ranks combine one summed gradient every step (bsp); the master variables of " \
      "another mode live in one process (give --sync bsp)")                                                         \
    X(ssp_ok, (c->sync.kind = TT_SYNC_SSP, c->sync.k = 1), NULL)                                                    \
    X(bn_ranks_one_tower, (c->bn_sync = 1, c->n_towers = 1, c->node = &g_two_ranks),                                \
      "--bn-sync on: the statistics are exchanged between one process's towers, not across mpirun's ranks (give "   \
      "--bn-sync off, or run one rank)")                                                                            \
    X(bn_one_tower_async, (c->bn_sync = 1, c->n_towers = 1, c->sync.kind = TT_SYNC_ASYNC), NULL)                    \
    X(bn_weights, (c->bn_sync = 1, c->sync.kind = TT_SYNC_WEIGHTS, c->sync.k = 2),                                  \
      "--bn-sync on: not with --sync weights:2 (the towers do not meet every step, so there is no global batch to " \
      "take statistics over; give --bn-sync off)")                                                                  \
    X(bn_graphs, (c->ops = &g_gpu, c->bn_sync = 1, c->graphs = 1),                                                  \
      "--bn-sync on: the towers exchange batch statistics in the middle of their forward and backward, which one "  \
      "graph launch cannot (use --graphs off)")                                                                     \
    X(bn_ok, c->bn_sync = 1, NULL)                                                                                  \
    /* two rules broken: the first in the table's order speaks */                                                   \
    X(first_wins, (c->ops = &g_gpu, c->overlap = 1, c->graphs = 1, c->n_slow = 1),                                  \
      "--slow-tower: not with --graphs on (a replayed graph runs without the host, so nothing can delay its "       \
      "compute)")                                                                                                   \
    X(first_wins_sync, (c->sync.kind = TT_SYNC_SSP, c->sync.k = 2, c->overlap = 1),                                 \
      "--sync ssp:2: not with --overlap on (its buckets are summed over every tower of a step)")                    \
    /* the numbers' ranges sit between the combinations, where d0cbea4's checks had them */                         \
    X(nccl_before_slow_range, (c->ops = &g_gpu_nccl, c->reduce = TT_REDUCE_NCCL, c->n_devices = 1, c->n_slow = 1,   \
                               c->slow[0].tower = 2),                                                               \
      "--reduce nccl: needs one GPU per tower, and 2 towers share 1 GPU (use --towers 1, or --reduce "              \
      "device/allreduce for virtual towers)")                                                                       \
    X(slow_graphs_before_range, (c->ops = &g_gpu, c->graphs = 1, c->n_slow = 1, c->slow[0].tower = 1,               \
                                 c->n_towers = 1),                                                                  \
      "--slow-tower: not with --graphs on (a replayed graph runs without the host, so nothing can delay its "       \
      "compute)")                                                                                                   \
    X(slow_range_before_buckets, (c->bucket_bytes = 1024, c->n_slow = 1, c->slow[0].tower = 2),                     \
      "--slow-tower 2: there are 2 towers (0..1)")                                                                  \
    X(slow_range_second, (c->n_slow = 2, c->slow[0].tower = 1, c->slow[1].tower = 5),                               \
      "--slow-tower 5: there are 2 towers (0..1)")                                                                  \
    X(overlap_before_no_set, (c->overlap = 1, c->reduce = TT_REDUCE_DEVICE, c->data_on = 1),                        \
      "--overlap on: the host sums and updates each bucket as the towers push it, so it needs --reduce cpu and "    \
      "--update host (not --reduce device --update host)")                                                          \
    X(no_set_before_update, (c->data_on = 1, c->update = TT_UPDATE_DEVICE),                                         \
      "--data-on device: the trainer was given no training set to hold")                                            \
    X(update_before_ssp_zero, (c->update = TT_UPDATE_DEVICE, c->sync.kind = TT_SYNC_SSP, c->sync.k = 0),            \
      "--update device: needs --reduce device or nccl (the sum must end on tower 0's device), not cpu")             \
    X(ssp_zero_before_overlap, (c->sync.kind = TT_SYNC_SSP, c->sync.k = 0, c->overlap = 1),                         \
      "--sync ssp:0: the number must be at least 1")                                                                \
    X(round_robin_before_zero, (c->sync.kind = TT_SYNC_WEIGHTS, c->sync.k = 0, c->sync.round_robin = 1),            \
      "--sync-schedule round-robin: only for --sync ssp:S or async (weights:0 has one schedule already)")

#define X(nm, body, words) static void make_##nm(tt_trainer_config *c) { body; }
ROWS
#undef X

static const compat_case g_cases[] = {
#define X(nm, body, words) {#nm, make_##nm, words},
    ROWS
#undef X
};

START_TEST(test_compat_words)
{
    const compat_case *k = &g_cases[_i];
    tt_trainer_config c = base();
    k->make(&c);
    const char *want = k->say;
    tt_error err = {0};
    const tt_status s = tt_trainer_check(&c, &err);
    if (!want) {
        ck_assert_msg(s == TT_OK, "%s: refused: %s", k->name, err.msg);
    } else {
        ck_assert_msg(s == TT_ERR_ARG, "%s: accepted, expected: %s", k->name, want);
        ck_assert_msg(strcmp(err.msg, want) == 0, "%s:\n  got  %s\n  want %s", k->name, err.msg, want);
    }
}
END_TEST

/* tt_trainer_init and tt_trainer_plan refuse what tt_trainer_check refuses, in its words. */
START_TEST(test_compat_init_and_plan)
{
    tt_trainer_config c = base();
    c.overlap = 1;
    c.node = &g_two_ranks;
    tt_error e1 = {0}, e2 = {0};
    ck_assert_int_eq(tt_trainer_check(&c, &e1), TT_ERR_ARG);
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    tt_model m;
    memset(&m, 0, sizeof m);
    ck_assert_int_eq(tt_trainer_plan(&m, &c, &plan, &e2), TT_ERR_ARG);
    ck_assert_str_eq(e1.msg, e2.msg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compat");
    TCase *tc = tcase_create("rules");
    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_add_loop_test(tc, test_compat_words, 0, (int)(sizeof g_cases / sizeof g_cases[0]));
    tcase_add_test(tc, test_compat_init_and_plan);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
