# Issue 19: the Python package on torch CUDA tensors through the HIP
# backend's NVIDIA twin (shared libraries in $H/lib, made by
# backend_hip/device-build-hip.sh). Sourced by scripts/device-run.sh.
#   python_torch     pytest python/tests/test_torch.py: decode (vLLM layout,
#                    read in place), KV store and MQA logits against float64,
#                    CUDA-graph replay with fresh inputs, torch.compile
#                    fullgraph, the custom op's schema and fake; and
#                    test_torch_paged_mqa.py, the same for paged MQA logits
#                    (DeepGEMM's fused cache read in place, graph replay with
#                    fresh lengths); its last line is pytest's count ("N passed").
#   python_safety    pytest python/tests/test_threads.py, test_lifetime.py,
#                    test_bad_args.py, test_layout.py (issue 24) and
#                    test_paged_mqa.py's fresh_ctx cases on the HIP
#                    backend (numpy operands, staged) and cpu: threads
#                    sharing one context, plans freed when dropped, bad
#                    scalars / ranks / closed contexts named, the ctypes
#                    structs against qattn.h (skipped without a C compiler);
#                    last line pytest's count. (test_torch.py's
#                    test_threads_torch and test_bad_args_torch, the same on
#                    torch tensors, run in python_torch.)
#   python_vllm      python/examples/vllm_decode.py: "vllm_decode: PASS".
#   python_overhead  python/examples/overhead.py: per-call microseconds, and
#                    "overhead: python adds X us per eager call".
# Each log starts with the versions seen (python, torch, CUDA, numpy, pytest)
# and what the HIP library links.
if [ -f "$H/lib/libqattn_hip.so.0.1" ]; then
  export QATTN_LIBRARY_DIR=$PWD/$H/lib
  py_pre() {
    echo "python: $(python3 -c 'import sys; print(sys.version.split()[0])' 2>&1)"
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available() and torch.cuda.get_device_name())' 2>&1
    python3 -c 'import numpy; print("numpy", numpy.__version__)' 2>&1
    ldd "$QATTN_LIBRARY_DIR/libqattn_hip.so.0.1" 2>&1 | sed 's/^/  /'
  }
  # pytest: the machine's, else the Debian packages carried in $H/pydeps
  # (on these steps' path only, so nothing else sees their versions)
  pypath=python${PYTHONPATH:+:$PYTHONPATH}
  if ! python3 -c 'import pytest' 2>/dev/null && ls "$H"/pydeps/*.deb >/dev/null 2>&1; then
    rm -rf /tmp/qattn-pydeps
    for d in "$H"/pydeps/*.deb; do dpkg -x "$d" /tmp/qattn-pydeps; done
    pypath=$pypath:/tmp/qattn-pydeps/usr/lib/python3/dist-packages
  fi
  step python_torch 300 env PYTHONPATH="$pypath" bash -c "$(declare -f py_pre); py_pre; python3 -c 'import pytest; print(\"pytest\", pytest.__version__)' && \
    python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else \"torch sees no GPU\")' && \
    QATTN_PYTEST_REQUIRE=hip PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -p no:cacheprovider -rs -v \
    python/tests/test_torch.py python/tests/test_torch_paged_mqa.py"
  wait_steps
  TAIL=40 report python_torch
  step python_safety 300 env PYTHONPATH="$pypath" bash -c "$(declare -f py_pre); py_pre; python3 -c 'import pytest; print(\"pytest\", pytest.__version__)' && \
    QATTN_PYTEST_REQUIRE=hip PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -p no:cacheprovider -rs -v \
    python/tests/test_threads.py python/tests/test_lifetime.py python/tests/test_bad_args.py \
    python/tests/test_layout.py python/tests/test_paged_mqa.py"
  wait_steps
  TAIL=40 report python_safety
  step python_vllm 120 env PYTHONPATH="$pypath" bash -c "$(declare -f py_pre); py_pre; python3 python/examples/vllm_decode.py"
  wait_steps
  TAIL=8 report python_vllm
  step python_overhead 120 env PYTHONPATH="$pypath" python3 python/examples/overhead.py
  wait_steps
  TAIL=20 report python_overhead
else
  echo "== python: no $H/lib/libqattn_hip.so.0.1 (backend_hip/device-build-hip.sh makes it): skipped"
fi
