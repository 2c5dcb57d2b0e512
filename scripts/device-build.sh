#!/usr/bin/env bash
# Builds, on this (build) machine, what scripts/device-run.sh runs on the GPU
# machine: static Release binaries of qattn-bench and qattn_parity with the
# Vulkan backend, in .devbuild/all (git-ignored; pass it to the device call
# with carry). The GPU machine has no glslang, so shaders are compiled here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec scripts/toolchain.sh bash -c '
  set -euo pipefail
  cmake -S . -B .devbuild/all -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DQATTN_VULKAN=ON -DQATTN_HIP=OFF >/dev/null
  cmake --build .devbuild/all -j "$(nproc)" --target qattn-bench qattn_parity
  # The GPU machine has glibc 2.39: refuse binaries that need newer symbols.
  for b in .devbuild/all/bench/qattn-bench .devbuild/all/tests/qattn_parity; do
    need=$(objdump -T "$b" | grep -o "GLIBC_2\.[0-9]*" | sort -t. -k2 -n | tail -1)
    echo "$b needs $need"
    case $need in GLIBC_2.39|GLIBC_2.[0-3][0-9]|GLIBC_2.[0-9]) ;; *) echo "too new for the GPU machine"; exit 1;; esac
  done'
