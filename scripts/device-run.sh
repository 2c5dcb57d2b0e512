#!/usr/bin/env bash
# One call on the GPU machine (NVIDIA H200) that checks and then times the
# decode kernels (and whatever else was built), run from the repository root
# there after scripts/device-build.sh here:
#   run(command="bash scripts/device-run.sh", carry=[".gl", ".devbuild/all", ".devbuild/hipbin"])
# .devbuild/all/COMMIT names the commit the binaries were built from.
# Correctness first, in parallel (each process checks its own outputs): the
# Vulkan parity suite with the planner's choice and with every case forced
# onto simt, the 16 x 1.5M-column MQA case, the HIP backend's parity suite
# and the launch-free planner tests. Then, alone on the GPU so timings are
# clean: the PyTorch baseline, qattn-bench over the seeds' presets (and the
# HIP twin's), a decode sweep, and docs/perf.md's tables. Logs and JSON go to $OUT; the exit status is non-zero if
# any step failed. SKIP="name ..." leaves steps out; DEADLINE=S (seconds from
# the start) shortens or skips the steps that would run past it, so a call
# with little device time left still returns its logs. Optional inputs:
# TORCH_OPS (torch_baseline.py --ops), BENCH_HIP_PRESETS (instead of every
# decode preset), .devbuild/old0/qattn-bench (an earlier build timed on
# decode_b16_gqa4_32k beside this one), .devbuild/abl/32 (the index bounds
# left out: their cost), .devbuild/nvct (scripts/nv-sass.sh: the decode
# pipeline's SASS from the driver's shader cache).
set -uo pipefail
OUT=${OUT:-/tmp/qattn-device-out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
B=.devbuild/all
H=.devbuild/hipbin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv \
  >"$OUT/gpu.log" 2>&1
cat "$OUT/gpu.log"
echo "binaries of commit $(cat $B/COMMIT 2>/dev/null)" | tee -a "$OUT/gpu.log"
# Clocks and power once a second for the whole call: the SM clock idles at
# a few hundred MHz and a timing taken before it ramps up is not one.
nvidia-smi dmon -s pc -d 1 >"$OUT/dmon.txt" 2>&1 &
dmon=$!
failed=0
# step NAME LIMIT_S CMD...: runs in the background, log in $OUT/NAME.log
# (line-buffered, so a step cut by its limit still shows how far it got).
step() {
  local name=$1 limit=$2; shift 2
  case " ${SKIP:-} " in *" $name "*) return ;; esac
  if [ -n "${DEADLINE:-}" ]; then
    local left=$((DEADLINE - SECONDS))
    if [ "$left" -lt 15 ]; then echo "== $name: skipped, past DEADLINE"; return; fi
    [ "$limit" -gt "$left" ] && limit=$left
  fi
  ( t0=$SECONDS; timeout "$limit" stdbuf -oL -eL "$@" >"$OUT/$name.log" 2>&1; rc=$?
    echo "$rc $((SECONDS - t0))" >"$OUT/$name.rc" ) &
  steps+=($!)
}
# Waits for the steps started so far (a bare `wait` would also wait for the
# clock logger, which never ends).
steps=()
wait_steps() {
  for p in ${steps[@]+"${steps[@]}"}; do wait "$p"; done
  steps=()
}
report() {
  for name in "$@"; do
    [ -f "$OUT/$name.rc" ] || continue
    read -r rc secs <"$OUT/$name.rc"
    echo "== $name: exit $rc after $secs s"
    tail -n "${TAIL:-6}" "$OUT/$name.log"
    [ "$rc" = 0 ] || failed=1
    # Few files come back from a call (8): each reported log joins one file.
    { echo "==== $name: exit $rc after $secs s"; cat "$OUT/$name.log"; } >>"$OUT/all_logs.txt"
    rm -f "$OUT/$name.log" "$OUT/$name.rc"
  done
}
# The GPU machine has no Vulkan validation layers: --no-validation there.
step parity_vk 200 "$B/tests/qattn_parity" --backend vulkan --no-validation
step parity_vk_simt 120 "$B/tests/qattn_parity" --backend vulkan --no-validation --op decode --variant simt
step parity_vk_mqa_long 120 "$B/tests/qattn_parity" --backend vulkan --no-validation --op mqa_logits --filter mqa_logits/long
# Every MQA case on the matrix path, and with its geometry pinned to one and
# two m-tiles per subgroup (rows spread over up to eight subgroups).
step parity_vk_mqa_coopmat 120 "$B/tests/qattn_parity" --backend vulkan --no-validation --op mqa_logits --variant coopmat
for mt in 1 2; do
  step parity_vk_mqa_mt$mt 120 env QATTN_MQA_MTILES=$mt "$B/tests/qattn_parity" --backend vulkan --no-validation \
    --op mqa_logits --variant coopmat
