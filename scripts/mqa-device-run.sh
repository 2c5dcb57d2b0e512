#!/usr/bin/env bash
# One H200 call for the MQA logits work (issue 10), after
# scripts/device-build.sh here:
#   run(command="bash scripts/mqa-device-run.sh", carry=[".gl", ".devbuild/all", ".devbuild/nvct"])
# Correctness first (coopmat forced on every case, the planner's choice,
# and the coopmat geometry pinned to 1 and 2 m-tiles per subgroup), then,
# alone on the GPU: the driver's statistics of the target's pipeline, the
# seed presets with the matrix ceiling, a geometry sweep of the target
# preset (QATTN_MQA_MTILES x QATTN_MQA_NTILES pins), and the SASS of the
# coopmat pipeline (scripts/nv-sass.sh, when .devbuild/nvct is carried).
# Results in $OUT: mqa_logs.txt (every step), bench.json, sass_mqa.tgz.
set -u
B=.devbuild/all
O=${OUT:-/tmp/mqa_out}
mkdir -p "$O"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
L="$O/mqa_logs.txt"
{ echo "binaries of commit $(cat $B/COMMIT)"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; } >"$L" 2>&1
P="$B/tests/qattn_parity --backend vulkan --op mqa_logits --no-validation"
failed=0
step() { # step NAME LIMIT CMD...
  local name=$1 limit=$2; shift 2
  echo "==== $name" >>"$L"
  timeout "$limit" "$@" >/tmp/step.txt 2>&1; local rc=$?
  cat /tmp/step.txt >>"$L"
  echo "== $name: rc=$rc"; grep -E '^parity: mqa_logits|^FAIL' /tmp/step.txt | head -4 | cut -c1-220
  [ $rc = 0 ] || failed=1
}
step "parity coopmat forced" 90 $P --variant coopmat -v
step "parity planner" 90 $P -v
for mt in 2; do step "parity coopmat MTILES=$mt" 90 env QATTN_MQA_MTILES=$mt $P --variant coopmat -v; done
step "parity long" 60 $P --filter mqa_logits/long
# Spec constants of the 2048 x 65536 H64 D128 plan (constant_id order).
S="128,32,1,4,16,128,0,0,0,1,4,1,64,16,16,16"
step "stats" 30 $B/backend_vulkan/qattn_vk_stats mqa_logits_coopmat 32 $S
grep -E "Register Count|Local Memory|Shared Memory" /tmp/step.txt
step "bench seeds" 120 $B/bench/qattn-bench --backend vulkan --op mqa_logits --seeds --iters 10 --json "$O/bench.json"
cut -c1-200 /tmp/step.txt | grep -E "ceiling|mqa_"
# The KV split and tile width around the planner's choice (qattn_mqa_tune:
# each configuration spot-checked against the cpu reference).
step "tune sweep" 150 $B/tests/qattn_mqa_tune --sweep --runs 7
grep -E "planner|mt[0-9]" /tmp/step.txt | cut -c1-170
# An alternative build (.devbuild/mqaold: qattn-bench, its COMMIT file says
# what it is; its parity was run on its own), timed beside this one.
M=.devbuild/mqaold
if [ -x "$M/qattn-bench" ]; then
  echo "alternative: $(cat $M/COMMIT 2>/dev/null)" >>"$L"
  for b in "this:$B/bench/qattn-bench" "alt:$M/qattn-bench" "this:$B/bench/qattn-bench"; do
    step "ab ${b%%:*}" 60 "${b#*:}" --backend vulkan --preset mqa_2048x65536_h64,mqa_1024x131072_h32 --iters 10 --read-mib 0
    grep -E "^mqa_" /tmp/step.txt | cut -c1-200
  done
fi
if [ -x .devbuild/nvct/nvcachedec ]; then
  step "sass" 60 env SASS_NAME=sass_mqa OUT="$O" bash scripts/nv-sass.sh "$B/bench/qattn-bench" --preset mqa_prefill_4096_h64
  tail -4 /tmp/step.txt
fi
exit $failed
