#!/usr/bin/env python3
"""keras_augment_reference.py - reference numbers for tests/test_augment.c's formula case, from a real Keras.

What it does: one small image x (4 rows, 5 columns, 2 channels, channels last; float32 values k/251 from a fixed
linear congruence) through ImageDataGenerator(fill_mode='nearest').apply_transform with given shifts and flips — the
call ImageDataGenerator.flow makes per image once get_random_transform has drawn them (Keras 3.15's
keras/src/legacy/preprocessing/image.py: scipy.ndimage.affine_transform, order=1, then the flip). Each case is a row
offset DY, a column offset DX (float32 values, passed to Keras exactly) and a flip; it records x and every case's
output as a C fragment, each float with %.9g (which round-trips float32 exactly). The fragment is pasted into
tests/test_augment.c between the "BEGIN keras_augment_reference.py output" and "END" comments; the test holds
towertrain's tt_augment_pixel to these numbers.

Keras's naming, which the fragment translates: apply_transform's "tx" moves the columns and "ty" the rows (the matrix
[[1, 0, tx], [0, 1, ty]] has its axes swapped for channels-last arrays before scipy sees it), while
get_random_transform draws tx from height_shift_range times the height and ty from width_shift_range times the width
(keras-team/keras#17398). towertrain's dy (rows) is Keras's ty and its dx (columns) Keras's tx; include/tt_augment.h
says which range moves which axis there.

What it is not: a test. TensorFlow is never needed to build or test towertrain.

How to run (from the repository root):
    python3 -m venv VENV && VENV/bin/pip install tensorflow-cpu==2.21.0 keras==3.15.1 scipy
    VENV/bin/python tools/keras_augment_reference.py > /tmp/augment.c
"""
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import scipy  # noqa: E402
import keras  # noqa: E402
from keras.src.legacy.preprocessing.image import ImageDataGenerator  # noqa: E402

F32 = np.float32
H, W, C = 4, 5, 2

# (dy, dx, flip): fractional offsets both ways, whole pixels, a half, offsets past the edge (the fill) and flips
CASES = [
    (0.3, -1.7, 0),
    (-0.45, 2.25, 1),
    (1.6, 0.8, 0),
    (-3.2, -4.9, 1),
    (0.0, 0.5, 1),
    (2.0, -1.0, 0),
    (-0.1, 0.1, 0),
    (0.7, 3.35, 1),
]


def image():
    """H x W x C float32 values k/251, k from a fixed linear congruence: spread over [0, 1)."""
    out, s = [], 12345
    for _ in range(H * W * C):
        s = (s * 1103515245 + 12345) % (1 << 31)
        out.append(F32((s >> 16) % 251) / F32(251))
    return np.array(out, dtype=F32).reshape(H, W, C)


def wrapped(items):
    """A C initialiser's items, whole items to a line of at most 110 columns, indented under the declaration."""
    lines, line = [], ""
    for item in items:
        if line and len(line) + 2 + len(item) > 110:
            lines.append(line + ",")
            line = ""
        line = item if not line else line + ", " + item
    return "{\n        %s}" % "\n        ".join(lines + [line])


def floats(v):
    return ["%.9g" % float(x) for x in np.asarray(v, dtype=F32).ravel()]


def main():
    warnings.simplefilter("ignore")
    x = image()
    g = ImageDataGenerator(fill_mode="nearest")
    print("/* BEGIN keras_augment_reference.py output (Keras %s, scipy %s, numpy %s) */"
          % (keras.__version__, scipy.__version__, np.__version__))
    print("enum { KH = %d, KW = %d, KC = %d, KCASES = %d };" % (H, W, C, len(CASES)))
    print("static const float KERAS_X[KH * KW * KC] = %s;" % wrapped(floats(x)))
    print("static const struct {\n    float dy, dx;\n    int flip;\n} KERAS_CASE[KCASES] = %s;"
          % wrapped("{%.9g, %.9g, %d}" % (F32(dy), F32(dx), f) for dy, dx, f in CASES))
    rows = []
    for dy, dx, flip in CASES:
        p = {"tx": float(F32(dx)), "ty": float(F32(dy)), "flip_horizontal": bool(flip)}
        y = g.apply_transform(x.copy(), p)
        assert y.dtype == F32 and y.shape == x.shape
        rows.append(wrapped(floats(y)))
    print("static const float KERAS_Y[KCASES][KH * KW * KC] = {\n    %s};" % ",\n    ".join(rows))
    print("/* END keras_augment_reference.py output */")


if __name__ == "__main__":
    main()
