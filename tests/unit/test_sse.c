/*  tests/unit/test_sse.c — the WHATWG event-stream parser.

    Events are recorded as one canonical byte string per stream, so that two
    ways of feeding the same bytes can be compared whole.
*/
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/llm/sse.h"
#include "tests/common/fixtures.h"

typedef struct {
    char *p;
    size_t len;
    size_t cap;
    int count;
    int stop_after;         // abort once this many events were seen (0: never)
} rec_t;

static void
rec_put (rec_t *r, const char *s, size_t n)
{
    if (r->len + n + 1 > r->cap) {
        r->cap = (r->len + n + 1) * 2;
        r->p = realloc (r->p, r->cap);
        cr_assert_not_null (r->p);
    }
    memcpy (r->p + r->len, s, n);
    r->len += n;
    r->p [r->len] = 0;
}

//  event \x1f data \x1f id \x1e — data may hold any byte, its length says where it ends.
static int
rec_cb (const char *event, const char *data, size_t len, const char *id, void *ctx)
{
    rec_t *r = ctx;
    cr_assert_eq (data [len], 0, "data must be NUL-terminated");
    char head [32];
    rec_put (r, event, strlen (event));
    snprintf (head, sizeof head, "\x1f%zu:", len);
    rec_put (r, head, strlen (head));
    rec_put (r, data, len);
    rec_put (r, "\x1f", 1);
    rec_put (r, id, strlen (id));
    rec_put (r, "\x1e", 1);
    r->count++;
    return r->stop_after && r->count >= r->stop_after;
}

static void
rec_free (rec_t *r)
{
    free (r->p);
    memset (r, 0, sizeof *r);
}

//  Feeds the whole input with the given split sizes (cycled), returns finish().
static int
feed_split (const char *in, size_t len, const size_t *steps, size_t nsteps, rec_t *r)
{
    sb_sse_t *sse = sb_sse_new (0);
    cr_assert_not_null (sse);
    size_t off = 0, k = 0;
    while (off < len) {
        size_t n = steps [k++ % nsteps];
        if (n > len - off)
            n = len - off;
        cr_assert_eq (sb_sse_feed (sse, in + off, n, rec_cb, r), SB_SSE_OK);
        off += n;
    }
    int rc = sb_sse_finish (sse);
    sb_sse_destroy (&sse);
    cr_assert_null (sse);
    return rc;
}

static int
feed_all (const char *in, rec_t *r)
{
    size_t whole = strlen (in);
    return feed_split (in, whole, &whole, 1, r);
}

static void
expect (const char *in, const char *want)
{
    rec_t r = { 0 };
    feed_all (in, &r);
    cr_assert_str_eq (r.p? r.p: "", want, "input %s", in);
    rec_free (&r);
}

#define EV(event, data, id) event "\x1f" data "\x1f" id "\x1e"

Test (sse, single_event_defaults_to_message)
{
    expect ("data: hello\n\n", EV ("message", "5:hello", ""));
}

Test (sse, event_and_id_fields)
{
    expect ("event: ping\nid: 7\ndata: x\n\n", EV ("ping", "1:x", "7"));
}

Test (sse, multiline_data_joined_with_lf)
{
    expect ("data: a\ndata: b\ndata:\ndata: c\n\n", EV ("message", "6:a\nb\n\nc", ""));
}

Test (sse, one_leading_space_dropped_only)
{
    expect ("data:x\n\n", EV ("message", "1:x", ""));
    expect ("data:  two\n\n", EV ("message", "4: two", ""));
    expect ("data: a: b\n\n", EV ("message", "4:a: b", ""));
}

Test (sse, comments_are_ignored)
{
    expect (": keepalive\n:\ndata: a\n: inside\n\n", EV ("message", "1:a", ""));
    expect (": only a comment\n\n", "");
}

Test (sse, field_without_colon)
{
    //  "data" alone appends an empty line: the event has empty data.
    expect ("data\n\n", EV ("message", "0:", ""));
    expect ("data\ndata\n\n", EV ("message", "1:\n", ""));
    //  "event" alone resets the type to the default.
    expect ("event: x\nevent\ndata: y\n\n", EV ("message", "1:y", ""));
    expect ("bogus\ndata: z\n\n", EV ("message", "1:z", ""));
}

Test (sse, no_data_no_dispatch)
{
    //  The event type does not leak into the next event either.
    expect ("event: lonely\n\ndata: x\n\n", EV ("message", "1:x", ""));
}

