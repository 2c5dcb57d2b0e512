# Vulkan backend tests: the parity suite (tests/parity/) against the CPU
# reference, with the Khronos validation layer on (any message fails). Where
# Mesa's lavapipe is installed, the tests see only it (VK_DRIVER_FILES), so
# CI needs no GPU. Without a Vulkan device they exit 77 (skipped).
# The default suite runs in a few minutes on 2 cores; the larger sweep has
# the label "full" (ctest -L full; exclude it with ctest -LE full).
include(${CMAKE_CURRENT_LIST_DIR}/parity/parity.cmake)
if(QATTN_HAVE_VULKAN)
  find_file(QATTN_LVP_ICD NAMES lvp_icd.json lvp_icd.x86_64.json
            PATHS /usr/share/vulkan/icd.d /usr/local/share/vulkan/icd.d NO_DEFAULT_PATH)
  set(_vk_env "")
  if(QATTN_LVP_ICD)
    set(_vk_env "VK_DRIVER_FILES=${QATTN_LVP_ICD};VK_ICD_FILENAMES=${QATTN_LVP_ICD}")
  endif()
  foreach(op ${QATTN_PARITY_OPS})
    if(op STREQUAL "decode")
      # decode's cases, one test per head dim (every case name holds _D<d>_):
      # the longest op on lavapipe, so 2 cores run its parts side by side
      foreach(d 16 48 64 80 96 112 128 192 256)
        add_test(NAME parity_vulkan_decode_d${d}
                 COMMAND qattn_parity --backend vulkan --op decode --filter _D${d}_)
        set_tests_properties(parity_vulkan_decode_d${d} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                             LABELS "vulkan;parity;decode" ENVIRONMENT "${_vk_env}")
      endforeach()
      continue()
    endif()
    add_test(NAME parity_vulkan_${op} COMMAND qattn_parity --backend vulkan --op ${op})
    set_tests_properties(parity_vulkan_${op} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                         LABELS "vulkan;parity" ENVIRONMENT "${_vk_env}")
  endforeach()
  add_test(NAME parity_vulkan_full COMMAND qattn_parity --backend vulkan --full)
  set_tests_properties(parity_vulkan_full PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 7200
                       LABELS "vulkan;parity;full" ENVIRONMENT "${_vk_env}")
endif()
# The fragment layout probe (backend_vulkan/vk_fragment_probe.c): on a device
# with cooperative matrices it must agree with the capability it sets;
# skipped on lavapipe, which has none.
if(QATTN_HAVE_VULKAN)
  add_executable(qattn_vk_fragments ${CMAKE_CURRENT_SOURCE_DIR}/vk_fragments.c)
  target_link_libraries(qattn_vk_fragments PRIVATE qattn_core qattn_vulkan)
  target_include_directories(qattn_vk_fragments PRIVATE ${PROJECT_SOURCE_DIR}/core/src
    ${PROJECT_SOURCE_DIR}/backend_vulkan ${QATTN_VOLK_INCLUDE_DIR} ${QATTN_VULKAN_INCLUDE_DIR})
  target_compile_definitions(qattn_vk_fragments PRIVATE VK_NO_PROTOTYPES)
  add_test(NAME vk_fragments COMMAND qattn_vk_fragments)
  set_tests_properties(vk_fragments PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "vulkan"
                       ENVIRONMENT "${_vk_env}")
endif()
