/* model/model_build.h — what model.c lends the two builders of a model, model_builtin.c and model_file.c (not a public
 * header; tt_model.h is): a model started empty, a layer appended, and the layers laid out once all are there. */
#ifndef TT_MODEL_BUILD_H
#define TT_MODEL_BUILD_H

#include "tt_model.h"

/* m emptied for a new model of input `in`; `source` (a path or "built-in NAME") names it in messages, escaped. */
void model_reset(tt_model *m, const tt_model_input *in, const char *source);

/* Appends a layer of `kind` (hyper-parameters from proto, may be NULL; fused: an activation= of the layer before),
 * named as Keras names it; one line starting with `where` if the model is full. */
tt_status model_add(tt_model *m, const tt_layer_kind *kind, const tt_layer *proto, int fused, tt_error *err,
                    const char *where);

/* Shapes layer by layer (each kind's setup), then the layout table and the totals: one line naming the model and the
 * layer where they do not fit. */
tt_status model_finish(tt_model *m, tt_error *err);

#endif
