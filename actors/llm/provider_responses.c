/*  actors/llm/provider_responses.c — the OpenAI Responses wire format.

    Used by the responses and codex providers (and the demo model, which
    speaks it too). Requests go out with store:false, so nothing lives on the
    provider's side between calls: the reasoning items come back to us with
    their encrypted_content, and we send them again on the next call.
*/
#include "actors/llm/provider_impl.h"

#include <stdio.h>
#include <stdlib.h>

//  ---------------------------------------------------------------------------
//  Request body

static json_t *
s_content (const char *type, const char *text)
{
    json_t *part = json_pack ("{s:s, s:o}", "type", type, "text", sb_provider_jtext (text));
    return part? json_pack ("[o]", part): NULL;
}

static json_t *
s_message_item (const char *role, const char *type, const char *text)
{
    json_t *content = s_content (type, text);
    return content? json_pack ("{s:s, s:s, s:o}", "type", "message", "role", role,
                               "content", content)
                  : NULL;
}

//  Reasoning items from reasoning_state, ready to send again. With store
//  false the item's id names nothing the server kept, and sending it back
//  fails the request ("Item with id 'rs_…' not found"), so it is dropped;
//  so is status, which is output-only.
static int
s_add_reasoning (json_t *input, const char *state, size_t m, char *err, size_t errlen)
{
    char what [64];
    snprintf (what, sizeof what, "messages[%zu].reasoning_state", m);
    json_t *items = sb_provider_jstate (state, what, err, errlen);
    if (!items)
        return -1;
    size_t i;
    json_t *item;
    json_array_foreach (items, i, item) {
        //  Another provider's state (an Anthropic thinking block) is of no
        //  use here and would be refused.
        const char *type = sb_provider_jstr (item, "type");
        if (!type || !s_streq (type, "reasoning"))
            continue;
        json_t *copy = json_deep_copy (item);
        if (!copy)
            break;
        json_object_del (copy, "id");
        json_object_del (copy, "status");
        json_array_append_new (input, copy);
    }
    json_decref (items);
    return 0;
}

json_t *
sb_provider_responses_body (const sb_llm_request_t *req, bool codex, char *err, size_t errlen)
{
    json_t *body = json_object ();
    json_t *input = json_array ();
    if (!body || !input)
        goto nomem;
    json_object_set_new (body, "model", sb_provider_jtext (req->model));
    //  The Codex backend refuses a request without instructions.
    if (req->instructions || codex)
        json_object_set_new (body, "instructions", sb_provider_jtext (req->instructions));

    for (size_t m = 0; m < req->message_count; m++) {
        const sb_llm_message_t *msg = &req->messages [m];
        json_t *item;
        switch (msg->role) {
            case SB_LLM_ROLE_USER:
                item = s_message_item ("user", "input_text", msg->content);
                //  Images follow the text as input_image parts, each a
                //  data URL (the Responses API's inline form).
                for (size_t k = 0; item && k < msg->image_count; k++) {
                    json_t *url = sb_provider_image_url (&msg->images [k], true);
                    json_t *part = url ? json_pack ("{s:s, s:o}", "type", "input_image", "image_url", url) : NULL;
                    if (!part || json_array_append_new (json_object_get (item, "content"), part)) {
                        json_decref (item);
                        item = NULL;
                    }
                }
                if (!item || json_array_append_new (input, item))
                    goto nomem;
                break;
            case SB_LLM_ROLE_ASSISTANT:
                //  The reasoning that led to this turn goes before the
                //  turn's own items, as the model produced them.
                if (s_add_reasoning (input, msg->reasoning_state, m, err, errlen))
                    goto fail;
                if (msg->content && *msg->content) {
                    item = s_message_item ("assistant", "output_text", msg->content);
                    if (!item || json_array_append_new (input, item))
                        goto nomem;
                }
                for (size_t c = 0; c < msg->tool_call_count; c++) {
                    const sb_llm_tool_call_t *call = &msg->tool_calls [c];
                    const char *args = call->arguments && *call->arguments? call->arguments: "{}";
                    item = json_pack ("{s:s, s:o, s:o, s:o}", "type", "function_call",
                                      "call_id", sb_provider_jtext (call->call_id),
                                      "name", sb_provider_jtext (call->name),
                                      "arguments", sb_provider_jtext (args));
                    if (!item || json_array_append_new (input, item))
                        goto nomem;
                }
                break;
            case SB_LLM_ROLE_TOOL:
                item = json_pack ("{s:s, s:o, s:o}", "type", "function_call_output",
                                  "call_id", sb_provider_jtext (msg->call_id),
                                  "output", sb_provider_jtext (msg->content));
                if (!item || json_array_append_new (input, item))
                    goto nomem;
                break;
        }
    }
    json_object_set_new (body, "input", input);
    input = NULL;

    if (req->tool_count) {
        json_t *tools = sb_provider_tools (req, SB_TOOLS_RESPONSES);
        if (!tools)
            goto nomem;
        json_object_set_new (body, "tools", tools);
        json_object_set_new (body, "tool_choice", json_string ("auto"));
    }
    const sb_llm_options_t *opt = &req->options;
    if (opt->reasoning_effort && *opt->reasoning_effort)
        //  Summaries are what we show as thinking; without summary:auto
        //  the API sends none.
        sb_provider_jput (body, "reasoning", json_pack ("{s:o, s:s}",
                     "effort", sb_provider_jtext (opt->reasoning_effort), "summary", "auto"));
    //  The ChatGPT Codex backend refuses both of these parameters.
    if (opt->has_max_output_tokens && !codex)
        json_object_set_new (body, "max_output_tokens", json_integer (opt->max_output_tokens));
    if (opt->has_temperature && !codex)
        json_object_set_new (body, "temperature", json_real (opt->temperature));
    json_object_set_new (body, "stream", json_true ());
    json_object_set_new (body, "store", json_false ());
    json_object_set_new (body, "include", json_pack ("[s]", "reasoning.encrypted_content"));
    return body;

nomem:
    sb_provider_errf (err, errlen, "out of memory");
fail:
    json_decref (input);
    json_decref (body);
    return NULL;
}

