#!/usr/bin/env bash
# recipe-study.sh — the seed's large-batch table, redone with Goyal et al.'s recipe (docs/perf.md, "Large batches:
# the recipe"): towers 1, 2, 4 x 64 and 128 samples per tower (weak scaling: global batches 64 to 512), 10 epochs of
# the seed MLP on Fashion-MNIST, SGD momentum 0.9 at lr 0.01, seed 1 — without and with --lr-scaling linear
# --warmup-epochs 5; then the 8192-sample step (32 towers of 256) with linear scaling alone and with the warm-up.
# Writes OUT/plain.csv, OUT/recipe.csv (bench's CSV: s/epoch, test accuracy per row) and OUT/large.txt.
# Usage: tools/recipe-study.sh OUT [BIN]   (about 10 minutes on 2 cores)
set -euo pipefail
OUT=${1:?usage: tools/recipe-study.sh OUT [BIN]}
BIN=${2:-build/towertrain}
mkdir -p "$OUT"
COMMON=(--device cpu --model mlp --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 10 --seed 1 --progress quiet)
"$BIN" bench "${COMMON[@]}" --towers 1,2,4 --batch 64,128 --scaling weak --reps 3 --csv "$OUT/plain.csv"
"$BIN" bench "${COMMON[@]}" --towers 1,2,4 --batch 64,128 --scaling weak --reps 3 --lr-scaling linear \
  --warmup-epochs 5 --csv "$OUT/recipe.csv"
: > "$OUT/large.txt"
for recipe in "--lr-scaling linear" "--lr-scaling linear --warmup-epochs 5" "--lr-scaling linear --warmup-epochs 2"; do
  # shellcheck disable=SC2086
  acc=$("$BIN" train "${COMMON[@]}" --towers 32 --batch 8192 $recipe --progress lines | sed -n 's/^test: .* accuracy: \([0-9.]*\) .*/\1/p')
  echo "batch 8192, 32 towers, $recipe: test accuracy $acc" | tee -a "$OUT/large.txt"
done
# the chart: test accuracy against the global batch, without and with the recipe (gnuplot-nox)
col() { head -1 "$1" | tr ',' '\n' | grep -nx "$2" | cut -d: -f1; }
for f in plain recipe; do
  awk -F, -v b="$(col "$OUT/$f.csv" batch)" -v t="$(col "$OUT/$f.csv" towers)" \
    -v a="$(col "$OUT/$f.csv" test_accuracy)" 'NR > 1 { print $b, $a, $t }' "$OUT/$f.csv" | sort -n > "$OUT/$f.dat"
done
gnuplot <<PLOT
set terminal pngcairo size 800,480
set output "$OUT/recipe-study.png"
set logscale x 2
set xlabel "global batch (towers x 64 or x 128 per tower)"
set ylabel "test accuracy after 10 epochs"
set key bottom left
set grid
plot "$OUT/plain.dat" using 1:2 with linespoints title "lr 0.01 at every batch", \
     "$OUT/recipe.dat" using 1:2 with linespoints title "--lr-scaling linear --warmup-epochs 5"
PLOT
