// OpenMP for the proxy applications' loops, compiled in only in their -omp
// builds (apps/hpccg, apps/lulesh); a build without -fopenmp sees plain
// loops and no unknown-pragma warnings.  Only loops whose iterations write
// disjoint elements are parallel, so a loop's results do not depend on the
// number of threads.
#pragma once

#ifdef _OPENMP
#include <omp.h>
#define APP_OMP_PRAGMA(x) _Pragma(#x)
#define APP_OMP_FOR APP_OMP_PRAGMA(omp parallel for schedule(static))
// min and max are exact whatever the order in which partial results combine.
#define APP_OMP_FOR_MIN2(a, b) APP_OMP_PRAGMA(omp parallel for schedule(static) reduction(min : a, b))
#define APP_OMP_FOR_MAX(a) APP_OMP_PRAGMA(omp parallel for schedule(static) reduction(max : a))
namespace app_omp {
inline int threads() { return omp_get_max_threads(); }
}  // namespace app_omp
#else
#define APP_OMP_FOR
#define APP_OMP_FOR_MIN2(a, b)
#define APP_OMP_FOR_MAX(a)
namespace app_omp {
inline int threads() { return 1; }
}  // namespace app_omp
#endif
