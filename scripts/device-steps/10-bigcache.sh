# Issue 16 item 3: caches over 2^31 (and 2^32) elements on the H200, the
# Vulkan backend and the HIP twin, against the cpu reference
# (tests/big_cache/big_cache.c). Each run tries the `large` size (every cache
# tensor spans more than 2^32 elements, 4.6-4.8 GB per allocation) and falls
# back to `medium` (over 2^31) only if the device refuses the allocation; the
# log says which ran. Pass: every case line starts with "ok", the last line
# is "big_cache: passed", and the step's exit status is 0. A "note ... did
# not allocate" line names the refused size and the device's reason; the
# store and decode parts are separate steps, so a decode kernel without
# 64-bit page bases fails only the *_decode steps: at this commit both
# decode kernels still form 32-bit page offsets, and the `large` paged case
# of bigcache_vk_decode and bigcache_hip_decode fails ("FAIL
# big_cache/decode/paged/large: o[...]") until the rewritten kernels take
# qattn_cache_kernel_view's 64-bit bases; the *_store steps must pass.
step bigcache_vk_store 150 "$B/tests/qattn_big_cache" --backend vulkan --part store
step bigcache_vk_decode 150 "$B/tests/qattn_big_cache" --backend vulkan --part decode
wait_steps
[ -x "$H/qattn_big_cache" ] && step bigcache_hip_store 150 "$H/qattn_big_cache" --backend hip --part store
[ -x "$H/qattn_big_cache" ] && step bigcache_hip_decode 150 "$H/qattn_big_cache" --backend hip --part decode
wait_steps
TAIL=12 report bigcache_vk_store bigcache_vk_decode bigcache_hip_store bigcache_hip_decode
