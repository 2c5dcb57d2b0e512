#!/usr/bin/env bash
# One command from a checkout to qattn installed for this machine's own use:
#
#   scripts/install.sh [--prefix DIR] [--build-dir DIR] [--jobs N]
#
# Builds the libraries with this host's compiler and C library (never inside
# the Debian 13 tool root, whose glibc is newer than Debian 12's), every
# backend this host can build and run:
#   cpu     always (the reference, in qattn_core);
#   vulkan  with its shaders, where Vulkan headers >= 1.3.255, volk and a
#           glslangValidator that knows GL_KHR_cooperative_matrix are found.
#           A host that lacks them (Debian 12) borrows exactly these from
#           the tool root of scripts/toolchain.sh (built once, as root): the
#           headers only, and glslangValidator run under the root's own
#           loader to write SPIR-V; nothing of the root is linked. Vulkan
#           itself is loaded at run time (volk), so no libvulkan is needed to
#           build; one is needed to run (libvulkan1 and a driver);
#   hip     where ROCm's HIP runtime (/opt/rocm) or the CUDA toolkit is
#           found; with ROCm, the AMD code objects (gfx942, gfx1200, gfx1201)
#           are compiled by ROCm's clang and embedded;
# plus qattn-bench, the headers, the CMake package (find_package(qattn)),
# pkg-config files and the Python package. Then it prints what it built and
# what it left out and why, and runs `python3 -m qattn` on the installed
# package.
#
#   --prefix DIR     where to install (default: ~/.local, or /usr/local as root)
#   --build-dir DIR  the build tree (default: build/install in the checkout)
#   --jobs N         parallel build jobs (default: nproc)
#
# Run as root on a Debian/Ubuntu host missing cmake, ninja, a C compiler or
# python3, it installs them with apt-get first; otherwise it names them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=$(pwd)
prefix= work=build/install jobs=$(nproc 2>/dev/null || echo 2)
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) prefix=$2; shift 2;;
    --prefix=*) prefix=${1#*=}; shift;;
    --build-dir) work=$2; shift 2;;
    --build-dir=*) work=${1#*=}; shift;;
    --jobs|-j) jobs=$2; shift 2;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    *) echo "install.sh: unknown argument $1 (--help)" >&2; exit 2;;
  esac
done
if [ -z "$prefix" ]; then
  if [ "$(id -u)" = 0 ]; then prefix=/usr/local; else prefix=$HOME/.local; fi
fi
mkdir -p "$prefix" "$work"
prefix=$(cd "$prefix" && pwd)
work=$(cd "$work" && pwd)
log() { printf 'install: %s\n' "$*"; }

# ---- the host's build tools -----------------------------------------------
cmake_ok() {
  command -v cmake >/dev/null || return 1
  local v; v=$(cmake --version | sed -n '1s/.* \([0-9]*\.[0-9]*\).*/\1/p')
  [ "$(printf '%s\n3.25\n' "$v" | sort -V | head -1)" = 3.25 ]
}
missing=()
cmake_ok || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v "${CC:-cc}" >/dev/null || missing+=(gcc libc6-dev)
command -v python3 >/dev/null || missing+=(python3)
command -v pkg-config >/dev/null || missing+=(pkgconf)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing ${missing[*]} with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    log "needs: ${missing[*]} (Debian: apt-get install ${missing[*]}; CMake >= 3.25)"; exit 1
  fi
fi
cmake_ok || { log "CMake >= 3.25 is needed, $(cmake --version | head -1) found"; exit 1; }
cc=${CC:-cc}

