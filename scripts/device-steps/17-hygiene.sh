# Issue 17 (hygiene): qattn_vk_stats no longer borrows the backend's device;
# it makes its own instance, device (the backend's features plus
# VK_KHR_pipeline_executable_properties) and the coopmat MQA pipeline of the
# H128 presets. Pass: exit 0, and the log holds "executable 0:" followed by
# the driver's statistics (NVIDIA: registers, spills, shared memory). A log
# that says "device lacks VK_KHR_pipeline_executable_properties" (exit 1
# here) means the capture extension was not enabled: this change broke it.
# The moved ceiling (qattn/experimental.h) is covered by bench_vk's ceiling
# column, the HIP iface table's new file by parity_hip.
step vk_stats_own_device 30 sh -c 'out=$("$0"/backend_vulkan/qattn_vk_stats mqa_logits_coopmat 32 \
  128,32,1,4,16,128,0,0,0,1,4,1,64,16,16,16 2>&1); rc=$?; printf "%s\n" "$out"
  [ "$rc" = 0 ] && printf "%s\n" "$out" | grep -q "^executable 0:"' "$B"
wait_steps
TAIL=25 report vk_stats_own_device
