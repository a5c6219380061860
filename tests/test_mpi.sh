#!/usr/bin/env bash
# test_mpi.sh TOWERTRAIN MPIRUN K — scale-out under Open MPI on loopback (docs/scaleout.md), K = 2 or 3 ranks:
#   equivalence   K ranks x 1 tower == 1 process x K towers, bit for bit (allreduce and ps); K x 2 within tolerance
#                 of 1 x 2K; the test line of rank 0 equals the single process's (evaluation sums over the ranks)
#   determinism   a rerun of K x 2 (ps) gives the same bits
#   checkpoints   ps gathers the shards: its checkpoint equals the single process's; resumed with another K it
#                 continues bit for bit
#   ps memory     every rank's optimizer state (counted from its allocation) is its 1/K slice; allreduce: all of it
#   callbacks     --early-stopping and --reduce-lr-on-plateau: K ranks decide as 1 process of K towers (lines, final
#                 checkpoint), one voice
#   one voice     only rank 0 prints (one banner)
#   faults        a bad --data on one rank, a rank started with another --batch: one line naming the rank, non-zero
#                 exit, within seconds; a rank killed with SIGKILL ends the job within seconds
#   builds        a rank of another build (TT_TEST_FAKE_COMMIT; a first-release binary with TT_TEST_OLD_BUILD) is
#                 refused within seconds, one line naming both builds
#   outputs       rank 0's log, trace, CSV or stdout fails (train, bench): every rank exits 1 with rank 0's line
#                 (agreed, not aborted)
#   signals       SIGTERM to one rank (training, loading, bench, probe): every rank, rank 0 included, exits 143;
#                 one process's probe --json F stopped while measuring: F is removed, not left empty;
#                 rank 0's live bar losing its reader: every rank exits 1, the log ends in an "error" record
#   agreement     probe's --assume, --graphs, --json given to one rank only: one agreed line naming both ranks, every
#                 rank exits 2 (it hung, or ended in MPI_Abort); probe --assume under mpirun: rank 0 alone reports;
#                 bench's lists (--sync, --ranks, --towers, --scaling) likewise (it hung, or ran a row on rank 0 alone);
#                 K >= 3: a row's sub-job's agreed line reaches the job with one rank prefix (was "rank 0: rank 1:")
#   data-on       K ranks x 1 tower with --data-on device == 1 process x K towers on the host's path, bit for bit
#   words         a mismatched option is named with both values as the user writes them (--reduce is device here, cpu
#                 on rank 0; --lr is 0.002 here, 0.001 ...); probe compares its ranks too (it hung on another model)
# Exit 77 (a visible skip) when this build has no MPI or mpirun is not installed.
set -uo pipefail
TT=$1
MPIRUN=${2:-}
K=${3:-2}
if [ -z "$MPIRUN" ] || [ ! -x "$MPIRUN" ]; then
  echo "SKIP: Open MPI's mpirun not found at configure time (install openmpi-bin libopenmpi-dev: tools/install-deps.sh)"
  exit 77
fi
if ! "$TT" --version >/dev/null 2>&1; then echo "FAIL: $TT does not run"; exit 1; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none # containers often forbid the cross-memory attach
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
# The jobs train on a slice of Fashion-MNIST written here as plain IDX files: the first 2,560 training and 512 test
# samples, so --train-samples 2048 --val-samples 512 --test-samples 512 take the same training and test samples as
# from the whole set, and the validation split (the training file's tail) is samples 2048-2559 instead of the last
# 512. Every comparison here is between runs on the same data. Some 100 processes start in this test, and each
# inflating the whole 30 MB of gzip was 0.35 s of CPU, most of the test's. The cases that need more samples, or a
# signal while the real set loads, read the real set.
FM=$W/fm
python3 - /usr/share/datasets/fashion-mnist "$FM" <<'EOF' || { echo "FAIL: could not write the data slice"; exit 1; }
import gzip, os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
os.mkdir(dst)
for split, n in (("train", 2560), ("t10k", 512)):
    for kind, dims in (("images-idx3", 3), ("labels-idx1", 1)):
        name = "%s-%s-ubyte" % (split, kind)
        with gzip.open(os.path.join(src, name + ".gz")) as f:
            head = struct.unpack(">%dI" % (1 + dims), f.read(4 * (1 + dims)))  # magic, count, then rows and cols
            item = head[2] * head[3] if dims == 3 else 1
            body = f.read(n * item)
        assert len(body) == n * item
        with open(os.path.join(dst, name), "xb") as g:
            g.write(struct.pack(">%dI" % (1 + dims), head[0], n, *head[2:]) + body)
EOF
DATA0=(--train-samples 2048 --val-samples 512 --test-samples 512 --batch 128 --progress lines --seed 7)
DATA=(--data "$FM" "${DATA0[@]}")
mpi() { timeout 300 "$MPIRUN" --oversubscribe -np "$K" "$TT" "$@"; }

