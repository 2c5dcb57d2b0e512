# Paged MQA logits (spec 5) outside the parity table and the reference's own
# test (ref.cmake):
# - the planner, launch-free: a table of shapes on fake devices against the
#   launch contract of qattn.h and the devices' limits; options, bounds,
#   occupancy, load widths, and the plan as a function of shapes and caps;
qattn_add_test(test_plan_paged_mqa_logits SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_paged_mqa_logits.c
               LABELS "core;plan;mqa")
# - issue 11's core rows for this op on the cpu backend: strides and shapes
#   bounded in validation and the pure planner, caps and dtypes checked
#   first, plan integrity, kv_lens past max_kv_len and the index mode.
qattn_add_test(test_hardening_paged SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_hardening_paged.c
               LABELS "api;core")
