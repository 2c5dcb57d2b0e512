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

# ---- 3. the real backend ----
if(TARGET qattn_hip)
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
  target_compile_definitions(${exe} PRIVATE QATTN_PARITY_HAVE_HIP)
  foreach(op ${QATTN_PARITY_OPS})
    add_test(NAME hip_hostsim_${sim}_parity_${op} COMMAND ${exe} --backend hip --op ${op})
    set_tests_properties(hip_hostsim_${sim}_parity_${op} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                         LABELS "hip;hostsim;parity")
  endforeach()
endforeach()
