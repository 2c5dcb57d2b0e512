#!/usr/bin/env bash
# The main job: build, then run qattn-bench on the best available backend
# (HIP, then Vulkan, then the cpu reference) over the quick presets. Every
# output is checked against the cpu reference before its timing is printed.
# Extra arguments go to qattn-bench (e.g. --seeds, --backend vulkan, --json F).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec scripts/toolchain.sh bash -c '
  set -euo pipefail
  mkdir -p build
  cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DQATTN_BUILD_TESTS=OFF >build/demo.configure.log 2>&1 \
    || { cat build/demo.configure.log; exit 1; }
  cmake --build build/demo -j "$(nproc)" >/dev/null
  exec build/demo/bench/qattn-bench --backend auto "$@"' qattn-demo "$@"
