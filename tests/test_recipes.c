/* test_recipes.c — the recipes' host side against numbers recorded from real Keras: the learning-rate schedules
 * (--lr-schedule), Goyal's warm-up (--warmup-epochs), and the optimizers with weight_decay, clipnorm, global_clipnorm
 * and clipvalue.
 *
 * The tables between BEGIN and END were printed by tools/keras-recipes-ref (Keras 3.15.1, TensorFlow 2.21.0, CPU):
 * each schedule's rate at steps 0..23 as Keras computes it (float32), and two variables (a 2x3 kernel and a bias
 * of 3, as a dense layer has them) after each of three steps of a Keras optimizer from fixed values and gradients.
 * The tests run towertrain's schedule and optimizer on the same inputs and compare with those numbers, not with a
 * second copy of its formulas. TensorFlow is never needed to run them. */
#include <float.h>

#include "tt_optim.h"
#include "tt_test.h"

enum { STEPS = 24, VARS = 9 };

typedef struct recorded_schedule {
    const char *spec;
    float lr;
    float rate[STEPS];
} recorded_schedule;

typedef struct recorded_optimizer {
    const char *flags;
    float w[3][VARS]; /* kernel (6) then bias (3), after each step */
} recorded_optimizer;

/* BEGIN tools/keras-recipes-ref output */
/* recorded by tools/keras-recipes-ref: Keras 3.15.1, TensorFlow 2.21.0 */
static const recorded_schedule k_schedules[] = {
    {"step:5,10,15:0.1,0.05,0.01,0.001", 0.1f, {0.100000001f, 0.100000001f, 0.100000001f, 0.100000001f,
        0.100000001f, 0.100000001f, 0.0500000007f, 0.0500000007f, 0.0500000007f, 0.0500000007f, 0.0500000007f,
        0.00999999978f, 0.00999999978f, 0.00999999978f, 0.00999999978f, 0.00999999978f, 0.00100000005f,
        0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f, 0.00100000005f,
        0.00100000005f}},
    {"exponential:7:0.5", 0.1f, {0.100000001f, 0.0905723646f, 0.0820335373f, 0.0742997155f, 0.0672950074f,
        0.0609506853f, 0.0552044772f, 0.0500000007f, 0.0452861823f, 0.0410167687f, 0.0371498577f, 0.0336475037f,
        0.0304753426f, 0.0276022386f, 0.0250000004f, 0.022643093f, 0.0205083825f, 0.0185749289f, 0.0168237519f,
        0.0152376713f, 0.0138011193f, 0.0125000002f, 0.0113215465f, 0.0102541912f}},
    {"exponential:7:0.5:staircase", 0.1f, {0.100000001f, 0.100000001f, 0.100000001f, 0.100000001f, 0.100000001f,
        0.100000001f, 0.100000001f, 0.0500000007f, 0.0500000007f, 0.0500000007f, 0.0500000007f, 0.0500000007f,
        0.0500000007f, 0.0500000007f, 0.0250000004f, 0.0250000004f, 0.0250000004f, 0.0250000004f, 0.0250000004f,
        0.0250000004f, 0.0250000004f, 0.0125000002f, 0.0125000002f, 0.0125000002f}},
    {"cosine:20", 0.01f, {0.00999999978f, 0.00993844122f, 0.00975528173f, 0.00945503172f, 0.00904508494f,
        0.00853553414f, 0.00793892611f, 0.00726995198f, 0.00654508453f, 0.00578217255f, 0.00499999942f,
        0.00421782723f, 0.00345491408f, 0.00273004803f, 0.00206107413f, 0.0014644661f, 0.000954914663f,
        0.000544967072f, 0.000244717579f, 6.15581885e-05f, 0.0f, 0.0f, 0.0f, 0.0f}},
    {"cosine:20:0.1", 0.01f, {0.00999999978f, 0.00994459726f, 0.00977975409f, 0.00950952899f, 0.00914057624f,
        0.00868198089f, 0.00814503338f, 0.00754295709f, 0.00689057633f, 0.00620395551f, 0.0054999995f,
        0.00479604444f, 0.00410942268f, 0.00345704309f, 0.00285496656f, 0.00231801951f, 0.00185942312f,
        0.00149047025f, 0.00122024573f, 0.00105540233f, 0.00100000005f, 0.00100000005f, 0.00100000005f,
        0.00100000005f}},
    {"cosine:12:0.05:0.2:6", 0.02f, {0.0199999996f, 0.0500000007f, 0.0799999982f, 0.109999999f, 0.140000001f,
        0.170000002f, 0.200000003f, 0.196762964f, 0.187272415f, 0.172175154f, 0.152500004f, 0.129587814f,
        0.104999997f, 0.0804121941f, 0.0574999936f, 0.037824858f, 0.0227275882f, 0.0132370433f, 0.0100000007f,
        0.0100000007f, 0.0100000007f, 0.0100000007f, 0.0100000007f, 0.0100000007f}},
};
static const recorded_optimizer k_optimizers[] = {
    {"sgd --lr 0.1 --momentum 0.9 --weight-decay 0.01", {{0.469500005f, -0.129749998f, 1.49349999f, -2.24800014f,
        0.789250016f, 0.0348750055f, 0.0798999965f, -0.139799997f, 0.189700007f}, {0.512030482f, -0.0416202545f,
        1.48750651f, -2.6207521f, 0.794460773f, 0.173840165f, 0.0668200999f, -0.125660196f, 0.0655102953f},
        {0.549218476f, -0.0123786367f, 1.51196897f, -2.93563128f, 0.629066288f, 0.238766342f, -0.0349467099f,
        -0.102934539f, 0.0338447839f}}},
    {"adam --lr 0.01 --weight-decay 0.004 (AdamW)", {{0.489980161f, -0.2399901f, 1.48994076f, -2.00991988f,
        0.75996989f, 0.114995107f, 0.0899962261f, -0.189992115f, 0.289988101f}, {0.494162351f, -0.234595194f,
        1.48318112f, -2.01941442f, 0.760832727f, 0.119342312f, 0.0852980614f, -0.188539326f, 0.281792879f},
        {0.497306406f, -0.233166426f, 1.48857236f, -2.02627993f, 0.754868031f, 0.121034801f, 0.0782580003f,
        -0.186547056f, 0.280320972f}}},
    {"sgd --lr 0.1 --clipnorm 1", {{0.489859611f, -0.209438384f, 1.49830997f, -2.08450341f, 0.763520539f,
        0.0945787951f, 0.0842377916f, -0.152713373f, 0.213307858f}, {0.515069485f, -0.216641203f, 1.49830997f,
        -2.13852453f, 0.752716303f, 0.173809871f, 0.0892377943f, -0.19271338f, 0.188307852f}, {0.514544606f,
        -0.24288404f, 1.51405573f, -2.12802744f, 0.663490653f, 0.142318472f, 0.0147532672f, -0.18443732f,
        0.254516333f}}},
    {"adam --lr 0.01 --global-clipnorm 2", {{0.490000248f, -0.240000114f, 1.49000108f, -2.00999999f, 0.759999812f,
        0.115000121f, 0.090000324f, -0.190000147f, 0.290000111f}, {0.49461624f, -0.234810978f, 1.48330128f,
        -2.01973486f, 0.760242403f, 0.119749106f, 0.0856030136f, -0.189182132f, 0.28164354f}, {0.498077214f,
        -0.234571964f, 1.48904598f, -2.02662754f, 0.754039407f, 0.12129347f, 0.0787539557f, -0.18737258f,
        0.281617075f}}},
    {"rmsprop --lr 0.01 --clipvalue 0.5", {{0.468377411f, -0.218377292f, 1.46838355f, -2.03162265f, 0.781622648f,
        0.0933772847f, 0.0683776215f, -0.16837728f, 0.268377304f}, {0.495859861f, -0.230663165f, 1.46838355f,
        -2.05456424f, 0.762011051f, 0.116318837f, 0.0764357448f, -0.188763142f, 0.253633142f}, {0.495280564f,
        -0.253285497f, 1.49965632f, -2.04531431f, 0.738713622f, 0.0971093774f, 0.0468001515f, -0.183466882f,
        0.275800675f}}},
    {"nadam --lr 0.01 --weight-decay 0.1 --clipnorm 0.5 --lr-schedule exponential:2:0.5", {{0.488872141f,
        -0.239122137f, 1.48787224f, -2.00862789f, 0.759877861f, 0.114247128f, 0.089272134f, -0.189172134f,
        0.289072156f}, {0.495039105f, -0.239714727f, 1.48631024f, -2.01152968f, 0.755227566f, 0.120728329f,
        0.0926500186f, -0.194998905f, 0.284815401f}, {0.494942188f, -0.24221006f, 1.49083829f, -2.01052094f,
        0.749611199f, 0.119054079f, 0.0873975381f, -0.194599316f, 0.287165076f}}},
};
/* END */

