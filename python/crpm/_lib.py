"""libcrpm.so through ctypes: finding it, and the signatures of the calls
the package makes.  Nothing here knows Python objects beyond ctypes."""
import ctypes
import ctypes.util
import os

from . import _consts

try:
    from . import _paths
except ImportError:  # a source checkout that was never built
    _paths = None


class TypeT(ctypes.Structure):
    """crpm_type_t: a type code and the element size."""
    _fields_ = [("code", ctypes.c_int32), ("reserved", ctypes.c_int32), ("size", ctypes.c_int64)]


_CTYPES = {"uint64_t": ctypes.c_uint64, "int64_t": ctypes.c_int64, "uint32_t": ctypes.c_uint32,
           "int32_t": ctypes.c_int32, "double": ctypes.c_double, "int": ctypes.c_int}


class StatsT(ctypes.Structure):
    """crpm_stats_t, laid out from the header's fields."""
    _fields_ = [(name, _CTYPES[ctype]) for name, ctype in _consts.STATS_FIELDS]


def _candidates():
    """Where to look, in order: CRPM_LIBRARY, the path recorded at build or
    install time, then the dynamic loader's search (LD_LIBRARY_PATH,
    ldconfig)."""
    env = os.environ.get("CRPM_LIBRARY")
    if env:
        return [env]  # asked for this one: no silent fallback to another
    found = []
    if _paths is not None and _paths.LIBRARY:
        found.append(_paths.LIBRARY)
    found.append(ctypes.util.find_library("crpm") or "libcrpm.so")
    return found


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("crpm: cannot load libcrpm (set CRPM_LIBRARY to the path of libcrpm.so, or add its "
                      "directory to LD_LIBRARY_PATH): " + "; ".join(errors))


lib = _load()

_SIGNATURES = {
    # name: (result, arguments).  crpm_init_fcomm's MPI_Fint is a C int in
    # every MPI library (Fortran's default INTEGER).
    "crpm_init_fcomm": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int]),
    "crpm_protect": (ctypes.c_int, [ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, TypeT]),
    "crpm_status": (ctypes.c_int, []),
    "crpm_recover": (ctypes.c_int, []),
    "crpm_recover_var": (ctypes.c_int, [ctypes.c_int]),
    "crpm_stored_size": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]),
    "crpm_set_name": (ctypes.c_int, [ctypes.c_int, ctypes.c_char_p]),
    "crpm_checkpoint": (ctypes.c_int, [ctypes.c_int, ctypes.c_int]),
    "crpm_snapshot": (ctypes.c_int, []),
    "crpm_should_exit": (ctypes.c_int, []),
    "crpm_finalize": (ctypes.c_int, []),
    "crpm_wait": (ctypes.c_int, []),
    "crpm_test": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int)]),
    "crpm_get_stats": (ctypes.c_int, [ctypes.POINTER(StatsT), ctypes.POINTER(StatsT)]),
    "crpm_set_progress": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]),
    # the sized form: the library fills exactly this StatsT, newer or older
    "crpm_get_stats_sized": (ctypes.c_int, [ctypes.POINTER(StatsT), ctypes.POINTER(StatsT), ctypes.c_size_t]),
    "crpm_version": (ctypes.c_char_p, [ctypes.POINTER(ctypes.c_int)] * 3),
    "crpm_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "crpm_last_error": (ctypes.c_char_p, []),
}


#: crpm_progress_fn: what, done, total, rate, seconds_left, user.
ProgressFn = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_double,
                              ctypes.c_double, ctypes.c_void_p)


def declare(signatures):
    """Sets restype and argtypes of each {name: (result, arguments)}."""
    for name, (res, args) in signatures.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise ImportError("crpm: %s lacks %s: the library is older than this package" % (lib._name, name))
        fn.restype = res
        fn.argtypes = args


declare(_SIGNATURES)


def text(p):
    """A C string result as str."""
    return p.decode("utf-8", "replace") if p else ""
