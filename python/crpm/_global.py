"""Global datasets (restart on another number of ranks, docs/reshape.md)
and the persistent heap (docs/heap.md) as they fit NumPy programs.

Global datasets: each rank protects its box of a global N-D array and says
where the box lies; after a relaunch on another rank count, status() is
STATUS_RESHAPED, global_dims() gives the saved shape, the program protects
and places its new boxes and recover() fills them.

The heap: heap_array() allocates an ndarray inside the checkpointed heap
(header with dtype and shape in front of the data), set_root() keeps it in
one of the heap's roots, and after recover() get_root() returns it with its
checkpointed contents.  Heap memory ends with finalize(): arrays on it must
not be touched afterwards, nor arrays allocated before a recover() that are
not reachable from a root of the checkpoint recovered.
"""
import ctypes

import numpy as np

from . import _consts as C
from . import _lib
from ._errors import check
from ._types import crpm_type

_C = _lib.lib
_I64P = ctypes.POINTER(ctypes.c_int64)

_lib.declare({
    "crpm_define_global": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, _I64P, _lib.TypeT, ctypes.c_char_p]),
    "crpm_add_subset": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, _I64P, _I64P]),
    "crpm_protect_replicated": (ctypes.c_int, [ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, _lib.TypeT]),
    "crpm_global_dims": (ctypes.c_int, [ctypes.c_int, _I64P]),
    "crpm_calloc": (ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_size_t]),
    "crpm_free": (None, [ctypes.c_void_p]),
    "crpm_malloc_usable_size": (ctypes.c_size_t, [ctypes.c_void_p]),
    "crpm_set_root": (ctypes.c_int, [ctypes.c_int, ctypes.c_void_p]),
    "crpm_get_root": (ctypes.c_void_p, [ctypes.c_int]),
    "crpm_heap_used": (ctypes.c_size_t, []),
})


def _int(value, what, lo=-2 ** 31, hi=2 ** 31):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    value = int(value)
    if not lo <= value < hi:
        raise OverflowError("%s %d is out of range" % (what, value))
    return value


def _vec(values, what, n=None):
    v = [_int(x, what, -2 ** 63, 2 ** 63) for x in values]
    if n is not None and len(v) != n:
        raise ValueError("%s has %d entries, the dataset %d dimensions" % (what, len(v), n))
    return (ctypes.c_int64 * max(len(v), 1))(*v)


def define_global(gid, dims, dtype, name=None):
    """Local, the same call on every rank: global dataset gid of shape dims
    (C order) and element type dtype; name names it in level-4 files."""
    d = _vec(dims, "dims")
    check(_C.crpm_define_global(_int(gid, "gid"), len(dims), d, crpm_type(dtype),
                                None if name is None else str(name).encode("utf-8")), "crpm_define_global")
    _ndims[int(gid)] = len(dims)


#: gid -> its number of dimensions (for add_subset's argument check)
_ndims = {}


def add_subset(gid, id, offset, count):
    """Local: the array protected under id holds the box offset .. offset +
    count (C order, in elements) of dataset gid."""
    n = _ndims.get(gid, len(offset))
    check(_C.crpm_add_subset(_int(gid, "gid"), _int(id, "id"), _vec(offset, "offset", n), _vec(count, "count", n)),
          "crpm_add_subset")


def protect_replicated(id, array):
    """Local: protect() for an array equal on every rank (restored on every
    rank from rank 0's copy after a restart on another rank count)."""
    from . import _check_array, _protected  # the package's own checks
    _check_array(id, array)
    check(_C.crpm_protect_replicated(_int(id, "id"), array.ctypes.data, array.size, crpm_type(array.dtype)),
          "crpm_protect_replicated")
    _protected[int(id)] = array


def global_dims(gid):
    """Local: the shape of dataset gid as a tuple (after a restart: as the
    checkpoint saved it)."""
    d = (ctypes.c_int64 * C.MAX_DIMS)()
    n = check(_C.crpm_global_dims(_int(gid, "gid"), d), "crpm_global_dims")
    return tuple(int(d[i]) for i in range(n))


