#!/usr/bin/env bash
# Issue 24 item 6: two scripts/toolchain.sh runs that both find no root
# build it once between them. Two `scripts/toolchain.sh --root` start
# together on an empty QATTN_TOOLROOT with mmdebstrap replaced by a stub
# that takes 2 s, fails if another build of the same target is under way or
# the target is not empty (as mmdebstrap refuses a non-empty directory), and
# counts its runs. Pass: both exit 0 and print the root, the stub ran once,
# no .partial is left. Needs root (building a root does); 77 otherwise.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root, as building the toolchain root does"; exit 77; }
command -v flock >/dev/null || { echo "FAIL: no flock"; exit 1; }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/bin"
cat >"$t/bin/mmdebstrap" <<'STUB'
#!/usr/bin/env bash
# mmdebstrap --variant=apt --include=LIST SUITE TARGET MIRROR
target=$4
echo run >>"$STUB_DIR/runs"
if ! mkdir "$STUB_DIR/building" 2>/dev/null; then echo "stub: another build is under way" >&2; exit 1; fi
if [ -e "$target" ] && [ -n "$(ls -A "$target")" ]; then echo "stub: $target is not empty" >&2; exit 1; fi
mkdir -p "$target/usr/bin"
sleep 2
[ -d "$target" ] || { echo "stub: $target vanished under the build" >&2; exit 1; }
touch "$target/usr/bin/cmake"
rmdir "$STUB_DIR/building"
STUB
chmod +x "$t/bin/mmdebstrap"
export STUB_DIR=$t QATTN_TOOLROOT=$t/cache/root PATH=$t/bin:$PATH
"$here/scripts/toolchain.sh" --root >"$t/out1" 2>"$t/err1" &
p1=$!
"$here/scripts/toolchain.sh" --root >"$t/out2" 2>"$t/err2" &
p2=$!
wait $p1; rc1=$?
wait $p2; rc2=$?
fail=0
for i in 1 2; do
  rc=$((i == 1 ? rc1 : rc2))
  echo "== run $i: exit $rc, printed $(cat "$t/out$i")"
  sed 's/^/   /' "$t/err$i"
  [ "$rc" = 0 ] || fail=1
  [ "$(cat "$t/out$i")" = "$QATTN_TOOLROOT" ] || fail=1
done
runs=$(wc -l <"$t/runs" 2>/dev/null || echo 0)
echo "mmdebstrap ran $runs time(s)"
[ "$runs" = 1 ] || fail=1
[ -f "$QATTN_TOOLROOT/usr/bin/cmake" ] || { echo "no root at $QATTN_TOOLROOT"; fail=1; }
[ ! -e "$QATTN_TOOLROOT.partial" ] || { echo "a .partial was left"; fail=1; }
[ $fail = 0 ] && echo "toolchain_lock: passed" || echo "toolchain_lock: FAILED"
exit $fail
