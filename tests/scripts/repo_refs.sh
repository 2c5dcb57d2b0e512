#!/usr/bin/env bash
# Issue 24 item 8: every fact the product relies on lives in the repository.
# Fails when a header, source, doc, script or build file (docs/runs/, logs
# of GPU runs, aside) names a file outside the repository (the notes beside
# a checkout: ../shared, shared/notes, /work/...), or names a scripts/*.sh
# or scripts/*.py, docs/*.md, tests/*.c or tests/*.cmake file the tree does not
# have (docs/hardening.md cited a deleted script).
set -uo pipefail
top=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$top" || exit 1
excl=(--exclude-dir=.git --exclude-dir='build*' --exclude-dir=runs --exclude-dir=.devbuild --exclude-dir=.gl
      --exclude-dir=__pycache__ --exclude=repo_refs.sh)
fail=0
out=$(grep -rInE "(\.\./shared|shared/(notes|spec|tools)|/work/(shared|main|h-))" "${excl[@]}" . || true)
if [ -n "$out" ]; then
  echo "FAIL: references to files outside the repository:"
  echo "$out"
  fail=1
fi
missing=""
while IFS= read -r hit; do
  file=${hit%%:*}
  ref=${hit#*:}
  [ -e "$ref" ] || [ -e "$(dirname "$file")/$ref" ] || missing+="$file: $ref"$'\n'
done < <(grep -rIoE "(scripts/[A-Za-z0-9_.-]+\.(sh|py)|docs/[A-Za-z0-9_.-]+\.md|tests/[A-Za-z0-9_/.-]+\.(c|cmake))" \
           "${excl[@]}" . | sed 's|^\./||' | sort -u)
if [ -n "$missing" ]; then
  echo "FAIL: references to files the repository does not have:"
  printf '%s' "$missing"
  fail=1
fi
[ $fail = 0 ] && echo "repo_refs: passed" || echo "repo_refs: FAILED"
exit $fail
