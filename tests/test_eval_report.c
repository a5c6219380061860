/* test_eval_report.c — `towertrain eval`'s report on data whose every prediction is known: a checkpoint of a one-layer
 * model (dense units=3 on 2x2 images, an npy:DIR data set) trained for an epoch, then given weights that make the prediction the index of
 * the brightest of the first three pixels (kernel = identity on them, zero bias), and a test split built so that
 * the confusion matrix (rows: the true class, columns: the predicted one) is
 *
 *        3 2 0
 *        0 2 1
 *        1 1 4
 *
 * — not symmetric, so a transposed matrix differs; per class precision (column) and recall (row) differ too:
 * precision 3/4, 2/5, 4/5 and recall 3/5, 2/3, 4/6; accuracy 9/14. The printed table and matrix and the --log-json "eval" object
 * must say exactly that. Not for: eval's refusals and its agreement with train's test figures (test_cli.c). */
#include <dirent.h>
#include <sys/wait.h>

#include <json-c/json.h>

#include "tt_checkpoint.h"
#include "tt_test.h"

enum { C = 3, D = 4, N_TRAIN = 30, N_TEST = 14 };
static const size_t CONF[C][C] = {{3, 2, 0}, {0, 2, 1}, {1, 1, 4}};

static char dir[512], out_path[1024], err_path[1024];

static int run(const char *args) { return tt_test_run(args, out_path, err_path); }

/* DIR/name as np.save writes a uint8 array of the given shape ("(14, 2, 2)"): version 1.0, the header padded with
 * blanks and a newline to a multiple of 64 bytes. */
