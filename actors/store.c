/*  actors/store.c — the LMDB wrapper used by every stateful actor.

    See store.h for the contract. The notes here are about how it is kept.

    Map growth. mdb_env_set_mapsize may only be called while this process
    has no txn open on the environment. Every txn therefore registers itself
    in `open_txns` under `lock` before it calls into LMDB, and a grow checks
    that count under the same lock, so a read txn begun on another thread
    (MDB_NOTLS allows it) can never race a grow. A grow that finds a txn
    still open does not wait for it: the caller gets SB_STORE_MAP_FULL.

    Durability. No MDB_NOSYNC, no MDB_NOMETASYNC: a commit that returned 0 is
    on disk, which is what lets an actor reply and publish right after it.
    No MDB_WRITEMAP either: with a writable map a full disk is a SIGBUS in
    the middle of a memcpy; without it, it is an ENOSPC from write(2) that
    we can report as SB_STORE_DISK_FULL.
*/
#include "actors/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

//  The store's own dbi, holding the schema version.
#define META_NAME       "meta"
#define META_VERSION    "schema_version"

struct _sb_store_t {
    MDB_env *env;
    char *dir;
    unsigned ndbi;
    MDB_dbi dbi [SB_STORE_DBI_MAX];
    char *names [SB_STORE_DBI_MAX];
    MDB_dbi meta;

    pthread_mutex_t lock;       //  orders txn registration against grows
    int open_txns;              //  guarded by lock
    atomic_bool writing;        //  a write txn is open
    size_t mapsize;             //  guarded by lock

    atomic_uint_fast64_t commits;
    atomic_uint_fast64_t aborts;
    atomic_uint_fast64_t grows;
    atomic_uint_fast64_t disk_full;
    int stale_readers;
};

static void
s_err (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (err, errlen, fmt, ap);
    va_end (ap);
}

//  Maps an LMDB return (MDB_* codes, or a positive errno) to ours.
static int
s_code (int rc)
{
    switch (rc) {
        case MDB_SUCCESS:   return 0;
        case MDB_NOTFOUND:  return SB_STORE_NOTFOUND;
        case MDB_KEYEXIST:  return MDB_KEYEXIST;
        case MDB_MAP_FULL:  return SB_STORE_MAP_FULL;
        case ENOSPC:
        case EDQUOT:        return SB_STORE_DISK_FULL;
        default:            return rc > 0? -rc: rc;
    }
}

const char *
sb_store_strerror (int code)
{
    switch (code) {
        case SB_STORE_OK:        return "success";
        case SB_STORE_NOTFOUND:  return "not found";
        case SB_STORE_EXISTS:    return "key already exists";
        case SB_STORE_MAP_FULL:  return "LMDB map is full and cannot grow";
        case SB_STORE_DISK_FULL: return "disk full";
        case SB_STORE_INVALID:   return "invalid argument (dbi index, key length or key)";
        case SB_STORE_BUSY:      return "a write transaction is already open on this store";
        default: break;
    }
    if (code >= MDB_KEYEXIST && code <= MDB_LAST_ERRCODE)
        return mdb_strerror (code);
    if (code < 0 && code > -4096)
        return strerror (-code);
    return "unknown store error";
}

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
//  Map growth and the re-run loop shared by open and sb_store_write

static int
s_grow (sb_store_t *self)
{
    int rc = SB_STORE_MAP_FULL;
    pthread_mutex_lock (&self->lock);
    if (self->open_txns == 0 && self->mapsize < SB_STORE_MAPSIZE_MAX) {
        size_t size = self->mapsize * 2;
        if (size > SB_STORE_MAPSIZE_MAX)
            size = SB_STORE_MAPSIZE_MAX;
        rc = s_code (mdb_env_set_mapsize (self->env, size));
        if (rc == 0) {
            MDB_envinfo info;
            mdb_env_info (self->env, &info);
            self->mapsize = info.me_mapsize;
            atomic_fetch_add_explicit (&self->grows, 1, memory_order_relaxed);
        }
    }
    pthread_mutex_unlock (&self->lock);
    return rc;
}

