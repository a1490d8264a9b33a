/*  actors/session/usage.c — token and cost totals, kept as usage entries
    are appended (docs/usage.md).

    The session actor adds each usage entry to its totals in the same
    transaction as the entry, so that they never disagree with the tape and
    a restart needs no scan: its run's, its session's, and its session's on
    the entry's UTC day (kept under two keys). They live in the `usage` dbi:
      'S' sid                -> the session's totals
      'R' sid run_id         -> a run's
      'D' day sid            -> a session's on one day (day: days since
                                1970-01-01, big-endian u32), for all
                                sessions by day
      'd' sid day            -> the same totals, for one session by day
    A value is a version byte (1) and then 11 big-endian u64: calls, the
    five sums (input, output, cached input, reasoning tokens, cost in
    micro-dollars) and, for each sum, how many calls reported it. A sum is
    known only when every call reported it: a total that misses some calls
    is shown unknown, never as a smaller number. */
#include "actors/session/session_impl.h"
#include "schemas/types.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_LEN (1 + 11 * 8)
#define NSUMS 5
#define MAX_RUNS 1000
#define MAX_DAYS 1000

typedef struct {
    uint64_t calls;
    uint64_t sum [NSUMS];
    uint64_t known [NSUMS];
} totals_t;

//  The entry's fields, in the order of totals_t's sums, and their names in
//  a reply (cached_tokens is said cached_input_tokens there).
static const char *s_entry_keys [NSUMS] = {
    "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "cost_microusd"
};
static const char *s_reply_keys [NSUMS] = {
    "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens", "cost_microusd"
};

static void
s_put_u64 (uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p [i] = (uint8_t) (v >> (56 - 8 * i));
}

static uint64_t
s_get_u64 (const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p [i];
    return v;
}

//  A stored value, checked: a wrong length or version reads as nothing
//  (false), so one damaged value cannot make up a total.
static bool
s_decode (const sb_datum_t *v, totals_t *t)
{
    memset (t, 0, sizeof *t);
    if (!v || v->size != VALUE_LEN || ((const uint8_t *) v->data) [0] != 1)
        return false;
    const uint8_t *p = (const uint8_t *) v->data + 1;
    t->calls = s_get_u64 (p);
    for (int k = 0; k < NSUMS; k++) {
        t->sum [k] = s_get_u64 (p + 8 * (1 + k));
        t->known [k] = s_get_u64 (p + 8 * (1 + NSUMS + k));
    }
    return true;
}

static void
s_add (totals_t *into, const totals_t *t)
{
    into->calls += t->calls;
    for (int k = 0; k < NSUMS; k++) {
        into->sum [k] += t->sum [k];
        into->known [k] += t->known [k];
    }
}

//  Adds one call's counts to the totals under key k.
static void
s_bump (sb_txn_t *txn, const sb_key_t *k, const totals_t *call)
{
    sb_datum_t v;
    totals_t t;
    if (sb_txn_get (txn, DBI_USAGE, k->buf, k->len, &v) != 0 || !s_decode (&v, &t))
        memset (&t, 0, sizeof t);
    s_add (&t, call);
    uint8_t buf [VALUE_LEN];
    buf [0] = 1;
    s_put_u64 (buf + 1, t.calls);
    for (int i = 0; i < NSUMS; i++) {
        s_put_u64 (buf + 1 + 8 * (1 + i), t.sum [i]);
        s_put_u64 (buf + 1 + 8 * (1 + NSUMS + i), t.known [i]);
    }
    sb_txn_put (txn, DBI_USAGE, k->buf, k->len, buf, sizeof buf);
}

void
sb_session_usage_note (self_t *self, sb_txn_t *txn, const char *sid, const char *run_id, const sb_val_t *body)
{
    totals_t call = { .calls = 1 };
    for (int k = 0; k < NSUMS; k++)
        if (sb_get (body, s_entry_keys [k])) {
            call.sum [k] = sb_get_uint (body, s_entry_keys [k], 0);
            call.known [k] = 1;
        }
    sb_key_t k;
    sb_key_init (&k, 'S');
    sb_key_str (&k, sid);
    s_bump (txn, &k, &call);
    if (run_id) {
        sb_key_init (&k, 'R');
        sb_key_str (&k, sid);
        sb_key_str (&k, run_id);
        s_bump (txn, &k, &call);
    }
    uint32_t day = (uint32_t) (self->now / 86400000ull);
    sb_key_init (&k, 'D');
    sb_key_u32 (&k, day);
    sb_key_str (&k, sid);
    s_bump (txn, &k, &call);
    sb_key_init (&k, 'd');
    sb_key_str (&k, sid);
    sb_key_u32 (&k, day);
    s_bump (txn, &k, &call);
}

