/*  tests/unit/test_provider.c — request bodies and stream mappers.

    Each fixture in tests/fixtures/llm (or $SB_FIXTURES) goes through the
    SSE parser and the mapper as written, with CRLF and CR line endings, in
    one-byte feeds, and cut short before its terminal event. The normalized
    chunks are compared, as JSON, with the exact sequence each must give.
*/
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/llm/provider.h"
#include "tests/common/fixtures.h"

//  ---------------------------------------------------------------------------
//  Helpers

//  A fixture by name; fails the test when it cannot be read.
static char *
read_fixture (const char *name, size_t *len)
{
    char *body = sb_test_read_fixture (name, len);
    cr_assert_not_null (body, "cannot read %s in %s (set SB_FIXTURES)", name, sb_test_fixtures_dir ());
    return body;
}

typedef struct {
    json_t *chunks;
    int stop_after;
} sink_t;

//  Each chunk as a JSON object, so that a failure prints readably.
static int
sink_cb (const sb_chunk_t *c, void *ctx)
{
    sink_t *sink = ctx;
    json_t *o = json_pack ("{s:s}", "kind", sb_chunk_kind_name (c->kind));
    switch (c->kind) {
        case SB_CHUNK_TEXT:
        case SB_CHUNK_THINKING:
            cr_assert_gt (c->text_len, 0);
            json_object_set_new (o, "text", json_stringn (c->text, c->text_len));
            break;
        case SB_CHUNK_TOOL_CALL:
            cr_assert_eq (strlen (c->arguments), c->arguments_len);
            json_object_set_new (o, "call_id", json_string (c->call_id));
            json_object_set_new (o, "name", json_string (c->name));
            json_object_set_new (o, "arguments", json_stringn (c->arguments, c->arguments_len));
            break;
        case SB_CHUNK_USAGE:
            //  an unknown count (-1) is left out, as on the bus
            if (c->usage.input_tokens >= 0)
                json_object_set_new (o, "input_tokens", json_integer (c->usage.input_tokens));
            if (c->usage.output_tokens >= 0)
                json_object_set_new (o, "output_tokens", json_integer (c->usage.output_tokens));
            if (c->usage.cached_tokens >= 0)
                json_object_set_new (o, "cached_tokens", json_integer (c->usage.cached_tokens));
            if (c->usage.reasoning_tokens >= 0)
                json_object_set_new (o, "reasoning_tokens", json_integer (c->usage.reasoning_tokens));
            break;
        case SB_CHUNK_REASONING_STATE: {
            json_t *data = json_loadb (c->data, c->data_len, 0, NULL);
            cr_assert_not_null (data, "reasoning_state is not JSON: %s", c->data);
            json_object_set_new (o, "data", data);
            json_object_set_new (o, "raw", json_stringn (c->data, c->data_len));
            break;
        }
        case SB_CHUNK_ERROR:
            json_object_set_new (o, "call_id", json_string (c->call_id));
            json_object_set_new (o, "name", json_string (c->name));
            json_object_set_new (o, "arguments", json_stringn (c->arguments, c->arguments_len));
            json_object_set_new (o, "code", json_string (c->code));
            cr_assert (c->message && *c->message);
            break;
    }
    json_array_append_new (sink->chunks, o);
    return sink->stop_after && (int) json_array_size (sink->chunks) >= sink->stop_after;
}

//  The outcome of sb_mapper_done as a last pseudo-chunk.
static json_t *
s_final (sb_mapper_t *m)
{
    const char *stop = NULL;
    sb_provider_error_t err;
    if (sb_mapper_done (m, &stop, &err) == 0) {
        cr_assert_not_null (stop);
        return json_pack ("{s:s, s:s}", "kind", "done", "stop_reason", stop);
    }
    cr_assert (err.code [0]);
    cr_assert (err.message [0]);
    return json_pack ("{s:s, s:s, s:b, s:I, s:s}", "kind", "failed", "code", err.code,
                      "retryable", err.retryable, "retry_after_ms", (json_int_t) err.retry_after_ms,
                      "message", err.message);
}

//  Runs bytes through sse + mapper with the given feed size (0 = all at once).
static json_t *
run_stream (sb_provider_kind_t kind, const char *body, size_t len, size_t step)
{
    sb_mapper_t *m = sb_mapper_new (kind);
    sb_sse_t *sse = sb_sse_new (0);
    cr_assert (m && sse);
    sink_t sink = { .chunks = json_array () };
    if (!step)
        step = len? len: 1;
    for (size_t off = 0; off < len; off += step) {
        size_t n = len - off < step? len - off: step;
        cr_assert_eq (sb_mapper_feed (m, sse, body + off, n, sink_cb, &sink), SB_MAPPER_OK);
    }
    json_array_append_new (sink.chunks, s_final (m));
    sb_mapper_destroy (&m);
    sb_sse_destroy (&sse);
    cr_assert_null (m);
    return sink.chunks;
}

static void
s_drop_raw (json_t *chunks)
{
    size_t i;
    json_t *c;
    json_array_foreach (chunks, i, c)
        json_object_del (c, "raw");
}

//  Compares chunk by chunk; expected is a JSON array text. Fields not in an
//  expected chunk (a failure's message) are not compared, unless listed.
static void
assert_chunks (json_t *got, const char *want_text, const char *what)
{
    json_error_t jerr;
    json_t *want = json_loads (want_text, 0, &jerr);
    cr_assert_not_null (want, "bad expectation (%s): %s", what, jerr.text);
    s_drop_raw (got);
    char *g = json_dumps (got, JSON_INDENT (1) | JSON_SORT_KEYS);
    cr_assert_eq (json_array_size (got), json_array_size (want), "%s: got %s", what, g);
    for (size_t i = 0; i < json_array_size (want); i++) {
        json_t *w = json_array_get (want, i);
        json_t *c = json_deep_copy (json_array_get (got, i));
        if (!json_object_get (w, "message"))
            json_object_del (c, "message");
        cr_assert (json_equal (w, c), "%s: chunk %zu differs; got %s", what, i, g);
        json_decref (c);
    }
    free (g);
    json_decref (want);
}

//  ---------------------------------------------------------------------------
//  The fixtures, in every variant

typedef struct {
    const char *file;
    sb_provider_kind_t kind;
    const char *terminal;   // the line that starts the terminal event
    size_t cut_chunks;      // chunks still emitted when cut before it
    const char *want;
} fixture_t;