//  ---------------------------------------------------------------------------
//  Stream mapper

//  The slot of a function call: by item id, which every argument event
//  carries, else by output index.
static sb_slot_t *
s_call_slot (sb_mapper_t *self, json_t *data, const char *item_id)
{
    int64_t index = sb_provider_jint (data, "output_index");
    sb_slot_t *slot = sb_mapper_slot_by_item (self, item_id);
    if (!slot && !item_id)
        slot = sb_mapper_slot_by_index (self, index);
    if (!slot) {
        slot = sb_mapper_slot_add (self, index);
        if (slot && item_id && sb_mapper_set_str (self, &slot->item_id, item_id))
            return NULL;
    }
    return slot;
}

static int
s_emit_call (sb_mapper_t *self, sb_slot_t *slot)
{
    slot->done = true;
    return sb_mapper_emit_tool_call (self, slot->call_id, slot->name, slot->buf.p, slot->buf.len);
}

static int
s_item_done (sb_mapper_t *self, json_t *data)
{
    json_t *item = json_object_get (data, "item");
    const char *type = sb_provider_jstr (item, "type");
    if (!type)
        return 0;
    if (s_streq (type, "reasoning")) {
        //  Without encrypted_content the item cannot be replayed with
        //  store:false, so there is no state worth keeping.
        if (!json_is_string (json_object_get (item, "encrypted_content")))
            return 0;
        return sb_mapper_emit_state (self, item);
    }
    if (!s_streq (type, "function_call"))
        return 0;
    sb_slot_t *slot = s_call_slot (self, data, sb_provider_jstr (item, "id"));
    if (!slot)
        return -1;
    if (slot->done)
        return 0;
    if (sb_provider_jstr (item, "call_id")
    &&  sb_mapper_set_str (self, &slot->call_id, sb_provider_jstr (item, "call_id")))
        return -1;
    if (sb_provider_jstr (item, "name")
    &&  sb_mapper_set_str (self, &slot->name, sb_provider_jstr (item, "name")))
        return -1;
    //  Arguments are assembled from the deltas; a server that sent none
    //  still gives them whole here.
    const char *args = sb_provider_jstr (item, "arguments");
    if (slot->buf.len == 0 && args && sb_mapper_append (self, &slot->buf, args, strlen (args)))
        return -1;
    return s_emit_call (self, slot);
}

static void
s_usage (sb_mapper_t *self, json_t *response)
{
    json_t *usage = json_object_get (response, "usage");
    if (!json_is_object (usage))
        return;
    self->has_usage = true;
    self->usage.input_tokens = sb_provider_jcount (usage, "input_tokens");
    self->usage.output_tokens = sb_provider_jcount (usage, "output_tokens");
    self->usage.cached_tokens =
        sb_provider_jcount (json_object_get (usage, "input_tokens_details"), "cached_tokens");
    self->usage.reasoning_tokens =
        sb_provider_jcount (json_object_get (usage, "output_tokens_details"), "reasoning_tokens");
}

