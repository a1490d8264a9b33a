/*  store/store.h — the store every stateful actor keeps its state in.

    The interface names what the actors need (ordered byte keys, point
    reads and writes, prefix scans, transactions with a sticky error, the
    group commit) and no type of the backend, so that a second
    implementation can sit beside LMDB (docs/architecture.md,
    "Persistence"). Two implementations sit behind it, chosen by what is
    given to sb_store_open: a folder is an LMDB environment (DATA/session,
    DATA/run, DATA/interact, each owned by one actor, its only writer); a
    postgres:// or postgresql:// URL is a schema of a PostgreSQL database,
    which several handles, in one process or on several hosts, may write at
    once. The store opens every named database ("dbi") once, at startup,
    and addresses them afterwards by their index in the name list given to
    sb_store_open.

    Transactions carry a sticky error, in the style of knot's knot_lmdb: the
    first failure is kept in txn.ret, every later operation on that txn does
    nothing, and sb_txn_commit aborts and returns the error. The caller checks
    once, at the end.

    Writes go through sb_store_write, which runs a caller's function in one
    write transaction, commits durably, and re-runs the function when the
    backend asks (LMDB: the map was full and grew; PostgreSQL: the txn
    conflicted with another writer). That is the group-commit primitive: an
    actor drains every pending write it holds into one call, usually on the
    committer thread (store/committer.h).

    Keys are a 1-byte table tag followed by big-endian integers and
    NUL-terminated strings (sb_key_t), so that byte order is numeric order
    and every prefix is unambiguous; iteration is by prefix.

    Error codes: 0 is success, every failure is negative: one of the
    SB_STORE_* values below, or a negated errno. No backend's own codes
    reach a caller; sb_store_strerror describes both.
*/
#ifndef SB_STORE_H_INCLUDED
#define SB_STORE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    SB_STORE_OK        = 0,
    SB_STORE_NOTFOUND  = -32001,  //  no such key; never sticky
    SB_STORE_EXISTS    = -32002,  //  sb_txn_insert: key already present; never sticky
    SB_STORE_MAP_FULL  = -32003,  //  the map is full and could not grow
    SB_STORE_DISK_FULL = -32004,  //  the filesystem is full (ENOSPC, EDQUOT)
    SB_STORE_INVALID   = -32005,  //  bad argument: dbi index, key length, invalid sb_key_t
    SB_STORE_BUSY      = -32006,  //  a write txn is already open on this store; or
                                  //  (PostgreSQL) a write that kept conflicting
    SB_STORE_ORDER     = -32007,  //  sb_txn_append: the key does not sort last; sticky
    SB_STORE_TXN_FULL  = -32008,  //  one txn wrote more than the backend holds in one
    SB_STORE_BACKEND   = -32009,  //  any other failure of the backend (logged where it happens)
    SB_STORE_FENCED    = -32010,  //  sb_txn_guard: this node no longer holds the shard's
                                  //  lease at that epoch; sticky, the write is not committed
};

//  A value or a key handed back by the store: bytes and their length,
//  valid only as long as sb_txn_get says.
typedef struct {
    size_t size;
    const void *data;
} sb_datum_t;

//  Limits. LMDB's default build caps keys at 511 bytes; the dbi cap keeps
//  sb_store_info_t a fixed size.
#define SB_STORE_KEY_MAX        511
#define SB_STORE_DBI_MAX        32
#define SB_STORE_MAPSIZE_MIN    (64u * 1024)
#define SB_STORE_MAPSIZE_DEFAULT ((size_t) 64 * 1024 * 1024)
#define SB_STORE_MAPSIZE_MAX    ((size_t) 1 << 40)

//  PostgreSQL: libpq's connect_timeout, in seconds, where the URL names
//  none; an unreachable or mute database is an error this soon.
#define SB_STORE_CONNECT_TIMEOUT_S  5

typedef struct _sb_store_t sb_store_t;

//  A transaction. Stack-allocate it; sb_txn_begin fills it in. Check `ret`
//  (or the return of sb_txn_commit) once, after a run of operations.
typedef struct {
    sb_store_t *store;
    void *handle;           //  the backend's transaction; NULL once ended
    int ret;                //  first error, sticky; 0 while all is well
    bool write;
} sb_txn_t;