Test (sse, unknown_fields_ignored)
{
    expect ("foo: bar\nDATA: no\ndata : no\ndata: yes\n\n", EV ("message", "3:yes", ""));
}

Test (sse, id_persists_and_resets)
{
    expect ("id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n",
            EV ("message", "1:a", "1") EV ("message", "1:b", "1") EV ("message", "1:c", ""));
}

Test (sse, id_with_nul_is_ignored)
{
    rec_t r = { 0 };
    static const char in [] = "id: ok\ndata: a\n\nid: b\0d\ndata: b\n\n";
    size_t len = sizeof in - 1;
    cr_assert_eq (feed_split (in, len, &len, 1, &r), SB_SSE_OK);
    cr_assert_str_eq (r.p, EV ("message", "1:a", "ok") EV ("message", "1:b", "ok"));
    rec_free (&r);
}

Test (sse, nul_in_data_kept)
{
    rec_t r = { 0 };
    static const char in [] = "data: a\0b\n\n";
    size_t len = sizeof in - 1;
    cr_assert_eq (feed_split (in, len, &len, 1, &r), SB_SSE_OK);
    static const char want [] = "message\x1f" "3:a\0b\x1f\x1e";
    cr_assert_eq (r.len, sizeof want - 1);
    cr_assert_eq (memcmp (r.p, want, r.len), 0);
    rec_free (&r);
}

Test (sse, event_type_starting_with_nul_reads_as_message)
{
    rec_t r = { 0 };
    static const char in [] = "event: \0x\ndata: y\n\n";
    size_t len = sizeof in - 1;
    cr_assert_eq (feed_split (in, len, &len, 1, &r), SB_SSE_OK);
    cr_assert_str_eq (r.p, EV ("message", "1:y", ""));
    rec_free (&r);
}

Test (sse, retry_field)
{
    sb_sse_t *sse = sb_sse_new (0);
    cr_assert_eq (sb_sse_retry_ms (sse), -1);
    cr_assert_eq (sb_sse_feed (sse, "retry: 1500\n", 12, NULL, NULL), 0);
    cr_assert_eq (sb_sse_retry_ms (sse), 1500);
    //  Not all digits: ignored.
    cr_assert_eq (sb_sse_feed (sse, "retry: 2s\nretry: -1\nretry:\n", 27, NULL, NULL), 0);
    cr_assert_eq (sb_sse_retry_ms (sse), 1500);
    sb_sse_destroy (&sse);
}

Test (sse, line_endings_lf_cr_crlf_mixed)
{
    const char *want = EV ("message", "3:a\nb", "") EV ("e", "1:c", "");
    expect ("data: a\ndata: b\n\nevent: e\ndata: c\n\n", want);
    expect ("data: a\rdata: b\r\revent: e\rdata: c\r\r", want);
    expect ("data: a\r\ndata: b\r\n\r\nevent: e\r\ndata: c\r\n\r\n", want);
    expect ("data: a\rdata: b\n\r\nevent: e\r\ndata: c\n\r", want);
}

Test (sse, cr_then_lf_across_feeds_is_one_line_ending)
{
    sb_sse_t *sse = sb_sse_new (0);
    rec_t r = { 0 };
    //  Were the LF a second line ending, it would dispatch "a" alone.
    cr_assert_eq (sb_sse_feed (sse, "data: a\r", 8, rec_cb, &r), 0);
    cr_assert_eq (sb_sse_feed (sse, "\ndata: b\r", 9, rec_cb, &r), 0);
    cr_assert_eq (r.count, 0);
    cr_assert_eq (sb_sse_feed (sse, "\n", 1, rec_cb, &r), 0);
    cr_assert_eq (r.count, 0);
    cr_assert_eq (sb_sse_feed (sse, "\r", 1, rec_cb, &r), 0);
    cr_assert_eq (r.count, 1);
    cr_assert_str_eq (r.p, EV ("message", "3:a\nb", ""));
    //  The CR was itself a blank line; a following LF is its ending, not another.
    cr_assert_eq (sb_sse_feed (sse, "\n", 1, rec_cb, &r), 0);
    cr_assert_eq (sb_sse_finish (sse), SB_SSE_OK);
    cr_assert_eq (r.count, 1);
    sb_sse_destroy (&sse);
    rec_free (&r);
}

