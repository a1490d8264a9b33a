/*  actors/llm/provider_anthropic.c — the Anthropic Messages format.

    A response is a list of content blocks, each streamed between
    content_block_start and content_block_stop. Thinking blocks carry a
    signature, and when extended thinking is on, the assistant turn that
    called a tool must be sent back with its thinking blocks intact, so each
    finished thinking block is emitted as reasoning state.
*/
#include "actors/llm/provider_impl.h"

#include <stdio.h>
#include <stdlib.h>

enum {
    BLOCK_OTHER,
    BLOCK_TEXT,
    BLOCK_THINKING,
    BLOCK_REDACTED,
    BLOCK_TOOL,
};

//  ---------------------------------------------------------------------------
//  Request body

//  Extended thinking is asked for with a token budget, not an effort word.
static int
s_thinking_budget (const char *effort, int64_t *budget)
{
    static const struct { const char *effort; int64_t budget; } table [] = {
        { "none", 0 }, { "minimal", 1024 }, { "low", 2048 },
        { "medium", 8192 }, { "high", 24576 },
    };
    for (size_t i = 0; i < sizeof table / sizeof table [0]; i++)
        if (s_streq (effort, table [i].effort)) {
            *budget = table [i].budget;
            return 0;
        }
    return -1;
}

static json_t *
s_text_block (const char *text)
{
    return json_pack ("{s:s, s:o}", "type", "text", "text", sb_provider_jtext (text));
}

//  Adds a user-side block, opening a user message unless the last message
//  is one already: tool results of one turn must travel in one message.
//  The API wants tool_result blocks before any text in that message.
static int
s_add_user_block (json_t *messages, json_t *block, bool is_result)
{
    if (!block)
        return -1;
    json_t *last = json_array_get (messages, json_array_size (messages) - 1);
    const char *role = sb_provider_jstr (last, "role");
    if (!role || !s_streq (role, "user")) {
        last = json_pack ("{s:s, s:[]}", "role", "user", "content");
        if (!last || json_array_append_new (messages, last)) {
            json_decref (block);
            return -1;
        }
    }
    json_t *content = json_object_get (last, "content");
    size_t at = json_array_size (content);
    if (is_result) {
        at = 0;
        while (at < json_array_size (content)) {
            const char *type = sb_provider_jstr (json_array_get (content, at), "type");
            if (!type || !s_streq (type, "tool_result"))
                break;
            at++;
        }
    }
    return json_array_insert_new (content, at, block);
}

static int
s_add_assistant (json_t *messages, const sb_llm_message_t *msg, size_t m,
                 char *err, size_t errlen)
{
    json_t *content = json_array ();
    if (!content)
        goto nomem;
    char what [64];
    snprintf (what, sizeof what, "messages[%zu].reasoning_state", m);
    json_t *items = sb_provider_jstate (msg->reasoning_state, what, err, errlen);
    if (!items) {
        json_decref (content);
        return -1;
    }
    //  Thinking blocks first, as the model produced them; another
    //  provider's state (a Responses reasoning item) is skipped.
    size_t i;
    json_t *item;
    json_array_foreach (items, i, item) {
        const char *type = sb_provider_jstr (item, "type");
        if (!type || !(s_streq (type, "thinking") || s_streq (type, "redacted_thinking")))
            continue;
        //  An empty signature (a tape written before it was left out) is
        //  left out: the API refuses "signature": ""
        const char *sig = sb_provider_jstr (item, "signature");
        if (sig && !*sig) {
            json_t *copy = json_copy (item);
            if (copy)
                json_object_del (copy, "signature");
            if (!copy || json_array_append_new (content, copy)) {
                json_decref (items);
                goto nomem;
            }
        }
        else
            json_array_append (content, item);
    }
    json_decref (items);
    //  The API refuses empty text blocks.
    if (msg->content && *msg->content && json_array_append_new (content, s_text_block (msg->content)))
        goto nomem;
    for (size_t c = 0; c < msg->tool_call_count; c++) {
        const sb_llm_tool_call_t *call = &msg->tool_calls [c];
        json_t *input = json_object ();
        if (call->arguments && *call->arguments) {
            json_decref (input);
            snprintf (what, sizeof what, "messages[%zu].tool_calls[%zu].arguments", m, c);
            //  input must be an object here, unlike the other formats that
            //  carry arguments as opaque text.
            input = sb_provider_jparse (call->arguments, what, false, err, errlen);
            if (!input) {
                json_decref (content);
                return -1;
            }
        }
        json_t *block = json_pack ("{s:s, s:o, s:o, s:o}", "type", "tool_use",
                                   "id", sb_provider_jtext (call->call_id),
                                   "name", sb_provider_jtext (call->name), "input", input);
        if (!block || json_array_append_new (content, block))
            goto nomem;
    }
    //  An assistant turn with nothing in it would be refused; leaving it out
    //  loses nothing.
    if (json_array_size (content) == 0) {
        json_decref (content);
        return 0;
    }
    json_t *out = json_pack ("{s:s, s:o}", "role", "assistant", "content", content);
    if (!out || json_array_append_new (messages, out))
        goto nomem;
    return 0;

nomem:
    json_decref (content);
    sb_provider_errf (err, errlen, "out of memory");
    return -1;
}

