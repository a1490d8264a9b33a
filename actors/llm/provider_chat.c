/*  actors/llm/provider_chat.c — the OpenAI-compatible Chat Completions format.

    The lowest common denominator that Ollama, llama.cpp, vLLM and LM Studio
    all speak. Servers differ in the details (some omit tool call indexes,
    some say "stop" after tool calls, some put reasoning in delta.reasoning,
    others in delta.reasoning_content), and the mapper takes each variant.
    This format has no reasoning state to carry between calls.
*/
#include "actors/llm/provider_impl.h"

#include <stdio.h>
#include <stdlib.h>

//  ---------------------------------------------------------------------------
//  Request body

static json_t *
s_assistant (const sb_llm_message_t *msg)
{
    json_t *out = json_object ();
    if (!out)
        return NULL;
    json_object_set_new (out, "role", json_string ("assistant"));
    //  content may be null only when the turn is all tool calls.
    if (msg->content && *msg->content)
        json_object_set_new (out, "content", sb_provider_jtext (msg->content));
    else
        json_object_set_new (out, "content", msg->tool_call_count? json_null (): json_string (""));
    if (!msg->tool_call_count)
        return out;
    json_t *calls = json_array ();
    for (size_t c = 0; calls && c < msg->tool_call_count; c++) {
        const sb_llm_tool_call_t *call = &msg->tool_calls [c];
        const char *args = call->arguments && *call->arguments? call->arguments: "{}";
        json_t *entry = json_pack ("{s:o, s:s, s:{s:o, s:o}}",
                                   "id", sb_provider_jtext (call->call_id), "type", "function",
                                   "function", "name", sb_provider_jtext (call->name),
                                   "arguments", sb_provider_jtext (args));
        if (!entry || json_array_append_new (calls, entry)) {
            json_decref (calls);
            calls = NULL;
        }
    }
    if (sb_provider_jput (out, "tool_calls", calls)) {
        json_decref (out);
        return NULL;
    }
    return out;
}

json_t *
sb_provider_chat_body (const sb_llm_request_t *req, char *err, size_t errlen)
{
    json_t *body = json_object ();
    json_t *messages = json_array ();
    if (!body || !messages)
        goto nomem;
    json_object_set_new (body, "model", sb_provider_jtext (req->model));
    //  "system", not OpenAI's newer "developer": every compatible server
    //  knows the former.
    if (req->instructions && *req->instructions) {
        json_t *system = json_pack ("{s:s, s:o}", "role", "system",
                                    "content", sb_provider_jtext (req->instructions));
        if (!system || json_array_append_new (messages, system))
            goto nomem;
    }
    for (size_t m = 0; m < req->message_count; m++) {
        const sb_llm_message_t *msg = &req->messages [m];
        json_t *out = NULL;
        switch (msg->role) {
            case SB_LLM_ROLE_USER:
                if (!msg->image_count) {
                    out = json_pack ("{s:s, s:o}", "role", "user", "content", sb_provider_jtext (msg->content));
                    break;
                }
                //  With images the content is an array of parts: the text,
                //  then one image_url part per image, its url a data URL.
                out = json_pack ("{s:s, s:[{s:s, s:o}]}", "role", "user", "content", "type", "text", "text",
                                 sb_provider_jtext (msg->content));
                for (size_t k = 0; out && k < msg->image_count; k++) {
                    json_t *url = sb_provider_image_url (&msg->images [k], true);
                    json_t *part = url ? json_pack ("{s:s, s:{s:o}}", "type", "image_url", "image_url", "url", url)
                                       : NULL;
                    if (!part || json_array_append_new (json_object_get (out, "content"), part)) {
                        json_decref (out);
                        out = NULL;
                    }
                }
                break;
            case SB_LLM_ROLE_ASSISTANT:
                out = s_assistant (msg);
                break;
            case SB_LLM_ROLE_TOOL:
                out = json_pack ("{s:s, s:o, s:o}", "role", "tool",
                                 "tool_call_id", sb_provider_jtext (msg->call_id),
                                 "content", sb_provider_jtext (msg->content));
                break;
        }
        if (!out || json_array_append_new (messages, out))
            goto nomem;
    }
    json_object_set_new (body, "messages", messages);
    messages = NULL;
    if (req->tool_count) {
        json_t *tools = sb_provider_tools (req, SB_TOOLS_CHAT);
        if (!tools)
            goto nomem;
        json_object_set_new (body, "tools", tools);
    }
    const sb_llm_options_t *opt = &req->options;
    if (opt->reasoning_effort && *opt->reasoning_effort)
        json_object_set_new (body, "reasoning_effort", sb_provider_jtext (opt->reasoning_effort));
    //  max_tokens rather than OpenAI's newer max_completion_tokens: it is the
    //  one that Ollama, llama.cpp and vLLM honour.
    if (opt->has_max_output_tokens)
        json_object_set_new (body, "max_tokens", json_integer (opt->max_output_tokens));
    if (opt->has_temperature)
        json_object_set_new (body, "temperature", json_real (opt->temperature));
    json_object_set_new (body, "stream", json_true ());
    json_object_set_new (body, "stream_options", json_pack ("{s:b}", "include_usage", 1));
    return body;

nomem:
    sb_provider_errf (err, errlen, "out of memory");
    json_decref (messages);
    json_decref (body);
    return NULL;
}

