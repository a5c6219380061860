#!/usr/bin/env bash
# test_gpu_check.sh dry-run|refuses|steps — tools/gpu-check's paths that need no GPU.
#   dry-run: --help, --dry-run (every step's command, for 1, 2 and 4 GPUs, nothing built: the install-deps step, the
#            sanitizer's runs with a stand-in compute-sanitizer, the one 'not run' line without one) and bad options
#            (exit 2).
#   refuses: a machine without a usable driver fails the check with one clear line, before building — never a skip:
#            no nvidia-smi, an nvidia-smi that cannot reach the driver, one that prints no version, a driver older
#            than CUDA 13 needs (stand-in nvidia-smi scripts); and this machine itself, where no driver answers (where
#            one does, the plain run is gpu-check's own job and is left out here: it would build and run this suite).
#   steps:   the steps after the driver that need no GPU themselves, run for real on stand-ins (GPU_CHECK_STEPS, the
#            script's test hook, runs step 1 with a stand-in nvidia-smi and only the steps named): a failing
#            install-deps fails; the suite's skips told apart on a stand-in build directory (a CTestTestfile.cmake of
#            stand-in tests) — a missing package is a WARNING with its reason, a skipped CUDA suite, a skip that speaks
#            of a GPU and a skip without a reason fail, as does a failed test; the sanitizer's runs with a stand-in
#            compute-sanitizer — all clean passes, a report (its --error-exitcode) or a test failing under it fails,
#            and no compute-sanitizer is one 'not run' line, not a failure. Steps 3 and 6 need nvcc and a GPU.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=$root/tools/gpu-check
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() {
  echo "FAIL: $*"
  fail=1
}

# A stand-in nvidia-smi: $1 = driver version ("" for none), $2 = number of GPUs, $3 = exit code.
fake_smi() {
  local f=$tmp/smi-$RANDOM
  cat >"$f" <<EOF
#!/bin/sh
case "\$1" in
  -L) i=0; while [ \$i -lt $2 ]; do echo "GPU \$i: Stand-in GPU (UUID: GPU-\$i)"; i=\$((i + 1)); done ;;
  *) [ -n "$1" ] || { echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."; exit $3; }
     i=0; while [ \$i -lt $2 ]; do echo "$1, Stand-in GPU"; i=\$((i + 1)); done ;;
esac
exit $3
EOF
  chmod +x "$f"
  echo "$f"
}

# expect CODE FRAGMENT ARGS...: gpu-check exits CODE and its output holds FRAGMENT; a failure never speaks of a skip
# (where a failure is about skips, skip_words=1).
skip_words=0
expect() {
  local code=$1 fragment=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  [ "$rc" -eq "$code" ] || bad "$*: exit $rc, want $code: $(echo "$out" | tail -n 2)"
  [[ $out == *"$fragment"* ]] || bad "$*: output lacks '$fragment': $(echo "$out" | tail -n 3)"
  if [ "$code" -eq 1 ] && [ $skip_words -eq 0 ] && [[ ${out,,} == *skip* ]]; then bad "$*: a failure that speaks of a skip: $out"; fi
  last=$out
}

