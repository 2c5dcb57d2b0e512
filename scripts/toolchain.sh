#!/usr/bin/env bash
# Runs a command with the toolchain this project needs.
#
#   scripts/toolchain.sh CMD [ARGS...]
#
# The project needs CMake >= 3.25, cmocka, Vulkan headers >= 1.3.255 with volk,
# a glslang that accepts GL_KHR_cooperative_matrix, clang >= 19 with the AMDGPU
# target and Mesa lavapipe. When this host has all of them, CMD runs here.
# Otherwise (Debian 12 lacks the last four) CMD runs inside a Debian 13 root
# built once with mmdebstrap and cached outside the checkout, with the checkout
# bind-mounted at the same path so build trees stay valid on either side.
#
#   scripts/toolchain.sh --root  prints the root's path (building it if missing),
#                                for scripts that take single tools from it
#
# Environment:
#   QATTN_TOOLROOT    where the cached root lives (default /var/cache/qattn/<tag>)
#   QATTN_DEBIAN_MIRROR  the Debian archive the root is built from (default: the
#                     first Debian archive in this host's apt sources, else
#                     http://deb.debian.org/debian)
#   QATTN_FORCE_ROOT  1 = use the root even if the host looks complete
#   QATTN_NO_ROOT     1 = never build or use the root (fail if tools are missing)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Package list of the root. Changing it changes the tag, so a stale cached root
# is never reused with a list it was not built from.
packages=(
  clang-19 lld-19 llvm-19 libamdhip64-dev rocm-device-libs-17
  glslang-tools spirv-tools cmake ninja-build pkgconf
  libcmocka-dev libvulkan-dev libvulkan-volk-dev
  mesa-vulkan-drivers vulkan-validationlayers gcc g++ libc6-dev
  libclang-rt-19-dev python3 python3-numpy python3-pytest
  python3-torch libtorch-dev python3-dev python3-setuptools python3-matplotlib
)
tag=debian13-$(printf '%s\n' "${packages[@]}" | sha256sum | cut -c1-12)
root=${QATTN_TOOLROOT:-/var/cache/qattn/$tag}

log() { printf 'toolchain: %s\n' "$*" >&2; }

host_has_tools() {
  command -v cmake >/dev/null || return 1
  local v; v=$(cmake --version | sed -n '1s/.* \([0-9]*\.[0-9]*\).*/\1/p')
  [ "$(printf '%s\n3.25\n' "$v" | sort -V | head -1)" = 3.25 ] || return 1
  pkg-config --exists cmocka 2>/dev/null || return 1
  [ -f /usr/include/volk.h ] || return 1
  local hdr=/usr/include/vulkan/vulkan_core.h
  [ -f "$hdr" ] || return 1
  local hv; hv=$(sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\)/\1/p' "$hdr")
  [ "${hv:-0}" -ge 255 ] || return 1
  command -v clang-19 >/dev/null || command -v clang-20 >/dev/null || return 1
  ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || return 1
  command -v glslangValidator >/dev/null || return 1
  local t; t=$(mktemp -d)
  printf '#version 450\n#extension GL_KHR_cooperative_matrix : require\n#extension GL_KHR_memory_scope_semantics : require\n#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\nlayout(local_size_x=32) in;\nvoid main(){ coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a; }\n' >"$t/p.comp"
  if ! glslangValidator --target-env vulkan1.3 -o "$t/p.spv" "$t/p.comp" >/dev/null 2>&1; then
    rm -rf "$t"; return 1
  fi
  rm -rf "$t"
}

# The Debian archive this host's apt already uses (deb822 .sources "URIs:"
# lines or one-line "deb URI suite" entries; security archives skipped), so
# the root comes from the same mirror, proxy or snapshot as the host.
debian_mirror() {
  if [ -n "${QATTN_DEBIAN_MIRROR:-}" ]; then echo "$QATTN_DEBIAN_MIRROR"; return; fi
  local f u
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    u=$(sed -n -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' "$f" |
        tr ' ' '\n' | grep -E '^https?://' | grep -E '/debian/?$' | head -1)
    if [ -n "$u" ]; then echo "${u%/}"; return; fi
  done
  echo http://deb.debian.org/debian
}

# Builds the root unless it exists. Runs started together (two scripts/test.sh
# on a fresh machine) take $root.lock in turn: the first builds, the others
# wait for it and then find the finished root, so no two ever write the same
# $root.partial. The lock is released when this process exits, so a killed
# build leaves a stale .partial that the next holder removes, never a held lock.
build_root() {
  [ "$(id -u)" = 0 ] || { log "building the Debian 13 root needs root"; exit 1; }
  mkdir -p "$(dirname "$root")"
  exec 9>"$root.lock"
  if ! flock -n 9; then
    log "another run is building $root; waiting for it"
    flock 9
  fi
  if [ -f "$root/usr/bin/cmake" ]; then
    log "using $root (built by another run while this one waited)"
    exec 9>&-
    return
  fi
  if ! command -v mmdebstrap >/dev/null; then
    log "installing mmdebstrap"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >&2
  fi
  local tmp=$root.partial
  rm -rf "$tmp"
  log "building $root (once; about a minute plus downloads)"
  local inc; inc=$(IFS=,; echo "${packages[*]}")
  local mirror; mirror=$(debian_mirror)
  log "mirror $mirror (from this host's apt sources unless QATTN_DEBIAN_MIRROR is set)"
  mmdebstrap --variant=apt --include="$inc" trixie "$tmp" "$mirror" >&2
  mv "$tmp" "$root"
  exec 9>&-
}

run_in_root() {
  [ -f "$root/usr/bin/cmake" ] || build_root
  # A private mount namespace: the bind mounts vanish with the command, so a
  # killed run leaves nothing mounted on the host.
  local cwd; cwd=$(pwd)
  local q; q=$(printf '%q ' "$@")
  exec unshare -m bash -c "
    set -e
    mkdir -p '$root$here' '$root/proc' '$root/dev' '$root/tmp'
    mount --bind '$here' '$root$here'
    mount -t proc proc '$root/proc'
    mount --rbind /dev '$root/dev'
    exec chroot '$root' /usr/bin/env -i PATH=/usr/lib/llvm-19/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      HOME=/root TERM=\${TERM:-dumb} CI=\${CI:-} QATTN_IN_TOOLROOT=1 \
      \$(env | grep -E '^(QATTN_|VK_|SEED=)' | tr '\n' ' ') \
      bash -c 'cd \"\$0\" && exec \"\$@\"' '$cwd' $q
  "
}

if [ $# -eq 0 ]; then
  echo "usage: $0 CMD [ARGS...] | --root | --mirror" >&2; exit 2
fi
if [ "$1" = --root ]; then
  [ -f "$root/usr/bin/cmake" ] || build_root
  echo "$root"; exit 0
fi
if [ "$1" = --mirror ]; then
  debian_mirror; exit 0
fi

if [ "${QATTN_IN_TOOLROOT:-}" = 1 ] || { [ "${QATTN_FORCE_ROOT:-}" != 1 ] && host_has_tools; }; then
  exec "$@"
fi
if [ "${QATTN_NO_ROOT:-}" = 1 ]; then
  log "this host lacks the toolchain and QATTN_NO_ROOT=1 forbids the Debian 13 root"; exit 1
fi
run_in_root "$@"
