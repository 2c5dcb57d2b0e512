set -uo pipefail
OUT=${OUT:-/tmp/o}; mkdir -p $OUT
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
B=.devbuild/all; H=.devbuild/hipbin
export LD_LIBRARY_PATH=$B/lib
( "$B/tests/qattn_parity" --backend vulkan --no-validation --op paged_mqa_logits; "$B/tests/qattn_parity" --backend vulkan --no-validation --op read_stream ) > $OUT/parity_rest.log 2>&1; echo "parity_rest exit $?" >> $OUT/parity_rest.log
for be in vulkan hip; do
  bin=$B/tests/qattn_parity; [ $be = hip ] && bin=$H/qattn_parity
  for g in 4 8; do hkv=$((32/g)); for s in 32 64 128 256 ""; do
    sh="1,1,$hkv,$g,128,fn,32768,16${s:+,$s}"
    echo "$be $sh: $("$bin" --backend $be --no-validation --op decode --no-check --time 30 --shape "$sh" 2>&1 | grep '^time' | head -1)"
  done; done
done > $OUT/splits.log 2>&1
tail -3 $OUT/parity_rest.log; cat $OUT/splits.log
