/* Memory kinds (memkind.h): host memory, and the helpers every reader and
 * writer of protected bytes uses. */
#include <stdlib.h>
#include <string.h>
#include "array.h"
#include "error.h"

static int host_read(const crpm_array *a, uint64_t off, void *dst, uint64_t len)
{
    memcpy(dst, (const char *)a->ptr + off, len);
    return CRPM_SUCCESS;
}

static int host_write(const crpm_array *a, uint64_t off, const void *src, uint64_t len)
{
    memcpy((char *)a->ptr + off, src, len);
    return CRPM_SUCCESS;
}

const crpm_mem_kind crpm_mem_host = {"host", CRPM_MEM_HOST | CRPM_MEM_TRACKABLE, host_read, host_write,
                                     NULL, NULL, NULL, NULL};

const crpm_mem_kind *crpm_array_kind(const crpm_array *a) { return a->kind ? a->kind : &crpm_mem_host; }

void *crpm_array_host(const crpm_array *a)
{
    return !a->kind || (a->kind->flags & CRPM_MEM_HOST) ? a->ptr : NULL;
}

static int out_of_range(const crpm_array *a, uint64_t off, uint64_t len, const char *what)
{
    uint64_t n = crpm_array_bytes(a);
    if (off <= n && len <= n - off)
        return CRPM_SUCCESS;
    return crpm_error(CRPM_ERR_RANGE, "array %d: %s of bytes %llu..%llu beyond its %llu bytes", a->id, what,
                      (unsigned long long)off, (unsigned long long)(off + len), (unsigned long long)n);
}

int crpm_array_read(const crpm_array *a, uint64_t off, void *dst, uint64_t len)
{
    int rc = out_of_range(a, off, len, "read");
    if (rc || !len)
        return rc;
    void *p = crpm_array_host(a);
    if (p) {
        memcpy(dst, (const char *)p + off, len);
        return CRPM_SUCCESS;
    }
    return crpm_array_kind(a)->read(a, off, dst, len);
}

int crpm_array_write(const crpm_array *a, uint64_t off, const void *src, uint64_t len)
{
    int rc = out_of_range(a, off, len, "write");
    if (rc || !len)
        return rc;
    void *p = crpm_array_host(a);
    if (p) {
        memcpy((char *)p + off, src, len);
        return CRPM_SUCCESS;
    }
    return crpm_array_kind(a)->write(a, off, src, len);
}

int crpm_array_view(const crpm_array *a, const void **bytes, void **tmp)
{
    *tmp = NULL;
    *bytes = crpm_array_host(a);
    uint64_t n = crpm_array_bytes(a);
    if (*bytes || !n)
        return CRPM_SUCCESS;
    if (!(*tmp = malloc(n)))
        return crpm_error(CRPM_ERR_NOMEM, "array %d: out of memory for a %llu-byte host copy", a->id,
                          (unsigned long long)n);
    int rc = crpm_array_read(a, 0, *tmp, n);
    if (rc) {
        free(*tmp);
        *tmp = NULL;
        return rc;
    }
    *bytes = *tmp;
    return CRPM_SUCCESS;
}

void crpm_array_view_end(void *tmp) { free(tmp); }

int crpm_array_fill_begin(const crpm_array *a, void **bytes, void **tmp)
{
    *tmp = NULL;
    *bytes = crpm_array_host(a);
    uint64_t n = crpm_array_bytes(a);
    if (*bytes || !n)
        return CRPM_SUCCESS;
    if (!(*tmp = malloc(n)))
        return crpm_error(CRPM_ERR_NOMEM, "array %d: out of memory for a %llu-byte host buffer", a->id,
                          (unsigned long long)n);
    *bytes = *tmp;
    return CRPM_SUCCESS;
}

int crpm_array_fill_end(const crpm_array *a, void *tmp, int commit)
{
    int rc = commit && tmp ? crpm_array_write(a, 0, tmp, crpm_array_bytes(a)) : CRPM_SUCCESS;
    free(tmp);
    return rc;
}
