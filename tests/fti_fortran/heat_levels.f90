! 2-D heat diffusion written as an FTI user writes it: use fti, the
! communicator FTI_Init hands back, POINTER data, FTI_Status / FTI_Recover
! at start and FTI_Checkpoint every EVERY steps, cycling levels 1, 2, 3, 4.
! Nothing in it is specific to libcrpm.
!
!   mpirun -n 4 heat_levels CONFIG NX NY ITERS EVERY
!
! Rank 0 prints "PROGRESS step=..." every 100 steps and, at the end,
! "RESULT rank=R hash=..." per rank (a hash of the bits of its block): both
! are bit-exact functions of the inputs, so a run that was killed and
! restarted must print the lines of an uninterrupted run.
program heat_levels
  use mpi
  use fti
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  real(dp), parameter :: alpha = 0.2_dp
  integer :: FTI_COMM_WORLD, ierr, rank, nprocs, nx, ny, niter, every, nyl, j0, up, down, j
  integer :: status, level
  integer, pointer :: step
  real(dp), pointer :: h(:,:)
  real(dp), allocatable :: hnew(:,:)
  character(len=256) :: config, arg

  call MPI_Init(ierr)
  call get_command_argument(1, config)
  call get_command_argument(2, arg); read (arg, *) nx
  call get_command_argument(3, arg); read (arg, *) ny
  call get_command_argument(4, arg); read (arg, *) niter
  call get_command_argument(5, arg); read (arg, *) every

  FTI_COMM_WORLD = MPI_COMM_WORLD
  call FTI_Init(config, FTI_COMM_WORLD, ierr)
  if (ierr /= FTI_SCES) call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  call MPI_Comm_rank(FTI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(FTI_COMM_WORLD, nprocs, ierr)

  nyl = ny / nprocs
  j0 = rank * nyl + min(rank, mod(ny, nprocs))
  if (rank < mod(ny, nprocs)) nyl = nyl + 1
  down = rank - 1
  if (rank == 0) down = MPI_PROC_NULL
  up = rank + 1
  if (rank == nprocs - 1) up = MPI_PROC_NULL

  allocate (step, h(0:nx+1, 0:nyl+1), hnew(nx, nyl))
  step = 0
  h = 0
  if (up == MPI_PROC_NULL) h(:, nyl+1) = 100
  do j = 0, nyl + 1
     h(0, j) = 50 * real(j0 + j, dp) / real(ny + 1, dp)
  end do

  call FTI_Protect(0, step, ierr)
  call FTI_Protect(1, h, ierr)

  call FTI_Status(status)
  if (status /= 0) then
     call FTI_Recover(ierr)
     if (ierr /= FTI_SCES) then
        if (rank == 0) print '(a,i0)', 'heat_levels: FTI_Recover failed: ', ierr
        call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
     end if
     if (rank == 0) print '(a,i0)', 'heat_levels: recovered at step ', step
  end if

  do while (step < niter)
     call exchange()
     hnew = h(1:nx, 1:nyl) + alpha * (h(0:nx-1, 1:nyl) + h(2:nx+1, 1:nyl) + &
          h(1:nx, 0:nyl-1) + h(1:nx, 2:nyl+1) - 4 * h(1:nx, 1:nyl))
     h(1:nx, 1:nyl) = hnew
     step = step + 1
     if (mod(step, 100) == 0) call report('PROGRESS')
     if (mod(step, every) == 0) then
        level = mod(step / every - 1, 4) + 1
        call FTI_Checkpoint(step / every, level, ierr)
        if (ierr /= FTI_DONE) then
           if (rank == 0) print '(a,i0)', 'heat_levels: FTI_Checkpoint failed: ', ierr
           call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
        end if
     end if
  end do
  call report('RESULT')

  call FTI_Finalize(ierr)
  call MPI_Finalize(ierr)

contains

  subroutine exchange()
    integer :: st(MPI_STATUS_SIZE)
    call MPI_Sendrecv(h(1, nyl), nx, MPI_DOUBLE_PRECISION, up, 1, h(1, 0), nx, &
         MPI_DOUBLE_PRECISION, down, 1, FTI_COMM_WORLD, st, ierr)
    call MPI_Sendrecv(h(1, 1), nx, MPI_DOUBLE_PRECISION, down, 2, h(1, nyl+1), nx, &
         MPI_DOUBLE_PRECISION, up, 2, FTI_COMM_WORLD, st, ierr)
  end subroutine exchange

  ! Sums are gathered and added in rank order on rank 0 (reproducible); the
  ! block hash is a rotate-xor of the bit patterns of every value.
  subroutine report(tag)
    character(len=*), intent(in) :: tag
    real(dp) :: sums(nprocs), total
    integer(8) :: hashes(nprocs), hsh, bits
    integer :: i, k
    hsh = 7046029254386353131_8
    do k = 0, nyl + 1
       do i = 0, nx + 1
          bits = transfer(h(i, k), bits)
          hsh = ieor(ishftc(hsh, 11), ieor(bits, ishftc(bits, 29)))
       end do
    end do
    call MPI_Gather(sum(h(1:nx, 1:nyl)), 1, MPI_DOUBLE_PRECISION, sums, 1, MPI_DOUBLE_PRECISION, &
         0, FTI_COMM_WORLD, ierr)
    call MPI_Gather(hsh, 1, MPI_INTEGER8, hashes, 1, MPI_INTEGER8, 0, FTI_COMM_WORLD, ierr)
    if (rank /= 0) return
    total = 0
    do i = 1, nprocs
       total = total + sums(i)
    end do
    if (tag == 'RESULT') then
       do i = 1, nprocs
          print '(a,i0,a,z16.16)', 'RESULT rank=', i - 1, ' hash=', hashes(i)
       end do
       print '(a,i0,a,es24.16e3)', 'RESULT steps=', step, ' sum=', total
    else
       print '(a,i0,a,es24.16e3)', 'PROGRESS step=', step, ' sum=', total
    end if
    flush (6)
  end subroutine report
end program heat_levels
