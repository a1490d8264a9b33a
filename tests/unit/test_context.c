/*  tests/unit/test_context.c — the model's context built from tape entries
    (actors/exec/context.c). Entries are encoded and decoded as the session
    actor would hand them over; the encoded messages are checked against
    the llm.stream schema and field by field.
*/
#include "actors/exec/context.h"
#include "schemas/codec.h"
#include "schemas/schema.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define S_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define S_LSAN 1
#endif
#endif
#ifdef S_LSAN
#include <sanitizer/lsan_interface.h>
#endif

//  Under ASan, a leak fails the test itself: LeakSanitizer's report at exit
//  does not change a Criterion worker's verdict, so each test ends with this.
static void
s_no_leak (void)
{
#ifdef S_LSAN
    cr_assert_eq (__lsan_do_recoverable_leak_check (), 0, "LeakSanitizer found leaks");
#endif
}

//  Adds the entry `enc` holds (a whole map) to ctx and frees enc; the
//  decoded entry is freed at once: the context must have copied what it
//  keeps.
static int
s_add_encoded (sb_context_t *ctx, sb_enc_t *enc)
{
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (data, len, NULL, 32u << 20, &err);
    cr_assert (doc, "decode: %s", err.message);
    sb_enc_destroy (&enc);
    int rc = sb_context_add (ctx, sb_doc_root (doc));
    sb_doc_destroy (&doc);
    return rc;
}

//  Feeds one entry whose body is string pairs, NULL-terminated.
static int
s_feed (sb_context_t *ctx, uint64_t seq, const char *kind, ...)
{
    sb_enc_t *enc = sb_enc_new ();
    cr_assert (enc);
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "session_id", "01SESSION");
    sb_enc_kuint (enc, "seq", seq);
    sb_enc_kuint (enc, "ts", 1700000000000ull + seq);
    sb_enc_kstr (enc, "run_id", "01RUN");
    sb_enc_kstr (enc, "kind", kind);
    sb_enc_key (enc, "body");
    sb_enc_map_open (enc);
    va_list ap;
    va_start (ap, kind);
    const char *key;
    while ((key = va_arg (ap, const char *)))
        sb_enc_kstr (enc, key, va_arg (ap, const char *));
    va_end (ap);
    sb_enc_map_close (enc);
    sb_enc_map_close (enc);
    return s_add_encoded (ctx, enc);
}

static int
s_result (sb_context_t *ctx, uint64_t seq, const char *call_id, bool ok, const char *output)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "session_id", "01SESSION");
    sb_enc_kuint (enc, "seq", seq);
    sb_enc_kuint (enc, "ts", 1700000000000ull + seq);
    sb_enc_kstr (enc, "kind", "tool.result");
    sb_enc_key (enc, "body");
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "call_id", call_id);
    sb_enc_kbool (enc, "ok", ok);
    sb_enc_kstr (enc, "output", output);
    sb_enc_kint (enc, "exit_code", ok ? 0 : 1);
    sb_enc_kuint (enc, "duration_ms", 12);
    sb_enc_map_close (enc);
    sb_enc_map_close (enc);
    return s_add_encoded (ctx, enc);
}

//  The encoded messages, as bytes of {messages: [...]}.
static uint8_t *
s_bytes (const sb_context_t *ctx, size_t *len)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_key (enc, "messages");
    sb_context_encode (ctx, enc);
    sb_enc_map_close (enc);
    uint8_t *data = sb_enc_release (enc, len);
    sb_enc_destroy (&enc);
    return data;
}

//  The encoded messages, validated as an llm.stream request body.
static sb_doc_t *
s_decode (const sb_context_t *ctx, const sb_val_t **msgs)
{
    size_t len;
    uint8_t *data = s_bytes (ctx, &len);
    const sb_type_t *type = sb_schema_find ("llm.stream", strlen ("llm.stream"));
    cr_assert (type);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode_type (type, data, len, &err);
    cr_assert (doc, "not a valid llm.stream body: %s", err.message);
    free (data);
    *msgs = sb_get_array (sb_doc_root (doc), "messages");
    cr_assert (*msgs);
    cr_assert_eq ((*msgs)->len, sb_context_count (ctx),
                  "count %zu, encoded %u", sb_context_count (ctx), (*msgs)->len);
    return doc;
}

static const sb_val_t *
s_msg (const sb_val_t *msgs, uint32_t k)
{
    cr_assert_lt (k, msgs->len);
    const sb_val_t *m = sb_array_at (msgs, k);
    cr_assert_eq (m->type, SB_V_MAP);
    return m;
}

static void
s_expect_str (const sb_val_t *map, const char *key, const char *want)
{
    const char *got = sb_get_str (map, key);
    if (!want)
        cr_assert_null (got, "%s should be absent, is \"%s\"", key, got);
    else {
        cr_assert (got, "%s is missing", key);
        cr_assert_str_eq (got, want, "%s", key);
    }
}

static void
s_expect_tool (const sb_val_t *m, const char *call_id, const char *content)
{
    s_expect_str (m, "role", "tool");
    s_expect_str (m, "call_id", call_id);
    s_expect_str (m, "content", content);
    cr_assert_null (sb_get (m, "tool_calls"));
}

static void
s_expect_call (const sb_val_t *m, uint32_t k, const char *call_id, const char *name,
               const char *arguments)
{
    const sb_val_t *calls = sb_get_array (m, "tool_calls");
    cr_assert (calls, "tool_calls missing");
    cr_assert_lt (k, calls->len);
    const sb_val_t *c = sb_array_at (calls, k);
    s_expect_str (c, "call_id", call_id);
    s_expect_str (c, "name", name);
    s_expect_str (c, "arguments", arguments);
}

#define STATE1 "{\"type\":\"reasoning\",\"encrypted_content\":\"gAAA\"}"
#define STATE2 "{\"type\":\"reasoning\",\"encrypted_content\":\"gBBB\"}"

