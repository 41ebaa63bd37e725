!> 2-D heat diffusion (explicit 5-point stencil) on a grid split into row
!> blocks over the MPI ranks; Fortran example of libcrpm.
!>
!>   heat_f90 [--crpm CONFIG] [--ckpt-every N] [--nx N] [--ny N] [--iters N]
!>            [--print-every N]
!>
!> Without --crpm no library call is made.  With it the step counter and the
!> temperature field are protected, a checkpoint is taken every N steps and a
!> restarted run resumes from the last one.  Output lines starting with
!> PROGRESS / RESULT are bit-exact functions of the inputs (sums are reduced
!> in rank order on rank 0, and the field is printed as a hash of its bit
!> patterns), so a restarted run must reproduce them exactly.
program heat_f90
  use mpi
  use crpm
  use, intrinsic :: iso_fortran_env, only: int64, real64, error_unit, output_unit
  implicit none

  real(real64), parameter :: alpha = 0.2_real64   ! stable for <= 0.25
  integer :: nx = 256, ny = 256, niter = 1000, ckpt_every = 0, print_every = 100
  character(len=:), allocatable :: cfg
  logical :: use_crpm

  integer :: ierr, rank, nprocs, nyl, j0, up, down, st
  integer, target :: step
  real(real64), allocatable, target :: u(:,:)
  real(real64), allocatable :: unew(:,:)
  real(real64) :: diff, gdiff
  double precision :: t0

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call parse_args()
  use_crpm = allocated(cfg)

  if (ny < nprocs .or. nx < 1) call fail_usage('grid smaller than the number of ranks')
  nyl = ny / nprocs
  j0 = rank * nyl + min(rank, mod(ny, nprocs))
  if (rank < mod(ny, nprocs)) nyl = nyl + 1
  down = merge(MPI_PROC_NULL, rank - 1, rank == 0)
  up = merge(MPI_PROC_NULL, rank + 1, rank == nprocs - 1)

  allocate (u(0:nx+1, 0:nyl+1), unew(nx, nyl))
  call initial_field()
  step = 0

  if (use_crpm) then
     call crpm_init(cfg, MPI_COMM_WORLD, ierr)
     call check(ierr, 'crpm_init')
     call crpm_protect(0, step, ierr)
     call check(ierr, 'crpm_protect(step)')
     call crpm_protect(1, u, ierr)
     call check(ierr, 'crpm_protect(u)')
     call crpm_status(st)
     call check(st, 'crpm_status')
     if (st > 0) then
        call crpm_recover(ierr)
        call check(ierr, 'crpm_recover')
        if (rank == 0) write (output_unit, '(a,i0)') 'heat_f90: recovered at step ', step
     end if
  end if

  t0 = MPI_Wtime()
  do while (step < niter)
     call exchange_halos()
     unew = u(1:nx, 1:nyl) + alpha * (u(0:nx-1, 1:nyl) + u(2:nx+1, 1:nyl) &
          + u(1:nx, 0:nyl-1) + u(1:nx, 2:nyl+1) - 4 * u(1:nx, 1:nyl))
     diff = maxval(abs(unew - u(1:nx, 1:nyl)))
     u(1:nx, 1:nyl) = unew
     step = step + 1

     if (print_every > 0) then
        if (mod(step, print_every) == 0) then
           call MPI_Allreduce(diff, gdiff, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
           call report('PROGRESS', gdiff)
        end if
     end if
     if (use_crpm .and. ckpt_every > 0) then
        if (mod(step, ckpt_every) == 0) then
           call crpm_checkpoint(step, CRPM_L1, ierr)
           call check(ierr, 'crpm_checkpoint')
        end if
     end if
  end do

  call report('RESULT', -1.0_real64)
  if (rank == 0) write (error_unit, '(a,f0.3,a)') 'heat_f90: ', MPI_Wtime() - t0, ' s'
  if (use_crpm) then
     call crpm_finalize(ierr)
     call check(ierr, 'crpm_finalize')
  end if
  call MPI_Finalize(ierr)

contains

  ! Fixed boundary values: hot top edge, a warm ramp on the left edge.
  subroutine initial_field()
    integer :: j
    u = 0
    if (up == MPI_PROC_NULL) u(:, nyl+1) = 100
    do j = 0, nyl + 1
       u(0, j) = 50 * real(j0 + j, real64) / real(ny + 1, real64)
    end do
  end subroutine initial_field

  subroutine exchange_halos()
    integer :: stat(MPI_STATUS_SIZE)
    call MPI_Sendrecv(u(1, nyl), nx, MPI_DOUBLE_PRECISION, up, 1, &
         u(1, 0), nx, MPI_DOUBLE_PRECISION, down, 1, MPI_COMM_WORLD, stat, ierr)
    call MPI_Sendrecv(u(1, 1), nx, MPI_DOUBLE_PRECISION, down, 2, &
         u(1, nyl+1), nx, MPI_DOUBLE_PRECISION, up, 2, MPI_COMM_WORLD, stat, ierr)
  end subroutine exchange_halos

  ! Rank 0 prints the field sum (added in rank order, so reproducible) and,
  ! for RESULT, every rank's bit hash of its block.
  subroutine report(tag, resid)
    character(len=*), intent(in) :: tag
    real(real64), intent(in) :: resid
    real(real64) :: sums(nprocs)
    integer(int64) :: hashes(nprocs)
    integer :: r
    call MPI_Gather(sum(u(1:nx, 1:nyl)), 1, MPI_DOUBLE_PRECISION, sums, 1, &
         MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
    call MPI_Gather(field_hash(), 1, MPI_INTEGER8, hashes, 1, MPI_INTEGER8, 0, &
         MPI_COMM_WORLD, ierr)
    if (rank /= 0) return
    if (resid >= 0) then
       write (output_unit, '(a,1x,a,i0,a,es24.16e3,a,es24.16e3)') tag, 'step=', step, &
            ' residual=', resid, ' sum=', ordered_sum(sums)
    else
       do r = 1, nprocs
          write (output_unit, '(a,1x,a,i0,a,z16.16)') tag, 'rank=', r - 1, ' hash=', hashes(r)
       end do
       write (output_unit, '(a,1x,a,i0,a,es24.16e3)') tag, 'steps=', step, &
            ' sum=', ordered_sum(sums)
    end if
    flush (output_unit)
  end subroutine report

  pure function ordered_sum(v) result(s)
    real(real64), intent(in) :: v(:)
    real(real64) :: s
    integer :: i
    s = 0
    do i = 1, size(v)
       s = s + v(i)
    end do
  end function ordered_sum

  ! Rotate-xor over the IEEE bit patterns: any flipped bit of the block
  ! changes it, and it needs no integer overflow.
  function field_hash() result(h)
    integer(int64) :: h, bits
    integer :: i, j
    h = int(z'1F3D5B79A2C4E607', int64)
    do j = 0, nyl + 1
       do i = 0, nx + 1
          bits = transfer(u(i, j), bits)
          h = ieor(ishftc(h, 7), ieor(bits, ishftc(bits, 31)))
       end do
    end do
  end function field_hash

  subroutine check(rc, what)
    integer, intent(in) :: rc
    character(len=*), intent(in) :: what
    if (rc >= 0) return
    write (error_unit, '(a,i0,a,a,a,i0,a,a,a,a)') 'heat_f90: rank ', rank, ': ', what, &
         ' failed (', rc, ' ', crpm_strerror(rc), '): ', crpm_last_error()
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end subroutine check

  subroutine parse_args()
    integer :: i, n
    character(len=:), allocatable :: arg, val
    n = command_argument_count()
    i = 1
    do while (i <= n)
       arg = get_arg(i)
       if (arg == '--help' .or. arg == '-h') then
          if (rank == 0) write (output_unit, '(a)') 'usage: heat_f90 [--crpm CONFIG] ' // &
               '[--ckpt-every N] [--nx N] [--ny N] [--iters N] [--print-every N]'
          call MPI_Finalize(ierr)
          stop
       end if
       if (i == n) call fail_usage('missing value after ' // arg)
       val = get_arg(i + 1)
       select case (arg)
       case ('--crpm')
          cfg = val
       case ('--ckpt-every')
          ckpt_every = to_int(val, arg)
       case ('--nx')
          nx = to_int(val, arg)
       case ('--ny')
          ny = to_int(val, arg)
       case ('--iters')
          niter = to_int(val, arg)
       case ('--print-every')
          print_every = to_int(val, arg)
       case default
          call fail_usage('unknown option ' // arg)
       end select
       i = i + 2
    end do
    if (allocated(cfg)) then
       if (len(cfg) == 0) call fail_usage('empty --crpm file name')
    end if
  end subroutine parse_args

  function get_arg(i) result(s)
    integer, intent(in) :: i
    character(len=:), allocatable :: s
    integer :: l
    call get_command_argument(i, length=l)
    allocate (character(len=l) :: s)
    call get_command_argument(i, s)
  end function get_arg

  integer function to_int(s, opt)
    character(len=*), intent(in) :: s, opt
    integer :: ios
    read (s, *, iostat=ios) to_int
    if (ios /= 0 .or. to_int < 0) call fail_usage('bad value for ' // opt // ': ' // s)
  end function to_int

  subroutine fail_usage(msg)
    character(len=*), intent(in) :: msg
    if (rank == 0) write (error_unit, '(a,a)') 'heat_f90: ', msg
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end subroutine fail_usage

end program heat_f90
