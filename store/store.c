/*  store/store.c — the front of the store: which backend a store is,
    the checks every backend shares, and the group commit's re-run loop.

    See store/store.h for the contract. A store is opened on LMDB (a folder)
    or on PostgreSQL (a postgres:// or postgresql:// URL); everything after
    sb_store_open goes through the ops table the store carries
    (store/store_impl.h), so an actor never knows which one it has.

    The re-run loop. sb_store_write runs `fn` in a write txn; when the
    commit (or an operation) fails, the backend says whether running `fn`
    again from scratch can help: LMDB after growing a full map, PostgreSQL
    after a serialization failure or a deadlock. That is one loop here,
    and the reason every body must be re-runnable.
*/
#include "store/store_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
sb_store_err (char *err, size_t errlen, const char *fmt, ...)
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
        case SB_STORE_BUSY:      return "busy: a write transaction is already open on this store, or writers kept conflicting";
        case SB_STORE_ORDER:     return "an appended key does not sort after the last one";
        case SB_STORE_TXN_FULL:  return "one transaction wrote more than LMDB holds in one";
        case SB_STORE_BACKEND:   return "the store's backend failed (its message is in the log)";
        case SB_STORE_FENCED:    return "fenced: this node no longer holds the shard's lease at that epoch";
        default: break;
    }
    if (code < 0 && code > -4096)
        return strerror (-code);
    return "unknown store error";
}

//  --------------------------------------------------------------------------
//  Group commit

int
sb_store_write (sb_store_t *self, sb_store_write_fn *fn, void *ctx)
{
    if (!self || !fn)
        return SB_STORE_INVALID;
    uint64_t t0 = sb_store_clock_us ();
    for (unsigned attempt = 1; ; attempt++) {
        sb_txn_t txn;
        if (sb_txn_begin (self, &txn, true) != 0)
            return txn.ret;
        int fn_rc = fn (&txn, ctx);
        if (txn.ret == 0 && fn_rc != 0) {
            sb_txn_abort (&txn);
            return fn_rc;
        }
        int rc = sb_txn_commit (&txn);
        if (rc == 0) {
            sb_store_lat_add (self, sb_store_clock_us () - t0);
            return 0;
        }
        //  The txn is gone; the backend decides whether everything fn
        //  wrote is to be written again from scratch.
        rc = self->ops->again (self, rc, attempt);
        if (rc != 0)
            return rc;
    }
}

//  --------------------------------------------------------------------------
//  Environment

//  Checks the name list before anything is allocated.
static int
s_check_names (const char *const *names, unsigned *count, char *err, size_t errlen)
{
    if (!names) {
        sb_store_err (err, errlen, "store: no dbi name list");
        return -1;
    }
    unsigned n = 0;
    for (; names [n]; n++) {
        if (n == SB_STORE_DBI_MAX) {
            sb_store_err (err, errlen, "store: more than %d dbi names", SB_STORE_DBI_MAX);
            return -1;
        }
        size_t len = strlen (names [n]);
        if (len == 0 || len > SB_STORE_KEY_MAX) {
            sb_store_err (err, errlen, "store: dbi name %u is empty or too long", n);
            return -1;
        }
        if (strcmp (names [n], SB_STORE_META_NAME) == 0) {
            sb_store_err (err, errlen, "store: dbi name \"%s\" is reserved", SB_STORE_META_NAME);
            return -1;
        }
        for (unsigned i = 0; i < n; i++)
            if (strcmp (names [i], names [n]) == 0) {
                sb_store_err (err, errlen, "store: dbi name \"%s\" is given twice", names [n]);
                return -1;
            }
    }
    *count = n;
    return 0;
}

bool
sb_store_is_url (const char *url)
{
    return url && (strncmp (url, "postgres://", 11) == 0 || strncmp (url, "postgresql://", 13) == 0);
}

//  A URL names a PostgreSQL database; anything else is an LMDB folder.
static const sb_store_ops_t *
s_backend (const char *dir)
{
    return sb_store_is_url (dir)? &sb_store_pg_ops: &sb_store_lmdb_ops;
}

