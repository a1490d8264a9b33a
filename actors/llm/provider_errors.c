/*  actors/llm/provider_errors.c — what a provider's failure means for us.

    Classifies provider errors, from an HTTP error body or from an error
    event inside a 200 stream, into {code, message, retryable}, finds the
    delay a provider asks for, and keeps credentials out of every message.
*/
#include "actors/llm/provider_impl.h"

#include <ctype.h>
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

//  Codes that a retry cannot fix, whatever the HTTP status said: OpenAI
//  answers insufficient_quota with 429, for one.
static const char *s_fatal_codes [] = {
    "insufficient_quota", "context_length_exceeded", "invalid_api_key",
    "billing_hard_limit_reached", "billing_not_active", "usage_limit_reached",
    "invalid_prompt", "model_not_found", "invalid_request_error",
    "authentication_error", "permission_error", "not_found_error",
    "request_too_large", "account_deactivated", "access_terminated",
    "unsupported_country_region_territory", "string_above_max_length",
    NULL
};

//  Codes inside a 200 stream that say the same request may work later.
static const char *s_transient_codes [] = {
    "rate_limit_exceeded", "rate_limit_error", "server_error", "overloaded_error",
    "api_error", "overloaded", "internal_error", "service_unavailable", "timeout",
    "slow_down", "server_is_overloaded",
    NULL
};

static bool
s_in (const char *code, const char **list)
{
    for (size_t i = 0; list [i]; i++)
        if (s_streq (code, list [i]))
            return true;
    return false;
}

//  Provider codes go into our error's code field; keep them to snake_case so
//  they cannot smuggle anything odd into logs or the UI.
static void
s_set_code (char *dst, size_t size, const char *code)
{
    size_t o = 0;
    for (size_t i = 0; code [i] && o + 1 < size; i++) {
        unsigned char c = code [i];
        dst [o++] = isalnum (c)? (char) tolower (c): '_';
    }
    dst [o] = 0;
}

static bool
s_token_char (unsigned char c, bool dots)
{
    return isalnum (c) || c == '-' || c == '_' || c == '*' || (dots && c == '.');
}

//  Copies a provider message, dropping control characters and invalid
//  UTF-8, cutting at a UTF-8 boundary, and redacting anything shaped like
//  a credential: OpenAI echoes a masked key ("Incorrect API key provided:
//  sk-proj-ab***yz"), and even a fragment of a key must never reach a log
//  or the tape. Cleaning comes first, so that dropped bytes cannot join
//  the pieces of a key back together after the redaction looked.
static void
s_set_message (char *dst, size_t size, const char *src, size_t len)
{
    static const struct { const char *prefix; bool dots; } secrets [] = {
        { "sk-", false }, { "sk_", false }, { "sess-", false }, { "eyJ", true },
        { "Bearer ", true }, { "rt_", false }, { "ak-", false },
    };
    //  What can show in size bytes comes from at most 4 * size clean bytes
    //  (a redacted token can be any length, but is cut at that point).
    char clean [4 * sizeof ((sb_provider_error_t *) 0)->message];
    size_t clen = 0;
    for (size_t i = 0; i < len && clen + 4 < sizeof clean;) {
        unsigned char c = src [i];
        if (c < 0x20 || c == 0x7F) {
            clean [clen++] = ' ';
            i++;
            continue;
        }
        size_t k = sb_provider_utf8_seq ((const unsigned char *) src + i, len - i);
        if (!k) {
            i++;
            continue;
        }
        memcpy (clean + clen, src + i, k);
        clen += k;
        i += k;
    }
    size_t o = 0;
    for (size_t i = 0; i < clen && o + 1 < size;) {
        bool boundary = i == 0 || !s_token_char ((unsigned char) clean [i - 1], false);
        bool redacted = false;
        for (size_t k = 0; boundary && k < sizeof secrets / sizeof secrets [0]; k++) {
            size_t plen = strlen (secrets [k].prefix);
            if (clen - i >= plen && memcmp (clean + i, secrets [k].prefix, plen) == 0) {
                size_t j = i + plen;
                while (j < clen && s_token_char ((unsigned char) clean [j], secrets [k].dots))
                    j++;
                const char *mark = "[redacted]";
                size_t mlen = strlen (mark);
                if (o + mlen + 1 > size)
                    goto done;
                memcpy (dst + o, mark, mlen);
                o += mlen;
                i = j;
                redacted = true;
                break;
            }
        }
        if (redacted)
            continue;
        size_t k = sb_provider_utf8_seq ((const unsigned char *) clean + i, clen - i);
        if (o + k + 1 > size)
            break;
        memcpy (dst + o, clean + i, k);
        o += k;
        i += k;
    }
done:
    dst [o] = 0;
}

