! Fortran bindings test: crpm_protect for every supported kind at every rank
! 0..7, derived types through crpm_protect_bytes, re-protection after
! reallocation and refusal of non-contiguous sections, checked by a real
! checkpoint / restart round trip over separate runs:
!
!   test_protect offline            constants and errors without crpm_init
!   test_protect write    CONFIG    fill, protect, checkpoint (keep it)
!   test_protect mismatch CONFIG    protect one array with a wrong size: the
!                                   recovery must fail on every rank
!   test_protect verify   CONFIG    protect zero-filled arrays, recover via
!                                   crpm_snapshot and compare every element
module ptest_common
  use mpi
  use crpm
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int8, int16, int32, int64, real32, real64, error_unit
  implicit none
  integer, parameter :: MODE_WRITE = 1, MODE_READ = 2, MODE_CHECK = 3
  integer :: my_rank = 0
  integer(int64) :: expected_bytes = 0
contains
  ! Rank 1 holds bigger arrays than the others, so sizes are per rank.
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

  subroutine report_error(what, id, ierr)
    character(len=*), intent(in) :: what
    integer, intent(in) :: id, ierr
    write (error_unit, '(a,i0,a,a,a,i0,a,i0,a,a,a,a)') 'rank ', my_rank, ': ', what, '(', id, &
         ') returned ', ierr, ' (', crpm_strerror(ierr), '): ', crpm_last_error()
  end subroutine report_error

  ! What the bindings passed to the C crpm_protect for id (see c_helpers.c).
  logical function recorded(id, code, elsize, count, addr)
    integer, intent(in) :: id
    integer(c_int32_t), intent(out) :: code
    integer(c_int64_t), intent(out) :: elsize, count
    type(c_ptr), intent(out) :: addr
    interface
       function c_recorded(id, code, elsize, count, addr) bind(C, name='crpm_test_recorded') &
            result(found)
         import :: c_int, c_int32_t, c_int64_t, c_ptr
         integer(c_int), value :: id
         integer(c_int32_t), intent(out) :: code
         integer(c_int64_t), intent(out) :: elsize, count
         type(c_ptr), intent(out) :: addr
         integer(c_int) :: found
       end function c_recorded
    end interface
    recorded = c_recorded(int(id, c_int), code, elsize, count, addr) /= 0
  end function recorded

  ! The C side must have received the expected type code, element size,
  ! element count and the address of the first element.
  subroutine check_record(id, want_code, want_size, want_count, want_addr, nbad)
    integer, intent(in) :: id
    integer(c_int32_t), intent(in) :: want_code
    integer(int64), intent(in) :: want_size, want_count
    type(c_ptr), intent(in) :: want_addr
    integer, intent(inout) :: nbad
    integer(c_int32_t) :: code
    integer(c_int64_t) :: elsize, count
    type(c_ptr) :: addr
    if (.not. recorded(id, code, elsize, count, addr)) then
       write (error_unit, '(a,i0,a,i0)') 'rank ', my_rank, ': crpm_protect never reached C for id ', id
       nbad = nbad + 1
    else if (code /= want_code .or. elsize /= want_size .or. count /= want_count .or. &
         .not. same_address(addr, want_addr)) then
       write (error_unit, '(a,i0,a,i0,a,3(1x,i0),a,3(1x,i0),a,l1)') 'rank ', my_rank, ': id ', id, &
            ': C got code/size/count', code, elsize, count, ', expected', want_code, want_size, &
            want_count, '; same address: ', same_address(addr, want_addr)
       nbad = nbad + 1
    end if
  end subroutine check_record

  logical function same_address(a, b)
    type(c_ptr), intent(in) :: a, b
    same_address = transfer(a, 0_c_intptr_t) == transfer(b, 0_c_intptr_t)
  end function same_address

  subroutine expect_noncontig(ierr, id, nbad)
    integer, intent(in) :: ierr, id
    integer, intent(inout) :: nbad
    integer(c_int32_t) :: code
    integer(c_int64_t) :: elsize, count
    type(c_ptr) :: addr
    if (recorded(id, code, elsize, count, addr)) then
       write (error_unit, '(a,i0,a,i0)') 'rank ', my_rank, &
            ': a non-contiguous section reached the C library for id ', id
       nbad = nbad + 1
    end if
    if (ierr /= CRPM_ERR_INVAL) then
       write (error_unit, '(a,i0,a,i0,a,i0)') 'rank ', my_rank, &
            ': non-contiguous section accepted for id ', id, ', ierr=', ierr
       nbad = nbad + 1
    else if (index(crpm_last_error(), 'not contiguous') == 0) then
       write (error_unit, '(a,a)') 'unexpected message for a strided section: ', crpm_last_error()
       nbad = nbad + 1
    end if
  end subroutine expect_noncontig
  ! crpm_protect_device hands the C API the address, count, record size and
  ! mode it was given; host memory is refused by the library (INVAL, or
  ! DEVICE / NOTSUP without a GPU or CUDA), never protected.  Returns the number of problems.
  integer function device_problems() result(bad)
    interface
       function c_mode(id) bind(C, name='crpm_test_recorded_mode') result(m)
         import :: c_int
         integer(c_int), value :: id
         integer(c_int) :: m
       end function c_mode
    end interface
    real(real64), target, save :: h(5)
    integer(c_int32_t) :: code
    integer(c_int64_t) :: elsize, count
    type(c_ptr) :: addr
    integer :: ierr
    character(len=:), allocatable :: msg
    bad = 0
    call crpm_protect_device(55555, c_loc(h), 5_int64, 0, CRPM_DEVICE_FULL, ierr)
    msg = crpm_last_error()
    call check(ierr == CRPM_ERR_INVAL .and. index(msg, 'elem_bytes') > 0, 'elem_bytes 0 refused by the bindings', ierr)
    call check(c_mode(55555) == -2, 'elem_bytes 0 never reaches the library', c_mode(55555))
    call crpm_protect_device(55555, c_loc(h), 5_int64, 8, CRPM_DEVICE_FINGERPRINT, ierr)
    msg = crpm_last_error()
    call check((ierr == CRPM_ERR_INVAL .or. ierr == CRPM_ERR_NOTSUP .or. ierr == CRPM_ERR_DEVICE) &
         .and. len(msg) > 0, &
         'host memory refused as device memory, with a message', ierr)
    call check(recorded(55555, code, elsize, count, addr), 'crpm_protect_device reached the C API', 0)
    call check(elsize == 8 .and. count == 5 .and. code >= CRPM_TYPE_USER, &
         'record size, count and a user type code', int(elsize))
    call check(c_associated(addr, c_loc(h)), 'the address', 0)
    call check(c_mode(55555) == CRPM_DEVICE_FINGERPRINT, 'the mode', c_mode(55555))
  contains
    subroutine check(ok, what, val)
      logical, intent(in) :: ok
      character(len=*), intent(in) :: what
      integer, intent(in) :: val
      if (ok) return
      write (error_unit, '(a,i0,a,a,a,i0,a)') 'rank ', my_rank, ': crpm_protect_device: ', what, &
           ' (value ', val, ')'
      bad = bad + 1
    end subroutine check
  end function device_problems