# the tensors of a checkpoint (everything after the header) as one hex digest; and the largest |difference| of two
tensors() { python3 -c 'import sys,struct,hashlib; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; print(hashlib.sha256(b[8+n:]).hexdigest())' "$1"; }
maxdiff() { python3 -c '
import sys,struct,array
def d(p):
    b=open(p,"rb").read(); n=struct.unpack("<Q",b[:8])[0]; return array.array("f",b[8+n:])
a,b=d(sys.argv[1]),d(sys.argv[2])
print(max(abs(x-y) for x,y in zip(a,b)) if len(a)==len(b) else "sizes differ")' "$1" "$2"; }
last() { ls "$1"/ckpt-*.safetensors | tail -1; }

# ---- equivalence and determinism ----
"$TT" train "${DATA[@]}" --epochs 2 --towers "$K" --checkpoint-dir "$W/one" >"$W/one.txt" 2>&1 || bad "1 x $K towers failed: $(tail -2 "$W/one.txt")"
for mode in allreduce ps; do
  mpi train "${DATA[@]}" --epochs 2 --towers 1 --node-reduce $mode --checkpoint-dir "$W/k$mode" --log-json "$W/k$mode.jsonl" \
    >"$W/k$mode.txt" 2>&1 || bad "$K ranks x 1 ($mode) failed: $(tail -3 "$W/k$mode.txt")"
  if [ "$(tensors "$(last "$W/one")")" = "$(tensors "$(last "$W/k$mode")")" ]; then
    ok "$K ranks x 1 tower ($mode) == 1 process x $K towers, weights and optimizer state bit for bit"
  else
    bad "$K ranks x 1 tower ($mode) differs from 1 x $K towers: max |d| $(maxdiff "$(last "$W/one")" "$(last "$W/k$mode")")"
  fi
  if [ "$(grep '^test:' "$W/one.txt")" = "$(grep '^test:' "$W/k$mode.txt")" ] && grep -q '^test:' "$W/one.txt"; then
    ok "$mode: rank 0's test line (summed over ranks) == the single process's"
  else
    bad "$mode: test lines differ: '$(grep '^test:' "$W/one.txt")' vs '$(grep '^test:' "$W/k$mode.txt")'"
  fi
  n=$(grep -c '^towertrain ' "$W/k$mode.txt")
  [ "$n" = 1 ] && ok "$mode: one banner for $K ranks (rank 0 speaks)" || bad "$mode: $n banners"
done
# --data-on device: every rank holds the whole training set on its towers' devices and gathers its shards there
mpi train "${DATA[@]}" --epochs 2 --towers 1 --data-on device --checkpoint-dir "$W/kdev" >"$W/kdev.txt" 2>&1 \
  || bad "$K ranks x 1 (--data-on device) failed: $(tail -3 "$W/kdev.txt")"
if [ "$(tensors "$(last "$W/one")")" = "$(tensors "$(last "$W/kdev")")" ]; then
  ok "$K ranks x 1 tower with --data-on device == 1 process x $K towers (host), bit for bit"
else
  bad "$K ranks x 1 tower with --data-on device differs: max |d| $(maxdiff "$(last "$W/one")" "$(last "$W/kdev")")"
fi
"$TT" train "${DATA[@]}" --epochs 2 --towers $((2 * K)) --checkpoint-dir "$W/one2" >/dev/null 2>&1 || bad "1 x $((2 * K)) failed"
for run in a b; do
  mpi train "${DATA[@]}" --epochs 2 --towers 2 --node-reduce ps --checkpoint-dir "$W/k2$run" >"$W/k2$run.txt" 2>&1 \
    || bad "$K x 2 (ps) run $run failed (exit $?): $(tail -3 "$W/k2$run.txt")"
done
d=$(maxdiff "$(last "$W/one2")" "$(last "$W/k2a")")
python3 -c "import sys; sys.exit(0 if float('$d') < 1e-4 else 1)" 2>/dev/null \
  && ok "$K ranks x 2 towers vs 1 x $((2 * K)): max |dw| $d (< 1e-4: the node sums group the additions)" \
  || bad "$K ranks x 2 towers vs 1 x $((2 * K)): max |dw| $d"
[ "$(tensors "$(last "$W/k2a")")" = "$(tensors "$(last "$W/k2b")")" ] \
  && ok "$K x 2 (ps) rerun: bit-identical" || bad "$K x 2 (ps) rerun differs"

# ---- ps holds 1/K of the optimizer state (each rank's own allocation, gathered into rank 0's log) ----
python3 - "$W/kps.jsonl" "$W/kallreduce.jsonl" "$K" <<'EOF' && ok "ps: every rank holds its 1/$K slice of Adam's state; allreduce: all of it" || bad "optimizer state per rank"
import json, sys
def ranks(p):
    return next(json.loads(l) for l in open(p) if '"ranks"' in l and '"event":"ranks"' in l)
ps, ar, K = ranks(sys.argv[1]), ranks(sys.argv[2]), int(sys.argv[3])
P = ps["params"]
f = ps["optimizer_floats"]
print("ps optimizer floats per rank:", f, "allreduce:", ar["optimizer_floats"], "P =", P)
assert len(f) == K and sum(f) == 2 * P and max(f) <= 2 * (P // K + 16)
assert ar["optimizer_floats"] == [2 * P] * K
EOF

# ---- checkpoints: resume with another K, bit for bit ----
"$TT" train "${DATA[@]}" --epochs 3 --towers "$K" --checkpoint-dir "$W/straight" >/dev/null 2>&1 || bad "straight 3 epochs failed"
mpi train "${DATA[@]}" --epochs 3 --towers 1 --node-reduce ps --resume "$W/kps" --checkpoint-dir "$W/resumed" \
  >"$W/resumed.txt" 2>&1 || bad "resume under $K ranks (ps) failed: $(tail -3 "$W/resumed.txt")"
[ "$(tensors "$(last "$W/straight")")" = "$(tensors "$(last "$W/resumed")")" ] \
  && ok "a $K-rank ps checkpoint resumed by $K ranks (ps) == a straight run" || bad "resumed (ps) differs from straight"
"$TT" train "${DATA[@]}" --epochs 3 --towers "$K" --resume "$W/kps" --checkpoint-dir "$W/resumed1" >/dev/null 2>&1 \
  || bad "resume of a $K-rank checkpoint by one process failed"
[ "$(tensors "$(last "$W/straight")")" = "$(tensors "$(last "$W/resumed1")")" ] \
  && ok "a $K-rank ps checkpoint resumed by one process of $K towers == a straight run" || bad "resumed by one process differs"

# ---- callbacks (issue 34): the ranks decide together ----
# --early-stopping and --reduce-lr-on-plateau on the job's metrics (summed over the ranks in rank order), rank 0's
# decisions taken by every rank: K ranks x 1 tower decide as 1 process x K towers — the same lines (reductions, the
# stop, the restored epoch), one voice, the same final checkpoint (restored weights, optimizer state, best weights)
CB=(--epochs 8 --lr 0.01 --early-stopping monitor=val_loss,patience=1,restore_best_weights
    --reduce-lr-on-plateau monitor=loss,factor=0.5,patience=1,min_delta=0.15)
decisions() { grep -E '^Epoch [0-9]+: |^Restoring |^test:' "$1"; }
"$TT" train "${DATA[@]}" "${CB[@]}" --towers "$K" --checkpoint-dir "$W/cb1" --save-every-epoch --keep 100 >"$W/cb1.txt" 2>&1 \
  || bad "1 x $K towers with callbacks failed: $(tail -2 "$W/cb1.txt")"
if grep -q '^Epoch [0-9]*: early stopping$' "$W/cb1.txt" && grep -q '^Epoch [0-9]*: ReduceLROnPlateau' "$W/cb1.txt"; then
  ok "callbacks: the single process stops early and reduces the rate ($(decisions "$W/cb1.txt" | head -c 300 | tr '\n' ';'))"
else
  bad "callbacks: the single process neither stopped nor reduced: the case decides nothing: $(tail -5 "$W/cb1.txt")"
fi
for mode in allreduce ps; do
  mpi train "${DATA[@]}" "${CB[@]}" --towers 1 --node-reduce $mode --checkpoint-dir "$W/cbk$mode" \
    --log-json "$W/cbk$mode.jsonl" >"$W/cbk$mode.txt" 2>&1 \
    || bad "$K ranks x 1 ($mode) with callbacks failed: $(tail -3 "$W/cbk$mode.txt")"
  if [ "$(decisions "$W/cb1.txt")" = "$(decisions "$W/cbk$mode.txt")" ]; then
    ok "callbacks ($mode): $K ranks decide as 1 process of $K towers, line for line"
  else
    bad "callbacks ($mode): decisions differ: '$(decisions "$W/cb1.txt" | tr '\n' ';')' vs '$(decisions "$W/cbk$mode.txt" | tr '\n' ';')'"
  fi
  [ "$(tensors "$(last "$W/cb1")")" = "$(tensors "$(last "$W/cbk$mode")")" ] \
    && ok "callbacks ($mode): the final checkpoint (restored weights, state, best weights) bit for bit" \
    || bad "callbacks ($mode): final checkpoints differ: max |d| $(maxdiff "$(last "$W/cb1")" "$(last "$W/cbk$mode")")"
  # resumed by K ranks from the single process's epoch 2 (the callbacks' state in the checkpoint): the same end
  mpi train "${DATA[@]}" "${CB[@]}" --towers 1 --node-reduce $mode --resume "$W/cb1/ckpt-e000002-s000000016.safetensors" \
    --checkpoint-dir "$W/cbr$mode" >"$W/cbr$mode.txt" 2>&1 || bad "callbacks ($mode): resume failed: $(tail -3 "$W/cbr$mode.txt")"
  [ "$(decisions "$W/cb1.txt")" = "$(decisions "$W/cbr$mode.txt")" ] && [ "$(tensors "$(last "$W/cb1")")" = "$(tensors "$(last "$W/cbr$mode")")" ] \
    && ok "callbacks ($mode): $K ranks resumed after epoch 2 decide and end as the unbroken run" \
    || bad "callbacks ($mode): resumed: '$(decisions "$W/cbr$mode.txt" | tr '\n' ';')'"
  n=$(grep -c '^Epoch [0-9]*: early stopping$' "$W/cbk$mode.txt")
  r=$(grep -c '"event":"early_stopping"' "$W/cbk$mode.jsonl")
  [ "$n" = 1 ] && [ "$r" = 1 ] && ok "callbacks ($mode): one stop line, one record (rank 0 speaks)" \
    || bad "callbacks ($mode): $n stop lines, $r records"
done

# ---- faults: each must end within seconds, non-zero, one line naming the rank ----
last_rank=$((K - 1))
mpmd=()
for ((r = 0; r < K; r++)); do
  [ $r -gt 0 ] && mpmd+=(:)
  if [ $r = $last_rank ]; then mpmd+=(-np 1 "$TT" train "${DATA0[@]}" --epochs 1 --data "$W/missing-dir"); else
    mpmd+=(-np 1 "$TT" train "${DATA[@]}" --epochs 1); fi
done
t0=$(date +%s)
timeout 60 "$MPIRUN" --oversubscribe "${mpmd[@]}" >"$W/badfile.txt" 2>&1
rc=$?
t1=$(date +%s)
lines=$(grep '^towertrain: ' "$W/badfile.txt" | grep -vc '^towertrain: notice: ')
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "^towertrain: rank $last_rank: .*missing-dir" "$W/badfile.txt" && [ "$lines" = 1 ] && [ $((t1 - t0)) -le 20 ]; then
  ok "a bad --data on rank $last_rank: exit $rc in $((t1 - t0)) s, one line: $(grep '^towertrain: rank' "$W/badfile.txt")"
else
  bad "bad --data on rank $last_rank: rc $rc, $((t1 - t0)) s, $lines lines: $(head -c 600 "$W/badfile.txt")"
fi
mpmd=()
for ((r = 0; r < K; r++)); do
  [ $r -gt 0 ] && mpmd+=(:)
  b=128; [ $r = $last_rank ] && b=64
  mpmd+=(-np 1 "$TT" train --data "$FM" --train-samples 2048 --val-samples 512 --test-samples 512 --progress lines --epochs 1 --batch $b)
done
timeout 60 "$MPIRUN" --oversubscribe "${mpmd[@]}" >"$W/mismatch.txt" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "^towertrain: rank $last_rank: started with another configuration than rank 0: --batch is 64 here, 128 on rank 0" "$W/mismatch.txt" \
   && ! grep -q '^Epoch' "$W/mismatch.txt"; then
  ok "a rank started with another --batch is refused before training: $(grep '^towertrain: ' "$W/mismatch.txt")"
else
  bad "mismatched --batch: rc $rc: $(head -c 600 "$W/mismatch.txt")"
fi
# an update on the devices is a single-process design: refused on every rank, in one line, before any data is read
timeout 60 "$MPIRUN" --oversubscribe -np "$K" "$TT" train "${DATA[@]}" --epochs 1 --towers 2 --reduce device \
  --update device >"$W/update.txt" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep '^towertrain: ' "$W/update.txt" | grep -vc '^towertrain: notice: ')" = 1 ] &&
   grep -q "^towertrain: --update device: under mpirun the ranks combine their sums on the host" "$W/update.txt"; then
  ok "--update device under mpirun: refused, one line: $(grep '^towertrain: ' "$W/update.txt")"
else
  bad "--update device under mpirun: rc $rc: $(head -c 600 "$W/update.txt")"
fi
# --sync other than bsp keeps the master variables in one process: refused on every rank, one line (issue 22)
for mode in ssp:2 async weights:4; do
  timeout 60 "$MPIRUN" --oversubscribe -np "$K" "$TT" train "${DATA[@]}" --epochs 1 --towers 2 --sync "$mode" \
    >"$W/sync.txt" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep '^towertrain: ' "$W/sync.txt" | grep -vc '^towertrain: notice: ')" = 1 ] &&
     grep -q "^towertrain: --sync $mode: under mpirun the ranks combine one summed gradient every step" "$W/sync.txt"; then
    ok "--sync $mode under mpirun: refused, one line"
  else
    bad "--sync $mode under mpirun: rc $rc: $(head -c 600 "$W/sync.txt")"
  fi
