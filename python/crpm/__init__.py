"""libcrpm for Python programs that use mpi4py and NumPy.

    from mpi4py import MPI
    import numpy as np
    import crpm

    it = np.zeros(1, dtype=np.int64)
    grid = np.zeros((n, m))
    with crpm.init("crpm.ini", MPI.COMM_WORLD):
        crpm.protect(0, it)
        crpm.protect(1, grid)
        if crpm.status() > 0:
            crpm.recover()            # it and grid are filled in place
        while it[0] < niter:
            ...compute into grid...
            it[0] += 1
            if crpm.snapshot() == crpm.SNAP_EXIT:
                break                 # asked to stop: checkpoint taken
    # leaving the block finalizes (only when no exception is propagating)

Every call is the C function of the same name (see crpm(3)); collective
ones are collective over the communicator given to init.  A failure raises
crpm.Error (a subclass per family of codes, see crpm._errors) on every rank
of a collective call.  Arrays are protected in place: their memory is what
a checkpoint saves and what recover() overwrites, so they must be
contiguous (C or Fortran order) and writeable; the package keeps each
protected array alive until it is protected again under its id or the
library is finalized.

Global datasets (define_global, add_subset, protect_replicated,
global_dims: restart on another number of ranks) and the persistent heap
(heap_array, set_root, get_root, heap_free, heap_used): see crpm._global.

Constants: the checkpoint levels L1..L4, STATUS_*, SNAP_*, ERR_* (the C
API's values, read from its headers at build time).
"""
import collections
import os

import numpy as np
from mpi4py import MPI

from . import _consts
from . import _lib
from ._errors import (CheckpointError, CommunicationError, ConfigError, Error, ResourceError,  # noqa: F401
                      UsageError, check)
from ._types import crpm_type

# The C API's constants under their C names without the CRPM_ prefix.
for _k, _v in vars(_consts).items():
    if _k.isupper() and not _k.startswith("TC_") and _k != "STATS_FIELDS":
        globals()[_k] = _v
del _k, _v

__version__ = "1.0.0"

_C = _lib.lib
#: id -> the ndarray protected under it (keeps it alive and unresizable).
_protected = {}
_initialized = False

Stats = collections.namedtuple("Stats", [name for name, _ in _consts.STATS_FIELDS])
Stats.__doc__ = "One crpm_stats_t (see crpm_get_stats(3))."
StatsPair = collections.namedtuple("StatsPair", ["last", "total"])
StatsPair.__doc__ = "stats(): the last checkpoint's statistics and the totals since init."


class Session:
    """What init() returns: leaving a `with` block on it finalizes the
    library.  When the block is left by an exception, it does not: the
    checkpoints stay for a relaunch (finalize would remove them unless
    keep_last_ckpt = 1), and finalize is collective while the other ranks
    may be elsewhere."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and _initialized:
            finalize()
        return False


def _int32(value, what):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    value = int(value)
    if not -2 ** 31 <= value < 2 ** 31:
        raise OverflowError("%s %d does not fit a C int" % (what, value))
    return value


def init(config, comm=MPI.COMM_WORLD):
    """Collective: crpm_init(config, comm) with comm an mpi4py communicator
    (None: MPI.COMM_WORLD).  The library duplicates it.  Returns a Session,
    a context manager that finalizes."""
    global _initialized
    comm = MPI.COMM_WORLD if comm is None else comm
    if not isinstance(comm, MPI.Comm):
        raise TypeError("comm must be an mpi4py communicator, not %s" % type(comm).__name__)
    path = os.fsencode(config) if config is not None else None
    check(_C.crpm_init_fcomm(path, comm.py2f()), "crpm_init")
    _initialized = True
    _protected.clear()
    return Session()


def is_initialized():
    """True between a successful init() and finalize()."""
    return _initialized


def protect(id, array):
    """Protects array (a numpy.ndarray, C- or Fortran-contiguous, writeable)
    under id, or replaces what id protected.  Local.  Raises ValueError for
    a non-contiguous or read-only array, TypeError for a non-array or an
    object dtype."""
    id = _int32(id, "id")
    _check_array(id, array)
    t = crpm_type(array.dtype)
    check(_C.crpm_protect(id, array.ctypes.data, array.size, t), "crpm_protect")
    _protected[id] = array


def _check_array(id, array):
    """The checks protect() makes on what it protects."""
    if not isinstance(array, np.ndarray):
        raise TypeError("crpm.protect(%d): expected a numpy.ndarray, got %s" % (id, type(array).__name__))
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        raise ValueError("crpm.protect(%d): the array is not contiguous (a strided view such as a[::2] or a "
                         "column slice): a checkpoint saves one block of memory; protect the contiguous array it "
                         "views, or a contiguous copy that the program then uses" % id)
    if not array.flags.writeable:
        raise ValueError("crpm.protect(%d): the array is read-only, and recovery writes into it" % id)


def protected(id):
    """The array protected under id, or None."""
    return _protected.get(_int32(id, "id"))


def status():
    """Local: STATUS_FRESH (0), or the level the restart found (> 0: call
    recover())."""
    return check(_C.crpm_status(), "crpm_status")


def recover():
    """Collective: restores every protected array in place."""
    check(_C.crpm_recover(), "crpm_recover")


def recover_var(id):
    """Local: restores the array protected under id."""
    check(_C.crpm_recover_var(_int32(id, "id")), "crpm_recover_var")


def stored_size(id):
    """Local: bytes of array id in the checkpoint recover() would read."""
    n = _lib.ctypes.c_int64(0)
    check(_C.crpm_stored_size(_int32(id, "id"), _lib.ctypes.byref(n)), "crpm_stored_size")
    return n.value


def set_name(id, name):
    """Local: a name for array id (kept until finalize)."""
    check(_C.crpm_set_name(_int32(id, "id"), str(name).encode("utf-8")), "crpm_set_name")


def checkpoint(id, level=L1):  # noqa: F821 (L1 comes from _consts)
    """Collective: a checkpoint labelled id at level (L1..L4)."""
    check(_C.crpm_checkpoint(_int32(id, "id"), _int32(level, "level")), "crpm_checkpoint")


def wait():
    """Collective: waits until the levels running in the background
    (async = 1) committed; raises their failure, the same on every rank."""
    check(_C.crpm_wait(), "crpm_wait")


def test():
    """Local, non-blocking: True when no level runs in the background; raises
    a finished background level's failure (the next checkpoint, wait or
    finalize raises it too)."""
    done = _lib.ctypes.c_int(1)
    check(_C.crpm_test(_lib.ctypes.byref(done)), "crpm_test")
    return bool(done.value)


def snapshot():
    """Collective, once per iteration: SNAP_NONE, SNAP_RECOVERED (the arrays
    were restored), SNAP_CHECKPOINTED, or SNAP_EXIT (the job was asked to
    stop and a final checkpoint was taken: finalize and exit)."""
    return check(_C.crpm_snapshot(), "crpm_snapshot")


def should_exit():
    """Collective: True when the job must checkpoint and stop now (the end
    of the allocation is near, exit_signal arrived, or a HALT file)."""
    return check(_C.crpm_should_exit(), "crpm_should_exit") == 1


def finalize():
    """Collective: closes the library (removing the checkpoints unless
    keep_last_ckpt = 1 or the job was told to stop) and releases the
    protected arrays, even when it raises."""
    global _initialized
    try:
        check(_C.crpm_finalize(), "crpm_finalize")
    finally:
        _initialized = False
        _protected.clear()


def stats():
    """StatsPair(last, total) of this rank's checkpoints."""
    last, total = _lib.StatsT(), _lib.StatsT()
    check(_C.crpm_get_stats_sized(_lib.ctypes.byref(last), _lib.ctypes.byref(total),
                                  _lib.ctypes.sizeof(_lib.StatsT)), "crpm_get_stats")
    return StatsPair(*(Stats(*(getattr(s, f) for f in Stats._fields)) for s in (last, total)))


