!> Fortran bindings of libcrpm (module crpm).  The semantics are those of the
!> C API in include/crpm.h; every routine reports through a trailing integer
!> (ierr / status) that holds CRPM_SUCCESS or a negative CRPM_ERR_* code.
!>
!>   use mpi
!>   use crpm
!>   integer, target :: step
!>   real(8), allocatable :: u(:,:)
!>   call crpm_init('crpm.ini', MPI_COMM_WORLD, ierr)
!>   call crpm_protect(0, step, ierr)
!>   call crpm_protect(1, u, ierr)
!>   call crpm_status(st)
!>   if (st > 0) call crpm_recover(ierr)
!>   ... call crpm_checkpoint(step, CRPM_L1, ierr) ...
!>   call crpm_finalize(ierr)
!>
!> Rules for protected data:
!>  * Give protected variables the TARGET or ALLOCATABLE attribute.  The
!>    library reads them in crpm_checkpoint and overwrites them in
!>    crpm_recover / crpm_snapshot through the address taken by crpm_protect;
!>    without TARGET the compiler may keep a stale copy in registers or move
!>    stores across those calls.
!>  * The address is captured when crpm_protect is called.  After DEALLOCATE
!>    + ALLOCATE, MOVE_ALLOC or reallocation on assignment (a = b with a new
!>    shape) call crpm_protect again with the same id.
!>  * Arrays must be contiguous.  Strided sections such as a(1:n:2) are
!>    rejected with CRPM_ERR_INVAL: the library keeps the address, so a
!>    temporary copy would be silently lost.
!>  * crpm_protect accepts integer(int8/16/32/64), real(real32/64),
!>    complex(real32/64), logical (default kind and c_bool) of any rank,
!>    scalars included.  Derived types (and anything else) go through
!>    crpm_protect_bytes, which saves each element as an opaque record of its
!>    storage size.
!> Persistent heap (docs/heap.md; needs heap_size in the configuration):
!>   type(c_ptr) :: p
!>   real(8), pointer :: x(:)
!>   p = crpm_malloc(n * 8_int64)        ! NULL (c_associated false) on failure
!>   call c_f_pointer(p, x, [n])
!>   call crpm_set_root(0, p, ierr)      ! after crpm_recover: p = crpm_get_root(0)
!>   call crpm_free(p)
!>  Store in the heap only data and pointers (c_ptr) into the heap: Fortran
!>  POINTER and ALLOCATABLE components hold descriptors the compiler may lay
!>  out differently in another build.
!>  * crpm_init takes a communicator handle of `use mpi` (an INTEGER); with
!>    mpi_f08 pass comm%MPI_VAL.  Trailing blanks of the file name are
!>    ignored; a blank name is passed to C as NULL (no configuration file).
module crpm
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int8, int16, int32, int64, real32, real64
  implicit none
  private

  ! ---- constants mirrored from crpm.h (tests/fortran checks them against C)
  integer, parameter, public :: CRPM_VERSION_MAJOR = 2
  integer, parameter, public :: CRPM_VERSION_MINOR = 0
  integer, parameter, public :: CRPM_VERSION_PATCH = 0

  integer, parameter, public :: CRPM_SUCCESS       = 0
  integer, parameter, public :: CRPM_ERR_INVAL     = -1
  integer, parameter, public :: CRPM_ERR_STATE     = -2
  integer, parameter, public :: CRPM_ERR_NOMEM     = -3
  integer, parameter, public :: CRPM_ERR_IO        = -4
  integer, parameter, public :: CRPM_ERR_CONFIG    = -5
  integer, parameter, public :: CRPM_ERR_CORRUPT   = -6
  integer, parameter, public :: CRPM_ERR_VERSION   = -7
  integer, parameter, public :: CRPM_ERR_FORMAT    = -8
  integer, parameter, public :: CRPM_ERR_TRUNCATED = -9
  integer, parameter, public :: CRPM_ERR_GEOMETRY  = -10
  integer, parameter, public :: CRPM_ERR_IDENTITY  = -11
  integer, parameter, public :: CRPM_ERR_MISMATCH  = -12
  integer, parameter, public :: CRPM_ERR_NOCKPT    = -13
  integer, parameter, public :: CRPM_ERR_EPOCH     = -14
  integer, parameter, public :: CRPM_ERR_MPI       = -15
  integer, parameter, public :: CRPM_ERR_REMOTE    = -16
  integer, parameter, public :: CRPM_ERR_MISSING   = -17
  integer, parameter, public :: CRPM_ERR_NRANKS    = -18
  integer, parameter, public :: CRPM_ERR_HDF5      = -19
  integer, parameter, public :: CRPM_ERR_NOTSUP    = -20
  integer, parameter, public :: CRPM_ERR_RANGE     = -21
  integer, parameter, public :: CRPM_ERR_BUSY      = -22
  integer, parameter, public :: CRPM_ERR_DEVICE    = -23

  !> Modes of crpm_protect_device (docs/gpu.md).
  integer, parameter, public :: CRPM_DEVICE_DEFAULT = 0, CRPM_DEVICE_DIFF = 1, &
       CRPM_DEVICE_FINGERPRINT = 2, CRPM_DEVICE_FULL = 3

  integer, parameter, public :: CRPM_L1 = 1
  integer, parameter, public :: CRPM_L2 = 2
  integer, parameter, public :: CRPM_L3 = 3
  integer, parameter, public :: CRPM_L4 = 4

  integer, parameter, public :: CRPM_STATUS_FRESH = 0
  integer, parameter, public :: CRPM_STATUS_L1    = 1
  integer, parameter, public :: CRPM_STATUS_L2    = 2
  integer, parameter, public :: CRPM_STATUS_L3    = 3
  integer, parameter, public :: CRPM_STATUS_L4    = 4
  integer, parameter, public :: CRPM_STATUS_RESHAPED = 16
  integer, parameter, public :: CRPM_MAX_DIMS = 32

  integer, parameter, public :: CRPM_SNAP_NONE         = 0
  integer, parameter, public :: CRPM_SNAP_RECOVERED    = 1
  integer, parameter, public :: CRPM_SNAP_CHECKPOINTED = 2
  integer, parameter, public :: CRPM_SNAP_EXIT         = 3

  integer(c_int32_t), parameter, public :: CRPM_TC_CHAR = 1, CRPM_TC_SHORT = 2, &
       CRPM_TC_INT = 3, CRPM_TC_LONG = 4, CRPM_TC_LLONG = 5, CRPM_TC_UINT = 6, &
       CRPM_TC_ULONG = 7, CRPM_TC_FLOAT = 8, CRPM_TC_DOUBLE = 9, CRPM_TC_LDOUBLE = 10, &
       CRPM_TC_BYTE = 11, CRPM_TC_INT8 = 12, CRPM_TC_INT16 = 13, CRPM_TC_INT32 = 14, &
       CRPM_TC_INT64 = 15, CRPM_TC_COMPLEX_FLOAT = 16, CRPM_TC_COMPLEX_DOUBLE = 17, &
       CRPM_TC_LOGICAL = 18, CRPM_TYPE_USER = 100

  !> Element type as the C library sees it (crpm_type_t).
  type, bind(C), public :: crpm_type_t
     integer(c_int32_t) :: code
     integer(c_int32_t) :: reserved
     integer(c_int64_t) :: size
  end type crpm_type_t

  !> Checkpoint statistics (crpm_stats_t); the counters are unsigned in C.
  type, bind(C), public :: crpm_stats_t
     integer(c_int64_t) :: checkpoints
     integer(c_int64_t) :: protected_bytes
     integer(c_int64_t) :: bytes_compared
     integer(c_int64_t) :: bytes_written
     integer(c_int64_t) :: blocks_written
     integer(c_int64_t) :: drains
     real(c_double)     :: seconds
     integer(c_int64_t) :: bytes_sent
  end type crpm_stats_t

  public :: crpm_init, crpm_protect, crpm_protect_bytes, crpm_protect_device, crpm_status, crpm_recover, &
       crpm_checkpoint, crpm_snapshot, crpm_should_exit, crpm_finalize, crpm_wait, crpm_test, crpm_strerror, &
       crpm_last_error, crpm_get_stats, crpm_define_global, crpm_add_subset, crpm_protect_replicated, &
       crpm_global_dims, crpm_malloc, crpm_calloc, crpm_realloc, crpm_free, crpm_set_root, &
       crpm_get_root, crpm_heap_used, crpm_checkpoint_team, crpm_recover_team, crpm_team_begin, crpm_team_end, &
       crpm_version

  !> p = crpm_malloc(bytes): bytes of any integer kind; c_null_ptr on failure
  !> (crpm_last_error says why).
  interface crpm_malloc
     module procedure malloc_i4, malloc_i8
  end interface crpm_malloc

  !> crpm_protect(id, array, ierr): any intrinsic kind listed above, any rank.
  interface crpm_protect
     module procedure protect_i1, protect_i2, protect_i4, protect_i8, &
          protect_r4, protect_r8, protect_c4, protect_c8, protect_l, protect_lc
  end interface crpm_protect

  !> Global datasets (restart on another number of ranks, docs/reshape.md).
  !> Dimensions, offsets and counts are in Fortran order (the first index
  !> varies fastest) and offsets count from 0, as in HDF5's Fortran API; the
  !> library stores them in C order, so a level-4 file shows the dataset
  !> with its dimensions reversed, as HDF5 shows any Fortran array.
  !>   call crpm_define_global(gid, dims, mold, ierr [, name])  mold: a variable of the element type
  !>   call crpm_add_subset(gid, id, offset, count, ierr)
  !>   call crpm_protect_replicated(id, array, ierr)
  !>   call crpm_global_dims(gid, dims, ndims)                   ndims < 0: an error code
  interface crpm_define_global
     module procedure define_global_i4, define_global_i8
  end interface crpm_define_global
  interface crpm_add_subset
     module procedure add_subset_i4, add_subset_i8
  end interface crpm_add_subset

  interface
     function c_define_global(gid, nd, dims, mold, name) bind(C, name='crpm_f_define_global') result(rc)
       import :: c_int, c_int64_t, c_char
       integer(c_int), value :: gid, nd
       integer(c_int64_t), intent(in) :: dims(*)
       type(*), dimension(..), intent(in) :: mold
       character(kind=c_char), dimension(*), intent(in) :: name
       integer(c_int) :: rc
     end function c_define_global

     function c_add_subset(gid, id, off, cnt) bind(C, name='crpm_add_subset') result(rc)
       import :: c_int, c_int64_t
       integer(c_int), value :: gid, id
       integer(c_int64_t), intent(in) :: off(*), cnt(*)
       integer(c_int) :: rc
     end function c_add_subset

     function c_protect_replicated(id, a) bind(C, name='crpm_f_protect_replicated') result(rc)
       import :: c_int
       integer(c_int), value :: id
       type(*), dimension(..), intent(in) :: a
       integer(c_int) :: rc
     end function c_protect_replicated

     function c_global_dims(gid, dims) bind(C, name='crpm_global_dims') result(rc)
       import :: c_int, c_int64_t
       integer(c_int), value :: gid
       integer(c_int64_t), intent(out) :: dims(*)
       integer(c_int) :: rc
     end function c_global_dims

     function c_init(config, comm) bind(C, name='crpm_f_init') result(rc)
       import :: c_char, c_int
       character(kind=c_char), dimension(*), intent(in) :: config
       integer(c_int), value :: comm
       integer(c_int) :: rc
     end function c_init

     function c_protect(id, ptr, count, type) bind(C, name='crpm_protect') result(rc)
       import :: c_int, c_ptr, c_int64_t, crpm_type_t
       integer(c_int), value :: id
       type(c_ptr), value :: ptr
       integer(c_int64_t), value :: count
       type(crpm_type_t), value :: type
       integer(c_int) :: rc
     end function c_protect

     function c_protect_device(id, ptr, count, type, mode) bind(C, name='crpm_protect_device') result(rc)
       import :: c_int, c_ptr, c_int64_t, crpm_type_t
       integer(c_int), value :: id
       type(c_ptr), value :: ptr
       integer(c_int64_t), value :: count
       type(crpm_type_t), value :: type
       integer(c_int), value :: mode
       integer(c_int) :: rc
     end function c_protect_device

     function c_init_type(type, size) bind(C, name='crpm_init_type') result(rc)
       import :: c_int, c_size_t, crpm_type_t
       type(crpm_type_t), intent(out) :: type
       integer(c_size_t), value :: size
       integer(c_int) :: rc
     end function c_init_type

     function c_elem_len(a) bind(C, name='crpm_f_elem_len') result(n)
       import :: c_size_t
       type(*), dimension(..), intent(in) :: a
       integer(c_size_t) :: n
     end function c_elem_len

     function c_status() bind(C, name='crpm_status') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_status

     function c_recover() bind(C, name='crpm_recover') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_recover

     function c_checkpoint(id, level) bind(C, name='crpm_checkpoint') result(rc)
       import :: c_int
       integer(c_int), value :: id, level
       integer(c_int) :: rc
     end function c_checkpoint

     function c_checkpoint_team(id, level) bind(C, name='crpm_checkpoint_team') result(rc)
       import :: c_int
       integer(c_int), value :: id, level
       integer(c_int) :: rc
     end function c_checkpoint_team

     function c_recover_team() bind(C, name='crpm_recover_team') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_recover_team

     function c_team_begin(n) bind(C, name='crpm_team_begin') result(rc)
       import :: c_int
       integer(c_int), value :: n
       integer(c_int) :: rc
     end function c_team_begin

     function c_team_end() bind(C, name='crpm_team_end') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_team_end

     function c_snapshot() bind(C, name='crpm_snapshot') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_snapshot

     function c_should_exit() bind(C, name='crpm_should_exit') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_should_exit

     function c_finalize() bind(C, name='crpm_finalize') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_finalize

     function c_wait() bind(C, name='crpm_wait') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_wait

     function c_test(done) bind(C, name='crpm_test') result(rc)
       import :: c_int
       integer(c_int), intent(out) :: done
       integer(c_int) :: rc
     end function c_test

     function c_strerror(code) bind(C, name='crpm_strerror') result(p)
       import :: c_int, c_ptr
       integer(c_int), value :: code
       type(c_ptr) :: p
     end function c_strerror

     function c_last_error() bind(C, name='crpm_last_error') result(p)
       import :: c_ptr
       type(c_ptr) :: p
     end function c_last_error

     ! The sized form: the library fills exactly this module's crpm_stats_t,
     ! whether it knows more fields or fewer.
     function c_get_stats(last, total, size) bind(C, name='crpm_get_stats_sized') result(rc)
       import :: c_int, c_size_t, crpm_stats_t
       type(crpm_stats_t), intent(out) :: last, total
       integer(c_size_t), value :: size
       integer(c_int) :: rc
     end function c_get_stats

     function c_version(major, minor, patch) bind(C, name='crpm_version') result(p)
       import :: c_int, c_ptr
       integer(c_int), intent(out) :: major, minor, patch
       type(c_ptr) :: p
     end function c_version

     function c_malloc(n) bind(C, name='crpm_malloc') result(p)
       import :: c_size_t, c_ptr
       integer(c_size_t), value :: n
       type(c_ptr) :: p
     end function c_malloc

     function c_calloc(n, size) bind(C, name='crpm_calloc') result(p)
       import :: c_size_t, c_ptr
       integer(c_size_t), value :: n, size
       type(c_ptr) :: p
     end function c_calloc

     function c_realloc(q, n) bind(C, name='crpm_realloc') result(p)
       import :: c_size_t, c_ptr
       type(c_ptr), value :: q
       integer(c_size_t), value :: n
       type(c_ptr) :: p
     end function c_realloc

     subroutine c_free(p) bind(C, name='crpm_free')
       import :: c_ptr
       type(c_ptr), value :: p
     end subroutine c_free

     function c_set_root(idx, p) bind(C, name='crpm_set_root') result(rc)
       import :: c_int, c_ptr
       integer(c_int), value :: idx
       type(c_ptr), value :: p
       integer(c_int) :: rc
     end function c_set_root

     function c_get_root(idx) bind(C, name='crpm_get_root') result(p)
       import :: c_int, c_ptr
       integer(c_int), value :: idx
       type(c_ptr) :: p
     end function c_get_root

     function c_heap_used() bind(C, name='crpm_heap_used') result(n)
       import :: c_size_t
       integer(c_size_t) :: n
     end function c_heap_used

     function c_strlen(s) bind(C, name='strlen') result(n)
       import :: c_ptr, c_size_t
       type(c_ptr), value :: s
       integer(c_size_t) :: n
     end function c_strlen
  end interface

  ! Errors detected by the bindings themselves never reach the C library, so
  ! their message is kept here; it is dropped as soon as the library reports
  ! a newer failure, so crpm_last_error always describes the latest one.
  character(len=:), allocatable, save :: binding_msg