static const fixture_t s_fixtures [] = {
    { "responses-text.sse", SB_PROVIDER_RESPONSES, "event: response.completed", 2,
      "[{\"kind\":\"text\",\"text\":\"The repository\"},"
      " {\"kind\":\"text\",\"text\":\" has 3 files: ünïcödé ✓\"},"
      " {\"kind\":\"usage\",\"input_tokens\":41,\"output_tokens\":12,\"cached_tokens\":0,\"reasoning_tokens\":0},"
      " {\"kind\":\"done\",\"stop_reason\":\"end\"}]" },
    { "responses-reasoning-tool.sse", SB_PROVIDER_RESPONSES, "event: response.completed", 5,
      "[{\"kind\":\"thinking\",\"text\":\"**Looking around**\\n\\nI should list\"},"
      " {\"kind\":\"thinking\",\"text\":\" the workspace first.\"},"
      " {\"kind\":\"reasoning_state\",\"data\":{\"id\":\"rs_b2\",\"type\":\"reasoning\","
      "   \"encrypted_content\":\"gAAAAB-opaque2\",\"summary\":[{\"type\":\"summary_text\","
      "   \"text\":\"**Looking around**\\n\\nI should list the workspace first.\"}]}},"
      " {\"kind\":\"tool_call\",\"call_id\":\"call_7Qx\",\"name\":\"shell\","
      "   \"arguments\":\"{\\\"command\\\":\\\"ls -la\\\",\\\"timeout_s\\\":30}\"},"
      " {\"kind\":\"tool_call\",\"call_id\":\"call_8Ry\",\"name\":\"read_file\","
      "   \"arguments\":\"{\\\"path\\\":\\\"README.md\\\"}\"},"
      " {\"kind\":\"usage\",\"input_tokens\":78,\"output_tokens\":219,\"cached_tokens\":0,\"reasoning_tokens\":150},"
      " {\"kind\":\"done\",\"stop_reason\":\"tool_calls\"}]" },
    { "responses-error.sse", SB_PROVIDER_RESPONSES, "event: error", 0,
      "[{\"kind\":\"failed\",\"code\":\"insufficient_quota\",\"retryable\":false,\"retry_after_ms\":-1,"
      "  \"message\":\"You exceeded your current quota.\"}]" },
    { "responses-rate-limited.sse", SB_PROVIDER_RESPONSES, "event: response.failed", 0,
      "[{\"kind\":\"failed\",\"code\":\"rate_limit_exceeded\",\"retryable\":true,\"retry_after_ms\":1054,"
      "  \"message\":\"Rate limit reached for gpt-5.1. Please try again in 1.054s.\"}]" },
    { "chat-tools.sse", SB_PROVIDER_CHAT, "data: [DONE]", 3,
      "[{\"kind\":\"text\",\"text\":\"Let me look.\"},"
      " {\"kind\":\"tool_call\",\"call_id\":\"call_w1\",\"name\":\"list_dir\",\"arguments\":\"{\\\"path\\\": \\\".\\\"}\"},"
      " {\"kind\":\"tool_call\",\"call_id\":\"call_w2\",\"name\":\"grep\",\"arguments\":\"{\\\"pattern\\\": \\\"TODO\\\"}\"},"
      " {\"kind\":\"usage\",\"input_tokens\":120,\"output_tokens\":31,\"cached_tokens\":0,\"reasoning_tokens\":0},"
      " {\"kind\":\"done\",\"stop_reason\":\"tool_calls\"}]" },
    { "anthropic-thinking-tool.sse", SB_PROVIDER_ANTHROPIC, "event: message_stop", 4,
      "[{\"kind\":\"thinking\",\"text\":\"The user wants the tests run.\"},"
      " {\"kind\":\"reasoning_state\",\"data\":{\"type\":\"thinking\","
      "   \"thinking\":\"The user wants the tests run.\",\"signature\":\"EqQBCgIYAhIM-opaque\"}},"
      " {\"kind\":\"text\",\"text\":\"Running the tests now.\"},"
      " {\"kind\":\"tool_call\",\"call_id\":\"toolu_01Ab\",\"name\":\"shell\","
      "   \"arguments\":\"{\\\"command\\\": \\\"make test\\\"}\"},"
      " {\"kind\":\"usage\",\"input_tokens\":465,\"output_tokens\":88,\"cached_tokens\":0},"
      " {\"kind\":\"done\",\"stop_reason\":\"tool_calls\"}]" },
};

#define FIXTURE_COUNT (sizeof s_fixtures / sizeof s_fixtures [0])

static void
check_fixture (const fixture_t *fx)
{
    size_t len;
    char *body = read_fixture (fx->file, &len);
    char what [256];

    struct { const char *eol; size_t step; const char *name; } variants [] = {
        { "\n", 0, "as written" }, { "\r\n", 0, "crlf" }, { "\r", 0, "cr" },
        { "\n", 1, "1-byte" }, { "\r\n", 1, "crlf 1-byte" }, { "\n", 5, "5-byte" },
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants [0]; v++) {
        size_t vlen;
        char *variant = sb_test_convert_eol (body, len, variants [v].eol, &vlen);
        snprintf (what, sizeof what, "%s %s", fx->file, variants [v].name);
        json_t *got = run_stream (fx->kind, variant, vlen, variants [v].step);
        assert_chunks (got, fx->want, what);
        json_decref (got);
        free (variant);
    }

    //  Cut short: everything from the terminal event on is dropped.
    const char *cut = strstr (body, fx->terminal);
    cr_assert_not_null (cut, "%s has no %s", fx->file, fx->terminal);
    json_t *want = json_loads (fx->want, 0, NULL);
    json_t *want_cut = json_array ();
    for (size_t i = 0; i < fx->cut_chunks; i++)
        json_array_append (want_cut, json_array_get (want, i));
    json_array_append_new (want_cut, json_pack ("{s:s, s:s, s:b, s:i}", "kind", "failed",
                           "code", "incomplete_stream", "retryable", 1, "retry_after_ms", -1));
    char *want_text = json_dumps (want_cut, 0);
    for (size_t step = 0; step <= 1; step++) {
        snprintf (what, sizeof what, "%s cut short, step %zu", fx->file, step);
        json_t *got = run_stream (fx->kind, body, cut - body, step);
        assert_chunks (got, want_text, what);
        json_decref (got);
    }
    free (want_text);
    json_decref (want_cut);
    json_decref (want);
    free (body);
}

Test (provider, fixture_responses_text)           { check_fixture (&s_fixtures [0]); }
Test (provider, fixture_responses_reasoning_tool) { check_fixture (&s_fixtures [1]); }
Test (provider, fixture_responses_error)          { check_fixture (&s_fixtures [2]); }
Test (provider, fixture_responses_rate_limited)   { check_fixture (&s_fixtures [3]); }
Test (provider, fixture_chat_tools)               { check_fixture (&s_fixtures [4]); }
Test (provider, fixture_anthropic_thinking_tool)  { check_fixture (&s_fixtures [5]); }

Test (provider, codex_maps_like_responses)
{
    size_t len;
    char *body = read_fixture ("responses-reasoning-tool.sse", &len);
    json_t *got = run_stream (SB_PROVIDER_CODEX, body, len, 0);
    assert_chunks (got, s_fixtures [1].want, "codex");
    json_decref (got);
    free (body);
}

//  ---------------------------------------------------------------------------
//  Mapper edge cases, from hand-written streams

static json_t *
run_text (sb_provider_kind_t kind, const char *sse)
{
    return run_stream (kind, sse, strlen (sse), 0);
}

