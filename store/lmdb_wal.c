/*  store/lmdb_wal.c — the store on LMDB behind its write-ahead log: what a
    commit writes to the log, the replay at open, and checkpoints.

    See store/wal.h for the file and docs/sessions.md, "Durability: the
    log", for why this loses nothing acknowledged, also on power loss. In
    short:
      - a write txn's puts and deletes are copied into one record as they
        are made; at commit the record is appended to the log and the log
        is fdatasynced (the one flush), and only then is the LMDB txn
        committed, MDB_NOSYNC, with the record's LSN under "wal_lsn" in the
        meta dbi; the commit returns after both, so a reader never sees a
        write that is not durable;
      - a checkpoint (every SB_WAL_CHECKPOINT bytes of records, on close,
        at open after the replay, after a map grow) syncs LMDB, saves its
        two meta pages and the synced LSN in the log's header, and starts
        the records again;
      - from one checkpoint to the next a read txn on the synced snapshot
        is held, so LMDB never reuses a page of it: whatever the unsynced
        commits after it left on disk, the snapshot is whole;
      - at open the saved meta pages are written back over LMDB's (which
        rolls LMDB back to the snapshot the log starts from), and the
        records after it are replayed.
    The log is taken only by the thread that holds LMDB's writer lock (a
    commit, or a checkpoint that begins a write txn of its own), so it
    needs no lock of its own. */
#include "store/lmdb_impl.h"
#include "store/wal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_LSN_KEY "wal_lsn"

//  --------------------------------------------------------------------------
//  Small helpers

static void
s_be64 (uint8_t be [8], uint64_t v)
{
    for (int i = 0; i < 8; i++)
        be [i] = (uint8_t) (v >> (56 - 8 * i));
}

//  The LSN LMDB last applied, as a txn sees it: 0 when none was written.
static int
s_applied (sb_lmdb_t *lm, MDB_txn *txn, uint64_t *lsn)
{
    MDB_val k = { strlen (S_LSN_KEY), (void *) S_LSN_KEY };
    MDB_val v;
    *lsn = 0;
    int rc = mdb_get (txn, lm->meta, &k, &v);
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc != 0)
        return s_code (rc);
    if (v.mv_size != 8)
        return SB_STORE_BACKEND;
    const uint8_t *p = (const uint8_t *) v.mv_data;
    for (int i = 0; i < 8; i++)
        *lsn = *lsn << 8 | p [i];
    return 0;
}

static int
s_set_applied (sb_lmdb_t *lm, MDB_txn *txn, uint64_t lsn)
{
    uint8_t be [8];
    s_be64 (be, lsn);
    MDB_val k = { strlen (S_LSN_KEY), (void *) S_LSN_KEY };
    MDB_val v = { sizeof be, be };
    return s_code (mdb_put (txn, lm->meta, &k, &v, 0));
}

static uint32_t
s_names_crc (sb_store_t *self)
{
    uint32_t crc = 0;
    for (unsigned i = 0; i < self->ndbi; i++)
        crc = sb_wal_crc32c (crc, self->names [i], strlen (self->names [i]) + 1);
    return crc;
}

//  The bytes of records after which a commit checkpoints first.
static size_t
s_checkpoint_bytes (void)
{
    const char *s = getenv ("SWITCHBOARD_WAL_CHECKPOINT_KB");
    if (s && *s) {
        char *end;
        long kb = strtol (s, &end, 10);
        if (*end == 0 && kb >= 4 && kb <= 1048576)
            return (size_t) kb * 1024;
    }
    return SB_WAL_CHECKPOINT;
}

bool
sb_lmdb_wal_wanted (void)
{
    const char *s = getenv ("SWITCHBOARD_WAL");
    return !(s && strcmp (s, "off") == 0);
}

//  --------------------------------------------------------------------------
//  Checkpoint

