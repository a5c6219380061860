#!/usr/bin/env python3
"""keras_reference.py - reference numbers for tests/test_optim.c, recorded from a real Keras.

What it does: applies keras.optimizers.SGD / Adam / Nadam / RMSprop to a small float32 variable (1 or 3 elements) with fixed
gradient sequences (one gradient per step, given below), reads the variable back after every step, and prints the
cases as a C fragment (every float with %.9g, which round-trips float32 exactly). The fragment is pasted into
tests/test_optim.c between the "BEGIN keras_reference.py output" and "END" comments; the tests then compare
towertrain's optimizers with these recorded numbers, not with a second copy of the formulas.

What it is not: a test. TensorFlow is never needed to build or test towertrain; this script only regenerates the
constants, by hand, when a case is added or Keras's semantics change.

How to run (from the repository root):
    python3 -m venv VENV && VENV/bin/pip install tensorflow-cpu==2.21.0 keras==3.15.1
    VENV/bin/python tools/keras_reference.py > /tmp/keras_cases.c      # C on stdout; TensorFlow logs on stderr
The constants in tests/test_optim.c were produced with TensorFlow 2.21.0, Keras 3.15.1 (TensorFlow backend),
NumPy 2.4.6, Python 3.11, on x86-64 CPU. The versions are printed in the fragment's first comment.

Why these cases: several steps each, with gradients that change in size and sign and differ per element, so that
a wrong moment update, a wrong bias correction or a wrong momentum schedule changes the weights; and Adam / Nadam
with gradients near 1e-4, 3e-6 and 1e-7, where sqrt(v) is 30 times, about equal to, or far below epsilon (1e-7),
so that epsilon's placement (sqrt(v) + eps, not sqrt(v + eps)) decides the update size. With ordinary gradients
sqrt(v) >> eps and such a bug is nearly invisible. RMSprop puts epsilon the other way, INSIDE the square root
(keras/src/optimizers/rmsprop.py: sqrt(v + eps), centered sqrt(v - a^2 + eps)); its cases cover the plain default,
a custom rho and lr, momentum, centered, centered with momentum, and gradients near 3e-3, 1e-3 and 1e-7, where v is
about 10 eps, about eps, or far below eps, so that a misplaced epsilon (sqrt(v) + eps) changes the step from 1.05
to ~2400 times.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import keras  # noqa: E402

F32 = np.float32

# Each case: C identifier, towertrain optimizer kind, Keras constructor arguments (names as Keras spells them),
# initial weights, gradients per step (rows = steps, columns = elements). Values are exact in float32 or are
# rounded to float32 before use (the C side reads the same %.9g text back).
CASES = [
    dict(name="sgd_plain", kind="TT_OPT_SGD", args=dict(learning_rate=0.1),
         w0=[1.0, -0.5, 0.25],
         g=[[0.5, -1.0, 2.0], [0.25, 0.75, -1.5], [-0.125, 0.3, 0.7], [1.0, -0.2, -0.9], [0.6, 0.1, 0.05],
            [-0.4, -0.35, 1.1]]),
    dict(name="sgd_momentum", kind="TT_OPT_SGD", args=dict(learning_rate=0.1, momentum=0.9),
         w0=[1.0, -0.5, 0.25],
         g=[[0.5, -1.0, 2.0], [0.25, 0.75, -1.5], [-0.125, 0.3, 0.7], [1.0, -0.2, -0.9], [0.6, 0.1, 0.05],
            [-0.4, -0.35, 1.1], [0.2, 0.45, -0.3]]),
    dict(name="sgd_nesterov", kind="TT_OPT_SGD", args=dict(learning_rate=0.1, momentum=0.9, nesterov=True),
         w0=[1.0, -0.5, 0.25],
         g=[[0.5, -1.0, 2.0], [0.25, 0.75, -1.5], [-0.125, 0.3, 0.7], [1.0, -0.2, -0.9], [0.6, 0.1, 0.05],
            [-0.4, -0.35, 1.1], [0.2, 0.45, -0.3]]),
    # Adam with the Keras defaults (lr 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7), ordinary gradients
    dict(name="adam_default", kind="TT_OPT_ADAM", args=dict(),
         w0=[1.0, -0.5, 0.25],
         g=[[0.5, -0.3, 1.2], [-0.25, -0.6, 0.9], [0.125, 0.2, -2.0], [0.4, -0.1, 0.3], [-0.8, 0.05, 0.6],
            [0.3, -0.45, -0.7], [0.6, 0.25, 0.15], [-0.05, -0.3, 1.5]]),
    # Adam with non-default hyper-parameters: the configuration is honoured, and beta_1 != beta_2 matter apart
    dict(name="adam_custom", kind="TT_OPT_ADAM",
         args=dict(learning_rate=0.01, beta_1=0.8, beta_2=0.95, epsilon=1e-4),
         w0=[1.0, -0.5, 0.25],
         g=[[0.5, -0.3, 1.2], [-0.25, -0.6, 0.9], [0.125, 0.2, -2.0], [0.4, -0.1, 0.3], [-0.8, 0.05, 0.6],
            [0.3, -0.45, -0.7]]),
    # Adam, small gradients. At step 1 sqrt(v) = sqrt(1 - beta_2) |g|: element 0 (g near 1e-4) ~3e-6, 30 eps;
    # element 1 (near 1e-7) ~3e-9, far below eps, which then sets the update; element 2 (near 3e-6) ~1e-7 = eps.
    # sqrt(v + eps) would be ~3e-4 for every element: updates 100 to 3000 times too small.
    dict(name="adam_small", kind="TT_OPT_ADAM", args=dict(),
         w0=[0.5, -0.25, 0.125],
         g=[[1e-4, 1e-7, -3e-6], [1.5e-4, 2e-7, -2e-6], [-0.5e-4, -1e-7, 4e-6], [0.8e-4, 1.5e-7, -3e-6],
            [1.2e-4, 0.5e-7, -1e-6], [-1e-4, 1e-7, 5e-6], [0.9e-4, -0.8e-7, -2.5e-6], [1.1e-4, 1.2e-7, -3.5e-6],
            [1e-4, 1e-7, 2e-6], [0.7e-4, 0.9e-7, -3e-6]]),
    # The Nadam case of the issue: w0 = 1, constant gradient 0.5, lr 0.1, other arguments the defaults
    dict(name="nadam_const", kind="TT_OPT_NADAM", args=dict(learning_rate=0.1),
         w0=[1.0],
         g=[[0.5], [0.5], [0.5], [0.5], [0.5], [0.5]]),
    dict(name="nadam_vary", kind="TT_OPT_NADAM", args=dict(learning_rate=0.01),
         w0=[1.0, -0.5, 0.25],
         g=[[0.5, -0.3, 1.2], [-0.25, -0.6, 0.9], [0.125, 0.2, -2.0], [0.4, -0.1, 0.3], [-0.8, 0.05, 0.6],
            [0.3, -0.45, -0.7], [0.6, 0.25, 0.15], [-0.05, -0.3, 1.5]]),
    dict(name="nadam_small", kind="TT_OPT_NADAM", args=dict(),
         w0=[0.5, -0.25, 0.125],
         g=[[1e-4, 1e-7, -3e-6], [1.5e-4, 2e-7, -2e-6], [-0.5e-4, -1e-7, 4e-6], [0.8e-4, 1.5e-7, -3e-6],
            [1.2e-4, 0.5e-7, -1e-6], [-1e-4, 1e-7, 5e-6], [0.9e-4, -0.8e-7, -2.5e-6], [1.1e-4, 1.2e-7, -3.5e-6],
            [1e-4, 1e-7, 2e-6], [0.7e-4, 0.9e-7, -3e-6]]),
    # RMSprop with the Keras defaults (lr 0.001, rho 0.9, momentum 0, epsilon 1e-7, centered False)
    dict(name="rmsprop_default", kind="TT_OPT_RMSPROP", args=dict(),
         w0=[1.0, -0.5, 0.25],
         g=[[0.5, -0.3, 1.2], [-0.25, -0.6, 0.9], [0.125, 0.2, -2.0], [0.4, -0.1, 0.3], [-0.8, 0.05, 0.6],
            [0.3, -0.45, -0.7], [0.6, 0.25, 0.15], [-0.05, -0.3, 1.5]]),
    dict(name="rmsprop_custom", kind="TT_OPT_RMSPROP", args=dict(learning_rate=0.01, rho=0.8),
         w0=[1.0, -0.5, 0.25],
         g=[[0.5, -0.3, 1.2], [-0.25, -0.6, 0.9], [0.125, 0.2, -2.0], [0.4, -0.1, 0.3], [-0.8, 0.05, 0.6],
            [0.3, -0.45, -0.7]]),
    dict(name="rmsprop_momentum", kind="TT_OPT_RMSPROP", args=dict(learning_rate=0.01, momentum=0.9),
         w0=[1.0, -0.5, 0.25],
         g=[[0.5, -0.3, 1.2], [-0.25, -0.6, 0.9], [0.125, 0.2, -2.0], [0.4, -0.1, 0.3], [-0.8, 0.05, 0.6],
            [0.3, -0.45, -0.7], [0.6, 0.25, 0.15]]),
    dict(name="rmsprop_centered", kind="TT_OPT_RMSPROP", args=dict(learning_rate=0.01, centered=True),
         w0=[1.0, -0.5, 0.25],
         g=[[0.5, -0.3, 1.2], [-0.25, -0.6, 0.9], [0.125, 0.2, -2.0], [0.4, -0.1, 0.3], [-0.8, 0.05, 0.6],
            [0.3, -0.45, -0.7], [0.6, 0.25, 0.15]]),
    dict(name="rmsprop_cent_mom", kind="TT_OPT_RMSPROP",
         args=dict(learning_rate=0.005, rho=0.85, momentum=0.5, epsilon=1e-6, centered=True),
         w0=[1.0, -0.5, 0.25],
         g=[[0.5, -0.3, 1.2], [-0.25, -0.6, 0.9], [0.125, 0.2, -2.0], [0.4, -0.1, 0.3], [-0.8, 0.05, 0.6],
            [0.3, -0.45, -0.7], [0.6, 0.25, 0.15], [-0.05, -0.3, 1.5]]),
    # RMSprop, small gradients. At step 1 v = (1 - rho) g^2: element 0 (g near 3e-3) ~1e-6, 10 eps; element 1
    # (near 1e-3) ~1e-7 = eps; element 2 (near 1e-7) ~1e-15, far below eps, which then sets the step alone.
    # sqrt(v) + eps would make element 2's steps ~2400 times larger, element 1's ~1.4 times.
    dict(name="rmsprop_small", kind="TT_OPT_RMSPROP", args=dict(),
         w0=[0.5, -0.25, 0.125],
         g=[[3e-3, 1e-3, 1e-7], [2.5e-3, 1.5e-3, 2e-7], [-3.5e-3, -0.5e-3, -1e-7], [3e-3, 0.8e-3, 1.5e-7],
            [2e-3, 1.2e-3, 0.5e-7], [-3e-3, -1e-3, 1e-7], [4e-3, 0.9e-3, -0.8e-7], [3e-3, 1.1e-3, 1.2e-7],
            [2.8e-3, 1e-3, 1e-7], [-3.2e-3, 0.7e-3, 0.9e-7]]),
    # the same gradients centered, with momentum: v - a^2 + eps, the variance estimate below eps for element 2
    dict(name="rmsprop_cent_small", kind="TT_OPT_RMSPROP", args=dict(momentum=0.9, centered=True),
         w0=[0.5, -0.25, 0.125],
         g=[[3e-3, 1e-3, 1e-7], [2.5e-3, 1.5e-3, 2e-7], [-3.5e-3, -0.5e-3, -1e-7], [3e-3, 0.8e-3, 1.5e-7],
            [2e-3, 1.2e-3, 0.5e-7], [-3e-3, -1e-3, 1e-7], [4e-3, 0.9e-3, -0.8e-7], [3e-3, 1.1e-3, 1.2e-7],
            [2.8e-3, 1e-3, 1e-7], [-3.2e-3, 0.7e-3, 0.9e-7]]),
]

CLASSES = {"TT_OPT_SGD": keras.optimizers.SGD, "TT_OPT_ADAM": keras.optimizers.Adam,
           "TT_OPT_NADAM": keras.optimizers.Nadam, "TT_OPT_RMSPROP": keras.optimizers.RMSprop}


def run_case(case):
    """Weights after each step, and the float32 gradients used."""
    opt = CLASSES[case["kind"]](**case["args"])
    var = keras.Variable(np.array(case["w0"], dtype=F32), dtype="float32", name="w")
    grads = np.array(case["g"], dtype=F32)
    out = []
    for g in grads:
        opt.apply([keras.ops.convert_to_tensor(g)], [var])
        out.append(np.array(keras.ops.convert_to_numpy(var.value), dtype=F32))
    return grads, np.array(out, dtype=F32), opt


def c_float(v):
    """A float32 as a C literal that reads back to the same float32: %.9g, with a '.' if it has no '.' or 'e'."""
    text = "%.9g" % float(F32(v))
    if not any(ch in text for ch in ".en"):
        text += ".0"
    return text + "f"


def c_floats(values):
    return "{" + ", ".join(c_float(v) for v in values) + "}"


def c_config(case, opt, indent):
    """The case's tt_optim_config, with every field Keras used written out (named fields); Adam and Nadam's
    beta1 / beta2 / epsilon and RMSprop's momentum / epsilon / rho / centered go on a second line, indented by
    `indent` spaces."""
    lr = float(F32(opt.learning_rate.numpy() if hasattr(opt.learning_rate, "numpy") else opt.learning_rate))
    fields = [".kind = %s" % case["kind"], ".lr = %s" % c_float(lr)]
    if case["kind"] == "TT_OPT_SGD":
        fields += [".momentum = %s" % c_float(opt.momentum), ".nesterov = %d" % int(bool(opt.nesterov))]
    elif case["kind"] == "TT_OPT_RMSPROP":
        fields += [".momentum = %s" % c_float(opt.momentum), ".epsilon = %s" % c_float(opt.epsilon),
                   ".rho = %s" % c_float(opt.rho), ".centered = %d" % int(bool(opt.centered))]
        return "{" + ", ".join(fields).replace(", .momentum", ",\n" + " " * indent + ".momentum") + "}"
    else:
        fields += [".beta1 = %s" % c_float(opt.beta_1), ".beta2 = %s" % c_float(opt.beta_2),
                   ".epsilon = %s" % c_float(opt.epsilon)]
    return "{" + ", ".join(fields).replace(", .beta1", ",\n" + " " * indent + ".beta1") + "}"


def main():
    import tensorflow as tf  # only to report its version

    print("/* BEGIN keras_reference.py output: TensorFlow %s, Keras %s (backend %s), NumPy %s */"
          % (tf.__version__, keras.__version__, keras.backend.backend(), np.__version__))
    print("static const keras_case KERAS_CASES[] = {")
    for case in CASES:
        grads, ws, opt = run_case(case)
        args = ", ".join("%s=%r" % kv for kv in case["args"].items())
        print("    /* keras.optimizers.%s(%s) */" % (CLASSES[case["kind"]].__name__, args))
        print("    {.name = \"%s\"," % case["name"])
        print("     .cfg = %s," % c_config(case, opt, 13))
        print("     .n = %d, .steps = %d, .w0 = %s," % (len(case["w0"]), len(grads), c_floats(case["w0"])))
        print("     .g = {" + ",\n           ".join(c_floats(g) for g in grads) + "},")
        print("     .w = {" + ",\n           ".join(c_floats(w) for w in ws) + "}},")
    print("};")
    print("/* the default arguments of each optimizer, from default-constructed Keras objects */")
    print("static const tt_optim_config KERAS_DEFAULTS[] = {")
    for kind, cls in CLASSES.items():
        print("    %s," % c_config(dict(kind=kind), cls(), 5))
    print("};")
    print("/* END keras_reference.py output */")


if __name__ == "__main__":
    main()
