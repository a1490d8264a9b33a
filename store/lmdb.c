/*  store/lmdb.c — the store on LMDB: the environment.

    See store/store.h for the contract, and store/store_impl.h for the front
    that calls these. The notes here are about how LMDB is kept.

    Map growth. mdb_env_set_mapsize may only be called while this process
    has no txn open on the environment. Every txn therefore registers itself
    in the store's `open_txns` under its `lock` before it calls into LMDB
    (store/txn.c), and a grow checks that count under the same lock, so a
    read txn begun on another thread (MDB_NOTLS allows it) can never race a
    grow. A grow that finds a txn still open does not wait for it: the
    caller gets SB_STORE_MAP_FULL.

    Durability. A commit that returned 0 is on disk, which is what lets an
    actor reply and publish right after it. With the write-ahead log (the
    default; store/lmdb_wal.c) that is the log's one fdatasync, and LMDB
    runs MDB_NOSYNC, synced at the log's checkpoints: MDB_NOSYNC is allowed
    only under the log. Without it (SWITCHBOARD_WAL=off) LMDB syncs every
    commit itself, data pages then meta page. No MDB_WRITEMAP: with a writable map a full disk is a SIGBUS in
    the middle of a memcpy; without it, it is an ENOSPC from write(2) that
    we can report as SB_STORE_DISK_FULL.
*/
#include "store/lmdb_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

//  mkdir -p with mode 0700 for every folder it creates. Existing folders
//  keep their mode: DATA may have been made by the operator on purpose.
static int
s_mkdir_p (const char *dir)
{
    char path [4096];
    size_t len = strlen (dir);
    if (len == 0 || len >= sizeof path)
        return ENAMETOOLONG;
    memcpy (path, dir, len + 1);
    for (char *p = path + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char saved = *p;
            *p = 0;
            if (mkdir (path, 0700) != 0 && errno != EEXIST)
                return errno;
            *p = saved;
            if (saved == 0)
                break;
        }
    }
    struct stat st;
    if (stat (dir, &st) != 0)
        return errno;
    return S_ISDIR (st.st_mode)? 0: ENOTDIR;
}

//  --------------------------------------------------------------------------
//  Map growth: what sb_store_write does when a commit found the map full

static int
s_grow (sb_store_t *self)
{
    sb_lmdb_t *lm = S_LMDB (self);
    int rc = SB_STORE_MAP_FULL;
    pthread_mutex_lock (&self->lock);
    if (self->open_txns == 0 && lm->mapsize < SB_STORE_MAPSIZE_MAX) {
        size_t size = lm->mapsize * 2;
        if (size > SB_STORE_MAPSIZE_MAX)
            size = SB_STORE_MAPSIZE_MAX;
        //  The log's read txn goes while the map moves, and a checkpoint
        //  takes it again at once: nothing can commit in between.
        sb_lmdb_wal_release (self);
        rc = s_code (mdb_env_set_mapsize (lm->env, size));
        int wrc = sb_lmdb_wal_regain (self);
        if (rc == 0)
            rc = wrc;
        if (rc == 0) {
            MDB_envinfo info;
            mdb_env_info (lm->env, &info);
            lm->mapsize = info.me_mapsize;
            atomic_fetch_add_explicit (&lm->grows, 1, memory_order_relaxed);
        }
    }
    pthread_mutex_unlock (&self->lock);
    return rc;
}

//  The txn is gone, so the map may grow; then everything fn wrote is
//  written again from scratch, which is why fn must be re-runnable.
static int
s_again (sb_store_t *self, int rc, unsigned attempt)
{
    if (rc != SB_STORE_MAP_FULL)
        return rc;
    return s_grow (self);
}

//  --------------------------------------------------------------------------
//  Environment

typedef struct {
    sb_store_t *self;
    unsigned version;
    char *err;
    size_t errlen;
} open_ctx_t;

//  A version record is missing. That is fine for a fresh environment, and a
//  refusal for one that already holds databases we did not make.
static int
s_check_fresh (sb_txn_t *txn, open_ctx_t *c)
{
    MDB_dbi main_dbi;
    int rc = mdb_dbi_open (S_TXN (txn), NULL, 0, &main_dbi);
    MDB_cursor *cursor = NULL;
    if (rc == 0)
        rc = mdb_cursor_open (S_TXN (txn), main_dbi, &cursor);
    MDB_val k, v;
    bool foreign = false;
    if (rc == 0) {
        for (rc = mdb_cursor_get (cursor, &k, &v, MDB_FIRST); rc == 0;
             rc = mdb_cursor_get (cursor, &k, &v, MDB_NEXT)) {
            if (!(k.mv_size == strlen (SB_STORE_META_NAME)
                  && memcmp (k.mv_data, SB_STORE_META_NAME, k.mv_size) == 0)) {
                foreign = true;
                break;
            }
        }
        if (rc == MDB_NOTFOUND)
            rc = 0;
        mdb_cursor_close (cursor);
    }
    if (rc != 0)
        return s_code (rc);
    if (foreign) {
        sb_store_err (c->err, c->errlen,
                      "%s: LMDB environment has no schema version (not made by switchboard?); "
                      "expected version %u", c->self->dir, c->version);
        return SB_STORE_OPEN_REFUSED;
    }
    return 0;
}

