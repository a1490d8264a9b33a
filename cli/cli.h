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

/*  Prints "switchboard CMD: message" and a --help hint; returns 2. */
int sb_cli_usage (const char *cmd, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/*  Prints "switchboard CMD: message"; returns 1. */
int sb_cli_fail (const char *cmd, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

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

/*  Calls `type` and prints an error reply as one line. Returns the reply
    (.ok) or NULL (after printing) on error or timeout. */
sb_msg_t *sb_cli_call (const char *cmd, sb_bus_t *bus, const char *type,
                       const uint8_t *body, size_t len, int timeout_ms);

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
int sb_cmd_run (int argc, char **argv);
int sb_cmd_prompt (int argc, char **argv);
int sb_cmd_cancel (int argc, char **argv);
int sb_cmd_resume (int argc, char **argv);
int sb_cmd_runs (int argc, char **argv);
int sb_cmd_run_info (int argc, char **argv);

#endif
