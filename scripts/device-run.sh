#!/usr/bin/env bash
# One call on the GPU machine (NVIDIA H200) that tests and benches
# everything, run from the repository root there after scripts/device-build.sh
# (and backend_hip/device-build-hip.sh) here:
#   run(command="bash scripts/device-run.sh", carry=[".gl", ".devbuild/all", ".devbuild/hipbin"])
# .devbuild/all/COMMIT names the commit the binaries were built from.
# Correctness first, in parallel (each process checks its own outputs): the
# Vulkan parity suite with the planner's choice and with every case forced
# onto the cooperative-matrix path, the 16 x 1.5M-column MQA case, and the
# HIP backend's parity suite. Then, alone on the GPU so timings are clean:
# the PyTorch baseline, qattn-bench over the seeds' presets (Vulkan, then
# the HIP twin's decode presets), and bench/perf_table.py's tables of them
# ($OUT/perf_bench_vk.md, perf_bench_hip.md). Logs and JSON go to $OUT; the
# exit status is non-zero if any step failed. When the steps' limits add up
# to more than one device call allows, run it twice with SKIP: the
# correctness steps, then "torch bench_vk bench_hip" (they must share a run).
set -uo pipefail
OUT=${OUT:-/tmp/qattn-device-out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
B=.devbuild/all
H=.devbuild/hipbin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv \
  >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
echo "binaries of commit $(cat $B/COMMIT 2>/dev/null)" | tee -a "$OUT/gpu.txt"
failed=0
# step NAME LIMIT_S CMD...: runs in the background, log in $OUT/NAME.log
# (line-buffered, so a step cut by its limit still shows how far it got).
# SKIP="name ..." leaves steps out (e.g. ones a previous run of the same
# code already covered, when device time is short).
step() {
  local name=$1 limit=$2; shift 2
  case " ${SKIP:-} " in *" $name "*) return ;; esac
  ( t0=$SECONDS; timeout "$limit" stdbuf -oL -eL "$@" >"$OUT/$name.log" 2>&1; rc=$?
    echo "$rc $((SECONDS - t0))" >"$OUT/$name.rc" ) &
}
report() {
  for name in "$@"; do
    [ -f "$OUT/$name.rc" ] || continue
    read -r rc secs <"$OUT/$name.rc"
    echo "== $name: exit $rc after $secs s"
    tail -n "${TAIL:-6}" "$OUT/$name.log"
    [ "$rc" = 0 ] || failed=1
  done
}
# The GPU machine has no Vulkan validation layers: --no-validation there.
step parity_vk 150 "$B/tests/qattn_parity" --backend vulkan --no-validation
step parity_vk_coopmat 150 "$B/tests/qattn_parity" --backend vulkan --no-validation --variant coopmat
step parity_vk_stream 150 "$B/tests/qattn_parity" --backend vulkan --no-validation --op decode --variant stream
step parity_vk_mqa_long 150 "$B/tests/qattn_parity" --backend vulkan --no-validation --op mqa_logits --filter mqa_logits/long
[ -x "$H/qattn_parity" ] && step parity_hip 150 "$H/qattn_parity" --backend hip
export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
step plan_decode 60 "$B/tests/test_plan_decode"
step plan_mqa_logits 60 "$B/tests/test_plan_mqa_logits"
wait
report parity_vk parity_vk_coopmat parity_vk_stream parity_vk_mqa_long plan_decode plan_mqa_logits parity_hip
# The torch baseline first, so qattn-bench can print each preset's share of
# the copy rate of this same run next to its share of the read bandwidth it
# measures itself.
step torch 200 python3 bench/torch_baseline.py --json "$OUT/torch.json"
wait
TAIL=20 report torch
copy=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["copy"]["GBps"])' "$OUT/torch.json" 2>/dev/null || echo 0)
step bench_vk 300 "$B/bench/qattn-bench" --backend vulkan --seeds --iters 30 --copy-gbps "$copy" \
  --json "$OUT/bench_vk.json"
wait
TAIL=30 report bench_vk
# The HIP backend's NVIDIA twin on the decode presets (an NVIDIA number about
# the HIP code, not an AMD one).
[ -x "$H/qattn-bench" ] && step bench_hip 200 "$H/qattn-bench" --backend hip --seeds --op decode --iters 30 \
  --copy-gbps "$copy" --json "$OUT/bench_hip.json"
wait
TAIL=20 report bench_hip
# A/B: the decode presets again with the stream kernel pinned.
step bench_vk_stream 90 env QATTN_DECODE_VARIANT=stream "$B/bench/qattn-bench" --backend vulkan --seeds --op decode \
  --iters 30 --json "$OUT/bench_vk_stream.json"
wait
TAIL=12 report bench_vk_stream
# docs/perf.md's tables from this run's JSON.
tj=""
[ -f "$OUT/torch.json" ] && tj="$OUT/torch.json"
for j in bench_vk bench_hip; do
  if [ -f "$OUT/$j.json" ]; then
    python3 bench/perf_table.py "$OUT/$j.json" $tj >"$OUT/perf_$j.md" 2>&1 || failed=1
    cat "$OUT/perf_$j.md"
  fi
done
# Few files come back from a device call: fold the logs into one.
for f in "$OUT"/*.log; do echo "==== $f"; cat "$f"; done >"$OUT/all_logs.txt"
rm -f "$OUT"/*.log "$OUT"/*.rc
exit $failed
