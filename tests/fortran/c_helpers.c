/* C helpers of test_protect.F90.
 *
 * crpm_protect is interposed here: the executable's definition takes
 * precedence over libcrpm.so's for the calls made by libcrpmf, so the test
 * can see exactly what the bindings handed to the C API (type code, element
 * size, count, address), and that refused sections never reached it. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

#include "crpm.h"

int crpm_test_c_constants(int32_t *vals, int n);
int crpm_test_recorded(int id, int32_t *code, int64_t *size, int64_t *count, void **ptr);
int crpm_test_recorded_mode(int id);

/* The C values of every constant the Fortran module mirrors, in the order
 * test_protect.F90 lists them; returns how many there are. */
int crpm_test_c_constants(int32_t *vals, int n)
{
    const int32_t c[] = {
        CRPM_SUCCESS, CRPM_ERR_INVAL, CRPM_ERR_STATE, CRPM_ERR_NOMEM, CRPM_ERR_IO,
        CRPM_ERR_CONFIG, CRPM_ERR_CORRUPT, CRPM_ERR_VERSION, CRPM_ERR_FORMAT,
        CRPM_ERR_TRUNCATED, CRPM_ERR_GEOMETRY, CRPM_ERR_IDENTITY, CRPM_ERR_MISMATCH,
        CRPM_ERR_NOCKPT, CRPM_ERR_EPOCH, CRPM_ERR_MPI, CRPM_ERR_REMOTE, CRPM_ERR_MISSING,
        CRPM_ERR_NRANKS, CRPM_ERR_HDF5, CRPM_ERR_NOTSUP, CRPM_ERR_RANGE, CRPM_ERR_BUSY, CRPM_ERR_DEVICE,
        CRPM_DEVICE_DEFAULT, CRPM_DEVICE_DIFF, CRPM_DEVICE_FINGERPRINT, CRPM_DEVICE_FULL,
        CRPM_L1, CRPM_L2, CRPM_L3, CRPM_L4, CRPM_STATUS_FRESH, CRPM_STATUS_L1, CRPM_STATUS_L4, CRPM_STATUS_L2,
        CRPM_STATUS_L3, CRPM_STATUS_RESHAPED, CRPM_MAX_DIMS,
        CRPM_SNAP_NONE, CRPM_SNAP_RECOVERED, CRPM_SNAP_CHECKPOINTED, CRPM_SNAP_EXIT,
        CRPM_TC_CHAR, CRPM_TC_SHORT, CRPM_TC_INT, CRPM_TC_LONG, CRPM_TC_LLONG,
        CRPM_TC_UINT, CRPM_TC_ULONG, CRPM_TC_FLOAT, CRPM_TC_DOUBLE, CRPM_TC_LDOUBLE,
        CRPM_TC_BYTE, CRPM_TC_INT8, CRPM_TC_INT16, CRPM_TC_INT32, CRPM_TC_INT64,
        CRPM_TC_COMPLEX_FLOAT, CRPM_TC_COMPLEX_DOUBLE, CRPM_TC_LOGICAL,
        CRPM_TYPE_USER, CRPM_VERSION_MAJOR, CRPM_VERSION_MINOR, CRPM_VERSION_PATCH,
        (int32_t)sizeof(crpm_stats_t),
    };
    const int count = (int)(sizeof c / sizeof c[0]);
    for (int i = 0; i < count && i < n; i++)
        vals[i] = c[i];
    return count;
}

#define MAX_RECORDS 4096

static struct record {
    int id;
    crpm_type_t type;
    int64_t count;
    void *ptr;
    int mode; /* crpm_protect_device's; -1: crpm_protect */
} records[MAX_RECORDS];
static int nrecords;

int crpm_protect(int id, void *ptr, int64_t count, crpm_type_t type)
{
    static int (*real_protect)(int, void *, int64_t, crpm_type_t);
    if (!real_protect) {
        /* POSIX-sanctioned way to turn dlsym's void * into a function pointer. */
        *(void **)&real_protect = dlsym(RTLD_NEXT, "crpm_protect");
        if (!real_protect) {
            fprintf(stderr, "test_protect: libcrpm's crpm_protect not found: %s\n", dlerror());
            return CRPM_ERR_NOTSUP;
        }
    }
    if (nrecords < MAX_RECORDS)
        records[nrecords++] = (struct record){id, type, count, ptr, -1};
    return real_protect(id, ptr, count, type);
}

int crpm_protect_device(int id, void *ptr, int64_t count, crpm_type_t type, int mode)
{
    static int (*real_protect)(int, void *, int64_t, crpm_type_t, int);
    if (!real_protect) {
        *(void **)&real_protect = dlsym(RTLD_NEXT, "crpm_protect_device");
        if (!real_protect) {
            fprintf(stderr, "test_protect: libcrpm's crpm_protect_device not found: %s\n", dlerror());
            return CRPM_ERR_NOTSUP;
        }
    }
    if (nrecords < MAX_RECORDS)
        records[nrecords++] = (struct record){id, type, count, ptr, mode};
    return real_protect(id, ptr, count, type, mode);
}

/* The mode of the latest call for `id`: crpm_protect_device's, -1 for
 * crpm_protect, -2 if there was none. */
int crpm_test_recorded_mode(int id)
{
    for (int i = nrecords - 1; i >= 0; i--)
        if (records[i].id == id)
            return records[i].mode;
    return -2;
}

/* The latest call for `id`: 1 and its arguments, or 0 if there was none. */
int crpm_test_recorded(int id, int32_t *code, int64_t *size, int64_t *count, void **ptr)
{
    for (int i = nrecords - 1; i >= 0; i--)
        if (records[i].id == id) {
            *code = records[i].type.code;
            *size = records[i].type.size;
            *count = records[i].count;
            *ptr = records[i].ptr;
            return 1;
        }
    return 0;
}
