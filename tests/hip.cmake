# HIP backend tests (backend_hip/, docs/hip.md says which proof covers what).
#
# 1. Code-object qualification (no GPU): every AMD kernel specialization,
#    compiled for gfx942, gfx1200 and gfx1201, is held to its promises by
#    qattn_hip_qualify (tests/hip/qualify*.c): no spill, no scratch, LDS within
#    the target's 64 KiB, the occupancy its variant promises, and the
#    instructions it exists for in its disassembly. A deliberately spilling
#    kernel (tests/hip/spill_probe.hip) must be rejected: the checker can fail.
# 2. Parity on the host simulations (no GPU): the parity suite, built against
#    the CPU simulation of a gfx942 (wave64: MFMA, native fnuz) and of a
#    gfx1201 (wave32: WMMA, native fn), runs the kernels' own code against the
#    CPU reference. Logic and layouts, not hardware.
# 3. Parity on a real HIP device: qattn_parity --backend hip when qattn_hip is
#    built; without a device it exits 77 (skipped, never passed).
include(${CMAKE_CURRENT_LIST_DIR}/parity/parity.cmake)

# ---- 0. the decode launch is the plan (no device, no HIP toolchain) ----
add_executable(qattn_hip_decode_launch ${CMAKE_CURRENT_LIST_DIR}/hip/hip_decode_launch.c
               ${PROJECT_SOURCE_DIR}/backend_hip/src/hip_decode_launch.c)
target_include_directories(qattn_hip_decode_launch PRIVATE ${PROJECT_SOURCE_DIR}/backend_hip/src
                           ${PROJECT_SOURCE_DIR}/backend_hip/kernels)
target_link_libraries(qattn_hip_decode_launch PRIVATE qattn_core)
add_test(NAME hip_decode_launch COMMAND qattn_hip_decode_launch)
set_tests_properties(hip_decode_launch PROPERTIES TIMEOUT 300 LABELS "hip;plan;decode")

# ---- 1. code-object qualification ----
get_property(_hip_cos GLOBAL PROPERTY QATTN_HIP_CODE_OBJECTS)
if(_hip_cos AND QATTN_LLVM_READELF AND QATTN_LLVM_OBJDUMP)
  add_executable(qattn_hip_qualify hip/qualify_main.c hip/qualify_read.c hip/qualify_occupancy.c)
  target_include_directories(qattn_hip_qualify PRIVATE ${CMAKE_CURRENT_LIST_DIR}/hip
                             ${PROJECT_SOURCE_DIR}/backend_hip/kernels ${PROJECT_SOURCE_DIR}/core/include)
  set(_hip_args "")
  set(_hip_files "")
  foreach(e ${_hip_cos})
    string(REPLACE "|" ";" f "${e}")
    list(GET f 0 t)
    list(GET f 2 p)
    list(APPEND _hip_args "${t}:${p}")
    list(APPEND _hip_files ${p})
  endforeach()
  add_test(NAME hip_qualify_code_objects
           COMMAND qattn_hip_qualify --readelf ${QATTN_LLVM_READELF} --objdump ${QATTN_LLVM_OBJDUMP}
                   --table ${CMAKE_CURRENT_BINARY_DIR}/hip_qualification.md ${_hip_args})
  set_tests_properties(hip_qualify_code_objects PROPERTIES LABELS "hip;qualify" TIMEOUT 300)
  # The negative case: a kernel that must spill, which the checker must reject.
  set(_probe ${CMAKE_CURRENT_BINARY_DIR}/hip_spill_probe.gfx942.co)
  add_custom_command(
    OUTPUT ${_probe}
    COMMAND ${QATTN_AMDGPU_CLANG} -x hip --offload-arch=gfx942 --offload-device-only
            --no-gpu-bundle-output -nogpuinc -nogpulib -O3 -c ${CMAKE_CURRENT_LIST_DIR}/hip/spill_probe.hip
            -o ${_probe}
    DEPENDS ${CMAKE_CURRENT_LIST_DIR}/hip/spill_probe.hip
    COMMENT "HIP qualification probe (must spill)"
    VERBATIM)
  add_custom_target(qattn_hip_spill_probe ALL DEPENDS ${_probe})
  add_test(NAME hip_qualify_rejects_spilling_kernel
           COMMAND qattn_hip_qualify --readelf ${QATTN_LLVM_READELF} --objdump ${QATTN_LLVM_OBJDUMP}
                   --expect-reject spill gfx942:${_probe})
  set_tests_properties(hip_qualify_rejects_spilling_kernel PROPERTIES LABELS "hip;qualify" TIMEOUT 120)
