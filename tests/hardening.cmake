# Issue 11's bad-input script (tests/bad_inputs.c): the same bad calls on the
# cpu backend and on Vulkan (lavapipe, validation layer on), with and
# without QATTN_CHECK_INDICES; statuses, outputs and guard bytes compared.
# The "decode" group holds the decode index rows (9, 10, 13): the tiled
# kernel and the reference bound every index the same way (spec 2). The
# "paged" group holds the same rows and the core rows for paged MQA logits
# (issue 26 item 6), each against paged_mqa_case.h's f64 oracle.
if(QATTN_HAVE_VULKAN)
  add_executable(qattn_bad_inputs ${CMAKE_CURRENT_SOURCE_DIR}/bad_inputs.c)
  target_link_libraries(qattn_bad_inputs PRIVATE qattn_core qattn_vulkan m)
  # White-box: the test makes VkBuffers on the context's device (rows 15-17)
  # through the backend's own function table; it calls no hidden symbol.
  target_include_directories(qattn_bad_inputs PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/common
    ${PROJECT_SOURCE_DIR}/core/src ${PROJECT_SOURCE_DIR}/backend_vulkan ${QATTN_VOLK_INCLUDE_DIR}
    ${QATTN_VULKAN_INCLUDE_DIR})
  target_compile_definitions(qattn_bad_inputs PRIVATE VK_NO_PROTOTYPES)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(qattn_bad_inputs PRIVATE -Wno-missing-field-initializers)
  endif()
  find_file(QATTN_LVP_ICD NAMES lvp_icd.json lvp_icd.x86_64.json
            PATHS /usr/share/vulkan/icd.d /usr/local/share/vulkan/icd.d NO_DEFAULT_PATH)
  set(_bi_env "")
  if(QATTN_LVP_ICD)
    set(_bi_env "VK_DRIVER_FILES=${QATTN_LVP_ICD};VK_ICD_FILENAMES=${QATTN_LVP_ICD}")
  endif()
  foreach(group core vulkan decode paged)
    set(_labels "vulkan;hardening")
    add_test(NAME bad_inputs_${group} COMMAND qattn_bad_inputs --group ${group})
    set_tests_properties(bad_inputs_${group} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                         LABELS "${_labels}" ENVIRONMENT "${_bi_env}")
  endforeach()
endif()
# The same core and decode cases on the HIP backend's host simulations
# (tests/bad_inputs.c built with QATTN_BAD_INPUTS_HIP): cpu against the HIP
# kernels' own code, with and without QATTN_CHECK_INDICES.
get_property(_bi_sims GLOBAL PROPERTY QATTN_HIP_HOSTSIMS)
foreach(sim ${_bi_sims})
  set(exe qattn_bad_inputs_hip_hostsim_${sim})
  add_executable(${exe} ${CMAKE_CURRENT_SOURCE_DIR}/bad_inputs.c)
  target_include_directories(${exe} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/common)
  target_link_libraries(${exe} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,qattn_hip_hostsim_${sim}>" qattn_core m)
  target_compile_definitions(${exe} PRIVATE QATTN_BAD_INPUTS_HIP QATTN_LINKS_HIP)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${exe} PRIVATE -Wno-missing-field-initializers)
  endif()
  foreach(group core decode paged)
    add_test(NAME bad_inputs_hip_hostsim_${sim}_${group} COMMAND ${exe} --group ${group})
    set_tests_properties(bad_inputs_hip_hostsim_${sim}_${group} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                         LABELS "hip;hostsim;hardening")
  endforeach()
endforeach()