contains

  subroutine crpm_init(config, comm, ierr)
    character(len=*), intent(in) :: config
    integer, intent(in) :: comm
    integer, intent(out) :: ierr
    ierr = track(c_init(trim(config)//c_null_char, int(comm, c_int)))
  end subroutine crpm_init

  subroutine crpm_status(status)
    integer, intent(out) :: status
    status = track(c_status())
  end subroutine crpm_status

  subroutine crpm_recover(ierr)
    integer, intent(out) :: ierr
    ierr = track(c_recover())
  end subroutine crpm_recover

  subroutine crpm_checkpoint(id, level, ierr)
    integer, intent(in) :: id, level
    integer, intent(out) :: ierr
    ierr = track(c_checkpoint(int(id, c_int), int(level, c_int)))
  end subroutine crpm_checkpoint

  !> Team calls (docs/threads.md): every thread of the OpenMP parallel
  !> region (or of the team named by crpm_team_begin) calls them; they
  !> leave the binding's own message alone (several threads return at once),
  !> crpm_last_error gives the library's.
  subroutine crpm_checkpoint_team(id, level, ierr)
    integer, intent(in) :: id, level
    integer, intent(out) :: ierr
    ierr = int(c_checkpoint_team(int(id, c_int), int(level, c_int)))
  end subroutine crpm_checkpoint_team

  subroutine crpm_recover_team(ierr)
    integer, intent(out) :: ierr
    ierr = int(c_recover_team())
  end subroutine crpm_recover_team

  subroutine crpm_team_begin(nthreads, ierr)
    integer, intent(in) :: nthreads
    integer, intent(out) :: ierr
    ierr = track(c_team_begin(int(nthreads, c_int)))
  end subroutine crpm_team_begin

  subroutine crpm_team_end(ierr)
    integer, intent(out) :: ierr
    ierr = track(c_team_end())
  end subroutine crpm_team_end

  !> ierr >= 0 is one of CRPM_SNAP_NONE / _RECOVERED / _CHECKPOINTED / _EXIT.
  subroutine crpm_snapshot(ierr)
    integer, intent(out) :: ierr
    ierr = track(c_snapshot())
  end subroutine crpm_snapshot

  !> Collective: ierr = 1 when the job must checkpoint and stop now (the same
  !> on every rank), 0 when it may go on, < 0 on error.
  subroutine crpm_should_exit(ierr)
    integer, intent(out) :: ierr
    ierr = track(c_should_exit())
  end subroutine crpm_should_exit

  subroutine crpm_finalize(ierr)
    integer, intent(out) :: ierr
    ierr = track(c_finalize())
  end subroutine crpm_finalize

  !> Collective: waits for the levels running in the background (async = 1).
  subroutine crpm_wait(ierr)
    integer, intent(out) :: ierr
    ierr = track(c_wait())
  end subroutine crpm_wait

  !> Local: done = .true. when no level runs in the background.
  subroutine crpm_test(done, ierr)
    logical, intent(out) :: done
    integer, intent(out) :: ierr
    integer(c_int) :: d
    ierr = track(c_test(d))
    done = d /= 0
  end subroutine crpm_test

  subroutine crpm_get_stats(last, total, ierr)
    type(crpm_stats_t), intent(out) :: last, total
    integer, intent(out) :: ierr
    ierr = track(c_get_stats(last, total, c_sizeof(last)))
  end subroutine crpm_get_stats

  !> The library's version at run time (the C header's CRPM_VERSION_*).
  subroutine crpm_version(major, minor, patch)
    integer, intent(out) :: major, minor, patch
    integer(c_int) :: ma, mi, pa
    type(c_ptr) :: p
    p = c_version(ma, mi, pa)
    major = ma
    minor = mi
    patch = pa
  end subroutine crpm_version

  function crpm_strerror(code) result(msg)
    integer, intent(in) :: code
    character(len=:), allocatable :: msg
    msg = from_c_string(c_strerror(int(code, c_int)))
  end function crpm_strerror

  function crpm_last_error() result(msg)
    character(len=:), allocatable :: msg
    if (allocated(binding_msg)) then
       msg = binding_msg
    else
       msg = from_c_string(c_last_error())
    end if
  end function crpm_last_error

  !> Protect any contiguous object (typically an array of a derived type) as
  !> records of its element storage size.  The record size is part of what is
  !> checked on recovery, so changing the type definition invalidates old
  !> checkpoints.
  subroutine crpm_protect_bytes(id, array, ierr)
    integer, intent(in) :: id
    type(*), dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    type(crpm_type_t) :: t
    ierr = track(c_init_type(t, c_elem_len(array)))
    if (ierr /= CRPM_SUCCESS) return
    call protect_common(id, array, t, ierr)
  end subroutine crpm_protect_bytes

  !> GPU memory: count records of elem_bytes each at the device address ptr
  !> (from cudaMalloc through iso_c_binding, or OpenACC's acc_deviceptr), in
  !> one of the CRPM_DEVICE_* modes.  Fortran sees no element type behind a
  !> device address, so the records are opaque as with crpm_protect_bytes:
  !> the record size is checked on recovery.
  subroutine crpm_protect_device(id, ptr, count, elem_bytes, mode, ierr)
    integer, intent(in) :: id, elem_bytes, mode
    type(c_ptr), intent(in) :: ptr
    integer(int64), intent(in) :: count
    integer, intent(out) :: ierr
    type(crpm_type_t) :: t
    if (elem_bytes <= 0) then
       binding_msg = 'crpm_protect_device: elem_bytes must be positive'
       ierr = CRPM_ERR_INVAL
       return
    end if
    ierr = track(c_init_type(t, int(elem_bytes, c_size_t)))
    if (ierr /= CRPM_SUCCESS) return
    ierr = track(c_protect_device(int(id, c_int), ptr, int(count, c_int64_t), t, int(mode, c_int)))
  end subroutine crpm_protect_device

  ! ---- global datasets ---------------------------------------------------------

  subroutine define_global_i8(gid, dims, mold, ierr, name)
    integer, intent(in) :: gid
    integer(int64), intent(in) :: dims(:)
    type(*), dimension(..), intent(in) :: mold
    integer, intent(out) :: ierr
    character(len=*), intent(in), optional :: name
    integer(c_int64_t) :: c(max(size(dims), 1))
    integer :: k, n
    n = size(dims)
    do k = 1, n
       c(k) = dims(n + 1 - k)
    end do
    if (present(name)) then
       ierr = track(c_define_global(int(gid, c_int), int(n, c_int), c, mold, trim(name)//c_null_char))
    else
       ierr = track(c_define_global(int(gid, c_int), int(n, c_int), c, mold, c_null_char))
    end if
  end subroutine define_global_i8

  subroutine define_global_i4(gid, dims, mold, ierr, name)
    integer, intent(in) :: gid
    integer(int32), intent(in) :: dims(:)
    type(*), dimension(..), intent(in) :: mold
    integer, intent(out) :: ierr
    character(len=*), intent(in), optional :: name
    call define_global_i8(gid, int(dims, int64), mold, ierr, name)
  end subroutine define_global_i4

  subroutine add_subset_i8(gid, id, offset, count, ierr)
    integer, intent(in) :: gid, id
    integer(int64), intent(in) :: offset(:), count(:)
    integer, intent(out) :: ierr
    integer(c_int64_t) :: o(max(size(offset), 1)), c(max(size(count), 1))
    integer :: k, n
    n = size(offset)
    if (size(count) /= n) then
       binding_msg = 'crpm_add_subset: offset and count have different sizes'
       ierr = CRPM_ERR_INVAL
       return
    end if
    do k = 1, n
       o(k) = offset(n + 1 - k)
       c(k) = count(n + 1 - k)
    end do
    ierr = track(c_add_subset(int(gid, c_int), int(id, c_int), o, c))
  end subroutine add_subset_i8

  subroutine add_subset_i4(gid, id, offset, count, ierr)
    integer, intent(in) :: gid, id
    integer(int32), intent(in) :: offset(:), count(:)
    integer, intent(out) :: ierr
    call add_subset_i8(gid, id, int(offset, int64), int(count, int64), ierr)
  end subroutine add_subset_i4

  !> Any intrinsic kind or derived type, any rank, contiguous (as crpm_protect).
  subroutine crpm_protect_replicated(id, array, ierr)
    integer, intent(in) :: id
    type(*), dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    if (.not. is_contiguous(array)) then
       binding_msg = 'crpm_protect_replicated: the array is not contiguous'
       ierr = CRPM_ERR_INVAL
       return
    end if
    ierr = track(c_protect_replicated(int(id, c_int), array))
  end subroutine crpm_protect_replicated

  !> dims(1:ndims) in Fortran order; dims must have room for them.
  subroutine crpm_global_dims(gid, dims, ndims)
    integer, intent(in) :: gid
    integer(int64), intent(out) :: dims(:)
    integer, intent(out) :: ndims
    integer(c_int64_t) :: c(CRPM_MAX_DIMS)
    integer :: k
    ndims = track(c_global_dims(int(gid, c_int), c))
    if (ndims < 0) return
    if (ndims > size(dims)) then
       binding_msg = 'crpm_global_dims: dims has room for fewer dimensions than the dataset has'
       ndims = CRPM_ERR_RANGE
       return
    end if
    do k = 1, ndims
       dims(k) = c(ndims + 1 - k)
    end do
  end subroutine crpm_global_dims

  ! ---- specific procedures of the generic crpm_protect --------------------

  subroutine protect_i1(id, array, ierr)
    integer, intent(in) :: id
    integer(int8), dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    call protect_common(id, array, typ(CRPM_TC_INT8, storage_size(array)), ierr)
  end subroutine protect_i1

  subroutine protect_i2(id, array, ierr)
    integer, intent(in) :: id
    integer(int16), dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    call protect_common(id, array, typ(CRPM_TC_INT16, storage_size(array)), ierr)
  end subroutine protect_i2

  subroutine protect_i4(id, array, ierr)
    integer, intent(in) :: id
    integer(int32), dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    call protect_common(id, array, typ(CRPM_TC_INT32, storage_size(array)), ierr)
  end subroutine protect_i4

  subroutine protect_i8(id, array, ierr)
    integer, intent(in) :: id
    integer(int64), dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    call protect_common(id, array, typ(CRPM_TC_INT64, storage_size(array)), ierr)
  end subroutine protect_i8

  subroutine protect_r4(id, array, ierr)
    integer, intent(in) :: id
    real(real32), dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    call protect_common(id, array, typ(CRPM_TC_FLOAT, storage_size(array)), ierr)
  end subroutine protect_r4

  subroutine protect_r8(id, array, ierr)
    integer, intent(in) :: id
    real(real64), dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    call protect_common(id, array, typ(CRPM_TC_DOUBLE, storage_size(array)), ierr)
  end subroutine protect_r8

  subroutine protect_c4(id, array, ierr)
    integer, intent(in) :: id
    complex(real32), dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    call protect_common(id, array, typ(CRPM_TC_COMPLEX_FLOAT, storage_size(array)), ierr)
  end subroutine protect_c4

  subroutine protect_c8(id, array, ierr)
    integer, intent(in) :: id
    complex(real64), dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    call protect_common(id, array, typ(CRPM_TC_COMPLEX_DOUBLE, storage_size(array)), ierr)
  end subroutine protect_c8

  subroutine protect_l(id, array, ierr)
    integer, intent(in) :: id
    logical, dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    call protect_common(id, array, typ(CRPM_TC_LOGICAL, storage_size(array)), ierr)
  end subroutine protect_l

  subroutine protect_lc(id, array, ierr)
    integer, intent(in) :: id
    logical(c_bool), dimension(..), target, intent(inout) :: array
    integer, intent(out) :: ierr
    call protect_common(id, array, typ(CRPM_TC_LOGICAL, storage_size(array)), ierr)
  end subroutine protect_lc

  ! ---- helpers ---------------------------------------------------------------

  pure function typ(code, bits) result(t)
    integer(c_int32_t), intent(in) :: code
    integer, intent(in) :: bits
    type(crpm_type_t) :: t
    t = crpm_type_t(code, 0_c_int32_t, int(bits / 8, c_int64_t))
  end function typ

  ! Assumed rank never makes a copy, so the address taken here is the
  ! caller's storage; a non-contiguous actual must therefore be refused
  ! rather than registered by its first element.
  subroutine protect_common(id, array, t, ierr)
    integer, intent(in) :: id
    type(*), dimension(..), target, intent(inout) :: array
    type(crpm_type_t), intent(in) :: t
    integer, intent(out) :: ierr
    integer(c_int64_t) :: n
    type(c_ptr) :: p
    character(len=12) :: idtxt

    if (.not. is_contiguous(array)) then
       write (idtxt, '(i0)') id
       binding_msg = 'crpm_protect: array ' // trim(idtxt) // ' is not contiguous ' // &
            '(strided section?); protect a contiguous array or a contiguous copy ' // &
            'that lives as long as the protection'
       ierr = CRPM_ERR_INVAL
       return
    end if
    n = size(array, kind=c_int64_t)
    p = c_null_ptr
    ! c_loc of a zero-sized array is not allowed; nothing to address anyway.
    if (n > 0) p = c_loc(array)
    ierr = track(c_protect(int(id, c_int), p, n, t))
  end subroutine protect_common

  ! ---- persistent heap ---------------------------------------------------

  function malloc_i4(bytes) result(p)
    integer(int32), intent(in) :: bytes
    type(c_ptr) :: p
    p = malloc_i8(int(bytes, int64))
  end function malloc_i4

  function malloc_i8(bytes) result(p)
    integer(int64), intent(in) :: bytes
    type(c_ptr) :: p
    p = c_null_ptr
    if (bytes < 0) then
       binding_msg = 'crpm_malloc: negative size'
       return
    end if
    p = c_malloc(int(bytes, c_size_t))
    if (.not. c_associated(p) .and. allocated(binding_msg)) deallocate (binding_msg)
  end function malloc_i8

  !> p = crpm_calloc(n, size): n elements of size bytes, zeroed.
  function crpm_calloc(n, size) result(p)
    integer(int64), intent(in) :: n, size
    type(c_ptr) :: p
    p = c_calloc(int(n, c_size_t), int(size, c_size_t))
  end function crpm_calloc

  !> p = crpm_realloc(q, bytes): contents kept up to the smaller size.
  function crpm_realloc(q, bytes) result(p)
    type(c_ptr), intent(in) :: q
    integer(int64), intent(in) :: bytes
    type(c_ptr) :: p
    p = c_realloc(q, int(bytes, c_size_t))
  end function crpm_realloc

  subroutine crpm_free(p)
    type(c_ptr), intent(in) :: p
    call c_free(p)
  end subroutine crpm_free

  subroutine crpm_set_root(idx, p, ierr)
    integer, intent(in) :: idx
    type(c_ptr), intent(in) :: p
    integer, intent(out) :: ierr
    ierr = track(c_set_root(int(idx, c_int), p))
  end subroutine crpm_set_root

  !> c_null_ptr when unset.
  function crpm_get_root(idx) result(p)
    integer, intent(in) :: idx
    type(c_ptr) :: p
    p = c_get_root(int(idx, c_int))
  end function crpm_get_root

  function crpm_heap_used() result(n)
    integer(int64) :: n
    n = int(c_heap_used(), int64)
  end function crpm_heap_used

  ! Pass a C return code through, forgetting the bindings' own message once
  ! the library has reported a newer failure.
  function track(rc) result(ierr)
    integer(c_int), intent(in) :: rc
    integer :: ierr
    ierr = int(rc)
    if (ierr < 0 .and. allocated(binding_msg)) deallocate (binding_msg)
  end function track

  function from_c_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
       s = ''
       return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate (character(len=n) :: s)
    do i = 1, n
       s(i:i) = chars(i)
    end do
  end function from_c_string

end module crpm
