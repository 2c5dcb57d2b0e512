# The core's API contract and every descriptor rule (launch-free where the
# rule allows; the cpu backend otherwise).
qattn_add_test(test_api SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_api.c LABELS "api;core")
qattn_add_test(test_validate SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_validate.c LABELS "api;core")
# Issue 11's core rows: bounded shapes in validators and pure planners, plan
# integrity (tests/test_hardening.c).
qattn_add_test(test_hardening SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_hardening.c LABELS "api;core")
# Issue 24's core items: outputs whose elements overlap (2, 3), the
# output-over-input rule on every op (5, 10) (tests/test_hardening3.c).
qattn_add_test(test_hardening3 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_hardening3.c LABELS "api;core")
# Options structs carry their size (qattn.h, "option structs"); the reader
# (qattn_struct_read/_write, qattn/backend.h) takes its version table as an
# argument, so the test drives it with a table of two versions as well.
qattn_add_test(test_options SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_options.c LABELS "api;core")
# Issue 18 item 1: outputs that share bytes with inputs are refused; the
# reference is compiled in as well, to call it on what validation refuses.
qattn_add_test(test_alias SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_alias.c
               ${PROJECT_SOURCE_DIR}/core/src/ref_decode.c LIBS m LABELS "api;core")
if(TARGET test_alias)
  target_include_directories(test_alias PRIVATE ${PROJECT_SOURCE_DIR}/core/src)
endif()
