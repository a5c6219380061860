#!/usr/bin/env bash
# install-deps.sh — the Debian packages towertrain needs to build, test and train (idempotent).
# The CUDA toolkit is not a Debian package here: if /usr/local/cuda/bin/nvcc exists, the CUDA backend is built too.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PKGS="build-essential cmake pkg-config python3 check libopenblas-dev zlib1g-dev libjson-c-dev dataset-fashion-mnist gnuplot-nox jq"
PKGS="$PKGS libprotobuf-c-dev protobuf-c-compiler" # TensorBoard event files: protobuf-c packs their Event messages
PKGS="$PKGS tmux" # tests/test_live_view.sh drives --progress towers in a real terminal
PKGS="$PKGS python3-numpy" # tests/test_from_keras.sh writes Keras-format files (pickles, .npz) with real numpy
PKGS="$PKGS clang libclang-rt-14-dev" # clang and its runtime libraries: libFuzzer for tools/fuzz.sh
PKGS="$PKGS openmpi-bin libopenmpi-dev" # Open MPI: jobs of several ranks (mpirun -np K; docs/scaleout.md) and their tests
# word lists in /usr/share/dict: tools/make-langid builds a language-identification data set from them
PKGS="$PKGS wamerican wngerman wfrench wspanish witalian wdutch wportuguese wswedish wdanish wnorwegian wpolish wcatalan"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install-deps: installing$missing"
  $SUDO apt-get update
  # shellcheck disable=SC2086
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=300 $missing
else
  echo "install-deps: all packages present"
fi