static const float W0[VARS] = {0.5f, -0.25f, 1.5f, -2.0f, 0.75f, 0.125f, 0.1f, -0.2f, 0.3f};
static const float GRADS[3][VARS] = {{0.3f, -1.2f, 0.05f, 2.5f, -0.4f, 0.9f, 0.2f, -0.6f, 1.1f},
                                     {-0.7f, 0.2f, 0.0f, 1.5f, 0.3f, -2.2f, -0.05f, 0.4f, 0.25f},
                                     {0.01f, 0.5f, -0.3f, -0.2f, 1.7f, 0.6f, 0.9f, -0.1f, -0.8f}};
static const size_t VAR_LO[2] = {0, 6}, VAR_HI[2] = {6, 9};

/* A rate within float rounding of Keras's: 2 ulps of the rate, plus 2 of `top` (the schedule's largest rate) — Keras
 * computes 1 + cos(pi t / steps) in float32, whose rounding is an ulp of 1, not of the small rate it leaves. */
static void check_rate(const char *what, size_t t, float got, float want, float top)
{
    const double d = fabs((double)got - (double)want);
    ck_assert_msg(d <= 2 * FLT_EPSILON * (fabs((double)want) + fabs((double)top)),
                  "%s: step %zu: rate %.9g, Keras %.9g", what, t, got, want);
}

