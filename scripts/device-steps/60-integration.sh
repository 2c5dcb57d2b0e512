# Issue 28: a real model decoding through qattn, and its end-to-end speed,
# on torch CUDA tensors through the HIP backend's NVIDIA twin (shared
# libraries in $H/lib, made by backend_hip/device-build-hip.sh). Sourced by
# scripts/device-run.sh after 30-python.sh; also runs alone:
#   OUT=/tmp/o bash scripts/device-steps/60-integration.sh   (carry .devbuild/hipbin)
# Steps:
#   integ_torch        (alone only: device-run.sh has it as python_torch) pytest
#                      python/tests/test_torch.py on CPU and CUDA tensors
#                      (opcheck on each op on both devices, fakes, compile)
#   integ_transformers pytest test_integration_transformers.py (Llama, Qwen2,
#                      Qwen3 configs: 2 layers, GQA 4, head dim 128, random
#                      weights: per-step logits within fp8 tolerance of the
#                      bf16 cache + SDPA model, greedy tokens where the margin
#                      is clear, generate(), a corrupted cache failing) and
#                      test_integration_paged_kv.py; -s prints each model's
#                      worst logit difference
#   integ_example      python/examples/transformers_decode.py, llama and qwen3:
#                      "transformers_decode: PASS"
#   e2e_transformers   bench/e2e_transformers.py: decode tokens/s at batch 16,
#                      32K context, GQA 4, head dim 128, 4 layers; qattn vs the
#                      bf16 caches with SDPA, attention's share of the step;
#                      $OUT/e2e_transformers.json and the table in the log
#                      (docs/perf.md takes it)
if ! declare -f step >/dev/null; then  # alone: the helpers of scripts/device-run.sh, minimal
  set -uo pipefail
  OUT=${OUT:-/tmp/qattn-device-out}; mkdir -p "$OUT"
  H=${H:-.devbuild/hipbin}; failed=0; steps=()
  step() { local n=$1 l=$2; shift 2; ( t0=$SECONDS; timeout "$l" stdbuf -oL -eL "$@" >"$OUT/$n.log" 2>&1
           echo "$? $((SECONDS - t0))" >"$OUT/$n.rc" ) & steps+=($!); }
  wait_steps() { for p in ${steps[@]+"${steps[@]}"}; do wait "$p"; done; steps=(); }
  report() { for n in "$@"; do [ -f "$OUT/$n.rc" ] || continue; read -r rc s <"$OUT/$n.rc"
             echo "== $n: exit $rc after $s s"; tail -n "${TAIL:-6}" "$OUT/$n.log"; [ "$rc" = 0 ] || failed=1
             { echo "==== $n: exit $rc after $s s"; cat "$OUT/$n.log"; } >>"$OUT/all_logs.txt"
             rm -f "$OUT/$n.log" "$OUT/$n.rc"; done; }
  _integ_alone=1
fi
if [ -f "$H/lib/libqattn_hip.so.0.1" ]; then
  export QATTN_LIBRARY_DIR=$PWD/$H/lib
  ipath=python${PYTHONPATH:+:$PYTHONPATH}
  if ! python3 -c 'import pytest' 2>/dev/null && ls "$H"/pydeps/*.deb >/dev/null 2>&1; then
    rm -rf /tmp/qattn-pydeps
    for d in "$H"/pydeps/*.deb; do dpkg -x "$d" /tmp/qattn-pydeps; done
    ipath=$ipath:/tmp/qattn-pydeps/usr/lib/python3/dist-packages
  fi
  iver="python3 -c 'import sys, torch, transformers; print(\"python\", sys.version.split()[0], \"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"transformers\", transformers.__version__, \"gpu\", torch.cuda.get_device_name())'"
  ipy="env PYTHONPATH=$ipath PYTHONDONTWRITEBYTECODE=1"
  if [ -n "${_integ_alone:-}" ]; then  # (device-run.sh runs it in 30-python.sh's python_torch)
    step integ_torch 300 $ipy bash -c "$iver; QATTN_PYTEST_REQUIRE=cpu,hip,torch \
      python3 -m pytest -p no:cacheprovider -rs -v python/tests/test_torch.py"
    wait_steps
    TAIL=30 report integ_torch
  fi
  step integ_transformers 400 $ipy bash -c "$iver; QATTN_PYTEST_REQUIRE=cpu,hip,torch,transformers \
    python3 -m pytest -p no:cacheprovider -rs -v -s python/tests/test_integration_transformers.py \
    python/tests/test_integration_paged_kv.py"
  wait_steps
  TAIL=40 report integ_transformers
  step integ_example 200 $ipy bash -c "$iver; python3 python/examples/transformers_decode.py && \
    python3 python/examples/transformers_decode.py --arch qwen3"
  wait_steps
  TAIL=12 report integ_example
  step e2e_transformers 500 $ipy bash -c "$iver; nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv; \
    python3 bench/e2e_transformers.py --json $OUT/e2e_transformers.json"
  wait_steps
  TAIL=16 report e2e_transformers
else
  echo "== integration: no $H/lib/libqattn_hip.so.0.1 (backend_hip/device-build-hip.sh makes it): skipped"
  [ -n "${_integ_alone:-}" ] && failed=1
fi
if [ -n "${_integ_alone:-}" ]; then exit $failed; fi