//  --------------------------------------------------------------------------
//  Environment

//  Opens (creating when needed) the environment in `dir`, making the folder
//  and its parents with mode 0700. A `dir` that starts with postgres:// or
//  postgresql:// is a PostgreSQL database instead, as libpq takes it, plus
//  `schema=NAME` (a-z, 0-9, _; default "switchboard"): the store is that
//  schema, a table per dbi (names of at most 63 bytes there) and "meta",
//  made when absent; an unreachable database is refused, within
//  connect_timeout seconds (SB_STORE_CONNECT_TIMEOUT_S unless the URL sets
//  one). `dbi_names` is a NULL-terminated list of
//  database names (at most SB_STORE_DBI_MAX, unique, not "meta", which the
//  store keeps for itself); each is opened once, here, and addressed later by
//  its index in this list. `schema_version` is recorded in a fresh
//  environment; an environment that records another version, or none, is
//  refused. `initial_mapsize` 0 means SB_STORE_MAPSIZE_DEFAULT; the map grows
//  on demand (see sb_store_write). Stale reader slots left by dead processes
//  are cleared here. (PostgreSQL has no map: `initial_mapsize` is ignored.)
//  Returns NULL on failure, with one clear line in `err` (which may be NULL).
//  The caller owns the store; free it with sb_store_destroy.
sb_store_t *
    sb_store_open (const char *dir, const char *const *dbi_names,
                   unsigned schema_version, size_t initial_mapsize,
                   char *err, size_t errlen);

//  Closes the environment. Every txn must be ended first. Tolerates NULL and
//  nulls the caller's pointer.
void
    sb_store_destroy (sb_store_t **self_p);

//  The folder (or URL) given to sb_store_open. Owned by the store.
const char *
    sb_store_dir (sb_store_t *self);

//  The name of dbi `index`, or NULL if out of range. Owned by the store.
const char *
    sb_store_dbi_name (sb_store_t *self, unsigned index);

//  The backend behind the store: "lmdb" or "postgresql". Static.
const char *
    sb_store_backend (sb_store_t *self);

//  Describes any code returned by this module: SB_STORE_* or -errno.
//  The string is static.
const char *
    sb_store_strerror (int code);

//  Counters for `switchboard stats` and /metrics. On PostgreSQL the map,
//  page and reader fields are 0, and entries are counted rows.
typedef struct {
    size_t mapsize;         //  bytes currently mapped
    size_t page_size;
    size_t used_pages;      //  pages in use in the file (last page + 1)
    size_t used_bytes;      //  used_pages * page_size
    unsigned max_readers;
    unsigned num_readers;   //  reader slots in use
    unsigned ndbi;
    uint64_t entries [SB_STORE_DBI_MAX];    //  entries per dbi, by index
    uint64_t commits;       //  successful write commits since open
    uint64_t aborts;        //  write txns aborted (by error or by choice)
    uint64_t map_grows;     //  times the map was grown since open
    uint64_t disk_full;     //  writes that failed with SB_STORE_DISK_FULL
    int stale_readers;      //  stale reader slots cleared at open
    uint64_t retries;       //  sb_store_write bodies run again after a
                            //  conflict with another writer (PostgreSQL)
} sb_store_info_t;

//  Fills `info`. Opens a short read txn, so it may be called from any thread
//  , but not while the calling thread holds a write txn on a store
//  whose map may grow. Returns 0 or an error code.
int
    sb_store_info (sb_store_t *self, sb_store_info_t *info);

//  Where an actor's store `role` ("session", "run", "interact") lives:
//  with `store` NULL or empty, the folder DATA/role (LMDB, as always);
//  with a postgres:// or postgresql:// URL (serve --store), that URL
//  with its schema=NAME (default "switchboard") replaced by NAME_role,
//  so that each actor has a schema of its own in one database.
//  Returns 0, or -1 with one line in err (which names no password).
int
    sb_store_locate (const char *store, const char *data_dir, const char *role,
                     char *out, size_t size, char *err, size_t errlen);

