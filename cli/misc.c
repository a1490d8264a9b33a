/*  cli/misc.c — `schemas`, `actor` and `call`. */
#include "cli/cli.h"
#include "bus/curve.h"
#include "cli/serve.h"
#include "actors/actor.h"
#include "common/log.h"
#include "schemas/json.h"

#include <czmq.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

int
sb_cmd_schemas (int argc, char **argv)
{
    bool md = false;
    for (int k = 1; k < argc; k++) {
        if (strcmp (argv [k], "--markdown") == 0)
            md = true;
        else
        if (strcmp (argv [k], "-h") == 0 || strcmp (argv [k], "--help") == 0) {
            printf ("usage: switchboard schemas [--markdown]\n\n"
                    "Prints every message type, its fields (type, required, limit, doc),\n"
                    "the header, the error codes and the tape entry kinds. --markdown\n"
                    "prints docs/protocol.md.\n");
            return 0;
        }
        else
            return sb_cli_usage ("schemas", "unknown argument '%s'", argv [k]);
    }
    sb_schema_print (stdout, md);
    return 0;
}

typedef struct {
    const char *name;
    sb_actor_fn *fn;
} s_actor_entry_t;

/*  The stateless actors can run as processes of their own, on any host.
    The stateful ones (session, run) live inside `serve`. */
static const s_actor_entry_t s_standalone [] = {
    { "echo", sb_echo_actor },
    { "llm", sb_llm_actor },
    { "exec", sb_exec_actor },
};

static const char s_actor_usage [] =
    "usage: switchboard actor NAME [--connect EP] [--instance NAME] [--data DIR]\n"
    "                         [--llm PROVIDER --llm-url URL --model M | --providers FILE]\n"
    "                         [--sandbox auto|bwrap|landlock|none] [--mcp-config FILE]\n"
    "                         [--cert FILE --server-key FILE[,FILE...]]\n\n"
    "Runs one stateless actor as its own process, attached to a running\n"
    "broker (--connect, else $SWITCHBOARD_BUS, else the ipc endpoint in DATA).\n"
    "Actors: llm (the model broker; it holds the provider keys), exec (the\n"
    "local executor; same filesystem as the server), echo (the test service).\n"
    "exec starts the MCP servers of --mcp-config FILE (docs/mcp.md); its tools\n"
    "and MCP servers run in the sandbox --sandbox names (default auto, as in\n"
    "serve; docs/sandbox.md).\n"
    "Over a CURVE tcp:// bus, --cert is its key pair ('switchboard keys new NAME\n"
    "--actor' prints the secret file) and --server-key DATA/certs/server; with\n"
    "--connect EP1,EP2,... (the nodes of a cluster) --server-key takes one\n"
    "certificate per endpoint, in the same order, or one for all.\n";

//  What `actor` is given: where to attach, as whom, and the actor's config.
typedef struct {
    const char *connect, *instance, *data, *cert, *server_key;
    sb_server_config_t cfg;
} s_actor_opts_t;

