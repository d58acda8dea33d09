# store_recover with no failure: its report and repeated calls (both variants in one binary).
rmastore_add_mpi_test(test_recover_report SOURCES test_recover_report.cpp NP 3 4 TIMEOUT 60)

# Open MPI defects met by store_recover, each reproduced in a few lines (scripts/openmpi-patches
# carries the fixes that the set-up script applies).
add_executable(ompi_window_create_dead_peer ompi_window_create_dead_peer.c)
target_link_libraries(ompi_window_create_dead_peer PRIVATE MPI::MPI_C)
rmastore_add_mpi_test(ompi_window_create_dead_peer NP 3 4 KILLED 1 TIMEOUT 60 LABELS ulfm ompi)

# A second process dies at each step of store_recover (the first killed itself); the survivors
# call it again and must end with everything whole. The localized variant's recovery is the
# compaction at the end of the episode. Steps in the order the recovery takes them; runtime.*
# points are in Store::build_runtime, which store_init passed once (#2: inside the recovery).
set(recover_steps recover.start recover.after_revoke recover.after_shrink recover.after_ids
    runtime.after_ctrl_dup\#2 runtime.before_window\#2 runtime.before_bells\#2 recover.after_window
    recover.rereplicate recover.before_move recover.after_rereplicate recover.before_agree)
