! Module fti: FTI_Protect over every kind at ranks 0..7 (pointers, as FTI
! users declare them, plus TARGET and allocatable TARGET actuals), character
! data, a derived type through FTI_InitType + c_loc, refusal of strided
! sections and disassociated pointers, and the constants -- checked by a
! real checkpoint in one run and a recovery in the next:
!
!   test_fti_protect offline          constants; FTI_Protect before FTI_Init
!   test_fti_protect write  CONFIG    fill, protect, FTI_Checkpoint (kept)
!   test_fti_protect verify CONFIG    protect other values, FTI_Status /=
!                                     0, FTI_Recover, compare everything,
!                                     FTI_Status == 0 afterwards
module ftip_common
  use fti
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int8, int16, int32, int64, real32, real64, error_unit
  implicit none
  integer, parameter :: MODE_WRITE = 1, MODE_READ = 2, MODE_CHECK = 3
  integer :: my_rank = 0
  integer(int64) :: protected_bytes = 0
contains
  ! Rank 1 holds bigger arrays than the others, so sizes differ per rank.
  function extents() result(e)
    integer :: e(7)
    e = [3, 2, 2, 1, 2, 1, 2]
    if (my_rank == 1) e(1) = 4
  end function extents

  ! Distinct value ranges per id and rank (arrays have fewer than 200 elements).
  integer function seed(id)
    integer, intent(in) :: id
    seed = 1 + id * 200 + my_rank * 300000
  end function seed

  subroutine expect_ok(id, ierr, nbad)
    integer, intent(in) :: id, ierr
    integer, intent(inout) :: nbad
    if (ierr /= FTI_SCES) then
       write (error_unit, '(a,i0,a,i0,a,i0)') 'rank ', my_rank, ': FTI_Protect(', id, &
            ') returned ', ierr
       nbad = nbad + 1
    end if
  end subroutine expect_ok

  subroutine expect_refused(ierr, id, nbad)
    integer, intent(in) :: ierr, id
    integer, intent(inout) :: nbad
    if (ierr /= FTI_NSCS) then
       write (error_unit, '(a,i0,a,i0,a,i0)') 'rank ', my_rank, &
            ': a bad FTI_Protect of id ', id, ' was accepted: ', ierr
       nbad = nbad + 1
    end if
  end subroutine expect_refused
end module ftip_common

module ftip_kinds
  use ftip_common
  implicit none
  integer, parameter :: lk1 = 1, lk2 = 2, lk8 = 8
contains
#define SAME(x, y) ((x) == (y))
#define SUB check_i1
#define TYPE integer(int8)
#define VAL(v) int(modulo(v, 127), int8)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#define SUB check_i2
#define TYPE integer(int16)
#define VAL(v) int(modulo(v, 32000), int16)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#define SUB check_i4
#define TYPE integer(int32)
#define VAL(v) int(v, int32)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#define SUB check_i8
#define TYPE integer(int64)
#define VAL(v) (int(v, int64) * 4294967311_int64)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#define SUB check_r4
#define TYPE real(real32)
#define VAL(v) (real(v, real32) + 0.25_real32)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#define SUB check_r8
#define TYPE real(real64)
#define VAL(v) (real(v, real64) / 3.0_real64)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#define SUB check_c4
#define TYPE complex(real32)
#define VAL(v) cmplx(v, -2 * (v), real32)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#define SUB check_c8
#define TYPE complex(real64)
#define VAL(v) cmplx(real(v, real64) / 7.0_real64, real(v, real64) / 3.0_real64, real64)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#undef SAME
#define SAME(x, y) ((x) .eqv. (y))
#define SUB check_l1
#define TYPE logical(lk1)
#define VAL(v) logical(modulo(v, 3) == 0, lk1)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#define SUB check_l2
#define TYPE logical(lk2)
#define VAL(v) logical(modulo(v, 5) < 2, lk2)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#define SUB check_l4
#define TYPE logical
#define VAL(v) (modulo(v, 2) == 1)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#define SUB check_l8
#define TYPE logical(lk8)
#define VAL(v) logical(modulo(v, 7) > 3, lk8)
#include "protect_kind.inc"
#undef SUB
#undef TYPE
#undef VAL
#undef SAME
end module ftip_kinds

module ftip_other
  use ftip_common
  implicit none
  type :: particle
     real(real64) :: x(3)
     integer(int32) :: tag
     logical :: alive
  end type particle