//  The realistic tape of one run, seqs 1 to 19.
static void
s_realistic (sb_context_t *ctx, uint64_t from, uint64_t to)
{
    for (uint64_t seq = from; seq <= to; seq++) {
        int rc = 0;
        switch (seq) {
            case 1: rc = s_feed (ctx, 1, "session.created", NULL); break;
            case 2: rc = s_feed (ctx, 2, "prompt", "text", "list the files", NULL); break;
            case 3: rc = s_feed (ctx, 3, "run.status", "run_id", "01RUN", "status", "running", NULL); break;
            case 4: rc = s_feed (ctx, 4, "turn.begin", NULL); break;
            case 5: rc = s_feed (ctx, 5, "text.delta", "text", "Let me ", NULL); break;
            case 6: rc = s_feed (ctx, 6, "text.delta", "text", "look", NULL); break;
            case 7: rc = s_feed (ctx, 7, "text.delta", "text", ".", NULL); break;
            case 8: rc = s_feed (ctx, 8, "text.done", "text", "Let me look.", NULL); break;
            case 9: rc = s_feed (ctx, 9, "reasoning.state", "provider", "responses", "data", STATE1, NULL); break;
            case 10: rc = s_feed (ctx, 10, "tool.call", "call_id", "call_1", "name", "list_dir",
                                  "arguments", "{}", NULL); break;
            case 11: rc = s_feed (ctx, 11, "tool.call", "call_id", "call_2", "name", "shell",
                                  "arguments", "{\"command\":\"ls -la\"}", NULL); break;
            case 12: rc = s_feed (ctx, 12, "tool.output", "call_id", "call_2", "text", "total 0\n", NULL); break;
            case 13: rc = s_result (ctx, 13, "call_1", true, "a.txt\nb.txt\n"); break;
            case 14: rc = s_result (ctx, 14, "call_2", true, "total 0\n"); break;
            case 15: rc = s_feed (ctx, 15, "usage", NULL); break;
            case 16: rc = s_feed (ctx, 16, "thinking.delta", "text", "hmm", NULL); break;
            case 17: rc = s_feed (ctx, 17, "text.done", "text", "Two files: a.txt and b.txt.", NULL); break;
            case 18: rc = s_feed (ctx, 18, "note", NULL); break;
            case 19: rc = s_feed (ctx, 19, "turn.end", NULL); break;
        }
        cr_assert_eq (rc, 0, "seq %llu refused: %s", (unsigned long long) seq, strerror (errno));
    }
}

static void
s_expect_realistic (const sb_context_t *ctx)
{
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 5);

    const sb_val_t *m = s_msg (msgs, 0);
    s_expect_str (m, "role", "user");
    s_expect_str (m, "content", "list the files");
    cr_assert_null (sb_get (m, "tool_calls"));
    cr_assert_null (sb_get (m, "call_id"));

    m = s_msg (msgs, 1);
    s_expect_str (m, "role", "assistant");
    s_expect_str (m, "content", "Let me look.");
    s_expect_str (m, "reasoning_state", STATE1);
    cr_assert_eq (sb_get_array (m, "tool_calls")->len, 2);
    s_expect_call (m, 0, "call_1", "list_dir", "{}");
    s_expect_call (m, 1, "call_2", "shell", "{\"command\":\"ls -la\"}");
    cr_assert_null (sb_get (m, "call_id"));

    s_expect_tool (s_msg (msgs, 2), "call_1", "a.txt\nb.txt\n");
    s_expect_tool (s_msg (msgs, 3), "call_2", "total 0\n");

    m = s_msg (msgs, 4);
    s_expect_str (m, "role", "assistant");
    s_expect_str (m, "content", "Two files: a.txt and b.txt.");
    cr_assert_null (sb_get (m, "tool_calls"));
    cr_assert_null (sb_get (m, "reasoning_state"));
    sb_doc_destroy (&doc);
}

Test (context, realistic_tape)
{
    sb_context_t *ctx = sb_context_new ();
    cr_assert (ctx);
    s_realistic (ctx, 1, 19);
    cr_assert_eq (sb_context_last_seq (ctx), 19);
    cr_assert_eq (sb_context_count (ctx), 5);
    cr_assert_eq (sb_context_unanswered (ctx, NULL, NULL, 0), 0);
    s_expect_realistic (ctx);
    sb_context_destroy (&ctx);
    cr_assert_null (ctx);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, replays_are_ignored_and_gaps_allowed)
{
    sb_context_t *ctx = sb_context_new ();
    s_realistic (ctx, 1, 19);
    size_t len1;
    uint8_t *once = s_bytes (ctx, &len1);
    //  The whole tape again, as a resubscribe would replay it.
    s_realistic (ctx, 1, 19);
    cr_assert_eq (s_feed (ctx, 19, "prompt", "text", "a replayed prompt", NULL), 0);
    cr_assert_eq (s_feed (ctx, 0, "prompt", "text", "seq zero", NULL), 0);
    cr_assert_eq (sb_context_last_seq (ctx), 19);
    size_t len2;
    uint8_t *twice = s_bytes (ctx, &len2);
    cr_assert_eq (len1, len2);
    cr_assert_eq (memcmp (once, twice, len1), 0);

    //  A gap is allowed; the seq is noted.
    cr_assert_eq (s_feed (ctx, 40, "prompt", "text", "after a gap", NULL), 0);
    cr_assert_eq (sb_context_last_seq (ctx), 40);
    cr_assert_eq (sb_context_count (ctx), 6);
    cr_assert_eq (s_feed (ctx, 30, "prompt", "text", "before the gap", NULL), 0);
    cr_assert_eq (sb_context_count (ctx), 6);
    free (once);
    free (twice);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, incremental_equals_one_shot)
{
    sb_context_t *one = sb_context_new ();
    s_realistic (one, 1, 19);
    size_t len1;
    uint8_t *a = s_bytes (one, &len1);

    //  Cut at every point, encoding in between as a cached runtime would.
    for (uint64_t cut = 1; cut < 19; cut++) {
        sb_context_t *inc = sb_context_new ();
        s_realistic (inc, 1, cut);
        size_t skip;
        free (s_bytes (inc, &skip));
        cr_assert_eq (sb_context_last_seq (inc), cut);
        s_realistic (inc, cut + 1, 19);
        size_t len2;
        uint8_t *b = s_bytes (inc, &len2);
        cr_assert_eq (len1, len2, "cut at %llu", (unsigned long long) cut);
        cr_assert_eq (memcmp (a, b, len1), 0, "cut at %llu", (unsigned long long) cut);
        free (b);
        sb_context_destroy (&inc);
    }
    free (a);
    sb_context_destroy (&one);
    s_no_leak ();
}

