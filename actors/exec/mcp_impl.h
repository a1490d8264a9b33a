/*  actors/exec/mcp_impl.h — what the MCP client's files share.

    Not a public header: only actors/exec/mcp*.c include it.
      mcp.c        the set of a session's servers, the exchanges, stdio
      mcp_http.c   the Streamable HTTP transport
      mcp_status.c the table `switchboard mcp list` shows
      mcp_rpc.c    the line reader, the JSON-RPC classifier, the answers
                   to the server's requests
      mcp_config.c the configuration file */
#ifndef SB_MCP_IMPL_H
#define SB_MCP_IMPL_H

#include "actors/exec/mcp.h"
#include "actors/exec/mcp_elicit.h"
#include "actors/exec/mcp_oauth.h"
#include "actors/exec/mcp_sample.h"
#include "sandbox/spawn.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define S_PROTOCOL "2025-06-18"
#define S_STDERR_TAIL 1024

//  Resumable streams (streamable HTTP): an SSE stream that ends before
//  our answer is reopened with GET and Last-Event-ID, after the server's
//  `retry` (its bounds: sb_mcp_sse_t in mcp.h), or S_SSE_RETRY_DEFAULT_MS
//  when it sent none, at most S_SSE_RESUMES times per request.
#define S_SSE_RETRY_DEFAULT_MS 1000
#define S_SSE_RESUMES          5

//  S_FORGOTTEN: HTTP 404 on our session (the server restarted): the
//  request never ran. S_AUTH: HTTP 401 or 403: it never ran either.
enum { S_OK = 0, S_ERROR = -1, S_CANCELLED = -2, S_TIMEOUT = -3, S_DEAD = -4, S_FORGOTTEN = -5, S_AUTH = -6 };

typedef enum { S_NEW, S_READY, S_FAILED } s_state_t;

typedef struct {
    char exposed [SB_EXEC_TOOL_NAME_MAX_MCP + 1];
    char *orig;
    char *description;
    char *schema;
    bool read_only_hint;        //  the server says so: shown, never trusted
} s_tool_t;

typedef struct {
    const sb_mcp_server_conf_t *conf;
    const sb_mcp_config_t *cfg;
    s_state_t state;
    char error [512];
    sb_spawn_proc_t *proc;
    CURL *curl;
    CURL *reply_curl;           //  answers to the server's requests, sent during an exchange
    CURLM *multi;               //  drives an exchange's handle and the standalone stream together
    struct s_standalone *get;   //  the standalone GET stream (mcp_http.c); NULL: not opened
    char http_session [256];
    sb_mcp_oauth_t *oauth;      //  made at the first request; kept across restarts
    char www_auth [2048];       //  the last refusal's WWW-Authenticate
    sb_mcp_lines_t lines;
    int64_t next_id;
    bool stale;                 //  its tools must be listed again
    s_tool_t *tools;
    size_t ntools;
    int restarts;               //  this run
    char err_tail [S_STDERR_TAIL + 1];
    //  The exchange in progress.
    int64_t want_id;
    json_t *resp;
    bool counted;               //  counted in the status table's sessions
    int64_t used;               //  mono ms of the last exchange
    //  What the server's requests of the exchange in flight held a person
    //  (an elicitation, a sampling approval): that time moves the
    //  exchange's deadline on (sb_mcp_deadline), so that a person may take
    //  as long as an approval allows. Reset by each exchange.
    int64_t held_ms;
    const char *cwd;            //  the session's workspace: what roots/list answers (the set's)
    //  The tools/call in progress: its progressToken, where its
    //  notifications/progress go (sb_mcp_progress), within the bounds
    //  S_PROGRESS_* below.
    char progress_token [32];   //  "" between calls
    sb_tool_output_fn *on_progress;
    void *progress_arg;
    int64_t progress_ms;        //  mono ms of the last one shown
    double progress_last;
    unsigned progress_shown;
    //  Sampling (actors/exec/mcp_sample.h): the set's sampler, and whether
    //  the capability was declared at this server's initialize.
    sb_mcp_sampler_fn *sampler;
    void *sampler_arg;
    bool sampling_declared;
} s_server_t;

//  Progress notifications: at most one line each S_PROGRESS_MS and
//  S_PROGRESS_LINES lines a call (a server may send thousands), the
//  message cut to S_PROGRESS_MESSAGE bytes.
#define S_PROGRESS_MS       250
#define S_PROGRESS_LINES    200
#define S_PROGRESS_MESSAGE  200

//  Shows one notifications/progress `params` as a line of the call's
//  live output, when it is the call's, in bounds and increasing.
void sb_mcp_progress (s_server_t *srv, json_t *params);

//  Handles one line of JSON-RPC from the server (a response, a
//  notification or a request, which is answered). `arg` is the server.
void sb_mcp_on_line (const char *line, size_t len, void *arg);

//  The answer (owned by the caller) to `m`, a request the server made
//  (actors/exec/mcp_rpc.c): ping, roots/list from `cwd` (the session's
//  workspace; NULL: none), elicitation/create through the elicitor
//  (`server` names the server to the person), an error for the rest.
json_t *sb_mcp_answer (json_t *m, const char *cwd, const char *server);

//  True when the cancel eventfd `fd` (0 or less: none) is readable.
bool sb_mcp_cancel_ready (int fd);

//  POSTs one JSON-RPC message and reads the answer (JSON or SSE) into the
//  server's exchange. S_OK, or S_TIMEOUT, S_CANCELLED, S_DEAD with
//  srv->error set.
//  An exchange's deadline (mono ms) moved on by what the server's requests
//  held a person since the exchange began (held_ms).
static inline int64_t
sb_mcp_deadline (const s_server_t *srv, int64_t deadline)
{
    return deadline + srv->held_ms;
}

int sb_mcp_http_post (s_server_t *srv, const char *data, size_t len, int64_t deadline, int cancel_fd);

//  Opens the standalone GET stream after initialize, on which the server
//  sends requests of its own (elicitation/create) outside our exchanges,
//  and waits up to `wait_ms` for the server's answer to it, so that a
//  request the server makes during our next call finds it open. It is read while an exchange is in progress, and reopened (with
//  Last-Event-ID, after the server's retry) when it ends; a server that
//  does not offer it (405, or anything but an SSE stream) is not asked
//  again in this connection.
void sb_mcp_http_open_stream (s_server_t *srv, int wait_ms);

//  Answers (takes) `msg`, a request the server made during an exchange.
void sb_mcp_http_reply (s_server_t *srv, json_t *msg);

//  Notes a server's state in the status table (actors/exec/mcp_status.c);
//  called on the run thread at each state change of a server.
void sb_mcp_status_note (const s_server_t *srv);

//  Ends our session at the server (DELETE) and frees the handles.
void sb_mcp_http_close (s_server_t *srv);

#endif
