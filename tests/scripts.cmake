# Checks of the repository and its scripts that need no build.
# Issue 24 item 6: two scripts/toolchain.sh runs that find no root build it
# once (flock on the root's lock); mmdebstrap is a stub (tests/scripts/).
find_program(QATTN_BASH bash)
if(QATTN_BASH)
  add_test(NAME toolchain_lock COMMAND ${QATTN_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/scripts/toolchain_lock.sh)
  set_tests_properties(toolchain_lock PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "scripts")
endif()
# Issue 24 item 8: the product names no file outside the repository, and no
# script, doc or test file the tree does not have.
if(QATTN_BASH)
  add_test(NAME repo_refs COMMAND ${QATTN_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/scripts/repo_refs.sh ${PROJECT_SOURCE_DIR})
  set_tests_properties(repo_refs PROPERTIES TIMEOUT 60 LABELS "scripts")
endif()
