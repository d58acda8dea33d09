# store_recover with no failure: its report and repeated calls (both variants in one binary).
rmastore_add_mpi_test(test_recover_report SOURCES test_recover_report.cpp NP 3 4 TIMEOUT 60)

# Open MPI defects met by store_recover, each reproduced in a few lines (scripts/openmpi-patches
# carries the fixes that the set-up script applies).
add_executable(ompi_window_create_dead_peer ompi_window_create_dead_peer.c)
target_link_libraries(ompi_window_create_dead_peer PRIVATE MPI::MPI_C)
rmastore_add_mpi_test(ompi_window_create_dead_peer NP 3 4 KILLED 1 TIMEOUT 60 LABELS ulfm ompi)

# A second process dies at each step of store_recover, and at a random moment of it (the
# recover_death_* rows of tests/failure/scenarios.txt, and the in_recovery seeds of
# tests/failure/failure.cmake).

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
# the others recover without it and work on through its late messages. The detector runs in
# MPI's progress, so a live process starved of the CPU for 2 s is declared failed too: in the
# sanitizer suite a test running beside this one once did that to a second rank (1 run in 2
# suites). These tests run alone. A 4 s timeout once let the stopped rank go undeclared for its
# whole 10 s stop (1 of 2 suites; not traced). Alone in the sanitizer build, the survivors
# recovered 1.96-2.04 s after the stop in 10 of 10 runs with 2 s, and 3.99-4.02 s with 4 s.
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
set_tests_properties(test_false_suspicion.np4 test_false_suspicion_localized.np4 ompi_late_message_reused_cid.np3
                     PROPERTIES RUN_SERIAL TRUE)

# The stale-write fence: a put of a dead process lands after the recovery and must not
# overwrite what a survivor wrote since (put.stale: the 2nd put of rank 1 dies unsent).
add_executable(test_recover_stale test_recover_stale.cpp)
target_link_libraries(test_recover_stale PRIVATE rmastore_test_util rmastore_build_flags)
rmastore_add_mpi_test(test_recover_stale NP 3 KILLED 1 TIMEOUT 60 LABELS ulfm ENV RMASTORE_FAULT=put.stale@1\#2)
rmastore_add_mpi_test(test_recover_stale NAME test_recover_stale_localized NP 3 ARGS --localized 1 KILLED 1 TIMEOUT 60
                      LABELS ulfm localized ENV RMASTORE_FAULT=put.stale@1\#2)
