# Issue 24 item 0 on the H200: decode over a bf16 cache in FlashInfer's
# combined layout at the full size (tests/big_cache/combined_bf16.c):
# one 8 GiB tensor [pages, 2, P, 4, 256], each view spanning just under 2^32
# elements (past 4 GiB of bytes), 128 requests of 16384 keys reading every
# page, GQA 4, page sizes 1, 8 and 16, on the Vulkan backend and the HIP
# twin, against the cpu reference. Before the fix the HIP kernel formed byte
# offsets in 32 bits and was off by up to 0.095 (o) and 0.05 (lse); the
# Vulkan kernel's per-key path (page sizes 1 and 8) had the same 32-bit
# byte offset. Pass: each log's case line starts with "ok", the last line
# is "big_cache: passed", exit 0. The bad-input cases (items 2, 3,
# 5) run in 20-hardening.sh's hardening_bad_inputs_core.
# BIG_REQUESTS=N checks only the first N requests (the cache stays full size
# and its pages still spread over all of it: the log's last line names the
# highest page read); BIG_PARALLEL=1 runs the Vulkan and HIP cases together.
req=${BIG_REQUESTS:+--requests $BIG_REQUESTS}
for p in 1 8 16; do
  step combined_bf16_vk_p$p 480 "$B/tests/qattn_big_cache" --backend vulkan --layout combined --full --page $p $req
done
[ "${BIG_PARALLEL:-0}" = 1 ] || wait_steps
for p in 1 8 16; do
  [ -x "$H/qattn_big_cache" ] &&
    step combined_bf16_hip_p$p 480 "$H/qattn_big_cache" --backend hip --layout combined --full --page $p $req
done
wait_steps
TAIL=4 report combined_bf16_vk_p1 combined_bf16_vk_p8 combined_bf16_vk_p16 \
  combined_bf16_hip_p1 combined_bf16_hip_p8 combined_bf16_hip_p16