done
# batchnorm (issue 22): --bn-sync off composes with the ranks — each tower's statistics are its own shard's and its
# step of the moving statistics is summed like a gradient — so K ranks x 1 tower == 1 process x K towers, the moving
# statistics included, bit for bit; --bn-sync on (an exchange inside the forward) is refused on every rank, one line
printf 'dense units=32\nbatchnorm momentum=0.9\nrelu\ndense units=10\n' >"$W/bn.model"
"$TT" train "${DATA[@]}" --epochs 1 --towers "$K" --model "$W/bn.model" --checkpoint-dir "$W/bn1" >"$W/bn1.txt" 2>&1 \
  || bad "batchnorm, 1 x $K towers failed: $(tail -2 "$W/bn1.txt")"
for mode in allreduce ps; do
  mpi train "${DATA[@]}" --epochs 1 --towers 1 --model "$W/bn.model" --node-reduce $mode --checkpoint-dir "$W/bnk$mode" \
    >"$W/bnk$mode.txt" 2>&1 || bad "batchnorm, $K ranks ($mode) failed: $(tail -3 "$W/bnk$mode.txt")"
  if [ "$(tensors "$(last "$W/bn1")")" = "$(tensors "$(last "$W/bnk$mode")")" ]; then
    ok "batchnorm --bn-sync off: $K ranks x 1 tower ($mode) == 1 x $K towers, moving statistics too, bit for bit"
  else
    bad "batchnorm: $K ranks ($mode) differ from 1 x $K towers: max |d| $(maxdiff "$(last "$W/bn1")" "$(last "$W/bnk$mode")")"
  fi
