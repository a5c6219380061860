/* test_augment.c — --augment (issue 34, item 4): Keras's ImageDataGenerator shifts and horizontal flip in the towers'
 * data phase.
 *
 *   - the formula (include/tt_augment.h) against outputs recorded from Keras 3.15.1's apply_transform
 *     (tools/keras_augment_reference.py): a 4 x 5 x 2 image under eight shifts and flips. scipy interpolates in
 *     float64 and rounds once, tt_augment_pixel in float32: per element |ours - keras| <= 1e-6 (the images are in
 *     [0, 1), float32's ulp there is <= 6e-8; measured at most 1.2e-7, two ulps);
 *   - exactly where it is exact: whole-pixel shifts move pixels (the clamped source pixel, to the bit), a flip twice is
 *     the identity and once the mirror, offsets past the edge read the edge (fill_mode 'nearest');
 *   - the draws: a sample's transform is a function of (seed, epoch, its data-set index) alone, shifts within
 *     [-r x size, r x size), flips half the time (within 4 sigma), another epoch or seed draws anew;
 *   - the trainer: a run of steps with --augment on byte images gives, to the bit, the weights of the same steps
 *     without it on the float32 images the host computes with the header for that epoch — for 1, 2 and 3 towers, with
 *     --data-on host and device and (a backend with graphs) --graphs on: each tower augments exactly its samples' own
 *     transforms, whichever tower and step takes them. So N towers = 1 tower as without augmentation: within the
 *     N-tower bound of test_towers.c (|dw| <= 2e-6 + 1e-5 |w| after 20 steps: the towers' partial sums group the
 *     additions differently), while the augmentation moves the weights by over 100 times that;
 *   - evaluation never augments (the same loss to the bit as a trainer without it), a resumed run (from every
 *     mid-epoch checkpoint) ends with the unbroken run's bits, and a model whose input is not an image is refused in
 *     one line naming --augment.
 * Backends: `test_augment` (or `test_augment cpu`) runs everything on the CPU backend; `test_augment cuda` the
 * trainer's cases on the CUDA backend (CTest test_augment_cuda: the stand-in in CI), without forking — whose kernel
 * must then give the host's bits. */
#include "tt_augment.h"
#include "tt_backend.h"
#include "tt_test.h"
#include "tt_train.h"
#include "tt_trainer.h"

static tt_backend g_be;
static const char *g_device = "cpu";

/* BEGIN keras_augment_reference.py output (Keras 3.15.1, scipy 1.17.1, numpy 2.4.6) */
enum { KH = 4, KW = 5, KC = 2, KCASES = 8 };
static const float KERAS_X[KH * KW * KC] = {
        0.529880464, 0.792828679, 0.115537852, 0.936254978, 0.438247025, 0.924302816, 0.64940238, 0.294820726,
        0.505976081, 0.848605573, 0.776892424, 0.54581672, 0.87649405, 0.0119521916, 0.087649405, 0.956175327,
        0.513944209, 0.605577707, 0.362549812, 0.657370508, 0.633466125, 0.892430305, 0.509960175, 0.872509956,
        0.952191234, 0.151394427, 0.478087664, 0.589641452, 0.553784847, 0.0478087664, 0.163346618, 0.378486067,
        0.992031872, 0.0756972134, 0.645418346, 0.258964151, 0.884462178, 0.836653411, 0.326693237, 0.541832685};
static const struct {
    float dy, dx;
    int flip;
} KERAS_CASE[KCASES] = {
        {0.300000012, -1.70000005, 0}, {-0.449999988, 2.25, 1}, {1.60000002, 0.800000012, 0},
        {-3.20000005, -4.9000001, 1}, {0, 0.5, 1}, {2, -1, 0}, {-0.100000001, 0.100000001, 0},
        {0.699999988, 3.3499999, 1}};
