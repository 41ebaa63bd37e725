/* The copy level (copy_level.c): a follower defined outside the library. */
#ifndef CRPM_TESTS_COPY_LEVEL_H
#define CRPM_TESTS_COPY_LEVEL_H

/* crpm_checkpoint(id, COPY_LEVEL) takes it; a restart it repairs has
 * crpm_status() == COPY_LEVEL. */
#define COPY_LEVEL 5

/* Before crpm_init: the level joins the level table, its copies in dir. */
int copy_level_register(const char *dir);

#endif
