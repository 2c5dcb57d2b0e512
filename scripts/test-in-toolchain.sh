#!/usr/bin/env bash
# Body of scripts/test.sh; expects the project's toolchain on PATH.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
full=0
[ "${1:-}" = --full ] && full=1
jobs=$(nproc 2>/dev/null || echo 2)

# Only lavapipe: CI has no GPU, and a developer's GPU must not change what
# the default suite means. The parity tests enable the validation layer.
lvp=$(ls /usr/share/vulkan/icd.d/lvp_icd*.json 2>/dev/null | head -1 || true)
[ -n "$lvp" ] && export VK_DRIVER_FILES=$lvp VK_ICD_FILENAMES=$lvp

echo "== build (release, every backend this toolchain can build)"
mkdir -p build
cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >build/test.configure.log 2>&1 \
  || { cat build/test.configure.log; exit 1; }
grep -E '^-- qattn' build/test.configure.log || true
cmake --build build/test -j "$jobs"

echo "== tests"
labels_excluded='full|pending'
[ $full = 1 ] && labels_excluded='pending'
ctest --test-dir build/test --output-on-failure -j "$jobs" -LE "$labels_excluded"

echo "== Python package: installed by cmake --install, pytest on cpu and Vulkan (lavapipe)"
if ! python3 -c 'import numpy, pytest' 2>/dev/null; then
  # the Debian 13 root lists them; a host with every other tool may lack them
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -q python3-numpy python3-pytest >/dev/null
  else
    echo "python3-numpy and python3-pytest are needed (apt-get install python3-numpy python3-pytest)"; exit 1
  fi
fi
rm -rf build/py-prefix
cmake --install build/test --prefix "$PWD/build/py-prefix" >/dev/null
pysite=$PWD/build/py-prefix/$(sed -n 's/^QATTN_PYTHON_INSTALL_DIR:STRING=//p' build/test/CMakeCache.txt)
PYTHONPATH=$pysite python3 -m qattn
# torch: Debian's CPU build, which the Debian 13 root lists, so there the torch
# tests (CPU tensors through the cpu backend, opcheck, torch.compile) must run
pyreq=cpu,vulkan
[ "${QATTN_IN_TOOLROOT:-}" = 1 ] && pyreq=$pyreq,torch
PYTHONPATH=$pysite PYTHONDONTWRITEBYTECODE=1 QATTN_PYTEST_REQUIRE=$pyreq \
  python3 -m pytest -p no:cacheprovider -rs python/tests
# the README's Python block, as a user pastes it
sed -n '/^## Python/,/^## Status/p' README.md | sed -n '/^```python$/,/^```$/p' | sed '1d;$d' >build/readme.py
PYTHONPATH=$pysite python3 build/readme.py && echo "the README's Python block ran"
# bench/perf_table.py: the table and the --plot picture of the latest committed run
# (matplotlib: Debian's, in the Debian 13 root)
run=docs/runs/h200-s5-4
python3 bench/perf_table.py $run/bench_vk.json $run/torch.json >/dev/null
if [ "${QATTN_IN_TOOLROOT:-}" = 1 ] || python3 -c 'import matplotlib' 2>/dev/null; then
  python3 bench/perf_table.py $run/bench_vk.json $run/torch.json --hip $run/bench_hip.json \
    --plot build/perf_plot.png
  [ "$(head -c 4 build/perf_plot.png | tail -c 3)" = PNG ] || { echo "perf_table --plot wrote no PNG"; exit 1; }
fi

echo "== core and cpu-backend tests under -fsanitize=address,undefined"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DQATTN_SANITIZE=ON \
  -DQATTN_VULKAN=OFF -DQATTN_HIP=OFF -DQATTN_BUILD_BENCH=OFF >/dev/null
cmake --build build/asan -j "$jobs"
# halt_on_error + -fno-sanitize-recover: any report fails its test.
ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs" -L 'core|ref' -LE 'full|consumer'

# libFuzzer harnesses (tests/fuzz/): each runs QATTN_FUZZ_SECONDS (default 60)
# from the seed corpus; four harnesses on 2 cores take about 2-3 minutes plus
# the build. scripts/fuzz-long.sh runs them longer.
echo "== fuzz smoke (libFuzzer + ASan/UBSan, ${QATTN_FUZZ_SECONDS:-60} s per harness)"
cmake -S . -B build/fuzz -G Ninja -DCMAKE_C_COMPILER="${QATTN_FUZZ_CC:-clang-19}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQATTN_FUZZ=ON -DQATTN_HIP=OFF -DQATTN_BUILD_BENCH=OFF \
  -DQATTN_FUZZ_SECONDS="${QATTN_FUZZ_SECONDS:-60}" >build/fuzz.configure.log 2>&1 \
  || { cat build/fuzz.configure.log; exit 1; }
cmake --build build/fuzz -j "$jobs" --target qattn_fuzzers
ctest --test-dir build/fuzz --output-on-failure -j "$jobs" -L fuzz
