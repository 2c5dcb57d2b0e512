#!/usr/bin/env bash
# The product as the host builds it and a user of the host consumes it
# (issue 9 item 6). Runs on the host itself (Debian 12 here), never in the
# Debian 13 root:
#
#   1. builds qattn's libraries with the host's compiler and C library,
#      shared and static, and installs each into a scratch prefix. The only
#      things taken from the tool root are tools and headers the host lacks:
#      glslangValidator (run through the root's own loader, for SPIR-V) and
#      the Vulkan and volk headers (volk.c is compiled by the host's gcc). A
#      host that has them uses its own (scripts/toolchain.sh decides which
#      host is complete). The HIP backend links the HIP runtime the host
#      provides (find_library amdhip64 under /opt/rocm, then the system);
#      without one it is off, and no root library is ever linked.
#   2. checks with objdump -T that no installed library needs a glibc symbol
#      version newer than the host's;
#   3. builds the consumer (tests/consumer) against each prefix through
#      find_package(qattn) and through pkg-config (--static for the static
#      prefix) and runs it: a KV store and a decode on the cpu backend (and
#      the HIP backend's consumer when the package has it);
#   4. builds it once more with qattn as an add_subdirectory subproject,
#      whose tests and bench stay off (this host has no cmocka).
#
#   scripts/host-package-test.sh [WORK_DIR]   (default build/host)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=$(pwd)
work=${1:-build/host}
mkdir -p "$work"
work=$(cd "$work" && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
cc=${CC:-cc}
log() { printf 'host-package: %s\n' "$*"; }

# ---- tools and headers the host lacks, from the root --------------------
tooldir=$work/tools
incdir=$work/root-include
rm -rf "$tooldir" "$incdir"
mkdir -p "$tooldir" "$incdir"
vk_args=()
probe_glslang() {
  local t; t=$(mktemp -d)
  printf '#version 450\n#extension GL_KHR_cooperative_matrix : require\n#extension GL_KHR_memory_scope_semantics : require\n#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\nlayout(local_size_x=32) in;\nvoid main(){ coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a; }\n' >"$t/p.comp"
  "$1" --target-env vulkan1.3 -o "$t/p.spv" "$t/p.comp" >/dev/null 2>&1; local rc=$?
  rm -rf "$t"; return $rc
}
hv=$(sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\)/\1/p' /usr/include/vulkan/vulkan_core.h 2>/dev/null || true)
need_root=0
if ! command -v glslangValidator >/dev/null || ! probe_glslang glslangValidator; then need_root=1; fi
if [ "${hv:-0}" -lt 255 ] || [ ! -f /usr/include/volk.h ]; then need_root=1; fi
if [ $need_root = 1 ]; then
  root=$(scripts/toolchain.sh --root)
  log "borrowing glslangValidator and the Vulkan/volk headers from $root"
  # The root's binary under the root's loader and libraries: nothing of the
  # root is loaded into anything the product links.
  cat >"$tooldir/glslangValidator" <<EOF
#!/bin/sh
exec "$root/lib64/ld-linux-x86-64.so.2" --library-path "$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu" "$root/usr/bin/glslangValidator" "\$@"
EOF
  chmod +x "$tooldir/glslangValidator"
  # Headers only (no libc headers): Vulkan 1.4, its video headers, volk.
  ln -s "$root/usr/include/vulkan" "$incdir/vulkan"
  ln -s "$root/usr/include/vk_video" "$incdir/vk_video"
  ln -s "$root/usr/include/volk.h" "$incdir/volk.h"
  ln -s "$root/usr/include/volk.c" "$incdir/volk.c"
  vk_args=(-DQATTN_GLSLANG="$tooldir/glslangValidator" -DQATTN_VULKAN_INCLUDE_DIR="$incdir"
           -DQATTN_VOLK_INCLUDE_DIR="$incdir")
fi

# ---- 1. build and install, shared and static ----------------------------
for kind in shared static; do
  b=$work/$kind
  shared=ON; [ $kind = static ] && shared=OFF
  log "building ($kind) with $("$cc" --version | head -1)"
  cmake -S "$src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" \
    -DBUILD_SHARED_LIBS=$shared -DQATTN_BUILD_TESTS=OFF -DQATTN_BUILD_BENCH=OFF \
    -DQATTN_VULKAN=AUTO -DQATTN_HIP=AUTO "${vk_args[@]}" >"$work/$kind.configure.log" 2>&1 \
    || { cat "$work/$kind.configure.log"; exit 1; }
  grep -E '^-- qattn' "$work/$kind.configure.log" || true
  cmake --build "$b" -j "$jobs" >"$work/$kind.build.log" 2>&1 || { tail -40 "$work/$kind.build.log"; exit 1; }
  rm -rf "$work/prefix-$kind"
  cmake --install "$b" --prefix "$work/prefix-$kind" >/dev/null
done

# ---- 2. glibc symbol versions -------------------------------------------
host_glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
fail=0
libs=$(find "$work/prefix-shared" -name '*.so*' -type f)
[ -n "$libs" ] || { log "no shared library installed"; exit 1; }
for lib in $libs; do
  need=$(objdump -T "$lib" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
  if [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$need" "$host_glibc" | sort -V | tail -1)" != "$host_glibc" ]; then
    log "FAIL $(basename "$lib") needs GLIBC_$need, the host has $host_glibc"; fail=1
  else
    log "ok   $(basename "$lib") needs GLIBC_${need:-none} (host $host_glibc)"
  fi
  # the soname carries the ABI policy: MAJOR.MINOR while the major is 0
  ver=$(sed -n 's/^project(qattn VERSION \([0-9]*\)\.\([0-9]*\).*/\1 \2/p' "$src/CMakeLists.txt")
  read -r vmaj vmin <<<"$ver"
  want=$([ "$vmaj" = 0 ] && echo "so.$vmaj.$vmin" || echo "so.$vmaj")
  soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
  case $soname in *."$want") ;; *) log "FAIL $(basename "$lib"): soname $soname, want *.$want"; fail=1;; esac
  # every library it needs resolves on the host (qattn's own from the prefix)
  deps=$(LD_LIBRARY_PATH=$(dirname "$lib") ldd "$lib")
  if grep -q 'not found' <<<"$deps"; then log "FAIL $(basename "$lib"): $(grep 'not found' <<<"$deps")"; fail=1; fi