//  True when `url` names a PostgreSQL database for sb_store_open.
bool
    sb_store_is_url (const char *url);

//  One open store of this process, for `switchboard stats` and /metrics.
typedef struct {
    char name [64];         //  the folder's last part, or the schema
    const char *backend;    //  "lmdb" or "postgresql", static
    uint64_t writes;        //  sb_store_write calls committed since open
    uint64_t commits;       //  write txns committed (writes and bare txns)
    uint64_t retries;       //  bodies run again after a conflict
    uint64_t write_p50_us;  //  one write's latency (body and durable commit),
    uint64_t write_p99_us;  //  to within an eighth; 0 before any write
} sb_store_stats_t;

//  Calls `cb` for each store open in this process (newest first) until it
//  returns non-zero; returns that value or 0. Any thread; no store may be
//  opened or closed from inside `cb`.
typedef int (sb_store_stats_fn) (const sb_store_stats_t *st, void *ctx);
int
    sb_store_stats_each (sb_store_stats_fn *cb, void *ctx);

//  --------------------------------------------------------------------------
//  Group commit

//  The body of one write transaction. Return 0 to commit, or any non-zero
//  value to abort (that value is then returned by sb_store_write; use your own
//  positive codes to tell them apart from the store's negative ones).
//
//  It MUST be re-runnable: when the map fills up, the transaction is aborted,
//  the map grows, and `fn` is called again from scratch with a fresh txn; so
//  too on PostgreSQL after a conflict with another writer. So
//  `fn` must derive everything it writes from `ctx` and the txn alone, and
//  must not consume its input (pop a queue, free a buffer, bump a counter
//  that is not recomputed) until sb_store_write has returned 0.
//  `fn` must not begin, commit or abort a txn itself.
typedef int (sb_store_write_fn) (sb_txn_t *txn, void *ctx);

//  Runs `fn` in one write transaction and commits it durably. On a full map,
//  from any operation or from the commit, it aborts, doubles the map (only
//  while no txn of this store is open) and runs `fn` again. Returns 0 once
//  committed; SB_STORE_DISK_FULL when the filesystem is full (not retried);
//  SB_STORE_MAP_FULL when the map cannot grow (SB_STORE_MAPSIZE_MAX reached,
//  or another txn of this store is still open); `fn`'s own non-zero return;
//  or another error. On PostgreSQL, a serialization failure or a deadlock
//  (from any operation or from the commit) runs `fn` again after a short
//  random pause, counted in info.retries, up to 32 runs in all; then
//  SB_STORE_BUSY. Call it from the store's owning thread.
int
    sb_store_write (sb_store_t *self, sb_store_write_fn *fn, void *ctx);

//  --------------------------------------------------------------------------
//  Transactions

//  Begins a txn. A read txn may be used on any thread ; at most
//  one write txn is open at a time, and a second sb_txn_begin(write) while
//  one is open returns SB_STORE_BUSY instead of deadlocking. On failure
//  txn->ret is set and commit/abort are still safe to call. Prefer
//  sb_store_write for writes: a bare write txn does not grow the map, nor
//  run again after a conflict (PostgreSQL: its commit returns SB_STORE_BUSY).
int
    sb_txn_begin (sb_store_t *store, sb_txn_t *txn, bool write);

//  Commits (a write txn) or ends (a read txn). When txn->ret != 0, aborts
//  instead and returns txn->ret. Returns 0 when committed. Always ends the
//  txn; safe after a failed begin and after a previous commit or abort.
int
    sb_txn_commit (sb_txn_t *txn);

//  Ends the txn and discards its writes. Safe to call twice.
void
    sb_txn_abort (sb_txn_t *txn);

//  Stores `val` under `key` in dbi `dbi`, replacing any previous value.
//  Returns txn->ret.
int
    sb_txn_put (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                const void *val, size_t vlen);

//  As sb_txn_put, but only when `key` is absent: returns SB_STORE_EXISTS (not
//  sticky) and changes nothing when it is present. For first-writer-wins.
int
    sb_txn_insert (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                   const void *val, size_t vlen);

