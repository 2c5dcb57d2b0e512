#!/bin/bash
# Minimal A/B call: the alternative MQA build's correctness, then both timed back to back.
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
M=.devbuild/mqaold B=.devbuild/all
cat $M/COMMIT
P="--backend vulkan --op mqa_logits --no-validation --variant coopmat"
timeout 90 $M/qattn_parity $P 2>&1 | grep -E "^parity: mqa|^FAIL" | head -5
QATTN_MQA_MTILES=2 timeout 90 $M/qattn_parity $P 2>&1 | grep -E "^parity: mqa|^FAIL" | head -5
QATTN_MQA_MTILES=1 timeout 90 $M/qattn_parity $P 2>&1 | grep -E "^parity: mqa|^FAIL" | head -5
for b in "this:$B/bench/qattn-bench" "alt:$M/qattn-bench" "this:$B/bench/qattn-bench" "alt:$M/qattn-bench"; do
  echo "== ${b%%:*}"
  timeout 60 ${b#*:} --backend vulkan --preset mqa_1024x131072_h64,mqa_1024x131072_h32,mqa_2048x65536_h64,mqa_4096x32768_h64 --iters 10 --read-mib 0 2>&1 | grep -E "^mqa_" | cut -c1-150
done
