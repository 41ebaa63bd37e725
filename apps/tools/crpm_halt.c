/* crpm-halt: ask a running libcrpm job to stop at its next checkpoint
 * opportunity (a file HALT in its job directory), withdraw the request, or
 * say whether one is pending.  The job takes a final checkpoint and exits;
 * the launch loop (crpm-run) does not relaunch it while the request stands.
 *
 *   crpm-halt [--reason TEXT] JOBDIR...
 *   crpm-halt --remove JOBDIR...
 *   crpm-halt --status JOBDIR...
 *
 * JOBDIR is <ckpt_dir>/<job_name>; with per-node directories (%n in
 * ckpt_dir) any one node's directory will do. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fsutil.h"
#include "stop.h" /* CRPM_HALT_FILE */

static int usage(FILE *f)
{
    fprintf(f, "usage: crpm-halt [--reason TEXT] JOBDIR...   ask the job to checkpoint and stop\n"
               "       crpm-halt --remove JOBDIR...          withdraw the request\n"
               "       crpm-halt --status JOBDIR...          show it (exit 0: pending everywhere)\n"
               "JOBDIR is <ckpt_dir>/<job_name>.\n");
    return f == stdout ? 0 : 2;
}

/* Written under a temporary name and renamed, so that the job never reads
 * half a reason. */
static int request(const char *dir, const char *path, const char *reason)
{
    char tmp[CRPM_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || dprintf(fd, "%s\n", reason) < 0 || fsync(fd) != 0) {
        fprintf(stderr, "crpm-halt: %s: %s\n", tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 1;
    }
    close(fd);
    if (crpm_durable_rename(tmp, path) != 0) {
        fprintf(stderr, "crpm-halt: %s\n", crpm_last_error());
        crpm_unlink_quiet(tmp);
        return 1;
    }
    printf("%s: halt requested (%s)\n", dir, reason);
    return 0;
}

int main(int argc, char **argv)
{
    enum { REQUEST, REMOVE, STATUS } mode = REQUEST;
    const char *reason = "requested with crpm-halt";
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--remove") == 0)
            mode = REMOVE;
        else if (strcmp(argv[i], "--status") == 0)
            mode = STATUS;
        else if (strcmp(argv[i], "--reason") == 0 && i + 1 < argc && argv[i + 1][0])
            reason = argv[++i];
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage(stdout);
        else if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else
            return usage(stderr);
    }
    if (i == argc)
        return usage(stderr);
    int bad = 0;
    for (; i < argc; i++) {
        const char *dir = argv[i];
        char path[CRPM_PATH_MAX];
        struct stat st;
        /* A typo must not look like success: the directory must exist. */
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "crpm-halt: %s: not a job directory (<ckpt_dir>/<job_name>)\n", dir);
            bad = 1;
            continue;
        }
        if (crpm_name_join(path, sizeof path, dir, CRPM_HALT_FILE) != 0) {
            fprintf(stderr, "crpm-halt: %s: path too long\n", dir);
            bad = 1;
            continue;
        }
        if (mode == REQUEST) {
            bad |= request(dir, path, reason);
        } else if (mode == REMOVE) {
            int had = access(path, F_OK) == 0;
            if (crpm_unlink_quiet(path) != 0 || crpm_sync_dir(dir) != 0) {
                fprintf(stderr, "crpm-halt: %s\n", crpm_last_error());
                bad = 1;
            } else {
                printf("%s: %s\n", dir, had ? "halt request removed" : "no halt request");
            }
        } else {
            char text[512] = "";
            FILE *f = fopen(path, "r");
            if (f) {
                if (!fgets(text, sizeof text, f))
                    text[0] = '\0';
                fclose(f);
                text[strcspn(text, "\n")] = '\0';
                printf("%s: halt requested (%s)\n", dir, text[0] ? text : "no reason given");
            } else {
                printf("%s: no halt request\n", dir);
                bad = 1;
            }
        }
    }
    return bad;
}
