#!/usr/bin/env bash
# test_plot.sh BIN — tools/plot turns a JSON log, a trace and a bench CSV into non-empty PNG and SVG files, and
# refuses bad input with exit 1 or 2. Skips (77) without gnuplot or jq. Trains on --device cpu: the same everywhere.
set -euo pipefail
bin=$1
root=$(cd "$(dirname "$0")/.." && pwd)
command -v gnuplot >/dev/null && command -v jq >/dev/null || { echo "SKIP: gnuplot or jq missing"; exit 77; }
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: dataset-fashion-mnist missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" train --device cpu --epochs 2 --towers 2 --train-samples 3000 --val-samples 500 --test-samples 500 \
  --progress quiet --log-json "$tmp/log.json" --trace "$tmp/trace.json" >/dev/null
"$bin" bench --device cpu --towers 1,2 --batch 64 --epochs 1 --train-samples 2000 --val-samples 500 \
  --test-samples 500 --reps 3 --csv "$tmp/bench.csv" >/dev/null
"$root/tools/plot" --out "$tmp/png" "$tmp/log.json" "$tmp/trace.json" "$tmp/bench.csv" 2>/dev/null
"$root/tools/plot" --format svg --out "$tmp/svg" "$tmp/log.json" 2>/dev/null
cp "$tmp/log.json" "$tmp/other.json"
"$root/tools/plot" --compare both --out "$tmp/png" "$tmp/log.json" "$tmp/other.json" 2>/dev/null
fail=0
for f in png/log-curves.png png/log-split.png png/trace-timeline.png png/bench-epoch.png png/bench-split.png \
         png/bench-pred.png svg/log-curves.svg png/both.png; do
  if [ -s "$tmp/$f" ]; then echo "ok: $f"; else echo "missing: $f"; fail=1; fi
done
head -c 8 "$tmp/png/log-curves.png" | grep -q PNG || { echo "not a PNG"; fail=1; }
set +e
"$root/tools/plot" "$tmp/none.json" 2>/dev/null; [ $? -eq 1 ] || { echo "missing file: want exit 1"; fail=1; }
"$root/tools/plot" --format gif "$tmp/log.json" 2>/dev/null; [ $? -eq 2 ] || { echo "bad format: want exit 2"; fail=1; }
"$root/tools/plot" --compare '../x' "$tmp/log.json" 2>/dev/null; [ $? -eq 2 ] || { echo "--compare ../x: want exit 2"; fail=1; }
echo '{"event":"other"}' >"$tmp/x.json"
"$root/tools/plot" --compare none "$tmp/x.json" 2>/dev/null; [ $? -eq 1 ] || { echo "--compare, no epochs: want exit 1"; fail=1; }
"$root/tools/plot" "$tmp/x.json" 2>/dev/null; [ $? -eq 1 ] || { echo "no epochs: want exit 1"; fail=1; }
[ $fail -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
