#!/usr/bin/env bash
# test_exit_codes.sh TOWERTRAIN README — the exit-code table, walked: README's "Errors, exit codes and stopping" table is
# the one source. Its codes are read from README.md; every row must have, for each command (train, bench, probe,
# compare, summary, eval, predict), a case below that gives that code with its one line on stderr — or a stated
# reason why the command cannot give it. `towertrain --help` must list the same codes. Then the cases issue 18 found
# disagreeing: a token id beyond the vocabulary in predict (a file: 1), a checkpoint of other shapes on --resume
# (1 whether a file or a directory), --device cuda and --gpus on a build without CUDA (both 1); and probe's measured
# profiles: a file that is not one is 1, a bad --assume spec 2.
# Exit 77 (a visible skip) without Fashion-MNIST (Debian's dataset-fashion-mnist), which the cases train on.
set -uo pipefail
TT=$1
README=$2
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "SKIP: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist: tools/install-deps.sh)"
  exit 77
fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
COMMANDS="train bench probe compare summary eval predict"

# ---- the table: README's rows, in order ("| 130, 143 |" is one row) ----
rows=$(sed -n '/^| exit | meaning |/,/^$/p' "$README" | sed -n 's/^| *\([0-9][0-9, ]*\) |.*/\1/p' | tr -d ' ')
[ "$(echo $rows)" = "0 1 2 3 130,143" ] && ok "README's exit-code rows: $(echo $rows)" \
  || bad "README's exit-code table has rows '$(echo $rows)', this test knows 0 1 2 3 130,143: give every new row cases"
usage=$("$TT" --help | tr '\n' ' ' | sed -n 's/.*exit codes[^:]*: \(.*\)/\1/p')
for row in $rows; do
  for code in ${row//,/ }; do
    echo "$usage" | grep -Eq "(^|[ |,])$code([ ,]|$)" || bad "towertrain --help does not list exit code $code (README does)"
  done
done

# ---- what the cases use: a small run's checkpoint, a token-id model's checkpoint and inputs ----
S=(--train-samples 512 --val-samples 256 --test-samples 256 --batch 128 --progress quiet)
"$TT" train "${S[@]}" --epochs 1 --checkpoint-dir "$W/ck" >/dev/null 2>&1 || bad "setup: a small training run failed"
CK=$(ls "$W"/ck/ckpt-*.safetensors 2>/dev/null | tail -1)
printf 'input shape=28,28,1\nflatten\ndense units=128 activation=relu\ndense units=10\n' >"$W/other.txt"
python3 - "$W" <<'EOF' || bad "setup: could not write the token-id data"
import os, random, struct, sys
def npy(path, dtype, shape, values):  # NumPy's .npy format 1.0, by hand: the tests need no NumPy
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (dtype, repr(tuple(shape)))
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    fmt = {"<i8": "q", "|u1": "B"}[dtype]
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))
w = sys.argv[1]
r = random.Random(1)
os.makedirs(w + "/tok", exist_ok=True)
for split, n in (("train", 64), ("test", 32)):
    npy(f"{w}/tok/x_{split}.npy", "<i8", (n, 8), [r.randrange(20) for _ in range(8 * n)])
    npy(f"{w}/tok/y_{split}.npy", "|u1", (n,), [r.randrange(3) for _ in range(n)])
npy(f"{w}/ids-ok.npy", "<i8", (2, 8), [r.randrange(20) for _ in range(16)])
npy(f"{w}/ids-50.npy", "<i8", (2, 8), [1, 2, 3, 50, 4, 5, 6, 7] * 2)
EOF
printf 'input shape=8\nembedding dim=4\nflatten\ndense units=3\n' >"$W/tok.txt"
"$TT" train --data "npy:$W/tok" --model "$W/tok.txt" --val-samples 16 --batch 16 --epochs 1 --progress quiet \
  --checkpoint-dir "$W/tokck" >/dev/null 2>&1 || bad "setup: the token-id model did not train"
