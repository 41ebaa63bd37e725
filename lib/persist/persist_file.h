/* File mapping helpers shared by the real backends and the simulator. */
#ifndef CRPM_PERSIST_FILE_H
#define CRPM_PERSIST_FILE_H
#include "persist.h"
int crpm_file_map(crpm_media *m, const char *path);
int crpm_file_resize(crpm_media *m, const char *path, size_t new_size);
void crpm_file_unmap(crpm_media *m);
int crpm_file_reserve(const char *path, size_t off, size_t len);
/* Creates `path` atomically: a temporary file of `size` bytes whose first
 * `len` bytes are `init` (only those have storage; the rest is sparse) is
 * made durable and then renamed into place. */
int crpm_persist_create_file(const char *path, size_t size, const void *init, size_t len);
#endif
