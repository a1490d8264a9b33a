/*  actors/exec/mcp_config.c — the mcpServers file (actors/exec/mcp.h,
    docs/mcp.md): parsed and checked once when the exec actor starts, and
    the redaction of its secrets.
*/
#include "actors/exec/mcp.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

//  Values this short are not redacted: "1" or "true" would blank out
//  half of every result.
#define S_SECRET_MIN 6

static void *
s_fail (char *err, size_t errlen, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static void *
s_fail (char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (err, errlen, fmt, ap);
    va_end (ap);
    return NULL;
}

static void
s_strv_free (char **v)
{
    for (size_t k = 0; v && v [k]; k++)
        free (v [k]);
    free (v);
}

bool
sb_mcp_is_tool (const char *name)
{
    return name && strncmp (name, SB_MCP_PREFIX, strlen (SB_MCP_PREFIX)) == 0;
}

void
sb_mcp_config_destroy (sb_mcp_config_t **cfg_p)
{
    sb_mcp_config_t *cfg = cfg_p ? *cfg_p : NULL;
    if (!cfg)
        return;
    for (size_t k = 0; k < cfg->n; k++) {
        s_strv_free (cfg->servers [k].argv);
        s_strv_free (cfg->servers [k].env);
        s_strv_free (cfg->servers [k].headers);
        free (cfg->servers [k].url);
        sb_mcp_oauth_conf_t *o = &cfg->servers [k].oauth;
        free (o->client_id);
        free (o->client_secret);
        free (o->private_key_file);
        free (o->scope);
        free (o->client_metadata_url);
        free (o->redirect_uri);
        free (o->idp_token_endpoint);
        free (o->idp_client_id);
        free (o->id_token_file);
    }
    free (cfg->servers);
    for (size_t k = 0; k < cfg->nsecrets; k++)
        free (cfg->secrets [k]);
    free (cfg->secrets);
    free (cfg->source);
    free (cfg->data_dir);
    free (cfg);
    *cfg_p = NULL;
}

static bool
s_name_ok (const char *s)
{
    size_t n = strlen (s);
    if (n == 0 || n > SB_MCP_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s [i] >= 'a' && s [i] <= 'z') || (s [i] >= 'A' && s [i] <= 'Z') || (s [i] >= '0' && s [i] <= '9')
              || s [i] == '-' || s [i] == '_'))
            return false;
    //  "__" separates the server from the tool in mcp__<server>__<tool>.
    return strstr (s, "__") == NULL;
}

//  Adds one form of a secret (taking v), unless it is there already.
static int
s_add_form (sb_mcp_config_t *cfg, char *v)
{
    if (!v)
        return -1;
    for (size_t k = 0; k < cfg->nsecrets; k++)
        if (strcmp (cfg->secrets [k], v) == 0) {
            free (v);
            return 0;
        }
    char **ns = realloc (cfg->secrets, (cfg->nsecrets + 1) * sizeof *ns);
    if (!ns) {
        free (v);
        return -1;
    }
    cfg->secrets = ns;
    ns [cfg->nsecrets++] = v;
    return 0;
}

//  v as the inside of a JSON string (jansson's escaping, as a server's
//  JSON output carries it), or NULL.
static char *
s_json_escaped (const char *v)
{
    json_t *str = json_string (v);
    char *q = str ? json_dumps (str, JSON_ENCODE_ANY) : NULL;
    json_decref (str);
    if (!q)
        return NULL;
    size_t n = strlen (q);
    memmove (q, q + 1, n - 2);          //  without the quotes
    q [n - 2] = 0;
    return q;
}

//  v percent-encoded (every byte but RFC 3986's unreserved ones), with
//  upper or lower case hex digits, or NULL.
static char *
s_url_encoded (const char *v, bool upper)
{
    const char *hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    char *out = malloc (strlen (v) * 3 + 1), *w = out;
    for (const unsigned char *p = (const unsigned char *) v; out && *p; p++)
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')
        ||  *p == '-' || *p == '_' || *p == '.' || *p == '~')
            *w++ = (char) *p;
        else {
            *w++ = '%';
            *w++ = hex [*p >> 4];
            *w++ = hex [*p & 15];
        }
    if (out)
        *w = 0;
    return out;
}