# A stand-in compute-sanitizer: records "TT_REQUIRE_GPU=... ARGS" in $tmp/sanitizer.calls; prints a report and exits
# with its --error-exitcode where its arguments hold $SAN_REPORT, exits 1 (the test failing) where they hold $SAN_FAIL.
sanitizer=$tmp/compute-sanitizer
cat >"$sanitizer" <<'EOF'
#!/bin/bash
echo "TT_REQUIRE_GPU=${TT_REQUIRE_GPU:-} $*" >>"$(dirname "$0")/sanitizer.calls"
echo "========= COMPUTE-SANITIZER"
code=0
while [ $# -gt 0 ]; do
  [ "$1" != --error-exitcode ] || code=$2
  shift
done
args=$(tail -n 1 "$(dirname "$0")/sanitizer.calls")
if [ -n "${SAN_REPORT:-}" ] && [[ $args == *"$SAN_REPORT"* ]]; then
  echo "========= Invalid __shared__ write of size 4 bytes"
  echo "========= ERROR SUMMARY: 1 error"
  exit "$code"
fi
if [ -n "${SAN_FAIL:-}" ] && [[ $args == *"$SAN_FAIL"* ]]; then
  echo "FAIL: a stand-in test failing"
  exit 1
fi
echo "========= ERROR SUMMARY: 0 errors"
EOF
chmod +x "$sanitizer"

# stand_in_suite DIR LINE...: a build directory whose CTest suite is the stand-in tests "NAME EXIT [OUTPUT]" (each a
# script that prints OUTPUT and exits EXIT; 77 is a skip, as in tests/CMakeLists.txt).
stand_in_suite() {
  local dir=$1 name code text
  shift
  rm -rf "$dir"
  mkdir -p "$dir"
  for line in "$@"; do
    read -r name code text <<<"$line"
    printf '#!/bin/sh\n[ -z "%s" ] || echo "%s"\nexit %s\n' "$text" "$text" "$code" >"$dir/$name.sh"
    chmod +x "$dir/$name.sh"
    echo "add_test($name \"$dir/$name.sh\")" >>"$dir/CTestTestfile.cmake"
    echo "set_tests_properties($name PROPERTIES SKIP_RETURN_CODE 77)" >>"$dir/CTestTestfile.cmake"
  done
}

case ${1:-} in
  dry-run)
    expect 0 "--dry-run" "$check" --help
    for want in TT_REQUIRE_GPU=1 580 install-deps.sh compute-sanitizer "memcheck --leak-check full" racecheck \
      initcheck synccheck WARNING; do
      [[ $last == *"$want"* ]] || bad "--help does not name '$want'"
    done
    for n in 1 2 4; do
      smi=$(fake_smi 590.12.01 "$n" 0)
      expect 0 "nothing was run" env NVIDIA_SMI="$smi" COMPUTE_SANITIZER="$sanitizer" \
        "$check" --dry-run --build-dir "$tmp/b$n" --jobs 2
      for want in "-DTT_CUDA=ON" "-DTT_WERROR=ON" "TT_REQUIRE_GPU=1 ctest" "--no-tests=error" "--build-dir" \
        "$tmp/b$n/towertrain probe --device cuda" "--reduce cpu" "--reduce device" "--reduce allreduce" \
        "--reduce nccl" "--log-json" "\$ tools/install-deps.sh" "--towers $n --epochs 1 --reduce cpu --graphs on" \
        "--graphs off" "probe --assume h100-pcie --batch $(((256 + n - 1) / n))"; do
        [ "$want" = "--build-dir" ] && want="cmake --build $tmp/b$n -j2"
        [[ $last == *"$want"* ]] || bad "--dry-run with $n GPUs: no '$want' in: $last"
      done
      # the steps in their order: driver, packages, build, suite, sanitizer, training
      order=$(echo "$last" | grep -o '^== [0-9]\. [a-z-]*' | tr '\n' ' ')
      [ "$order" = "== 1. driver == 2. packages == 3. build == 4. the == 5. compute-sanitizer == 6. one " ] ||
        bad "$n GPUs: the steps are not driver, packages, build, suite, sanitizer, training: $order"
      # the sanitizer's runs: memcheck over every CUDA suite (the peer copy with 2+ GPUs), the other three tools over
      # test_backend_ops only; each under TT_REQUIRE_GPU=1, with the error exit code
      runs=$(echo "$last" | grep -- "$sanitizer --tool")
      want_runs=$((n >= 2 ? 7 : 6))
      [ "$(echo "$runs" | grep -c .)" -eq "$want_runs" ] || bad "$n GPUs: want $want_runs sanitizer runs: $runs"
      ops=$tmp/b$n/tests/test_backend_ops
      for want in "memcheck --leak-check full --report-api-errors no --error-exitcode 99 $ops" "racecheck --error-exitcode 99 $ops" \
        "initcheck --error-exitcode 99 $ops" "synccheck --error-exitcode 99 $ops" \
        "memcheck --leak-check full --report-api-errors no --error-exitcode 99 $tmp/b$n/tests/test_towers cuda" \
        "memcheck --leak-check full --report-api-errors no --error-exitcode 99 $tmp/b$n/tests/test_e2e cuda"; do
        want="  \$ env TT_REQUIRE_GPU=1 timeout --kill-after=30 1800 $sanitizer --tool $want"
        [ "$(echo "$runs" | grep -c -F -x -- "$want")" -eq 1 ] || bad "$n GPUs: not one '$want' in: $runs"
      done
      peer=$(echo "$runs" | grep -c -- "--two-devices cuda" || true)
      [ "$peer" -eq $((n >= 2 ? 1 : 0)) ] || bad "$n GPUs: test_backend_ops_peer under memcheck $peer times: $runs"
      [[ $(echo "$runs" | grep -v -- "--tool memcheck" | grep -v -c "$ops\$") -eq 0 ]] ||
        bad "$n GPUs: racecheck, initcheck or synccheck over more than test_backend_ops: $runs"
      if [ "$n" -eq 1 ]; then
        [[ $last == *"test_backend_ops_peer"* && $last == *"-E"* ]] || bad "1 GPU: the two-GPU test is not left out"
      else
        [[ $last != *"-E"* ]] || bad "$n GPUs: a test is left out: $last"
      fi
      [ ! -e "$tmp/b$n" ] || bad "--dry-run created $tmp/b$n"
    done
    # the suites' commands are tests/CMakeLists.txt's
    for cmd in "test_backend_ops --two-devices cuda" "test_towers cuda" "test_e2e cuda"; do
      grep -q "COMMAND $cmd)" "$root/tests/CMakeLists.txt" || bad "tests/CMakeLists.txt runs no '$cmd'"
    done
    grep -q '^tt_test(test_backend_ops)' "$root/tests/CMakeLists.txt" || bad "tests/CMakeLists.txt: no test_backend_ops"
    expect 0 "compute-sanitizer not run: $tmp/none not found" env NVIDIA_SMI="$smi" COMPUTE_SANITIZER="$tmp/none" \
      "$check" --dry-run --build-dir "$tmp/b"
    [[ $last != *"--tool"* ]] || bad "no compute-sanitizer, yet sanitizer runs: $last"
    [ "$(echo "$last" | grep -c 'compute-sanitizer not run')" -eq 1 ] || bad "want one 'not run' line: $last"
    expect 0 "assume 2 GPUs" env NVIDIA_SMI="$tmp/none" "$check" --dry-run --build-dir "$tmp/b"
    expect 2 "unknown option '--bogus'" "$check" --bogus
    expect 2 "--jobs: missing value" "$check" --dry-run --jobs
    expect 2 "not a count" "$check" --dry-run --epochs 0
    expect 2 "not a count" "$check" --dry-run --jobs x
    expect 2 "not a list of steps" env GPU_CHECK_STEPS=7 "$check" --dry-run
    ;;
  refuses)
    b=$tmp/build
    expect 1 "gpu-check: FAIL: $tmp/none not found: no NVIDIA driver" \
      env NVIDIA_SMI="$tmp/none" "$check" --build-dir "$b"
    smi=$(fake_smi "" 1 9)
    expect 1 "gpu-check: FAIL: $smi failed, so no driver answers: NVIDIA-SMI has failed" \
      env NVIDIA_SMI="$smi" "$check" --build-dir "$b"
    smi=$(fake_smi "" 1 0)
    expect 1 "printed no driver version" env NVIDIA_SMI="$smi" "$check" --build-dir "$b"
    smi=$(fake_smi 535.104.05 2 0)
    expect 1 "gpu-check: FAIL: NVIDIA driver 535.104.05 is older than CUDA 13.0 needs (580 or later)" \
      env NVIDIA_SMI="$smi" "$check" --build-dir "$b"
    smi=$(fake_smi 579.99 1 0)
    expect 1 "older than CUDA 13.0 needs" env NVIDIA_SMI="$smi" "$check" --build-dir "$b"
    [ ! -e "$b" ] || bad "a refused check went on to build"
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=driver_version --format=csv,noheader \
      >/dev/null 2>&1; then
      echo "note: a driver answers on this machine: the plain run is tools/gpu-check's own job, not this test's"
    else
      expect 1 "gpu-check: FAIL: " "$check" --build-dir "$b"
      [[ $last == *"nvidia-smi"* ]] || bad "the failure here does not name nvidia-smi: $last"
      echo "this machine: $(echo "$last" | grep FAIL)"
      [ ! -e "$b" ] || bad "gpu-check went on to build on a machine without a driver"
    fi
    ;;
  steps)
    smi=$(fake_smi 590.12.01 2 0)
    run=(env NVIDIA_SMI="$smi" COMPUTE_SANITIZER="$sanitizer" "$check")
    # 2. install-deps: its failure is a FAIL line naming it
    deps=$tmp/install-deps
    printf '#!/bin/sh\necho "E: Unable to locate package"\nexit 3\n' >"$deps"
    chmod +x "$deps"
    expect 1 "gpu-check: FAIL: $deps failed (exit 3)" env INSTALL_DEPS="$deps" GPU_CHECK_STEPS=2 "${run[@]}"

    # 4. the suite: skips for missing packages warn, with their reasons; the check passes
    skip_words=1
    b=$tmp/suite
    ok=("test_math 0 fine" "test_plot 77 SKIP: gnuplot or jq missing"
      "test_mpi_np2 77 SKIP: mpirun not found at configure time (install openmpi-bin)")
    stand_in_suite "$b" "${ok[@]}"
    expect 0 "gpu-check: PASS: steps 1 4 only" env GPU_CHECK_STEPS=4 "${run[@]}" --build-dir "$b"
    for want in "gpu-check: WARNING: test_plot skipped, not for want of a GPU: gnuplot or jq missing" \
      "gpu-check: WARNING: test_mpi_np2 skipped, not for want of a GPU: mpirun not found at configure time"; do
      [[ $last == *"$want"* ]] || bad "the suite's package skips: no '$want' in: $last"
    done
    [[ $last != *FAIL* ]] || bad "package skips failed the check: $last"
    # a skipped CUDA suite fails whatever its reason; so do a GPU reason elsewhere, a skip without a reason, a failure
    for extra in "test_towers_cuda 77 SKIP: /usr/share/datasets/fashion-mnist not found|test_towers_cuda (a CUDA suite)" \
      "test_new 77 SKIP: backend cuda: no CUDA-capable device is detected|test_new skipped for want of a GPU" \
      "test_quiet 77|test_quiet skipped and printed no SKIP line" \
      "test_broken 1 FAIL: it broke|the test suite failed on the GPU"; do
      stand_in_suite "$b" "${ok[@]}" "${extra%%|*}"
      expect 1 "gpu-check: FAIL: " env GPU_CHECK_STEPS=4 "${run[@]}" --build-dir "$b"
      [[ $last == *"${extra#*|}"* ]] || bad "suite with '${extra%%|*}': no '${extra#*|}' in: $last"
      [[ $last == *"WARNING: test_plot skipped"* ]] || bad "suite with '${extra%%|*}': the package skip's WARNING is gone"
    done
    skip_words=0

    # 5. the sanitizer: all runs clean pass; every run under TT_REQUIRE_GPU=1
    calls=$tmp/sanitizer.calls
    rm -f "$calls"
    expect 0 "compute-sanitizer clean (7 runs)" env GPU_CHECK_STEPS=5 "${run[@]}" --build-dir "$tmp/san"
    [ "$(grep -c '^TT_REQUIRE_GPU=1 --tool' "$calls")" -eq 7 ] || bad "want 7 runs under TT_REQUIRE_GPU=1: $(cat "$calls")"
    [ "$(grep -c ': clean (' <<<"$last")" -eq 7 ] || bad "want 7 'clean' lines: $last"
    [ -s "$tmp/san/gpu-check-sanitizer/racecheck-test_backend_ops.log" ] || bad "no log of racecheck's run"
    # a report (the stand-in exits with --error-exitcode) fails, naming the tool and the suite; the other runs go on
    rm -f "$calls"
    expect 1 "gpu-check: FAIL: 1 of 7 compute-sanitizer runs failed: compute-sanitizer racecheck reported errors in test_backend_ops" \
      env SAN_REPORT="--tool racecheck" GPU_CHECK_STEPS=5 "${run[@]}" --build-dir "$tmp/san"
    [[ $last == *"Invalid __shared__ write"* ]] || bad "the report's first lines are not shown: $last"
    [ "$(grep -c . "$calls")" -eq 7 ] || bad "a report stopped the other runs: $(cat "$calls")"
    # a test that fails under the sanitizer fails too
    expect 1 "test_towers_cuda failed under memcheck (exit 1)" \
      env SAN_FAIL="test_towers cuda" GPU_CHECK_STEPS=5 "${run[@]}" --build-dir "$tmp/san"
    # no compute-sanitizer: one line, and the check passes
    expect 0 "compute-sanitizer not run: $tmp/none not found" \
      env NVIDIA_SMI="$smi" COMPUTE_SANITIZER="$tmp/none" GPU_CHECK_STEPS=5 "$check" --build-dir "$tmp/san"
    [[ $last == *"PASS"*"compute-sanitizer not run"* ]] || bad "the PASS line does not say the sanitizer did not run: $last"
    ;;
  *)
    echo "usage: $0 dry-run|refuses|steps" >&2
    exit 2
    ;;
esac
[ $fail -eq 0 ] && echo "gpu-check ${1}: passed" || echo "gpu-check ${1}: failed"
exit $fail
