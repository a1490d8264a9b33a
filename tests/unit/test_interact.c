/*  tests/unit/test_interact.c — the interaction record (actors/interact/record.c):
    its names and transition table, the shape of an id, the newest-first
    key order the lists walk, and the stored record read back (including
    records it must refuse rather than guess at). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "actors/interact/interact_impl.h"

Test (interact, names_round_trip)
{
    for (int s = 0; s < IA__COUNT; s++)
        cr_assert_eq (sb_ia_status_from_name (sb_ia_status_name ((ia_status_t) s)), (ia_status_t) s);
    for (int d = 0; d < IA__DECISIONS; d++)
        cr_assert_eq (sb_ia_decision_from_name (sb_ia_decision_name ((ia_decision_t) d)), (ia_decision_t) d);
    for (int s = 0; s < IA__SCOPES; s++)
        cr_assert_eq (sb_ia_scope_from_name (sb_ia_scope_name ((ia_scope_t) s)), (ia_scope_t) s);
    cr_assert_eq (sb_ia_status_from_name ("Pending"), IA__COUNT);
    cr_assert_eq (sb_ia_status_from_name (NULL), IA__COUNT);
    cr_assert_eq (sb_ia_decision_from_name ("yes"), IA__DECISIONS);
    cr_assert_eq (sb_ia_scope_from_name (""), IA__SCOPES);
    cr_assert_str_eq (sb_ia_status_name (IA__COUNT), "unknown");
}

/*  Only pending moves, and only once: that is what makes the first answer
    win. */
Test (interact, transitions)
{
    for (int from = 0; from < IA__COUNT; from++)
        for (int to = 0; to < IA__COUNT; to++) {
            bool want = from == IA_PENDING && to != IA_PENDING;
            cr_assert_eq (sb_ia_transition_ok ((ia_status_t) from, (ia_status_t) to), want, "%s -> %s",
                          sb_ia_status_name ((ia_status_t) from), sb_ia_status_name ((ia_status_t) to));
        }
    cr_assert_not (sb_ia_transition_ok (IA__COUNT, IA_APPROVED));
    cr_assert_not (sb_ia_transition_ok (IA_PENDING, IA__COUNT));
}

Test (interact, id_shape)
{
    char ulid [SB_ULID_LEN + 1], id [64];
    sb_ulid_new (ulid);
    snprintf (id, sizeof id, "ia_%s", ulid);
    cr_assert (sb_ia_id_valid (id));
    cr_assert_not (sb_ia_id_valid (NULL));
    cr_assert_not (sb_ia_id_valid (""));
    cr_assert_not (sb_ia_id_valid (ulid));
    cr_assert_not (sb_ia_id_valid ("ia_"));
    id [5] = 'u';               /* not Crockford */
    cr_assert_not (sb_ia_id_valid (id));
    snprintf (id, sizeof id, "IA_%s", ulid);
    cr_assert_not (sb_ia_id_valid (id));
    snprintf (id, sizeof id, "ia_%s0", ulid);
    cr_assert_not (sb_ia_id_valid (id));
}

static int
s_keycmp (const sb_key_t *a, const sb_key_t *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp (a->buf, b->buf, n);
    return c ? c : (int) a->len - (int) b->len;
}

/*  Inverted ULIDs sort newest first, and the inverted bytes of an id
    prefix are a prefix of the inverted id: lists are forward walks. */