static const char *
s_code_for_status (long status)
{
    switch (status) {
        case 400: return "invalid_request";
        case 401: return "unauthorized";
        case 403: return "forbidden";
        case 404: return "not_found";
        case 408: return "timeout";
        case 409: return "conflict";
        case 413: return "too_large";
        case 429: return "rate_limited";
        case 529: return "overloaded";
    }
    return status >= 500? "server_error": "provider_error";
}

static bool
s_status_retryable (long status)
{
    return status == 408 || status == 409 || status == 429 || status >= 500;
}

void
sb_provider_error_fill (sb_provider_error_t *err, long status, const char *code,
              const char *type, const char *message)
{
    memset (err, 0, sizeof *err);
    err->http_status = status;
    const char *use = code && *code? code: type && *type? type: NULL;
    if (use)
        s_set_code (err->code, sizeof err->code, use);
    else
        snprintf (err->code, sizeof err->code, "%s",
                  status? s_code_for_status (status): "provider_error");
    if (!message || !*message)
        message = err->code;
    s_set_message (err->message, sizeof err->message, message, strlen (message));
    bool fatal = s_in (err->code, s_fatal_codes) || (type && s_in (type, s_fatal_codes)
                 && !s_in (err->code, s_transient_codes));
    if (status)
        err->retryable = s_status_retryable (status) && !fatal;
    else
        err->retryable = !fatal && (s_in (err->code, s_transient_codes)
                                    || (type && s_in (type, s_transient_codes)));
    err->retry_after_ms = sb_provider_parse_retry_in (message);
}

void
sb_provider_classify_http (sb_provider_kind_t kind, long http_status,
                           const char *body, size_t len, sb_provider_error_t *err)
{
    json_t *json = body && len? json_loadb (body, len, 0, NULL): NULL;
    const char *code = NULL, *type = NULL, *message = NULL;
    if (json_is_object (json)) {
        json_t *error = json_object_get (json, "error");
        if (json_is_object (error)) {
            //  OpenAI {error:{message,type,code}}, Anthropic {type:"error",
            //  error:{type,message}}; the codex backend adds its own codes.
            code = sb_provider_jstr (error, "code");
            type = sb_provider_jstr (error, "type");
            message = sb_provider_jstr (error, "message");
        }
        else
        if (json_is_string (error))
            message = json_string_value (error);      // Ollama, llama.cpp
        if (!message)
            message = sb_provider_jstr (json, "detail");   // ChatGPT backend, FastAPI servers
        if (!message)
            message = sb_provider_jstr (json, "message");
    }
    if (message)
        sb_provider_error_fill (err, http_status, code, type, message);
    else {
        sb_provider_error_fill (err, http_status, code, type, NULL);
        //  Not JSON (a proxy's HTML page, say): show its start, cleaned.
        char snippet [200];
        if (body && len) {
            s_set_message (snippet, sizeof snippet, body, len);
            snprintf (err->message, sizeof err->message, "HTTP %ld from %s: %s",
                      http_status, sb_provider_kind_name (kind), snippet);
        }
        else
            snprintf (err->message, sizeof err->message, "HTTP %ld from %s",
                      http_status, sb_provider_kind_name (kind));
    }
    json_decref (json);
}