static void write_npy(const char *name, const char *shape, const unsigned char *data, size_t n)
{
    char p[1024], hdr[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int len = snprintf(hdr, sizeof hdr, "{'descr': '|u1', 'fortran_order': False, 'shape': %s, }", shape);
    ck_assert(len > 0 && len < 100);
    while ((10 + len + 1) % 64) hdr[len++] = ' ';
    hdr[len++] = '\n';
    unsigned char *buf = (unsigned char *)malloc(10 + (size_t)len + n);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(len & 0xff);
    buf[9] = (unsigned char)(len >> 8);
    memcpy(buf + 10, hdr, (size_t)len);
    memcpy(buf + 10 + len, data, n);
    tt_test_write(p, buf, 10 + (size_t)len + n);
    free(buf);
}

/* The data: training samples of every class (their values do not matter: the weights are set afterwards); test
 * samples (true t, predicted p) as CONF counts them, pixel p the brightest of the first three. */
static void make_data(void)
{
    unsigned char tri[N_TRAIN * D], trl[N_TRAIN], tei[N_TEST * D], tel[N_TEST];
    tt_rng r;
    tt_rng_seed(&r, 5, 1);
    for (size_t i = 0; i < N_TRAIN; i++) {
        trl[i] = (unsigned char)(i % C);
        for (size_t j = 0; j < D; j++) tri[i * D + j] = (unsigned char)tt_rng_below(&r, 256);
    }
    size_t s = 0;
    for (size_t t = 0; t < C; t++)
        for (size_t p = 0; p < C; p++)
            for (size_t k = 0; k < CONF[t][p]; k++, s++) {
                tel[s] = (unsigned char)t;
                for (size_t j = 0; j < D; j++) tei[s * D + j] = (unsigned char)(10 + tt_rng_below(&r, 90));
                tei[s * D + p] = 200;
                tei[s * D + 3] = 255; /* the fourth pixel: no weight */
            }
    ck_assert_uint_eq(s, N_TEST);
    char shape[32];
    snprintf(shape, sizeof shape, "(%d, 2, 2)", N_TRAIN);
    write_npy("x_train.npy", shape, tri, sizeof tri);
    snprintf(shape, sizeof shape, "(%d,)", N_TRAIN);
    write_npy("y_train.npy", shape, trl, sizeof trl);
    snprintf(shape, sizeof shape, "(%d, 2, 2)", N_TEST);
    write_npy("x_test.npy", shape, tei, sizeof tei);
    snprintf(shape, sizeof shape, "(%d,)", N_TEST);
    write_npy("y_test.npy", shape, tel, sizeof tel);
}

/* The periodic checkpoint a one-epoch run left in ck_dir, its kernel then set to the identity on the first three
 * pixels and its bias to zero (the optimizer's slots as they were). */
static void make_checkpoint(const char *ck_dir, const char *model_file, char *path, size_t len)
{
    char args[4096];
    snprintf(args, sizeof args, "train --device cpu --data npy:%s --val-samples 6 --epochs 1 --batch 8 --model %s "
             "--checkpoint-dir %s --progress quiet", dir, model_file, ck_dir);
    ck_assert_msg(run(args) == 0, "%s", tt_test_slurp(err_path));
    DIR *dh = opendir(ck_dir);
    ck_assert_ptr_nonnull(dh);
    struct dirent *de;
    path[0] = '\0';
    while ((de = readdir(dh)) != NULL)
        if (strncmp(de->d_name, "ckpt-e", 6) == 0) snprintf(path, len, "%s/%s", ck_dir, de->d_name);
    closedir(dh);
    ck_assert_msg(path[0], "no checkpoint in %s", ck_dir);
    tt_model m;
    tt_error err;
    tt_model_input in = {tt_shape3(2, 2, 1), C, 0};
    ck_assert_msg(tt_model_parse(&m, "dense units=3\n", "model.txt", &in, &err) == TT_OK, "%s", err.msg);
    tt_checkpoint ck;
    ck_assert_msg(tt_checkpoint_read(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(m.n_tensors, 2);
    ck_assert_uint_eq(m.n_params, D * C + C);
    float *kernel = ck.params + m.tensors[0].offset, *bias = ck.params + m.tensors[1].offset;
    for (size_t j = 0; j < D; j++)
        for (size_t c = 0; c < C; c++) kernel[j * C + c] = j == c ? 1.0f : 0.0f; /* (D, C): Keras's layout */
    for (size_t c = 0; c < C; c++) bias[c] = 0.0f;
    ck_assert_msg(tt_checkpoint_write(path, &m, &ck, &err) == TT_OK, "%s", err.msg);
    tt_checkpoint_free(&ck);
}

START_TEST(test_eval_known_confusion)
{
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    make_data();
    char model_file[1024], ck_dir[1024], path[2048], log[1024], args[8192];
    snprintf(model_file, sizeof model_file, "%s/model.txt", dir);
    tt_test_write_str(model_file, "dense units=3\n");
    snprintf(ck_dir, sizeof ck_dir, "%s/ck", dir);
    make_checkpoint(ck_dir, model_file, path, sizeof path);
    snprintf(log, sizeof log, "%s/eval.json", dir);
    snprintf(args, sizeof args, "eval --device cpu --checkpoint %s --data npy:%s --batch 5 --towers 2 --log-json %s", path,
             dir, log);
    ck_assert_msg(run(args) == 0, "%s", tt_test_slurp(err_path));

    /* what each class's row must say */
    double prec[C], rec[C];
    size_t support[C], tp_all = 0;
    for (size_t k = 0; k < C; k++) {
        size_t row = 0, col = 0;
        for (size_t j = 0; j < C; j++) {
            row += CONF[k][j];
            col += CONF[j][k];
        }
        support[k] = row;
        prec[k] = (double)CONF[k][k] / (double)col;
        rec[k] = (double)CONF[k][k] / (double)row;
        tp_all += CONF[k][k];
        ck_assert(fabs(prec[k] - rec[k]) > 0.05); /* the data tell them apart */
    }

    /* stdout: "accuracy 0.5294", the table, the matrix */
    char *o = tt_test_slurp(out_path), want[64];
    snprintf(want, sizeof want, "accuracy %.4f", (double)tp_all / N_TEST);
    ck_assert_msg(strstr(o, want) != NULL, "eval's accuracy is not %s: %s", want, o);
    const char *t = strstr(o, "precision");
    ck_assert_msg(t && (t = strchr(t, '\n')) != NULL, "no class table: %s", o);
    for (size_t k = 0; k < C; k++) {
        size_t cls, sup;
        double p, r;
        ck_assert_msg(sscanf(t + 1, "%zu %lf %lf %zu", &cls, &p, &r, &sup) == 4, "class row %zu: %s", k, t + 1);
        ck_assert_msg(cls == k && fabs(p - prec[k]) < 6e-5 && fabs(r - rec[k]) < 6e-5 && sup == support[k],
                      "class %zu: printed precision %.4f recall %.4f support %zu; want %.4f %.4f %zu", k, p, r, sup,
                      prec[k], rec[k], support[k]);
        t = strchr(t + 1, '\n');
        ck_assert_ptr_nonnull(t);
    }
    t = strstr(o, "confusion matrix (rows: true class, columns: predicted)");
    ck_assert_msg(t != NULL, "no confusion matrix: %s", o);
    t = strchr(t, '\n');
    t = t ? strchr(t + 1, '\n') : NULL; /* the column numbers */
    ck_assert_ptr_nonnull(t);
    for (size_t k = 0; k < C; k++) {
        size_t row, v[C];
        ck_assert_msg(sscanf(t + 1, "%zu %zu %zu %zu", &row, &v[0], &v[1], &v[2]) == 4, "matrix row %zu: %s", k, t);
        for (size_t j = 0; j < C; j++)
            ck_assert_msg(row == k && v[j] == CONF[k][j], "printed matrix row %zu: %zu %zu %zu, want %zu %zu %zu", k,
                          v[0], v[1], v[2], CONF[k][0], CONF[k][1], CONF[k][2]);
        t = strchr(t + 1, '\n');
        ck_assert_ptr_nonnull(t);
    }

    /* the JSON log's eval object says the same */
    json_object *e = json_object_from_file(log), *v, *classes, *conf;
    ck_assert_msg(e != NULL, "%s: not one JSON object", log);
    ck_assert(json_object_object_get_ex(e, "event", &v) && strcmp(json_object_get_string(v), "eval") == 0);
    ck_assert(json_object_object_get_ex(e, "samples", &v) && json_object_get_int64(v) == N_TEST);
    ck_assert(json_object_object_get_ex(e, "accuracy", &v) &&
              fabs(json_object_get_double(v) - (double)tp_all / N_TEST) < 1e-6);
    ck_assert(json_object_object_get_ex(e, "classes", &classes) && json_object_array_length(classes) == C);
    ck_assert(json_object_object_get_ex(e, "confusion", &conf) && json_object_array_length(conf) == C);
    for (size_t k = 0; k < C; k++) {
        json_object *c = json_object_array_get_idx(classes, k), *row = json_object_array_get_idx(conf, k);
        ck_assert(json_object_object_get_ex(c, "class", &v) && json_object_get_int64(v) == (int64_t)k);
        ck_assert_msg(json_object_object_get_ex(c, "precision", &v) && fabs(json_object_get_double(v) - prec[k]) < 1e-6,
                      "log: class %zu precision %s, want %g", k, json_object_to_json_string(c), prec[k]);
        ck_assert_msg(json_object_object_get_ex(c, "recall", &v) && fabs(json_object_get_double(v) - rec[k]) < 1e-6,
                      "log: class %zu recall %s, want %g", k, json_object_to_json_string(c), rec[k]);
        ck_assert_msg(json_object_object_get_ex(c, "support", &v) && json_object_get_int64(v) == (int64_t)support[k],
                      "log: class %zu support %s, want %zu", k, json_object_to_json_string(c), support[k]);
        ck_assert(json_object_is_type(row, json_type_array) && json_object_array_length(row) == C);
        for (size_t j = 0; j < C; j++)
            ck_assert_msg(json_object_get_int64(json_object_array_get_idx(row, j)) == (int64_t)CONF[k][j],
                          "log: confusion row %zu is %s, want %zu %zu %zu", k, json_object_to_json_string(row),
                          CONF[k][0], CONF[k][1], CONF[k][2]);
    }
    json_object_put(e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("eval_report");
    TCase *tc = tcase_create("known");
    tcase_add_test(tc, test_eval_known_confusion);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