int
sb_store_write (sb_store_t *self, sb_store_write_fn *fn, void *ctx)
{
    if (!self || !fn)
        return SB_STORE_INVALID;
    for (;;) {
        sb_txn_t txn;
        if (sb_txn_begin (self, &txn, true) != 0)
            return txn.ret;
        int fn_rc = fn (&txn, ctx);
        if (txn.ret == 0 && fn_rc != 0) {
            sb_txn_abort (&txn);
            return fn_rc;
        }
        int rc = sb_txn_commit (&txn);
        if (rc != SB_STORE_MAP_FULL)
            return rc;
        //  The txn is gone, so the map may grow; then everything fn wrote is
        //  written again from scratch, which is why fn must be re-runnable.
        rc = s_grow (self);
        if (rc != 0)
            return rc;
    }
}

//  --------------------------------------------------------------------------
//  Environment

typedef struct {
    sb_store_t *self;
    unsigned version;
    char *err;
    size_t errlen;
} open_ctx_t;

//  Positive, so that it cannot be mistaken for a store code: the message is
//  already in err.
#define OPEN_REFUSED 1

//  A version record is missing. That is fine for a fresh environment, and a
//  refusal for one that already holds databases we did not make.
static int
s_check_fresh (sb_txn_t *txn, open_ctx_t *c)
{
    MDB_dbi main_dbi;
    int rc = mdb_dbi_open (txn->txn, NULL, 0, &main_dbi);
    MDB_cursor *cursor = NULL;
    if (rc == 0)
        rc = mdb_cursor_open (txn->txn, main_dbi, &cursor);
    MDB_val k, v;
    bool foreign = false;
    if (rc == 0) {
        for (rc = mdb_cursor_get (cursor, &k, &v, MDB_FIRST); rc == 0;
             rc = mdb_cursor_get (cursor, &k, &v, MDB_NEXT)) {
            if (!(k.mv_size == strlen (META_NAME)
                  && memcmp (k.mv_data, META_NAME, k.mv_size) == 0)) {
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
        s_err (c->err, c->errlen,
               "%s: LMDB environment has no schema version (not made by switchboard?); "
               "expected version %u", c->self->dir, c->version);
        return OPEN_REFUSED;
    }
    return 0;
}

static int
s_open_fn (sb_txn_t *txn, void *arg)
{
    open_ctx_t *c = (open_ctx_t *) arg;
    sb_store_t *self = c->self;

    int rc = mdb_dbi_open (txn->txn, META_NAME, MDB_CREATE, &self->meta);
    if (rc != 0)
        return txn->ret = s_code (rc);

    MDB_val k = { strlen (META_VERSION), (void *) META_VERSION };
    MDB_val v;
    rc = mdb_get (txn->txn, self->meta, &k, &v);
    if (rc == 0) {
        if (v.mv_size != 4) {
            s_err (c->err, c->errlen,
                   "%s: schema version record is %zu bytes, not 4; refusing to open",
                   self->dir, v.mv_size);
            return OPEN_REFUSED;
        }
        const uint8_t *p = (const uint8_t *) v.mv_data;
        uint32_t found = (uint32_t) p [0] << 24 | (uint32_t) p [1] << 16
                       | (uint32_t) p [2] << 8 | p [3];
        if (found != c->version) {
            s_err (c->err, c->errlen,
                   "%s: schema version %u is unknown to this build (expects %u)",
                   self->dir, (unsigned) found, c->version);
            return OPEN_REFUSED;
        }
    }
    else
    if (rc == MDB_NOTFOUND) {
        rc = s_check_fresh (txn, c);
        if (rc != 0)
            return rc < 0? (txn->ret = rc): rc;
        uint8_t be [4] = {
            (uint8_t) (c->version >> 24), (uint8_t) (c->version >> 16),
            (uint8_t) (c->version >> 8), (uint8_t) c->version
        };
        v = (MDB_val) { sizeof be, be };
        rc = mdb_put (txn->txn, self->meta, &k, &v, 0);
        if (rc != 0)
            return txn->ret = s_code (rc);
    }
    else
        return txn->ret = s_code (rc);

    for (unsigned i = 0; i < self->ndbi; i++) {
        rc = mdb_dbi_open (txn->txn, self->names [i], MDB_CREATE, &self->dbi [i]);
        if (rc != 0)
            return txn->ret = s_code (rc);
    }
    return 0;
}

//  Checks the name list before anything is allocated.
static int
s_check_names (const char *const *names, unsigned *count, char *err, size_t errlen)
{
    if (!names) {
        s_err (err, errlen, "store: no dbi name list");
        return -1;
    }
    unsigned n = 0;
    for (; names [n]; n++) {
        if (n == SB_STORE_DBI_MAX) {
            s_err (err, errlen, "store: more than %d dbi names", SB_STORE_DBI_MAX);
            return -1;
        }
        size_t len = strlen (names [n]);
        if (len == 0 || len > SB_STORE_KEY_MAX) {
            s_err (err, errlen, "store: dbi name %u is empty or too long", n);
            return -1;
        }
        if (strcmp (names [n], META_NAME) == 0) {
            s_err (err, errlen, "store: dbi name \"%s\" is reserved", META_NAME);
            return -1;
        }
        for (unsigned i = 0; i < n; i++)
            if (strcmp (names [i], names [n]) == 0) {
                s_err (err, errlen, "store: dbi name \"%s\" is given twice", names [n]);
                return -1;
            }
    }
    *count = n;
    return 0;
}

sb_store_t *
sb_store_open (const char *dir, const char *const *dbi_names,
               unsigned schema_version, size_t initial_mapsize,
               char *err, size_t errlen)
{
    s_err (err, errlen, "");
    if (!dir || !*dir) {
        s_err (err, errlen, "store: no folder given");
        return NULL;
    }
    unsigned ndbi;
    if (s_check_names (dbi_names, &ndbi, err, errlen) != 0)
        return NULL;
    int rc = s_mkdir_p (dir);
    if (rc != 0) {
        s_err (err, errlen, "%s: cannot create folder: %s", dir, strerror (rc));
        return NULL;
    }

    sb_store_t *self = (sb_store_t *) calloc (1, sizeof *self);
    if (!self) {
        s_err (err, errlen, "%s: out of memory", dir);
        return NULL;
    }
    pthread_mutex_init (&self->lock, NULL);
    atomic_init (&self->writing, false);
    self->dir = strdup (dir);
    self->ndbi = ndbi;
    bool oom = !self->dir;
    for (unsigned i = 0; i < ndbi && !oom; i++)
        oom = !(self->names [i] = strdup (dbi_names [i]));
    if (oom) {
        s_err (err, errlen, "%s: out of memory", dir);
        sb_store_destroy (&self);
        return NULL;
    }

    size_t mapsize = initial_mapsize? initial_mapsize: SB_STORE_MAPSIZE_DEFAULT;
    if (mapsize < SB_STORE_MAPSIZE_MIN)
        mapsize = SB_STORE_MAPSIZE_MIN;
    if (mapsize > SB_STORE_MAPSIZE_MAX)
        mapsize = SB_STORE_MAPSIZE_MAX;
    size_t page = (size_t) sysconf (_SC_PAGESIZE);
    mapsize = (mapsize + page - 1) / page * page;

    //  MDB_NOTLS: read txns are tied to the txn, not to the thread, so an
    //  actor may hand a read txn to a helper thread, and a thread may hold
    //  more than one. No MDB_WRITEMAP and no MDB_NOSYNC: see the top.
    rc = mdb_env_create (&self->env);
    if (rc == 0)
        rc = mdb_env_set_maxdbs (self->env, ndbi + 1);
    if (rc == 0)
        rc = mdb_env_set_mapsize (self->env, mapsize);
    if (rc == 0)
        rc = mdb_env_open (self->env, dir, MDB_NOTLS, 0600);
    if (rc != 0) {
        s_err (err, errlen, "%s: cannot open LMDB environment: %s",
               dir, mdb_strerror (rc));
        sb_store_destroy (&self);
        return NULL;
    }
    //  sb_key_t and the checks here assume LMDB's default key limit; a
    //  liblmdb built with another MDB_MAXKEYSIZE would fail keys late.
    if (mdb_env_get_maxkeysize (self->env) < SB_STORE_KEY_MAX) {
        s_err (err, errlen, "%s: liblmdb allows keys of only %d bytes (need %d)",
               dir, mdb_env_get_maxkeysize (self->env), SB_STORE_KEY_MAX);
        sb_store_destroy (&self);
        return NULL;
    }
    //  An existing file larger than the asked-for map sets the map size.
    MDB_envinfo info;
    mdb_env_info (self->env, &info);
    self->mapsize = info.me_mapsize;

    //  A process that died inside a read txn leaves its reader slot behind,
    //  and the pages that slot pins can never be reused: clear them now.
    rc = mdb_reader_check (self->env, &self->stale_readers);
    if (rc != 0) {
        s_err (err, errlen, "%s: reader check failed: %s", dir, mdb_strerror (rc));
        sb_store_destroy (&self);
        return NULL;
    }

    open_ctx_t ctx = { self, schema_version, err, errlen };
    rc = sb_store_write (self, s_open_fn, &ctx);
    if (rc != 0) {
        if (rc != OPEN_REFUSED)
            s_err (err, errlen, "%s: cannot open databases: %s",
                   dir, sb_store_strerror (rc));
        sb_store_destroy (&self);
        return NULL;
    }
    //  Opening is not a commit anyone asked for; keep the counters about
    //  the actor's own writes.
    atomic_store (&self->commits, 0);
    atomic_store (&self->aborts, 0);
    return self;
}

void
sb_store_destroy (sb_store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sb_store_t *self = *self_p;
    if (self->env)
        mdb_env_close (self->env);
    for (unsigned i = 0; i < self->ndbi; i++)
        free (self->names [i]);
    free (self->dir);
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

const char *
sb_store_dir (sb_store_t *self)
{
    return self? self->dir: NULL;
}

const char *
sb_store_dbi_name (sb_store_t *self, unsigned index)
{
    return self && index < self->ndbi? self->names [index]: NULL;
}

int
sb_store_info (sb_store_t *self, sb_store_info_t *info)
{
    if (!self || !info)
        return SB_STORE_INVALID;
    memset (info, 0, sizeof *info);
    sb_txn_t txn;
    if (sb_txn_begin (self, &txn, false) != 0)
        return txn.ret;
    MDB_envinfo ei;
    MDB_stat st;
    mdb_env_info (self->env, &ei);
    mdb_env_stat (self->env, &st);
    info->mapsize = ei.me_mapsize;
    info->page_size = st.ms_psize;
    info->used_pages = ei.me_last_pgno + 1;
    info->used_bytes = info->used_pages * info->page_size;
    info->max_readers = ei.me_maxreaders;
    info->num_readers = ei.me_numreaders;
    info->ndbi = self->ndbi;
    for (unsigned i = 0; i < self->ndbi && txn.ret == 0; i++) {
        int rc = mdb_stat (txn.txn, self->dbi [i], &st);
        if (rc != 0)
            txn.ret = s_code (rc);
        else
            info->entries [i] = st.ms_entries;
    }
    info->commits = atomic_load_explicit (&self->commits, memory_order_relaxed);
    info->aborts = atomic_load_explicit (&self->aborts, memory_order_relaxed);
    info->map_grows = atomic_load_explicit (&self->grows, memory_order_relaxed);
    info->disk_full = atomic_load_explicit (&self->disk_full, memory_order_relaxed);
    info->stale_readers = self->stale_readers;
    return sb_txn_commit (&txn);
}

//  --------------------------------------------------------------------------
//  Transactions

int
sb_txn_begin (sb_store_t *store, sb_txn_t *txn, bool write)
{
    if (!txn)
        return SB_STORE_INVALID;
    *txn = (sb_txn_t) { .store = store, .write = write };
    if (!store)
        return txn->ret = SB_STORE_INVALID;

    //  LMDB's writer lock is not recursive: a nested begin on the owning
    //  thread would hang forever. Refuse it instead.
    if (write) {
        bool expected = false;
        if (!atomic_compare_exchange_strong (&store->writing, &expected, true))
            return txn->ret = SB_STORE_BUSY;
    }
    pthread_mutex_lock (&store->lock);
    store->open_txns++;
    pthread_mutex_unlock (&store->lock);

    int rc = mdb_txn_begin (store->env, NULL, write? 0: MDB_RDONLY, &txn->txn);
    if (rc == MDB_MAP_RESIZED) {
        //  Another process grew the map. Adopt its size, which LMDB allows
        //  only while we have no other txn open.
        pthread_mutex_lock (&store->lock);
        if (store->open_txns == 1 && mdb_env_set_mapsize (store->env, 0) == 0) {
            MDB_envinfo info;
            mdb_env_info (store->env, &info);
            store->mapsize = info.me_mapsize;
            rc = mdb_txn_begin (store->env, NULL, write? 0: MDB_RDONLY, &txn->txn);
        }
        pthread_mutex_unlock (&store->lock);
    }
    if (rc != 0) {
        txn->txn = NULL;
        txn->ret = s_code (rc);
        pthread_mutex_lock (&store->lock);
        store->open_txns--;
        pthread_mutex_unlock (&store->lock);
        if (write)
            atomic_store (&store->writing, false);
    }
    return txn->ret;
}

//  Forgets an ended txn: its LMDB handle is already freed.
static void
s_txn_release (sb_txn_t *txn)
{
    sb_store_t *store = txn->store;
    txn->txn = NULL;
    pthread_mutex_lock (&store->lock);
    store->open_txns--;
    pthread_mutex_unlock (&store->lock);
    if (txn->write)
        atomic_store (&store->writing, false);
}

void
sb_txn_abort (sb_txn_t *txn)
{
    if (!txn || !txn->txn)
        return;
    mdb_txn_abort (txn->txn);
    if (txn->write)
        atomic_fetch_add_explicit (&txn->store->aborts, 1, memory_order_relaxed);
    s_txn_release (txn);
}

int
sb_txn_commit (sb_txn_t *txn)
{
    if (!txn)
        return SB_STORE_INVALID;
    if (!txn->txn)
        return txn->ret;
    if (txn->ret != 0) {
        sb_txn_abort (txn);
        return txn->ret;
    }
    if (!txn->write) {
        //  A read txn has nothing to commit; abort is how LMDB releases it.
        mdb_txn_abort (txn->txn);
        s_txn_release (txn);
        return 0;
    }
    sb_store_t *store = txn->store;
    int rc = s_code (mdb_txn_commit (txn->txn));
    s_txn_release (txn);
    if (rc == 0)
        atomic_fetch_add_explicit (&store->commits, 1, memory_order_relaxed);
    else {
        txn->ret = rc;
        atomic_fetch_add_explicit (&store->aborts, 1, memory_order_relaxed);
        if (rc == SB_STORE_DISK_FULL)
            atomic_fetch_add_explicit (&store->disk_full, 1, memory_order_relaxed);
    }
    return rc;
}

//  True when an operation may proceed; otherwise the txn holds (or now
//  gets) the error that the operation returns.
static bool
s_ready (sb_txn_t *txn, unsigned dbi)
{
    if (txn->ret != 0)
        return false;
    if (!txn->txn || dbi >= txn->store->ndbi) {
        txn->ret = SB_STORE_INVALID;
        return false;
    }
    return true;
}

//  A zero length is how an overflowed sb_key_t shows itself, and LMDB
//  refuses keys over its maximum anyway: make both a clear INVALID.
static bool
s_key_ok (sb_txn_t *txn, const void *key, size_t klen)
{
    if (!key || klen == 0 || klen > SB_STORE_KEY_MAX) {
        txn->ret = SB_STORE_INVALID;
        return false;
    }
    return true;
}

static int
s_put (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
       const void *val, size_t vlen, unsigned flags)
{
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi) || !s_key_ok (txn, key, klen))
        return txn->ret;
    if (!val && vlen > 0)
        return txn->ret = SB_STORE_INVALID;
    MDB_val k = { klen, (void *) key };
    MDB_val v = { vlen, (void *) val };
    int rc = mdb_put (txn->txn, txn->store->dbi [dbi], &k, &v, flags);
    if (rc == MDB_KEYEXIST && (flags & MDB_NOOVERWRITE))
        return SB_STORE_EXISTS;
    if (rc != 0) {
        txn->ret = s_code (rc);
        if (txn->ret == SB_STORE_DISK_FULL)
            atomic_fetch_add_explicit (&txn->store->disk_full, 1, memory_order_relaxed);
    }
    return txn->ret;
}

int
sb_txn_put (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
            const void *val, size_t vlen)
{
    return s_put (txn, dbi, key, klen, val, vlen, 0);
}

int
sb_txn_insert (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
               const void *val, size_t vlen)
{
    return s_put (txn, dbi, key, klen, val, vlen, MDB_NOOVERWRITE);
}

int
sb_txn_append (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
               const void *val, size_t vlen)
{
    return s_put (txn, dbi, key, klen, val, vlen, MDB_APPEND);
}

int
sb_txn_get (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
            MDB_val *out)
{
    if (out)
        *out = (MDB_val) { 0, NULL };
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi) || !s_key_ok (txn, key, klen))
        return txn->ret;
    MDB_val k = { klen, (void *) key };
    MDB_val v;
    int rc = mdb_get (txn->txn, txn->store->dbi [dbi], &k, &v);
    if (rc == MDB_NOTFOUND)
        return SB_STORE_NOTFOUND;
    if (rc != 0)
        return txn->ret = s_code (rc);
    if (out)
        *out = v;
    return 0;
}