Test (context, unanswered_calls_get_a_synthetic_result)
{
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "go", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "turn.begin", NULL), 0);
    cr_assert_eq (s_feed (ctx, 3, "tool.call", "call_id", "c1", "name", "write_file",
                          "arguments", "{\"path\":\"x\"}", NULL), 0);
    cr_assert_eq (s_feed (ctx, 4, "tool.call", "call_id", "c2", "name", "shell",
                          "arguments", "{\"command\":\"sleep 600\"}", NULL), 0);
    cr_assert_eq (s_result (ctx, 5, "c1", true, "wrote 1 byte"), 0);
    //  The server died here, with c2 running.

    const char *ids [4] = { 0 }, *names [4] = { 0 };
    cr_assert_eq (sb_context_unanswered (ctx, ids, names, 4), 1);
    cr_assert_str_eq (ids [0], "c2");
    cr_assert_str_eq (names [0], "shell");
    cr_assert_eq (sb_context_unanswered (ctx, NULL, NULL, 0), 1);
    cr_assert_eq (sb_context_count (ctx), 4);

    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 4);
    s_expect_str (s_msg (msgs, 0), "role", "user");
    s_expect_str (s_msg (msgs, 1), "role", "assistant");
    s_expect_str (s_msg (msgs, 1), "content", NULL);
    s_expect_call (s_msg (msgs, 1), 1, "c2", "shell", "{\"command\":\"sleep 600\"}");
    s_expect_tool (s_msg (msgs, 2), "c1", "wrote 1 byte");
    s_expect_tool (s_msg (msgs, 3), "c2", SB_CONTEXT_INTERRUPTED);
    sb_doc_destroy (&doc);

    //  At resume the executor appends a real result: the synthetic one goes.
    cr_assert_eq (s_feed (ctx, 6, "run.status", "run_id", "01RUN", "status", "interrupted", NULL), 0);
    cr_assert_eq (s_result (ctx, 7, "c2", false, "interrupted by a server restart"), 0);
    cr_assert_eq (sb_context_unanswered (ctx, ids, names, 4), 0);
    doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 4);
    s_expect_tool (s_msg (msgs, 3), "c2", "error: interrupted by a server restart");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, synthetic_results_follow_their_own_message)
{
    //  A dangling call in an earlier turn, then a new prompt and turn: the
    //  synthetic result sits right after its assistant message, not at the end.
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "one", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "text.done", "text", "calling", NULL), 0);
    cr_assert_eq (s_feed (ctx, 3, "tool.call", "call_id", "x1", "name", "shell",
                          "arguments", "{}", NULL), 0);
    cr_assert_eq (s_feed (ctx, 4, "prompt", "text", "two", NULL), 0);
    cr_assert_eq (s_feed (ctx, 5, "text.done", "text", "ok", NULL), 0);

    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 5);
    s_expect_str (s_msg (msgs, 0), "content", "one");
    s_expect_call (s_msg (msgs, 1), 0, "x1", "shell", "{}");
    s_expect_tool (s_msg (msgs, 2), "x1", SB_CONTEXT_INTERRUPTED);
    s_expect_str (s_msg (msgs, 3), "content", "two");
    s_expect_str (s_msg (msgs, 4), "role", "assistant");
    sb_doc_destroy (&doc);

    //  A late real result lands in the same place, before the later prompt.
    cr_assert_eq (s_result (ctx, 6, "x1", false, "not run"), 0);
    doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 5);
    s_expect_tool (s_msg (msgs, 2), "x1", "error: not run");
    s_expect_str (s_msg (msgs, 3), "content", "two");
    s_expect_str (s_msg (msgs, 4), "content", "ok");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, failure_output_is_prefixed)
{
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "read it", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "tool.call", "call_id", "r1", "name", "read_file",
                          "arguments", "{\"path\":\"../../etc/passwd\"}", NULL), 0);
    cr_assert_eq (s_result (ctx, 3, "r1", false, "path escapes the workspace: ../../etc/passwd"), 0);
    cr_assert_eq (s_feed (ctx, 4, "tool.call", "call_id", "r2", "name", "read_file",
                          "arguments", "{\"path\":\"ok\"}", NULL), 0);
    cr_assert_eq (s_result (ctx, 5, "r2", true, "error: this text is the file's"), 0);
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 4);
    s_expect_tool (s_msg (msgs, 2), "r1", "error: path escapes the workspace: ../../etc/passwd");
    s_expect_tool (s_msg (msgs, 3), "r2", "error: this text is the file's");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, interleaved_calls_stay_in_one_step)
{
    //  call A, result A, call B, result B: one model call, one message.
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "p", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "text.done", "text", "two calls", NULL), 0);
    cr_assert_eq (s_feed (ctx, 3, "reasoning.state", "provider", "anthropic", "data", STATE1, NULL), 0);
    cr_assert_eq (s_feed (ctx, 4, "tool.call", "call_id", "a", "name", "list_dir", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_feed (ctx, 5, "tool.output", "call_id", "a", "text", "x", NULL), 0);
    cr_assert_eq (s_result (ctx, 6, "a", true, "ra"), 0);
    cr_assert_eq (s_feed (ctx, 7, "tool.call", "call_id", "b", "name", "git_status", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (ctx, 8, "b", true, "rb"), 0);
    //  usage marks the next model call: its calls make a new message.
    cr_assert_eq (s_feed (ctx, 9, "usage", NULL), 0);
    cr_assert_eq (s_feed (ctx, 10, "tool.call", "call_id", "c", "name", "shell", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (ctx, 11, "c", true, "rc"), 0);

    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 6);
    const sb_val_t *m = s_msg (msgs, 1);
    cr_assert_eq (sb_get_array (m, "tool_calls")->len, 2);
    s_expect_call (m, 0, "a", "list_dir", "{}");
    s_expect_call (m, 1, "b", "git_status", "{}");
    s_expect_str (m, "reasoning_state", STATE1);
    s_expect_tool (s_msg (msgs, 2), "a", "ra");
    s_expect_tool (s_msg (msgs, 3), "b", "rb");
    m = s_msg (msgs, 4);
    s_expect_str (m, "role", "assistant");
    s_expect_str (m, "content", NULL);
    cr_assert_eq (sb_get_array (m, "tool_calls")->len, 1);
    s_expect_call (m, 0, "c", "shell", "{}");
    s_expect_tool (s_msg (msgs, 5), "c", "rc");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, reasoning_states_and_split_text)
{
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "p", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "reasoning.state", "provider", "responses", "data", STATE1, NULL), 0);
    cr_assert_eq (s_feed (ctx, 3, "text.done", "text", "first half, ", NULL), 0);
    cr_assert_eq (s_feed (ctx, 4, "text.done", "text", "second half", NULL), 0);
    cr_assert_eq (s_feed (ctx, 5, "text.done", "text", "", NULL), 0);
    cr_assert_eq (s_feed (ctx, 6, "reasoning.state", "provider", "responses", "data", STATE2, NULL), 0);
    //  A state that is itself an array is spliced in, not nested; an empty
    //  one adds nothing.
    cr_assert_eq (s_feed (ctx, 7, "reasoning.state", "provider", "anthropic", "data", "[ ]", NULL), 0);
    cr_assert_eq (s_feed (ctx, 8, "reasoning.state", "provider", "anthropic", "data",
                          " [{\"type\":\"thinking\"},{\"type\":\"redacted_thinking\"}] ", NULL), 0);
    cr_assert_eq (s_feed (ctx, 9, "turn.end", NULL), 0);
    //  After the turn, an empty text opens no message.
    cr_assert_eq (s_feed (ctx, 10, "text.done", "text", "", NULL), 0);

    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 2);
    const sb_val_t *m = s_msg (msgs, 1);
    s_expect_str (m, "content", "first half, second half");
    s_expect_str (m, "reasoning_state",
                  "[" STATE1 "," STATE2 ",{\"type\":\"thinking\"},{\"type\":\"redacted_thinking\"}]");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, orphan_results_are_dropped)
{
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "p", NULL), 0);
    cr_assert_eq (s_result (ctx, 2, "nobody", true, "x"), 0);
    cr_assert_eq (s_feed (ctx, 3, "tool.call", "call_id", "k", "name", "shell", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (ctx, 4, "k", true, "first"), 0);
    cr_assert_eq (s_result (ctx, 5, "k", true, "second"), 0);
    cr_assert_eq (sb_context_last_seq (ctx), 5);
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 3);
    s_expect_tool (s_msg (msgs, 2), "k", "first");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, malformed_entries_change_nothing)
{
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "p", NULL), 0);
    errno = 0;
    cr_assert_eq (s_feed (ctx, 2, "tool.call", "name", "shell", NULL), -1);
    cr_assert_eq (errno, EINVAL);
    cr_assert_eq (s_feed (ctx, 2, "prompt", NULL), -1);
    cr_assert_eq (errno, EINVAL);
    cr_assert_eq (sb_context_last_seq (ctx), 1);
    cr_assert_eq (sb_context_count (ctx), 1);

    //  No seq, or no kind.
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "kind", "prompt");
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    sb_verr_t err;
    sb_doc_t *doc = sb_decode (data, len, NULL, 0, &err);
    cr_assert_eq (sb_context_add (ctx, sb_doc_root (doc)), -1);
    cr_assert_eq (errno, EINVAL);
    sb_doc_destroy (&doc);
    sb_enc_destroy (&enc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, byte_budget_refuses_growth)
{
    sb_context_t *ctx = sb_context_new ();
    sb_context_set_max_bytes (ctx, 4096);
    char big [3001];
    memset (big, 'x', 3000);
    big [3000] = 0;
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", big, NULL), 0);
    size_t held = sb_context_bytes (ctx);
    cr_assert_geq (held, 3000);
    errno = 0;
    cr_assert_eq (s_feed (ctx, 2, "text.done", "text", big, NULL), -1);
    cr_assert_eq (errno, E2BIG);
    cr_assert_eq (s_feed (ctx, 2, "tool.call", "call_id", "c", "name", "shell", "arguments", big, NULL), -1);
    cr_assert_eq (errno, E2BIG);
    //  Refused entries changed nothing, not even the cursor.
    cr_assert_eq (sb_context_last_seq (ctx), 1);
    cr_assert_eq (sb_context_count (ctx), 1);
    cr_assert_eq (sb_context_bytes (ctx), held);
    //  A small entry still fits; the budget, not the context, is full.
    cr_assert_eq (s_feed (ctx, 2, "text.done", "text", "short", NULL), 0);
    cr_assert_eq (sb_context_count (ctx), 2);
    cr_assert_leq (sb_context_bytes (ctx), 4096);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, default_budget_is_bounded, .timeout = 60)
{
    //  1 MiB prompts (the tape's largest text) until the budget refuses.
    sb_context_t *ctx = sb_context_new ();
    size_t n = 1u << 20;
    char *text = malloc (n + 1);
    cr_assert (text);
    memset (text, 'y', n);
    text [n] = 0;
    uint64_t seq = 1;
    while (s_feed (ctx, seq, "prompt", "text", text, NULL) == 0) {
        seq++;
        cr_assert_lt (seq, 100, "the default budget never refused");
    }
    cr_assert_eq (errno, E2BIG);
    cr_assert_eq (sb_context_last_seq (ctx), seq - 1);
    cr_assert_leq (sb_context_bytes (ctx), SB_CONTEXT_MAX_BYTES);
    cr_assert_gt (sb_context_bytes (ctx), SB_CONTEXT_MAX_BYTES - n - 4096);
    free (text);
    //  What is held still encodes into one llm.stream body.
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, seq - 1);
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, schema_limits_are_enforced)
{
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "many calls", NULL), 0);
    uint64_t seq = 2;
    char id [32];
    for (int k = 0; k < SB_CONTEXT_MAX_CALLS; k++) {
        snprintf (id, sizeof id, "call_%d", k);
        cr_assert_eq (s_feed (ctx, seq++, "tool.call", "call_id", id, "name", "shell",
                              "arguments", "{}", NULL), 0);
    }
    cr_assert_eq (s_feed (ctx, seq, "tool.call", "call_id", "one_too_many", "name", "shell",
                          "arguments", "{}", NULL), -1);
    cr_assert_eq (errno, E2BIG);
    cr_assert_eq (sb_context_unanswered (ctx, NULL, NULL, 0), SB_CONTEXT_MAX_CALLS);
    //  Each unanswered call counts as the message that will answer it.
    cr_assert_eq (sb_context_count (ctx), 2 + SB_CONTEXT_MAX_CALLS);

    const char *ids [8];
    cr_assert_eq (sb_context_unanswered (ctx, ids, NULL, 8), SB_CONTEXT_MAX_CALLS);
    cr_assert_str_eq (ids [0], "call_0");
    cr_assert_str_eq (ids [7], "call_7");
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    s_expect_tool (s_msg (msgs, 2 + SB_CONTEXT_MAX_CALLS - 1),
                   "call_255", SB_CONTEXT_INTERRUPTED);
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, message_count_is_bounded, .timeout = 60)
{
    sb_context_t *ctx = sb_context_new ();
    uint64_t seq = 1;
    while (s_feed (ctx, seq, "prompt", "text", "p", NULL) == 0)
        seq++;
    cr_assert_eq (errno, E2BIG);
    cr_assert_eq (sb_context_count (ctx), SB_CONTEXT_MAX_MESSAGES);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

//  ---------------------------------------------------------------------------
//  Repairs: whatever the tape holds, the messages are ones a provider takes

//  What every provider checks: call ids unique in the conversation, each
//  tool message answering a call made before it, each call answered.
static void
s_expect_provider_accepts (const sb_val_t *msgs)
{
    const char *calls [64];
    bool answered [64];
    size_t ncalls = 0;
    for (uint32_t i = 0; i < msgs->len; i++) {
        const sb_val_t *m = s_msg (msgs, i);
        const sb_val_t *tc = sb_get_array (m, "tool_calls");
        for (uint32_t k = 0; tc && k < tc->len; k++) {
            const char *id = sb_get_str (sb_array_at (tc, k), "call_id");
            cr_assert (id && *id, "messages[%u].tool_calls[%u] has no id", i, k);
            for (size_t j = 0; j < ncalls; j++)
                cr_assert_str_neq (calls [j], id, "messages[%u].tool_calls[%u]: duplicate call_id %s", i, k, id);
            cr_assert_lt (ncalls, 64);
            answered [ncalls] = false;
            calls [ncalls++] = id;
        }
        const char *role = sb_get_str (m, "role");
        if (strcmp (role, "tool") != 0)
            continue;
        const char *id = sb_get_str (m, "call_id");
        size_t j = 0;
        while (j < ncalls && strcmp (calls [j], id) != 0)
            j++;
        cr_assert_lt (j, ncalls, "messages[%u]: output for unknown call_id %s", i, id);
        cr_assert_not (answered [j], "messages[%u]: second output for %s", i, id);
        answered [j] = true;
    }
    for (size_t j = 0; j < ncalls; j++)
        cr_assert (answered [j], "call %s has no output", calls [j]);
}

Test (context, ids_repeated_across_turns_are_made_unique)
{
    //  A local server that names every call call_0: three turns, each a
    //  call and its result, then the next prompt. The tape keeps call_0.
    sb_context_t *ctx = sb_context_new ();
    uint64_t seq = 1;
    const char *outs [] = { "one", "two", "three" };
    for (int turn = 0; turn < 3; turn++) {
        cr_assert_eq (s_feed (ctx, seq++, "prompt", "text", "go", NULL), 0);
        cr_assert_eq (s_feed (ctx, seq++, "turn.begin", NULL), 0);
        cr_assert_eq (s_feed (ctx, seq++, "tool.call", "call_id", "call_0", "name", "list_dir",
                              "arguments", "{}", NULL), 0);
        cr_assert_eq (s_result (ctx, seq++, "call_0", true, outs [turn]), 0);
        cr_assert_eq (s_feed (ctx, seq++, "text.done", "text", "done", NULL), 0);
        cr_assert_eq (s_feed (ctx, seq++, "turn.end", NULL), 0);
    }
    cr_assert (sb_context_has_call_id (ctx, "call_0"));
    cr_assert (sb_context_has_call_id (ctx, "call_0_2"));
    cr_assert (sb_context_has_call_id (ctx, "call_0_3"));
    cr_assert_not (sb_context_has_call_id (ctx, "call_0_4"));

    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 12);
    s_expect_provider_accepts (msgs);
    s_expect_call (s_msg (msgs, 1), 0, "call_0", "list_dir", "{}");
    s_expect_tool (s_msg (msgs, 2), "call_0", "one");
    s_expect_call (s_msg (msgs, 5), 0, "call_0_2", "list_dir", "{}");
    s_expect_tool (s_msg (msgs, 6), "call_0_2", "two");
    s_expect_call (s_msg (msgs, 9), 0, "call_0_3", "list_dir", "{}");
    s_expect_tool (s_msg (msgs, 10), "call_0_3", "three");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, ids_repeated_within_one_step_pair_in_order)
{
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "go", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "tool.call", "call_id", "call_0", "name", "read_file",
                          "arguments", "{\"path\":\"a\"}", NULL), 0);
    cr_assert_eq (s_feed (ctx, 3, "tool.call", "call_id", "call_0", "name", "read_file",
                          "arguments", "{\"path\":\"b\"}", NULL), 0);
    cr_assert_eq (s_feed (ctx, 4, "tool.call", "call_id", "call_0", "name", "read_file",
                          "arguments", "{\"path\":\"c\"}", NULL), 0);
    cr_assert_eq (s_result (ctx, 5, "call_0", true, "A"), 0);
    cr_assert_eq (s_result (ctx, 6, "call_0", true, "B"), 0);

    //  The third is unanswered: resume sees it by its tape id, and a
    //  result with that id answers it.
    const char *ids [4] = { 0 }, *names [4] = { 0 };
    cr_assert_eq (sb_context_unanswered (ctx, ids, names, 4), 1);
    cr_assert_str_eq (ids [0], "call_0");

    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 5);
    s_expect_provider_accepts (msgs);
    const sb_val_t *m = s_msg (msgs, 1);
    s_expect_call (m, 0, "call_0", "read_file", "{\"path\":\"a\"}");
    s_expect_call (m, 1, "call_0_2", "read_file", "{\"path\":\"b\"}");
    s_expect_call (m, 2, "call_0_3", "read_file", "{\"path\":\"c\"}");
    s_expect_tool (s_msg (msgs, 2), "call_0", "A");
    s_expect_tool (s_msg (msgs, 3), "call_0_2", "B");
    s_expect_tool (s_msg (msgs, 4), "call_0_3", SB_CONTEXT_INTERRUPTED);
    sb_doc_destroy (&doc);

    cr_assert_eq (s_result (ctx, 7, ids [0], false, "interrupted"), 0);
    cr_assert_eq (sb_context_unanswered (ctx, NULL, NULL, 0), 0);
    doc = s_decode (ctx, &msgs);
    s_expect_provider_accepts (msgs);
    s_expect_tool (s_msg (msgs, 4), "call_0_3", "error: interrupted");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, a_renamed_id_never_takes_a_later_one)
{
    //  call_0 twice makes call_0_2; a model that then names a call
    //  call_0_2 itself gets call_0_2_2, and each result finds its call.
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "go", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "tool.call", "call_id", "call_0", "name", "shell", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (ctx, 3, "call_0", true, "first"), 0);
    cr_assert_eq (s_feed (ctx, 4, "usage", NULL), 0);
    cr_assert_eq (s_feed (ctx, 5, "tool.call", "call_id", "call_0", "name", "shell", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (ctx, 6, "call_0", true, "second"), 0);
    cr_assert_eq (s_feed (ctx, 7, "usage", NULL), 0);
    cr_assert_eq (s_feed (ctx, 8, "tool.call", "call_id", "call_0_2", "name", "shell", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (ctx, 9, "call_0_2", true, "third"), 0);
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 7);
    s_expect_provider_accepts (msgs);
    s_expect_tool (s_msg (msgs, 2), "call_0", "first");
    s_expect_tool (s_msg (msgs, 4), "call_0_2", "second");
    s_expect_call (s_msg (msgs, 5), 0, "call_0_2_2", "shell", "{}");
    s_expect_tool (s_msg (msgs, 6), "call_0_2_2", "third");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, an_output_without_its_call_is_dropped)
{
    //  An output whose call is not on the tape (before it, or never), next
    //  to one whose call is: only the paired one reaches the model.
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "go", NULL), 0);
    cr_assert_eq (s_result (ctx, 2, "later", true, "too early"), 0);
    cr_assert_eq (s_feed (ctx, 3, "tool.call", "call_id", "later", "name", "shell", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (ctx, 4, "never_called", true, "orphan"), 0);
    cr_assert_eq (s_result (ctx, 5, "later", true, "in time"), 0);
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 3);
    s_expect_provider_accepts (msgs);
    s_expect_tool (s_msg (msgs, 2), "later", "in time");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, a_call_without_its_output_is_answered)
{
    //  Calls left without a result in two turns, the second turn's with a
    //  repeated id: each gets the synthetic output, after its own step.
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "one", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "tool.call", "call_id", "call_0", "name", "shell", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_feed (ctx, 3, "turn.end", NULL), 0);
    cr_assert_eq (s_feed (ctx, 4, "prompt", "text", "two", NULL), 0);
    cr_assert_eq (s_feed (ctx, 5, "tool.call", "call_id", "call_0", "name", "shell", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_feed (ctx, 6, "turn.end", NULL), 0);
    cr_assert_eq (s_feed (ctx, 7, "prompt", "text", "three", NULL), 0);
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 7);
    s_expect_provider_accepts (msgs);
    s_expect_tool (s_msg (msgs, 2), "call_0", SB_CONTEXT_INTERRUPTED);
    s_expect_tool (s_msg (msgs, 5), "call_0_2", SB_CONTEXT_INTERRUPTED);
    s_expect_str (s_msg (msgs, 6), "content", "three");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, empty_ids_and_names_are_given_one)
{
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "go", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "tool.call", "call_id", "", "name", "", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (ctx, 3, "", true, "ran"), 0);
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 3);
    s_expect_provider_accepts (msgs);
    s_expect_call (s_msg (msgs, 1), 0, "call_2", "unknown_tool", "{}");
    s_expect_tool (s_msg (msgs, 2), "call_2", "ran");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