# Every step at 4 processes; the steps around window creation also at 3 and 8, the rest at 5.
set(window_steps recover.after_ids runtime.after_ctrl_dup\#2 runtime.before_window\#2
    runtime.before_bells\#2 recover.after_window)
function(recover_death point nps)
  string(REGEX REPLACE "[.#]" "_" name "${point}")
  string(REGEX REPLACE "^recover_" "" name "${name}")
  string(REPLACE "#" "@3#" fault3 "${point}")
  string(REPLACE "#" "@2#" fault2 "${point}")
  if(NOT fault3 MATCHES "@")
    set(fault3 "${point}@3")
    set(fault2 "${point}@2")
  endif()
  foreach(np IN LISTS nps)
    if(np EQUAL 3)
      set(victims 1,2)
      set(fault ${fault2})
    else()
      set(victims 1,3)
      set(fault ${fault3})
    endif()
    failure_test(recover_death_${name} NP ${np} ARGS --replicas 3 --victims ${victims} --killers 1 --kill-at 4
                 FAULT ${fault} KILLED 2 LOCALIZED_ARGS --compact 1 ${ARGN})
  endforeach()
endfunction()
foreach(point IN LISTS recover_steps)
  if(point IN_LIST window_steps)
    recover_death(${point} "3;4;5;8")
  else()
    recover_death(${point} "4;5")
  endif()
endforeach()
# Across hosts at 6 processes too (2 per host; the matrix above runs them at 5): a death at each
# step of the first attempt, both variants.
foreach(point IN LISTS recover_steps)
  string(REGEX REPLACE "[.#]" "_" name "${point}")
  string(REGEX REPLACE "^recover_" "" name "${name}")
  string(REPLACE "#" "@3#" fault "${point}")
  if(NOT fault MATCHES "@")
    set(fault "${point}@3")
  endif()
  set(args --replicas 3 --victims 1,3 --killers 1 --kill-at 4)
  rmastore_add_multihost_test(test_failure NAME failure_recover_death_${name}_6 NP 6 ARGS ${args} KILLED 2
                              TIMEOUT 120 LABELS ulfm ENV RMASTORE_FAULT=${fault})
  rmastore_add_multihost_test(test_failure NAME failure_recover_death_${name}_6_localized NP 6
                              ARGS ${args} --localized 1 --compact 1 KILLED 2 TIMEOUT 120 LABELS ulfm localized
                              ENV RMASTORE_FAULT=${fault})
endforeach()
# A death at a random moment of the first attempt (recover.timer), across hosts: a few seeds of
# the --in-recovery driver in CI; tests/soak_in_recovery.sh runs a thousand or more.
# At 5 processes one killer and the victim die (3 copies), at 6 two killers and the victim (4).
foreach(seed RANGE 1 6)
  math(EXPR np "5 + ${seed} % 2")
  math(EXPR killed "${np} - 3")
  rmastore_add_multihost_test(test_failure NAME in_recovery_seed${seed} NP ${np} ARGS --seed ${seed} --in-recovery 1
                              KILLED ${killed} TIMEOUT 120 LABELS ulfm)
  rmastore_add_multihost_test(test_failure NAME in_recovery_seed${seed}_localized NP ${np}
                              ARGS --seed ${seed} --in-recovery 1 --localized 1 KILLED ${killed} TIMEOUT 120
                              LABELS ulfm localized)
endforeach()
recover_death(recover.after_barrier "4" LOCALIZED_ONLY)

# Survivors that see different survivors are never rebuilt on: store_recover returns
# STORE_ERR_MPI on each (recover.skewed_view: rank 1 sees otherwise), on one node and across hosts.
add_executable(test_recover_view test_recover_view.cpp)
target_link_libraries(test_recover_view PRIVATE rmastore_test_util rmastore_build_flags)
rmastore_add_mpi_test(test_recover_view NP 4 KILLED 1 TIMEOUT 60 LABELS ulfm ENV RMASTORE_FAULT=recover.skewed_view@1)
rmastore_add_mpi_test(test_recover_view NAME test_recover_view_localized NP 4 KILLED 1 TIMEOUT 60 LABELS ulfm localized
                      ENV RMASTORE_FAULT=recover.skewed_view@1 RMASTORE_TEST_RECOVERY=localized)
rmastore_add_multihost_test(test_recover_view NAME test_recover_view NP 6 KILLED 1 TIMEOUT 60 LABELS ulfm
                            ENV RMASTORE_FAULT=recover.skewed_view@1)

# A live process declared failed (ULFM's heartbeat detector, 2 s, while it is stopped for 10 s):
# the others recover without it and work on through its late messages.
add_executable(test_false_suspicion test_false_suspicion.cpp)
target_link_libraries(test_false_suspicion PRIVATE rmastore_test_util rmastore_build_flags)
set(heartbeat OMPI_MCA_mpi_ft_detector=true OMPI_MCA_mpi_ft_detector_thread=false OMPI_MCA_mpi_ft_detector_period=0.5
              OMPI_MCA_mpi_ft_detector_timeout=2)
rmastore_add_mpi_test(test_false_suspicion NP 4 KILLED 1 TIMEOUT 90 LABELS ulfm ENV ${heartbeat})
rmastore_add_mpi_test(test_false_suspicion NAME test_false_suspicion_localized NP 4 KILLED 1 TIMEOUT 90
                      LABELS ulfm localized ENV ${heartbeat} RMASTORE_TEST_RECOVERY=localized)
# Open MPI's part of it in raw MPI, with the communicators that spanned the suspect kept as the
# library keeps them ("free" aborts the survivors: see the file).
add_executable(ompi_late_message_reused_cid ompi_late_message_reused_cid.c)
target_link_libraries(ompi_late_message_reused_cid PRIVATE MPI::MPI_C)
rmastore_add_mpi_test(ompi_late_message_reused_cid NP 3 KILLED 1 ARGS keep TIMEOUT 60 LABELS ulfm ompi ENV ${heartbeat})

# The stale-write fence: a put of a dead process lands after the recovery and must not
# overwrite what a survivor wrote since (put.stale: the 2nd put of rank 1 dies unsent).
add_executable(test_recover_stale test_recover_stale.cpp)
target_link_libraries(test_recover_stale PRIVATE rmastore_test_util rmastore_build_flags)
rmastore_add_mpi_test(test_recover_stale NP 3 KILLED 1 TIMEOUT 60 LABELS ulfm ENV RMASTORE_FAULT=put.stale@1\#2)
rmastore_add_mpi_test(test_recover_stale NAME test_recover_stale_localized NP 3 ARGS --localized 1 KILLED 1 TIMEOUT 60
                      LABELS ulfm localized ENV RMASTORE_FAULT=put.stale@1\#2)
