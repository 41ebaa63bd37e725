!> Module `fti`: FTI's Fortran interface on libcrpm's FTI compatibility layer
!> (libfti, include/fti/fti.h).  An FTI Fortran program compiles against it
!> unchanged:
!>
!>   use fti
!>   integer :: comm, ierr, status
!>   integer, pointer :: step
!>   real(8), pointer :: u(:,:)
!>   call MPI_Init(ierr)
!>   comm = MPI_COMM_WORLD
!>   call FTI_Init('config.fti', comm, ierr)   ! comm is now FTI_COMM_WORLD
!>   call FTI_Protect(0, step, ierr)
!>   call FTI_Protect(1, u, ierr)
!>   call FTI_Status(status)
!>   if (status /= 0) call FTI_Recover(ierr)
!>   ... call FTI_Checkpoint(id, level, ierr) or call FTI_Snapshot(ierr) ...
!>   call FTI_Finalize(ierr)
!>
!> Return codes are FTI's: FTI_SCES, FTI_NSCS, FTI_NREC, FTI_DONE (see fti.h
!> of the C layer for which call returns which).
!>
!> FTI_Protect(id, data, err) takes data of any rank 0..7 and the kinds
!> FTI's module knows: integer(1/2/4/8[/16]), real(4/8[/16]),
!> complex(4/8[/16]), logical(1/2/4/8[/16]) and character(kind=1, len=*);
!> [16] where the compiler has it.  As with FTI, data must be a POINTER or a
!> TARGET (allocatable TARGETs included): the library keeps its address.
!> Unlike FTI, which registers the first element of whatever it gets, a
!> strided section or a disassociated pointer is refused with FTI_NSCS and a
!> message.  Anything else (derived types) goes through
!> FTI_Protect(id, c_loc(x), count, type, err) with a type made by
!> FTI_InitType(type, size_in_bytes, err).
!>
!> The module exports no MPI names and no FTI_COMM_WORLD variable, so that
!> programs may `include 'mpif.h'` and declare their own FTI_COMM_WORLD as
!> FTI's examples do.
module fti
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int8, int16, int32, int64, real32, real64, error_unit
  implicit none
  private

  integer, parameter, public :: FTI_SCES = 0
  integer, parameter, public :: FTI_NSCS = -1
  integer, parameter, public :: FTI_NREC = -2
  integer, parameter, public :: FTI_DONE = 1

  !> Element type known to FTI (an id of the C layer).  Opaque, as in FTI.
  type, public :: FTI_type
     private
     integer(c_int) :: id = -1
  end type FTI_type

  ! Handles of the intrinsic types, set by FTI_Init (as in FTI).
  type(FTI_type), public, save :: FTI_CHARACTER1, FTI_CHARACTER4, &
       FTI_INTEGER1, FTI_INTEGER2, FTI_INTEGER4, FTI_INTEGER8, FTI_INTEGER16, &
       FTI_REAL4, FTI_REAL8, FTI_REAL16, FTI_COMPLEX4, FTI_COMPLEX8, FTI_COMPLEX16, &
       FTI_LOGICAL1, FTI_LOGICAL2, FTI_LOGICAL4, FTI_LOGICAL8, FTI_LOGICAL16

  public :: FTI_Init, FTI_Status, FTI_InitType, FTI_Protect, FTI_Checkpoint, &
       FTI_Recover, FTI_RecoverVar, FTI_Snapshot, FTI_Finalize, FTI_GetStoredSize, &
       FTI_Realloc, FTI_InitCompositeType, FTI_AddScalarField, FTI_AddVectorField

  ! Kinds beyond the four of iso_fortran_env (gfortran and ifort number
  ! logical kinds by bytes, as FTI's module assumes too).
  integer, parameter :: lk1 = 1, lk2 = 2, lk4 = 4, lk8 = 8
#ifdef FTIF_HAVE_INT128
  integer, parameter :: int128 = 16, lk16 = 16
#endif
#ifdef FTIF_HAVE_REAL128
  integer, parameter :: real128 = 16
#endif
  integer, parameter :: ucs4 = selected_char_kind('ISO_10646')

  ! Type families for ftif_type(): the C layer's predefined type is used
  ! when one has the size, an opaque type of that size otherwise.
  integer(c_int), parameter :: FAM_OPAQUE = 0, FAM_INT = 1, FAM_FLOAT = 2, FAM_CHAR = 3

  interface FTI_InitType
     module procedure init_type8, init_type4
  end interface FTI_InitType

  interface FTI_InitCompositeType
     module procedure composite8, composite4
  end interface FTI_InitCompositeType

  interface FTI_AddScalarField
     module procedure add_scalar_id, add_scalar_h
  end interface FTI_AddScalarField

  interface FTI_AddVectorField
     module procedure add_vector_id, add_vector_h
  end interface FTI_AddVectorField

  interface FTI_Protect
     module procedure protect_ptr, protect_ptr8, protect_ptr_id, protect_ptr8_id, protect_char, &
          protect_i1, protect_i2, protect_i4, protect_i8, &
          protect_r4, protect_r8, protect_c4, protect_c8, &
          protect_l1, protect_l2, protect_l4, protect_l8
#ifdef FTIF_HAVE_INT128
     module procedure protect_i16, protect_l16
#endif
#ifdef FTIF_HAVE_REAL128
     module procedure protect_r16, protect_c16
#endif
  end interface FTI_Protect

  interface FTI_GetStoredSize
     module procedure stored_size4, stored_size8
  end interface FTI_GetStoredSize

  interface FTI_Realloc
     module procedure realloc_ptr
  end interface FTI_Realloc

  interface
     function c_init(config, comm) bind(C, name='ftif_init') result(rc)
       import :: c_char, c_int
       character(kind=c_char), dimension(*), intent(in) :: config
       integer(c_int), intent(inout) :: comm
       integer(c_int) :: rc
     end function c_init

     function c_type(family, size, id) bind(C, name='ftif_type') result(rc)
       import :: c_int
       integer(c_int), value :: family, size
       integer(c_int), intent(out) :: id
       integer(c_int) :: rc
     end function c_type

     function c_protect(id, ptr, count, tid) bind(C, name='ftif_protect') result(rc)
       import :: c_int, c_ptr, c_int64_t
       integer(c_int), value :: id
       type(c_ptr), value :: ptr
       integer(c_int64_t), value :: count
       integer(c_int), value :: tid
       integer(c_int) :: rc
     end function c_protect

     function c_stored_size(id) bind(C, name='ftif_stored_size') result(n)
       import :: c_int, c_int64_t
       integer(c_int), value :: id
       integer(c_int64_t) :: n
     end function c_stored_size

     function c_realloc(id, ptr) bind(C, name='ftif_realloc') result(p)
       import :: c_int, c_ptr
       integer(c_int), value :: id
       type(c_ptr), value :: ptr
       type(c_ptr) :: p
     end function c_realloc

     function c_status() bind(C, name='ftif_status') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_status

     function c_checkpoint(id, level) bind(C, name='ftif_checkpoint') result(rc)
       import :: c_int
       integer(c_int), value :: id, level
       integer(c_int) :: rc
     end function c_checkpoint

     function c_recover() bind(C, name='ftif_recover') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_recover

     function c_recover_var(id) bind(C, name='ftif_recover_var') result(rc)
       import :: c_int
       integer(c_int), value :: id
       integer(c_int) :: rc
     end function c_recover_var

     function c_snapshot() bind(C, name='ftif_snapshot') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_snapshot

     function c_composite(name, size) bind(C, name='ftif_composite') result(tid)
       import :: c_char, c_int, c_size_t
       character(kind=c_char), dimension(*), intent(in) :: name
       integer(c_size_t), value :: size
       integer(c_int) :: tid
     end function c_composite

     function c_add_field(tid, name, fid, offset, ndims, dims) bind(C, name='ftif_add_field') result(rc)
       import :: c_char, c_int, c_size_t, c_int64_t
       integer(c_int), value :: tid, fid, ndims
       character(kind=c_char), dimension(*), intent(in) :: name
       integer(c_size_t), value :: offset
       integer(c_int64_t), dimension(*), intent(in) :: dims
       integer(c_int) :: rc
     end function c_add_field

     function c_finalize() bind(C, name='ftif_finalize') result(rc)
       import :: c_int
       integer(c_int) :: rc
     end function c_finalize
  end interface

contains

  !> Collective.  comm: the application's communicator (a `use mpi` /
  !> mpif.h INTEGER handle); on success it is replaced by FTI_COMM_WORLD's
  !> handle, as FTI does.  Trailing blanks of the file name are ignored.
  subroutine FTI_Init(config_file, global_comm, err)
    character(len=*), intent(in) :: config_file
    integer, intent(inout) :: global_comm
    integer, intent(out) :: err
    integer(c_int) :: comm

    comm = int(global_comm, c_int)
    err = int(c_init(trim(config_file) // c_null_char, comm))
    if (err /= FTI_SCES) return
    global_comm = int(comm)

    call init_handle(FTI_CHARACTER1, FAM_CHAR, storage_size('a'), err)
    if (err == FTI_SCES) call init_handle(FTI_CHARACTER4, FAM_OPAQUE, storage_size(ucs4_'a'), err)
    if (err == FTI_SCES) call init_handle(FTI_INTEGER1, FAM_INT, storage_size(1_int8), err)
    if (err == FTI_SCES) call init_handle(FTI_INTEGER2, FAM_INT, storage_size(1_int16), err)
    if (err == FTI_SCES) call init_handle(FTI_INTEGER4, FAM_INT, storage_size(1_int32), err)
    if (err == FTI_SCES) call init_handle(FTI_INTEGER8, FAM_INT, storage_size(1_int64), err)
    if (err == FTI_SCES) call init_handle(FTI_REAL4, FAM_FLOAT, storage_size(1.0_real32), err)
    if (err == FTI_SCES) call init_handle(FTI_REAL8, FAM_FLOAT, storage_size(1.0_real64), err)
    if (err == FTI_SCES) call init_handle(FTI_COMPLEX4, FAM_OPAQUE, storage_size((1.0_real32, 0.0_real32)), err)
    if (err == FTI_SCES) call init_handle(FTI_COMPLEX8, FAM_OPAQUE, storage_size((1.0_real64, 0.0_real64)), err)
    if (err == FTI_SCES) call init_handle(FTI_LOGICAL1, FAM_OPAQUE, storage_size(.true._lk1), err)
    if (err == FTI_SCES) call init_handle(FTI_LOGICAL2, FAM_OPAQUE, storage_size(.true._lk2), err)
    if (err == FTI_SCES) call init_handle(FTI_LOGICAL4, FAM_OPAQUE, storage_size(.true._lk4), err)
    if (err == FTI_SCES) call init_handle(FTI_LOGICAL8, FAM_OPAQUE, storage_size(.true._lk8), err)
#ifdef FTIF_HAVE_INT128
    if (err == FTI_SCES) call init_handle(FTI_INTEGER16, FAM_OPAQUE, storage_size(1_int128), err)
    if (err == FTI_SCES) call init_handle(FTI_LOGICAL16, FAM_OPAQUE, storage_size(.true._lk16), err)
#else
    if (err == FTI_SCES) call init_handle(FTI_INTEGER16, FAM_OPAQUE, 128, err)
    if (err == FTI_SCES) call init_handle(FTI_LOGICAL16, FAM_OPAQUE, 128, err)
#endif
#ifdef FTIF_HAVE_REAL128
    if (err == FTI_SCES) call init_handle(FTI_REAL16, FAM_OPAQUE, storage_size(1.0_real128), err)
    if (err == FTI_SCES) call init_handle(FTI_COMPLEX16, FAM_OPAQUE, &
         storage_size((1.0_real128, 0.0_real128)), err)
#else
    if (err == FTI_SCES) call init_handle(FTI_REAL16, FAM_OPAQUE, 128, err)
    if (err == FTI_SCES) call init_handle(FTI_COMPLEX16, FAM_OPAQUE, 256, err)
#endif
  end subroutine FTI_Init

  !> 0: nothing to recover (or already recovered); non-zero: a checkpoint
  !> is available and FTI_Recover should be called.
  subroutine FTI_Status(status)
    integer, intent(out) :: status
    status = int(c_status())
  end subroutine FTI_Status

  !> The id of a type whose elements are opaque records of size_bytes
  !> bytes, or FTI_NSCS.
  function init_type8(size_bytes) result(tid)
    integer(c_size_t), intent(in) :: size_bytes
    integer :: tid
    integer(c_int) :: id
    if (size_bytes <= 0 .or. size_bytes > huge(0_c_int)) then
       write (error_unit, '(a,i0)') '[FTI Error] FTI_InitType: size must be positive, got ', size_bytes
       tid = FTI_NSCS
       return
    end if
    tid = FTI_NSCS
    if (c_type(FAM_OPAQUE, int(size_bytes, c_int), id) == FTI_SCES) tid = int(id)
  end function init_type8

  function init_type4(size_bytes) result(tid)
    integer(int32), intent(in) :: size_bytes
    integer :: tid
    tid = init_type8(int(size_bytes, c_size_t))
  end function init_type4

  !> The id of a new composite type `name` of size_bytes bytes, or FTI_NSCS;
  !> its fields are added with FTI_AddScalarField / FTI_AddVectorField.
  function composite8(name, size_bytes) result(tid)
    character(len=*), intent(in) :: name
    integer(c_size_t), intent(in) :: size_bytes
    integer :: tid
    tid = int(c_composite(trim(name) // c_null_char, size_bytes))
  end function composite8

  function composite4(name, size_bytes) result(tid)
    character(len=*), intent(in) :: name
    integer(int32), intent(in) :: size_bytes
    integer :: tid
    tid = composite8(name, int(size_bytes, c_size_t))
  end function composite4

  function add_scalar_id(tid, name, fid, offset) result(rc)
    integer, intent(in) :: tid, fid
    character(len=*), intent(in) :: name
    integer(c_size_t), intent(in) :: offset
    integer :: rc
    integer(c_int64_t) :: none(1)
    none = 0
    rc = int(c_add_field(int(tid, c_int), trim(name) // c_null_char, int(fid, c_int), offset, 0_c_int, none))
  end function add_scalar_id

  function add_scalar_h(tid, name, ftype, offset) result(rc)
    integer, intent(in) :: tid
    character(len=*), intent(in) :: name
    type(FTI_type), intent(in) :: ftype
    integer(c_size_t), intent(in) :: offset
    integer :: rc
    rc = add_scalar_id(tid, name, int(ftype%id), offset)
  end function add_scalar_h

  !> dims(1:ndims): the field's array extents (FTI's order, as given).
  function add_vector_id(tid, name, fid, offset, ndims, dims) result(rc)
    integer, intent(in) :: tid, fid, ndims
    character(len=*), intent(in) :: name
    integer(c_size_t), intent(in) :: offset
    integer, dimension(:), intent(in) :: dims
    integer :: rc
    integer(c_int64_t), allocatable :: d(:)
    if (ndims < 1 .or. ndims > size(dims)) then
       write (error_unit, '(a,i0,a,i0,a)') '[FTI Error] FTI_AddVectorField: ndims = ', ndims, &
            ' for ', size(dims), ' extents'
       rc = FTI_NSCS
       return
    end if
    allocate (d(ndims))
    d = int(dims(1:ndims), c_int64_t)
    rc = int(c_add_field(int(tid, c_int), trim(name) // c_null_char, int(fid, c_int), offset, &
         int(ndims, c_int), d))
  end function add_vector_id

  function add_vector_h(tid, name, ftype, offset, ndims, dims) result(rc)
    integer, intent(in) :: tid, ndims
    character(len=*), intent(in) :: name
    type(FTI_type), intent(in) :: ftype
    integer(c_size_t), intent(in) :: offset
    integer, dimension(:), intent(in) :: dims
    integer :: rc
    rc = add_vector_id(tid, name, int(ftype%id), offset, ndims, dims)
  end function add_vector_h

  !> FTI_DONE on success (FTI's convention for checkpoints).
  subroutine FTI_Checkpoint(id, level, err)
    integer, intent(in) :: id, level
    integer, intent(out) :: err
    err = int(c_checkpoint(int(id, c_int), int(level, c_int)))
  end subroutine FTI_Checkpoint

  subroutine FTI_Recover(err)
    integer, intent(out) :: err
    err = int(c_recover())
  end subroutine FTI_Recover

  subroutine FTI_RecoverVar(id, err)
    integer, intent(in) :: id
    integer, intent(out) :: err
    err = int(c_recover_var(int(id, c_int)))
  end subroutine FTI_RecoverVar

  subroutine FTI_Snapshot(err)
    integer, intent(out) :: err
    err = int(c_snapshot())
  end subroutine FTI_Snapshot

  subroutine FTI_Finalize(err)
    integer, intent(out) :: err
    err = int(c_finalize())
  end subroutine FTI_Finalize

  !> Bytes of variable id in the checkpoint being recovered (0 if none).
  subroutine stored_size4(id, size)
    integer, intent(in) :: id
    integer(int32), intent(out) :: size
    integer(c_int64_t) :: n
    n = c_stored_size(int(id, c_int))
    if (n > huge(size)) then
       write (error_unit, '(a,i0,a,i0,a)') '[FTI Error] FTI_GetStoredSize: variable ', id, &
            ' holds ', n, ' bytes, more than an integer(4) counts; pass an integer(8)'
       n = 0
    end if
    size = int(n, int32)
  end subroutine stored_size4

  subroutine stored_size8(id, size)
    integer, intent(in) :: id
    integer(int64), intent(out) :: size
    size = int(c_stored_size(int(id, c_int)), int64)
  end subroutine stored_size8

  !> ptr: C address of protected variable id; replaced by a buffer of the
  !> size stored in the checkpoint (FTI_NSCS and ptr unchanged on failure).
  subroutine realloc_ptr(id, ptr, err)
    integer, intent(in) :: id
    type(c_ptr), intent(inout) :: ptr
    integer, intent(out) :: err
    type(c_ptr) :: p
    p = c_realloc(int(id, c_int), ptr)
    if (c_associated(p)) then
       ptr = p
       err = FTI_SCES
    else
       err = FTI_NSCS
    end if
  end subroutine realloc_ptr

  ! ---- FTI_Protect --------------------------------------------------------

  !> FTI_Protect(id, c_loc(x), count, type, err): count elements of type.
  subroutine protect_ptr(id, ptr, count, type_f, err)
    integer, intent(in) :: id
    type(c_ptr), value :: ptr
    integer, intent(in) :: count
    type(FTI_type), intent(in) :: type_f
    integer, intent(out) :: err
    call protect_address(id, ptr, int(count, c_int64_t), type_f, err)
  end subroutine protect_ptr

  !> FTI_Protect(id, c_loc(x), count, tid, err) with a type id (FTI_InitType,
  !> FTI_InitCompositeType).
  subroutine protect_ptr_id(id, ptr, count, tid, err)
    integer, intent(in) :: id, count, tid
    type(c_ptr), value :: ptr
    integer, intent(out) :: err
    err = int(c_protect(int(id, c_int), ptr, int(count, c_int64_t), int(tid, c_int)))
  end subroutine protect_ptr_id

  subroutine protect_ptr8_id(id, ptr, count, tid, err)
    integer, intent(in) :: id, tid
    type(c_ptr), value :: ptr
    integer(int64), intent(in) :: count
    integer, intent(out) :: err
    err = int(c_protect(int(id, c_int), ptr, int(count, c_int64_t), int(tid, c_int)))
  end subroutine protect_ptr8_id

  subroutine protect_ptr8(id, ptr, count, type_f, err)
    integer, intent(in) :: id
    type(c_ptr), value :: ptr
    integer(int64), intent(in) :: count
    type(FTI_type), intent(in) :: type_f
    integer, intent(out) :: err
    call protect_address(id, ptr, int(count, c_int64_t), type_f, err)
  end subroutine protect_ptr8

  !> Character data of any length: len characters per element.
  subroutine protect_char(id, data, err)
    integer, intent(in) :: id
    character(len=*), dimension(..), pointer, intent(in) :: data
    integer, intent(out) :: err
    integer(c_int64_t) :: n
    type(c_ptr) :: p
    if (.not. associated(data)) then
       call binding_error(id, 'is a disassociated pointer', err)
       return
    end if
    if (.not. is_contiguous(data)) then
       call binding_error(id, 'is not contiguous (strided section?); protect a contiguous array', err)
       return
    end if
    n = size(data, kind=c_int64_t) * len(data, kind=c_int64_t)
    p = c_null_ptr
    if (n > 0) p = c_loc(data)
    call protect_address(id, p, n, FTI_CHARACTER1, err)
  end subroutine protect_char

#define FTIF_SUB protect_i1
#define FTIF_TYPE integer(int8)
#define FTIF_HANDLE FTI_INTEGER1
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_i2
#define FTIF_TYPE integer(int16)
#define FTIF_HANDLE FTI_INTEGER2
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_i4
#define FTIF_TYPE integer(int32)
#define FTIF_HANDLE FTI_INTEGER4
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_i8
#define FTIF_TYPE integer(int64)
#define FTIF_HANDLE FTI_INTEGER8
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_r4
#define FTIF_TYPE real(real32)
#define FTIF_HANDLE FTI_REAL4
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_r8
#define FTIF_TYPE real(real64)
#define FTIF_HANDLE FTI_REAL8
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_c4
#define FTIF_TYPE complex(real32)
#define FTIF_HANDLE FTI_COMPLEX4
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_c8
#define FTIF_TYPE complex(real64)
#define FTIF_HANDLE FTI_COMPLEX8
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_l1
#define FTIF_TYPE logical(lk1)
#define FTIF_HANDLE FTI_LOGICAL1
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_l2
#define FTIF_TYPE logical(lk2)
#define FTIF_HANDLE FTI_LOGICAL2
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_l4
#define FTIF_TYPE logical(lk4)
#define FTIF_HANDLE FTI_LOGICAL4
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_l8
#define FTIF_TYPE logical(lk8)
#define FTIF_HANDLE FTI_LOGICAL8
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#ifdef FTIF_HAVE_INT128
#define FTIF_SUB protect_i16
#define FTIF_TYPE integer(int128)
#define FTIF_HANDLE FTI_INTEGER16
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_l16
#define FTIF_TYPE logical(lk16)
#define FTIF_HANDLE FTI_LOGICAL16
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#endif
#ifdef FTIF_HAVE_REAL128
#define FTIF_SUB protect_r16
#define FTIF_TYPE real(real128)
#define FTIF_HANDLE FTI_REAL16
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#define FTIF_SUB protect_c16
#define FTIF_TYPE complex(real128)
#define FTIF_HANDLE FTI_COMPLEX16
#include "fti_protect_kind.inc"
#undef FTIF_SUB
#undef FTIF_TYPE
#undef FTIF_HANDLE
#endif

  ! ---- helpers ---------------------------------------------------------------

  subroutine init_handle(h, family, bits, err)
    type(FTI_type), intent(out) :: h
    integer(c_int), intent(in) :: family
    integer, intent(in) :: bits
    integer, intent(inout) :: err
    err = int(c_type(family, int(bits / 8, c_int), h%id))
  end subroutine init_handle

  ! A handle still at its default was never set: FTI_Protect before
  ! FTI_Init, or a type not made by FTI_InitType.  The C layer would report
  ! an unknown type id; saying which mistake it is helps more.
  subroutine protect_address(id, ptr, count, type_f, err)
    integer, intent(in) :: id
    type(c_ptr), intent(in) :: ptr
    integer(c_int64_t), intent(in) :: count
    type(FTI_type), intent(in) :: type_f
    integer, intent(out) :: err
    if (type_f%id < 0) then
       call binding_error(id, 'has a type that was never initialized ' // &
            '(FTI_Protect before FTI_Init, or a type without FTI_InitType)', err)
       return
    end if
    err = int(c_protect(int(id, c_int), ptr, count, type_f%id))
  end subroutine protect_address

  ! Errors the C layer never sees are printed here, as FTI prints its own.
  subroutine binding_error(id, what, err)
    integer, intent(in) :: id
    character(len=*), intent(in) :: what
    integer, intent(out) :: err
    write (error_unit, '(a,i0,a,a)') '[FTI Error] FTI_Protect: variable ', id, ' ', what
    err = FTI_NSCS
  end subroutine binding_error

end module fti
