# Installs the libraries, headers, an exported CMake package (qattn::core,
# qattn::vulkan, qattn::hip as built) and one pkg-config file per library.
include(CMakePackageConfigHelpers)

set(_qattn_targets qattn_core)
if(TARGET qattn_vulkan)
  list(APPEND _qattn_targets qattn_vulkan)
endif()
if(TARGET qattn_hip)
  list(APPEND _qattn_targets qattn_hip)
endif()

install(TARGETS ${_qattn_targets} EXPORT qattnTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/qattn
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT qattnTargets NAMESPACE qattn::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qattn)
# What a static install's targets link that the package must find again:
# the NVIDIA platform's HIP library links CUDA::cudart_static (an imported
# target of FindCUDAToolkit). A shared install resolves it at load time.
set(QATTN_CONFIG_DEPENDENCIES "")
if(TARGET qattn_hip AND NOT BUILD_SHARED_LIBS)
  get_target_property(_qh_plat qattn_hip QATTN_HIP_PLATFORM)
  if(_qh_plat STREQUAL "nvidia")
    set(QATTN_CONFIG_DEPENDENCIES "find_dependency(CUDAToolkit)")
  endif()
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/qattnConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/qattnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qattn)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/qattnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/qattnConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/qattnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qattn)

# pkg-config: qattn-core, plus qattn-vulkan / qattn-hip which require it.
function(qattn_pkgconfig name lib requires desc)
  set(QATTN_PC_NAME ${name})
  set(QATTN_PC_LIB ${lib})
  set(QATTN_PC_REQUIRES ${requires})
  set(QATTN_PC_DESC ${desc})
  set(QATTN_PC_LIBS_PRIVATE "")
  set(QATTN_PC_CFLAGS "")
  if(name STREQUAL "qattn-vulkan")
    set(QATTN_PC_CFLAGS " -DQATTN_LINKS_VULKAN") # qattn/backends.h names it
  elseif(name STREQUAL "qattn-hip")
    set(QATTN_PC_CFLAGS " -DQATTN_LINKS_HIP")
  endif()
  # Relocatable: the prefix is found from the .pc file's own location.
  file(RELATIVE_PATH QATTN_PC_RELPREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  if(name STREQUAL "qattn-core")
    set(QATTN_PC_LIBS_PRIVATE "-lm")
  elseif(name STREQUAL "qattn-vulkan" AND CMAKE_DL_LIBS)
    set(QATTN_PC_LIBS_PRIVATE "-l${CMAKE_DL_LIBS}") # volk loads Vulkan at run time
  elseif(name STREQUAL "qattn-hip")
    # the runtime the HIP library links, for pkg-config --static
    get_target_property(_qh_plat qattn_hip QATTN_HIP_PLATFORM)
    if(_qh_plat STREQUAL "nvidia")
      get_target_property(_cudir qattn_hip QATTN_HIP_RUNTIME_DIR)
      set(QATTN_PC_LIBS_PRIVATE "-L${_cudir} -lcudart_static -ldl -lrt -lpthread")
    elseif(QATTN_AMDHIP64_LIBRARY)
      get_filename_component(_hipdir "${QATTN_AMDHIP64_LIBRARY}" DIRECTORY)
      set(QATTN_PC_LIBS_PRIVATE "-L${_hipdir} -lamdhip64")
    endif()
  endif()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/qattn.pc.in
                 ${CMAKE_CURRENT_BINARY_DIR}/${name}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${name}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
qattn_pkgconfig(qattn-core qattn_core "" "qattn core: API, planners, CPU reference")
if(TARGET qattn_vulkan)
  qattn_pkgconfig(qattn-vulkan qattn_vulkan "qattn-core" "qattn Vulkan backend")
endif()
if(TARGET qattn_hip)
  qattn_pkgconfig(qattn-hip qattn_hip "qattn-core" "qattn HIP backend")
endif()
