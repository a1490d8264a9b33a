/*  actors/exec/mcp_sample.c — MCP sampling: the server's request checked
    and bounded, the sampler's answer as the JSON-RPC result
    (actors/exec/mcp_sample.h).
*/
#include "actors/exec/mcp_sample.h"
#include "common/blob.h"
#include "common/image.h"
#include "schemas/vocab.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  An image content {data, mimeType} of message k, decoded into the next
//  image of req: its base64 is bounded before anything is allocated
//  (what is left of SB_MCP_SAMPLE_IMAGE_MAX), the bytes are sniffed
//  (an image type, the one mimeType says, its dimensions within
//  SB_IMAGE_SIDE_MAX and SB_IMAGE_PIXELS_MAX) before any decoder sees
//  them, and an image over what models take is sent downscaled, as a
//  person's are (actors/blob.c).
static int
s_image (json_t *content, size_t k, sb_mcp_sample_t *req, size_t *decoded, char *err, size_t errlen)
{
    json_t *data = json_object_get (content, "data");
    const char *mime = json_string_value (json_object_get (content, "mimeType"));
    if (!json_is_string (data) || !mime)
        return snprintf (err, errlen, "message %zu: an image needs data (base64) and mimeType", k), -1;
    if (req->nimages == SB_MCP_SAMPLE_IMAGES_MAX)
        return snprintf (err, errlen, "message %zu: more than %d images", k, SB_MCP_SAMPLE_IMAGES_MAX), -1;
    size_t b64 = json_string_length (data), room = SB_MCP_SAMPLE_IMAGE_MAX - *decoded;
    if (b64 / 4 * 3 > room)
        return snprintf (err, errlen, "message %zu: the images are over %u bytes", k, SB_MCP_SAMPLE_IMAGE_MAX), -1;
    size_t cap = b64 / 4 * 3 + 3, len = 0;
    uint8_t *bytes = malloc (cap ? cap : 1);
    if (!bytes)
        return snprintf (err, errlen, "out of memory"), -1;
    if (sodium_base642bin (bytes, cap, json_string_value (data), b64, " \r\n", &len, NULL,
                           sodium_base64_VARIANT_ORIGINAL) != 0 || len == 0) {
        free (bytes);
        return snprintf (err, errlen, "message %zu: the image's data is not base64", k), -1;
    }
    sb_blob_info_t info;
    char why [200];
    memset (&info, 0, sizeof info);
    int sniffed = sb_blob_sniff (bytes, len, &info, why, sizeof why);
    if (sniffed == 0 && !sb_blob_is_image (info.mime))
        snprintf (why, sizeof why, "its bytes are %s", info.mime);
    if (sniffed != 0 || !sb_blob_is_image (info.mime)) {
        free (bytes);
        return snprintf (err, errlen, "message %zu: the data is not a PNG, JPEG, GIF or WebP image (%s)", k, why), -1;
    }
    if (strcmp (info.mime, mime) != 0) {
        free (bytes);
        return snprintf (err, errlen, "message %zu: its mimeType says %.32s, its bytes are %s", k, mime,
                         info.mime), -1;
    }
    sb_mcp_sample_image_t *im = &req->images [req->nimages++];
    *decoded += len;
    im->sent_bytes = len;
    snprintf (im->mime, sizeof im->mime, "%s", info.mime);
    snprintf (im->sent_mime, sizeof im->sent_mime, "%s", info.mime);
    im->width = im->sent_width = info.width;
    im->height = im->sent_height = info.height;
    if (info.width <= SB_IMAGE_SEND_SIDE && info.height <= SB_IMAGE_SEND_SIDE && len <= SB_IMAGE_SEND_BYTES) {
        im->data = bytes;
        im->len = len;
        return 0;
    }
    im->data = sb_image_downscale (bytes, len, info.mime, SB_IMAGE_SEND_SIDE, SB_IMAGE_SEND_BYTES, &im->len,
                                   &im->width, &im->height, why, sizeof why);
    free (bytes);
    if (!im->data) {
        req->nimages--;
        return snprintf (err, errlen, "message %zu: the image (%ux%u) is over what models take and cannot be "
                         "downscaled: %s", k, info.width, info.height, why), -1;
    }
    snprintf (im->mime, sizeof im->mime, "image/jpeg");
    return 0;
}

void
sb_mcp_sample_clear (sb_mcp_sample_t *req)
{
    for (size_t k = 0; k < req->nimages; k++) {
        free (req->images [k].data);
        req->images [k].data = NULL;
    }
    req->nimages = 0;
}