end module ptest_common

module ptest_kinds
  use ptest_common
  implicit none
contains
#define SUB run_int8
#define CODE CRPM_TC_INT8
#define TYPE integer(int8)
#define VAL(v) (int(mod(v, 101) - 50, int8))
#define OTHER(v) (int(mod(v, 101) - 49, int8))
#define SAME(x, y) ((x) == (y))
#include "protect_kind.inc"
#undef SUB
#undef CODE
#undef TYPE
#undef VAL
#undef OTHER

#define SUB run_int16
#define CODE CRPM_TC_INT16
#define TYPE integer(int16)
#define VAL(v) (int(mod(v, 30011) - 15000, int16))
#define OTHER(v) (int(mod(v, 30011) - 14999, int16))
#include "protect_kind.inc"
#undef SUB
#undef CODE
#undef TYPE
#undef VAL
#undef OTHER

#define SUB run_int32
#define CODE CRPM_TC_INT32
#define TYPE integer(int32)
#define VAL(v) (int(v, int32) * 1021 - 7)
#define OTHER(v) (int(v, int32) * 1021 - 6)
#include "protect_kind.inc"
#undef SUB
#undef CODE
#undef TYPE
#undef VAL
#undef OTHER

#define SUB run_int64
#define CODE CRPM_TC_INT64
#define TYPE integer(int64)
#define VAL(v) (int(v, int64) * 1000000007_int64 + 3)
#define OTHER(v) (int(v, int64) * 1000000007_int64 + 4)
#include "protect_kind.inc"
#undef SUB
#undef CODE
#undef TYPE
#undef VAL
#undef OTHER

