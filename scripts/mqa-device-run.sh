#!/bin/bash
# One H200 call for the MQA coopmat work (issue 10): correctness first (coopmat forced (staged and
# direct forced passed unchanged in call 1),
# then every pinned coopmat geometry), then timing. Runs from the root of
# the carried tree; binaries in .devbuild/mqa; results in $OUT (six files).
B=.devbuild/mqa
O=${OUT:-/tmp/mqa_out}
mkdir -p "$O"
{ cat $B/COMMIT; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv; } >"$O/info.txt" 2>&1
S="128,32,1,4,32,128,0,0,0,1,4,2,64,16,16,16"
{ timeout 30 $B/qattn_vk_stats mqa_logits_coopmat 32 $S; timeout 30 $B/qattn_vk_stats mqa_logits_ceiling 32 $S; } >"$O/stats.txt" 2>&1
P="$B/qattn_parity --backend vulkan --op mqa_logits --no-validation"
L="$O/parity.txt"; : >"$L"
run() { local name=$1; shift; echo "=== $name" >>"$L"; "$@" >/tmp/p.txt 2>&1; local rc=$?; cat /tmp/p.txt >>"$L"
  echo "$name: rc=$rc $(grep -E '^parity: mqa_logits' /tmp/p.txt | tail -1)"; grep -E '^FAIL' /tmp/p.txt | head -3 | cut -c1-220; }
for v in coopmat; do run "parity --variant $v" timeout 45 $P --variant $v -v; done
run "parity planner" timeout 40 $P -v
for mt in 1 2; do run "parity coopmat MTILES=$mt" env QATTN_MQA_MTILES=$mt timeout 40 $P --variant coopmat -v; done
for nt in 1 3; do run "parity coopmat NTILES=$nt (geometry cases)" env QATTN_MQA_NTILES=$nt timeout 30 $P --variant coopmat --filter mqa_logits/9 -v; done
timeout 75 $B/qattn-bench --backend vulkan --op mqa_logits --seeds --json "$O/bench.json" >"$O/bench.txt" 2>&1
echo "bench rc=$?"; cut -c1-230 "$O/bench.txt"
timeout 35 $B/qattn_mqa_tune --sweep --runs 7 >"$O/tune.txt" 2>&1
echo "tune rc=$?"; grep -E "planner|mt[0-9]" "$O/tune.txt" | cut -c1-160
grep -E "Register Count|Spill|Shared Memory" "$O/stats.txt" | head -6
