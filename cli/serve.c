/*  cli/serve.c — `switchboard serve`: the broker and every actor in one
    process (docs/architecture.md).

    Startup order: flock DATA/lock; start the broker (inproc only) and the
    actors, each signalling once registered; run recovery; only then bind
    the external endpoints. A client that can connect can be served. */
#include "cli/cli.h"
#include "cli/serve.h"
#include "common/blob.h"
#include "actors/actor.h"
#include "sandbox/spawn.h"
#include "actors/llm/config.h"
#include "actors/session.h"
#include "bus/broker.h"
#include "schemas/codec.h"
#include "store/store.h"
#include "cluster/cluster.h"
#include "common/log.h"
#include "gateway/gateway.h"

#include <czmq.h>
#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *s_usage =
    "usage: switchboard serve [--data DIR] [--http ADDR:PORT] [--bus tcp://ADDR:PORT]\n"
    "                         [--tls-cert FILE --tls-key FILE | --insecure-http] [--allow-host H,...]\n"
    "                         [--ui DIR] [--http-max-conns N] [--http-max-per-addr N] [--http-out-max BYTES]\n"
    "                         [--http-out-total BYTES]\n"
    "                         [--http-idle S]\n"
    "                         [--actors LIST] [--llm PROVIDER] [--model M] [--llm-url URL]\n"
    "                         [--providers FILE] [--sandbox auto|bwrap|landlock|none]\n"
    "                         [--tool-output-tape BYTES] [--session-quota BYTES]\n"
    "                         [--context-window TOKENS] [--mcp-config FILE] [--hooks FILE]\n"
    "                         [--approval-deadline S] [--store postgres://...]\n"
    "\n"
    "Runs the broker and the actors in one process, on DATA (default\n"
    "$SWITCHBOARD_DATA, else $XDG_STATE_HOME/switchboard, else\n"
    "~/.local/state/switchboard). The bus is bound on ipc://DATA/bus-{cmd,in,pub,tap}.\n"
    "\n"
    "  --data DIR        data folder (created with mode 0700)\n"
    "  --http ADDR:PORT  the web gateway: UI, WebSocket, REST (default 127.0.0.1:8080,\n"
    "                    or the next free port; port 0: any free one). The port is\n"
    "                    written to DATA/http.port; the token is DATA/token\n"
    "  --tls-cert FILE, --tls-key FILE  serve HTTPS (PEM files)\n"
    "  --insecure-http   allow --http beyond loopback without TLS\n"
    "  --allow-host H,.. more Host header names to answer (DNS rebinding guard)\n"
    "  --ui DIR          the browser UI's folder (default: gateway/ui by the binary)\n"
    "  --http-max-conns N      WebSocket connections in total (default 1024)\n"
    "  --http-max-per-addr N   WebSocket connections from one address (default 256)\n"
    "  --http-out-max BYTES    queued bytes per connection before a slow\n"
    "                    reader gets resync and a reply becomes overloaded (default 8 MiB)\n"
    "  --http-out-total BYTES  queued bytes over every WebSocket together\n"
    "                    (default 256 MiB, at least --http-out-max)\n"
    "  --http-idle S     an idle WebSocket gets a ping after S seconds, and is\n"
    "                    closed when no pong came S seconds later (default 30)\n"
    "  --bus ENDPOINT    also bind tcp://ADDR:P (commands), P+1 (events), P+2 (tap),\n"
    "                    with CURVE: the server's keys in DATA/certs/server, clients\n"
    "                    allowed by their public keys in DATA/certs/clients/\n"
    "                    ('switchboard keys new NAME'; docs/workers.md)\n"
    "  --insecure-tcp    plain TCP on --bus, without CURVE (warned; --insecure-bus too)\n"
    "  --actors LIST     comma-separated actors to run (default: all built-in)\n"
    "  --llm PROVIDER    responses | chat | anthropic | codex | demo (default demo);\n"
    "                    all but demo need --model\n"
    "  --model M         default model\n"
    "  --llm-url URL     provider base URL including the version path\n"
    "  --providers FILE  named providers from a JSON file (see docs/llm.md)\n"
    "  --sandbox KIND    where tools, MCP servers and hooks run (docs/sandbox.md):\n"
    "                    auto (default: bwrap if it runs here, else landlock, else\n"
    "                    refuse to start), bwrap, landlock, or none (unsandboxed:\n"
    "                    tools see all this server sees; warned)\n"
    "  --tool-output-tape BYTES  tool output kept on the tape per call, head and\n"
    "                    tail (default 1 MiB); the rest is elided, counted\n"
    "  --session-quota BYTES  tape bytes one session may hold (default 1 GiB)\n"
    "  --context-window TOKENS  the models' context window where the providers\n"
    "                    file gives none (default: by model family, see docs/compaction.md)\n"
    "  --mcp-config FILE MCP tool servers, {\"mcpServers\": {...}} (default\n"
    "                    DATA/mcp.json when present; see docs/mcp.md)\n"
    "  --hooks FILE      commands run on events, {\"hooks\": {...}} (default\n"
    "                    DATA/hooks.json when present; see docs/hooks.md)\n"
    "  --approval-deadline S  seconds an approval waits for an answer before it\n"
    "                    resolves to its default (reject); 0: no deadline (default\n"
    "                    900, or $SWITCHBOARD_APPROVAL_DEADLINE); a session may set\n"
    "                    its own\n"
    "  --store URL       keep the state on PostgreSQL (postgres://USER@HOST:PORT/DB,\n"
    "                    as libpq takes it, plus ?schema=NAME, default switchboard):\n"
    "                    the session, run and interact actors each use the schema\n"
    "                    NAME_session, NAME_run, NAME_interact, made when absent and\n"
    "                    version-checked on start (default $SWITCHBOARD_STORE; none:\n"
    "                    LMDB under DATA; docs/scale-out.md). The password is best\n"
    "                    kept in ~/.pgpass (hidden from tools) or PGPASSWORD; it is\n"
    "                    never logged. Every serve on one schema is a node of one\n"
    "                    cluster (NAME_cluster: shard leases; 'switchboard nodes'),\n"
    "                    registered with its --bus and CURVE key; node id\n"
    "                    $SWITCHBOARD_NODE_ID, else HOST-HASH of DATA; lease and\n"
    "                    heartbeat $SWITCHBOARD_SHARD_LEASE_MS, _HEARTBEAT_MS\n"
    "  -h, --help        this help\n"
    "\n"
    "Stop it with Ctrl-C (SIGINT) or SIGTERM; it shuts down cleanly.\n";