json_t *
sb_provider_anthropic_body (const sb_llm_request_t *req, char *err, size_t errlen)
{
    const sb_llm_options_t *opt = &req->options;
    int64_t budget = 0;
    if (opt->reasoning_effort && *opt->reasoning_effort
    &&  s_thinking_budget (opt->reasoning_effort, &budget)) {
        sb_provider_errf (err, errlen, "reasoning_effort '%s' is not one of none, minimal, low, medium, high",
                 opt->reasoning_effort);
        return NULL;
    }
    if (opt->has_max_output_tokens && opt->max_output_tokens < 1) {
        sb_provider_errf (err, errlen, "max_output_tokens must be at least 1");
        return NULL;
    }
    //  max_tokens is required, and must leave room for the answer above
    //  the thinking budget.
    int64_t max_tokens = opt->has_max_output_tokens? opt->max_output_tokens
                                                   : SB_ANTHROPIC_DEFAULT_MAX_TOKENS;
    if (budget && !opt->has_max_output_tokens)
        max_tokens = budget + SB_ANTHROPIC_DEFAULT_MAX_TOKENS;
    if (budget >= max_tokens)
        budget = max_tokens / 2;
    if (budget < 1024)
        budget = 0;         // the API's minimum budget; no room for thinking

    json_t *body = json_object ();
    json_t *messages = json_array ();
    if (!body || !messages)
        goto nomem;
    json_object_set_new (body, "model", sb_provider_jtext (req->model));
    json_object_set_new (body, "max_tokens", json_integer (max_tokens));
    if (req->instructions && *req->instructions)
        json_object_set_new (body, "system", sb_provider_jtext (req->instructions));

    for (size_t m = 0; m < req->message_count; m++) {
        const sb_llm_message_t *msg = &req->messages [m];
        int rc = 0;
        switch (msg->role) {
            case SB_LLM_ROLE_USER:
                //  Images first, as image blocks with a base64 source (the
                //  order Anthropic's guide recommends), then the text.
                for (size_t k = 0; !rc && k < msg->image_count; k++) {
                    json_t *data = sb_provider_image_url (&msg->images [k], false);
                    json_t *block = data ? json_pack ("{s:s, s:{s:s, s:s, s:o}}", "type", "image", "source", "type",
                                                      "base64", "media_type", msg->images [k].mime, "data", data)
                                         : NULL;
                    rc = s_add_user_block (messages, block, false);
                }
                if (!rc && msg->content && *msg->content)
                    rc = s_add_user_block (messages, s_text_block (msg->content), false);
                break;
            case SB_LLM_ROLE_ASSISTANT:
                if (s_add_assistant (messages, msg, m, err, errlen))
                    goto fail;
                break;
            case SB_LLM_ROLE_TOOL: {
                json_t *block = json_pack ("{s:s, s:o}", "type", "tool_result",
                                           "tool_use_id", sb_provider_jtext (msg->call_id));
                //  content is optional, and an empty one is refused.
                if (block && msg->content && *msg->content)
                    sb_provider_jput (block, "content", sb_provider_jtext (msg->content));
                rc = s_add_user_block (messages, block, true);
                break;
            }
        }
        if (rc)
            goto nomem;
    }
    json_object_set_new (body, "messages", messages);
    messages = NULL;

    if (req->tool_count) {
        if (sb_provider_jput (body, "tools", sb_provider_tools (req, SB_TOOLS_ANTHROPIC)))
            goto nomem;
    }
    if (budget)
        sb_provider_jput (body, "thinking", json_pack ("{s:s, s:I}", "type", "enabled",
                                                  "budget_tokens", (json_int_t) budget));
    //  With thinking on, the API refuses any temperature but the default;
    //  dropping it beats failing every call of a session that set both.
    if (opt->has_temperature && !budget)
        json_object_set_new (body, "temperature", json_real (opt->temperature));
    json_object_set_new (body, "stream", json_true ());
    return body;

nomem:
    sb_provider_errf (err, errlen, "out of memory");
fail:
    json_decref (messages);
    json_decref (body);
    return NULL;
}