done
# An alternative MQA build (.devbuild/mqaold: qattn_parity and qattn-bench),
# checked the same way here and timed beside this one after the bench.
M=.devbuild/mqaold
if [ -x "$M/qattn_parity" ]; then
  step parity_mqaold 120 "$M/qattn_parity" --backend vulkan --no-validation --op mqa_logits --variant coopmat
  for mt in 1 2; do
    step parity_mqaold_mt$mt 120 env QATTN_MQA_MTILES=$mt "$M/qattn_parity" --backend vulkan --no-validation \
      --op mqa_logits --variant coopmat
  done
fi
[ -x "$H/qattn_parity" ] && step parity_hip 150 "$H/qattn_parity" --backend hip
# The twin's simt decode too, so a failure of its wmma products is told apart
# from one of the tiling; and the plans an AMD device would make, run here.
[ -x "$H/qattn_parity" ] && step parity_hip_simt 150 "$H/qattn_parity" --backend hip --op decode --variant simt
[ -x "$H/qattn_hip_twin_plans" ] && step hip_twin_plans 120 "$H/qattn_hip_twin_plans"
export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -x "$H/qattn_hip_graph" ] && step hip_graph 120 "$H/qattn_hip_graph"
step plan_decode 60 "$B/tests/test_plan_decode"
step plan_mqa_logits 60 "$B/tests/test_plan_mqa_logits"
# The caller-device test without a validation layer (the GPU machine has none).
[ -x "$B/tests/test_vk_embed" ] && step vk_embed 120 env QATTN_TEST_VALIDATION=0 "$B/tests/test_vk_embed"
wait_steps
report parity_vk parity_vk_simt parity_vk_mqa_long parity_vk_mqa_coopmat parity_vk_mqa_mt1 parity_vk_mqa_mt2 \
  parity_mqaold parity_mqaold_mt1 parity_mqaold_mt2 plan_decode plan_mqa_logits parity_hip parity_hip_simt hip_twin_plans \
  hip_graph vk_embed
# Each issue's own checks: scripts/device-steps/*.sh, sourced in name order
# (each may call step, wait_steps and report, and sets failed on failure).
# DEVICE_STEPS=0 leaves them out (a call that only times); DEVICE_STEPS="a.sh
# b.sh" runs only those.
for f in scripts/device-steps/*.sh; do
  [ -f "$f" ] && [ "${DEVICE_STEPS:-1}" != 0 ] || continue
  case "${DEVICE_STEPS:-1}" in 1) ;; *) case " $DEVICE_STEPS " in *" ${f##*/} "*) ;; *) continue ;; esac ;; esac
  # shellcheck disable=SC1090
  . "$f"
done
wait_steps
# The torch baseline first, so qattn-bench can print each preset's share of
# the copy rate of this same run next to its share of the read bandwidth it
# measures itself.
step torch 120 python3 bench/torch_baseline.py --json "$OUT/torch.json" ${TORCH_OPS:+--ops $TORCH_OPS} \
  --iters ${ITERS:-30}
wait_steps
TAIL=20 report torch
copy=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["copy"]["GBps"])' "$OUT/torch.json" 2>/dev/null || echo 0)
step bench_vk 240 "$B/bench/qattn-bench" --backend vulkan --seeds ${BENCH_OP:+--op $BENCH_OP} --iters ${ITERS:-30} --copy-gbps "$copy" \
  --json "$OUT/bench_vk.json"
wait_steps
TAIL=30 report bench_vk
# The alternative MQA build against this one, back to back.
if [ -x "$M/qattn-bench" ]; then
  for b in "mqa_ab_this:$B/bench/qattn-bench" "mqa_ab_alt:$M/qattn-bench" "mqa_ab_this2:$B/bench/qattn-bench"; do
    step "${b%%:*}" 60 "${b#*:}" --backend vulkan --preset mqa_1024x131072_h64,mqa_1024x131072_h32,mqa_2048x65536_h64,mqa_4096x32768_h64 --iters ${ITERS:-30} --read-mib 0
    wait_steps
    TAIL=6 report "${b%%:*}"
  done
