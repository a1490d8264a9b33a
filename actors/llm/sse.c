/*  actors/llm/sse.c — incremental server-sent-events parser.

    The parser keeps only what a WHATWG parser must: the unfinished line, the
    event's data, event type and id buffers, and whether the previous feed
    ended on a CR. Complete lines that lie whole inside one feed are parsed in
    place, without a copy; only a line split across feeds is buffered.
*/
#include "actors/llm/sse.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t len;
    size_t cap;
} s_buf_t;

struct _sb_sse_t {
    size_t max;             // bytes one event may hold
    int error;              // sticky SB_SSE_E* code, or 0
    int bom_seen;           // BOM bytes matched so far; -1 once decided
    bool skip_lf;           // the last feed ended on a CR
    bool in_event;          // a field line arrived since the last dispatch
    s_buf_t line;           // unfinished line carried across feeds
    s_buf_t data;
    s_buf_t event;
    s_buf_t id;             // last event id: persists across events
    int64_t retry_ms;
    uint64_t events;
};

static const char s_bom[3] = { '\xEF', '\xBB', '\xBF' };

//  Room for extra bytes plus a NUL. Geometric growth keeps a line of
//  hundreds of KB that arrives a few bytes at a time linear overall.
static int
s_buf_reserve (s_buf_t *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t need = b->len + extra + 1;
    size_t cap = b->cap? b->cap: 64;
    while (cap < need)
        cap *= 2;
    char *p = realloc (b->p, cap);
    if (!p)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int
s_buf_append (s_buf_t *b, const char *src, size_t n)
{
    if (s_buf_reserve (b, n))
        return -1;
    if (n)
        memcpy (b->p + b->len, src, n);
    b->len += n;
    b->p [b->len] = 0;
    return 0;
}

static int
s_buf_set (s_buf_t *b, const char *src, size_t n)
{
    b->len = 0;
    return s_buf_append (b, src, n);
}

static const char *
s_buf_str (s_buf_t *b)
{
    return b->len? b->p: "";
}

sb_sse_t *
sb_sse_new (size_t max_event_bytes)
{
    sb_sse_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->max = max_event_bytes? max_event_bytes: SB_SSE_DEFAULT_MAX_EVENT;
    self->retry_ms = -1;
    return self;
}

void
sb_sse_destroy (sb_sse_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sb_sse_t *self = *self_p;
    free (self->line.p);
    free (self->data.p);
    free (self->event.p);
    free (self->id.p);
    free (self);
    *self_p = NULL;
}

static int
s_fail (sb_sse_t *self, int code)
{
    self->error = code;
    //  The buffers are useless now; give their memory back at once rather
    //  than hold up to max bytes until the stream is destroyed.
    free (self->line.p);
    free (self->data.p);
    self->line = (s_buf_t) { 0 };
    self->data = (s_buf_t) { 0 };
    return code;
}

//  What one event holds, were a line of line_len bytes added to it.
static bool
s_over_limit (sb_sse_t *self, size_t line_len)
{
    size_t held = self->data.len + self->event.len;
    return line_len > self->max || held > self->max - line_len;
}

static int
s_dispatch (sb_sse_t *self, sb_sse_cb *cb, void *ctx)
{
    self->in_event = false;
    if (self->data.len == 0) {
        self->event.len = 0;
        return 0;
    }
    //  Every data line appended a '\n'; the last one is not part of the data.
    self->data.len--;
    self->data.p [self->data.len] = 0;
    //  A type that starts with NUL would reach a C callback as "", which
    //  no handler can tell from a missing type; it reads as the default.
    const char *event = self->event.len && self->event.p [0]? self->event.p: "message";
    int rc = cb? cb (event, self->data.p, self->data.len, s_buf_str (&self->id), ctx): 0;
    self->data.len = 0;
    self->event.len = 0;
    self->events++;
    return rc? s_fail (self, SB_SSE_EABORTED): 0;
}

static void
s_set_retry (sb_sse_t *self, const char *value, size_t len)
{
    if (len == 0)
        return;
    int64_t ms = 0;
    for (size_t i = 0; i < len; i++) {
        if (value [i] < '0' || value [i] > '9')
            return;
        //  Saturate rather than overflow on an absurd value.
        if (ms < INT64_MAX / 10 - 10)
            ms = ms * 10 + (value [i] - '0');
    }
    self->retry_ms = ms;
}

static bool
s_field_is (const char *field, size_t len, const char *name)
{
    return strlen (name) == len && memcmp (field, name, len) == 0;
}

//  One complete line, without its line ending.
static int
s_line (sb_sse_t *self, const char *line, size_t len, sb_sse_cb *cb, void *ctx)
{
    if (len == 0)
        return s_dispatch (self, cb, ctx);
    if (line [0] == ':')
        return 0;

    const char *colon = memchr (line, ':', len);
    size_t field_len = colon? (size_t) (colon - line): len;
    const char *value = colon? colon + 1: line + len;
    size_t value_len = colon? len - field_len - 1: 0;
    if (value_len && value [0] == ' ') {
        value++;
        value_len--;
    }
    self->in_event = true;

    int rc = 0;
    if (s_field_is (line, field_len, "data")) {
        rc = s_buf_append (&self->data, value, value_len);
        if (!rc)
            rc = s_buf_append (&self->data, "\n", 1);
    }
    else
    if (s_field_is (line, field_len, "event"))
        rc = s_buf_set (&self->event, value, value_len);
    else
    if (s_field_is (line, field_len, "id")) {
        if (!memchr (value, 0, value_len))
            rc = s_buf_set (&self->id, value, value_len);
    }
    else
    if (s_field_is (line, field_len, "retry"))
        s_set_retry (self, value, value_len);
    if (rc)
        return s_fail (self, SB_SSE_ENOMEM);
    if (self->data.len + self->event.len > self->max)
        return s_fail (self, SB_SSE_ETOOBIG);
    return 0;
}

//  The body of sb_sse_feed, once the BOM is dealt with.
static int
s_parse (sb_sse_t *self, const char *buf, size_t len, sb_sse_cb *cb, void *ctx)
{
    const char *p = buf;
    const char *end = buf + len;
    if (self->skip_lf && p < end) {
        self->skip_lf = false;
        if (*p == '\n')
            p++;
    }
    //  Next CR and next LF, each found once and reused until passed, so that
    //  a feed without any CR is not rescanned for one at every line.
    const char *next_cr = NULL, *next_lf = NULL;
    bool cr_done = false, lf_done = false;

    while (p < end) {
        if (!cr_done && (!next_cr || next_cr < p)) {
            next_cr = memchr (p, '\r', end - p);
            cr_done = !next_cr;
        }
        if (!lf_done && (!next_lf || next_lf < p)) {
            next_lf = memchr (p, '\n', end - p);
            lf_done = !next_lf;
        }
        const char *eol = cr_done? next_lf
                        : lf_done? next_cr
                        : next_cr < next_lf? next_cr: next_lf;
        if (!eol) {
            size_t rest = end - p;
            if (s_over_limit (self, self->line.len + rest))
                return s_fail (self, SB_SSE_ETOOBIG);
            if (s_buf_append (&self->line, p, rest))
                return s_fail (self, SB_SSE_ENOMEM);
            break;
        }
        size_t seg = eol - p;
        int rc;
        if (self->line.len == 0) {
            if (s_over_limit (self, seg))
                return s_fail (self, SB_SSE_ETOOBIG);
            rc = s_line (self, p, seg, cb, ctx);
        }
        else {
            if (s_over_limit (self, self->line.len + seg))
                return s_fail (self, SB_SSE_ETOOBIG);
            if (s_buf_append (&self->line, p, seg))
                return s_fail (self, SB_SSE_ENOMEM);
            size_t whole = self->line.len;
            self->line.len = 0;
            rc = s_line (self, self->line.p, whole, cb, ctx);
        }
        if (rc)
            return rc;
        p = eol + 1;
        if (*eol == '\r') {
            if (p < end) {
                if (*p == '\n')
                    p++;
            }
            else
                self->skip_lf = true;
        }
    }
    return 0;
}

int
sb_sse_feed (sb_sse_t *self, const char *buf, size_t len, sb_sse_cb *cb, void *ctx)
{
    if (!self)
        return SB_SSE_ENOMEM;
    if (self->error)
        return self->error;
    //  The BOM may itself be split across feeds: match it byte by byte, and
    //  when the stream turns out not to start with one, parse the bytes that
    //  looked like its beginning as ordinary input.
    while (self->bom_seen >= 0 && len > 0) {
        if (*buf == s_bom [self->bom_seen]) {
            buf++;
            len--;
            if (++self->bom_seen == 3)
                self->bom_seen = -1;
        }
        else {
            int matched = self->bom_seen;
            self->bom_seen = -1;
            if (matched) {
                int rc = s_parse (self, s_bom, matched, cb, ctx);
                if (rc)
                    return rc;
            }
        }
    }
    return s_parse (self, buf, len, cb, ctx);
}

int
sb_sse_finish (sb_sse_t *self)
{
    if (!self)
        return SB_SSE_ENOMEM;
    if (self->error)
        return self->error;
    //  A BOM prefix with nothing after it is an unfinished line too.
    if (self->line.len || self->in_event || self->bom_seen > 0)
        return SB_SSE_EINCOMPLETE;
    return SB_SSE_OK;
}

int
sb_sse_error (sb_sse_t *self)
{
    return self? self->error: SB_SSE_ENOMEM;
}

const char *
sb_sse_strerror (int code)
{
    switch (code) {
        case SB_SSE_OK:          return "ok";
        case SB_SSE_ETOOBIG:     return "event exceeds the maximum event size";
        case SB_SSE_EABORTED:    return "stopped by the event handler";
        case SB_SSE_EINCOMPLETE: return "stream ended in the middle of an event";
        case SB_SSE_ENOMEM:      return "out of memory";
        default:                 return "unknown error";
    }
}

const char *
sb_sse_last_id (sb_sse_t *self)
{
    return s_buf_str (&self->id);
}

int64_t
sb_sse_retry_ms (sb_sse_t *self)
{
    return self->retry_ms;
}

uint64_t
sb_sse_events (sb_sse_t *self)
{
    return self->events;
}