//  The caller holds LMDB's writer lock (a write txn is open, or nobody can
//  begin one), so that no commit falls between the sync and the meta pages
//  read: the pages saved are those of the snapshot just synced, and the
//  read txn begun in between holds exactly that snapshot.
static int
s_checkpoint (sb_store_t *self, bool recycle)
{
    sb_lmdb_t *lm = S_LMDB (self);
    if (lm->reader) {
        mdb_txn_abort (lm->reader);
        lm->reader = NULL;
    }
    int rc = s_code (mdb_env_sync (lm->env, 1));
    if (rc != 0)
        return rc;
    sb_wal_crash_point ("in_checkpoint");
    rc = s_code (mdb_txn_begin (lm->env, NULL, MDB_RDONLY, &lm->reader));
    if (rc != 0) {
        lm->reader = NULL;
        return rc;
    }
    uint64_t lsn = 0;
    if (lm->meta_open && (rc = s_applied (lm, lm->reader, &lsn)) != 0)
        return rc;
    const sb_wal_header_t *h = sb_wal_header (lm->wal);
    if (!lm->meta_open && h)
        lsn = h->lsn;

    int fd;
    rc = s_code (mdb_env_get_fd (lm->env, &fd));
    if (rc != 0)
        return rc;
    size_t mlen = 2 * (size_t) lm->psize;
    uint8_t *meta = (uint8_t *) malloc (mlen);
    if (!meta)
        return -ENOMEM;
    ssize_t n = pread (fd, meta, mlen, 0);
    if (n != (ssize_t) mlen) {
        free (meta);
        return n < 0? -errno: -EIO;
    }
    rc = sb_wal_set_header (lm->wal, lsn, lm->psize, lm->names_crc, meta);
    free (meta);
    if (rc != 0)
        return rc;
    if (recycle) {
        sb_wal_crash_point ("in_truncate");
        rc = sb_wal_recycle (lm->wal);
    }
    if (rc == 0)
        atomic_fetch_add_explicit (&lm->checkpoints, 1, memory_order_relaxed);
    return rc;
}

//  A checkpoint with a write txn of its own, to hold the writer lock.
static int
s_checkpoint_alone (sb_store_t *self, bool recycle)
{
    sb_lmdb_t *lm = S_LMDB (self);
    MDB_txn *w;
    int rc = s_code (mdb_txn_begin (lm->env, NULL, 0, &w));
    if (rc != 0)
        return rc;
    rc = s_checkpoint (self, recycle);
    mdb_txn_abort (w);
    return rc;
}

//  --------------------------------------------------------------------------
//  Open

int
sb_lmdb_wal_restore (sb_store_t *self, char *err, size_t errlen)
{
    sb_lmdb_t *lm = S_LMDB (self);
    char path [4096];
    snprintf (path, sizeof path, "%s/log.wal", self->dir);
    bool wanted = sb_lmdb_wal_wanted ();
    if (!wanted && access (path, F_OK) != 0)
        return 0;
    lm->wal = sb_wal_open (self->dir, err, errlen);
    if (!lm->wal)
        return -1;
    lm->wal_off = !wanted;
    lm->names_crc = s_names_crc (self);
    lm->ckpt_bytes = s_checkpoint_bytes ();

    //  Back to the snapshot the log starts from: its meta pages over
    //  LMDB's, synced, before LMDB reads them. The snapshot's pages were
    //  never reused (the held read txn), so this is always a whole tree,
    //  whatever state the commits after it left.
    const sb_wal_header_t *h = sb_wal_header (lm->wal);
    if (!h || h->psize == 0)
        return 0;
    snprintf (path, sizeof path, "%s/data.mdb", self->dir);
    int fd = open (path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        sb_store_err (err, errlen, "%s: the log has a checkpoint but LMDB's file cannot be opened: %s",
                      path, strerror (errno));
        return -1;
    }
    size_t mlen = 2 * (size_t) h->psize;
    off_t size = lseek (fd, 0, SEEK_END);
    int rc = 0;
    if (size < (off_t) mlen)
        rc = EINVAL;
    else
    if (pwrite (fd, h->meta, mlen, 0) != (ssize_t) mlen || fdatasync (fd) != 0)
        rc = errno? errno: EIO;
    close (fd);
    if (rc != 0) {
        sb_store_err (err, errlen, "%s: cannot restore the checkpoint's meta pages: %s",
                      path, strerror (rc));
        return -1;
    }
    return 0;
}