Test (interact, inverted_keys_sort_newest_first)
{
    char older [SB_ULID_LEN + 1], newer [SB_ULID_LEN + 1];
    sb_ulid_new (older);
    sb_ulid_new (newer);            /* monotonic within a thread */
    cr_assert_lt (strcmp (older, newer), 0);
    sb_key_t ko, kn, kp;
    sb_key_init (&ko, 'A');
    sb_ia_key_inverted (&ko, older, SB_ULID_LEN);
    sb_key_init (&kn, 'A');
    sb_ia_key_inverted (&kn, newer, SB_ULID_LEN);
    cr_assert_gt (s_keycmp (&ko, &kn), 0, "the newer id must sort first");
    sb_key_init (&kp, 'A');
    sb_ia_key_inverted (&kp, newer, 10);
    cr_assert_eq (kp.len, 11);
    cr_assert_eq (memcmp (kp.buf, kn.buf, kp.len), 0, "a prefix's key must prefix the id's key");
    for (size_t i = 0; i < SB_ULID_LEN; i++)
        cr_assert_eq (kn.buf [1 + i], (uint8_t) (255 - (uint8_t) newer [i]));
}

/*  A record saved with every index and read back as it was; a record the
    store holds damaged is refused, not guessed at. */
Test (interact, save_and_load)
{
    char dir [] = "/tmp/sbiaXXXXXX";
    cr_assert_not_null (mkdtemp (dir));
    static const char *dbis [] = { "interactions", "bycall", "index", "deadlines", "outbox", NULL };
    char err [256];
    self_t self;
    memset (&self, 0, sizeof self);
    self.store = sb_store_open (dir, dbis, IA_SCHEMA_VERSION, 0, err, sizeof err);
    cr_assert_not_null (self.store, "%s", err);
    self.outbox_next = 1;

    ia_t ia;
    memset (&ia, 0, sizeof ia);
    char ulid [SB_ULID_LEN + 1];
    sb_ulid_new (ulid);
    snprintf (ia.interaction_id, sizeof ia.interaction_id, "ia_%s", ulid);
    sb_ulid_new (ia.session_id);
    sb_ulid_new (ia.run_id);
    snprintf (ia.call_id, sizeof ia.call_id, "call_1");
    snprintf (ia.tool, sizeof ia.tool, "write_file");
    ia.arguments = strdup ("{\"path\":\"a\",\"content\":\"b\"}");
    ia.diff = strdup ("+b\n");
    ia.status = IA_PENDING;
    ia.default_outcome = IA_APPROVE;
    ia.created_at = 1000;
    ia.deadline_at = 5000;
    cr_assert_eq (sb_ia_save (&self, &ia, true, IA_PENDING), 0);
    cr_assert_eq (self.outbox_next, 2);

    ia.status = IA_REJECTED;
    ia.decision = IA_REJECT;
    ia.scope = IA_ALWAYS;
    ia.feedback = strdup ("use b.txt");
    snprintf (ia.resolved_by, sizeof ia.resolved_by, "chat:ann@host");
    snprintf (ia.command_id, sizeof ia.command_id, "cmd-7");
    ia.resolved_at = 2000;
    cr_assert_eq (sb_ia_save (&self, &ia, false, IA_PENDING), 0);
    cr_assert_eq (sb_ia_outbox_last (&self), 2);

    ia_t back;
    cr_assert_eq (sb_ia_load (&self, ia.interaction_id, &back), 0);
    cr_assert_str_eq (back.interaction_id, ia.interaction_id);
    cr_assert_str_eq (back.session_id, ia.session_id);
    cr_assert_str_eq (back.run_id, ia.run_id);
    cr_assert_str_eq (back.call_id, "call_1");
    cr_assert_str_eq (back.arguments, ia.arguments);
    cr_assert_str_eq (back.diff, "+b\n");
    cr_assert_null (back.summary);
    cr_assert_str_eq (back.feedback, "use b.txt");
    cr_assert_str_eq (back.resolved_by, "chat:ann@host");
    cr_assert_str_eq (back.command_id, "cmd-7");
    cr_assert_eq (back.status, IA_REJECTED);
    cr_assert_eq (back.decision, IA_REJECT);
    cr_assert_eq (back.scope, IA_ALWAYS);
    cr_assert_eq (back.default_outcome, IA_APPROVE);
    cr_assert_eq (back.created_at, 1000);
    cr_assert_eq (back.resolved_at, 2000);
    cr_assert_eq (back.deadline_at, 5000);
    sb_ia_free (&back);

    /* the indexes: the status moved, the deadline went with the pending */
    sb_txn_t txn;
    cr_assert_eq (sb_txn_begin (self.store, &txn, false), 0);
    sb_key_t k;
    sb_key_init (&k, 'T');
    sb_key_str (&k, "pending");
    sb_ia_key_inverted (&k, ulid, SB_ULID_LEN);
    sb_datum_t v;
    cr_assert_eq (sb_txn_get (&txn, DBI_INDEX, k.buf, k.len, &v), SB_STORE_NOTFOUND);
    sb_key_init (&k, 'T');
    sb_key_str (&k, "rejected");
    sb_ia_key_inverted (&k, ulid, SB_ULID_LEN);
    cr_assert_eq (sb_txn_get (&txn, DBI_INDEX, k.buf, k.len, &v), 0);
    sb_key_init (&k, 'D');
    sb_key_u64 (&k, 5000);
    sb_key_str (&k, ia.interaction_id);
    cr_assert_eq (sb_txn_get (&txn, DBI_DEADLINES, k.buf, k.len, &v), SB_STORE_NOTFOUND);
    sb_txn_abort (&txn);

    /* damaged records: not msgpack, no status, an unknown status */
    static const uint8_t junk [] = { 0xc1, 0x00 };
    static const uint8_t nostatus [] = { 0x81, 0xa3, 't', 'o', 'o', 0x01 };
    cr_assert_eq (sb_txn_begin (self.store, &txn, true), 0);
    sb_key_init (&k, 'I');
    sb_key_str (&k, ia.interaction_id);
    sb_txn_put (&txn, DBI_INTERACTIONS, k.buf, k.len, junk, sizeof junk);
    cr_assert_eq (sb_txn_commit (&txn), 0);
    cr_assert_eq (sb_ia_load (&self, ia.interaction_id, &back), -1);
    cr_assert_eq (sb_txn_begin (self.store, &txn, true), 0);
    sb_txn_put (&txn, DBI_INTERACTIONS, k.buf, k.len, nostatus, sizeof nostatus);
    cr_assert_eq (sb_txn_commit (&txn), 0);
    cr_assert_eq (sb_ia_load (&self, ia.interaction_id, &back), -1);
    cr_assert_eq (sb_ia_load (&self, "ia_nope", &back), -1);

    sb_ia_free (&ia);
    sb_store_destroy (&self.store);
    char cmd [64];
    snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq (system (cmd), 0);
}