int
sb_txn_del (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen)
{
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi) || !s_key_ok (txn, key, klen))
        return txn->ret;
    MDB_val k = { klen, (void *) key };
    int rc = mdb_del (txn->txn, txn->store->dbi [dbi], &k, NULL);
    if (rc == MDB_NOTFOUND)
        return SB_STORE_NOTFOUND;
    if (rc != 0)
        txn->ret = s_code (rc);
    return txn->ret;
}

static bool
s_has_prefix (const MDB_val *key, const void *prefix, size_t plen)
{
    return plen == 0
        || (key->mv_size >= plen && memcmp (key->mv_data, prefix, plen) == 0);
}

//  Byte order, as LMDB's default comparison sees it: a proper prefix sorts
//  first.
static int
s_cmp (const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen? alen: blen;
    int c = n? memcmp (a, b, n): 0;
    if (c != 0)
        return c;
    return alen < blen? -1: alen > blen? 1: 0;
}

//  A NULL prefix of length 0 means "the whole dbi"; a non-NULL one of
//  length 0 is an overflowed sb_key_t and must not silently match all.
static bool
s_prefix_ok (sb_txn_t *txn, const void *prefix, size_t plen)
{
    if ((prefix && plen == 0) || (!prefix && plen > 0) || plen > SB_STORE_KEY_MAX) {
        txn->ret = SB_STORE_INVALID;
        return false;
    }
    return true;
}

