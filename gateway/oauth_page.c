/*  gateway/oauth_page.c — the page a person's browser lands on at
    /oauth/callback (docs/mcp.md "Authorization").

    An MCP authorization server sends the browser back there; the
    executor's answer (exec.mcp.oauth_callback: the server now
    authorized, or an error) becomes a short HTML page instead of JSON.
    Every value in it, from the query or the executor, is HTML-escaped
    and cut: an error_description of "<script>" comes out as text. The
    page needs no script, no style and nothing from elsewhere: it is sent
    with a Content-Security-Policy of default-src 'none' (gateway/http.c).
    On the lws thread.
*/
#include "gateway/gateway_impl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_VALUE_MAX 1024        /* bytes of one value shown (cut at a character) */
#define S_PAGE_MAX  (48u << 10)   /* five values of S_VALUE_MAX, each escaped to 6 bytes a byte at most */

typedef struct {
    char s [S_PAGE_MAX];
    size_t len;
} s_page_t;

static void
s_raw (s_page_t *p, const char *text)
{
    size_t n = strlen (text);
    if (n > sizeof p->s - 1 - p->len)
        n = sizeof p->s - 1 - p->len;
    memcpy (p->s + p->len, text, n);
    p->len += n;
    p->s [p->len] = 0;
}

//  `text`, escaped, at most S_VALUE_MAX bytes of it (not in the middle
//  of a UTF-8 character); control characters become spaces.
static void
s_text (s_page_t *p, const char *text)
{
    size_t n = text ? strlen (text) : 0;
    if (n > S_VALUE_MAX) {
        n = S_VALUE_MAX;
        while (n > 0 && ((unsigned char) text [n] & 0xC0) == 0x80)
            n--;
    }
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char) text [k];
        char one [2] = { (char) c, 0 };
        s_raw (p, c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&quot;"
                : c == '\'' ? "&#39;" : c < 0x20 || c == 0x7f ? " " : one);
    }
    if (text && n < strlen (text))
        s_raw (p, "...");
}

gw_buf_t *
gw_oauth_page (int status, const char *json, size_t len, const char *as_error, const char *as_description)
{
    s_page_t *p = malloc (sizeof *p);
    if (!p)
        return NULL;
    p->len = 0;
    p->s [0] = 0;
    json_t *doc = json ? json_loadb (json, len, 0, NULL) : NULL;
    const char *server = json_string_value (json_object_get (doc, "server"));
    json_t *error = json_object_get (doc, "error");
    const char *message = json_string_value (json_object_get (error, "message"));
    bool ok = status == 200 && server && !error;
    s_raw (p, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
              "<meta name=\"robots\" content=\"noindex\"><title>");
    if (ok) {
        s_raw (p, "Connected ");
        s_text (p, server);
    }
    else
        s_raw (p, "Not connected");
    s_raw (p, " - switchboard</title></head>\n<body>\n");
    if (ok) {
        s_raw (p, "<h1>Connected ");
        s_text (p, server);
        s_raw (p, "</h1>\n<p>connected ");
        s_text (p, server);
        s_raw (p, ": you can close this tab.</p>\n");
    }
    else {
        s_raw (p, "<h1>Not connected</h1>\n<p>The MCP server was not connected: ");
        s_text (p, message ? message : "the gateway could not read the answer");
        s_raw (p, "</p>\n");
        if (as_error) {
            s_raw (p, "<p>The authorization server said: ");
            s_text (p, as_error);
            if (as_description) {
                s_raw (p, " (");
                s_text (p, as_description);
                s_raw (p, ")");
            }
            s_raw (p, "</p>\n");
        }
        s_raw (p, "<p>Start again with <code>switchboard mcp login SERVER</code>, or Connect in the "
                  "switchboard UI. You can close this tab.</p>\n");
    }
    s_raw (p, "</body></html>\n");
    json_decref (doc);
    gw_buf_t *buf = gw_buf_new (p->s, p->len);
    free (p);
    return buf;
}

const char *
gw_oauth_respond (gw_pss_t *pss, int status, gw_buf_t **body)
{
    gw_buf_t *page = gw_oauth_page (status, *body ? gw_buf_text (*body) : NULL, *body ? (*body)->len : 0,
                                    gw_arg (pss, "error"), gw_arg (pss, "error_description"));
    gw_buf_unref (body);
    *body = page;
    pss->no_store = true;
    return "text/html; charset=utf-8";
}
