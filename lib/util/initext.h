/* INI text held in memory, parsed with inih line by line.  The reader counts
 * lines (this inih build does not pass line numbers to the handler) and the
 * first error is kept with its line, for messages that name file and line. */
#ifndef CRPM_UTIL_INITEXT_H
#define CRPM_UTIL_INITEXT_H
#include <ini.h>

typedef struct crpm_initext {
    const char *text;  /* unread rest of the input */
    int line;          /* line being parsed */
    int err_line;      /* line of the first error (0 = none) */
    char err[512];
} crpm_initext;

/* Records an error at the current line unless one was recorded already. */
void crpm_initext_fail(crpm_initext *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses text, calling handler(user, section, key, value) per key; the
 * handler reports its errors with crpm_initext_fail.  Returns 0; -1 with
 * t->err_line / t->err set (syntax errors included; err_line 0: the text
 * could not be parsed); -2 when out of memory. */
int crpm_initext_parse(crpm_initext *t, const char *text, ini_handler handler, void *user);

#endif