static const float KERAS_Y[KCASES][KH * KW * KC] = {
    {
        0.603984058, 0.718725085, 0.603984058, 0.718725085, 0.525936246, 0.700796783, 0.34059763, 0.741434276,
        0.415776879, 0.770119548, 0.733864546, 0.649800777, 0.733864546, 0.649800777, 0.743665338, 0.53589642,
        0.640677333, 0.403505951, 0.393864542, 0.680557787, 0.49243027, 0.738247037, 0.49243027, 0.738247037,
        0.541075706, 0.706812739, 0.716255009, 0.498525918, 0.782111585, 0.32768923, 0.163346618, 0.378486067,
        0.163346618, 0.378486067, 0.411952168, 0.287649423, 0.888047814, 0.130677283, 0.717131495, 0.432270914},
    {
        0.505976081, 0.848605573, 0.505976081, 0.848605573, 0.505976081, 0.848605573, 0.613545775, 0.433266938,
        0.491035879, 0.766932309, 0.427091628, 0.743426263, 0.427091628, 0.743426263, 0.427091628, 0.743426263,
        0.537948191, 0.535159349, 0.32778883, 0.822808802, 0.467729092, 0.322111547, 0.467729092, 0.322111547,
        0.467729092, 0.322111547, 0.487599611, 0.528137445, 0.545916319, 0.534362555, 0.428884447, 0.319521934,
        0.428884447, 0.319521934, 0.428884447, 0.319521934, 0.633416355, 0.624004006, 0.762998044, 0.339292854},
    {
        0.66342628, 0.57338649, 0.616414368, 0.484302789, 0.515219152, 0.571474135, 0.480318725, 0.352509946,
        0.477290839, 0.291633457, 0.709641457, 0.432350576, 0.774342656, 0.251633465, 0.731155396, 0.633466184,
        0.47840637, 0.422948211, 0.417529881, 0.344223142, 0.826294839, 0.136254981, 0.714741051, 0.222310767,
        0.836653411, 0.721115589, 0.438247025, 0.600796819, 0.326693237, 0.541832685, 0.826294839, 0.136254981,
        0.714741051, 0.222310767, 0.836653411, 0.721115589, 0.438247025, 0.600796819, 0.326693237, 0.541832685},
    {
        0.529880464, 0.792828679, 0.529880464, 0.792828679, 0.529880464, 0.792828679, 0.529880464, 0.792828679,
        0.529880464, 0.792828679, 0.529880464, 0.792828679, 0.529880464, 0.792828679, 0.529880464, 0.792828679,
        0.529880464, 0.792828679, 0.529880464, 0.792828679, 0.529880464, 0.792828679, 0.529880464, 0.792828679,
        0.529880464, 0.792828679, 0.529880464, 0.792828679, 0.529880464, 0.792828679, 0.529880464, 0.792828679,
        0.529880464, 0.792828679, 0.529880464, 0.792828679, 0.529880464, 0.792828679, 0.529880464, 0.792828679},
    {
        0.505976081, 0.848605573, 0.57768923, 0.57171315, 0.543824673, 0.609561801, 0.276892424, 0.930278897,
        0.322709143, 0.864541829, 0.362549812, 0.657370508, 0.438247025, 0.631474137, 0.300796807, 0.780876517,
        0.482071728, 0.484063745, 0.826693237, 0.27888447, 0.553784847, 0.0478087664, 0.515936255, 0.318725109,
        0.715139449, 0.370517939, 0.731075704, 0.511952162, 0.57171315, 0.882470131, 0.326693237, 0.541832685,
        0.605577707, 0.689243078, 0.764940262, 0.547808766, 0.818725109, 0.167330682, 0.57768923, 0.22709164},
    {
        0.633466125, 0.892430305, 0.633466125, 0.892430305, 0.509960175, 0.872509956, 0.952191234, 0.151394427,
        0.478087664, 0.589641452, 0.163346618, 0.378486067, 0.163346618, 0.378486067, 0.992031872, 0.0756972134,
        0.645418346, 0.258964151, 0.884462178, 0.836653411, 0.163346618, 0.378486067, 0.163346618, 0.378486067,
        0.992031872, 0.0756972134, 0.645418346, 0.258964151, 0.884462178, 0.836653411, 0.163346618, 0.378486067,
        0.163346618, 0.378486067, 0.992031872, 0.0756972134, 0.645418346, 0.258964151, 0.884462178, 0.836653411},
    {
        0.488446206, 0.807171285, 0.147808775, 0.935059786, 0.459362566, 0.861354589, 0.635059774, 0.350199223,
        0.505976081, 0.848605573, 0.75701195, 0.523904383, 0.732629478, 0.189243034, 0.16318725, 0.915139496,
        0.512430251, 0.58470118, 0.376892447, 0.676494002, 0.637689233, 0.850637496, 0.578525901, 0.730996013,
        0.827330649, 0.267808765, 0.486972123, 0.542988062, 0.534661353, 0.108764939, 0.283705175, 0.402430296,
        0.917051792, 0.164661363, 0.692868531, 0.304581672, 0.794382513, 0.780000031, 0.349402398, 0.4924303},
    {
        0.405577689, 0.714741051, 0.405577689, 0.714741051, 0.405577689, 0.714741051, 0.405577689, 0.714741051,
        0.50243026, 0.583187222, 0.496414334, 0.230677292, 0.496414334, 0.230677292, 0.496414334, 0.230677292,
        0.496414334, 0.230677292, 0.49149403, 0.467111588, 0.39482072, 0.393625498, 0.39482072, 0.393625498,
        0.39482072, 0.393625498, 0.39482072, 0.393625498, 0.633844674, 0.633426368, 0.326693237, 0.541832685,
        0.326693237, 0.541832685, 0.326693237, 0.541832685, 0.326693237, 0.541832685, 0.689243078, 0.733466208}};
