/*  actors/llm/provider.c — what every provider adapter shares.

    The mapper core (chunk emission, terminal state, slots for fragments that
    are assembled across events), the checks every request must pass, and
    the JSON helpers of the request builders. The wire formats themselves are
    in provider_responses.c, provider_chat.c and provider_anthropic.c; the
    meaning of provider errors is in provider_errors.c.
*/
#include "actors/llm/provider_impl.h"

#include <math.h>
#include <stdio.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

//  ---------------------------------------------------------------------------
//  Names

const char *
sb_provider_kind_name (sb_provider_kind_t kind)
{
    switch (kind) {
        case SB_PROVIDER_RESPONSES: return "responses";
        case SB_PROVIDER_CHAT:      return "chat";
        case SB_PROVIDER_ANTHROPIC: return "anthropic";
        case SB_PROVIDER_CODEX:     return "codex";
    }
    return NULL;
}

int
sb_provider_kind_parse (const char *name, sb_provider_kind_t *kind)
{
    static const sb_provider_kind_t kinds [] = {
        SB_PROVIDER_RESPONSES, SB_PROVIDER_CHAT, SB_PROVIDER_ANTHROPIC, SB_PROVIDER_CODEX
    };
    for (size_t i = 0; name && i < sizeof kinds / sizeof kinds [0]; i++)
        if (s_streq (name, sb_provider_kind_name (kinds [i]))) {
            *kind = kinds [i];
            return 0;
        }
    return -1;
}

const char *
sb_provider_endpoint (sb_provider_kind_t kind)
{
    switch (kind) {
        case SB_PROVIDER_RESPONSES: return "/responses";
        case SB_PROVIDER_CHAT:      return "/chat/completions";
        case SB_PROVIDER_ANTHROPIC: return "/messages";
        case SB_PROVIDER_CODEX:     return "/responses";
    }
    return NULL;
}

const char *
sb_chunk_kind_name (sb_chunk_kind_t kind)
{
    switch (kind) {
        case SB_CHUNK_TEXT:            return "text";
        case SB_CHUNK_THINKING:        return "thinking";
        case SB_CHUNK_TOOL_CALL:       return "tool_call";
        case SB_CHUNK_USAGE:           return "usage";
        case SB_CHUNK_REASONING_STATE: return "reasoning_state";
        case SB_CHUNK_ERROR:           return "error";
    }
    return NULL;
}

//  ---------------------------------------------------------------------------
//  JSON helpers

void
sb_provider_errf (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (err, errlen, fmt, args);
    va_end (args);
}

const char *
sb_provider_jstr (json_t *obj, const char *key)
{
    return json_string_value (json_object_get (obj, key));
}

int64_t
sb_provider_jint (json_t *obj, const char *key)
{
    json_t *v = json_object_get (obj, key);
    if (json_is_integer (v))
        return json_integer_value (v);
    /* a provider's real past the int64 range (usage 1e300) is undefined
       to convert: it saturates */
    if (json_is_real (v) && isfinite (json_real_value (v))) {
        double d = json_real_value (v);
        return d >= 0x1p63 ? INT64_MAX : d < -0x1p63 ? INT64_MIN : (int64_t) d;
    }
    return 0;
}

int
sb_provider_jput (json_t *obj, const char *key, json_t *value)
{
    if (!value)
        return -1;
    return json_object_set_new (obj, key, value);
}