contains
  ! Non-pointer actuals (TARGET, allocatable TARGET), character data and a
  ! derived type as FTI's documentation protects it: c_loc + FTI_InitType.
  subroutine check_other(mode, nbad)
    integer, intent(in) :: mode
    integer, intent(inout) :: nbad
    real(real64), target, save :: t(5)
    integer(int64), allocatable, target, save :: al(:,:)
    character(len=7), target, save :: names(3)
    character(len=11), pointer, save :: label
    type(particle), allocatable, target, save :: parts(:)
    integer, save :: particle_type
    integer :: ierr, i, k, n
    integer(int64) :: stored

    n = 4 + my_rank
    if (mode == MODE_WRITE .or. mode == MODE_READ) then
       allocate (al(3, 2), label, parts(n))
       k = 0
       if (mode == MODE_READ) k = 1000
       t = [(real(seed(300) + i + k, real64) * 0.5_real64, i = 1, 5)]
       al = reshape([(int(seed(301) + i + k, int64), i = 1, 6)], [3, 2])
       do i = 1, 3
          write (names(i), '(a,i5.5)') 'n', modulo(seed(302) + i + k, 100000)
       end do
       write (label, '(a,i4.4)') 'label', modulo(seed(303) + k, 10000)
       do i = 1, n
          parts(i) = particle([real(i + k, real64), real(my_rank, real64), -1.5_real64], &
               seed(304) + i + k, modulo(i + k, 2) == 0)
       end do
       call FTI_Protect(300, t, ierr); call expect_ok(300, ierr, nbad)
       call FTI_Protect(301, al, ierr); call expect_ok(301, ierr, nbad)
       call FTI_Protect(302, names, ierr); call expect_ok(302, ierr, nbad)
       call FTI_Protect(303, label, ierr); call expect_ok(303, ierr, nbad)
       particle_type = FTI_InitType(int(storage_size(parts) / 8, c_size_t))
       ierr = merge(FTI_NSCS, FTI_SCES, particle_type == FTI_NSCS)
       call expect_ok(304, ierr, nbad)
       call FTI_Protect(304, c_loc(parts), size(parts), particle_type, ierr)
       call expect_ok(304, ierr, nbad)
       ! a size of 0 bytes makes no type
       ierr = FTI_InitType(0_c_size_t)
       call expect_refused(ierr, 305, nbad)
       particle_type = FTI_InitType(int(storage_size(parts) / 8, c_size_t))
       ierr = merge(FTI_NSCS, FTI_SCES, particle_type == FTI_NSCS)
       call expect_ok(305, ierr, nbad)
       if (mode == MODE_READ) then
          call FTI_GetStoredSize(304, stored)
          if (stored /= size(parts) * storage_size(parts) / 8) then
             write (error_unit, '(a,i0,a,i0,a,i0)') 'rank ', my_rank, &
                  ': FTI_GetStoredSize(304) = ', stored, ', expected ', size(parts) * storage_size(parts) / 8
             nbad = nbad + 1
          end if
       end if
       protected_bytes = protected_bytes + 5 * 8 + 6 * 8 + 3 * 7 + 11 + n * storage_size(parts) / 8
    else
       do i = 1, 5
          if (t(i) /= real(seed(300) + i, real64) * 0.5_real64) call bad(300)
       end do
       if (any(al /= reshape([(int(seed(301) + i, int64), i = 1, 6)], [3, 2]))) call bad(301)
       do i = 1, 3
          block
            character(len=7) :: want
            write (want, '(a,i5.5)') 'n', modulo(seed(302) + i, 100000)
            if (names(i) /= want) call bad(302)
          end block
       end do
       block
         character(len=11) :: want
         write (want, '(a,i4.4)') 'label', modulo(seed(303), 10000)
         if (label /= want) call bad(303)
       end block
       do i = 1, n
          if (any(parts(i)%x /= [real(i, real64), real(my_rank, real64), -1.5_real64]) .or. &
               parts(i)%tag /= seed(304) + i .or. (parts(i)%alive .neqv. modulo(i, 2) == 0)) call bad(304)
       end do
    end if
  contains
    subroutine bad(id)
      integer, intent(in) :: id
      write (error_unit, '(a,i0,a,i0)') 'rank ', my_rank, ': wrong values recovered for id ', id
      nbad = nbad + 1
    end subroutine bad
  end subroutine check_other
end module ftip_other

