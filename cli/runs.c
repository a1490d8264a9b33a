/*  cli/runs.c — `run` (one-shot), `prompt`, `cancel`, `resume`, `runs`
    and `run-info`. */
#include "schemas/run_status.h"
#include "cli/cli.h"
#include "cli/images.h"
#include "cli/follow.h"
#include "cli/oneshot.h"
#include "cli/queue.h"
#include "common/log.h"
#include "schemas/json.h"
#include "schemas/approval_policy.h"
#include "schemas/vocab.h"

#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/*  `run`: the one-shot (cli/oneshot.c) */

static const char *s_run_usage =
    "usage: switchboard run --goal TEXT [--repo DIR] [--max-steps N] [--approval yolo|auto|interactive]\n"
    "                       [--budget-tokens N] [--budget-usd X] [--budget-steps N] [--budget-minutes N]\n"
    "                       [--llm PROVIDER] [--model M] [--llm-url URL] [--providers FILE]\n"
    "                       [--context-window TOKENS] [--mcp-config FILE] [--hooks FILE]\n"
    "                       [--sandbox auto|bwrap|landlock|none]\n"
    "                       [--data DIR | --ephemeral] [--json] [--image FILE]...\n"
    "\n"
    "One shot: gives the agent the goal in the repo folder, streams the run, says\n"
    "what changed in the folder, and exits 0 when the run completes (1 otherwise).\n"
    "It uses the server running on the data folder if there is one, and otherwise\n"
    "runs the whole system in this process on that folder, so the session and run\n"
    "ids it prints work afterwards. With no --llm it uses the built-in demo model,\n"
    "which needs no key (and takes no images). --image FILE (up to 16) gives the\n"
    "model an image with the goal (docs/images.md).\n"
    "\n"
    "  --goal TEXT        what the agent should do (required)\n"
    "  --repo DIR         the workspace (default: the current folder)\n"
    "  --max-steps N      model calls allowed (default 50)\n"
    "  --approval P       yolo: every tool; auto (default): read-only tools run,\n"
    "                     the others wait for a person (switchboard resolve);\n"
    "                     interactive: every tool waits for a person\n"
    SB_CLI_BUDGET_HELP
    "  --llm PROVIDER     the kind of model server, when no server runs: responses\n"
    "                     (OpenAI's Responses API), chat (any OpenAI-style chat\n"
    "                     completions server: Ollama, llama.cpp, vLLM), anthropic,\n"
    "                     codex (a ChatGPT sign-in), or demo (the default: built in,\n"
    "                     no key); all but demo need --model. Keys come from the\n"
    "                     environment (OPENAI_API_KEY, ANTHROPIC_API_KEY; docs/llm.md)\n"
    "  --model M          the model to ask, as the provider names it (gpt-5.1, qwen3)\n"
    "  --llm-url URL      the provider's base URL with its version path (default:\n"
    "                     the kind's own; chat: http://localhost:11434/v1)\n"
    "  --providers FILE   named providers from a JSON file instead (docs/llm.md);\n"
    "                     its \"default\" one answers\n"
    "                     A running server answers with its own model: these four\n"
    "                     then need --ephemeral\n"
    "  --data DIR         the data folder (default $SWITCHBOARD_DATA, else\n"
    "                     $XDG_STATE_HOME/switchboard, else ~/.local/state/switchboard)\n"
    "  --ephemeral        a temporary data folder, removed at exit\n"
    "  --context-window TOKENS  the model's context window, where the providers\n"
    "                     file gives none (docs/compaction.md)\n"
    "  --mcp-config FILE  MCP tool servers (default DATA/mcp.json; docs/mcp.md)\n"
    "  --hooks FILE       commands run on events (default DATA/hooks.json; docs/hooks.md)\n"
    "  --sandbox KIND     where the tools run, as in serve (default auto; docs/sandbox.md)\n"
    "  --json             print the tape entries as JSON lines\n"
    "\n"
    "Ctrl-C cancels the run and exits 130 once it has stopped (the last line says\n"
    "so); a second Ctrl-C stops waiting.\n";

