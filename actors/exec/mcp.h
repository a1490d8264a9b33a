/*  actors/exec/mcp.h — the executor's MCP client (docs/mcp.md).

    Configuration, in the shape MCP clients share, from `--mcp-config FILE`
    (serve, run) or DATA/mcp.json:

        {"mcpServers": {
           "NAME": {"command": "node", "args": ["server.js", "stdio"],
                    "env": {"TOKEN": "..."}, "timeout_s": 120, "startup_timeout_s": 30},
           "NAME2": {"url": "https://host/mcp", "headers": {"Authorization": "Bearer ..."}}}}

    A session's servers (all configured ones, or those its record names in
    `mcp_servers`) belong to its runtime (actors/exec/runtime.h): a stdio
    server is started the first time a run of the session needs its tools,
    with the containment of every tool process (sandbox/spawn.h:
    process group or cgroup, allowlisted environment plus its own `env`),
    and killed with the runtime. Each server speaks JSON-RPC 2.0: over
    newline-delimited stdio, or over streamable HTTP through libcurl.

    Their tools are offered to the model as mcp__<server>__<tool>. Results
    become tool results capped like every tool output; errors (isError,
    JSON-RPC errors, a dead or silent server) become tool errors and the
    run goes on. A server that died is restarted once per run.

    The values of `env` and `headers` are secrets: nothing that comes from a
    server reaches the tape, the bus or a log before sb_mcp_redact.

    Threads: the config is read-only once loaded, shared by every run. A
    set belongs to the runtime that holds it, so to one run thread at a
    time. The status table behind sb_mcp_status_encode is locked.
*/
#ifndef SB_EXEC_MCP_H
#define SB_EXEC_MCP_H

#include "actors/exec/mcp_sample.h"
#include "actors/exec/tools.h"
#include "schemas/codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SB_MCP_CONFIG_MAX_BYTES   (1u << 20)
#define SB_MCP_MAX_SERVERS        64
#define SB_MCP_NAME_MAX           32          //  [A-Za-z0-9_-]
#define SB_MCP_MAX_ARGS           256
#define SB_MCP_MAX_ENV            48
#define SB_MCP_MAX_TOOLS          200         //  over all servers of a session
#define SB_MCP_LINE_MAX           (8u << 20)  //  one JSON-RPC message
#define SB_MCP_STARTUP_MS         30000
#define SB_MCP_CALL_MS            120000
#define SB_MCP_TIMEOUT_MAX_S      3600
#define SB_MCP_IDLE_MS            (10 * 60 * 1000)    //  an unused server is stopped after
#define SB_MCP_PREFIX             "mcp__"
#define SB_EXEC_TOOL_NAME_MAX_MCP 64          //  the tape's bound on a tool name

//  ---------------------------------------------------------------------
//  Configuration

//  "oauth" of an HTTP server (actors/exec/mcp_oauth.h): all optional.
//  Without any, a server that answers 401 is still authorized, with a
//  client registered dynamically.
typedef struct {
    char *client_id;            //  a pre-registered client
    char *client_secret;        //  its secret (a secret: redacted)
    char *private_key_file;     //  PEM, for private_key_jwt
    char *scope;                //  asked for instead of what the server says
    char *client_metadata_url;  //  a client ID metadata document of ours
    char *redirect_uri;         //  default http://127.0.0.1:8080/oauth/callback
    bool client_credentials;    //  "grant": "client_credentials" (no person)
    //  "grant": "jwt_bearer": enterprise-managed authorization (SEP-990):
    //  the person's ID token from the identity provider is exchanged there
    //  for an ID-JAG, itself the JWT bearer grant at the server's
    //  authorization server (no person at that time).
    bool jwt_bearer;
    char *idp_token_endpoint;   //  the identity provider's token endpoint
    char *idp_client_id;        //  our client there
    char *id_token_file;        //  the person's ID token (a secret)
} sb_mcp_oauth_conf_t;

