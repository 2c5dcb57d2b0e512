# libFuzzer harnesses (tests/fuzz/), built when QATTN_FUZZ=ON with clang:
#   cmake -S . -B build/fuzz -G Ninja -DCMAKE_C_COMPILER=clang-19 -DQATTN_FUZZ=ON
#   cmake --build build/fuzz --target qattn_fuzzers
#   ctest --test-dir build/fuzz -L fuzz
# Each harness runs QATTN_FUZZ_SECONDS (default 60) from the seed corpus in
# tests/fuzz/corpus/<harness>/ (read only: new inputs go to the build
# directory). scripts/fuzz-long.sh runs them for longer.
# The library is compiled into each harness with coverage and ASan/UBSan
# (any report aborts, so libFuzzer keeps the input as a crash).
option(QATTN_FUZZ "Build the libFuzzer harnesses (clang only)" OFF)
if(QATTN_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "QATTN_FUZZ=ON needs clang (libFuzzer), got ${CMAKE_C_COMPILER_ID}")
  endif()
  set(_fz_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
  set(_fz_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  set(QATTN_FUZZ_SECONDS 60 CACHE STRING "Seconds each fuzz harness runs under ctest")
  file(GLOB _fz_core CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/src/*.c)
  add_library(qattn_fuzz_core OBJECT ${_fz_core})
  target_include_directories(qattn_fuzz_core PUBLIC ${PROJECT_SOURCE_DIR}/core/include
                             ${PROJECT_SOURCE_DIR}/core/src)
  target_compile_definitions(qattn_fuzz_core PRIVATE QATTN_CHECK_PLAN_PADDING)
  target_compile_options(qattn_fuzz_core PUBLIC -fsanitize=fuzzer-no-link ${_fz_san})
  add_custom_target(qattn_fuzzers)

  # qattn_fuzz_harness(NAME SOURCE src [DEFS d...] [VULKAN])
  function(qattn_fuzz_harness name)
    cmake_parse_arguments(H "VULKAN" "SOURCE" "DEFS" ${ARGN})
    set(_objs $<TARGET_OBJECTS:qattn_fuzz_core>)
    if(H_VULKAN)
      list(APPEND _objs $<TARGET_OBJECTS:qattn_fuzz_vk>)
    endif()
    add_executable(${name} ${_fz_dir}/${H_SOURCE} ${_objs})
    target_include_directories(${name} PRIVATE ${_fz_dir} ${CMAKE_CURRENT_SOURCE_DIR}/common
                               ${PROJECT_SOURCE_DIR}/core/include ${PROJECT_SOURCE_DIR}/core/src)
    target_compile_definitions(${name} PRIVATE ${H_DEFS})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer ${_fz_san})
    target_link_options(${name} PRIVATE -fsanitize=fuzzer ${_fz_san})
    target_link_libraries(${name} PRIVATE m ${CMAKE_DL_LIBS})
    add_dependencies(qattn_fuzzers ${name})
    set(_corpus ${CMAKE_CURRENT_BINARY_DIR}/fuzz_corpus/${name})
    set(_seeds ${_fz_dir}/corpus/${name})
    # A fresh writable corpus each run, then the seeds read from the repo.
    # A finding exits 1: libFuzzer's default (77) is ctest's skip code here.
    # -timeout: a hang, not a slow first pipeline build on a loaded lavapipe
    # host (19 s measured for one input on the shared 2-core machine).
    add_test(NAME ${name}
             COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
                     UBSAN_OPTIONS=print_stacktrace=1
                     $<TARGET_FILE:${name}> -max_total_time=${QATTN_FUZZ_SECONDS} -timeout=120
                     -error_exitcode=1 -timeout_exitcode=1
                     -rss_limit_mb=3072 -print_final_stats=1
                     -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/fuzz_artifacts/${name}-
                     ${_corpus} ${_seeds})
    math(EXPR _limit "${QATTN_FUZZ_SECONDS} * 2 + 120")
    set_tests_properties(${name} PROPERTIES LABELS "fuzz" TIMEOUT ${_limit} SKIP_RETURN_CODE 77
                         FIXTURES_REQUIRED qattn_fuzz_dirs ENVIRONMENT "${_fz_env}")
  endfunction()

  add_test(NAME fuzz_dirs COMMAND ${CMAKE_COMMAND} -E make_directory
           ${CMAKE_CURRENT_BINARY_DIR}/fuzz_artifacts
           ${CMAKE_CURRENT_BINARY_DIR}/fuzz_corpus/fuzz_validate
           ${CMAKE_CURRENT_BINARY_DIR}/fuzz_corpus/fuzz_plan
           ${CMAKE_CURRENT_BINARY_DIR}/fuzz_corpus/fuzz_ops_cpu
           ${CMAKE_CURRENT_BINARY_DIR}/fuzz_corpus/fuzz_ops_vulkan)
  set_tests_properties(fuzz_dirs PROPERTIES LABELS "fuzz" FIXTURES_SETUP qattn_fuzz_dirs)

  set(_fz_env "")
  qattn_fuzz_harness(fuzz_validate SOURCE fuzz_validate.c)
  qattn_fuzz_harness(fuzz_plan SOURCE fuzz_plan.c)
  qattn_fuzz_harness(fuzz_ops_cpu SOURCE fuzz_ops.c)
  if(QATTN_HAVE_VULKAN)
    file(GLOB _fz_vk CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/backend_vulkan/*.c)
    add_library(qattn_fuzz_vk OBJECT ${_fz_vk} ${QATTN_VOLK_INCLUDE_DIR}/volk.c)
    target_include_directories(qattn_fuzz_vk PRIVATE ${PROJECT_SOURCE_DIR}/backend_vulkan
      ${PROJECT_SOURCE_DIR}/core/include ${PROJECT_SOURCE_DIR}/core/src ${QATTN_VOLK_INCLUDE_DIR}
      ${QATTN_VULKAN_INCLUDE_DIR} ${QATTN_SHADER_GEN_DIR})
    target_compile_definitions(qattn_fuzz_vk PRIVATE VK_NO_PROTOTYPES)
    target_compile_options(qattn_fuzz_vk PRIVATE -fsanitize=fuzzer-no-link ${_fz_san}
                           -Wno-missing-field-initializers)
    find_file(QATTN_LVP_ICD NAMES lvp_icd.json lvp_icd.x86_64.json
              PATHS /usr/share/vulkan/icd.d /usr/local/share/vulkan/icd.d NO_DEFAULT_PATH)
    if(QATTN_LVP_ICD)
      set(_fz_env "VK_DRIVER_FILES=${QATTN_LVP_ICD};VK_ICD_FILENAMES=${QATTN_LVP_ICD}")
    endif()
    qattn_fuzz_harness(fuzz_ops_vulkan SOURCE fuzz_ops.c DEFS FZ_VULKAN VULKAN)
    target_sources(fuzz_ops_vulkan PRIVATE $<TARGET_OBJECTS:qattn_vk_shaders>)
  endif()
endif()
