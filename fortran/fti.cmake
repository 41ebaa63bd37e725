# Module `fti` (fti.mod) and libfti_f90: FTI's Fortran interface on the FTI
# compatibility layer (target fti, lib/fti).  Included by CMakeLists.txt once
# MPI's Fortran support is known to exist.  (An included file must not
# return(): that would leave the including CMakeLists.txt.)
if(TARGET fti)

  # FTI's module also covers 16-byte kinds; offer them where the compiler has them.
  include(CheckFortranSourceCompiles)
  check_fortran_source_compiles("program p\ninteger(16) :: i\nlogical(16) :: l\ni = 1\nl = .true.\nend program"
    FTIF_HAVE_INT128 SRC_EXT F90)
  check_fortran_source_compiles("program p\nreal(16) :: r\ncomplex(16) :: c\nr = 1\nc = r\nend program"
    FTIF_HAVE_REAL128 SRC_EXT F90)

  # A directory of its own, so that -I for crpm.mod never sees fti.mod and a
  # real FTI installation elsewhere is not shadowed by accident.
  set(FTIF_MODDIR ${CMAKE_CURRENT_BINARY_DIR}/fti-include)
  # Installed beside the C layer (lib/fti): <prefix>/include/crpm-fti/fti.mod,
  # <prefix>/lib/crpm-fti/libfti_f90.so, apart from a real FTI.
  set(CRPM_FTI_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/crpm-fti)
  if(NOT DEFINED CRPM_FTI_LIBDIR)
    set(CRPM_FTI_LIBDIR ${CMAKE_INSTALL_LIBDIR}/crpm-fti)
  endif()
  add_library(fti_fortran SHARED fti.F90 fti_fshim.c)
  # FTI's own Fortran library is libfti_f90: same name, so link lines of FTI
  # programs (-lfti_f90 -lfti) work unchanged.
  set_target_properties(fti_fortran PROPERTIES
    OUTPUT_NAME fti_f90
    Fortran_MODULE_DIRECTORY ${FTIF_MODDIR}
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    INSTALL_RPATH "$ORIGIN;$ORIGIN/.." EXPORT_NAME fti_f90)
  target_include_directories(fti_fortran PUBLIC
    $<BUILD_INTERFACE:${FTIF_MODDIR}>
    $<INSTALL_INTERFACE:${CRPM_FTI_INCLUDEDIR}>)
  target_compile_definitions(fti_fortran PRIVATE
    $<$<BOOL:${FTIF_HAVE_INT128}>:FTIF_HAVE_INT128>
    $<$<BOOL:${FTIF_HAVE_REAL128}>:FTIF_HAVE_REAL128>)
  target_link_libraries(fti_fortran PUBLIC fti PRIVATE MPI::MPI_C)
  if(CMAKE_Fortran_COMPILER_ID STREQUAL "GNU")
    target_compile_options(fti_fortran PRIVATE
      $<$<COMPILE_LANGUAGE:Fortran>:-Wall -Wextra -std=f2018>)
  endif()
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(fti_fortran PRIVATE $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra>)
  endif()
  add_library(crpm::fti_f90 ALIAS fti_fortran)

  # Joins the C layer's export set: find_package(crpm-fti) gives crpm::fti_f90.
  install(TARGETS fti_fortran EXPORT crpmFtiTargets
          LIBRARY DESTINATION ${CRPM_FTI_LIBDIR}
          ARCHIVE DESTINATION ${CRPM_FTI_LIBDIR})
  install(FILES ${FTIF_MODDIR}/fti.mod DESTINATION ${CRPM_FTI_INCLUDEDIR})
endif()
