#!/usr/bin/env bash
# On the NVIDIA GPU machine: the SASS the driver compiled for the decode
# pipelines of one small B1 GQA4 D128 fp8 shape, read back from the
# driver's shader disk cache (VK_KHR_pipeline_executable_properties gives
# only statistics there). Needs nvcachetools' nvcachedec and nvucdump
# (github.com/therontarigo/nvcachetools, ISC; not part of qattn: build them
# on the build machine, statically, into .devbuild/nvct, and carry that
# folder) and the CUDA toolkit's nvdisasm on the GPU machine.
#   scripts/nv-sass.sh QATTN_BENCH [BENCH ARGS...]  -> $OUT/$SASS_NAME.tgz
# (default sass.tgz) and an opcode histogram; BENCH ARGS pick the pipelines
# (default: the decode shape above; e.g. --preset mqa_prefill_4096_h64).
set -u
bench=${1:?usage: nv-sass.sh path/to/qattn-bench [bench args]}
shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--shape B=2,R=1,Hq=32,Hkv=8,D=128,dtype=fp8_e4m3fn,keys=2048,page=16)
G=/tmp/qattn-glcache N=.devbuild/nvct ND=${NVDISASM:-/usr/local/cuda/bin/nvdisasm}
rm -rf "$G" /tmp/qattn-sass; mkdir -p "$G" /tmp/qattn-sass
__GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=$G __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
  "$bench" --backend vulkan --iters 2 --warmup 1 --warmup-ms 0 --read-mib 0 "${args[@]}" >/dev/null 2>&1
i=0
for toc in $(find "$G" -name '*.toc'); do
  i=$((i + 1)); o=/tmp/qattn-sass/objs$i; mkdir -p "$o"
  "$N/nvcachedec" "$toc" "$o" >/dev/null 2>&1
  for f in "$o"/*.nvuc; do
    [ -f "$f" ] || continue
    b=$(basename "$f" .nvuc)
    "$ND" "$f" >"/tmp/qattn-sass/${i}_$b.sass" 2>/dev/null && continue
    rm -f "/tmp/qattn-sass/${i}_$b.sass"
    d=/tmp/qattn-sass/sec_${i}_$b; mkdir -p "$d"; "$N/nvucdump" "$f" "$d" >/dev/null 2>&1
    for s in "$d"/*; do
      "$ND" --binary SM90 "$s" >"/tmp/qattn-sass/${i}_${b}_$(basename "$s").sass" 2>/dev/null ||
        rm -f "/tmp/qattn-sass/${i}_${b}_$(basename "$s").sass"
    done
  done
done
for f in $(ls -S /tmp/qattn-sass/*.sass 2>/dev/null); do
  echo "$f: $(grep -c ';' "$f") instructions;" \
    "$(grep -oE '(LDL|STL|HMMA|SHFL|CALL|LDG|LDSM|BAR)[.A-Z0-9]*' "$f" | sed 's/\..*//' | sort | uniq -c | tr '\n' ' ')"
done
tar -czf "${OUT:-/tmp}/${SASS_NAME:-sass}.tgz" -C /tmp qattn-sass && echo "${SASS_NAME:-sass}.tgz written"