done
timeout 60 "$MPIRUN" --oversubscribe -np "$K" "$TT" train "${DATA[@]}" --epochs 1 --towers 1 --model "$W/bn.model" \
  --bn-sync on >"$W/bnsync.txt" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep '^towertrain: ' "$W/bnsync.txt" | grep -vc '^towertrain: notice: ')" = 1 ] &&
   grep -q "^towertrain: --bn-sync on: the statistics are exchanged between one process's towers" "$W/bnsync.txt"; then
  ok "--bn-sync on under mpirun: refused, one line"
else
  bad "--bn-sync on under mpirun: rc $rc: $(head -c 600 "$W/bnsync.txt")"
fi
# every mismatch in the flag's own words: names for enums, the value a user typed for a float (issue 18)
mismatch() { # WANT CMD ARGS-OF-RANK-0 -- ARGS-OF-THE-LAST-RANK (both after CMD and the common ones)
  local want=$1 cmd=$2; shift 2
  local a=() b=()
  while [ "$1" != -- ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  local m=()
  for ((r = 0; r < K; r++)); do
    [ $r -gt 0 ] && m+=(:)
    if [ $r = $last_rank ]; then m+=(-np 1 "$TT" "$cmd" "${b[@]}"); else m+=(-np 1 "$TT" "$cmd" "${a[@]}"); fi
  done
  timeout 60 "$MPIRUN" --oversubscribe "${m[@]}" >"$W/words.txt" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep "^towertrain: rank $last_rank: " "$W/words.txt" | grep -qF -- "$want"; then
    ok "named values: $(grep -m1 '^towertrain: ' "$W/words.txt" | head -c 200)"
  else
    bad "wanted 'rank $last_rank: $want': rc $rc: $(grep '^towertrain' "$W/words.txt" | head -c 400)"
  fi
}
T=(--data "$FM" --train-samples 2048 --val-samples 512 --test-samples 512 --progress lines --epochs 1)
mismatch "--reduce is device here, cpu on rank 0" train "${T[@]}" -- "${T[@]}" --reduce device
mismatch "--lr is 0.002 here, 0.001 on rank 0" train "${T[@]}" --lr 0.001 -- "${T[@]}" --lr 0.002
mismatch "--optimizer is sgd here, adam on rank 0" train "${T[@]}" -- "${T[@]}" --optimizer sgd
# a callback's SPEC (its canonical words' CRC-32, as --slow-tower's list): the last rank would decide otherwise
mismatch "--early-stopping is " train "${T[@]}" --early-stopping patience=2 -- "${T[@]}" --early-stopping patience=3
mismatch "the optimizer's settings are 'momentum 0.9' here, 'momentum 0.5' on rank 0" train "${T[@]}" --optimizer sgd \
  --momentum 0.5 -- "${T[@]}" --optimizer sgd --momentum 0.9
mismatch "--node-reduce is ps here, allreduce on rank 0" train "${T[@]}" -- "${T[@]}" --node-reduce ps
mismatch "--data-on is device here, host on rank 0" train "${T[@]}" -- "${T[@]}" --data-on device
mismatch "--save-best is val_loss here, none on rank 0" train "${T[@]}" --checkpoint-dir "$W/sb" -- "${T[@]}" \
  --checkpoint-dir "$W/sb" --save-best val_loss
mismatch "probe: started otherwise than rank 0: the model's parameter count is 1250858 here, 269322 on rank 0" \
  probe --reps 2 -- --reps 2 --model cnn
mismatch "probe: started otherwise than rank 0: --reps is 3 here, 2 on rank 0" probe --reps 2 -- --reps 3
# a rank killed mid-training: mpirun ends the job and names the rank
( timeout 120 "$MPIRUN" --oversubscribe -np "$K" "$TT" train --epochs 50 --progress lines --train-samples 20000 \
    --val-samples 512 --test-samples 512 --log-json "$W/killed.jsonl" >"$W/killed.txt" 2>&1; echo $? >"$W/killed.rc" ) &
victim=""
for _ in $(seq 1 100); do
  for p in $(pgrep -f "$TT train --epochs 50 .*$W/killed.jsonl" 2>/dev/null); do # this instance's job only
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$last_rank"; then victim=$p; fi
  done
  [ -n "$victim" ] && grep -q '^Epoch 1/50' "$W/killed.txt" 2>/dev/null && break
  sleep 0.1
done
sleep 0.5
t0=$(date +%s)
[ -n "$victim" ] && kill -9 "$victim"
for _ in $(seq 1 300); do [ -s "$W/killed.rc" ] && break; sleep 0.1; done
t1=$(date +%s)
rc=$(cat "$W/killed.rc" 2>/dev/null || echo none)
if [ -n "$victim" ] && [ "$rc" != none ] && [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ $((t1 - t0)) -le 15 ] \
   && grep -q "rank $last_rank" "$W/killed.txt"; then
  ok "rank $last_rank killed (SIGKILL): the job ended in $((t1 - t0)) s, exit $rc: $(grep -m1 "rank $last_rank" "$W/killed.txt" | head -c 200)"
else
  bad "killed rank: victim '$victim', rc $rc after $((t1 - t0)) s: $(tail -c 600 "$W/killed.txt")"
fi
wait

# ---- mismatched builds (docs/scaleout.md, "The start-up exchange"): the start-up exchange refuses them in seconds ----
# One binary plays a second build: TT_TEST_FAKE_COMMIT replaces the commit in its build record. The record, its
# exchange and the compare are the real ones; a second real build would cost this test a full compile.
mpmd=()
for ((r = 0; r < K; r++)); do
  [ $r -gt 0 ] && mpmd+=(:)
  fake=(); [ $r = $last_rank ] && fake=(env TT_TEST_FAKE_COMMIT=other-build-1234)
  mpmd+=(-np 1 "${fake[@]}" "$TT" train "${DATA[@]}" --epochs 1)
done
t0=$(date +%s)
timeout 60 "$MPIRUN" --oversubscribe "${mpmd[@]}" >"$W/build.txt" 2>&1
rc=$?
t1=$(date +%s)
commit=$("$TT" --version | sed -n 's/^build: .*(commit \([^,]*\),.*/\1/p')
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((t1 - t0)) -le 20 ] && ! grep -q '^Epoch' "$W/build.txt" \
   && grep -q "^towertrain: rank $last_rank: another build than rank 0 (the commit differs): this rank runs towertrain .*(commit other-build-1234, .*; rank 0 runs towertrain .*(commit $commit, " "$W/build.txt"; then
  ok "a rank of another build is refused in $((t1 - t0)) s, naming both: $(grep -m1 '^towertrain: ' "$W/build.txt" | head -c 300)"
