/* tt_augment.h — --augment: Keras's ImageDataGenerator(width_shift_range, height_shift_range, horizontal_flip) as one
 * sample's draw and one output pixel, written once. The CPU backend loops over these functions and the CUDA kernel
 * calls them one thread per pixel (TT_HD, as tt_math.h's), both compiled without FMA contraction (CMakeLists.txt:
 * ISO C, nvcc --fmad=false, the stand-in's -ffp-contract=off), so a sample augmented on either is the same bits.
 * Not for: reading the option (src/cmd/cli.c), when a tower runs it (src/step/tower.c's data phase), or loops.
 *
 * The transform, as keras/src/legacy/preprocessing/image.py (Keras 3.15) does it with fill_mode 'nearest' and
 * interpolation_order 1: a float range r < 1 is a fraction of the image's size, the shift drawn uniform in [-r, r)
 * and multiplied by that size (get_random_transform), so it is fractional and the image is resampled bilinearly
 * (scipy.ndimage.affine_transform, order=1): output pixel (i, j) reads the input at (i + dy, j + dx), a coordinate
 * beyond the edge reading the edge ('nearest': the input extended by its last pixel, the same as clamping the
 * coordinate); then the horizontal flip, with probability 0.5, after the shift (apply_transform). One difference, on
 * purpose: Keras 3.15 scales width_shift_range by the width but moves the rows by it, and height_shift_range the
 * columns (keras-team/keras#17398, tf-keras#310); here `width` moves the columns and `height` the rows, as Keras's
 * documentation says. The cifar10 preset has equal ranges on square images, where the two agree in distribution.
 * scipy interpolates in float64 and rounds once; these functions interpolate in float32, within a few float32 ulps of
 * it (tests/test_augment.c holds recorded Keras outputs), and exactly where it is exact: a whole-pixel shift moves
 * pixels, a flip mirrors them, the edge repeats. */
#ifndef TT_AUGMENT_H
#define TT_AUGMENT_H

#include "tt_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --augment's settings (all zero: none). */
typedef struct tt_augment {
    float width;  /* ImageDataGenerator's width_shift_range: a fraction of the width in [0, 1) */
    float height; /* height_shift_range: a fraction of the height in [0, 1) */
    int flip;     /* horizontal_flip: a sample is mirrored left-right with probability 0.5 */
} tt_augment;

TT_HD int tt_augment_on(const tt_augment *a) { return a->width > 0.0f || a->height > 0.0f || a->flip; }

/* One sample's transform: output pixel (i, j) reads the source at (i + dy, j' + dx), j' = W - 1 - j if flip. */
typedef struct tt_augment_draw {
    float dy, dx;
    int flip;
} tt_augment_draw;

/* The key of an epoch's draws: like dropout's (tt_dropout_key), a hash of the seed and the epoch, with a salt of its
 * own ("augm") so no dropout layer's masks share its stream. */
TT_HD uint64_t tt_augment_key(uint64_t seed, uint64_t epoch)
{
    return tt_mix64(seed ^ tt_mix64(epoch ^ tt_mix64(0x6175676d00000000ull)));
}

/* Uniform k of data-set sample `sample` in [0, 1) (24 bits): counter-based, so the draw is the sample's whichever
 * tower, shard or step takes it, and a resumed run (the same epoch and index) draws it again. */
TT_HD float tt_augment_uniform(uint64_t key, uint64_t sample, uint64_t k)
{
    const uint64_t h = tt_mix64(key ^ tt_mix64(sample * 0x100000001b3ull + k));
    return (float)(h >> 40) * (1.0f / 16777216.0f);
}

/* A shift of an image of n pixels along an axis with range r: uniform in [-r, r) times n (np.random.uniform(-r, r) *
 * img_shape[axis]); 0 for r = 0. */
TT_HD float tt_augment_shift(float u, float r, size_t n) { return (2.0f * u - 1.0f) * r * (float)n; }

/* Sample `sample`'s draw in the epoch of `key` for an H x W image: the rows' shift (uniform 0), the columns' (1) and
 * the flip (2: u < 0.5, as np.random.random() < 0.5). */
TT_HD tt_augment_draw tt_augment_sample(const tt_augment *a, uint64_t key, uint64_t sample, size_t H, size_t W)
{
    tt_augment_draw d;
    d.dy = tt_augment_shift(tt_augment_uniform(key, sample, 0), a->height, H);
    d.dx = tt_augment_shift(tt_augment_uniform(key, sample, 1), a->width, W);
    d.flip = a->flip && tt_augment_uniform(key, sample, 2) < 0.5f;
    return d;
}

/* A source coordinate clamped into [0, n - 1]: fill_mode 'nearest'. Clamping the coordinate, not only the two
 * neighbours it falls between, keeps the edge exact: beyond it the weight of the far neighbour is 0. */
TT_HD float tt_augment_clamp(float at, size_t n)
{
    const float hi = (float)(n - 1);
    return at < 0.0f ? 0.0f : at > hi ? hi : at;
}

/* Output element (i, j, c) of one sample x (H, W, C channels-last) under draw d: the bilinear mix of the four source
 * pixels around (i + dy, j' + dx), rows first. With whole-pixel offsets the weights are 1 and 0, and the result is
 * the source pixel itself (1·a + 0·b). */
TT_HD float tt_augment_pixel(const float *x, size_t H, size_t W, size_t C, size_t i, size_t j, size_t c,
                             tt_augment_draw d)
{
    const size_t jj = d.flip ? W - 1 - j : j; /* the flip comes after the shift: mirror the column it reads */
    const float y = tt_augment_clamp((float)i + d.dy, H), xc = tt_augment_clamp((float)jj + d.dx, W);
    const float y0 = floorf(y), x0 = floorf(xc), fy = y - y0, fx = xc - x0;
    const size_t r0 = (size_t)y0, c0 = (size_t)x0;
    const size_t r1 = r0 + 1 < H ? r0 + 1 : r0, c1 = c0 + 1 < W ? c0 + 1 : c0;
    const float top = (1.0f - fx) * x[(r0 * W + c0) * C + c] + fx * x[(r0 * W + c1) * C + c];
    const float bottom = (1.0f - fx) * x[(r1 * W + c0) * C + c] + fx * x[(r1 * W + c1) * C + c];
    return (1.0f - fy) * top + fy * bottom;
}

#ifdef __cplusplus
}
#endif
#endif
