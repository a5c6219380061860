#!/usr/bin/env bash
# fuzz.sh [seconds] — build the libFuzzer targets of tests/fuzz/ with clang into build-fuzz/ and run each one for a
# bounded time (default 60 s each) on a COPY of its seed corpus, so the repository is never written to.
#   fuzz_idx    the IDX reader (images and labels, gzip and plain, from memory) and the input layer under it
#   fuzz_model  the model-file parser (tt_model_parse)
#   fuzz_npy    the .npy reader (samples and labels) and the CIFAR-10 batch reader, from memory
#   fuzz_checkpoint  the checkpoint reader (tt_checkpoint_parse: safetensors header, metadata, tensors), from memory
#   fuzz_profile     the measured profile's reader (tt_profile_parse: probe --json's object, --assume FILE), from memory
# Prints each target's total executions; exits non-zero if any target crashed (a sanitizer report, a failed
# TT_ASSERT, a timeout of -timeout=10 s per input, or more than -rss_limit_mb=2048 MB), printing the path of the
# crashing input. The seed corpus is replayed first, so it is also a regression test.
#
# Turning a crash into a regression input: fix the bug, then copy the crashing file into the target's corpus,
#   cp build-fuzz/artifacts/idx/crash-<sha1> tests/fuzz/corpus/idx/<a-name-saying-what-it-tests>
# It is then replayed by every fuzz run and, without clang, by the CTest tests fuzz_replay_idx / fuzz_replay_model /
# fuzz_replay_npy / fuzz_replay_checkpoint / fuzz_replay_profile (tests/fuzz/replay.c). Reproduce one input with: build-fuzz/fuzz_idx FILE.
# TT_FUZZ_TARGETS="checkpoint" (a space-separated list) builds and runs only those targets; TT_FUZZ_JOBS=N runs N at a
# time (default: the processors, each fuzzer one process on one core). See docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
case $seconds in
  '' | *[!0-9]* | 0) echo "fuzz.sh: seconds must be a positive integer, got '$seconds'" >&2; exit 2 ;;
esac
if ! command -v clang >/dev/null; then
  echo "fuzz.sh: clang not found (apt-get install clang libclang-rt-14-dev, or run tools/install-deps.sh)" >&2
  exit 1
fi

out=build-fuzz
mkdir -p "$out"
cflags=(-g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -Itests/fuzz -fsanitize=fuzzer,address,undefined
        -fno-sanitize-recover=all -fno-omit-frame-pointer -Wall -Wextra -Wshadow -Wstrict-prototypes
        -Wmissing-prototypes -Wno-unused-parameter -Werror)