//  response.completed or response.incomplete: calls whose item never
//  finished are emitted now, in output order, then the usage.
static int
s_complete (sb_mapper_t *self, json_t *data, const char *stop_reason)
{
    sb_mapper_sort_slots (self);
    for (size_t i = 0; i < self->slot_count; i++)
        if (!self->slots [i].done && s_emit_call (self, &self->slots [i]))
            return -1;
    s_usage (self, json_object_get (data, "response"));
    if (sb_mapper_emit_usage (self))
        return -1;
    sb_mapper_finish_ok (self, stop_reason);
    return 0;
}

static void
s_error (sb_mapper_t *self, json_t *error, const char *fallback)
{
    //  The `error` event carries its fields at the top level in OpenAI's
    //  documentation and under "error" in practice; take either.
    json_t *inner = json_object_get (error, "error");
    if (json_is_object (inner))
        error = inner;
    const char *code = sb_provider_jstr (error, "code");
    const char *type = sb_provider_jstr (error, "type");
    if (type && s_streq (type, "error"))
        type = NULL;
    const char *message = sb_provider_jstr (error, "message");
    sb_mapper_finish_error (self, code? code: type? NULL: fallback, type,
                            message? message: "the provider reported a failure");
}

int
sb_provider_responses_map (sb_mapper_t *self, const char *event, json_t *data, const char *raw, size_t len)
{
    if (!data)
        return sb_mapper_fail (self, "bad_stream", "event '%.40s' is not a JSON object", event);
    const char *type = sb_provider_jstr (data, "type");
    if (!type)
        type = event;

    if (s_streq (type, "response.output_text.delta")
    ||  s_streq (type, "response.refusal.delta")) {
        json_t *delta = json_object_get (data, "delta");
        return sb_mapper_emit_text (self, SB_CHUNK_TEXT, json_string_value (delta),
                                    json_string_length (delta));
    }
    if (s_streq (type, "response.reasoning_summary_text.delta")
    ||  s_streq (type, "response.reasoning_text.delta")) {
        json_t *delta = json_object_get (data, "delta");
        return sb_mapper_emit_text (self, SB_CHUNK_THINKING, json_string_value (delta),
                                    json_string_length (delta));
    }
    if (s_streq (type, "response.reasoning_summary_part.added")) {
        //  Summary parts are paragraphs; keep them apart in the thinking text.
        bool first = !self->summary_started;
        self->summary_started = true;
        return first? 0: sb_mapper_emit_text (self, SB_CHUNK_THINKING, "\n\n", 2);
    }
    if (s_streq (type, "response.output_item.added")) {
        json_t *item = json_object_get (data, "item");
        const char *item_type = sb_provider_jstr (item, "type");
        if (!item_type || !s_streq (item_type, "function_call"))
            return 0;
        sb_slot_t *slot = s_call_slot (self, data, sb_provider_jstr (item, "id"));
        if (!slot
        ||  sb_mapper_set_str (self, &slot->call_id, sb_provider_jstr (item, "call_id"))
        ||  sb_mapper_set_str (self, &slot->name, sb_provider_jstr (item, "name")))
            return -1;
        return 0;
    }
    if (s_streq (type, "response.function_call_arguments.delta")) {
        json_t *delta = json_object_get (data, "delta");
        sb_slot_t *slot = s_call_slot (self, data, sb_provider_jstr (data, "item_id"));
        if (!slot)
            return -1;
        if (slot->done || !json_is_string (delta))
            return 0;
        return sb_mapper_append (self, &slot->buf, json_string_value (delta),
                                 json_string_length (delta));
    }
    if (s_streq (type, "response.function_call_arguments.done")) {
        const char *args = sb_provider_jstr (data, "arguments");
        sb_slot_t *slot = s_call_slot (self, data, sb_provider_jstr (data, "item_id"));
        if (!slot)
            return -1;
        if (!slot->done && slot->buf.len == 0 && args)
            return sb_mapper_append (self, &slot->buf, args, strlen (args));
        return 0;
    }
    if (s_streq (type, "response.output_item.done"))
        return s_item_done (self, data);
    if (s_streq (type, "response.completed"))
        return s_complete (self, data, "end");
    if (s_streq (type, "response.incomplete")) {
        const char *reason = sb_provider_jstr (json_object_get (
            json_object_get (data, "response"), "incomplete_details"), "reason");
        return s_complete (self, data, reason && s_streq (reason, "content_filter")
                                       ? "content_filter": "length");
    }
    if (s_streq (type, "response.failed")) {
        json_t *error = json_object_get (json_object_get (data, "response"), "error");
        s_error (self, error, "response_failed");
        return 0;
    }
    if (s_streq (type, "error")) {
        s_error (self, data, "provider_error");
        return 0;
    }
    //  response.created, content_part.*, output_text.done, and whatever
    //  event types the API adds next: nothing to map.
    return 0;
}
