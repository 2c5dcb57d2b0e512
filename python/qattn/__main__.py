"""python3 -m qattn: the package and library versions, the backends whose
libraries load, and the device each one opens (or why not)."""
import sys

import qattn
from qattn import _lib


def main():
    print("qattn package %s, library %s (%s)" % (qattn.__version__, qattn.library_version(),
                                               _lib._find("qattn_core")))
    rc = 1
    for name in ("hip", "vulkan", "cpu"):
        if not _lib.backend(name):
            print("  %-6s not available: %s" % (name, _lib.backend_error(name) or "not built"))
            continue
        try:
            with qattn.Context(backend=name) as ctx:
                c = ctx.caps
                print("  %-6s device %r, arch %s, %d compute units" %
                      (name, c["device_name"], c["arch"], c["compute_units"]))
                rc = 0
        except qattn.QattnError as e:
            print("  %-6s no device: %s" % (name, e))
    return rc


if __name__ == "__main__":
    sys.exit(main())
