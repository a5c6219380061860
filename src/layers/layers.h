/* layers/layers.h — what the layer files share among themselves (not a public header): the convolution and pooling
 * geometry from Keras's padding rules, the chunked im2col convolution that conv2d and conv1d both run, and the
 * max pooling that maxpool2d, maxpool1d and globalmaxpool1d all run. Each kind's own file says what it is. */
#ifndef TT_LAYERS_H
#define TT_LAYERS_H

#include <stddef.h>

#include "tt_model.h"

/* Output size and leading padding along one axis: same -> ceil(n / s), padding split with the smaller half first
 * (TF's rule); valid -> floor((n - k) / s) + 1, needing n >= k. Returns 0 when valid does not fit. */
int tt_layer_axis(size_t n, size_t k, size_t s, int same, size_t *out, size_t *pad);

/* Fills l->g for an input (H, W, C) and the layer's kernel, stride and padding; one line naming the layer if the
 * window does not fit. */
tt_status tt_layer_geom(tt_layer *l, size_t H, size_t W, size_t C, tt_error *err);

/* Convolution (l->g, l->units filters, kernel (KH, KW, C, F), optional bias): the parts conv2d and conv1d share. */
int tt_conv_tensors(const tt_layer *l, tt_tensor_info *out);
void tt_conv_init(const tt_layer *l, float *h_p, tt_rng *rng);
size_t tt_conv_workspace(const tt_layer *l, size_t B, size_t chunk_mnk);
int tt_conv_gemms(const tt_layer *l, size_t B, int need_dx, size_t chunk_mnk, tt_gemm_shape *out);
void tt_conv_forward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, const float *d_x,
                        float *d_y, size_t B);
void tt_conv_backward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, float *d_g,
                         const float *d_x, const float *d_y, float *d_dy, float *d_dx, size_t B);

/* The end of a dense or conv forward over (rows, cols) outputs y: the bias, and the relu after the layer where it
 * runs as the layer's epilogue (l->relu_epilogue), in place. The backward's start: dy becomes the gradient before
 * the relu (in place) and db the bias gradient. Without a bias (l->use_bias 0) d_b and d_db are not used. */
void tt_bias_epilogue(tt_dev *dev, const tt_layer *l, const float *d_b, float *d_y, size_t rows, size_t cols);
void tt_bias_epilogue_bwd(tt_dev *dev, const tt_layer *l, float *d_db, float *d_dy, const float *d_y, size_t rows,
                          size_t cols);

/* Max pooling over l->g: the forward and backward every pooling kind shares. */
void tt_maxpool_forward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, const float *d_x,
                        float *d_y, size_t B);
void tt_maxpool_backward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, float *d_g,
                         const float *d_x, const float *d_y, float *d_dy, float *d_dx, size_t B);

/* Names tensor t "<layer>/<suffix>" with the given shape (ndim dims, the rest ignored); the model derives its size
 * from the shape (checked for overflow) when it lays the tensors out. */
void tt_tensor_set(tt_tensor_info *t, const tt_layer *l, const char *suffix, int ndim, size_t d0, size_t d1, size_t d2,
                   size_t d3);

/* Glorot-uniform (Keras's default kernel initializer) for fan_in, fan_out: U(-limit, limit),
 * limit = sqrt(6 / (fan_in + fan_out)). https://keras.io/api/layers/initializers/#glorotuniform-class */
void tt_glorot_uniform(float *p, size_t n, size_t fan_in, size_t fan_out, tt_rng *rng);

#endif