//  As sb_txn_put, for a key known to sort after every key in the dbi (a
//  tape's next seq). Cheaper than put; a key out of order is a sticky
//  SB_STORE_ORDER, because it means the caller's idea of "last" is wrong.
int
    sb_txn_append (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                   const void *val, size_t vlen);

//  Looks `key` up. Returns 0 and fills `out`; SB_STORE_NOTFOUND (not sticky)
//  when absent; or the sticky error. `out->data` points into the map and
//  is valid only until the txn ends or, in a write txn, until the next write:
//  callers MUST copy what they keep. `out` is zeroed on any failure.
int
    sb_txn_get (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen,
                sb_datum_t *out);

//  Deletes `key`. Returns 0, SB_STORE_NOTFOUND (not sticky), or the sticky
//  error.
int
    sb_txn_del (sb_txn_t *txn, unsigned dbi, const void *key, size_t klen);

//  Finds the greatest key that starts with `prefix` (for example the last seq
//  of a tape, at startup). Returns 0 and fills `key` and `val` (either may be
//  NULL); SB_STORE_NOTFOUND (not sticky) when no key has that prefix; or the
//  sticky error. The same lifetime rule as sb_txn_get applies.
int
    sb_txn_last (sb_txn_t *txn, unsigned dbi, const void *prefix, size_t plen,
                 sb_datum_t *key, sb_datum_t *val);

//  A queue's take: deletes the smallest key that starts with `prefix` and
//  copies it into key (SB_STORE_KEY_MAX bytes), its length into *klen.
//  On PostgreSQL the row is picked `FOR UPDATE SKIP LOCKED`: a key another
//  transaction holds locked (a concurrent take, on this node or another)
//  is passed over, so that takers never wait for each other and never
//  take one key twice. Write txns only. Returns 0; SB_STORE_NOTFOUND (not
//  sticky) when no key with the prefix is free; or the sticky error. The
//  keys of such a queue carry what they mean (their values are not given
//  back).
int
    sb_txn_take_first (sb_txn_t *txn, unsigned dbi, const void *prefix, size_t plen,
                       uint8_t *key, size_t *klen);

//  --------------------------------------------------------------------------
//  Fencing
//
//  When several nodes share one PostgreSQL database, each session's writes
//  belong to the node that holds its shard's lease (cluster/cluster.h). A
//  node that lost its lease (it stalled, the lease lapsed, another node
//  took the shard and moved its epoch) must not write any more, even if it
//  has not noticed yet. So a write body calls sb_txn_guard first, with the
//  lease it believes it holds: on PostgreSQL that reads the lease row in the
//  same transaction, FOR SHARE (a takeover waits for this txn, or this txn
//  conflicts with the takeover and runs again), and checks owner, epoch and
//  that the lease has not expired by the database's clock. When it fails,
//  the txn's sticky error becomes SB_STORE_FENCED and nothing the body wrote
//  is committed. On LMDB (one host, no leases) it is a no-op.

typedef struct {
    const char *schema;     //  the cluster's schema ([a-z0-9_], 1 to 63 bytes)
    uint32_t shard;
    const char *owner;      //  this node's id
    int64_t epoch;          //  the epoch of the lease this node holds
} sb_guard_t;

//  Checks the lease in `txn` (a write txn). Returns 0, or the sticky error:
//  SB_STORE_FENCED when the lease is not held at that epoch, SB_STORE_BUSY
//  when it conflicted with a takeover (sb_store_write runs the body again),
//  SB_STORE_INVALID for a bad guard.
int
    sb_txn_guard (sb_txn_t *txn, const sb_guard_t *guard);

//  --------------------------------------------------------------------------
//  Prefix iteration
//
//      sb_txn_iter_t it;
//      sb_txn_iter_begin (&txn, &it, DBI_TAPE, prefix.buf, prefix.len,
//                         start.buf, start.len);
//      sb_datum_t k, v;
//      while (sb_txn_iter_next (&it, &k, &v)) {
//          if (done_early) { sb_txn_iter_end (&it); break; }
//      }
//      if (txn.ret) ...
//
//  Yields, in byte order, every key that starts with the prefix and is >= the
//  start key (start NULL: from the first key with the prefix). A NULL prefix
//  with length 0 walks the whole dbi; a non-NULL prefix of length 0 (an
//  invalid sb_key_t) is SB_STORE_INVALID. Keys and values follow the
//  sb_txn_get lifetime rule. The cursor is closed when next returns false;
//  a loop that stops early MUST call sb_txn_iter_end (a read txn leaks its
//  cursor otherwise). Errors are sticky in the txn; next then returns false.

