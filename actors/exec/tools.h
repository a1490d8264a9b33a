/*  actors/exec/tools.h — the agent's tools, as a library for the exec actor.

    The model sees the table from sb_tools_list (name, description, JSON
    schema of the arguments) and asks for a tool by name with JSON
    arguments; sb_tool_run validates them and runs it in the workspace.
    Every path is confined by actors/exec/path.h; every process is started
    by sandbox/spawn.h (posix_spawn, never fork, no shell except for the
    `shell` tool itself).

    A tool failure — bad arguments, a path outside the workspace, a command
    that exits 1 — is a result with ok=false and a message the model can act
    on, never a crash. Output is always valid UTF-8 without NUL bytes, and
    bounded.

    Thread-safe: runs of different tools may proceed on different threads.
    sb_tool_run blocks the calling thread until the tool ends, times out or
    is cancelled.
*/
#ifndef SB_EXEC_TOOLS_H
#define SB_EXEC_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SB_TOOLS_SHELL_TIMEOUT_S      120     //  default for shell, grep, git
#define SB_TOOLS_SHELL_TIMEOUT_MAX_S  3600    //  most a model may ask for
#define SB_TOOLS_ARGS_MAX             (8u * 1024 * 1024)
#define SB_TOOLS_OUTPUT_MAX           (64 * 1024)

typedef struct {
    const char *name;
    const char *description;
    const char *parameters;     //  JSON schema (an object), as text
    bool read_only;             //  no side effects: `auto` approval allows it
} sb_tool_def_t;

//  Streaming output: valid UTF-8 pieces, as the process writes them, on the
//  thread that called sb_tool_run. Only process-backed tools stream.
typedef void (sb_tool_output_fn) (const char *data, size_t len, void *arg);

typedef struct {
    const char *workspace;      //  realpath of the workspace (required)
    //  Readable means cancel (eventfd or pipe); never read. -1 or 0: none.
    int cancel_fd;
    sb_tool_output_fn *on_output;   //  optional
    void *output_arg;
    int shell_timeout_s;        //  0: SB_TOOLS_SHELL_TIMEOUT_S
    //  NULL: the server's sandbox (sandbox/spawn.h); or a kind by name
    const char *sandbox;
    bool network;               //  `shell` may reach the network (grep and git never)
    //  NULL-terminated extras for the environment allowlist: "NAME" passes
    //  the server's value through, "NAME=VALUE" sets one.
    const char *const *env_extra;
    //  Optional: whether the session's rules deny reading `path` (relative
    //  to the workspace); with path NULL, whether they deny reading any.
    //  grep and list_dir leave out what it denies.
    bool (*read_denied) (const char *path, void *arg);
    void *read_denied_arg;
} sb_tool_ctx_t;

typedef struct {
    bool ok;
    char *output;               //  owned; for the model. NULL only if out of memory
    int exit_code;              //  shell, grep, git: the exit status; else -1
    int64_t duration_ms;
    bool timed_out;
    bool cancelled;
    bool truncated;             //  output was cut (the text says so too)
    //  view_image: the image for the model (owned), put in the blob store
    //  and referenced by the tool.result entry (docs/images.md)
    uint8_t *image;
    size_t image_len;
    char image_name [256];
    //  attach_file: the bytes above are an artifact of the session (the
    //  entry's "artifact"), not an image for the model
    bool artifact;
    char artifact_description [1025];
} sb_tool_result_t;

//  The tool table; static, never freed. *n receives its length.
const sb_tool_def_t *
    sb_tools_list (size_t *n);

//  The definition of one tool, or NULL.
const sb_tool_def_t *
    sb_tools_find (const char *name);

/*  Run tool `name` with JSON arguments (NULL or "" mean {}). Always fills
    res; returns 0 if res->ok, -1 otherwise. Free res with
    sb_tool_result_clear.                                                   */
int
    sb_tool_run (const sb_tool_ctx_t *ctx, const char *name, const char *args_json,
                 sb_tool_result_t *res);

//  Frees what a result owns and zeroes it; tolerates NULL.
void
    sb_tool_result_clear (sb_tool_result_t *res);

/*  Copy `len` bytes into a new string that is valid UTF-8 with no NUL
    bytes: each invalid byte, and each NUL, becomes U+FFFD. Returns a
    malloc'd string the caller frees (its length in *outlen if not NULL), or
    NULL if out of memory.                                                  */
char *
    sb_tools_utf8_clean (const char *data, size_t len, size_t *outlen);

#endif
