/*  tests/unit/test_mcp.c — the MCP client's pieces that need no server:
    the mcpServers file (actors/exec/mcp_config.c), the redaction of its
    secrets, the bounded line reader, the message classifier and the SSE
    line decoder (actors/exec/mcp_rpc.c), and AGENTS.md loading
    (actors/exec/agents_md.c), elicitation's schema and content checks
    (actors/exec/mcp_elicit.c), sampling's request checks and answers
    (actors/exec/mcp_sample.c).
*/
#include "actors/exec/agents_md.h"
#include "actors/exec/mcp.h"
#include "actors/exec/mcp_elicit.h"
#include "actors/exec/mcp_sample.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir [PATH_MAX];

static void
s_setup (void)
{
    snprintf (s_dir, sizeof s_dir, "/tmp/sb_test_mcp_XXXXXX");
    cr_assert_not_null (mkdtemp (s_dir));
    char real [PATH_MAX];
    cr_assert_not_null (realpath (s_dir, real));
    snprintf (s_dir, sizeof s_dir, "%s", real);
}

static void
s_teardown (void)
{
    char cmd [PATH_MAX + 16];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    cr_assert_eq (system (cmd), 0);
}

static const char *
s_write (const char *rel, const char *text)
{
    static char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/%s", s_dir, rel);
    char dir [PATH_MAX];
    snprintf (dir, sizeof dir, "%s", path);
    *strrchr (dir, '/') = 0;
    char cmd [PATH_MAX + 16];
    snprintf (cmd, sizeof cmd, "mkdir -p '%s'", dir);
    cr_assert_eq (system (cmd), 0);
    FILE *f = fopen (path, "w");
    cr_assert_not_null (f);
    fputs (text, f);
    fclose (f);
    return path;
}

TestSuite (mcp, .init = s_setup, .fini = s_teardown);

Test (mcp, config_loads_both_transports_and_collects_secrets)
{
    const char *p = s_write ("mcp.json",
        "{\"mcpServers\": {"
        " \"a\": {\"command\": \"node\", \"args\": [\"x.js\", \"stdio\"], \"env\": {\"TOKEN\": \"tok-123456789\"},"
        "        \"timeout_s\": 5},"
        " \"b-2\": {\"url\": \"https://h/mcp\", \"headers\": {\"Authorization\": \"Bearer abcdefgh12\"}},"
        " \"off\": {\"command\": \"x\", \"disabled\": true}}}");
    char err [512];
    sb_mcp_config_t *cfg = sb_mcp_config_load (p, true, err, sizeof err);
    cr_assert_not_null (cfg, "%s", err);
    cr_assert_eq (cfg->n, 2);
    cr_assert_str_eq (cfg->servers [0].name, "a");
    cr_assert_str_eq (cfg->servers [0].argv [0], "node");
    cr_assert_str_eq (cfg->servers [0].argv [2], "stdio");
    cr_assert_null (cfg->servers [0].argv [3]);
    cr_assert_str_eq (cfg->servers [0].env [0], "TOKEN=tok-123456789");
    cr_assert_eq (cfg->servers [0].call_ms, 5000);
    cr_assert_eq (cfg->servers [0].startup_ms, SB_MCP_STARTUP_MS);
    cr_assert_str_eq (cfg->servers [1].url, "https://h/mcp");
    cr_assert_str_eq (cfg->servers [1].headers [0], "Authorization: Bearer abcdefgh12");
    //  the whole header value and the token alone
    char *red = sb_mcp_redact (cfg, "x tok-123456789 y Bearer abcdefgh12 z abcdefgh12.");
    cr_assert_str_eq (red, "x *** y *** z ***.");
    free (red);
    sb_mcp_config_destroy (&cfg);
    cr_assert_null (cfg);
}

