#!/usr/bin/env bash
# One call on the GPU machine (NVIDIA H200) that tests and benches
# everything, run from the repository root there after scripts/device-build.sh
# here:
#   run(command="bash scripts/device-run.sh", carry=[".gl", ".devbuild/all"])
# Writes logs and JSON under $OUT. Steps are independent: one failing does
# not hide the others' results; the exit status is non-zero if any failed.
set -uo pipefail
OUT=${OUT:-/tmp/qattn-device-out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
failed=0
step() {
  local name=$1; shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  tail -n "${TAIL:-25}" "$OUT/$name.log"
  echo "== $name: exit $rc after $((SECONDS - t0)) s"
  [ $rc = 0 ] || failed=1
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv \
  >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
B=.devbuild/all
# Parity: the planner's choice, then every case forced onto the coopmat path.
step parity_vk "$B/tests/qattn_parity" --backend vulkan
step parity_vk_coopmat "$B/tests/qattn_parity" --backend vulkan --variant coopmat
# Bench: the seeds' presets, then what a user would run without qattn.
step bench_vk "$B/bench/qattn-bench" --backend vulkan --seeds --iters 50 --json "$OUT/bench_vk.json"
step torch python3 bench/torch_baseline.py --json "$OUT/torch.json"
if [ -x backend_hip/device-run-hip.sh ]; then
  step hip backend_hip/device-run-hip.sh
fi
exit $failed
