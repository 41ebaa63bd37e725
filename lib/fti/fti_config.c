/* FTI configuration files as FTI users write them.
 *
 * FTI reads its file with iniparser, which ignores the case of sections and
 * keys and the blanks around a section name ("[ Basic ]", "ckpt_L1"), so
 * this reader does too.  What has a meaning in libcrpm is mapped; every other
 * key is collected for one warning.  Values that FTI itself would reject are
 * errors naming the file and the line. */
#include "fti_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "initext.h"

enum key {
    K_HEAD, K_NODE_SIZE, K_GROUP_SIZE, K_CKPT_DIR, K_GLBL_DIR, K_META_DIR,
    K_CKPT_L1, K_CKPT_L2, K_CKPT_L3, K_CKPT_L4,
    K_INLINE_L2, K_INLINE_L3, K_INLINE_L4, K_KEEP_LAST, K_KEEP_L4, K_VERBOSITY, K_ENABLE_DCP, K_CKPT_IO, K_ENABLE_STAGING,
    K_COUNT
};

/* [basic] keys with a meaning here; meta_dir, enable_dcp and ckpt_io are
 * checked and accepted without effect other than FTI_GetConfig's report (metadata lives in the containers, libcrpm is
 * always differential); inline_l2..l4 = 0 (FTI: the head writes the level)
 * become async = 1 (a background thread on every rank writes them). */
static const char *const basic_keys[K_COUNT] = {
    [K_HEAD] = "head", [K_NODE_SIZE] = "node_size", [K_GROUP_SIZE] = "group_size",
    [K_CKPT_DIR] = "ckpt_dir", [K_GLBL_DIR] = "glbl_dir", [K_META_DIR] = "meta_dir",
    [K_CKPT_L1] = "ckpt_l1", [K_CKPT_L2] = "ckpt_l2", [K_CKPT_L3] = "ckpt_l3", [K_CKPT_L4] = "ckpt_l4",
    [K_INLINE_L2] = "inline_l2", [K_INLINE_L3] = "inline_l3", [K_INLINE_L4] = "inline_l4",
    [K_KEEP_LAST] = "keep_last_ckpt", [K_KEEP_L4] = "keep_l4_ckpt", [K_VERBOSITY] = "verbosity",
    [K_ENABLE_DCP] = "enable_dcp", [K_CKPT_IO] = "ckpt_io",
    [K_ENABLE_STAGING] = "enable_staging",
};

typedef struct ctx {
    crpm_initext in;      /* text, line count, first error */
    const char *file;
    fti_settings *s;
    int key_line[K_COUNT];
} ctx;

static int parse_int(const char *v, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || x < lo || x > hi)
        return -1;
    *out = (int)x;
    return 0;
}

/* A path that can be passed on in INI text unchanged. */
static int set_path(char *dst, const char *v)
{
    if (!*v || strlen(v) >= FTI_CFG_PATH_MAX || strpbrk(v, ";#\r\n"))
        return -1;
    strcpy(dst, v);
    return 0;
}

static void add_ignored(ctx *c, const char *section, const char *name)
{
    char item[160];
    if (strcasecmp(section, "basic") == 0)
        snprintf(item, sizeof item, "%s", name);
    else
        snprintf(item, sizeof item, "[%s] %s", *section ? section : "(no section)", name);
    fti_settings *s = c->s;
    size_t used = strlen(s->ignored);
    if (used + strlen(item) + 8 >= sizeof s->ignored) {
        if (!strstr(s->ignored, ", ..."))
            snprintf(s->ignored + used, sizeof s->ignored - used, ", ...");
        return;
    }
    snprintf(s->ignored + used, sizeof s->ignored - used, "%s%s", used ? ", " : "", item);
}

/* Section name without surrounding blanks, lower case. */
static void norm_section(const char *in, char *out, size_t n)
{
    while (isspace((unsigned char)*in))
        in++;
    size_t len = strlen(in);
    while (len && isspace((unsigned char)in[len - 1]))
        len--;
    if (len >= n)
        len = n - 1;
    for (size_t i = 0; i < len; i++)
        out[i] = (char)tolower((unsigned char)in[i]);
    out[len] = '\0';
}

