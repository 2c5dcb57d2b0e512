# The core's API contract and every descriptor rule (launch-free where the
# rule allows; the cpu backend otherwise).
qattn_add_test(test_api SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_api.c LABELS "api;core")
qattn_add_test(test_validate SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_validate.c LABELS "api;core")