typedef struct {
    const char *name;
    sb_actor_fn *fn;
    int stop_order;             /* lower stops first */
    bool default_on;
} actor_row_t;

/*  The built-in actors, in start order. */
static const actor_row_t s_actor_table [] = {
    { "llm", sb_llm_actor, 1, true },
    { "echo", sb_echo_actor, 1, false },
    { "session", sb_session_actor, 3, true },
    { "run", sb_run_actor, 2, true },
    { "interact", sb_interact_actor, 2, true },
    { "exec", sb_exec_actor, 0, true },
    { "hooks", sb_hooks_actor, 0, true },
    { "blob", sb_blob_actor, 2, true },
};
#define NACTORS (sizeof s_actor_table / sizeof s_actor_table [0])

static int
s_lock_data (const char *dir, int *fd_out)
{
    char path [4200];
    snprintf (path, sizeof path, "%s/lock", dir);
    int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return sb_cli_fail ("serve", "cannot open %s: %s", path, strerror (errno));
    if (flock (fd, LOCK_EX | LOCK_NB) != 0) {
        char pid [32] = "";
        ssize_t n = pread (fd, pid, sizeof pid - 1, 0);
        if (n > 0)
            pid [n] = 0;
        pid [strcspn (pid, "\n")] = 0;
        close (fd);
        return sb_cli_fail ("serve", "another switchboard serve%s%s is already running on %s; "
                            "two servers on one data folder would corrupt it",
                            pid [0] ? " (pid " : "", pid [0] ? strcat (pid, ")") : "", dir);
    }
    char pid [32];
    int n = snprintf (pid, sizeof pid, "%d\n", (int) getpid ());
    if (ftruncate (fd, 0) != 0 || pwrite (fd, pid, (size_t) n, 0) != n) {
        /* the pid is only a hint for the error above */
    }
    *fd_out = fd;
    return 0;
}

/*  A byte count in [min, max], in plain decimal: 0, or -1 when it is not. */
static int
s_parse_bytes (const char *arg, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull (arg, &end, 10);
    if (errno || end == arg || *end || *arg == '-' || n < min || n > max)
        return -1;
    *out = n;
    return 0;
}

/*  One of the gateway's bounds (--http-max-conns, --http-max-per-addr,
    --http-out-max, --http-idle, --http-out-total), option `c`, into *o.
    Returns 0, or the exit code. */
