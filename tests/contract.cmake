# Contract tests (issue 9): what include/rmastore/store.h promises about memory exhaustion,
# MPI_Finalize with stores left open, and store_get_info.

# Running out of window regions is STORE_ERR_NO_MEMORY, never a hang: with Open MPI's default
# limit (100 keys of 1 GiB slots must fit), and with the limit lowered to 8 so that it is reached.
rmastore_add_mpi_test(test_contract_regions SOURCES test_contract_regions.cpp NP 2 TIMEOUT 60)
rmastore_add_mpi_test(test_contract_regions NAME test_contract_regions_limit8 NP 2 TIMEOUT 60
                      ENV RMASTORE_TEST_MAX_ATTACH=8)
rmastore_add_mpi_test(test_contract_regions NAME test_contract_regions_limit8_localized NP 2 TIMEOUT 60
                      LABELS localized ENV RMASTORE_TEST_MAX_ATTACH=8 RMASTORE_TEST_RECOVERY=localized)

# MPI_Finalize with stores open: no abort, and STORE_ERR_MPI_STATE afterwards. Its own main:
# after MPI_Finalize the verdict is written without MPI.
add_executable(test_contract_finalize test_contract_finalize.cpp)
target_link_libraries(test_contract_finalize PRIVATE rmastore_test_util rmastore_build_flags)
rmastore_add_mpi_test(test_contract_finalize NP 1 2 4 TIMEOUT 60)
# MPI_Finalize with the store open while peers are still inside store calls (no barrier
# between): their calls complete and every process leaves MPI_Finalize. Both variants.
add_executable(test_finalize_race test_finalize_race.cpp)
target_link_libraries(test_finalize_race PRIVATE rmastore_test_util rmastore_build_flags)
rmastore_add_mpi_test(test_finalize_race NP 2 4 TIMEOUT 60)
rmastore_add_mpi_test(test_finalize_race NAME test_finalize_race_localized NP 2 4 TIMEOUT 60 LABELS localized
                      ENV RMASTORE_TEST_RECOVERY=localized)

# store_get_info's figures after puts, growth and shrinking; and its walk over the local copies
# (slowed down by RMASTORE_DELAY) must not stop the helper from serving other processes.
rmastore_add_mpi_test(test_contract_info SOURCES test_contract_info.cpp NP 1 2 4 TIMEOUT 60
                      ARGS --gtest_filter=ContractInfo.Counts*)
rmastore_add_mpi_test(test_contract_info NAME test_contract_info_localized NP 2 4 TIMEOUT 60 LABELS localized
                      ARGS --gtest_filter=ContractInfo.Counts* ENV RMASTORE_TEST_RECOVERY=localized)
rmastore_add_mpi_test(test_contract_info NAME test_contract_info_nonblocking NP 2 TIMEOUT 60
                      ARGS --gtest_filter=ContractInfo.DoesNotBlock* ENV RMASTORE_DELAY=info.walk:2000000)

# Memory kept per store_init/store_finalize cycle: bounded (see the test for what is kept, and
# why Open MPI's part under --with-ft ulfm cannot be avoided).
rmastore_add_mpi_test(test_contract_leak SOURCES test_contract_leak.cpp NP 1 TIMEOUT 60)