//  The options of `actor` into *o. Returns -1 to go on, or the exit code
//  (0 after --help).
static int
s_actor_parse (int argc, char **argv, s_actor_opts_t *o)
{
    static struct option longopts [] = {
        { "connect", required_argument, 0, 'c' },
        { "instance", required_argument, 0, 'i' },
        { "data", required_argument, 0, 'd' },
        { "llm", required_argument, 0, 'l' },
        { "model", required_argument, 0, 'm' },
        { "llm-url", required_argument, 0, 'u' },
        { "providers", required_argument, 0, 'p' },
        { "sandbox", required_argument, 0, 's' },
        { "mcp-config", required_argument, 0, 1101 },
        { "cert", required_argument, 0, 'C' },
        { "server-key", required_argument, 0, 'S' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'c': o->connect = optarg; break;
            case 'i': o->instance = optarg; break;
            case 'd': o->data = optarg; break;
            case 'l': o->cfg.llm = optarg; break;
            case 'm': o->cfg.model = optarg; break;
            case 'u': o->cfg.llm_url = optarg; break;
            case 'p': o->cfg.providers = optarg; break;
            case 's': o->cfg.sandbox = optarg; break;
            case 1101: o->cfg.mcp_config = optarg; break;
            case 'C': o->cert = optarg; break;
            case 'S': o->server_key = optarg; break;
            case 'h': fputs (s_actor_usage, stdout); return 0;
            default: return sb_cli_usage ("actor", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    return -1;
}

//  The actor named on the command line, once the options check out (the
//  key pair is set). Returns NULL with *rc the exit code.
static const s_actor_entry_t *
s_actor_check (int argc, char **argv, const s_actor_opts_t *o, int *rc)
{
    *rc = 0;
    if (optind >= argc)
        *rc = sb_cli_usage ("actor", "which actor? (llm, exec, echo)");
    else
    if (optind + 1 < argc)
        *rc = sb_cli_usage ("actor", "unexpected argument '%s'", argv [optind + 1]);
    else
    if (sb_serve_sandbox_check ("actor", o->cfg.sandbox))
        *rc = 2;
    else
    if (!o->cert != !o->server_key)
        *rc = sb_cli_usage ("actor", "--cert and --server-key go together");
    if (*rc)
        return NULL;
    if (o->cert) {
        /* the k-th server key is the k-th endpoint's, on both planes */
        char cerr [512], ep [4200], sub [4200];
        if (sb_cli_endpoint (o->connect, o->data, "cmd", ep, sizeof ep, cerr, sizeof cerr)) {
            *rc = sb_cli_fail ("actor", "%s", cerr);
            return NULL;
        }
        if (sb_curve_server_keys_fit (o->server_key, ep, cerr, sizeof cerr)) {
            *rc = sb_cli_usage ("actor", "%s", cerr);
            return NULL;
        }
        if (sb_curve_client_set (o->cert, o->server_key, cerr, sizeof cerr)
        ||  sb_curve_client_endpoints (ep, cerr, sizeof cerr)
        ||  (sb_cli_endpoint (o->connect, o->data, "pub", sub, sizeof sub, cerr, sizeof cerr) == 0
             && sb_curve_client_endpoints (sub, cerr, sizeof cerr))) {
            *rc = sb_cli_fail ("actor", "%s", cerr);
            return NULL;
        }
    }
    sb_serve_opts_t llm_opts = { .llm = o->cfg.llm, .model = o->cfg.model };
    if ((*rc = sb_serve_check_llm ("actor", &llm_opts)) != 0)
        return NULL;
    const char *name = argv [optind];
    for (size_t k = 0; k < sizeof s_standalone / sizeof s_standalone [0]; k++)
        if (strcmp (s_standalone [k].name, name) == 0)
            return &s_standalone [k];
    *rc = sb_cli_usage ("actor", "unknown actor '%s'", name);
    return NULL;
}

int
sb_cmd_actor (int argc, char **argv)
{
    s_actor_opts_t o = { .cfg = { .demo_delay_ms = -1 } };
    int rc = s_actor_parse (argc, argv, &o);
    if (rc >= 0)
        return rc;
    const s_actor_entry_t *entry = s_actor_check (argc, argv, &o, &rc);
    if (!entry)
        return rc;
    const char *name = entry->name, *instance = o.instance;
    char ep [4200], err [512], inst [160];
    if (sb_cli_endpoint (o.connect, o.data, "cmd", ep, sizeof ep, err, sizeof err))
        return sb_cli_fail ("actor", "%s", err);
    if (!instance) {
        char host [64] = "host";
        gethostname (host, sizeof host - 1);
        snprintf (inst, sizeof inst, "%s-%s-%d", name, host, (int) getpid ());
        instance = inst;
    }
    /* the executor's tools and MCP servers run in the sandbox, blind to
       the data folder and the key files (docs/sandbox.md) */
    char dir [4096];
    if (strcmp (name, "exec") == 0) {
        const char *secrets [] = {
            sb_cli_data_dir (o.data, dir, sizeof dir, err, sizeof err) == 0 ? dir : NULL,
            o.cfg.providers, o.cfg.mcp_config, o.cert,
        };
        if (sb_serve_sandbox ("actor", o.cfg.sandbox, o.cfg.providers, secrets, 4))
            return 1;
    }
    sigset_t sigs;
    sigemptyset (&sigs);
    sigaddset (&sigs, SIGINT);
    sigaddset (&sigs, SIGTERM);
    pthread_sigmask (SIG_BLOCK, &sigs, NULL);
    zsys_handler_set (NULL);
    /* the event plane, where an executor hears approvals resolved */
    char sub_ep [4200] = "";
    if (sb_cli_endpoint (o.connect, o.data, "pub", sub_ep, sizeof sub_ep, err, sizeof err))
        sub_ep [0] = 0;
    sb_actor_args_t args = { .cmd_endpoint = ep, .sub_endpoint = sub_ep [0] ? sub_ep : NULL, .instance = instance,
                             .config = &o.cfg };
    zactor_t *actor = sb_actor_start (entry->fn, &args);
    if (actor && sb_actor_last_status () != 0)
        zactor_destroy (&actor);
    if (!actor)
        return sb_cli_fail ("actor", "%s could not register with %s", name, ep);
    sb_info ("actor", "running actor=%s instance=%s endpoint=%s", name, instance, ep);
    while (true) {
        struct timespec ts = { 1, 0 };
        int sig = sigtimedwait (&sigs, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM)
            break;
    }
    zactor_destroy (&actor);
    return 0;
}

int
sb_cmd_call (int argc, char **argv)
{
    static struct option longopts [] = {
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "timeout", required_argument, 0, 't' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    const char *connect = NULL, *data = NULL;
    int timeout = 10000;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'c': connect = optarg; break;
            case 'd': data = optarg; break;
            case 't': {
                char *end;
                long ms = strtol (optarg, &end, 10);
                if (*end || ms <= 0 || ms > INT_MAX)
                    return sb_cli_usage ("call", "--timeout takes milliseconds, not '%s'", optarg);
                timeout = (int) ms;
                break;
            }
            case 'h':
                printf ("usage: switchboard call TYPE [JSON-BODY] [--timeout MS] [--connect EP] [--data DIR]\n\n"
                        "Sends one request of any type with a JSON body (default {}) and\n"
                        "prints the reply as JSON. See 'switchboard schemas' for the types.\n");
                return 0;
            default: return sb_cli_usage ("call", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (optind >= argc)
        return sb_cli_usage ("call", "which type?");
    const char *type_name = argv [optind];
    const char *text = optind + 1 < argc ? argv [optind + 1] : "{}";
    if (optind + 2 < argc)
        return sb_cli_usage ("call", "unexpected argument '%s'", argv [optind + 2]);
    const sb_type_t *type = sb_schema_find (type_name, strlen (type_name));
    if (!type)
        return sb_cli_usage ("call", "unknown type '%s' (see 'switchboard schemas')", type_name);
    sb_verr_t err;
    json_t *j = sb_json_parse (text, strlen (text), 0, 0, &err);
    if (!j)
        return sb_cli_usage ("call", "body: %s", err.message);
    sb_enc_t *enc = sb_enc_new ();
    if (sb_json_to_msgpack (j, type->fields, enc, &err)) {
        json_decref (j);
        sb_enc_destroy (&enc);
        return sb_cli_usage ("call", "body: %s", err.message);
    }
    json_decref (j);
    size_t len;
    const uint8_t *body = sb_enc_data (enc, &len);
    sb_bus_t *bus = sb_cli_connect ("call", connect, data);
    int rc = 1;
    if (bus) {
        sb_msg_t *reply = sb_bus_call (bus, type_name, NULL, body, len, timeout);
        if (!reply)
            sb_cli_fail ("call", "no reply within %d ms", timeout);
        else {
            sb_cli_print_json (reply->body);
            rc = sb_msg_is_error (reply) ? 1 : 0;
        }
        sb_msg_destroy (&reply);
    }
    sb_bus_destroy (&bus);
    sb_enc_destroy (&enc);
    return rc;
}
