# Caches over 2^31 elements (tests/big_cache/big_cache.c): the KV store and
# decode on each backend against the cpu reference, touching only the pages
# used of multi-GiB allocations. No cmocka. The decode part on a GPU backend
# is its own test: it checks the decode kernel's 64-bit page and head bases.
set(QATTN_BIG_CACHE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/big_cache/big_cache.c
    ${CMAKE_CURRENT_LIST_DIR}/big_cache/combined_bf16.c)
add_executable(qattn_big_cache ${QATTN_BIG_CACHE_SOURCES})
target_include_directories(qattn_big_cache PRIVATE ${CMAKE_CURRENT_LIST_DIR}/common)
target_link_libraries(qattn_big_cache PRIVATE qattn_core)
find_library(QATTN_BIG_CACHE_LIBM m)
if(QATTN_BIG_CACHE_LIBM)
  target_link_libraries(qattn_big_cache PRIVATE ${QATTN_BIG_CACHE_LIBM})
endif()
add_test(NAME big_cache_cpu COMMAND qattn_big_cache --backend cpu)
set_tests_properties(big_cache_cpu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "ref;bigcache")
if(QATTN_HAVE_VULKAN)
  target_link_libraries(qattn_big_cache PRIVATE qattn_vulkan)
  find_file(QATTN_LVP_ICD NAMES lvp_icd.json lvp_icd.x86_64.json
            PATHS /usr/share/vulkan/icd.d /usr/local/share/vulkan/icd.d NO_DEFAULT_PATH)
  set(_bc_env "")
  if(QATTN_LVP_ICD)
    set(_bc_env "VK_DRIVER_FILES=${QATTN_LVP_ICD};VK_ICD_FILENAMES=${QATTN_LVP_ICD}")
  endif()
  foreach(part store decode)
    add_test(NAME big_cache_vulkan_${part} COMMAND qattn_big_cache --backend vulkan --part ${part})
    set_tests_properties(big_cache_vulkan_${part} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                         LABELS "vulkan;bigcache" ENVIRONMENT "${_bc_env}")
  endforeach()
endif()
if(TARGET qattn_hip)
  target_link_libraries(qattn_big_cache PRIVATE qattn_hip)
  foreach(part store decode)
    add_test(NAME big_cache_hip_${part} COMMAND qattn_big_cache --backend hip --part ${part})
    set_tests_properties(big_cache_hip_${part} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                         LABELS "hip;bigcache")
  endforeach()
endif()
# The HIP kernels in the host simulation (CPU, 64-bit host pointers): the
# `large` size, every cache tensor over 2^32 elements, so the kernels' own
# address arithmetic is checked in CI where no GPU backend can hold one.
get_property(_bc_sims GLOBAL PROPERTY QATTN_HIP_HOSTSIMS)
foreach(sim ${_bc_sims})
  if(NOT TARGET qattn_hip_hostsim_${sim})
    continue()
  endif()
  set(exe qattn_big_cache_hip_hostsim_${sim})
  add_executable(${exe} ${QATTN_BIG_CACHE_SOURCES})
  target_include_directories(${exe} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/common)
  target_link_libraries(${exe} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,qattn_hip_hostsim_${sim}>" qattn_core)
  if(QATTN_BIG_CACHE_LIBM)
    target_link_libraries(${exe} PRIVATE ${QATTN_BIG_CACHE_LIBM})
  endif()
  target_compile_definitions(${exe} PRIVATE QATTN_LINKS_HIP)
  # decode: the test's plans (fp8, D 128, pages of 16) are regs plans, whose
  # kernel (decode_regs.hip) forms 64-bit page bases and computes them; the
  # tiled kernels form 32-bit offsets and refuse such a cache
  # (QATTN_ERR_UNSUPPORTED, which the test accepts from a device and
  # reports) instead of reading wrapped offsets.
  foreach(part store decode)
    add_test(NAME big_cache_hip_hostsim_${sim}_${part}
             COMMAND ${exe} --backend hip --part ${part} --size large)
    set(_labels "hip;hostsim;bigcache")
    set_tests_properties(big_cache_hip_hostsim_${sim}_${part} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                         LABELS "${_labels}")
  endforeach()
  # Issue 24 item 0: a bf16 cache in the combined layout [pages, 2, P, 4,
  # 256], 8 GiB, each view just under 2^32 elements but past 4 GiB of bytes
  # (32-bit byte offsets wrap there), pages near its end read; page sizes 1
  # and 16 (per-key and whole-tile pages on Vulkan; HIP addresses per key).
  foreach(page 1 16)
    add_test(NAME big_cache_hip_hostsim_${sim}_combined_bf16_p${page}
             COMMAND ${exe} --backend hip --layout combined --page ${page})
    set_tests_properties(big_cache_hip_hostsim_${sim}_combined_bf16_p${page} PROPERTIES SKIP_RETURN_CODE 77
                         TIMEOUT 900 LABELS "hip;hostsim;bigcache")
  endforeach()
endforeach()