#define SUB run_real32
#define CODE CRPM_TC_FLOAT
#define TYPE real(real32)
#define VAL(v) (real(v, real32) / 8)
#define OTHER(v) (-real(v, real32) / 8 - 1)
#include "protect_kind.inc"
#undef SUB
#undef CODE
#undef TYPE
#undef VAL
#undef OTHER

#define SUB run_real64
#define CODE CRPM_TC_DOUBLE
#define TYPE real(real64)
#define VAL(v) (real(v, real64) / 3)
#define OTHER(v) (-real(v, real64) / 3 - 1)
#include "protect_kind.inc"
#undef SUB
#undef CODE
#undef TYPE
#undef VAL
#undef OTHER

#define SUB run_complex32
#define CODE CRPM_TC_COMPLEX_FLOAT
#define TYPE complex(real32)
#define VAL(v) (cmplx(real(v, real32) / 4, -real(v, real32) / 16, real32))
#define OTHER(v) (cmplx(-1, v, real32))
#include "protect_kind.inc"
#undef SUB
#undef CODE
#undef TYPE
#undef VAL
#undef OTHER

#define SUB run_complex64
#define CODE CRPM_TC_COMPLEX_DOUBLE
#define TYPE complex(real64)
#define VAL(v) (cmplx(real(v, real64) / 3, -real(v, real64) / 7, real64))
#define OTHER(v) (cmplx(-1, v, real64))
#include "protect_kind.inc"
#undef SUB
#undef CODE
#undef TYPE
#undef VAL
#undef OTHER
#undef SAME

#define SUB run_logical
#define CODE CRPM_TC_LOGICAL
#define TYPE logical
#define VAL(v) (mod(v, 3) == 0)
#define OTHER(v) (mod(v, 3) /= 0)
#define SAME(x, y) ((x) .eqv. (y))
#include "protect_kind.inc"
#undef SUB
#undef CODE
#undef TYPE
#undef VAL
#undef OTHER

#define SUB run_bool
#define CODE CRPM_TC_LOGICAL
#define TYPE logical(c_bool)
#define VAL(v) (logical(mod(v, 3) == 0, c_bool))
#define OTHER(v) (logical(mod(v, 3) /= 0, c_bool))
#include "protect_kind.inc"
#undef SUB
#undef CODE
#undef TYPE
#undef VAL
#undef OTHER
#undef SAME

  subroutine run_all_kinds(mode, nbad)
    integer, intent(in) :: mode
    integer, intent(inout) :: nbad
    call run_int8(mode, 100, nbad)
    call run_int16(mode, 110, nbad)
    call run_int32(mode, 120, nbad)
    call run_int64(mode, 130, nbad)
    call run_real32(mode, 140, nbad)
    call run_real64(mode, 150, nbad)
    call run_complex32(mode, 160, nbad)
    call run_complex64(mode, 170, nbad)
    call run_logical(mode, 180, nbad)
    call run_bool(mode, 190, nbad)
  end subroutine run_all_kinds
