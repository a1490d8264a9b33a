/*  actors/exec/diff.c — the diff of a file change, before it is made
    (actors/exec/diff.h). */
#include "actors/exec/diff.h"
#include "actors/exec/path.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char *p;
    size_t len, cap, max;
    bool cut, oom;
} s_out_t;

static void
s_add (s_out_t *o, const char *data, size_t n)
{
    if (o->cut || o->oom)
        return;
    if (o->len + n > o->max) {
        o->cut = true;
        return;
    }
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *p = realloc (o->p, cap);
        if (!p) {
            o->oom = true;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy (o->p + o->len, data, n);
    o->len += n;
    o->p [o->len] = 0;
}

static void
s_addf (s_out_t *o, const char *fmt, ...)
{
    char buf [PATH_MAX + 128];
    va_list ap;
    va_start (ap, fmt);
    int n = vsnprintf (buf, sizeof buf, fmt, ap);
    va_end (ap);
    if (n > 0)
        s_add (o, buf, (size_t) n < sizeof buf ? (size_t) n : sizeof buf - 1);
}

//  The lines of a text: offsets of each line's start, and one past the
//  end. A last line without a newline is a line too.
typedef struct {
    const char *text;
    size_t *start;
    size_t n;
} s_lines_t;

static int
s_split (const char *text, size_t len, s_lines_t *l)
{
    size_t n = 0;
    for (size_t k = 0; k < len; k++)
        n += text [k] == '\n';
    if (len && text [len - 1] != '\n')
        n++;
    l->text = text;
    l->n = n;
    l->start = malloc ((n + 1) * sizeof *l->start);
    if (!l->start)
        return -1;
    size_t i = 0;
    if (len)
        l->start [i++] = 0;
    for (size_t k = 0; k < len && i <= n; k++)
        if (text [k] == '\n' && k + 1 < len)
            l->start [i++] = k + 1;
    l->start [n] = len;
    return 0;
}

static size_t
s_line_len (const s_lines_t *l, size_t i)
{
    return l->start [i + 1] - l->start [i];
}

static bool
s_line_eq (const s_lines_t *a, size_t i, const s_lines_t *b, size_t j)
{
    size_t n = s_line_len (a, i);
    return n == s_line_len (b, j) && memcmp (a->text + a->start [i], b->text + b->start [j], n) == 0;
}

static void
s_line (s_out_t *o, char mark, const s_lines_t *l, size_t i)
{
    size_t n = s_line_len (l, i);
    const char *p = l->text + l->start [i];
    s_add (o, &mark, 1);
    s_add (o, p, n);
    if (!n || p [n - 1] != '\n')
        s_add (o, "\n\\ No newline at end of file\n", 30);
}

char *
sb_diff_unified (const char *path, const char *old, size_t olen, const char *new, size_t nlen, size_t max)
{
    s_lines_t a = { 0 }, b = { 0 };
    s_out_t o = { .max = max ? max : SB_DIFF_MAX };
    if (s_split (old ? old : "", old ? olen : 0, &a) || s_split (new, nlen, &b)) {
        free (a.start);
        free (b.start);
        return NULL;
    }
    size_t pre = 0;
    while (pre < a.n && pre < b.n && s_line_eq (&a, pre, &b, pre))
        pre++;
    size_t suf = 0;
    while (suf < a.n - pre && suf < b.n - pre && s_line_eq (&a, a.n - 1 - suf, &b, b.n - 1 - suf))
        suf++;
    if (pre == a.n && pre == b.n && (old || nlen == 0)) {
        free (a.start);
        free (b.start);
        return strdup ("");
    }
    size_t c0 = pre > SB_DIFF_CONTEXT ? pre - SB_DIFF_CONTEXT : 0;
    size_t c1 = suf > SB_DIFF_CONTEXT ? SB_DIFF_CONTEXT : suf;
    size_t a_end = a.n - suf + c1, b_end = b.n - suf + c1;
    size_t a_cnt = a_end - c0, b_cnt = b_end - c0;
    s_addf (&o, "--- %s%s\n+++ b/%s\n", old ? "a/" : "", old ? path : "/dev/null", path);
    //  a range of 0 lines names the line before it (diff -u does so)
    s_addf (&o, "@@ -%zu,%zu +%zu,%zu @@\n", a_cnt ? c0 + 1 : c0, a_cnt, b_cnt ? c0 + 1 : c0, b_cnt);
    for (size_t i = c0; i < pre; i++)
        s_line (&o, ' ', &a, i);
    for (size_t i = pre; i < a.n - suf; i++)
        s_line (&o, '-', &a, i);
    for (size_t i = pre; i < b.n - suf; i++)
        s_line (&o, '+', &b, i);
    for (size_t i = a.n - suf; i < a_end; i++)
        s_line (&o, ' ', &a, i);
    free (a.start);
    free (b.start);
    if (o.oom) {
        free (o.p);
        return NULL;
    }
    if (o.cut) {
        //  room was kept for this line by the caller's max being a bound
        //  on the diff, not on this note
        o.max += 128;
        o.cut = false;
        s_addf (&o, "[diff cut at %zu bytes]\n", o.max - 128);
    }
    return o.p ? o.p : strdup ("");
}

//  Reads a file of the workspace (a resolved path) whole, bounded.
static char *
s_read (const char *workspace, const char *resolved, size_t *len, bool *missing)
{
    *missing = false;
    int fd = sb_path_open (workspace, resolved, O_RDONLY | O_NONBLOCK, 0);
    if (fd < 0) {
        *missing = errno == ENOENT;
        return NULL;
    }
    struct stat st;
    if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode) || st.st_size > SB_DIFF_FILE_MAX) {
        close (fd);
        return NULL;
    }
    size_t cap = (size_t) st.st_size + 1, n = 0;
    char *text = malloc (cap + 1);
    while (text) {
        if (n == cap) {
            close (fd);
            free (text);
            return NULL;            //  it grew past what fstat said: no diff
        }
        ssize_t r = read (fd, text + n, cap - n);
        if (r > 0)
            n += (size_t) r;
        else
        if (r == 0)
            break;
        else
        if (errno != EINTR) {
            free (text);
            text = NULL;
        }
    }
    close (fd);
    if (text) {
        text [n] = 0;
        if (memchr (text, 0, n)) {  //  binary: a person gains nothing from it
            free (text);
            return NULL;
        }
    }
    *len = n;
    return text;
}