int
sb_txn_last (sb_txn_t *txn, unsigned dbi, const void *prefix, size_t plen,
             MDB_val *key, MDB_val *val)
{
    if (key)
        *key = (MDB_val) { 0, NULL };
    if (val)
        *val = (MDB_val) { 0, NULL };
    if (!txn)
        return SB_STORE_INVALID;
    if (!s_ready (txn, dbi) || !s_prefix_ok (txn, prefix, plen))
        return txn->ret;

    MDB_cursor *cursor;
    int rc = mdb_cursor_open (txn->txn, txn->store->dbi [dbi], &cursor);
    if (rc != 0)
        return txn->ret = s_code (rc);

    //  The last key with the prefix is the one just before the prefix's
    //  successor: the prefix with trailing 0xff bytes dropped and its last
    //  byte incremented. A prefix of only 0xff bytes has no successor, and
    //  its last key is the dbi's last key.
    uint8_t succ [SB_STORE_KEY_MAX];
    size_t slen = plen;
    if (plen > 0)
        memcpy (succ, prefix, plen);
    while (slen > 0 && succ [slen - 1] == 0xff)
        slen--;
    MDB_val k, v;
    if (slen == 0)
        rc = mdb_cursor_get (cursor, &k, &v, MDB_LAST);
    else {
        succ [slen - 1]++;
        k = (MDB_val) { slen, succ };
        rc = mdb_cursor_get (cursor, &k, &v, MDB_SET_RANGE);
        if (rc == 0)
            rc = mdb_cursor_get (cursor, &k, &v, MDB_PREV);
        else
        if (rc == MDB_NOTFOUND)
            rc = mdb_cursor_get (cursor, &k, &v, MDB_LAST);
    }
    mdb_cursor_close (cursor);
    if (rc == MDB_NOTFOUND || (rc == 0 && !s_has_prefix (&k, prefix, plen)))
        return SB_STORE_NOTFOUND;
    if (rc != 0)
        return txn->ret = s_code (rc);
    if (key)
        *key = k;
    if (val)
        *val = v;
    return 0;
}

