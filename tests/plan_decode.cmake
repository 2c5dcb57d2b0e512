# The decode planner, launch-free: variant choices for fake device caps,
# every gate condition, geometry, the exact shared memory, splits and
# workspace, and the QATTN_DECODE_VARIANT pin.
qattn_add_test(test_plan_decode SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_decode.c
               LABELS "core;plan;decode")
if(QATTN_HAVE_VULKAN)
  # With the Vulkan backend, the same test also checks that the backend
  # launches exactly the plan (qattn_vk_decode_launch_of, no device needed).
  # That function is internal to the backend, so the test is built from the
  # backend's sources.
  set(_vk_dir ${PROJECT_SOURCE_DIR}/backend_vulkan)
  file(GLOB _vk_sources CONFIGURE_DEPENDS ${_vk_dir}/*.c)
  target_sources(test_plan_decode PRIVATE ${_vk_sources} ${QATTN_VOLK_INCLUDE_DIR}/volk.c
                 $<TARGET_OBJECTS:qattn_vk_shaders>)
  target_include_directories(test_plan_decode PRIVATE ${_vk_dir} ${QATTN_VOLK_INCLUDE_DIR}
                             ${QATTN_VULKAN_INCLUDE_DIR} ${QATTN_SHADER_GEN_DIR})
  target_compile_definitions(test_plan_decode PRIVATE VK_NO_PROTOTYPES QATTN_TEST_VK_LAUNCH)
  if(EXISTS ${_vk_dir}/vk_mqa_logits.c)
    target_compile_definitions(test_plan_decode PRIVATE QATTN_VK_HAVE_MQA)
  endif()
  target_link_libraries(test_plan_decode PRIVATE ${CMAKE_DL_LIBS})
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(test_plan_decode PRIVATE -Wno-missing-field-initializers)
  endif()
endif()
