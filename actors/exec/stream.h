/*  actors/exec/stream.h — one llm.stream request of a run, streamed until
    it ends and cancelled at the instance that holds it: the loop that a
    model call (model.c), a summary call (compact.c) and an MCP server's
    sampling request (mcp_sampling.c) share.
*/
#ifndef SB_EXEC_STREAM_H
#define SB_EXEC_STREAM_H

#include "actors/exec/agent.h"

//  How a stream ended.
enum {
    SB_EXEC_STREAM_ENDED = 0,       //  the final reply came: stop holds its stop_reason
    SB_EXEC_STREAM_FAILED = -1,     //  the run's status says why
    SB_EXEC_STREAM_OVERFLOW = -2,   //  the provider said the request overflows (run->overflow_msg)
    SB_EXEC_STREAM_CANCELLED = 1,   //  the run was cancelled or passed its deadline (timed_out)
    SB_EXEC_STREAM_REFUSED = -3,    //  the llm actor refused the request itself (s->refused says why)
};

//  One stream: what the caller gives, then what the loop found.
typedef struct {
    const char *what;           //  "model", "summary": in the failure reasons
    const char *fail;           //  the reason's lead when the reply is an error
    int64_t grace_ms;           //  after llm.cancel, how long the stream may still end (0: stop at once)
    //  Each chunk of content (all but the open one): 0, or -1 to fail the
    //  stream with the run's status set.
    int (*on_chunk) (void *arg, const sb_val_t *chunk);
    void *arg;
    //  When set, an `invalid` error reply (the llm actor refused the
    //  request itself: images for a model that takes none) is the
    //  caller's to answer: its message goes here (refused_size bytes),
    //  and the run goes on (REFUSED). NULL: it fails the run.
    char *refused;
    size_t refused_size;
    char stop [32];             //  out: the final reply's stop_reason
    bool timed_out;             //  out: cancelled because the run's deadline passed
} sb_exec_stream_t;

//  Sends `body` as llm.stream and hands each chunk to s->on_chunk until
//  the stream ends, fails, overflows or is cancelled (one of the codes
//  above). The text and thinking the chunks add to the run's coalescing
//  buffers are flushed to the tape as they come due, and all of them at
//  the end.
int sb_exec_stream (sb_exec_run_t *run, const uint8_t *body, size_t len, sb_exec_stream_t *s);

//  The usage a one-off call reported (a summary, an MCP server's
//  sampling request), for the run's account and the tape.
typedef struct {
    bool known;
    uint64_t in, out;
    uint64_t context;           //  the request's estimated size, in tokens
    sb_exec_usage_t call;       //  the chunk as the tape entry says it
} sb_exec_text_usage_t;

//  A one-off call: streams `body` (a request without tools) as
//  sb_exec_stream does, with s's what, fail and grace_ms (its on_chunk is
//  ours), and gathers its text, at most SB_EXEC_TEXT_MAX bytes, into *out
//  (malloc'd; NULL when it failed or said nothing) and its usage into
//  *usage. Returns sb_exec_stream's code; the run's phase is idle after.
#define SB_EXEC_TEXT_MAX (1000 * 1000)
int sb_exec_stream_text (sb_exec_run_t *run, const uint8_t *body, size_t len, sb_exec_stream_t *s, char **out,
                         size_t *outlen, sb_exec_text_usage_t *usage);

#endif