//  ---------------------------------------------------------------------------
//  Compaction (docs/compaction.md)

static int
s_compacted (sb_context_t *ctx, uint64_t seq, uint64_t through, const char *method, const char *summary)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "session_id", "01SESSION");
    sb_enc_kuint (enc, "seq", seq);
    sb_enc_kuint (enc, "ts", 1700000000000ull + seq);
    sb_enc_kstr (enc, "kind", "context.compacted");
    sb_enc_key (enc, "body");
    sb_enc_map_open (enc);
    sb_enc_kuint (enc, "through_seq", through);
    sb_enc_kstr (enc, "summary", summary ? summary : "");
    sb_enc_kuint (enc, "tokens_before", 1000);
    sb_enc_kuint (enc, "tokens_after", 100);
    sb_enc_kstr (enc, "method", method);
    sb_enc_map_close (enc);
    sb_enc_map_close (enc);
    return s_add_encoded (ctx, enc);
}

//  A text of n bytes: a head mark, filler, a tail mark.
static char *
s_big (size_t n, const char *head, const char *tail)
{
    char *s = malloc (n + 1);
    cr_assert (s);
    memset (s, 'x', n);
    memcpy (s, head, strlen (head));
    memcpy (s + n - strlen (tail), tail, strlen (tail));
    s [n] = 0;
    return s;
}