Test (provider, responses_invalid_arguments_become_error_chunk)
{
    json_t *got = run_text (SB_PROVIDER_RESPONSES,
        "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"shell\",\"arguments\":\"\"}}\n\n"
        "data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\",\"output_index\":0,\"delta\":\"{\\\"command\\\": \"}\n\n"
        "data: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"shell\"}}\n\n"
        "data: {\"type\":\"response.output_item.added\",\"output_index\":1,\"item\":{\"id\":\"fc_2\",\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"list_dir\",\"arguments\":\"\"}}\n\n"
        "data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_2\",\"output_index\":1,\"delta\":\"[1]\"}\n\n"
        "data: {\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"id\":\"fc_2\",\"type\":\"function_call\"}}\n\n"
        "data: {\"type\":\"response.completed\",\"response\":{}}\n\n");
    assert_chunks (got,
        "[{\"kind\":\"error\",\"call_id\":\"c1\",\"name\":\"shell\",\"arguments\":\"{\\\"command\\\": \",\"code\":\"invalid_arguments\"},"
        " {\"kind\":\"error\",\"call_id\":\"c2\",\"name\":\"list_dir\",\"arguments\":\"[1]\",\"code\":\"invalid_arguments\"},"
        " {\"kind\":\"done\",\"stop_reason\":\"tool_calls\"}]", "invalid args");
    json_decref (got);
}

Test (provider, responses_calls_without_item_done_flushed_in_order)
{
    //  Deltas keyed by item_id, interleaved, and no output_item.done at all.
    json_t *got = run_text (SB_PROVIDER_RESPONSES,
        "data: {\"type\":\"response.output_item.added\",\"output_index\":2,\"item\":{\"id\":\"b\",\"type\":\"function_call\",\"call_id\":\"cb\",\"name\":\"nb\"}}\n\n"
        "data: {\"type\":\"response.output_item.added\",\"output_index\":1,\"item\":{\"id\":\"a\",\"type\":\"function_call\",\"call_id\":\"ca\",\"name\":\"na\"}}\n\n"
        "data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"b\",\"output_index\":2,\"delta\":\"{\\\"x\\\"\"}\n\n"
        "data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"a\",\"output_index\":1,\"delta\":\"{}\"}\n\n"
        "data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"b\",\"output_index\":2,\"delta\":\":1}\"}\n\n"
        "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":5,\"input_tokens_details\":{\"cached_tokens\":3},\"output_tokens\":2}}}\n\n");
    assert_chunks (got,
        "[{\"kind\":\"tool_call\",\"call_id\":\"ca\",\"name\":\"na\",\"arguments\":\"{}\"},"
        " {\"kind\":\"tool_call\",\"call_id\":\"cb\",\"name\":\"nb\",\"arguments\":\"{\\\"x\\\":1}\"},"
        " {\"kind\":\"usage\",\"input_tokens\":5,\"output_tokens\":2,\"cached_tokens\":3},"
        " {\"kind\":\"done\",\"stop_reason\":\"tool_calls\"}]", "flush");
    json_decref (got);
}

Test (provider, responses_arguments_only_in_done_events)
{
    json_t *got = run_text (SB_PROVIDER_RESPONSES,
        "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"f\",\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"n\"}}\n\n"
        "data: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":\"f\",\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"n\",\"arguments\":\"{\\\"k\\\":2}\"}}\n\n"
        "data: {\"type\":\"response.output_item.added\",\"output_index\":1,\"item\":{\"id\":\"g\",\"type\":\"function_call\",\"call_id\":\"d\",\"name\":\"m\"}}\n\n"
        "data: {\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"id\":\"g\",\"type\":\"function_call\",\"call_id\":\"d\",\"name\":\"m\",\"arguments\":\"\"}}\n\n"
        "data: {\"type\":\"response.completed\",\"response\":{}}\n\n");
    assert_chunks (got,
        "[{\"kind\":\"tool_call\",\"call_id\":\"c\",\"name\":\"n\",\"arguments\":\"{\\\"k\\\":2}\"},"
        " {\"kind\":\"tool_call\",\"call_id\":\"d\",\"name\":\"m\",\"arguments\":\"{}\"},"
        " {\"kind\":\"done\",\"stop_reason\":\"tool_calls\"}]", "done-only args");
    json_decref (got);
}

Test (provider, responses_incomplete_and_summary_parts)
{
    json_t *got = run_text (SB_PROVIDER_RESPONSES,
        "data: {\"type\":\"response.reasoning_summary_part.added\",\"summary_index\":0}\n\n"
        "data: {\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"one\"}\n\n"
        "data: {\"type\":\"response.reasoning_summary_part.added\",\"summary_index\":1}\n\n"
        "data: {\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"two\"}\n\n"
        "data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"reasoning\",\"summary\":[]}}\n\n"
        "data: {\"type\":\"response.refusal.delta\",\"delta\":\"no\"}\n\n"
        "data: {\"type\":\"response.incomplete\",\"response\":{\"incomplete_details\":{\"reason\":\"max_output_tokens\"}}}\n\n"
        "data: {\"type\":\"response.output_text.delta\",\"delta\":\"after the end\"}\n\n");
    //  No reasoning_state: that item had no encrypted_content to replay.
    assert_chunks (got,
        "[{\"kind\":\"thinking\",\"text\":\"one\"}, {\"kind\":\"thinking\",\"text\":\"\\n\\n\"},"
        " {\"kind\":\"thinking\",\"text\":\"two\"}, {\"kind\":\"text\",\"text\":\"no\"},"
        " {\"kind\":\"done\",\"stop_reason\":\"length\"}]", "incomplete");
    json_decref (got);
}

Test (provider, responses_error_event_alone_is_terminal)
{
    json_t *got = run_text (SB_PROVIDER_RESPONSES,
        "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n");
    assert_chunks (got, "[{\"kind\":\"failed\",\"code\":\"server_error\",\"retryable\":true,"
                        "\"retry_after_ms\":-1,\"message\":\"boom\"}]", "error alone");
    json_decref (got);
}

Test (provider, responses_not_json_is_bad_stream)
{
    sb_mapper_t *m = sb_mapper_new (SB_PROVIDER_RESPONSES);
    sink_t sink = { .chunks = json_array () };
    cr_assert_eq (sb_mapper_event (m, "message", "{nope", 5, sink_cb, &sink), SB_MAPPER_EFAILED);
    cr_assert_eq (sb_mapper_event (m, "message", "{}", 2, sink_cb, &sink), SB_MAPPER_EFAILED);
    cr_assert (sb_mapper_finished (m));
    sb_provider_error_t err;
    cr_assert_eq (sb_mapper_done (m, NULL, &err), -1);
    cr_assert_str_eq (err.code, "bad_stream");
    sb_mapper_destroy (&m);
    json_decref (sink.chunks);
}

Test (provider, chat_variants_of_compatible_servers)
{
    //  Reasoning in reasoning_content, then in reasoning; tool calls
    //  without index (each whole, told apart by id), then a fragment
    //  with neither, continuing the last; "stop" despite tool calls.
    json_t *got = run_text (SB_PROVIDER_CHAT,
        "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"reasoning\":\" ok\",\"content\":\"\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\"\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"g\",\"arguments\":{\"y\":2}}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4,\"completion_tokens_details\":{\"reasoning_tokens\":2}}}\n\n"
        "data:  [DONE] \n\n");
    assert_chunks (got,
        "[{\"kind\":\"thinking\",\"text\":\"hm\"}, {\"kind\":\"thinking\",\"text\":\" ok\"},"
        " {\"kind\":\"tool_call\",\"call_id\":\"a\",\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"},"
        " {\"kind\":\"tool_call\",\"call_id\":\"b\",\"name\":\"g\",\"arguments\":\"{\\\"y\\\":2}\"},"
        " {\"kind\":\"usage\",\"input_tokens\":9,\"output_tokens\":4,\"reasoning_tokens\":2},"
        " {\"kind\":\"done\",\"stop_reason\":\"tool_calls\"}]", "chat compat");
    json_decref (got);
}

