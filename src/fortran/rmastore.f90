! rmastore for Fortran 2008 (plus assumed-rank and assumed-type buffers of TS 29113): `use rmastore`.
!
! Every routine of include/rmastore/store.h, with the same name, arguments in the same order, the
! same contract (collective or local, what must match, what happens under failure: read it
! there) and the same status codes (STORE_OK, STORE_ERR_*), returned as a default integer.
! The differences are Fortran's:
! - MPI communicators are integer handles, as the `mpi` module gives them. With mpi_f08 pass
!   comm%MPI_VAL, and put a recovered communicator into a type(MPI_Comm) the same way.
! - Keys are integer(c_int64_t): the C API's unsigned 64-bit key, bit for bit.
! - Values are any contiguous variable or array of any type and rank; lengths and capacities
!   are in bytes (integer(c_size_t)). store_put_nb needs a contiguous actual argument (a copy
!   would be gone before the put is) and returns STORE_ERR_ARG otherwise.
! - store_config_t has allocatable character strings; store_recovery_t holds a copy of the lost
!   keys; flags are logical.
! - store_put_many, store_get_many: buffers as an array of type(c_ptr) (c_loc of each value).
! The module needs no MPI Fortran module, so it works with any MPI Fortran binding.
module rmastore
  use, intrinsic :: iso_c_binding
  implicit none
  private

  integer, parameter, public :: STORE_API_VERSION_MAJOR = 0, STORE_API_VERSION_MINOR = 2

  integer, parameter, public :: STORE_OK = 0, STORE_ERR_ARG = -1, STORE_ERR_HANDLE = -2, &
    STORE_ERR_NOT_FOUND = -3, STORE_ERR_TRUNCATED = -4, STORE_ERR_CONFIG_MISMATCH = -5, &
    STORE_ERR_THREAD_LEVEL = -6, STORE_ERR_MPI_STATE = -7, STORE_ERR_MPI = -8, &
    STORE_ERR_NO_MEMORY = -9, STORE_ERR_TOO_LARGE = -10, STORE_ERR_VERSION = -11, &
    STORE_ERR_PEER = -12, STORE_ERR_INTERNAL = -13, STORE_ERR_PROC_FAILED = -14, &
    STORE_ERR_RECOVER_AGAIN = -15, STORE_ERR_DATA_LOST = -16, STORE_ERR_MODE = -17, &
    STORE_ERR_TX_STATE = -18, STORE_ERR_IO = -19, STORE_ERR_SNAPSHOT_FORMAT = -20, &
    STORE_ERR_SNAPSHOT_OTHER = -21
  integer, parameter, public :: STORE_STATUS_MIN = STORE_ERR_SNAPSHOT_OTHER

  integer, parameter, public :: STORE_DETECTOR_NOTIFY = 0, STORE_DETECTOR_PING = 1, STORE_DETECTOR_OFF = 2
  integer, parameter, public :: STORE_RECOVERY_GLOBAL = 0, STORE_RECOVERY_LOCALIZED = 1
  integer, parameter, public :: STORE_MODE_NORMAL = 0, STORE_MODE_TRANSACTION = 1

  !> A store; store_init sets it, store_finalize clears it.
  type, public :: store_t
    private
    type(c_ptr) :: handle = c_null_ptr
  end type store_t

  !> A nonblocking put in progress (store_put_nb); store_test or store_wait completes it.
  type, public :: store_request_t
    private
    type(c_ptr) :: handle = c_null_ptr
  end type store_request_t

  !> store_config_t of store.h. Fill with store_config_init, then change what you need. An
  !> unallocated string is C's NULL (no snapshot directory, no name, one level).
  type, public :: store_config_t
    integer :: replicas
    integer(c_size_t) :: initial_slot_size, capacity_hint
    integer :: node_id, helper_max_sleep_us, detector, recovery
    character(len=:), allocatable :: snapshot_dir
    integer :: snapshot_keep
    logical :: restore
    character(len=:), allocatable :: snapshot_name, snapshot_local_dir
  end type store_config_t

  !> store_recovery_t of store.h; lost_keys is this report's own copy.
  type, public :: store_recovery_t
    integer :: survivors, failed
    integer(c_int64_t) :: keys, keys_repaired, bytes_lost, bytes_moved, lost_count
    integer(c_int64_t), allocatable :: lost_keys(:)
    real(c_double) :: shrink_seconds, window_seconds, rereplicate_seconds, total_seconds
    integer :: attempts
    integer(c_int64_t) :: tx_rolled_forward, tx_rolled_back, bytes_quarantined
  end type store_recovery_t

  !> store_info_t of store.h (store_get_info fills it; struct_size is the library's business).
  type, bind(C), public :: store_info_t
    integer(c_size_t) :: struct_size
    integer(c_int) :: size, rank, replicas, nodes
    integer(c_int64_t) :: local_copies, local_bytes, attached_bytes
    integer(c_int) :: attached_regions
    real(c_double) :: helper_cpu_seconds
    integer(c_int64_t) :: enlargements_served, requests_sent
    integer(c_int) :: failed_processes
    integer(c_int64_t) :: repair_backlog, repaired_slots, repaired_bytes, last_snapshot, restored_snapshot, &
                          restored_keys
    integer(c_int) :: snapshots_skipped
    integer(c_int64_t) :: flushed_snapshot
    integer(c_int) :: restored_local_parts
  end type store_info_t

  ! The C structs as C lays them out (the module's own business).
  type, bind(C) :: c_config
    integer(c_size_t) :: struct_size
    integer(c_int) :: replicas
    integer(c_size_t) :: initial_slot_size, capacity_hint
    integer(c_int) :: node_id, helper_max_sleep_us, detector, recovery
    type(c_ptr) :: snapshot_dir
    integer(c_int) :: snapshot_keep, restore
    type(c_ptr) :: snapshot_name, snapshot_local_dir
  end type c_config

  type, bind(C) :: c_recovery
    integer(c_size_t) :: struct_size
    integer(c_int) :: survivors, failed
    integer(c_int64_t) :: keys, keys_repaired, bytes_lost, bytes_moved, lost_count
    type(c_ptr) :: lost_keys
    real(c_double) :: shrink_seconds, window_seconds, rereplicate_seconds, total_seconds
    integer(c_int) :: attempts
    integer(c_int64_t) :: tx_rolled_forward, tx_rolled_back, bytes_quarantined
  end type c_recovery

  public :: store_config_init, store_strerror, store_init, store_put, store_get, store_delete, &
            store_put_many, store_get_many, store_list, store_put_nb, store_test, store_wait, &
            store_finalize, store_recover, store_snapshot, store_snapshot_start, store_snapshot_wait, &
            store_snapshot_flush_wait, store_restore_lost, store_get_mode, store_back_to_normal, &
            store_tx_begin, store_tx_commit, store_tx_abort, store_last_recovery, store_get_info

  interface
    function c_config_init(config) bind(C, name="rmastore_store_config_init") result(st)
      import :: c_config, c_int
      type(c_config), intent(out) :: config
      integer(c_int) :: st
    end function c_config_init

    function c_strerror(status) bind(C, name="rmastore_store_strerror") result(msg)
      import :: c_int, c_ptr
      integer(c_int), value :: status
      type(c_ptr) :: msg
    end function c_strerror

    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function c_strlen

    function c_init(comm, config, store, major, minor) bind(C, name="rmastore_store_init_fortran") result(st)
      import :: c_int, c_ptr
      integer(c_int), value :: comm, major, minor
      type(c_ptr), value :: config
      type(c_ptr), intent(out) :: store
      integer(c_int) :: st
    end function c_init

    function c_put(store, key, buf, len) bind(C, name="rmastore_store_put") result(st)
      import :: c_ptr, c_int64_t, c_size_t, c_int
      type(c_ptr), value :: store, buf
      integer(c_int64_t), value :: key
      integer(c_size_t), value :: len
      integer(c_int) :: st
    end function c_put

    function c_get(store, key, buf, capacity, len) bind(C, name="rmastore_store_get") result(st)
      import :: c_ptr, c_int64_t, c_size_t, c_int
      type(c_ptr), value :: store, buf
      integer(c_int64_t), value :: key
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(out) :: len
      integer(c_int) :: st
    end function c_get

    function c_delete(store, key) bind(C, name="rmastore_store_delete") result(st)
      import :: c_ptr, c_int64_t, c_int
      type(c_ptr), value :: store
      integer(c_int64_t), value :: key
      integer(c_int) :: st
    end function c_delete

    function c_put_many(store, count, keys, bufs, lens) bind(C, name="rmastore_store_put_many") result(st)
      import :: c_ptr, c_int64_t, c_size_t, c_int
      type(c_ptr), value :: store
      integer(c_size_t), value :: count
      integer(c_int64_t), intent(in) :: keys(*)
      type(c_ptr), intent(in) :: bufs(*)
      integer(c_size_t), intent(in) :: lens(*)
      integer(c_int) :: st
    end function c_put_many

    function c_get_many(store, count, keys, bufs, capacities, lens, statuses) &
      bind(C, name="rmastore_store_get_many") result(st)
      import :: c_ptr, c_int64_t, c_size_t, c_int
      type(c_ptr), value :: store
      integer(c_size_t), value :: count
      integer(c_int64_t), intent(in) :: keys(*)
      type(c_ptr), intent(in) :: bufs(*)
      integer(c_size_t), intent(in) :: capacities(*)
      integer(c_size_t), intent(out) :: lens(*)
      integer(c_int), intent(out) :: statuses(*)
      integer(c_int) :: st
    end function c_get_many

    function c_list(store, first, last, keys, capacity, count, more) bind(C, name="rmastore_store_list") result(st)
      import :: c_ptr, c_int64_t, c_size_t, c_int
      type(c_ptr), value :: store
      integer(c_int64_t), value :: first, last
      integer(c_int64_t), intent(out) :: keys(*)
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(out) :: count
      integer(c_int), intent(out) :: more
      integer(c_int) :: st
    end function c_list

    function c_put_nb(store, key, buf, len, request) bind(C, name="rmastore_store_put_nb") result(st)
      import :: c_ptr, c_int64_t, c_size_t, c_int
      type(c_ptr), value :: store, buf
      integer(c_int64_t), value :: key
      integer(c_size_t), value :: len
      type(c_ptr), intent(out) :: request
      integer(c_int) :: st
    end function c_put_nb

    function c_test(request, done) bind(C, name="rmastore_store_test") result(st)
      import :: c_ptr, c_int
      type(c_ptr), intent(inout) :: request
      integer(c_int), intent(out) :: done
      integer(c_int) :: st
    end function c_test

    function c_wait(request) bind(C, name="rmastore_store_wait") result(st)
      import :: c_ptr, c_int
      type(c_ptr), intent(inout) :: request
      integer(c_int) :: st
    end function c_wait

    function c_finalize(store) bind(C, name="rmastore_store_finalize") result(st)
      import :: c_ptr, c_int
      type(c_ptr), intent(inout) :: store
      integer(c_int) :: st
    end function c_finalize

    function c_recover(store, new_comm) bind(C, name="rmastore_store_recover_fortran") result(st)
      import :: c_ptr, c_int
      type(c_ptr), value :: store, new_comm
      integer(c_int) :: st
    end function c_recover

    ! store_snapshot, store_snapshot_start, store_snapshot_flush_wait: (store, uint64_t *).
    function c_snapshot(store, snapshot) bind(C, name="rmastore_store_snapshot") result(st)
      import :: c_ptr, c_int64_t, c_int
      type(c_ptr), value :: store
      integer(c_int64_t), intent(out) :: snapshot
      integer(c_int) :: st
    end function c_snapshot

    function c_snapshot_start(store, snapshot) bind(C, name="rmastore_store_snapshot_start") result(st)
      import :: c_ptr, c_int64_t, c_int
      type(c_ptr), value :: store
      integer(c_int64_t), intent(out) :: snapshot
      integer(c_int) :: st
    end function c_snapshot_start

    function c_snapshot_flush_wait(store, snapshot) bind(C, name="rmastore_store_snapshot_flush_wait") result(st)
      import :: c_ptr, c_int64_t, c_int
      type(c_ptr), value :: store
      integer(c_int64_t), intent(out) :: snapshot
      integer(c_int) :: st
    end function c_snapshot_flush_wait

    function c_restore_lost(store, snapshot, keys, capacity, count) bind(C, name="rmastore_store_restore_lost") &
      result(st)
      import :: c_ptr, c_int64_t, c_size_t, c_int
      type(c_ptr), value :: store
      integer(c_int64_t), intent(out) :: snapshot
      integer(c_int64_t), intent(out) :: keys(*)
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(out) :: count
      integer(c_int) :: st
    end function c_restore_lost

    function c_get_mode(store, mode) bind(C, name="rmastore_store_get_mode") result(st)
      import :: c_ptr, c_int
      type(c_ptr), value :: store
      integer(c_int), intent(out) :: mode
      integer(c_int) :: st
    end function c_get_mode

    ! store_snapshot_wait, store_back_to_normal, store_tx_begin, store_tx_commit, store_tx_abort.
    function c_snapshot_wait(store) bind(C, name="rmastore_store_snapshot_wait") result(st)
      import :: c_ptr, c_int
      type(c_ptr), value :: store
      integer(c_int) :: st
    end function c_snapshot_wait

    function c_back_to_normal(store) bind(C, name="rmastore_store_back_to_normal") result(st)
      import :: c_ptr, c_int
      type(c_ptr), value :: store
      integer(c_int) :: st
    end function c_back_to_normal

    function c_tx_begin(store) bind(C, name="rmastore_store_tx_begin") result(st)
      import :: c_ptr, c_int
      type(c_ptr), value :: store
      integer(c_int) :: st
    end function c_tx_begin

    function c_tx_commit(store) bind(C, name="rmastore_store_tx_commit") result(st)
      import :: c_ptr, c_int
      type(c_ptr), value :: store
      integer(c_int) :: st
    end function c_tx_commit

    function c_tx_abort(store) bind(C, name="rmastore_store_tx_abort") result(st)
      import :: c_ptr, c_int
      type(c_ptr), value :: store
      integer(c_int) :: st
    end function c_tx_abort

    function c_recovery_init_size(report, size) bind(C, name="rmastore_store_recovery_init_size") result(st)
      import :: c_recovery, c_size_t, c_int
      type(c_recovery), intent(out) :: report
      integer(c_size_t), value :: size
      integer(c_int) :: st
    end function c_recovery_init_size

    function c_last_recovery(store, report) bind(C, name="rmastore_store_last_recovery") result(st)
      import :: c_ptr, c_recovery, c_int
      type(c_ptr), value :: store
      type(c_recovery), intent(inout) :: report
      integer(c_int) :: st
    end function c_last_recovery

    function c_get_info(store, info) bind(C, name="rmastore_store_get_info") result(st)
      import :: c_ptr, store_info_t, c_int
      type(c_ptr), value :: store
      type(store_info_t), intent(inout) :: info
      integer(c_int) :: st
    end function c_get_info
  end interface

contains

  !> Fills config with the defaults. Local.
  function store_config_init(config) result(st)
    type(store_config_t), intent(out) :: config
    integer :: st
    type(c_config) :: c
    st = c_config_init(c)
    if (st /= STORE_OK) return
    config%replicas = c%replicas
    config%initial_slot_size = c%initial_slot_size
    config%capacity_hint = c%capacity_hint
    config%node_id = c%node_id
    config%helper_max_sleep_us = c%helper_max_sleep_us
    config%detector = c%detector
    config%recovery = c%recovery
    config%snapshot_keep = c%snapshot_keep
    config%restore = c%restore /= 0
  end function store_config_init

  !> A message for every status. Local.
  function store_strerror(status) result(msg)
    integer, intent(in) :: status
    character(len=:), allocatable :: msg
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer :: i
    p = c_strerror(int(status, c_int))
    call c_f_pointer(p, chars, [c_strlen(p)])
    allocate (character(len=size(chars)) :: msg)
    do i = 1, size(chars)
      msg(i:i) = chars(i)
    end do
  end function store_strerror

  !> Creates a store over comm (an integer MPI handle). Collective over comm. config may be
  !> absent for the defaults.
  function store_init(comm, config, store) result(st)
    integer, intent(in) :: comm
    type(store_config_t), intent(in), optional :: config
    type(store_t), intent(out) :: store
    integer :: st
    type(c_config), target :: c
    character(kind=c_char, len=:), allocatable, target :: dir, name, local_dir
    if (.not. present(config)) then
      st = c_init(int(comm, c_int), c_null_ptr, store%handle, STORE_API_VERSION_MAJOR, STORE_API_VERSION_MINOR)
      return
    end if
    st = c_config_init(c)
    if (st /= STORE_OK) return
    c%replicas = config%replicas
    c%initial_slot_size = config%initial_slot_size
    c%capacity_hint = config%capacity_hint
    c%node_id = config%node_id
    c%helper_max_sleep_us = config%helper_max_sleep_us
    c%detector = config%detector
    c%recovery = config%recovery
    c%snapshot_keep = config%snapshot_keep
    c%restore = merge(1, 0, config%restore)
    if (allocated(config%snapshot_dir)) then
      dir = config%snapshot_dir//c_null_char
      c%snapshot_dir = c_loc(dir)
    end if
    if (allocated(config%snapshot_name)) then
      name = config%snapshot_name//c_null_char
      c%snapshot_name = c_loc(name)
    end if
    if (allocated(config%snapshot_local_dir)) then
      local_dir = config%snapshot_local_dir//c_null_char
      c%snapshot_local_dir = c_loc(local_dir)
    end if
    st = c_init(int(comm, c_int), c_loc(c), store%handle, STORE_API_VERSION_MAJOR, STORE_API_VERSION_MINOR)
  end function store_init

  !> Stores len bytes of buf under key. Local.
  function store_put(store, key, buf, len) result(st)
    type(store_t), intent(in) :: store
    integer(c_int64_t), intent(in) :: key
    type(*), dimension(..), intent(in), contiguous, target :: buf
    integer(c_size_t), intent(in) :: len
    integer :: st
    st = c_put(store%handle, key, c_loc(buf), len)
  end function store_put

  !> Copies the value of key into buf (capacity bytes); len receives its length. Local.
  function store_get(store, key, buf, capacity, len) result(st)
    type(store_t), intent(in) :: store
    integer(c_int64_t), intent(in) :: key
    type(*), dimension(..), intent(inout), contiguous, target :: buf
    integer(c_size_t), intent(in) :: capacity
    integer(c_size_t), intent(out) :: len
    integer :: st
    st = c_get(store%handle, key, c_loc(buf), capacity, len)
  end function store_get

  !> Removes every copy of key. Local.
  function store_delete(store, key) result(st)
    type(store_t), intent(in) :: store
    integer(c_int64_t), intent(in) :: key
    integer :: st
    st = c_delete(store%handle, key)
  end function store_delete

  !> store_put of keys(i), lens(i) bytes at bufs(i) (c_loc of each value), overlapped. Local.
  function store_put_many(store, keys, bufs, lens) result(st)
    type(store_t), intent(in) :: store
    integer(c_int64_t), intent(in) :: keys(:)
    type(c_ptr), intent(in) :: bufs(:)
    integer(c_size_t), intent(in) :: lens(:)
    integer :: st
    if (size(bufs) /= size(keys) .or. size(lens) /= size(keys)) then
      st = STORE_ERR_ARG
      return
    end if
    st = c_put_many(store%handle, size(keys, kind=c_size_t), keys, bufs, lens)
  end function store_put_many

  !> store_get of keys(i) into bufs(i) (capacities(i) bytes), overlapped; statuses(i) says what
  !> store_get would have returned. Local.
  function store_get_many(store, keys, bufs, capacities, lens, statuses) result(st)
    type(store_t), intent(in) :: store
    integer(c_int64_t), intent(in) :: keys(:)
    type(c_ptr), intent(in) :: bufs(:)
    integer(c_size_t), intent(in) :: capacities(:)
    integer(c_size_t), intent(out) :: lens(:)
    integer, intent(out) :: statuses(:)
    integer :: st
    integer(c_int) :: cst(size(keys))
    if (size(bufs) /= size(keys) .or. size(capacities) /= size(keys) .or. size(lens) /= size(keys) .or. &
        size(statuses) /= size(keys)) then
      st = STORE_ERR_ARG
      return
    end if
    st = c_get_many(store%handle, size(keys, kind=c_size_t), keys, bufs, capacities, lens, cst)
    statuses = cst
  end function store_get_many

  !> Keys in [first, last], smallest first, at most size(keys) of them: keys(1:count). more:
  !> keys above keys(count) may remain. Local. Keys compare as C's unsigned 64-bit integers.
  function store_list(store, first, last, keys, count, more) result(st)
    type(store_t), intent(in) :: store
    integer(c_int64_t), intent(in) :: first, last
    integer(c_int64_t), intent(out) :: keys(:)
    integer(c_size_t), intent(out) :: count
    logical, intent(out) :: more
    integer :: st
    integer(c_int) :: m
    count = 0
    m = 0
    st = c_list(store%handle, first, last, keys, size(keys, kind=c_size_t), count, m)
    more = m /= 0
  end function store_list

  !> Starts a put and returns at once; buf must stay unchanged until request completes. Local.
  function store_put_nb(store, key, buf, len, request) result(st)
    type(store_t), intent(in) :: store
    integer(c_int64_t), intent(in) :: key
    type(*), dimension(..), intent(in), target, asynchronous :: buf
    integer(c_size_t), intent(in) :: len
    type(store_request_t), intent(out) :: request
    integer :: st
    if (.not. is_contiguous(buf)) then
      st = STORE_ERR_ARG
      return
    end if
    st = c_put_nb(store%handle, key, c_loc(buf), len, request%handle)
  end function store_put_nb

  !> done: whether request completed (it is then freed, and st is the put's status). Local.
  function store_test(request, done) result(st)
    type(store_request_t), intent(inout) :: request
    logical, intent(out) :: done
    integer :: st
    integer(c_int) :: d
    d = 0
    st = c_test(request%handle, d)
    done = d /= 0
  end function store_test

  !> Waits until request completed (then it is freed); the put's status. Local.
  function store_wait(request) result(st)
    type(store_request_t), intent(inout) :: request
    integer :: st
    st = c_wait(request%handle)
  end function store_wait

  !> Frees the store. Collective.
  function store_finalize(store) result(st)
    type(store_t), intent(inout) :: store
    integer :: st
    st = c_finalize(store%handle)
  end function store_finalize

  !> Rebuilds the store on the survivors. Collective over the survivors. new_comm (an integer MPI
  !> handle over the survivors, for the caller to free) present on every survivor or on none.
  function store_recover(store, new_comm) result(st)
    type(store_t), intent(in) :: store
    integer, intent(out), optional :: new_comm
    integer :: st
    integer(c_int), target :: c
    if (present(new_comm)) then
      st = c_recover(store%handle, c_loc(c))
      if (st == STORE_OK) new_comm = c
    else
      st = c_recover(store%handle, c_null_ptr)
    end if
  end function store_recover

  !> Writes the store to config%snapshot_dir. Collective.
  function store_snapshot(store, snapshot) result(st)
    type(store_t), intent(in) :: store
    integer(c_int64_t), intent(out), optional :: snapshot
    integer :: st
    integer(c_int64_t) :: seq
    st = c_snapshot(store%handle, seq)
    if (present(snapshot)) snapshot = seq
  end function store_snapshot

  function store_snapshot_start(store, snapshot) result(st)
    type(store_t), intent(in) :: store
    integer(c_int64_t), intent(out), optional :: snapshot
    integer :: st
    integer(c_int64_t) :: seq
    st = c_snapshot_start(store%handle, seq)
    if (present(snapshot)) snapshot = seq
  end function store_snapshot_start

  function store_snapshot_wait(store) result(st)
    type(store_t), intent(in) :: store
    integer :: st
    st = c_snapshot_wait(store%handle)
  end function store_snapshot_wait

  function store_snapshot_flush_wait(store, snapshot) result(st)
    type(store_t), intent(in) :: store
    integer(c_int64_t), intent(out), optional :: snapshot
    integer :: st
    integer(c_int64_t) :: seq
    st = c_snapshot_flush_wait(store%handle, seq)
    if (present(snapshot)) snapshot = seq
  end function store_snapshot_flush_wait

  !> Brings back lost keys from the newest snapshot; keys(1:min(count, size(keys))) receives
  !> them. Collective.
  function store_restore_lost(store, snapshot, keys, count) result(st)
    type(store_t), intent(in) :: store
    integer(c_int64_t), intent(out) :: snapshot
    integer(c_int64_t), intent(out) :: keys(:)
    integer(c_size_t), intent(out) :: count
    integer :: st
    st = c_restore_lost(store%handle, snapshot, keys, size(keys, kind=c_size_t), count)
  end function store_restore_lost

  function store_get_mode(store, mode) result(st)
    type(store_t), intent(in) :: store
    integer, intent(out) :: mode
    integer :: st
    integer(c_int) :: m
    m = STORE_MODE_NORMAL
    st = c_get_mode(store%handle, m)
    mode = m
  end function store_get_mode

  function store_back_to_normal(store) result(st)
    type(store_t), intent(in) :: store
    integer :: st
    st = c_back_to_normal(store%handle)
  end function store_back_to_normal

  function store_tx_begin(store) result(st)
    type(store_t), intent(in) :: store
    integer :: st
    st = c_tx_begin(store%handle)
  end function store_tx_begin

  function store_tx_commit(store) result(st)
    type(store_t), intent(in) :: store
    integer :: st
    st = c_tx_commit(store%handle)
  end function store_tx_commit

  function store_tx_abort(store) result(st)
    type(store_t), intent(in) :: store
    integer :: st
    st = c_tx_abort(store%handle)
  end function store_tx_abort

  !> What the last successful store_recover did; report%lost_keys is a copy. Local.
  function store_last_recovery(store, report) result(st)
    type(store_t), intent(in) :: store
    type(store_recovery_t), intent(out) :: report
    integer :: st
    type(c_recovery) :: c
    integer(c_int64_t), pointer :: lost(:)
    st = c_recovery_init_size(c, c_sizeof(c))
    if (st /= STORE_OK) return
    st = c_last_recovery(store%handle, c)
    if (st /= STORE_OK) return
    report%survivors = c%survivors
    report%failed = c%failed
    report%keys = c%keys
    report%keys_repaired = c%keys_repaired
    report%bytes_lost = c%bytes_lost
    report%bytes_moved = c%bytes_moved
    report%lost_count = c%lost_count
    if (c%lost_count > 0) then
      call c_f_pointer(c%lost_keys, lost, [c%lost_count])
      report%lost_keys = lost
    else
      allocate (report%lost_keys(0))
    end if
    report%shrink_seconds = c%shrink_seconds
    report%window_seconds = c%window_seconds
    report%rereplicate_seconds = c%rereplicate_seconds
    report%total_seconds = c%total_seconds
    report%attempts = c%attempts
    report%tx_rolled_forward = c%tx_rolled_forward
    report%tx_rolled_back = c%tx_rolled_back
    report%bytes_quarantined = c%bytes_quarantined
  end function store_last_recovery

  !> Runtime information about this process. Local.
  function store_get_info(store, info) result(st)
    type(store_t), intent(in) :: store
    type(store_info_t), intent(out) :: info
    integer :: st
    ! The size of this module's struct, not the library's (store_info_init): a newer library
    ! with a longer struct then fills only what this module declares.
    info%struct_size = c_sizeof(info)
    st = c_get_info(store%handle, info)
  end function store_get_info

end module rmastore
