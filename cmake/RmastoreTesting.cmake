# rmastore_add_mpi_test(<name> SOURCES <files...> NP <counts...> [TIMEOUT <s>] [LABELS <labels...>]
#                       [ARGS <args...>] [KILLED <n>] [NAME <test name>] [ENV <VAR=value...>])
#
# Builds one executable (unless a target <name> exists already: then SOURCES is not needed and
# that target is used as it is) and registers it once per process count as <name>.np<N>, run by
# tests/mpirun_test.sh under `mpirun --with-ft ulfm --oversubscribe`. The verdict comes from the
# ranks themselves: each writes PASS or FAIL to a file and the runner requires a PASS from every
# rank expected to survive, whatever mpirun's exit code says. KILLED is the number of ranks the
# test kills on purpose (default 0); all others must report PASS. NAME registers an existing
# executable <name> under another test name (e.g. once per argument set).
set(RMASTORE_MPIRUN_TEST ${CMAKE_CURRENT_LIST_DIR}/../tests/mpirun_test.sh)

function(rmastore_add_mpi_test name)
  cmake_parse_arguments(A "" "TIMEOUT;KILLED;NAME" "SOURCES;NP;LABELS;ARGS;ENV" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  set(test_name ${name})
  if(A_NAME)
    set(test_name ${A_NAME})
  endif()
  if(NOT TARGET ${name})
    add_executable(${name} ${A_SOURCES})
    target_link_libraries(${name} PRIVATE rmastore_internal rmastore_test_main rmastore_build_flags)
  endif()
  foreach(np IN LISTS A_NP)
    set(expect ${np})
    if(DEFINED A_KILLED)
      math(EXPR expect "${np} - ${A_KILLED}")
    endif()
    add_test(NAME ${test_name}.np${np}
             COMMAND ${RMASTORE_MPIRUN_TEST} ${MPIEXEC_EXECUTABLE} ${np} ${expect} ${A_TIMEOUT}
                     $<TARGET_FILE:${name}> ${A_ARGS})
    # The runner enforces the timeout itself (and kills stragglers); CTest's is a backstop.
    math(EXPR backstop "${A_TIMEOUT} + 30")
    set_tests_properties(${test_name}.np${np} PROPERTIES PROCESSORS ${np} LABELS "mpi;${A_LABELS}"
                         ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;${RMASTORE_TSAN_ENV};${A_ENV}")
    rmastore_test_timeout(${test_name}.np${np} ${backstop})
  endforeach()
endfunction()

# rmastore_test_timeout(<test> <seconds>)
#
# Sets the CTest timeout of <test>, to be multiplied by RMASTORE_TEST_TIME_SCALE as found when
# ctest runs (tests/test_util.hpp), once rmastore_scale_test_timeouts() is called at the end of
# the directory.
function(rmastore_test_timeout test seconds)
  set_tests_properties(${test} PROPERTIES TIMEOUT ${seconds})
  set_property(DIRECTORY APPEND PROPERTY RMASTORE_TEST_TIMEOUTS "${test}" "${seconds}")
endfunction()

# rmastore_scale_test_timeouts()
#
# At the end of a directory that called rmastore_test_timeout: CTest properties are fixed when
# cmake configures, but the scale is read when ctest runs. ctest includes a directory's
# TEST_INCLUDE_FILES before that directory's own tests and processes subdirectories after them,
# so the rescaling goes into the include file of a generated subdirectory.
function(rmastore_scale_test_timeouts)
  get_property(timeouts DIRECTORY PROPERTY RMASTORE_TEST_TIMEOUTS)
  set(RMASTORE_TIMEOUT_LIST "")
  while(timeouts)
    list(POP_FRONT timeouts test seconds)
    string(APPEND RMASTORE_TIMEOUT_LIST "\n    [=[${test}]=] ${seconds}")
  endwhile()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/rmastore_time_scale)
  configure_file(${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../tests/ctest_time_scale.cmake.in ${dir}/scale.cmake @ONLY)
  file(WRITE ${dir}/src/CMakeLists.txt "set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${dir}/scale.cmake)\n")
  add_subdirectory(${dir}/src ${dir}/bin)
endfunction()
