/* INI text parsing (initext.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "initext.h"

void crpm_initext_fail(crpm_initext *t, const char *fmt, ...)
{
    if (t->err_line)
        return; /* the first error is the one worth reading */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof t->err, fmt, ap);
    va_end(ap);
    t->err_line = t->line;
}

/* fgets-like reader over the text. */
static char *reader(char *str, int num, void *stream)
{
    crpm_initext *t = stream;
    if (*t->text == '\0' || num < 2)
        return NULL;
    const char *nl = strchr(t->text, '\n');
    size_t len = nl ? (size_t)(nl - t->text) + 1 : strlen(t->text);
    t->line++;
    if (len > (size_t)num - 1) {
        /* inih would split the line and parse the tail as a new line */
        crpm_initext_fail(t, "line longer than %d characters", num - 2);
        str[0] = '\n';
        str[1] = '\0';
    } else {
        memcpy(str, t->text, len);
        str[len] = '\0';
    }
    t->text += len;
    return str;
}

int crpm_initext_parse(crpm_initext *t, const char *text, ini_handler handler, void *user)
{
    t->text = text;
    t->line = t->err_line = 0;
    t->err[0] = '\0';
    int rc = ini_parse_stream(reader, t, handler, user);
    if (rc == -2)
        return -2;
    if (rc > 0 && (!t->err_line || rc < t->err_line)) {
        t->err_line = rc;
        snprintf(t->err, sizeof t->err, "syntax error (expected [section] or key = value)");
    }
    if (t->err_line || rc != 0)
        return -1;
    return 0;
}