//  A secret, and every encoding of it a server's output can carry: a
//  value with `"` or `\` reaches a result JSON-escaped (once, or twice
//  when the server prints JSON inside JSON), and one in a URL
//  percent-encoded. A form the same as another is kept once.
static int
s_add_secret (sb_mcp_config_t *cfg, const char *v)
{
    if (strlen (v) < S_SECRET_MIN)
        return 0;
    char *json = s_json_escaped (v);
    char *json2 = json ? s_json_escaped (json) : NULL;
    int rc = s_add_form (cfg, strdup (v));
    if (!rc && json)
        rc = s_add_form (cfg, strdup (json));
    if (!rc && json2)
        rc = s_add_form (cfg, strdup (json2));
    if (!rc)
        rc = s_add_form (cfg, s_url_encoded (v, true));
    if (!rc)
        rc = s_add_form (cfg, s_url_encoded (v, false));
    free (json);
    free (json2);
    return rc;
}

static int
s_timeout (json_t *srv, const char *key, int dflt, int *out, char *err, size_t errlen, const char *name)
{
    json_t *v = json_object_get (srv, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_integer (v) || json_integer_value (v) < 1 || json_integer_value (v) > SB_MCP_TIMEOUT_MAX_S) {
        s_fail (err, errlen, "mcpServers.%s.%s must be an integer from 1 to %d", name, key, SB_MCP_TIMEOUT_MAX_S);
        return -1;
    }
    *out = (int) json_integer_value (v) * 1000;
    return 0;
}

//  A {"NAME": "value"} object as a NULL-terminated list of "NAME<sep>value".
static char **
s_pairs (sb_mcp_config_t *cfg, json_t *obj, const char *sep, const char *what, const char *name,
         char *err, size_t errlen)
{
    if (!json_is_object (obj))
        return s_fail (err, errlen, "mcpServers.%s.%s must be an object of strings", name, what);
    if (json_object_size (obj) > SB_MCP_MAX_ENV)
        return s_fail (err, errlen, "mcpServers.%s.%s has more than %d entries", name, what, SB_MCP_MAX_ENV);
    char **v = calloc (json_object_size (obj) + 1, sizeof *v);
    if (!v)
        return s_fail (err, errlen, "out of memory");
    size_t n = 0;
    const char *k;
    json_t *val;
    json_object_foreach (obj, k, val) {
        const char *s = json_string_value (val);
        if (!s || !*k || strpbrk (k, "=:\r\n") || strpbrk (s, "\r\n") || strlen (s) > 32768) {
            s_strv_free (v);
            return s_fail (err, errlen, "mcpServers.%s.%s.%s must be a one-line string", name, what, k);
        }
        size_t len = strlen (k) + strlen (sep) + strlen (s) + 1;
        if (!(v [n] = malloc (len)) || s_add_secret (cfg, s) != 0) {
            s_strv_free (v);
            return s_fail (err, errlen, "out of memory");
        }
        snprintf (v [n++], len, "%s%s%s", k, sep, s);
        //  "Bearer <token>": the token alone is the secret too.
        const char *sp = strchr (s, ' ');
        if (sp && s_add_secret (cfg, sp + 1) != 0) {
            s_strv_free (v);
            return s_fail (err, errlen, "out of memory");
        }
    }
    return v;
}

