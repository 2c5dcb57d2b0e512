#!/usr/bin/env bash
# Builds, on this (build) machine, what scripts/device-run.sh runs on the GPU
# machine, from a clean export of HEAD (so the device runs exactly a commit,
# never uncommitted edits): static Release binaries of qattn-bench,
# qattn_parity and the launch-free planner tests with the Vulkan backend in
# .devbuild/all, and the HIP backend's NVIDIA twin in .devbuild/hipbin
# (both git-ignored; pass them to the device call with carry). The GPU
# machine has no glslang, so shaders are compiled here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
top=$(pwd)
rm -rf .devbuild/src .devbuild/all .devbuild/hipbin
mkdir -p .devbuild/src
git archive HEAD | tar -x -C .devbuild/src
git rev-parse HEAD >.devbuild/src/COMMIT
scripts/toolchain.sh bash -c "
  set -euo pipefail
  cmake -S $top/.devbuild/src -B $top/.devbuild/all -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF -DQATTN_VULKAN=ON -DQATTN_HIP=OFF >/dev/null
  cmake --build $top/.devbuild/all -j \$(nproc) \
        --target qattn-bench qattn_parity qattn_big_cache qattn_vk_fragments test_plan_decode test_plan_mqa_logits qattn_vk_stats test_vk_embed \
                 qattn_mqa_tune test_vk_contexts test_vk_hardening qattn_bad_inputs
  # cmocka is a shared library: it travels with the tests.
  mkdir -p $top/.devbuild/all/lib
  cp -L \$(ldd $top/.devbuild/all/tests/test_plan_decode | awk '/libcmocka/ {print \$3}') $top/.devbuild/all/lib/"
cp .devbuild/src/COMMIT .devbuild/all/COMMIT
# The HIP twin needs nvcc on this machine; without it the device run skips HIP.
if [ -x "${CUDA:-/usr/local/cuda}/bin/nvcc" ]; then
  (cd .devbuild/src && bash backend_hip/device-build-hip.sh >/dev/null && mv .devbuild/hipbin "$top/.devbuild/hipbin")
else
  echo "no nvcc: the HIP twin is not built"
fi
# The GPU machine has glibc 2.39: refuse binaries that need newer symbols.
for b in .devbuild/all/bench/qattn-bench .devbuild/all/tests/qattn_parity .devbuild/all/tests/qattn_big_cache \
         .devbuild/all/tests/test_plan_* .devbuild/all/tests/test_vk_embed .devbuild/all/tests/test_vk_contexts \
         .devbuild/all/tests/test_vk_hardening .devbuild/all/tests/qattn_bad_inputs .devbuild/all/tests/qattn_vk_fragments \
         $(find .devbuild/hipbin -maxdepth 1 -type f 2>/dev/null) $(ls .devbuild/hipbin/lib/* 2>/dev/null); do
  need=$(objdump -T "$b" | grep -o "GLIBC_2\.[0-9]*" | sort -t. -k2 -n | tail -1)
  echo "$b needs $need"
  case $need in GLIBC_2.39|GLIBC_2.[0-3][0-9]|GLIBC_2.[0-9]) ;; *) echo "too new for the GPU machine"; exit 1;; esac
done
