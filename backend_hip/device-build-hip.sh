#!/usr/bin/env bash
# Builds, on this (build) machine, what backend_hip/device-run-hip.sh runs on
# the GPU machine (an NVIDIA H200): the HIP backend on its NVIDIA platform
# (kernels by nvcc, host side against the CUDA runtime), statically linked
# into qattn_parity, qattn_big_cache, qattn_hip_twin_plans, qattn_hip_graph, qattn_hip_kv_store_axes and
# qattn-bench, copied to
# .devbuild/hipbin (git-ignored; pass it to the device call with carry).
# Needs nvcc (CUDA 13 here: /usr/local/cuda); the cmocka tests are left out
# when the host has no cmocka. Runs on the host, not in the Debian 13 root,
# which has no CUDA.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CUDA=${CUDA:-/usr/local/cuda}
cmake -S . -B .devbuild/hip -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DQATTN_VULKAN=OFF -DQATTN_HIP=ON -DQATTN_HIP_PLATFORM=nvidia -DCUDAToolkit_ROOT="$CUDA" \
      -DQATTN_REQUIRE_CMOCKA=OFF >/dev/null
cmake --build .devbuild/hip -j "$(nproc)" --target qattn_parity qattn_big_cache qattn_hip_twin_plans qattn_hip_graph \
      qattn_hip_kv_store_axes qattn-bench
mkdir -p .devbuild/hipbin
cp .devbuild/hip/tests/qattn_parity .devbuild/hip/tests/qattn_big_cache .devbuild/hip/tests/qattn_hip_twin_plans .devbuild/hip/tests/qattn_hip_graph \
   .devbuild/hip/tests/qattn_hip_kv_store_axes \
   .devbuild/hip/bench/qattn-bench .devbuild/hipbin/
# The Python package loads shared libraries through ctypes: the same
# backend, shared, in .devbuild/hipbin/lib (real files under their sonames,
# no symlinks to carry). pytest and its dependencies as Debian packages,
# unpacked on the GPU machine only if its Python lacks pytest.
cmake -S . -B .devbuild/hipso -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
      -DQATTN_VULKAN=OFF -DQATTN_HIP=ON -DQATTN_HIP_PLATFORM=nvidia -DCUDAToolkit_ROOT="$CUDA" \
      -DQATTN_BUILD_TESTS=OFF -DQATTN_BUILD_BENCH=OFF -DQATTN_BUILD_EXAMPLES=OFF \
      -DQATTN_INSTALL_PYTHON=OFF >/dev/null
cmake --build .devbuild/hipso -j "$(nproc)" --target qattn_core qattn_hip
mkdir -p .devbuild/hipbin/lib .devbuild/hipbin/pydeps
cp -L .devbuild/hipso/core/libqattn_core.so.0.1 .devbuild/hipso/backend_hip/libqattn_hip.so.0.1 \
   .devbuild/hipbin/lib/
(cd .devbuild/hipbin/pydeps && apt-get download -q python3-pytest python3-pluggy python3-iniconfig \
   python3-packaging python3-attr python3-py >/dev/null) || echo "pytest's Debian packages not fetched"
# The GPU machine has glibc 2.39: refuse binaries that need newer symbols.
for b in $(find .devbuild/hipbin -maxdepth 1 -type f) .devbuild/hipbin/lib/*; do
  need=$(objdump -T "$b" | grep -o "GLIBC_2\.[0-9]*" | sort -t. -k2 -n | tail -1)
  echo "$b needs $need"
  case $need in GLIBC_2.39|GLIBC_2.[0-3][0-9]|GLIBC_2.[0-9]) ;; *) echo "too new for the GPU machine"; exit 1;; esac
done