//  --------------------------------------------------------------------------
//  Prefix iteration

int
sb_txn_iter_begin (sb_txn_t *txn, sb_txn_iter_t *it, unsigned dbi,
                   const void *prefix, size_t plen,
                   const void *start, size_t slen)
{
    if (!txn || !it)
        return SB_STORE_INVALID;
    memset (it, 0, offsetof (sb_txn_iter_t, prefix));
    it->txn = txn;
    it->first_rc = MDB_NOTFOUND;
    it->started = true;         //  until positioned: next yields nothing
    if (!s_ready (txn, dbi) || !s_prefix_ok (txn, prefix, plen))
        return txn->ret;
    if ((start && slen == 0) || (!start && slen > 0) || slen > SB_STORE_KEY_MAX)
        return txn->ret = SB_STORE_INVALID;

    int rc = mdb_cursor_open (txn->txn, txn->store->dbi [dbi], &it->cursor);
    if (rc != 0) {
        it->cursor = NULL;
        return txn->ret = s_code (rc);
    }
    it->plen = plen;
    if (plen > 0)
        memcpy (it->prefix, prefix, plen);

    //  Seek to whichever is later, the prefix or the start key: a start key
    //  before the prefix would otherwise begin outside the range.
    MDB_val seek = { plen, it->prefix };
    if (start && s_cmp (start, slen, prefix, plen) > 0)
        seek = (MDB_val) { slen, (void *) start };
    if (seek.mv_size > 0)
        rc = mdb_cursor_get (it->cursor, &seek, &it->val, MDB_SET_RANGE);
    else
        rc = mdb_cursor_get (it->cursor, &seek, &it->val, MDB_FIRST);
    it->key = seek;
    it->first_rc = rc;
    it->started = false;
    if (rc != 0 && rc != MDB_NOTFOUND) {
        txn->ret = s_code (rc);
        sb_txn_iter_end (it);
    }
    return txn->ret;
}

