#!/usr/bin/env bash
# Probe 1: where the decode time goes (not committed as is; the log is).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
B=.devbuild/all; H=.devbuild/hipbin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu.txt
which ncu; ncu --version | tail -1
nvidia-smi dmon -s pc -d 1 > $OUT/dmon.txt 2>&1 & dm=$!
S=B=16,R=1,Hq=32,Hkv=8,D=128,dtype=fp8_e4m3fn,keys=32768,page=16
{
echo "== vulkan splits sweep, B16 GQA4 32K"
for s in 0 14 28 29 43 44 58 66 99 132; do
  $B/bench/qattn-bench --backend vulkan --shape $S,splits=$s --iters 20 --read-mib 0 2>&1 | grep -E "^shape"
done
echo "== vulkan B1 sweeps"
for k in 8192 32768; do for hk in 8 4; do for s in 0 16 32 64 128 256; do
  $B/bench/qattn-bench --backend vulkan --shape B=1,R=1,Hq=32,Hkv=$hk,D=128,dtype=fp8_e4m3fn,keys=$k,page=16,splits=$s --iters 30 --read-mib 0 2>&1 | grep -E "^shape" | sed "s/^/k$k hkv$hk /"
done; done; done
echo "== vulkan seeds (decode)"
$B/bench/qattn-bench --backend vulkan --seeds --op decode --iters 20 2>&1 | tail -20
} 2>&1 | tee $OUT/vk.txt
echo "== ncu twin"
timeout 200 ncu --clock-control none -k regex:decode_tiled -c 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis --section SourceCounters \
  $H/qattn-bench --backend hip --preset decode_b16_gqa4_32k --iters 1 --warmup 1 --warmup-ms 0 --read-mib 0 > $OUT/ncu.txt 2>&1
tail -150 $OUT/ncu.txt | grep -v "^ *$" | head -150
timeout 200 ncu --clock-control none -k regex:decode_tiled -c 1 --section SourceCounters --section WarpStateStats \
  --page source --print-source sass --csv \
  $H/qattn-bench --backend hip --preset decode_b16_gqa4_32k --iters 1 --warmup 1 --warmup-ms 0 --read-mib 0 > $OUT/ncu_src.csv 2>&1
ls -la $OUT; wc -l $OUT/ncu_src.csv
kill $dm
