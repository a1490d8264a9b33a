/*  actors/exec/mcp_rpc.c — newline-delimited JSON-RPC from an MCP server:
    the bounded line reader, the message classifier and the SSE line
    decoder (actors/exec/mcp.h), and our answers to the requests a server
    makes (mcp_impl.h).

    A server's stdout is outside bytes. The reader never holds more than
    one line of at most `max` bytes: a server that floods stdout without a
    newline, or sends one enormous line, makes the reader drop that line
    (and count it), not grow. Lines are parsed by jansson, whose parser
    bounds nesting depth; a message that is not JSON-RPC 2.0 is ignored.
*/
#include "actors/exec/mcp_impl.h"
#include "common/log.h"

#include <jansson.h>
#include <stdio.h>
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


void
sb_mcp_sse_init (sb_mcp_sse_t *sse)
{
    sse->last_id [0] = 0;
    sse->retry_ms = -1;
}

//  The value of the SSE field line "NAME:VALUE" (one space after the
//  colon is not part of it), or NULL when the line is another field.
static const char *
s_sse_field (const char *line, size_t len, const char *name, size_t *vlen)
{
    size_t n = strlen (name);
    if (len <= n || memcmp (line, name, n) != 0 || line [n] != ':')
        return NULL;
    size_t skip = n + 1 + (len > n + 1 && line [n + 1] == ' ');
    *vlen = len - skip;
    return line + skip;
}

const char *
sb_mcp_sse_line (sb_mcp_sse_t *sse, const char *line, size_t len, size_t *data_len)
{
    size_t vl;
    const char *v;
    if ((v = s_sse_field (line, len, "data", &vl)) != NULL) {
        *data_len = vl;
        return vl ? v : NULL;
    }
    if ((v = s_sse_field (line, len, "id", &vl)) != NULL) {
        if (vl <= SB_MCP_SSE_ID_MAX && !memchr (v, 0, vl)) {
            memcpy (sse->last_id, v, vl);
            sse->last_id [vl] = 0;
        }
    }
    else
    if ((v = s_sse_field (line, len, "retry", &vl)) != NULL) {
        //  Digits past the bound do not grow the value: it saturates.
        long ms = 0;
        size_t i = 0;
        for (; i < vl && v [i] >= '0' && v [i] <= '9'; i++)
            if (ms <= SB_MCP_SSE_RETRY_MAX_MS)
                ms = ms * 10 + (v [i] - '0');
        if (i == vl && vl)
            sse->retry_ms = ms < SB_MCP_SSE_RETRY_MIN_MS ? SB_MCP_SSE_RETRY_MIN_MS
                          : ms > SB_MCP_SSE_RETRY_MAX_MS ? SB_MCP_SSE_RETRY_MAX_MS : (int) ms;
    }
    return NULL;
}


#define S_ROOT_URI_MAX (3 * 4096 + 8)

//  file://PATH with every byte outside the URI's unreserved set and '/'
//  percent-encoded. False when it does not fit.
static bool
s_file_uri (const char *path, char *out, size_t size)
{
    static const char hex [] = "0123456789ABCDEF";
    size_t n = snprintf (out, size, "file://");
    for (const unsigned char *p = (const unsigned char *) path; *p; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')
                  || strchr ("/-._~", *p);
        if (n + (plain ? 1 : 3) >= size)
            return false;
        if (plain)
            out [n++] = (char) *p;
        else {
            out [n++] = '%';
            out [n++] = hex [*p >> 4];
            out [n++] = hex [*p & 15];
        }
    }
    out [n] = 0;
    return true;
}

//  The answer to a request of the server: ping, roots/list (the
//  session's workspace, the one root we declare), and an error for the
//  rest. Elicitation goes to the process's elicitor
//  (actors/exec/mcp_elicit.c); sampling is named as not supported, so the
//  server's author sees why; anything else is an unknown method.
json_t *
sb_mcp_answer (json_t *m, const char *cwd, const char *server)
{
    const char *method = json_string_value (json_object_get (m, "method"));
    json_t *id = json_object_get (m, "id");
    if (strcmp (method, "ping") == 0)
        return json_pack ("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id", id, "result");
    if (strcmp (method, "elicitation/create") == 0)
        return sb_mcp_elicit_answer (m, server);
    char uri [S_ROOT_URI_MAX];
    if (strcmp (method, "roots/list") == 0 && cwd && cwd [0] && s_file_uri (cwd, uri, sizeof uri))
        return json_pack ("{s:s, s:O, s:{s:[{s:s, s:s}]}}", "jsonrpc", "2.0", "id", id, "result", "roots",
                          "uri", uri, "name", "workspace");
    const char *why = strcmp (method, "sampling/createMessage") == 0
                    ? "sampling is not supported: switchboard does not let MCP servers call its model"
                    : strcmp (method, "roots/list") == 0 ? "no workspace" : NULL;
    return json_pack ("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code", -32601,
                      "message", why ? why : "Method not found");
}


void
sb_mcp_progress (s_server_t *srv, json_t *params)
{
    const char *token = json_string_value (json_object_get (params, "progressToken"));
    json_t *progress = json_object_get (params, "progress");
    json_t *total = json_object_get (params, "total");
    json_t *message = json_object_get (params, "message");
    if (!srv->on_progress || !srv->progress_token [0] || !token || strcmp (token, srv->progress_token) != 0
    ||  !json_is_number (progress) || (total && !json_is_number (total)))
        return;
    //  The value must grow (the specification says so): one that does
    //  not is a confused server's, not shown.
    double p = json_number_value (progress);
    int64_t now = sb_mono_ms ();
    if (!(p > srv->progress_last) || srv->progress_shown >= S_PROGRESS_LINES
    ||  (srv->progress_shown && now - srv->progress_ms < S_PROGRESS_MS))
        return;
    srv->progress_last = p;
    srv->progress_ms = now;
    srv->progress_shown++;
    //  The message on one line, cut on a UTF-8 boundary.
    char text [S_PROGRESS_MESSAGE + 1] = "";
    const char *m = json_string_value (message);
    size_t n = m ? strlen (m) : 0;
    if (n > S_PROGRESS_MESSAGE) {
        n = S_PROGRESS_MESSAGE;
        while (n && ((unsigned char) m [n] & 0xC0) == 0x80)
            n--;
    }
    for (size_t k = 0; k < n; k++)
        text [k] = (unsigned char) m [k] < 0x20 || m [k] == 0x7f ? ' ' : m [k];
    text [n] = 0;
    char line [S_PROGRESS_MESSAGE + 80];
    int len = total ? snprintf (line, sizeof line, "progress: %g/%g%s%s\n", p, json_number_value (total),
                                n ? " " : "", text)
                    : snprintf (line, sizeof line, "progress: %g%s%s\n", p, n ? " " : "", text);
    if (len <= 0)
        return;
    //  A server's words: redacted like its results.
    char *shown = sb_mcp_redact (srv->cfg, line);
    if (!shown)
        return;
    sb_mcp_oauth_redact (srv->oauth, shown);
    srv->on_progress (shown, strlen (shown), srv->progress_arg);
    free (shown);
}