else
  bad "mismatched builds: rc $rc after $((t1 - t0)) s: $(head -c 800 "$W/build.txt")"
fi
# the first release's ranks sent {CRC-32 of the command, --help} first: no command may have the magic as its CRC-32
python3 -c '
import zlib, sys
magic = 0x44425454
cmds = ["train", "bench", "probe", "compare", "summary", "eval", "predict", "--help", "-h", "help", "--version", "version"]
sys.exit(any(zlib.crc32(c.encode()) == magic for c in cmds))' \
  && ok "no command's CRC-32 is the build record's magic (a first-release rank reads it as another command)" \
  || bad "a command's CRC-32 equals TT_BUILD_MAGIC"
# a real build of the first release's start-up (TT_TEST_OLD_BUILD=path, e.g. built from commit 50436ee): both
# orders end in seconds with one line; without it this case is a visible note, not a pass
if [ -n "${TT_TEST_OLD_BUILD:-}" ] && [ -x "$TT_TEST_OLD_BUILD" ]; then
  for order in old-first new-first; do
    a=$TT; b=$TT_TEST_OLD_BUILD; [ $order = old-first ] && { a=$TT_TEST_OLD_BUILD; b=$TT; }
    t0=$(date +%s)
    timeout 60 "$MPIRUN" --oversubscribe -np 1 "$a" train "${DATA[@]}" --epochs 1 : -np $((K - 1)) "$b" train "${DATA[@]}" \
      --epochs 1 >"$W/old.txt" 2>&1
    rc=$?
    t1=$(date +%s)
    if [ $rc = 2 ] && [ $((t1 - t0)) -le 20 ] && grep -q 'runs an older towertrain, one that sends no build record' "$W/old.txt"; then
      ok "an old build ($order): exit $rc in $((t1 - t0)) s: $(grep -m1 '^towertrain: ' "$W/old.txt" | head -c 200)"
    else
      bad "an old build ($order): rc $rc after $((t1 - t0)) s: $(head -c 600 "$W/old.txt")"
    fi
  done
else
  echo "note: a first-release build against this one not tried (set TT_TEST_OLD_BUILD to such a towertrain)"