/*  id_prefix of interact.list, as people type it. */
Test (interact, id_prefix)
{
    char out [SB_ULID_LEN + 1];
    cr_assert (sb_ia_id_prefix ("ia_01JD", out));
    cr_assert_str_eq (out, "01JD");
    cr_assert (sb_ia_id_prefix ("01jd2y", out));
    cr_assert_str_eq (out, "01JD2Y");
    cr_assert (sb_ia_id_prefix ("IA_01jd", out));
    cr_assert_str_eq (out, "01JD");
    cr_assert (sb_ia_id_prefix ("ia_", out));
    cr_assert_str_eq (out, "");
    cr_assert (sb_ia_id_prefix ("", out));
    cr_assert (sb_ia_id_prefix ("ia_01JD2Y6W3M0Q4B1T2V5Y7Z9A1C", out));
    cr_assert_str_eq (out, "01JD2Y6W3M0Q4B1T2V5Y7Z9A1C");
    cr_assert_not (sb_ia_id_prefix ("ia_01JD2Y6W3M0Q4B1T2V5Y7Z9A1CX", out), "longer than a ULID");
    cr_assert_not (sb_ia_id_prefix ("ia_01U", out), "U is not Crockford");
    cr_assert_not (sb_ia_id_prefix ("8ZZ", out), "past the largest ULID");
    cr_assert_not (sb_ia_id_prefix ("ia_-1", out));
    cr_assert_not (sb_ia_id_prefix ("ia_01\xc3\xa9", out));
}
