! resilient_jacobi in Fortran: an iterative stencil solver that survives a dead process, as
! examples/resilient_jacobi/resilient_jacobi.c does in C (read that file for the why of each step).
!
! Jacobi iterations for the Laplace equation on an N x N grid (top edge 1, the others 0), the
! interior rows cut into 2 blocks per process. Every iteration each block publishes its edge rows
! in the store, where its neighbours read them; every `every` iterations each block checkpoints
! its rows, alternating between two generations. When a process dies, the survivors call
! store_recover, take the newest iteration every block has a checkpoint of, share out all blocks
! among themselves, reload them from the store and go on. At the end rank 0 compares the solution
! with a serial run of the same iterations without failures.
!
!   mpirun --with-ft ulfm -n 4 ./resilient_jacobi_f [--n 130] [--iters 600] [--every 25]
!                                                   [--kill-rank 1] [--kill-at 210]
program resilient_jacobi_f
  use, intrinsic :: iso_c_binding
  use mpi
  use rmastore
  implicit none

  interface
    function c_raise(sig) bind(C, name="raise") result(r)
      import :: c_int
      integer(c_int), value :: sig
      integer(c_int) :: r
    end function c_raise
  end interface

  integer(c_int64_t), parameter :: KEY_CKPT = 1000000, KEY_EDGE = 2000000, KEY_FINAL = 3000000
  integer(c_int), parameter :: SIGKILL = 9
  integer :: n = 130, iters = 600, every = 25, kill_rank = 1, kill_at = 210
  integer :: world_rank, world_size, nblocks, rows, me, nalive, comm, ierr, provided, st, it, b, ok
  type(store_t) :: store
  type(store_config_t) :: cfg
  ! cur(:, :, b): block b's rows (columns of this array, so that a row is contiguous), if owned.
  real(c_double), allocatable, target :: cur(:, :, :), nxt(:, :, :), up(:), down(:), ckpt(:)

  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, world_rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, world_size, ierr)
  ! Barriers run on MPI_COMM_WORLD until the first failure: they must return an error.
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call parse_args()
  nblocks = 2 * world_size
  rows = (n - 2) / nblocks
  if (world_size < 2 .or. rows < 1 .or. mod(n - 2, nblocks) /= 0 .or. kill_rank >= world_size .or. &
      kill_rank == 0) then
    if (world_rank == 0) write (0, '(a)') "resilient_jacobi_f: needs 2 or more processes, N-2 divisible by "// &
      "2 x processes, and a victim other than rank 0"
    call MPI_Finalize(ierr)
    stop 2
  end if
  st = store_config_init(cfg)
  cfg%replicas = 2
  st = store_init(MPI_COMM_WORLD, cfg, store)
  if (st /= STORE_OK) call die("store_init", st)
  call set_comm(MPI_COMM_WORLD)
  allocate (cur(n, rows, 0:nblocks - 1), nxt(n, rows, 0:nblocks - 1), up(n), down(n), ckpt(1 + n * rows))
  cur = 0
  nxt = 0
  if (world_rank == 0) then
    write (*, '(a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a,i0)') "rank 0: ", n, " x ", n, " grid in ", nblocks, &
      " blocks of ", rows, " rows on ", world_size, " processes, ", iters, " iterations, checkpoint every ", every
    if (kill_rank > 0) write (*, '(a,i0,a,i0)') "rank 0: rank ", kill_rank, " will die at iteration ", kill_at
  end if

  it = 0
  st = checkpoint(0)
  if (st == STORE_OK) st = publish(0)
  if (st == STORE_OK) st = barrier()
  do while (it < iters .or. st /= STORE_OK)
    if (st /= STORE_OK) then
      write (*, '(a,i0,a,i0,a)') "rank ", world_rank, ": iteration ", it, ": a process failed -> store_recover"
      call recover(it)
      st = publish(it)
      if (st == STORE_OK) st = barrier()
      cycle
    end if
    if (world_rank == kill_rank .and. it == kill_at) then
      write (*, '(a,i0,a,i0,a)') "rank ", world_rank, ": dies now at iteration ", it, " (SIGKILL)"
      flush (6)
      st = c_raise(SIGKILL)
    end if
    do b = 0, nblocks - 1
      if (owner(b) /= me) cycle
      st = halo(b, 0, it, up)
      if (st == STORE_OK) st = halo(b, 1, it, down)
      if (st /= STORE_OK) exit
      call sweep(cur(:, :, b), up, down, nxt(:, :, b))
    end do
    if (st /= STORE_OK) cycle
    cur = nxt
    it = it + 1
    if (mod(it, every) == 0) st = checkpoint(it)
    if (st == STORE_OK) st = publish(it)
    if (st == STORE_OK) st = barrier()
  end do

  ! The solution, gathered through the store, against the serial failure-free run.
  do b = 0, nblocks - 1
    if (owner(b) == me .and. st == STORE_OK) st = store_put(store, KEY_FINAL + b, cur(:, :, b), bytes(n * rows))
  end do
  if (st == STORE_OK) st = barrier()
  if (st /= STORE_OK) call die("a failure after the last iteration is not handled by this example", st)
  ok = 1
  if (me == 0) call compare(ok)
  call MPI_Bcast(ok, 1, MPI_INTEGER, 0, comm, ierr)
  st = store_finalize(store)
  if (st /= STORE_OK) call die("store_finalize", st)
  if (comm /= MPI_COMM_WORLD) call MPI_Comm_free(comm, ierr)
  call MPI_Finalize(ierr)
  if (ok /= 1) stop 1

