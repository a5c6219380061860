#!/usr/bin/env bash
# test.sh — install what is needed, then build and run every test in these configurations:
#   build/       the default build (CUDA backend too when nvcc is installed), warnings as errors: every test
#   build-asan/  CPU backend only, AddressSanitizer + UBSan (any report fails the test), warnings as errors: every test
#                that runs the project's C code (label tools left out)
#   build-sim/   the CUDA backend on the CPU stand-in (cuda/sim/), AddressSanitizer + UBSan: the CUDA suites
#   build-tsan/  CPU backend only, ThreadSanitizer: the tower, placement and phase suites (a race fails the test)
# after the house rules (tools/house-rules), then fuzz the file readers for a bounded time (tools/fuzz.sh: clang +
# libFuzzer into build-fuzz/, 20 s a target here, two at a time on 2 cores; its default, 60 s, by hand).
# The CPU-only build is build-asan/ (and build-tsan/): the code without the CUDA backend compiles there with warnings
# as errors, and the suites whose behaviour depends on the backends a build has (--device auto and cuda, the exit
# codes, a run end to end) run there. Each rank count of the MPI test runs once: 2 ranks in the default build, 3
# (uneven slices) under ASan.
set -euo pipefail
cd "$(dirname "$0")/.."
# The house rules first (docs/architecture.md): the floors, private headers, function and file lengths — seconds,
# and a breach fails the script before anything is built.
tools/house-rules
tools/install-deps.sh
jobs=$(nproc)
# CTest runs one suite more than there are processors: several suites mostly wait (MPI's start-up and teardown, the
# live view's sleeping towers, tmux, signals' grace periods), and the rest hold on a loaded machine (tt_test_prompt).
# Measured on 2 cores, the default build's suites: 156 s wall with -j2, 119 s with -j3.
ctest_jobs=$((jobs + 1))
# Each stage's time goes to the log (the README's target: the whole script within 12 minutes on 2 cores). The suites
# run in parallel, the longest first (their COST, tests/CMakeLists.txt): each owns its temporary directory, the CPU
# backend runs one BLAS thread per tower, and every timeout is for hangs on a loaded machine.
stage_start=$(date +%s)
stage_done() { echo "=== $1: $(( $(date +%s) - stage_start )) s"; stage_start=$(date +%s); }
run() { # run DIR [CTEST_ARGS...] -- CMAKE_ARGS...
  local dir=$1 only=()
  shift
  while [ "$1" != -- ]; do only+=("$1"); shift; done
  shift
  echo "=== $dir: cmake $*"
  mkdir -p "$dir"
  cmake -S . -B "$dir" -DTT_WERROR=ON "$@" >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
  cmake --build "$dir" -j"$jobs"
  (cd "$dir" && ctest --output-on-failure -j"$ctest_jobs" "${only[@]}")
  stage_done "$dir"
}
# The default build compiles the CUDA backend (when nvcc is there) for Turing and Hopper only: the oldest
# architecture nvcc 13 builds and the GPU machines' (the source is the same for all; the full list is the CMake
# default, and tools/gpu-bundle builds sm_90)
run build -E '^test_mpi_np3$' -- -DCMAKE_BUILD_TYPE=Release -DTT_CUDA=AUTO -DCMAKE_CUDA_ARCHITECTURES="75-real;90-real"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  run build-asan -E '^test_mpi_np2$' -LE '^tools$' -- -DCMAKE_BUILD_TYPE=Debug -DTT_CUDA=OFF -DTT_SANITIZE=ON
# The CUDA backend on the CPU stand-in (cuda/sim/), AddressSanitizer + UBSan: cuda/dev_cuda.cu's kernels, copies,
# streams, events and collectives executed on this machine, every op against the CPU backend, training under every
# placement with 1-3 devices, reversed and shuffled block order and a capped grid (the tests labelled sim). The backend
# is a shared library here, as tools/gpu-bundle builds it for a GPU machine: the sim tests include that bundle's checks
# (tests/test_gpu_bundle.sh: its libraries under ldd, and tools/gpu-check --bundle's whole run in small sizes).
echo "=== build-sim: cmake -DTT_CUDA_SIM=ON -DTT_SANITIZE=ON -DTT_CUDA_SHARED=ON (the CUDA suites on the CPU stand-in)"
mkdir -p build-sim
cmake -S . -B build-sim -DTT_WERROR=ON -DCMAKE_BUILD_TYPE=Debug -DTT_CUDA_SIM=ON -DTT_SANITIZE=ON -DTT_CUDA_SHARED=ON \
  >build-sim/configure.log 2>&1 || { cat build-sim/configure.log; exit 1; }
cmake --build build-sim -j"$jobs" --target towertrain test_backend_ops test_towers test_e2e test_sim test_reference test_sync test_batchnorm \
  test_data_on test_augment
(cd build-sim && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --output-on-failure -j"$ctest_jobs" -L sim)
stage_done build-sim
# ThreadSanitizer: the suites that run the crew, every placement, halts and stop requests. setarch -R turns off
# address-space randomisation, which some kernels' mappings make TSan refuse.
echo "=== build-tsan: cmake -DTT_TSAN=ON (test_towers, test_faults, test_phases, test_sync, test_batchnorm, test_precision)"
mkdir -p build-tsan
cmake -S . -B build-tsan -DTT_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTT_CUDA=OFF -DTT_TSAN=ON \
  >build-tsan/configure.log 2>&1 || { cat build-tsan/configure.log; exit 1; }
cmake --build build-tsan -j"$jobs" --target towertrain test_towers test_faults test_phases test_sync test_batchnorm \
  test_precision
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1 setarch "$(uname -m)" -R ctest --output-on-failure -j"$ctest_jobs" \
  -R '^test_(towers|faults|phases|sync|batchnorm|precision)$')
stage_done build-tsan
tools/fuzz.sh 20
stage_done fuzz
echo "test.sh: all configurations and the fuzzers passed"
