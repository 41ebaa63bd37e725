! Consumer program of the installed Fortran bindings (tests/consumers): the
! computation of app.c, checkpointed every 5 steps after the step counter has
! advanced.  Prints "restarted at step N" after a recovery and
! "result <bits>" (the final global sum, bit for bit) at the end.
program app
  use mpi
  use crpm
  use, intrinsic :: iso_fortran_env, only: int64, real64, error_unit
  implicit none
  integer, parameter :: n = 4096, steps = 400
  integer, target :: step
  real(real64), allocatable, target :: x(:)
  integer :: ierr, rank, st, i
  real(real64) :: g
  character(len=1024) :: cfg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, cfg)
  allocate (x(n))
  do i = 1, n
    x(i) = rank + (i - 1) * 1d-3
  end do
  step = 0

  call crpm_init(trim(cfg), MPI_COMM_WORLD, ierr)
  call check(ierr, 'crpm_init')
  call crpm_protect(0, step, ierr)
  call check(ierr, 'crpm_protect')
  call crpm_protect(1, x, ierr)
  call check(ierr, 'crpm_protect')
  call crpm_status(st)
  call check(st, 'crpm_status')
  if (st > 0) then
    call crpm_recover(ierr)
    call check(ierr, 'crpm_recover')
    if (rank == 0) print '(a,i0)', 'restarted at step ', step
  end if
  do while (step < steps)
    call update(global_sum())
    step = step + 1
    if (mod(step, 5) == 0) then
      call crpm_checkpoint(step, CRPM_L1, ierr)
      call check(ierr, 'crpm_checkpoint')
    end if
  end do
  g = global_sum()
  if (rank == 0) print '(a,z16.16)', 'result ', transfer(g, 0_int64)
  call crpm_finalize(ierr)
  call check(ierr, 'crpm_finalize')
  call MPI_Finalize(ierr)

contains

  function global_sum() result(g)
    real(real64) :: g, local
    integer :: e
    local = sum(x)
    call MPI_Allreduce(local, g, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, e)
  end function global_sum

  subroutine update(g)
    real(real64), intent(in) :: g
    integer :: j
    do j = 1, n
      x(j) = 0.9999d0 * x(j) + 1d-7 * g + real(mod((j - 1) * 7 + step, 13), real64)
    end do
  end subroutine update

  subroutine check(rc, what)
    integer, intent(in) :: rc
    character(len=*), intent(in) :: what
    integer :: e
    if (rc < 0) then
      write (error_unit, '(a,a,a)') 'app: ', what, ': ' // crpm_last_error()
      call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine check
end program app
