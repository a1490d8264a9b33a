/*  actors/exec/tools_image.c — view_image: the model looks at an image file
    in the workspace (docs/images.md), within read_file's confinement
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

int
sb_tool_view_image (const sb_tool_ctx_t *ctx, json_t *args, sb_tool_result_t *res)
{
    static const sb_tools_arg_t spec [] = { { "path", SB_TOOLS_ARG_STR, true } };
    if (sb_tools_args_check ("view_image", args, spec, 1, res) != 0)
        return -1;
    size_t len = 0;
    const char *path = sb_tools_arg_str (args, "path", &len);
    char resolved [PATH_MAX];
    if (sb_tools_resolve (ctx, path, len, false, resolved, res) != 0)
        return -1;
    const char *shown = sb_path_relative (ctx->workspace, resolved);
    struct stat st;
    int fd = sb_tools_open_regular (ctx, resolved, shown, &st, res);
    if (fd < 0)
        return -1;
    if ((uint64_t) st.st_size > SB_BLOB_MAX_DEFAULT) {
        close (fd);
        return sb_tools_error (res, "%s is %lld bytes; view_image takes at most %u", shown, (long long) st.st_size,
                               SB_BLOB_MAX_DEFAULT);
    }
    size_t got = (size_t) st.st_size;
    uint8_t *data = sb_blob_read_fd (fd, got);
    close (fd);
    if (!data)
        return sb_tools_error (res, "cannot read %s", shown);
    sb_blob_info_t info;
    char err [256];
    if (sb_blob_sniff (data, got, &info, err, sizeof err) || !sb_blob_is_image (info.mime)) {
        free (data);
        return sb_tools_error (res, "%s is not an image view_image can show: %s", shown,
                               err [0] && !sb_blob_is_image (info.mime) ? info.mime : err);
    }
    res->image = data;
    res->image_len = got;
    snprintf (res->image_name, sizeof res->image_name, "%s", shown);
    res->ok = true;
    res->exit_code = -1;
    char out [512];
    snprintf (out, sizeof out, "%s: %s, %ux%u, %zu bytes; the image follows", shown, info.mime, info.width,
              info.height, got);
    res->output = strdup (out);
    return res->output ? 0 : -1;
}