/* END keras_augment_reference.py output */

/* tt_augment_pixel over a whole image under draw d. */
static void augment_image(const float *x, size_t H, size_t W, size_t C, tt_augment_draw d, float *y)
{
    for (size_t i = 0; i < H; i++)
        for (size_t j = 0; j < W; j++)
            for (size_t c = 0; c < C; c++) y[(i * W + j) * C + c] = tt_augment_pixel(x, H, W, C, i, j, c, d);
}

START_TEST(test_formula_against_keras)
{
    float y[KH * KW * KC];
    double worst = 0;
    for (size_t k = 0; k < KCASES; k++) {
        const tt_augment_draw d = {KERAS_CASE[k].dy, KERAS_CASE[k].dx, KERAS_CASE[k].flip};
        augment_image(KERAS_X, KH, KW, KC, d, y);
        for (size_t e = 0; e < KH * KW * KC; e++) {
            const double diff = fabs((double)y[e] - (double)KERAS_Y[k][e]);
            worst = diff > worst ? diff : worst;
            ck_assert_msg(diff <= 1e-6, "case %zu (dy %g, dx %g, flip %d), element %zu: %.9g, Keras %.9g", k,
                          (double)d.dy, (double)d.dx, d.flip, e, (double)y[e], (double)KERAS_Y[k][e]);
        }
    }
    printf("formula against Keras: largest |difference| %.3g over %d cases\n", worst, KCASES);
}
END_TEST

/* An H x W x C image of distinct values. */
static float *distinct_image(size_t H, size_t W, size_t C)
{
    float *x = (float *)tt_malloc(H * W * C * sizeof(float));
    for (size_t e = 0; e < H * W * C; e++) x[e] = 0.001f * (float)(e * 37 % 1009) + 0.0625f;
    return x;
}

static size_t clamp_index(long v, size_t n) { return v < 0 ? 0 : (size_t)v >= n ? n - 1 : (size_t)v; }

/* Whole-pixel offsets, flipped or not, past the edge included: every output is the (clamped) source pixel, bit for
 * bit. */
START_TEST(test_whole_pixel_shifts_move_pixels)
{
    enum { H = 5, W = 7, C = 3 };
    float *x = distinct_image(H, W, C), y[H * W * C];
    for (int dy = -8; dy <= 8; dy++)
        for (int dx = -9; dx <= 9; dx++)
            for (int flip = 0; flip <= 1; flip++) {
                augment_image(x, H, W, C, (tt_augment_draw){(float)dy, (float)dx, flip}, y);
                for (size_t i = 0; i < H; i++)
                    for (size_t j = 0; j < W; j++) {
                        const size_t jj = flip ? W - 1 - j : j;
                        const size_t si = clamp_index((long)i + dy, H), sj = clamp_index((long)jj + dx, W);
                        for (size_t c = 0; c < C; c++)
                            ck_assert_msg(memcmp(&y[(i * W + j) * C + c], &x[(si * W + sj) * C + c], sizeof(float)) ==
                                              0, "dy %d dx %d flip %d: (%zu, %zu, %zu) is %.9g, want (%zu, %zu)'s %.9g",
                                          dy, dx, flip, i, j, c, (double)y[(i * W + j) * C + c], si, sj,
                                          (double)x[(si * W + sj) * C + c]);
                    }
            }
    tt_free(x);
}
END_TEST

/* A flip alone mirrors the columns; twice it gives the image back, to the bit; and it comes after the shift: the
 * flipped output of a fractional shift is the unflipped output of the same shift, mirrored (a flip before the shift
 * would mirror the offset too). */
