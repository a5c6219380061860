#!/usr/bin/env bash
# train.sh — the newcomer's main job: install what is needed, build, and train the seed MLP on Fashion-MNIST with
# 2 towers (Adam 1e-3, batch 256, 10 epochs, seed 1). Extra arguments go to `towertrain train`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
exec ./build/towertrain train --data fashion-mnist --towers 2 --batch 256 --epochs 10 --optimizer adam --lr 0.001 \
  --seed 1 --log-json build/train-log.json "$@"
