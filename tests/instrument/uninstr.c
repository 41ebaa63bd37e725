/* Writers the pass does not see: compiled by the project's compiler without
 * the plugin (test_instr.c is compiled with it). */
#include <stddef.h>
#include <string.h>

void uninstr_write(void *p, size_t n, unsigned char v) { memset(p, v, n); }
void uninstr_copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