START_TEST(test_flip_twice_is_identity)
{
    enum { H = 4, W = 6, C = 2 };
    float *x = distinct_image(H, W, C), once[H * W * C], twice[H * W * C], a[H * W * C], b[H * W * C];
    const tt_augment_draw flip = {0.0f, 0.0f, 1};
    augment_image(x, H, W, C, flip, once);
    augment_image(once, H, W, C, flip, twice);
    ck_assert(memcmp(twice, x, sizeof twice) == 0);
    for (size_t i = 0; i < H; i++)
        for (size_t j = 0; j < W; j++)
            for (size_t c = 0; c < C; c++)
                ck_assert(memcmp(&once[(i * W + j) * C + c], &x[(i * W + W - 1 - j) * C + c], sizeof(float)) == 0);
    augment_image(x, H, W, C, (tt_augment_draw){0.3f, 1.25f, 1}, a);
    augment_image(x, H, W, C, (tt_augment_draw){0.3f, 1.25f, 0}, b);
    for (size_t i = 0; i < H; i++)
        for (size_t j = 0; j < W; j++)
            for (size_t c = 0; c < C; c++)
                ck_assert_msg(memcmp(&a[(i * W + j) * C + c], &b[(i * W + W - 1 - j) * C + c], sizeof(float)) == 0,
                              "(%zu, %zu, %zu): %.9g, the unflipped shift's mirror %.9g", i, j, c,
                              (double)a[(i * W + j) * C + c], (double)b[(i * W + W - 1 - j) * C + c]);
    tt_free(x);
}
END_TEST

/* fill_mode 'nearest': a source row (column) beyond the image reads its edge row (column) exactly, whatever the
 * fraction; the rows that stay inside are the bilinear mix of their two neighbours. */
START_TEST(test_fill_nearest_at_the_edges)
{
    enum { H = 4, W = 5, C = 1 };
    float *x = distinct_image(H, W, C), y[H * W * C];
    augment_image(x, H, W, C, (tt_augment_draw){1.4f, 0.0f, 0}, y); /* rows 0, 1 inside; 2, 3 beyond the last */
    for (size_t j = 0; j < W; j++) {
        for (size_t i = 2; i < H; i++) ck_assert(memcmp(&y[i * W + j], &x[(H - 1) * W + j], sizeof(float)) == 0);
        for (size_t i = 0; i < 2; i++) {
            const float f = ((float)i + 1.4f) - floorf((float)i + 1.4f);
            const float want = (1.0f - f) * x[(i + 1) * W + j] + f * x[(i + 2) * W + j];
            ck_assert_msg(tt_close(y[i * W + j], want, 1e-7, 0), "(%zu, %zu): %.9g want %.9g", i, j,
                          (double)y[i * W + j], (double)want);
        }
    }
    augment_image(x, H, W, C, (tt_augment_draw){-0.5f, -7.75f, 0}, y); /* every column before the first */
    for (size_t j = 0; j < W; j++) {
        ck_assert(memcmp(&y[j], &x[0], sizeof(float)) == 0); /* row 0 reads -0.5: the corner */
        for (size_t i = 1; i < H; i++) {
            const float want = 0.5f * x[(i - 1) * W] + 0.5f * x[i * W];
            ck_assert_msg(tt_close(y[i * W + j], want, 1e-7, 0), "(%zu, %zu): %.9g want %.9g", i, j,
                          (double)y[i * W + j], (double)want);
        }
    }
    tt_free(x);
}
END_TEST

/* A sample's draw: a function of (seed, epoch, index) alone; the shifts within [-r size, r size), uniform (mean near
 * 0, both signs), the flips half the time; a zero range draws no shift; another epoch, seed or sample draws anew. */
START_TEST(test_draws)
{
    const tt_augment a = {0.2f, 0.1f, 1}, still = {0.0f, 0.0f, 1};
    const uint64_t key = tt_augment_key(3, 2);
    enum { N = 20000, H = 32, W = 24 };
    double sum_y = 0, sum_x = 0;
    size_t flips = 0, moved_epoch = 0, moved_seed = 0, neg = 0;
    for (uint64_t s = 0; s < N; s++) {
        const tt_augment_draw d = tt_augment_sample(&a, key, s, H, W), again = tt_augment_sample(&a, key, s, H, W);
        ck_assert(memcmp(&d, &again, sizeof d) == 0);
        ck_assert_msg(d.dy >= -0.1f * H && d.dy < 0.1f * H && d.dx >= -0.2f * W && d.dx < 0.2f * W,
                      "sample %llu: dy %g dx %g", (unsigned long long)s, (double)d.dy, (double)d.dx);
        sum_y += d.dy;
        sum_x += d.dx;
        neg += d.dx < 0;
        flips += (size_t)d.flip;
        const tt_augment_draw e = tt_augment_sample(&a, tt_augment_key(3, 3), s, H, W);
        const tt_augment_draw f = tt_augment_sample(&a, tt_augment_key(4, 2), s, H, W);
        moved_epoch += e.dy != d.dy;
        moved_seed += f.dx != d.dx;
        const tt_augment_draw z = tt_augment_sample(&still, key, s, H, W);
        ck_assert(z.dy == 0.0f && z.dx == 0.0f && z.flip == d.flip);
    }
    /* uniform on [-m, m): sd m / sqrt(3); the mean of N within 4 sd / sqrt(N) */
    ck_assert_msg(fabs(sum_y / N) < 4 * (0.1 * H / sqrt(3.0)) / sqrt((double)N), "mean dy %g", sum_y / N);
    ck_assert_msg(fabs(sum_x / N) < 4 * (0.2 * W / sqrt(3.0)) / sqrt((double)N), "mean dx %g", sum_x / N);
    ck_assert_msg(fabs((double)flips / N - 0.5) < 4 * 0.5 / sqrt((double)N), "%zu flips of %d", flips, N);
    ck_assert_msg(fabs((double)neg / N - 0.5) < 4 * 0.5 / sqrt((double)N), "%zu negative shifts of %d", neg, N);
    ck_assert_uint_gt(moved_epoch, N - 10);
    ck_assert_uint_gt(moved_seed, N - 10);
    /* its own stream: not any dropout layer's key of the same seed and epoch */
    for (uint64_t layer = 0; layer < 64; layer++) ck_assert(key != tt_dropout_key(3, 2, layer));
    /* the preset, as the seed's cifar10_cnn */
    ck_assert(tt_augment_cifar10.width == 0.1f && tt_augment_cifar10.height == 0.1f && tt_augment_cifar10.flip);
    char words[64];
    ck_assert_str_eq(tt_augment_words(&tt_augment_cifar10, words, sizeof words), "width=0.1,height=0.1,flip");
    ck_assert_str_eq(tt_augment_words(&(tt_augment){0, 0, 0}, words, sizeof words), "none");
}
END_TEST

