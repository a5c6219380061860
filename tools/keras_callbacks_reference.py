#!/usr/bin/env python3
"""keras_callbacks_reference.py - reference decisions for tests/test_callbacks.c, recorded from a real Keras.

What it does: feeds fixed metric sequences, one epoch's logs at a time, to keras.callbacks.EarlyStopping and
keras.callbacks.ReduceLROnPlateau attached to a tiny compiled model (the callbacks' on_train_begin, on_epoch_end for
every epoch until model.stop_training, on_train_end, as model.fit calls them), and records what they decided: after
each epoch the optimizer's learning rate (a float32 variable: its value exactly) and whether training stops, and at
the end which epoch's weights the model holds (before each epoch's on_epoch_end the weights are set to that epoch's
marker, and after the last one to a sentinel, so a restore shows as the marker of the epoch restored). It prints the
cases as a C fragment, pasted into tests/test_callbacks.c between the "BEGIN keras_callbacks_reference.py output"
and "END" comments; the test feeds the same sequences to towertrain's callbacks (src/run/callbacks.c) and compares
every decision. Each case also carries towertrain's option SPECs, written from the same arguments.

What it is not: a test. TensorFlow is never needed to build or test towertrain; this script regenerates the
constants, by hand, when a case is added or Keras's semantics change.

How to run (from the repository root):
    python3 -m venv VENV && VENV/bin/pip install tensorflow-cpu==2.21.0 keras==3.15.1
    VENV/bin/python tools/keras_callbacks_reference.py > /tmp/callback_cases.c    # C on stdout, logs on stderr
The constants in tests/test_callbacks.c were produced with TensorFlow 2.21.0, Keras 3.15.1 (TensorFlow backend),
NumPy 2.4.6, Python 3.11, on x86-64 CPU (the versions are printed in the fragment's first comment).

Why these cases: an improving run (never stops), plateaus, noise, min_delta where the change is exactly min_delta,
just over it, and beyond float32's precision (Keras compares in float32: ops.less/ops.greater on Python floats),
accuracy in max mode (auto and given), mode=max on a loss, patience 0, start_from_epoch, baseline (beaten and never
beaten), restore_best_weights with a stop and without one (Keras 3.15 restores in on_train_end either way), a NaN
metric, cooldown, min_lr reached (Keras's old_lr > float32(min_lr)), a factor whose product rounds, and both
callbacks together on different metrics.
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

LR0 = 0.001  # the optimizer's rate before the first epoch (a float32 variable: 0.001000000047...)
NAN = float("nan")

# Each case: C name, EarlyStopping's and ReduceLROnPlateau's Keras arguments (None: not used; monitor given
# explicitly where it matters), the metric sequences (Keras log names), one value per epoch.
CASES = [
    dict(name="es_improving", es=dict(monitor="val_loss"),
         logs=dict(val_loss=[0.9, 0.8, 0.7, 0.6, 0.5, 0.45])),
    dict(name="es_plateau", es=dict(monitor="val_loss", patience=2),
         logs=dict(val_loss=[0.9, 0.7, 0.71, 0.72, 0.69, 0.75, 0.8])),
    dict(name="es_patience0", es=dict(monitor="loss"),
         logs=dict(loss=[0.5, 0.5, 0.4])),
    dict(name="es_noisy_restore", es=dict(monitor="val_loss", patience=3, restore_best_weights=True),
         logs=dict(val_loss=[1.0, 0.8, 0.85, 0.6, 0.65, 0.62, 0.61, 0.7, 0.59])),
    dict(name="es_restore_no_stop", es=dict(monitor="val_loss", patience=5, restore_best_weights=True),
         logs=dict(val_loss=[1.0, 0.7, 0.8, 0.75])),
    # 0.5 -> 0.4 is exactly min_delta 0.1 in float64 arithmetic only approximately: Keras's float32 compare decides
    dict(name="es_min_delta_edge", es=dict(monitor="val_loss", min_delta=0.1, patience=1),
         logs=dict(val_loss=[0.5, 0.4, 0.2999, 0.25, 0.2])),
    dict(name="es_min_delta_over", es=dict(monitor="val_loss", min_delta=0.05, patience=2),
         logs=dict(val_loss=[0.5, 0.449, 0.4, 0.36, 0.35, 0.34])),
    # a change below float32's resolution is no improvement (0.3 - 1e-9 and 0.3 are one float32)
    dict(name="es_float32_resolution", es=dict(monitor="loss", patience=1),
         logs=dict(loss=[0.3, 0.3 - 1e-9, 0.3 - 2e-9, 0.29])),
    dict(name="es_accuracy_auto", es=dict(monitor="val_accuracy", patience=1),
         logs=dict(val_accuracy=[0.5, 0.6, 0.65, 0.64, 0.63, 0.7])),
    dict(name="es_top5_max_delta", es=dict(monitor="top5", mode="max", min_delta=0.01, patience=2),
         logs=dict(top5=[0.9, 0.905, 0.92, 0.925, 0.928, 0.95])),
    dict(name="es_loss_mode_max", es=dict(monitor="val_loss", mode="max", patience=1),
         logs=dict(val_loss=[0.5, 0.6, 0.55, 0.54, 0.7])),
    dict(name="es_start_from_epoch", es=dict(monitor="val_loss", patience=1, start_from_epoch=3),
         logs=dict(val_loss=[0.5, 0.6, 0.7, 0.8, 0.9, 0.85, 0.95])),
    dict(name="es_baseline_never", es=dict(monitor="val_loss", patience=2, baseline=0.4,
                                           restore_best_weights=True),
         logs=dict(val_loss=[0.6, 0.5, 0.55, 0.45, 0.3])),
    dict(name="es_baseline_beaten", es=dict(monitor="val_accuracy", patience=1, baseline=0.6),
         logs=dict(val_accuracy=[0.5, 0.55, 0.62, 0.65, 0.64, 0.63])),
    dict(name="es_nan", es=dict(monitor="val_loss", patience=2),
         logs=dict(val_loss=[0.5, NAN, 0.4, 0.3, 0.2])),
    dict(name="es_nan_first", es=dict(monitor="val_loss", patience=2),
         logs=dict(val_loss=[NAN, 0.5, 0.4, 0.3])),
    dict(name="rl_plateau", rl=dict(monitor="val_loss", factor=0.5, patience=2),
         logs=dict(val_loss=[1.0, 0.9, 0.9, 0.95, 0.89, 0.9, 0.91, 0.92, 0.93])),
    dict(name="rl_defaults", rl=dict(monitor="val_loss"),
         logs=dict(val_loss=[1.0] + [0.99995] * 12)),
    dict(name="rl_cooldown", rl=dict(monitor="loss", factor=0.2, patience=1, cooldown=2),
         logs=dict(loss=[1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 0.5, 0.6, 0.7])),
    dict(name="rl_min_lr", rl=dict(monitor="val_loss", factor=0.1, patience=1, min_lr=1e-5),
         logs=dict(val_loss=[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])),
    dict(name="rl_min_lr_between", rl=dict(monitor="val_loss", factor=0.3, patience=0, min_lr=2e-5),
         logs=dict(val_loss=[1.0, 1.0, 1.0, 1.0, 1.0, 1.0])),
    # float32(3e-5) is below 3e-5: the rate stops there, and no further reduction is made
    dict(name="rl_min_lr_float32", rl=dict(monitor="val_loss", factor=0.5, patience=0, min_lr=3e-5, cooldown=1),
         logs=dict(val_loss=[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])),
    # min_lr 0.001 is the rate itself in float32 (0.00100000005 > 0.001 in float64): never above it, never reduced
    dict(name="rl_min_lr_is_rate", rl=dict(monitor="val_loss", factor=0.5, patience=0, min_lr=0.001),
         logs=dict(val_loss=[1.0, 1.0, 1.0, 1.0])),
    # a factor so close to 1 that the product rounds back to the rate: Keras still counts it a reduction
    dict(name="rl_factor_rounds_back", rl=dict(monitor="val_loss", factor=0.99999999, patience=1, cooldown=1),
         logs=dict(val_loss=[1.0, 1.0, 1.0, 1.0, 1.0])),
    dict(name="rl_min_delta", rl=dict(monitor="val_loss", factor=0.5, patience=1, min_delta=0.01),
         logs=dict(val_loss=[1.0, 0.991, 0.98, 0.975, 0.96, 0.955, 0.95])),
    dict(name="rl_accuracy", rl=dict(monitor="val_accuracy", factor=0.5, patience=1),
         logs=dict(val_accuracy=[0.5, 0.6, 0.6, 0.59, 0.7, 0.7, 0.69])),
    dict(name="rl_top5_min_mode", rl=dict(monitor="val_top5", mode="min", factor=0.9, patience=1),
         logs=dict(val_top5=[0.9, 0.95, 0.97, 0.8, 0.85])),
    dict(name="both", es=dict(monitor="val_loss", patience=3, restore_best_weights=True),
         rl=dict(monitor="loss", factor=0.5, patience=1, cooldown=1, min_lr=1e-4),
         logs=dict(loss=[1.0, 0.9, 0.9, 0.91, 0.85, 0.86, 0.87, 0.88, 0.89],
                   val_loss=[1.1, 1.0, 0.95, 0.97, 0.96, 0.94, 0.99, 1.0, 1.01])),
]

METRICS = ["loss", "accuracy", "top5", "val_loss", "val_accuracy", "val_top5"]


def model_of():
    m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(10)])
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=LR0),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy", keras.metrics.SparseTopKCategoricalAccuracy(k=5, name="top5")])
    x = np.zeros((4, 3), np.float32)
    y = np.zeros((4,), np.int32)
    m.evaluate(x, y, verbose=0)  # the compiled metrics built: mode auto reads their direction
    return m


def marker(m, v):
    m.set_weights([np.full(w.shape, v, np.float32) for w in m.get_weights()])


def run(case):
    m = model_of()
    cbs = []
    if case.get("es") is not None:
        cbs.append(keras.callbacks.EarlyStopping(**case["es"]))
    if case.get("rl") is not None:
        cbs.append(keras.callbacks.ReduceLROnPlateau(**case["rl"]))
    reductions = []
    for cb in cbs:
        cb.set_model(m)
        if isinstance(cb, keras.callbacks.ReduceLROnPlateau):
            inner = cb._reduce_optimizer_lr

            def recorded(*a, inner=inner, **k):
                r = inner(*a, **k)
                reductions.append(r)
                return r
            cb._reduce_optimizer_lr = recorded
    m.stop_training = False
    for cb in cbs:
        cb.on_train_begin()
    n = len(next(iter(case["logs"].values())))
    lrs, reduced, stop = [], [], 0
    for e in range(n):
        marker(m, float(e + 1))
        logs = {k: float(v[e]) for k, v in case["logs"].items()}
        del reductions[:]
        for cb in cbs:
            cb.on_epoch_end(e, logs)
        lrs.append(np.float32(m.optimizer.learning_rate.numpy()))
        reduced.append(1 if any(reductions) else 0)
        if m.stop_training:
            stop = e + 1
            break
    marker(m, -1.0)
    for cb in cbs:
        cb.on_train_end()
    w = float(m.get_weights()[0].flat[0])
    restored = 0 if w == -1.0 else int(w)
    counts = {}
    for cb in cbs:
        if isinstance(cb, keras.callbacks.EarlyStopping):
            counts["es_wait"] = cb.wait
        else:
            counts["rl_wait"] = cb.wait
            counts["rl_cooldown"] = cb.cooldown_counter
    return n, lrs, reduced, stop, restored, counts


def spec_of(args):
    if args is None:
        return "NULL"
    if not args:
        return '"on"'
    words = []
    for k, v in args.items():
        if v is True:
            words.append(k)
        else:
            words.append("%s=%s" % (k, repr(v) if isinstance(v, float) else v))
    return '"%s"' % ",".join(words)


def c_double(x):
    return "NAN" if x != x else repr(float(x))


def c_list(head, items, tail):
    """head + {items} + tail, wrapped at 116 columns with the continuation under the first item."""
    lines, line = [], head + "{"
    for i, x in enumerate(items):
        word = x + ("," if i + 1 < len(items) else "}" + tail)
        if len(line) + 1 + len(word) > 116 and not line.endswith("{"):
            lines.append(line)
            line = " " * (len(head) + 1) + word
        else:
            line += ("" if line.endswith("{") else " ") + word
    return "\n".join(lines + [line])


def main():
    print("/* BEGIN keras_callbacks_reference.py output: TensorFlow %s, Keras %s (backend %s), NumPy %s */"
          % (tf.__version__, keras.__version__, keras.backend.backend(), np.__version__))
    print("static const cb_case CB_CASES[] = {")
    for case in CASES:
        n, lrs, reduced, stop, restored, counts = run(case)
        print("    {.name = \"%s\", .n = %d," % (case["name"], n))
        print("     .es = %s," % spec_of(case.get("es")))
        print("     .rl = %s," % spec_of(case.get("rl")))
        for k, v in case["logs"].items():
            print(c_list("     .m[TT_CB_%s] = " % k.upper(), [c_double(x) for x in v], ","))
        print(c_list("     .lr = ", ["%.9gf" % x for x in lrs], ","))
        print(c_list("     .reduced = ", ["%d" % x for x in reduced], ","))
        counters = "".join(", .%s = %d" % kv for kv in counts.items())
        print("     .stop = %d, .restored = %d%s}," % (stop, restored, counters))
    print("};")
    print("/* END keras_callbacks_reference.py output */")


if __name__ == "__main__":
    sys.exit(main())
