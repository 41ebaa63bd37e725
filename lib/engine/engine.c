/* Engine entry points around the container format: open and close with the
 * optional page-write tracker. */
#include <stdio.h>
#include "engine.h"
#include "track.h"

int crpm_container_open(const crpm_open_opts *o, crpm_container **out, int *created)
{
    int rc = crpm_format_open(o, out, created);
    if (rc != 0)
        return rc;
    crpm_container *c = *out;
    c->want_tracking = o->change_tracking;
    if (o->change_tracking && crpm_tracker_open(&c->trk) != 0) {
        c->trk = NULL; /* compare everything: always exact */
        snprintf(c->track_msg, sizeof c->track_msg, "%s", crpm_last_error());
        crpm_error_clear();
    }
    return CRPM_SUCCESS;
}

int crpm_container_close(crpm_container *c)
{
    if (!c)
        return CRPM_SUCCESS;
    if (c->trk)
        crpm_tracker_close(c->trk);
    c->trk = NULL;
    crpm_format_close(c);
    return CRPM_SUCCESS;
}

const char *crpm_container_tracking(const crpm_container *c)
{
    if (c->trk)
        return "pagemap";
    return c->want_tracking ? c->track_msg : NULL;
}
