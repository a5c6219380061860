/* test_e2e.c — end to end on real data: the seed MLP on a slice of Fashion-MNIST with 2 towers. The loss must
 * fall and test accuracy pass 70% (a working setup reaches ~80% here; chance is 10%). Skips (77) if Debian's
 * dataset-fashion-mnist is not installed. `test_e2e cuda` (CTest test_e2e_cuda) trains on the CUDA backend instead,
 * without forking (CUDA does not survive a fork); it is a visible skip without a GPU, a failure under
 * TT_REQUIRE_GPU=1. */
#include <sys/stat.h>

#include "tt_backend.h"
#include "tt_test.h"
#include "tt_train.h"

static const char *g_device = "cpu"; /* the backend: never the default, auto, which depends on the machine */

/* Trains `model` on a Fashion-MNIST slice (2 towers, quiet, on the backend under test); the caller frees. The run's
 * loss must fall from the first epoch to the last and its test accuracy pass 70% (chance is 10%). */
static tt_run_result *train_slice(const char *model, size_t batch, size_t epochs, size_t train, size_t test)
{
    tt_run_config c;
    tt_run_config_defaults(&c);
    c.device = g_device;
    c.data = "fashion-mnist";
    c.model = model;
    c.towers = 2;
    c.batch = batch;
    c.epochs = epochs;
    c.train_samples = train;
    c.val_samples = 1000;
    c.test_samples = test;
    c.progress = TT_PROGRESS_QUIET;
    tt_run_result *r = (tt_run_result *)tt_calloc(1, sizeof *r);
    tt_error err;
    ck_assert_msg(tt_run(&c, NULL, r, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(r->n_epochs, epochs);
    ck_assert_msg(r->epochs[epochs - 1].loss < r->epochs[0].loss, "%s: loss did not fall: %g -> %g", model,
                  r->epochs[0].loss, r->epochs[epochs - 1].loss);
    ck_assert_msg(r->test.accuracy > 0.70, "%s: test accuracy %g", model, r->test.accuracy);
    ck_assert_uint_eq(r->test.n, test);
    return r;
}

/* The seed MLP (a working setup reaches ~80% here). */
START_TEST(test_fashion_mnist_slice)
{
    tt_run_result *r = train_slice("mlp", 64, 3, 6000, 2000);
    ck_assert_msg(r->epochs[2].val.accuracy > 0.70, "val accuracy %g", r->epochs[2].val.accuracy);
    tt_free(r->final_params);
    tt_free(r);
}
END_TEST

/* The built-in cnn (dropout on): 2 epochs of 4,000 images (a working cnn reaches ~80% here; about 20 s on 2 cores). */
START_TEST(test_cnn_fashion_mnist_slice)
{
    tt_run_result *r = train_slice("cnn", 128, 2, 4000, 1000);
    ck_assert_uint_eq(r->n_params, 889834); /* 28x28x1 input: 1600 features reach the 512-unit dense layer */
    tt_free(r->final_params);
    tt_free(r);
}
END_TEST

/* Usage: test_e2e [cpu|cuda] (default cpu). */
int main(int argc, char **argv)
{
    g_device = argc > 1 ? argv[1] : "cpu";
    const int is_cpu = strcmp(g_device, "cpu") == 0;
    if (!is_cpu) { /* before the data: a missing GPU is the reason that counts under TT_REQUIRE_GPU=1 */
        tt_backend be;
        tt_error err;
        if (tt_backend_open(g_device, NULL, &be, &err) != TT_OK) return tt_test_skip_no_gpu("e2e on a GPU", err.msg);
    }
    struct stat st;
    if (stat(TT_FASHION_MNIST_DIR, &st) != 0) {
        printf("SKIP: %s not found (apt-get install dataset-fashion-mnist)\n", TT_FASHION_MNIST_DIR);
        return 77;
    }
    /* two cases, so CK_RUN_CASE=mlp can run the first alone (the CPU stand-in: its cnn slice takes minutes under
     * ASan, and test_sim_train holds its cnn to the CPU backend's numbers instead) */
    Suite *s = suite_create(g_device);
    TCase *mlp = tcase_create("mlp"), *cnn = tcase_create("cnn");
    tcase_set_timeout(mlp, 300);
    tcase_set_timeout(cnn, 300);
    tcase_add_test(mlp, test_fashion_mnist_slice);
    tcase_add_test(cnn, test_cnn_fashion_mnist_slice);
    suite_add_tcase(s, mlp);
    suite_add_tcase(s, cnn);
    return tt_test_run_suite_mode(s, is_cpu ? CK_FORK_GETENV : CK_NOFORK); /* CUDA was initialised: no fork */
}
