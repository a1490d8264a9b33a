/*  actors/llm/provider_impl.h — what the provider adapters share.

    Private to actors/llm/provider*.c: the mapper's state and the helpers each
    wire format uses to emit chunks, plus the JSON helpers of the request
    builders. Nothing outside the provider files should include this.
*/
#ifndef SB_PROVIDER_IMPL_H
#define SB_PROVIDER_IMPL_H

#include <jansson.h>
#include <stdarg.h>

#include "actors/llm/provider.h"

#include <string.h>

static inline bool
s_streq (const char *a, const char *b)
{
    return strcmp (a, b) == 0;
}

//  All that one stream's mapper may hold at once (tool arguments, thinking
//  text, signatures). A provider that streams more is broken or hostile.
#define SB_MAPPER_MAX_HELD  ((size_t) 32 << 20)
//  Tool calls or content blocks open at once in one stream.
#define SB_MAPPER_MAX_SLOTS 256

typedef struct {
    char *p;
    size_t len;
    size_t cap;
} sb_mbuf_t;

//  One thing being assembled from fragments: a tool call (every format) or
//  an Anthropic content block. Which fields are used depends on the format.
typedef struct {
    int64_t index;          // output_index, tool_calls[].index, or content block index
    char *item_id;          // Responses item id
    char *call_id;
    char *name;
    int type;               // format-specific
    sb_mbuf_t buf;          // arguments, or thinking text
    sb_mbuf_t extra;        // Anthropic signature or redacted data
    bool done;
} sb_slot_t;

typedef int (sb_mapper_fn) (sb_mapper_t *self, const char *event, json_t *data,
                            const char *raw, size_t len);

struct _sb_mapper_t {
    sb_provider_kind_t kind;
    sb_mapper_fn *on_event;
    //  Set for the duration of one sb_mapper_event call.
    sb_chunk_cb *cb;
    void *ctx;
    bool aborted;
    bool failed;            // malformed stream; error holds why
    bool finished;          // terminal event seen (or failed)
    bool has_error;
    sb_provider_error_t error;
    const char *stop_reason;
    bool saw_tool_call;
    bool has_usage;
    sb_llm_usage_t usage;
    uint64_t chunks;
    size_t held;            // bytes in all slot buffers
    sb_slot_t *slots;
    size_t slot_count;
    //  Per-format state that is not a slot.
    int64_t last_index;     // chat: slot of the last tool call fragment
    bool summary_started;   // responses: a reasoning summary part was seen
};

//  Emitting. Each returns 0, or -1 once the callback asked to stop.
int sb_mapper_emit_text (sb_mapper_t *self, sb_chunk_kind_t kind, const char *text, size_t len);
int sb_mapper_emit_tool_call (sb_mapper_t *self, const char *call_id, const char *name,
                              const char *args, size_t len);
int sb_mapper_emit_state (sb_mapper_t *self, json_t *state);
int sb_mapper_emit_usage (sb_mapper_t *self);

//  Terminal states. finish_ok turns "end" into "tool_calls" when the stream
//  carried tool calls, since some servers say "stop" even then. An error's
//  retryability follows from its code or type (see provider.c).
void sb_mapper_finish_ok (sb_mapper_t *self, const char *stop_reason);
void sb_mapper_finish_error (sb_mapper_t *self, const char *code, const char *type,
                             const char *message);
