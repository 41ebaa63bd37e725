// libcrpm glue shared by the C++ proxy applications (hpccg, comd, lulesh):
// the --crpm / --ckpt-every / --ckpt-level options, the "any library
// failure is fatal for the whole job" convention, and a Checkpointer that
// does init, protect, recover-if-a-checkpoint-exists, timed checkpoints
// every N steps, statistics and finalize.  Without --crpm an application
// makes no library call.  Header-only; include after <mpi.h>.
#ifndef CRPM_APP_HPP
#define CRPM_APP_HPP

#include <mpi.h>

#include <crpm.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace crpm_app {

struct Options {
    const char *config = nullptr;  // checkpointing only when set
    int every = 10;                // checkpoint every N steps; 0 = never
    int level = CRPM_L1;
};

enum class Arg { NotMine, Ok, Bad };

// One command-line option: key and its value (nullptr if none follows).
// NotMine: not a libcrpm option (or its value is missing), so the caller's
// own parsing goes on; Bad: a libcrpm option with an invalid value.
// --ckpt-level is accepted only when withLevel is set.
inline Arg parseArg(const std::string &key, const char *value, Options &o, bool withLevel = false) {
    if (!value || (key != "--crpm" && key != "--ckpt-every" && !(withLevel && key == "--ckpt-level")))
        return Arg::NotMine;
    if (key == "--crpm") {
        o.config = value;
        return Arg::Ok;
    }
    char *end = nullptr;
    errno = 0;
    const long v = std::strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v < 0 || v > INT_MAX) return Arg::Bad;
    if (key == "--ckpt-every") {
        o.every = int(v);
        return Arg::Ok;
    }
    if (v != CRPM_L1 && v != CRPM_L4) return Arg::Bad;
    o.level = int(v);
    return Arg::Ok;
}

// The usage lines of the options; unit names a step ("iterations", "cycles").
inline void usage(std::FILE *f, const char *unit, bool withLevel = false) {
    std::fprintf(f, "  --crpm FILE        enable libcrpm checkpointing with config FILE\n");
    std::fprintf(f, "  --ckpt-every N     checkpoint every N %s (default 10; 0 = never)\n", unit);
    if (withLevel) std::fprintf(f, "  --ckpt-level L     1 (node-local, default) or 4 (global HDF5)\n");
}

// rc < 0: prints "<app>[<rank>]: <what> failed: <reason> (<last error>)"
// and aborts the job with abortCode, since the applications cannot go on
// without their checkpoints.
inline void check(const char *app, int abortCode, int rc, const char *what) {
    if (rc >= 0) return;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "%s[%d]: %s failed: %s (%s)\n", app, rank, what, crpm_strerror(rc),
                 crpm_last_error());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, abortCode);
}

class Checkpointer {
   public:
    Checkpointer(const char *app, const Options &o, int abortCode = 1) : app_(app), o_(o), abort_(abortCode) {}

    bool enabled() const { return o_.config != nullptr; }
    void check(int rc, const char *what) const { crpm_app::check(app_, abort_, rc, what); }

    void init(MPI_Comm comm) { check(crpm_init(o_.config, comm), "crpm_init"); }
    void protect(int id, void *p, int64_t count, crpm_type_t type, const char *what) {
        check(crpm_protect(id, p, count, type), what);
    }
    // After every protect: recovers the newest checkpoint if there is one.
    // Returns 0 (fresh start), CRPM_STATUS_L1 or CRPM_STATUS_L4.
    int recoverIfAny() {
        const int st = crpm_status();
        check(st, "crpm_status");
        if (st > 0) check(crpm_recover(), "crpm_recover");
        return st;
    }
    // Is step a checkpoint step (checkpointing on, every N)?
    bool due(long long step) const { return enabled() && o_.every > 0 && step % o_.every == 0; }
    // Checkpoint `id` at the configured level; counted and timed.
    void checkpoint(int id) {
        const double t0 = MPI_Wtime();
        check(crpm_checkpoint(id, o_.level), "crpm_checkpoint");
        seconds_ += MPI_Wtime() - t0;
        ++count_;
    }
    int count() const { return count_; }
    double seconds() const { return seconds_; }  // this rank's time in checkpoint calls
    crpm_stats_t totals() const {
        crpm_stats_t t;
        check(crpm_get_stats(nullptr, &t), "crpm_get_stats");
        return t;
    }
    void finalize() { check(crpm_finalize(), "crpm_finalize"); }

   private:
    const char *app_;
    Options o_;
    int abort_;
    int count_ = 0;
    double seconds_ = 0.0;
};

}  // namespace crpm_app

#endif