Test (provider, chat_length_error_and_garbage)
{
    json_t *got = run_text (SB_PROVIDER_CHAT,
        "data: {\"choices\":[{\"delta\":{\"content\":\"abc\"},\"finish_reason\":\"length\"}]}\n\n"
        "data: [DONE]\n\n");
    assert_chunks (got, "[{\"kind\":\"text\",\"text\":\"abc\"}, {\"kind\":\"done\",\"stop_reason\":\"length\"}]",
                   "length");
    json_decref (got);

    got = run_text (SB_PROVIDER_CHAT,
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
        "data: {\"error\":{\"message\":\"Internal error\",\"type\":\"server_error\"}}\n\n");
    assert_chunks (got, "[{\"kind\":\"text\",\"text\":\"a\"}, {\"kind\":\"failed\",\"code\":\"server_error\","
                        "\"retryable\":true,\"retry_after_ms\":-1,\"message\":\"Internal error\"}]", "chat error");
    json_decref (got);

    got = run_text (SB_PROVIDER_CHAT, "data: {\"error\":\"model 'x' not found\"}\n\n");
    assert_chunks (got, "[{\"kind\":\"failed\",\"code\":\"provider_error\",\"retryable\":false,"
                        "\"retry_after_ms\":-1,\"message\":\"model 'x' not found\"}]", "ollama error");
    json_decref (got);

    sb_mapper_t *m = sb_mapper_new (SB_PROVIDER_CHAT);
    cr_assert_eq (sb_mapper_event (m, "message", "[NOT DONE]", 10, NULL, NULL), SB_MAPPER_EFAILED);
    sb_mapper_destroy (&m);
}

Test (provider, anthropic_edge_cases)
{
    //  Redacted thinking; a tool with no input deltas at all; invalid
    //  input JSON; max_tokens; cache tokens counted inside input_tokens.
    json_t *got = run_text (SB_PROVIDER_ANTHROPIC,
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":90,\"cache_creation_input_tokens\":5,\"output_tokens\":1}}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgB\"}}\n\n"
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"git_status\",\"input\":{}}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n"
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t2\",\"name\":\"shell\",\"input\":{}}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\": \\\"ls\"}}\n\n"
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n"
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":50}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    assert_chunks (got,
        "[{\"kind\":\"reasoning_state\",\"data\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgB\"}},"
        " {\"kind\":\"tool_call\",\"call_id\":\"t1\",\"name\":\"git_status\",\"arguments\":\"{}\"},"
        " {\"kind\":\"error\",\"call_id\":\"t2\",\"name\":\"shell\",\"arguments\":\"{\\\"command\\\": \\\"ls\",\"code\":\"invalid_arguments\"},"
        " {\"kind\":\"usage\",\"input_tokens\":105,\"output_tokens\":50,\"cached_tokens\":90},"
        " {\"kind\":\"done\",\"stop_reason\":\"length\"}]", "anthropic edges");
    json_decref (got);
}

Test (provider, anthropic_error_event)
{
    json_t *got = run_text (SB_PROVIDER_ANTHROPIC,
        "event: ping\ndata: {\"type\":\"ping\"}\n\n"
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n");
    assert_chunks (got, "[{\"kind\":\"failed\",\"code\":\"overloaded_error\",\"retryable\":true,"
                        "\"retry_after_ms\":-1,\"message\":\"Overloaded\"}]", "overloaded");
    json_decref (got);
}

Test (provider, callback_abort_stops_the_stream)
{
    size_t len;
    char *body = read_fixture ("responses-reasoning-tool.sse", &len);
    sb_mapper_t *m = sb_mapper_new (SB_PROVIDER_RESPONSES);
    sb_sse_t *sse = sb_sse_new (0);
    sink_t sink = { .chunks = json_array (), .stop_after = 2 };
    cr_assert_eq (sb_mapper_feed (m, sse, body, len, sink_cb, &sink), SB_MAPPER_EABORTED);
    cr_assert_eq (json_array_size (sink.chunks), 2);
    cr_assert_eq (sb_mapper_feed (m, sse, "data: {}\n\n", 10, sink_cb, &sink), SB_MAPPER_EABORTED);
    sb_provider_error_t err;
    cr_assert_eq (sb_mapper_done (m, NULL, &err), -1);
    cr_assert_str_eq (err.code, "cancelled");
    cr_assert_eq (sb_mapper_chunks (m), 2);
    sb_mapper_destroy (&m);
    sb_sse_destroy (&sse);
    json_decref (sink.chunks);
    free (body);
}

Test (provider, oversized_event_fails_with_too_large)
{
    sb_mapper_t *m = sb_mapper_new (SB_PROVIDER_CHAT);
    sb_sse_t *sse = sb_sse_new (256);
    char line [600];
    memset (line, 'a', sizeof line);
    memcpy (line, "data: ", 6);
    cr_assert_eq (sb_mapper_feed (m, sse, line, sizeof line, NULL, NULL), SB_MAPPER_EFAILED);
    sb_provider_error_t err;
    cr_assert_eq (sb_mapper_done (m, NULL, &err), -1);
    cr_assert_str_eq (err.code, "too_large");
    cr_assert_not (err.retryable);
    sb_mapper_destroy (&m);
    sb_sse_destroy (&sse);
}

Test (provider, usage_accessor_and_names)
{
    size_t len;
    char *body = read_fixture ("chat-tools.sse", &len);
    sb_mapper_t *m = sb_mapper_new (SB_PROVIDER_CHAT);
    sb_sse_t *sse = sb_sse_new (0);
    sb_llm_usage_t usage;
    cr_assert_not (sb_mapper_usage (m, &usage));
    cr_assert_eq (sb_mapper_feed (m, sse, body, len, NULL, NULL), 0);
    cr_assert (sb_mapper_usage (m, &usage));
    cr_assert_eq (usage.input_tokens, 120);
    cr_assert_eq (usage.output_tokens, 31);
    cr_assert (sb_mapper_finished (m));
    sb_mapper_destroy (&m);
    sb_sse_destroy (&sse);
    free (body);

    sb_provider_kind_t kind;
    cr_assert_eq (sb_provider_kind_parse ("anthropic", &kind), 0);
    cr_assert_eq (kind, SB_PROVIDER_ANTHROPIC);
    cr_assert_eq (sb_provider_kind_parse ("demo", &kind), -1);
    cr_assert_str_eq (sb_provider_endpoint (SB_PROVIDER_CHAT), "/chat/completions");
    cr_assert_str_eq (sb_provider_endpoint (SB_PROVIDER_CODEX), "/responses");
    cr_assert_str_eq (sb_provider_endpoint (SB_PROVIDER_ANTHROPIC), "/messages");
    cr_assert_str_eq (sb_chunk_kind_name (SB_CHUNK_REASONING_STATE), "reasoning_state");
}

//  ---------------------------------------------------------------------------
//  Request bodies

static json_t *
build (sb_provider_kind_t kind, const sb_llm_request_t *req)
{
    char err [256];
    char *text = sb_provider_build_body (kind, req, err, sizeof err);
    cr_assert_not_null (text, "build failed: %s", err);
    json_error_t jerr;
    json_t *body = json_loads (text, 0, &jerr);
    cr_assert_not_null (body, "body is not JSON: %s", jerr.text);
    free (text);
    return body;
}

static void
assert_json (json_t *got, const char *want_text, const char *what)
{
    json_error_t jerr;
    json_t *want = json_loads (want_text, 0, &jerr);
    cr_assert_not_null (want, "bad expectation (%s): %s", what, jerr.text);
    char *g = json_dumps (got, JSON_INDENT (1));
    cr_assert (json_equal (got, want), "%s: got %s", what, g);
    free (g);
    json_decref (want);
}

static const sb_llm_tool_t s_tools [] = {
    { "shell", "Run a command", "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"}},\"required\":[\"command\"]}" },
    { "git_status", NULL, NULL },
};

