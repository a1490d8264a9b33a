/*  store/cmdid.c — remembered command_ids. See cmdid.h.

    Written once for the three stateful actors, which each had their own
    copy: the session actor's (with an expiry index), the run actor's
    (which scanned every row to sweep) and the interaction actor's (one id
    per interaction, in its record). */
#include "store/cmdid.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

uint64_t
sb_cmdid_ttl_ms (const char *actor)
{
    const char *ttl = getenv ("SWITCHBOARD_COMMAND_TTL_S");
    if (!ttl || !*ttl)
        return (uint64_t) SB_CMDID_TTL_S_DEFAULT * 1000;
    char *end;
    errno = 0;
    unsigned long long ttl_s = strtoull (ttl, &end, 10);
    if (errno || *end || *ttl < '0' || *ttl > '9' || ttl_s < 1 || ttl_s > SB_CMDID_TTL_S_MAX) {
        sb_warn (actor, "ignoring SWITCHBOARD_COMMAND_TTL_S=%s (want seconds from 1 to %d); using %d",
                 ttl, SB_CMDID_TTL_S_MAX, SB_CMDID_TTL_S_DEFAULT);
        ttl_s = SB_CMDID_TTL_S_DEFAULT;
    }
    return (uint64_t) ttl_s * 1000;
}

void
sb_cmdid_key (sb_key_t *k, const char *const *scope, size_t nscope, const char *cmd)
{
    sb_key_init (k, 'C');
    for (size_t i = 0; i < nscope; i++)
        sb_key_str (k, scope [i]);
    sb_key_str (k, cmd);
}

//  'E' expires, then the command's key without its tag.
void
sb_cmdid_expiry_key (sb_key_t *k, uint64_t expires, const sb_key_t *ckey)
{
    sb_key_init (k, 'E');
    sb_key_u64 (k, expires);
    if (sb_key_valid (ckey))
        sb_key_bytes (k, ckey->buf + 1, ckey->len - 1);
    else {
        k->overflow = true;     //  an invalid key stays invalid
        k->len = 0;
    }
}

int
sb_cmdid_digest_body (const sb_val_t *body, uint8_t out [SB_DIGEST_LEN])
{
    sb_enc_t *e = sb_enc_new ();
    if (!e)
        return -1;
    sb_enc_val (e, body);
    size_t len;
    const uint8_t *data = sb_enc_data (e, &len);
    int rc = sb_digest_of (data, len, out);
    sb_enc_destroy (&e);
    return rc;
}

void
sb_cmdid_encode (sb_enc_t *e, const char *type, const uint8_t digest [SB_DIGEST_LEN],
                 const void *reply, size_t reply_len, uint64_t expires)
{
    sb_enc_reset (e);
    sb_enc_map_open (e);
    sb_enc_kstr (e, "type", type);
    sb_enc_kuint (e, "expires", expires);
    sb_enc_key (e, "digest");
    sb_enc_bin (e, digest, SB_DIGEST_LEN);
    sb_enc_key (e, "reply");
    sb_enc_bin (e, reply, reply_len);
    sb_enc_map_close (e);
}

//  The reply, as stored: `reply` (bytes). The run actor's rows written
//  before this module kept the run's id as the string `run_id`, which is
//  that actor's reply: such a row is read as if it had said so, so that an
//  upgrade does not forget the runs of the last TTL.
static const char *
s_reply (const sb_val_t *m, size_t *len)
{
    const char *reply = sb_get_bin (m, "reply", len);
    if (!reply && (reply = sb_get_str (m, "run_id")))
        *len = strlen (reply);
    return reply;
}

void
sb_cmdid_found_done (sb_cmdid_found_t *found)
{
    sb_doc_destroy (&found->doc);
    found->reply = NULL;
    found->reply_len = 0;
}

sb_cmdid_verdict_t
sb_cmdid_judge (const void *val, size_t vlen, const char *type,
                const uint8_t digest [SB_DIGEST_LEN], uint64_t now, sb_cmdid_found_t *found)
{
    memset (found, 0, sizeof *found);
    sb_verr_t verr;
    sb_doc_t *doc = sb_decode (val, vlen, NULL, 0, &verr);
    const sb_val_t *m = sb_doc_root (doc);
    const char *rtype = m? sb_get_str (m, "type"): NULL;
    size_t rlen = 0, dlen = 0;
    const char *reply = m? s_reply (m, &rlen): NULL;
    const char *d = m? sb_get_bin (m, "digest", &dlen): NULL;
    uint64_t expires = m? sb_get_uint (m, "expires", 0): 0;
    sb_cmdid_verdict_t verdict = SB_CMDID_NEW;
    if (!rtype || !reply || !d || dlen != SB_DIGEST_LEN)
        found->unreadable = true;
    else {
        snprintf (found->type, sizeof found->type, "%s", rtype);
        found->expires = expires;
        //  Past its time (or of a build that kept it for ever): forgotten.
        if (expires <= now)
            found->expired = true;
        else
        if (strcmp (rtype, type) != 0)
            verdict = SB_CMDID_OTHER_TYPE;
        else
        if (memcmp (d, digest, SB_DIGEST_LEN) != 0)
            verdict = SB_CMDID_OTHER_BODY;
        else {
            //  The decoded doc holds the reply: it stays with `found`.
            found->reply = (const uint8_t *) reply;
            found->reply_len = rlen;
            found->doc = doc;
            doc = NULL;
            verdict = SB_CMDID_REPLAY;
        }
    }
    sb_doc_destroy (&doc);
    return verdict;
}