//  Two steps, each a call with a 10 kB output: seqs 1 to 7.
static void
s_two_steps (sb_context_t *ctx)
{
    char *out1 = s_big (10000, "HEAD-ONE", "TAIL-ONE");
    char *out2 = s_big (10000, "HEAD-TWO", "TAIL-TWO");
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "read both", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "text.done", "text", "first", NULL), 0);
    cr_assert_eq (s_feed (ctx, 3, "tool.call", "call_id", "c1", "name", "read_file", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (ctx, 4, "c1", true, out1), 0);
    cr_assert_eq (s_feed (ctx, 5, "text.done", "text", "second", NULL), 0);
    cr_assert_eq (s_feed (ctx, 6, "tool.call", "call_id", "c2", "name", "read_file", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (ctx, 7, "c2", true, out2), 0);
    free (out1);
    free (out2);
}

Test (context, plan_keeps_the_newest_step_and_cuts_before_it)
{
    sb_context_t *ctx = sb_context_new ();
    s_two_steps (ctx);
    sb_context_plan_t plan;
    cr_assert_eq (sb_context_plan (ctx, 100, &plan), 0);
    //  [prompt, A(c1), T(c1), A(c2), T(c2)]: the newest step starts at 3
    cr_assert_eq (plan.cut, 3);
    cr_assert_eq (plan.through_seq, 4);
    cr_assert (!plan.tail_fits);
    cr_assert (plan.summarizable);
    cr_assert_gt (plan.elidable, 7000);
    cr_assert_eq (plan.bytes, sb_context_bytes (ctx));
    cr_assert_eq (plan.elided_bytes, plan.bytes - plan.elidable);
    //  with room for everything but the prompt, only the prompt is before the cut
    cr_assert_eq (sb_context_plan (ctx, plan.bytes - 10, &plan), 0);
    cr_assert_eq (plan.cut, 1);
    cr_assert_eq (plan.elidable, 0);
    //  room for all: nothing to compact
    cr_assert_eq (sb_context_plan (ctx, plan.bytes * 2, &plan), -1);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, elide_cuts_old_outputs_to_head_and_tail)
{
    sb_context_t *ctx = sb_context_new ();
    s_two_steps (ctx);
    size_t before = sb_context_bytes (ctx);
    cr_assert_eq (s_compacted (ctx, 8, 4, "elide", NULL), 0);
    cr_assert_eq (sb_context_last_seq (ctx), 8);
    cr_assert_lt (sb_context_bytes (ctx), before - 7000);
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 5);
    const char *old = sb_get_str (s_msg (msgs, 2), "content");
    cr_assert (strncmp (old, "HEAD-ONE", 8) == 0);
    cr_assert (strstr (old, "TAIL-ONE"));
    cr_assert (strstr (old, "bytes elided to fit the model's context window"));
    cr_assert_lt (strlen (old), 2000);
    //  the newest step is whole
    const char *newest = sb_get_str (s_msg (msgs, 4), "content");
    cr_assert_eq (strlen (newest), 10000);
    s_expect_call (s_msg (msgs, 1), 0, "c1", "read_file", "{}");
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, summary_replaces_what_precedes_the_cut_and_replays_alike)
{
    sb_context_t *ctx = sb_context_new ();
    s_two_steps (ctx);
    cr_assert_eq (s_compacted (ctx, 8, 4, "summary", "they read c1"), 0);
    cr_assert_eq (s_feed (ctx, 9, "prompt", "text", "and now?", NULL), 0);
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 4);
    s_expect_str (s_msg (msgs, 0), "role", "user");
    s_expect_str (s_msg (msgs, 0), "content", SB_CONTEXT_SUMMARY_PREFIX "they read c1");
    s_expect_call (s_msg (msgs, 1), 0, "c2", "read_file", "{}");
    s_expect_str (s_msg (msgs, 2), "role", "tool");
    s_expect_str (s_msg (msgs, 3), "content", "and now?");
    sb_doc_destroy (&doc);
    //  the entries fed one by one or again from seq 1 give the same context
    sb_context_t *again = sb_context_new ();
    s_two_steps (again);
    cr_assert_eq (s_compacted (again, 8, 4, "summary", "they read c1"), 0);
    cr_assert_eq (s_feed (again, 9, "prompt", "text", "and now?", NULL), 0);
    size_t la, lb;
    uint8_t *a = s_bytes (ctx, &la), *b = s_bytes (again, &lb);
    cr_assert (la == lb && memcmp (a, b, la) == 0);
    cr_assert_eq (sb_context_bytes (ctx), sb_context_bytes (again));
    free (a);
    free (b);
    //  a later summary folds the earlier one in: it is before the cut
    sb_context_plan_t plan;
    cr_assert_eq (sb_context_plan (ctx, 10, &plan), 0);
    cr_assert_eq (plan.cut, 3);
    cr_assert (plan.summarizable);
    cr_assert_eq (s_compacted (ctx, 10, plan.through_seq, "summary", "all of it"), 0);
    doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 2);
    s_expect_str (s_msg (msgs, 0), "content", SB_CONTEXT_SUMMARY_PREFIX "all of it");
    //  and then only the summary precedes the newest step: nothing to gain
    cr_assert_eq (sb_context_plan (ctx, 10, &plan), 0);
    cr_assert (!plan.summarizable);
    sb_doc_destroy (&doc);
    sb_context_destroy (&again);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, a_cut_never_parts_a_call_from_its_late_output)
{
    sb_context_t *ctx = sb_context_new ();
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "one", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "tool.call", "call_id", "c1", "name", "shell", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_feed (ctx, 3, "prompt", "text", "two", NULL), 0);
    //  c1's result comes after the second prompt: it sits right after c1
    cr_assert_eq (s_result (ctx, 4, "c1", true, "late"), 0);
    sb_context_plan_t plan;
    cr_assert_eq (sb_context_plan (ctx, 1, &plan), 0);
    cr_assert_eq (plan.cut, 3);
    cr_assert_eq (plan.through_seq, 2);
    cr_assert_eq (s_compacted (ctx, 5, plan.through_seq, "summary", "s"), 0);
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 2);
    s_expect_str (s_msg (msgs, 1), "content", "two");
    sb_doc_destroy (&doc);
    //  an output for a call that was summarized away is dropped, not orphaned
    cr_assert_eq (s_result (ctx, 6, "c1", true, "again"), 0);
    doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 2);
    sb_doc_destroy (&doc);
    //  an unknown method changes nothing; a compaction without its fields is refused
    cr_assert_eq (s_compacted (ctx, 7, 6, "future", NULL), 0);
    cr_assert_eq (sb_context_count (ctx), 2);
    cr_assert_eq (s_feed (ctx, 8, "context.compacted", "method", "summary", NULL), -1);
    cr_assert_eq (errno, EINVAL);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, the_summary_request_is_clipped_and_ends_with_the_instruction)
{
    sb_context_t *ctx = sb_context_new ();
    s_two_steps (ctx);
    char *args = s_big (5000, "{\"a\":\"", "\"}");
    cr_assert_eq (s_feed (ctx, 8, "text.done", "text", "third", NULL), 0);
    cr_assert_eq (s_feed (ctx, 9, "tool.call", "call_id", "c3", "name", "write_file", "arguments", args, NULL), 0);
    free (args);
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_key (enc, "messages");
    sb_context_encode_head (ctx, 0, 6, 1000, "summarize please", enc);
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    const sb_type_t *type = sb_schema_find ("llm.stream", strlen ("llm.stream"));
    sb_verr_t err;
    sb_doc_t *doc = sb_decode_type (type, data, len, &err);
    cr_assert (doc, "%s", err.message);
    cr_assert_lt (len, 6000);
    const sb_val_t *msgs = sb_get_array (sb_doc_root (doc), "messages");
    //  the six messages, the synthetic answer of c3, and the instruction last
    cr_assert_eq (msgs->len, 8);
    s_expect_str (s_msg (msgs, 6), "content", SB_CONTEXT_INTERRUPTED);
    s_expect_str (s_msg (msgs, 7), "content", "summarize please");
    cr_assert (strstr (sb_get_str (s_msg (msgs, 2), "content"), "elided"));
    //  a long argument is replaced by JSON that says so
    const sb_val_t *calls = sb_get_array (s_msg (msgs, 5), "tool_calls");
    cr_assert (calls);
    cr_assert (strstr (sb_get_str (sb_array_at (calls, 0), "arguments"), "\"elided\""));
    sb_doc_destroy (&doc);
    sb_enc_destroy (&enc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

Test (context, seeding_from_the_newest_summary_equals_replaying_all)
{
    //  the whole tape: two steps, a summary through 4 (at 8), a third step
    //  with a big output, an elision (at 13), a prompt
    char *out3 = s_big (9000, "HEAD-3", "TAIL-3");
    sb_context_t *full = sb_context_new ();
    s_two_steps (full);
    cr_assert_eq (s_compacted (full, 8, 4, "summary", "summed up"), 0);
    cr_assert_eq (s_feed (full, 9, "text.done", "text", "third", NULL), 0);
    cr_assert_eq (s_feed (full, 10, "tool.call", "call_id", "c3", "name", "read_file", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (full, 11, "c3", true, out3), 0);
    cr_assert_eq (s_feed (full, 12, "text.done", "text", "fourth", NULL), 0);
    cr_assert_eq (s_compacted (full, 13, 11, "elide", NULL), 0);
    cr_assert_eq (s_feed (full, 14, "prompt", "text", "next", NULL), 0);

    //  the same from the summary on: seeded at 4, fed from 5
    sb_context_t *seeded = sb_context_new ();
    cr_assert_eq (sb_context_seed (seeded, 4, "summed up", strlen ("summed up")), 0);
    cr_assert_eq (sb_context_last_seq (seeded), 4);
    cr_assert_eq (s_feed (seeded, 5, "text.done", "text", "second", NULL), 0);
    cr_assert_eq (s_feed (seeded, 6, "tool.call", "call_id", "c2", "name", "read_file", "arguments", "{}", NULL), 0);
    char *out2 = s_big (10000, "HEAD-TWO", "TAIL-TWO");
    cr_assert_eq (s_result (seeded, 7, "c2", true, out2), 0);
    free (out2);
    cr_assert_eq (s_compacted (seeded, 8, 4, "summary", "summed up"), 0);
    cr_assert_eq (s_feed (seeded, 9, "text.done", "text", "third", NULL), 0);
    cr_assert_eq (s_feed (seeded, 10, "tool.call", "call_id", "c3", "name", "read_file", "arguments", "{}", NULL), 0);
    cr_assert_eq (s_result (seeded, 11, "c3", true, out3), 0);
    cr_assert_eq (s_feed (seeded, 12, "text.done", "text", "fourth", NULL), 0);
    cr_assert_eq (s_compacted (seeded, 13, 11, "elide", NULL), 0);
    cr_assert_eq (s_feed (seeded, 14, "prompt", "text", "next", NULL), 0);
    free (out3);

    size_t la, lb;
    uint8_t *a = s_bytes (full, &la), *b = s_bytes (seeded, &lb);
    cr_assert (la == lb && memcmp (a, b, la) == 0, "seeded %zu bytes, full %zu", lb, la);
    cr_assert_eq (sb_context_bytes (full), sb_context_bytes (seeded));
    //  the elision reached the outputs before the newest step
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (seeded, &msgs);
    cr_assert (strstr (sb_get_str (s_msg (msgs, 2), "content"), "elided"));
    cr_assert (strstr (sb_get_str (s_msg (msgs, 4), "content"), "HEAD-3"));
    cr_assert (strstr (sb_get_str (s_msg (msgs, 4), "content"), "elided"));
    sb_doc_destroy (&doc);
    //  only an empty context is seeded
    cr_assert_eq (sb_context_seed (seeded, 20, "x", 1), -1);
    cr_assert_eq (errno, EINVAL);
    free (a);
    free (b);
    sb_context_destroy (&full);
    sb_context_destroy (&seeded);
    s_no_leak ();
}

//  A conversation rewind's cuts (docs/checkpoints.md): entries inside a
//  cut are skipped, their seqs noted; nested cuts leave the history as it
//  was at the inner seq; cuts are set on an empty context only.
Test (context, cuts_skip_the_entries_they_hold)
{
    sb_context_t *ctx = sb_context_new ();
    uint64_t after [] = { 2, 6 }, before [] = { 5, 9 };
    cr_assert_eq (sb_context_set_cuts (ctx, after, before, 2), 0);
    cr_assert_eq (s_feed (ctx, 1, "prompt", "text", "kept one", NULL), 0);
    cr_assert_eq (s_feed (ctx, 2, "text.done", "text", "kept answer", NULL), 0);
    cr_assert_eq (s_feed (ctx, 3, "prompt", "text", "cut prompt", NULL), 0);
    cr_assert_eq (s_feed (ctx, 4, "text.done", "text", "cut answer", NULL), 0);
    cr_assert_eq (s_feed (ctx, 5, "note", NULL), 0);
    cr_assert_eq (s_feed (ctx, 6, "prompt", "text", "kept two", NULL), 0);
    cr_assert_eq (s_feed (ctx, 7, "prompt", "text", "cut again", NULL), 0);
    cr_assert_eq (s_feed (ctx, 9, "prompt", "text", "kept three", NULL), 0);
    cr_assert_eq (sb_context_last_seq (ctx), 9);
    cr_assert (sb_context_is_cut (ctx, 3) && sb_context_is_cut (ctx, 8));
    cr_assert (!sb_context_is_cut (ctx, 2) && !sb_context_is_cut (ctx, 5) && !sb_context_is_cut (ctx, 9));
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 4, "messages: %u", msgs->len);
    const char *want [] = { "kept one", "kept answer", "kept two", "kept three" };
    for (uint32_t k = 0; k < 4; k++)
        cr_assert_str_eq (sb_get_str (sb_array_at (msgs, k), "content"), want [k]);
    sb_doc_destroy (&doc);
    errno = 0;
    cr_assert_eq (sb_context_set_cuts (ctx, after, before, 1), -1, "cuts set on a context in use");
    cr_assert_eq (errno, EINVAL);
    sb_context_destroy (&ctx);
    s_no_leak ();
}

//  ---------------------------------------------------------------------------
//  Images (docs/images.md)

//  A prompt entry with one image reference (its `sent` copy when sent).
static int
s_image_prompt (sb_context_t *ctx, uint64_t seq, const char *text, const char *sha, const char *sent)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "session_id", "01SESSION");
    sb_enc_kuint (enc, "seq", seq);
    sb_enc_kuint (enc, "ts", 1700000000000ull + seq);
    sb_enc_kstr (enc, "kind", "prompt");
    sb_enc_key (enc, "body");
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "text", text);
    sb_enc_key (enc, "images");
    sb_enc_array_open (enc);
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "sha256", sha);
    sb_enc_kstr (enc, "mime", "image/png");
    sb_enc_kuint (enc, "bytes", 3000000);
    sb_enc_kuint (enc, "width", 4000);
    sb_enc_kuint (enc, "height", 3000);
    sb_enc_kstr (enc, "name", "shot.png");
    if (sent) {
        sb_enc_key (enc, "sent");
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "sha256", sent);
        sb_enc_kstr (enc, "mime", "image/jpeg");
        sb_enc_kuint (enc, "bytes", 5);
        sb_enc_kuint (enc, "width", 2048);
        sb_enc_kuint (enc, "height", 1536);
        sb_enc_map_close (enc);
    }
    sb_enc_map_close (enc);
    sb_enc_array_close (enc);
    sb_enc_map_close (enc);
    sb_enc_map_close (enc);
    return s_add_encoded (ctx, enc);
}