fi

cat >"$W/rc.sh" <<'EOS'
#!/bin/sh
# runs towertrain, then records this rank's exit code; TT_TEST_FULL_STDOUT=1: rank 0's stdout is /dev/full
out=$1; shift
if [ "${TT_TEST_FULL_STDOUT:-}" = 1 ] && [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then "$@" >/dev/full; else "$@"; fi
echo $? >"$out.$OMPI_COMM_WORLD_RANK"
EOS
chmod +x "$W/rc.sh"

# ---- rank 0's outputs fail (console, log, trace): the failure is agreed, every rank exits 1 with rank 0's line ----
# (an aborted job — a rank left waiting in a collective, or MPI_Abort — gives other exit codes or none)
allrc() { local r v=; for ((r = 0; r < K; r++)); do v="$v$(cat "$1.$r" 2>/dev/null || echo none) "; done; echo "$v"; }
ones=$(for ((r = 0; r < K; r++)); do printf '1 '; done)
for case in "log|train --epochs 2 --log-json /dev/full|--log-json /dev/full: write failed" \
            "trace|train --epochs 2 --trace /dev/full|--trace /dev/full: write failed" \
            "stdout|train --epochs 2|stdout: write failed" \
            "csv|bench --epochs 1 --towers 1 --reps 2 --csv /dev/full|--csv /dev/full: write failed" \
            "bench-stdout|bench --epochs 1 --towers 1 --reps 2|stdout: write failed" \
            "probe-stdout|probe --reps 2|stdout: write failed"; do
  name=${case%%|*}; rest=${case#*|}; args=${rest%%|*}; want=${rest#*|}
  full=; case $name in *stdout) full=1 ;; esac
  case ${args%% *} in
    train) data=("${DATA[@]}") ;;
    bench) data=(--data "$FM" --train-samples 2048 --val-samples 512 --test-samples 512) ;;
    *) data=() ;;
  esac
  # shellcheck disable=SC2086 # args is words
  TT_TEST_FULL_STDOUT=$full timeout 120 "$MPIRUN" --oversubscribe -np "$K" "$W/rc.sh" "$W/out-$name.rc" "$TT" $args \
    "${data[@]}" >"$W/out-$name.txt" 2>&1
  rcs=$(allrc "$W/out-$name.rc")
  lines=$(grep '^towertrain: ' "$W/out-$name.txt" | grep -vc '^towertrain: notice: ')
  if [ "$rcs" = "$ones" ] && [ "$lines" = 1 ] && grep -q "^towertrain: rank 0: $want" "$W/out-$name.txt"; then
    ok "rank 0's $name fails: every rank exits 1 ($rcs), one line: $(grep '^towertrain: rank' "$W/out-$name.txt")"
  else
    bad "rank 0's $name fails: exit codes $rcs, $lines lines: $(head -c 600 "$W/out-$name.txt")"
  fi
done

