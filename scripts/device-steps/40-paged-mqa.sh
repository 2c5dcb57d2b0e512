# Issue 20, paged FP8 MQA logits (spec 5). Sourced by scripts/device-run.sh
# (uses its step, wait_steps and report). About 3 minutes of device time.
#
# 1. Parity of the op against the cpu reference: every case of
#    tests/parity/parity_paged_mqa_logits.c on Vulkan with the planner's
#    choice (-v: one "ok" line per case, with its plan) and with the variant
#    forced (--variant simt), and on the HIP twin (the portable HIP kernel on
#    the H200). Pass: each log ends "paged_mqa_logits N passed, 0 failed,
#    0 refused"; a "refused ... has no paged_mqa_logits op" line means a
#    build without the op and is not a pass.
# 2. Timing, alone on the GPU: the 20 paged presets of bench/presets.c
#    (every B x N at 32K, B1/B16 x N1/N8 at 128K, H64 D128, pages of 64) on
#    Vulkan. Each line ends with "matched" (64 sampled logits within the
#    spec's bound) and its "% mem / % mat floor, xR": R is the time over the
#    larger floor; issue 20's bar is R <= 1.4 on every line. Then the HIP
#    twin briefly on three presets (an NVIDIA number about the HIP code).
step pm_parity_vk 100 "$B/tests/qattn_parity" --backend vulkan --no-validation --op paged_mqa_logits -v
step pm_parity_vk_simt 100 "$B/tests/qattn_parity" --backend vulkan --no-validation --op paged_mqa_logits \
  --variant simt
[ -x "$H/qattn_parity" ] && step pm_parity_hip 100 "$H/qattn_parity" --backend hip --op paged_mqa_logits -v
wait_steps
TAIL=32 report pm_parity_vk pm_parity_vk_simt pm_parity_hip
step pm_bench_vk 150 "$B/bench/qattn-bench" --backend vulkan --seeds --op paged_mqa_logits --iters 10 \
  --warmup-ms 100
wait_steps
TAIL=30 report pm_bench_vk
[ -x "$H/qattn-bench" ] && step pm_bench_hip 60 "$H/qattn-bench" --backend hip \
  --preset paged_mqa_b1_n1_32k,paged_mqa_b16_n8_32k,paged_mqa_b64_n8_32k --iters 5 --warmup-ms 50 --read-mib 256
wait_steps
TAIL=10 report pm_bench_hip