//  "oauth": {"client_id", "client_secret", "private_key_file", "scope",
//  "client_metadata_url", "redirect_uri", "grant"}, all optional strings.
static int
s_oauth (sb_mcp_config_t *cfg, sb_mcp_oauth_conf_t *o, json_t *obj, const char *name, char *err, size_t errlen)
{
    if (!json_is_object (obj)) {
        s_fail (err, errlen, "mcpServers.%s.oauth must be an object", name);
        return -1;
    }
    struct { const char *key; char **field; bool url; } f [] = {
        { "client_id", &o->client_id, false }, { "client_secret", &o->client_secret, false },
        { "private_key_file", &o->private_key_file, false }, { "scope", &o->scope, false },
        { "client_metadata_url", &o->client_metadata_url, true }, { "redirect_uri", &o->redirect_uri, true },
        { "idp_token_endpoint", &o->idp_token_endpoint, true }, { "idp_client_id", &o->idp_client_id, false },
        { "id_token_file", &o->id_token_file, false },
    };
    const char *k;
    json_t *v;
    json_object_foreach (obj, k, v) {
        size_t i = 0;
        while (i < sizeof f / sizeof f [0] && strcmp (f [i].key, k) != 0)
            i++;
        if (i == sizeof f / sizeof f [0] && strcmp (k, "grant") != 0) {
            s_fail (err, errlen, "mcpServers.%s.oauth: unknown key \"%.40s\"", name, k);
            return -1;
        }
        const char *s = json_string_value (v);
        if (!s || !*s || strlen (s) > 4096 || strpbrk (s, "\r\n")) {
            s_fail (err, errlen, "mcpServers.%s.oauth.%s must be a one-line string", name, k);
            return -1;
        }
        if (i == sizeof f / sizeof f [0]) {
            if (strcmp (s, "client_credentials") != 0 && strcmp (s, "authorization_code") != 0
            &&  strcmp (s, "jwt_bearer") != 0) {
                s_fail (err, errlen, "mcpServers.%s.oauth.grant is \"authorization_code\", \"client_credentials\" "
                        "or \"jwt_bearer\"", name);
                return -1;
            }
            o->client_credentials = strcmp (s, "client_credentials") == 0;
            o->jwt_bearer = strcmp (s, "jwt_bearer") == 0;
            continue;
        }
        if (f [i].url && strncmp (s, "http://", 7) != 0 && strncmp (s, "https://", 8) != 0) {
            s_fail (err, errlen, "mcpServers.%s.oauth.%s must be an http:// or https:// URL", name, k);
            return -1;
        }
        if (!(*f [i].field = strdup (s)) || (f [i].field == &o->client_secret && s_add_secret (cfg, s) != 0)) {
            s_fail (err, errlen, "out of memory");
            return -1;
        }
    }
    if ((o->client_credentials || o->jwt_bearer) && !o->client_id) {
        s_fail (err, errlen, "mcpServers.%s.oauth: the %s grant needs a client_id", name,
                o->jwt_bearer ? "jwt_bearer" : "client_credentials");
        return -1;
    }
    if (o->jwt_bearer && (!o->idp_token_endpoint || !o->id_token_file)) {
        s_fail (err, errlen, "mcpServers.%s.oauth: the jwt_bearer grant needs idp_token_endpoint and id_token_file",
                name);
        return -1;
    }
    return 0;
}

static int
s_server (sb_mcp_config_t *cfg, sb_mcp_server_conf_t *s, const char *name, json_t *srv, char *err, size_t errlen)
{
    if (!s_name_ok (name)) {
        s_fail (err, errlen, "mcpServers: the name \"%.40s\" must be 1 to %d letters, digits, - or _ (no \"__\")",
                name, SB_MCP_NAME_MAX);
        return -1;
    }
    snprintf (s->name, sizeof s->name, "%s", name);
    if (!json_is_object (srv)) {
        s_fail (err, errlen, "mcpServers.%s must be an object", name);
        return -1;
    }
    const char *type = json_string_value (json_object_get (srv, "type"));
    if (type && strcmp (type, "sse") == 0) {
        s_fail (err, errlen, "mcpServers.%s: the old SSE transport is not supported; use streamable HTTP", name);
        return -1;
    }
    json_t *cmd = json_object_get (srv, "command");
    json_t *url = json_object_get (srv, "url");
    if ((cmd != NULL) == (url != NULL)) {
        s_fail (err, errlen, "mcpServers.%s needs either \"command\" (stdio) or \"url\" (streamable HTTP)", name);
        return -1;
    }
    if (s_timeout (srv, "startup_timeout_s", SB_MCP_STARTUP_MS, &s->startup_ms, err, errlen, name)
    ||  s_timeout (srv, "timeout_s", SB_MCP_CALL_MS, &s->call_ms, err, errlen, name))
        return -1;
    if (cmd) {
        json_t *args = json_object_get (srv, "args");
        if (!json_is_string (cmd) || !*json_string_value (cmd) || (args && !json_is_array (args))
        ||  (args && json_array_size (args) > SB_MCP_MAX_ARGS)) {
            s_fail (err, errlen, "mcpServers.%s: \"command\" must be a string and \"args\" an array of at most %d strings",
                    name, SB_MCP_MAX_ARGS);
            return -1;
        }
        size_t na = args ? json_array_size (args) : 0;
        s->argv = calloc (na + 2, sizeof *s->argv);
        if (!s->argv || !(s->argv [0] = strdup (json_string_value (cmd)))) {
            s_fail (err, errlen, "out of memory");
            return -1;
        }
        for (size_t k = 0; k < na; k++) {
            const char *a = json_string_value (json_array_get (args, k));
            if (!a) {
                s_fail (err, errlen, "mcpServers.%s.args[%zu] is not a string", name, k);
                return -1;
            }
            if (!(s->argv [k + 1] = strdup (a))) {
                s_fail (err, errlen, "out of memory");
                return -1;
            }
        }
        json_t *env = json_object_get (srv, "env");
        if (env && !(s->env = s_pairs (cfg, env, "=", "env", name, err, errlen)))
            return -1;
    }
    else {
        const char *u = json_string_value (url);
        if (!u || (strncmp (u, "http://", 7) != 0 && strncmp (u, "https://", 8) != 0) || strlen (u) > 4096) {
            s_fail (err, errlen, "mcpServers.%s.url must be an http:// or https:// URL", name);
            return -1;
        }
        if (!(s->url = strdup (u))) {
            s_fail (err, errlen, "out of memory");
            return -1;
        }
        json_t *h = json_object_get (srv, "headers");
        if (h && !(s->headers = s_pairs (cfg, h, ": ", "headers", name, err, errlen)))
            return -1;
        json_t *o = json_object_get (srv, "oauth");
        if (o && s_oauth (cfg, &s->oauth, o, name, err, errlen))
            return -1;
    }
    return 0;
}

