/*  actors/exec/tools_impl.h — what the files of the tools share: the
    result buffer, argument checks and the tool functions themselves.

    actors/exec/tools.c holds the table, the helpers and the dispatch;
    actors/exec/tools_process.c the tools that run a process (shell, grep);
    actors/exec/tools_git.c the read-only git tools;
    actors/exec/tools_file.c the file tools. Internal to exec: the
    public interface is actors/exec/tools.h.
*/
#ifndef SB_EXEC_TOOLS_IMPL_H
#define SB_EXEC_TOOLS_IMPL_H

#include "actors/exec/tools.h"

#include <jansson.h>

//  Turns the raw bytes spawn delivers into clean UTF-8 for the caller.
typedef struct {
    sb_tool_output_fn *fn;
    void *arg;
    char pending [4];
    size_t npending;
} sb_tools_stream_t;

//  Emits what is complete of `data` (all of it when final), holding back
//  a UTF-8 sequence that the next piece may complete.
void sb_tools_stream_emit (sb_tools_stream_t *st, const char *data, size_t len, bool final);
//  A sb_spawn_output_fn over a sb_tools_stream_t.
void sb_tools_stream_on_output (const char *data, size_t len, void *arg);

//  A growing output; `oom` is sticky, and sb_tools_finish reports it.
typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} sb_tools_buf_t;

void sb_tools_buf_add (sb_tools_buf_t *b, const char *data, size_t n);
void sb_tools_buf_addf (sb_tools_buf_t *b, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
bool sb_tools_buf_ends_with_newline (const sb_tools_buf_t *b);

//  Hands the buffer to the result as clean UTF-8; returns 0 if ok, else -1.
int sb_tools_finish (sb_tool_result_t *res, bool ok, sb_tools_buf_t *b);
//  A failed result with this message; returns -1.
int sb_tools_error (sb_tool_result_t *res, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

typedef enum { SB_TOOLS_ARG_STR, SB_TOOLS_ARG_INT } sb_tools_argtype_t;

typedef struct {
    const char *name;
    sb_tools_argtype_t type;
    bool required;
} sb_tools_arg_t;

//  Checks args against spec: required present, types right, nothing
//  unknown. Returns 0, or fills res with the refusal and returns -1.
int sb_tools_args_check (const char *tool, json_t *args, const sb_tools_arg_t *spec, size_t nspec,
                         sb_tool_result_t *res);
const char *sb_tools_arg_str (json_t *args, const char *name, size_t *len);
bool sb_tools_arg_int (json_t *args, const char *name, json_int_t *out);
//  Resolves a path argument into out (PATH_MAX), or fills res with the
//  refusal.
int sb_tools_resolve (const sb_tool_ctx_t *ctx, const char *path, size_t len, bool for_write,
                      char *out, sb_tool_result_t *res);
//  Opens a resolved path for reading, refusing what is not a regular file
//  (and a symlink swapped in): the fd, or -1 with res filled.
struct stat;
int sb_tools_open_regular (const sb_tool_ctx_t *ctx, const char *resolved, const char *shown,
                           struct stat *st, sb_tool_result_t *res);

//  The default timeout of a process tool, in seconds.
int sb_tools_timeout_default (const sb_tool_ctx_t *ctx);
//  Runs argv in the workspace with env_extra (see sb_spawn_opts_t), streams
//  and collects its output with the trailers the model needs (timeout,
//  cancel, signal, what was killed). Returns 0, or fills res with the
//  refusal and returns -1.
int sb_tools_run_process (const sb_tool_ctx_t *ctx, const char *const *argv,
                          const char *const *env_extra, int timeout_s, bool network,
                          sb_tool_result_t *res, sb_tools_buf_t *out);

//  The tools, one function each: arguments parsed, not yet checked.
typedef int (sb_tool_fn) (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res);
sb_tool_fn sb_tool_shell, sb_tool_grep, sb_tool_git_status, sb_tool_git_diff;
sb_tool_fn sb_tool_read_file, sb_tool_write_file, sb_tool_edit_file, sb_tool_list_dir;
sb_tool_fn sb_tool_view_image;     //  actors/exec/tools_image.c
sb_tool_fn sb_tool_attach_file;    //  actors/exec/tools_image.c

#endif