Test (sse, cr_then_empty_feed_then_lf)
{
    sb_sse_t *sse = sb_sse_new (0);
    rec_t r = { 0 };
    cr_assert_eq (sb_sse_feed (sse, "data: a\r", 8, rec_cb, &r), 0);
    cr_assert_eq (sb_sse_feed (sse, "", 0, rec_cb, &r), 0);
    cr_assert_eq (sb_sse_feed (sse, "\n\n", 2, rec_cb, &r), 0);
    cr_assert_eq (r.count, 1);
    cr_assert_str_eq (r.p, EV ("message", "1:a", ""));
    sb_sse_destroy (&sse);
    rec_free (&r);
}

Test (sse, bom_skipped_once)
{
    expect ("\xEF\xBB\xBF" "data: a\n\n", EV ("message", "1:a", ""));
    //  A second BOM is part of the next field's name: no event.
    expect ("\xEF\xBB\xBF\xEF\xBB\xBF" "data: a\n\n", "");
    //  A BOM later in the stream is not special either.
    expect ("data: a\n\n\xEF\xBB\xBF" "data: b\n\n", EV ("message", "1:a", ""));
}

Test (sse, bom_split_across_feeds)
{
    static const char in [] = "\xEF\xBB\xBF" "data: a\n\n";
    size_t one = 1;
    rec_t r = { 0 };
    cr_assert_eq (feed_split (in, sizeof in - 1, &one, 1, &r), SB_SSE_OK);
    cr_assert_str_eq (r.p, EV ("message", "1:a", ""));
    rec_free (&r);
}

Test (sse, bom_prefix_that_is_not_a_bom_is_kept)
{
    //  "\xEF\xBB" then 'd': the two bytes start the field name, which is
    //  then not "data", so nothing is dispatched. Dropping them would
    //  dispatch "a".
    sb_sse_t *sse = sb_sse_new (0);
    rec_t r = { 0 };
    cr_assert_eq (sb_sse_feed (sse, "\xEF", 1, rec_cb, &r), 0);
    cr_assert_eq (sb_sse_feed (sse, "\xBB", 1, rec_cb, &r), 0);
    cr_assert_eq (sb_sse_finish (sse), SB_SSE_EINCOMPLETE);
    cr_assert_eq (sb_sse_feed (sse, "data: a\n\ndata: b\n\n", 18, rec_cb, &r), 0);
    cr_assert_eq (r.count, 1);
    cr_assert_str_eq (r.p, EV ("message", "1:b", ""));
    sb_sse_destroy (&sse);
    rec_free (&r);
}

Test (sse, multibyte_utf8_split_inside_character)
{
    static const char in [] = "data: \xC3\xA9t\xE2\x9C\x93\xF0\x9F\x98\x80\n\n";
    rec_t whole = { 0 };
    feed_all (in, &whole);
    for (size_t cut = 1; cut < sizeof in - 1; cut++) {
        rec_t r = { 0 };
        size_t steps [2] = { cut, sizeof in };
        cr_assert_eq (feed_split (in, sizeof in - 1, steps, 2, &r), SB_SSE_OK);
        cr_assert_str_eq (r.p, whole.p, "cut at %zu", cut);
        rec_free (&r);
    }
    cr_assert_str_eq (whole.p, EV ("message", "10:\xC3\xA9t\xE2\x9C\x93\xF0\x9F\x98\x80", ""));
    rec_free (&whole);
}

Test (sse, unfinished_event_is_discarded_and_reported)
{
    rec_t r = { 0 };
    cr_assert_eq (feed_all ("data: a\n\ndata: b\n", &r), SB_SSE_EINCOMPLETE);
    cr_assert_str_eq (r.p, EV ("message", "1:a", ""));
    rec_free (&r);
    cr_assert_eq (feed_all ("data: a\n\ndata: partial", &r), SB_SSE_EINCOMPLETE);
    rec_free (&r);
    cr_assert_eq (feed_all ("data: a\n\n: trailing comment\n", &r), SB_SSE_OK);
    rec_free (&r);
    cr_assert_eq (feed_all ("", &r), SB_SSE_OK);
    cr_assert_eq (r.count, 0);
}

static char *
s_long_line (size_t n)
{
    //  "data: " + n bytes + "\n\n"
    char *in = malloc (n + 9);
    cr_assert_not_null (in);
    memcpy (in, "data: ", 6);
    for (size_t i = 0; i < n; i++)
        in [6 + i] = 'a' + (char) (i % 26);
    memcpy (in + 6 + n, "\n\n", 3);
    return in;
}