sb_cmdid_verdict_t
sb_cmdid_find (sb_txn_t *txn, unsigned dbi, unsigned dbi_expiry, const sb_key_t *ckey,
               const char *type, const uint8_t digest [SB_DIGEST_LEN], uint64_t now,
               sb_cmdid_found_t *found)
{
    memset (found, 0, sizeof *found);
    sb_datum_t v;
    if (!sb_key_valid (ckey) || sb_txn_get (txn, dbi, ckey->buf, ckey->len, &v) != 0)
        return SB_CMDID_NEW;
    sb_cmdid_verdict_t verdict = sb_cmdid_judge (v.data, v.size, type, digest, now, found);
    if (found->expired && txn->write) {
        //  Expired but not yet swept: forget it now.
        sb_key_t e;
        sb_cmdid_expiry_key (&e, found->expires, ckey);
        sb_txn_del (txn, dbi_expiry, e.buf, e.len);
        sb_txn_del (txn, dbi, ckey->buf, ckey->len);
    }
    return verdict;
}

int
sb_cmdid_remember (sb_txn_t *txn, unsigned dbi, unsigned dbi_expiry, const sb_key_t *ckey,
                   const char *type, const uint8_t digest [SB_DIGEST_LEN],
                   const void *reply, size_t reply_len, uint64_t expires, sb_enc_t *scratch)
{
    sb_cmdid_encode (scratch, type, digest, reply, reply_len, expires);
    size_t len;
    const uint8_t *data = sb_enc_data (scratch, &len);
    sb_key_t e;
    sb_cmdid_expiry_key (&e, expires, ckey);
    sb_txn_put (txn, dbi, ckey->buf, ckey->len, data, len);
    sb_txn_put (txn, dbi_expiry, e.buf, e.len, NULL, 0);
    return txn->ret;
}

size_t
sb_cmdid_expired (sb_txn_t *txn, unsigned dbi_expiry, uint64_t now, size_t max,
                  uint64_t *next, sb_cmdid_expired_fn *fn, void *ctx)
{
    *next = 0;
    size_t n = 0;
    sb_key_t prefix;
    sb_key_init (&prefix, 'E');
    sb_txn_iter_t it;
    sb_txn_iter_begin (txn, &it, dbi_expiry, prefix.buf, prefix.len, NULL, 0);
    sb_datum_t k, v;
    while (sb_txn_iter_next (&it, &k, &v)) {
        uint64_t at = sb_key_read_u64 (&k, 1);
        if (at > now || n == max) {
            *next = at;
            sb_txn_iter_end (&it);
            break;
        }
        //  The command's key is 'C' and the bytes after the expiry,
        //  whatever the layout that wrote them.
        sb_key_t c;
        sb_key_init (&c, 'C');
        if (k.size > 9)
            sb_key_bytes (&c, (const uint8_t *) k.data + 9, k.size - 9);
        else {
            c.overflow = true;  //  no command named: only the expiry row goes
            c.len = 0;
        }
        fn (&c, &k, ctx);
        n++;
    }
    return n;
}

//  The sweep deletes in two steps, a few rows at a time: first the walk
//  copies the keys, then the deletes run with no cursor open. The expiry
//  rows may share a dbi with the commands, and a delete under an open
//  cursor of the same dbi is best left alone.
#define SWEEP_STEP 32

typedef struct {
    size_t n;
    sb_key_t ckey [SWEEP_STEP];
    sb_key_t ekey [SWEEP_STEP];
} s_sweep_t;

static void
s_sweep_copy (const sb_key_t *ckey, const sb_datum_t *ekey, void *ctx)
{
    s_sweep_t *sw = (s_sweep_t *) ctx;
    sw->ckey [sw->n] = *ckey;
    sb_key_init (&sw->ekey [sw->n], 'E');
    sw->ekey [sw->n].len = 0;       //  the whole row key, tag and all
    sb_key_bytes (&sw->ekey [sw->n], ekey->data, ekey->size);
    sw->n++;
}

size_t
sb_cmdid_sweep (sb_txn_t *txn, unsigned dbi, unsigned dbi_expiry, uint64_t now, size_t max,
                uint64_t *next)
{
    s_sweep_t *sw = malloc (sizeof *sw);
    if (!sw) {
        *next = now + 1000;     //  out of memory: try again in a while
        return 0;
    }
    size_t total = 0;
    do {
        sw->n = 0;
        size_t step = max - total < SWEEP_STEP? max - total: SWEEP_STEP;
        sb_cmdid_expired (txn, dbi_expiry, now, step, next, s_sweep_copy, sw);
        for (size_t i = 0; i < sw->n; i++) {
            if (sb_key_valid (&sw->ckey [i]))
                sb_txn_del (txn, dbi, sw->ckey [i].buf, sw->ckey [i].len);
            sb_txn_del (txn, dbi_expiry, sw->ekey [i].buf, sw->ekey [i].len);
        }
        total += sw->n;
    } while (sw->n == SWEEP_STEP && total < max && txn->ret == 0);
    free (sw);
    return total;
}
