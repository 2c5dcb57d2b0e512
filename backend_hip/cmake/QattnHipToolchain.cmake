# Finds what the HIP backend can build with and decides its platform.
#
#   QATTN_HIP_PLATFORM = auto | amd | nvidia   (cache)
#     amd:    ROCm's HIP runtime (hip/hip_runtime_api.h + libamdhip64) for the
#             host side, and a clang that targets every QATTN_HIP_TARGETS for
#             the code objects.
#     nvidia: the CUDA toolkit (nvcc + the CUDA runtime). HIP's own
#             NVIDIA-platform headers are not used (they do not build with
#             CUDA 13); backend_hip/src/qh_cuda_as_hip.h maps the calls.
#     auto:   amd when its pieces are all found, else nvidia, else none.
#
# Independently of the platform, QATTN_AMDGPU_CLANG is set when a clang that
# compiles every QATTN_HIP_TARGETS is found: the AMD code objects (and their
# qualification test) are built with it even where no AMD runtime exists.
#
# Sets: QATTN_HIP_PLATFORM_RESOLVED (amd|nvidia|""), QATTN_HIP_MISSING (why
# not), QATTN_AMDGPU_CLANG, QATTN_LLVM_READELF, QATTN_LLVM_OBJDUMP,
# QATTN_HIP_INCLUDE_DIR, QATTN_AMDHIP64_LIBRARY, QATTN_NVCC.
set(QATTN_HIP_PLATFORM auto CACHE STRING "HIP backend platform: auto|amd|nvidia")
set_property(CACHE QATTN_HIP_PLATFORM PROPERTY STRINGS auto amd nvidia)
set(QATTN_HIP_TARGETS "gfx942;gfx1200;gfx1201" CACHE STRING "AMD targets with embedded code objects")
set(QATTN_HIP_CUDA_ARCHS "90" CACHE STRING
    "NVIDIA platform: SM versions to build cubins for (PTX of the last one is embedded too)")

# ---- an AMDGPU clang (Debian's clang-19+, or ROCm's own) ----
if(NOT DEFINED QATTN_AMDGPU_CLANG_CHECKED)
  find_program(_qh_clang NAMES clang++-20 clang++-19 amdclang++ clang++
               HINTS /opt/rocm/llvm/bin /opt/rocm/lib/llvm/bin)
  set(_ok OFF)
  if(_qh_clang)
    set(_probe ${CMAKE_BINARY_DIR}/qattn_hip_probe.hip)
    file(WRITE ${_probe} "extern \"C\" __attribute__((global)) void k(float *p) {\n"
                         "  p[__builtin_amdgcn_workitem_id_x()] = 1.0f;\n}\n")
    set(_ok ON)
    foreach(t ${QATTN_HIP_TARGETS})
      execute_process(COMMAND ${_qh_clang} -x hip --offload-arch=${t} --offload-device-only
                              --no-gpu-bundle-output -nogpulib -nogpuinc -O1 -c ${_probe}
                              -o ${CMAKE_BINARY_DIR}/qattn_hip_probe.${t}.co
                      RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
      if(NOT _rc EQUAL 0)
        set(_ok OFF)
        message(STATUS "qattn: ${_qh_clang} cannot build ${t} code objects")
      endif()
    endforeach()
  endif()
  if(_ok)
    set(QATTN_AMDGPU_CLANG ${_qh_clang} CACHE FILEPATH "clang that builds the AMD code objects")
    get_filename_component(_dir ${_qh_clang} DIRECTORY)
    string(REGEX MATCH "-[0-9]+$" _suffix "${_qh_clang}")
    find_program(QATTN_LLVM_READELF NAMES llvm-readelf${_suffix} llvm-readelf HINTS ${_dir})
    find_program(QATTN_LLVM_OBJDUMP NAMES llvm-objdump${_suffix} llvm-objdump HINTS ${_dir})
  endif()
  set(QATTN_AMDGPU_CLANG_CHECKED ON CACHE INTERNAL "")
  unset(_qh_clang CACHE)
endif()

# ---- the AMD host runtime ----
find_path(QATTN_HIP_INCLUDE_DIR hip/hip_runtime_api.h HINTS /opt/rocm/include)
find_library(QATTN_AMDHIP64_LIBRARY amdhip64 HINTS /opt/rocm/lib)

# ---- the CUDA toolkit ----
set(_qh_cuda_ok OFF)
if(NOT QATTN_HIP_PLATFORM STREQUAL "amd")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND CUDAToolkit_NVCC_EXECUTABLE AND TARGET CUDA::cudart_static)
    set(_qh_cuda_ok ON)
    set(QATTN_NVCC ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
endif()

set(_qh_amd_ok OFF)
if(QATTN_HIP_INCLUDE_DIR AND QATTN_AMDHIP64_LIBRARY AND QATTN_AMDGPU_CLANG)
  set(_qh_amd_ok ON)
endif()

set(QATTN_HIP_PLATFORM_RESOLVED "")
set(QATTN_HIP_MISSING "")
if(QATTN_HIP_PLATFORM STREQUAL "amd" OR (QATTN_HIP_PLATFORM STREQUAL "auto" AND _qh_amd_ok))
  if(_qh_amd_ok)
    set(QATTN_HIP_PLATFORM_RESOLVED amd)
  else()
    set(QATTN_HIP_MISSING "amd platform needs hip/hip_runtime_api.h, libamdhip64 and a clang for ${QATTN_HIP_TARGETS}")
  endif()
elseif(QATTN_HIP_PLATFORM STREQUAL "nvidia" OR QATTN_HIP_PLATFORM STREQUAL "auto")
  if(_qh_cuda_ok)
    set(QATTN_HIP_PLATFORM_RESOLVED nvidia)
  elseif(QATTN_HIP_PLATFORM STREQUAL "nvidia")
    set(QATTN_HIP_MISSING "nvidia platform needs the CUDA toolkit (nvcc, cudart)")
  else()
    set(QATTN_HIP_MISSING "neither ROCm's HIP runtime with an AMDGPU clang nor the CUDA toolkit found")
  endif()
else()
  set(QATTN_HIP_MISSING "QATTN_HIP_PLATFORM=${QATTN_HIP_PLATFORM} is not auto, amd or nvidia")
endif()