static int
s_len_cb (const char *event, const char *data, size_t len, const char *id, void *ctx)
{
    size_t *got = ctx;
    *got = len;
    cr_assert_eq (data [len - 1], 'a' + (char) ((len - 1) % 26));
    return 0;
}

Test (sse, line_of_300kb_fed_byte_by_byte_and_in_pieces)
{
    size_t n = 300 * 1024;
    char *in = s_long_line (n);
    size_t total = n + 8;
    //  One byte at a time: quadratic copying would take minutes here.
    static const size_t steps [] = { 1, 1000, 4096, 7 };
    for (size_t s = 0; s < sizeof steps / sizeof steps [0]; s++) {
        sb_sse_t *sse = sb_sse_new (0);
        size_t got = 0;
        for (size_t off = 0; off < total; off += steps [s]) {
            size_t len = total - off < steps [s]? total - off: steps [s];
            cr_assert_eq (sb_sse_feed (sse, in + off, len, s_len_cb, &got), 0);
        }
        cr_assert_eq (got, n, "step %zu", steps [s]);
        cr_assert_eq (sb_sse_events (sse), 1);
        sb_sse_destroy (&sse);
    }
    free (in);
}

Test (sse, limit_exceeded_by_one_line_is_sticky)
{
    sb_sse_t *sse = sb_sse_new (1024);
    char *in = s_long_line (2000);
    rec_t r = { 0 };
    cr_assert_eq (sb_sse_feed (sse, in, 2008, rec_cb, &r), SB_SSE_ETOOBIG);
    cr_assert_eq (sb_sse_error (sse), SB_SSE_ETOOBIG);
    cr_assert_eq (sb_sse_feed (sse, "data: ok\n\n", 10, rec_cb, &r), SB_SSE_ETOOBIG);
    cr_assert_eq (sb_sse_finish (sse), SB_SSE_ETOOBIG);
    cr_assert_eq (r.count, 0);
    cr_assert_not_null (strstr (sb_sse_strerror (SB_SSE_ETOOBIG), "maximum"));
    sb_sse_destroy (&sse);
    free (in);
}

Test (sse, limit_exceeded_by_partial_line_across_feeds)
{
    sb_sse_t *sse = sb_sse_new (1024);
    char chunk [100];
    memset (chunk, 'x', sizeof chunk);
    cr_assert_eq (sb_sse_feed (sse, "data: ", 6, NULL, NULL), 0);
    int rc = 0;
    for (int i = 0; i < 20 && rc == 0; i++)
        rc = sb_sse_feed (sse, chunk, sizeof chunk, NULL, NULL);
    cr_assert_eq (rc, SB_SSE_ETOOBIG);
    sb_sse_destroy (&sse);
}

Test (sse, limit_exceeded_by_many_data_lines)
{
    sb_sse_t *sse = sb_sse_new (1024);
    int rc = 0;
    for (int i = 0; i < 200 && rc == 0; i++)
        rc = sb_sse_feed (sse, "data: 0123456789\n", 17, NULL, NULL);
    cr_assert_eq (rc, SB_SSE_ETOOBIG);
    sb_sse_destroy (&sse);
}

Test (sse, limit_not_reached_by_many_small_events)
{
    sb_sse_t *sse = sb_sse_new (64);
    rec_t r = { 0 };
    for (int i = 0; i < 1000; i++)
        cr_assert_eq (sb_sse_feed (sse, "data: 0123456789\n\n", 18, rec_cb, &r), 0);
    cr_assert_eq (r.count, 1000);
    //  An event right at the limit passes.
    char line [80];
    snprintf (line, sizeof line, "data: %s\n\n", "0123456789012345678901234567890123456789012345678901234567");
    cr_assert_eq (strlen (line) - 2, 64);
    cr_assert_eq (sb_sse_feed (sse, line, strlen (line), rec_cb, &r), 0);
    cr_assert_eq (r.count, 1001);
    sb_sse_destroy (&sse);
    rec_free (&r);
}

