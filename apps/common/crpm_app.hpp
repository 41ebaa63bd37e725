// libcrpm glue shared by the C++ proxy applications (hpccg, comd, lulesh):
// the --crpm / --ckpt-every / --ckpt-level options, the "any library
// failure is fatal for the whole job" convention, and a Checkpointer that
// does init, protect, recover-if-a-checkpoint-exists, timed checkpoints
// every N steps, statistics and finalize.  Without --crpm an application
// makes no library call.  Header-only; include after <mpi.h>.
//
// Built with CRPM_APP_FTI defined (the <app>-fti executables, linked with
// libfti), the Checkpointer makes the same protections, recoveries and
// checkpoints through FTI's API instead (FTI_Init with an FTI configuration
// file, FTI_Protect, FTI_Status/FTI_Recover, FTI_Checkpoint, FTI_Finalize),
// so that the benchmark can compare the two APIs on unchanged application
// sources.  FTI has no counterpart for two read-only queries, which are
// asked of the libcrpm underneath: the level of the checkpoint to recover
// (for the applications' notice) and the statistics.
#ifndef CRPM_APP_HPP
#define CRPM_APP_HPP

#include <mpi.h>

#include <crpm.h>
#ifdef CRPM_APP_FTI
#include <fti.h>
#endif

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace crpm_app {

struct Options {
    const char *config = nullptr;  // checkpointing only when set
    int every = 10;                // checkpoint every N steps; 0 = never
    int level = CRPM_L1;
    int l4_every = 0;              // every N-th checkpoint at level 4 instead; 0 = never
};

enum class Arg { NotMine, Ok, Bad };

// One command-line option: key and its value (nullptr if none follows).
// NotMine: not a libcrpm option (or its value is missing), so the caller's
// own parsing goes on; Bad: a libcrpm option with an invalid value.
// --ckpt-level is accepted only when withLevel is set.
inline Arg parseArg(const std::string &key, const char *value, Options &o, bool withLevel = false) {
    if (!value || (key != "--crpm" && key != "--ckpt-every" &&
                   !(withLevel && (key == "--ckpt-level" || key == "--ckpt-l4-every"))))
        return Arg::NotMine;
    if (key == "--crpm") {
        o.config = value;
        return Arg::Ok;
    }
    char *end = nullptr;
    errno = 0;
    const long v = std::strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v < 0 || v > INT_MAX) return Arg::Bad;
    if (key == "--ckpt-every" || key == "--ckpt-l4-every") {
        (key == "--ckpt-every" ? o.every : o.l4_every) = int(v);
        return Arg::Ok;
    }
    if (v != CRPM_L1 && v != CRPM_L2 && v != CRPM_L3 && v != CRPM_L4) return Arg::Bad;
    o.level = int(v);
    return Arg::Ok;
}

// The usage lines of the options; unit names a step ("iterations", "cycles").
inline void usage(std::FILE *f, const char *unit, bool withLevel = false) {
#ifdef CRPM_APP_FTI
    std::fprintf(f, "  --crpm FILE        enable checkpointing through the FTI API with FTI config FILE\n");
#else
    std::fprintf(f, "  --crpm FILE        enable libcrpm checkpointing with config FILE\n");
#endif
    std::fprintf(f, "  --ckpt-every N     checkpoint every N %s (default 10; 0 = never)\n", unit);
    if (withLevel)
        std::fprintf(f, "  --ckpt-level L     1 (node-local, default), 2 (plus partner copy), 3 (plus group parity)\n"
                        "                     or 4 (global HDF5)\n"
                        "  --ckpt-l4-every N  every N-th checkpoint at level 4 instead (0 = never, the default)\n");
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

#ifdef CRPM_APP_FTI
// An FTI call that did not return `want`: as check(), with FTI's return code
// (libfti has printed its own message already).
inline void checkFti(const char *app, int abortCode, int rc, int want, const char *what) {
    if (rc == want) return;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *name = rc == FTI_NSCS ? "FTI_NSCS" : rc == FTI_NREC ? "FTI_NREC" : "unexpected code";
    std::fprintf(stderr, "%s[%d]: %s failed: %s (%d) (%s)\n", app, rank, what, name, rc, crpm_last_error());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, abortCode);
}
#endif

class Checkpointer {
   public:
    Checkpointer(const char *app, const Options &o, int abortCode = 1) : app_(app), o_(o), abort_(abortCode) {}

