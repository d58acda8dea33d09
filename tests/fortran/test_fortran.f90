! The Fortran module (use rmastore) end to end: every routine, on 1 or more processes, with the
! values the C tests check for the same calls. Each failed check is printed; the verdict goes to
! $RMASTORE_TEST_VERDICT_DIR/rank-<rank> (tests/mpirun_test.sh).
program test_fortran
  use, intrinsic :: iso_c_binding
  use mpi
  use rmastore
  implicit none

  integer :: failures = 0, rank, nprocs, ierr, provided, st, i, mode, new_comm, n
  type(store_t) :: store, bad
  type(store_config_t) :: cfg
  type(store_info_t) :: info
  type(store_recovery_t) :: rep
  type(store_request_t) :: req
  real(c_double), target :: a(1000), b(1000), m(4, 5), m2(4, 5), strided(10), big(10000)
  integer(c_int), target :: scalar, scalar2
  integer(c_int64_t) :: keys(3), listed(8), snap, snap2, lost(4)
  integer(c_size_t) :: nbytes, count, lens(3), caps(3)
  integer :: statuses(3)
  real(c_double), target :: v1(3), v2(5), v3(7), w1(3), w2(5), w3(7)
  type(c_ptr) :: bufs(3)
  logical :: more, done
  character(len=4096) :: dir
  character(len=:), allocatable :: snapdir

  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call get_environment_variable("RMASTORE_TEST_VERDICT_DIR", dir)
  if (len_trim(dir) == 0) dir = "."
  snapdir = trim(dir)//"/snapshots"
  if (rank == 0) call execute_command_line("mkdir -p '"//snapdir//"'")
  call MPI_Barrier(MPI_COMM_WORLD, ierr)

  ! Defaults, statuses, a bad configuration.
  call check(store_config_init(cfg) == STORE_OK, "store_config_init")
  call check(cfg%replicas == 2 .and. cfg%initial_slot_size == 64 .and. cfg%capacity_hint == 1048576 .and. &
             cfg%node_id == -1 .and. cfg%helper_max_sleep_us == 1000 .and. cfg%detector == STORE_DETECTOR_NOTIFY .and. &
             cfg%recovery == STORE_RECOVERY_GLOBAL .and. cfg%snapshot_keep == 2 .and. .not. cfg%restore .and. &
             .not. allocated(cfg%snapshot_dir), "defaults as in store.h")
  call check(len(store_strerror(STORE_OK)) > 0, "store_strerror(STORE_OK)")
  call check(store_strerror(STORE_ERR_NOT_FOUND) /= store_strerror(STORE_OK), "statuses have their own messages")
  call check(store_strerror(-999) == "unknown status", "an unknown status")
  cfg%replicas = 0
  call check(store_init(MPI_COMM_WORLD, cfg, bad) == STORE_ERR_ARG, "replicas 0: STORE_ERR_ARG on every process")
  call check(store_put(bad, 1_c_int64_t, a, 8_c_size_t) == STORE_ERR_HANDLE, "a store that was not made")

  ! A store with every field of the configuration set, which store_get_info reflects.
  call check(store_config_init(cfg) == STORE_OK, "store_config_init")
  cfg%replicas = min(2, nprocs)
  cfg%initial_slot_size = 128
  cfg%snapshot_dir = snapdir
  cfg%snapshot_name = "fortran-test"
  cfg%snapshot_keep = 1
  st = store_init(MPI_COMM_WORLD, cfg, store)
  call check(st == STORE_OK, "store_init: "//store_strerror(st))
  call check(store_get_info(store, info) == STORE_OK, "store_get_info")
  call check(info%size == nprocs .and. info%rank == rank .and. info%replicas == cfg%replicas .and. &
             info%nodes == 1, "store_get_info: size, rank, replicas, nodes")

  ! Values of any type and shape; a strided section goes through a contiguous copy both ways.
  a = [(real(rank * 10000 + i, c_double), i = 1, size(a))]
  m = reshape([(real(i, c_double) / 3, i = 1, size(m))], shape(m))
  big = [(real(i, c_double), i = 1, size(big))]
  scalar = 42 + rank
  call check(store_put(store, key_of(rank, 1), a, c_sizeof(a)) == STORE_OK, "put an array")
  call check(store_put(store, key_of(rank, 2), scalar, c_sizeof(scalar)) == STORE_OK, "put a scalar")
  call check(store_put(store, key_of(rank, 3), m, c_sizeof(m)) == STORE_OK, "put a 2-D array")
  call check(store_put(store, key_of(rank, 4), big(1:20:2), 10 * c_sizeof(big(1))) == STORE_OK, "put a section")
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  n = mod(rank + 1, nprocs)
  st = store_get(store, key_of(n, 1), b, c_sizeof(b), nbytes)
  call check(st == STORE_OK .and. nbytes == c_sizeof(b), "get an array of another process")
  call check(all(b == [(real(n * 10000 + i, c_double), i = 1, size(b))]), "its values")
  st = store_get(store, key_of(n, 2), scalar2, c_sizeof(scalar2), nbytes)
  call check(st == STORE_OK .and. scalar2 == 42 + n .and. nbytes == 4, "get a scalar")
  st = store_get(store, key_of(n, 3), m2, c_sizeof(m2), nbytes)
  call check(st == STORE_OK .and. all(m2 == m), "get a 2-D array")
  big = 0
  st = store_get(store, key_of(n, 4), big(2:20:2), 10 * c_sizeof(big(1)), nbytes)
  call check(st == STORE_OK .and. all(big(2:20:2) == [(real(i, c_double), i = 1, 19, 2)]) .and. &
             all(big(1:19:2) == 0), "get into a section")
  st = store_get(store, key_of(n, 1), strided, c_sizeof(strided), nbytes)
  call check(st == STORE_ERR_TRUNCATED .and. nbytes == c_sizeof(a), "a short buffer: STORE_ERR_TRUNCATED, the length")
  call check(store_get(store, key_of(nprocs, 9), b, c_sizeof(b), nbytes) == STORE_ERR_NOT_FOUND, "a key never put")

  ! Delete (once every process has read its neighbour's keys).
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call check(store_delete(store, key_of(rank, 4)) == STORE_OK, "store_delete")
  call check(store_get(store, key_of(rank, 4), b, c_sizeof(b), nbytes) == STORE_ERR_NOT_FOUND, "deleted")

  ! Batches: three values of three lengths.
  v1 = 1; v2 = 2; v3 = 3
  keys = [key_of(rank, 5), key_of(rank, 6), key_of(rank, 7)]
  bufs = [c_loc(v1), c_loc(v2), c_loc(v3)]
  lens = [c_sizeof(v1), c_sizeof(v2), c_sizeof(v3)]
  call check(store_put_many(store, keys, bufs, lens) == STORE_OK, "store_put_many")
  call check(store_put_many(store, keys, bufs(1:2), lens) == STORE_ERR_ARG, "store_put_many: sizes differ")
  bufs = [c_loc(w1), c_loc(w2), c_loc(w3)]
  caps = [c_sizeof(w1), c_sizeof(w2), c_sizeof(w1)]
  st = store_get_many(store, keys, bufs, caps, lens, statuses)
  call check(st == STORE_OK .and. statuses(1) == STORE_OK .and. statuses(2) == STORE_OK .and. &
             statuses(3) == STORE_ERR_TRUNCATED, "store_get_many: statuses")
  call check(all(w1 == 1) .and. all(w2 == 2) .and. lens(3) == c_sizeof(v3), "store_get_many: values, lengths")

  ! List this process's keys: 1, 2, 3, 5, 6, 7 (4 was deleted).
  st = store_list(store, key_of(rank, 0), key_of(rank, 999), listed, count, more)
  call check(st == STORE_OK .and. count == 6 .and. .not. more, "store_list: six keys")
  call check(all(listed(1:6) == [(key_of(rank, i), i = 1, 3), (key_of(rank, i), i = 5, 7)]), "store_list: which")
  st = store_list(store, key_of(rank, 0), key_of(rank, 999), listed(1:2), count, more)
  call check(st == STORE_OK .and. count == 2 .and. more, "store_list: two at a time, more")
  call check(store_list(store, key_of(rank, 0), key_of(rank, 999), listed(1:0), count, more) == STORE_ERR_ARG, &
             "store_list: no room, STORE_ERR_ARG")

  ! Nonblocking puts, waited for and tested for; a non-contiguous buffer is refused.
  a = -1
  call check(store_put_nb(store, key_of(rank, 8), a, c_sizeof(a), req) == STORE_OK, "store_put_nb")
  call check(store_wait(req) == STORE_OK, "store_wait")
  call check(store_put_nb(store, key_of(rank, 9), scalar, c_sizeof(scalar), req) == STORE_OK, "store_put_nb")
  do
    st = store_test(req, done)
    if (done .or. st /= STORE_OK) exit
  end do
  call check(st == STORE_OK .and. done, "store_test")
  call check(store_put_nb(store, key_of(rank, 10), big(1:20:2), 80_c_size_t, req) == STORE_ERR_ARG, &
             "store_put_nb of a section: STORE_ERR_ARG")
  st = store_get(store, key_of(rank, 8), b, c_sizeof(b), nbytes)
  call check(st == STORE_OK .and. all(b == -1), "a nonblocking put is done")

  ! Transactions and modes.
  call check(store_tx_abort(store) == STORE_ERR_TX_STATE, "store_tx_abort without a transaction")
  call check(store_tx_begin(store) == STORE_OK, "store_tx_begin")
  scalar = 7
  call check(store_put(store, key_of(rank, 2), scalar, c_sizeof(scalar)) == STORE_OK, "put in a transaction")
  call check(store_tx_commit(store) == STORE_OK, "store_tx_commit")
  call check(store_tx_begin(store) == STORE_OK, "store_tx_begin")
  call check(store_tx_abort(store) == STORE_OK, "store_tx_abort")
  call check(store_get_mode(store, mode) == STORE_OK .and. mode == STORE_MODE_NORMAL, "store_get_mode")
  call check(store_back_to_normal(store) == STORE_OK, "store_back_to_normal")

  ! The durable tier.
  call check(store_snapshot(store, snap) == STORE_OK .and. snap >= 1, "store_snapshot")
  call check(store_snapshot_start(store, snap2) == STORE_OK .and. snap2 == snap + 1, "store_snapshot_start")
  call check(store_snapshot_wait(store) == STORE_OK, "store_snapshot_wait")
  call check(store_snapshot_flush_wait(store, snap) == STORE_OK .and. snap == snap2, "store_snapshot_flush_wait")
  st = store_restore_lost(store, snap, lost, count)
  call check(st == STORE_OK .and. count == 0, "store_restore_lost: nothing lost")
  st = store_restore_lost(store, snap, lost(1:0), count)
  call check(st == STORE_OK .and. count == 0, "store_restore_lost: no room, nothing lost")

  ! A recovery without a failure, and its report.
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  st = store_recover(store, new_comm)
  call check(st == STORE_OK, "store_recover: "//store_strerror(st))
  if (st == STORE_OK) then
    call MPI_Comm_size(new_comm, n, ierr)
    call check(ierr == MPI_SUCCESS .and. n == nprocs, "store_recover's communicator")
    call MPI_Comm_free(new_comm, ierr)
  end if
  call check(store_last_recovery(store, rep) == STORE_OK, "store_last_recovery")
  call check(rep%survivors == nprocs .and. rep%failed == 0 .and. rep%lost_count == 0 .and. &
             size(rep%lost_keys) == 0 .and. rep%attempts == 1, "the report of a recovery without failure")
  call check(store_back_to_normal(store) == STORE_OK, "store_back_to_normal after store_recover")

  call check(store_finalize(store) == STORE_OK, "store_finalize")
  call check(store_put(store, key_of(rank, 1), a, c_sizeof(a)) == STORE_ERR_HANDLE, "a finalized store")

  ! A new store restored from the snapshot: scalar 7 (the transaction's) is back.
  cfg%restore = .true.
  st = store_init(MPI_COMM_WORLD, cfg, store)
  call check(st == STORE_OK, "store_init with restore: "//store_strerror(st))
  call check(store_get_info(store, info) == STORE_OK .and. info%restored_snapshot == snap2, "restored_snapshot")
  st = store_get(store, key_of(rank, 2), scalar2, c_sizeof(scalar2), nbytes)
  call check(st == STORE_OK .and. scalar2 == 7, "a restored value")
  call check(store_finalize(store) == STORE_OK, "store_finalize")

  call verdict()
  call MPI_Finalize(ierr)

contains

  pure function key_of(r, i) result(k)
    integer, intent(in) :: r, i
    integer(c_int64_t) :: k
    k = int(r, c_int64_t) * 1000 + i
  end function key_of

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      failures = failures + 1
      write (0, '(a,i0,a,a)') "rank ", rank, ": check failed: ", what
    end if
  end subroutine check

  subroutine verdict()
    integer :: u
    character(len=16) :: r
    write (r, '(i0)') rank
    open (newunit=u, file=trim(dir)//"/rank-"//trim(r), status="replace", action="write")
    if (failures == 0) then
      write (u, '(a)') "PASS"
    else
      write (u, '(a)') "FAIL"
    end if
    close (u)
    write (*, '(a,i0,a,i0,a)') "rank ", rank, ": ", failures, " failed checks"
  end subroutine verdict

end program test_fortran