/* ---- the trainer -------------------------------------------------------------------------------------------- */

enum { IH = 6, IW = 5, IC = 2, CLASSES = 4 };
static const char *MODEL = "conv2d filters=3 kernel=3 padding=same activation=relu\nmaxpool2d pool=2\n"
                           "dropout rate=0.25\nflatten\ndense units=4\n";

/* n learnable 6 x 5 x 2 byte images (non-square, two channels: a swapped axis or channel shows). */
static void make_images(tt_dataset *ds, size_t n, uint64_t seed)
{
    tt_test_dataset(ds, n, IH * IW * IC, CLASSES, seed);
    ds->shape = tt_shape3(IH, IW, IC);
}

/* The images of ds as a tower sees them in epoch `epoch`: each sample's pixels (tt_pixel) through its draw, as a
 * float32 set of the same labels — the host's reference, from the same header. */
static void host_augmented(const tt_dataset *ds, const tt_augment *a, uint64_t seed, uint64_t epoch, tt_dataset *out)
{
    *out = *ds;
    out->xtype = TT_X_F32;
    out->scale = 1.0f;
    float *x = (float *)tt_malloc(ds->n * ds->dim * sizeof(float)), img[IH * IW * IC];
    int32_t *y = (int32_t *)tt_malloc(ds->n * sizeof(int32_t));
    ck_assert(x && y);
    memcpy(y, ds->y, ds->n * sizeof(int32_t));
    const uint64_t key = tt_augment_key(seed, epoch);
    for (size_t s = 0; s < ds->n; s++) {
        for (size_t e = 0; e < ds->dim; e++) img[e] = tt_pixel(ds->x[s * ds->dim + e], ds->scale);
        augment_image(img, IH, IW, IC, tt_augment_sample(a, key, s, IH, IW), x + s * ds->dim);
    }
    out->x = (uint8_t *)x;
    out->y = y;
}

/* One way to run the steps: towers, the augmentation, where the data lives, graphs. */
typedef struct design {
    size_t towers;
    const tt_augment *aug;
    int data_on, graphs;
} design;

enum { BATCH = 23, SEED = 5, EPOCHS = 2, FIRST_EPOCH = 2 };

/* EPOCHS runs of steps (epochs FIRST_EPOCH...), each over sets[e] in a shuffled order of its own (20 steps in all),
 * from the same initial weights; returns the weights then the optimizer's state ((1 + slots) * P floats, the caller
 * frees; *floats their count), or NULL where the trainer refuses the design (err says why). */