end module ptest_kinds

! Derived types and a string (crpm_protect_bytes), a zero-sized array, and
! an array protected again after it was reallocated with another size.
module ptest_derived
  use ptest_common
  implicit none
  type :: particle
     real(real64) :: x(3)
     integer(int32) :: id
     logical :: alive
     character(len=5) :: tag
  end type particle
  type, bind(C) :: cpair
     integer(c_int) :: i
     real(c_double) :: d
  end type cpair
  type(particle), allocatable, target, save :: parts(:)
  type(cpair), target, save :: pair
  integer(int64), allocatable, target, save :: grow(:)
  real(real64), allocatable, target, save :: empty(:)
  character(len=11), target, save :: label
  integer, parameter :: NPARTS = 6, NGROW = 9
contains
  type(particle) function make_particle(v) result(p)
    integer, intent(in) :: v
    p%x = [real(v, real64) / 3, -real(v, real64), real(v, real64) * 1.5_real64]
    p%id = v
    p%alive = mod(v, 2) == 0
    write (p%tag, '(i5.5)') mod(v, 100000)
  end function make_particle

  logical function same_particle(a, b)
    type(particle), intent(in) :: a, b
    same_particle = all(a%x == b%x) .and. a%id == b%id .and. (a%alive .eqv. b%alive) &
         .and. a%tag == b%tag
  end function same_particle

  ! grow_size lets the mismatch phase protect a wrongly sized array.
  subroutine run_derived(mode, grow_size, nbad)
    integer, intent(in) :: mode, grow_size
    integer, intent(inout) :: nbad
    integer :: i, ierr, v0

    v0 = seed(900)
    select case (mode)
    case (MODE_WRITE, MODE_READ)
       allocate (parts(NPARTS))
       if (mode == MODE_WRITE) then
          parts = [(make_particle(v0 + i), i = 1, NPARTS)]
          pair = cpair(int(v0, c_int), real(v0, c_double) / 7)
          ! First protected at a smaller size, then reallocated: only the
          ! second registration may count.
          allocate (grow(3))
          grow = -1
          call protect_ok(902, grow)
          deallocate (grow)
          allocate (grow(grow_size))
          grow = [(int(v0, int64) * 77 + i, i = 1, grow_size)]
          write (label, '(a,i6)') 'rank', my_rank
       else
          parts = [(make_particle(-i), i = 1, NPARTS)]
          pair = cpair(-1_c_int, -1.0_c_double)
          allocate (grow(grow_size))
          grow = 0
          label = ''
       end if
       allocate (empty(0))
       call crpm_protect_bytes(900, parts, ierr)
       call check_ok(900, ierr)
       call check_record(900, CRPM_TYPE_USER, int(storage_size(parts) / 8, int64), &
            int(NPARTS, int64), c_loc(parts), nbad)
       call crpm_protect_bytes(7901, pair, ierr)
       call check_ok(7901, ierr)
       call check_record(7901, CRPM_TYPE_USER, int(c_sizeof(pair), int64), 1_int64, c_loc(pair), nbad)
       call protect_ok(902, grow)
       call check_record(902, CRPM_TC_INT64, 8_int64, int(grow_size, int64), c_loc(grow), nbad)
       ! A zero-sized array has no address to take; it is passed as NULL.
       call crpm_protect(904, empty, ierr)
       call check_ok(904, ierr)
       call check_record(904, CRPM_TC_DOUBLE, 8_int64, 0_int64, c_null_ptr, nbad)
       call crpm_protect_bytes(905, label, ierr)
       call check_ok(905, ierr)
       call check_record(905, CRPM_TYPE_USER, int(len(label), int64), 1_int64, c_loc(label), nbad)
       if (mode == MODE_WRITE) then
          expected_bytes = expected_bytes + NPARTS * (storage_size(parts) / 8) &
               + c_sizeof(pair) + 8 * grow_size + len(label)
          call crpm_protect_bytes(903, parts(1:NPARTS:2), ierr)
          call expect_noncontig(ierr, 903, nbad)
       end if
    case (MODE_CHECK)
       do i = 1, NPARTS
          if (.not. same_particle(parts(i), make_particle(v0 + i))) call bad(900)
       end do
       if (pair%i /= v0 .or. pair%d /= real(v0, c_double) / 7) call bad(7901)
       block
         character(len=11) :: want
         write (want, '(a,i6)') 'rank', my_rank
         if (label /= want) call bad(905)
       end block
       if (size(grow) /= NGROW) then
          call bad(902)
       else if (any(grow /= [(int(v0, int64) * 77 + i, i = 1, NGROW)])) then
          call bad(902)
       end if
    end select
  contains
    subroutine protect_ok(id, x)
      integer, intent(in) :: id
      integer(int64), intent(inout), target :: x(:)
      call crpm_protect(id, x, ierr)
      call check_ok(id, ierr)
    end subroutine protect_ok
    subroutine check_ok(id, rc)
      integer, intent(in) :: id, rc
      if (rc /= CRPM_SUCCESS) then
         call report_error('crpm_protect', id, rc)
         nbad = nbad + 1
      end if
    end subroutine check_ok
    subroutine bad(id)
      integer, intent(in) :: id
      write (error_unit, '(a,i0,a,i0)') 'rank ', my_rank, ': wrong values recovered for id ', id
      nbad = nbad + 1
    end subroutine bad
  end subroutine run_derived
