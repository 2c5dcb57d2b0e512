# The decode planner, launch-free: variant choices for fake device caps,
# every gate condition, the shared-memory bound, splits and workspace, and
# the QATTN_DECODE_VARIANT pin.
qattn_add_test(test_plan_decode SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_decode.c
               LABELS "core;plan;decode")