fi
# Embedding (issue 9): 32 B1 decodes recorded into one caller command buffer
# against their device time plus one submit; a second process with the
# pipeline cache the first one saved creates no pipeline.
step embed_record 90 "$B/bench/qattn-bench" --backend vulkan --preset decode_b1_gqa4_32k,decode_b1_gqa8_8k \
  --embed-record 32 --read-mib 0
wait_steps
TAIL=30 report embed_record
# The HIP backend's NVIDIA twin on the decode presets (an NVIDIA number about
# the HIP code, not an AMD one).
hip_sel="--seeds --op decode"
[ -n "${BENCH_HIP_PRESETS:-}" ] && hip_sel="--preset $BENCH_HIP_PRESETS"
[ -x "$H/qattn-bench" ] && step bench_hip 150 "$H/qattn-bench" --backend hip $hip_sel --iters ${ITERS:-30} \
  --copy-gbps "$copy" --json "$OUT/bench_hip.json"
wait_steps
TAIL=20 report bench_hip
# Decode sweep (timing mode of the parity binary, shuffled page pool;
# planner's choice unless the shape names splits):
# B,R,Hkv,G,D,dtype,keys,page[,splits].
sweep() {
  for s in "$@"; do
    "$B/tests/qattn_parity" --backend vulkan --no-validation --op decode --no-check --time 30 --shape "$s" 2>&1 | grep '^time'
  done
}
step sweep 120 bash -c "$(declare -f sweep); B=$B; sweep ${SWEEP:-16,1,8,4,128,fn,32768,16 1,1,8,4,128,fn,32768,16}"
wait_steps
TAIL=40 report sweep
rm -f /tmp/qattn_pc.bin
for i in 1 2; do
  step pipeline_cache_$i 60 "$B/bench/qattn-bench" --backend vulkan --preset decode_b1_gqa4_32k,decode_b16_gqa8_32k,mqa_2048x65536_h64 \
    --iters 5 --warmup 1 --warmup-ms 0 --read-mib 0 --pipeline-cache /tmp/qattn_pc.bin
  wait_steps
  TAIL=12 report pipeline_cache_$i
done
# Earlier builds beside this one (their COMMIT files say what they are),
# and the cost of the in-kernel bounds.
for extra in ab_old:.devbuild/old0 ab_old1:.devbuild/old1 bounds:.devbuild/abl/32; do
  name=${extra%%:*} dir=${extra#*:}
  [ -x "$dir/qattn-bench" ] || continue
  echo "$name: $(cat "$dir/COMMIT" 2>/dev/null)" >>"$OUT/all_logs.txt"
  step "$name" 60 "$dir/qattn-bench" --backend vulkan --preset decode_b16_gqa4_32k,decode_b1_gqa4_32k \
    --iters ${ITERS:-30} --read-mib 0
  wait_steps
  TAIL=4 report "$name"
done
if [ -x .devbuild/nvct/nvcachedec ]; then
  step sass 60 bash scripts/nv-sass.sh "$B/bench/qattn-bench"
  wait_steps
  TAIL=40 report sass
  step sass_mqa 60 env SASS_NAME=sass_mqa bash scripts/nv-sass.sh "$B/bench/qattn-bench" --preset mqa_prefill_4096_h64
  wait_steps
  TAIL=40 report sass_mqa
fi
kill $dmon 2>/dev/null
# docs/perf.md's tables from this run's JSON.
tj=""
[ -f "$OUT/torch.json" ] && tj="$OUT/torch.json"
for j in bench_vk bench_hip; do
  if [ -f "$OUT/$j.json" ]; then
    python3 bench/perf_table.py "$OUT/$j.json" $tj >"$OUT/perf_$j.log" 2>&1 || failed=1
    cat "$OUT/perf_$j.log"
  fi
done
# Few files come back from a device call: fold the logs into one.
for f in "$OUT"/*.log; do [ -f "$f" ] && { echo "==== $f"; cat "$f"; }; done >>"$OUT/all_logs.txt"
rm -f "$OUT"/*.log "$OUT"/*.rc
exit $failed
