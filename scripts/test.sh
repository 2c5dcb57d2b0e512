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
#                              (scripts/host-package-test.sh), and
#                              scripts/install.sh into a temporary prefix
#                              with the README's Python block run against it
#   scripts/test.sh --full     also the large sweeps (ctest label "full")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/toolchain.sh scripts/test-in-toolchain.sh "$@"
if [ "${QATTN_IN_TOOLROOT:-}" != 1 ]; then
  echo "== the host's own build: libraries, glibc versions, consumers (scripts/host-package-test.sh)"
  scripts/host-package-test.sh build/host
  # A user's install (issue 28): scripts/install.sh into a fresh prefix, then
  # the README's Python block against that prefix with the host's python3.
  echo "== scripts/install.sh --prefix <tmp>, then the README's Python block against it"
  prefix=$(mktemp -d /tmp/qattn-install.XXXXXX)
  scripts/install.sh --prefix "$prefix" --build-dir build/install-ci
  py=python3
  if ! $py -c 'import numpy' 2>/dev/null; then
    py=/usr/bin/python3  # Debian's, which apt's python3-numpy serves
    if ! $py -c 'import numpy' 2>/dev/null && [ "$(id -u)" = 0 ]; then
      apt-get install -y -q python3-numpy >/dev/null || { apt-get update -qq && apt-get install -y -q python3-numpy >/dev/null; }
    fi
  fi
  sed -n '/^## Python/,/^## Status/p' README.md | sed -n '/^```python$/,/^```$/p' | sed '1d;$d' \
    >build/readme-installed.py
  (cd /tmp && PYTHONPATH=$(ls -d "$prefix"/lib/python3*/*-packages) $py "$OLDPWD/build/readme-installed.py")
  echo "the README's Python block ran against the package scripts/install.sh installed"
  rm -rf "$prefix"
fi