static float *run_steps(const tt_dataset *const *sets, const design *d, size_t *floats, tt_error *err)
{
    tt_model m;
    const tt_model_input in = {sets[0]->shape, CLASSES, 0};
    ck_assert_msg(tt_model_parse(&m, MODEL, "t", &in, err) == TT_OK, "%s", err->msg);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, 42);
    tt_trainer_config tc = tt_test_config(d->towers, BATCH, tt_optim_defaults(TT_OPT_ADAM), TT_REDUCE_CPU);
    tc.ops = g_be.ops;
    tc.n_devices = g_be.n_devices;
    tc.devices = g_be.devices;
    tc.seed = SEED;
    tc.augment = *d->aug;
    tc.data_on = d->data_on;
    tc.graphs = d->graphs;
    tc.train_set = sets[0];
    tt_trainer *tr = NULL;
    const tt_status st = tt_trainer_init(&tr, &m, &tc, init, err);
    tt_free(init);
    if (st != TT_OK) return NULL;
    const size_t n = 9 * BATCH + 11; /* 10 steps an epoch, the last one short */
    uint32_t *idx = (uint32_t *)tt_malloc(n * sizeof(uint32_t));
    tt_step_result res[16];
    for (size_t e = 0; e < EPOCHS; e++) {
        tt_trainer_set_epoch(tr, FIRST_EPOCH + e);
        for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)((i * 37 + 11 * e + 3) % sets[e]->n);
        ck_assert_msg(tt_trainer_start_steps(tr, sets[e], idx, n, res, 16, NULL, err) == TT_OK, "%s", err->msg);
        tt_trainer_wait(tr, -1, NULL);
        ck_assert_int_eq(tt_trainer_halted(tr), TT_HALT_NONE);
    }
    tt_optim_slot sl[3];
    const int slots = tt_optim_slots(tt_trainer_optim(tr), sl);
    const size_t P = m.n_params;
    *floats = (1 + (size_t)slots) * P;
    float *w = (float *)tt_malloc(*floats * sizeof(float));
    memcpy(w, tt_trainer_params(tr), P * sizeof(float));
    for (int k = 0; k < slots; k++) memcpy(w + (1 + (size_t)k) * P, sl[k].data, P * sizeof(float));
    tt_trainer_free(tr);
    tt_free(idx);
    return w;
}

/* The first float whose bits differ, or n. */
static size_t first_difference(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
    return n;
}

/* --augment on the towers = the host's augmented images without it, to the bit: 1..3 towers, the data on the host
 * and on the devices, and graphs where the backend captures them (one GPU per tower). */
START_TEST(test_towers_train_on_each_samples_own_transform)
{
    tt_dataset ds, ref[EPOCHS];
    make_images(&ds, 230, 1);
    const tt_augment none = {0, 0, 0}, *cifar = &tt_augment_cifar10;
    for (size_t e = 0; e < EPOCHS; e++) host_augmented(&ds, cifar, SEED, FIRST_EPOCH + e, &ref[e]);
    const tt_dataset *raw[EPOCHS] = {&ds, &ds}, *host[EPOCHS] = {&ref[0], &ref[1]};
    size_t ran = 0;
    for (size_t N = 1; N <= 3; N++)
        for (int graphs = 0; graphs <= 1; graphs++) {
            tt_error err;
            size_t fr = 0, fa = 0;
            const design plain = {N, &none, 0, graphs};
            float *want = run_steps(host, &plain, &fr, &err);
            if (!want) { /* graphs on a backend without them, or on towers sharing a GPU */
                ck_assert_msg(graphs, "N=%zu: %s", N, err.msg);
                continue;
            }
            for (int data_on = 0; data_on <= 1; data_on++) {
                const design d = {N, cifar, data_on, graphs};
                float *got = run_steps(raw, &d, &fa, &err);
                ck_assert_msg(got != NULL, "N=%zu data-on %d graphs %d: %s", N, data_on, graphs, err.msg);
                ck_assert_uint_eq(fa, fr);
                const size_t at = first_difference(got, want, fr);
                ck_assert_msg(at == fr, "N=%zu data-on %d graphs %d: float %zu of %zu (weights, then the optimizer's "
                              "state) is %.9g, %.9g trained on the host's augmented images", N, data_on, graphs, at,
                              fr, (double)got[at], (double)want[at]);
                tt_free(got);
                ran++;
            }
            tt_free(want);
        }
    ck_assert_uint_ge(ran, 6);
    printf("towers against the host's augmented images: %zu designs, the same bits\n", ran);
    for (size_t e = 0; e < EPOCHS; e++) tt_dataset_free(&ref[e]);
    tt_dataset_free(&ds);
}
END_TEST

/* N towers = 1 tower with --augment cifar10, within test_towers's bound; the augmentation itself moves the weights
 * far more than that (a draw keyed by the row in its shard instead of the sample would show as such a move). */