//  A number member `key` of `o`, when there, within [lo, hi].
static bool
s_number_ok (json_t *o, const char *key, double lo, double hi)
{
    json_t *v = json_object_get (o, key);
    return !v || (json_is_number (v) && json_number_value (v) >= lo && json_number_value (v) <= hi);
}

static int
s_preferences (json_t *prefs, sb_mcp_sample_t *req, char *err, size_t errlen)
{
    if (!prefs)
        return 0;
    if (!json_is_object (prefs) || !s_number_ok (prefs, "costPriority", 0, 1)
    ||  !s_number_ok (prefs, "speedPriority", 0, 1) || !s_number_ok (prefs, "intelligencePriority", 0, 1))
        return snprintf (err, errlen, "modelPreferences is not an object with priorities from 0 to 1"), -1;
    json_t *hints = json_object_get (prefs, "hints");
    if (hints && (!json_is_array (hints) || json_array_size (hints) > SB_MCP_SAMPLE_HINTS_MAX))
        return snprintf (err, errlen, "modelPreferences.hints is not an array of at most %d hints",
                         SB_MCP_SAMPLE_HINTS_MAX), -1;
    size_t k;
    json_t *h;
    json_array_foreach (hints, k, h) {
        json_t *name = json_object_get (h, "name");
        if (!json_is_object (h) || (name && (!json_is_string (name)
                                          || json_string_length (name) > SB_MCP_SAMPLE_NAME_MAX)))
            return snprintf (err, errlen, "a model hint is not an object with a name of at most %d bytes",
                             SB_MCP_SAMPLE_NAME_MAX), -1;
        if (name && json_string_length (name) && !memchr (json_string_value (name), 0, json_string_length (name)))
            req->hints [req->nhints++] = json_string_value (name);
    }
    return 0;
}

//  A string without NUL bytes (a C string is all of it).
static bool
s_plain (json_t *s)
{
    return json_is_string (s) && !memchr (json_string_value (s), 0, json_string_length (s));
}

