/*  actors/exec/tools_image.c — view_image: the model looks at an image file
    in the workspace; attach_file: a workspace file becomes an artifact (docs/images.md), within read_file's confinement
    (actors/exec/path.c: the workspace only, no symlink out, the session's
    read rules). The tool reads and checks the bytes; the agent loop puts
    them in the blob store and the tool.result entry references them, and
    the context shows the image to the model after the step's results. */
#include "actors/exec/tools_impl.h"
#include "actors/exec/path.h"
#include "common/blob.h"

#include <limits.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

//  A workspace file a tool read: its bytes (owned), sniffed type, the path
//  as shown, and why it does not sniff (empty when it does).
typedef struct {
    uint8_t *data;
    size_t len;
    sb_blob_info_t info;
    char err [256];
    char shown [PATH_MAX];
} confined_t;

//  Reads the workspace file args names for a tool, with read_file's
//  confinement and the blob store's size cap, and sniffs its type. -1
//  with res set to the error.
static int
s_read_confined (const char *tool, const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res, confined_t *f)
{
    size_t len = 0;
    const char *path = sb_tools_arg_str (args, "path", &len);
    char resolved [PATH_MAX];
    if (sb_tools_resolve (ctx, path, len, false, resolved, res) != 0)
        return -1;
    snprintf (f->shown, sizeof f->shown, "%s", sb_path_relative (ctx->workspace, resolved));
    struct stat st;
    int fd = sb_tools_open_regular (ctx, resolved, f->shown, &st, res);
    if (fd < 0)
        return -1;
    if ((uint64_t) st.st_size > SB_BLOB_MAX_DEFAULT) {
        close (fd);
        return sb_tools_error (res, "%s is %lld bytes; %s takes at most %u", f->shown, (long long) st.st_size, tool,
                               SB_BLOB_MAX_DEFAULT);
    }
    f->len = (size_t) st.st_size;
    f->data = sb_blob_read_fd (fd, f->len);
    close (fd);
    if (!f->data)
        return sb_tools_error (res, "cannot read %s", f->shown);
    f->err [0] = 0;
    if (sb_blob_sniff (f->data, f->len, &f->info, f->err, sizeof f->err) != 0 && !f->err [0])
        snprintf (f->err, sizeof f->err, "unreadable");
    return 0;
}

int
sb_tool_view_image (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const sb_tools_arg_t spec [] = { { "path", SB_TOOLS_ARG_STR, true } };
    if (sb_tools_args_check ("view_image", args, spec, 1, res) != 0)
        return -1;
    confined_t f = { 0 };
    if (s_read_confined ("view_image", ctx, args, res, &f) != 0)
        return -1;
    if (f.err [0] || !sb_blob_is_image (f.info.mime)) {
        free (f.data);
        return sb_tools_error (res, "%s is not an image view_image can show: %s", f.shown,
                               f.err [0] && !sb_blob_is_image (f.info.mime) ? f.info.mime : f.err);
    }
    res->image = f.data;
    res->image_len = f.len;
    snprintf (res->image_name, sizeof res->image_name, "%s", f.shown);
    res->ok = true;
    res->exit_code = -1;
    char out [512];
    snprintf (out, sizeof out, "%s: %s, %ux%u, %zu bytes; the image follows", f.shown, f.info.mime, f.info.width,
              f.info.height, f.len);
    res->output = strdup (out);
    return res->output ? 0 : -1;
}

/*  attach_file: any file of the workspace becomes an artifact of the
    session (a report, a patch, a picture the model made). The same read
    as view_image; the agent loop puts the bytes in the blob store and
    the tool.result entry's "artifact" references them. Nothing is shown
    to the model but the line that says what was attached. */
int
sb_tool_attach_file (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const sb_tools_arg_t spec [] = {
        { "path", SB_TOOLS_ARG_STR, true },
        { "name", SB_TOOLS_ARG_STR, false },
        { "description", SB_TOOLS_ARG_STR, false },
    };
    if (sb_tools_args_check ("attach_file", args, spec, 3, res) != 0)
        return -1;
    size_t nlen = 0, dlen = 0;
    const char *name = sb_tools_arg_str (args, "name", &nlen);
    const char *desc = sb_tools_arg_str (args, "description", &dlen);
    //  the name is shown and downloaded under: one line, a file name's length
    if (name && (nlen == 0 || nlen > 200 || memchr (name, '\n', nlen) || memchr (name, '/', nlen)))
        return sb_tools_error (res, "name must be 1 to 200 bytes, one line, with no '/'");
    if (desc && dlen > 1024)
        return sb_tools_error (res, "description is %zu bytes; at most 1024", dlen);
    confined_t f = { 0 };
    if (s_read_confined ("attach_file", ctx, args, res, &f) != 0)
        return -1;
    if (f.err [0]) {
        free (f.data);
        return sb_tools_error (res, "%s cannot be attached: %s", f.shown, f.err);
    }
    res->image = f.data;
    res->image_len = f.len;
    res->artifact = true;
    if (name)
        snprintf (res->image_name, sizeof res->image_name, "%.*s", (int) nlen, name);
    else
        snprintf (res->image_name, sizeof res->image_name, "%s", f.shown);
    if (desc)
        snprintf (res->artifact_description, sizeof res->artifact_description, "%.*s", (int) dlen, desc);
    res->ok = true;
    res->exit_code = -1;
    char out [512];
    snprintf (out, sizeof out, "attached %s as %s: %s, %zu bytes", f.shown, res->image_name, f.info.mime, f.len);
    res->output = strdup (out);
    return res->output ? 0 : -1;
}
