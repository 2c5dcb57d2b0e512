# MQA logits tests outside the shared parity table.
# - The planner, launch-free: decisions for fake device caps and the launcher
#   contract (no padding, int32-safe bounds, shared memory in limits).
qattn_add_test(test_plan_mqa_logits SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_mqa_logits.c
               LABELS "core;plan;mqa")
if(QATTN_HAVE_VULKAN)
  # - The 16 x 1,500,000-column case end to end (a sample of rows against the
  #   reference); a minute or more on lavapipe, so it has its own label.
  include(${CMAKE_CURRENT_LIST_DIR}/parity/parity.cmake)
  find_file(QATTN_MQA_LVP_ICD NAMES lvp_icd.json lvp_icd.x86_64.json
            PATHS /usr/share/vulkan/icd.d /usr/local/share/vulkan/icd.d NO_DEFAULT_PATH)
  set(_mqa_env "")
  if(QATTN_MQA_LVP_ICD)
    set(_mqa_env "VK_DRIVER_FILES=${QATTN_MQA_LVP_ICD};VK_ICD_FILENAMES=${QATTN_MQA_LVP_ICD}")
  endif()
  add_test(NAME parity_vulkan_mqa_long
           COMMAND qattn_parity --backend vulkan --op mqa_logits --filter mqa_logits/long)
  set_tests_properties(parity_vulkan_mqa_long PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800
                       LABELS "vulkan;parity;mqa_long" ENVIRONMENT "${_mqa_env}")
  # - qattn_mqa_tune: device timings of the MQA presets (a tool, not a test).
  add_executable(qattn_mqa_tune ${CMAKE_CURRENT_SOURCE_DIR}/mqa_tune.c)
  target_include_directories(qattn_mqa_tune PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/common)
  target_link_libraries(qattn_mqa_tune PRIVATE qattn_core qattn_vulkan m)
endif()