    bool enabled() const { return o_.config != nullptr; }
    void check(int rc, const char *what) const { crpm_app::check(app_, abort_, rc, what); }

#ifndef CRPM_APP_FTI
    void init(MPI_Comm comm) { check(crpm_init(o_.config, comm), "crpm_init"); }
    void protect(int id, void *p, int64_t count, crpm_type_t type, const char *what) {
        check(crpm_protect(id, p, count, type), what);
    }
    // After every protect: recovers the newest checkpoint if there is one.
    // Returns 0 (fresh start) or the CRPM_STATUS_* of the checkpoint recovered.
    int recoverIfAny() {
        const int st = crpm_status();
        check(st, "crpm_status");
        if (st > 0) check(crpm_recover(), "crpm_recover");
        return st;
    }
#else
    // No head processes (head = 0 or the layer's "runs without heads"), so
    // the application's communicator stays usable as it is.
    void init(MPI_Comm comm) { checkFti(FTI_Init(o_.config, comm), FTI_SCES, "FTI_Init"); }
    void protect(int id, void *p, int64_t count, crpm_type_t type, const char *what) {
        checkFti(FTI_Protect(id, p, count, ftiType(type)), FTI_SCES, what);
    }
    int recoverIfAny() {
        const int st = FTI_Status();
        if (st < 0) checkFti(st, FTI_SCES, "FTI_Status");
        if (st == 0) return CRPM_STATUS_FRESH;
        // FTI_Status only says that a checkpoint waits; which level it is
        // (for the application's notice) libcrpm knows.
        const int level = crpm_status();
        check(level, "crpm_status");
        checkFti(FTI_Recover(), FTI_SCES, "FTI_Recover");
        return level > 0 ? level : CRPM_STATUS_L1;
    }
#endif
    // Is step a checkpoint step (checkpointing on, every N)?
    bool due(long long step) const { return enabled() && o_.every > 0 && step % o_.every == 0; }
    // Checkpoint `id` at the configured level; counted and timed.
    void checkpoint(int id) {
        const double t0 = MPI_Wtime();
        const int level = o_.l4_every > 0 && (count_ + 1) % o_.l4_every == 0 ? CRPM_L4 : o_.level;
#ifndef CRPM_APP_FTI
        check(crpm_checkpoint(id, level), "crpm_checkpoint");
#else
        checkFti(FTI_Checkpoint(id, level), FTI_DONE, "FTI_Checkpoint");
#endif
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
#ifndef CRPM_APP_FTI
    void finalize() { check(crpm_finalize(), "crpm_finalize"); }
#else
    void finalize() { checkFti(FTI_Finalize(), FTI_SCES, "FTI_Finalize"); }
#endif

   private:
#ifdef CRPM_APP_FTI
    void checkFti(int rc, int want, const char *what) const { crpm_app::checkFti(app_, abort_, rc, want, what); }
    // FTI's handle for a libcrpm type: the predefined C types have FTI
    // handles of their own; anything else (long long, structs) becomes an
    // FTI byte record of the same size, one per size.
    fti_id_t ftiType(const crpm_type_t &t) {
        switch (t.code) {
            case CRPM_TC_CHAR: return FTI_CHAR;
            case CRPM_TC_SHORT: return FTI_SHRT;
            case CRPM_TC_INT: return FTI_INTG;
            case CRPM_TC_LONG: return FTI_LONG;
            case CRPM_TC_UINT: return FTI_UINT;
            case CRPM_TC_ULONG: return FTI_ULNG;
            case CRPM_TC_FLOAT: return FTI_SFLT;
            case CRPM_TC_DOUBLE: return FTI_DBLE;
            case CRPM_TC_LDOUBLE: return FTI_LDBE;
            default: break;
        }
        for (const auto &r : records_)
            if (r.first == t.size) return r.second;
        if (t.size <= 0 || t.size > INT_MAX) checkFti(FTI_NSCS, FTI_SCES, "FTI_InitType (element size)");
        fti_id_t h = 0;
        checkFti(FTI_InitType(&h, int(t.size)), FTI_SCES, "FTI_InitType");
        records_.emplace_back(t.size, h);
        return h;
    }
    std::vector<std::pair<int64_t, fti_id_t>> records_;
#endif
    const char *app_;
    Options o_;
    int abort_;
    int count_ = 0;
    double seconds_ = 0.0;
};

}  // namespace crpm_app

#endif