/* Every schedule, step by step, as Keras's. */
START_TEST(test_schedules_as_keras)
{
    const recorded_schedule *r = &k_schedules[_i];
    tt_lr_schedule s;
    tt_error err;
    ck_assert_msg(tt_lr_schedule_parse("--lr-schedule", r->spec, &s, &err) == TT_OK, "%s", err.msg);
    char words[TT_SCHED_WORDS];
    ck_assert_str_eq(tt_lr_schedule_words(&s, words, sizeof words), r->spec); /* what a checkpoint keeps */
    float top = 0;
    for (size_t t = 0; t < STEPS; t++) top = r->rate[t] > top ? r->rate[t] : top;
    for (size_t t = 0; t < STEPS; t++) check_rate(r->spec, t, tt_lr_at(&s, r->lr, t), r->rate[t], top);
    /* the linear scaling rule scales every rate: 4 towers, the scaled --lr */
    s.scale = 4;
    for (size_t t = 0; t < STEPS; t++) check_rate(r->spec, t, tt_lr_at(&s, 4 * r->lr, t), 4 * r->rate[t], 4 * top);
}
END_TEST

/* Goyal et al. 2017, section 2.2: "start from a learning rate of eta and increment it by a constant amount at each
 * iteration such that it reaches eta_hat = k eta after 5 epochs" — here k = 8 over 40 steps, on a schedule too. */
