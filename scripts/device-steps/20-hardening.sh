# Issue 18 on the H200 (Vulkan, no validation layer there).
# - hardening_threads_1..5: tests/test_vk_contexts five times, each with the
#   issue's crash shape (2 threads x 6 rounds of create / KV store + decode
#   checked against the cpu reference / destroy; before the shared instance
#   it died with SIGSEGV in 5 of 5 runs), plus its other parts (contexts in
#   interleaved order, 2 threads freeing while the other runs, two live
#   contexts sharing one VkInstance); hardening_threads_big: 8 threads x 12
#   rounds. Pass: exit 0 and the last line "vk_contexts: ... passed"; a
#   crash shows as exit 139 (SIGSEGV) or 134.
# - hardening_bad_inputs_core / _decode: the bad-input script with every
#   device decode plan pinned to the matrix (cooperative-matrix) variant.
#   Pass: exit 0, the first line "device decode plans: variant matrix
#   (pinned)", every case "ok" and "0 case run(s) failed". A device that
#   could not run the matrix variant would fail every case with
#   QATTN_ERR_VARIANT_GATE, so a pass means the matrix kernel met the bad
#   indices.
# - hardening_embed: tests/test_vk_hardening (edited plans refused by the
#   warm-up, pipeline-cache files, handles of another instance). Pass: exit
#   0 and "vk_hardening: ... passed".
for i in 1 2 3 4 5; do
  step hardening_threads_$i 240 env QATTN_TEST_VALIDATION=0 QATTN_TEST_THREADS=2 QATTN_TEST_ROUNDS=6 \
    "$B/tests/test_vk_contexts"
done
step hardening_threads_big 300 env QATTN_TEST_VALIDATION=0 QATTN_TEST_THREADS=8 QATTN_TEST_ROUNDS=12 \
  "$B/tests/test_vk_contexts"
wait_steps
step hardening_bad_inputs_core 240 "$B/tests/qattn_bad_inputs" --no-validation --variant matrix --group core
step hardening_bad_inputs_decode 300 "$B/tests/qattn_bad_inputs" --no-validation --variant matrix --group decode
step hardening_embed 120 env QATTN_TEST_VALIDATION=0 "$B/tests/test_vk_hardening"
wait_steps
TAIL=3 report hardening_threads_1 hardening_threads_2 hardening_threads_3 hardening_threads_4 \
  hardening_threads_5 hardening_threads_big
TAIL=4 report hardening_bad_inputs_core hardening_bad_inputs_decode hardening_embed
