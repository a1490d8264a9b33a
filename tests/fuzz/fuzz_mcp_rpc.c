/*  tests/fuzz/fuzz_mcp_rpc.c — the MCP JSON-RPC reader (actors/exec/mcp_rpc.c)
    on arbitrary bytes, split anywhere: what a hostile server writes on
    its stdout, or in the SSE stream of streamable HTTP.

    Input: byte 0 gives the number of split points (low 3 bits), the next
    two bytes per split give its offset, and the rest is the stream. The
    lines and their classification must be the same whole and split; the
    reader must never hold more than its bound; every parsed message is a
    JSON object of JSON-RPC 2.0. Each line is also an SSE line: its data
    lies inside it, and the kept id and retry inside their bounds.
*/
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/exec/mcp.h"
#include "tests/common/record.h"

//  A small bound, so that inputs of a few KB reach the oversize path.
#define MAX_LINE 256

static void
s_on_line (const char *line, size_t len, void *arg)
{
    sb_test_rec_t *r = arg;
    if (len == 0 || len > MAX_LINE || line [len] != 0)
        abort ();
    void *json;
    int64_t id;
    sb_mcp_msg_kind_t kind = sb_mcp_msg_parse (line, len, &json, &id);
    if ((kind == SB_MCP_MSG_INVALID) != (json == NULL))
        abort ();
    if (json && !json_is_object ((json_t *) json))
        abort ();
    json_decref (json);
    static sb_mcp_sse_t sse = { .retry_ms = -1 };
    size_t dn = 0;
    const char *data = sb_mcp_sse_line (&sse, line, len, &dn);
    if (data && (data < line || data + dn > line + len || dn == 0))
        abort ();
    if (strnlen (sse.last_id, sizeof sse.last_id) > SB_MCP_SSE_ID_MAX
        || sse.retry_ms < -1 || sse.retry_ms > SB_MCP_SSE_RETRY_MAX_MS)
        abort ();
    char k = (char) ('0' + kind);
    sb_test_rec_put_str (r, line, len);
    sb_test_rec_put (r, &k, 1);
    sb_test_rec_put (r, &id, sizeof id);
}

static void
s_feed (const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts, sb_test_rec_t *r, uint64_t *oversized)
{
    sb_mcp_lines_t lines;
    sb_mcp_lines_init (&lines, MAX_LINE);
    size_t at = 0;
    for (size_t k = 0; k <= ncuts; k++) {
        size_t end = k < ncuts ? cuts [k] : size;
        if (end < at)
            continue;
        sb_mcp_lines_feed (&lines, (const char *) data + at, end - at, s_on_line, r);
        if (lines.len > MAX_LINE || lines.cap > MAX_LINE + 1)
            abort ();
        at = end;
    }
    *oversized = lines.oversized;
    sb_mcp_lines_clear (&lines);
}

static int
s_cmp (const void *a, const void *b)
{
    size_t x = *(const size_t *) a, y = *(const size_t *) b;
    return x < y ? -1 : x > y;
}

int
LLVMFuzzerTestOneInput (const uint8_t *buf, size_t size)
{
    if (size < 1)
        return 0;
    size_t nsplit = buf [0] & 7;
    if (size < 1 + nsplit * 2)
        return 0;
    const uint8_t *data = buf + 1 + nsplit * 2;
    size_t len = size - 1 - nsplit * 2;
    size_t cuts [8];
    for (size_t k = 0; k < nsplit; k++)
        cuts [k] = len ? ((size_t) buf [1 + 2 * k] << 8 | buf [2 + 2 * k]) % (len + 1) : 0;
    qsort (cuts, nsplit, sizeof cuts [0], s_cmp);
    sb_test_rec_t whole = { 0 }, split = { 0 };
    uint64_t ow, os;
    s_feed (data, len, NULL, 0, &whole, &ow);
    s_feed (data, len, cuts, nsplit, &split, &os);
    if (whole.len != split.len || (whole.len && memcmp (whole.p, split.p, whole.len) != 0) || ow != os)
        abort ();
    free (whole.p);
    free (split.p);
    return 0;
}