Test (sse, callback_abort_is_sticky)
{
    sb_sse_t *sse = sb_sse_new (0);
    rec_t r = { .stop_after = 1 };
    const char *in = "data: a\n\ndata: b\n\n";
    cr_assert_eq (sb_sse_feed (sse, in, strlen (in), rec_cb, &r), SB_SSE_EABORTED);
    cr_assert_eq (r.count, 1);
    cr_assert_eq (sb_sse_feed (sse, in, strlen (in), rec_cb, &r), SB_SSE_EABORTED);
    cr_assert_eq (r.count, 1);
    sb_sse_destroy (&sse);
    rec_free (&r);
}

Test (sse, destroy_tolerates_null)
{
    sb_sse_t *sse = NULL;
    sb_sse_destroy (&sse);
    sb_sse_destroy (NULL);
    cr_assert_null (sse);
}

//  ---------------------------------------------------------------------------
//  Every fixture: the same events however the bytes are cut or which line
//  ending they use.

//  A file; fails the test when it cannot be read.
static char *
read_file (const char *path, size_t *len)
{
    char *body = sb_test_read_file (path, len);
    cr_assert_not_null (body, "cannot read %s", path);
    return body;
}

Test (sse, fixtures_same_events_in_every_variant)
{
    DIR *dir = opendir (sb_test_fixtures_dir ());
    cr_assert_not_null (dir, "no fixtures at %s (set SB_FIXTURES)", sb_test_fixtures_dir ());
    int files = 0;
    struct dirent *ent;
    while ((ent = readdir (dir))) {
        size_t nl = strlen (ent->d_name);
        if (nl < 5 || strcmp (ent->d_name + nl - 4, ".sse"))
            continue;
        files++;
        char path [1024];
        snprintf (path, sizeof path, "%s/%s", sb_test_fixtures_dir (), ent->d_name);
        size_t len;
        char *body = read_file (path, &len);

        rec_t base = { 0 };
        cr_assert_eq (feed_split (body, len, &len, 1, &base), SB_SSE_OK, "%s", path);
        cr_assert_gt (base.count, 1, "%s", path);

        const char *eols [] = { "\n", "\r\n", "\r" };
        static const size_t one [] = { 1 }, odd [] = { 3, 1, 7, 2, 13, 5 }, two [] = { 2 };
        const size_t *splits [] = { one, odd, two };
        size_t nsplits [] = { 1, 6, 1 };
        for (size_t e = 0; e < 3; e++) {
            size_t vlen;
            char *variant = sb_test_convert_eol (body, len, eols [e], &vlen);
            for (size_t s = 0; s < 3; s++) {
                rec_t r = { 0 };
                cr_assert_eq (feed_split (variant, vlen, splits [s], nsplits [s], &r), SB_SSE_OK);
                cr_assert_eq (r.len, base.len, "%s eol %zu split %zu", path, e, s);
                cr_assert_eq (memcmp (r.p, base.p, r.len), 0, "%s eol %zu split %zu", path, e, s);
                rec_free (&r);
            }
            //  And with a BOM in front.
            char *bom = malloc (vlen + 3);
            memcpy (bom, "\xEF\xBB\xBF", 3);
            memcpy (bom + 3, variant, vlen);
            rec_t r = { 0 };
            cr_assert_eq (feed_split (bom, vlen + 3, one, 1, &r), SB_SSE_OK);
            cr_assert_eq (r.len, base.len);
            cr_assert_eq (memcmp (r.p, base.p, r.len), 0);
            rec_free (&r);
            free (bom);
            free (variant);
        }
        rec_free (&base);
        free (body);
    }
    closedir (dir);
    cr_assert_geq (files, 6, "expected the six fixtures in %s", sb_test_fixtures_dir ());
}

Test (sse, fixture_event_names)
{
    char path [1024];
    snprintf (path, sizeof path, "%s/anthropic-thinking-tool.sse", sb_test_fixtures_dir ());
    size_t len;
    char *body = read_file (path, &len);
    rec_t r = { 0 };
    feed_split (body, len, &len, 1, &r);
    cr_assert_eq (r.count, 16);
    cr_assert (strncmp (r.p, "message_start\x1f", 14) == 0);
    cr_assert_not_null (strstr (r.p, "\x1eping\x1f"));
    rec_free (&r);
    free (body);

    snprintf (path, sizeof path, "%s/chat-tools.sse", sb_test_fixtures_dir ());
    body = read_file (path, &len);
    feed_split (body, len, &len, 1, &r);
    cr_assert_eq (r.count, 10);
    cr_assert_not_null (strstr (r.p, "\x1emessage\x1f" "6:[DONE]\x1f\x1e"));
    rec_free (&r);
    free (body);
}
