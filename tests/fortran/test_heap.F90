! The persistent heap from Fortran (module crpm): an array and a small linked
! list in crpm_malloc'ed memory, a root, a checkpoint, and a recovery by a
! new crpm_init in the same run: the same addresses and values.
!   test_heap_f CONFIG
program test_heap_f
  use mpi
  use crpm
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  type, bind(C) :: node_t
     type(c_ptr) :: next
     integer(c_int64_t) :: key
  end type node_t
  character(len=1024) :: cfg
  integer :: ierr, rank, st, i, fails
  integer, target :: step
  type(c_ptr) :: p, q, head
  real(real64), pointer :: x(:)
  type(node_t), pointer :: nd
  integer(int64) :: used, n

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, cfg)
  fails = 0
  n = 100000

  p = crpm_malloc(8_int64)
  if (c_associated(p)) call fail('crpm_malloc before crpm_init succeeded')

  call crpm_init(cfg, MPI_COMM_WORLD, ierr)
  if (ierr /= CRPM_SUCCESS) call fail('init: ' // crpm_last_error())
  call crpm_protect(0, step, ierr)
  step = 5
  p = crpm_malloc(n * 8_int64)
  if (.not. c_associated(p)) call fail('crpm_malloc: ' // crpm_last_error())
  call c_f_pointer(p, x, [n])
  do i = 1, int(n)
     x(i) = real(i, real64) * 0.5_real64 + rank
  end do
  head = c_null_ptr
  do i = 1, 1000
     q = crpm_malloc(int(c_sizeof(nd), int64))
     call c_f_pointer(q, nd)
     nd%key = i
     nd%next = head
     head = q
  end do
  x(1) = transfer(head, x(1))   ! the list's head, kept in the array
  call crpm_set_root(3, p, ierr)
  if (ierr /= CRPM_SUCCESS) call fail('set_root: ' // crpm_last_error())
  used = crpm_heap_used()
  call crpm_checkpoint(1, CRPM_L1, ierr)
  if (ierr /= CRPM_SUCCESS) call fail('checkpoint: ' // crpm_last_error())
  x(2) = -1.0_real64
  call crpm_finalize(ierr)

  call crpm_init(cfg, MPI_COMM_WORLD, ierr)
  call crpm_protect(0, step, ierr)
  call crpm_status(st)
  if (st /= CRPM_STATUS_L1) call fail('no checkpoint found')
  step = 0
  call crpm_recover(ierr)
  if (ierr /= CRPM_SUCCESS) call fail('recover: ' // crpm_last_error())
  q = crpm_get_root(3)
  if (.not. c_associated(q, p) .or. step /= 5 .or. crpm_heap_used() /= used) call fail('root, step or used bytes')
  call c_f_pointer(q, x, [n])
  do i = 2, int(n)
     if (x(i) /= real(i, real64) * 0.5_real64 + rank) then
        call fail('array value changed')
        exit
     end if
  end do
  head = transfer(x(1), head)
  do i = 1000, 1, -1
     call c_f_pointer(head, nd)
     if (nd%key /= i) then
        call fail('list broken')
        exit
     end if
     q = nd%next
     call crpm_free(head)
     head = q
  end do
  call crpm_free(crpm_get_root(3))
  if (crpm_heap_used() /= 0) call fail('bytes left after freeing everything')
  call crpm_finalize(ierr)
  if (rank == 0) print '(a,i0,a)', 'heap_f: ', fails, ' failed'
  call MPI_Finalize(ierr)
  if (fails > 0) stop 1

contains
  subroutine fail(msg)
    character(len=*), intent(in) :: msg
    print '(a,i0,2a)', 'FAIL rank ', rank, ': ', msg
    fails = fails + 1
  end subroutine fail
end program test_heap_f
