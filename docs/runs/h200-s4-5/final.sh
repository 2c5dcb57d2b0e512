export LD_LIBRARY_PATH=.devbuild/all/lib; O=${OUT:-/tmp/o}; mkdir -p $O
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
for i in 1 2; do (QATTN_TEST_VALIDATION=0 QATTN_TEST_THREADS=2 QATTN_TEST_ROUNDS=6 timeout 60 .devbuild/all/tests/test_vk_contexts; echo "rc $?") >> $O/threads.txt 2>&1; done
which cuda-gdb && QATTN_TEST_VALIDATION=0 QATTN_TEST_THREADS=2 QATTN_TEST_ROUNDS=6 timeout 120 cuda-gdb -q -batch -ex run -ex bt -ex 'info threads' -ex 'thread apply all bt 8' --args .devbuild/all/tests/test_vk_contexts >> $O/threads_gdb.txt 2>&1
tail -5 $O/threads.txt; grep -E "SIG|^#[0-9]" $O/threads_gdb.txt | head -30
DEVICE_STEPS="30-python.sh" SKIP="parity_vk parity_vk_simt parity_vk_mqa_long parity_vk_mqa_coopmat parity_vk_mqa_mt1 parity_vk_mqa_mt2 parity_hip parity_hip_simt hip_twin_plans hip_graph plan_decode plan_mqa_logits vk_embed torch bench_vk bench_hip sweep pipeline_cache_1 pipeline_cache_2 embed_record" DEADLINE=330 bash scripts/device-run.sh
echo "device-run rc $?"
