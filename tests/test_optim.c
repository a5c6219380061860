/* test_optim.c — SGD, Adam, Nadam and RMSprop against weights recorded from a real Keras run.
 *
 * The cases between BEGIN and END were printed by tools/keras_reference.py (TensorFlow 2.21.0, Keras 3.15.1 with
 * the TensorFlow backend, CPU): a Keras optimizer applied to a float32 variable of 1 or 3 elements, one given
 * gradient per step, the variable read back after every step. The tests run towertrain's optimizer on the same
 * gradients and compare with those numbers, not with a second copy of its own formulas. To add or change a case,
 * edit the script, run it with a Keras venv and paste its output here; TensorFlow is never needed to run the tests.
 *
 * The cases are several steps long, with gradients that change size and sign and differ per element, so a wrong
 * moment update, bias correction, momentum rule or schedule moves the weights; adam_small and nadam_small use
 * gradients near 1e-4, 3e-6 and 1e-7, where sqrt(v) is 30 times, about equal to, or far below epsilon (1e-7), so
 * that epsilon's place (sqrt(v) + eps, not sqrt(v + eps)) sets the size of the update: the misplaced one makes
 * those updates 100 to 3000 times smaller. RMSprop is the other way round (Keras: sqrt(v + eps)); rmsprop_small and
 * rmsprop_cent_small use gradients near 3e-3, 1e-3 and 1e-7 (v about 10 eps, eps, far below eps), where
 * sqrt(v) + eps would make the steps up to ~2400 times larger. The RMSprop cases cover every combination of
 * momentum and centered (1, 2 or 3 state buffers), so a buffer mixed up with another moves some weight. */
#include <float.h>

#include "tt_optim.h"
#include "tt_test.h"

#define KC_MAX_N 3
#define KC_MAX_STEPS 10

typedef struct keras_case {
    const char *name;
    tt_optim_config cfg;
    int n, steps;
    float w0[KC_MAX_N];               /* the variable before the first step */
    float g[KC_MAX_STEPS][KC_MAX_N];  /* the gradient of each step */
    float w[KC_MAX_STEPS][KC_MAX_N];  /* the variable after each step, as Keras left it */
} keras_case;

