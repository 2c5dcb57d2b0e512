#!/usr/bin/env bash
# On the GPU machine (NVIDIA H200), after backend_hip/device-build-hip.sh
# here and with .devbuild/hipbin carried: the HIP backend's parity suite,
# the AMD-planned twins and the bench presets, through the HIP backend's
# NVIDIA platform. Every number this prints is an NVIDIA H200 measurement
# of the portable kernels, never an AMD one. Logs and JSON go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/qattn-hip-out}
B=${QATTN_HIP_BIN:-.devbuild/hipbin}
mkdir -p "$OUT"
if [ ! -x "$B/qattn_parity" ]; then
  echo "hip: $B/qattn_parity missing: run backend_hip/device-build-hip.sh and carry .devbuild/hipbin"
  exit 1
fi
failed=0
step() {
  local name=$1 limit=$2; shift 2
  echo "== hip $name: $*"
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/hip_$name.log" 2>&1
  local rc=$?
  tail -n "${TAIL:-12}" "$OUT/hip_$name.log"
  echo "== hip $name: exit $rc after $((SECONDS - t0)) s"
  [ $rc = 0 ] || failed=1
}
step parity 150 "$B/qattn_parity" --backend hip
step twin 60 "$B/qattn_hip_twin_plans"
step bench_quick 60 "$B/qattn-bench" --backend hip --iters 20 --json "$OUT/hip_bench_quick.json"
step bench_seeds "${SEEDS_LIMIT:-150}" "$B/qattn-bench" --backend hip --seeds --iters "${SEEDS_ITERS:-10}" \
  --warmup 2 --json "$OUT/hip_bench_seeds.json"
exit $failed