bool
sb_txn_iter_next (sb_txn_iter_t *it, MDB_val *key, MDB_val *val)
{
    if (!it || !it->cursor)
        return false;
    sb_txn_t *txn = it->txn;
    if (txn->ret != 0 || !txn->txn) {
        sb_txn_iter_end (it);
        return false;
    }
    int rc;
    MDB_val k, v;
    if (!it->started) {
        it->started = true;
        rc = it->first_rc;
        k = it->key;
        v = it->val;
    }
    else
        rc = mdb_cursor_get (it->cursor, &k, &v, MDB_NEXT);

    if (rc == 0 && s_has_prefix (&k, it->prefix, it->plen)) {
        if (key)
            *key = k;
        if (val)
            *val = v;
        return true;
    }
    if (rc != 0 && rc != MDB_NOTFOUND)
        txn->ret = s_code (rc);
    sb_txn_iter_end (it);
    return false;
}

int
sb_txn_iter_del (sb_txn_iter_t *it)
{
    if (!it || !it->txn)
        return SB_STORE_INVALID;
    sb_txn_t *txn = it->txn;
    if (txn->ret != 0)
        return txn->ret;
    if (!it->cursor || !it->started)
        return txn->ret = SB_STORE_INVALID;
    int rc = mdb_cursor_del (it->cursor, 0);
    if (rc != 0)
        txn->ret = s_code (rc);
    return txn->ret;
}