//  The loader: "JPEG!" for the blob "s...", nothing for any other.
static uint8_t *
s_load (void *arg, const char *sha256, size_t *len)
{
    (*(int *) arg)++;
    if (sha256 [0] != 's')
        return NULL;
    uint8_t *d = malloc (5);
    memcpy (d, "JPEG!", 5);
    *len = 5;
    return d;
}

Test (context, images_sent_copy_loaded_and_described_by_compaction)
{
    sb_context_t *ctx = sb_context_new ();
    int loads = 0;
    sb_context_set_blob_loader (ctx, s_load, &loads);
    cr_assert_eq (s_image_prompt (ctx, 1, "look", "o1", "s1"), 0);
    //  an image counts by its pixels, not its 3 MB
    cr_assert_lt (sb_context_bytes (ctx), 100000);
    cr_assert_eq (s_feed (ctx, 2, "text.done", "text", "a cat", NULL), 0);
    cr_assert_eq (s_image_prompt (ctx, 3, "and this", "o2", NULL), 0);
    const sb_val_t *msgs;
    sb_doc_t *doc = s_decode (ctx, &msgs);
    cr_assert_eq (msgs->len, 3);
    //  the sent copy is what goes, with its bytes
    const sb_val_t *im = sb_array_at (sb_get_array (s_msg (msgs, 0), "images"), 0);
    cr_assert_str_eq (sb_get_str (im, "mime"), "image/jpeg");
    cr_assert_str_eq (sb_get_str (im, "sha256"), "s1");
    size_t dlen;
    const char *d = sb_get_bin (im, "data", &dlen);
    cr_assert (d && dlen == 5 && memcmp (d, "JPEG!", 5) == 0);
    cr_assert_str_eq (sb_get_str (s_msg (msgs, 0), "content"), "look");
    //  one the loader cannot read is left out, and the text says so
    cr_assert_null (sb_get_array (s_msg (msgs, 2), "images"));
    cr_assert (strstr (sb_get_str (s_msg (msgs, 2), "content"), "could not be read"));
    sb_doc_destroy (&doc);
    //  compaction: the old image gives way to a line that keeps its hash
    cr_assert_eq (s_compacted (ctx, 4, 2, "elide", NULL), 0);
    doc = s_decode (ctx, &msgs);
    cr_assert_null (sb_get_array (s_msg (msgs, 0), "images"));
    const char *line = sb_get_str (s_msg (msgs, 0), "content");
    cr_assert (strstr (line, "look\n[image shot.png: image/png 4000x3000, 3000000 bytes, sha256 o1]"), "%s", line);
    //  the newest prompt keeps its image: still asked of the loader, not
    //  described
    const char *newest = sb_get_str (s_msg (msgs, 2), "content");
    cr_assert (strstr (newest, "could not be read") && !strstr (newest, "[image shot.png"), "%s", newest);
    sb_doc_destroy (&doc);
    sb_context_destroy (&ctx);
    s_no_leak ();
}