//  "YYYY-MM-DD" as days since 1970-01-01 (UTC); -1 when it is not a date.
int64_t
sb_session_usage_day (const char *s)
{
    if (!s || strlen (s) != 10)
        return -1;
    for (int k = 0; k < 10; k++)
        if (k == 4 || k == 7 ? s [k] != '-' : !isdigit ((unsigned char) s [k]))
            return -1;
    int y = atoi (s), m = atoi (s + 5), d = atoi (s + 8);
    if (y < 1970 || y > 9999 || m < 1 || m > 12 || d < 1 || d > 31)
        return -1;
    //  days from civil (Howard Hinnant's algorithm)
    y -= m <= 2;
    int era = y / 400;
    int yoe = y - era * 400;
    int doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return (int64_t) era * 146097 + doe - 719468;
}

static void
s_encode_totals (sb_enc_t *e, const totals_t *t)
{
    sb_enc_map_open (e);
    sb_enc_kuint (e, "calls", t->calls);
    for (int k = 0; k < NSUMS; k++)
        if (t->known [k] == t->calls)
            sb_enc_kuint (e, s_reply_keys [k], t->sum [k]);
    sb_enc_map_close (e);
}

static void
s_day_name (uint32_t day, char *out, size_t n)
{
    //  civil from days (Howard Hinnant's algorithm)
    int64_t z = (int64_t) day + 719468;
    int64_t era = z / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    snprintf (out, n, "%04lld-%02lld-%02lld", (long long) y, (long long) m, (long long) d);
}

//  The days from `since` on, of session sid (NULL: every session), summed
//  into *all and listed by day.
static void
s_encode_days (sb_txn_t *txn, sb_enc_t *e, const char *sid, uint32_t since, totals_t *all)
{
    //  one session's days: 'd' sid day; every session's: 'D' day sid
    sb_key_t prefix, start;
    sb_key_init (&prefix, sid ? 'd' : 'D');
    if (sid)
        sb_key_str (&prefix, sid);
    start = prefix;
    sb_key_u32 (&start, since);
    size_t day_at = prefix.len;
    sb_txn_iter_t it;
    sb_txn_iter_begin (txn, &it, DBI_USAGE, prefix.buf, prefix.len, start.buf, start.len);
    sb_datum_t k, v;
    totals_t day = { 0 };
    int64_t cur = -1;
    int ndays = 0;
    sb_enc_key (e, "days");
    sb_enc_array_open (e);
    while (sb_txn_iter_next (&it, &k, &v)) {
        totals_t t;
        if (k.size < day_at + 4 || !s_decode (&v, &t))
            continue;
        uint32_t d = sb_key_read_u32 (&k, day_at);
        if (cur >= 0 && d != cur && ndays < MAX_DAYS) {
            char name [16];
            s_day_name ((uint32_t) cur, name, sizeof name);
            sb_enc_map_open (e);
            sb_enc_kstr (e, "day", name);
            sb_enc_key (e, "totals");
            s_encode_totals (e, &day);
            sb_enc_map_close (e);
            ndays++;
            memset (&day, 0, sizeof day);
        }
        cur = d;
        s_add (&day, &t);
        s_add (all, &t);
    }
    if (cur >= 0 && ndays < MAX_DAYS) {
        char name [16];
        s_day_name ((uint32_t) cur, name, sizeof name);
        sb_enc_map_open (e);
        sb_enc_kstr (e, "day", name);
        sb_enc_key (e, "totals");
        s_encode_totals (e, &day);
        sb_enc_map_close (e);
    }
    sb_enc_array_close (e);
}

//  A session's runs, in run id order (creation order), at most MAX_RUNS.
static void
s_encode_runs (sb_txn_t *txn, sb_enc_t *e, const char *sid)
{
    sb_key_t prefix;
    sb_key_init (&prefix, 'R');
    sb_key_str (&prefix, sid);
    sb_txn_iter_t it;
    sb_txn_iter_begin (txn, &it, DBI_USAGE, prefix.buf, prefix.len, NULL, 0);
    sb_datum_t k, v;
    int n = 0;
    sb_enc_key (e, "runs");
    sb_enc_array_open (e);
    while (sb_txn_iter_next (&it, &k, &v)) {
        totals_t t;
        if (k.size <= prefix.len || ((const char *) k.data) [k.size - 1] != 0 || !s_decode (&v, &t))
            continue;
        if (n++ == MAX_RUNS) {
            sb_txn_iter_end (&it);
            break;
        }
        sb_enc_map_open (e);
        sb_enc_kstr (e, "run_id", (const char *) k.data + prefix.len);
        sb_enc_key (e, "totals");
        s_encode_totals (e, &t);
        sb_enc_map_close (e);
    }
    sb_enc_array_close (e);
}

//  Every session's totals summed (session.usage without a session or a day).
static void
s_sum_sessions (sb_txn_t *txn, totals_t *all)
{
    sb_key_t prefix;
    sb_key_init (&prefix, 'S');
    sb_txn_iter_t it;
    sb_txn_iter_begin (txn, &it, DBI_USAGE, prefix.buf, prefix.len, NULL, 0);
    sb_datum_t k, v;
    while (sb_txn_iter_next (&it, &k, &v)) {
        totals_t t;
        if (s_decode (&v, &t))
            s_add (all, &t);
    }
}

