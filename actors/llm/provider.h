/*  actors/llm/provider.h — provider adapters: request bodies and stream mappers.

    This is the pure half of the llm actor: no network, no bus. For each wire
    format it turns a normalized request into an HTTP body, and turns the
    provider's server-sent events back into normalized chunks:

        request  --sb_provider_build_body-->  JSON body   (POST {base}{endpoint})
        bytes    --sb_mapper_feed (sse+map)-->  sb_chunk_t callbacks
        end      --sb_mapper_done-->  stop_reason, or an sb_provider_error_t

    Typical use from a libcurl write callback:

        rc = sb_mapper_feed (stream->mapper, stream->sse, ptr, n, s_on_chunk, stream);
        ...
        on transfer end:
        if (sb_mapper_done (stream->mapper, &stop_reason, &err) == 0) -> ok
        else -> error {err.code, err.message, err.retryable}

    Nothing here is thread-safe; one mapper and one parser belong to one stream.
*/
#ifndef SB_PROVIDER_H
#define SB_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "actors/llm/sse.h"
#include "schemas/vocab.h"

typedef enum {
    SB_PROVIDER_RESPONSES,      // OpenAI Responses: POST {base}/responses
    SB_PROVIDER_CHAT,           // Chat Completions: POST {base}/chat/completions
    SB_PROVIDER_ANTHROPIC,      // Anthropic Messages: POST {base}/messages
    SB_PROVIDER_CODEX,          // Responses format on the ChatGPT Codex backend
} sb_provider_kind_t;

//  "responses", "chat", "anthropic", "codex"; NULL for an unknown kind.
const char *
    sb_provider_kind_name (sb_provider_kind_t kind);

//  Parses a kind name. Returns 0, or -1 for an unknown name.
int
    sb_provider_kind_parse (const char *name, sb_provider_kind_t *kind);

//  The path the provider appends to its base URL, e.g. "/chat/completions".
const char *
    sb_provider_endpoint (sb_provider_kind_t kind);

//  ---------------------------------------------------------------------------
//  Normalized request. Plain borrowed pointers: the caller owns every string.

//  sb_llm_role_t (user, assistant, tool): schemas/vocab.h, with its names.

typedef struct {
    const char *call_id;
    const char *name;
    const char *arguments;          // JSON text; NULL or "" means {}
} sb_llm_tool_call_t;

//  An image of a user message: its type and bytes (borrowed).
typedef struct {
    const char *mime;               // image/png, image/jpeg, image/gif, image/webp
    const uint8_t *data;
    size_t len;
} sb_llm_image_t;

typedef struct {
    sb_llm_role_t role;
    const char *content;            // may be NULL
    const sb_llm_image_t *images;   // user only: each provider sends them in its own form
    size_t image_count;
    const sb_llm_tool_call_t *tool_calls;   // assistant only
    size_t tool_call_count;
    const char *call_id;            // tool only: the call this output answers
    //  Assistant only: the data of the reasoning_state chunk(s) this provider
    //  emitted for the turn, given back verbatim. One chunk's JSON object, or
    //  a JSON array of several in the order they came. State from another
    //  provider kind is skipped, so a session may switch providers. May be NULL.
    const char *reasoning_state;
} sb_llm_message_t;

typedef struct {
    const char *name;
    const char *description;        // may be NULL
    const char *parameters;         // JSON schema as JSON text; NULL = no parameters
} sb_llm_tool_t;

typedef struct {
    const char *reasoning_effort;   // "minimal", "low", "medium", "high"; NULL = provider default
    bool has_max_output_tokens;
    int64_t max_output_tokens;
    bool has_temperature;
    double temperature;
} sb_llm_options_t;

typedef struct {
    const char *model;              // required
    const char *instructions;       // may be NULL
    const sb_llm_message_t *messages;
    size_t message_count;
    const sb_llm_tool_t *tools;
    size_t tool_count;
    sb_llm_options_t options;
} sb_llm_request_t;

//  Anthropic requires max_tokens; this is what we send when none is given.
#define SB_ANTHROPIC_DEFAULT_MAX_TOKENS 8192

//  Builds the JSON body of a streaming request in the provider's format.
//  Returns a malloc'd NUL-terminated string the caller frees, or NULL with a
//  message in err (e.g. "messages[2]: tool message without call_id").
char *
    sb_provider_build_body (sb_provider_kind_t kind, const sb_llm_request_t *req,
                            char *err, size_t errlen);

//  ---------------------------------------------------------------------------
//  Normalized output.

typedef enum {
    SB_CHUNK_TEXT,
    SB_CHUNK_THINKING,
    SB_CHUNK_TOOL_CALL,
    SB_CHUNK_USAGE,
    SB_CHUNK_REASONING_STATE,
    SB_CHUNK_ERROR,             // one tool call was unusable; the stream goes on
} sb_chunk_kind_t;

typedef struct {
    int64_t input_tokens;
    int64_t output_tokens;
    int64_t cached_tokens;
    int64_t reasoning_tokens;
} sb_llm_usage_t;

