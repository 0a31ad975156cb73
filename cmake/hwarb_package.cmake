# What `cmake --install` puts in a prefix and `cpack -G DEB` packs (docs/library.md):
#   include/hwarb/...                 every component's public headers, and hwarb/version.h
#   lib/libhwarb_NAME.{a,so}          one library per component (hwarb::NAME)
#   lib/cmake/hwarb/                  hwarbConfig.cmake (find_package(hwarb 0.1 COMPONENTS ...)),
#                                     its version file and the exported targets
#   lib/pkgconfig/hwarb.pc            the same for pkg-config (every component)
#   bin/hwarb                         the CLI (with HWARB_BUILD_TOOLS)
include(CMakePackageConfigHelpers)

# hwarb/version.h: the version as macros, for code that must check it at compile time.
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in
               ${PROJECT_BINARY_DIR}/generated/include/hwarb/version.h @ONLY)
target_include_directories(hwarb_base INTERFACE
                           $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated/include>)
install(FILES ${PROJECT_BINARY_DIR}/generated/include/hwarb/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hwarb)

set(hwarb_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/hwarb)
install(EXPORT hwarbTargets NAMESPACE hwarb:: DESTINATION ${hwarb_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hwarbConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/hwarbConfig.cmake
                              INSTALL_DESTINATION ${hwarb_cmake_dir})
# 0.x: a minor version may break the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/hwarbConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/hwarbConfig.cmake ${PROJECT_BINARY_DIR}/hwarbConfigVersion.cmake
        DESTINATION ${hwarb_cmake_dir})

# pkg-config: every installed component, users before what they use (static linking order).
set(hwarb_pc_libs "")
foreach(name linux_gdbserver gdb linux_trace linux_session linux_soft_watch linux_perf
             linux_inferior linux_tracee linux_symbols linux_sys sim_system sim ptrace_compat bts_pmu
             bts bts_buffer breakpoints pmu arbiter x86_insn x86 base)
  get_target_property(type hwarb_${name} TYPE)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    string(APPEND hwarb_pc_libs " -lhwarb_${name}")
  endif()
endforeach()
file(RELATIVE_PATH hwarb_pc_to_prefix /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/hwarb.pc.in ${PROJECT_BINARY_DIR}/hwarb.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/hwarb.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The Debian package: `cpack -G DEB` in the build directory.
set(CPACK_PACKAGE_NAME hwarb)
set(CPACK_PACKAGE_VENDOR "hwarb")
set(CPACK_PACKAGE_CONTACT "hwarb developers <hwarb@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The headers need the development packages of what the libraries use.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libboost-dev (>= 1.74), libtbb-dev, libzydis-dev, libdw-dev, libelf-dev")
set(CPACK_GENERATOR DEB)
include(CPack)
