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
    set_tests_properties(${test_name}.np${np} PROPERTIES TIMEOUT ${backstop} PROCESSORS ${np}
                         LABELS "mpi;${A_LABELS}" ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;${A_ENV}")
  endforeach()
endfunction()