//  session.usage: the totals of one session (with its runs) or of all, from
//  a day on or since the start, and by day.
void
sb_session_read_usage (self_t *self, sb_txn_t *txn, req_t *req)
{
    const sb_val_t *b = req->msg->body;
    const char *sid = sb_get_str (b, "session_id");
    const char *since = sb_get_str (b, "since");
    int64_t day = since ? sb_session_usage_day (since) : 0;
    if (day < 0) {
        sb_session_fail (req, SB_E_invalid, "since must be a date, YYYY-MM-DD (UTC)");
        return;
    }
    sb_datum_t rec;
    if (sid && !sb_session_record_load (txn, req, sid, &rec))
        return;
    sb_enc_t *e = self->enc;
    sb_enc_reset (e);
    sb_enc_map_open (e);
    if (sid)
        sb_enc_kstr (e, "session_id", sid);
    if (since)
        sb_enc_kstr (e, "since", since);
    totals_t all = { 0 };
    s_encode_days (txn, e, sid, (uint32_t) day, &all);
    if (sid && !since) {
        sb_key_t k;
        sb_key_init (&k, 'S');
        sb_key_str (&k, sid);
        sb_datum_t v;
        if (sb_txn_get (txn, DBI_USAGE, k.buf, k.len, &v) != 0 || !s_decode (&v, &all))
            memset (&all, 0, sizeof all);
    }
    else
    if (!since) {
        memset (&all, 0, sizeof all);
        s_sum_sessions (txn, &all);
    }
    if (sid) {
        s_encode_runs (txn, e, sid);
        //  a budget of the session its calls cannot be measured against
        sb_verr_t verr;
        sb_doc_t *doc = sb_decode (rec.data, rec.size, sb_session_record_fields, 0, &verr);
        const char *notice = sb_get_str (sb_doc_root (doc), "budget_notice");
        if (notice)
            sb_enc_kstr (e, "budget_notice", notice);
        sb_doc_destroy (&doc);
    }
    sb_enc_key (e, "totals");
    s_encode_totals (e, &all);
    sb_enc_map_close (e);
    if (txn->ret) {
        sb_session_fail (req, SB_E_internal, "cannot read the usage totals");
        return;
    }
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    sb_bus_reply (self->bus, req->msg, data, len);
}

//  --------------------------------------------------------------------------
//  Budgets (docs/usage.md). The session record holds them; the executor
//  enforces them per run. What the session actor adds is the notice: a
//  budget its calls cannot be measured against is said on the record, not
//  left to look enforced.

static const char *s_budget_keys [IA__BUDGETS] = { "tokens", "cost_microusd", "steps", "minutes" };

bool
sb_session_budget_take (record_t *r, const sb_val_t *budget)
{
    bool changed = false;
    for (int k = 0; budget && k < IA__BUDGETS; k++) {
        //  the schema's ranges held each value within its budget's bound
        if (!sb_get (budget, s_budget_keys [k]))
            continue;
        uint64_t v = sb_get_uint (budget, s_budget_keys [k], 0);
        if (v != r->budget [k]) {
            r->budget [k] = v;
            changed = true;
        }
    }
    return changed;
}

void
sb_session_budget_encode (sb_enc_t *enc, const record_t *r)
{
    bool any = false;
    for (int k = 0; k < IA__BUDGETS; k++)
        any |= r->budget [k] != 0;
    if (!any)
        return;
    sb_enc_key (enc, "budget");
    sb_enc_map_open (enc);
    for (int k = 0; k < IA__BUDGETS; k++)
        if (r->budget [k])
            sb_enc_kuint (enc, s_budget_keys [k], r->budget [k]);
    sb_enc_map_close (enc);
}

void
sb_session_usage_budget_check (self_t *self, record_t *r, const sb_val_t *body)
{
    if (r->budget_notice)
        return;                 //  said once; an update of the budgets clears it
    const char *provider = sb_get_str (body, "provider");
    const char *model = sb_get_str (body, "model");
    char notice [512];
    if (r->budget [IA_BUDGET_TOKENS] && (!sb_get (body, "input_tokens") || !sb_get (body, "output_tokens")))
        snprintf (notice, sizeof notice, "the token budget cannot be enforced: %s%s%s reports no token counts "
                  "for its calls", provider ? provider : r->provider ? r->provider : "the provider",
                  model ? " model " : "", model ? model : "");
    else
    if (r->budget [IA_BUDGET_COST] && !sb_get (body, "cost_microusd"))
        snprintf (notice, sizeof notice, "the cost budget cannot be enforced: %s%s%s has no price or reports "
                  "no token counts (docs/usage.md, Prices)", provider ? provider : "the provider",
                  model ? " model " : "", model ? model : "");
    else
        return;
    r->budget_notice = sb_session_strdup (self, notice);
    r->dirty = true;
    sb_warn (ACTOR, "budget not enforced session=%s: %s", r->session_id, notice);
}
