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

# Where the tests write checkpoints and work files: /dev/shm (tmpfs, the
# suite's stand-in for persistent memory) when it exists, is writable and has
# CRPM_TEST_SHM_MIN_MB free (the suite's peak, two tests at a time, with
# room to spare); otherwise <build>/test-shm on the build tree's disk (slower,
# same results).  A container's /dev/shm is often 64 MB.  -DCRPM_TEST_SHM=DIR
# chooses.  Every test's files get names unique to the build tree or process.
set(CRPM_TEST_SHM "" CACHE PATH "Directory for the tests' checkpoints (empty: /dev/shm when it has room)")
set(CRPM_TEST_SHM_MIN_MB 2048 CACHE STRING "Free space /dev/shm needs to be used by the tests")
if(CRPM_TEST_SHM)
  set(CRPM_TEST_SHM_DIR ${CRPM_TEST_SHM})
else()
  set(CRPM_TEST_SHM_DIR ${CMAKE_BINARY_DIR}/test-shm)
  set(_shm_why "/dev/shm is missing")
  if(IS_DIRECTORY /dev/shm)
    set(_shm_why "/dev/shm is not writable")
    execute_process(COMMAND test -w /dev/shm RESULT_VARIABLE _shm_w)
    if(_shm_w EQUAL 0)
      execute_process(COMMAND df -Pk /dev/shm OUTPUT_VARIABLE _shm_df RESULT_VARIABLE _shm_rc ERROR_QUIET)
      if(_shm_rc EQUAL 0 AND _shm_df MATCHES "\n[^\n]*[ \t]+[0-9]+[ \t]+[0-9]+[ \t]+([0-9]+)[ \t]+[0-9]+%")
        math(EXPR _shm_free_mb "${CMAKE_MATCH_1} / 1024")
        if(_shm_free_mb LESS CRPM_TEST_SHM_MIN_MB)
          set(_shm_why "/dev/shm has ${_shm_free_mb} MB free, less than CRPM_TEST_SHM_MIN_MB = ${CRPM_TEST_SHM_MIN_MB}")
        else()
          set(CRPM_TEST_SHM_DIR /dev/shm)
        endif()
      else()
        set(CRPM_TEST_SHM_DIR /dev/shm) # df unreadable: assume room
      endif()
    endif()
  endif()
  if(NOT CRPM_TEST_SHM_DIR STREQUAL "/dev/shm")
    message(STATUS "tests: checkpoints go to ${CRPM_TEST_SHM_DIR} (${_shm_why})")
  endif()
endif()
file(MAKE_DIRECTORY ${CRPM_TEST_SHM_DIR})

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
    ENVIRONMENT "OMPI_MCA_btl_vader_backing_directory=${CRPM_OMPI_SHM_DIR};${CRPM_TEST_HOOKS_ENV};CRPM_TEST_SHM=${CRPM_TEST_SHM_DIR}")
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
    ENVIRONMENT "CRPM_MPIEXEC=${MPIEXEC_EXECUTABLE};CRPM_MPIEXEC_FLAGS=${CRPM_MPIEXEC_FLAGS_STR};CRPM_PYTHON3=${CRPM_PYTHON3};OMPI_MCA_btl_vader_backing_directory=${CRPM_OMPI_SHM_DIR};${CRPM_TEST_HOOKS_ENV};CRPM_TEST_SHM=${CRPM_TEST_SHM_DIR}")
endfunction()
