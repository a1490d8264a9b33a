/*  gateway/blobs.c — the content types the gateway sends, and blobs over
    HTTP (docs/images.md):

      POST /api/blobs/SESSION?name=FILE   the raw bytes as the body (at
                                          most SB_GW_MAX_BLOB): blob.put,
                                          answered with its JSON reply
      GET  /api/blobs/SESSION/SHA256      blob.get, answered with the bytes
                                          themselves

    Both are /api/ routes, so the token or cookie every other route needs
    is checked first (gateway/auth.c). A download carries the type the
    blob store sniffed (one of a fixed set, never text/html), with
    `Content-Disposition: attachment` and the `X-Content-Type-Options:
    nosniff` every answer has: a browser saves a blob, it never renders
    one as a page of this origin. The lws thread parses; the bridge
    thread answers (gw_blob_answer). */
#include "gateway/gateway_impl.h"
#include "common/blob.h"
#include "schemas/codec.h"
#include "bus/client.h"

#include <stdio.h>
#include <string.h>

//  "/api/blobs/SID" or "/api/blobs/SID/HEX": the parts, checked for their
//  form only (the blob service checks the rest).
static bool
s_route (const char *path, char sid [40], char hex [SB_BLOB_HEX + 1])
{
    static const char pre [] = "/api/blobs/";
    if (strncmp (path, pre, sizeof pre - 1) != 0)
        return false;
    const char *p = path + sizeof pre - 1;
    size_t n = strcspn (p, "/");
    if (n == 0 || n >= 40)
        return false;
    memcpy (sid, p, n);
    sid [n] = 0;
    hex [0] = 0;
    if (p [n] == '/') {
        const char *h = p + n + 1;
        if (strlen (h) != SB_BLOB_HEX)
            return false;
        memcpy (hex, h, SB_BLOB_HEX + 1);
    }
    return true;
}

//  The request's blob.put or blob.get body, as msgpack (owned), or NULL.
static uint8_t *
s_request (const char *sid, const char *hex, const char *name, const uint8_t *data, size_t len,
                 char *type, size_t type_len, size_t *out_len)
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return NULL;
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", sid);
    if (hex [0]) {
        snprintf (type, type_len, "blob.get");
        sb_enc_kstr (e, "sha256", hex);
    }
    else {
        snprintf (type, type_len, "blob.put");
        sb_enc_kstr_opt (e, "name", name);
        sb_enc_key (e, "data");
        sb_enc_bin (e, data ? data : (const uint8_t *) "", len);
    }
    sb_enc_map_close (e);
    size_t n;
    const uint8_t *b = sb_enc_data (e, &n);
    uint8_t *copy = malloc (n ? n : 1);
    if (copy) {
        memcpy (copy, b, n);
        *out_len = n;
    }
    sb_enc_destroy (&e);
    return copy;
}

//  A UI file's type, by its name (the UI folder is ours, not a peer's).
const char *
gw_static_mime (const char *path)
{
    static const char *map [][2] = {
        { ".html", "text/html; charset=utf-8" }, { ".js", "text/javascript; charset=utf-8" },
        { ".mjs", "text/javascript; charset=utf-8" }, { ".css", "text/css; charset=utf-8" },
        { ".json", "application/json" }, { ".svg", "image/svg+xml" }, { ".png", "image/png" },
        { ".ico", "image/x-icon" }, { ".woff2", "font/woff2" }, { ".txt", "text/plain; charset=utf-8" },
        { ".map", "application/json" },
    };
    const char *dot = strrchr (path, '.');
    for (size_t k = 0; dot && k < sizeof map / sizeof map [0]; k++)
        if (strcmp (dot, map [k][0]) == 0)
            return map [k][1];
    return "application/octet-stream";
}

size_t
gw_body_max (const char *path)
{
    char sid [40], hex [SB_BLOB_HEX + 1];
    return s_route (path, sid, hex) && !hex [0] ? SB_GW_MAX_BLOB : SB_GW_MAX_FRAME;
}

bool
gw_blob_in (const gw_pss_t *pss, gw_in_t **in_p, char code [32], char *message, size_t message_len)
{
    char sid [40], hex [SB_BLOB_HEX + 1];
    *in_p = NULL;
    if (!s_route (pss->path, sid, hex))
        return false;
    if (pss->post == (hex [0] != 0)) {
        snprintf (code, 32, "invalid");
        snprintf (message, message_len, "POST the bytes to /api/blobs/SESSION?name=FILE; "
                  "GET /api/blobs/SESSION/SHA256 reads one");
        return true;
    }
    gw_in_t *in = calloc (1, sizeof *in);
    if (in)
        in->body = s_request (sid, hex, gw_arg (pss, "name"), pss->body, pss->body_len, in->type, sizeof in->type,
                              &in->body_len);
    if (!in || !in->body) {
        free (in);
        snprintf (code, 32, "overloaded");
        snprintf (message, message_len, "out of memory");
        return true;
    }
    in->kind = GW_IN_CALL;
    in->http = true;
    in->blob = hex [0] != 0;
    *in_p = in;
    return true;
}

//  A static content type for a sniffed one: the store names only these.
static const char *
s_ctype (const char *mime)
{
    static const char *const known [] = { "image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf",
                                          NULL };
    for (int k = 0; mime && known [k]; k++)
        if (strcmp (mime, known [k]) == 0)
            return known [k];
    if (mime && strcmp (mime, "text/plain") == 0)
        return "text/plain; charset=utf-8";
    return "application/octet-stream";
}

//  The answer to a download: the bytes, their type, and the headers that
//  make a browser save them, handed to the lws thread. Bridge thread.
bool
gw_blob_answer (sb_gateway_t *gw, uint64_t conn, const sb_msg_t *reply)
{
    size_t len = 0;
    const char *data = sb_get_bin (reply->body, "data", &len);
    const sb_val_t *blob = sb_get_map (reply->body, "blob");
    gw_buf_t *buf = gw_buf_alloc (len);
    gw_out_t *out = buf ? calloc (1, sizeof *out) : NULL;
    if (!out) {
        gw_buf_unref (&buf);
        return false;
    }
    memcpy (gw_buf_text (buf), data ? data : "", len);
    buf->len = len;
    out->kind = GW_OUT_HTTP;
    out->conn = conn;
    out->status = 200;
    out->ctype = s_ctype (sb_get_str (blob, "mime"));
    out->buf = buf;
    char extra [160];
    snprintf (extra, sizeof extra, "content-disposition: attachment; filename=\"%.64s\"\n",
              sb_get_str (blob, "sha256") ? sb_get_str (blob, "sha256") : "blob");
    out->extra = strdup (extra);
    if (!gw_handoff_charge (gw, out)) {
        gw_out_free (out);
        return false;
    }
    gw_to_lws (gw, out);
    return true;
}
