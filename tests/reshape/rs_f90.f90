!> Global datasets from Fortran (rs_scenarios.py): an nx x ny array, Fortran
!> order, split over the ranks along its second (slowest) dimension.
!>   rs_f90 cfg.ini
!> Fresh start: u(i, j) = f(i, j) in global indices, one checkpoint.  Restart
!> (any rank count): the saved shape from crpm_global_dims, this rank's
!> columns protected and described, recovered and checked: "rs_f90: data ok".
program rs_f90
  use mpi
  use crpm
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  integer :: ierr, rank, nranks, st, nd, nbad, allbad, step
  integer(int64) :: dims(2), nx, ny, c0, cols, i, j
  real(real64), allocatable, target :: u(:, :)
  character(len=256) :: cfg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call get_command_argument(1, cfg)
  call crpm_init(trim(cfg), MPI_COMM_WORLD, ierr)
  if (ierr /= CRPM_SUCCESS) call die('crpm_init', ierr)
  call crpm_status(st)
  nx = 30
  ny = 44
  if (st == CRPM_STATUS_RESHAPED) then
     call crpm_global_dims(5, dims, nd)
     if (nd /= 2) call die('crpm_global_dims', nd)
     nx = dims(1)
     ny = dims(2)
  end if
  cols = ny / nranks
  c0 = rank * cols + min(int(rank, int64), mod(ny, int(nranks, int64)))
  if (rank < mod(ny, int(nranks, int64))) cols = cols + 1
  allocate (u(nx, cols))
  u = 0
  step = 0
  call crpm_define_global(5, [nx, ny], u, ierr, name='fortran_field')
  if (ierr /= CRPM_SUCCESS) call die('crpm_define_global', ierr)
  call crpm_protect_replicated(0, step, ierr)
  if (ierr /= CRPM_SUCCESS) call die('crpm_protect_replicated', ierr)
  call crpm_protect(1, u, ierr)
  if (ierr /= CRPM_SUCCESS) call die('crpm_protect', ierr)
  call crpm_add_subset(5, 1, [0_int64, c0], [nx, cols], ierr)
  if (ierr /= CRPM_SUCCESS) call die('crpm_add_subset', ierr)
  if (st > 0) then
     call crpm_recover(ierr)
     if (ierr /= CRPM_SUCCESS) call die('crpm_recover', ierr)
     nbad = 0
     do j = 1, cols
        do i = 1, nx
           if (u(i, j) /= f(i, c0 + j)) nbad = nbad + 1
        end do
     end do
     if (step /= 9) nbad = nbad + 1
     call MPI_Allreduce(nbad, allbad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
     if (rank == 0 .and. allbad == 0) print '(a,i0,a)', 'rs_f90: data ok on ', nranks, ' ranks'
     if (rank == 0 .and. allbad /= 0) print '(a,i0)', 'rs_f90: wrong elements: ', allbad
  else
     do j = 1, cols
        do i = 1, nx
           u(i, j) = f(i, c0 + j)
        end do
     end do
     step = 9
     call crpm_checkpoint(1, CRPM_L1, ierr)
     if (ierr /= CRPM_SUCCESS) call die('crpm_checkpoint', ierr)
     if (rank == 0) print '(a)', 'rs_f90: checkpointed'
  end if
  call crpm_finalize(ierr)
  call MPI_Finalize(ierr)
contains
  pure function f(i, j) result(v)
    integer(int64), intent(in) :: i, j
    real(real64) :: v
    v = real(i, real64) * 1000.0_real64 + real(j, real64) / 7.0_real64
  end function f

  subroutine die(what, code)
    character(len=*), intent(in) :: what
    integer, intent(in) :: code
    print '(a,i0,3a,i0,2a)', 'rs_f90 rank ', rank, ': ', what, ' failed (', code, '): ', crpm_last_error()
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end subroutine die
end program rs_f90