START_TEST(test_goyal_warmup)
{
    tt_lr_schedule s;
    memset(&s, 0, sizeof s);
    s.scale = 8;
    s.ramp_steps = 40;
    const float eta = 0.01f, eta_hat = 0.08f;
    ck_assert_float_eq(tt_lr_at(&s, eta_hat, 0), eta);
    check_rate("warm-up", 20, tt_lr_at(&s, eta_hat, 20), 0.045f, eta_hat); /* halfway: (eta + eta_hat) / 2 */
    check_rate("warm-up", 39, tt_lr_at(&s, eta_hat, 39), 0.01f + 0.07f * 39.0f / 40.0f, eta_hat);
    ck_assert_float_eq(tt_lr_at(&s, eta_hat, 40), eta_hat);
    ck_assert_float_eq(tt_lr_at(&s, eta_hat, 1000), eta_hat);
    for (uint64_t t = 1; t < 40; t++) ck_assert(tt_lr_at(&s, eta_hat, t) > tt_lr_at(&s, eta_hat, t - 1));
    /* over a step schedule: the ramp multiplies the scaled schedule's rate */
    tt_error err;
    ck_assert(tt_lr_schedule_parse("--lr-schedule", "step:10:0.01,0.001", &s, &err) == TT_OK);
    s.scale = 8;
    s.ramp_steps = 40;
    const float at5 = 0.08f * (1.0f / 8 + (7.0f / 8) * 5 / 40), at20 = 0.008f * (1.0f / 8 + (7.0f / 8) * 20 / 40);
    check_rate("warm-up over step", 5, tt_lr_at(&s, eta_hat, 5), at5, eta_hat);
    check_rate("warm-up over step", 20, tt_lr_at(&s, eta_hat, 20), at20, eta_hat);
    check_rate("warm-up over step", 50, tt_lr_at(&s, eta_hat, 50), 0.008f, eta_hat);
}
END_TEST

/* The optimizer configuration each recorded case names. */
static tt_optim_config case_config(size_t i)
{
    tt_optim_config c;
    tt_error err;
    switch (i) {
    case 0: c = tt_optim_defaults(TT_OPT_SGD); c.lr = 0.1f; c.momentum = 0.9f; c.weight_decay = 0.01f; break;
    case 1: c = tt_optim_defaults(TT_OPT_ADAM); c.lr = 0.01f; c.weight_decay = 0.004f; break;
    case 2: c = tt_optim_defaults(TT_OPT_SGD); c.lr = 0.1f; c.clipnorm = 1.0f; break;
    case 3: c = tt_optim_defaults(TT_OPT_ADAM); c.lr = 0.01f; c.global_clipnorm = 2.0f; break;
    case 4: c = tt_optim_defaults(TT_OPT_RMSPROP); c.lr = 0.01f; c.clipvalue = 0.5f; break;
    default:
        c = tt_optim_defaults(TT_OPT_NADAM);
        c.lr = 0.01f;
        c.weight_decay = 0.1f;
        c.clipnorm = 0.5f;
        ck_assert(tt_lr_schedule_parse("--lr-schedule", "exponential:2:0.5", &c.sched, &err) == TT_OK);
        break;
    }
    return c;
}

/* Three steps of each optimizer as the host applies them (host_clip.c's norm clips from their functions, the
 * optimizer with its clipvalue and weight decay), against Keras's variables. */