int
sb_lmdb_wal_hold (sb_store_t *self)
{
    sb_lmdb_t *lm = S_LMDB (self);
    if (!lm->wal)
        return 0;
    MDB_stat st;
    mdb_env_stat (lm->env, &st);
    lm->psize = st.ms_psize;
    if (lm->psize > SB_WAL_PAGE_MAX)
        return SB_STORE_BACKEND;
    return s_code (mdb_txn_begin (lm->env, NULL, MDB_RDONLY, &lm->reader));
}

typedef struct {
    sb_lmdb_t *lm;
    uint64_t lsn;
    const uint8_t *body;
    uint32_t len;
    bool applied;
} replay_t;

typedef struct {
    MDB_txn *txn;
    sb_lmdb_t *lm;
} apply_t;

static int
s_apply_op (void *ctx, int op, unsigned dbi, const void *key, size_t klen,
            const void *val, size_t vlen)
{
    apply_t *a = (apply_t *) ctx;
    MDB_val k = { klen, (void *) key };
    if (op == SB_WAL_DEL) {
        int rc = mdb_del (a->txn, a->lm->dbi [dbi], &k, NULL);
        return rc == MDB_NOTFOUND? 0: s_code (rc);
    }
    MDB_val v = { vlen, (void *) val };
    return s_code (mdb_put (a->txn, a->lm->dbi [dbi], &k, &v, 0));
}

//  One record, unless LMDB has it already: that check is what makes a
//  replay that stopped half-way safe to run again.
static int
s_replay_fn (sb_txn_t *txn, void *arg)
{
    replay_t *r = (replay_t *) arg;
    uint64_t applied;
    int rc = s_applied (r->lm, S_TXN (txn), &applied);
    if (rc == 0 && r->lsn <= applied)
        return 0;
    apply_t a = { S_TXN (txn), r->lm };
    if (rc == 0)
        rc = sb_wal_body_walk (r->body, r->len, txn->store->ndbi, s_apply_op, &a);
    if (rc == 0)
        rc = s_set_applied (r->lm, S_TXN (txn), r->lsn);
    if (rc == 0)
        r->applied = true;
    return txn->ret = rc;
}

int
sb_lmdb_wal_replay (sb_store_t *self, char *err, size_t errlen)
{
    sb_lmdb_t *lm = S_LMDB (self);
    if (!lm->wal)
        return 0;
    lm->meta_open = true;
    const sb_wal_header_t *h = sb_wal_header (lm->wal);
    uint64_t from = h? h->lsn: 0;
    //  A txn of its own: the held one began before the meta dbi's handle.
    uint64_t applied = 0;
    MDB_txn *rt;
    int rc = s_code (mdb_txn_begin (lm->env, NULL, MDB_RDONLY, &rt));
    if (rc == 0) {
        rc = s_applied (lm, rt, &applied);
        mdb_txn_abort (rt);
    }
    if (rc == 0 && h && applied < h->lsn) {
        sb_store_err (err, errlen, "%s: LMDB's applied LSN %llu is behind the log's checkpoint %llu; refusing to open",
                      self->dir, (unsigned long long) applied, (unsigned long long) h->lsn);
        return -1;
    }
    if (applied > from)
        from = applied;

    //  Records from the first one in the file, each the next LSN; those at
    //  or before `from` are in LMDB already. The first that is not the
    //  next (or torn, or bad) ends them: nothing after it was acknowledged.
    uint64_t expect = 0;
    unsigned long replayed = 0;
    while (rc == 0 && h) {
        replay_t r = { .lm = lm };
        int got = sb_wal_next (lm->wal, expect, &r.body, &r.len, &r.lsn);
        if (got <= 0) {
            rc = got;
            break;
        }
        if (expect == 0 && r.lsn > from + 1)
            break;              //  a gap: these are not the records after LMDB's
        expect = r.lsn + 1;
        if (r.lsn <= from)
            continue;
        if (h->names_crc != lm->names_crc) {
            sb_store_err (err, errlen, "%s: the log was written with other dbi names; refusing to replay it",
                          self->dir);
            return -1;
        }
        rc = sb_store_write (self, s_replay_fn, &r);
        if (rc == 0 && r.applied)
            replayed++;
        from = r.lsn;
    }
    if (rc != 0) {
        sb_store_err (err, errlen, "%s: cannot replay the log: %s", self->dir, sb_store_strerror (rc));
        return -1;
    }
    lm->next_lsn = from + 1;
    lm->replayed = replayed;

    //  The replayed records into LMDB's file, and the log started again.
    rc = s_checkpoint_alone (self, true);
    if (rc == 0 && lm->wal_off) {
        //  SWITCHBOARD_WAL=off after a run with the log: LMDB is synced,
        //  so the log goes, and LMDB syncs its own commits again.
        mdb_txn_abort (lm->reader);
        lm->reader = NULL;
        rc = sb_wal_remove (&lm->wal);
        if (rc == 0)
            rc = s_code (mdb_env_set_flags (lm->env, MDB_NOSYNC, 0));
    }
    if (rc != 0) {
        sb_store_err (err, errlen, "%s: cannot checkpoint the log: %s", self->dir, sb_store_strerror (rc));
        return -1;
    }
    lm->logging = lm->wal != NULL;
    return 0;
}