START_TEST(test_n_towers_match_one_tower)
{
    tt_dataset ds;
    make_images(&ds, 230, 2);
    const tt_augment none = {0, 0, 0};
    const tt_dataset *sets[EPOCHS] = {&ds, &ds};
    tt_error err;
    size_t P1 = 0, P = 0;
    const design one = {1, &tt_augment_cifar10, 0, 0}, plain = {1, &none, 0, 0};
    float *w1 = run_steps(sets, &one, &P1, &err), *w0 = run_steps(sets, &plain, &P, &err);
    ck_assert(w1 && w0);
    double moved = 0;
    for (size_t i = 0; i < P1; i++) moved = fmax(moved, fabs((double)w1[i] - (double)w0[i]));
    for (size_t N = 2; N <= 3; N++) {
        const design d = {N, &tt_augment_cifar10, 0, 0};
        float *w = run_steps(sets, &d, &P, &err);
        ck_assert_msg(w != NULL, "%s", err.msg);
        double worst = 0;
        for (size_t i = 0; i < P1; i++) {
            ck_assert_msg(tt_close(w[i], w1[i], 2e-6, 1e-5), "N=%zu: float %zu is %.9g, 1 tower %.9g", N, i,
                          (double)w[i], (double)w1[i]);
            worst = fmax(worst, fabs((double)w[i] - (double)w1[i]));
        }
        ck_assert_msg(moved > 100 * (worst + 2e-6), "the augmentation moved the weights by %g only", moved);
        printf("N=%zu towers against 1: max |dw| %.3g; --augment against none: %.3g\n", N, worst, moved);
        tt_free(w);
    }
    tt_free(w1);
    tt_free(w0);
    tt_dataset_free(&ds);
}
END_TEST

/* Validation, test and predict read the images as they are: a trainer with --augment evaluates as one without. */
START_TEST(test_evaluation_never_augments)
{
    tt_dataset ds;
    make_images(&ds, 77, 3);
    tt_model m;
    tt_error err;
    const tt_model_input in = {ds.shape, CLASSES, 0};
    ck_assert_msg(tt_model_parse(&m, MODEL, "t", &in, &err) == TT_OK, "%s", err.msg);
    float *init = (float *)tt_malloc(m.n_params * sizeof(float));
    tt_model_init_params(&m, init, 7);
    tt_eval_result r[2];
    for (int aug = 0; aug <= 1; aug++) {
        tt_trainer_config tc = tt_test_config(2, 16, tt_optim_defaults(TT_OPT_SGD), TT_REDUCE_CPU);
        tc.ops = g_be.ops;
        tc.n_devices = g_be.n_devices;
        tc.devices = g_be.devices;
        tc.augment = aug ? tt_augment_cifar10 : (tt_augment){0, 0, 0};
        tt_trainer *tr = NULL;
        ck_assert_msg(tt_trainer_init(&tr, &m, &tc, init, &err) == TT_OK, "%s", err.msg);
        tt_trainer_set_epoch(tr, 3);
        ck_assert_int_eq(tt_trainer_evaluate(tr, &ds, &r[aug], &err), TT_OK);
        tt_trainer_free(tr);
    }
    ck_assert_msg(memcmp(&r[0].loss, &r[1].loss, sizeof r[0].loss) == 0 && r[0].accuracy == r[1].accuracy,
                  "loss %.17g with --augment, %.17g without", r[1].loss, r[0].loss);
    tt_free(init);
    tt_dataset_free(&ds);
}
END_TEST

