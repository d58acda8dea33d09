# Across simulated hosts (scripts/multihost.sh: one network namespace and hostname per host, TCP
# between hosts, shared memory within one): label "multihost". The runner takes
# RMASTORE_TEST_HOSTS=N from the test's environment. Tests share the hosts, so they run one at a
# time (RESOURCE_LOCK), and a machine that cannot make hosts fails them with the reason.
set(RMASTORE_TEST_HOSTS 3)
# OFF keeps, across hosts, only the scenarios that name HOSTS_NP (a shorter run).
option(RMASTORE_HOSTS_MATRIX "Run every failure scenario and random seed across simulated hosts too" ON)

# rmastore_add_multihost_test(<exe> NAME <name> NP <np...> TIMEOUT <s> [KILLED <n>] [ARGS ...] [ENV ...]
#                             [LABELS ...]): registers mh_<name>.np<N> for an existing executable.
function(rmastore_add_multihost_test exe)
  cmake_parse_arguments(M "" "NAME;TIMEOUT;KILLED" "NP;ENV;LABELS;ARGS" ${ARGN})
  set(opts)
  if(DEFINED M_KILLED)
    list(APPEND opts KILLED ${M_KILLED})
  endif()
  if(M_ARGS)
    list(APPEND opts ARGS ${M_ARGS})
  endif()
  rmastore_add_mpi_test(${exe} NAME mh_${M_NAME} NP ${M_NP} TIMEOUT ${M_TIMEOUT} ${opts} LABELS multihost ${M_LABELS}
                        ENV RMASTORE_TEST_HOSTS=${RMASTORE_TEST_HOSTS} ${M_ENV})
  foreach(np IN LISTS M_NP)
    set_tests_properties(mh_${M_NAME}.np${np} PROPERTIES RESOURCE_LOCK multihost FIXTURES_REQUIRED multihost)
  endforeach()
endfunction()

# The hosts come up with the first run (scripts/multihost.sh run) and go down after the last.
add_test(NAME multihost_down COMMAND ${PROJECT_SOURCE_DIR}/scripts/multihost.sh down)
set_tests_properties(multihost_down PROPERTIES FIXTURES_CLEANUP multihost LABELS multihost RESOURCE_LOCK multihost)
rmastore_test_timeout(multihost_down 60)

# The harness itself: ranks on every host, the store sees them as nodes, copies on distinct
# hosts (end to end: each process reports what its own memory holds).
add_executable(test_hosts test_hosts.cpp)
target_link_libraries(test_hosts PRIVATE rmastore_internal rmastore_test_main rmastore_build_flags)
rmastore_add_multihost_test(test_hosts NAME test_hosts NP 3 6 TIMEOUT 60)
# store_init finds the fixes of scripts/openmpi-patches in this Open MPI, so it says nothing of them.
set_tests_properties(mh_test_hosts.np3 mh_test_hosts.np6 PROPERTIES FAIL_REGULAR_EXPRESSION "lacks the fixes")

# ULFM itself across hosts, and the Open MPI defects met there.
add_executable(ompi_ulfm_across_hosts ompi_ulfm_across_hosts.c)
target_link_libraries(ompi_ulfm_across_hosts PRIVATE MPI::MPI_C)
rmastore_add_multihost_test(ompi_ulfm_across_hosts NAME ompi_ulfm_across_hosts NP 6 KILLED 1 TIMEOUT 60
                            LABELS ulfm ompi)
rmastore_add_multihost_test(ompi_ulfm_across_hosts NAME ompi_failure_event_wildcard NP 6 ARGS lazy KILLED 1
                            TIMEOUT 60 LABELS ulfm ompi ENV RMASTORE_MULTIHOST_LAZY=1)

# A whole host lost: both ranks of the last host and its Open MPI daemon (killed first).
# Needs scripts/openmpi-patches/0003 (without it PRRTE ends the whole job).
add_executable(ompi_host_loss ompi_host_loss.c)
target_link_libraries(ompi_host_loss PRIVATE MPI::MPI_C)
rmastore_add_multihost_test(ompi_host_loss NAME ompi_host_loss NP 6 KILLED 2 TIMEOUT 60 LABELS ulfm ompi)


# RMA toward a dead process of another host, and MPI_Finalize with the window abandoned.
# Needs scripts/openmpi-patches/0004 (without it both block forever over TCP).
add_executable(ompi_rput_dead_target ompi_rput_dead_target.c)
target_link_libraries(ompi_rput_dead_target PRIVATE MPI::MPI_C)
rmastore_add_multihost_test(ompi_rput_dead_target NAME ompi_rput_dead_target NP 3 KILLED 1 TIMEOUT 60
                            LABELS ulfm ompi)

# A put toward another host whose address is in the cached region table reads nothing first
# (window info key cache_dynamic_regions, scripts/openmpi-patches/0011); "uncached" checks the
# premise: without the key, the same put waits for the target's table.
add_executable(ompi_region_cache ompi_region_cache.c)
target_link_libraries(ompi_region_cache PRIVATE MPI::MPI_C)
rmastore_add_multihost_test(ompi_region_cache NAME ompi_region_cache NP 3 TIMEOUT 60 LABELS ompi)
rmastore_add_multihost_test(ompi_region_cache NAME ompi_region_cache_uncached NP 3 ARGS uncached TIMEOUT 60 LABELS ompi)

# RMA from another host toward live processes whose node mates died (one the node's first
# process, which osc/rdma made hold the state of the node's processes). Needs
# scripts/openmpi-patches/0004 and 0006.
add_executable(ompi_rma_node_mates ompi_rma_node_mates.c)
target_link_libraries(ompi_rma_node_mates PRIVATE MPI::MPI_C)
rmastore_add_multihost_test(ompi_rma_node_mates NAME ompi_rma_node_mates NP 6 KILLED 2 TIMEOUT 60 LABELS ulfm ompi)

# A process that dies while it reads another's table of attached regions: that process's next
# MPI_Win_attach must not wait forever for the dead reader's lock. Needs
# scripts/openmpi-patches/0008.
add_executable(ompi_region_lock_dead_reader ompi_region_lock_dead_reader.c)
target_link_libraries(ompi_region_lock_dead_reader PRIVATE MPI::MPI_C Threads::Threads)
rmastore_add_multihost_test(ompi_region_lock_dead_reader NAME ompi_region_lock_dead_reader NP 6 KILLED 4 TIMEOUT 60
                            LABELS ulfm ompi)

# Agreements while processes die, with a second thread progressing MPI (as rmastore's helper
# does): no survivor may crash or hang. scripts/openmpi-patches/0009 (coll/ftagree: a deferred
# failure notice used the agreement after it was freed).
add_executable(ompi_agree_during_deaths ompi_agree_during_deaths.c)
target_link_libraries(ompi_agree_during_deaths PRIVATE MPI::MPI_C Threads::Threads)
rmastore_add_multihost_test(ompi_agree_during_deaths NAME ompi_agree_during_deaths NP 6 KILLED 4 TIMEOUT 60
                            LABELS ulfm ompi)