# ---- the heap ----------------------------------------------------------------

# A heap array's header: magic, ndim, order flag, dtype string, shape.
_MAGIC = b"CRPMNPY1"
_MAXDIM = 8
_DTLEN = 24
_HDR = 128
_HEADER = np.dtype([("magic", "S8"), ("ndim", "<i4"), ("fortran", "<i4"), ("dtype", "S%d" % _DTLEN),
                    ("shape", "<i8", (_MAXDIM,))])
assert _HEADER.itemsize <= _HDR


def _header(p):
    return np.frombuffer((ctypes.c_char * _HEADER.itemsize).from_address(p), dtype=_HEADER, count=1)[0]


def _view(p):
    """The ndarray whose header is at p."""
    h = _header(p)
    if bytes(h["magic"]) != _MAGIC or not 0 <= int(h["ndim"]) <= _MAXDIM:
        raise ValueError("the heap block at %#x is not an array of crpm.heap_array" % p)
    dt = np.dtype(h["dtype"].decode("ascii"))
    shape = tuple(int(x) for x in h["shape"][:int(h["ndim"])])
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    buf = (ctypes.c_char * max(n, 1)).from_address(p + _HDR)
    a = np.frombuffer(buf, dtype=dt, count=n // dt.itemsize if dt.itemsize else 0)
    return a.reshape(shape, order="F" if int(h["fortran"]) else "C")


def heap_array(shape, dtype=float, order="C"):
    """A zeroed ndarray in the persistent heap (needs heap_size in the
    configuration).  Keep it reachable from a root (set_root) to find it
    after a restart.  MemoryError when the heap cannot serve it."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    dt = np.dtype(dtype)
    crpm_type(dt)  # refuses object dtypes
    text = dt.str.encode("ascii")
    if dt.fields is not None or len(text) >= _DTLEN:
        raise TypeError("crpm.heap_array: dtype %s cannot be described in the array's header; use a plain "
                        "numeric or fixed-size dtype" % dt)
    if len(shape) > _MAXDIM or any(_int(s, "shape", 0, 2 ** 62) < 0 for s in shape):
        raise ValueError("crpm.heap_array: at most %d dimensions of sizes >= 0" % _MAXDIM)
    if order not in ("C", "F"):
        raise ValueError("crpm.heap_array: order must be 'C' or 'F'")
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    p = _C.crpm_calloc(1, _HDR + n)
    if not p:
        raise MemoryError("crpm.heap_array(%s, %s): %s" % (shape, dt, _lib.text(_C.crpm_last_error())))
    h = _header(p)
    h["magic"], h["ndim"], h["fortran"], h["dtype"] = _MAGIC, len(shape), order == "F", text
    h["shape"][:len(shape)] = shape
    return _view(p)


def _base(a):
    if not isinstance(a, np.ndarray):
        raise TypeError("expected an ndarray of crpm.heap_array, got %s" % type(a).__name__)
    p = a.__array_interface__["data"][0] - _HDR
    if p <= 0 or _C.crpm_malloc_usable_size(p) < _HDR:  # not a heap block: its header is not to be read
        raise ValueError("the array is not one of crpm.heap_array (or a view into one)")
    _view(p)  # checks the header
    return p


def heap_free(a):
    """Returns the heap array a (from heap_array or get_root) to the heap;
    a and every view of it must not be used afterwards."""
    _C.crpm_free(_base(a))


def set_root(idx, a):
    """Root idx (0 .. ROOTS-1) holds the heap array a, or nothing (None)."""
    check(_C.crpm_set_root(_int(idx, "idx"), None if a is None else _base(a)), "crpm_set_root")


def get_root(idx):
    """The heap array in root idx, or None."""
    p = _C.crpm_get_root(_int(idx, "idx"))
    return _view(p) if p else None


def heap_used():
    """Bytes of the heap's live blocks (headers included)."""
    return int(_C.crpm_heap_used())
