/* The no_checksums open option is a benchmark baseline: a library built
 * with CRPM_TEST_HOOKS creates the container without data CRCs, any other
 * refuses it (CRPM_ERR_NOTSUP) and creates nothing, never silently
 * checksumming anyway.  CTest says which build this is (CRPM_TEST_HOOKS). */
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    const char *hv = getenv("CRPM_TEST_HOOKS");
    if (!hv)
        check_skip("run through CTest, which sets CRPM_TEST_HOOKS to the build's setting");
    int hooks = strcmp(hv, "OFF") != 0;
    char path[512];
    snprintf(path, sizeof path, "%s/baseline-%d.crpm", dir, (int)getpid());
    unlink(path);
    crpm_open_opts o = {.path = path, .create = 1, .no_checksums = 1};
    crpm_container *c = NULL;
    int rc = crpm_container_open(&o, &c, NULL);
    struct stat st;
    if (!hooks) {
        CHECK(rc == CRPM_ERR_NOTSUP && strstr(crpm_last_error(), "CRPM_TEST_HOOKS"),
              "no_checksums without the hooks: %d (%s)", rc, crpm_last_error());
        CHECK(stat(path, &st) != 0, "a refused open left %s behind", path);
    } else {
        REQUIRE(rc == 0, "no_checksums with the hooks: %d (%s)", rc, crpm_last_error());
        crpm_container_close(c);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        REQUIRE(crpm_inspect_file(path, f) == 0, "inspect");
        fclose(f);
        CHECK(strstr(buf, "data checksums: none") != NULL, "the baseline container has CRCs:\n%s", buf);
        free(buf);
    }
    unlink(path);
    return check_summary(hooks ? "no_checksums baseline (hooks)" : "no_checksums refused (no hooks)");
}
