/* File-system rules, each in one place: directory creation, durable rename
 * and removal, the job-name rule and the names of every checkpoint file. */
#ifndef CRPM_UTIL_FSUTIL_H
#define CRPM_UTIL_FSUTIL_H
#include <stddef.h>
#include <stdint.h>

/* Longest path the library builds (including the NUL). */
#define CRPM_PATH_MAX 4096
/* Longest job name (including the NUL); it is stored in every container. */
#define CRPM_JOB_MAX 128

/* Creates dir and its parents; an existing directory is fine. */
int crpm_mkdir_p(const char *dir);
/* fsync of a directory, so renames and unlinks in it are durable. */
int crpm_sync_dir(const char *dir);
/* fsync of a file by name. */
int crpm_sync_file(const char *path);
/* rename(from, to), then fsync of to's directory; either failure is reported. */
int crpm_durable_rename(const char *from, const char *to);
/* unlink that treats a missing file as success. */
int crpm_unlink_quiet(const char *path);
/* Opens path (open(2) flags) only if it is a regular file: opened with
 * O_NONBLOCK and checked with fstat, so a FIFO never blocks and a device is
 * never read.  Returns the descriptor in *fd (O_CLOEXEC), or CRPM_ERR_IO with
 * a message; *missing (may be NULL) is set when the file does not exist. */
int crpm_open_regular(const char *path, int flags, int *fd, int *missing);

/* Job names become directory names: 1..CRPM_JOB_MAX-1 characters of
 * [A-Za-z0-9_.-], not "." or "..".  Returns 1 if valid. */
int crpm_job_name_valid(const char *name);

/* Checkpoint file names (return 0, or CRPM_ERR_RANGE if out is too small). */
int crpm_name_join(char *out, size_t len, const char *dir, const char *name);
int crpm_name_container(char *out, size_t len, const char *job_dir, int rank);   /* rank-<r>.crpm */
int crpm_name_rank_lock(char *out, size_t len, const char *job_dir, int rank);   /* rank-<r>.lock */
/* Level 2: the partner copy of rank `owner`'s container, on the holder's node. */
int crpm_name_partner(char *out, size_t len, const char *job_dir, int owner);    /* partner-<owner>.crpm */
/* Parses "partner-<r>.crpm"; returns r or -1. */
int crpm_parse_partner_name(const char *name);
/* Level 3: rank r's parity container, in r's node's job directory. */
int crpm_name_parity(char *out, size_t len, const char *job_dir, int rank);      /* parity-<r>.crpm */
/* Parses "parity-<r>.crpm"; returns r or -1. */
int crpm_parse_parity_name(const char *name);
int crpm_name_l4(char *out, size_t len, const char *dir, int ckpt_id);           /* l4-<id>.h5 */
int crpm_name_full(char *out, size_t len, const char *dir, int rank, uint64_t id, int tmp);
/* Parses "rank-<r>.crpm"; returns r or -1. */
int crpm_parse_container_name(const char *name);
/* Parses "full-<id>.rank-<r>"; returns r and sets *id, or -1. */
int crpm_parse_full_name(const char *name, uint64_t *id);
/* Parses "l4-<id>.h5"; returns 0 and sets *id, or -1. */
int crpm_parse_l4_name(const char *name, int32_t *id);

/* Takes an exclusive lock (an open file description lock, which the kernel
 * drops when the process dies) on `path`, created if missing, waiting up to
 * wait_s seconds for a holder to go; records "pid host" in the file.  *fd
 * holds the lock until crpm_unlock_file.  CRPM_ERR_BUSY names the holder.
 * The directory is made again when a finishing job removed it meanwhile. */
int crpm_lock_file(const char *path, double wait_s, int *fd);
/* remove: unlink the lock file first (it is ours, nobody waits on its name). */
void crpm_unlock_file(int fd, const char *path, int remove);

#endif
