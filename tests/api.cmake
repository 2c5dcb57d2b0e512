# The core's API contract and every descriptor rule (launch-free where the
# rule allows; the cpu backend otherwise).
qattn_add_test(test_api SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_api.c LABELS "api;core")
qattn_add_test(test_validate SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_validate.c LABELS "api;core")
# Issue 11's core rows: bounded shapes in validators and pure planners, plan
# integrity (tests/test_hardening.c).
qattn_add_test(test_hardening SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_hardening.c LABELS "api;core")