int
sb_mcp_sample_parse (json_t *params, sb_mcp_sample_t *req, char *err, size_t errlen)
{
    memset (req, 0, sizeof *req);
    if (!json_is_object (params))
        return snprintf (err, errlen, "the params are not an object"), -1;
    json_t *messages = json_object_get (params, "messages");
    if (!json_is_array (messages) || json_array_size (messages) == 0
    ||  json_array_size (messages) > SB_MCP_SAMPLE_MESSAGES_MAX)
        return snprintf (err, errlen, "messages is not an array of 1 to %d messages", SB_MCP_SAMPLE_MESSAGES_MAX), -1;
    size_t total = 0, decoded = 0;
    size_t k;
    json_t *m;
    json_array_foreach (messages, k, m) {
        const char *role = json_string_value (json_object_get (m, "role"));
        sb_llm_role_t r = role ? sb_llm_role_from_name (role) : SB_LLM_ROLE__COUNT;
        if (r != SB_LLM_ROLE_USER && r != SB_LLM_ROLE_ASSISTANT)
            return snprintf (err, errlen, "message %zu: its role is not user or assistant", k), -1;
        json_t *content = json_object_get (m, "content");
        const char *type = json_string_value (json_object_get (content, "type"));
        if (!type)
            return snprintf (err, errlen, "message %zu: its content is not one content object", k), -1;
        if (strcmp (type, "audio") == 0)
            return snprintf (err, errlen, "message %zu: audio content is not supported (text and images only)", k), -1;
        if (strcmp (type, "image") == 0) {
            //  Models take images from the user only (the providers' APIs).
            if (r != SB_LLM_ROLE_USER)
                return snprintf (err, errlen, "message %zu: an image is taken from the user only", k), -1;
            if (s_image (content, k, req, &decoded, err, errlen))
                return -1;
            req->messages [req->n].role = role;
            req->messages [req->n].text = "";
            req->messages [req->n++].image = &req->images [req->nimages - 1];
            continue;
        }
        if (strcmp (type, "text") != 0)
            return snprintf (err, errlen, "message %zu: content of type '%.32s' is not supported (text and images "
                             "only)", k, type), -1;
        json_t *text = json_object_get (content, "text");
        if (!s_plain (text))
            return snprintf (err, errlen, "message %zu: its text is not a string", k), -1;
        total += json_string_length (text);
        req->messages [req->n].role = role;
        req->messages [req->n++].text = json_string_value (text);
    }
    json_t *system = json_object_get (params, "systemPrompt");
    if (system && !s_plain (system))
        return snprintf (err, errlen, "systemPrompt is not a string"), -1;
    if (system && json_string_length (system)) {
        req->system = json_string_value (system);
        total += json_string_length (system);
    }
    if (total > SB_MCP_SAMPLE_TEXT_MAX)
        return snprintf (err, errlen, "the messages and system prompt are over %d bytes", SB_MCP_SAMPLE_TEXT_MAX), -1;
    json_t *max = json_object_get (params, "maxTokens");
    if (!json_is_integer (max) || json_integer_value (max) < 1 || json_integer_value (max) > SB_MCP_SAMPLE_TOKENS_MAX)
        return snprintf (err, errlen, "maxTokens is not an integer from 1 to %d", SB_MCP_SAMPLE_TOKENS_MAX), -1;
    req->max_tokens = (uint64_t) json_integer_value (max);
    json_t *temp = json_object_get (params, "temperature");
    if (temp && !json_is_null (temp)) {
        if (!json_is_number (temp) || !(json_number_value (temp) >= 0 && json_number_value (temp) <= 2))
            return snprintf (err, errlen, "temperature is not a number from 0 to 2"), -1;
        req->has_temperature = true;
        req->temperature = json_number_value (temp);
    }
    const char *include = json_string_value (json_object_get (params, "includeContext"));
    if (json_object_get (params, "includeContext")
    &&  (!include || (strcmp (include, "none") && strcmp (include, "thisServer") && strcmp (include, "allServers"))))
        return snprintf (err, errlen, "includeContext is not none, thisServer or allServers"), -1;
    json_t *stops = json_object_get (params, "stopSequences");
    if (stops && (!json_is_array (stops) || json_array_size (stops) > SB_MCP_SAMPLE_STOPS_MAX))
        return snprintf (err, errlen, "stopSequences is not an array of at most %d strings", SB_MCP_SAMPLE_STOPS_MAX),
               -1;
    json_t *s;
    json_array_foreach (stops, k, s)
        if (!json_is_string (s) || json_string_length (s) > SB_MCP_SAMPLE_NAME_MAX)
            return snprintf (err, errlen, "a stop sequence is not a string of at most %d bytes",
                             SB_MCP_SAMPLE_NAME_MAX), -1;
    json_t *meta = json_object_get (params, "metadata");
    if (meta && !json_is_object (meta))
        return snprintf (err, errlen, "metadata is not an object"), -1;
    return s_preferences (json_object_get (params, "modelPreferences"), req, err, errlen);
}

static json_t *
s_error (json_t *id, int code, const char *msg)
{
    return json_pack ("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code", code, "message", msg);
}

json_t *
sb_mcp_sample_answer (json_t *m, const char *server, sb_mcp_sampler_fn *fn, void *arg)
{
    json_t *id = json_object_get (m, "id");
    if (!fn)
        return s_error (id, -32601, "sampling is not supported: this session does not let its MCP servers call "
                        "its model (switchboard sessions update ID --mcp-sampling on)");
    sb_mcp_sample_t req;
    char err [256];
    if (sb_mcp_sample_parse (json_object_get (m, "params"), &req, err, sizeof err) != 0) {
        sb_mcp_sample_clear (&req);
        char msg [300];
        snprintf (msg, sizeof msg, "sampling/createMessage: %s", err);
        return s_error (id, -32602, msg);
    }
    sb_mcp_sample_reply_t reply = { 0 };
    sb_mcp_sample_outcome_t outcome = fn (arg, server, &req, &reply);
    sb_mcp_sample_clear (&req);
    json_t *r;
    if (outcome == SB_MCP_SAMPLE_DONE && reply.text)
        r = json_pack ("{s:s, s:O, s:{s:s, s:{s:s, s:s}, s:s, s:s}}", "jsonrpc", "2.0", "id", id, "result",
                       "role", "assistant", "content", "type", "text", "text", reply.text, "model", reply.model,
                       "stopReason", reply.stop_reason [0] ? reply.stop_reason : "endTurn");
    else
    if (outcome == SB_MCP_SAMPLE_REJECTED)
        r = s_error (id, SB_MCP_SAMPLE_REJECTED_CODE, reply.error [0] ? reply.error : "User rejected sampling request");
    else
        r = s_error (id, -32603, reply.error [0] ? reply.error : "the model call failed");
    free (reply.text);
    //  Text that is not UTF-8 cannot be a JSON string.
    return r ? r : s_error (id, -32603, "the model's answer could not be sent");
}
