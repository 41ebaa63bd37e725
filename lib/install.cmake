# Installation of libcrpm: the shared library, the public header, a CMake
# package (find_package(crpm) -> crpm::crpm) and a pkg-config file (crpm.pc).
# Included from lib/CMakeLists.txt once the crpm target exists.
include(CMakePackageConfigHelpers)

install(TARGETS crpm EXPORT crpmTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/crpm.h ${PROJECT_SOURCE_DIR}/include/crpm_types.h
  ${PROJECT_BINARY_DIR}/include/crpm_version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(CRPM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/crpm)
install(EXPORT crpmTargets NAMESPACE crpm:: DESTINATION ${CRPM_CMAKE_DIR})

# crpm.h includes mpi.h, so consumers need MPI's C target too.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/crpmConfig.cmake.in [=[
@PACKAGE_INIT@
include(CMakeFindDependencyMacro)
find_dependency(MPI COMPONENTS C)
include("${CMAKE_CURRENT_LIST_DIR}/crpmTargets.cmake")
check_required_components(crpm)
]=])
configure_package_config_file(${CMAKE_CURRENT_BINARY_DIR}/crpmConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/crpmConfig.cmake INSTALL_DESTINATION ${CRPM_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/crpmConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/crpmConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/crpmConfigVersion.cmake
  DESTINATION ${CRPM_CMAKE_DIR})

# The prefix is found relative to the .pc file, so the file stays right for
# any --prefix given at install time.
set(_pcdir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH _pc_to_prefix /_prefix/${_pcdir} /_prefix)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(_pc_libdir "${CMAKE_INSTALL_LIBDIR}")
else()
  set(_pc_libdir "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(_pc_incdir "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(_pc_incdir "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/crpm.pc
"prefix=\${pcfiledir}/${_pc_to_prefix}
libdir=${_pc_libdir}
includedir=${_pc_incdir}

Name: crpm
Description: Crash-consistent differential checkpoint/restart for MPI applications (compile with mpicc)
Version: ${PROJECT_VERSION}
Cflags: -I\${includedir}
Libs: -L\${libdir} -lcrpm
Libs.private: -lpmem -linih -lz
")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/crpm.pc DESTINATION ${_pcdir})