//  ---------------------------------------------------------------------------
//  Stream mapper

//  Anthropic counts cached input apart from input_tokens; OpenAI counts it
//  inside. We follow OpenAI, so that input_tokens is the whole prompt.
static void
s_usage (sb_mapper_t *self, json_t *usage, bool start)
{
    if (!json_is_object (usage))
        return;
    self->has_usage = true;
    if (start || json_object_get (usage, "input_tokens")) {
        int64_t input = sb_provider_jcount (usage, "input_tokens");
        int64_t cached = sb_provider_jcount (usage, "cache_read_input_tokens");
        int64_t created = sb_provider_jcount (usage, "cache_creation_input_tokens");
        self->usage.input_tokens = input < 0 ? -1 : input + (cached > 0 ? cached : 0) + (created > 0 ? created : 0);
        self->usage.cached_tokens = cached;
    }
    if (json_object_get (usage, "output_tokens"))
        self->usage.output_tokens = sb_provider_jcount (usage, "output_tokens");
}

static int
s_block_start (sb_mapper_t *self, json_t *data)
{
    int64_t index = sb_provider_jint (data, "index");
    json_t *block = json_object_get (data, "content_block");
    const char *type = sb_provider_jstr (block, "type");
    sb_slot_t *slot = sb_mapper_slot_by_index (self, index);
    if (slot && !slot->done)
        return sb_mapper_fail (self, "bad_stream", "content block %lld started twice",
                               (long long) index);
    if (slot)
        return 0;           // a restarted block that already finished: ignore
    slot = sb_mapper_slot_add (self, index);
    if (!slot)
        return -1;
    if (!type)
        return 0;
    if (s_streq (type, "text")) {
        slot->type = BLOCK_TEXT;
        json_t *text = json_object_get (block, "text");
        return sb_mapper_emit_text (self, SB_CHUNK_TEXT, json_string_value (text),
                                    json_string_length (text));
    }
    if (s_streq (type, "thinking")) {
        slot->type = BLOCK_THINKING;
        json_t *text = json_object_get (block, "thinking");
        json_t *sig = json_object_get (block, "signature");
        if (json_is_string (text)
        &&  (sb_mapper_append (self, &slot->buf, json_string_value (text), json_string_length (text))
        ||   sb_mapper_emit_text (self, SB_CHUNK_THINKING, json_string_value (text),
                                  json_string_length (text))))
            return -1;
        if (json_is_string (sig)
        &&  sb_mapper_append (self, &slot->extra, json_string_value (sig), json_string_length (sig)))
            return -1;
        return 0;
    }
    if (s_streq (type, "redacted_thinking")) {
        slot->type = BLOCK_REDACTED;
        json_t *value = json_object_get (block, "data");
        if (json_is_string (value)
        &&  sb_mapper_append (self, &slot->extra, json_string_value (value),
                              json_string_length (value)))
            return -1;
        return 0;
    }
    if (s_streq (type, "tool_use")) {
        slot->type = BLOCK_TOOL;
        if (sb_mapper_set_str (self, &slot->call_id, sb_provider_jstr (block, "id"))
        ||  sb_mapper_set_str (self, &slot->name, sb_provider_jstr (block, "name")))
            return -1;
        //  Streaming sends input {} here and the real input as deltas; keep
        //  a non-empty one in case no delta follows.
        json_t *input = json_object_get (block, "input");
        if (json_is_object (input) && json_object_size (input)) {
            char *text = json_dumps (input, JSON_COMPACT);
            int rc = text? sb_mapper_append (self, &slot->extra, text, strlen (text)): -1;
            free (text);
            return rc;
        }
    }
    return 0;
}

static int
s_block_delta (sb_mapper_t *self, json_t *data)
{
    json_t *delta = json_object_get (data, "delta");
    const char *type = sb_provider_jstr (delta, "type");
    sb_slot_t *slot = sb_mapper_slot_by_index (self, sb_provider_jint (data, "index"));
    if (!type || (slot && slot->done))
        return 0;
    if (s_streq (type, "text_delta")) {
        json_t *text = json_object_get (delta, "text");
        return sb_mapper_emit_text (self, SB_CHUNK_TEXT, json_string_value (text),
                                    json_string_length (text));
    }
    if (s_streq (type, "thinking_delta")) {
        json_t *text = json_object_get (delta, "thinking");
        if (!json_is_string (text))
            return 0;
        if (slot && sb_mapper_append (self, &slot->buf, json_string_value (text),
                                      json_string_length (text)))
            return -1;
        return sb_mapper_emit_text (self, SB_CHUNK_THINKING, json_string_value (text),
                                    json_string_length (text));
    }
    if (!slot)
        return 0;
    if (s_streq (type, "signature_delta")) {
        json_t *sig = json_object_get (delta, "signature");
        return json_is_string (sig)
             ? sb_mapper_append (self, &slot->extra, json_string_value (sig), json_string_length (sig))
             : 0;
    }
    if (s_streq (type, "input_json_delta")) {
        json_t *part = json_object_get (delta, "partial_json");
        return json_is_string (part)
             ? sb_mapper_append (self, &slot->buf, json_string_value (part), json_string_length (part))
             : 0;
    }
    return 0;
}