void
sb_txn_iter_end (sb_txn_iter_t *it)
{
    if (it && it->cursor) {
        mdb_cursor_close (it->cursor);
        it->cursor = NULL;
    }
}

int
sb_txn_foreach (sb_txn_t *txn, unsigned dbi, const void *prefix, size_t plen,
                const void *start, size_t slen,
                sb_txn_foreach_fn *cb, void *ctx)
{
    if (!txn || !cb)
        return SB_STORE_INVALID;
    sb_txn_iter_t it;
    if (sb_txn_iter_begin (txn, &it, dbi, prefix, plen, start, slen) != 0)
        return txn->ret;
    MDB_val k, v;
    while (sb_txn_iter_next (&it, &k, &v)) {
        int rc = cb (&k, &v, ctx);
        if (rc != 0) {
            sb_txn_iter_end (&it);
            return rc;
        }
    }
    return txn->ret;
}

//  --------------------------------------------------------------------------
//  Key builder

static uint8_t *
s_key_room (sb_key_t *k, size_t n)
{
    if (k->overflow)
        return NULL;
    if (n > SB_STORE_KEY_MAX - k->len) {
        k->overflow = true;
        k->len = 0;
        return NULL;
    }
    uint8_t *p = k->buf + k->len;
    k->len += n;
    return p;
}