contains

  pure function bytes(count) result(nb)
    integer, intent(in) :: count
    integer(c_size_t) :: nb
    nb = int(count, c_size_t) * c_sizeof(1.0_c_double)
  end function bytes

  pure function owner(blk) result(r)
    integer, intent(in) :: blk
    integer :: r
    r = mod(blk, nalive)
  end function owner

  subroutine die(what, code)
    character(len=*), intent(in) :: what
    integer, intent(in) :: code
    write (0, '(a,i0,a,a,a,i0,a,a)') "rank ", world_rank, ": ", what, ": ", code, " ", store_strerror(code)
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end subroutine die

  subroutine set_comm(c)
    integer, intent(in) :: c
    comm = c
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, nalive, ierr)
  end subroutine set_comm

  ! A barrier's MPI error (a process failed) shows as the store's status of the same meaning.
  integer function barrier()
    integer :: e
    call MPI_Barrier(comm, e)
    barrier = merge(STORE_OK, STORE_ERR_PROC_FAILED, e == MPI_SUCCESS)
  end function barrier

  ! One Jacobi sweep of a block: `above` and `below` are the rows just outside it.
  subroutine sweep(in, above, below, out)
    real(c_double), intent(in) :: in(:, :), above(:), below(:)
    real(c_double), intent(out) :: out(:, :)
    integer :: i, j
    do i = 1, rows
      out(1, i) = 0
      out(n, i) = 0
      do j = 2, n - 1
        out(j, i) = 0.25_c_double * (merge(above(j), in(j, max(i - 1, 1)), i == 1) + &
                                     merge(below(j), in(j, min(i + 1, rows)), i == rows) + in(j - 1, i) + in(j + 1, i))
      end do
    end do
  end subroutine sweep

  subroutine boundary_row(row, out)
    integer, intent(in) :: row
    real(c_double), intent(out) :: out(:)
    out = 0
    if (row == 0) out(2:n - 1) = 1
  end subroutine boundary_row

  integer function publish(at)
    integer, intent(in) :: at
    integer :: blk
    publish = STORE_OK
    do blk = 0, nblocks - 1
      if (owner(blk) /= me) cycle
      publish = store_put(store, KEY_EDGE + 4 * blk + mod(at, 2), cur(:, 1, blk), bytes(n))
      if (publish == STORE_OK) publish = store_put(store, KEY_EDGE + 4 * blk + 2 + mod(at, 2), cur(:, rows, blk), bytes(n))
      if (publish /= STORE_OK) return
    end do
  end function publish

  ! The row just above (side 0) or below (side 1) block blk at iteration `at`.
  integer function halo(blk, side, at, out)
    integer, intent(in) :: blk, side, at
    real(c_double), intent(out), target :: out(:)
    integer :: nb
    integer(c_size_t) :: len
    nb = merge(blk - 1, blk + 1, side == 0)
    if (nb < 0 .or. nb >= nblocks) then
      call boundary_row(merge(0, n - 1, side == 0), out)
      halo = STORE_OK
      return
    end if
    halo = store_get(store, KEY_EDGE + 4 * nb + 2 * merge(1, 0, side == 0) + mod(at, 2), out, bytes(n), len)
  end function halo

  integer function checkpoint(at)
    integer, intent(in) :: at
    integer :: blk
    checkpoint = STORE_OK
    ckpt(1) = at
    do blk = 0, nblocks - 1
      if (owner(blk) /= me) cycle
      ckpt(2:) = reshape(cur(:, :, blk), [n * rows])
      checkpoint = store_put(store, KEY_CKPT + 2 * blk + mod(at / every, 2), ckpt, bytes(size(ckpt)))
      if (checkpoint /= STORE_OK) return
    end do
  end function checkpoint

  ! After store_recover: the newest iteration every block has a checkpoint of, and the owned
  ! blocks loaded from it.
  integer function restore(restart)
    integer, intent(out) :: restart
    integer :: blk, g, newest
    integer(c_size_t) :: len
    restart = huge(restart)
    do blk = 0, nblocks - 1
      newest = -1
      do g = 0, 1
        restore = store_get(store, KEY_CKPT + 2 * blk + g, ckpt, bytes(size(ckpt)), len)
        if (restore == STORE_OK) then
          newest = max(newest, nint(ckpt(1)))
        else if (restore /= STORE_ERR_NOT_FOUND) then
          return
        end if
      end do
      restart = min(restart, newest)
    end do
    do blk = 0, nblocks - 1
      if (owner(blk) /= me) cycle
      restore = store_get(store, KEY_CKPT + 2 * blk + mod(restart / every, 2), ckpt, bytes(size(ckpt)), len)
      if (restore /= STORE_OK) return
      if (nint(ckpt(1)) /= restart) call die("a block lacks the common checkpoint", nint(ckpt(1)))
      cur(:, :, blk) = reshape(ckpt(2:), [n, rows])
    end do
    restore = STORE_OK
  end function restore

  subroutine recover(at)
    integer, intent(inout) :: at
    integer :: fresh, s, blk
    type(store_recovery_t) :: rep
    do
      s = store_recover(store, fresh)
      do while (s == STORE_ERR_RECOVER_AGAIN)
        s = store_recover(store, fresh)
      end do
      if (s /= STORE_OK) call die("store_recover", s)
      s = store_last_recovery(store, rep)
      if (comm /= MPI_COMM_WORLD) call MPI_Comm_free(comm, ierr)
      call set_comm(fresh)
      if (rep%lost_count /= 0) call die("checkpoints were lost", int(rep%lost_count))
      ! Checkpoints are plain puts: back to normal mode, then reload.
      s = store_back_to_normal(store)
      if (s == STORE_OK) s = restore(at)
      if (s == STORE_OK) then
        if (me == 0) write (*, '(a,i0,a,i0,a,i0)') "rank 0: store_recover done (", rep%survivors, &
          " survivors); all blocks reloaded from the checkpoint of iteration ", at, ", blocks here: ", &
          count([(owner(blk) == me, blk = 0, nblocks - 1)])
        return
      end if
      if (s /= STORE_ERR_PROC_FAILED) call die("restore", s)
    end do
  end subroutine recover

  ! Rank 0: the final grid from the store against a serial run of the same iterations.
  subroutine compare(same)
    integer, intent(out) :: same
    real(c_double), allocatable, target :: g(:, :), a(:, :), c(:, :)
    real(c_double) :: diff, r, rref
    integer(c_size_t) :: len
    integer :: blk, i, j, s
    allocate (g(n, 0:n - 1), a(n, 0:n - 1), c(n, 0:n - 1))
    g = 0
    call boundary_row(0, g(:, 0))
    do blk = 0, nblocks - 1
      s = store_get(store, KEY_FINAL + blk, g(:, 1 + blk * rows:(blk + 1) * rows), bytes(n * rows), len)
      if (s /= STORE_OK) call die("final get", s)
    end do
    a = 0
    call boundary_row(0, a(:, 0))
    c = a
    do s = 1, iters
      do i = 1, n - 2
        do j = 2, n - 1
          c(j, i) = 0.25_c_double * (a(j, i - 1) + a(j, i + 1) + a(j - 1, i) + a(j + 1, i))
        end do
      end do
      a = c
    end do
    diff = maxval(abs(g - a))
    r = residual(g)
    rref = residual(a)
    same = merge(1, 0, diff <= 1e-12_c_double .and. abs(r - rref) <= 1e-12_c_double * max(1.0_c_double, rref))
    write (*, '(a,es13.6,a,es13.6,a,es8.1,a,a,a,i0,a)') "rank 0: residual ", r, " (failure-free run: ", rref, &
      "), largest difference from the failure-free solution ", diff, ": ", trim(merge("MATCH   ", "MISMATCH", same == 1)), &
      " (", world_size - nalive, " failure(s) survived)"
  end subroutine compare

  pure function residual(g) result(s)
    real(c_double), intent(in) :: g(:, 0:)
    real(c_double) :: s
    integer :: i, j
    s = 0
    do i = 1, n - 2
      do j = 2, n - 1
        s = s + (4 * g(j, i) - g(j, i - 1) - g(j, i + 1) - g(j - 1, i) - g(j + 1, i))**2
      end do
    end do
    s = sqrt(s)
  end function residual

  subroutine parse_args()
    integer :: i, v, stat
    character(len=64) :: opt, val
    i = 1
    do while (i <= command_argument_count())
      call get_command_argument(i, opt)
      call get_command_argument(i + 1, val)
      read (val, *, iostat=stat) v
      if (stat /= 0) call usage("'"//trim(opt)//"' needs an integer")
      select case (opt)
      case ("--n")
        n = v
      case ("--iters")
        iters = v
      case ("--every")
        every = max(v, 1)
      case ("--kill-rank")
        kill_rank = v
      case ("--kill-at")
        kill_at = v
      case default
        call usage("unknown option '"//trim(opt)//"'")
      end select
      i = i + 2
    end do
  end subroutine parse_args

  subroutine usage(why)
    character(len=*), intent(in) :: why
    if (world_rank == 0) then
      write (0, '(a,a)') "resilient_jacobi_f: ", why
      write (0, '(a)') "usage: resilient_jacobi_f [--n N] [--iters I] [--every E] [--kill-rank R|-1] [--kill-at I]"
    end if
    call MPI_Finalize(ierr)
    stop 2
  end subroutine usage

end program resilient_jacobi_f
