# The durable tier: a job writes snapshots, a new job of another size restores one in store_init
# (tests/snapshot_restart.sh runs the jobs one after the other in a fresh directory).
add_executable(test_snapshot test_snapshot.cpp)
target_link_libraries(test_snapshot PRIVATE rmastore_test_util rmastore_build_flags)
# snapshot_test(<name> <write np> <read np> <snapshot to restore> <newer ones skipped>
#               [DAMAGE flip|truncate|nopart|nomanifest] [ENV ...] [LABELS ...])
function(snapshot_test name wnp rnp expect skipped)
  cmake_parse_arguments(S "" "DAMAGE" "ENV;LABELS" ${ARGN})
  add_test(NAME snapshot_${name}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/snapshot_restart.sh ${RMASTORE_MPIRUN_TEST} ${MPIEXEC_EXECUTABLE}
                   $<TARGET_FILE:test_snapshot> ${wnp} ${rnp} ${expect} ${skipped} ${S_DAMAGE})
  set_tests_properties(snapshot_${name} PROPERTIES PROCESSORS 2 LABELS "mpi;snapshot;${S_LABELS}"
                       ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;${RMASTORE_TSAN_ENV};${S_ENV}")
  rmastore_test_timeout(snapshot_${name} 240)
endfunction()
# Restart at the same, a smaller and a larger size, in both variants.
snapshot_test(same 4 4 2 0)
snapshot_test(smaller 4 2 2 0)
snapshot_test(larger 3 7 2 0)
snapshot_test(localized_smaller 4 3 2 0 ENV RMASTORE_TEST_RECOVERY=localized LABELS localized)
snapshot_test(localized_larger 2 5 2 0 ENV RMASTORE_TEST_RECOVERY=localized LABELS localized)
# A damaged newest snapshot is skipped (and said so), and the one before it is restored.
snapshot_test(flipped_byte 4 3 1 1 DAMAGE flip)
snapshot_test(truncated_part 4 3 1 1 DAMAGE truncate)
snapshot_test(missing_part 4 3 1 1 DAMAGE nopart)
snapshot_test(missing_manifest 4 3 1 1 DAMAGE nomanifest)
# A process dies in the second snapshot, before the manifest or before its part is on disk: the
# survivors get STORE_ERR_PROC_FAILED, and the snapshot is never loaded.
snapshot_test(death_before_manifest 4 3 1 1 ENV RMASTORE_FAULT=snapshot.before_manifest@0\#2 LABELS ulfm)
snapshot_test(death_writing_part 4 5 1 1 ENV RMASTORE_FAULT=snapshot.part_written@2\#2 LABELS ulfm)
snapshot_test(localized_death_writing_part 4 3 1 1
              ENV RMASTORE_FAULT=snapshot.part_written@1\#2 RMASTORE_TEST_RECOVERY=localized LABELS ulfm localized)
# The second snapshot in the background (store_snapshot_start, generation 3 put meanwhile,
# store_snapshot_wait): it holds generation 2 exactly; a process dying while its part is
# written leaves it unloaded.
snapshot_test(background_smaller 4 3 2 0 ENV RMASTORE_TEST_SNAPSHOT_BACKGROUND=1)
snapshot_test(localized_background_larger 3 5 2 0 ENV RMASTORE_TEST_SNAPSHOT_BACKGROUND=1
              RMASTORE_TEST_RECOVERY=localized LABELS localized)
snapshot_test(background_death_writing_part 4 3 1 1 ENV RMASTORE_TEST_SNAPSHOT_BACKGROUND=1
              RMASTORE_FAULT=snapshot.part_written@2\#2 LABELS ulfm)
# Two levels (snapshot_local_dir, one per host): parts go to the local level and a flush takes
# them to snapshot_dir; store_finalize finishes the second snapshot's flush. A restart reads
# every part it finds whole locally there. A process dying while its local part is written
# leaves the snapshot unloaded, and out of snapshot_dir (no newer snapshot to skip).
snapshot_test(two_levels_smaller 4 3 2 0 ENV RMASTORE_TEST_SNAPSHOT_LOCAL=1)
snapshot_test(localized_two_levels_background_larger 3 5 2 0 ENV RMASTORE_TEST_SNAPSHOT_LOCAL=1
              RMASTORE_TEST_SNAPSHOT_BACKGROUND=1 RMASTORE_TEST_RECOVERY=localized LABELS localized)
snapshot_test(two_levels_death_writing_part 4 3 1 0 ENV RMASTORE_TEST_SNAPSHOT_LOCAL=1
              RMASTORE_FAULT=snapshot.part_written@2\#2 LABELS ulfm)
# Across 3 simulated hosts, the last one lost with its local level between the jobs: its parts
# come from snapshot_dir, the others' from their hosts (the same size, so each part's reader is
# on the host that wrote it).
snapshot_test(mh_two_levels_lost_host 6 6 2 0 ENV RMASTORE_TEST_SNAPSHOT_LOCAL=1 RMASTORE_TEST_LOSE_HOST=host3
              RMASTORE_TEST_HOSTS=${RMASTORE_TEST_HOSTS} LABELS multihost)
set_tests_properties(snapshot_mh_two_levels_lost_host PROPERTIES RESOURCE_LOCK multihost FIXTURES_REQUIRED multihost)
# The statuses: no snapshot_dir, a missing directory, an empty one, a newer format.
add_test(NAME snapshot_errors COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/snapshot_restart.sh ${RMASTORE_MPIRUN_TEST}
                                      ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:test_snapshot> errors 3)
set_tests_properties(snapshot_errors PROPERTIES PROCESSORS 2 LABELS "mpi;snapshot"
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;${RMASTORE_TSAN_ENV}")
rmastore_test_timeout(snapshot_errors 120)
# snapshot_keep: the two newest complete snapshots stay, nothing of the older ones; with two
# levels, each local level keeps only the newest flushed parts.
foreach(levels one two)
  add_test(NAME snapshot_keep_${levels}_level COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/snapshot_restart.sh
                                                      ${RMASTORE_MPIRUN_TEST} ${MPIEXEC_EXECUTABLE}
                                                      $<TARGET_FILE:test_snapshot> keep 3)
  set_tests_properties(snapshot_keep_${levels}_level PROPERTIES PROCESSORS 2 LABELS "mpi;snapshot"
                       ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;${RMASTORE_TSAN_ENV}")
  rmastore_test_timeout(snapshot_keep_${levels}_level 120)
endforeach()
set_property(TEST snapshot_keep_two_level APPEND PROPERTY ENVIRONMENT RMASTORE_TEST_SNAPSHOT_LOCAL=1)
# A full disk: the snapshot fails with STORE_ERR_IO everywhere, nothing in memory is lost, and
# the next snapshot, once there is room, is the one restored.
add_test(NAME snapshot_full_disk COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/snapshot_restart.sh ${RMASTORE_MPIRUN_TEST}
                                         ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:test_snapshot> full 3 2)
set_tests_properties(snapshot_full_disk PROPERTIES PROCESSORS 2 LABELS "mpi;snapshot"
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;${RMASTORE_TSAN_ENV}")
rmastore_test_timeout(snapshot_full_disk 120)
# The same with a local level, off the full disk: the snapshot is taken, its flush fails with
# STORE_ERR_IO everywhere, and the next one, once there is room, is restored.
add_test(NAME snapshot_two_levels_full_disk
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/snapshot_restart.sh ${RMASTORE_MPIRUN_TEST} ${MPIEXEC_EXECUTABLE}
                 $<TARGET_FILE:test_snapshot> full 3 2)
set_tests_properties(snapshot_two_levels_full_disk PROPERTIES PROCESSORS 2 LABELS "mpi;snapshot"
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;${RMASTORE_TSAN_ENV};RMASTORE_TEST_SNAPSHOT_LOCAL=1")
rmastore_test_timeout(snapshot_two_levels_full_disk 120)
# The whole job SIGKILLed while it writes snapshots without end, at a moment drawn from a seed
# or while a snapshot is in flight (its parts on disk, not its manifest: RMASTORE_DELAY holds it
# there 300 ms); a new job of the same, a smaller or a larger size must restore the newest
# complete snapshot exactly.
function(snapshot_kill_test name wnp rnp where seed)
  cmake_parse_arguments(S "" "" "ENV;LABELS" ${ARGN})
  add_test(NAME snapshot_kill_${name}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/snapshot_restart.sh ${RMASTORE_MPIRUN_TEST} ${MPIEXEC_EXECUTABLE}
                   $<TARGET_FILE:test_snapshot> kill ${wnp} ${rnp} ${where} ${seed})
  set_tests_properties(snapshot_kill_${name} PROPERTIES PROCESSORS 2 LABELS "mpi;snapshot;${S_LABELS}"
                       ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;${RMASTORE_TSAN_ENV};${S_ENV}")
  rmastore_test_timeout(snapshot_kill_${name} 240)
endfunction()
snapshot_kill_test(same 4 4 any 1)
snapshot_kill_test(smaller 4 2 any 2)
snapshot_kill_test(larger 3 5 any 3)
snapshot_kill_test(localized_smaller 4 3 any 4 ENV RMASTORE_TEST_RECOVERY=localized LABELS localized)
snapshot_kill_test(inside_smaller 4 3 inside 0 ENV RMASTORE_DELAY=snapshot.parts_durable:300000)
snapshot_kill_test(localized_inside_larger 3 5 inside 0
                   ENV RMASTORE_DELAY=snapshot.parts_durable:300000 RMASTORE_TEST_RECOVERY=localized LABELS localized)
# Two levels, the whole job killed while a snapshot is flushed (RMASTORE_DELAY holds each part
# 300 ms before it is renamed into snapshot_dir): the previous snapshot is restored.
snapshot_kill_test(flush_smaller 4 3 flush 0
                   ENV RMASTORE_TEST_SNAPSHOT_LOCAL=1 RMASTORE_DELAY=snapshot.flushing:300000)
snapshot_kill_test(localized_flush_larger 3 5 flush 0
                   ENV RMASTORE_TEST_SNAPSHOT_LOCAL=1 RMASTORE_DELAY=snapshot.flushing:300000
                   RMASTORE_TEST_RECOVERY=localized LABELS localized)
# Keys whose every copy died in a running job come back from the newest snapshot, reported.
rmastore_add_mpi_test(test_restore_lost SOURCES test_restore_lost.cpp NP 5 KILLED 2 TIMEOUT 90 LABELS ulfm snapshot)
rmastore_add_mpi_test(test_restore_lost NAME test_restore_lost_localized NP 5 KILLED 2 TIMEOUT 90
                      LABELS ulfm snapshot localized ENV RMASTORE_TEST_RECOVERY=localized)
# The same with two levels (the snapshot flushed from a local level before the deaths).
rmastore_add_mpi_test(test_restore_lost NAME test_restore_lost_two_levels NP 5 KILLED 2 TIMEOUT 90
                      LABELS ulfm snapshot ENV RMASTORE_TEST_SNAPSHOT_LOCAL=1)
rmastore_add_mpi_test(test_restore_lost NAME test_restore_lost_two_levels_localized NP 5 KILLED 2 TIMEOUT 90
                      LABELS ulfm snapshot localized ENV RMASTORE_TEST_SNAPSHOT_LOCAL=1 RMASTORE_TEST_RECOVERY=localized)
