#!/usr/bin/env bash
# recipe-study.sh — the seed's large-batch table, redone with Goyal et al.'s recipe (docs/perf.md, "Large batches:
# the recipe"): towers 1, 2, 4 x 64 and 128 samples per tower (weak scaling: global batches 64 to 512), 10 epochs of
# the seed MLP on Fashion-MNIST, SGD momentum 0.9 at lr 0.01, seed 1 — without and with --lr-scaling linear
# --warmup-epochs 5; then the 8192-sample step (32 towers of 256) with linear scaling alone and with the warm-up.
# Writes OUT/plain.csv, OUT/recipe.csv (bench's CSV: s/epoch, test accuracy per row) and OUT/large.txt.
# Usage: tools/recipe-study.sh OUT [BIN] [--large-only]   (about 10 minutes on 2 cores; --large-only: the 8192 rows
# and the chart from OUT's CSVs)
set -euo pipefail
OUT=${1:?usage: tools/recipe-study.sh OUT [BIN]}
BIN=${2:-build/towertrain}
mkdir -p "$OUT"
LARGE_ONLY=${3:-}
COMMON=(--device cpu --model mlp --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 10 --seed 1)
if [ "$LARGE_ONLY" != --large-only ]; then
"$BIN" bench "${COMMON[@]}" --progress quiet --towers 1,2,4 --batch 64,128 --scaling weak --reps 3 --csv "$OUT/plain.csv"
"$BIN" bench "${COMMON[@]}" --progress quiet --towers 1,2,4 --batch 64,128 --scaling weak --reps 3 --lr-scaling linear \
  --warmup-epochs 5 --csv "$OUT/recipe.csv"
fi
: > "$OUT/large.txt"
for recipe in "--lr-scaling linear" "--lr-scaling linear --warmup-epochs 5" "--lr-scaling linear --warmup-epochs 2"; do
  # shellcheck disable=SC2086
  acc=$("$BIN" train "${COMMON[@]}" --towers 32 --batch 8192 $recipe --progress lines | sed -n 's/^test: .* accuracy: \([0-9.]*\) .*/\1/p')
  echo "batch 8192, 32 towers, $recipe: test accuracy $acc" | tee -a "$OUT/large.txt"
done
# the chart: test accuracy against the global batch, without and with the recipe (gnuplot-nox)
col() { head -1 "$1" | tr ',' '\n' | grep -nx "$2" | cut -d: -f1; }
for f in plain recipe; do
  for per in 64 128; do # a series per tower batch: towers, global batch, test accuracy
    awk -F, -v b="$(col "$OUT/$f.csv" batch)" -v t="$(col "$OUT/$f.csv" towers)" \
      -v a="$(col "$OUT/$f.csv" test_accuracy)" -v per=$per 'NR > 1 && $b == per * $t { print $b, $a, $t }' \
      "$OUT/$f.csv" | sort -n > "$OUT/$f-$per.dat"
  done
done
gnuplot <<PLOT
set terminal pngcairo size 800,480
set output "$OUT/recipe-study.png"
set logscale x 2
set xlabel "global batch (1, 2, 4 towers x 64 or 128 samples each)"
set ylabel "test accuracy after 10 epochs"
set key bottom left
set title "seed MLP, Fashion-MNIST, SGD momentum 0.9, 10 epochs, seed 1"
set grid
plot "$OUT/plain-64.dat" using 1:2 with linespoints lc 1 pt 7 title "lr 0.01, 64 a tower", \
     "$OUT/plain-128.dat" using 1:2 with linespoints lc 1 dt 2 pt 5 title "lr 0.01, 128 a tower", \
     "$OUT/recipe-64.dat" using 1:2 with linespoints lc 2 pt 7 title "linear + warm-up 5, 64 a tower", \
     "$OUT/recipe-128.dat" using 1:2 with linespoints lc 2 dt 2 pt 5 title "linear + warm-up 5, 128 a tower"
PLOT
