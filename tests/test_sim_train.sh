#!/usr/bin/env bash
# test_sim_train.sh — `towertrain train --device cuda` on the CPU stand-in (a -DTT_CUDA_SIM=ON build): the seed mlp,
# the cnn and the textcnn under every placement (cpu, device, allreduce, nccl) and every --update on the devices
# (device with device and nccl, replicated with allreduce and nccl; the cnn: replicated with allreduce), each
# against the CPU backend with
# the same towers. The mlp must agree to the last printed digit of the JSON log (every op runs the same tt_math.h
# code or the same OpenBLAS call as on the CPU); cnn and textcnn within TOL (their bias gradients over B·OH·OW rows
# add in chunks on a GPU, in rows on the CPU: docs/cuda.md). The four CUDA placements must agree with each other
# exactly, every one but the first with --graphs on (each tower's steps replayed from a CUDA graph). Runs vary the
# stand-in: 2 or 3 devices (virtual towers when 3 towers share 2), forward, reversed and
# shuffled block order, a capped grid; asynchronous copies of pageable memory are errors (TT_SIM_PAGEABLE=error).
# --epilogues lt: the mlp's dense layers as cublasLtMatmul calls, with and without graphs and with no algorithm
# offered, the same figures as kernels.
# Then the stand-in's own promises as the CLI meets them: an exclusive, busy GPU 0 (TT_SIM_BUSY=0) does not stop a
# run on GPUs 1 and 2; a bad TT_SIM_* setting and a machine of no devices are one clear line each; the counters.
# Usage: test_sim_train.sh TOWERTRAIN. Exit 77 (skip) where Fashion-MNIST is not installed.
set -euo pipefail
bin=$1
root=$(cd "$(dirname "$0")/.." && pwd)
mnist=/usr/share/datasets/fashion-mnist
[ -d "$mnist" ] || { echo "SKIP: $mnist not found (apt-get install dataset-fashion-mnist)"; exit 77; }
"$bin" --version | grep -q 'cuda (CPU stand-in)' || { echo "FAIL: $bin is not a stand-in build"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
TOL=2e-3 # relative, on the test loss after the short runs below (measured: docs/cuda.md)

python3 "$root/tools/make-langid" --langs english,german --k-train 300 --k-test 100 "$tmp/lang" >/dev/null

declare -A args=(
  [mlp]="--data fashion-mnist --model mlp --batch 64 --epochs 2 --train-samples 640 --val-samples 128 --test-samples 256"
  [cnn]="--data fashion-mnist --model cnn --batch 32 --epochs 1 --train-samples 128 --val-samples 32 --test-samples 64"
  [textcnn]="--data npy:$tmp/lang --model textcnn --batch 32 --epochs 2 --val-samples 100"
)
# placement -> the stand-in's settings for its run
declare -A sim=(
  [cpu]="TT_SIM_DEVICES=3"
  [device]="TT_SIM_DEVICES=2 TT_SIM_BLOCK_ORDER=reverse"
  [allreduce]="TT_SIM_DEVICES=3 TT_SIM_BLOCK_ORDER=shuffle TT_SIM_GRID_CAP=2"
  [nccl]="TT_SIM_DEVICES=3 TT_SIM_BLOCK_ORDER=shuffle TT_SIM_GRID_CAP=3 TT_SIM_SEED=7"
)

# A run's figures as one line: every epoch's loss and val_loss, then the test loss and accuracy (the JSON log).
figures() { jq -r 'select(.event == "epoch" or .event == "test") | [.loss, (.val_loss // .accuracy)] | @tsv' "$1" | tr '\n' ' '; }
common="--towers 3 --seed 3 --progress quiet"

for model in mlp cnn textcnn; do
  # shellcheck disable=SC2086
  out=$("$bin" train --device cpu ${args[$model]} $common --log-json "$tmp/$model-cpu.json" 2>&1 >/dev/null) ||
    { bad "$model: the CPU run: $out"; continue; }
  ref=$(figures "$tmp/$model-cpu.json")
  first=""
  for run in cpu/host device/host allreduce/host nccl/host device/device nccl/device allreduce/replicated \
             nccl/replicated; do
    place=${run%/*} update=${run#*/}
    case $model/$run in cnn/*/device | cnn/nccl/replicated) continue ;; esac # the cnn is slow on the stand-in
    graphs=on # every run but the first replays its towers' steps from CUDA graphs (one GPU a tower): the same bits
    [ -n "$first" ] && [ "$place" != device ] || graphs=off
    # shellcheck disable=SC2086
    out=$(env TT_SIM_PAGEABLE=error ${sim[$place]} "$bin" train --device cuda --reduce "$place" --update "$update" \
      --graphs $graphs ${args[$model]} $common --log-json "$tmp/$model-$place-$update.json" 2>&1 >/dev/null) || {
      bad "$model --reduce $place --update $update --graphs $graphs on the stand-in (${sim[$place]}): $out"
      continue
    }
    got=$(figures "$tmp/$model-$place-$update.json")
    echo "$model --reduce $place --update $update --graphs $graphs (${sim[$place]}): $got"
    [ -n "$first" ] || first=$got
    [ "$got" = "$first" ] || bad "$model: --reduce $place --update $update differs from --reduce cpu on the stand-in: $got vs $first"
  done
  echo "$model on the CPU backend:             $ref"
  if [ "$model" = mlp ]; then
    [ "$first" = "$ref" ] || bad "mlp: the stand-in ($first) differs from the CPU backend ($ref)"
  else
    python3 - "$first" "$ref" "$TOL" "$model" <<'EOF' || fail=1
import sys
a, b, tol, model = [float(x) for x in sys.argv[1].split()], [float(x) for x in sys.argv[2].split()], float(sys.argv[3]), sys.argv[4]
worst = max(abs(x - y) / max(abs(y), 1e-3) for x, y in zip(a, b))
print(f"{model}: stand-in vs CPU backend, largest relative difference {worst:.3g} (tolerance {tol:g})")
if len(a) != len(b) or worst > tol:
    print(f"FAIL: {model}: the stand-in differs from the CPU backend beyond the tolerance")
    sys.exit(1)
EOF
  fi
done

# --precision bf16 and fp16 (issue 33): the CUDA path's conversion kernels, cublasGemmEx with the FAST_16BF/16F
# compute types and the 16-bit pull and push, against the CPU backend's emulation — the mlp to the last printed digit
# (the stand-in converts operands that are 16-bit values already: exact), the textcnn within TOL; 3 towers on 2
# devices without graphs, 2 on 2 with them (the loss scale is a kernel argument a graph keeps).
pcommon="--seed 3 --progress quiet"
for prec in bf16 fp16; do
  for model in mlp textcnn; do
    for g in off on; do
      towers=3 && [ $g = off ] || towers=2
      # shellcheck disable=SC2086
      out=$("$bin" train --device cpu ${args[$model]} $pcommon --towers $towers --precision $prec \
        --log-json "$tmp/$model-$prec-cpu-$g.json" 2>&1 >/dev/null) || { bad "$model --precision $prec, CPU: $out"; continue; }
      ref=$(figures "$tmp/$model-$prec-cpu-$g.json")
      # shellcheck disable=SC2086
      out=$(env TT_SIM_PAGEABLE=error TT_SIM_DEVICES=2 TT_SIM_BLOCK_ORDER=shuffle "$bin" train --device cuda \
        ${args[$model]} $pcommon --towers $towers --graphs $g --precision $prec \
        --log-json "$tmp/$model-$prec-$g.json" 2>&1 >/dev/null) ||
        { bad "$model --precision $prec --graphs $g on the stand-in: $out"; continue; }
      got=$(figures "$tmp/$model-$prec-$g.json")
      echo "$model --precision $prec --graphs $g, $towers towers: stand-in $got; CPU $ref"
      tol=$TOL && [ $model != mlp ] || tol=0
      python3 -c '
import sys
a, b, tol, what = [float(x) for x in sys.argv[1].split()], [float(x) for x in sys.argv[2].split()], float(sys.argv[3]), sys.argv[4]
worst = max(abs(x - y) / max(abs(y), 1e-3) for x, y in zip(a, b)) if a and len(a) == len(b) else float("inf")
if worst > tol:
    print(f"FAIL: {what}: the stand-in differs from the CPU backend by {worst:.3g} (tolerance {tol:g})")
    sys.exit(1)
' "$got" "$ref" "$tol" "$model $prec" || fail=1
    done
  done
done
grep -q '"precision":"bf16"' "$tmp/mlp-bf16-on.json" || bad "--precision bf16: the log's start record does not say it"

small="--data fashion-mnist --batch 32 --epochs 1 --train-samples 64 --val-samples 32 --test-samples 32 --progress quiet"
# An exclusive GPU 0 in use elsewhere: a run on GPUs 1 and 2 must never create a context on GPU 0.
# shellcheck disable=SC2086
out=$(TT_SIM_DEVICES=3 TT_SIM_BUSY=0 "$bin" train --device cuda --gpus 1,2 --towers 2 $small 2>&1) ||
  bad "--gpus 1,2 with GPU 0 busy: $out"
# shellcheck disable=SC2086
out=$(TT_SIM_DEVICES=3 TT_SIM_BUSY=0 "$bin" train --device cuda --gpus 0,1 --towers 2 $small 2>&1) && bad "--gpus 0,1 with GPU 0 busy trained"
echo "$out" | grep -q "busy or unavailable" || bad "--gpus 0,1 with GPU 0 busy: no line names it: $out"
# The stand-in's settings are checked: one line, exit 2.
rc=0
# shellcheck disable=SC2086
out=$(TT_SIM_DEVICES=two "$bin" train --device cuda $small 2>&1) || rc=$?
[ $rc -eq 2 ] && [ "$(echo "$out" | grep -c .)" -eq 1 ] && echo "$out" | grep -q "TT_SIM_DEVICES: 'two'" ||
  bad "TT_SIM_DEVICES=two: exit $rc, '$out'"
# No device: --device cuda fails with CUDA's reason, auto trains on the CPU with a notice.
rc=0
# shellcheck disable=SC2086
out=$(TT_SIM_DEVICES=0 "$bin" train --device cuda $small 2>&1) || rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "no CUDA-capable device" || bad "TT_SIM_DEVICES=0 --device cuda: exit $rc, '$out'"
# shellcheck disable=SC2086
out=$(TT_SIM_DEVICES=0 "$bin" train --device auto $small 2>&1) || bad "TT_SIM_DEVICES=0 --device auto: $out"
echo "$out" | grep -q "notice: --device auto" || bad "TT_SIM_DEVICES=0 --device auto: no notice: $out"
# The counters: kernels, cuBLAS and copies of a run.
# shellcheck disable=SC2086
TT_SIM_REPORT="$tmp/report.tsv" "$bin" train --device cuda --towers 2 $small >/dev/null 2>&1 || bad "TT_SIM_REPORT run"
for name in k_softmax_xent cublasSgemm h2d d2h cudaMalloc; do
  grep -q "^$name	[1-9]" "$tmp/report.tsv" || bad "TT_SIM_REPORT: no $name line in $(cat "$tmp/report.tsv")"
done
# --graphs on: 2 towers, 10 steps of 64 (shards of 32): the first step of each tower runs as issued, the second is
# captured, every later one a launch — 9 launches a tower; a backend without graphs refuses it with one line.
# shellcheck disable=SC2086
TT_SIM_REPORT="$tmp/graphs.tsv" "$bin" train --device cuda --towers 2 --graphs on --data fashion-mnist --batch 64 \
  --epochs 1 --train-samples 640 --val-samples 64 --test-samples 64 --progress quiet >/dev/null 2>&1 ||
  bad "--graphs on with TT_SIM_REPORT"
grep -q "^cudaGraphLaunch	18	" "$tmp/graphs.tsv" || bad "--graphs on: not 18 graph launches: $(grep Graph "$tmp/graphs.tsv")"
# The loss gradient's scale (1/the step's samples) is a kernel argument too: 29 samples in steps of 10 over 3 towers
# give shards 4,3,3 then 3,3,3 — towers 1 and 2 keep their rows in the short last step, which must not replay the
# full step's graph. And towers sharing a GPU refuse graphs.
for g in off on; do
  # shellcheck disable=SC2086
  TT_SIM_DEVICES=3 TT_SIM_PAGEABLE=error "$bin" train --device cuda --towers 3 --graphs $g --data fashion-mnist \
    --batch 10 --epochs 2 --train-samples 29 --val-samples 10 --test-samples 16 --seed 5 --progress quiet \
    --log-json "$tmp/short-$g.json" >/dev/null 2>&1 || bad "29 samples in steps of 10, --graphs $g"
done
[ "$(figures "$tmp/short-on.json")" = "$(figures "$tmp/short-off.json")" ] ||
  bad "a short last step: --graphs on $(figures "$tmp/short-on.json") vs off $(figures "$tmp/short-off.json")"
rc=0
# shellcheck disable=SC2086
out=$(TT_SIM_DEVICES=2 "$bin" train --device cuda --towers 3 --graphs on $small 2>&1) || rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "^towertrain: --graphs on: needs one GPU per tower, and 3 towers share 2 GPUs" ||
  bad "3 towers on 2 GPUs --graphs on: exit $rc, '$out'"
# Dropout's masks depend on the epoch, a kernel argument a graph keeps: two epochs of a dropout model, 2 towers, with
# and without graphs, the same figures (a graph kept across epochs would replay the first epoch's masks).
printf 'dense units=64 activation=relu\ndropout rate=0.5\ndense units=10\n' >"$tmp/drop.model"
for g in off on; do
  # shellcheck disable=SC2086
  TT_SIM_PAGEABLE=error "$bin" train --device cuda --towers 2 --graphs $g --model "$tmp/drop.model" \
    --data fashion-mnist --batch 64 --epochs 2 --train-samples 640 --val-samples 64 --test-samples 64 --seed 5 \
    --progress quiet --log-json "$tmp/drop-$g.json" >/dev/null 2>&1 || bad "dropout model --graphs $g"
done
[ "$(figures "$tmp/drop-on.json")" = "$(figures "$tmp/drop-off.json")" ] ||
  bad "dropout model: --graphs on $(figures "$tmp/drop-on.json") vs off $(figures "$tmp/drop-off.json")"
# --augment (issue 34): the shifts and flips as the stand-in's k_augment, against the CPU backend's loop of the same
# tt_augment.h code — the mlp to the last printed digit, 3 towers on 3 devices, graphs off and on (the epoch is the
# draws' key, a kernel argument a graph keeps: two epochs), the rows from the host and gathered on the devices.
aug_args="--data fashion-mnist --batch 64 --epochs 2 --train-samples 640 --val-samples 64 --test-samples 64 --seed 5 --progress quiet --towers 3"
# shellcheck disable=SC2086
"$bin" train --device cpu $aug_args --log-json "$tmp/aug-none.json" >/dev/null 2>&1 || bad "--augment none on the CPU"
# shellcheck disable=SC2086
"$bin" train --device cpu $aug_args --augment cifar10 --log-json "$tmp/aug-cpu.json" >/dev/null 2>&1 ||
  bad "--augment cifar10 on the CPU"
[ "$(figures "$tmp/aug-cpu.json")" != "$(figures "$tmp/aug-none.json")" ] || bad "--augment cifar10 changed nothing"
for run in off/host on/host on/device; do
  g=${run%/*} on=${run#*/}
  # shellcheck disable=SC2086
  TT_SIM_DEVICES=3 TT_SIM_BLOCK_ORDER=shuffle TT_SIM_PAGEABLE=error TT_SIM_REPORT="$tmp/aug-$g-$on.tsv" "$bin" train \
    --device cuda $aug_args --augment cifar10 --graphs $g --data-on $on --log-json "$tmp/aug-$g-$on.json" \
    >/dev/null 2>&1 || bad "--augment cifar10 --graphs $g --data-on $on on the stand-in"
  [ "$(figures "$tmp/aug-$g-$on.json")" = "$(figures "$tmp/aug-cpu.json")" ] || bad "--augment --graphs $g --data-on \
$on: the stand-in $(figures "$tmp/aug-$g-$on.json") vs the CPU backend $(figures "$tmp/aug-cpu.json")"
  grep -q "^k_augment.*	[1-9]" "$tmp/aug-$g-$on.tsv" || bad "--augment --graphs $g: no k_augment in the counters"
