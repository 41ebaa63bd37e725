/* Assertions, a failure counter and a seeded random generator shared by the
 * C and C++ test programs (tests/<suite>/CMakeLists.txt put tests/common on
 * the include path).  Header-only: every program is one translation unit.
 *
 *   CHECK(cond[, fmt, ...])    counts a failure, prints it and carries on;
 *   REQUIRE(cond[, fmt, ...])  prints the failure and exits with status 1
 *                              (for checks later code depends on, and in
 *                              forked children and threads: it touches no
 *                              shared state unless it fails; not counted);
 *   check_failures(), check_count(), check_summary(name): the totals;
 *   check_set_rank(r)          prefixes messages with the MPI rank;
 *   check_set_note(fn)         appends fn() to every message, e.g.
 *                              crpm_last_error, so a failure shows the
 *                              library's last message;
 *   check_skip(fmt, ...)       prints "SKIP: ..." and exits CHECK_SKIP (77,
 *                              CTest's SKIP_RETURN_CODE of the suites);
 *   rnd, rnd_below, fill_random: splitmix64 with the state in the caller, so
 *                              a seed reproduces a run;
 *   check_flip(path, off, mask) XORs the byte at off of a file with mask
 *                              (corruption tests; exits on an I/O error). */
#ifndef CRPM_TEST_CHECK_H
#define CRPM_TEST_CHECK_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#define CHECK_SKIP 77

#if defined(__GNUC__)
#define CHECK_PRINTF_(f, a) __attribute__((format(printf, f, a)))
#define CHECK_NORETURN_ __attribute__((noreturn))
#else
#define CHECK_PRINTF_(f, a)
#define CHECK_NORETURN_
#endif

typedef struct check_state_ {
    int checks, failures;
    int rank; /* < 0: not an MPI program */
    const char *(*note)(void);
} check_state_;
static check_state_ check_g_ = {0, 0, -1, NULL};

static inline void check_set_rank(int rank) { check_g_.rank = rank; }
static inline void check_set_note(const char *(*note)(void)) { check_g_.note = note; }
static inline int check_failures(void) { return check_g_.failures; }
static inline int check_count(void) { return check_g_.checks; }

/* fmt always starts with the ' ' the macros prepend, so that a check without
 * a message still has a non-empty literal format. */
static inline void check_report_(const char *file, int line, const char *expr, const char *fmt, va_list ap)
{
    char msg[1024] = "";
    if (fmt[0] == ' ' && fmt[1])
        vsnprintf(msg, sizeof msg, fmt + 1, ap);
    char where[32] = "";
    if (check_g_.rank >= 0)
        snprintf(where, sizeof where, " rank %d", check_g_.rank);
    const char *note = check_g_.note ? check_g_.note() : NULL;
    fprintf(stderr, "FAIL%s %s:%d: %s%s%s%s%s%s\n", where, file, line, expr, msg[0] ? ": " : "", msg,
            note && note[0] ? " (last error: " : "", note && note[0] ? note : "", note && note[0] ? ")" : "");
    fflush(stderr);
}

static inline void check_fail_(const char *file, int line, const char *expr, const char *fmt, ...) CHECK_PRINTF_(4, 5);
static inline void check_fail_(const char *file, int line, const char *expr, const char *fmt, ...)
{
    check_g_.failures++;
    va_list ap;
    va_start(ap, fmt);
    check_report_(file, line, expr, fmt, ap);
    va_end(ap);
}

static inline void check_fatal_(const char *file, int line, const char *expr, const char *fmt, ...) CHECK_PRINTF_(4, 5)
    CHECK_NORETURN_;
static inline void check_fatal_(const char *file, int line, const char *expr, const char *fmt, ...)
{
    check_g_.failures++;
    va_list ap;
    va_start(ap, fmt);
    check_report_(file, line, expr, fmt, ap);
    va_end(ap);
    exit(1);
}

#define CHECK(cond, ...)                                                                                   \
    do {                                                                                                   \
        check_g_.checks++;                                                                                 \
        if (!(cond))                                                                                       \
            check_fail_(__FILE__, __LINE__, #cond, " " __VA_ARGS__);                                       \
    } while (0)

#define REQUIRE(cond, ...)                                                                                 \
    do {                                                                                                   \
        if (!(cond))                                                                                       \
            check_fatal_(__FILE__, __LINE__, #cond, " " __VA_ARGS__);                                      \
    } while (0)

/* |got - want| <= tol * (1 + |want|): relative for large values, absolute
 * near zero. */
#define CHECK_CLOSE(got, want, tol, what)                                                                  \
    do {                                                                                                   \
        double check_got_ = (double)(got), check_want_ = (double)(want);                                   \
        double check_d_ = check_got_ - check_want_;                                                        \
        double check_w_ = check_want_ < 0 ? -check_want_ : check_want_;                                    \
        CHECK((check_d_ < 0 ? -check_d_ : check_d_) <= (tol) * (1.0 + check_w_),                           \
              "%s: got %.17g, want %.17g", (what), check_got_, check_want_);                               \
    } while (0)

/* "name: N checks, M failed" on stdout; returns the exit status (0 or 1). */
static inline int check_summary(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, check_g_.checks, check_g_.failures);
    fflush(stdout);
    return check_g_.failures != 0;
}

static inline void check_skip(const char *fmt, ...) CHECK_PRINTF_(1, 2) CHECK_NORETURN_;
static inline void check_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("SKIP: ", stdout);
    vprintf(fmt, ap);
    va_end(ap);
    fputs("\n", stdout);
    fflush(stdout);
    exit(CHECK_SKIP);
}

/* splitmix64 */
static inline uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t rnd_below(uint64_t *s, uint64_t n) { return n ? rnd(s) % n : 0; }

static inline void fill_random(uint64_t *s, char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (char)rnd(s);
}

static inline void check_flip(const char *path, long long off, unsigned mask)
{
    int fd = open(path, O_RDWR); /* lseek + read/write: pread needs more than strict C11's headers */
    unsigned char b;
    REQUIRE(fd >= 0 && lseek(fd, (off_t)off, SEEK_SET) == (off_t)off && read(fd, &b, 1) == 1,
            "%s: cannot read byte %lld", path, off);
    b ^= (unsigned char)mask;
    REQUIRE(lseek(fd, (off_t)off, SEEK_SET) == (off_t)off && write(fd, &b, 1) == 1, "%s: cannot write byte %lld",
            path, off);
    close(fd);
}
#endif
