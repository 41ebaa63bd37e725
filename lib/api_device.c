/* crpm_protect_device: GPU arrays in a chosen mode (docs/gpu.md).  Plain
 * crpm_protect recognises GPU memory too (api.c, through
 * device/devkind.h); this entry point chooses the mode per array and
 * refuses memory that is not on the GPU. */
#include "api_internal.h"
#include "error.h"
#include "reserved_ids.h"

int crpm_protect_device(int id, void *ptr, int64_t count, crpm_type_t type, int mode)
{
    const char *fn = "crpm_protect_device";
    CRPM_GUARD(fn, 0);
    if (crpm_api_ctx() && crpm_id_reserved(id))
        return crpm_api_report(crpm_error(CRPM_ERR_INVAL, "%s(%d): ids %d to %d are reserved for the library", fn,
                                          id, CRPM_RESERVED_ID_MIN, CRPM_RESERVED_ID_MAX), fn);
    if (mode < CRPM_DEVICE_DEFAULT || mode > CRPM_DEVICE_FULL)
        return crpm_api_report(crpm_error(CRPM_ERR_INVAL, "%s(%d): unknown mode %d (CRPM_DEVICE_DEFAULT, _DIFF, "
                                          "_FINGERPRINT or _FULL)", fn, id, mode), fn);
    if (count > 0 && !ptr)
        return crpm_api_report(crpm_error(CRPM_ERR_INVAL, "%s(%d): NULL pointer with %lld elements", fn, id,
                                          (long long)count), fn);
    return crpm_protect_mem(id, ptr, count, type, fn, mode, 1);
}
