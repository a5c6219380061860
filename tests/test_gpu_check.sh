#!/usr/bin/env bash
# test_gpu_check.sh dry-run|refuses — tools/gpu-check's paths that need no GPU.
#   dry-run: --help, --dry-run (every step's command, for 1, 2 and 4 GPUs, nothing built) and bad options (exit 2).
#   refuses: a machine without a usable driver fails the check with one clear line, before building — never a skip:
#            no nvidia-smi, an nvidia-smi that cannot reach the driver, one that prints no version, a driver older
#            than CUDA 13 needs (stand-in nvidia-smi scripts); and this machine itself, where no driver answers (where
#            one does, the plain run is gpu-check's own job and is left out here: it would build and run this suite).
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

# expect CODE FRAGMENT ARGS...: gpu-check exits CODE and its output holds FRAGMENT; a failure never speaks of a skip.
expect() {
  local code=$1 fragment=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  [ "$rc" -eq "$code" ] || bad "$*: exit $rc, want $code: $(echo "$out" | tail -n 2)"
  [[ $out == *"$fragment"* ]] || bad "$*: output lacks '$fragment': $(echo "$out" | tail -n 3)"
  if [ "$code" -eq 1 ] && [[ ${out,,} == *skip* ]]; then bad "$*: a failure that speaks of a skip: $out"; fi
  last=$out
}

case ${1:-} in
  dry-run)
    expect 0 "--dry-run" "$check" --help
    [[ $last == *TT_REQUIRE_GPU=1* && $last == *580* ]] || bad "--help names neither TT_REQUIRE_GPU=1 nor 580"
    for n in 1 2 4; do
      smi=$(fake_smi 590.12.01 "$n" 0)
      expect 0 "nothing was run" env NVIDIA_SMI="$smi" "$check" --dry-run --build-dir "$tmp/b$n" --jobs 2
      for want in "-DTT_CUDA=ON" "-DTT_WERROR=ON" "TT_REQUIRE_GPU=1 ctest" "--no-tests=error" "--build-dir" \
        "$tmp/b$n/towertrain probe --device cuda" "--reduce cpu" "--reduce device" "--reduce allreduce" \
        "--reduce nccl" "--log-json"; do
        [ "$want" = "--build-dir" ] && want="cmake --build $tmp/b$n -j2"
        [[ $last == *"$want"* ]] || bad "--dry-run with $n GPUs: no '$want' in: $last"
      done
      towers=$((n >= 2 ? n : 2))
      nccl=$(echo "$last" | grep -- '--reduce nccl')
      [[ $nccl == *"--towers $n "* ]] || bad "$n GPUs: nccl should run $n towers: $nccl"
      [[ $(echo "$last" | grep -- '--reduce device') == *"--towers $towers "* ]] || bad "$n GPUs: want $towers towers"
      if [ "$n" -eq 1 ]; then
        [[ $last == *"test_backend_ops_peer"* && $last == *"-E"* ]] || bad "1 GPU: the two-GPU test is not left out"
      else
        [[ $last != *"-E"* ]] || bad "$n GPUs: a test is left out: $last"
      fi
      [ ! -e "$tmp/b$n" ] || bad "--dry-run created $tmp/b$n"
    done
    expect 0 "assume 2 GPUs" env NVIDIA_SMI="$tmp/none" "$check" --dry-run --build-dir "$tmp/b"
    expect 2 "unknown option '--bogus'" "$check" --bogus
    expect 2 "--jobs: missing value" "$check" --dry-run --jobs
    expect 2 "not a count" "$check" --dry-run --epochs 0
    expect 2 "not a count" "$check" --dry-run --jobs x
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
  *)
    echo "usage: $0 dry-run|refuses" >&2
    exit 2
    ;;
esac
[ $fail -eq 0 ] && echo "gpu-check ${1}: passed" || echo "gpu-check ${1}: failed"
exit $fail