Test (mcp, secrets_are_redacted_in_every_encoding)
{
    //  the value is  se"cr\et 1  : a quote, a backslash and a space
    const char *p = s_write ("mcp.json",
        "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"env\": {\"T\": \"se\\\"cr\\\\et 1\"}}}}");
    char err [512];
    sb_mcp_config_t *cfg = sb_mcp_config_load (p, true, err, sizeof err);
    cr_assert_not_null (cfg, "%s", err);
    static const char *forms [] = {
        "se\"cr\\et 1",             //  as it is
        "se\\\"cr\\\\et 1",         //  JSON-escaped
        "se\\\\\\\"cr\\\\\\\\et 1", //  JSON-escaped twice
        "se%22cr%5Cet%201",         //  percent-encoded
        "se%22cr%5cet%201",         //  the same, lower case hex
    };
    for (size_t k = 0; k < sizeof forms / sizeof forms [0]; k++) {
        char text [128];
        snprintf (text, sizeof text, "<%s>", forms [k]);
        char *red = sb_mcp_redact (cfg, text);
        cr_expect_str_eq (red, "<***>", "form %zu: %s became %s", k, text, red);
        free (red);
    }
    sb_mcp_config_destroy (&cfg);
}

Test (mcp, config_refuses_what_it_cannot_run)
{
    static const struct { const char *json, *says; } bad [] = {
        { "{\"mcpServers\": {\"a b\": {\"command\": \"x\"}}}", "a b" },
        { "{\"mcpServers\": {\"a__b\": {\"command\": \"x\"}}}", "__" },
        { "{\"mcpServers\": {\"a\": {}}}", "either" },
        { "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"url\": \"http://h\"}}}", "either" },
        { "{\"mcpServers\": {\"a\": {\"url\": \"ftp://h\"}}}", "http" },
        { "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"args\": [1]}}}", "args" },
        { "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"timeout_s\": 0}}}", "timeout_s" },
        { "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"env\": {\"K\": 5}}}}", "env" },
        { "{\"mcpServers\": {\"a\": {\"type\": \"sse\", \"url\": \"http://h\"}}}", "SSE" },
        { "{\"mcpServers\": []}", "mcpServers" },
        { "{\"mcpServers\": {\"a\": {\"command\": \"x\"}, \"a\": {\"command\": \"y\"}}}", "duplicate" },
        { "not json", "" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad [0]; k++) {
        const char *p = s_write ("bad.json", bad [k].json);
        char err [512] = "";
        sb_mcp_config_t *cfg = sb_mcp_config_load (p, false, err, sizeof err);
        cr_expect_null (cfg, "accepted %s", bad [k].json);
        cr_expect (err [0] && strstr (err, bad [k].says), "%s: the error '%s' does not say '%s'", bad [k].json, err,
                   bad [k].says);
        sb_mcp_config_destroy (&cfg);
    }
    char err [512] = "x";
    char missing [PATH_MAX + 16];
    snprintf (missing, sizeof missing, "%s/none.json", s_dir);
    cr_assert_null (sb_mcp_config_load (missing, false, err, sizeof err));
    cr_assert_str_empty (err, "a missing optional file is no error: %s", err);
    cr_assert_null (sb_mcp_config_load (missing, true, err, sizeof err));
    cr_assert_str_not_empty (err);
}

typedef struct {
    int n;
    char last [64];
} s_lines_t;

static void
s_count (const char *line, size_t len, void *arg)
{
    s_lines_t *c = arg;
    c->n++;
    snprintf (c->last, sizeof c->last, "%.*s", (int) (len < 63 ? len : 63), line);
}

Test (mcp, line_reader_is_bounded_and_drops_long_lines_whole)
{
    sb_mcp_lines_t r;
    sb_mcp_lines_init (&r, 64);
    s_lines_t c = { 0 };
    char junk [1000];
    memset (junk, 'x', sizeof junk);
    //  a flood without a newline, in pieces: never held past the bound
    for (int k = 0; k < 100; k++) {
        sb_mcp_lines_feed (&r, junk, sizeof junk, s_count, &c);
        cr_assert_leq (r.len, 64);
        cr_assert_leq (r.cap, 65);
    }
    const char *two = "\n{\"a\":1}\r\n{\"b\"";
    sb_mcp_lines_feed (&r, two, strlen (two), s_count, &c);
    cr_assert_eq (c.n, 1, "the long line was not dropped whole");
    cr_assert_str_eq (c.last, "{\"a\":1}");
    cr_assert_eq (r.oversized, 1);
    sb_mcp_lines_feed (&r, ":2}\n", 4, s_count, &c);
    cr_assert_eq (c.n, 2);
    cr_assert_str_eq (c.last, "{\"b\":2}");
    sb_mcp_lines_clear (&r);
}

Test (mcp, messages_are_classified)
{
    static const struct { const char *line; sb_mcp_msg_kind_t kind; int64_t id; } cases [] = {
        { "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}", SB_MCP_MSG_RESPONSE, 3 },
        { "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":1,\"message\":\"m\"}}", SB_MCP_MSG_RESPONSE, 4 },
        { "{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"result\":{}}", SB_MCP_MSG_RESPONSE, -1 },
        { "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}", SB_MCP_MSG_REQUEST, -1 },
        { "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}", SB_MCP_MSG_NOTIFICATION, -1 },
        { "{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}", SB_MCP_MSG_INVALID, -1 },
        { "{\"jsonrpc\":\"2.0\",\"id\":1}", SB_MCP_MSG_INVALID, -1 },
        { "[1,2]", SB_MCP_MSG_INVALID, -1 },
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"result\":{}}", SB_MCP_MSG_INVALID, -1 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases [0]; k++) {
        void *json;
        int64_t id;
        sb_mcp_msg_kind_t kind = sb_mcp_msg_parse (cases [k].line, strlen (cases [k].line), &json, &id);
        cr_expect_eq (kind, cases [k].kind, "%s: kind %d", cases [k].line, kind);
        cr_expect_eq (id, cases [k].id, "%s: id %lld", cases [k].line, (long long) id);
        cr_expect_eq (json != NULL, kind != SB_MCP_MSG_INVALID);
        json_decref (json);
    }
    cr_assert (sb_mcp_is_tool ("mcp__a__b"));
    cr_assert (!sb_mcp_is_tool ("read_file"));
}

Test (mcp, agents_md_nested_order_confinement_and_cap)
{
    char root [PATH_MAX], ws [PATH_MAX];
    snprintf (root, sizeof root, "%s/repo", s_dir);
    s_write ("repo/.git/HEAD", "ref\n");
    s_write ("repo/AGENTS.md", "ROOT\n");
    s_write ("repo/a/AGENTS.md", "MID\n");
    s_write ("repo/a/b/keep.txt", "");
    s_write ("outside/AGENTS.md", "OUTSIDE\n");
    const char *personal = s_write ("personal.md", "MINE\n");
    snprintf (ws, sizeof ws, "%s/a/b", root);
    char link [PATH_MAX + 16], target [PATH_MAX + 16];
    snprintf (link, sizeof link, "%s/AGENTS.md", ws);
    snprintf (target, sizeof target, "%s/outside/AGENTS.md", s_dir);
    cr_assert_eq (symlink (target, link), 0);
    sb_agents_t a;
    cr_assert_eq (sb_agents_load (ws, personal, &a), 0);
    cr_assert_eq (a.npaths, 3, "paths: %zu", a.npaths);
    cr_assert_str_eq (a.paths [0], personal);
    cr_assert (strstr (a.paths [1], "/repo/AGENTS.md"));
    cr_assert (strstr (a.paths [2], "/repo/a/AGENTS.md"));
    const char *mine = strstr (a.text, "MINE"), *r = strstr (a.text, "ROOT"), *m = strstr (a.text, "MID");
    cr_assert (mine && r && m && mine < r && r < m, "%s", a.text);
    cr_assert_null (strstr (a.text, "OUTSIDE"), "a symlink out of the project was followed");
    cr_assert_eq (a.bytes, strlen (a.text));
    cr_assert (!a.truncated);
    sb_agents_clear (&a);

    //  past the cap: cut on a character boundary, with a note
    size_t big = SB_AGENTS_MAX_BYTES + 5000;
    char *text = malloc (big + 1);
    for (size_t k = 0; k < big; k += 2)
        memcpy (text + k, "\xc3\xa9", 2);      //  é, two bytes each
    text [big] = 0;
    s_write ("repo/AGENTS.md", text);
    free (text);
    cr_assert_eq (sb_agents_load (ws, "", &a), 0);
    cr_assert (a.truncated);
    cr_assert_leq (a.bytes, SB_AGENTS_MAX_BYTES + 200);
    cr_assert (strstr (a.text, "more bytes were not included"));
    cr_assert_null (strstr (a.text, "MID"), "a file past the cap was added");
    //  valid UTF-8: no é is cut in half before the note
    const char *note = strstr (a.text, "\n[... AGENTS.md");
    cr_assert ((unsigned char) note [-1] != 0xc3, "the cut split a character");
    sb_agents_clear (&a);
}


//  The SSE line decoder of streamable HTTP: data out, id and retry kept
//  within their bounds, anything malformed ignored.
Test (mcp_sse, data_id_and_retry)
{
    sb_mcp_sse_t s;
    sb_mcp_sse_init (&s);
    size_t n = 0;
    const char *d = sb_mcp_sse_line (&s, "data: {\"a\":1}", 13, &n);
    cr_assert (d && n == 7 && memcmp (d, "{\"a\":1}", 7) == 0);
    cr_assert_null (sb_mcp_sse_line (&s, "data:", 5, &n));
    cr_assert_null (sb_mcp_sse_line (&s, "event: message", 14, &n));
    cr_assert_null (sb_mcp_sse_line (&s, "id: event-1", 11, &n));
    cr_assert_str_eq (s.last_id, "event-1");
    cr_assert_null (sb_mcp_sse_line (&s, "retry: 500", 10, &n));
    cr_assert_eq (s.retry_ms, 500);
    sb_mcp_sse_line (&s, "retry: 5x", 9, &n);
    sb_mcp_sse_line (&s, "retry:", 6, &n);
    sb_mcp_sse_line (&s, "retry: -1", 9, &n);
    cr_assert_eq (s.retry_ms, 500, "a retry that is not digits is ignored");
    sb_mcp_sse_line (&s, "retry: 99999999999999999999999", 30, &n);
    cr_assert_eq (s.retry_ms, SB_MCP_SSE_RETRY_MAX_MS, "clamped, without overflow");
    sb_mcp_sse_line (&s, "ident: x", 8, &n);
    cr_assert_str_eq (s.last_id, "event-1", "another field is not id");
}

Test (mcp_sse, ids_over_the_bound_or_with_nul_are_ignored)
{
    sb_mcp_sse_t s;
    sb_mcp_sse_init (&s);
    cr_assert_eq (s.retry_ms, -1);
    cr_assert_str_eq (s.last_id, "");
    char line [SB_MCP_SSE_ID_MAX + 8];
    memcpy (line, "id:", 3);
    memset (line + 3, 'x', SB_MCP_SSE_ID_MAX + 1);
    size_t n;
    sb_mcp_sse_line (&s, line, 3 + SB_MCP_SSE_ID_MAX + 1, &n);
    cr_assert_str_eq (s.last_id, "", "an id over the bound is not kept");
    sb_mcp_sse_line (&s, line, 3 + SB_MCP_SSE_ID_MAX, &n);
    cr_assert_eq (strlen (s.last_id), SB_MCP_SSE_ID_MAX, "one at the bound is");
    sb_mcp_sse_line (&s, "id: a\0b", 7, &n);
    cr_assert_eq (strlen (s.last_id), SB_MCP_SSE_ID_MAX, "one with a NUL is not");
    sb_mcp_sse_line (&s, "id:", 3, &n);
    cr_assert_str_eq (s.last_id, "", "an empty id resets it, as SSE says");
}

static json_t *
s_json (const char *text)
{
    json_t *j = json_loads (text, 0, NULL);
    cr_assert_not_null (j, "bad test JSON: %s", text);
    return j;
}

#define S_SCHEMA "{\"type\":\"object\",\"required\":[\"name\"],\"properties\":{" \
    "\"name\":{\"type\":\"string\",\"maxLength\":8}," \
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150,\"default\":30}," \
    "\"color\":{\"type\":\"string\",\"enum\":[\"red\",\"green\"],\"default\":\"green\"}," \
    "\"ok\":{\"type\":\"boolean\",\"default\":true}}}"

Test (mcp_elicit, content_gets_the_defaults_and_keeps_what_was_given)
{
    json_t *schema = s_json (S_SCHEMA);
    char err [256];
    cr_assert_eq (sb_elicit_schema_check (schema, err, sizeof err), 0, "%s", err);
    json_t *given = s_json ("{\"name\":\"Ada\",\"age\":41}");
    json_t *c = sb_elicit_content (schema, given, err, sizeof err);
    cr_assert_not_null (c, "%s", err);
    json_t *want = s_json ("{\"name\":\"Ada\",\"age\":41,\"color\":\"green\",\"ok\":true}");
    cr_assert (json_equal (c, want));
    json_decref (c);
    json_decref (want);
    json_decref (given);
    json_decref (schema);
}

Test (mcp_elicit, content_that_fails_the_schema_is_refused_with_the_field)
{
    json_t *schema = s_json (S_SCHEMA);
    const struct { const char *given, *why; } cases [] = {
        { "{}", "'name' is required" },
        { "{\"name\":\"Ada\",\"age\":\"41\"}", "'age' is not an integer" },
        { "{\"name\":\"Ada\",\"age\":4.5}", "'age' is not an integer" },
        { "{\"name\":\"Ada\",\"age\":151}", "'age' is outside its bounds" },
        { "{\"name\":\"Ada\",\"color\":\"blue\"}", "'color' is not one of its choices" },
        { "{\"name\":\"Adalovelace\"}", "'name' has a length outside its bounds" },
        { "{\"name\":\"Ada\",\"ok\":1}", "'ok' is not a boolean" },
        { "{\"name\":\"Ada\",\"extra\":1}", "'extra' is not one of the fields asked for" },
        { "[1]", "not a JSON object" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases [0]; k++) {
        json_t *given = s_json (cases [k].given);
        char err [256] = "";
        json_t *c = sb_elicit_content (schema, given, err, sizeof err);
        cr_assert_null (c, "%s was taken", cases [k].given);
        cr_assert (strstr (err, cases [k].why), "%s: '%s', not '%s'", cases [k].given, err, cases [k].why);
        json_decref (given);
    }
    json_decref (schema);
}

Test (mcp_elicit, schemas_outside_the_restriction_are_refused)
{
    const char *bad [] = {
        "[]",
        "{\"type\":\"object\"}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\"}}}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"enum\":[1]}}}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"enum\":[]}}}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"enum\":[\"x\"],\"default\":\"y\"}}}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\",\"minimum\":\"0\"}}}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"b\"]}",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad [0]; k++) {
        json_t *s = s_json (bad [k]);
        char err [256] = "";
        cr_assert_eq (sb_elicit_schema_check (s, err, sizeof err), -1, "%s was taken", bad [k]);
        cr_assert (err [0]);
        json_decref (s);
    }
    //  Over the bound of properties.
    json_t *props = json_object ();
    for (int k = 0; k <= SB_ELICIT_FIELDS_MAX; k++) {
        char name [16];
        snprintf (name, sizeof name, "f%d", k);
        json_object_set_new (props, name, json_pack ("{s:s}", "type", "boolean"));
    }
    json_t *s = json_pack ("{s:s, s:o}", "type", "object", "properties", props);
    char err [256];
    cr_assert_eq (sb_elicit_schema_check (s, err, sizeof err), -1);
    cr_assert (strstr (err, "over 32 properties"), "%s", err);
    json_decref (s);
}


/* ------------------------------------------------------------------ */
/*  Sampling */

#define S_MSG(text) "{\"role\":\"user\",\"content\":{\"type\":\"text\",\"text\":\"" text "\"}}"

Test (mcp_sample, a_request_is_read_with_its_fields)
{
    json_t *p = s_json ("{\"messages\":[" S_MSG ("hi") ",{\"role\":\"assistant\",\"content\":{\"type\":\"text\","
                        "\"text\":\"yes?\"}}],\"systemPrompt\":\"be brief\",\"maxTokens\":20,\"temperature\":0.5,"
                        "\"includeContext\":\"thisServer\",\"modelPreferences\":{\"hints\":[{\"name\":\"claude\"},{}],"
                        "\"costPriority\":0.3}}");
    sb_mcp_sample_t req;
    char err [256] = "";
    cr_assert_eq (sb_mcp_sample_parse (p, &req, err, sizeof err), 0, "%s", err);
    cr_assert_eq (req.n, 2);
    cr_assert_str_eq (req.messages [1].role, "assistant");
    cr_assert_str_eq (req.messages [1].text, "yes?");
    cr_assert_str_eq (req.system, "be brief");
    cr_assert_eq (req.max_tokens, 20);
    cr_assert (req.has_temperature && req.temperature == 0.5);
    cr_assert_eq (req.nhints, 1, "a hint without a name is no hint");
    cr_assert_str_eq (req.hints [0], "claude");
    json_decref (p);
}

//  A 3x2 RGB PNG, base64, and a user message holding it.
#define S_PNG "iVBORw0KGgoAAAANSUhEUgAAAAMAAAACCAIAAAASFvFNAAAAC0lEQVR4nGNgwAQAABQAAX3+Hu4AAAAASUVORK5CYII="
#define S_IMG "{\"role\":\"user\",\"content\":{\"type\":\"image\",\"data\":\"" S_PNG "\",\"mimeType\":\"image/png\"}}"

Test (mcp_sample, requests_outside_the_bounds_are_refused_with_the_field)
{
    const struct { const char *params, *why; } cases [] = {
        { "{\"maxTokens\":10}", "messages" },
        { "{\"messages\":[],\"maxTokens\":10}", "messages" },
        { "{\"messages\":[{\"role\":\"system\",\"content\":{\"type\":\"text\",\"text\":\"x\"}}],"
          "\"maxTokens\":10}", "role" },
        { "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"image\",\"data\":\"AA\"}}],"
          "\"maxTokens\":10}", "needs data (base64) and mimeType" },
        { "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"audio\",\"data\":\"AA\","
          "\"mimeType\":\"audio/wav\"}}],\"maxTokens\":10}", "audio content is not supported" },
        { "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"image\",\"data\":\"!!!!\","
          "\"mimeType\":\"image/png\"}}],\"maxTokens\":10}", "not base64" },
        { "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"image\",\"data\":\"aGVsbG8=\","
          "\"mimeType\":\"image/png\"}}],\"maxTokens\":10}", "not a PNG, JPEG, GIF or WebP image" },
        { "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"image\",\"data\":\"" S_PNG "\","
          "\"mimeType\":\"image/gif\"}}],\"maxTokens\":10}", "its mimeType says image/gif, its bytes are image/png" },
        { "{\"messages\":[{\"role\":\"assistant\",\"content\":{\"type\":\"image\",\"data\":\"" S_PNG "\","
          "\"mimeType\":\"image/png\"}}],\"maxTokens\":10}", "from the user only" },
        { "{\"messages\":[" S_IMG "," S_IMG "," S_IMG "," S_IMG "," S_IMG "],\"maxTokens\":10}", "more than 4 images" },
        //  3x5120 by its header, no pixels: over the side models take, and
        //  not decodable (tests/fuzz found it left an image without data)
        { "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"image\",\"data\":"
          "\"iVBORw0KGgoAAAANSUhEUgAAAAMAABQAAX3+Hu4AAAAASUVORK5CYII=\",\"mimeType\":\"image/png\"}}],"
          "\"maxTokens\":10}", "cannot be downscaled" },
        { "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}],"
          "\"maxTokens\":10}", "one content object" },
        { "{\"messages\":[" S_MSG ("x") "]}", "maxTokens" },
        { "{\"messages\":[" S_MSG ("x") "],\"maxTokens\":0}", "maxTokens" },
        { "{\"messages\":[" S_MSG ("x") "],\"maxTokens\":16385}", "maxTokens" },
        { "{\"messages\":[" S_MSG ("x") "],\"maxTokens\":1.5}", "maxTokens" },
        { "{\"messages\":[" S_MSG ("x") "],\"maxTokens\":9,\"temperature\":3}", "temperature" },
        { "{\"messages\":[" S_MSG ("x") "],\"maxTokens\":9,\"systemPrompt\":7}", "systemPrompt" },
        { "{\"messages\":[" S_MSG ("x") "],\"maxTokens\":9,\"includeContext\":\"everything\"}", "includeContext" },
        { "{\"messages\":[" S_MSG ("x") "],\"maxTokens\":9,\"modelPreferences\":{\"costPriority\":2}}",
          "modelPreferences" },
        { "{\"messages\":[" S_MSG ("x") "],\"maxTokens\":9,\"modelPreferences\":{\"hints\":[1]}}", "hint" },
        { "{\"messages\":[" S_MSG ("x") "],\"maxTokens\":9,\"stopSequences\":\"x\"}", "stopSequences" },
        { "{\"messages\":[" S_MSG ("x") "],\"maxTokens\":9,\"metadata\":[]}", "metadata" },
        { "{\"messages\":[" S_MSG ("a\\u0000b") "],\"maxTokens\":9}", "not a string" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases [0]; k++) {
        json_t *p = json_loads (cases [k].params, JSON_ALLOW_NUL, NULL);
        cr_assert_not_null (p, "bad test JSON: %s", cases [k].params);
        sb_mcp_sample_t req;
        char err [256] = "";
        cr_assert_eq (sb_mcp_sample_parse (p, &req, err, sizeof err), -1, "%s was taken", cases [k].params);
        cr_assert (strstr (err, cases [k].why), "%s: '%s', not '%s'", cases [k].params, err, cases [k].why);
        for (size_t i = 0; i < req.nimages; i++)
            cr_assert_not_null (req.images [i].data, "%s: an image without its data", cases [k].params);
        sb_mcp_sample_clear (&req);
        json_decref (p);
    }
}

Test (mcp_sample, an_image_is_decoded_and_sniffed)
{
    json_t *p = s_json ("{\"messages\":[" S_MSG ("what is it?") "," S_IMG "],\"maxTokens\":10}");
    sb_mcp_sample_t req;
    char err [256] = "";
    cr_assert_eq (sb_mcp_sample_parse (p, &req, err, sizeof err), 0, "%s", err);
    cr_assert_eq (req.n, 2);
    cr_assert_eq (req.nimages, 1);
    cr_assert_null (req.messages [0].image);
    cr_assert_eq (req.messages [1].image, &req.images [0]);
    cr_assert_str_eq (req.messages [1].text, "");
    const sb_mcp_sample_image_t *im = &req.images [0];
    cr_assert_str_eq (im->mime, "image/png");
    cr_assert (im->width == 3 && im->height == 2 && im->len == im->sent_bytes && im->len > 8);
    cr_assert (memcmp (im->data, "\x89PNG\r\n\x1a\n", 8) == 0, "not the PNG's bytes");
    sb_mcp_sample_clear (&req);
    cr_assert_eq (req.nimages, 0);
    json_decref (p);
}

Test (mcp_sample, too_many_messages_or_too_much_text_is_refused)
{
    json_t *msgs = json_array ();
    for (int k = 0; k <= SB_MCP_SAMPLE_MESSAGES_MAX; k++)
        json_array_append_new (msgs, s_json (S_MSG ("x")));
    json_t *p = json_pack ("{s:o, s:i}", "messages", msgs, "maxTokens", 10);
    sb_mcp_sample_t req;
    char err [256] = "";
    cr_assert_eq (sb_mcp_sample_parse (p, &req, err, sizeof err), -1, "65 messages were taken");
    json_decref (p);
    char *big = malloc (SB_MCP_SAMPLE_TEXT_MAX + 1);
    memset (big, 'a', SB_MCP_SAMPLE_TEXT_MAX);
    big [SB_MCP_SAMPLE_TEXT_MAX] = 0;
    p = json_pack ("{s:[{s:s, s:{s:s, s:s}}], s:s, s:i}", "messages", "role", "user", "content", "type", "text", "text",
                   big, "systemPrompt", "one more byte", "maxTokens", 10);
    cr_assert_eq (sb_mcp_sample_parse (p, &req, err, sizeof err), -1, "over 256 KiB was taken");
    cr_assert (strstr (err, "over"), "%s", err);
    json_decref (p);
    free (big);
}

//  A sampler that answers as told, for the answers' shapes.
static sb_mcp_sample_outcome_t
s_sampler (void *arg, const char *server, const sb_mcp_sample_t *req, sb_mcp_sample_reply_t *reply)
{
    sb_mcp_sample_outcome_t *outcome = arg;
    if (*outcome == SB_MCP_SAMPLE_DONE) {
        reply->text = strdup (req->messages [0].text);
        snprintf (reply->model, sizeof reply->model, "m-%s", server);
        snprintf (reply->stop_reason, sizeof reply->stop_reason, "maxTokens");
    }
    return *outcome;
}

Test (mcp_sample, answers_are_the_specifications_shapes)
{
    json_t *m = s_json ("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"sampling/createMessage\",\"params\":"
                        "{\"messages\":[" S_MSG ("echo") "],\"maxTokens\":5}}");
    json_t *r = sb_mcp_sample_answer (m, "srv", NULL, NULL);
    cr_assert_eq (json_integer_value (json_object_get (json_object_get (r, "error"), "code")), -32601);
    json_decref (r);
    sb_mcp_sample_outcome_t outcome = SB_MCP_SAMPLE_DONE;
    r = sb_mcp_sample_answer (m, "srv", s_sampler, &outcome);
    json_t *want = s_json ("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"role\":\"assistant\",\"content\":"
                           "{\"type\":\"text\",\"text\":\"echo\"},\"model\":\"m-srv\",\"stopReason\":\"maxTokens\"}}");
    cr_assert (json_equal (r, want));
    json_decref (want);
    json_decref (r);
    outcome = SB_MCP_SAMPLE_REJECTED;
    r = sb_mcp_sample_answer (m, "srv", s_sampler, &outcome);
    json_t *e = json_object_get (r, "error");
    cr_assert_eq (json_integer_value (json_object_get (e, "code")), SB_MCP_SAMPLE_REJECTED_CODE);
    cr_assert_str_eq (json_string_value (json_object_get (e, "message")), "User rejected sampling request");
    json_decref (r);
    json_decref (m);
}
