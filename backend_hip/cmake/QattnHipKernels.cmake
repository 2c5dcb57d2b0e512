# Builds the kernel sources of backend_hip/kernels into code objects and
# embeds them in the library.
#
#   qattn_hip_amd_code_objects(OUT_FILES OUT_ENTRIES)
#     One AMD code object per (source, target in QATTN_HIP_TARGETS), built by
#     QATTN_AMDGPU_CLANG as device-only HIP with -nogpuinc -nogpulib: the
#     kernels need neither HIP's headers nor ROCm's device libraries (which,
#     as packaged on Debian, predate gfx12). Entries are "target|source|path".
#   qattn_hip_nvidia_fatbins(OUT_FILES OUT_ENTRIES)
#     One fatbin per source from nvcc: cubins for QATTN_HIP_CUDA_ARCHS plus
#     PTX of the last one (target "cuda").
#   qattn_hip_embed(OUT_C ENTRIES)
#     Writes a C file that embeds every entry with .incbin and defines the
#     qh_code_objects table (src/qh_code_objects.h).
set(QATTN_HIP_KERNEL_DIR ${CMAKE_CURRENT_LIST_DIR}/../kernels)
set(QATTN_HIP_KERNEL_SOURCES decode decode_regs kv_store mqa_logits paged_mqa_logits read_bandwidth)
# The core's kernel argument blocks (qattn/kernel_args.h) are part of the
# kernels' parameters; qattn/paged_mqa_index.h is index arithmetic the
# kernels share with the shaders.
set(QATTN_HIP_CORE_INCLUDE_DIR ${CMAKE_CURRENT_LIST_DIR}/../../core/include)
file(GLOB QATTN_HIP_KERNEL_HEADERS ${QATTN_HIP_KERNEL_DIR}/*.h ${QATTN_HIP_KERNEL_DIR}/*.def
     ${QATTN_HIP_CORE_INCLUDE_DIR}/qattn/kernel_args.h ${QATTN_HIP_CORE_INCLUDE_DIR}/qattn/paged_mqa_index.h)

function(qattn_hip_amd_code_objects out_files out_entries)
  set(files "")
  set(entries "")
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/co)
  file(MAKE_DIRECTORY ${dir})
  foreach(t ${QATTN_HIP_TARGETS})
    foreach(src ${QATTN_HIP_KERNEL_SOURCES})
      set(out ${dir}/${src}.${t}.co)
      add_custom_command(
        OUTPUT ${out}
        COMMAND ${QATTN_AMDGPU_CLANG} -x hip -std=c++17 --offload-arch=${t} --offload-device-only
                --no-gpu-bundle-output -nogpuinc -nogpulib -O3 -fno-gpu-flush-denormals-to-zero
                -I${QATTN_HIP_KERNEL_DIR} -I${QATTN_HIP_CORE_INCLUDE_DIR} -c ${QATTN_HIP_KERNEL_DIR}/${src}.hip -o ${out}
        DEPENDS ${QATTN_HIP_KERNEL_DIR}/${src}.hip ${QATTN_HIP_KERNEL_HEADERS}
        COMMENT "HIP code object ${src} for ${t}"
        VERBATIM)
      list(APPEND files ${out})
      list(APPEND entries "${t}|${src}|${out}")
    endforeach()
  endforeach()
  set(${out_files} ${files} PARENT_SCOPE)
  set(${out_entries} ${entries} PARENT_SCOPE)
endfunction()

function(qattn_hip_nvidia_fatbins out_files out_entries)
  set(files "")
  set(entries "")
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/fatbin)
  file(MAKE_DIRECTORY ${dir})
  set(gencode "")
  foreach(a ${QATTN_HIP_CUDA_ARCHS})
    list(APPEND gencode -gencode arch=compute_${a},code=sm_${a})
    set(last ${a})
  endforeach()
  list(APPEND gencode -gencode arch=compute_${last},code=compute_${last})
  foreach(src ${QATTN_HIP_KERNEL_SOURCES})
    set(out ${dir}/${src}.cuda.fatbin)
    add_custom_command(
      OUTPUT ${out}
      COMMAND ${QATTN_NVCC} -x cu -std=c++17 -O3 --fatbin ${gencode} -I${QATTN_HIP_KERNEL_DIR} -I${QATTN_HIP_CORE_INCLUDE_DIR}
              --expt-relaxed-constexpr -Xptxas -warn-spills ${QATTN_HIP_KERNEL_DIR}/${src}.hip -o ${out}
      DEPENDS ${QATTN_HIP_KERNEL_DIR}/${src}.hip ${QATTN_HIP_KERNEL_HEADERS}
      COMMENT "CUDA fatbin ${src} (sm ${QATTN_HIP_CUDA_ARCHS})"
      VERBATIM)
    list(APPEND files ${out})
    list(APPEND entries "cuda|${src}|${out}")
  endforeach()
  set(${out_files} ${files} PARENT_SCOPE)
  set(${out_entries} ${entries} PARENT_SCOPE)
endfunction()

# Objects of the kernel sources (and the simulation's kernel table) built as
# host C++ for the CPU simulation of `sim` (gfx942 or gfx12), by the clang
# that builds the code objects (the kernels use clang vector extensions).
function(qattn_hip_hostsim_objects sim out_objs)
  string(TOUPPER ${sim} SIM)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/hostsim_${sim})
  file(MAKE_DIRECTORY ${dir})
  set(objs "")
  set(srcs "")
  foreach(src ${QATTN_HIP_KERNEL_SOURCES})
    list(APPEND srcs ${QATTN_HIP_KERNEL_DIR}/${src}.hip)
  endforeach()
  list(APPEND srcs ${QATTN_HIP_KERNEL_DIR}/../src/hostsim/qh_hostsim_kernels.cpp)
  foreach(f ${srcs})
    get_filename_component(n ${f} NAME_WE)
    set(out ${dir}/${n}.o)
    add_custom_command(
      OUTPUT ${out}
      COMMAND ${QATTN_AMDGPU_CLANG} -x c++ -std=c++17 -O2 -g0 -fPIC -fno-exceptions -fno-rtti
              -ffp-contract=off -DQH_HOSTSIM -DQH_SIM_${SIM} -I${QATTN_HIP_KERNEL_DIR} -I${QATTN_HIP_CORE_INCLUDE_DIR} -c ${f} -o ${out}
      DEPENDS ${f} ${QATTN_HIP_KERNEL_HEADERS}
      COMMENT "HIP host simulation (${sim}): ${n}"
      VERBATIM)
    list(APPEND objs ${out})
  endforeach()
  set_source_files_properties(${objs} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  set(${out_objs} ${objs} PARENT_SCOPE)
endfunction()

function(qattn_hip_embed out_c entries)
  set(asm "")
  set(decl "")
  set(table "")
  set(i 0)
  foreach(e ${entries})
    string(REPLACE "|" ";" f "${e}")
    list(GET f 0 target)
    list(GET f 1 src)
    list(GET f 2 path)
    string(APPEND asm "    \".p2align 12\\n\"\n"
                      "    \".hidden qh_co_${i}_begin\\n\"\n"
                      "    \"qh_co_${i}_begin:\\n\"\n"
                      "    \".incbin \\\"${path}\\\"\\n\"\n"
                      "    \".hidden qh_co_${i}_end\\n\"\n"
                      "    \"qh_co_${i}_end:\\n\"\n")
    string(APPEND decl "extern const unsigned char qh_co_${i}_begin[], qh_co_${i}_end[];\n")
    string(APPEND table "    {\"${target}\", \"${src}\", qh_co_${i}_begin, qh_co_${i}_end},\n")
    math(EXPR i "${i} + 1")
  endforeach()
  file(CONFIGURE OUTPUT ${out_c} CONTENT
"/* Generated by backend_hip/cmake/QattnHipKernels.cmake: the code objects
 * embedded in qattn_hip (.incbin, page-aligned so the loaders may map them). */
#include \"qh_code_objects.h\"

__asm__(\".section .rodata.qattn_hip_code,\\\"a\\\"\\n\"
${asm}    \".previous\\n\");

${decl}
const qh_code_object qh_code_objects[] = {
${table}};
const size_t qh_code_object_count = ${i};
" @ONLY)
endfunction()
