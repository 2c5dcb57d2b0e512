#!/usr/bin/env bash
# Probe 2: the page-tiled decode and the dim-split merge: parity, then times.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
B=.devbuild/all; H=.devbuild/hipbin
echo "binaries: $(cat $B/COMMIT)"
nvidia-smi dmon -s pc -d 1 > $OUT/dmon.txt 2>&1 & dm=$!
( $B/tests/qattn_parity --backend vulkan --no-validation --op decode > $OUT/par_vk.txt 2>&1; echo "vk rc $?" >> $OUT/par_vk.txt ) &
( $B/tests/qattn_parity --backend vulkan --no-validation --op decode --variant simt > $OUT/par_vk_simt.txt 2>&1; echo "simt rc $?" >> $OUT/par_vk_simt.txt ) &
( .devbuild/all2/tests/qattn_parity --backend vulkan --no-validation --op decode > $OUT/par_vk2.txt 2>&1; echo "vk2 rc $?" >> $OUT/par_vk2.txt ) &
( $H/qattn_parity --backend hip --op decode > $OUT/par_hip.txt 2>&1; echo "hip rc $?" >> $OUT/par_hip.txt ) &
wait %2 %3 %4 2>/dev/null; wait $(jobs -p | grep -v $dm) 2>/dev/null
for f in par_vk par_vk2 par_vk_simt par_hip; do echo "== $f"; grep -v "^ok" $OUT/$f.txt | tail -4; done
S=B=16,R=1,Hq=32,Hkv=8,D=128,dtype=fp8_e4m3fn,keys=32768,page=16
{
echo "== vulkan seeds (decode)"
$B/bench/qattn-bench --backend vulkan --seeds --op decode --iters 20 2>&1 | tail -14
echo "== lazy rescale build $(cat .devbuild/all2/COMMIT)"
.devbuild/all2/bench/qattn-bench --backend vulkan --seeds --op decode --iters 20 --read-mib 0 2>&1 | tail -12
echo "== B16 splits"
for s in 16 24 33 48; do
  $B/bench/qattn-bench --backend vulkan --shape $S,splits=$s --iters 20 --read-mib 0 2>&1 | grep -E "^shape1 "
done
echo "== B1 sweeps"
for k in 8192 32768; do for hk in 8 4; do for s in 32 64 128 256; do
  $B/bench/qattn-bench --backend vulkan --shape B=1,R=1,Hq=32,Hkv=$hk,D=128,dtype=fp8_e4m3fn,keys=$k,page=16,splits=$s --iters 30 --read-mib 0 2>&1 | grep -E "^shape1 " | sed "s/^/k$k hkv$hk /"
done; done; done
echo "== hip twin decode"
$H/qattn-bench --backend hip --seeds --op decode --iters 20 2>&1 | tail -12
} 2>&1 | tee $OUT/bench.txt | cut -c1-120
timeout 150 ncu --clock-control none -k regex:decode_tiled -c 1 --section LaunchStats --section Occupancy \
  --section WarpStateStats --section SchedulerStats --section InstructionStats --section SpeedOfLight \
  $H/qattn-bench --backend hip --preset decode_b16_gqa4_32k --iters 1 --warmup 1 --warmup-ms 0 --read-mib 0 > $OUT/ncu.txt 2>&1
grep -E "Registers|Executed Instructions|Issued Warp|Warp Cycles Per Issued|Duration|Theoretical Active|DRAM Through" $OUT/ncu.txt
kill $dm
