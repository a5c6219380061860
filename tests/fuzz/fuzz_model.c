/* fuzz_model.c — libFuzzer target for the model-file parser (tt_model_parse in src/model/model_file.c). The input is the
 * file's text, NUL-terminated as tt_model_load guarantees; inputs over tt_model_load's 1 MiB limit or holding a
 * NUL byte are skipped, since tt_model_load refuses them before parsing. Each input is parsed twice: for
 * Fashion-MNIST's flat data (784 features, 10 classes: `input size=784` and a last `dense units=10` make a valid
 * file), and with no data, as `summary` and `probe` parse a file — its `input shape=` line gives the shape and its
 * last layer the classes, which is how the fuzzer reaches the convolution, pooling and embedding kinds (the seed
 * corpus has a cnn and a textcnn). An accepted model must have a consistent layout table; a refusal must name the
 * file.
 * Not for: reading the file (tt_input_read_text, covered by tests/test_idx.c) or building parameters. */
#include <stdlib.h>

#include "tt_fuzz.h"
#include "tt_model.h"

enum { FUZZ_INPUT_DIM = 784, FUZZ_CLASSES = 10 };

/* What tt_model_parse promises of an accepted model: a chain of layers whose shapes and sizes agree, ending in the
 * classes, and a layout table that tiles the flat parameter buffer without gaps, each tensor's size the product of
 * its shape. */
static size_t dims_product(const size_t *d, int n)
{
    size_t p = 1;
    for (int i = 0; i < n; i++) TT_ASSERT(tt_mul_size(p, d[i], &p) == 0);
    return p;
}

static void check_model(const tt_model *m, size_t input_dim, size_t classes)
{
    TT_ASSERT(m->n_layers >= 1 && m->n_layers <= TT_MAX_LAYERS && m->n_logits >= 1 && m->n_logits <= m->n_layers);
    TT_ASSERT(m->layers[0].in == input_dim && m->layers[m->n_layers - 1].out == classes && m->n_classes == classes);
    size_t off = 0;
    for (size_t i = 0; i < m->n_layers; i++) {
        const tt_layer *l = &m->layers[i];
        TT_ASSERT(i == 0 || l->in == m->layers[i - 1].out);
        TT_ASSERT(l->in == dims_product(l->in_shape.d, l->in_shape.ndim) || (i == 0 && l->in_shape.ndim == 1));
        TT_ASSERT(l->out == dims_product(l->out_shape.d, l->out_shape.ndim) && l->out <= TT_MAX_SAMPLE_ELEMS);
        TT_ASSERT(l->offset == off);
        off += l->n_params;
    }
    TT_ASSERT(off == m->n_trainable && m->n_tensors <= TT_MAX_TENSORS);
    for (size_t i = 0; i < m->n_layers; i++) { /* the non-trainable tail, layer by layer after every trainable */
        TT_ASSERT(m->layers[i].stat_offset == off);
        off += m->layers[i].n_stats;
    }
    TT_ASSERT(off == m->n_params);
    size_t t_off = 0;
    for (size_t t = 0; t < m->n_tensors; t++) {
        TT_ASSERT(m->tensors[t].offset == t_off);
        TT_ASSERT(m->tensors[t].size == dims_product(m->tensors[t].shape, m->tensors[t].ndim));
        t_off += m->tensors[t].size;
    }
    TT_ASSERT(t_off == m->n_params);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > ((size_t)1 << 20) || memchr(data, '\0', size)) return 0;
    char *text = (char *)malloc(size + 1);
    TT_ASSERT(text != NULL);
    if (size) memcpy(text, data, size);
    text[size] = '\0';
    static tt_model m; /* ~40 KB: not on the stack */
    tt_error err = {{0}};
    tt_status s = tt_model_parse(&m, text, "fuzz-model", TT_FLAT_INPUT(FUZZ_INPUT_DIM, FUZZ_CLASSES), &err);
    if (s == TT_OK)
        check_model(&m, FUZZ_INPUT_DIM, FUZZ_CLASSES);
    else
        tt_fuzz_check_refusal(s, &err, "fuzz-model");
    const tt_model_input none = {{0, {0, 0, 0, 0}}, 0, 0};
    s = tt_model_parse(&m, text, "fuzz-model", &none, &err);
    if (s == TT_OK)
        check_model(&m, m.input_dim, m.n_classes);
    else
        tt_fuzz_check_refusal(s, &err, "fuzz-model");
    free(text);
    return 0;
}