//  ---------------------------------------------------------------------------
//  Stream mapper

//  The slot a tool_calls[] fragment belongs to. OpenAI and most servers
//  send an index; some send each call whole with only an id, and a fragment
//  with neither continues the last call.
static sb_slot_t *
s_call_slot (sb_mapper_t *self, json_t *frag)
{
    json_t *index = json_object_get (frag, "index");
    const char *id = sb_provider_jstr (frag, "id");
    sb_slot_t *slot = NULL;
    if (json_is_integer (index)) {
        slot = sb_mapper_slot_by_index (self, json_integer_value (index));
        if (!slot)
            slot = sb_mapper_slot_add (self, json_integer_value (index));
    }
    else {
        for (size_t i = 0; id && *id && !slot && i < self->slot_count; i++)
            if (self->slots [i].call_id && s_streq (self->slots [i].call_id, id))
                slot = &self->slots [i];
        if (!slot && (!id || !*id))
            slot = sb_mapper_slot_by_index (self, self->last_index);
        if (!slot)
            slot = sb_mapper_slot_add (self, self->last_index + 1);
    }
    if (slot && slot->index > self->last_index)
        self->last_index = slot->index;
    return slot;
}

static int
s_tool_fragment (sb_mapper_t *self, json_t *frag)
{
    sb_slot_t *slot = s_call_slot (self, frag);
    if (!slot)
        return -1;
    if (slot->done)
        return 0;
    json_t *function = json_object_get (frag, "function");
    const char *id = sb_provider_jstr (frag, "id");
    const char *name = sb_provider_jstr (function, "name");
    json_t *args = json_object_get (function, "arguments");
    if (id && *id && !slot->call_id && sb_mapper_set_str (self, &slot->call_id, id))
        return -1;
    if (name && *name && !slot->name && sb_mapper_set_str (self, &slot->name, name))
        return -1;
    if (json_is_string (args))
        return sb_mapper_append (self, &slot->buf, json_string_value (args),
                                 json_string_length (args));
    //  A few servers send the arguments as an object rather than text.
    if (json_is_object (args)) {
        char *text = json_dumps (args, JSON_COMPACT);
        int rc = text? sb_mapper_append (self, &slot->buf, text, strlen (text)): -1;
        free (text);
        return rc;
    }
    return 0;
}

static int
s_flush_calls (sb_mapper_t *self)
{
    sb_mapper_sort_slots (self);
    for (size_t i = 0; i < self->slot_count; i++) {
        sb_slot_t *slot = &self->slots [i];
        if (slot->done)
            continue;
        slot->done = true;
        if (sb_mapper_emit_tool_call (self, slot->call_id, slot->name, slot->buf.p, slot->buf.len))
            return -1;
    }
    //  The index order is kept; a later fragment must not reopen a call.
    self->last_index = self->slot_count? self->slots [self->slot_count - 1].index: -1;
    return 0;
}

static const char *
s_stop_reason (const char *finish)
{
    if (s_streq (finish, "length"))
        return "length";
    if (s_streq (finish, "content_filter"))
        return "content_filter";
    if (s_streq (finish, "tool_calls") || s_streq (finish, "function_call"))
        return "tool_calls";
    return "end";
}

