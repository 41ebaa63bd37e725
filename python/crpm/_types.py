"""NumPy dtypes as libcrpm types.  A dtype with a C API type of the same
meaning and size gets its code (level-4 files then hold a native HDF5 type);
any other fixed-size dtype (float16, uint16, datetime64, fixed strings,
structured records, non-native byte order) is an opaque record of its
itemsize, which checkpoints and recovers bit for bit all the same."""
import ctypes

import numpy as np

from . import _consts as C
from ._lib import TypeT


def _table():
    t = {
        ("b", 1): C.TC_LOGICAL,  # numpy.bool_: one byte, 0 or 1 (level 4: an int8)
        ("i", 1): C.TC_INT8, ("i", 2): C.TC_INT16, ("i", 4): C.TC_INT32, ("i", 8): C.TC_INT64,
        ("u", 1): C.TC_BYTE,
        ("f", 4): C.TC_FLOAT, ("f", 8): C.TC_DOUBLE,
        ("c", 8): C.TC_COMPLEX_FLOAT, ("c", 16): C.TC_COMPLEX_DOUBLE,
    }
    # Unsigned types of C whose size NumPy shares (unsigned, unsigned long).
    t.setdefault(("u", ctypes.sizeof(ctypes.c_uint)), C.TC_UINT)
    t.setdefault(("u", ctypes.sizeof(ctypes.c_ulong)), C.TC_ULONG)
    return t


_TABLE = _table()


def crpm_type(dtype):
    """The crpm_type_t of dtype; TypeError for dtypes a checkpoint cannot hold."""
    dt = np.dtype(dtype)
    if dt.hasobject:
        raise TypeError("dtype %s holds references to Python objects, which a checkpoint cannot restore" % dt)
    if dt.itemsize == 0:
        raise TypeError("dtype %s has no size" % dt)
    code = None
    if dt.fields is None and dt.isnative:
        if dt.type is np.longdouble and dt.itemsize == ctypes.sizeof(ctypes.c_longdouble):
            code = C.TC_LDOUBLE
        else:
            code = _TABLE.get((dt.kind, dt.itemsize))
    return TypeT(C.TYPE_USER if code is None else code, 0, dt.itemsize)