START_TEST(test_optimizers_as_keras)
{
    const recorded_optimizer *r = &k_optimizers[_i];
    tt_optim_config c = case_config((size_t)_i);
    tt_optim o;
    tt_error err;
    ck_assert(tt_optim_init(&o, &c, VARS, &err) == TT_OK);
    float w[VARS];
    double path[VARS] = {0}; /* the distance each Keras variable has travelled */
    memcpy(w, W0, sizeof w);
    for (int t = 0; t < 3; t++) {
        float g[VARS]; /* tolerance: test_optim.c's (float32 there, per-step scalars in double here) */
        memcpy(g, GRADS[t], sizeof g);
        if (c.clipnorm > 0)
            for (int v = 0; v < 2; v++) {
                const float d = tt_clipnorm_divisor(&c, tt_sum_squares(g + VAR_LO[v], VAR_HI[v] - VAR_LO[v]));
                for (size_t k = VAR_LO[v]; k < VAR_HI[v]; k++) g[k] = tt_clipnorm_elem(g[k], c.clipnorm, d);
            }
        if (c.global_clipnorm > 0) {
            const float s = tt_global_clip_scale(&c, tt_sum_squares(g, VARS));
            for (size_t k = 0; k < VARS; k++) g[k] *= s;
        }
        tt_optim_begin_step(&o);
        tt_optim_apply(&o, w, g, 0, VARS);
        for (size_t k = 0; k < VARS; k++) {
            const double want = r->w[t][k], d = fabs((double)w[k] - want);
            path[k] += fabs(want - (t ? r->w[t - 1][k] : W0[k]));
            ck_assert_msg(d <= 4 * FLT_EPSILON * fabs(want) + 2e-5 * path[k],
                          "%s: step %d, variable %zu: %.9g, Keras %.9g", r->flags, t + 1, k, w[k], want);
        }
    }
    tt_optim_free(&o);
}
END_TEST

/* The clip's factor where the norm is under the threshold, and where it is not finite (Keras: NaN, so the step's
 * blocks are refused as non-finite rather than applied unclipped). */
START_TEST(test_clip_edges)
{
    tt_optim_config c = tt_optim_defaults(TT_OPT_SGD);
    c.clipnorm = 2.0f;
    ck_assert_float_eq(tt_clipnorm_divisor(&c, 1.0), 2.0f); /* norm 1 < 2: divided by 2 after times 2 */
    ck_assert_float_eq(tt_clipnorm_divisor(&c, 16.0), 4.0f);
    ck_assert_float_eq(tt_clipnorm_divisor(&c, 0.0), 2.0f); /* a zero gradient stays zero */
    c.clipnorm = 0;
    c.global_clipnorm = 1.0f;
    ck_assert_float_eq(tt_global_clip_scale(&c, 0.25), 1.0f);
    ck_assert_float_eq(tt_global_clip_scale(&c, 16.0), 0.25f);
    ck_assert(isnan(tt_global_clip_scale(&c, INFINITY)));
    const char *a, *b;
    ck_assert(!tt_optim_clips_clash(&c, &a, &b));
    c.clipvalue = 1;
    ck_assert(tt_optim_clips_clash(&c, &a, &b));
    ck_assert_str_eq(a, "global-clipnorm");
    ck_assert_str_eq(b, "clipvalue");
}
END_TEST

/* The longest schedule a run can have (16 boundaries of 16 digits, 17 values of nine digits) comes back from its words
 * whole, and the optimizer's settings in words (what --resume and the ranks compare) hold all of it. */
START_TEST(test_longest_schedule)
{
    char spec[1024];
    size_t n = (size_t)snprintf(spec, sizeof spec, "step");
    for (int i = 0; i < TT_SCHED_MAX_BOUNDS; i++)
        n += (size_t)snprintf(spec + n, sizeof spec - n, "%c%llu", i ? ',' : ':', 9007199254740000ull + (unsigned)i);
    for (int i = 0; i <= TT_SCHED_MAX_BOUNDS; i++)
        n += (size_t)snprintf(spec + n, sizeof spec - n, "%c0.%09d", i ? ',' : ':', 123456781 + 2 * i);
    tt_optim_config c = tt_optim_defaults(TT_OPT_ADAM);
    tt_error err;
    ck_assert_msg(tt_lr_schedule_parse("--lr-schedule", spec, &c.sched, &err) == TT_OK, "%s", err.msg);
    char words[TT_SCHED_WORDS], described[TT_OPTIM_WORDS];
    tt_lr_schedule_words(&c.sched, words, sizeof words);
    ck_assert_uint_lt(strlen(words), sizeof words - 1);
    tt_lr_schedule s2;
    ck_assert_msg(tt_lr_schedule_parse("--lr-schedule", words, &s2, &err) == TT_OK, "%s", err.msg);
    ck_assert(memcmp(&s2, &c.sched, sizeof s2) == 0);
    c.weight_decay = 0.004f;
    c.global_clipnorm = 1.0f;
    c.sched.scale = 1024;
    c.sched.ramp_steps = 9007199254740000ull;
    tt_optim_describe(&c, described, sizeof described);
    ck_assert_msg(strstr(described, words) && strstr(described, "warm-up 9007199254740000 steps from lr/1024"), "%s",
                  described);
}
END_TEST