static int
s_block_finish (sb_mapper_t *self, sb_slot_t *slot)
{
    slot->done = true;
    if (slot->type == BLOCK_THINKING) {
        //  No signature came (a proxy or a compatible server): none is
        //  kept, since the API refuses "signature": "" when sent back
        json_t *state = slot->extra.len
            ? json_pack ("{s:s, s:s%, s:s%}", "type", "thinking",
                         "thinking", slot->buf.p? slot->buf.p: "", slot->buf.len,
                         "signature", slot->extra.p, slot->extra.len)
            : json_pack ("{s:s, s:s%}", "type", "thinking",
                         "thinking", slot->buf.p? slot->buf.p: "", slot->buf.len);
        if (!state)
            return sb_mapper_fail (self, "bad_stream", "thinking block is not valid UTF-8");
        int rc = sb_mapper_emit_state (self, state);
        json_decref (state);
        return rc;
    }
    if (slot->type == BLOCK_REDACTED) {
        json_t *state = json_pack ("{s:s, s:s%}", "type", "redacted_thinking",
                                   "data", slot->extra.p? slot->extra.p: "", slot->extra.len);
        if (!state)
            return sb_mapper_fail (self, "bad_stream", "redacted thinking is not valid UTF-8");
        int rc = sb_mapper_emit_state (self, state);
        json_decref (state);
        return rc;
    }
    if (slot->type == BLOCK_TOOL) {
        //  The input arrives as fragments of JSON text, parsed only now.
        sb_mbuf_t *args = slot->buf.len? &slot->buf: &slot->extra;
        return sb_mapper_emit_tool_call (self, slot->call_id, slot->name, args->p, args->len);
    }
    return 0;
}

static const char *
s_stop_reason (const char *reason)
{
    if (!reason)
        return "end";
    if (s_streq (reason, "tool_use"))
        return "tool_calls";
    if (s_streq (reason, "max_tokens") || s_streq (reason, "model_context_window_exceeded"))
        return "length";
    if (s_streq (reason, "refusal"))
        return "content_filter";
    return "end";           // end_turn, stop_sequence, pause_turn
}

int
sb_provider_anthropic_map (sb_mapper_t *self, const char *event, json_t *data, const char *raw, size_t len)
{
    if (!data)
        return sb_mapper_fail (self, "bad_stream", "event '%.40s' is not a JSON object", event);
    const char *type = sb_provider_jstr (data, "type");
    if (!type)
        type = event;

    if (s_streq (type, "content_block_delta"))
        return s_block_delta (self, data);
    if (s_streq (type, "content_block_start"))
        return s_block_start (self, data);
    if (s_streq (type, "content_block_stop")) {
        sb_slot_t *slot = sb_mapper_slot_by_index (self, sb_provider_jint (data, "index"));
        return slot && !slot->done? s_block_finish (self, slot): 0;
    }
    if (s_streq (type, "message_start")) {
        s_usage (self, json_object_get (json_object_get (data, "message"), "usage"), true);
        return 0;
    }
    if (s_streq (type, "message_delta")) {
        const char *reason = sb_provider_jstr (json_object_get (data, "delta"), "stop_reason");
        if (reason)
            self->stop_reason = s_stop_reason (reason);
        s_usage (self, json_object_get (data, "usage"), false);
        return 0;
    }
    if (s_streq (type, "message_stop")) {
        //  Blocks the server never closed are closed now, in order.
        sb_mapper_sort_slots (self);
        for (size_t i = 0; i < self->slot_count; i++)
            if (!self->slots [i].done && s_block_finish (self, &self->slots [i]))
                return -1;
        if (sb_mapper_emit_usage (self))
            return -1;
        sb_mapper_finish_ok (self, self->stop_reason? self->stop_reason: "end");
        return 0;
    }
    if (s_streq (type, "error")) {
        json_t *error = json_object_get (data, "error");
        const char *message = sb_provider_jstr (error, "message");
        sb_mapper_finish_error (self, NULL, sb_provider_jstr (error, "type"),
                                message? message: "the provider reported an error");
        return 0;
    }
    return 0;               // ping, and event types added later
}
