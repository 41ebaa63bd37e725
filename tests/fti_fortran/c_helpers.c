/* The C layer's values of FTI's return codes, for the constants check. */
#include "fti.h"

int ftif_test_const(int which);

int ftif_test_const(int which)
{
    switch (which) {
    case 0: return FTI_SCES;
    case 1: return FTI_NSCS;
    case 2: return FTI_NREC;
    case 3: return FTI_DONE;
    default: return -1000;
    }
}
