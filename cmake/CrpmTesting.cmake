# MPI launch settings for CTest.  Open MPI refuses to run as root or with more
# ranks than cores unless told; other MPIs do not know these switches.
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version
                OUTPUT_VARIABLE _crpm_mpiexec_version ERROR_QUIET)
set(CRPM_MPIEXEC_PREFLAGS "" CACHE STRING "Extra mpiexec flags for tests")
if(_crpm_mpiexec_version MATCHES "Open MPI|OpenRTE" AND CRPM_MPIEXEC_PREFLAGS STREQUAL "")
  set(CRPM_MPIEXEC_PREFLAGS --oversubscribe --allow-run-as-root)
endif()
set(CRPM_MPIEXEC_FLAGS ${MPIEXEC_PREFLAGS} ${CRPM_MPIEXEC_PREFLAGS})
string(REPLACE ";" " " CRPM_MPIEXEC_FLAGS_STR "${CRPM_MPIEXEC_FLAGS}")
# Open MPI never unlinks the shared-memory files of a killed job; the crash
# tests kill hundreds of ranks, so those files go to the build tree instead of
# filling /dev/shm (the crash driver puts them in each trial's directory).
set(CRPM_OMPI_SHM_DIR ${CMAKE_BINARY_DIR}/ompi-shm)
file(MAKE_DIRECTORY ${CRPM_OMPI_SHM_DIR})

find_program(CRPM_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT CRPM_PYTHON3)
  find_program(CRPM_PYTHON3 NAMES python3 REQUIRED)
endif()

# Tests learn whether libcrpm has the internal test hooks (CRPM_TEST_HOOKS,
# lib/CMakeLists.txt) from the variable of that name, ON or OFF; a driver
# that needs them and finds OFF exits with 77, which CTest reports as
# skipped (tests/tools/crpmtest.py: Skipped).
if(CRPM_TEST_HOOKS)
  set(CRPM_TEST_HOOKS_ENV CRPM_TEST_HOOKS=ON)
else()
  set(CRPM_TEST_HOOKS_ENV CRPM_TEST_HOOKS=OFF)
endif()

# crpm_add_mpi_test(NAME name NP n TIMEOUT s COMMAND exe args... [LABELS l...])
function(crpm_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;NP;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_test(NAME ${T_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NP} ${CRPM_MPIEXEC_FLAGS} ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "mpi;${T_LABELS}"
    ENVIRONMENT "OMPI_MCA_btl_vader_backing_directory=${CRPM_OMPI_SHM_DIR};${CRPM_TEST_HOOKS_ENV}")
endfunction()

# crpm_add_script_test(NAME name TIMEOUT s COMMAND args...): a driver script
# that launches MPI itself; gets the launch settings through the environment.
function(crpm_add_script_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}" SKIP_RETURN_CODE 77
    ENVIRONMENT "CRPM_MPIEXEC=${MPIEXEC_EXECUTABLE};CRPM_MPIEXEC_FLAGS=${CRPM_MPIEXEC_FLAGS_STR};CRPM_PYTHON3=${CRPM_PYTHON3};OMPI_MCA_btl_vader_backing_directory=${CRPM_OMPI_SHM_DIR};${CRPM_TEST_HOOKS_ENV}")
endfunction()
