/* Persistence-domain simulator for crash tests (persist_sim.c): a backend
 * (crpm_open_opts.backend) that keeps a private "media" image of the file.
 * Only flushed+drained lines reach it; at each drain a callback may take
 * crash images in which every 64-B line that differs between mapping and
 * media is old, new or torn at 8-B words.  Test-only (crpm_testsupport):
 * never part of libcrpm. */
#ifndef CRPM_TESTS_PERSIST_SIM_H
#define CRPM_TESTS_PERSIST_SIM_H
#include <stdint.h>
#include "persist.h"

typedef void (*crpm_sim_drain_cb)(void *arg, crpm_media *m);
extern const crpm_backend crpm_backend_sim;
void crpm_sim_set_callback(crpm_sim_drain_cb cb, void *arg); /* for media opened after */
enum crpm_sim_mode { CRPM_SIM_NONE_LANDED, CRPM_SIM_ALL_LANDED, CRPM_SIM_RANDOM };
/* Writes a crash image of m (m->size bytes) to out. */
void crpm_sim_crash_image(crpm_media *m, int mode, uint64_t *rng, char *out);
/* Stores that arrived while a drain was running (a worker still writing
 * after the fence): must stay 0. */
unsigned long long crpm_sim_late_stores(void);
/* 1: stores yield now and then, so concurrent writers interleave in more
 * orders. */
void crpm_sim_set_jitter(int on);
/* The media image (what is durable now), m->size bytes. */
const char *crpm_sim_media(crpm_media *m);

#endif