//  The data of a reasoning_state chunk collected from a fixture.
typedef struct {
    char state [4096];
    char text [256];
} turn_t;

static int
turn_cb (const sb_chunk_t *c, void *ctx)
{
    turn_t *turn = ctx;
    if (c->kind == SB_CHUNK_REASONING_STATE)
        snprintf (turn->state, sizeof turn->state, "%.*s", (int) c->data_len, c->data);
    if (c->kind == SB_CHUNK_TEXT)
        strncat (turn->text, c->text, c->text_len);
    return 0;
}

static void
collect_turn (sb_provider_kind_t kind, const char *file, turn_t *turn)
{
    size_t len;
    char *body = read_fixture (file, &len);
    sb_mapper_t *m = sb_mapper_new (kind);
    sb_sse_t *sse = sb_sse_new (0);
    memset (turn, 0, sizeof *turn);
    cr_assert_eq (sb_mapper_feed (m, sse, body, len, turn_cb, turn), 0);
    cr_assert (turn->state [0]);
    sb_mapper_destroy (&m);
    sb_sse_destroy (&sse);
    free (body);
}

Test (provider, responses_body_with_tool_loop_and_reasoning_sent_back)
{
    turn_t turn;
    collect_turn (SB_PROVIDER_RESPONSES, "responses-reasoning-tool.sse", &turn);
    sb_llm_tool_call_t calls [] = {
        { "call_7Qx", "shell", "{\"command\":\"ls -la\",\"timeout_s\":30}" },
        { "call_8Ry", "read_file", "{\"path\":\"README.md\"}" },
    };
    sb_llm_message_t msgs [] = {
        { .role = SB_LLM_ROLE_USER, .content = "What is here?" },
        { .role = SB_LLM_ROLE_ASSISTANT, .tool_calls = calls, .tool_call_count = 2,
          .reasoning_state = turn.state },
        { .role = SB_LLM_ROLE_TOOL, .call_id = "call_7Qx", .content = "a.txt\nb.txt" },
        { .role = SB_LLM_ROLE_TOOL, .call_id = "call_8Ry", .content = "# Readme" },
        { .role = SB_LLM_ROLE_ASSISTANT, .content = "Two files.",
          //  An Anthropic block, left from before a provider switch: skipped.
          .reasoning_state = "[{\"type\":\"thinking\",\"thinking\":\"x\",\"signature\":\"y\"}]" },
        { .role = SB_LLM_ROLE_USER, .content = "Thanks" },
    };
    sb_llm_request_t req = {
        .model = "gpt-5.1", .instructions = "Be brief.",
        .messages = msgs, .message_count = 6, .tools = s_tools, .tool_count = 2,
        .options = { .reasoning_effort = "low", .has_max_output_tokens = true,
                     .max_output_tokens = 1000, .has_temperature = true, .temperature = 0.2 },
    };
    json_t *body = build (SB_PROVIDER_RESPONSES, &req);
    assert_json (body,
        "{\"model\":\"gpt-5.1\",\"instructions\":\"Be brief.\",\"stream\":true,\"store\":false,"
        " \"include\":[\"reasoning.encrypted_content\"],"
        " \"reasoning\":{\"effort\":\"low\",\"summary\":\"auto\"},\"max_output_tokens\":1000,\"temperature\":0.2,"
        " \"tool_choice\":\"auto\","
        " \"tools\":[{\"type\":\"function\",\"name\":\"shell\",\"description\":\"Run a command\",\"strict\":false,"
        "            \"parameters\":{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"}},\"required\":[\"command\"]}},"
        "           {\"type\":\"function\",\"name\":\"git_status\",\"strict\":false,"
        "            \"parameters\":{\"type\":\"object\",\"properties\":{}}}],"
        " \"input\":["
        "  {\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"What is here?\"}]},"
        "  {\"type\":\"reasoning\",\"encrypted_content\":\"gAAAAB-opaque2\",\"summary\":[{\"type\":\"summary_text\","
        "    \"text\":\"**Looking around**\\n\\nI should list the workspace first.\"}]},"
        "  {\"type\":\"function_call\",\"call_id\":\"call_7Qx\",\"name\":\"shell\",\"arguments\":\"{\\\"command\\\":\\\"ls -la\\\",\\\"timeout_s\\\":30}\"},"
        "  {\"type\":\"function_call\",\"call_id\":\"call_8Ry\",\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"README.md\\\"}\"},"
        "  {\"type\":\"function_call_output\",\"call_id\":\"call_7Qx\",\"output\":\"a.txt\\nb.txt\"},"
        "  {\"type\":\"function_call_output\",\"call_id\":\"call_8Ry\",\"output\":\"# Readme\"},"
        "  {\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Two files.\"}]},"
        "  {\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"Thanks\"}]}]}",
        "responses body");
    json_decref (body);

    //  The Codex backend: same shape, instructions always, no token cap or temperature.
    req.instructions = NULL;
    body = build (SB_PROVIDER_CODEX, &req);
    cr_assert_str_eq (json_string_value (json_object_get (body, "instructions")), "");
    cr_assert_null (json_object_get (body, "max_output_tokens"));
    cr_assert_null (json_object_get (body, "temperature"));
    cr_assert_eq (json_array_size (json_object_get (body, "input")), 8);
    json_decref (body);
}

