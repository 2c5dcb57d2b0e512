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
  timeout "$limit" "$@" >"$OUT/hip_step.log" 2>&1
  local rc=$?
  tail -n "${TAIL:-12}" "$OUT/hip_step.log"
  echo "== hip $name: exit $rc after $((SECONDS - t0)) s"
  # one log and one JSON file come back, filled as steps finish (a call cut
  # short still returns what ran)
  { echo "== hip $name: $* (exit $rc)"; cat "$OUT/hip_step.log"; } >>"$OUT/hip_all.log.txt"
  rm -f "$OUT/hip_step.log"
  [ $rc = 0 ] || failed=1
}
step parity "${PARITY_LIMIT:-120}" "$B/qattn_parity" --backend hip
# the tiled decode pinned to simt: the same tiles without the wmma products,
# so a matrix-path failure above is told apart from a tiling one
step parity_simt 60 "$B/qattn_parity" --backend hip --op decode --variant simt
step twin 60 "$B/qattn_hip_twin_plans"
# the tiled matrix kernels where AUTO plans regs (8-bit caches of D 64 / 128),
# the generic (D, Dv) and e5m2 kernels included
step parity_matrix 60 "$B/qattn_parity" --backend hip --op decode --variant matrix
# the KV store over the formats, bf16/f16 sources and head dims, bit-exact
step kv_store_axes 30 "$B/qattn_hip_kv_store_axes"
# decode + KV store + MQA captured in a CUDA graph on the caller's stream
step graph 60 "$B/qattn_hip_graph"
step bench_quick 60 "$B/qattn-bench" --backend hip --iters 20 --json "$OUT/hip_bench_quick.json"
# The seeds' presets one by one, so a slow one costs only its own limit.
for p in $("$B/qattn-bench" --list | awk '$3 == "seed" {print $1}'); do
  step "seed_$p" "${SEED_LIMIT:-45}" "$B/qattn-bench" --backend hip --preset "$p" \
    --iters "${SEEDS_ITERS:-10}" --warmup 2 --json "$OUT/hip_seed.json"
  cat "$OUT/hip_seed.json" >>"$OUT/hip_seeds.jsons.txt" 2>/dev/null
  rm -f "$OUT/hip_seed.json"
done
exit $failed