/* Every bad --lr-schedule gets one line naming it and what is wrong. */
START_TEST(test_schedule_refusals)
{
    static const struct {
        const char *spec, *why;
    } bad[] = {
        {"linear", "is not constant, step:"},          {"constant:1", "constant takes no values"},
        {"step", "boundaries are step counts"},        {"step:", "a boundary is a step count"},
        {"step:5", "needs ':' and the values"},        {"step:5:0.1", "one value more than boundaries"},
        {"step:5:0.1,0.2,0.3", "one value more"},      {"step:5,5:1,1,1", "boundaries must increase"},
        {"step:5,3:1,1,1", "boundaries must increase"}, {"step:-1:1,1", "a boundary is a step count"},
        {"step:1.5:1,1", "a boundary is a step count"}, {"step:1:0,1", "a value is a rate"},
        {"step:1:1,nan", "a value is a rate"},          {"step:1:1,0x1p-3", "a value is a rate"},
        {"step:1:1,", "a value is a rate"},             {"exponential", "it needs STEPS and RATE"},
        {"exponential:0:0.5", "STEPS is a step count"}, {"exponential:10", "it needs STEPS and RATE"},
        {"exponential:10:0", "RATE is a number"},       {"exponential:10:0.5:stairs", "only be staircase"},
        {"exponential:10:-0.5", "RATE is a number"},    {"cosine", "it needs STEPS"},
        {"cosine:10:2", "ALPHA is a number in [0, 1]"}, {"cosine:10:0.1:0.5", "TARGET needs WARMUP_STEPS"},
        {"cosine:10:0.1:0:5", "TARGET is a rate"},      {"cosine:10:0.1:0.5:5:9", "too many fields"},
        {"cosine:1e99", "STEPS is a step count"},       {"cosine:10:0.1:0.5:1.5", "WARMUP_STEPS is a step count"},
        {"step:10:1e-45,0.01", "a value is a rate"},    {"step:10:1e-50,0.01", "a value is a rate"},
        {"exponential:100:1e-45", "RATE is a number"},  {"cosine:100:1e-45", "ALPHA is a number"},
        {"cosine:100:0.1:1e-50:10", "TARGET is a rate"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tt_lr_schedule s;
        tt_error err;
        ck_assert_msg(tt_lr_schedule_parse("--lr-schedule", bad[i].spec, &s, &err) == TT_ERR_ARG, "%s", bad[i].spec);
        ck_assert_msg(strstr(err.msg, bad[i].why) && strncmp(err.msg, "--lr-schedule: ", 15) == 0, "%s: %s",
                      bad[i].spec, err.msg);
        ck_assert(!strchr(err.msg, '\n'));
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("recipes");
    TCase *tc = tcase_create("keras");
    tcase_add_loop_test(tc, test_schedules_as_keras, 0, (int)(sizeof k_schedules / sizeof k_schedules[0]));
    tcase_add_test(tc, test_goyal_warmup);
    tcase_add_loop_test(tc, test_optimizers_as_keras, 0, (int)(sizeof k_optimizers / sizeof k_optimizers[0]));
    tcase_add_test(tc, test_clip_edges);
    tcase_add_test(tc, test_schedule_refusals);
    tcase_add_test(tc, test_longest_schedule);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
