/* Calls of FTI's interface that have no counterpart in libcrpm (fault
 * injection): each returns
 * FTI_NSCS (or NULL) and says so once per process, never crashes. */
#include <fti.h>

#include <stdio.h>
#include <string.h>

#include "fti_internal.h"

/* Calls with no counterpart in libcrpm: said once per function and process. */
int fti_unsupported(const char *fn, const char *what)
{
    static char seen[32][40];
    static int nseen;
    for (int i = 0; i < nseen; i++)
        if (strcmp(seen[i], fn) == 0)
            return FTI_NSCS;
    if (nseen < 32)
        snprintf(seen[nseen++], sizeof seen[0], "%s", fn);
    fti_say(FTI_EROR, 1, "%s is not supported by libcrpm's FTI layer (%s); it returns FTI_NSCS", fn, what);
    return FTI_NSCS;
}

int FTI_BitFlip(int datasetID)
{
    (void)datasetID;
    return fti_unsupported("FTI_BitFlip", "no fault injection");
}
