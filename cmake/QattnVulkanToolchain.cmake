# Finds what the Vulkan backend needs at build time: Vulkan headers with
# VK_KHR_cooperative_matrix (>= 1.3.255), volk (loads Vulkan at run time, so no
# link-time libvulkan), and a glslangValidator that accepts
# GL_KHR_cooperative_matrix. Sets QATTN_VULKAN_TOOLCHAIN_FOUND, and
# QATTN_VULKAN_TOOLCHAIN_MISSING with the reason when not found.
set(QATTN_VULKAN_TOOLCHAIN_FOUND OFF)
set(QATTN_VULKAN_TOOLCHAIN_MISSING "")

find_path(QATTN_VULKAN_INCLUDE_DIR vulkan/vulkan_core.h)
find_path(QATTN_VOLK_INCLUDE_DIR volk.h)
find_program(QATTN_GLSLANG glslangValidator)

if(NOT QATTN_VULKAN_INCLUDE_DIR)
  set(QATTN_VULKAN_TOOLCHAIN_MISSING "no Vulkan headers")
  return()
endif()
file(STRINGS ${QATTN_VULKAN_INCLUDE_DIR}/vulkan/vulkan_core.h _vkver
     REGEX "^#define VK_HEADER_VERSION [0-9]+")
string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _vkver "${_vkver}")
if(_vkver LESS 255)
  set(QATTN_VULKAN_TOOLCHAIN_MISSING "Vulkan headers 1.3.${_vkver} < 1.3.255")
  return()
endif()
if(NOT QATTN_VOLK_INCLUDE_DIR)
  set(QATTN_VULKAN_TOOLCHAIN_MISSING "no volk.h")
  return()
endif()
if(NOT QATTN_GLSLANG)
  set(QATTN_VULKAN_TOOLCHAIN_MISSING "no glslangValidator")
  return()
endif()
set(_probe ${CMAKE_BINARY_DIR}/qattn_coopmat_probe.comp)
file(WRITE ${_probe} "#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
void main() { coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a; }
")
execute_process(COMMAND ${QATTN_GLSLANG} --target-env vulkan1.3 -o
                        ${CMAKE_BINARY_DIR}/qattn_coopmat_probe.spv ${_probe}
                RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
if(NOT _rc EQUAL 0)
  set(QATTN_VULKAN_TOOLCHAIN_MISSING "glslangValidator rejects GL_KHR_cooperative_matrix")
  return()
endif()
set(QATTN_VULKAN_TOOLCHAIN_FOUND ON)