TOKCK=$(ls "$W"/tokck/ckpt-*.safetensors 2>/dev/null | tail -1)
LONG=(--train-samples 20000 --val-samples 512 --test-samples 512 --epochs 50 --progress lines)

# ---- the cases: CODE COMMAND 'MATCH on stderr' [SIGNAL] -- ARGS ----
# A signal case starts the command, waits until its handler is installed (SigCgt in /proc), sends the signal, and
# wants the command's own "stopped by" line: a process killed by the signal would give the code without it.
run_case() {
  local code=$1 cmd=$2 match=$3 sig=$4
  shift 5
  local rc
  if [ -n "$sig" ]; then
    "$TT" "$cmd" "$@" >"$W/out" 2>"$W/err" &
    local pid=$! bit
    bit=$([ "$sig" = INT ] && echo 2 || echo 15)
    for _ in $(seq 1 200); do
      local mask
      mask=$(sed -n 's/^SigCgt:\t//p' "/proc/$pid/status" 2>/dev/null)
      [ -n "$mask" ] && (((16#$mask >> (bit - 1)) & 1)) && break
      sleep 0.01
    done
    sleep 0.05
    kill -"$sig" "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
  else
    "$TT" "$cmd" "$@" >"$W/out" 2>"$W/err"
    rc=$?
  fi
  local lines
  lines=$(grep -vc '^towertrain: notice: ' "$W/err")
  local said=0 # 0: silent; an error: its one line, with the match
  if [ "$code" = 0 ]; then [ "$lines" = 0 ] && said=1; else grep -q -- "$match" "$W/err" && [ "$lines" = 1 ] && said=1; fi
  if [ "$rc" = "$code" ] && [ $said = 1 ]; then
    ok "$code $cmd${sig:+ (SIG$sig)}: $(head -c 160 "$W/err")"
    covered="$covered $code:$cmd"
  else
    bad "$cmd $*${sig:+ (SIG$sig)}: exit $rc, wanted $code and one line with '$match': $(head -c 400 "$W/err")"
  fi
}
covered=""
c() { run_case "$@"; }

# 0: done
c 0 train '' '' -- "${S[@]}" --epochs 1
c 0 bench '' '' -- "${S[@]}" --towers 1 --epochs 1 --reps 2
c 0 probe '' '' -- --batch 128 --reps 2
c 0 compare '' '' -- "${S[@]}"
c 0 summary '' '' -- --model cnn
c 0 eval '' '' -- --checkpoint "$CK" --test-samples 256
c 0 predict '' '' -- --checkpoint "$TOKCK" --input "$W/ids-ok.npy"
# 1: a file or resource problem
c 1 train "$W/missing" '' -- "${S[@]}" --data "$W/missing"
c 1 bench "$W/missing" '' -- "${S[@]}" --data "$W/missing"
c 1 probe "$W/missing.txt" '' -- --model "$W/missing.txt"
printf '{"schema":"towertrain-probe", "version":1, "links":' >"$W/cut.json" # a measured profile cut short
c 1 probe 'cut.json: the profile is not JSON' '' -- --assume "$W/cut.json"
c 1 probe 'not a regular file (a directory)' '' -- --assume "$W/ck/"
c 1 compare "$W/missing" '' -- "${S[@]}" --data "$W/missing"
c 1 summary "$W/missing.txt" '' -- --model "$W/missing.txt"
c 1 eval "missing.safetensors" '' -- --checkpoint "$W/missing.safetensors"
c 1 predict "missing.npy" '' -- --checkpoint "$CK" --input "$W/missing.npy"
c 1 predict 'holds token id 50, the checkpoint' '' -- --checkpoint "$TOKCK" --input "$W/ids-50.npy"
c 1 eval 'the samples are 8, the checkpoint' '' -- --checkpoint "$CK" --data "npy:$W/tok"
c 1 train 'has shape (784, 256), the model has (784, 128)' '' -- "${S[@]}" --epochs 2 --model "$W/other.txt" --resume "$CK"
c 1 train 'has shape (784, 256), the model has (784, 128)' '' -- "${S[@]}" --epochs 2 --model "$W/other.txt" --resume "$W/ck"
c 1 train '--write failed\|/dev/full' '' -- "${S[@]}" --epochs 1 --log-json /dev/full
: >"$W/a-file"
c 1 train 'not a directory' '' -- "${S[@]}" --epochs 1 --checkpoint-dir "$W/a-file" # as --log-json DIR is 1
c 1 train 'Is a directory' '' -- "${S[@]}" --epochs 1 --log-json "$W/ck"
if ! "$TT" --version | grep -q '^backends: .*cuda'; then # a build without CUDA: both are a backend it lacks
  c 1 train '--device cuda: this build has no CUDA backend' '' -- "${S[@]}" --device cuda
  c 1 train '--gpus: this build has no CUDA backend' '' -- "${S[@]}" --gpus 2
fi
# 2: a bad flag or value
for cmd in $COMMANDS; do c 2 "$cmd" "--no-such-flag" '' -- --no-such-flag; done
c 2 train '--lr' '' -- "${S[@]}" --lr 0
c 2 train '--gpus' '' -- "${S[@]}" --gpus x
c 2 train "--epilogues: 'bogus' is not kernels or lt" '' -- "${S[@]}" --epilogues bogus
c 2 predict '--input FILE is required' '' -- --checkpoint "$CK"
c 2 probe "--assume: unknown profile 'v100'" '' -- --assume v100
c 2 probe '--json: given twice' '' -- --assume h200-measured --json "$W/p.json" --json "$W/q.json"
# 3: training diverged (the commands that train)
c 3 train 'is not finite' '' -- "${S[@]}" --epochs 2 --optimizer sgd --lr 1000
c 3 bench 'is not finite' '' -- "${S[@]}" --towers 1 --epochs 1 --reps 2 --optimizer sgd --lr 1000
c 3 compare 'is not finite' '' -- "${S[@]}" --optimizer sgd --lr 1000
# 130, 143: stopped by SIGINT, SIGTERM
c 130 train 'stopped by SIGINT' INT -- "${LONG[@]}"
c 143 train 'stopped by SIGTERM' TERM -- "${LONG[@]}"
c 130 bench 'stopped by SIGINT' INT -- "${LONG[@]}" --towers 1
c 143 compare 'stopped by SIGTERM' TERM -- "${LONG[@]}"
c 130 probe 'stopped by SIGINT' INT -- --reps 64 --model cnn
c 143 eval 'stopped by SIGTERM' TERM -- --checkpoint "$CK" --split val --val-samples 50000
c 130 predict 'stopped by SIGINT' INT -- --checkpoint "$CK" --input /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz

# ---- every row, every command: a case above, or why there is none ----
na() { # ROW COMMAND: the reason the command cannot give that code
  case "$1:$2" in
    3:probe) echo "probe times steps of random weights; it applies no update that could diverge" ;;
    3:summary) echo "summary builds the model and prints it; it computes nothing" ;;
    3:eval | 3:predict) echo "$2 trains nothing: a non-finite logit is reported (never counted correct), not an error" ;;
    130,143:summary) echo "summary has no loop to stop at: it prints and exits at once" ;;
    *) return 1 ;;
  esac
}
for row in $rows; do
  for cmd in $COMMANDS; do
    found=""
    for code in ${row//,/ }; do case " $covered " in *" $code:$cmd "*) found=1 ;; esac; done
    if [ -n "$found" ]; then continue; fi
    why=$(na "$row" "$cmd") && echo "n/a: $row for $cmd: $why" || bad "no case gives exit $row for $cmd"
  done
done

if [ $fails -ne 0 ]; then echo "test_exit_codes: $fails failure(s)"; exit 1; fi
echo "test_exit_codes: all passed"
