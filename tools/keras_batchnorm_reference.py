#!/usr/bin/env python3
"""keras_batchnorm_reference.py - reference numbers for tests/test_reference.c's batchnorm case, from a real Keras.

What it does: one keras.layers.BatchNormalization(momentum=0.9) (epsilon Keras's default 1e-3) over a (2, 2, 2, 3)
input — two samples of 2x2 pixels with 3 channels, so the statistics are over 8 rows per channel — with gamma, beta,
moving_mean and moving_variance set to fixed values. It records, as a C fragment (every float with %.9g, which
round-trips float32 exactly): the training-mode output; the gradients of L = sum(R * y) (R fixed) with respect to the
input, gamma and beta; the moving statistics after that training call; and the inference-mode output with the
moving statistics as they were before it. The fragment is pasted into tests/test_reference.c between the "BEGIN
keras_batchnorm_reference.py output" and "END" comments; the test compares towertrain's layer with these numbers.

What it is not: a test. TensorFlow is never needed to build or test towertrain.

How to run (from the repository root):
    python3 -m venv VENV && VENV/bin/pip install tensorflow-cpu==2.21.0 keras==3.15.1
    VENV/bin/python tools/keras_batchnorm_reference.py > /tmp/bn.c
"""
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import textwrap  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

F32 = np.float32
SHAPE = (2, 2, 2, 3)


def values(n, seed):
    """n float32 values k/64 - 1.5 .. from a fixed linear congruence: exact in float32, spread over [-1.5, 1.5)."""
    out, s = [], seed
    for _ in range(n):
        s = (s * 1103515245 + 12345) % (1 << 31)
        out.append(F32((s >> 16) % 192) / F32(64) - F32(1.5))
    return np.array(out, dtype=F32)


def c_floats(a):
    """{v, v, ...}, wrapped at 118 columns with a 4-space indent."""
    text = "{" + ", ".join("%.9g" % float(v) for v in np.asarray(a, dtype=F32).ravel()) + "}"
    return "\n    ".join(textwrap.wrap(text, 110, break_long_words=False)).replace("{", "\n    {", 1)


def main():
    x = values(24, 1).reshape(SHAPE) * F32(2) + F32(0.5)  # a mean away from 0
    r = values(24, 2).reshape(SHAPE)
    gamma, beta = np.array([1.5, -0.75, 0.5], F32), np.array([0.25, 0.0, -1.0], F32)
    mm, mv = np.array([0.1, -0.2, 0.3], F32), np.array([1.5, 0.5, 2.0], F32)
    bn = keras.layers.BatchNormalization(momentum=0.9)
    bn.build(SHAPE)
    bn.set_weights([gamma, beta, mm, mv])  # Keras's order: gamma, beta, moving_mean, moving_variance
    y_eval = bn(x, training=False).numpy()
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = bn(xt, training=True)
        loss = tf.reduce_sum(tf.constant(r) * y)
    dx, dgamma, dbeta = tape.gradient(loss, [xt, bn.gamma, bn.beta])
    w = bn.get_weights()
    print("/* BEGIN keras_batchnorm_reference.py output: TensorFlow %s, Keras %s */" % (tf.__version__,
                                                                                        keras.__version__))
    print("static const float BN_X[24] =%s;" % c_floats(x))
    print("static const float BN_R[24] =%s;" % c_floats(r))
    print("static const float BN_PARAMS[6] =%s; /* gamma, beta */" % c_floats(np.concatenate([gamma, beta])))
    print("static const float BN_MOVING[6] =%s; /* moving mean, variance */" % c_floats(np.concatenate([mm, mv])))
    print("static const float BN_Y_TRAIN[24] =%s;" % c_floats(y.numpy()))
    print("static const float BN_DX[24] =%s;" % c_floats(dx.numpy()))
    print("static const float BN_DPARAMS[6] =%s; /* dgamma, dbeta */" % c_floats(np.concatenate([dgamma.numpy(),
                                                                                                    dbeta.numpy()])))
    print("static const float BN_MOVING_AFTER[6] =%s;" % c_floats(np.concatenate([w[2], w[3]])))
    print("static const float BN_Y_EVAL[24] =%s;" % c_floats(y_eval))
    print("/* END keras_batchnorm_reference.py output */")


if __name__ == "__main__":
    main()