/* BEGIN keras_reference.py output: TensorFlow 2.21.0, Keras 3.15.1 (backend tensorflow), NumPy 2.4.6 */
static const keras_case KERAS_CASES[] = {
    /* keras.optimizers.SGD(learning_rate=0.1) */
    {.name = "sgd_plain",
     .cfg = {.kind = TT_OPT_SGD, .lr = 0.100000001f, .momentum = 0.0f, .nesterov = 0},
     .n = 3, .steps = 6, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -1.0f, 2.0f},
           {0.25f, 0.75f, -1.5f},
           {-0.125f, 0.300000012f, 0.699999988f},
           {1.0f, -0.200000003f, -0.899999976f},
           {0.600000024f, 0.100000001f, 0.0500000007f},
           {-0.400000006f, -0.349999994f, 1.10000002f}},
     .w = {{0.949999988f, -0.400000006f, 0.049999997f},
           {0.925000012f, -0.475000024f, 0.200000003f},
           {0.9375f, -0.504999995f, 0.129999995f},
           {0.837499976f, -0.484999985f, 0.219999999f},
           {0.777499974f, -0.494999975f, 0.215000004f},
           {0.817499995f, -0.459999979f, 0.104999997f}}},
    /* keras.optimizers.SGD(learning_rate=0.1, momentum=0.9) */
    {.name = "sgd_momentum",
     .cfg = {.kind = TT_OPT_SGD, .lr = 0.100000001f, .momentum = 0.899999976f, .nesterov = 0},
     .n = 3, .steps = 7, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -1.0f, 2.0f},
           {0.25f, 0.75f, -1.5f},
           {-0.125f, 0.300000012f, 0.699999988f},
           {1.0f, -0.200000003f, -0.899999976f},
           {0.600000024f, 0.100000001f, 0.0500000007f},
           {-0.400000006f, -0.349999994f, 1.10000002f},
           {0.200000003f, 0.449999988f, -0.300000012f}},
     .w = {{0.949999988f, -0.400000006f, 0.049999997f},
           {0.879999995f, -0.38500002f, 0.0200000107f},
           {0.82950002f, -0.401500016f, -0.0769999772f},
           {0.684050024f, -0.396350026f, -0.0742999688f},
           {0.493145049f, -0.40171504f, -0.0768699646f},
           {0.361330569f, -0.371543556f, -0.189182967f},
           {0.222697541f, -0.389389217f, -0.260264665f}}},
    /* keras.optimizers.SGD(learning_rate=0.1, momentum=0.9, nesterov=True) */
    {.name = "sgd_nesterov",
     .cfg = {.kind = TT_OPT_SGD, .lr = 0.100000001f, .momentum = 0.899999976f, .nesterov = 1},
     .n = 3, .steps = 7, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -1.0f, 2.0f},
           {0.25f, 0.75f, -1.5f},
           {-0.125f, 0.300000012f, 0.699999988f},
           {1.0f, -0.200000003f, -0.899999976f},
           {0.600000024f, 0.100000001f, 0.0500000007f},
           {-0.400000006f, -0.349999994f, 1.10000002f},
           {0.200000003f, 0.449999988f, -0.300000012f}},
     .w = {{0.904999971f, -0.310000002f, -0.129999995f},
           {0.816999972f, -0.371500015f, -0.00699997693f},
           {0.784049988f, -0.416350007f, -0.164299965f},
           {0.553144991f, -0.39171502f, -0.0718699619f},
           {0.321330488f, -0.406543523f, -0.0791829526f},
           {0.242697462f, -0.34438917f, -0.290264666f},
           {0.0979277343f, -0.405450255f, -0.324238181f}}},
    /* keras.optimizers.Adam() */
    {.name = "adam_default",
     .cfg = {.kind = TT_OPT_ADAM, .lr = 0.00100000005f,
             .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
     .n = 3, .steps = 8, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -0.300000012f, 1.20000005f},
           {-0.25f, -0.600000024f, 0.899999976f},
           {0.125f, 0.200000003f, -2.0f},
           {0.400000006f, -0.100000001f, 0.300000012f},
           {-0.800000012f, 0.0500000007f, 0.600000024f},
           {0.300000012f, -0.449999988f, -0.699999988f},
           {0.600000024f, 0.25f, 0.150000006f},
           {-0.0500000007f, -0.300000012f, 1.5f}},
     .w = {{0.999000013f, -0.499000013f, 0.249000013f},
           {0.998733699f, -0.498034835f, 0.248017445f},
           {0.998393297f, -0.497502506f, 0.248073161f},
           {0.997831762f, -0.496988595f, 0.248049185f},
           {0.997930944f, -0.496593833f, 0.24790287f},
           {0.997871101f, -0.496026516f, 0.247917682f},
           {0.997583091f, -0.495696515f, 0.247902244f},
           {0.997349143f, -0.495260417f, 0.24764815f}}},
    /* keras.optimizers.Adam(learning_rate=0.01, beta_1=0.8, beta_2=0.95, epsilon=0.0001) */
    {.name = "adam_custom",
     .cfg = {.kind = TT_OPT_ADAM, .lr = 0.00999999978f,
             .beta1 = 0.800000012f, .beta2 = 0.949999988f, .epsilon = 9.99999975e-05f},
     .n = 3, .steps = 6, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -0.300000012f, 1.20000005f},
           {-0.25f, -0.600000024f, 0.899999976f},
           {0.125f, 0.200000003f, -2.0f},
           {0.400000006f, -0.100000001f, 0.300000012f},
           {-0.800000012f, 0.0500000007f, 0.600000024f},
           {0.300000012f, -0.449999988f, -0.699999988f}},
     .w = {{0.99000895f, -0.490014881f, 0.24000372f},
           {0.987886071f, -0.480258048f, 0.230229154f},
           {0.98479563f, -0.475460887f, 0.231667459f},
           {0.978973925f, -0.470818937f, 0.231962919f},
           {0.980956316f, -0.467616975f, 0.230631143f},
           {0.98070991f, -0.461908221f, 0.231362954f}}},
    /* keras.optimizers.Adam() */
    {.name = "adam_small",
     .cfg = {.kind = TT_OPT_ADAM, .lr = 0.00100000005f,
             .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
     .n = 3, .steps = 10, .w0 = {0.5f, -0.25f, 0.125f},
     .g = {{9.99999975e-05f, 1.00000001e-07f, -3.00000011e-06f},
           {0.000150000007f, 2.00000002e-07f, -1.99999999e-06f},
           {-4.99999987e-05f, -1.00000001e-07f, 3.99999999e-06f},
           {7.9999998e-05f, 1.50000005e-07f, -3.00000011e-06f},
           {0.000119999997f, 5.00000006e-08f, -9.99999997e-07f},
           {-9.99999975e-05f, 1.00000001e-07f, 4.99999987e-06f},
           {9.00000014e-05f, -7.99999995e-08f, -2.49999994e-06f},
           {0.000110000001f, 1.19999996e-07f, -3.50000005e-06f},
           {9.99999975e-05f, 1.00000001e-07f, 1.99999999e-06f},
           {7.00000019e-05f, 9.00000003e-08f, -3.00000011e-06f}},
     .w = {{0.49903065f, -0.250030667f, 0.125486836f},
           {0.498056948f, -0.250094414f, 0.126003698f},
           {0.497499228f, -0.250124604f, 0.126020893f},
           {0.496853471f, -0.250174284f, 0.126220807f},
           {0.49610877f, -0.250224113f, 0.126446322f},
           {0.495718569f, -0.25028187f, 0.126376003f},
           {0.495230883f, -0.250320494f, 0.126426414f},
           {0.494647831f, -0.250371307f, 0.12661016f},
           {0.494001299f, -0.250430107f, 0.126691848f},
           {0.493332446f, -0.250494748f, 0.126874611f}}},
    /* keras.optimizers.Nadam(learning_rate=0.1) */
    {.name = "nadam_const",
     .cfg = {.kind = TT_OPT_NADAM, .lr = 0.100000001f,
             .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
     .n = 1, .steps = 6, .w0 = {1.0f},
     .g = {{0.5f},
           {0.5f},
           {0.5f},
           {0.5f},
           {0.5f},
           {0.5f}},
     .w = {{0.893721223f},
           {0.816362441f},
           {0.745228708f},
           {0.675055742f},
           {0.604022801f},
           {0.531422257f}}},
    /* keras.optimizers.Nadam(learning_rate=0.01) */
    {.name = "nadam_vary",
     .cfg = {.kind = TT_OPT_NADAM, .lr = 0.00999999978f,
             .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
     .n = 3, .steps = 8, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -0.300000012f, 1.20000005f},
           {-0.25f, -0.600000024f, 0.899999976f},
           {0.125f, 0.200000003f, -2.0f},
           {0.400000006f, -0.100000001f, 0.300000012f},
           {-0.800000012f, 0.0500000007f, 0.600000024f},
           {0.300000012f, -0.449999988f, -0.699999988f},
           {0.600000024f, 0.25f, 0.150000006f},
           {-0.0500000007f, -0.300000012f, 1.5f}},
     .w = {{0.989372134f, -0.489372134f, 0.239372119f},
           {0.993298054f, -0.479910761f, 0.232663348f},
           {0.990664661f, -0.481899291f, 0.24053511f},
           {0.983732998f, -0.47947669f, 0.239268571f},
           {0.992075443f, -0.479336381f, 0.236435354f},
           {0.988853216f, -0.471786052f, 0.239418328f},
           {0.982394695f, -0.474131286f, 0.238717556f},
           {0.982088387f, -0.468751281f, 0.231972679f}}},
    /* keras.optimizers.Nadam() */
    {.name = "nadam_small",
     .cfg = {.kind = TT_OPT_NADAM, .lr = 0.00100000005f,
             .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
     .n = 3, .steps = 10, .w0 = {0.5f, -0.25f, 0.125f},
     .g = {{9.99999975e-05f, 1.00000001e-07f, -3.00000011e-06f},
           {0.000150000007f, 2.00000002e-07f, -1.99999999e-06f},
           {-4.99999987e-05f, -1.00000001e-07f, 3.99999999e-06f},
           {7.9999998e-05f, 1.50000005e-07f, -3.00000011e-06f},
           {0.000119999997f, 5.00000006e-08f, -9.99999997e-07f},
           {-9.99999975e-05f, 1.00000001e-07f, 4.99999987e-06f},
           {9.00000014e-05f, -7.99999995e-08f, -2.49999994e-06f},
           {0.000110000001f, 1.19999996e-07f, -3.50000005e-06f},
           {9.99999975e-05f, 1.00000001e-07f, 1.99999999e-06f},
           {7.00000019e-05f, 9.00000003e-08f, -3.00000011e-06f}},
     .w = {{0.498938262f, -0.250531405f, 0.126028508f},
           {0.498048753f, -0.251111031f, 0.126631752f},
           {0.498224288f, -0.250914842f, 0.125935003f},
           {0.497697622f, -0.251296997f, 0.126473531f},
           {0.496978402f, -0.251477957f, 0.126715094f},
           {0.497312546f, -0.251778215f, 0.12600638f},
           {0.496776551f, -0.251687288f, 0.126365125f},
           {0.496125996f, -0.252016097f, 0.126897186f},
           {0.495485842f, -0.252322108f, 0.126678199f},
           {0.494937658f, -0.252622932f, 0.127148002f}}},
    /* keras.optimizers.RMSprop() */
    {.name = "rmsprop_default",
     .cfg = {.kind = TT_OPT_RMSPROP, .lr = 0.00100000005f,
             .momentum = 0.0f, .epsilon = 1.00000001e-07f, .rho = 0.899999976f, .centered = 0},
     .n = 3, .steps = 8, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -0.300000012f, 1.20000005f},
           {-0.25f, -0.600000024f, 0.899999976f},
           {0.125f, 0.200000003f, -2.0f},
           {0.400000006f, -0.100000001f, 0.300000012f},
           {-0.800000012f, 0.0500000007f, 0.600000024f},
           {0.300000012f, -0.449999988f, -0.699999988f},
           {0.600000024f, 0.25f, 0.150000006f},
           {-0.0500000007f, -0.300000012f, 1.5f}},
     .w = {{0.996837735f, -0.496837735f, 0.24683772f},
           {0.998312175f, -0.493980587f, 0.244876564f},
           {0.997557521f, -0.49493742f, 0.247481361f},
           {0.995574653f, -0.494439423f, 0.24707295f},
           {0.998096585f, -0.494700998f, 0.246242195f},
           {0.997145832f, -0.492748797f, 0.247214362f},
           {0.995452881f, -0.493823916f, 0.2469953f},
           {0.995601416f, -0.492574602f, 0.24513045f}}},
    /* keras.optimizers.RMSprop(learning_rate=0.01, rho=0.8) */
    {.name = "rmsprop_custom",
     .cfg = {.kind = TT_OPT_RMSPROP, .lr = 0.00999999978f,
             .momentum = 0.0f, .epsilon = 1.00000001e-07f, .rho = 0.800000012f, .centered = 0},
     .n = 3, .steps = 6, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -0.300000012f, 1.20000005f},
           {-0.25f, -0.600000024f, 0.899999976f},
           {0.125f, 0.200000003f, -2.0f},
           {0.400000006f, -0.100000001f, 0.300000012f},
           {-0.800000012f, 0.0500000007f, 0.600000024f},
           {0.300000012f, -0.449999988f, -0.699999988f}},
     .w = {{0.977639318f, -0.477639377f, 0.227639318f},
           {0.988550186f, -0.457226962f, 0.213271931f},
           {0.982665777f, -0.464428842f, 0.232221663f},
           {0.967337728f, -0.460466564f, 0.229075313f},
           {0.986065328f, -0.462670743f, 0.222364217f},
           {0.978657007f, -0.446923912f, 0.230515629f}}},
    /* keras.optimizers.RMSprop(learning_rate=0.01, momentum=0.9) */
    {.name = "rmsprop_momentum",
     .cfg = {.kind = TT_OPT_RMSPROP, .lr = 0.00999999978f,
             .momentum = 0.899999976f, .epsilon = 1.00000001e-07f, .rho = 0.899999976f, .centered = 0},
     .n = 3, .steps = 7, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -0.300000012f, 1.20000005f},
           {-0.25f, -0.600000024f, 0.899999976f},
           {0.125f, 0.200000003f, -2.0f},
           {0.400000006f, -0.100000001f, 0.300000012f},
           {-0.800000012f, 0.0500000007f, 0.600000024f},
           {0.300000012f, -0.449999988f, -0.699999988f},
           {0.600000024f, 0.25f, 0.150000006f}},
     .w = {{0.968377292f, -0.468377411f, 0.218377233f},
           {0.954661012f, -0.411345661f, 0.170305133f},
           {0.934769988f, -0.369585484f, 0.153088182f},
           {0.897039354f, -0.327021271f, 0.133508891f},
           {0.888301373f, -0.291329205f, 0.107580006f},
           {0.87092948f, -0.239684463f, 0.0939656273f},
           {0.838365197f, -0.203955352f, 0.0795220733f}}},
    /* keras.optimizers.RMSprop(learning_rate=0.01, centered=True) */
    {.name = "rmsprop_centered",
     .cfg = {.kind = TT_OPT_RMSPROP, .lr = 0.00999999978f,
             .momentum = 0.0f, .epsilon = 1.00000001e-07f, .rho = 0.899999976f, .centered = 1},
     .n = 3, .steps = 7, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -0.300000012f, 1.20000005f},
           {-0.25f, -0.600000024f, 0.899999976f},
           {0.125f, 0.200000003f, -2.0f},
           {0.400000006f, -0.100000001f, 0.300000012f},
           {-0.800000012f, 0.0500000007f, 0.600000024f},
           {0.300000012f, -0.449999988f, -0.699999988f},
           {0.600000024f, 0.25f, 0.150000006f}},
     .w = {{0.966666758f, -0.466666877f, 0.216666684f},
           {0.981514573f, -0.43527481f, 0.194927558f},
           {0.973836958f, -0.44523862f, 0.220985994f},
           {0.952797234f, -0.439998537f, 0.216901541f},
           {0.978063643f, -0.442713559f, 0.208555475f},
           {0.968548357f, -0.421461552f, 0.218277633f},
           {0.951264679f, -0.432550937f, 0.216086864f}}},
    /* keras.optimizers.RMSprop(learning_rate=0.005, rho=0.85, momentum=0.5, epsilon=1e-06, centered=True) */
    {.name = "rmsprop_cent_mom",
     .cfg = {.kind = TT_OPT_RMSPROP, .lr = 0.00499999989f,
             .momentum = 0.5f, .epsilon = 9.99999997e-07f, .rho = 0.850000024f, .centered = 1},
     .n = 3, .steps = 8, .w0 = {1.0f, -0.5f, 0.25f},
     .g = {{0.5f, -0.300000012f, 1.20000005f},
           {-0.25f, -0.600000024f, 0.899999976f},
           {0.125f, 0.200000003f, -2.0f},
           {0.400000006f, -0.100000001f, 0.300000012f},
           {-0.800000012f, 0.0500000007f, 0.600000024f},
           {0.300000012f, -0.449999988f, -0.699999988f},
           {0.600000024f, 0.25f, 0.150000006f},
           {-0.0500000007f, -0.300000012f, 1.5f}},
     .w = {{0.985997438f, -0.485997796f, 0.23599723f},
           {0.98520273f, -0.465447932f, 0.219448507f},
           {0.98149848f, -0.459421158f, 0.221980765f},
           {0.970400333f, -0.454105258f, 0.221507788f},
           {0.975470662f, -0.452662706f, 0.217629343f},
           {0.973927557f, -0.442358255f, 0.220011443f},
           {0.965635657f, -0.442133367f, 0.220201805f},
           {0.962162375f, -0.435984582f, 0.211724609f}}},
    /* keras.optimizers.RMSprop() */
    {.name = "rmsprop_small",
     .cfg = {.kind = TT_OPT_RMSPROP, .lr = 0.00100000005f,
             .momentum = 0.0f, .epsilon = 1.00000001e-07f, .rho = 0.899999976f, .centered = 0},
     .n = 3, .steps = 10, .w0 = {0.5f, -0.25f, 0.125f},
     .g = {{0.00300000003f, 0.00100000005f, 1.00000001e-07f},
           {0.00249999994f, 0.00150000001f, 2.00000002e-07f},
           {-0.00350000011f, -0.000500000024f, -1.00000001e-07f},
           {0.00300000003f, 0.00079999998f, 1.50000005e-07f},
           {0.00200000009f, 0.00120000006f, 5.00000006e-08f},
           {-0.00300000003f, -0.00100000005f, 1.00000001e-07f},
           {0.00400000019f, 0.000899999985f, -7.99999995e-08f},
           {0.00300000003f, 0.00109999999f, 1.19999996e-07f},
           {0.0027999999f, 0.00100000005f, 1.00000001e-07f},
           {-0.00319999992f, 0.000699999975f, 9.00000003e-08f}},
     .w = {{0.497000009f, -0.252236068f, 0.124999687f},
           {0.494982183f, -0.254564524f, 0.124999054f},
           {0.497145951f, -0.253782213f, 0.124999367f},
           {0.495485634f, -0.254986018f, 0.12499889f},
           {0.494392663f, -0.25660193f, 0.124998733f},
           {0.495907217f, -0.255317688f, 0.12499842f},
           {0.494143099f, -0.256445587f, 0.124998674f},
           {0.492868185f, -0.257756561f, 0.124998294f},
           {0.491703272f, -0.258916199f, 0.124997981f},
           {0.492984951f, -0.259736449f, 0.124997698f}}},
    /* keras.optimizers.RMSprop(momentum=0.9, centered=True) */
    {.name = "rmsprop_cent_small",
     .cfg = {.kind = TT_OPT_RMSPROP, .lr = 0.00100000005f,
             .momentum = 0.899999976f, .epsilon = 1.00000001e-07f, .rho = 0.899999976f, .centered = 1},
     .n = 3, .steps = 10, .w0 = {0.5f, -0.25f, 0.125f},
     .g = {{0.00300000003f, 0.00100000005f, 1.00000001e-07f},
           {0.00249999994f, 0.00150000001f, 2.00000002e-07f},
           {-0.00350000011f, -0.000500000024f, -1.00000001e-07f},
           {0.00300000003f, 0.00079999998f, 1.50000005e-07f},
           {0.00200000009f, 0.00120000006f, 5.00000006e-08f},
           {-0.00300000003f, -0.00100000005f, 1.00000001e-07f},
           {0.00400000019f, 0.000899999985f, -7.99999995e-08f},
           {0.00300000003f, 0.00109999999f, 1.19999996e-07f},
           {0.0027999999f, 0.00100000005f, 1.00000001e-07f},
           {-0.00319999992f, 0.000699999975f, 9.00000003e-08f}},
     .w = {{0.49685514f, -0.252294153f, 0.124999687f},
           {0.491801649f, -0.256867975f, 0.124998771f},
           {0.489423037f, -0.260174304f, 0.124998264f},
           {0.485578358f, -0.264432639f, 0.124997333f},
           {0.480968893f, -0.270064205f, 0.124996334f},
           {0.478343427f, -0.273806632f, 0.12499512f},
           {0.474153876f, -0.278370291f, 0.124994278f},
           {0.469020933f, -0.283918321f, 0.124993145f},
           {0.46311301f, -0.290232718f, 0.124991804f},
           {0.459116787f, -0.296874464f, 0.124990314f}}},
};
/* the default arguments of each optimizer, from default-constructed Keras objects */
static const tt_optim_config KERAS_DEFAULTS[] = {
    {.kind = TT_OPT_SGD, .lr = 0.00999999978f, .momentum = 0.0f, .nesterov = 0},
    {.kind = TT_OPT_ADAM, .lr = 0.00100000005f,
     .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
    {.kind = TT_OPT_NADAM, .lr = 0.00100000005f,
     .beta1 = 0.899999976f, .beta2 = 0.999000013f, .epsilon = 1.00000001e-07f},
    {.kind = TT_OPT_RMSPROP, .lr = 0.00100000005f,
     .momentum = 0.0f, .epsilon = 1.00000001e-07f, .rho = 0.899999976f, .centered = 0},
};
/* END keras_reference.py output */

#define N_CASES (int)(sizeof KERAS_CASES / sizeof KERAS_CASES[0])

/* Tolerance, per element and step: |w - w_keras| <= W_ULPS * 2^-23 |w_keras| + STEP_RTOL * path, where path is the
 * distance the Keras weight has travelled so far (the sum of |step|).
 * - W_ULPS = 4 (2^-23 |w| is one to two ulps of w): both sides compute in float32, and rounding each update into
 *   w differs by an ulp now and then.
 * - STEP_RTOL = 2e-5: Keras computes the per-step scalars in float32, optim.c in double. The worst is 1 - beta_2^t
 *   (Adam's alpha, Nadam's v_hat): beta_2^t ~ 0.998 carries a rounding error of up to ~6e-8, which is up to 3e-5 of
 *   1 - beta_2^t at t = 2 (cancellation), 1.5e-5 after the sqrt; so a step's size may differ by ~1.5e-5 of itself.
 *   RMSprop: Keras's 1 - rho is Python's double 1 - 0.9 rounded to float32 (0.1f); tt_rmsprop_elem's is
 *   1.0f - 0.9f = 0.100000024f, 2.4e-7 of itself apart, i.e. ~1.2e-7 of a step after the sqrt.
 * Measured over all cases: at most 6.6 x 2^-23 |w| (nadam_const, lr 0.1: big steps), 4.8e-7 of the path beyond
 * W_ULPS; every run prints both. A formula error (epsilon inside the sqrt, the legacy Nadam schedule, the bias
 * correction of step t+1, beta_1 for beta_2, Nesterov without the look-ahead) changes some step of some case by
 * 1e-3 of its size or far more, and fails. */
#define W_ULPS 4.0
#define STEP_RTOL 2e-5

/* Runs case kc with the whole variable in one tt_optim_apply call (slices == 0), or one call per element
 * (slices == 1: the state must be indexed by absolute position, as the trainer's host slices need). */
static void run_case(const keras_case *kc, int slices, float w[KC_MAX_STEPS][KC_MAX_N])
{
    tt_optim o;
    tt_error err;
    ck_assert_int_eq(tt_optim_init(&o, &kc->cfg, (size_t)kc->n, &err), TT_OK);
    float cur[KC_MAX_N];
    memcpy(cur, kc->w0, sizeof cur);
    for (int t = 0; t < kc->steps; t++) {
        tt_optim_begin_step(&o);
        if (slices)
            for (int i = 0; i < kc->n; i++) tt_optim_apply(&o, &cur[i], &kc->g[t][i], (size_t)i, (size_t)i + 1);
        else
            tt_optim_apply(&o, cur, kc->g[t], 0, (size_t)kc->n);
        memcpy(w[t], cur, sizeof cur);
    }
    tt_optim_free(&o);
}

START_TEST(test_keras_case)
{
    const keras_case *kc = &KERAS_CASES[_i];
    float w[KC_MAX_STEPS][KC_MAX_N] = {{0}}, ws[KC_MAX_STEPS][KC_MAX_N] = {{0}};
    run_case(kc, 0, w);
    double worst_ulps = 0, worst_path = 0; /* |w - w_keras| / (2^-23 |w_keras|); what exceeds W_ULPS, / path */
    for (int i = 0; i < kc->n; i++) {
        double path = 0, prev = kc->w0[i];
        for (int t = 0; t < kc->steps; t++) {
            const double r = kc->w[t][i], d = fabs((double)w[t][i] - r), ulp_r = FLT_EPSILON * fabs(r);
            path += fabs(r - prev);
            prev = r;
            worst_ulps = fmax(worst_ulps, d / ulp_r);
            if (path > 0) worst_path = fmax(worst_path, (d - W_ULPS * ulp_r) / path);
            ck_assert_msg(d <= W_ULPS * ulp_r + STEP_RTOL * path,
                          "%s step %d element %d: %.9g, Keras %.9g (%.1f x 2^-23 |w|; path so far %.3g)", kc->name,
                          t + 1, i, w[t][i], r, d / ulp_r, path);
        }
    }
    printf("%-18s %2d steps x %d: max |w - w_keras| = %.2f x 2^-23 |w|; beyond %g of those: %.2g of the path\n",
           kc->name, kc->steps, kc->n, worst_ulps, W_ULPS, worst_path);
    run_case(kc, 1, ws);
    ck_assert_msg(memcmp(w, ws, sizeof w) == 0, "%s: applying element by element differs", kc->name);
}
END_TEST

/* tt_optim_defaults gives Keras's default arguments (only the fields each optimizer has). */
START_TEST(test_keras_defaults)
{
    for (size_t k = 0; k < sizeof KERAS_DEFAULTS / sizeof KERAS_DEFAULTS[0]; k++) {
        const tt_optim_config *want = &KERAS_DEFAULTS[k];
        tt_optim_config c = tt_optim_defaults(want->kind);
        ck_assert_int_eq(c.kind, want->kind);
        ck_assert_float_eq(c.lr, want->lr);
        if (want->kind == TT_OPT_SGD) {
            ck_assert_float_eq(c.momentum, want->momentum);
            ck_assert_int_eq(c.nesterov, want->nesterov);
        } else if (want->kind == TT_OPT_RMSPROP) {
            ck_assert_float_eq(c.momentum, want->momentum);
            ck_assert_float_eq(c.epsilon, want->epsilon);
            ck_assert_float_eq(c.rho, want->rho);
            ck_assert_int_eq(c.centered, want->centered);
        } else {
            ck_assert_float_eq(c.beta1, want->beta1);
            ck_assert_float_eq(c.beta2, want->beta2);
            ck_assert_float_eq(c.epsilon, want->epsilon);
        }
    }
}
END_TEST

START_TEST(test_parse_kind)
{
    tt_optim_kind k;
    ck_assert_int_eq(tt_optim_parse_kind("adam", &k), 0);
    ck_assert_int_eq(k, TT_OPT_ADAM);
    ck_assert_int_eq(tt_optim_parse_kind("nadam", &k), 0);
    ck_assert_int_eq(k, TT_OPT_NADAM);
    ck_assert_int_eq(tt_optim_parse_kind("sgd", &k), 0);
    ck_assert_int_eq(k, TT_OPT_SGD);
    ck_assert_int_eq(tt_optim_parse_kind("rmsprop", &k), 0);
    ck_assert_int_eq(k, TT_OPT_RMSPROP);
    ck_assert_int_eq(tt_optim_parse_kind("adagrad", &k), -1);
    ck_assert_int_eq(tt_optim_parse_kind("RMSprop", &k), -1); /* the CLI's names are lower-case */
    for (int kind = TT_OPT_SGD; kind <= TT_OPT_RMSPROP; kind++) {
        ck_assert_int_eq(tt_optim_parse_kind(tt_optim_kind_name((tt_optim_kind)kind), &k), 0);
        ck_assert_int_eq(k, kind);
    }
}
END_TEST

/* tt_optim_state_floats is what the memory budget counts: it must equal the buffers tt_optim_init allocates, for
 * every kind and every RMSprop configuration (Keras keeps momentum and the average gradient only when used). */
START_TEST(test_state_floats)
{
    static const struct {
        tt_optim_kind kind;
        float momentum;
        int centered;
        size_t floats;
    } cases[] = {
        {TT_OPT_SGD, 0.0f, 0, 1},     {TT_OPT_SGD, 0.9f, 0, 1},     {TT_OPT_ADAM, 0.0f, 0, 2},
        {TT_OPT_NADAM, 0.0f, 0, 2},   {TT_OPT_RMSPROP, 0.0f, 0, 1}, {TT_OPT_RMSPROP, 0.9f, 0, 2},
        {TT_OPT_RMSPROP, 0.0f, 1, 2}, {TT_OPT_RMSPROP, 0.5f, 1, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tt_optim_config c = tt_optim_defaults(cases[i].kind);
        c.momentum = cases[i].momentum;
        c.centered = cases[i].centered;
        tt_optim o;
        tt_error err;
        ck_assert_int_eq(tt_optim_init(&o, &c, 5, &err), TT_OK);
        const size_t allocated = (size_t)(o.m != NULL) + (size_t)(o.v != NULL) + (size_t)(o.a != NULL);
        ck_assert_msg(tt_optim_state_floats(&c) == cases[i].floats && allocated == cases[i].floats,
                      "case %zu (%s, momentum %g, centered %d): state_floats %zu, allocated %zu, want %zu", i,
                      tt_optim_kind_name(c.kind), (double)c.momentum, c.centered, tt_optim_state_floats(&c),
                      allocated, cases[i].floats);
        tt_optim_free(&o);
        tt_optim_free(&o); /* twice: the style's promise */
    }
}
END_TEST

/* The banner's description of each configuration names its own hyper-parameters. */
START_TEST(test_describe)
{
    char buf[128];
    tt_optim_config c = tt_optim_defaults(TT_OPT_RMSPROP);
    tt_optim_describe(&c, buf, sizeof buf);
    ck_assert_str_eq(buf, ", rho 0.9, momentum 0, epsilon 1e-07");
    c.momentum = 0.5f;
    c.centered = 1;
    tt_optim_describe(&c, buf, sizeof buf);
    ck_assert_str_eq(buf, ", rho 0.9, momentum 0.5, epsilon 1e-07, centered");
    c = tt_optim_defaults(TT_OPT_ADAM);
    tt_optim_describe(&c, buf, sizeof buf);
    ck_assert_str_eq(buf, ", beta_1 0.9, beta_2 0.999, epsilon 1e-07");
    c = tt_optim_defaults(TT_OPT_SGD);
    c.momentum = 0.9f;
    c.nesterov = 1;
    tt_optim_describe(&c, buf, sizeof buf);
    ck_assert_str_eq(buf, ", momentum 0.9, nesterov");
    tt_optim_describe(&c, buf, 8); /* truncated, still terminated */
    ck_assert_str_eq(buf, ", momen");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("keras");
    tcase_add_loop_test(tc, test_keras_case, 0, N_CASES);
    tcase_add_test(tc, test_keras_defaults);
    tcase_add_test(tc, test_parse_kind);
    tcase_add_test(tc, test_state_floats);
    tcase_add_test(tc, test_describe);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