endif()

# The AMD-planned geometry (gfx1201 packed decode, gfx942 staged MQA) run on
# whatever HIP device the build reaches: tests/hip/hip_twin_plans.c.
# HIP-only tests of issue 27's axes against the CPU reference, on the real
# backend and on each host simulation: the KV store over formats x bf16/f16
# sources x D/Dv, bit-exact (tests/hip/hip_kv_store_axes.c), and decode over
# every head dim pair, format, q/o dtype and variant (tests/hip/hip_decode_dims.c).
function(qattn_hip_axes_test src exe lib test_name)
  add_executable(${exe} ${CMAKE_CURRENT_LIST_DIR}/hip/${src}.c)
  target_include_directories(${exe} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/common)
  target_link_libraries(${exe} PRIVATE ${lib} qattn_core)
  if(QATTN_PARITY_LIBM)
    target_link_libraries(${exe} PRIVATE ${QATTN_PARITY_LIBM})
  endif()
  add_test(NAME ${test_name} COMMAND ${exe})
  set_tests_properties(${test_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "hip;parity")
endfunction()

function(qattn_hip_twin_test exe lib test_name)
  add_executable(${exe} ${CMAKE_CURRENT_LIST_DIR}/hip/hip_twin_plans.c)
  target_include_directories(${exe} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/common)
  target_link_libraries(${exe} PRIVATE ${lib} qattn_core)
  if(QATTN_PARITY_LIBM)
    target_link_libraries(${exe} PRIVATE ${QATTN_PARITY_LIBM})
  endif()
  add_test(NAME ${test_name} COMMAND ${exe})
  set_tests_properties(${test_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "hip;parity")
endfunction()

# ---- 3. the real backend ----
if(TARGET qattn_hip)
  qattn_hip_twin_test(qattn_hip_twin_plans qattn_hip hip_twin_plans)
  qattn_hip_axes_test(hip_kv_store_axes qattn_hip_kv_store_axes qattn_hip hip_kv_store_axes)
  qattn_hip_axes_test(hip_decode_dims qattn_hip_decode_dims qattn_hip hip_decode_dims)
  # decode + KV store + MQA captured in the caller's graph on the caller's
  # stream, replayed with new inputs (tests/hip/hip_graph.c); it calls the
  # runtime itself, through the backend's platform header
  get_target_property(_hip_plat qattn_hip QATTN_HIP_PLATFORM)
  add_executable(qattn_hip_graph ${CMAKE_CURRENT_LIST_DIR}/hip/hip_graph.c)
  target_include_directories(qattn_hip_graph PRIVATE ${CMAKE_CURRENT_LIST_DIR}/common
                             ${PROJECT_SOURCE_DIR}/backend_hip/src)
  target_link_libraries(qattn_hip_graph PRIVATE qattn_hip qattn_core)
  if(_hip_plat STREQUAL "amd")
    target_compile_definitions(qattn_hip_graph PRIVATE QH_PLATFORM_AMD)
    target_include_directories(qattn_hip_graph SYSTEM PRIVATE ${QATTN_HIP_INCLUDE_DIR})
    target_link_libraries(qattn_hip_graph PRIVATE ${QATTN_AMDHIP64_LIBRARY})
  else()
    find_package(CUDAToolkit REQUIRED) # its imported targets are per directory
    target_compile_definitions(qattn_hip_graph PRIVATE QH_PLATFORM_NVIDIA)
    target_link_libraries(qattn_hip_graph PRIVATE CUDA::cudart_static)
  endif()
  if(QATTN_PARITY_LIBM)
    target_link_libraries(qattn_hip_graph PRIVATE ${QATTN_PARITY_LIBM})
  endif()
  add_test(NAME hip_graph COMMAND qattn_hip_graph)
  set_tests_properties(hip_graph PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "hip;parity")
  foreach(op ${QATTN_PARITY_OPS})
    add_test(NAME parity_hip_${op} COMMAND qattn_parity --backend hip --op ${op})
    set_tests_properties(parity_hip_${op} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                         LABELS "hip;parity")
  endforeach()
endif()

# ---- 2. host simulations ----
get_property(_hip_sims GLOBAL PROPERTY QATTN_HIP_HOSTSIMS)
foreach(sim ${_hip_sims})
  set(exe qattn_parity_hip_hostsim_${sim})
  add_executable(${exe} ${_pt_sources})
  target_include_directories(${exe} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/parity
                             ${CMAKE_CURRENT_LIST_DIR}/common ${_pt_gen})
  # whole archive: the simulation's kernel table finds the kernels through
  # weak references, which alone would not pull them from the archive
  target_link_libraries(${exe} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,qattn_hip_hostsim_${sim}>"
                        qattn_core)
  target_compile_definitions(${exe} PRIVATE QATTN_LINKS_HIP) # the simulation is the hip backend
  qattn_hip_twin_test(qattn_hip_twin_plans_hostsim_${sim}
                      "$<LINK_LIBRARY:WHOLE_ARCHIVE,qattn_hip_hostsim_${sim}>"
                      hip_hostsim_${sim}_twin_plans)
  foreach(t kv_store_axes decode_dims)
    qattn_hip_axes_test(hip_${t} qattn_hip_${t}_hostsim_${sim} "$<LINK_LIBRARY:WHOLE_ARCHIVE,qattn_hip_hostsim_${sim}>"
                        hip_hostsim_${sim}_${t})
  endforeach()
  foreach(op ${QATTN_PARITY_OPS})
    add_test(NAME hip_hostsim_${sim}_parity_${op} COMMAND ${exe} --backend hip --op ${op})
    set_tests_properties(hip_hostsim_${sim}_parity_${op} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                         LABELS "hip;hostsim;parity")
  endforeach()
  # AUTO plans regs for 8-bit caches of D 64 / 128 on every HIP target, so
  # the tiled matrix kernels keep their own run at those shapes
  add_test(NAME hip_hostsim_${sim}_parity_decode_matrix COMMAND ${exe} --backend hip --op decode --variant matrix)
  set_tests_properties(hip_hostsim_${sim}_parity_decode_matrix PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                       LABELS "hip;hostsim;parity")
  # The wave32 simulation also runs the regs kernels' NVIDIA-twin path (the
  # H200's: mma.sync, emulated from the PTX layout), so the twin's logic,
  # bounds and fragment mapping are checked before any H200 run
  # (backend_hip/kernels/decode_regs.hip, QATTN_HOSTSIM_REGS_TWIN)
  if(sim STREQUAL "gfx12")
    # The paged MQA matrix kernels: their shared-memory path (plans made as
    # for a device whose fragment layout is unknown), and the NVIDIA twin's
    # path of both (QATTN_HOSTSIM_PAGED_TWIN, mma.sync emulated from the PTX
    # layout), so the H200's code is checked here first
    add_test(NAME hip_hostsim_${sim}_parity_paged_mqa_shared
             COMMAND ${exe} --backend hip --op paged_mqa_logits --variant matrix-shared)
    add_test(NAME hip_hostsim_${sim}_parity_paged_mqa_twin COMMAND ${exe} --backend hip --op paged_mqa_logits)
    add_test(NAME hip_hostsim_${sim}_parity_paged_mqa_twin_shared
             COMMAND ${exe} --backend hip --op paged_mqa_logits --variant matrix-shared)
    set_tests_properties(hip_hostsim_${sim}_parity_paged_mqa_shared hip_hostsim_${sim}_parity_paged_mqa_twin
                         hip_hostsim_${sim}_parity_paged_mqa_twin_shared PROPERTIES
                         SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS "hip;hostsim;parity")
    set_tests_properties(hip_hostsim_${sim}_parity_paged_mqa_twin hip_hostsim_${sim}_parity_paged_mqa_twin_shared
                         PROPERTIES ENVIRONMENT QATTN_HOSTSIM_PAGED_TWIN=1)
    add_test(NAME hip_hostsim_${sim}_parity_decode_regs_twin
             COMMAND ${exe} --backend hip --op decode --variant regs)
    set_tests_properties(hip_hostsim_${sim}_parity_decode_regs_twin PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                         ENVIRONMENT QATTN_HOSTSIM_REGS_TWIN=1 LABELS "hip;hostsim;parity")
  endif()
endforeach()