program test_fti_protect
  use mpi
  use fti
  use ftip_common
  use ftip_kinds
  use ftip_other
  implicit none
  character(len=256) :: mode_s, config
  integer :: ierr, nbad, total_bad, comm, status, mode, c_vals(4)
  integer, pointer :: early

  interface
     function c_const(which) bind(C, name='ftif_test_const') result(v)
       import :: c_int
       integer(c_int), value :: which
       integer(c_int) :: v
     end function c_const
  end interface

  nbad = 0
  call get_command_argument(1, mode_s)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, my_rank, ierr)

  if (mode_s == 'offline') then
     ! The module's constants are the C layer's.
     c_vals = [c_const(0), c_const(1), c_const(2), c_const(3)]
     if (any([FTI_SCES, FTI_NSCS, FTI_NREC, FTI_DONE] /= c_vals)) then
        write (error_unit, '(a,4i4,a,4i4)') 'constants differ from fti.h:', FTI_SCES, FTI_NSCS, &
             FTI_NREC, FTI_DONE, ' vs', c_vals
        nbad = nbad + 1
     end if
     ! Before FTI_Init no type handle exists yet.
     allocate (early)
     call FTI_Protect(1, early, ierr)
     call expect_refused(ierr, 1, nbad)
     call finish()
  end if

  call get_command_argument(2, config)
  if (mode_s == 'write') then
     mode = MODE_WRITE
  else if (mode_s == 'verify') then
     mode = MODE_READ
  else
     write (error_unit, '(a)') 'usage: test_fti_protect offline | write CONFIG | verify CONFIG'
     call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if

  comm = MPI_COMM_WORLD
  call FTI_Init(trim(config), comm, ierr)
  if (ierr /= FTI_SCES) then
     write (error_unit, '(a,i0)') 'FTI_Init returned ', ierr
     call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (comm == MPI_COMM_WORLD) then
     write (error_unit, '(a)') 'FTI_Init left the communicator at MPI_COMM_WORLD, not FTI_COMM_WORLD'
     nbad = nbad + 1
  end if
  call MPI_Comm_rank(comm, my_rank, ierr)

  call FTI_Status(status)
  if (mode == MODE_WRITE .and. status /= 0) then
     write (error_unit, '(a,i0)') 'write: FTI_Status on an empty directory is ', status
     nbad = nbad + 1
  else if (mode == MODE_READ .and. status == 0) then
     write (error_unit, '(a)') 'verify: FTI_Status found no checkpoint'
     nbad = nbad + 1
  end if

  call all_kinds(mode)
  call check_other(mode, nbad)

  if (mode == MODE_WRITE) then
     call FTI_Checkpoint(1, 1, ierr)
     if (ierr /= FTI_DONE) then
        write (error_unit, '(a,i0)') 'FTI_Checkpoint returned ', ierr
        nbad = nbad + 1
     end if
  else
     call FTI_Recover(ierr)
     if (ierr /= FTI_SCES) then
        write (error_unit, '(a,i0)') 'FTI_Recover returned ', ierr
        nbad = nbad + 1
     else
        call all_kinds(MODE_CHECK)
        call check_other(MODE_CHECK, nbad)
        call FTI_Status(status)
        if (status /= 0) then
           write (error_unit, '(a,i0)') 'FTI_Status after a successful recovery is ', status
           nbad = nbad + 1
        end if
     end if
  end if
  call FTI_Finalize(ierr)
  if (ierr /= FTI_SCES) then
     write (error_unit, '(a,i0)') 'FTI_Finalize returned ', ierr
     nbad = nbad + 1
  end if
  call finish()

contains

  subroutine all_kinds(m)
    integer, intent(in) :: m
    call check_i1(m, 0, nbad)
    call check_i2(m, 10, nbad)
    call check_i4(m, 20, nbad)
    call check_i8(m, 30, nbad)
    call check_r4(m, 40, nbad)
    call check_r8(m, 50, nbad)
    call check_c4(m, 60, nbad)
    call check_c8(m, 70, nbad)
    call check_l1(m, 80, nbad)
    call check_l2(m, 90, nbad)
    call check_l4(m, 100, nbad)
    call check_l8(m, 110, nbad)
  end subroutine all_kinds

  subroutine finish()
    call MPI_Allreduce(nbad, total_bad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (my_rank == 0) then
       if (total_bad == 0) then
          write (*, '(a,a,a,i0,a)') 'test_fti_protect ', trim(mode_s), ': ok (', protected_bytes, &
               ' bytes protected on rank 0)'
       else
          write (*, '(a,a,a,i0,a)') 'test_fti_protect ', trim(mode_s), ': FAILED (', total_bad, ' errors)'
       end if
    end if
    call MPI_Finalize(ierr)
    if (total_bad /= 0) stop 1
    stop
  end subroutine finish
end program test_fti_protect