# what the readers link against: common.c (errors, allocation; it names signals in exit codes), mem.c (input.c
# checks available memory before growing a buffer), out.c (input.c notes each input there, so no output can be one)
# node.c: one rank (no MPI here)
base_src=(src/core/common.c src/core/signal.c src/core/out.c src/dev/mem.c src/core/node.c)
# idx.c also makes data sets of its files (dataset.c frees them)
idx_src=(tests/fuzz/fuzz_idx.c src/data/idx.c src/data/dataset.c src/data/input.c "${base_src[@]}")
# the model parser reaches every layer kind's setup and tables (src/layers/*.c), but never a device op
model_src=(tests/fuzz/fuzz_model.c src/model/model.c src/model/model_builtin.c src/model/model_file.c src/layers/*.c
           src/dev/dev.c src/data/input.c "${base_src[@]}")
# dataset.c frees data sets and finds a directory's files (the readers are above it, the --data dispatch above them)
npy_src=(tests/fuzz/fuzz_npy.c src/data/npy.c src/data/cifar10.c src/data/dataset.c src/data/input.c "${base_src[@]}")
# the checkpoint reader builds the fuzz target's model (model.c, the layer kinds) and names the optimizer's slots
# (optim.c); it parses its header with json-c and sums the data with zlib's crc32
ckpt_src=(tests/fuzz/fuzz_checkpoint.c src/model/checkpoint.c src/model/safetensors.c src/model/ckpt_metadata.c
          src/model/ckpt_options.c src/model/json.c src/model/optim.c src/model/schedule.c src/model/model.c src/model/model_builtin.c
          src/model/model_file.c src/layers/*.c src/dev/dev.c src/data/input.c "${base_src[@]}")
# the profile reader: its schema tables, the strict JSON scan and json-c, the optimizers' names
profile_src=(tests/fuzz/fuzz_profile.c src/step/profile.c src/model/json.c src/model/optim.c src/model/schedule.c src/data/input.c
             "${base_src[@]}")
if ! jsonc=$(pkg-config --cflags --libs json-c); then
  echo "fuzz.sh: json-c not found (apt-get install libjson-c-dev, or run tools/install-deps.sh)" >&2
  exit 1
fi
targets=${TT_FUZZ_TARGETS:-idx model npy checkpoint profile}
echo "=== fuzz: building $targets into $out/ with $(clang --version | head -1)"
build() { # build TARGET SOURCES... [LIBRARIES...]
  local target=$1
  shift
  clang "${cflags[@]}" "$@" -lz -lm -o "$out/fuzz_$target"
}
build_one() { # build_one TARGET
  case $1 in
    idx) build idx "${idx_src[@]}" ;;
    model) build model "${model_src[@]}" ;;
    npy) build npy "${npy_src[@]}" ;;
    # shellcheck disable=SC2086 # pkg-config's flags are separate words
    checkpoint) build checkpoint "${ckpt_src[@]}" $jsonc ;;
    # shellcheck disable=SC2086
    profile) build profile "${profile_src[@]}" $jsonc ;;
  esac
}
seen=" "
for target in $targets; do
  case $target in
    idx | model | npy | checkpoint | profile) ;;
    *) echo "fuzz.sh: unknown target '$target' in TT_FUZZ_TARGETS (idx, model, npy, checkpoint, profile)" >&2; exit 2 ;;
  esac
  case $seen in
    *" $target "*) echo "fuzz.sh: target '$target' is named twice in TT_FUZZ_TARGETS" >&2; exit 2 ;;
  esac
  seen="$seen$target "
done
# $jobs targets at a time (TT_FUZZ_JOBS, default: the processors), builds and runs alike: each fuzzer is one process
# on one core, so on 2 cores two of them take the time of one
jobs=${TT_FUZZ_JOBS:-$(nproc)}
case $jobs in
  '' | *[!0-9]* | 0) echo "fuzz.sh: TT_FUZZ_JOBS must be a positive integer, got '$jobs'" >&2; exit 2 ;;
esac
# each_target FUNCTION: FUNCTION TARGET for every target, $jobs at once; fails if any of them failed. The functions run
# as jobs of a function called in a condition, where bash ignores set -e: each checks its own steps.
each_target() {
  local fn=$1 t pids=() rc=0
  for t in $targets; do
    "$fn" "$t" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}" || rc=1; pids=("${pids[@]:1}"); fi
  done
  for t in "${pids[@]}"; do wait "$t" || rc=1; done
  return $rc
}
build_checked() { build_one "$1" || { echo "fuzz.sh: fuzz_$1 did not build (see above)" >&2; return 1; }; }
each_target build_checked || exit 1

fuzz_one() { # fuzz_one TARGET: its summary in $out/fuzz_TARGET.summary, printed in target order afterwards
  local target=$1 corpus=$out/corpus/$1 artifacts=$out/artifacts/$1 log=$out/fuzz_$1.log rc=0 runs crashes c
  local summary=$out/fuzz_$1.summary
  # the copy of the seeds must be whole: a fuzzer on an empty or partial corpus would skip the regression inputs
  if ! { rm -rf "$corpus" "$artifacts" && mkdir -p "$corpus" "$artifacts" &&
         [ -n "$(ls -A "tests/fuzz/corpus/$target" 2>/dev/null)" ] && cp tests/fuzz/corpus/"$target"/* "$corpus/"; }; then
    echo "fuzz_$target: FAILED: could not copy the seeds of tests/fuzz/corpus/$target into $corpus" >"$summary"
    return 1
  fi
  echo "=== fuzz_$target: ${seconds} s on a copy of tests/fuzz/corpus/$target ($(ls "$corpus" | wc -l) seeds)" >"$summary"
  "$out/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "fuzz_$target: ${runs:-?} executions, corpus now $(ls "$corpus" | wc -l) inputs, exit $rc (log: $log)" >>"$summary"
  crashes=$(find "$artifacts" -type f | sort)
  if [ "$rc" -ne 0 ] || [ -n "$crashes" ]; then
    tail -n 40 "$log" >>"$summary"
    for c in $crashes; do echo "fuzz_$target: CRASHING INPUT: $c (reproduce: $out/fuzz_$target $c)" >>"$summary"; done
    return 1
  fi
}
echo "=== fuzz: $(echo $targets | wc -w) targets, $jobs at a time"
failed=0
each_target fuzz_one || failed=1
for target in $targets; do cat "$out/fuzz_$target.summary"; done
if [ "$failed" -ne 0 ]; then
  echo "fuzz.sh: a fuzzer failed (see above); a crash: fix it, then copy the input into tests/fuzz/corpus/<target>/"
  exit 1
fi
echo "fuzz.sh: no crashes"
