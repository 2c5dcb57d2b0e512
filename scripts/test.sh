#!/usr/bin/env bash
# The whole test suite, set-up included: what .ci/run executes and what a
# developer runs. On a host without the toolchain (Debian 12) it builds or
# reuses the cached Debian 13 root (scripts/toolchain.sh) and runs inside it.
#
#   scripts/test.sh            default suite (core, reference, planners,
#                              Vulkan on lavapipe with validation, HIP code
#                              objects, install + consumer), then the core and
#                              cpu-backend tests again under ASan/UBSan; then,
#                              on the host itself, the product built with the
#                              host's compiler, installed and consumed
#                              (scripts/host-package-test.sh)
#   scripts/test.sh --full     also the large sweeps (ctest label "full")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/toolchain.sh scripts/test-in-toolchain.sh "$@"
if [ "${QATTN_IN_TOOLROOT:-}" != 1 ]; then
  echo "== the host's own build: libraries, glibc versions, consumers (scripts/host-package-test.sh)"
  scripts/host-package-test.sh build/host
fi
