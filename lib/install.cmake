# Installation of libcrpm: library, public headers, CMake package
# (find_package(crpm [COMPONENTS C Fortran]) -> crpm::crpm, crpm::fortran),
# version file and pkg-config files (crpm.pc here, crpmf.pc in fortran/).
# Included from lib/CMakeLists.txt once the crpm target exists.
#
# MPI is not exported with the targets: the package's config file attaches
# MPI's target for the consumer's own language (C, CXX or Fortran), so that a
# C++-only or Fortran-only project never needs MPI's C binding.
include(CMakePackageConfigHelpers)

set(CRPM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/crpm CACHE INTERNAL "")
set(CRPM_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig CACHE INTERNAL "")
get_target_property(_crpm_type crpm TYPE)

# Rewrites the link interface of an installed target for export:
#  * MPI::* is kept for the build tree only (see above);
#  * other imported targets (pkg-config, zlib) are replaced, in the install
#    tree, by the files they name, so that a static libcrpm needs no
#    find_package of its private dependencies;
#  * targets of this project in the interface (a static libcrpm's internal
#    libraries) are collected in _crpm_internal to be installed alongside.
set(_crpm_internal)
function(_crpm_export_interface tgt)
  get_target_property(libs ${tgt} INTERFACE_LINK_LIBRARIES)
  if(NOT libs)
    return()
  endif()
  set(out)
  set(internal ${_crpm_internal})
  foreach(item IN LISTS libs)
    set(inner "${item}")
    set(link_only OFF)
    if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
      set(inner "${CMAKE_MATCH_1}")
      set(link_only ON)
    endif()
    if(NOT TARGET "${inner}")
      list(APPEND out "${item}")
      continue()
    endif()
    get_target_property(imported "${inner}" IMPORTED)
    if(inner MATCHES "^MPI::")
      list(APPEND out "$<BUILD_INTERFACE:${item}>")
    elseif(imported)
      set(files)
      get_target_property(loc "${inner}" IMPORTED_LOCATION)
      if(NOT loc)
        get_target_property(loc "${inner}" IMPORTED_LOCATION_RELEASE)
      endif()
      if(loc)
        list(APPEND files "${loc}")
      endif()
      get_target_property(sub "${inner}" INTERFACE_LINK_LIBRARIES)
      foreach(s IN LISTS sub)
        if(s AND NOT TARGET "${s}")
          list(APPEND files "${s}")
        endif()
      endforeach()
      list(APPEND out "$<BUILD_INTERFACE:${item}>")
      foreach(f IN LISTS files)
        if(link_only)
          list(APPEND out "$<INSTALL_INTERFACE:$<LINK_ONLY:${f}>>")
        else()
          list(APPEND out "$<INSTALL_INTERFACE:${f}>")
        endif()
      endforeach()
    else()
      list(APPEND out "${item}")
      if(NOT inner IN_LIST internal)
        list(APPEND internal "${inner}")
        set(_crpm_internal ${internal}) # seen by the recursive call, which returns it extended
        _crpm_export_interface("${inner}")
        set(internal ${_crpm_internal})
      endif()
    endif()
  endforeach()
  set(_crpm_internal ${internal} PARENT_SCOPE)
  set_target_properties(${tgt} PROPERTIES INTERFACE_LINK_LIBRARIES "${out}")
endfunction()
_crpm_export_interface(crpm)