/* A model whose input is not an image — token ids, a flat vector — is refused, in one line naming --augment. */
START_TEST(test_non_images_refused)
{
    static const struct {
        const char *model;
        tt_shape shape;
        size_t vocab;
        const char *says;
    } cases[] = {
        {"embedding dim=3\nconv1d filters=4 kernel=3\nflatten\ndense units=4\n", {1, {10}}, 20,
         "--augment: the model reads token ids (its input is 10 ids), not an image"},
        {"dense units=4\n", {1, {30}}, 0, "--augment: the model's input is 30, not an image (height x width x "
                                          "channels)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tt_model m;
        tt_error err;
        const tt_model_input in = {cases[k].shape, CLASSES, cases[k].vocab};
        ck_assert_msg(tt_model_parse(&m, cases[k].model, "t", &in, &err) == TT_OK, "%s", err.msg);
        float *init = (float *)tt_calloc(m.n_params, sizeof(float));
        tt_trainer_config tc = tt_test_config(1, 8, tt_optim_defaults(TT_OPT_SGD), TT_REDUCE_CPU);
        tc.augment = (tt_augment){0, 0, 1};
        tt_trainer *tr = NULL;
        ck_assert_int_eq(tt_trainer_init(&tr, &m, &tc, init, &err), TT_ERR_ARG);
        ck_assert_ptr_null(tr);
        ck_assert_msg(strstr(err.msg, cases[k].says) && !strchr(err.msg, '\n'), "%s", err.msg);
        tt_mem_plan plan;
        memset(&plan, 0, sizeof plan);
        ck_assert_int_eq(tt_trainer_plan(&m, &tc, &plan, &err), TT_ERR_ARG);
        ck_assert_msg(strstr(err.msg, cases[k].says), "%s", err.msg);
        tt_free(init);
    }
}
END_TEST

/* ---- whole runs: resume ------------------------------------------------------------------------------------- */

enum { RUN_N = 203, RUN_BATCH = 32 }; /* 7 steps an epoch, the last partial */

static float *run_ok(tt_run_config *c, const tt_dataset *train, const tt_dataset *val, size_t *P)
{
    tt_run_result *res = (tt_run_result *)tt_calloc(1, sizeof *res);
    tt_error err;
    ck_assert_msg(tt_run_on(c, train, val, val, NULL, res, &err) == TT_OK, "%s", err.msg);
    float *w = res->final_params;
    *P = res->n_params;
    ck_assert_ptr_nonnull(w);
    tt_free(res);
    return w;
}

/* 3 epochs straight = the same run resumed from any of its mid-epoch checkpoints: the draws are the epoch's and the
 * sample's, so a resumed epoch draws what the unbroken one drew. */
START_TEST(test_resume_draws_the_same)
{
    tt_dataset train, val;
    make_images(&train, RUN_N, 4);
    make_images(&val, 40, 5);
    char dir[512], model[600], path[1024];
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(model, sizeof model, "%s/model.txt", dir);
    tt_test_write_str(model, MODEL);
    tt_run_config c;
    tt_run_config_defaults(&c);
    c.model = model;
    c.device = g_device;
    c.towers = 2;
    c.batch = RUN_BATCH;
    c.epochs = 3;
    c.seed = 3;
    c.optim = tt_optim_defaults(TT_OPT_NADAM);
    c.progress = TT_PROGRESS_QUIET;
    size_t P, P2;
    float *plain = run_ok(&c, &train, &val, &P);
    c.augment = tt_augment_cifar10;
    float *straight = run_ok(&c, &train, &val, &P);
    ck_assert_msg(first_difference(plain, straight, P) < P, "--augment cifar10 changed nothing");
    tt_run_config s = c;
    char ckdir[600];
    snprintf(ckdir, sizeof ckdir, "%s/ck", dir);
    s.checkpoint_dir = ckdir;
    s.save_every_steps = 3;
    s.keep = 100;
    float *saved = run_ok(&s, &train, &val, &P2);
    ck_assert_msg(first_difference(saved, straight, P) == P, "saving checkpoints changed the run");
    static const size_t at[][2] = {{1, 3}, {1, 6}, {2, 2}, {2, 5}, {3, 1}, {3, 4}};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        tt_ckpt_path(path, sizeof path, ckdir, at[k][0], at[k][1]);
        tt_run_config r = c;
        r.resume = path;
        float *resumed = run_ok(&r, &train, &val, &P2);
        const size_t i = first_difference(resumed, straight, P);
        ck_assert_msg(i == P, "resumed from %s: weight %zu is %.9g, %.9g unbroken", path, i, (double)resumed[i],
                      (double)straight[i]);
        tt_free(resumed);
    }
    tt_free(plain);
    tt_free(straight);
    tt_free(saved);
    tt_dataset_free(&train);
    tt_dataset_free(&val);
}
END_TEST

/* Usage: test_augment [cpu|cuda] (default cpu). */
int main(int argc, char **argv)
{
    g_device = argc > 1 ? argv[1] : "cpu";
    const int is_cpu = strcmp(g_device, "cpu") == 0;
    tt_error err;
    if (tt_backend_open(g_device, NULL, &g_be, &err) != TT_OK) return tt_test_skip_no_gpu("--augment", err.msg);
    if (!is_cpu && g_be.ops == &tt_dev_cpu_ops) return tt_test_skip_no_gpu(g_device, "opened the CPU backend");
    Suite *s = suite_create(g_device);
    TCase *tc = tcase_create("augment");
    tcase_set_timeout(tc, 300);
    if (is_cpu) { /* host code */
        tcase_add_test(tc, test_formula_against_keras);
        tcase_add_test(tc, test_whole_pixel_shifts_move_pixels);
        tcase_add_test(tc, test_flip_twice_is_identity);
        tcase_add_test(tc, test_fill_nearest_at_the_edges);
        tcase_add_test(tc, test_draws);
        tcase_add_test(tc, test_non_images_refused);
    }
    tcase_add_test(tc, test_towers_train_on_each_samples_own_transform);
    tcase_add_test(tc, test_n_towers_match_one_tower);
    tcase_add_test(tc, test_evaluation_never_augments);
    tcase_add_test(tc, test_resume_draws_the_same);
    suite_add_tcase(s, tc);
    return tt_test_run_suite_mode(s, is_cpu ? CK_FORK_GETENV : CK_NOFORK);
}