end module ptest_derived

program test_protect
  use ptest_kinds
  use ptest_derived
  implicit none
  character(len=:), allocatable :: mode, cfg
  integer :: ierr, nbad, total_bad, st, nprocs, l
  logical :: done
  type(crpm_stats_t) :: last, total

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, my_rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  nbad = 0
  call get_command_argument(1, length=l)
  allocate (character(len=l) :: mode)
  call get_command_argument(1, mode)
  call get_command_argument(2, length=l)
  allocate (character(len=l) :: cfg)
  call get_command_argument(2, cfg)

  select case (mode)
  case ('offline')
     call offline_checks()
  case ('write')
     call start(CRPM_STATUS_FRESH)
     call run_all_kinds(MODE_WRITE, nbad)
     call run_derived(MODE_WRITE, NGROW, nbad)
     nbad = nbad + device_problems()
     ! a team of one: the plain checkpoint through the team binding
     call crpm_team_begin(0, ierr)
     call require(ierr == CRPM_ERR_INVAL, 'crpm_team_begin(0) refused', ierr)
     call crpm_team_begin(1, ierr)
     call require(ierr == CRPM_SUCCESS, 'crpm_team_begin(1)', ierr)
     call crpm_checkpoint_team(42, CRPM_L1, ierr)
     call require(ierr == CRPM_SUCCESS, 'crpm_checkpoint_team', ierr)
     call crpm_team_end(ierr)
     call require(ierr == CRPM_SUCCESS, 'crpm_team_end', ierr)
     ! nothing runs in the background (level 1, async = 0)
     done = .false.
     call crpm_test(done, ierr)
     call require(ierr == CRPM_SUCCESS .and. done, 'crpm_test', ierr)
     call crpm_wait(ierr)
     call require(ierr == CRPM_SUCCESS, 'crpm_wait', ierr)
     call crpm_get_stats(last, total, ierr)
     call require(ierr == CRPM_SUCCESS, 'crpm_get_stats', ierr)
     call require(total%checkpoints == 1, 'one checkpoint counted', int(total%checkpoints))
     call require(last%protected_bytes == expected_bytes, 'protected bytes', &
          int(last%protected_bytes))
     call finish()
  case ('mismatch')
     call start(CRPM_STATUS_L1)
     call run_all_kinds(MODE_READ, nbad)
     ! Only rank 0 protects a wrong size: it must see the mismatch, the
     ! others must be told that a peer failed.
     call run_derived(MODE_READ, merge(NGROW + 1, NGROW, my_rank == 0), nbad)
     call crpm_recover(ierr)
     if (my_rank == 0) then
        call require(ierr == CRPM_ERR_MISMATCH, 'recover with a wrong size', ierr)
     else
        call require(ierr == CRPM_ERR_REMOTE, 'recover with a wrong size elsewhere', ierr)
     end if
     call require(len(crpm_last_error()) > 0, 'message after failed recovery', ierr)
     call finish()
  case ('verify')
     call start(CRPM_STATUS_L1)
     call run_all_kinds(MODE_READ, nbad)
     call run_derived(MODE_READ, NGROW, nbad)
     call crpm_snapshot(ierr)
     call require(ierr == CRPM_SNAP_RECOVERED, 'crpm_snapshot recovers', ierr)
     call crpm_should_exit(ierr)
     call require(ierr == 0, 'crpm_should_exit: no reason to stop', ierr)
     call run_all_kinds(MODE_CHECK, nbad)
     call run_derived(MODE_CHECK, NGROW, nbad)
     call finish()
  case default
     call require(.false., 'known mode (offline|write|mismatch|verify)', 0)
  end select

  call MPI_Allreduce(nbad, total_bad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (my_rank == 0) then
     if (total_bad == 0) then
        write (*, '(a,a,a,i0,a)') 'test_protect ', mode, ': OK (', nprocs, ' ranks)'
     else
        write (*, '(a,a,a,i0,a)') 'test_protect ', mode, ': FAILED (', total_bad, ' problems)'
     end if
  end if
  call MPI_Finalize(ierr)
  if (total_bad /= 0) stop 1

contains

  subroutine start(want_status)
    integer, intent(in) :: want_status
    call crpm_init(cfg, MPI_COMM_WORLD, ierr)
    call require(ierr == CRPM_SUCCESS, 'crpm_init', ierr)
    if (ierr /= CRPM_SUCCESS) call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
    call crpm_status(st)
    call require(st == want_status, 'crpm_status', st)
  end subroutine start

  subroutine finish()
    call crpm_finalize(ierr)
    call require(ierr == CRPM_SUCCESS, 'crpm_finalize', ierr)
  end subroutine finish

  subroutine require(ok, what, val)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer, intent(in) :: val
    if (ok) return
    if (val < 0) then
       write (error_unit, '(a,i0,a,a,a,i0,a,a,a,a)') 'rank ', my_rank, ': check failed: ', &
            what, ' (', val, ' ', crpm_strerror(val), '): ', crpm_last_error()
    else
       write (error_unit, '(a,i0,a,a,a,i0,a)') 'rank ', my_rank, ': check failed: ', what, &
            ' (value ', val, ')'
    end if
    nbad = nbad + 1
  end subroutine require

  ! Without crpm_init: the module constants equal the C ones, the library
  ! refuses to protect, and the bindings refuse strided sections themselves.
  subroutine offline_checks()
    interface
       function c_constants(vals, n) bind(C, name='crpm_test_c_constants') result(count)
         import :: c_int32_t, c_int
         integer(c_int32_t), intent(out) :: vals(*)
         integer(c_int), value :: n
         integer(c_int) :: count
       end function c_constants
    end interface
    integer, parameter :: NC = 66
    integer(c_int32_t) :: cvals(NC + 1)
    integer :: fvals(NC), i, code, vmaj, vmin, vpat
    real(real64), target :: x(10)
    character(len=:), allocatable :: msg

    fvals = [CRPM_SUCCESS, CRPM_ERR_INVAL, CRPM_ERR_STATE, CRPM_ERR_NOMEM, CRPM_ERR_IO, &
         CRPM_ERR_CONFIG, CRPM_ERR_CORRUPT, CRPM_ERR_VERSION, CRPM_ERR_FORMAT, &
         CRPM_ERR_TRUNCATED, CRPM_ERR_GEOMETRY, CRPM_ERR_IDENTITY, CRPM_ERR_MISMATCH, &
         CRPM_ERR_NOCKPT, CRPM_ERR_EPOCH, CRPM_ERR_MPI, CRPM_ERR_REMOTE, CRPM_ERR_MISSING, &
         CRPM_ERR_NRANKS, CRPM_ERR_HDF5, CRPM_ERR_NOTSUP, CRPM_ERR_RANGE, CRPM_ERR_BUSY, &
         CRPM_ERR_DEVICE, CRPM_DEVICE_DEFAULT, CRPM_DEVICE_DIFF, CRPM_DEVICE_FINGERPRINT, &
         CRPM_DEVICE_FULL, CRPM_L1, CRPM_L2, CRPM_L3, CRPM_L4, CRPM_STATUS_FRESH, CRPM_STATUS_L1, CRPM_STATUS_L4, &
         CRPM_STATUS_L2, CRPM_STATUS_L3, CRPM_STATUS_RESHAPED, CRPM_MAX_DIMS, &
         CRPM_SNAP_NONE, CRPM_SNAP_RECOVERED, CRPM_SNAP_CHECKPOINTED, CRPM_SNAP_EXIT, &
         int(CRPM_TC_CHAR), int(CRPM_TC_SHORT), int(CRPM_TC_INT), int(CRPM_TC_LONG), &
         int(CRPM_TC_LLONG), int(CRPM_TC_UINT), int(CRPM_TC_ULONG), int(CRPM_TC_FLOAT), &
         int(CRPM_TC_DOUBLE), int(CRPM_TC_LDOUBLE), int(CRPM_TC_BYTE), int(CRPM_TC_INT8), &
         int(CRPM_TC_INT16), int(CRPM_TC_INT32), int(CRPM_TC_INT64), &
         int(CRPM_TC_COMPLEX_FLOAT), int(CRPM_TC_COMPLEX_DOUBLE), int(CRPM_TC_LOGICAL), &
         int(CRPM_TYPE_USER), CRPM_VERSION_MAJOR, CRPM_VERSION_MINOR, CRPM_VERSION_PATCH, &
         int(c_sizeof(crpm_stats_t(0, 0, 0, 0, 0, 0, 0.0_c_double, 0)))]
     call require(c_constants(cvals, NC + 1) == NC, 'number of C constants', NC)
     do i = 1, NC
        if (fvals(i) /= cvals(i)) then
           write (error_unit, '(a,i0,a,i0,a,i0)') 'constant #', i, ': Fortran ', fvals(i), &
                ' C ', cvals(i)
           nbad = nbad + 1
        end if
     end do
     call crpm_version(vmaj, vmin, vpat)
     call require(vmaj == CRPM_VERSION_MAJOR .and. vmin == CRPM_VERSION_MINOR .and. vpat == CRPM_VERSION_PATCH, &
          'crpm_version equals CRPM_VERSION_*', vmaj * 10000 + vmin * 100 + vpat)
     do code = CRPM_ERR_DEVICE, CRPM_SUCCESS
        call require(len_trim(crpm_strerror(code)) > 0, 'crpm_strerror text', code)
     end do

     call crpm_protect(1, x(1:10:3), ierr)
     call require(ierr == CRPM_ERR_INVAL, 'strided section refused', ierr)
     msg = crpm_last_error()
     call require(index(msg, 'not contiguous') > 0, 'message names the problem', ierr)
     ! A later library failure must replace the bindings' message.
     call crpm_protect(1, x, ierr)
     call require(ierr < 0, 'crpm_protect before crpm_init fails', ierr)
     call require(crpm_last_error() /= msg, 'library message replaces bindings message', ierr)
     call crpm_checkpoint(1, CRPM_L1, ierr)
     call require(ierr < 0, 'crpm_checkpoint before crpm_init fails', ierr)
  end subroutine offline_checks
end program test_protect