set_target_properties(crpm PROPERTIES EXPORT_NAME crpm)
install(TARGETS crpm ${_crpm_internal} EXPORT crpmTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT C
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT C
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT C
  OBJECTS DESTINATION ${CMAKE_INSTALL_LIBDIR}/crpm-objects COMPONENT C
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Every public header (crpm.h, and the MPI-free crpm_types.h / generated
# crpm_version.h once they exist).
file(GLOB _crpm_headers ${PROJECT_SOURCE_DIR}/include/crpm*.h ${PROJECT_BINARY_DIR}/include/crpm*.h)
install(FILES ${_crpm_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT C)
install(FILES ${PROJECT_SOURCE_DIR}/include/crpm/allocator.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/crpm COMPONENT C)
install(EXPORT crpmTargets NAMESPACE crpm:: DESTINATION ${CRPM_CMAKE_DIR} COMPONENT C)

file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/crpmConfig.cmake.in [=[
# crpm CMake package.  Components: C (crpm::crpm; also for C++) and Fortran
# (crpm::fortran, module crpm).  Without COMPONENTS: C, plus Fortran when the
# project has Fortran enabled and the bindings were installed.
@PACKAGE_INIT@
include(CMakeFindDependencyMacro)
include("${CMAKE_CURRENT_LIST_DIR}/crpmTargets.cmake")

get_property(_crpm_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
set(_crpm_want ${crpm_FIND_COMPONENTS})
if(NOT _crpm_want)
  set(_crpm_want C)
  if("Fortran" IN_LIST _crpm_langs AND TARGET crpm::fortran)
    list(APPEND _crpm_want Fortran)
  endif()
endif()

foreach(_crpm_c IN LISTS _crpm_want)
  string(TOLOWER "${_crpm_c}" _crpm_lc)
  set(crpm_${_crpm_c}_FOUND FALSE)
  if(_crpm_lc STREQUAL "c" OR _crpm_lc STREQUAL "cxx")
    # crpm.h includes mpi.h: MPI of whichever C-family language is enabled.
    if("C" IN_LIST _crpm_langs)
      set(_crpm_mpi C)
    elseif("CXX" IN_LIST _crpm_langs)
      set(_crpm_mpi CXX)
    else()
      set(crpm_${_crpm_c}_NOT_FOUND_MESSAGE "component ${_crpm_c} needs the C or CXX language enabled")
      continue()
    endif()
    find_dependency(MPI COMPONENTS ${_crpm_mpi})
    set_property(TARGET crpm::crpm APPEND PROPERTY INTERFACE_LINK_LIBRARIES MPI::MPI_${_crpm_mpi})
    set(crpm_${_crpm_c}_FOUND TRUE)
  elseif(_crpm_lc STREQUAL "fortran")
    if(NOT TARGET crpm::fortran)
      set(crpm_${_crpm_c}_NOT_FOUND_MESSAGE "libcrpm was installed without Fortran bindings")
      continue()
    endif()
    if(NOT "Fortran" IN_LIST _crpm_langs)
      set(crpm_${_crpm_c}_NOT_FOUND_MESSAGE "component Fortran needs the Fortran language enabled")
      continue()
    endif()
    find_dependency(MPI COMPONENTS Fortran)
    set_property(TARGET crpm::fortran APPEND PROPERTY INTERFACE_LINK_LIBRARIES MPI::MPI_Fortran)
    set(crpm_${_crpm_c}_FOUND TRUE)
  else()
    set(crpm_${_crpm_c}_NOT_FOUND_MESSAGE "unknown component ${_crpm_c} (known: C, Fortran)")
  endif()
endforeach()
check_required_components(crpm)
]=])
configure_package_config_file(${CMAKE_CURRENT_BINARY_DIR}/crpmConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/crpmConfig.cmake INSTALL_DESTINATION ${CRPM_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/crpmConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/crpmConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/crpmConfigVersion.cmake
  DESTINATION ${CRPM_CMAKE_DIR} COMPONENT C)

# crpm_install_pkgconfig(NAME name DESCRIPTION text CFLAGS flags LIBS flags [LIBS_PRIVATE flags]
#                        [REQUIRES modules] COMPONENT component)
# The .pc file is written at install time, so prefix and libdir are those of
# the actual installation (cmake --install --prefix P), without ../ detours.
# Libs carry -Wl,-rpath for a libdir outside the linker's default path, so
# that programs start without LD_LIBRARY_PATH; the flag alone is in the
# variable `rpath` (pkg-config --variable=rpath NAME).
function(crpm_install_pkgconfig)
  cmake_parse_arguments(P "" "NAME;DESCRIPTION;CFLAGS;LIBS;LIBS_PRIVATE;REQUIRES;COMPONENT" "" ${ARGN})
  set(tmpl ${CMAKE_CURRENT_BINARY_DIR}/${P_NAME}.pc.in)
  file(WRITE ${tmpl} "prefix=@_pc_prefix@
exec_prefix=\${prefix}
libdir=@_pc_libdir@
includedir=@_pc_incdir@
rpath=-Wl,-rpath,\${libdir}

Name: ${P_NAME}
Description: ${P_DESCRIPTION}
Version: ${PROJECT_VERSION}
Requires: ${P_REQUIRES}
Cflags: ${P_CFLAGS}
Libs: -L\${libdir} @_pc_rpath@${P_LIBS}
Libs.private: ${P_LIBS_PRIVATE}
")
  set(out ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig-install/${P_NAME}.pc)
  install(CODE "
    set(_pc_prefix \"\${CMAKE_INSTALL_PREFIX}\")
    foreach(_v libdir:${CMAKE_INSTALL_LIBDIR} incdir:${CMAKE_INSTALL_INCLUDEDIR})
      string(REPLACE \":\" \";\" _kv \"\${_v}\")
      list(GET _kv 0 _k)
      list(GET _kv 1 _d)
      if(IS_ABSOLUTE \"\${_d}\")
        set(_pc_\${_k} \"\${_d}\")
      else()
        set(_pc_\${_k} \"\\\${prefix}/\${_d}\")
      endif()
      string(REPLACE \"\\\${prefix}\" \"\${_pc_prefix}\" _abs_\${_k} \"\${_pc_\${_k}}\")
    endforeach()
    set(_pc_rpath \"\\\${rpath} \")
    if(_abs_libdir MATCHES \"^/(usr/)?lib(32|64|x32)?(/[^/]*-linux-gnu[^/]*)?/?$\")
      set(_pc_rpath \"\")
    endif()
    configure_file(\"${tmpl}\" \"${out}\" @ONLY)
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CRPM_PKGCONFIG_DIR}\" TYPE FILE FILES \"${out}\")
  " COMPONENT ${P_COMPONENT})
endfunction()

# A static libcrpm brings its dependencies (pkg-config --static).
set(_crpm_pc_private)
foreach(t IN LISTS _crpm_internal) # a static libcrpm's internal libraries come first
  get_target_property(_t_type ${t} TYPE)
  if(_t_type STREQUAL "STATIC_LIBRARY")
    get_target_property(_t_name ${t} OUTPUT_NAME)
    if(NOT _t_name)
      set(_t_name ${t})
    endif()
    string(APPEND _crpm_pc_private "-l${_t_name} ")
  endif()
endforeach()
string(APPEND _crpm_pc_private "-lpmem -linih -lisal -lz -lm")
if(CRPM_HAVE_CUDA) # the GPU kinds' static CUDA runtime (lib/device)
  get_target_property(_cudart CUDA::cudart_static IMPORTED_LOCATION)
  if(_cudart)
    string(APPEND _crpm_pc_private " ${_cudart} -lpthread -ldl -lrt")
  endif()
endif()
if(HDF5_FOUND AND HDF5_IS_PARALLEL)
  foreach(l IN LISTS HDF5_C_LIBRARIES)
    if(l MATCHES "^/.*hdf5")
      string(APPEND _crpm_pc_private " ${l}")
    endif()
  endforeach()
endif()
crpm_install_pkgconfig(NAME crpm COMPONENT C
  DESCRIPTION "Crash-consistent differential checkpoint/restart for MPI applications (compile with mpicc)"
  CFLAGS "-I\${includedir}" LIBS "-lcrpm" LIBS_PRIVATE "${_crpm_pc_private}")
