#!/usr/bin/env bash
# bench.sh — the measurements quoted in docs/perf.md, in one run: the seed MLP at batch 256 with 1 and 2 towers
# (7 epochs each, the GEMM floor measured before every epoch), then batch 64 with 1, 2 and 4 towers.
# Run it twice — with this machine's OPENBLAS_CORETYPE and with it unset — to see the kernel's effect.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/towertrain ] || { cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)"; }
./build/towertrain bench --towers 1,2 --batch 256 --epochs 7 "$@"
./build/towertrain bench --towers 1,2,4 --batch 64 --epochs 3 "$@"