static int
s_parse_http_bound (int c, const char *arg, sb_serve_opts_t *o)
{
    switch (c) {
        case 1006: case 1007: case 1008: {
            uint64_t n;
            uint64_t max = c == 1008 ? (1ull << 32) : 1000000;
            if (s_parse_bytes (arg, c == 1008 ? 65536 : 1, max, &n))
                return sb_cli_usage ("serve", "--%s takes a number from %d to %llu, not '%s'",
                                     c == 1006 ? "http-max-conns" : c == 1007 ? "http-max-per-addr"
                                     : "http-out-max",
                                     c == 1008 ? 65536 : 1, (unsigned long long) max, arg);
            if (c == 1006) o->http_max_conns = (uint32_t) n;
            else if (c == 1007) o->http_max_per_addr = (uint32_t) n;
            else o->http_out_max = n;
            return 0;
        }
        case 1010: {
            uint64_t n;
            if (s_parse_bytes (arg, 65536, 1ull << 40, &n))
                return sb_cli_usage ("serve", "--http-out-total takes a number from 65536 to %llu, not '%s'",
                                     1ull << 40, arg);
            o->http_out_total = n;
            return 0;
        }
        case 1009: {
            uint64_t n;
            if (s_parse_bytes (arg, 1, SB_GW_IDLE_MAX_S, &n))
                return sb_cli_usage ("serve", "--http-idle takes seconds from 1 to %d, not '%s'",
                                     SB_GW_IDLE_MAX_S, arg);
            o->http_idle_s = (uint32_t) n;
            return 0;
        }
    }
    return 0;
}

/*  One of the store's and the runs' bounds (--tool-output-tape,
    --session-quota, --context-window, --approval-deadline), option `c`,
    into *o. Returns 0, or the exit code. */
static int
s_parse_run_bound (int c, const char *arg, sb_serve_opts_t *o)
{
    switch (c) {
        case 'T':
            if (s_parse_bytes (arg, SB_EXEC_TOOL_TAPE_MIN, SB_EXEC_TOOL_TAPE_MAX, &o->tool_output_tape))
                return sb_cli_usage ("serve", "--tool-output-tape takes bytes from %d to %llu, not '%s'",
                                     SB_EXEC_TOOL_TAPE_MIN, (unsigned long long) SB_EXEC_TOOL_TAPE_MAX, arg);
            break;
        case 'Q':
            if (s_parse_bytes (arg, SB_SESSION_QUOTA_MIN, SB_SESSION_QUOTA_MAX, &o->session_quota))
                return sb_cli_usage ("serve", "--session-quota takes bytes from %d to %llu, not '%s'",
                                     SB_SESSION_QUOTA_MIN, (unsigned long long) SB_SESSION_QUOTA_MAX, arg);
            break;
        case 'W':
            if (sb_serve_parse_window ("serve", arg, &o->context_window))
                return 2;
            break;
        case 'A':
            if (s_parse_bytes (arg, 0, SB_APPROVAL_DEADLINE_MAX_S, &o->approval_deadline_s))
                return sb_cli_usage ("serve", "--approval-deadline takes seconds from 0 (no deadline) to %d, "
                                     "not '%s'", SB_APPROVAL_DEADLINE_MAX_S, arg);
            o->approval_deadline_set = true;
            break;
    }
    return 0;
}

/*  What the options say together: the sandbox, the bus, the model and
    the HTTP address. Returns 0, or the exit code. */
static int
s_serve_check (const sb_serve_opts_t *o)
{
    if (sb_serve_sandbox_check ("serve", o->sandbox))
        return 2;
    if (o->bus && strncmp (o->bus, "tcp://", 6) != 0)
        return sb_cli_usage ("serve", "--bus takes tcp://ADDR:PORT (ipc is always bound)");
    int rc = sb_serve_check_llm ("serve", o);
    if (rc)
        return rc;
    const char *colon = strrchr (o->http, ':');
    if (!colon || colon == o->http || atoi (colon + 1) < 0 || atoi (colon + 1) > 65535)
        return sb_cli_usage ("serve", "--http takes ADDR:PORT, e.g. 127.0.0.1:8080");
    return sb_serve_http_check (o);
}