done
# --epilogues lt: the mlp's dense layers run as cublasLtMatmul calls (no sgemm + k_bias_relu / k_bias_add for them,
# and each relu's gradient in the next layer's dx GEMM: no k_drelu_bgrad_chunks),
# with --graphs on too, and train to the same figures as kernels; with the heuristic offering nothing
# (TT_SIM_LT_NO_ALGO=1) every layer falls back to sgemm + kernels, the same figures again.
lt_args="--data fashion-mnist --batch 64 --epochs 1 --train-samples 640 --val-samples 64 --test-samples 64 --seed 3 --progress quiet --towers 2"
for e in kernels lt lt-graphs lt-none; do
  flags="--epilogues ${e%%-*}" envs="TT_SIM_PAGEABLE=error"
  [ "$e" = lt-graphs ] && flags="$flags --graphs on"
  [ "$e" = lt-none ] && envs="$envs TT_SIM_LT_NO_ALGO=1"
  # shellcheck disable=SC2086
  env $envs TT_SIM_REPORT="$tmp/ep-$e.tsv" "$bin" train --device cuda $lt_args $flags --log-json "$tmp/ep-$e.json" \
    >/dev/null 2>&1 || bad "--epilogues $e"
done
for e in lt lt-graphs; do
  grep -q "^cublasLtMatmul	[1-9]" "$tmp/ep-$e.tsv" || bad "--epilogues $e: no cublasLtMatmul in the counters"
  ! grep -q "^k_bias_relu	" "$tmp/ep-$e.tsv" || bad "--epilogues $e: k_bias_relu still ran"
  # both of the mlp's relus end in the next dense layer's dx GEMM (DRELU_BGRAD): no drelu_bgrad kernel of their own
  ! grep -q "^k_drelu_bgrad_chunks	" "$tmp/ep-$e.tsv" || bad "--epilogues $e: k_drelu_bgrad_chunks still ran"
  [ "$(figures "$tmp/ep-$e.json")" = "$(figures "$tmp/ep-kernels.json")" ] ||
    bad "--epilogues $e: $(figures "$tmp/ep-$e.json") vs kernels $(figures "$tmp/ep-kernels.json")"
done
! grep -q "^cublasLtMatmul	" "$tmp/ep-lt-none.tsv" || bad "TT_SIM_LT_NO_ALGO=1: cublasLtMatmul ran"
grep -q "^k_drelu_bgrad_chunks	[1-9]" "$tmp/ep-lt-none.tsv" || bad "TT_SIM_LT_NO_ALGO=1: the relus' gradients not run"
[ "$(figures "$tmp/ep-lt-none.json")" = "$(figures "$tmp/ep-kernels.json")" ] ||
  bad "--epilogues lt with no algorithm offered: $(figures "$tmp/ep-lt-none.json") vs kernels"
rc=0
# shellcheck disable=SC2086
out=$("$bin" train --device cpu --graphs on $small 2>&1) || rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "^towertrain: --graphs on: the cpu backend runs every op as it is issued" ||
  bad "--device cpu --graphs on: exit $rc, '$out'"

if [ $fail -ne 0 ]; then
  echo "test_sim_train: FAILED"
  exit 1
fi
echo "test_sim_train: passed"