Test (provider, chat_body)
{
    sb_llm_tool_call_t calls [] = { { "call_w1", "list_dir", "{\"path\": \".\"}" },
                                    { "call_w2", "grep", NULL } };
    sb_llm_message_t msgs [] = {
        { .role = SB_LLM_ROLE_USER, .content = "Look" },
        { .role = SB_LLM_ROLE_ASSISTANT, .content = "Let me look.", .tool_calls = calls,
          .tool_call_count = 2, .reasoning_state = "{\"type\":\"reasoning\",\"encrypted_content\":\"x\"}" },
        { .role = SB_LLM_ROLE_TOOL, .call_id = "call_w1", .content = "a b" },
        { .role = SB_LLM_ROLE_TOOL, .call_id = "call_w2", .content = NULL },
        { .role = SB_LLM_ROLE_ASSISTANT, .tool_calls = calls + 1, .tool_call_count = 0 },
    };
    sb_llm_request_t req = {
        .model = "qwen2.5-coder", .instructions = "sys", .messages = msgs, .message_count = 5,
        .tools = s_tools, .tool_count = 1,
        .options = { .has_max_output_tokens = true, .max_output_tokens = 64 },
    };
    json_t *body = build (SB_PROVIDER_CHAT, &req);
    assert_json (body,
        "{\"model\":\"qwen2.5-coder\",\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_tokens\":64,"
        " \"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"shell\",\"description\":\"Run a command\","
        "   \"parameters\":{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"}},\"required\":[\"command\"]}}}],"
        " \"messages\":["
        "  {\"role\":\"system\",\"content\":\"sys\"},"
        "  {\"role\":\"user\",\"content\":\"Look\"},"
        "  {\"role\":\"assistant\",\"content\":\"Let me look.\",\"tool_calls\":["
        "    {\"id\":\"call_w1\",\"type\":\"function\",\"function\":{\"name\":\"list_dir\",\"arguments\":\"{\\\"path\\\": \\\".\\\"}\"}},"
        "    {\"id\":\"call_w2\",\"type\":\"function\",\"function\":{\"name\":\"grep\",\"arguments\":\"{}\"}}]},"
        "  {\"role\":\"tool\",\"tool_call_id\":\"call_w1\",\"content\":\"a b\"},"
        "  {\"role\":\"tool\",\"tool_call_id\":\"call_w2\",\"content\":\"\"},"
        "  {\"role\":\"assistant\",\"content\":\"\"}]}",
        "chat body");
    json_decref (body);
}

Test (provider, anthropic_body_with_thinking_sent_back)
{
    turn_t turn;
    collect_turn (SB_PROVIDER_ANTHROPIC, "anthropic-thinking-tool.sse", &turn);
    cr_assert_str_eq (turn.text, "Running the tests now.");
    sb_llm_tool_call_t calls [] = { { "toolu_01Ab", "shell", "{\"command\": \"make test\"}" },
                                    { "toolu_02", "git_status", "" } };
    sb_llm_message_t msgs [] = {
        { .role = SB_LLM_ROLE_USER, .content = "Run the tests" },
        { .role = SB_LLM_ROLE_ASSISTANT, .content = turn.text, .tool_calls = calls,
          .tool_call_count = 2, .reasoning_state = turn.state },
        { .role = SB_LLM_ROLE_TOOL, .call_id = "toolu_01Ab", .content = "ok" },
        { .role = SB_LLM_ROLE_TOOL, .call_id = "toolu_02", .content = "" },
        { .role = SB_LLM_ROLE_USER, .content = "and now?" },
        { .role = SB_LLM_ROLE_ASSISTANT, .content = "" },
    };
    sb_llm_request_t req = {
        .model = "claude-sonnet-4-5", .instructions = "You are terse.",
        .messages = msgs, .message_count = 6, .tools = s_tools, .tool_count = 2,
        .options = { .has_temperature = true, .temperature = 0.5 },
    };
    json_t *body = build (SB_PROVIDER_ANTHROPIC, &req);
    assert_json (body,
        "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":8192,\"system\":\"You are terse.\",\"stream\":true,"
        " \"temperature\":0.5,"
        " \"tools\":[{\"name\":\"shell\",\"description\":\"Run a command\","
        "   \"input_schema\":{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"}},\"required\":[\"command\"]}},"
        "   {\"name\":\"git_status\",\"input_schema\":{\"type\":\"object\",\"properties\":{}}}],"
        " \"messages\":["
        "  {\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Run the tests\"}]},"
        "  {\"role\":\"assistant\",\"content\":["
        "    {\"type\":\"thinking\",\"thinking\":\"The user wants the tests run.\",\"signature\":\"EqQBCgIYAhIM-opaque\"},"
        "    {\"type\":\"text\",\"text\":\"Running the tests now.\"},"
        "    {\"type\":\"tool_use\",\"id\":\"toolu_01Ab\",\"name\":\"shell\",\"input\":{\"command\":\"make test\"}},"
        "    {\"type\":\"tool_use\",\"id\":\"toolu_02\",\"name\":\"git_status\",\"input\":{}}]},"
        "  {\"role\":\"user\",\"content\":["
        "    {\"type\":\"tool_result\",\"tool_use_id\":\"toolu_01Ab\",\"content\":\"ok\"},"
        "    {\"type\":\"tool_result\",\"tool_use_id\":\"toolu_02\"},"
        "    {\"type\":\"text\",\"text\":\"and now?\"}]}]}",
        "anthropic body");
    json_decref (body);

    //  Thinking on: a budget below max_tokens, and no temperature.
    req.options.reasoning_effort = "medium";
    body = build (SB_PROVIDER_ANTHROPIC, &req);
    assert_json (json_object_get (body, "thinking"), "{\"type\":\"enabled\",\"budget_tokens\":8192}", "thinking");
    cr_assert_eq (json_integer_value (json_object_get (body, "max_tokens")), 8192 + 8192);
    cr_assert_null (json_object_get (body, "temperature"));
    json_decref (body);

    req.options.has_max_output_tokens = true;
    req.options.max_output_tokens = 4000;
    body = build (SB_PROVIDER_ANTHROPIC, &req);
    cr_assert_eq (json_integer_value (json_object_get (body, "max_tokens")), 4000);
    cr_assert_eq (json_integer_value (json_object_get (json_object_get (body, "thinking"), "budget_tokens")), 2000);
    json_decref (body);
}

Test (provider, anthropic_thinking_without_signature_leaves_the_field_out)
{
    //  A thinking block whose stream had no signature_delta: its state has
    //  no signature, and neither has the block sent back (the API refuses
    //  "signature": ""), also from a state a tape stored with an empty one.
    json_t *got = run_text (SB_PROVIDER_ANTHROPIC,
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}\n\n"
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    assert_chunks (got,
        "[{\"kind\":\"thinking\",\"text\":\"hm\"},"
        " {\"kind\":\"reasoning_state\",\"data\":{\"type\":\"thinking\",\"thinking\":\"hm\"}},"
        " {\"kind\":\"usage\",\"input_tokens\":3,\"output_tokens\":2},"
        " {\"kind\":\"done\",\"stop_reason\":\"end\"}]", "no signature");
    json_decref (got);

    sb_llm_message_t msgs [] = {
        { .role = SB_LLM_ROLE_USER, .content = "hi" },
        { .role = SB_LLM_ROLE_ASSISTANT, .content = "hello",
          .reasoning_state = "[{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"\"},"
                             " {\"type\":\"thinking\",\"thinking\":\"ok\",\"signature\":\"sig\"}]" },
        { .role = SB_LLM_ROLE_USER, .content = "and?" },
    };
    sb_llm_request_t req = { .model = "claude-sonnet-4-5", .messages = msgs, .message_count = 3 };
    json_t *body = build (SB_PROVIDER_ANTHROPIC, &req);
    json_t *content = json_object_get (json_array_get (json_object_get (body, "messages"), 1), "content");
    assert_json (content, "[{\"type\":\"thinking\",\"thinking\":\"hm\"},"
                          " {\"type\":\"thinking\",\"thinking\":\"ok\",\"signature\":\"sig\"},"
                          " {\"type\":\"text\",\"text\":\"hello\"}]", "sent back");
    json_decref (body);
}