//  Emits a delta's content: a string, or a list of parts (Mistral streams
//  its reasoning models so): {"type":"text","text"} is text, and
//  {"type":"thinking","thinking"} is thinking, itself a string or a list
//  of text parts (one level: a part's text is a string). Other parts (an
//  image, a reference) carry no text.
static int
s_content (sb_mapper_t *self, json_t *content, sb_chunk_kind_t kind)
{
    if (json_is_string (content))
        return json_string_length (content)
             ? sb_mapper_emit_text (self, kind, json_string_value (content), json_string_length (content)) : 0;
    size_t i;
    json_t *part;
    json_array_foreach (content, i, part) {
        const char *type = sb_provider_jstr (part, "type");
        int rc = 0;
        json_t *text = json_object_get (part, "text");
        if (s_streq (type, "text") && json_is_string (text))
            rc = s_content (self, text, kind);
        else
        if (s_streq (type, "thinking") && kind == SB_CHUNK_TEXT)
            rc = s_content (self, json_object_get (part, "thinking"), SB_CHUNK_THINKING);
        if (rc)
            return -1;
    }
    return 0;
}

int
sb_provider_chat_map (sb_mapper_t *self, const char *event, json_t *data, const char *raw, size_t len)
{
    if (!data) {
        //  The terminal event; some servers pad it with spaces.
        while (len && (raw [len - 1] == ' ' || raw [len - 1] == '\t'))
            len--;
        while (len && (*raw == ' ' || *raw == '\t')) {
            raw++;
            len--;
        }
        if (len == 6 && memcmp (raw, "[DONE]", 6) == 0) {
            if (s_flush_calls (self) || sb_mapper_emit_usage (self))
                return -1;
            sb_mapper_finish_ok (self, self->stop_reason? self->stop_reason: "end");
            return 0;
        }
        return sb_mapper_fail (self, "bad_stream", "data is neither JSON nor [DONE]");
    }
    //  An error mid-stream: {"error":{"message":...}} (OpenAI, vLLM) or
    //  {"error":"..."} (Ollama).
    json_t *error = json_object_get (data, "error");
    if (json_is_object (error) || json_is_string (error)) {
        const char *message = json_is_string (error)? json_string_value (error)
                                                    : sb_provider_jstr (error, "message");
        const char *code = sb_provider_jstr (error, "code");
        const char *type = sb_provider_jstr (error, "type");
        sb_mapper_finish_error (self, code, type, message? message: "the server reported an error");
        return 0;
    }
    json_t *choices = json_object_get (data, "choices");
    json_t *choice = json_array_get (choices, 0);
    json_t *delta = json_object_get (choice, "delta");
    if (json_is_object (delta)) {
        //  One or the other, never both: a server that fills both with the
        //  same text must not show it twice.
        json_t *thinking = json_object_get (delta, "reasoning_content");
        if (!json_is_string (thinking) || json_string_length (thinking) == 0)
            thinking = json_object_get (delta, "reasoning");
        if (json_is_string (thinking)
        &&  sb_mapper_emit_text (self, SB_CHUNK_THINKING, json_string_value (thinking),
                                 json_string_length (thinking)))
            return -1;
        if (s_content (self, json_object_get (delta, "content"), SB_CHUNK_TEXT))
            return -1;
        json_t *calls = json_object_get (delta, "tool_calls");
        size_t i;
        json_t *frag;
        json_array_foreach (calls, i, frag)
            if (json_is_object (frag) && s_tool_fragment (self, frag))
                return -1;
    }
    const char *finish = sb_provider_jstr (choice, "finish_reason");
    if (finish && *finish) {
        //  Emitted now rather than at [DONE], so that they come before the
        //  usage, as in every other format.
        if (s_flush_calls (self))
            return -1;
        self->stop_reason = s_stop_reason (finish);
    }
    json_t *usage = json_object_get (data, "usage");
    if (json_is_object (usage)) {
        //  Kept and emitted once at [DONE]: vLLM can repeat it on every chunk.
        self->has_usage = true;
        self->usage.input_tokens = sb_provider_jcount (usage, "prompt_tokens");
        self->usage.output_tokens = sb_provider_jcount (usage, "completion_tokens");
        self->usage.cached_tokens =
            sb_provider_jcount (json_object_get (usage, "prompt_tokens_details"), "cached_tokens");
        self->usage.reasoning_tokens =
            sb_provider_jcount (json_object_get (usage, "completion_tokens_details"), "reasoning_tokens");
    }
    return 0;
}
