/*  schemas/types_llm.c — llm.* types (actors/llm.c). */
#include "schemas/types.h"

static const sb_field_t s_tool_call [] = {
    { "call_id", SB_T_STR, true, 256, NULL, "provider call id" },
    { "name", SB_T_STR, true, 128, NULL, "tool name" },
    { "arguments", SB_T_STR, false, 1 MB, NULL, "JSON arguments" },
    END
};
static const sb_field_t s_tool_call_item [] = { { "tool_call", SB_T_MAP, false, 0, s_tool_call, "a call" } };
static const sb_field_t s_image [] = {
    { "mime", SB_T_STR, true, 32, NULL, "image/png | image/jpeg | image/gif | image/webp" },
    { "data", SB_T_BIN, true, 4 MB, NULL, "the image's bytes" },
    { "sha256", SB_T_STR, false, 64, NULL, "its blob" },
    END
};
static const sb_field_t s_image_item [] = { { "image", SB_T_MAP, false, 0, s_image, "an image" } };
static const sb_field_t s_message [] = {
    { "role", SB_T_ENUM, true, 16, NULL, "who speaks", ENUM (sb_llm_roles) },
    { "content", SB_T_STR, false, 4 MB, NULL, "text" },
    { "images", SB_T_ARRAY, false, 16, s_image_item, "user: images the person gave with the text" },
    { "tool_calls", SB_T_ARRAY, false, 256, s_tool_call_item, "assistant: the calls it made" },
    { "call_id", SB_T_STR, false, 256, NULL, "tool: the call this output answers" },
    { "reasoning_state", SB_T_STR, false, 4 MB, NULL, "assistant: opaque provider state to give back" },
    END
};
static const sb_field_t s_message_item [] = { { "message", SB_T_MAP, false, 0, s_message, "a message" } };
static const sb_field_t s_tool [] = {
    { "name", SB_T_STR, true, 128, NULL, "tool name" },
    { "description", SB_T_STR, false, 16 KB, NULL, "what it does" },
    { "parameters", SB_T_STR, false, 64 KB, NULL, "JSON schema of its arguments, as JSON text" },
    END
};
static const sb_field_t s_tool_item [] = { { "tool", SB_T_MAP, false, 0, s_tool, "a tool" } };
static const sb_field_t s_options [] = {
    { "reasoning_effort", SB_T_STR, false, 16, NULL, "minimal | low | medium | high" },
    { "max_output_tokens", SB_T_UINT, false, 0, NULL, "output token cap", RANGE_COUNT },
    { "temperature", SB_T_FLOAT, false, 0, NULL, "sampling temperature" },
    END
};
static const sb_field_t s_llm_stream [] = {
    { "provider", SB_T_STR, false, 64, NULL, "configured provider name (default: the default provider)" },
    { "model", SB_T_STR, false, 128, NULL, "model (default: the provider's)" },
    { "instructions", SB_T_STR, false, 1 MB, NULL, "system instructions" },
    { "messages", SB_T_ARRAY, true, 8192, s_message_item, "the conversation" },
    { "tools", SB_T_ARRAY, false, 256, s_tool_item, "tools the model may call" },
    { "options", SB_T_MAP, false, 0, s_options, "generation options" },
    END
};
static const sb_field_t s_usage [] = {
    { "input_tokens", SB_T_UINT, false, 0, NULL, "" },
    { "output_tokens", SB_T_UINT, false, 0, NULL, "" },
    { "cached_tokens", SB_T_UINT, false, 0, NULL, "" },
    { "reasoning_tokens", SB_T_UINT, false, 0, NULL, "" },
    END
};
static const sb_field_t s_llm_chunk [] = {
    { "kind", SB_T_STR, true, 32, NULL, "open | text | thinking | tool_call | usage | reasoning_state | error" },
    { "stream_id", SB_T_STR, false, ID_MAX, NULL, "open: the id to pass to llm.cancel (with header.to = header.from)" },
    { "text", SB_T_STR, false, 4 MB, NULL, "text, thinking: the delta" },
    { "call_id", SB_T_STR, false, 256, NULL, "tool_call, error: the call" },
    { "name", SB_T_STR, false, 128, NULL, "tool_call: the tool" },
    { "arguments", SB_T_STR, false, 4 MB, NULL, "tool_call: complete, validated JSON arguments" },
    { "input_tokens", SB_T_UINT, false, 0, NULL, "usage" },
    { "output_tokens", SB_T_UINT, false, 0, NULL, "usage" },
    { "cached_tokens", SB_T_UINT, false, 0, NULL, "usage" },
    { "reasoning_tokens", SB_T_UINT, false, 0, NULL, "usage" },
    { "provider", SB_T_STR, false, 64, NULL, "usage: the provider that answered" },
    { "model", SB_T_STR, false, 128, NULL, "usage: the model that answered" },
    { "cost_microusd", SB_T_UINT, false, 0, NULL, "usage: the call's cost in micro-dollars (absent: no price)",
      RANGE_COUNT },
    RATELIMIT_FIELDS ("usage: "),
    { "data", SB_T_STR, false, 4 MB, NULL, "reasoning_state: opaque JSON to give back next call" },
    { "code", SB_T_STR, false, 64, NULL, "error: e.g. invalid_arguments" },
    { "message", SB_T_STR, false, 4 KB, NULL, "error: for people" },
    END
};
static const sb_field_t s_llm_stream_ok [] = {
    { "stop_reason", SB_T_STR, true, 32, NULL, "end | tool_calls | length | content_filter | cancelled" },
    { "usage", SB_T_MAP, false, 0, s_usage, "tokens used" },
    { "provider", SB_T_STR, false, 64, NULL, "provider that answered" },
    { "model", SB_T_STR, false, 128, NULL, "model that answered" },
    { "attempts", SB_T_UINT, false, 0, NULL, "HTTP attempts made" },
    END
};
static const sb_field_t s_llm_cancel [] = {
    { "stream_id", SB_T_STR, true, ID_MAX, NULL, "the llm.stream request id" },
    END
};
static const sb_field_t s_llm_cancel_ok [] = {
    { "cancelled", SB_T_BOOL, true, 0, NULL, "false when the stream had already ended" },
    END
};
static const sb_field_t s_llm_models [] = {
    { "provider", SB_T_STR, false, 64, NULL, "configured provider name" },
    END
};
static const sb_field_t s_str_item [] = { { "model", SB_T_STR, false, 256, NULL, "model id" } };
static const sb_field_t s_limits [] = {
    { "model", SB_T_STR, true, 256, NULL, "model id" },
    { "context_window", SB_T_UINT, true, 0, NULL, "tokens the model takes, input and output", RANGE_COUNT },
    { "max_output_tokens", SB_T_UINT, true, 0, NULL, "tokens it may write in one answer", RANGE_COUNT },
    { "source", SB_T_STR, false, 16, NULL, "configured | flag | family | default (docs/compaction.md)" },
    END
};
static const sb_field_t s_limits_item [] = { { "limits", SB_T_MAP, false, 0, s_limits, "a model's limits" } };
static const sb_field_t s_llm_models_ok [] = {
    { "provider", SB_T_STR, true, 64, NULL, "provider" },
    { "models", SB_T_ARRAY, true, 4096, s_str_item, "model ids" },
    { "source", SB_T_STR, true, 16, NULL, "provider (asked its /models) | configured" },
    { "limits", SB_T_ARRAY, false, 4096, s_limits_item,
      "per model of `models`, in the same order: its context window and output reserve" },
    END
};
static const sb_field_t s_llm_info [] = {
    { "provider", SB_T_STR, false, 64, NULL, "configured provider name (default: the default provider)" },
    { "model", SB_T_STR, false, 128, NULL, "model (default: the provider's)" },
    END
};
static const sb_field_t s_ratelimit [] = {
    RATELIMIT_FIELDS (""),
    END
};
static const sb_field_t s_provider [] = {
    { "provider", SB_T_STR, true, 64, NULL, "its name, as session.create's provider takes it" },
    { "kind", SB_T_STR, true, 16, NULL, "responses | chat | anthropic | codex | demo" },
    { "model", SB_T_STR, true, 256, NULL, "its default model (\"\" when it has none)" },
    { "ratelimit", SB_T_MAP, false, 0, s_ratelimit, "the latest rate-limit headers it sent (docs/usage.md)" },
    END
};
static const sb_field_t s_provider_item [] = {
    { "providers", SB_T_MAP, false, 0, s_provider, "a configured provider" }
};
static const sb_field_t s_prices [] = {
    { "input", SB_T_UINT, true, 0, NULL, "micro-dollars per million input tokens", RANGE_COUNT },
    { "cached_input", SB_T_UINT, true, 0, NULL, "same, cached input", RANGE_COUNT },
    { "output", SB_T_UINT, true, 0, NULL, "same, output", RANGE_COUNT },
    END
};
static const sb_field_t s_llm_info_ok [] = {
    { "provider", SB_T_STR, true, 64, NULL, "the provider" },
    { "model", SB_T_STR, true, 256, NULL, "the model" },
    { "context_window", SB_T_UINT, true, 0, NULL, "tokens the model takes, input and output", RANGE_COUNT },
    { "max_output_tokens", SB_T_UINT, true, 0, NULL, "tokens it may write in one answer", RANGE_COUNT },
    { "source", SB_T_STR, true, 16, NULL, "configured | flag | family | default (docs/compaction.md)" },
    { "prices", SB_T_MAP, false, 0, s_prices, "the model's price (absent: none known, cost unknown)" },
    { "ratelimit", SB_T_MAP, false, 0, s_ratelimit, "the latest rate-limit headers the provider sent" },
    { "providers", SB_T_ARRAY, false, 32, s_provider_item,
      "every configured provider, in the configuration's order; without a provider asked, `provider` "
      "is the default one (what a session without its own uses)" },
    END
};