//  One normalized chunk. Every pointer is borrowed and valid only during the
//  callback; unused fields are NULL / 0.
typedef struct {
    sb_chunk_kind_t kind;
    //  TEXT, THINKING: a UTF-8 delta (never empty).
    const char *text;
    size_t text_len;
    //  TOOL_CALL: the complete arguments, a JSON object as text.
    //  ERROR: the call it concerns (fields may be "" when the provider never
    //  sent them) and the raw arguments as received.
    const char *call_id;
    const char *name;
    const char *arguments;
    size_t arguments_len;
    //  USAGE.
    sb_llm_usage_t usage;
    //  REASONING_STATE: opaque JSON to give back as message.reasoning_state.
    const char *data;
    size_t data_len;
    //  ERROR: e.g. "invalid_arguments", and a message for people.
    const char *code;
    const char *message;
} sb_chunk_t;

//  "text", "thinking", "tool_call", "usage", "reasoning_state", "error".
const char *
    sb_chunk_kind_name (sb_chunk_kind_t kind);

//  Receives each chunk. Return 0 to go on; any other value stops the stream
//  (sb_mapper_event / sb_mapper_feed return SB_MAPPER_EABORTED).
typedef int (sb_chunk_cb) (const sb_chunk_t *chunk, void *ctx);

//  A failure the requester sees as error {code, message, retryable}.
typedef struct {
    char code [64];             // snake_case, e.g. rate_limit_exceeded, incomplete_stream
    char message [512];         // for people; never holds a credential
    bool retryable;
    int64_t retry_after_ms;     // from the provider's message, or -1
    long http_status;           // 0 for an error inside a 200 stream
} sb_provider_error_t;

typedef struct _sb_mapper_t sb_mapper_t;

//  Return codes of sb_mapper_event and sb_mapper_feed.
#define SB_MAPPER_OK         0
#define SB_MAPPER_EFAILED   -1  // the stream is broken (see sb_mapper_done)
#define SB_MAPPER_EABORTED  -2  // the chunk callback returned non-zero

//  Creates the mapper for one stream. Returns NULL on failure.
sb_mapper_t *
    sb_mapper_new (sb_provider_kind_t kind);

//  Destroys the mapper and nulls the caller's pointer. Tolerates NULL.
void
    sb_mapper_destroy (sb_mapper_t **self_p);

//  Maps one SSE event (name and data as sb_sse_cb gives them), calling cb
//  for each chunk it completes. A provider error inside the stream is not a
//  failure of this call: it ends the stream, and sb_mapper_done reports it.
//  Events after the terminal one are ignored. Returns SB_MAPPER_OK,
//  SB_MAPPER_EFAILED for a malformed stream (data that is not JSON, memory
//  caps), or SB_MAPPER_EABORTED.
int
    sb_mapper_event (sb_mapper_t *self, const char *event, const char *data, size_t len,
                     sb_chunk_cb *cb, void *ctx);

//  Convenience for a transport's write callback: parses bytes with the given
//  SSE parser and maps each event. An SSE error (an event over the size
//  limit) fails the stream with code too_large. Same returns as above.
int
    sb_mapper_feed (sb_mapper_t *self, sb_sse_t *sse, const char *buf, size_t len,
                    sb_chunk_cb *cb, void *ctx);

//  True once the terminal event (response.completed / [DONE] / message_stop,
//  or an error event) has been mapped, or the stream has failed.
bool
    sb_mapper_finished (sb_mapper_t *self);

//  Call when the transport has ended. Returns 0 and sets *stop_reason to a
//  static string, "end", "tool_calls", "length" or "content_filter"; or
//  returns -1 and fills *err: the provider's error, too_large, bad_stream,
//  or incomplete_stream (retryable) when the terminal event never came.
//  Either out-pointer may be NULL.
int
    sb_mapper_done (sb_mapper_t *self, const char **stop_reason, sb_provider_error_t *err);

//  Usage reported so far; false when the provider reported none.
bool
    sb_mapper_usage (sb_mapper_t *self, sb_llm_usage_t *usage);

//  Number of chunks emitted so far (so a caller knows whether a retry would
//  repeat output the requester has already seen).
uint64_t
    sb_mapper_chunks (sb_mapper_t *self);

//  ---------------------------------------------------------------------------
//  Errors outside the stream.

//  Classifies a non-2xx HTTP response: code from the provider's JSON body
//  when it has one (else from the status), a message with credentials
//  redacted, and whether a retry can help: 408, 409, 429 and 5xx can, except
//  codes such as insufficient_quota or context_length_exceeded; 400, 401 and
//  403 cannot. body may be NULL or not JSON at all. Always fills *err.
void
    sb_provider_classify_http (sb_provider_kind_t kind, long http_status,
                               const char *body, size_t len, sb_provider_error_t *err);

//  Whether the error says the request is longer than the model's context
//  window (OpenAI context_length_exceeded, Anthropic "prompt is too long",
//  a Chat server's 400 about the context length). The llm actor answers it
//  with the bus code context_overflow, on which the executor compacts.
bool
    sb_provider_error_overflow (const sb_provider_error_t *err);

//  The delay a message asks for, e.g. "Please try again in 1.054s" -> 1054,
//  "in 20ms" -> 20, "in 1m30s" -> 90000. Returns -1 when there is none.
int64_t
    sb_provider_parse_retry_in (const char *message);

//  The delay from HTTP headers: retry-after-ms (milliseconds) first, else
//  retry-after (seconds or an HTTP date, relative to now). Either header may
//  be NULL. Returns -1 when absent, unparsable, or outside 0..60 s, since a
//  longer wait is better reported than slept through.
int64_t
    sb_provider_retry_after (const char *retry_after_ms, const char *retry_after, time_t now);

#endif
