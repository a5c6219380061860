#!/usr/bin/env bash
# test.sh — install what is needed, then build and run every test in these configurations:
#   build/       the default build (CUDA backend too when nvcc is installed), warnings as errors
#   build-cpu/   CPU backend only, warnings as errors
#   build-asan/  CPU backend only, AddressSanitizer + UBSan (any report fails the test)
#   build-tsan/  CPU backend only, ThreadSanitizer: the tower, placement and phase suites (a race fails the test)
# then fuzz the file readers for a bounded time (tools/fuzz.sh: clang + libFuzzer into build-fuzz/, 60 s a target).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
jobs=$(nproc)
run() {
  local dir=$1; shift
  echo "=== $dir: cmake $*"
  cmake -S . -B "$dir" -DTT_WERROR=ON "$@" >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
  cmake --build "$dir" -j"$jobs"
  (cd "$dir" && ctest --output-on-failure)
}
mkdir -p build build-cpu build-asan
run build -DCMAKE_BUILD_TYPE=Release -DTT_CUDA=AUTO
run build-cpu -DCMAKE_BUILD_TYPE=Release -DTT_CUDA=OFF
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  run build-asan -DCMAKE_BUILD_TYPE=Debug -DTT_CUDA=OFF -DTT_SANITIZE=ON
# ThreadSanitizer: the suites that run the crew, every placement, halts and stop requests. setarch -R turns off
# address-space randomisation, which some kernels' mappings make TSan refuse.
echo "=== build-tsan: cmake -DTT_TSAN=ON (test_towers, test_faults, test_phases)"
mkdir -p build-tsan
cmake -S . -B build-tsan -DTT_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTT_CUDA=OFF -DTT_TSAN=ON \
  >build-tsan/configure.log 2>&1 || { cat build-tsan/configure.log; exit 1; }
cmake --build build-tsan -j"$jobs" --target test_towers test_faults test_phases
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1 setarch "$(uname -m)" -R ctest --output-on-failure \
  -R '^test_(towers|faults|phases)$')
tools/fuzz.sh
echo "test.sh: all configurations and the fuzzers passed"