typedef struct {
    char name [SB_MCP_NAME_MAX + 1];
    char **argv;                //  stdio: command and args, NULL-terminated
    char **env;                 //  stdio: "NAME=VALUE", NULL-terminated
    char *url;                  //  http: the endpoint
    char **headers;             //  http: "Name: value", NULL-terminated
    sb_mcp_oauth_conf_t oauth;  //  http
    int startup_ms, call_ms;
} sb_mcp_server_conf_t;

typedef struct {
    sb_mcp_server_conf_t *servers;
    size_t n;
    char *source;               //  the file it came from
    char **secrets;             //  env and header values, longest first
    size_t nsecrets;
    char *data_dir;             //  where OAuth tokens are kept (NULL: in memory only)
} sb_mcp_config_t;

/*  Loads `path`. A missing file is an error when `required`, else an
    empty config (NULL returned, err empty). Returns NULL with a message
    in err when the file is not valid.                                     */
sb_mcp_config_t *sb_mcp_config_load (const char *path, bool required, char *err, size_t errlen);
void sb_mcp_config_destroy (sb_mcp_config_t **cfg_p);

//  A copy of text with every secret of the config replaced by "***"; the
//  caller frees it. NULL only when out of memory.
char *sb_mcp_redact (const sb_mcp_config_t *cfg, const char *text);

//  Replaces, in place, every `secret` in text by "***" (a secret shorter
//  than 6 bytes is left: "1" or "true" would blank out half a result).
void sb_mcp_blank (char *text, const char *secret);

//  Whether a tool name is an MCP tool's (mcp__...).
bool sb_mcp_is_tool (const char *name);

//  ---------------------------------------------------------------------
//  The JSON-RPC line reader (actors/exec/mcp_rpc.c): bytes in, whole
//  lines out, never holding more than `max` bytes. A line longer than
//  that is dropped whole and counted.

typedef void (sb_mcp_line_fn) (const char *line, size_t len, void *arg);

typedef struct {
    char *buf;
    size_t len, cap, max;
    bool discarding;            //  inside a line that is over max
    uint64_t oversized;         //  lines dropped for their length
} sb_mcp_lines_t;

void sb_mcp_lines_init (sb_mcp_lines_t *r, size_t max);
void sb_mcp_lines_feed (sb_mcp_lines_t *r, const char *data, size_t n, sb_mcp_line_fn *fn, void *arg);
void sb_mcp_lines_clear (sb_mcp_lines_t *r);

//  What one message is, once parsed.
typedef enum {
    SB_MCP_MSG_INVALID = 0,     //  not JSON-RPC 2.0
    SB_MCP_MSG_RESPONSE,        //  id + result | error
    SB_MCP_MSG_REQUEST,         //  id + method: the server asks us
    SB_MCP_MSG_NOTIFICATION,    //  method, no id
} sb_mcp_msg_kind_t;

//  Parses one line; *json receives the parsed value (a json_t *, owned by
//  the caller; NULL when invalid). Returns the kind; for a response,
//  *id is its numeric id (-1 when it is not a non-negative integer).
sb_mcp_msg_kind_t sb_mcp_msg_parse (const char *line, size_t len, void **json, int64_t *id);

//  One line of a server's SSE stream (streamable HTTP), as the line
//  reader gives it. The `data:` field is a JSON-RPC message; `id:` and
//  `retry:` are what resuming the stream needs, kept in sb_mcp_sse_t:
//  an id over SB_MCP_SSE_ID_MAX bytes or with a NUL is ignored (SSE
//  ignores one with a NUL), a retry that is not all digits too, and a
//  retry is clamped to [SB_MCP_SSE_RETRY_MIN_MS, SB_MCP_SSE_RETRY_MAX_MS].
#define SB_MCP_SSE_ID_MAX         255
#define SB_MCP_SSE_RETRY_MIN_MS   0
#define SB_MCP_SSE_RETRY_MAX_MS   10000

typedef struct {
    char last_id [SB_MCP_SSE_ID_MAX + 1];   //  "" until an id came
    int retry_ms;                           //  -1 until a retry came
} sb_mcp_sse_t;

void sb_mcp_sse_init (sb_mcp_sse_t *sse);

