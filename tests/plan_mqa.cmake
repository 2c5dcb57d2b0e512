# The MQA logits planner, launch-free: decisions for fake device caps and the
# launcher contract (no padding, int32-safe bounds, shared memory in limits).
qattn_add_test(test_plan_mqa_logits SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_mqa_logits.c
               LABELS "core;plan;mqa")
