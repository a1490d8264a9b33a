/*  cli/cli.h — shared pieces of the `switchboard` commands.
    Exit codes: 0 success, 1 the operation failed, 2 usage error. */
#ifndef SB_CLI_H
#define SB_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "bus/client.h"

#define SB_VERSION "0.1.0"
#define SB_IPC_PATH_MAX 107     /* sun_path, less the NUL */

typedef struct {
    const char *name;
    int (*fn) (int argc, char **argv);
    const char *summary;
} sb_cmd_t;

/*  Set by main when the command line holds --json: errors are then printed
    as {"error":{"code","message"}} on stderr instead of a line. The code is
    one of schemas/errors.h (the server's, or unavailable/timeout when no
    server answers), "usage" for a usage error, or "failed" for a local
    failure that has no better name. */
extern bool sb_cli_json_errors;

/*  Prints "switchboard CMD: message" and a --help hint (code "usage");
    returns 2. */
int sb_cli_usage (const char *cmd, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/*  Prints "switchboard CMD: message" (code "failed"); returns 1. */
int sb_cli_fail (const char *cmd, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/*  As sb_cli_fail with a given code (an error code of schemas/errors.h). */
int sb_cli_fail_code (const char *cmd, const char *code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
/*  A whole decimal number from 0 to max in text into *out: 0, or the
    usage error (2) naming cmd, the option and the text. */
int sb_cli_parse_uint (const char *cmd, const char *opt, const char *text, unsigned long long max,
                       unsigned long long *out);
/*  Prints an error reply of the server, with its code. */
void sb_cli_print_error (const char *cmd, const sb_msg_t *reply);

/*  DATA: --data, else $SWITCHBOARD_DATA, else $XDG_STATE_HOME/switchboard,
    else ~/.local/state/switchboard. Returns 0, or -1 with a message. */
int sb_cli_data_dir (const char *opt, char *out, size_t n, char *err, size_t errlen);

/*  A bus endpoint of a running server: `which` is "cmd", "pub", "tap" or
    "in". From --connect, else $SWITCHBOARD_BUS, else ipc in DATA. A tcp
    command endpoint tcp://H:P gives pub on P+1 and tap on P+2. */
int sb_cli_endpoint (const char *connect, const char *data, const char *which,
                     char *out, size_t n, char *err, size_t errlen);

/*  Connects a client; prints a clear error and returns NULL when there is
    no server. */
sb_bus_t *sb_cli_connect (const char *cmd, const char *connect, const char *data);

/*  The options of a command that takes only --json, --connect, --data and
    --help (its arguments are then argv [optind...]). */
typedef struct {
    const char *connect, *data;
    bool json;
} sb_cli_opts_t;

/*  Parses them into *o. Returns -1 to go on, 0 after printing `usage`
    (--help), 2 after a usage error. */
int sb_cli_parse_opts (int argc, char **argv, const char *cmd, const char *usage, sb_cli_opts_t *o);

/*  A seq given to option `opt` (a decimal number, at least min): 0 with
    *out set, or 2 after printing a usage error. */
int sb_cli_seq_arg (const char *cmd, const char *opt, const char *arg, uint64_t min, uint64_t *out);

/*  Calls `type` and prints an error reply as one line. Returns the reply
    (.ok) or NULL (after printing) on error or timeout. */
sb_msg_t *sb_cli_call (const char *cmd, sb_bus_t *bus, const char *type,
                       const uint8_t *body, size_t len, int timeout_ms);

/*  The largest page a list request type accepts, from the `limit` field
    of its schema table; 0 when the table declares none (then leave
    `limit` out and take the server's default page). */
uint32_t sb_cli_page_max (const char *type);

/*  Session and run ids as people write them: the full id, any unique
    prefix of one (in either case), or `last`, the newest. */
typedef enum { SB_CLI_SESSION, SB_CLI_RUN } sb_cli_id_kind_t;

/*  Checks that `arg` can name an id at all, with no call: returns 0, or 2
    after printing a usage error. */
int sb_cli_id_check (const char *cmd, sb_cli_id_kind_t kind, const char *arg);

/*  Resolves `arg` to a full id in out. A full id is used as is; a prefix
    or `last` asks the server (session.list or run.list with id_prefix).
    Returns 0; 1 when there is no such id or the call failed; 2 for a
    malformed or ambiguous one (the matches are listed). Prints errors. */
int sb_cli_resolve (const char *cmd, sb_bus_t *bus, sb_cli_id_kind_t kind, const char *arg,
                    char out [SB_ULID_LEN + 1]);

/*  What a command on one SESSION argument does first: checks `arg`,
    connects, and resolves it into sid. Returns the bus, or NULL with *rc
    set (2 a usage error, 1 no server or no such session; printed). */
sb_bus_t *sb_cli_session_open (const char *cmd, const char *arg, const char *connect, const char *data,
                               char sid [SB_ULID_LEN + 1], int *rc);

/*  Follows to its end the run a reply named (its run map: session_id,
    run_id), as `prompt --follow` prints it; Ctrl-C cancels the run when
    cancel_on_interrupt. Returns the command's exit status (cli/runs.c). */
int sb_cli_follow_run (const char *cmd, sb_bus_t *bus, const char *connect, const char *data, const sb_val_t *run,
                       bool json, bool cancel_on_interrupt);

/*  List cells, alike in every list: a time as "YYYY-MM-DD HH:MM" (local),
    a text as its first line cut at `max` bytes with "..."; "-" when
    absent. */
void sb_cli_time_cell (uint64_t ms, char *out, size_t n);
void sb_cli_text_cell (const char *s, size_t max, char *out, size_t n);

/*  Prints a value as one JSON line. */
void sb_cli_print_json (const sb_val_t *v);

int sb_cmd_serve (int argc, char **argv);
int sb_cmd_tap (int argc, char **argv);
int sb_cmd_stats (int argc, char **argv);
int sb_cmd_schemas (int argc, char **argv);
int sb_cmd_actor (int argc, char **argv);
int sb_cmd_call (int argc, char **argv);
int sb_cmd_sessions (int argc, char **argv);
int sb_cmd_events (int argc, char **argv);
int sb_cmd_checkpoints (int argc, char **argv);
int sb_cmd_artifacts (int argc, char **argv);
int sb_cmd_artifact (int argc, char **argv);
int sb_cmd_attach (int argc, char **argv);
int sb_cmd_mcp (int argc, char **argv);
int sb_cmd_mcp_probe (int argc, char **argv);   //  cli/mcp_probe.c
int sb_cmd_mcp_login (int argc, char **argv);   //  cli/mcp_login.c
int sb_cmd_mcp_logout (int argc, char **argv);  //  cli/mcp_logout.c
/*  cli/mcp.c: checks --mcp A,B (or all, none); true after a usage error. */
bool sb_cli_mcp_names_check (const char *cmd, const char *list);
int sb_cmd_run (int argc, char **argv);
int sb_cmd_prompt (int argc, char **argv);
int sb_cmd_compact (int argc, char **argv);
int sb_cmd_rewind (int argc, char **argv);
int sb_cmd_fork (int argc, char **argv);
int sb_cmd_cancel (int argc, char **argv);
int sb_cmd_resume (int argc, char **argv);
int sb_cmd_runs (int argc, char **argv);
int sb_cmd_usage (int argc, char **argv);
int sb_cmd_run_info (int argc, char **argv);
int sb_cmd_workers (int argc, char **argv);
int sb_cmd_worker_status (int argc, char **argv);
int sb_cmd_worker (int argc, char **argv);
int sb_cmd_keys (int argc, char **argv);

#endif
