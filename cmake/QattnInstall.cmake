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
  # Relocatable: the prefix is found from the .pc file's own location.
  file(RELATIVE_PATH QATTN_PC_RELPREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  if(name STREQUAL "qattn-core")
    set(QATTN_PC_LIBS_PRIVATE "-lm")
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
