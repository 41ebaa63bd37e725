/* Write log (persist.h). */
#include <stdlib.h>
#include <string.h>
#include "grow.h"
#include "persist.h"

void crpm_wlog_note(crpm_wlog *l, uint64_t off, uint64_t len)
{
    if (!len || l->lost)
        return;
    if (l->n) { /* runs arrive mostly in address order: extend the last one */
        crpm_wrange *t = &l->v[l->n - 1];
        if (off >= t->off && off <= t->off + t->len) {
            if (off + len > t->off + t->len)
                t->len = off + len - t->off;
            return;
        }
    }
    if (CRPM_GROW(l->v, l->cap, l->n + 1, 256)) {
        l->lost = 1;
        return;
    }
    l->v[l->n++] = (crpm_wrange){off, len};
}

static int cmp_range(const void *a, const void *b)
{
    const crpm_wrange *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

void crpm_wlog_normalize(crpm_wlog *l)
{
    if (l->n < 2)
        return;
    qsort(l->v, l->n, sizeof *l->v, cmp_range);
    size_t m = 0;
    for (size_t i = 1; i < l->n; i++) {
        crpm_wrange *t = &l->v[m];
        if (l->v[i].off <= t->off + t->len) {
            if (l->v[i].off + l->v[i].len > t->off + t->len)
                t->len = l->v[i].off + l->v[i].len - t->off;
        } else {
            l->v[++m] = l->v[i];
        }
    }
    l->n = m + 1;
}

void crpm_wlog_merge(crpm_wlog *dst, const crpm_wlog *src)
{
    dst->lost |= src->lost;
    for (size_t i = 0; i < src->n; i++)
        crpm_wlog_note(dst, src->v[i].off, src->v[i].len);
    crpm_wlog_normalize(dst);
}

void crpm_wlog_clear(crpm_wlog *l)
{
    l->n = 0;
    l->lost = 0;
}

void crpm_wlog_free(crpm_wlog *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ---- views for concurrent stores (persist.h) ------------------------------ */

int crpm_persist_view(crpm_media *m, crpm_media *view, crpm_wlog *log)
{
    *view = *m;
    view->log = NULL;
    if (m->log) {
        crpm_wlog_clear(log);
        view->log = log;
    }
    return m->ops->view_begin ? m->ops->view_begin(m, view) : 0;
}

void crpm_persist_view_end(crpm_media *m, crpm_media *view, crpm_wlog *log)
{
    if (m->ops->view_end)
        m->ops->view_end(m, view);
    if (m->log && view->log == log) { /* appended: the log's reader normalizes */
        m->log->lost |= log->lost;
        for (size_t i = 0; i < log->n; i++)
            crpm_wlog_note(m->log, log->v[i].off, log->v[i].len);
    }
    view->log = NULL;
}
