#!/usr/bin/env bash
# Long fuzz runs of the libFuzzer harnesses (tests/fuzz/), in the project's
# toolchain. Each harness starts from its seed corpus plus what earlier long
# runs kept (build/fuzz-long/corpus/<harness>, never the repository), and
# prints its executions and coverage; crashes land in
# build/fuzz-long/artifacts/.
#
#   scripts/fuzz-long.sh [SECONDS] [HARNESS...]   default: 600 s, every harness
#   QATTN_FUZZ_JOBS=N   harnesses run N at a time (default 2)
#   QATTN_FUZZ_UNCHECKED=1   the Vulkan harness without QATTN_CHECK_INDICES
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ "${QATTN_IN_TOOLCHAIN:-}" != 1 ]; then
  QATTN_IN_TOOLCHAIN=1 exec scripts/toolchain.sh env QATTN_IN_TOOLCHAIN=1 "$0" "$@"
fi
secs=${1:-600}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(fuzz_validate fuzz_plan fuzz_ops_cpu fuzz_ops_vulkan)
lvp=$(ls /usr/share/vulkan/icd.d/lvp_icd*.json 2>/dev/null | head -1 || true)
[ -n "$lvp" ] && export VK_DRIVER_FILES=$lvp VK_ICD_FILENAMES=$lvp
out=build/fuzz-long
mkdir -p "$out/artifacts" "$out/logs"
cmake -S . -B build/fuzz -G Ninja -DCMAKE_C_COMPILER="${QATTN_FUZZ_CC:-clang-19}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQATTN_FUZZ=ON -DQATTN_HIP=OFF -DQATTN_BUILD_BENCH=OFF >/dev/null
cmake --build build/fuzz -j "$(nproc)" --target qattn_fuzzers
run_one() {
  local h=$1
  mkdir -p "$out/corpus/$h"
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "build/fuzz/tests/$h" -max_total_time="$secs" -timeout=120 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$out/artifacts/$h-" \
    "$out/corpus/$h" "tests/fuzz/corpus/$h" >"$out/logs/$h.log" 2>&1
}
status=0
pids=()
names=()
for h in "${harnesses[@]}"; do
  run_one "$h" &
  pids+=($!)
  names+=("$h")
  while [ "$(jobs -rp | wc -l)" -ge "${QATTN_FUZZ_JOBS:-2}" ]; do sleep 1; done
done
printf '%-18s %-6s %14s %10s %s\n' harness result executions cov corpus
for i in "${!pids[@]}"; do
  h=${names[$i]}
  if wait "${pids[$i]}"; then r=ok; else r=FAIL; status=1; fi
  log="$out/logs/$h.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: //p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  corp=$(ls "$out/corpus/$h" | wc -l)
  printf '%-18s %-6s %14s %10s %s\n' "$h" "$r" "${execs:-?}" "${cov:-?}" "$corp"
  [ $r = ok ] || tail -40 "$log"
done
exit $status