int
sb_store_locate (const char *store, const char *data_dir, const char *role,
                 char *out, size_t size, char *err, size_t errlen)
{
    if (!store || !*store) {
        int n = snprintf (out, size, "%s/%s", data_dir? data_dir: ".", role);
        if (n < 0 || (size_t) n >= size) {
            sb_store_err (err, errlen, "store: the data folder's path is too long");
            return -1;
        }
        return 0;
    }
    if (!sb_store_is_url (store)) {
        sb_store_err (err, errlen, "store: --store takes a postgres:// or postgresql:// URL");
        return -1;
    }
    //  The URL's query, less schema=, then schema=NAME_role; the query's
    //  pairs are copied as they are (libpq reads them).
    const char *q = strchr (store, '?');
    size_t base = q? (size_t) (q - store): strlen (store);
    const char *schema = "switchboard";
    size_t schema_len = strlen (schema);
    size_t n = 0;
    int w = snprintf (out, size, "%.*s", (int) base, store);
    if (w < 0 || (size_t) w >= size)
        goto too_long;
    n = (size_t) w;
    for (const char *p = q? q + 1: NULL; p && *p; ) {
        size_t plen = strcspn (p, "&");
        if (plen >= 7 && strncmp (p, "schema=", 7) == 0) {
            schema = p + 7;
            schema_len = plen - 7;
        }
        else
        if (plen > 0) {
            w = snprintf (out + n, size - n, "%c%.*s", n == base? '?': '&', (int) plen, p);
            if (w < 0 || (size_t) w >= size - n)
                goto too_long;
            n += (size_t) w;
        }
        p += plen + (p [plen] == '&');
    }
    w = snprintf (out + n, size - n, "%cschema=%.*s_%s", n == base? '?': '&', (int) schema_len, schema, role);
    if (w < 0 || (size_t) w >= size - n)
        goto too_long;
    return 0;
too_long:
    sb_store_err (err, errlen, "store: the store URL is too long");
    return -1;
}

sb_store_t *
sb_store_open (const char *dir, const char *const *dbi_names,
               unsigned schema_version, size_t initial_mapsize,
               char *err, size_t errlen)
{
    sb_store_err (err, errlen, "%s", "");
    if (!dir || !*dir) {
        sb_store_err (err, errlen, "store: no folder given");
        return NULL;
    }
    unsigned ndbi;
    if (s_check_names (dbi_names, &ndbi, err, errlen) != 0)
        return NULL;

    sb_store_t *self = (sb_store_t *) calloc (1, sizeof *self);
    if (!self) {
        sb_store_err (err, errlen, "store: out of memory");
        return NULL;
    }
    self->ops = s_backend (dir);
    pthread_mutex_init (&self->lock, NULL);
    atomic_init (&self->writing, false);
    self->dir = strdup (dir);
    self->ndbi = ndbi;
    bool oom = !self->dir;
    for (unsigned i = 0; i < ndbi && !oom; i++)
        oom = !(self->names [i] = strdup (dbi_names [i]));
    if (oom) {
        sb_store_err (err, errlen, "store: out of memory");
        sb_store_destroy (&self);
        return NULL;
    }
    if (self->ops->open (self, schema_version, initial_mapsize, err, errlen) != 0) {
        sb_store_destroy (&self);
        return NULL;
    }
    //  Opening is not a commit anyone asked for; keep the counters about
    //  the actor's own writes.
    atomic_store (&self->commits, 0);
    atomic_store (&self->aborts, 0);
    atomic_store (&self->retries, 0);
    for (unsigned k = 0; k < SB_STORE_LAT_BUCKETS; k++)
        atomic_store (&self->lat [k], 0);
    sb_store_register (self, true);
    return self;
}

void
sb_store_destroy (sb_store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sb_store_t *self = *self_p;
    sb_store_register (self, false);
    self->ops->destroy (self);
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

const char *
sb_store_backend (sb_store_t *self)
{
    return self? self->ops->name: NULL;
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
    info->ndbi = self->ndbi;
    int rc = self->ops->info (&txn, info);
    if (rc != 0 && txn.ret == 0)
        txn.ret = rc;
    info->commits = atomic_load_explicit (&self->commits, memory_order_relaxed);
    info->aborts = atomic_load_explicit (&self->aborts, memory_order_relaxed);
    info->disk_full = atomic_load_explicit (&self->disk_full, memory_order_relaxed);
    info->retries = atomic_load_explicit (&self->retries, memory_order_relaxed);
    return sb_txn_commit (&txn);
}
