/* Exact page-write tracker for user arrays (opt-in change tracking).
 *
 * Built on the kernel's userfaultfd asynchronous write-protect mode
 * (UFFD_FEATURE_WP_ASYNC + UFFD_FEATURE_WP_UNPOPULATED) and the PAGEMAP_SCAN
 * ioctl on /proc/self/pagemap, both Linux >= 6.7.  A registered page is
 * write-protected in the page table; the first write to it (by the CPU, or by
 * the kernel on the process's behalf: read(2) into it, process_vm_writev(2)
 * from another process, writes to /proc/PID/mem) takes one minor fault that
 * the kernel resolves itself by clearing the protection, which PAGEMAP_SCAN
 * then reports as "written".  The scan re-protects what it reports in the
 * same page-table walk, so no write is ever lost between report and re-arm.
 *
 * NOT tracked: writes that do not go through this process's page table --
 * DMA into pinned pages (RDMA/InfiniBand registered memory, GPU direct,
 * O_DIRECT/io_uring I/O still in flight during a scan), writes by other
 * processes through their own mapping of shared memory (MAP_SHARED, shm,
 * XPMEM, MPI shared-memory windows).  Arrays written that way must not rely on
 * the tracker.
 *
 * Semantics:
 *  - Pages are reported, never bytes: edge pages of a range that is not page
 *    aligned are shared with other data and may be reported because of it.
 *  - A page that crpm_tracker_add() starts tracking (it was not tracked by
 *    this tracker before) is reported ONCE by the next scan covering it, even
 *    if not written since: the tracker cannot know what happened to it before.
 *    Pages already tracked keep their state, so re-adding (re-protecting) an
 *    array never loses a pending write.  Net effect: the scans report a
 *    superset of "written since the last scan of those pages (or since add)",
 *    and the engine needs no special case for newly protected, re-protected,
 *    realloc'd or re-mapped arrays.
 *  - If part of a scanned range is no longer registered (mremap by realloc,
 *    munmap + mmap at the same address), the scan reports the whole range as
 *    written and registers it again.
 *  - On any error return from crpm_tracker_scan() the caller must treat the
 *    whole range as written (the tracker also reports it so, as far as it
 *    got).
 *  - A scan clears what it reports: a caller that fails to use a report (a
 *    checkpoint that aborts) must remember it, or compare everything next
 *    time.
 *  - Huge pages: transparent huge pages are write-protected whole, and the
 *    first write to one after a scan splits it (the tracker then reports 4 KiB
 *    pages; khugepaged does not collapse page tables holding write-protected
 *    entries, so the array keeps 4 KiB pages while tracked: more TLB misses).  hugetlbfs memory is tracked at
 *    huge-page granularity when the range is huge-page aligned; otherwise add
 *    gives CRPM_ERR_NOTSUP.
 *  - A tracker is not thread-safe (one caller at a time), but writes by any
 *    thread of the process, concurrent with a scan, are tracked.  It belongs
 *    to the process that opened it: in a fork()ed child add and scan fail
 *    with CRPM_ERR_STATE (the child must open its own tracker).
 *
 * Privileges: the userfaultfd is created with UFFD_USER_MODE_ONLY, which any
 * user may do (vm.unprivileged_userfaultfd = 0 only forbids userfaultfds that
 * would also trap faults taken in kernel mode).  In asynchronous write-protect
 * mode the kernel never delivers a fault to user space, so kernel-mode writes
 * (read(2), process_vm_writev(2)) are tracked all the same; the tests check it
 * both with and without the flag.  Test knobs (environment, read at open):
 *   CRPM_TRACK_USER_MODE_ONLY=0  create the userfaultfd without the flag
 *                                (needs CAP_SYS_PTRACE or the sysctl)
 *   CRPM_TRACK_VEC_LEN=n         regions fetched per PAGEMAP_SCAN call
 *   CRPM_TRACK_HOLE_PASS=0|1     force the extra pass that finds registered
 *                                pages without page tables (default: on only
 *                                when the kernel does not report them as
 *                                written, Linux 6.7 until that was fixed) */
#ifndef CRPM_TRACK_H
#define CRPM_TRACK_H

#include <stddef.h>

typedef struct crpm_tracker crpm_tracker;

/* CRPM_ERR_NOTSUP with a message when the kernel/permissions do not allow it
 * (then the engine falls back to comparing everything). */
int crpm_tracker_open(crpm_tracker **out);

/* Start tracking [ptr, ptr+len): registers the covering pages (write-protect,
 * async) so later writes (by the CPU or by the kernel on the process's behalf,
 * e.g. read(2) into the buffer) are recorded.  Registering a range overlapping
 * an already tracked one must work (re-protect of the same array).
 * CRPM_ERR_NOTSUP when the kernel refuses to register the memory (another
 * userfaultfd owns it, hugetlbfs, special mappings). */
int crpm_tracker_add(crpm_tracker *t, void *ptr, size_t len);

/* Reports, through fn, every page-aligned sub-range of [ptr, ptr+len) written
 * since the last scan of those pages (or since add), as byte offsets relative
 * to ptr clipped to [0,len), coalesced, in increasing order; and
 * write-protects them again atomically (PM_SCAN_WP_MATCHING), so a write
 * racing with the scan is reported either now or next time, never lost. */
int crpm_tracker_scan(crpm_tracker *t, void *ptr, size_t len,
                      void (*fn)(void *arg, size_t off, size_t len), void *arg);

/* NULL when every page of [ptr, ptr+len) lies in private anonymous memory,
 * the only kind whose every CPU write goes through this process's page
 * table; otherwise why not (a static string).  Other kinds must be compared:
 * a shared mapping (a memfd or shm mapped twice, MAP_SHARED|MAP_ANONYMOUS
 * after fork, an MPI shared-memory window) can be written through another
 * mapping, and a private file mapping shows the file's later changes on the
 * pages it has not copied yet.  Uses the PROCMAP_QUERY ioctl (Linux >= 6.11)
 * or else parses /proc/self/maps; checked when the array is protected. */
const char *crpm_tracker_memory_check(crpm_tracker *t, const void *ptr, size_t len);

void crpm_tracker_close(crpm_tracker *t);

#endif
