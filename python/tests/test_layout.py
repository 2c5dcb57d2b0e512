"""The ctypes structs of python/qattn/_lib.py, hand-copied from
core/include/qattn/qattn.h, against what the C compiler says of the header
(issue 24, item 10): for every struct its size and alignment, for every
field its offset and size. A C program generated from the ctypes field
lists (so a field renamed in C does not compile, one moved or resized
shows) is compiled with the toolchain's compiler and run.

pytest runs it (the compiler: $CC, else cc / gcc / clang on PATH; skipped,
saying so, where there is none, unless QATTN_PYTEST_REQUIRE has "layout");
ctest runs it too, as a script with the build's compiler
(python/CMakeLists.txt: python_struct_layout):

    python3 python/tests/test_layout.py --cc /usr/bin/cc [--include DIR]
"""
import argparse
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
INCLUDE = os.path.join(ROOT, "core", "include")

try:
    from qattn import _lib as L
except ImportError:  # run as a script from the source tree
    sys.path.insert(0, os.path.dirname(HERE))
    from qattn import _lib as L

# C name -> the ctypes struct that copies it
STRUCTS = {
    "qattn_tensor": L.Tensor,
    "qattn_context_options": L.ContextOptions,
    "qattn_matrix_shape": L.MatrixShape,
    "qattn_device_caps": L.DeviceCaps,
    "qattn_decode_args": L.DecodeArgs,
    "qattn_decode_options": L.DecodeOptions,
    "qattn_decode_plan": L.DecodePlan,
    "qattn_kv_store_args": L.KvStoreArgs,
    "qattn_mqa_logits_args": L.MqaLogitsArgs,
    "qattn_mqa_logits_options": L.MqaLogitsOptions,
    "qattn_mqa_logits_plan": L.MqaLogitsPlan,
    "qattn_paged_mqa_logits_args": L.PagedMqaLogitsArgs,
    "qattn_paged_mqa_logits_options": L.PagedMqaLogitsOptions,
    "qattn_paged_mqa_logits_plan": L.PagedMqaLogitsPlan,
}
# The #defines the binding copies as constants, checked the same way.
CONSTANTS = {"QATTN_MAX_RANK": L.MAX_RANK, "QATTN_REASON_BYTES": L.REASON_BYTES,
             "QATTN_MAX_MATRIX_SHAPES": L.MAX_MATRIX_SHAPES}


def c_program():
    """C source printing one line per struct, field and constant."""
    out = ["#include <stdalign.h>", "#include <stddef.h>", "#include <stdio.h>",
           '#include "qattn/qattn.h"', "", "#define FIELD(S, F) printf(\"%s.%s %zu %zu\\n\", "
           "#S, #F, offsetof(S, F), sizeof(((S *)0)->F))", "int main(void) {"]
    for cname, py in STRUCTS.items():
        out.append('    printf("%s %%zu %%zu\\n", sizeof(%s), alignof(%s));' %
                   (cname, cname, cname))
        for fname, _ in py._fields_:
            out.append("    FIELD(%s, %s);" % (cname, fname))
    for name in CONSTANTS:
        out.append('    printf("%s %%d\\n", (int)(%s));' % (name, name))
    out += ["    return 0;", "}", ""]
    return "\n".join(out)


def ctypes_layout():
    lay = {}
    for cname, py in STRUCTS.items():
        lay[cname] = (ctypes.sizeof(py), ctypes.alignment(py))
        for fname, _ in py._fields_:
            f = getattr(py, fname)
            lay["%s.%s" % (cname, fname)] = (f.offset, f.size)
    for name, v in CONSTANTS.items():
        lay[name] = (v,)
    return lay


def c_layout(cc, include=INCLUDE, workdir=None):
    """What the compiler says: {name: (numbers...)}; raises on a compile
    error (a field the header does not have)."""
    own = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="qattn-layout-")
    try:
        src, exe = os.path.join(workdir, "layout.c"), os.path.join(workdir, "layout")
        with open(src, "w") as f:
            f.write(c_program())
        r = subprocess.run([cc, "-std=c11", "-I", include, "-o", exe, src],
                           capture_output=True, text=True)
        if r.returncode:
            raise AssertionError("the layout program does not compile against %s (a field "
                                 "the header lacks?):\n%s" % (include, r.stderr[-3000:]))
        text = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    lay = {}
    for line in text.splitlines():
        name, *nums = line.split()
        lay[name] = tuple(int(n) for n in nums)
    return lay


def mismatches(c, py):
    """Lines naming each struct, field or constant whose layout differs."""
    bad = []
    for name in sorted(py):
        what = "size, alignment" if "." not in name and len(py[name]) == 2 else \
            "offset, size" if "." in name else "value"
        if c.get(name) != py[name]:
            bad.append("%s: C has %s %s, _lib.py %s" % (name, what, c.get(name), py[name]))
    return bad


def find_cc():
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang", "clang-19"):
        if cand and shutil.which(cand.split()[0]):
            return cand
    return None


def need_cc():
    cc = find_cc()
    if cc is None:
        if "layout" in os.environ.get("QATTN_PYTEST_REQUIRE", "").split(","):
            raise AssertionError("QATTN_PYTEST_REQUIRE has layout but there is no C compiler")
        import pytest
        pytest.skip("skipped: no C compiler ($CC, cc, gcc, clang) to read the header's layout")
    if not os.path.exists(os.path.join(INCLUDE, "qattn", "qattn.h")):
        import pytest
        pytest.skip("skipped: no core/include/qattn/qattn.h beside these tests")
    return cc


def test_struct_layouts_match_the_c_header(tmp_path):
    """Every copied struct: size, alignment, each field's offset and size."""
    bad = mismatches(c_layout(need_cc(), workdir=str(tmp_path)), ctypes_layout())
    assert not bad, "python/qattn/_lib.py differs from qattn.h:\n" + "\n".join(bad)


def test_layout_check_sees_a_moved_field(tmp_path):
    """The check can fail: a copy of the header with two fields of
    qattn_decode_args swapped (window_left before sm_scale) and one with a
    field of qattn_tensor widened each give mismatches naming them."""
    cc = need_cc()
    hdr = open(os.path.join(INCLUDE, "qattn", "qattn.h")).read()
    cases = {
        "moved": (r"(    float sm_scale;\n)(    int32_t window_left;[^\n]*\n)", r"\2\1",
                  ["qattn_decode_args.sm_scale", "qattn_decode_args.window_left"]),
        "widened": (r"int32_t rank; ", "int64_t rank; ",
                    ["qattn_tensor.rank", "qattn_tensor.shape", "qattn_decode_args.k_cache"]),
    }
    for case, (pat, rep, names) in cases.items():
        edited, n = re.subn(pat, rep, hdr)
        assert n == 1, "%s: the header no longer has the text this case edits" % case
        inc = tmp_path / case
        (inc / "qattn").mkdir(parents=True)
        (inc / "qattn" / "qattn.h").write_text(edited)
        bad = mismatches(c_layout(cc, str(inc), str(inc)), ctypes_layout())
        for name in names:
            assert any(b.startswith(name + ":") for b in bad), (case, name, bad)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cc", default=find_cc())
    ap.add_argument("--include", default=INCLUDE)
    a = ap.parse_args()
    if not a.cc:
        print("test_layout: no C compiler")
        return 1
    c, py = c_layout(a.cc, a.include), ctypes_layout()
    bad = mismatches(c, py)
    for b in bad:
        print("MISMATCH", b)
    print("test_layout: %d structs, %d fields and constants compared, %d mismatches" %
          (len(STRUCTS), len(py) - len(STRUCTS), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