//  Returns the value of a non-empty `data:` field (a pointer into line,
//  its length in *data_len); NULL for any other line, after taking an
//  `id:` or `retry:` into *sse.
const char *sb_mcp_sse_line (sb_mcp_sse_t *sse, const char *line, size_t len, size_t *data_len);

//  ---------------------------------------------------------------------
//  A session's servers

typedef struct sb_mcp_set sb_mcp_set_t;

/*  The set of `cfg`'s servers a session uses: those named in `names` (an
    array of strings; NULL for all). Nothing starts yet.                   */
sb_mcp_set_t *sb_mcp_set_new (const sb_mcp_config_t *cfg, const char *session_id, const sb_val_t *names);
void sb_mcp_set_destroy (sb_mcp_set_t **set_p);

/*  At the start of each run: resets each server's restart budget, starts
    the servers not running yet (cwd: the workspace) and lists their tools
    when they changed. A server that cannot start leaves a line in `notes`
    (redacted) and its tools out; the run goes on.                         */
void sb_mcp_set_prepare (sb_mcp_set_t *set, const char *cwd, int cancel_fd, char *notes, size_t notes_len);

/*  Before sb_mcp_set_prepare, at each run's start: the sampler that
    answers the servers' sampling/createMessage (actors/exec/mcp_sample.h)
    during this run's exchanges, with `arg` (the run); NULL: the session
    does not allow sampling, refused as not supported. A running server
    initialized the other way is stopped, so that prepare starts it again
    declaring the capability as it now is.                                 */
void sb_mcp_set_sampler (sb_mcp_set_t *set, sb_mcp_sampler_fn *fn, void *arg);

//  Before each model call: lists again the tools of servers that said
//  they changed (notifications/tools/list_changed).
void sb_mcp_set_refresh (sb_mcp_set_t *set, int cancel_fd);

//  Stops the stdio servers whose last exchange is older than idle_ms (a
//  session's next run starts them again). Returns how many it stopped.
size_t sb_mcp_set_stop_idle (sb_mcp_set_t *set, int64_t idle_ms);

//  The tools offered to the model, k < count.
size_t sb_mcp_set_tool_count (const sb_mcp_set_t *set);
void sb_mcp_set_tool (const sb_mcp_set_t *set, size_t k, const char **name, const char **description,
                      const char **parameters);

/*  What the server says of a tool (annotations.readOnlyHint): 1 read-only,
    0 not, -1 unknown tool. For the person's eyes only: the policies
    never trust it (an MCP tool is never read-only to them).               */
int sb_mcp_set_read_only_hint (const sb_mcp_set_t *set, const char *name);

/*  Why the set does not offer the MCP tool `name` when its server is one
    of the session's but not ready: "the MCP server S is not available:
    WHY" (redacted) into out. Returns 0 then, -1 when the name belongs to
    no server of the set (out is "").                                      */
int sb_mcp_set_why_missing (sb_mcp_set_t *set, const char *name, char *out, size_t size);

/*  Calls an MCP tool (its mcp__ name) with JSON arguments, waiting at most
    timeout_ms (0: the server's timeout_s) and watching cancel_fd. Fills
    res as sb_tool_run does: always, with a redacted output. Returns 0 if
    res->ok. The server's progress notifications for the call go to
    on_progress (optional) as lines "progress: P[/TOTAL][ MESSAGE]\n",
    redacted and bounded in rate (actors/exec/mcp_impl.h).                 */
int sb_mcp_set_call (sb_mcp_set_t *set, const char *name, const char *args_json, int cancel_fd,
                     int timeout_ms, sb_tool_output_fn *on_progress, void *progress_arg, sb_tool_result_t *res);

//  ---------------------------------------------------------------------
//  What `switchboard mcp list` shows: the configured servers, their state
//  in the sessions that started them, and their tools.

//  Encodes {servers: [...]} fields into an open map (see exec.mcp.list).
void sb_mcp_status_encode (const sb_mcp_config_t *cfg, sb_enc_t *e);

#endif