int
sb_cmd_run (int argc, char **argv)
{
    static struct option longopts [] = {
        { "goal", required_argument, 0, 'g' },
        { "repo", required_argument, 0, 'r' },
        { "max-steps", required_argument, 0, 'm' },
        { "approval", required_argument, 0, 'a' },
        { "llm", required_argument, 0, 'l' },
        { "model", required_argument, 0, 'M' },
        { "llm-url", required_argument, 0, 'u' },
        { "providers", required_argument, 0, 'p' },
        { "data", required_argument, 0, 'd' },
        { "json", no_argument, 0, 'j' },
        { "ephemeral", no_argument, 0, 'e' },
        { "context-window", required_argument, 0, 'W' },
        { "mcp-config", required_argument, 0, 'C' },
        { "hooks", required_argument, 0, 'K' },
        { "sandbox", required_argument, 0, 'S' },
        SB_CLI_BUDGET_OPTS (1000),
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    sb_oneshot_t o = { .approval = "auto" };
    sb_serve_opts_t so = { .http = "127.0.0.1:0" };
    const char *repo = NULL;
    int c;
    if (sb_cli_take_images ("run", &argc, argv, o.images, &o.nimages))
        return 2;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'g': o.goal = optarg; break;
            case 'r': repo = optarg; break;
            case 'm': {
                char *end;
                o.max_steps = strtoul (optarg, &end, 10);
                if (*end || o.max_steps == 0 || o.max_steps > 10000)
                    return sb_cli_usage ("run", "--max-steps takes a number from 1 to 10000");
                break;
            }
            case 'a': o.approval = optarg; break;
            case 'l': so.llm = optarg; break;
            case 'M': so.model = optarg; break;
            case 'u': so.llm_url = optarg; break;
            case 'p': so.providers = optarg; break;
            case 'd': so.data = optarg; break;
            case 'j': o.json = true; break;
            case 'e': o.ephemeral = true; break;
            case 'W':
                if (sb_serve_parse_window ("run", optarg, &so.context_window))
                    return 2;
                break;
            case 'C': so.mcp_config = optarg; break;
            case 'K': so.hooks = optarg; break;
            case 'S': so.sandbox = optarg; break;
            case 1000 + IA_BUDGET_TOKENS:
            case 1000 + IA_BUDGET_COST:
            case 1000 + IA_BUDGET_STEPS:
            case 1000 + IA_BUDGET_MINUTES:
                if (sb_cli_budget_opt ("run", c - 1000, optarg, &o.budget))
                    return 2;
                break;
            case 'h': fputs (s_run_usage, stdout); return 0;
            default: return sb_cli_usage ("run", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (optind < argc)
        return sb_cli_usage ("run", "unexpected argument '%s'", argv [optind]);
    if (!o.goal || !*o.goal)
        return sb_cli_usage ("run", "--goal is required");
    if (!sb_policy_mode_ok (o.approval))
        return sb_cli_usage ("run", "--approval takes yolo, auto or interactive, not '%s'", o.approval);
    if (sb_serve_sandbox_check ("run", so.sandbox))
        return 2;
    int llm_rc = sb_serve_check_llm ("run", &so);
    if (llm_rc)
        return llm_rc;
    if (!realpath (repo ? repo : ".", o.repo))
        return sb_cli_fail ("run", "the repo folder %s does not exist", repo ? repo : ".");
    return sb_oneshot_run (&o, &so);
}

/* ------------------------------------------------------------------ */
/*  Client commands */

typedef struct {
    const char *connect;
    const char *data;
    bool json;
    bool follow;
    const char *session;
    const char *status;
    const char *mode;           /* prompt: --queue or --steer */
    const char *images [SB_CLI_IMAGES_MAX];    /* prompt: --image FILE (cli/images.h) */
    int nimages;
} copts_t;

//  Which of the shared options a command takes.
enum {
    OPT_FOLLOW = 1,
    OPT_FILTERS = 2,            /* --session, --status */
    OPT_MODE = 4,               /* --queue, --steer */
};

static int
s_parse_common (const char *cmd, int argc, char **argv, copts_t *o, const char *usage, int takes, int *rest)
{
    static struct option longopts [] = {
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "json", no_argument, 0, 'j' },
        { "follow", no_argument, 0, 'f' },
        { "session", required_argument, 0, 's' },
        { "status", required_argument, 0, 'S' },
        { "queue", no_argument, 0, 'Q' },
        { "steer", no_argument, 0, 'T' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    memset (o, 0, sizeof *o);
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'c': o->connect = optarg; break;
            case 'd': o->data = optarg; break;
            case 'j': o->json = true; break;
            case 'f': o->follow = true; break;
            case 's': o->session = optarg; break;
            case 'S': o->status = optarg; break;
            case 'Q':
            case 'T':
                if (o->mode && sb_prompt_mode_from_name (o->mode) != (c == 'Q' ? SB_PROMPT_QUEUE : SB_PROMPT_STEER))
                    return sb_cli_usage (cmd, "--queue and --steer exclude each other");
                o->mode = sb_prompt_mode_name (c == 'Q' ? SB_PROMPT_QUEUE : SB_PROMPT_STEER);
                break;
            case 'h': fputs (usage, stdout); return -1;
            default: return sb_cli_usage (cmd, "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (o->follow && !(takes & OPT_FOLLOW))
        return sb_cli_usage (cmd, "--follow goes with prompt and resume");
    if (o->mode && !(takes & OPT_MODE))
        return sb_cli_usage (cmd, "--queue and --steer go with prompt");
    if ((o->session || o->status) && !(takes & OPT_FILTERS))
        return sb_cli_usage (cmd, "--session and --status go with runs");
    if (o->session) {
        int rc = sb_cli_id_check (cmd, SB_CLI_SESSION, o->session);
        if (rc)
            return rc;
    }
    if (o->status && sb_run_status_from_name (o->status) == SB_RUN__COUNT)
        return sb_cli_usage (cmd, "--status takes %s, not '%s'", sb_run_status_names (), o->status);
    *rest = optind;
    return 0;
}

#define RUN_ROW_FORMAT "%-26s  %-11s  %-26s  %5s  %-16s  %s\n"

static void
s_print_run (const sb_val_t *run, bool json, bool one_line)
{
    if (json) {
        sb_cli_print_json (run);
        return;
    }
    const char *reason = sb_get_str (run, "reason");
    const char *waiting = sb_get_str (run, "waiting_for");
    if (one_line) {
        //  The columns match `switchboard sessions`; the last says what a
        //  run was asked, or why it did not complete or what it waits for.
        char steps [24], updated [32], text [256];
        const char *status = sb_get_str (run, "status");
        bool done = sb_run_status_from_name (status) == SB_RUN_completed;
        snprintf (steps, sizeof steps, "%llu", (unsigned long long) sb_get_uint (run, "steps", 0));
        sb_cli_time_cell (sb_get_uint (run, "updated_at", 0), updated, sizeof updated);
        const char *input = sb_get_str (run, "input");
        if (!input && sb_get_str (run, "kind"))
            input = "(compact)";
        sb_cli_text_cell (reason && !done ? reason : waiting ? waiting : input, 60, text, sizeof text);
        //  a run that waits for a person says so first (docs/approvals.md)
        //  (a tool call's approval, or whether to go on past a budget)
        const char *phase = sb_get_str (run, "phase");
        sb_run_phase_t ph = sb_run_phase_from_name (phase);
        if (ph == SB_PHASE_WAITING_APPROVAL || ph == SB_PHASE_WAITING_BUDGET) {
            char cell [256];
            snprintf (cell, sizeof cell, "%s: %s", phase, text);
            sb_cli_text_cell (cell, 60, text, sizeof text);
        }
        printf (RUN_ROW_FORMAT, sb_get_str (run, "run_id"), sb_get_str (run, "status"),
                sb_get_str (run, "session_id"), steps, updated, text);
        return;
    }
    printf ("run         %s\nsession     %s\nstatus      %s\n", sb_get_str (run, "run_id"),
            sb_get_str (run, "session_id"), sb_get_str (run, "status"));
    if (sb_get_str (run, "phase")) printf ("phase       %s\n", sb_get_str (run, "phase"));
    if (reason) printf ("reason      %s\n", reason);
    if (waiting) printf ("waiting for %s\n", waiting);
    if (sb_get_str (run, "resume_from")) printf ("resumes     %s\n", sb_get_str (run, "resume_from"));
    if (sb_get_str (run, "kind")) printf ("kind        %s\n", sb_get_str (run, "kind"));
    if (sb_get_str (run, "owner")) printf ("executor    %s\n", sb_get_str (run, "owner"));
    const sb_val_t *target = sb_get_map (run, "target");
    if (sb_get_str (target, "pool")) printf ("target      worker:%s\n", sb_get_str (target, "pool"));
    if (sb_get_str (run, "worker_id"))
        printf ("worker      %s (instance %s)\n", sb_get_str (run, "worker_id"),
                sb_get_str (run, "instance_id") ? sb_get_str (run, "instance_id") : "-");
    printf ("fence       %llu\nsteps       %llu\n", (unsigned long long) sb_get_uint (run, "fence", 0),
            (unsigned long long) sb_get_uint (run, "steps", 0));
    /* absent: no model call of the run reported them */
    if (sb_get (run, "input_tokens"))
        printf ("tokens      %llu in / %llu out\n", (unsigned long long) sb_get_uint (run, "input_tokens", 0),
                (unsigned long long) sb_get_uint (run, "output_tokens", 0));
    else
        printf ("tokens      unknown\n");
    if (sb_get_str (run, "approval_policy")) printf ("approval    %s\n", sb_get_str (run, "approval_policy"));
    if (sb_get_str (run, "input")) printf ("input       %s\n", sb_get_str (run, "input"));
}

//  The AGENTS.md files a run read, from its instructions.loaded entry on
//  the session's tape (actors/exec/agents_md.c): read forward page by
//  page, bounded, as the tape has no index by run.
static void
s_print_instructions (sb_bus_t *bus, const sb_val_t *run)
{
    const char *sid = sb_get_str (run, "session_id"), *rid = sb_get_str (run, "run_id");
    uint64_t after = 0;
    for (int page = 0; sid && rid && page < 200; page++) {
        sb_enc_t *e = sb_enc_new ();
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", sid);
        sb_enc_kuint (e, "after_seq", after);
        sb_enc_kuint (e, "limit", 5000);
        sb_enc_map_close (e);
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        sb_msg_t *reply = sb_bus_call (bus, "session.events", sid, b, len, 15000);
        sb_enc_destroy (&e);
        if (!reply || sb_msg_is_error (reply)) {
            sb_msg_destroy (&reply);
            return;
        }
        const sb_val_t *events = sb_get_array (reply->body, "events");
        for (uint32_t k = 0; events && k < events->len; k++) {
            const sb_val_t *ev = sb_array_at (events, k);
            const char *kind = sb_get_str (ev, "kind"), *er = sb_get_str (ev, "run_id");
            if (!kind || !er || strcmp (kind, "instructions.loaded") != 0 || strcmp (er, rid) != 0)
                continue;
            const sb_val_t *body = sb_get_map (ev, "body");
            const sb_val_t *paths = sb_get_array (body, "paths");
            for (uint32_t p = 0; paths && p < paths->len; p++)
                if (sb_array_at (paths, p)->type == SB_V_STR)
                    printf ("%s%s\n", p == 0 ? "agents.md   " : "            ", sb_array_at (paths, p)->v.s);
            if (sb_get_bool (body, "truncated", false))
                printf ("            (cut at the instructions cap)\n");
            sb_msg_destroy (&reply);
            return;
        }
        bool more = sb_get_bool (reply->body, "more", false);
        after = sb_get_uint (reply->body, "next_after", after);
        sb_msg_destroy (&reply);
        if (!more)
            return;
    }
}

//  Connects, turns the id argument (a prefix or `last`) into a full id,
//  puts it into `e` under `key` and calls `type`. Closes `e`'s map.
static int
s_run_call (const char *cmd, const copts_t *o, const char *type, sb_enc_t *e, const char *key,
            sb_cli_id_kind_t kind, const char *arg, bool follow)
{
    sb_bus_t *bus = sb_cli_connect (cmd, o->connect, o->data);
    if (!bus)
        return 1;
    char id [SB_ULID_LEN + 1];
    int rc = sb_cli_resolve (cmd, bus, kind, arg, id);
    if (rc) {
        sb_bus_destroy (&bus);
        return rc;
    }
    sb_enc_kstr (e, key, id);
    //  The images go first, for the session the prompt names.
    if (sb_cli_put_images (cmd, bus, id, o->images, o->nimages, e)) {
        sb_bus_destroy (&bus);
        return 1;
    }
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call (cmd, bus, type, b, len, 15000);
    rc = 1;
    if (reply) {
        const sb_val_t *run = sb_get_map (reply->body, "run");
        /* a prompt that waits: queued, or steering the running run */
        if (!run && strcmp (type, "session.prompt") == 0)
            rc = sb_queue_prompt_waits (bus, o->connect, o->data, o->json, follow, id, reply->body);
        else
        if (follow)
            rc = sb_cli_follow_run ("prompt", bus, o->connect, o->data, run, o->json, false);
        else {
            s_print_run (run, o->json, false);
            if (!o->json && strcmp (type, "run.get") == 0)
                s_print_instructions (bus, run);
            rc = 0;
        }
        sb_msg_destroy (&reply);
    }
    sb_bus_destroy (&bus);
    return rc;
}

int
sb_cmd_prompt (int argc, char **argv)
{
    static const char *usage =
        "usage: switchboard prompt SESSION TEXT [--image FILE]... [--queue | --steer] [--follow]\n"
        "                          [--json] [--connect EP] [--data DIR]\n\n"
        "Gives a session a prompt: appends it to the tape and starts a run. A session\n"
        "runs one run at a time; while a run is active:\n"
        "  --queue   (the default) the prompt waits in the session's queue and runs as\n"
        "            the next run when the current one completes; it prints the\n"
        "            position ('switchboard queue SESSION' lists the queue)\n"
        "  --steer   the prompt joins the running run at its next step (after the\n"
        "            current model output or tool), as the person's words\n"
        "With no run active both start a run. SESSION is a session id, any unique\n"
        "prefix of one, or 'last' (the newest).\n"
        "\n"
        "--image FILE (up to 16) gives the model an image with the text: PNG, JPEG,\n"
        "GIF or WebP, recognised from its bytes, not its name. Each is stored once in\n"
        "the server's blob store, and one larger than models take is sent downscaled\n"
        "(docs/images.md). A prompt with images must start a run: it is refused\n"
        "while the session is busy.\n"
        "\n"
        "Without --follow it prints the new run and returns at once; the run goes on\n"
        "in the server. --follow streams the run and exits 0 when it completes, 1\n"
        "when it ends otherwise. While following, Ctrl-C detaches: the command\n"
        "stops streaming and exits (status 130), but the run goes on in the server.\n"
        "It prints how to re-attach (events --follow) and how to stop the run\n"
        "('switchboard cancel RUN'). A queued prompt is followed from when its run\n"
        "starts; a steer, from when the run takes it. --json prints the reply (and,\n"
        "with --follow, the entries) as JSON.\n"
        "\n"
        "Exit status: 0 success, 1 the operation failed, 2 usage error.\n";
    copts_t o;
    const char *images [SB_CLI_IMAGES_MAX];
    int nimages, rest, rc = sb_cli_take_images ("prompt", &argc, argv, images, &nimages);
    if (rc)
        return rc;
    rc = s_parse_common ("prompt", argc, argv, &o, usage, OPT_FOLLOW | OPT_MODE, &rest);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (argc - rest != 2)
        return sb_cli_usage ("prompt", "give a SESSION and the TEXT");
    if ((rc = sb_cli_id_check ("prompt", SB_CLI_SESSION, argv [rest])) != 0)
        return rc;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "text", argv [rest + 1]);
    sb_enc_kstr_opt (e, "mode", o.mode);
    memcpy (o.images, images, sizeof images);
    o.nimages = nimages;
    rc = s_run_call ("prompt", &o, "session.prompt", e, "session_id", SB_CLI_SESSION, argv [rest], o.follow);
    sb_enc_destroy (&e);
    return rc;
}

int
sb_cmd_compact (int argc, char **argv)
{
    static const char *usage =
        "usage: switchboard compact SESSION [--json] [--connect EP] [--data DIR]\n\n"
        "Compacts the session's model context now: the model summarizes the turns\n"
        "before the newest one, and later runs start from that summary. The tape\n"
        "keeps every entry ('events' still shows them all). It runs as a run of its\n"
        "own: refused while another run of the session is active, and Ctrl-C (or\n"
        "'switchboard cancel RUN') cancels it, leaving the context as it was. It\n"
        "prints the size before and after, in tokens (docs/compaction.md).\n"
        "SESSION is a session id, any unique prefix of one, or 'last' (the newest).\n"
        "--json prints the run's tape entries as JSON lines.\n"
        "\n"
        "Exit status: 0 compacted (or nothing to compact), 1 failed or cancelled,\n"
        "2 usage error.\n";
    copts_t o;
    int rest, rc = s_parse_common ("compact", argc, argv, &o, usage, 0, &rest);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (argc - rest != 1)
        return sb_cli_usage ("compact", "give one SESSION");
    char id [SB_ULID_LEN + 1];
    sb_bus_t *bus = sb_cli_session_open ("compact", argv [rest], o.connect, o.data, id, &rc);
    if (!bus)
        return rc;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", id);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call ("compact", bus, "session.compact", b, len, 15000);
    sb_enc_destroy (&e);
    rc = 1;
    if (reply) {
        rc = sb_cli_follow_run ("compact", bus, o.connect, o.data, sb_get_map (reply->body, "run"), o.json, true);
        sb_msg_destroy (&reply);
    }
    sb_bus_destroy (&bus);
    return rc;
}

static int
s_by_id (const char *cmd, const char *type, int argc, char **argv, const char *usage, bool follow_ok)
{
    copts_t o;
    int rest, rc = s_parse_common (cmd, argc, argv, &o, usage, follow_ok ? OPT_FOLLOW : 0, &rest);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (argc - rest != 1)
        return sb_cli_usage (cmd, "give one RUN id");
    if ((rc = sb_cli_id_check (cmd, SB_CLI_RUN, argv [rest])) != 0)
        return rc;
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    rc = s_run_call (cmd, &o, type, e, "run_id", SB_CLI_RUN, argv [rest], follow_ok && o.follow);
    sb_enc_destroy (&e);
    return rc;
}

#define RUN_ID_HELP "RUN is a run id, any unique prefix of one, or 'last' (the newest run).\n"

int
sb_cmd_cancel (int argc, char **argv)
{
    return s_by_id ("cancel", "run.cancel", argc, argv,
                    "usage: switchboard cancel RUN [--json] [--connect EP] [--data DIR]\n\n"
                    "Cancels a run: it becomes cancelling, then cancelled once the executor\n"
                    "has stopped its tool (the whole process group) and its model stream.\n"
                    RUN_ID_HELP, false);
}

int
sb_cmd_resume (int argc, char **argv)
{
    return s_by_id ("resume", "run.resume", argc, argv,
                    "usage: switchboard resume RUN [--follow] [--json] [--connect EP] [--data DIR]\n\n"
                    "Starts a new run that continues a failed, cancelled, interrupted or\n"
                    "expired one from the tape. Tools that were interrupted are not re-run:\n"
                    "the model is told they were interrupted.\n"
                    RUN_ID_HELP
                    "--follow streams the new run as 'prompt --follow' does (Ctrl-C detaches).\n",
                    true);
}

int
sb_cmd_run_info (int argc, char **argv)
{
    return s_by_id ("run-info", "run.get", argc, argv,
                    "usage: switchboard run-info RUN [--json] [--connect EP] [--data DIR]\n\n"
                    "Shows one run: status, phase, what it waits for, fence, steps, tokens, and\n"
                    "the AGENTS.md files it read (agents.md).\n"
                    RUN_ID_HELP, false);
}

int
sb_cmd_runs (int argc, char **argv)
{
    static const char *usage =
        "usage: switchboard runs [--session S] [--status X] [--json] [--connect EP] [--data DIR]\n\n"
        "Lists runs, newest first, in the columns of 'switchboard sessions'; --json\n"
        "prints one JSON object per line.\n"
        "\n"
        "  --session S   only that session's runs: an id, a unique prefix, or 'last'\n"
        "  --status X    only runs in status X: queued, claimed, running, cancelling,\n"
        "                completed, failed, cancelled, expired or interrupted\n"
        "\n"
        "Exit status: 0 success, 1 the operation failed, 2 usage error.\n";
    copts_t o;
    int rest, rc = s_parse_common ("runs", argc, argv, &o, usage, OPT_FILTERS, &rest);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (rest < argc)
        return sb_cli_usage ("runs", "unexpected argument '%s'", argv [rest]);
    sb_bus_t *bus = sb_cli_connect ("runs", o.connect, o.data);
    if (!bus)
        return 1;
    char sid [SB_ULID_LEN + 1];
    if (o.session && (rc = sb_cli_resolve ("runs", bus, SB_CLI_SESSION, o.session, sid)) != 0) {
        sb_bus_destroy (&bus);
        return rc;
    }
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    if (o.session)
        sb_enc_kstr (e, "session_id", sid);
    sb_enc_kstr_opt (e, "status", o.status);
    sb_enc_map_close (e);
    size_t len;
    const uint8_t *b = sb_enc_data (e, &len);
    sb_msg_t *reply = sb_cli_call ("runs", bus, "run.list", b, len, 15000);
    rc = 1;
    if (reply) {
        const sb_val_t *runs = sb_get_array (reply->body, "runs");
        if (!o.json && runs && runs->len > 0)
            printf (RUN_ROW_FORMAT, "RUN", "STATUS", "SESSION", "STEPS", "UPDATED", "INPUT OR REASON");
        for (uint32_t k = 0; runs && k < runs->len; k++)
            s_print_run (sb_array_at (runs, k), o.json, true);
        if (!o.json && (!runs || runs->len == 0))
            fprintf (stderr, "no runs\n");
        rc = 0;
        sb_msg_destroy (&reply);
    }
    sb_bus_destroy (&bus);
    sb_enc_destroy (&e);
    return rc;
}

int
sb_cli_follow_run (const char *cmd, sb_bus_t *bus, const char *connect, const char *data, const sb_val_t *run,
                   bool json, bool cancel_on_interrupt)
{
    char ep [4200], err [512];
    if (sb_cli_endpoint (connect, data, "pub", ep, sizeof ep, err, sizeof err))
        return sb_cli_fail (cmd, "%s", err);
    char sid [33], rid [33];
    snprintf (sid, sizeof sid, "%s", sb_get_str (run, "session_id"));
    snprintf (rid, sizeof rid, "%s", sb_get_str (run, "run_id"));
    sb_watch_t w = { .bus = bus, .sub_endpoint = ep, .session_id = sid, .run_id = rid, .json = json,
                     .cancel_on_interrupt = cancel_on_interrupt };
    return sb_follow_run (&w);
}