//  Opaque in use; public only so that it can live on the stack. The prefix
//  is copied, and the first entry is found by begin, so neither the prefix
//  nor the start key need outlive sb_txn_iter_begin.
typedef struct {
    sb_txn_t *txn;
    void *cursor;           //  the backend's cursor
    int first_rc;           //  result of the positioning done by begin
    bool started;
    size_t plen;
    sb_datum_t key, val;       //  the entry found by begin
    uint8_t prefix [SB_STORE_KEY_MAX];
} sb_txn_iter_t;

int
    sb_txn_iter_begin (sb_txn_t *txn, sb_txn_iter_t *it, unsigned dbi,
                       const void *prefix, size_t plen,
                       const void *start, size_t slen);

bool
    sb_txn_iter_next (sb_txn_iter_t *it, sb_datum_t *key, sb_datum_t *val);

//  Deletes the entry the iterator last yielded; the next call to
//  sb_txn_iter_next yields the entry after it. Write txns only.
int
    sb_txn_iter_del (sb_txn_iter_t *it);

//  Closes the cursor. Safe to call twice, and after next returned false.
void
    sb_txn_iter_end (sb_txn_iter_t *it);

//  The callback form: calls `cb` for each entry as above, until it returns
//  non-zero. Returns 0, `cb`'s non-zero value, or the sticky error.
typedef int (sb_txn_foreach_fn) (const sb_datum_t *key, const sb_datum_t *val, void *ctx);

int
    sb_txn_foreach (sb_txn_t *txn, unsigned dbi, const void *prefix, size_t plen,
                    const void *start, size_t slen,
                    sb_txn_foreach_fn *cb, void *ctx);

//  --------------------------------------------------------------------------
//  Key builder
//
//      sb_key_t k;
//      sb_key_init (&k, 'T');
//      sb_key_str (&k, session_id);
//      sb_key_u64 (&k, seq);
//      if (!sb_key_valid (&k)) ...     //  or let the txn op refuse it
//      sb_txn_put (&txn, DBI_TAPE, k.buf, k.len, val, vlen);
//
//  Integers are big-endian, so key order is numeric order. Strings are their
//  bytes followed by a 0 byte, so that "ab" never reads as a prefix of "abc"
//  (a string may not contain a 0 byte). A key that would pass
//  SB_STORE_KEY_MAX bytes becomes invalid for good: its length drops to 0,
//  which every txn operation refuses with SB_STORE_INVALID.

typedef struct {
    size_t len;
    bool overflow;          //  sticky: the key is invalid
    uint8_t buf [SB_STORE_KEY_MAX];
} sb_key_t;

void sb_key_init  (sb_key_t *k, char tag);
void sb_key_u8    (sb_key_t *k, uint8_t v);
void sb_key_u32   (sb_key_t *k, uint32_t v);
void sb_key_u64   (sb_key_t *k, uint64_t v);
void sb_key_str   (sb_key_t *k, const char *s);
//  A string given by pointer and length (msgpack strings are not
//  NUL-terminated). An embedded 0 byte makes the key invalid.
void sb_key_strn  (sb_key_t *k, const char *s, size_t n);
//  Raw bytes, with no terminator: use only for fixed-width fields (a 26-byte
//  ULID) or as the last field, or prefixes become ambiguous.
void sb_key_bytes (sb_key_t *k, const void *p, size_t n);
bool sb_key_valid (const sb_key_t *k);

//  Reads a big-endian integer back out of a key at `offset`; 0 when the key
//  is too short. For decoding keys met while iterating.
uint64_t sb_key_read_u64 (const sb_datum_t *key, size_t offset);
uint32_t sb_key_read_u32 (const sb_datum_t *key, size_t offset);

#ifdef __cplusplus
}
#endif

#endif