char *
sb_diff_preview (const char *workspace, const char *tool, const char *arguments, size_t max)
{
    bool write = tool && strcmp (tool, "write_file") == 0;
    bool edit = tool && strcmp (tool, "edit_file") == 0;
    if ((!write && !edit) || !workspace || !arguments)
        return NULL;
    json_error_t jerr;
    json_t *args = json_loads (arguments, JSON_REJECT_DUPLICATES, &jerr);
    const char *path = json_string_value (json_object_get (args, "path"));
    char resolved [PATH_MAX], err [256];
    char *diff = NULL;
    if (!path || sb_path_resolve_n (workspace, path, json_string_length (json_object_get (args, "path")), write,
                                    resolved, sizeof resolved, err, sizeof err) != 0) {
        json_decref (args);
        return NULL;
    }
    const char *shown = sb_path_relative (workspace, resolved);
    size_t olen = 0;
    bool missing;
    char *old = s_read (workspace, resolved, &olen, &missing);
    if (write) {
        json_t *c = json_object_get (args, "content");
        if (json_is_string (c) && (old || missing))
            diff = sb_diff_unified (shown, old, olen, json_string_value (c), json_string_length (c), max);
    }
    else
    if (old) {
        json_t *jo = json_object_get (args, "old"), *jn = json_object_get (args, "new");
        const char *o = json_string_value (jo), *nw = json_string_value (jn);
        size_t ol = json_string_length (jo), nl = json_string_length (jn);
        //  as the tool does it: exactly one match, or no change to show
        const char *at = o && nw && ol ? memmem (old, olen, o, ol) : NULL;
        if (at && !memmem (at + 1, olen - (size_t) (at + 1 - old), o, ol)) {
            size_t total = olen - ol + nl;
            char *edited = malloc (total + 1);
            if (edited) {
                size_t off = (size_t) (at - old);
                memcpy (edited, old, off);
                memcpy (edited + off, nw, nl);
                memcpy (edited + off + nl, at + ol, olen - off - ol);
                edited [total] = 0;
                diff = sb_diff_unified (shown, old, olen, edited, total, max);
                free (edited);
            }
        }
    }
    free (old);
    json_decref (args);
    return diff;
}
