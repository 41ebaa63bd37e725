"""crpm.Error and its families.  Every failure of a C call raises one, with
the code, its name, crpm_strerror's text and crpm_last_error's message."""
from . import _consts, _lib


class Error(Exception):
    """A libcrpm call failed.

    code      the negative CRPM_ERR_* value (crpm.ERR_*)
    name      its name, e.g. "CRPM_ERR_IO"
    function  the C function that failed, e.g. "crpm_checkpoint"
    reason    crpm_strerror(code)
    detail    crpm_last_error(): what happened, on this rank (after
              ERR_REMOTE, the failing rank's message)
    """

    def __init__(self, code, function, detail):
        self.code = code
        self.name = _NAMES.get(code, "CRPM error %d" % code)
        self.function = function
        self.reason = _lib.text(_lib.lib.crpm_strerror(code))
        self.detail = detail
        super().__init__("%s: %s (%s)%s" % (function, self.reason, self.name, ": " + detail if detail else ""))


class UsageError(Error):
    """A call out of order or with a bad argument (ERR_INVAL, ERR_STATE,
    ERR_RANGE)."""


class ConfigError(Error):
    """The configuration is wrong or asks for what this build lacks
    (ERR_CONFIG, ERR_NOTSUP)."""


class ResourceError(Error):
    """The system refused: memory, files, HDF5, checkpoints held by another
    job, the GPU (ERR_NOMEM, ERR_IO, ERR_HDF5, ERR_BUSY, ERR_DEVICE)."""


class CheckpointError(Error):
    """The checkpoints cannot be used as asked: none, damaged, another
    job's, another rank count's, or not what was protected (ERR_NOCKPT,
    ERR_CORRUPT, ERR_VERSION, ERR_FORMAT, ERR_TRUNCATED, ERR_GEOMETRY,
    ERR_IDENTITY, ERR_MISMATCH, ERR_EPOCH, ERR_MISSING, ERR_NRANKS)."""


class CommunicationError(Error):
    """An MPI call failed, or the call failed on another rank (ERR_MPI,
    ERR_REMOTE: detail quotes that rank's message)."""


_FAMILIES = {
    UsageError: ("INVAL", "STATE", "RANGE"),
    ConfigError: ("CONFIG", "NOTSUP"),
    ResourceError: ("NOMEM", "IO", "HDF5", "BUSY", "DEVICE"),
    CheckpointError: ("NOCKPT", "CORRUPT", "VERSION", "FORMAT", "TRUNCATED", "GEOMETRY", "IDENTITY", "MISMATCH",
                      "EPOCH", "MISSING", "NRANKS"),
    CommunicationError: ("MPI", "REMOTE"),
}
_NAMES = {v: "CRPM_" + k for k, v in vars(_consts).items() if k.startswith("ERR_")}
# Codes by value; a code this package does not know yet raises the base class.
_CLASS = {getattr(_consts, "ERR_" + n): cls for cls, names in _FAMILIES.items() for n in names
          if hasattr(_consts, "ERR_" + n)}


def check(rc, function):
    """rc if it is not an error, else raises the matching Error."""
    if rc >= 0:
        return rc
    detail = _lib.text(_lib.lib.crpm_last_error())
    raise _CLASS.get(rc, Error)(rc, function, detail)
