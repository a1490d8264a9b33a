/*  actors/exec/mcp_rpc.c — newline-delimited JSON-RPC from an MCP server:
    the bounded line reader and the message classifier (actors/exec/mcp.h).

    A server's stdout is outside bytes. The reader never holds more than
    one line of at most `max` bytes: a server that floods stdout without a
    newline, or sends one enormous line, makes the reader drop that line
    (and count it), not grow. Lines are parsed by jansson, whose parser
    bounds nesting depth; a message that is not JSON-RPC 2.0 is ignored.
*/
#include "actors/exec/mcp.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

void
sb_mcp_lines_init (sb_mcp_lines_t *r, size_t max)
{
    memset (r, 0, sizeof *r);
    r->max = max ? max : SB_MCP_LINE_MAX;
}

void
sb_mcp_lines_clear (sb_mcp_lines_t *r)
{
    free (r->buf);
    size_t max = r->max;
    memset (r, 0, sizeof *r);
    r->max = max;
}

//  Appends to the pending line; past max the line is dropped.
static void
s_append (sb_mcp_lines_t *r, const char *data, size_t n)
{
    if (r->discarding || n == 0)
        return;
    if (r->len + n > r->max) {
        r->discarding = true;
        r->len = 0;
        //  Give back what a long line made us hold.
        if (r->cap > 65536) {
            free (r->buf);
            r->buf = NULL;
            r->cap = 0;
        }
        return;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        if (cap > r->max + 1)
            cap = r->max + 1;
        char *nb = realloc (r->buf, cap);
        if (!nb) {
            r->discarding = true;
            r->len = 0;
            return;
        }
        r->buf = nb;
        r->cap = cap;
    }
    memcpy (r->buf + r->len, data, n);
    r->len += n;
}

void
sb_mcp_lines_feed (sb_mcp_lines_t *r, const char *data, size_t n, sb_mcp_line_fn *fn, void *arg)
{
    while (n > 0) {
        const char *nl = memchr (data, '\n', n);
        size_t take = nl ? (size_t) (nl - data) : n;
        s_append (r, data, take);
        if (!nl)
            return;
        if (r->discarding) {
            r->oversized++;
            r->discarding = false;
        }
        else {
            size_t len = r->len;
            if (len && r->buf [len - 1] == '\r')
                len--;
            if (len) {
                r->buf [len] = 0;
                fn (r->buf, len, arg);
            }
        }
        r->len = 0;
        if (r->cap > 65536) {
            //  A long line's buffer does not outlive it.
            free (r->buf);
            r->buf = NULL;
            r->cap = 0;
        }
        data += take + 1;
        n -= take + 1;
    }
}

sb_mcp_msg_kind_t
sb_mcp_msg_parse (const char *line, size_t len, void **json, int64_t *id)
{
    *json = NULL;
    *id = -1;
    json_error_t jerr;
    json_t *m = json_loadb (line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!m)
        return SB_MCP_MSG_INVALID;
    const char *ver = json_string_value (json_object_get (m, "jsonrpc"));
    if (!json_is_object (m) || !ver || strcmp (ver, "2.0") != 0) {
        json_decref (m);
        return SB_MCP_MSG_INVALID;
    }
    json_t *jid = json_object_get (m, "id");
    json_t *method = json_object_get (m, "method");
    sb_mcp_msg_kind_t kind = SB_MCP_MSG_INVALID;
    if (method && json_is_string (method))
        kind = jid && !json_is_null (jid) ? SB_MCP_MSG_REQUEST : SB_MCP_MSG_NOTIFICATION;
    else
    if (jid && (json_object_get (m, "result") || json_is_object (json_object_get (m, "error")))) {
        kind = SB_MCP_MSG_RESPONSE;
        if (json_is_integer (jid) && json_integer_value (jid) >= 0)
            *id = json_integer_value (jid);
    }
    if (kind == SB_MCP_MSG_INVALID) {
        json_decref (m);
        return kind;
    }
    *json = m;
    return kind;
}