int
sb_serve_parse (int argc, char **argv, sb_serve_opts_t *o)
{
    static struct option longopts [] = {
        { "data", required_argument, 0, 'd' },
        { "http", required_argument, 0, 'H' },
        { "bus", required_argument, 0, 'b' },
        { "actors", required_argument, 0, 'a' },
        { "llm", required_argument, 0, 'l' },
        { "model", required_argument, 0, 'm' },
        { "llm-url", required_argument, 0, 'u' },
        { "providers", required_argument, 0, 'p' },
        { "sandbox", required_argument, 0, 's' },
        { "insecure-bus", no_argument, 0, 'I' },
        { "insecure-tcp", no_argument, 0, 'I' },
        { "tool-output-tape", required_argument, 0, 'T' },
        { "session-quota", required_argument, 0, 'Q' },
        { "context-window", required_argument, 0, 'W' },
        { "mcp-config", required_argument, 0, 'C' },
        { "hooks", required_argument, 0, 'K' },
        { "tls-cert", required_argument, 0, 1001 },
        { "tls-key", required_argument, 0, 1002 },
        { "insecure-http", no_argument, 0, 1003 },
        { "allow-host", required_argument, 0, 1004 },
        { "ui", required_argument, 0, 1005 },
        { "http-max-conns", required_argument, 0, 1006 },
        { "http-max-per-addr", required_argument, 0, 1007 },
        { "http-out-max", required_argument, 0, 1008 },
        { "http-idle", required_argument, 0, 1009 },
        { "http-out-total", required_argument, 0, 1010 },
        { "approval-deadline", required_argument, 0, 'A' },
        { "store", required_argument, 0, 1011 },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    memset (o, 0, sizeof *o);
    o->http = "127.0.0.1:8080";
    optind = 1;
    int c, rc;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'd': o->data = optarg; break;
            case 'H': o->http = optarg; o->http_explicit = true; break;
            case 1001: o->tls_cert = optarg; break;
            case 1002: o->tls_key = optarg; break;
            case 1003: o->insecure_http = true; break;
            case 1004: o->allow_hosts = optarg; break;
            case 1005: o->ui_dir = optarg; break;
            case 1006: case 1007: case 1008: case 1009: case 1010:
                if ((rc = s_parse_http_bound (c, optarg, o)) != 0)
                    return rc;
                break;
            case 'b': o->bus = optarg; break;
            case 1011: o->store = optarg; break;
            case 'a': o->actors = optarg; break;
            case 'l': o->llm = optarg; break;
            case 'm': o->model = optarg; break;
            case 'u': o->llm_url = optarg; break;
            case 'p': o->providers = optarg; break;
            case 's': o->sandbox = optarg; break;
            case 'I': o->insecure_bus = true; break;
            case 'C': o->mcp_config = optarg; break;
            case 'K': o->hooks = optarg; break;
            case 'T': case 'Q': case 'W': case 'A':
                if ((rc = s_parse_run_bound (c, optarg, o)) != 0)
                    return rc;
                break;
            case 'h': fputs (s_usage, stdout); return -1;
            default: return sb_cli_usage ("serve", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (optind < argc)
        return sb_cli_usage ("serve", "unexpected argument '%s'", argv [optind]);
    if (!o->store && getenv ("SWITCHBOARD_STORE") && *getenv ("SWITCHBOARD_STORE"))
        o->store = getenv ("SWITCHBOARD_STORE");
    if (o->store && !*o->store)
        o->store = NULL;
    if (o->store && !sb_store_is_url (o->store))
        return sb_cli_usage ("serve", "--store takes a postgres:// or postgresql:// URL "
                             "(without --store the state is LMDB under the data folder)");
    return s_serve_check (o);
}

int
sb_serve_parse_window (const char *cmd, const char *arg, uint64_t *out)
{
    if (s_parse_bytes (arg, SB_LLM_WINDOW_MIN, SB_LLM_WINDOW_MAX, out))
        return sb_cli_usage (cmd, "--context-window takes tokens from %d to %llu, not '%s'",
                             SB_LLM_WINDOW_MIN, (unsigned long long) SB_LLM_WINDOW_MAX, arg);
    return 0;
}

int
sb_serve_check_llm (const char *cmd, const sb_serve_opts_t *o)
{
    sb_provider_kind_t kind;
    if (!o->llm || strcmp (o->llm, "demo") == 0)
        return 0;
    if (sb_provider_kind_parse (o->llm, &kind) != 0)
        return sb_cli_usage (cmd, "--llm takes responses, chat, anthropic, codex or demo, not '%s'", o->llm);
    if (!o->model || !*o->model)
        return sb_cli_usage (cmd, "--llm %s needs a model: add --model MODEL (the provider's model id), "
                             "as in 'switchboard %s --llm %s --model MODEL ...'", o->llm, cmd, o->llm);
    return 0;
}

static bool
s_wanted (const char *list, const actor_row_t *row)
{
    if (!list)
        return row->default_on;
    size_t n = strlen (row->name);
    for (const char *p = list; *p; ) {
        const char *comma = strchr (p, ',');
        size_t len = comma ? (size_t) (comma - p) : strlen (p);
        if (len == n && strncmp (p, row->name, n) == 0)
            return true;
        p += len + (comma ? 1 : 0);
    }
    return false;
}

static int
s_check_actor_list (const char *list)
{
    if (!list)
        return 0;
    for (const char *p = list; *p; ) {
        const char *comma = strchr (p, ',');
        size_t len = comma ? (size_t) (comma - p) : strlen (p);
        bool known = (len == 6 && strncmp (p, "broker", 6) == 0) || (len == 7 && strncmp (p, "gateway", 7) == 0);
        for (size_t k = 0; k < NACTORS && !known; k++)
            known = strlen (s_actor_table [k].name) == len && strncmp (p, s_actor_table [k].name, len) == 0;
        if (!known)
            return sb_cli_usage ("serve", "unknown actor '%.*s' in --actors", (int) len, p);
        p += len + (comma ? 1 : 0);
    }
    return 0;
}

//  Hides the key files a providers file names (key_file, token_file).
static void
s_hide_key_files (const char *providers)
{
    json_t *root = providers ? json_load_file (providers, 0, NULL) : NULL;
    size_t k;
    json_t *o;
    json_array_foreach (json_object_get (root, "providers"), k, o) {
        const char *names [] = { "key_file", "token_file" };
        for (size_t i = 0; i < 2; i++) {
            const char *f = json_string_value (json_object_get (o, names [i]));
            if (f && sb_spawn_sandbox_hide (f) != 0)
                sb_warn ("sandbox", "cannot hide %s from tools (more than 32 secret paths?)", f);
        }
    }
    json_decref (root);
}

int
sb_serve_sandbox_check (const char *cmd, const char *value)
{
    if (value && strcmp (value, "auto") && strcmp (value, "bwrap") && strcmp (value, "landlock")
    &&  strcmp (value, "none"))
        return sb_cli_usage (cmd, "--sandbox takes auto, bwrap, landlock or none, not '%s'", value);
    return 0;
}

int
sb_serve_sandbox (const char *cmd, const char *want, const char *providers,
                  const char *const *secrets, size_t nsecrets)
{
    const char *env [] = { "SWITCHBOARD_LLM_KEY_FILE", "SWITCHBOARD_CODEX_TOKEN_FILE" };
    for (size_t i = 0; i < 2; i++)
        if (getenv (env [i]) && *getenv (env [i]))
            sb_spawn_sandbox_hide (getenv (env [i]));
    for (size_t i = 0; i < nsecrets; i++)
        if (secrets [i] && sb_spawn_sandbox_hide (secrets [i]) != 0)
            sb_warn ("sandbox", "cannot hide %s from tools", secrets [i]);
    s_hide_key_files (providers);
    char err [1024];
    if (sb_spawn_sandbox_init (want, err, sizeof err) != 0)
        return sb_cli_fail (cmd, "%s", err);
    if (strcmp (sb_spawn_sandbox_name (), "none") == 0)
        sb_warn ("sandbox", "tools, MCP servers and hooks run WITHOUT a sandbox (--sandbox none): as "
                 "uid %d, they see every file it sees (the data folder and its token included) and "
                 "reach the network", (int) geteuid ());
    else
        sb_info ("sandbox", "tools, MCP servers and hooks run in a %s sandbox", sb_spawn_sandbox_name ());
    return 0;
}

//  The name to type for this binary in another terminal: plain
//  `switchboard` when PATH finds this very file, else its absolute path.
static void
s_self_path (char *abs, size_t n, const char **say)
{
    *say = "switchboard";
    if (!realpath ("/proc/self/exe", abs)) {
        snprintf (abs, n, "switchboard");
        return;
    }
    const char *path = getenv ("PATH");
    char dir [PATH_MAX], cand [PATH_MAX], real [PATH_MAX];
    for (const char *p = path; p && *p; ) {
        size_t len = strcspn (p, ":");
        snprintf (dir, sizeof dir, "%.*s", (int) len, p);
        snprintf (cand, sizeof cand, "%s/switchboard", len ? dir : ".");
        if (realpath (cand, real) && strcmp (real, abs) == 0)
            return;
        p += len + (p [len] == ':');
    }
    *say = abs;
}

//  What a person needs on start: where the data and the bus are, which
//  model answers, and what to type next.
static void
s_banner (const sb_serve_opts_t *o, const char *dir)
{
    char self [PATH_MAX], model [512], err [512];
    const char *say;
    s_self_path (self, sizeof self, &say);
    //  The same configuration the llm actor loaded; its default provider
    //  is the one a session without --provider uses.
    sb_llm_config_t *cfg = calloc (1, sizeof *cfg);
    if (cfg && sb_llm_config_load (cfg, o->llm, o->llm_url, o->model, o->providers, err, sizeof err) == 0
    &&  cfg->count > 0) {
        const sb_llm_provider_t *p = &cfg->providers [cfg->dflt];
        if (p->demo)
            snprintf (model, sizeof model, "demo (the built-in demo model; no key needed)");
        else {
            char url [sizeof p->base_url];
            sb_log_redact_url (p->base_url, url, sizeof url);
            snprintf (model, sizeof model, "%s (provider %s, %s%s%s)", p->model [0] ? p->model : "-",
                      p->name, url, cfg->count > 1 ? "; more in " : "",
                      cfg->count > 1 ? o->providers : "");
        }
    }
    else
        snprintf (model, sizeof model, "%s (provider %s)", o->model ? o->model : "-",
                  o->llm ? o->llm : o->providers ? o->providers : "demo");
    if (cfg)
        sb_llm_config_clear (cfg);
    free (cfg);
    char store [1024];
    if (o->store)
        sb_log_redact_url (o->store, store, sizeof store);
    else
        snprintf (store, sizeof store, "LMDB in %s/{session,run,interact}", dir);
    printf ("switchboard %s is serving\n"
            "  binary   %s\n"
            "  data     %s\n"
            "  store    %s\n"
            "  bus      ipc://%s/bus-cmd%s%s\n"
            "  model    %s\n"
            "  sandbox  %s\n"
            "\n"
            "In another terminal:\n"
            "  %s sessions new          open a session on the current folder\n"
            "  %s prompt last \"look around\" --follow\n"
            "  %s sessions              list sessions, newest first\n"
            "  %s tap                   watch every bus message live\n"
            "Stop with Ctrl-C.\n",
            SB_VERSION, self, dir, store, dir, o->bus ? " and " : "", o->bus ? o->bus : "", model,
            strcmp (sb_spawn_sandbox_name (), "none") == 0
                ? "NONE (--sandbox none): WARNING, tools run unsandboxed and see everything this server sees"
                : strcmp (sb_spawn_sandbox_name (), "bwrap") == 0
                ? "bwrap (tools see the host read-only, the workspace writable, no secrets, no network unless the session allows it)"
                : "landlock (bubblewrap cannot run here: tools see the host read-only but the secrets, the workspace writable)",
            say, say, say, say);
    fflush (stdout);
}

/*  bus.stats's "store" section: for each store of this process, its
    backend and its writes' latency (store/stats.c). On the broker's
    thread. */
static int
s_stats_store (const sb_store_stats_t *st, void *ctx)
{
    sb_enc_t *e = ctx;
    sb_enc_key (e, st->name);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "backend", st->backend);
    sb_enc_kuint (e, "writes", st->writes);
    sb_enc_kuint (e, "commits", st->commits);
    sb_enc_kuint (e, "retries", st->retries);
    sb_enc_kuint (e, "write_p50_us", st->write_p50_us);
    sb_enc_kuint (e, "write_p99_us", st->write_p99_us);
    sb_enc_map_close (e);
    return 0;
}

/*  The node this process is, for bus.stats (NULL: LMDB, standalone). */
static sb_cluster_t *s_cluster;

static void
s_stats_extra (sb_enc_t *e)
{
    sb_serve_cluster_stats (s_cluster, e);
    sb_enc_key (e, "store");
    sb_enc_map_open (e);
    sb_store_stats_each (s_stats_store, e);
    sb_enc_map_close (e);
    //  the blob store's (docs/images.md): /metrics has them as sb_bus_blobs{key=...}
    uint64_t count, bytes, refused, swept;
    sb_blob_figures (&count, &bytes, &refused, &swept);
    sb_enc_key (e, "blobs");
    sb_enc_map_open (e);
    sb_enc_kuint (e, "stored", count);
    sb_enc_kuint (e, "bytes", bytes);
    sb_enc_kuint (e, "refused", refused);
    sb_enc_kuint (e, "swept", swept);
    sb_enc_map_close (e);
}

int
sb_cmd_serve (int argc, char **argv)
{
    sb_serve_opts_t o;
    int rc = sb_serve_parse (argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    if ((rc = s_check_actor_list (o.actors)))
        return rc;
    /* the gateway runs unless --actors leaves it out */
    o.http_enabled = !o.actors || strstr (o.actors, "gateway") != NULL;
    return sb_serve_run (&o, NULL, NULL);
}

/*  Raises the soft limit on open files to the hard one: serve holds the
    bus, LMDB, the gateway's connections and the tools' pipes in one
    process, and a soft limit of 1,024 is spent by a thousand browsers
    (docs/gateway.md, file descriptors). The gateway keeps a reserve below
    whatever limit results. */
#define NOFILE_MAX  ((rlim_t) 1 << 20)

static void
s_raise_nofile (void)
{
    struct rlimit rl;
    if (getrlimit (RLIMIT_NOFILE, &rl) != 0)
        return;
    /* lws sizes a table by the limit (16 bytes a descriptor): a hard
       limit of a billion, as some containers set, is not taken whole */
    rlim_t want = rl.rlim_max < NOFILE_MAX ? rl.rlim_max : NOFILE_MAX;
    if (rl.rlim_cur >= want)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = want;
    if (setrlimit (RLIMIT_NOFILE, &rl) != 0)
        sb_warn ("serve", "cannot raise the open files limit from %llu to %llu: %s",
                 (unsigned long long) was, (unsigned long long) rl.rlim_max, strerror (errno));
}

/*  The data folder (made, mode 0700, locked against a second server) and
    the sandbox, which hides it and the other secret files from tools.
    Returns 0 with *lock_fd held, or the exit code. */
static int
s_prepare_data (const sb_serve_opts_t *o, char *dir, size_t dirlen, int *lock_fd)
{
    char err [512];
    if (sb_cli_data_dir (o->data, dir, dirlen, err, sizeof err))
        return sb_cli_fail ("serve", "%s", err);
    if (zsys_dir_create ("%s", dir) != 0)
        return sb_cli_fail ("serve", "cannot create %s: %s", dir, strerror (errno));
    if (chmod (dir, 0700) != 0)
        return sb_cli_fail ("serve", "cannot set mode 0700 on %s: %s", dir, strerror (errno));
    if (s_lock_data (dir, lock_fd))
        return 1;
    /* libpq's password file, where the store's password best lives, is
       no tool's business either */
    char pgpass [4200] = "";
    const char *pf = getenv ("PGPASSFILE"), *home = getenv ("HOME");
    if (o->store && pf && *pf)
        snprintf (pgpass, sizeof pgpass, "%s", pf);
    else
    if (o->store && home && *home)
        snprintf (pgpass, sizeof pgpass, "%s/.pgpass", home);
    const char *secrets [] = { dir, o->providers, o->mcp_config, o->hooks, o->tls_cert, o->tls_key,
                               pgpass [0] && access (pgpass, F_OK) == 0 ? pgpass : NULL };
    if (sb_serve_sandbox ("serve", o->sandbox, o->providers, secrets, sizeof secrets / sizeof secrets [0])) {
        close (*lock_fd);
        return 1;
    }
    return 0;
}

/*  Starts each wanted actor in turn and waits until it has registered
    (the stateful ones recover first); args and names outlive them.
    Returns 0, or -1 when one failed (the ones started are in actors). */
static int
s_start_actors (const sb_serve_opts_t *o, const char *dir, const sb_server_config_t *scfg,
                zactor_t **actors, sb_actor_args_t *args, char (*names) [64])
{
    for (size_t k = 0; k < NACTORS; k++) {
        if (!s_wanted (o->actors, &s_actor_table [k]))
            continue;
        snprintf (names [k], sizeof names [k], "%s-%d", s_actor_table [k].name, (int) getpid ());
        args [k] = (sb_actor_args_t) {
            .cmd_endpoint = SB_INPROC_CMD,
            .pub_endpoint = SB_INPROC_PUB_IN,
            .sub_endpoint = SB_INPROC_PUB,
            .data_dir = dir,
            .instance = names [k],
            .config = scfg,
        };
        actors [k] = sb_actor_start (s_actor_table [k].fn, &args [k]);
        if (actors [k] && sb_actor_last_status () != 0)
            zactor_destroy (&actors [k]);
        if (!actors [k]) {
            sb_error ("serve", "actor %s failed to start (see above)", s_actor_table [k].name);
            return -1;
        }
    }
    return 0;
}

/*  Stops in order: the gateway (no new work comes in), the stateless
    actors, then the stateful ones, then the broker; then removes the
    socket files and the port file, and lets the lock go. */
static void
s_stop_all (struct sb_gateway **gateway, zactor_t **actors, zactor_t **broker, const char *dir,
            const char *http_port_path, int lock_fd)
{
    sb_gateway_stop (gateway);
    for (int order = 0; order <= 3; order++)
        for (size_t k = 0; k < NACTORS; k++)
            if (actors [k] && s_actor_table [k].stop_order == order)
                zactor_destroy (&actors [k]);
    zactor_destroy (broker);
    const char *socks [] = { "bus-cmd", "bus-in", "bus-pub", "bus-tap" };
    for (int k = 0; k < 4; k++) {
        char p [4200];
        snprintf (p, sizeof p, "%s/%s", dir, socks [k]);
        unlink (p);
    }
    unlink (http_port_path);
    close (lock_fd);
}

int
sb_serve_run (const sb_serve_opts_t *o, sb_serve_hook_fn *hook, void *hook_arg)
{
    char dir [4096];
    int lock_fd = -1;
    int rc = s_prepare_data (o, dir, sizeof dir, &lock_fd);
    if (rc)
        return rc;
    /* on PostgreSQL, serve is a node of the cluster that database keeps:
       it holds the leases of its share of the shards before any actor
       starts (a lone node holds them all), and an unreachable database
       is one line here */
    char err [1024];
    sb_cluster_t *cluster = o->store ? sb_serve_cluster_open (o, dir, err, sizeof err) : NULL;
    if (o->store && !cluster) {
        close (lock_fd);
        return sb_cli_fail ("serve", "%s", err);
    }
    s_cluster = cluster;

    /* Signals are taken by this thread alone, with sigtimedwait; every
       actor thread inherits the blocked mask. czmq's handler stays off. */
    sigset_t sigs;
    sigemptyset (&sigs);
    sigaddset (&sigs, SIGINT);
    sigaddset (&sigs, SIGTERM);
    sigaddset (&sigs, SIGHUP);
    pthread_sigmask (SIG_BLOCK, &sigs, NULL);
    signal (SIGPIPE, SIG_IGN);
    s_raise_nofile ();
    zsys_handler_set (NULL);
    zsys_init ();

    /* tcp is CURVE unless plain TCP was asked for by name (docs/workers.md) */
    sb_broker_config_t bcfg = { .ipc_dir = dir, .tcp = o->bus, .certs_data = o->insecure_bus ? NULL : dir,
                                .stats_extra = s_stats_extra };
    if (o->bus && o->insecure_bus)
        sb_warn ("serve", "the bus on %s is plain TCP without CURVE (--insecure-tcp): anyone who can "
                 "reach it can drive the agents", o->bus);
    sb_server_config_t scfg = {
        .llm = o->llm, .llm_url = o->llm_url, .model = o->model, .providers = o->providers,
        .sandbox = o->sandbox, .demo_delay_ms = o->demo_delay_ms ? o->demo_delay_ms : -1,
        .tool_output_tape = o->tool_output_tape, .session_quota = o->session_quota,
        .context_window = o->context_window,
        .mcp_config = o->mcp_config, .hooks = o->hooks,
        .approval_deadline_set = o->approval_deadline_set, .approval_deadline_s = o->approval_deadline_s,
        .store = o->store, .cluster = cluster,
    };
    zactor_t *broker = zactor_new (sb_broker_actor, &bcfg);
    if (!broker) {
        close (lock_fd);
        s_cluster = NULL;
        sb_serve_cluster_close (&cluster);
        return sb_cli_fail ("serve", "the broker failed to start (see the log above)");
    }
    zactor_t *actors [NACTORS] = { 0 };
    sb_actor_args_t args [NACTORS];
    char names [NACTORS][64];
    int failed = s_start_actors (o, dir, &scfg, actors, args, names) != 0;
    /* recovery steps of the stateful actors run inside their startup */
    if (!failed) {
        zstr_send (broker, "BIND");
        if (zsock_wait (broker) != 0)
            failed = 1;
    }
    char http_port_path [4200];
    snprintf (http_port_path, sizeof http_port_path, "%s/http.port", dir);
    struct sb_gateway *gateway = NULL;
    if (!failed && o->http_enabled)
        gateway = sb_serve_http_start (o, dir, &failed);
    if (!failed) {
        char store [1024] = "lmdb";
        if (o->store)
            sb_log_redact_url (o->store, store, sizeof store);
        sb_info ("serve", "ready data=%s store=%s bus=ipc://%s/bus-cmd http_port=%d pid=%d", dir, store, dir,
                 gateway ? sb_gateway_port (gateway) : 0, (int) getpid ());
        if (!hook)
            s_banner (o, dir);
        if (!hook && gateway)
            sb_serve_http_banner (o, gateway);
    }
    int exit_code = failed ? 1 : 0;
    if (!failed && hook)
        exit_code = hook (hook_arg, dir);
    else
    while (!failed) {
        struct timespec ts = { 1, 0 };
        int sig = sigtimedwait (&sigs, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            sb_info ("serve", "shutting down signal=%s", strsignal (sig));
            break;
        }
    }
    s_stop_all (&gateway, actors, &broker, dir, http_port_path, lock_fd);
    /* after the actors' last writes: the leases go at once */
    s_cluster = NULL;
    sb_serve_cluster_close (&cluster);
    sb_info ("serve", "stopped");
    return exit_code;
}