static int
s_longest_first (const void *a, const void *b)
{
    size_t la = strlen (*(char *const *) a), lb = strlen (*(char *const *) b);
    return la < lb ? 1 : la > lb ? -1 : 0;
}

sb_mcp_config_t *
sb_mcp_config_load (const char *path, bool required, char *err, size_t errlen)
{
    err [0] = 0;
    struct stat st;
    if (stat (path, &st) != 0) {
        if (errno == ENOENT && !required)
            return NULL;
        return s_fail (err, errlen, "%s: %s", path, strerror (errno));
    }
    if (!S_ISREG (st.st_mode) || st.st_size > SB_MCP_CONFIG_MAX_BYTES)
        return s_fail (err, errlen, "%s: not a regular file of at most %u bytes", path, SB_MCP_CONFIG_MAX_BYTES);
    json_error_t jerr;
    json_t *root = json_load_file (path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return s_fail (err, errlen, "%s:%d: %s", path, jerr.line, jerr.text);
    json_t *servers = json_object_get (root, "mcpServers");
    if (!json_is_object (root) || (servers && !json_is_object (servers))) {
        json_decref (root);
        return s_fail (err, errlen, "%s: expected {\"mcpServers\": {NAME: {...}}}", path);
    }
    size_t n = servers ? json_object_size (servers) : 0;
    if (n > SB_MCP_MAX_SERVERS) {
        json_decref (root);
        return s_fail (err, errlen, "%s: more than %d servers", path, SB_MCP_MAX_SERVERS);
    }
    sb_mcp_config_t *cfg = calloc (1, sizeof *cfg);
    if (!cfg || !(cfg->servers = calloc (n + 1, sizeof *cfg->servers)) || !(cfg->source = strdup (path))) {
        json_decref (root);
        sb_mcp_config_destroy (&cfg);
        return s_fail (err, errlen, "out of memory");
    }
    const char *name;
    json_t *srv;
    if (servers)
        json_object_foreach (servers, name, srv) {
            if (json_is_object (srv) && json_is_true (json_object_get (srv, "disabled")))
                continue;
            if (s_server (cfg, &cfg->servers [cfg->n++], name, srv, err, errlen) != 0) {
                json_decref (root);
                sb_mcp_config_destroy (&cfg);
                return NULL;
            }
        }
    json_decref (root);
    //  The longest first, so a secret that contains another is replaced whole.
    if (cfg->nsecrets)
        qsort (cfg->secrets, cfg->nsecrets, sizeof *cfg->secrets, s_longest_first);
    return cfg;
}

void
sb_mcp_blank (char *text, const char *secret)
{
    size_t sl = secret ? strlen (secret) : 0;
    char *hit = text && sl >= S_SECRET_MIN ? strstr (text, secret) : NULL;
    if (!hit)
        return;
    //  "***" is never longer than a secret (S_SECRET_MIN), so in place.
    char *w = text, *r = text;
    while ((hit = strstr (r, secret))) {
        size_t pre = (size_t) (hit - r);
        memmove (w, r, pre);
        w += pre;
        memcpy (w, "***", 3);
        w += 3;
        r = hit + sl;
    }
    memmove (w, r, strlen (r) + 1);
}

char *
sb_mcp_redact (const sb_mcp_config_t *cfg, const char *text)
{
    char *out = strdup (text ? text : "");
    for (size_t k = 0; out && cfg && k < cfg->nsecrets; k++)
        sb_mcp_blank (out, cfg->secrets [k]);
    return out;
}
