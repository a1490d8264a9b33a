/*  cli/serve.h — the embedded server, shared by `serve` and the one-shot
    `run`. */
#ifndef SB_CLI_SERVE_H
#define SB_CLI_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *data;
    const char *http;
    const char *bus;
    const char *actors;
    const char *llm;
    const char *model;
    const char *llm_url;
    const char *providers;
    const char *sandbox;
    int demo_delay_ms;          /* 0: default */
    uint64_t tool_output_tape;  /* 0: $SWITCHBOARD_TOOL_OUTPUT_TAPE, else 1 MiB */
    uint64_t session_quota;     /* 0: $SWITCHBOARD_SESSION_QUOTA, else 1 GiB */
    bool insecure_bus;          /* allow --bus beyond loopback without CURVE */
    uint64_t context_window;    /* --context-window: tokens (0: the providers file, else the model family's) */
    const char *mcp_config;     /* --mcp-config FILE (docs/mcp.md) */
    const char *hooks;          /* --hooks FILE (docs/hooks.md) */
    /* the web gateway (docs/gateway.md) */
    bool http_enabled;          /* serve starts it; the one-shot run does not */
    bool http_explicit;         /* --http was given: no fallback to another port */
    bool insecure_http;         /* allow --http beyond loopback without TLS */
    const char *tls_cert;
    const char *tls_key;
    const char *ui_dir;
    const char *allow_hosts;    /* more Host names, comma-separated */
    uint32_t http_max_conns;    /* 0: default */
    uint32_t http_max_per_addr;
    uint64_t http_out_max;
    uint64_t http_out_total;    /* --http-out-total: all WebSockets' queues; 0: default */
    uint32_t http_idle_s;       /* --http-idle: ping an idle WebSocket after this; 0: default */
    bool approval_deadline_set; /* --approval-deadline given (0 is a value: no deadline) */
    uint64_t approval_deadline_s;
    const char *store;          /* --store URL, else $SWITCHBOARD_STORE; NULL: LMDB under DATA */
} sb_serve_opts_t;

/*  Parses --context-window's value (tokens, SB_LLM_WINDOW_MIN..MAX): 0, or
    2 after a usage error of `cmd`. */
int sb_serve_parse_window (const char *cmd, const char *arg, uint64_t *out);

/*  Called once everything is up, instead of waiting for a signal; its
    return value becomes the exit code. */
typedef int (sb_serve_hook_fn) (void *arg, const char *data_dir);

/*  Parses serve's options: 0 ok, -1 help was printed, 2 usage error. */
int sb_serve_parse (int argc, char **argv, sb_serve_opts_t *opts);
/*  --llm names a provider kind, and every kind but demo needs --model:
    0, or 2 after a usage error naming the fix. */
int sb_serve_check_llm (const char *cmd, const sb_serve_opts_t *opts);
int sb_serve_run (const sb_serve_opts_t *opts, sb_serve_hook_fn *hook, void *hook_arg);

/*  --sandbox's value: 0 when it is auto, bwrap, landlock, none (or NULL),
    else 2 after a usage error of `cmd`.                                  */
int sb_serve_sandbox_check (const char *cmd, const char *value);

/*  Applies --sandbox (auto, bwrap, landlock, none; NULL: auto) for every
    tool, MCP server and hook this process starts (docs/sandbox.md):
    hides `secrets` (NULL-terminated, NULL entries skipped) and the key
    files the providers file and the environment name, then decides the
    box, warning when there is none. 0, or 1 after an error naming the
    way out.                                                             */
int sb_serve_sandbox (const char *cmd, const char *want, const char *providers,
                      const char *const *secrets, size_t nsecrets);

/*  The web gateway of serve (cli/serve_http.c). check: 2 after a usage
    error, else 0. start: the running gateway with DATA/http.port written,
    or NULL with *failed set. banner: the "open: URL" line. */
struct sb_gateway;
int sb_serve_http_check (const sb_serve_opts_t *opts);
struct sb_gateway *sb_serve_http_start (const sb_serve_opts_t *opts, const char *dir, int *failed);
void sb_serve_http_banner (const sb_serve_opts_t *opts, struct sb_gateway *gw);

/*  serve as a node of a cluster (cli/serve_cluster.c): open joins the
    cluster of o->store's database (registers, takes its share of the
    shards, starts the heartbeat thread), NULL with one line in err;
    close leaves it; stats writes bus.stats's "node" section (c NULL:
    standalone, LMDB). */
struct _sb_cluster_t;
struct sb_enc;
struct _sb_cluster_t *sb_serve_cluster_open (const sb_serve_opts_t *o, const char *dir, char *err, size_t errlen);
void sb_serve_cluster_close (struct _sb_cluster_t **c_p);
void sb_serve_cluster_stats (struct _sb_cluster_t *c, struct sb_enc *e);
#endif