static int
s_open_fn (sb_txn_t *txn, void *arg)
{
    open_ctx_t *c = (open_ctx_t *) arg;
    sb_store_t *self = c->self;
    sb_lmdb_t *lm = S_LMDB (self);

    int rc = mdb_dbi_open (S_TXN (txn), SB_STORE_META_NAME, MDB_CREATE, &lm->meta);
    if (rc != 0)
        return txn->ret = s_code (rc);

    MDB_val k = { strlen (SB_STORE_META_VERSION), (void *) SB_STORE_META_VERSION };
    MDB_val v;
    rc = mdb_get (S_TXN (txn), lm->meta, &k, &v);
    if (rc == 0) {
        if (v.mv_size != 4) {
            sb_store_err (c->err, c->errlen,
                          "%s: schema version record is %zu bytes, not 4; refusing to open",
                          self->dir, v.mv_size);
            return SB_STORE_OPEN_REFUSED;
        }
        unsigned found = sb_store_version_get ((const uint8_t *) v.mv_data);
        if (found != c->version) {
            sb_store_err (c->err, c->errlen,
                          "%s: schema version %u is unknown to this build (expects %u)",
                          self->dir, found, c->version);
            return SB_STORE_OPEN_REFUSED;
        }
    }
    else
    if (rc == MDB_NOTFOUND) {
        rc = s_check_fresh (txn, c);
        if (rc != 0)
            return rc < 0? (txn->ret = rc): rc;
        uint8_t be [4];
        sb_store_version_put (be, c->version);
        v = (MDB_val) { sizeof be, be };
        rc = mdb_put (S_TXN (txn), lm->meta, &k, &v, 0);
        if (rc != 0)
            return txn->ret = s_code (rc);
    }
    else
        return txn->ret = s_code (rc);

    for (unsigned i = 0; i < self->ndbi; i++) {
        rc = mdb_dbi_open (S_TXN (txn), self->names [i], MDB_CREATE, &lm->dbi [i]);
        if (rc != 0)
            return txn->ret = s_code (rc);
    }
    return 0;
}

//  The map size asked for, in bounds and in whole pages.
static size_t
s_mapsize (size_t initial_mapsize)
{
    size_t mapsize = initial_mapsize? initial_mapsize: SB_STORE_MAPSIZE_DEFAULT;
    if (mapsize < SB_STORE_MAPSIZE_MIN)
        mapsize = SB_STORE_MAPSIZE_MIN;
    if (mapsize > SB_STORE_MAPSIZE_MAX)
        mapsize = SB_STORE_MAPSIZE_MAX;
    size_t page = (size_t) sysconf (_SC_PAGESIZE);
    return (mapsize + page - 1) / page * page;
}