void
sb_key_init (sb_key_t *k, char tag)
{
    k->overflow = false;
    k->buf [0] = (uint8_t) tag;
    k->len = 1;
}

void
sb_key_u8 (sb_key_t *k, uint8_t v)
{
    uint8_t *p = s_key_room (k, 1);
    if (p)
        p [0] = v;
}

void
sb_key_u32 (sb_key_t *k, uint32_t v)
{
    uint8_t *p = s_key_room (k, 4);
    if (p)
        for (int i = 3; i >= 0; i--, v >>= 8)
            p [i] = (uint8_t) v;
}

void
sb_key_u64 (sb_key_t *k, uint64_t v)
{
    uint8_t *p = s_key_room (k, 8);
    if (p)
        for (int i = 7; i >= 0; i--, v >>= 8)
            p [i] = (uint8_t) v;
}

void
sb_key_strn (sb_key_t *k, const char *s, size_t n)
{
    //  An embedded 0 would end the field early and make two different
    //  strings share a key.
    if (!s || memchr (s, 0, n)) {
        k->overflow = true;
        k->len = 0;
        return;
    }
    uint8_t *p = s_key_room (k, n + 1);
    if (p) {
        memcpy (p, s, n);
        p [n] = 0;
    }
}

void
sb_key_str (sb_key_t *k, const char *s)
{
    sb_key_strn (k, s, s? strlen (s): 0);
}

void
sb_key_bytes (sb_key_t *k, const void *data, size_t n)
{
    if (!data && n > 0) {
        k->overflow = true;
        k->len = 0;
        return;
    }
    uint8_t *p = s_key_room (k, n);
    if (p && n > 0)
        memcpy (p, data, n);
}

bool
sb_key_valid (const sb_key_t *k)
{
    return k && !k->overflow && k->len > 0;
}

uint64_t
sb_key_read_u64 (const MDB_val *key, size_t offset)
{
    if (!key || offset > key->mv_size || key->mv_size - offset < 8)
        return 0;
    const uint8_t *p = (const uint8_t *) key->mv_data + offset;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p [i];
    return v;
}

uint32_t
sb_key_read_u32 (const MDB_val *key, size_t offset)
{
    if (!key || offset > key->mv_size || key->mv_size - offset < 4)
        return 0;
    const uint8_t *p = (const uint8_t *) key->mv_data + offset;
    return (uint32_t) p [0] << 24 | (uint32_t) p [1] << 16
         | (uint32_t) p [2] << 8 | p [3];
}
