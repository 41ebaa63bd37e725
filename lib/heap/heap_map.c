/* The heap's address range: reserved whole at init (no access, no memory),
 * made usable as the heap grows, released at finalize (heap_map.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "error.h"
#include "heap_map.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17 */
#endif

/* The mappings of this process that overlap [lo, hi), as "start-end name"
 * items separated by "; " (at most len bytes; /proc/self/maps). */
static void who_holds(uint64_t lo, uint64_t hi, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[4096];
    size_t used = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long s, e;
        int name = 0;
        if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &s, &e, &name) < 2 || e <= lo || s >= hi)
            continue;
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        const char *what = name > 0 && line[name] ? line + name : "anonymous memory";
        int n = snprintf(out + used, len - used, "%s%#llx-%#llx %s", used ? "; " : "", s, e, what);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
    fclose(f);
}

int crpm_heap_reserve(uint64_t base, uint64_t size, const char *keys, void **out)
{
    *out = NULL;
    void *p = mmap((void *)(uintptr_t)base, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != MAP_FAILED && (uintptr_t)p == base) {
        *out = p;
        return CRPM_SUCCESS;
    }
    int err = errno;
    if (p != MAP_FAILED) /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
        munmap(p, size);
    char held[1024];
    who_holds(base, base + size, held, sizeof held);
    return crpm_error(CRPM_ERR_NOMEM, "heap: cannot reserve the address range %#llx-%#llx (%llu MiB): %s%s%s; "
                      "move the heap with %s", (unsigned long long)base, (unsigned long long)(base + size),
                      (unsigned long long)(size >> 20), held[0] ? "already in use by " : strerror(err), held,
                      held[0] ? " in this process" : "", keys);
}

int crpm_heap_commit(void *base, uint64_t bytes)
{
    if (mprotect(base, bytes, PROT_READ | PROT_WRITE) != 0)
        return crpm_error(CRPM_ERR_NOMEM, "heap: cannot make %llu bytes at %p usable: %s",
                          (unsigned long long)bytes, base, strerror(errno));
    return CRPM_SUCCESS;
}

int crpm_heap_decommit(void *base, uint64_t size)
{
    void *p = mmap(base, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED)
        return crpm_error(CRPM_ERR_NOMEM, "heap: cannot clear the range at %p: %s", base, strerror(errno));
    return CRPM_SUCCESS;
}

void crpm_heap_unreserve(void *base, uint64_t size)
{
    if (base)
        munmap(base, size);
}