static int
s_open (sb_store_t *self, unsigned schema_version, size_t initial_mapsize,
        char *err, size_t errlen)
{
    const char *dir = self->dir;
    int rc = s_mkdir_p (dir);
    if (rc != 0) {
        sb_store_err (err, errlen, "%s: cannot create folder: %s", dir, strerror (rc));
        return -1;
    }
    sb_lmdb_t *lm = (sb_lmdb_t *) calloc (1, sizeof *lm);
    if (!lm) {
        sb_store_err (err, errlen, "%s: out of memory", dir);
        return -1;
    }
    self->impl = lm;

    //  MDB_NOTLS: read txns are tied to the txn, not to the thread, so an
    //  actor may hand a read txn to a helper thread, and a thread may hold
    //  more than one. No MDB_WRITEMAP; MDB_NOSYNC only under the log (see
    //  the top), which is opened first: it may roll LMDB back to its last
    //  checkpoint before LMDB reads its meta pages.
    if (sb_lmdb_wal_restore (self, err, errlen) != 0)
        return -1;
    rc = mdb_env_create (&lm->env);
    if (rc == 0)
        rc = mdb_env_set_maxdbs (lm->env, self->ndbi + 1);
    if (rc == 0)
        rc = mdb_env_set_mapsize (lm->env, s_mapsize (initial_mapsize));
    if (rc == 0)
        rc = mdb_env_open (lm->env, dir, MDB_NOTLS | (lm->wal? MDB_NOSYNC: 0), 0600);
    if (rc != 0) {
        sb_store_err (err, errlen, "%s: cannot open LMDB environment: %s",
                      dir, mdb_strerror (rc));
        return -1;
    }
    //  sb_key_t and the checks here assume LMDB's default key limit; a
    //  liblmdb built with another MDB_MAXKEYSIZE would fail keys late.
    if (mdb_env_get_maxkeysize (lm->env) < SB_STORE_KEY_MAX) {
        sb_store_err (err, errlen, "%s: liblmdb allows keys of only %d bytes (need %d)",
                      dir, mdb_env_get_maxkeysize (lm->env), SB_STORE_KEY_MAX);
        return -1;
    }
    //  An existing file larger than the asked-for map sets the map size.
    MDB_envinfo info;
    mdb_env_info (lm->env, &info);
    lm->mapsize = info.me_mapsize;

    //  A process that died inside a read txn leaves its reader slot behind,
    //  and the pages that slot pins can never be reused: clear them now.
    rc = mdb_reader_check (lm->env, &lm->stale_readers);
    if (rc != 0) {
        sb_store_err (err, errlen, "%s: reader check failed: %s", dir, mdb_strerror (rc));
        return -1;
    }

    //  The read txn that keeps the log's checkpoint whole, from before the
    //  first write on.
    rc = sb_lmdb_wal_hold (self);
    if (rc != 0) {
        sb_store_err (err, errlen, "%s: cannot begin the log's read txn: %s",
                      dir, sb_store_strerror (rc));
        return -1;
    }
    open_ctx_t ctx = { self, schema_version, err, errlen };
    rc = sb_store_write (self, s_open_fn, &ctx);
    if (rc != 0) {
        if (rc != SB_STORE_OPEN_REFUSED)
            sb_store_err (err, errlen, "%s: cannot open databases: %s",
                          dir, sb_store_strerror (rc));
        return -1;
    }
    //  The records LMDB lacks, then a checkpoint; commits go through the
    //  log after that.
    return sb_lmdb_wal_replay (self, err, errlen) == 0? 0: -1;
}

static void
s_destroy (sb_store_t *self)
{
    sb_lmdb_t *lm = S_LMDB (self);
    if (!lm)
        return;
    if (lm->env)
        sb_lmdb_wal_close (self);
    else
        sb_wal_close (&lm->wal);
    if (lm->env)
        mdb_env_close (lm->env);
    free (lm);
    self->impl = NULL;
}

static int
s_info (sb_txn_t *txn, sb_store_info_t *info)
{
    sb_store_t *self = txn->store;
    sb_lmdb_t *lm = S_LMDB (self);
    MDB_envinfo ei;
    MDB_stat st;
    mdb_env_info (lm->env, &ei);
    mdb_env_stat (lm->env, &st);
    info->mapsize = ei.me_mapsize;
    info->page_size = st.ms_psize;
    info->used_pages = ei.me_last_pgno + 1;
    info->used_bytes = info->used_pages * info->page_size;
    info->max_readers = ei.me_maxreaders;
    //  The readers of the store's users: the log's own read txn, which
    //  holds the last checkpoint's snapshot, is not one of them.
    info->num_readers = ei.me_numreaders - (lm->reader? 1: 0);
    info->map_grows = atomic_load_explicit (&lm->grows, memory_order_relaxed);
    info->stale_readers = lm->stale_readers;
    for (unsigned i = 0; i < self->ndbi; i++) {
        int rc = mdb_stat (S_TXN (txn), lm->dbi [i], &st);
        if (rc != 0)
            return s_code (rc);
        info->entries [i] = st.ms_entries;
    }
    return 0;
}

const sb_store_ops_t sb_store_lmdb_ops = {
    .name       = "lmdb",
    .open       = s_open,
    .destroy    = s_destroy,
    .info       = s_info,
    .again      = s_again,
    .txn_begin  = sb_lmdb_txn_begin,
    .txn_commit = sb_lmdb_txn_commit,
    .txn_abort  = sb_lmdb_txn_abort,
    .put        = sb_lmdb_put,
    .insert     = sb_lmdb_insert,
    .append     = sb_lmdb_append,
    .get        = sb_lmdb_get,
    .del        = sb_lmdb_del,
    .guard      = sb_lmdb_guard,
    .last       = sb_lmdb_last,
    .take       = sb_lmdb_take,
    .iter_begin = sb_lmdb_iter_begin,
    .iter_next  = sb_lmdb_iter_next,
    .iter_del   = sb_lmdb_iter_del,
    .iter_end   = sb_lmdb_iter_end,
};