Test (provider, tool_output_before_text_in_one_user_message)
{
    sb_llm_tool_call_t call = { "c1", "shell", "{}" };
    sb_llm_message_t msgs [] = {
        { .role = SB_LLM_ROLE_ASSISTANT, .tool_calls = &call, .tool_call_count = 1 },
        { .role = SB_LLM_ROLE_USER, .content = "wait" },
        { .role = SB_LLM_ROLE_TOOL, .call_id = "c1", .content = "out" },
    };
    sb_llm_request_t req = { .model = "m", .messages = msgs, .message_count = 3 };
    json_t *body = build (SB_PROVIDER_ANTHROPIC, &req);
    assert_json (json_object_get (body, "messages"),
        "[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"shell\",\"input\":{}}]},"
        " {\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"c1\",\"content\":\"out\"},"
        "                               {\"type\":\"text\",\"text\":\"wait\"}]}]", "order");
    json_decref (body);
}

Test (provider, invalid_utf8_content_is_replaced)
{
    sb_llm_message_t msg = { .role = SB_LLM_ROLE_USER, .content = "ok \xff\xfe bad \xC3" };
    sb_llm_request_t req = { .model = "m", .messages = &msg, .message_count = 1 };
    json_t *body = build (SB_PROVIDER_CHAT, &req);
    const char *text = json_string_value (json_object_get (
        json_array_get (json_object_get (body, "messages"), 0), "content"));
    cr_assert_str_eq (text, "ok \xEF\xBF\xBD\xEF\xBF\xBD bad \xEF\xBF\xBD");
    json_decref (body);
}

static void
assert_build_fails (sb_provider_kind_t kind, const sb_llm_request_t *req, const char *needle)
{
    char err [256] = "";
    char *text = sb_provider_build_body (kind, req, err, sizeof err);
    cr_assert_null (text, "expected failure with '%s'", needle);
    cr_assert_not_null (strstr (err, needle), "error '%s' lacks '%s'", err, needle);
}

Test (provider, body_errors_are_clear)
{
    sb_llm_message_t user = { .role = SB_LLM_ROLE_USER, .content = "hi" };
    sb_llm_request_t req = { .messages = &user, .message_count = 1 };
    assert_build_fails (SB_PROVIDER_RESPONSES, &req, "model is required");
    req.model = "m";

    sb_llm_message_t orphan [] = { user, { .role = SB_LLM_ROLE_TOOL, .call_id = "nope", .content = "x" } };
    req.messages = orphan;
    req.message_count = 2;
    assert_build_fails (SB_PROVIDER_CHAT, &req, "messages[1]: tool output for unknown call_id 'nope'");
    orphan [1].call_id = NULL;
    assert_build_fails (SB_PROVIDER_ANTHROPIC, &req, "messages[1]: tool message without call_id");

    sb_llm_tool_call_t dup [] = { { "c", "a", "{}" }, { "c", "b", "{}" } };
    sb_llm_message_t dups = { .role = SB_LLM_ROLE_ASSISTANT, .tool_calls = dup, .tool_call_count = 2 };
    req.messages = &dups;
    req.message_count = 1;
    assert_build_fails (SB_PROVIDER_RESPONSES, &req, "duplicate call_id 'c'");

    sb_llm_tool_call_t bad_args = { "c", "a", "{not json" };
    sb_llm_message_t bad = { .role = SB_LLM_ROLE_ASSISTANT, .tool_calls = &bad_args, .tool_call_count = 1 };
    req.messages = &bad;
    assert_build_fails (SB_PROVIDER_ANTHROPIC, &req, "messages[0].tool_calls[0].arguments: not valid JSON");

    sb_llm_message_t bad_state = { .role = SB_LLM_ROLE_ASSISTANT, .content = "x", .reasoning_state = "{oops" };
    req.messages = &bad_state;
    assert_build_fails (SB_PROVIDER_RESPONSES, &req, "messages[0].reasoning_state: not valid JSON");
    bad_state.reasoning_state = "42";
    assert_build_fails (SB_PROVIDER_ANTHROPIC, &req, "messages[0].reasoning_state: must be");

    req.messages = &user;
    sb_llm_tool_t bad_tool = { "t", "d", "[1,2]" };
    req.tools = &bad_tool;
    req.tool_count = 1;
    assert_build_fails (SB_PROVIDER_CHAT, &req, "tools[0].parameters: not a JSON object");
    sb_llm_tool_t twins [] = { { "t", NULL, NULL }, { "t", NULL, NULL } };
    req.tools = twins;
    req.tool_count = 2;
    assert_build_fails (SB_PROVIDER_CHAT, &req, "tools[1]: duplicate name 't'");
    req.tool_count = 0;
    req.options.reasoning_effort = "extreme";
    assert_build_fails (SB_PROVIDER_ANTHROPIC, &req, "reasoning_effort 'extreme'");
}

//  ---------------------------------------------------------------------------
//  Errors outside the stream

static void
classify (sb_provider_kind_t kind, long status, const char *body, sb_provider_error_t *err)
{
    sb_provider_classify_http (kind, status, body, body? strlen (body): 0, err);
    cr_assert_eq (err->http_status, status);
    cr_assert (err->code [0]);
    cr_assert (err->message [0]);
}