# ---- what decides a command's way, given to one rank only (probe's --assume, --graphs, --json; bench's lists): the
# ranks compare it before any of them branches on it — one agreed line on every rank, every rank exits 2 (a bad
# flag), within the timeout (it hung in probe's first collective or bench's rows, or ended in MPI_Abort) ----
twos=$(for ((r = 0; r < K; r++)); do printf '2 '; done)
# agree_case NAME WANT-LINE CMD ARGS-OF-THE-OTHER-RANKS -- ARGS-OF-THE-LAST-RANK (as mismatch above)
agree_case() {
  local name=$1 want=$2 cmd=$3 a=() b=() m=() r rcs lines
  shift 3
  while [ "$1" != -- ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  for ((r = 0; r < K; r++)); do
    [ $r -gt 0 ] && m+=(:)
    if [ $r = $last_rank ]; then m+=(-np 1 "$W/rc.sh" "$W/agree-$name.rc" "$TT" "$cmd" "${b[@]}")
    else m+=(-np 1 "$W/rc.sh" "$W/agree-$name.rc" "$TT" "$cmd" "${a[@]}"); fi
  done
  timeout 60 "$MPIRUN" --oversubscribe "${m[@]}" >"$W/agree-$name.txt" 2>&1
  rcs=$(allrc "$W/agree-$name.rc")
  lines=$(grep '^towertrain: ' "$W/agree-$name.txt" | grep -vc '^towertrain: notice: ')
  if [ "$rcs" = "$twos" ] && [ "$lines" = 1 ] && grep -qxF "towertrain: $want" "$W/agree-$name.txt"; then
    ok "agreed ($name): every rank exits 2 ($rcs): $(grep -m1 '^towertrain: ' "$W/agree-$name.txt" | head -c 200)"
  else
    bad "agreed ($name): wanted 'towertrain: $want' once, exit 2 on every rank: exit codes $rcs, $lines lines: $(grep -v '^ ' "$W/agree-$name.txt" | head -c 600)"
  fi
}
P="every rank must run the same probe"
agree_case probe-assume "probe: the ranks disagree on --assume: rank 0 not given, rank $last_rank h100-pcie ($P)" \
  probe --reps 2 -- --reps 2 --assume h100-pcie
agree_case probe-assume-value "probe: the ranks disagree on --assume: rank 0 h100-pcie, rank $last_rank a100-pcie ($P)" \
  probe --assume h100-pcie -- --assume a100-pcie
agree_case probe-graphs "probe: the ranks disagree on --graphs: rank 0 off, rank $last_rank on ($P)" \
  probe --reps 2 -- --reps 2 --graphs on
agree_case probe-json "probe: the ranks disagree on --json: rank 0 not given, rank $last_rank given ($P)" \
  probe --reps 2 -- --reps 2 --json "$W/agree.json"
# given to every rank: --graphs on is refused, agreed (it ended in MPI_Abort); --assume is rank 0's to print and write
agree_case probe-graphs-all "probe: --graphs on: the probe measures every design this backend runs, graphs included where it has them (--graphs is the what-if's: give --assume)" \
  probe --reps 2 --graphs on -- --reps 2 --graphs on
zeros=$(for ((r = 0; r < K; r++)); do printf '0 '; done)
timeout 60 "$MPIRUN" --oversubscribe -np "$K" "$W/rc.sh" "$W/whatif.rc" "$TT" probe --assume h100-pcie \
  --json "$W/whatif.json" >"$W/whatif.txt" 2>&1
rcs=$(allrc "$W/whatif.rc")
if [ "$rcs" = "$zeros" ] && [ "$(grep -c '^what-if: PREDICTED' "$W/whatif.txt")" = 1 ] &&
   python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["schema"] == "towertrain-whatif"' "$W/whatif.json"; then
  ok "probe --assume under mpirun: every rank exits 0, rank 0 alone prints the report and writes --json"
else
  bad "probe --assume under mpirun: exit codes $rcs, $(grep -c '^what-if: PREDICTED' "$W/whatif.txt") reports: $(grep '^towertrain' "$W/whatif.txt" | head -c 400)"
fi

BN=(--data "$FM" --train-samples 2048 --val-samples 512 --test-samples 512 --epochs 1 --reps 2)
S="every rank must sweep the same lists"
agree_case bench-sync "bench: the ranks disagree on --sync: rank 0 bsp, rank $last_rank bsp,bsp ($S)" \
  bench "${BN[@]}" --towers 1 -- "${BN[@]}" --towers 1 --sync bsp,bsp
agree_case bench-ranks "bench: the ranks disagree on --ranks: rank 0 $K, rank $last_rank 1 ($S)" \
  bench "${BN[@]}" --towers 1 -- "${BN[@]}" --towers 1 --ranks 1
agree_case bench-towers "bench: the ranks disagree on --towers: rank 0 1, rank $last_rank 1,2 ($S)" \
  bench "${BN[@]}" --towers 1 -- "${BN[@]}" --towers 1,2
agree_case bench-scaling "bench: the ranks disagree on --scaling: rank 0 strong, rank $last_rank weak ($S)" \
  bench "${BN[@]}" --towers 1 -- "${BN[@]}" --towers 1 --scaling weak

# a row's sub-job agreed a failure ("rank 1: ..." on its ranks): the job passes the line on as it is, not as "rank 0:
# rank 1: ..." (K >= 3: bench --ranks 2, rank 1 started with another --lr, rank 2 sits the row out)
if [ "$K" -ge 3 ]; then
  m=()
  for ((r = 0; r < K; r++)); do
    [ $r -gt 0 ] && m+=(:)
    m+=(-np 1 "$W/rc.sh" "$W/subjob.rc" "$TT" bench "${BN[@]}" --towers 1 --ranks 2)
    [ $r = 1 ] && m+=(--lr 0.002)
  done
  timeout 60 "$MPIRUN" --oversubscribe "${m[@]}" >"$W/subjob.txt" 2>&1
  rcs=$(allrc "$W/subjob.rc")
  want="towertrain: rank 1: started with another configuration than rank 0: --lr is 0.002 here, 0.001 on rank 0"
  if [ "$rcs" = "$twos" ] && [ "$(grep '^towertrain: ' "$W/subjob.txt" | grep -vc '^towertrain: notice: ')" = 1 ] &&
     grep -qF "$want" "$W/subjob.txt"; then
    ok "a sub-job's agreed line, once, one rank prefix: $(grep -m1 '^towertrain: ' "$W/subjob.txt" | head -c 160)"
  else
    bad "a sub-job's agreed line: wanted '$want ...', exit codes $rcs: $(grep '^towertrain' "$W/subjob.txt" | head -c 400)"
  fi
fi

# ---- a stop by SIGTERM on one rank: every rank stops at one step and exits 143, rank 0 included ----
( timeout 120 "$MPIRUN" --oversubscribe -np "$K" "$W/rc.sh" "$W/term.rc" "$TT" train --epochs 50 --progress lines \
    --train-samples 20000 --val-samples 512 --test-samples 512 --checkpoint-dir "$W/term" >"$W/term.txt" 2>&1 ) &
victim=""
for _ in $(seq 1 100); do
  for p in $(pgrep -f "$TT train --epochs 50 .*$W/term" 2>/dev/null); do # this instance's job only
    [ "$(readlink "/proc/$p/exe")" = "$(readlink -f "$TT")" ] || continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$last_rank"; then victim=$p; fi
  done
  [ -n "$victim" ] && grep -q '^Epoch 1/50' "$W/term.txt" 2>/dev/null && break
  sleep 0.1
done
sleep 0.5
[ -n "$victim" ] && kill -TERM "$victim"
wait
rc0=$(cat "$W/term.rc.0" 2>/dev/null || echo none)
rcl=$(cat "$W/term.rc.$last_rank" 2>/dev/null || echo none)
# the stop lands at a step boundary: inside an epoch ("in epoch E after step S/N") or, when the signal comes during
# the validation at an epoch's end, between two ("before epoch E+1") — both are one step, on every rank
if [ -n "$victim" ] && [ "$rc0" = 143 ] && [ "$rcl" = 143 ] &&
  grep -Eq '^towertrain: stopped by SIGTERM (in epoch [0-9]+ after step|before epoch [0-9]+)' "$W/term.txt"; then
  ok "SIGTERM to rank $last_rank only: rank 0 exits $rc0, rank $last_rank $rcl: $(grep -m1 '^towertrain: stopped' "$W/term.txt" | head -c 160)"
else
  bad "SIGTERM to rank $last_rank: victim '$victim', rank 0 exit $rc0, rank $last_rank exit $rcl: $(tail -c 600 "$W/term.txt")"
fi

# ---- a signal on one rank at other moments, and rank 0's bar failing: every rank ends alike, nothing hangs ----
# rank_pid PATTERN RANK: the pid of this instance's towertrain process of that rank ("" until it exists)
rank_pid() {
  local p
  for p in $(pgrep -f "$1" 2>/dev/null); do
    [ "$(readlink "/proc/$p/exe")" = "$(readlink -f "$TT")" ] || continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo "$p"; return; fi
  done
}
# signal_case NAME DELAY ARGS...: SIGTERM to the last rank DELAY seconds after it exists; every rank must exit 143.
# Every case's model is a file of this instance ($W/sig-NAME.txt), so pgrep finds this job's processes only.
signal_case() {
  local name=$1 delay=$2 victim="" rcs want
  shift 2
  printf 'dense units=256 activation=relu\ndense units=256 activation=relu\ndense units=10\n' >"$W/sig-$name.model"
  ( timeout 120 "$MPIRUN" --oversubscribe -np "$K" "$W/rc.sh" "$W/sig-$name.rc" "$TT" "$@" --model "$W/sig-$name.model" \
      >"$W/sig-$name.txt" 2>&1 ) &
  for _ in $(seq 1 300); do
    victim=$(rank_pid "$TT $1 .*$W/sig-$name.model" "$last_rank")
    [ -n "$victim" ] && break
    sleep 0.01
  done
  # a signal before main() installs its handler would kill the process outright (no program can do otherwise):
  # wait until the kernel says SIGTERM is caught (SigCgt bit 14), then the delay
  for _ in $(seq 1 300); do
    [ -n "$victim" ] || break
    cgt=$(awk '/^SigCgt:/ {print $2}' "/proc/$victim/status" 2>/dev/null)
    [ -n "$cgt" ] && [ $((0x$cgt & 0x4000)) -ne 0 ] && break
    sleep 0.01
  done
  sleep "$delay"
  [ -n "$victim" ] && kill -TERM "$victim"
  wait
  rcs=$(allrc "$W/sig-$name.rc")
  want=$(for ((r = 0; r < K; r++)); do printf '143 '; done)
  if [ -n "$victim" ] && [ "$rcs" = "$want" ] && grep -q 'stopped by SIGTERM' "$W/sig-$name.txt"; then
    ok "SIGTERM to rank $last_rank ($name, after ${delay} s): every rank exits 143: $(grep -m1 '^towertrain: ' "$W/sig-$name.txt" | head -c 140)"
  else
    bad "SIGTERM to rank $last_rank ($name, after ${delay} s): victim '$victim', exit codes $rcs: $(tail -c 600 "$W/sig-$name.txt")"
  fi
}
signal_case train-loading 0 train --epochs 3 --train-samples 8000 --val-samples 6000 --test-samples 10000 --batch 128 \
  --progress lines
signal_case bench 0.5 bench --epochs 1 --towers 1,2 --batch 64,128 --reps 2 --train-samples 2048 --val-samples 256 \
  --test-samples 256
signal_case probe 0.2 probe --reps 5
# probe --json F stopped by a signal during its measurements (one process: under mpirun --json is refused): F, opened
# before the measuring, is removed — a complete profile or no file, never an empty one for --assume F to read
rm -f "$W/stopped.json"
"$TT" probe --reps 30 --json "$W/stopped.json" >"$W/stopped.txt" 2>&1 &
pid=$!
for _ in $(seq 1 300); do [ -e "$W/stopped.json" ] && break; sleep 0.01; done
existed=$([ -e "$W/stopped.json" ] && echo yes || echo no)
sleep 0.3
kill -TERM $pid
wait $pid
rc=$?
if [ "$existed" = yes ] && [ $rc = 143 ] && [ ! -e "$W/stopped.json" ] && grep -q '^towertrain: probe: stopped by SIGTERM' "$W/stopped.txt"; then
  ok "probe --json stopped by SIGTERM: exit $rc, the file it had opened is gone"
else
  bad "probe --json stopped: file opened: $existed, exit $rc, left: $(ls -l "$W/stopped.json" 2>&1): $(tail -c 300 "$W/stopped.txt")"
fi

# rank 0's live bar loses its reader mid-epoch (a wide model at batch 2: an epoch outlasts the bar's 0.1 s): every
# rank exits 1 with rank 0's line, its log ends in an "error" record of kind "output" (as one process's does), not in
# a stop by "signal 0"
cat >"$W/pipe0.sh" <<'EOS'
#!/bin/bash
# rank 0's stdout into a reader that leaves at the first epoch's line; records every rank's exit code
out=$1; shift
if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then "$@" | awk '/^Epoch 1\//{exit}'; echo "${PIPESTATUS[0]}" >"$out.0"
else "$@"; echo $? >"$out.$OMPI_COMM_WORLD_RANK"; fi
EOS
chmod +x "$W/pipe0.sh"
printf 'dense units=2048 activation=relu\ndense units=2048 activation=relu\ndense units=10\n' >"$W/wide.model"
timeout 120 "$MPIRUN" --oversubscribe -np "$K" "$W/pipe0.sh" "$W/bar.rc" "$TT" train --train-samples 3000 \
  --val-samples 512 --test-samples 512 --batch "$K" --epochs 2 --progress bar --model "$W/wide.model" \
  --log-json "$W/bar.jsonl" --checkpoint-dir "$W/bar-ck" >"$W/bar.txt" 2>&1
rcs=$(allrc "$W/bar.rc")
last_record=$(tail -n 1 "$W/bar.jsonl" 2>/dev/null)
if [ "$rcs" = "$ones" ] && grep -q '^towertrain: rank 0: stdout: write failed: Broken pipe' "$W/bar.txt" &&
   echo "$last_record" | grep -q '"event":"error","kind":"output"'; then
  ok "rank 0's bar loses its reader: every rank exits 1 ($rcs), the log ends: $(echo "$last_record" | head -c 120)"
else
  bad "rank 0's bar loses its reader: exit codes $rcs, log ends '$last_record': $(tail -c 400 "$W/bar.txt")"
fi

if [ $fails -ne 0 ]; then echo "test_mpi ($K ranks): $fails failure(s)"; exit 1; fi
echo "test_mpi ($K ranks): all passed"
