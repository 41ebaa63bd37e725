/*
 * libcrpm: the interface between code compiled with the libcrpm pass plugin
 * for clang (lib/instrument, `-fpass-plugin=`) and the library's
 * instrumented change tracking (change_tracking = instrumented; see
 * docs/tracking.md).  Instrumented code calls these; a program normally never
 * does, except crpm_instr_written for bytes written by code the pass did not
 * compile.
 *
 * The box is the one word the pass reads before each store: it bounds every
 * range of checkpointed memory (protected arrays, the heap) in 64 KiB units,
 * low 32 bits the first unit (the ranges' lowest address minus 64, rounded
 * down), high 32 bits the number of units.  A store at p that may touch
 * checkpointed memory satisfies (p >> 16) - lo < span, unsigned; everything
 * else costs that compare alone.  One word, so a reader never sees half of
 * an update.  Inside the box the pass marks the shadow byte itself, and
 * calls crpm_instr_mark only for a store that crosses a granule.
 */
#ifndef CRPM_INSTRUMENT_H
#define CRPM_INSTRUMENT_H

#include <stddef.h>
#include <stdint.h>
#include "crpm_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRPM_INSTR_BOX_SHIFT 16
#define CRPM_INSTR_GRANULE_SHIFT 8 /* a mark covers 256 bytes: shadow byte crpm_instr_shadow[p >> 8] */
#define CRPM_INSTR_MAX_STORE 64   /* stores up to this many bytes use the box check; larger ones call mark_range */

CRPM_API extern uint64_t crpm_instr_box;
/* One byte a 256-byte granule of the address space (set before the box is
 * first set, never changed): a store at p in the box marks
 * crpm_instr_shadow[p >> CRPM_INSTR_GRANULE_SHIFT] (and the granule of its
 * last byte), setting it to 1 unless it is set already. */
CRPM_API extern unsigned char *crpm_instr_shadow;

/* A store of n bytes (1..CRPM_INSTR_MAX_STORE) at p passed the box check:
 * marks the granules it touched. */
CRPM_API void crpm_instr_mark(const void *p, size_t n);
/* Bytes [p, p+n) were (or are about to be, the pass calls it after the
 * write) written: any length, checks the box itself. */
CRPM_API void crpm_instr_mark_range(const void *p, size_t n);
/* Called once by each module compiled with the pass when it is loaded (a
 * constructor the pass adds): without any, instrumented tracking compares
 * instead of missing every write. */
CRPM_API void crpm_instr_module(void);
/* For programs: bytes [p, p+n) were written by code the pass did not
 * compile (a library, an assembler routine, a device); the same as
 * crpm_instr_mark_range, named for what it is for. */
CRPM_API void crpm_instr_written(const void *p, size_t n);

#ifdef __cplusplus
}
#endif
#endif