Test (provider, classify_http_errors)
{
    sb_provider_error_t err;
    classify (SB_PROVIDER_RESPONSES, 429,
              "{\"error\":{\"message\":\"You exceeded your current quota.\",\"type\":\"insufficient_quota\","
              "\"param\":null,\"code\":\"insufficient_quota\"}}", &err);
    cr_assert_str_eq (err.code, "insufficient_quota");
    cr_assert_not (err.retryable);

    classify (SB_PROVIDER_RESPONSES, 429,
              "{\"error\":{\"message\":\"Rate limit reached. Please try again in 20ms.\",\"type\":\"requests\","
              "\"code\":\"rate_limit_exceeded\"}}", &err);
    cr_assert_str_eq (err.code, "rate_limit_exceeded");
    cr_assert (err.retryable);
    cr_assert_eq (err.retry_after_ms, 20);

    classify (SB_PROVIDER_RESPONSES, 400,
              "{\"error\":{\"message\":\"This model's maximum context length is 128000 tokens.\","
              "\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\"}}", &err);
    cr_assert_str_eq (err.code, "context_length_exceeded");
    cr_assert_not (err.retryable);

    classify (SB_PROVIDER_RESPONSES, 401,
              "{\"error\":{\"message\":\"Incorrect API key provided: sk-proj-abc1********************xyz9. "
              "You can find your API key at https://platform.openai.com/account/api-keys.\","
              "\"type\":\"invalid_request_error\",\"code\":\"invalid_api_key\"}}", &err);
    cr_assert_str_eq (err.code, "invalid_api_key");
    cr_assert_not (err.retryable);
    cr_assert_null (strstr (err.message, "sk-"), "key leaked: %s", err.message);
    cr_assert_null (strstr (err.message, "xyz9"), "key leaked: %s", err.message);
    cr_assert_not_null (strstr (err.message, "Incorrect API key provided: [redacted]. You can"));

    classify (SB_PROVIDER_ANTHROPIC, 529,
              "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}", &err);
    cr_assert_str_eq (err.code, "overloaded_error");
    cr_assert_str_eq (err.message, "Overloaded");
    cr_assert (err.retryable);

    classify (SB_PROVIDER_ANTHROPIC, 400,
              "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"max_tokens: required\"}}",
              &err);
    cr_assert_str_eq (err.code, "invalid_request_error");
    cr_assert_not (err.retryable);

    classify (SB_PROVIDER_CHAT, 404, "{\"error\":\"model \\\"llama9\\\" not found, try pulling it first\"}", &err);
    cr_assert_str_eq (err.code, "not_found");
    cr_assert_str_eq (err.message, "model \"llama9\" not found, try pulling it first");
    cr_assert_not (err.retryable);

    classify (SB_PROVIDER_CODEX, 401, "{\"detail\":\"Could not validate credentials\"}", &err);
    cr_assert_str_eq (err.code, "unauthorized");
    cr_assert_str_eq (err.message, "Could not validate credentials");

    classify (SB_PROVIDER_CHAT, 502, "<html><body>\n<h1>502 Bad Gateway</h1></body></html>", &err);
    cr_assert_str_eq (err.code, "server_error");
    cr_assert (err.retryable);
    cr_assert_not_null (strstr (err.message, "HTTP 502"));
    cr_assert_not_null (strstr (err.message, "Bad Gateway"));
    cr_assert_null (strchr (err.message, '\n'));

    classify (SB_PROVIDER_RESPONSES, 500, NULL, &err);
    cr_assert (err.retryable);
    cr_assert_eq (err.retry_after_ms, -1);
    classify (SB_PROVIDER_RESPONSES, 408, "", &err);
    cr_assert_str_eq (err.code, "timeout");
    cr_assert (err.retryable);
    classify (SB_PROVIDER_RESPONSES, 409, "{}", &err);
    cr_assert (err.retryable);
    classify (SB_PROVIDER_ANTHROPIC, 403, "{\"type\":\"error\",\"error\":{\"type\":\"permission_error\",\"message\":\"no\"}}", &err);
    cr_assert_not (err.retryable);

    //  Bytes that are dropped as invalid UTF-8 cannot join a key back up.
    classify (SB_PROVIDER_CHAT, 400, "{\"error\":\"key s\x85k-abc123 refused\"}", &err);
    //  (Not valid JSON then, so the body shows as a snippet.)
    cr_assert_not_null (strstr (err.message, "key [redacted] refused"), "%s", err.message);
    //  A word that merely contains sk- is left alone.
    classify (SB_PROVIDER_CHAT, 400, "{\"error\":\"task-runner failed\"}", &err);
    cr_assert_str_eq (err.message, "task-runner failed");

    //  A Bearer token or a JWT echoed back is redacted too.
    classify (SB_PROVIDER_CODEX, 401, "{\"detail\":\"bad token Bearer eyJhbGciOi.eyJzdWIi.sig9 here\"}", &err);
    cr_assert_null (strstr (err.message, "eyJ"), "%s", err.message);
    cr_assert_null (strstr (err.message, "sig9"), "%s", err.message);
}

Test (provider, retry_delays)
{
    cr_assert_eq (sb_provider_parse_retry_in ("Please try again in 1.054s."), 1054);
    cr_assert_eq (sb_provider_parse_retry_in ("Please try again in 20ms."), 20);
    cr_assert_eq (sb_provider_parse_retry_in ("Please try again in 1m30s."), 90000);
    cr_assert_eq (sb_provider_parse_retry_in ("Please try again in 6m0s"), 360000);
    cr_assert_eq (sb_provider_parse_retry_in ("Try again in 2 seconds"), 2000);
    cr_assert_eq (sb_provider_parse_retry_in ("try again in 1h"), 3600000);
    cr_assert_eq (sb_provider_parse_retry_in ("try again in a moment"), -1);
    cr_assert_eq (sb_provider_parse_retry_in ("try again later"), -1);
    cr_assert_eq (sb_provider_parse_retry_in (NULL), -1);

    time_t now = 1764400000;
    cr_assert_eq (sb_provider_retry_after ("1500", "9", now), 1500);
    cr_assert_eq (sb_provider_retry_after (NULL, "1", now), 1000);
    cr_assert_eq (sb_provider_retry_after (NULL, " 2.5", now), 2500);
    cr_assert_eq (sb_provider_retry_after ("0", NULL, now), 0);
    cr_assert_eq (sb_provider_retry_after (NULL, "120", now), -1);
    cr_assert_eq (sb_provider_retry_after ("70000", "1", now), -1);
    cr_assert_eq (sb_provider_retry_after (NULL, "soon", now), -1);
    cr_assert_eq (sb_provider_retry_after ("x", "3", now), 3000);
    cr_assert_eq (sb_provider_retry_after (NULL, NULL, now), -1);
    //  1764400000 is Sat, 29 Nov 2025 07:06:40 GMT.
    cr_assert_eq (sb_provider_retry_after (NULL, "Sat, 29 Nov 2025 07:07:10 GMT", now), 30000);
    cr_assert_eq (sb_provider_retry_after (NULL, "Sat, 29 Nov 2025 07:06:00 GMT", now), 0);
    cr_assert_eq (sb_provider_retry_after (NULL, "Sat, 29 Nov 2025 08:06:40 GMT", now), -1);
}

//  Each provider's way of saying the request is longer than the window
//  (tests/llm_server.py sends the same bodies), and errors that are not.
Test (provider, context_overflow_is_recognized_in_every_format)
{
    static const struct { sb_provider_kind_t kind; long status; const char *body; bool overflow; } cases [] = {
        { SB_PROVIDER_RESPONSES, 400, "{\"error\":{\"message\":\"This model's maximum context length is 37500 "
          "tokens. However, your messages resulted in 40000 tokens.\",\"type\":\"invalid_request_error\","
          "\"param\":\"messages\",\"code\":\"context_length_exceeded\"}}", true },
        { SB_PROVIDER_ANTHROPIC, 400, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
          "\"message\":\"prompt is too long: 210000 tokens > 200000 maximum\"}}", true },
        { SB_PROVIDER_CHAT, 400, "{\"error\":{\"code\":400,\"type\":\"exceed_context_size_error\","
          "\"message\":\"the request exceeds the available context size, try increasing it\"}}", true },
        { SB_PROVIDER_CHAT, 400, "{\"object\":\"error\",\"message\":\"This model's maximum context length "
          "is 4096 tokens. However, you requested 5000 tokens.\",\"type\":\"BadRequestError\"}", true },
        { SB_PROVIDER_RESPONSES, 400, "{\"error\":{\"message\":\"Invalid value for 'model'\","
          "\"type\":\"invalid_request_error\",\"code\":\"invalid_value\"}}", false },
        { SB_PROVIDER_RESPONSES, 429, "{\"error\":{\"message\":\"Rate limit reached: too many tokens per min\","
          "\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}", false },
        { SB_PROVIDER_ANTHROPIC, 401, "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\","
          "\"message\":\"invalid x-api-key\"}}", false },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases [0]; k++) {
        sb_provider_error_t err;
        sb_provider_classify_http (cases [k].kind, cases [k].status, cases [k].body, strlen (cases [k].body), &err);
        cr_assert_eq (sb_provider_error_overflow (&err), cases [k].overflow, "case %zu: %s: %s", k, err.code,
                      err.message);
        if (cases [k].overflow)
            cr_assert (!err.retryable, "case %zu: an overflow is not retried as it is", k);
    }
}
