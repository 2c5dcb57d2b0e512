# Embedding the Vulkan backend in an engine (issue 9) and contexts that share
# nothing (issue 11 row 18): the tests make their own Vulkan objects through
# the system loader (tests/common/qt_vk.h), and examples/vulkan_embed.c is
# built and run as a test so the example cannot rot. All on lavapipe with
# the validation layer where it is installed; exit 77 (skipped) without a
# Vulkan device.
if(QATTN_HAVE_VULKAN)
  find_file(QATTN_EMBED_LVP_ICD NAMES lvp_icd.json lvp_icd.x86_64.json
            PATHS /usr/share/vulkan/icd.d /usr/local/share/vulkan/icd.d NO_DEFAULT_PATH)
  set(_embed_env "")
  if(QATTN_EMBED_LVP_ICD)
    set(_embed_env "VK_DRIVER_FILES=${QATTN_EMBED_LVP_ICD};VK_ICD_FILENAMES=${QATTN_EMBED_LVP_ICD}")
  endif()
  find_package(Threads REQUIRED)
  find_library(QATTN_EMBED_LIBM m)
  set(_embed_libs qattn_vulkan Threads::Threads ${CMAKE_DL_LIBS})
  if(QATTN_EMBED_LIBM)
    list(APPEND _embed_libs ${QATTN_EMBED_LIBM})
  endif()
  # Vulkan structs are initialised as {sType} with the rest zeroed on purpose.
  set(_embed_opts "")
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    set(_embed_opts -Wno-missing-field-initializers)
  endif()
  foreach(t vk_embed vk_contexts vk_hardening)
    add_executable(test_${t} ${CMAKE_CURRENT_LIST_DIR}/test_${t}.c)
    target_include_directories(test_${t} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/common ${QATTN_VULKAN_INCLUDE_DIR})
    target_link_libraries(test_${t} PRIVATE qattn_core ${_embed_libs})
    target_compile_options(test_${t} PRIVATE ${_embed_opts})
    add_test(NAME ${t} COMMAND test_${t})
    set_tests_properties(${t} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS "vulkan;embed"
                         ENVIRONMENT "${_embed_env}")
  endforeach()

  # The example links the system's libvulkan as an engine would; a static
  # qattn_vulkan carries volk, whose function pointers use the prototypes'
  # names, so it is built with the shared libraries only.
  find_library(QATTN_EMBED_LIBVULKAN NAMES vulkan libvulkan.so.1)
  if(BUILD_SHARED_LIBS AND QATTN_EMBED_LIBVULKAN)
    add_executable(example_vulkan_embed ${PROJECT_SOURCE_DIR}/examples/vulkan_embed.c)
    target_include_directories(example_vulkan_embed PRIVATE ${QATTN_VULKAN_INCLUDE_DIR} ${CMAKE_CURRENT_LIST_DIR}/common)
    target_compile_definitions(example_vulkan_embed PRIVATE QATTN_EXAMPLE_USE_TEST_TOLERANCE)
    target_link_libraries(example_vulkan_embed PRIVATE qattn_core qattn_vulkan ${QATTN_EMBED_LIBVULKAN})
    target_compile_options(example_vulkan_embed PRIVATE ${_embed_opts})
    add_test(NAME example_vulkan_embed COMMAND example_vulkan_embed)
    set_tests_properties(example_vulkan_embed PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                         LABELS "vulkan;embed;example" ENVIRONMENT "${_embed_env}")
  endif()
endif()
