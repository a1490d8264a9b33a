/*  actors/llm/sse.h — incremental server-sent-events parser (WHATWG rules).

    The parser is fed whatever bytes a transport hands over (a libcurl write
    callback gives arbitrary slices) and calls back once per dispatched event.
    It never sees the network; it only turns bytes into events.

    Follows https://html.spec.whatwg.org/multipage/server-sent-events.html
    section "Parsing an event stream":
    - one optional UTF-8 BOM at the very start is skipped;
    - lines end in LF, CR or CRLF, and a CR that ends one feed followed by an
      LF that starts the next is one line ending;
    - lines starting with ':' are comments;
    - "field: value" drops one leading space of the value; a line with no
      colon is a field with an empty value;
    - data lines are joined with '\n'; an empty line dispatches the event,
      unless its data is empty;
    - id (without NUL) sets the last event id, which persists across events;
      retry (all ASCII digits) sets the reconnection time;
    - at the end of the stream a partly received event is discarded.

    Bounded: the bytes held for one event (its pending line, data, event name
    and id) may not exceed max_event_bytes. Going over is a sticky error: the
    parser refuses every later feed, because the stream is no longer in sync.

    Not thread-safe; one parser belongs to one stream.
*/
#ifndef SB_SSE_H
#define SB_SSE_H

#include <stddef.h>
#include <stdint.h>

#define SB_SSE_DEFAULT_MAX_EVENT  ((size_t) 8 << 20)

//  Return codes of sb_sse_feed and sb_sse_finish.
#define SB_SSE_OK           0
#define SB_SSE_ETOOBIG     -1   // an event went over max_event_bytes
#define SB_SSE_EABORTED    -2   // the callback returned non-zero
#define SB_SSE_EINCOMPLETE -3   // sb_sse_finish: the stream ended mid-event
#define SB_SSE_ENOMEM      -4

typedef struct _sb_sse_t sb_sse_t;

//  Called once per dispatched event. event is the event type, "message" when
//  the event had none (a type holding NUL is cut there, and an empty one
//  reads as "message"); never empty. data is NUL-terminated (data_len excludes the NUL) but
//  may itself contain NUL bytes. id is the last event id, "" when none.
//  All pointers are valid only during the call. Return 0 to go on; any other
//  value stops the parser for good and sb_sse_feed returns SB_SSE_EABORTED.
typedef int (sb_sse_cb) (const char *event, const char *data, size_t data_len,
                         const char *id, void *ctx);

//  Creates a parser. max_event_bytes 0 means SB_SSE_DEFAULT_MAX_EVENT.
//  Returns NULL on allocation failure.
sb_sse_t *
    sb_sse_new (size_t max_event_bytes);

//  Destroys the parser and nulls the caller's pointer. Tolerates NULL.
void
    sb_sse_destroy (sb_sse_t **self_p);

//  Parses len bytes, calling cb for each event completed by them. Returns
//  SB_SSE_OK, or a negative SB_SSE_E* code; after an error every later call
//  returns the same code without parsing.
int
    sb_sse_feed (sb_sse_t *self, const char *buf, size_t len, sb_sse_cb *cb, void *ctx);

//  Tells whether the stream ended cleanly: SB_SSE_OK when no event was in
//  progress, SB_SSE_EINCOMPLETE when a line or an event was only partly
//  received (it is discarded, as WHATWG says), or the sticky error.
int
    sb_sse_finish (sb_sse_t *self);

//  The sticky error, or SB_SSE_OK.
int
    sb_sse_error (sb_sse_t *self);

//  Human-readable text for an SB_SSE_* code.
const char *
    sb_sse_strerror (int code);

//  The last event id seen so far ("" when none). Owned by the parser.
const char *
    sb_sse_last_id (sb_sse_t *self);

//  The reconnection time from the last valid retry field, or -1.
int64_t
    sb_sse_retry_ms (sb_sse_t *self);

//  Number of events dispatched so far.
uint64_t
    sb_sse_events (sb_sse_t *self);

#endif
