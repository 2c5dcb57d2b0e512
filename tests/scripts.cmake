# Checks of the repository's scripts that need no build.
# Issue 24 item 6: two scripts/toolchain.sh runs that find no root build it
# once (flock on the root's lock); mmdebstrap is a stub (tests/scripts/).
find_program(QATTN_BASH bash)
if(QATTN_BASH)
  add_test(NAME toolchain_lock COMMAND ${QATTN_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/scripts/toolchain_lock.sh)
  set_tests_properties(toolchain_lock PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "scripts")
endif()
