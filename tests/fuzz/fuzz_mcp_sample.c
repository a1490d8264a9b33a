/*  tests/fuzz/fuzz_mcp_sample.c — the check of a server's
    sampling/createMessage params (actors/exec/mcp_sample.c) on arbitrary
    JSON: what a hostile MCP server sends, image content included.

    Input: the params as JSON text. A request taken must hold what the
    bounds say (messages, images, their decoded bytes and dimensions, the
    tokens); a refused one says why; every image decoded is freed by
    sb_mcp_sample_clear (LeakSanitizer sees one that is not).
*/
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "actors/exec/mcp_sample.h"
#include "common/blob.h"

int
LLVMFuzzerTestOneInput (const uint8_t *buf, size_t size)
{
    json_t *params = json_loadb ((const char *) buf, size, JSON_DECODE_ANY, NULL);
    if (!params)
        return 0;
    sb_mcp_sample_t req;
    char err [256] = "";
    int rc = sb_mcp_sample_parse (params, &req, err, sizeof err);
    if (rc != 0 && !err [0])
        abort ();
    if (req.n > SB_MCP_SAMPLE_MESSAGES_MAX || req.nimages > SB_MCP_SAMPLE_IMAGES_MAX)
        abort ();
    size_t sent = 0;
    for (size_t k = 0; k < req.nimages; k++) {
        const sb_mcp_sample_image_t *im = &req.images [k];
        if (!im->data || im->len == 0 || im->len > SB_IMAGE_SEND_BYTES || im->width > SB_IMAGE_SEND_SIDE
        ||  im->height > SB_IMAGE_SEND_SIDE || !sb_blob_is_image (im->mime))
            abort ();
        sent += im->sent_bytes;
    }
    if (sent > SB_MCP_SAMPLE_IMAGE_MAX)
        abort ();
    if (rc == 0) {
        if (req.n == 0 || req.max_tokens < 1 || req.max_tokens > SB_MCP_SAMPLE_TOKENS_MAX)
            abort ();
        for (size_t k = 0; k < req.n; k++)
            if (!req.messages [k].role || !req.messages [k].text)
                abort ();
    }
    sb_mcp_sample_clear (&req);
    json_decref (params);
    return 0;
}
