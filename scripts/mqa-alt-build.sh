#!/usr/bin/env bash
# Builds the MQA binaries of another commit (default: the parent of the
# branch's first MQA prefill change, i.e. the kernel before it) into
# .devbuild/mqaold, which scripts/device-run.sh checks (parity, coopmat
# forced) and times back to back with this build on the four prefill
# presets (steps mqa_ab_this, mqa_ab_alt, mqa_ab_this2). Pass the folder to
# the device call with carry, beside .devbuild/all.
#   scripts/mqa-alt-build.sh [REV]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
top=$(pwd)
rev=${1:-12bfec0}
rm -rf .devbuild/altsrc .devbuild/mqaold .devbuild/altbuild
mkdir -p .devbuild/altsrc .devbuild/mqaold
git archive "$rev" | tar -x -C .devbuild/altsrc
scripts/toolchain.sh bash -c "
  set -euo pipefail
  cmake -S $top/.devbuild/altsrc -B $top/.devbuild/altbuild -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF -DQATTN_VULKAN=ON -DQATTN_HIP=OFF >/dev/null
  cmake --build $top/.devbuild/altbuild -j \$(nproc) --target qattn-bench qattn_parity"
cp .devbuild/altbuild/bench/qattn-bench .devbuild/altbuild/tests/qattn_parity .devbuild/mqaold/
git rev-parse "$rev" >.devbuild/mqaold/COMMIT
