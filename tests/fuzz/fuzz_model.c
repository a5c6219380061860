/* fuzz_model.c — libFuzzer target for the model-file parser (tt_model_parse in src/model.c). The input is the
 * file's text, NUL-terminated as tt_model_load guarantees; inputs over tt_model_load's 1 MiB limit or holding a
 * NUL byte are skipped, since tt_model_load refuses them before parsing. The data shape is fixed to
 * Fashion-MNIST's (784 features, 10 classes), so `input size=784` and a last `dense units=10` are what a valid
 * file needs; the seed corpus has both. An accepted model must have a consistent layout table; a refusal must
 * name the file.
 * Not for: reading the file (tt_input_read_text, covered by tests/test_idx.c) or building parameters. */
#include <stdlib.h>

#include "tt_fuzz.h"
#include "tt_model.h"

enum { FUZZ_INPUT_DIM = 784, FUZZ_CLASSES = 10 };

/* What tt_model_parse promises of an accepted model: a chain of layers ending in the classes, and a layout table
 * that tiles the flat parameter buffer without gaps. */
static void check_model(const tt_model *m)
{
    TT_ASSERT(m->n_layers >= 1 && m->n_layers <= TT_MAX_LAYERS);
    TT_ASSERT(m->layers[0].in == FUZZ_INPUT_DIM && m->layers[m->n_layers - 1].out == FUZZ_CLASSES);
    size_t off = 0;
    for (size_t i = 0; i < m->n_layers; i++) {
        TT_ASSERT(i == 0 || m->layers[i].in == m->layers[i - 1].out);
        TT_ASSERT(m->layers[i].offset == off && m->layers[i].out <= TT_MAX_WIDTH);
        off += m->layers[i].n_params;
    }
    TT_ASSERT(off == m->n_params && m->n_tensors <= TT_MAX_TENSORS);
    size_t t_off = 0;
    for (size_t t = 0; t < m->n_tensors; t++) {
        TT_ASSERT(m->tensors[t].offset == t_off);
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
    tt_model m;
    tt_error err = {{0}};
    tt_status s = tt_model_parse(&m, text, "fuzz-model", TT_FLAT_INPUT(FUZZ_INPUT_DIM, FUZZ_CLASSES), &err);
    if (s == TT_OK)
        check_model(&m);
    else
        tt_fuzz_check_refusal(s, &err, "fuzz-model");
    free(text);
    return 0;
}