int64_t
sb_provider_parse_retry_in (const char *message)
{
    if (!message)
        return -1;
    const char *p = strcasestr (message, "try again in");
    if (!p)
        return -1;
    p += strlen ("try again in");
    double total_ms = 0;
    bool any = false;
    while (true) {
        while (*p == ' ')
            p++;
        if (!isdigit ((unsigned char) *p))
            break;
        char *end;
        double value = strtod (p, &end);
        p = end;
        while (*p == ' ')
            p++;
        double unit;
        if (!strncasecmp (p, "ms", 2) || !strncasecmp (p, "millisecond", 11))
            unit = 1;
        else
        if (*p == 's' || *p == 'S')
            unit = 1000;
        else
        if (*p == 'm' || *p == 'M')
            unit = 60000;
        else
        if (*p == 'h' || *p == 'H')
            unit = 3600000;
        else
            break;
        total_ms += value * unit;
        any = true;
        //  Skip the rest of the unit word ("s", "sec", "seconds", "ms").
        while (isalpha ((unsigned char) *p))
            p++;
    }
    if (!any || !isfinite (total_ms) || total_ms < 0 || total_ms > 86400000.0)
        return -1;
    return llround (total_ms);
}

int64_t
sb_provider_retry_after (const char *retry_after_ms, const char *retry_after, time_t now)
{
    const int64_t max_ms = 60000;
    if (retry_after_ms && *retry_after_ms) {
        char *end;
        double ms = strtod (retry_after_ms, &end);
        while (*end == ' ')
            end++;
        if (end != retry_after_ms && !*end && isfinite (ms))
            return ms >= 0 && ms <= max_ms? llround (ms): -1;
    }
    if (!retry_after || !*retry_after)
        return -1;
    while (*retry_after == ' ')
        retry_after++;
    if (isdigit ((unsigned char) *retry_after)) {
        char *end;
        double s = strtod (retry_after, &end);
        while (*end == ' ')
            end++;
        if (*end || !isfinite (s) || s < 0 || s * 1000 > max_ms)
            return -1;
        return llround (s * 1000);
    }
    time_t when = curl_getdate (retry_after, NULL);
    if (when == -1)
        return -1;
    int64_t ms = ((int64_t) when - (int64_t) now) * 1000;
    if (ms < 0)
        ms = 0;             // already past: retry now
    return ms <= max_ms? ms: -1;
}

/*  Whether a provider's error says the request is longer than the model's
    context window. Each provider says it its own way: OpenAI's code
    context_length_exceeded ("This model's maximum context length is ..."),
    Anthropic's "prompt is too long: N tokens > M maximum", and Chat
    servers a 400 whose message speaks of the context length (vLLM,
    llama.cpp's "exceeds the available context size", Ollama). The
    executor compacts and retries on it, so a false match costs one
    compaction, and a miss a failed run: the patterns are specific. */
bool
sb_provider_error_overflow (const sb_provider_error_t *err)
{
    static const char *codes [] = {
        "context_length_exceeded", "string_above_max_length", "prompt_too_long",
        "context_window_exceeded", NULL
    };
    static const char *phrases [] = {
        "prompt is too long", "maximum context length", "context length exceeded",
        "context_length_exceeded", "exceeds the context window", "context window exceeded",
        "exceeds the available context size", "exceed context window", "input is too long",
        "too many tokens", "reduce the length of the messages", "maximum context size",
        NULL
    };
    if (s_in (err->code, codes))
        return true;
    if (err->http_status && err->http_status != 400 && err->http_status != 413)
        return false;
    for (size_t i = 0; phrases [i]; i++)
        if (strcasestr (err->message, phrases [i]))
            return true;
    return false;
}
