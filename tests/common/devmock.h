/* The mock GPU device (devops_mock.c): host memory standing for device
 * memory behind lib/device's table of device operations, so that the CUDA
 * memory kinds' own code runs without a GPU.  Test code only: test programs
 * link the object library crpm_devmock (tests/CMakeLists.txt); a test-hook
 * build's libcrpm carries it for jobs run with CRPM_TEST_DEVICE=mock. */
#ifndef CRPM_TEST_DEVMOCK_H
#define CRPM_TEST_DEVMOCK_H

#include <stdint.h>
#include "devops.h"

extern const crpm_devops crpm_devops_mock;
/* Failure injection: the n-th (1-based) future call of op ("alloc",
 * "host_alloc", "copy", "compare", "gather", "wait", "query") fails; 0 clears.
 * Also set by CRPM_TEST_DEVICE=mock:OP=N[,OP=N]. */
void crpm_devmock_fail(const char *op, int n);
/* Bytes the mock moved device-to-host and host-to-device, and the largest
 * amount of device memory it held at once. */
void crpm_devmock_counters(uint64_t *d2h, uint64_t *h2d, uint64_t *dev_peak);
void crpm_devmock_peak_reset(void); /* the peak starts again from what is held now */
/* use() calls of this thread not yet paired with unuse() (0 between calls of the kinds). */
int crpm_devmock_use_depth(void);

#endif