//  --------------------------------------------------------------------------
//  Commit

int
sb_lmdb_wal_commit (sb_txn_t *txn)
{
    sb_store_t *self = txn->store;
    sb_lmdb_t *lm = S_LMDB (self);
    MDB_txn *t = S_TXN (txn);
    if (lm->broken) {
        mdb_txn_abort (t);
        return lm->broken;
    }
    if (lm->buf.len == 0)
        return s_code (mdb_txn_commit (t));

    //  A record of a failed commit that could not be unwritten then: it
    //  must not outlive this commit, whose record takes its place.
    int rc = 0;
    if (lm->unwritten && (rc = sb_wal_unappend (lm->wal)) == 0)
        lm->unwritten = false;
    if (rc == 0 && sb_wal_used (lm->wal) >= lm->ckpt_bytes)
        rc = s_checkpoint (self, true);
    if (rc == 0)
        rc = s_set_applied (lm, t, lm->next_lsn);
    if (rc == 0)
        rc = sb_wal_append (lm->wal, lm->next_lsn, lm->buf.data, lm->buf.len);
    if (rc != 0) {
        mdb_txn_abort (t);
        return rc;
    }
    //  Durable from here: a restart replays it, acknowledged or not.
    sb_wal_crash_point ("after_flush");
    rc = s_code (mdb_txn_commit (t));
    if (rc != 0) {
        //  Not applied, so not to be replayed either: the caller hears of
        //  the failure (and may run the txn again, under the same LSN).
        //  When even that fails (the disk that failed the commit), the
        //  next commit tries again before its own record.
        lm->unwritten = sb_wal_unappend (lm->wal) != 0;
        return rc;
    }
    lm->next_lsn++;
    sb_wal_crash_point ("after_apply");
    return 0;
}

int
sb_lmdb_wal_record (sb_txn_t *txn, int op, unsigned dbi,
                    const void *key, size_t klen, const void *val, size_t vlen)
{
    sb_lmdb_t *lm = S_LMDB (txn->store);
    return sb_wal_buf_op (&lm->buf, op, dbi, key, klen, val, vlen);
}

//  --------------------------------------------------------------------------
//  Map growth and close

void
sb_lmdb_wal_release (sb_store_t *self)
{
    sb_lmdb_t *lm = S_LMDB (self);
    if (lm->reader) {
        mdb_txn_abort (lm->reader);
        lm->reader = NULL;
    }
}

int
sb_lmdb_wal_regain (sb_store_t *self)
{
    sb_lmdb_t *lm = S_LMDB (self);
    if (!lm->wal)
        return 0;
    //  Nothing was committed since the reader went (the grow held the
    //  store's lock with no txn open), so the snapshot it held is still
    //  whole; the checkpoint moves the log's header onto the grown map.
    //  During the replay the records are still to be read: no recycle.
    int rc = s_checkpoint_alone (self, lm->logging);
    if (rc != 0)
        lm->broken = rc;
    return rc;
}

void
sb_lmdb_wal_close (sb_store_t *self)
{
    sb_lmdb_t *lm = S_LMDB (self);
    if (lm->wal && lm->logging && !lm->broken
        && !(lm->unwritten && sb_wal_unappend (lm->wal) != 0))
        s_checkpoint_alone (self, true);
    sb_lmdb_wal_release (self);
    sb_wal_close (&lm->wal);
    sb_wal_buf_free (&lm->buf);
}