size_t
sb_provider_utf8_seq (const unsigned char *s, size_t n)
{
    unsigned char c = s [0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    else
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
    else
    if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
    else
    if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s [i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s [i] & 0x3F);
    }
    //  Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))
    ||  (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

json_t *
sb_provider_image_url (const sb_llm_image_t *im, bool data_url)
{
    size_t b64 = sodium_base64_ENCODED_LEN (im->len, sodium_base64_VARIANT_ORIGINAL);
    size_t pre = data_url ? strlen (im->mime) + 13 : 0;
    char *s = malloc (pre + b64);
    if (!s)
        return NULL;
    if (data_url)
        snprintf (s, pre + 1, "data:%s;base64,", im->mime);
    sodium_bin2base64 (s + pre, b64, im->data, im->len, sodium_base64_VARIANT_ORIGINAL);
    json_t *str = json_stringn_nocheck (s, strlen (s));
    free (s);
    return str;
}

json_t *
sb_provider_jtext (const char *s)
{
    if (!s)
        s = "";
    json_t *str = json_string (s);
    if (str)
        return str;
    size_t n = strlen (s);
    //  Each bad byte becomes the 3-byte U+FFFD.
    char *clean = malloc (n * 3 + 1);
    if (!clean)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = sb_provider_utf8_seq ((const unsigned char *) s + i, n - i);
        if (k) {
            memcpy (clean + o, s + i, k);
            o += k;
            i += k;
        }
        else {
            memcpy (clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    str = json_stringn (clean, o);
    free (clean);
    return str;
}

json_t *
sb_provider_jparse (const char *text, const char *what, bool any, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *v = json_loads (text, JSON_DECODE_ANY, &jerr);
    if (!v) {
        sb_provider_errf (err, errlen, "%s: not valid JSON: %s", what, jerr.text);
        return NULL;
    }
    if (!any && !json_is_object (v)) {
        json_decref (v);
        sb_provider_errf (err, errlen, "%s: not a JSON object", what);
        return NULL;
    }
    return v;
}

json_t *
sb_provider_jstate (const char *state, const char *what, char *err, size_t errlen)
{
    if (!state || !*state)
        return json_array ();
    json_t *v = sb_provider_jparse (state, what, true, err, errlen);
    if (!v)
        return NULL;
    if (json_is_object (v)) {
        json_t *arr = json_array ();
        if (arr)
            json_array_append_new (arr, v);
        else
            json_decref (v);
        return arr;
    }
    if (json_is_array (v)) {
        size_t i;
        json_t *item;
        json_array_foreach (v, i, item)
            if (!json_is_object (item)) {
                json_decref (v);
                sb_provider_errf (err, errlen, "%s: array items must be JSON objects", what);
                return NULL;
            }
        return v;
    }
    json_decref (v);
    sb_provider_errf (err, errlen, "%s: must be a JSON object or array", what);
    return NULL;
}

//  ---------------------------------------------------------------------------
//  Request bodies

//  Each wire format wraps a tool differently; what they share is the walk,
//  the empty-object schema for a tool without parameters, and the failure
//  when a schema is not JSON (json_pack refuses the NULL "o").
static json_t *
s_tool_entry (const sb_llm_tool_t *tool, json_t *params, sb_tools_shape_t shape)
{
    switch (shape) {
        case SB_TOOLS_RESPONSES:
            //  strict defaults to true in this API, and strict mode refuses
            //  any schema that does not list every property as required;
            //  our tool schemas have optional properties.
            //  o*: a tool without a description sends none, rather than "".
            return json_pack ("{s:s, s:s, s:o*, s:o, s:b}",
                              "type", "function", "name", tool->name,
                              "description", s_description (tool),
                              "parameters", params, "strict", 0);
        case SB_TOOLS_CHAT:
            return json_pack ("{s:s, s:{s:o, s:o*, s:o}}", "type", "function", "function",
                              "name", sb_provider_jtext (tool->name),
                              "description", s_description (tool),
                              "parameters", params);
        case SB_TOOLS_ANTHROPIC:
            return json_pack ("{s:o, s:o*, s:o}", "name", sb_provider_jtext (tool->name),
                              "description", s_description (tool),
                              "input_schema", params);
    }
    json_decref (params);
    return NULL;
}

json_t *
sb_provider_tools (const sb_llm_request_t *req, sb_tools_shape_t shape)
{
    json_t *tools = json_array ();
    for (size_t t = 0; tools && t < req->tool_count; t++) {
        const sb_llm_tool_t *tool = &req->tools [t];
        json_t *params = tool->parameters && *tool->parameters
                       ? json_loads (tool->parameters, 0, NULL)
                       : json_pack ("{s:s, s:{}}", "type", "object", "properties");
        json_t *entry = s_tool_entry (tool, params, shape);
        if (!entry || json_array_append_new (tools, entry)) {
            json_decref (tools);
            return NULL;
        }
    }
    return tools;
}

int
sb_provider_check (const sb_llm_request_t *req, char *err, size_t errlen)
{
    for (size_t t = 0; t < req->tool_count; t++) {
        const sb_llm_tool_t *tool = &req->tools [t];
        if (!tool->name || !*tool->name) {
            sb_provider_errf (err, errlen, "tools[%zu]: name is required", t);
            return -1;
        }
        for (size_t u = 0; u < t; u++)
            if (s_streq (req->tools [u].name, tool->name)) {
                sb_provider_errf (err, errlen, "tools[%zu]: duplicate name '%s'", t, tool->name);
                return -1;
            }
        if (tool->parameters && *tool->parameters) {
            char what [64];
            snprintf (what, sizeof what, "tools[%zu].parameters", t);
            json_t *schema = sb_provider_jparse (tool->parameters, what, false, err, errlen);
            if (!schema)
                return -1;
            json_decref (schema);
        }
    }
    //  Call ids seen so far, as a hash set: a long session holds thousands.
    json_t *calls = json_object ();
    if (!calls) {
        sb_provider_errf (err, errlen, "out of memory");
        return -1;
    }
    int rc = -1;
    for (size_t m = 0; m < req->message_count; m++) {
        const sb_llm_message_t *msg = &req->messages [m];
        if (msg->role != SB_LLM_ROLE_USER && msg->role != SB_LLM_ROLE_ASSISTANT
        &&  msg->role != SB_LLM_ROLE_TOOL) {
            sb_provider_errf (err, errlen, "messages[%zu]: unknown role %d", m, (int) msg->role);
            goto out;
        }
        if (msg->tool_call_count && msg->role != SB_LLM_ROLE_ASSISTANT) {
            sb_provider_errf (err, errlen, "messages[%zu]: only assistant messages carry tool calls", m);
            goto out;
        }
        if (msg->tool_call_count && !msg->tool_calls) {
            sb_provider_errf (err, errlen, "messages[%zu]: tool_call_count without tool_calls", m);
            goto out;
        }
        for (size_t c = 0; c < msg->tool_call_count; c++) {
            const sb_llm_tool_call_t *call = &msg->tool_calls [c];
            if (!call->call_id || !*call->call_id || !call->name || !*call->name) {
                sb_provider_errf (err, errlen, "messages[%zu].tool_calls[%zu]: call_id and name are required",
                         m, c);
                goto out;
            }
            //  Providers pair outputs with calls by id; a duplicate would
            //  pair one output with two calls.
            if (json_object_get (calls, call->call_id)) {
                sb_provider_errf (err, errlen, "messages[%zu].tool_calls[%zu]: duplicate call_id '%s'",
                         m, c, call->call_id);
                goto out;
            }
            if (json_object_set_new (calls, call->call_id, json_true ())) {
                sb_provider_errf (err, errlen, "messages[%zu].tool_calls[%zu]: bad call_id", m, c);
                goto out;
            }
        }
        if (msg->role == SB_LLM_ROLE_TOOL) {
            if (!msg->call_id || !*msg->call_id) {
                sb_provider_errf (err, errlen, "messages[%zu]: tool message without call_id", m);
                goto out;
            }
            //  Every provider refuses an output whose call it has not seen;
            //  say so here, with the index, rather than as a remote 400.
            if (!json_object_get (calls, msg->call_id)) {
                sb_provider_errf (err, errlen, "messages[%zu]: tool output for unknown call_id '%s'",
                         m, msg->call_id);
                goto out;
            }
        }
    }
    rc = 0;
out:
    json_decref (calls);
    return rc;
}

char *
sb_provider_build_body (sb_provider_kind_t kind, const sb_llm_request_t *req,
                        char *err, size_t errlen)
{
    if (err && errlen)
        *err = 0;
    if (!req) {
        sb_provider_errf (err, errlen, "no request");
        return NULL;
    }
    if (!req->model || !*req->model) {
        sb_provider_errf (err, errlen, "model is required");
        return NULL;
    }
    if ((req->message_count && !req->messages) || (req->tool_count && !req->tools)) {
        sb_provider_errf (err, errlen, "count given without its array");
        return NULL;
    }
    if (sb_provider_check (req, err, errlen))
        return NULL;
    json_t *body = NULL;
    switch (kind) {
        case SB_PROVIDER_RESPONSES: body = sb_provider_responses_body (req, false, err, errlen); break;
        case SB_PROVIDER_CODEX:     body = sb_provider_responses_body (req, true, err, errlen); break;
        case SB_PROVIDER_CHAT:      body = sb_provider_chat_body (req, err, errlen); break;
        case SB_PROVIDER_ANTHROPIC: body = sb_provider_anthropic_body (req, err, errlen); break;
        default:
            sb_provider_errf (err, errlen, "unknown provider kind %d", (int) kind);
            return NULL;
    }
    if (!body)
        return NULL;
    //  15 significant digits print a temperature of 0.2 as 0.2, not as
    //  0.20000000000000001, and lose nothing a sampler could notice.
    char *text = json_dumps (body, JSON_COMPACT | JSON_REAL_PRECISION (15));
    json_decref (body);
    if (!text)
        sb_provider_errf (err, errlen, "out of memory");
    return text;
}

//  ---------------------------------------------------------------------------
//  Mapper core

sb_mapper_t *
sb_mapper_new (sb_provider_kind_t kind)
{
    sb_mapper_fn *fn;
    switch (kind) {
        case SB_PROVIDER_RESPONSES:
        case SB_PROVIDER_CODEX:     fn = sb_provider_responses_map; break;
        case SB_PROVIDER_CHAT:      fn = sb_provider_chat_map; break;
        case SB_PROVIDER_ANTHROPIC: fn = sb_provider_anthropic_map; break;
        default:                    return NULL;
    }
    sb_mapper_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->kind = kind;
    self->on_event = fn;
    self->last_index = -1;
    self->error.retry_after_ms = -1;
    self->usage = (sb_llm_usage_t) { -1, -1, -1, -1 };
    return self;
}

static void
s_slot_free (sb_slot_t *slot)
{
    free (slot->item_id);
    free (slot->call_id);
    free (slot->name);
    free (slot->buf.p);
    free (slot->extra.p);
}

void
sb_mapper_destroy (sb_mapper_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sb_mapper_t *self = *self_p;
    for (size_t i = 0; i < self->slot_count; i++)
        s_slot_free (&self->slots [i]);
    free (self->slots);
    free (self);
    *self_p = NULL;
}

static int
s_emit (sb_mapper_t *self, const sb_chunk_t *chunk)
{
    if (self->aborted)
        return -1;
    self->chunks++;
    if (self->cb && self->cb (chunk, self->ctx)) {
        self->aborted = true;
        return -1;
    }
    return 0;
}

int
sb_mapper_emit_text (sb_mapper_t *self, sb_chunk_kind_t kind, const char *text, size_t len)
{
    if (!text || !len)
        return 0;
    sb_chunk_t chunk = { .kind = kind, .text = text, .text_len = len };
    return s_emit (self, &chunk);
}

int
sb_mapper_emit_tool_call (sb_mapper_t *self, const char *call_id, const char *name,
                          const char *args, size_t len)
{
    self->saw_tool_call = true;
    //  A tool without parameters may stream no argument bytes at all.
    if (!args || !len) {
        args = "{}";
        len = 2;
    }
    sb_chunk_t chunk = {
        .kind = SB_CHUNK_TOOL_CALL,
        .call_id = call_id? call_id: "", .name = name? name: "",
        .arguments = args, .arguments_len = len
    };
    char message [300];
    if (!call_id || !*call_id || !name || !*name) {
        snprintf (message, sizeof message, "tool call without %s",
                  !call_id || !*call_id? "an id": "a name");
        chunk.kind = SB_CHUNK_ERROR;
        chunk.code = "invalid_tool_call";
        chunk.message = message;
        return s_emit (self, &chunk);
    }
    json_error_t jerr;
    json_t *parsed = json_loadb (args, len, 0, &jerr);
    if (!json_is_object (parsed)) {
        if (parsed)
            snprintf (message, sizeof message,
                      "arguments of %s are JSON but not an object", name);
        else
            snprintf (message, sizeof message,
                      "arguments of %s are not valid JSON: %s at byte %d",
                      name, jerr.text, jerr.position);
        chunk.kind = SB_CHUNK_ERROR;
        chunk.code = "invalid_arguments";
        chunk.message = message;
    }
    json_decref (parsed);
    return s_emit (self, &chunk);
}

int
sb_mapper_emit_state (sb_mapper_t *self, json_t *state)
{
    char *text = json_dumps (state, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text)
        return sb_mapper_fail (self, "out_of_memory", "cannot encode reasoning state");
    sb_chunk_t chunk = { .kind = SB_CHUNK_REASONING_STATE, .data = text, .data_len = strlen (text) };
    int rc = s_emit (self, &chunk);
    free (text);
    return rc;
}

int
sb_mapper_emit_usage (sb_mapper_t *self)
{
    if (!self->has_usage)
        return 0;
    sb_chunk_t chunk = { .kind = SB_CHUNK_USAGE, .usage = self->usage };
    return s_emit (self, &chunk);
}

void
sb_mapper_finish_ok (sb_mapper_t *self, const char *stop_reason)
{
    if (self->finished)
        return;
    self->finished = true;
    if (!stop_reason || (s_streq (stop_reason, "end") && self->saw_tool_call))
        stop_reason = self->saw_tool_call? "tool_calls": "end";
    self->stop_reason = stop_reason;
}

void
sb_mapper_finish_error (sb_mapper_t *self, const char *code, const char *type,
                        const char *message)
{
    if (self->finished)
        return;
    self->finished = true;
    self->has_error = true;
    sb_provider_error_fill (&self->error, 0, code, type, message);
}

/*  A usage count: absent or not a number is unknown (-1), never 0, so that
    a provider that does not say is not taken to have said none. */
int64_t
sb_provider_jcount (json_t *obj, const char *key)
{
    json_t *v = json_object_get (obj, key);
    if (!json_is_number (v))
        return -1;
    int64_t n = sb_provider_jint (obj, key);
    return n < 0 ? 0 : n;
}

int
sb_mapper_fail (sb_mapper_t *self, const char *code, const char *fmt, ...)
{
    if (self->failed)
        return SB_MAPPER_EFAILED;
    self->failed = true;
    self->finished = true;
    self->has_error = true;
    memset (&self->error, 0, sizeof self->error);
    self->error.retry_after_ms = -1;
    snprintf (self->error.code, sizeof self->error.code, "%s", code);
    va_list args;
    va_start (args, fmt);
    char message [sizeof self->error.message - 32];
    vsnprintf (message, sizeof message, fmt, args);
    va_end (args);
    snprintf (self->error.message, sizeof self->error.message, "%s: %s",
              sb_provider_kind_name (self->kind), message);
    return SB_MAPPER_EFAILED;
}

sb_slot_t *
sb_mapper_slot_by_index (sb_mapper_t *self, int64_t index)
{
    for (size_t i = 0; i < self->slot_count; i++)
        if (self->slots [i].index == index)
            return &self->slots [i];
    return NULL;
}

sb_slot_t *
sb_mapper_slot_by_item (sb_mapper_t *self, const char *item_id)
{
    for (size_t i = 0; item_id && i < self->slot_count; i++)
        if (self->slots [i].item_id && s_streq (self->slots [i].item_id, item_id))
            return &self->slots [i];
    return NULL;
}

sb_slot_t *
sb_mapper_slot_add (sb_mapper_t *self, int64_t index)
{
    if (self->slot_count >= SB_MAPPER_MAX_SLOTS) {
        sb_mapper_fail (self, "bad_stream", "more than %d tool calls or blocks", SB_MAPPER_MAX_SLOTS);
        return NULL;
    }
    //  Grown one by one: a stream has a handful of slots, and a pointer to a
    //  slot is not kept across an add.
    sb_slot_t *slots = realloc (self->slots, (self->slot_count + 1) * sizeof *slots);
    if (!slots) {
        sb_mapper_fail (self, "out_of_memory", "cannot add a slot");
        return NULL;
    }
    self->slots = slots;
    sb_slot_t *slot = &slots [self->slot_count++];
    memset (slot, 0, sizeof *slot);
    slot->index = index;
    return slot;
}

int
sb_mapper_set_str (sb_mapper_t *self, char **dst, const char *src)
{
    char *copy = NULL;
    if (src && !(copy = strdup (src))) {
        sb_mapper_fail (self, "out_of_memory", "cannot copy a string");
        return -1;
    }
    free (*dst);
    *dst = copy;
    return 0;
}

int
sb_mapper_append (sb_mapper_t *self, sb_mbuf_t *buf, const char *src, size_t len)
{
    if (len > SB_MAPPER_MAX_HELD - self->held) {
        sb_mapper_fail (self, "too_large", "tool arguments or thinking over %zu bytes",
                        SB_MAPPER_MAX_HELD);
        return -1;
    }
    if (buf->len + len + 1 > buf->cap) {
        size_t cap = buf->cap? buf->cap: 64;
        while (cap < buf->len + len + 1)
            cap *= 2;
        char *p = realloc (buf->p, cap);
        if (!p) {
            sb_mapper_fail (self, "out_of_memory", "cannot grow a buffer");
            return -1;
        }
        buf->p = p;
        buf->cap = cap;
    }
    if (len)
        memcpy (buf->p + buf->len, src, len);
    buf->len += len;
    buf->p [buf->len] = 0;
    self->held += len;
    return 0;
}

void
sb_mapper_sort_slots (sb_mapper_t *self)
{
    //  Insertion sort: stable, and the slot count is small.
    for (size_t i = 1; i < self->slot_count; i++) {
        sb_slot_t tmp = self->slots [i];
        size_t j = i;
        while (j > 0 && self->slots [j - 1].index > tmp.index) {
            self->slots [j] = self->slots [j - 1];
            j--;
        }
        self->slots [j] = tmp;
    }
}

int
sb_mapper_event (sb_mapper_t *self, const char *event, const char *data, size_t len,
                 sb_chunk_cb *cb, void *ctx)
{
    if (!self)
        return SB_MAPPER_EFAILED;
    if (self->aborted)
        return SB_MAPPER_EABORTED;
    if (self->failed)
        return SB_MAPPER_EFAILED;
    if (self->finished)
        return SB_MAPPER_OK;
    if (!data)
        data = "";
    //  Only objects are events; the one exception (chat's "[DONE]") is
    //  handed over as raw text with data NULL.
    json_t *json = json_loadb (data, len, JSON_ALLOW_NUL, NULL);
    if (json && !json_is_object (json)) {
        json_decref (json);
        json = NULL;
    }
    self->cb = cb;
    self->ctx = ctx;
    int rc = self->on_event (self, event? event: "message", json, data, len);
    self->cb = NULL;
    self->ctx = NULL;
    json_decref (json);
    if (self->aborted)
        return SB_MAPPER_EABORTED;
    if (self->failed)
        return SB_MAPPER_EFAILED;
    return rc < 0? SB_MAPPER_EFAILED: SB_MAPPER_OK;
}

typedef struct {
    sb_mapper_t *mapper;
    sb_chunk_cb *cb;
    void *ctx;
} s_feed_t;

static int
s_feed_event (const char *event, const char *data, size_t len, const char *id, void *arg)
{
    s_feed_t *feed = arg;
    return sb_mapper_event (feed->mapper, event, data, len, feed->cb, feed->ctx) != SB_MAPPER_OK;
}

int
sb_mapper_feed (sb_mapper_t *self, sb_sse_t *sse, const char *buf, size_t len,
                sb_chunk_cb *cb, void *ctx)
{
    if (!self || !sse)
        return SB_MAPPER_EFAILED;
    if (self->aborted)
        return SB_MAPPER_EABORTED;
    if (self->failed)
        return SB_MAPPER_EFAILED;
    s_feed_t feed = { self, cb, ctx };
    int rc = sb_sse_feed (sse, buf, len, s_feed_event, &feed);
    if (self->aborted)
        return SB_MAPPER_EABORTED;
    if (self->failed)
        return SB_MAPPER_EFAILED;
    if (rc == SB_SSE_ETOOBIG)
        return sb_mapper_fail (self, "too_large", "an event is over the size limit");
    if (rc != SB_SSE_OK)
        return sb_mapper_fail (self, "bad_stream", "%s", sb_sse_strerror (rc));
    return SB_MAPPER_OK;
}

bool
sb_mapper_finished (sb_mapper_t *self)
{
    return self->finished;
}

int
sb_mapper_done (sb_mapper_t *self, const char **stop_reason, sb_provider_error_t *err)
{
    if (stop_reason)
        *stop_reason = NULL;
    if (self->aborted) {
        if (err) {
            memset (err, 0, sizeof *err);
            err->retry_after_ms = -1;
            snprintf (err->code, sizeof err->code, "cancelled");
            snprintf (err->message, sizeof err->message, "stream stopped by its consumer");
        }
        return -1;
    }
    if (self->has_error) {
        if (err)
            *err = self->error;
        return -1;
    }
    if (!self->finished) {
        static const char *terminal [] = {
            [SB_PROVIDER_RESPONSES] = "response.completed",
            [SB_PROVIDER_CHAT] = "data: [DONE]",
            [SB_PROVIDER_ANTHROPIC] = "message_stop",
            [SB_PROVIDER_CODEX] = "response.completed",
        };
        if (err) {
            memset (err, 0, sizeof *err);
            err->retry_after_ms = -1;
            //  The connection broke or a proxy cut the body short: the same
            //  request can well succeed again.
            err->retryable = true;
            snprintf (err->code, sizeof err->code, "incomplete_stream");
            snprintf (err->message, sizeof err->message,
                      "%s: stream ended without %s", sb_provider_kind_name (self->kind),
                      terminal [self->kind]);
        }
        return -1;
    }
    if (stop_reason)
        *stop_reason = self->stop_reason;
    return 0;
}

bool
sb_mapper_usage (sb_mapper_t *self, sb_llm_usage_t *usage)
{
    if (usage)
        *usage = self->usage;
    return self->has_usage;
}

uint64_t
sb_mapper_chunks (sb_mapper_t *self)
{
    return self->chunks;
}
