/*  store/store.c — the store on LMDB: the environment.

    See store/store.h for the contract. The notes here are about how it is kept.

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
#include "store/store_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

//  The store's own dbi, holding the schema version.
#define META_NAME       "meta"
#define META_VERSION    "schema_version"

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
        case SB_STORE_ORDER:     return "an appended key does not sort after the last one";
        case SB_STORE_TXN_FULL:  return "one transaction wrote more than LMDB holds in one";
        case SB_STORE_BACKEND:   return "LMDB failed";
        default: break;
    }
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
    int rc = mdb_dbi_open (S_TXN (txn), NULL, 0, &main_dbi);
    MDB_cursor *cursor = NULL;
    if (rc == 0)
        rc = mdb_cursor_open (S_TXN (txn), main_dbi, &cursor);
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

    int rc = mdb_dbi_open (S_TXN (txn), META_NAME, MDB_CREATE, &self->meta);
    if (rc != 0)
        return txn->ret = s_code (rc);

    MDB_val k = { strlen (META_VERSION), (void *) META_VERSION };
    MDB_val v;
    rc = mdb_get (S_TXN (txn), self->meta, &k, &v);
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
        rc = mdb_put (S_TXN (txn), self->meta, &k, &v, 0);
        if (rc != 0)
            return txn->ret = s_code (rc);
    }
    else
        return txn->ret = s_code (rc);

    for (unsigned i = 0; i < self->ndbi; i++) {
        rc = mdb_dbi_open (S_TXN (txn), self->names [i], MDB_CREATE, &self->dbi [i]);
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
        int rc = mdb_stat (S_TXN (&txn), self->dbi [i], &st);
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