const sb_type_t sb_types_llm [] = {
    { "llm.stream", SB_KIND_REQUEST, SB_SCOPE_WORKER, s_llm_stream, 32 MB,
      "stream a model call; answered by llm.stream.chunk ... llm.stream.ok (internal)" },
    { "llm.stream.chunk", SB_KIND_CHUNK, SB_SCOPE_INTERNAL, s_llm_chunk, 8 MB, "one normalized chunk" },
    REP ("llm.stream.ok", s_llm_stream_ok, "the stream ended"),
    REQ ("llm.cancel", s_llm_cancel, SB_SCOPE_WORKER,
         "abort a stream within 100 ms (send to the instance that streams it)"),
    REP ("llm.cancel.ok", s_llm_cancel_ok, "cancel result"),
    REQ ("llm.models", s_llm_models, SB_SCOPE_PUBLIC | SB_SCOPE_WORKER, "list a provider's models"),
    REP ("llm.models.ok", s_llm_models_ok, "models"),
    REQ ("llm.info", s_llm_info, SB_SCOPE_PUBLIC | SB_SCOPE_WORKER,
         "a model's context window and output reserve, from the configuration"),
    REP ("llm.info.ok", s_llm_info_ok, "the model's limits"),
};
const size_t sb_types_llm_count = sizeof sb_types_llm / sizeof sb_types_llm [0];