Progress = collections.namedtuple("Progress", ["what", "done", "total", "rate", "seconds_left"])
Progress.__doc__ = ("set_progress(): one report of long work (a restart's level-2 restore or level-3 rebuild, "
                    "a restart on another number of ranks); bytes of this rank, rate in bytes per second, "
                    "seconds_left None when unknown; done == total at the end.")
#: the C callback of set_progress (kept alive while the library may call it)
_progress_cb = None


def set_progress(fn=None, every=-1.0, log=None):
    """Reports progress of long work on this rank (crpm_set_progress(3)):
    fn(Progress) at most every `every` seconds (0: at every step; < 0: the
    library's default, 3 s) and once at the end; log (a logging.Logger)
    gets the same as info lines.  Callable before init; set_progress()
    turns it off.  An exception in fn is printed, not raised (the library
    is in the middle of a collective step)."""
    global _progress_cb
    if fn is None and log is None:
        check(_C.crpm_set_progress(None, None, 0.0), "crpm_set_progress")
        _progress_cb = None
        return

    def call(what, done, total, rate, left, user):
        p = Progress(_lib.text(what), int(done), int(total), float(rate), None if left < 0 else float(left))
        try:
            if fn is not None:
                fn(p)
            if log is not None:
                log.info("crpm: %s: %d of %d bytes, %.3g bytes/s%s", p.what, p.done, p.total, p.rate,
                         "" if p.seconds_left is None else ", %.1f s left" % p.seconds_left)
        except Exception:  # noqa: BLE001 - must not unwind through C
            import traceback
            traceback.print_exc()

    cb = _lib.ProgressFn(call)
    check(_C.crpm_set_progress(_lib.ctypes.cast(cb, _lib.ctypes.c_void_p), None, float(every)),
          "crpm_set_progress")
    _progress_cb = cb


def version():
    """(major, minor, patch) of the loaded libcrpm (crpm_version); any time."""
    v = [_lib.ctypes.c_int() for _ in range(3)]
    _C.crpm_version(*(_lib.ctypes.byref(x) for x in v))
    return tuple(x.value for x in v)


def strerror(code):
    """crpm_strerror(code)."""
    return _lib.text(_C.crpm_strerror(_int32(code, "code")))


def last_error():
    """crpm_last_error(): this rank's latest failure."""
    return _lib.text(_C.crpm_last_error())


# Global datasets and the persistent heap (after the names they use).
from ._global import (add_subset, define_global, get_root, global_dims, heap_array, heap_free,  # noqa: E402,F401
                      heap_used, protect_replicated, set_root)