# ---- the Vulkan toolchain: the host's, else borrowed from the tool root ---
tooldir=$work/tools incdir=$work/root-include
rm -rf "$tooldir" "$incdir"
mkdir -p "$tooldir" "$incdir"
probe_glslang() {
  local t; t=$(mktemp -d)
  printf '#version 450\n#extension GL_KHR_cooperative_matrix : require\n#extension GL_KHR_memory_scope_semantics : require\n#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\nlayout(local_size_x=32) in;\nvoid main(){ coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a; }\n' >"$t/p.comp"
  "$1" --target-env vulkan1.3 -o "$t/p.spv" "$t/p.comp" >/dev/null 2>&1; local rc=$?
  rm -rf "$t"; return $rc
}
vk_args=() vk_borrowed=
hv=$(sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\)/\1/p' /usr/include/vulkan/vulkan_core.h 2>/dev/null || true)
host_lacks=()
if ! command -v glslangValidator >/dev/null; then host_lacks+=("no glslangValidator")
elif ! probe_glslang glslangValidator; then host_lacks+=("glslangValidator without GL_KHR_cooperative_matrix"); fi
if [ -z "$hv" ]; then host_lacks+=("no Vulkan headers")
elif [ "$hv" -lt 255 ]; then host_lacks+=("Vulkan headers 1.3.$hv < 1.3.255"); fi
[ -f /usr/include/volk.h ] || host_lacks+=("no volk.h")
vk_off_reason=
if [ ${#host_lacks[@]} -gt 0 ]; then
  why=$(IFS=';'; echo "${host_lacks[*]}" | sed 's/;/, /g')
  root=
  if [ "${QATTN_INSTALL_NO_ROOT:-}" = 1 ]; then
    vk_off_reason="this host has $why and QATTN_INSTALL_NO_ROOT=1 forbids borrowing from the tool root"
  elif [ -n "${QATTN_TOOLROOT:-}" ] || [ "$(id -u)" = 0 ] || ls -d /var/cache/qattn/debian13-* >/dev/null 2>&1; then
    root=$(scripts/toolchain.sh --root 2>"$work/toolroot.log") || {
      root=; vk_off_reason="this host has $why, and the tool root could not be built (see $work/toolroot.log)"; }
  else
    vk_off_reason="this host has $why; run this script once as root (it borrows them from the Debian 13 tool root) or install Vulkan headers >= 1.3.255, volk and glslang"
  fi
  if [ -n "$root" ]; then
    log "this host has $why: borrowing glslangValidator and the Vulkan/volk headers from $root"
    cat >"$tooldir/glslangValidator" <<EOF
#!/bin/sh
exec "$root/lib64/ld-linux-x86-64.so.2" --library-path "$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu" "$root/usr/bin/glslangValidator" "\$@"
EOF
    chmod +x "$tooldir/glslangValidator"
    ln -s "$root/usr/include/vulkan" "$incdir/vulkan"
    ln -s "$root/usr/include/vk_video" "$incdir/vk_video"
    ln -s "$root/usr/include/volk.h" "$incdir/volk.h"
    ln -s "$root/usr/include/volk.c" "$incdir/volk.c"
    vk_args=(-DQATTN_GLSLANG="$tooldir/glslangValidator" -DQATTN_VULKAN_INCLUDE_DIR="$incdir"
             -DQATTN_VOLK_INCLUDE_DIR="$incdir")
    vk_borrowed=" (headers and glslangValidator borrowed from the tool root, $why here)"
  else
    vk_args=(-DQATTN_VULKAN=OFF)
  fi
fi

# ---- the Python package's directory under the prefix ----------------------
# The one this python3 already searches (~/.local: the user site; /usr/local
# on Debian: dist-packages), else lib/pythonX.Y/site-packages.
pyrel=$(python3 - "$prefix" <<'EOF'
import os, site, sys
prefix = sys.argv[1].rstrip("/")
cands = []
try:
    cands.append(site.getusersitepackages())
except Exception:
    pass
cands += [p for p in sys.path if p]
for p in cands:
    p = os.path.realpath(p)
    if p.startswith(prefix + "/") and ("site-packages" in p or "dist-packages" in p):
        print(os.path.relpath(p, prefix)); break
else:
    print("lib/python%d.%d/site-packages" % sys.version_info[:2])
EOF
)

# ---- configure, build, install --------------------------------------------
b=$work/build
log "building with $("$cc" --version | head -1), $jobs jobs, into $b"
cmake -S "$src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" \
  -DBUILD_SHARED_LIBS=ON -DQATTN_BUILD_TESTS=OFF -DQATTN_BUILD_BENCH=ON -DQATTN_BUILD_EXAMPLES=OFF \
  -DQATTN_VULKAN=AUTO -DQATTN_HIP=AUTO -DQATTN_HIP_HOSTSIM=OFF "${vk_args[@]}" \
  -DQATTN_PYTHON_INSTALL_DIR="$pyrel" -DCMAKE_INSTALL_PREFIX="$prefix" \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$b" -j "$jobs" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
cmake --install "$b" >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }

# ---- what was built, what was left out and why ---------------------------
cache() { sed -n "s/^$1:[A-Z]*=//p" "$b/CMakeCache.txt"; }
libdir=$prefix/$(cache CMAKE_INSTALL_LIBDIR)
have() { ls "$libdir"/lib"$1".so* >/dev/null 2>&1; }
reason() { sed -n "s/^-- qattn: $1 (\(.*\))$/\1/p" "$work/configure.log" | head -1; }
echo
echo "qattn $(sed -n 's/^project(qattn VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt) installed into $prefix"
echo "  built:"
echo "    core + cpu backend   $libdir/libqattn_core.so"
left=()
if have qattn_vulkan; then
  echo "    vulkan backend       $libdir/libqattn_vulkan.so, shaders embedded$vk_borrowed"
else
  left+=("vulkan backend: ${vk_off_reason:-$(reason 'Vulkan backend off')}")
fi
plat=
if have qattn_hip; then
  plat=$(grep -o 'HIP backend on the [a-z]* platform' "$work/configure.log" | awk '{print $5}')
  echo "    hip backend          $libdir/libqattn_hip.so, $plat platform$([ "$plat" = nvidia ] && echo " (CUDA toolkit, SM $(cache QATTN_HIP_CUDA_ARCHS))")"
else
  left+=("hip backend: $(reason 'HIP backend runtime off')")
fi
if [ "$plat" = amd ]; then
  echo "    AMD code objects     $(cache QATTN_HIP_TARGETS | tr ';' ' '), embedded in libqattn_hip"
elif [ -n "$(cache QATTN_AMDGPU_CLANG | grep -v NOTFOUND)" ]; then
  left+=("AMD code objects: built by $(cache QATTN_AMDGPU_CLANG) but not installed: only the AMD platform's HIP library (ROCm's runtime, absent here) embeds them")
else
  left+=("AMD code objects: no ROCm HIP runtime here to embed them in, and no clang here that targets $(cache QATTN_HIP_TARGETS | tr ';' ' ')")
fi
echo "    qattn-bench          $prefix/bin/qattn-bench"
echo "    headers              $prefix/include/qattn/"
echo "    CMake package        $libdir/cmake/qattn/ (find_package(qattn): qattn::core$(have qattn_vulkan && echo ' qattn::vulkan')$(have qattn_hip && echo ' qattn::hip'))"
echo "    pkg-config           $(cd "$libdir/pkgconfig" && ls *.pc | tr '\n' ' ')in $libdir/pkgconfig"
echo "    Python package       $prefix/$pyrel/qattn"
if [ ${#left[@]} -gt 0 ]; then
  echo "  left out:"
  for l in "${left[@]}"; do echo "    $l"; done
fi
pypath=$prefix/$pyrel
on_path=$(python3 -c 'import os, sys; d = os.path.realpath(sys.argv[1]); print(int(any(os.path.realpath(p) == d for p in sys.path if p)))' "$pypath")
echo "  use:"
if [ "$on_path" = 1 ]; then
  echo "    python3 -c 'import qattn'            (python3 already searches $pypath)"
else
  echo "    export PYTHONPATH=$pypath"
fi
echo "    C programs: CMAKE_PREFIX_PATH=$prefix, or PKG_CONFIG_PATH=$libdir/pkgconfig; at run time"
echo "    the libraries are found through LD_LIBRARY_PATH=$libdir or -Wl,-rpath,$libdir"
echo
echo "== python3 -m qattn (the installed package)"
PYTHONPATH=$pypath${PYTHONPATH:+:$PYTHONPATH} python3 -m qattn
