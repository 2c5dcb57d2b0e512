#!/usr/bin/env bash
# On the GPU machine, after scripts/decode-ablate-build.sh here:
#   run(command="bash scripts/decode-ablate-run.sh", carry=[".gl", ".devbuild/abl"])
# Times each measurement build on the same presets, one process at a time.
# Mask bits (shaders/decode_tiled.comp): 1 staging, 2 S = K Q^T, 4 softmax,
# 8 O += V^T P^T, 16 the K/V loads, 32 the index bounds, 64 the barriers.
set -uo pipefail
OUT=${OUT:-/tmp/qattn-ablate-out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig >/dev/null 2>&1
A=.devbuild/abl
echo "binaries of commit $(cat $A/COMMIT)"
P=${PRESETS:-decode_b16_gqa4_32k,decode_b16_gqa8_32k,decode_b1_gqa4_32k}
for d in $(ls $A | grep -E '^[0-9]+$' | sort -n); do
  echo "== mask $d"
  timeout 120 $A/$d/qattn-bench --backend vulkan --preset "$P" --iters ${ITERS:-20} --read-mib 0 \
      ${SHAPES:-} 2>&1 | tee "$OUT/ablate_$d.log" | grep -E "^decode|^shape|rror"
done
