"""A stand-in for a context's ctypes library (ctx._lib) that watches the
calls reaching the C library, for the thread and lifetime tests.

Every call of a function taking the qattn_context (CONTEXT_CALLS) counts as
"in use" from entry to return; `max_in_use` is the most calls that were in
use at once. The C API allows a context on one thread at a time, so any
value above 1 is two threads inside the context together. `hold` seconds
are slept inside each call (the GIL released) so that a second thread
reaching the context while one is inside is seen, not left to timing.

Buffers: `live_buffers` counts qattn_buffer_alloc / _wrap successes minus
qattn_buffer_free calls, i.e. the C buffers the context holds for the
package (what a leak of plans or DeviceArrays would grow)."""
import threading
import time

CONTEXT_CALLS = frozenset((
    "qattn_context_free", "qattn_last_error", "qattn_backend_name", "qattn_buffer_alloc",
    "qattn_buffer_wrap", "qattn_buffer_free", "qattn_buffer_upload", "qattn_buffer_download",
    "qattn_synchronize", "qattn_last_op_time_ms", "qattn_get_caps", "qattn_decode_plan_create",
    "qattn_decode_run", "qattn_kv_store", "qattn_mqa_logits_plan_create",
    "qattn_mqa_logits_run", "qattn_paged_mqa_logits_plan_create", "qattn_paged_mqa_logits_run",
    "qattn_hip_set_stream"))


class LibSpy:
    def __init__(self, lib, hold=0.0):
        self._lib, self.hold = lib, hold
        self._m = threading.Lock()
        self.in_use = self.max_in_use = self.calls = 0
        self.live_buffers = 0
        self.buffers_allocated = 0
        self.by_name = {}

    def __getattr__(self, name):
        f = getattr(self._lib, name)
        if name not in CONTEXT_CALLS:
            return f
        spy = self

        def call(*args):
            with spy._m:
                spy.in_use += 1
                spy.calls += 1
                spy.max_in_use = max(spy.max_in_use, spy.in_use)
                spy.by_name[name] = spy.by_name.get(name, 0) + 1
            try:
                if spy.hold:
                    time.sleep(spy.hold)
                rc = f(*args)
                if name in ("qattn_buffer_alloc", "qattn_buffer_wrap") and rc == 0:
                    with spy._m:
                        spy.live_buffers += 1
                        spy.buffers_allocated += 1
                elif name == "qattn_buffer_free" and args[1]:
                    with spy._m:
                        spy.live_buffers -= 1
                return rc
            finally:
                with spy._m:
                    spy.in_use -= 1
        return call


def spy_on(ctx, hold=0.0):
    """Installs a LibSpy as ctx._lib (before any plan of ctx is made: plans
    keep the library they were made with) and returns it."""
    spy = LibSpy(ctx._lib, hold)
    ctx._lib = spy
    return spy

