/* Memory kinds: where a protected array's bytes live.
 *
 * A crpm_array names its kind (array.h: kind, NULL = host memory).  Every
 * place that reads or writes the bytes of a protected array goes through
 * this interface: the engine's checkpoint (segment sources, packing) and
 * recovery, level 4, the full method, level 2's full-copy baseline and the
 * API's single-array recovery.  Host memory is read and written in place
 * (crpm_array_host returns the pointer), so it costs nothing over a direct
 * pointer; other kinds move their bytes through host buffers.
 *
 * Two families of kinds plug in here without touching those places again:
 *
 *  - Host-addressable memory of another origin (a heap region at a fixed
 *    address, memory of another allocator): CRPM_MEM_HOST, read/write in
 *    place; CRPM_MEM_TRACKABLE when every write to it goes through this
 *    process's page table, so the engine may follow it with the kernel's page
 *    tracker (private anonymous memory; the tracker still checks the mapping
 *    when the array is protected).  A heap protects the extent it uses as the
 *    array (re-protecting it when that grows).
 *
 *  - Memory the CPU cannot address (CUDA device memory, issue 32): no flags;
 *    read (copy out) and write (copy in) move bytes to and from host memory.
 *    That alone is exact but moves every byte at every checkpoint.  A kind
 *    that can find changes itself also provides attach/stage/event/detach:
 *    it keeps its own copy of the last committed state (e.g. on the device),
 *    compares blocks there, and hands the engine only the changed blocks, in
 *    a host buffer, per range (the engine asks segment by segment).  The
 *    engine writes them into the container copy that does not hold the
 *    committed state, exactly as for host arrays, and tells the kind when the
 *    checkpoint committed or failed so it can update or keep its copy.
 *    Recovery checks every chunk's CRC on the host side first, then copies
 *    the bytes in with write.
 *
 * Calls on disjoint ranges of one array, and calls on different arrays, may
 * run concurrently (the parallel engine splits a checkpoint and a recovery
 * per segment across threads); attach, event and detach are never
 * concurrent with other calls for the same array.  Functions return
 * CRPM_SUCCESS or a negative CRPM_ERR_* after crpm_error() set the message;
 * an error fails the checkpoint or recovery, never the process. */
#ifndef CRPM_UTIL_MEMKIND_H
#define CRPM_UTIL_MEMKIND_H
#include <stdint.h>

typedef struct crpm_array crpm_array;
typedef struct crpm_mem_kind crpm_mem_kind;

enum crpm_mem_flags {
    CRPM_MEM_HOST = 1u << 0,      /* ptr is memory the CPU reads and writes in place */
    CRPM_MEM_TRACKABLE = 1u << 1, /* every write goes through this process's page table */
};

/* What stage's caller tells the kind afterwards (event). */
enum crpm_mem_event {
    CRPM_MEM_COMMITTED = 1, /* the checkpoint that staged committed: what it staged is the committed state */
    CRPM_MEM_ABORTED,       /* it failed: the committed state is as before (the next stage has all = 1) */
    CRPM_MEM_SYNCED,        /* recovery just filled the array with the committed state: the kind may take
                               its copy from the array (then the next stage need not have all = 1) */
};

struct crpm_mem_kind {
    const char *name;  /* for messages: "host", "cuda", ... */
    unsigned flags;    /* enum crpm_mem_flags */
    /* Copy out: bytes [off, off + len) of a to host memory dst. */
    int (*read)(const crpm_array *a, uint64_t off, void *dst, uint64_t len);
    /* Copy in: len bytes of host memory src to [off, off + len) of a. */
    int (*write)(const crpm_array *a, uint64_t off, const void *src, uint64_t len);

    /* ---- kinds that find their changes (all four, or none) ---- */
    /* An engine starts following a (called again when a's address or size
     * changed): *state is the kind's, for the calls below.  block: the
     * engine's block size (the granule of stage's report). */
    int (*attach)(const crpm_array *a, uint64_t block, void **state);
    /* Blocks of [off, off + len) (off a multiple of the block size; len
     * ends at a block or at the array's end) that differ from the kind's
     * copy of the committed state: bit i of changed (bit i % 64 of word
     * i / 64, cleared by the caller) stands for the block at off + i * block,
     * and its bytes are copied to host + i * block.  Bytes of other blocks
     * in host are left alone.  A superset is allowed (it costs writes); a
     * changed block not reported is a change lost.  With all != 0 (no copy
     * yet, after open, rollback or a failed checkpoint, a resized range)
     * every block is reported and copied.  The kind keeps what it staged
     * until the event. */
    int (*stage)(void *state, const crpm_array *a, uint64_t off, uint64_t len, int all, uint64_t *changed,
                 void *host);
    /* enum crpm_mem_event, after the checkpoint's commit word (or the
     * recovery) is final; once per checkpoint for each array it staged. */
    void (*event)(void *state, const crpm_array *a, int event);
    void (*detach)(void *state);
};

/* Host memory: read and written in place, trackable. */
extern const crpm_mem_kind crpm_mem_host;

/* helpers: the array's kind (NULL means host memory) ... */
const crpm_mem_kind *crpm_array_kind(const crpm_array *a);
/* ... its bytes in place when the CPU can use them, else NULL ... */
void *crpm_array_host(const crpm_array *a);
/* ... copy out and copy in (memcpy for host memory) ... */
int crpm_array_read(const crpm_array *a, uint64_t off, void *dst, uint64_t len);
int crpm_array_write(const crpm_array *a, uint64_t off, const void *src, uint64_t len);
/* ... all of its bytes readable by the CPU: in place, or copied out into a
 * buffer (*tmp, freed by crpm_array_view_end; NULL in place) ... */
int crpm_array_view(const crpm_array *a, const void **bytes, void **tmp);
void crpm_array_view_end(void *tmp);
/* ... and host memory to fill with all of its bytes: in place, or a buffer
 * that crpm_array_fill_end copies in (when commit) and frees. */
int crpm_array_fill_begin(const crpm_array *a, void **bytes, void **tmp);
int crpm_array_fill_end(const crpm_array *a, void *tmp, int commit);

#endif