//  Marks the stream malformed; returns SB_MAPPER_EFAILED.
int sb_mapper_fail (sb_mapper_t *self, const char *code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

//  Slots. find returns NULL when absent; add returns NULL (and fails the
//  stream) past SB_MAPPER_MAX_SLOTS or on allocation failure.
sb_slot_t *sb_mapper_slot_by_index (sb_mapper_t *self, int64_t index);
sb_slot_t *sb_mapper_slot_by_item (sb_mapper_t *self, const char *item_id);
sb_slot_t *sb_mapper_slot_add (sb_mapper_t *self, int64_t index);
//  Replaces *dst with a copy of src (NULL allowed). Returns 0 or -1 (fails the stream).
int sb_mapper_set_str (sb_mapper_t *self, char **dst, const char *src);
//  Appends to a slot buffer within SB_MAPPER_MAX_HELD. Returns 0 or -1 (fails the stream).
int sb_mapper_append (sb_mapper_t *self, sb_mbuf_t *buf, const char *src, size_t len);
//  Slots sorted by index, for emitting what a terminal event left pending.
void sb_mapper_sort_slots (sb_mapper_t *self);

//  Per-format event handlers.
int sb_provider_responses_map (sb_mapper_t *self, const char *event, json_t *data, const char *raw, size_t len);
int sb_provider_chat_map (sb_mapper_t *self, const char *event, json_t *data, const char *raw, size_t len);
int sb_provider_anthropic_map (sb_mapper_t *self, const char *event, json_t *data, const char *raw, size_t len);

//  Checks what every format needs of a request: roles, call ids present
//  and unique, each tool output answering an earlier call, tool schemas
//  that parse. Returns 0, or -1 with err.
int sb_provider_check (const sb_llm_request_t *req, char *err, size_t errlen);

//  Per-format body builders; return the body object or NULL with err set.
json_t *sb_provider_responses_body (const sb_llm_request_t *req, bool codex, char *err, size_t errlen);
json_t *sb_provider_chat_body (const sb_llm_request_t *req, char *err, size_t errlen);
json_t *sb_provider_anthropic_body (const sb_llm_request_t *req, char *err, size_t errlen);

//  Fills err from what a provider said (provider_errors.c). status 0 means
//  an error event inside a 200 stream, where only the code decides.
void sb_provider_error_fill (sb_provider_error_t *err, long status, const char *code,
                             const char *type, const char *message);
//  Length of the valid UTF-8 sequence at s (at most n bytes), or 0.
size_t sb_provider_utf8_seq (const unsigned char *s, size_t n);

//  JSON helpers.
const char *sb_provider_jstr (json_t *obj, const char *key);        // NULL unless a string
int64_t sb_provider_jint (json_t *obj, const char *key);            // 0 unless a number
int64_t sb_provider_jcount (json_t *obj, const char *key);          // a token count; -1 when absent (unknown)
//  A JSON string from C text; invalid UTF-8 becomes U+FFFD, since tool
//  output is whatever a command printed. NULL only when out of memory.
//  The image as a data URL, "data:MIME;base64,...", for Responses'
//  input_image and Chat Completions' image_url; or its bare base64, for
//  Anthropic's source. A JSON string; NULL when out of memory.
json_t *sb_provider_image_url (const sb_llm_image_t *im, bool data_url);
json_t *sb_provider_jtext (const char *s);
//  Parses JSON text that must be an object (or any value when any is true).
//  Returns a new reference, or NULL with err "<what>: <reason>".
json_t *sb_provider_jparse (const char *text, const char *what, bool any, char *err, size_t errlen);
//  The reasoning_state of a message as an array of objects (a new
//  reference; empty for NULL). NULL with err when it is not JSON.
json_t *sb_provider_jstate (const char *state, const char *what, char *err, size_t errlen);
//  A tool's description as a JSON string, or NULL when it has none (for
//  json_pack's "o*", which then leaves the key out rather than send "").
static inline json_t *
s_description (const sb_llm_tool_t *tool)
{
    return tool->description? sb_provider_jtext (tool->description): NULL;
}
//  The request's tools as a JSON array in one wire format's shape; NULL
//  when out of memory or when a tool's parameters are not JSON.
typedef enum { SB_TOOLS_RESPONSES, SB_TOOLS_CHAT, SB_TOOLS_ANTHROPIC } sb_tools_shape_t;
json_t *sb_provider_tools (const sb_llm_request_t *req, sb_tools_shape_t shape);
//  Sets obj[key] = value, stealing the reference; -1 when value is NULL.
int sb_provider_jput (json_t *obj, const char *key, json_t *value);
void sb_provider_errf (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

#endif