done
[ $fail = 0 ] || exit 1

# ---- 3. the consumer, four ways -----------------------------------------
for kind in shared static; do
  p=$work/prefix-$kind
  c=$work/consumer-$kind
  rm -rf "$c"
  cmake -S "$src/tests/consumer" -B "$c/cmake" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$p" \
    >"$c.configure.log" 2>&1 || { cat "$c.configure.log"; exit 1; }
  cmake --build "$c/cmake" >/dev/null
  LD_LIBRARY_PATH=$p/lib "$c/cmake/consumer" || { log "FAIL find_package ($kind)"; exit 1; }
  pcdir=$(echo "$p"/lib*/pkgconfig)
  static=; [ $kind = static ] && static=--static
  flags=$(PKG_CONFIG_PATH=$pcdir pkg-config $static --cflags --libs qattn-core)
  # shellcheck disable=SC2086
  "$cc" -std=c11 "$src/tests/consumer/consumer.c" -o "$c/consumer_pc" $flags -lm
  LD_LIBRARY_PATH=$p/lib "$c/consumer_pc" || { log "FAIL pkg-config ($kind)"; exit 1; }
  if [ -f "$pcdir/qattn-hip.pc" ]; then # the HIP backend and the runtime it names
    [ -x "$c/cmake/consumer_hip" ] || { log "FAIL find_package ($kind) gave no qattn::hip"; exit 1; }
    LD_LIBRARY_PATH=$p/lib "$c/cmake/consumer_hip" || { log "FAIL hip consumer, find_package ($kind)"; exit 1; }
    hflags=$(PKG_CONFIG_PATH=$pcdir pkg-config $static --cflags --libs qattn-hip)
    # shellcheck disable=SC2086
    "$cc" -std=c11 "$src/tests/consumer/consumer_hip.c" -o "$c/consumer_hip_pc" $hflags -lm
    LD_LIBRARY_PATH=$p/lib "$c/consumer_hip_pc" || { log "FAIL hip consumer, pkg-config ($kind)"; exit 1; }
    log "ok   hip consumer ($kind) through find_package and pkg-config${static:+ --static}"
  fi
  log "ok   consumer ($kind) through find_package and pkg-config${static:+ --static}"
done
# ---- 4. qattn as a subproject (add_subdirectory / FetchContent) ----------
c=$work/consumer-subproject
rm -rf "$c"
cmake -S "$src/tests/consumer/subproject" -B "$c" -G Ninja -DCMAKE_C_COMPILER="$cc" \
  -DQATTN_SOURCE_DIR="$src" >"$c.configure.log" 2>&1 || { cat "$c.configure.log"; exit 1; }
cmake --build "$c" --target consumer >/dev/null
"$c/consumer" || { log "FAIL subproject consumer"; exit 1; }
log "ok   consumer with qattn as a subproject (no tests, no cmocka)"
log "the host-built package installs, loads and runs on this host"
