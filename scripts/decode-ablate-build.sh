#!/usr/bin/env bash
# Measurement builds of the decode kernel (docs/perf_decode_notes.md): one
# static qattn-bench per mask of stages the tiled shader leaves out
# (QATTN_DECODE_ABLATE, shaders/decode_tiled.comp), from a clean export of
# HEAD, into .devbuild/abl/<mask>/qattn-bench (git-ignored). Their outputs
# are wrong by construction (the bench says MISMATCH); only the time counts.
#   scripts/decode-ablate-build.sh [MASK ...]   (default: the set below)
# Run on the GPU machine with scripts/decode-ablate-run.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
top=$(pwd)
masks=${*:-"0 1 2 4 8 14 15 16 32 64"}
rm -rf .devbuild/abl .devbuild/ablsrc
mkdir -p .devbuild/ablsrc .devbuild/abl
git archive HEAD | tar -x -C .devbuild/ablsrc
git rev-parse HEAD >.devbuild/abl/COMMIT
for m in $masks; do
  scripts/toolchain.sh bash -c "
    set -euo pipefail
    cmake -S $top/.devbuild/ablsrc -B $top/.devbuild/ablbuild -G Ninja -DCMAKE_BUILD_TYPE=Release \
          -DBUILD_SHARED_LIBS=OFF -DQATTN_VULKAN=ON -DQATTN_HIP=OFF -DQATTN_DECODE_ABLATE=$m >/dev/null
    cmake --build $top/.devbuild/ablbuild -j \$(nproc) --target qattn-bench >/dev/null"
  mkdir -p .devbuild/abl/$m
  cp .devbuild/ablbuild/bench/qattn-bench .devbuild/abl/$m/
  echo "mask $m built"
done
