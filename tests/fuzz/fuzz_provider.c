/*  tests/fuzz/fuzz_provider.c — each provider's stream mapper on hostile streams.

    Byte 0 picks the provider; the rest is fed as SSE to its mapper, once
    whole and once a byte at a time, and the chunks and the outcome must be
    the same both ways. Each chunk is checked against its contract (a
    tool_call's arguments are a JSON object, reasoning state is JSON, text
    is never empty). The same bytes are also classified as an HTTP error
    body, whose message must never show anything shaped like a key.
*/
#include <ctype.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "actors/llm/provider.h"
#include "tests/common/record.h"

static int
s_on_chunk (const sb_chunk_t *c, void *ctx)
{
    sb_test_rec_t *r = ctx;
    sb_test_rec_put (r, &c->kind, sizeof c->kind);
    switch (c->kind) {
        case SB_CHUNK_TEXT:
        case SB_CHUNK_THINKING:
            if (!c->text || !c->text_len)
                abort ();
            sb_test_rec_put_str (r, c->text, c->text_len);
            break;
        case SB_CHUNK_TOOL_CALL: {
            json_t *args = json_loadb (c->arguments, c->arguments_len, 0, NULL);
            if (!json_is_object (args) || !*c->call_id || !*c->name)
                abort ();
            json_decref (args);
        }
        //  fall through
        case SB_CHUNK_ERROR:
            if (c->kind == SB_CHUNK_ERROR && (!c->code || !c->message))
                abort ();
            sb_test_rec_put_str (r, c->call_id, strlen (c->call_id));
            sb_test_rec_put_str (r, c->name, strlen (c->name));
            sb_test_rec_put_str (r, c->arguments, c->arguments_len);
            break;
        case SB_CHUNK_USAGE:
            sb_test_rec_put (r, &c->usage, sizeof c->usage);
            break;
        case SB_CHUNK_REASONING_STATE: {
            json_t *state = json_loadb (c->data, c->data_len, 0, NULL);
            if (!json_is_object (state))
                abort ();
            json_decref (state);
            sb_test_rec_put_str (r, c->data, c->data_len);
            break;
        }
    }
    return 0;
}

static void
s_run (sb_provider_kind_t kind, const char *in, size_t len, size_t step, sb_test_rec_t *r)
{
    sb_mapper_t *m = sb_mapper_new (kind);
    sb_sse_t *sse = sb_sse_new (4096);
    if (!m || !sse)
        abort ();
    int last = 0;
    for (size_t off = 0; off < len; off += step) {
        size_t n = len - off < step? len - off: step;
        last = sb_mapper_feed (m, sse, in + off, n, s_on_chunk, r);
    }
    const char *stop = NULL;
    sb_provider_error_t err;
    int rc = sb_mapper_done (m, &stop, &err);
    sb_test_rec_put (r, &rc, sizeof rc);
    if (rc == 0) {
        if (!stop)
            abort ();
        sb_test_rec_put_str (r, stop, strlen (stop));
    }
    else {
        if (!memchr (err.code, 0, sizeof err.code) || !memchr (err.message, 0, sizeof err.message))
            abort ();
        sb_test_rec_put_str (r, err.code, strlen (err.code));
        sb_test_rec_put (r, &err.retryable, sizeof err.retryable);
    }
    (void) last;
    sb_mapper_destroy (&m);
    sb_sse_destroy (&sse);
}

int
LLVMFuzzerTestOneInput (const uint8_t *buf, size_t size)
{
    if (size < 1)
        return 0;
    static const sb_provider_kind_t kinds [] = {
        SB_PROVIDER_RESPONSES, SB_PROVIDER_CHAT, SB_PROVIDER_ANTHROPIC, SB_PROVIDER_CODEX
    };
    sb_provider_kind_t kind = kinds [buf [0] & 3];
    const char *in = (const char *) buf + 1;
    size_t len = size - 1;

    sb_test_rec_t whole = { 0 }, bytes = { 0 };
    s_run (kind, in, len, len? len: 1, &whole);
    s_run (kind, in, len, 1, &bytes);
    if (!sb_test_rec_equal (&whole, &bytes))
        abort ();
    sb_test_rec_free (&whole);
    sb_test_rec_free (&bytes);

    sb_provider_error_t err;
    sb_provider_classify_http (kind, 400 + (buf [0] >> 2), in, len, &err);
    if (!memchr (err.message, 0, sizeof err.message) || !err.code [0])
        abort ();
    //  "sk-" that starts a word is a key's start and must have been redacted
    //  ("task-list" is fine).
    for (const char *p = err.message; (p = strstr (p, "sk-")); p++)
        if (p == err.message || !(isalnum ((unsigned char) p [-1]) || strchr ("-_*", p [-1])))
            abort ();
    char *text = strndup (in, len);
    if (text) {
        int64_t ms = sb_provider_parse_retry_in (text);
        if (ms < -1)
            abort ();
        free (text);
    }
    return 0;
}