static int handler(void *user, const char *section_raw, const char *name, const char *value)
{
    ctx *c = user;
    fti_settings *s = c->s;
    char section[64];
    norm_section(section_raw, section, sizeof section);
    if (strcmp(section, "restart") == 0)
        s->restart_keys = 1;
    int k = K_COUNT;
    if (strcmp(section, "basic") == 0)
        for (k = 0; k < K_COUNT; k++)
            if (strcasecmp(name, basic_keys[k]) == 0)
                break;
    if (k == K_COUNT) {
        add_ignored(c, section, name);
        return 1;
    }
    if (c->key_line[k]) {
        crpm_initext_fail(&c->in, "duplicate key '%s' (first set on line %d)", name, c->key_line[k]);
        return 0;
    }
    c->key_line[k] = c->in.line;

    int ok = 1, dummy = 0;
    const char *want = "";
    switch (k) {
    case K_HEAD:
        ok = parse_int(value, 0, 1, &s->head) == 0;
        want = "0 or 1";
        break;
    case K_NODE_SIZE:
    case K_GROUP_SIZE:
        ok = parse_int(value, 1, 1 << 20, k == K_NODE_SIZE ? &s->node_size : &s->group_size) == 0;
        s->node_size_set |= k == K_NODE_SIZE;
        want = "a count >= 1";
        break;
    case K_CKPT_DIR:
    case K_GLBL_DIR:
    case K_META_DIR: {
        ok = set_path(k == K_CKPT_DIR ? s->ckpt_dir : k == K_GLBL_DIR ? s->glbl_dir : s->meta_dir, value) == 0;
        want = "a non-empty directory without ';', '#' or line breaks";
        break;
    }
    case K_CKPT_L1:
    case K_CKPT_L2:
    case K_CKPT_L3:
    case K_CKPT_L4:
        ok = parse_int(value, 0, 1 << 30, &s->ckpt_min[1 + k - K_CKPT_L1]) == 0;
        want = "minutes, an integer >= 0";
        break;
    case K_INLINE_L2:
    case K_INLINE_L3:
    case K_INLINE_L4:
    case K_ENABLE_DCP:
    case K_ENABLE_STAGING:
        ok = parse_int(value, 0, 1, &dummy) == 0;
        if (k == K_ENABLE_STAGING) {
            s->enable_staging = dummy;
            want = "0 or 1";
            break;
        }
        if (ok && k != K_ENABLE_DCP && dummy == 0)
            s->async = 1;
        if (k == K_ENABLE_DCP)
            s->enable_dcp = dummy;
        else
            s->inline_l[2 + k - K_INLINE_L2] = dummy;
        want = "0 or 1";
        break;
    case K_CKPT_IO:
        ok = parse_int(value, 1, 5, &s->ckpt_io) == 0;
        want = "1 (POSIX), 2 (MPI-IO), 3 (FTI-FF), 4 (SIONlib) or 5 (HDF5)";
        break;
    case K_KEEP_LAST:
        ok = parse_int(value, 0, 1, &s->keep_last_ckpt) == 0;
        want = "0 or 1";
        break;
    case K_KEEP_L4:
        ok = parse_int(value, 0, 1, &s->keep_l4_ckpt) == 0;
        want = "0 or 1";
        break;
    case K_VERBOSITY:
        ok = parse_int(value, 1, 5, &s->verbosity) == 0;
        want = "1 (debug), 2 (info), 3 (warnings) or 4 (errors)";
        break;
    }
    if (!ok) {
        crpm_initext_fail(&c->in, "bad value '%s' for %s: expected %s", value, name, want);
        return 0;
    }
    return 1;
}

int fti_config_parse(const char *text, const char *file, fti_settings *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->verbosity = 2;
    s->node_size = 1;
    s->group_size = 4; /* libcrpm's default, and FTI's example configuration's */
    s->ckpt_io = 1;
    for (int l = 2; l <= 4; l++)
        s->inline_l[l] = 1;
    ctx c = {.file = file, .s = s};
    int rc = crpm_initext_parse(&c.in, text, handler, &c);
    if (rc == -2) {
        snprintf(err, errlen, "FTI config %s: out of memory while parsing", file);
        return -1;
    }
    if (c.in.err_line) {
        snprintf(err, errlen, "FTI config %s, line %d: %s", file, c.in.err_line, c.in.err);
        return -1;
    }
    if (rc != 0) {
        snprintf(err, errlen, "FTI config %s: cannot be parsed", file);
        return -1;
    }
    const char *env = getenv("CRPM_CKPT_DIR");
    if (!s->ckpt_dir[0] && !(env && *env)) {
        snprintf(err, errlen, "FTI config %s: ckpt_dir is missing in [basic] (the directory of the local "
                 "checkpoints)", file);
        return -1;
    }
    if (s->ckpt_min[4] > 0 && !s->glbl_dir[0]) {
        snprintf(err, errlen, "FTI config %s, line %d: ckpt_l4 = %d needs glbl_dir in [basic]", file,
                 c.key_line[K_CKPT_L4], s->ckpt_min[4]);
        return -1;
    }
    return 0;
}

int fti_config_crpm_verbosity(int v)
{
    return v <= 1 ? 3 : v == 2 ? 2 : 1; /* errors are always printed, as FTI does */
}

char *fti_config_crpm_text(const fti_settings *s, int l3)
{
    /* ckpt_dir may double in length: every '%' is escaped */
    size_t n = 3 * FTI_CFG_PATH_MAX + 256;
    char *t = malloc(n);
    if (!t)
        return NULL;
    /* FTI's keep_last_ckpt moves the last checkpoint to glbl_dir when there
     * is one: libcrpm's keep_last_ckpt = global (FTI_Finalize writes it at
     * level 4 first) */
    int len = snprintf(t, n, "[basic]\njob_name = fti\nkeep_last_ckpt = %s\nverbosity = %d\nkeep_l4 = %d\n",
                       !s->keep_last_ckpt ? "0" : s->glbl_dir[0] ? "global" : "1",
                       fti_config_crpm_verbosity(s->verbosity),
                       s->keep_l4_ckpt ? 1000000 : 1);
    /* FTI groups node_size consecutive ranks into a node, as libcrpm's
     * node_size does; without it libcrpm finds the nodes itself. */
    if (s->node_size_set)
        len += snprintf(t + len, n - (size_t)len, "node_size = %d\n", s->node_size);
    if (s->async)
        len += snprintf(t + len, n - (size_t)len, "async = 1\n");
    if (l3)
        len += snprintf(t + len, n - (size_t)len, "group_size = %d\nl3_parity = %d\n", s->group_size,
                        s->group_size / 2);
    if (s->ckpt_dir[0]) {
        /* FTI takes ckpt_dir literally; libcrpm expands %n, %h and %% in it */
        len += snprintf(t + len, n - (size_t)len, "ckpt_dir = ");
        for (const char *c = s->ckpt_dir; *c; c++) {
            if (*c == '%')
                t[len++] = '%';
            t[len++] = *c;
        }
        t[len++] = '\n';
        t[len] = '\0';
    }
    if (s->glbl_dir[0])
        snprintf(t + len, n - (size_t)len, "glbl_dir = %s\n", s->glbl_dir);
    return t;
}
