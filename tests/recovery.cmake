# store_recover with no failure: its report and repeated calls (both variants in one binary).
rmastore_add_mpi_test(test_recover_report SOURCES test_recover_report.cpp NP 3 4 TIMEOUT 60)

# Open MPI defects met by store_recover, each reproduced in a few lines (scripts/openmpi-patches
# carries the fixes that the set-up script applies).
add_executable(ompi_window_create_dead_peer ompi_window_create_dead_peer.c)
target_link_libraries(ompi_window_create_dead_peer PRIVATE MPI::MPI_C)
rmastore_add_mpi_test(ompi_window_create_dead_peer NP 3 4 KILLED 1 TIMEOUT 60 LABELS ulfm ompi)
