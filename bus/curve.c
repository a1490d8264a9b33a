/*  bus/curve.c — CURVE keys for the bus's TCP endpoints (bus/curve.h). */
#include "bus/curve.h"
#include "bus/client.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*  Set once by sb_curve_client_set and sb_curve_client_endpoints, before
    any socket of the process connects; read by every thread afterwards. */
static zcert_t *s_client_cert;
static char s_server_keys [SB_CURVE_SERVER_KEYS_MAX][41];
static size_t s_nkeys;

/*  Which server key each endpoint of the lists has: the k-th of a list
    the k-th key. Two lists (the command and the event plane) of at most
    SB_CURVE_SERVER_KEYS_MAX endpoints each. */
#define S_EP_KEYS_MAX (2 * SB_CURVE_SERVER_KEYS_MAX)
static struct {
    char endpoint [SB_BUS_ENDPOINT_MAX + 1];
    size_t key;
} s_ep_keys [S_EP_KEYS_MAX];
static size_t s_neps;

static int
s_mkdir (const char *path)
{
    if (mkdir (path, 0700) == 0 || errno == EEXIST)
        return 0;
    return -1;
}

zcert_t *
sb_curve_server_cert (const char *data_dir, char *err, size_t errlen)
{
    char dir [4200], path [4300], secret [4400];
    snprintf (dir, sizeof dir, "%s/certs", data_dir);
    snprintf (path, sizeof path, "%s/server", dir);
    snprintf (secret, sizeof secret, "%s/server_secret", dir);
    zcert_t *cert = access (secret, R_OK) == 0 ? zcert_load (path) : NULL;
    if (cert)
        return cert;
    char clients [4300];
    snprintf (clients, sizeof clients, "%s/clients", dir);
    if (s_mkdir (dir) || s_mkdir (clients)) {
        snprintf (err, errlen, "cannot create %s: %s", clients, strerror (errno));
        return NULL;
    }
    cert = zcert_new ();
    if (!cert) {
        snprintf (err, errlen, "cannot make a key pair");
        return NULL;
    }
    /* the secret file is written 0600 from the start */
    mode_t old = umask (077);
    int rc = zcert_save (cert, path);
    umask (old);
    if (rc) {
        snprintf (err, errlen, "cannot write %s", path);
        zcert_destroy (&cert);
        return NULL;
    }
    chmod (path, 0644);
    return cert;
}

int
sb_curve_node_allow (const char *data_dir, const char *node_id, const char *public_txt)
{
    uint8_t pub [32], none [32] = { 0 };
    if (!public_txt || strlen (public_txt) != 40 || !zmq_z85_decode (pub, public_txt))
        return -1;
    char path [4400];
    snprintf (path, sizeof path, "%s/certs/clients/node-%s", data_dir, node_id);
    zcert_t *old = access (path, R_OK) == 0 ? zcert_load (path) : NULL;
    bool same = old && strcmp (zcert_public_txt (old), public_txt) == 0;
    zcert_destroy (&old);
    if (same)
        return 0;
    zcert_t *cert = zcert_new_from (pub, none);
    if (!cert)
        return -1;
    zcert_set_meta (cert, "name", "node-%s", node_id);
    zcert_set_meta (cert, "role", "actor");
    int rc = zcert_save_public (cert, path);
    zcert_destroy (&cert);
    return rc;
}

int
sb_curve_client_new (const char *data_dir, const char *name, const char *role, const char *pools,
                     char *secret_path, size_t n, char *err, size_t errlen)
{
    char serr [512];
    zcert_t *server = sb_curve_server_cert (data_dir, serr, sizeof serr);
    if (!server) {
        snprintf (err, errlen, "%s", serr);
        return -1;
    }
    zcert_destroy (&server);
    char path [4400];
    snprintf (path, sizeof path, "%s/certs/clients/%s", data_dir, name);
    snprintf (secret_path, n, "%s_secret", path);
    if (access (path, F_OK) == 0 || access (secret_path, F_OK) == 0) {
        snprintf (err, errlen, "%s exists already; remove it first to make a new key", path);
        return -1;
    }
    zcert_t *cert = zcert_new ();
    if (!cert) {
        snprintf (err, errlen, "cannot make a key pair");
        return -1;
    }
    zcert_set_meta (cert, "name", "%s", name);
    zcert_set_meta (cert, "role", "%s", role);
    if (pools && *pools)
        zcert_set_meta (cert, "pools", "%s", pools);
    mode_t old = umask (077);
    int rc = zcert_save (cert, path);
    umask (old);
    zcert_destroy (&cert);
    if (rc) {
        snprintf (err, errlen, "cannot write %s", path);
        return -1;
    }
    chmod (path, 0644);
    return 0;
}

size_t
sb_curve_server_key_count (const char *list, char *err, size_t errlen)
{
    size_t count = 0;
    for (const char *p = list; ; p++) {
        size_t len = strcspn (p, ",");
        if (len == 0) {
            snprintf (err, errlen, "--server-key takes FILE or FILE1,FILE2,... (one per --connect endpoint), "
                      "not '%s'", list);
            return 0;
        }
        if (++count > SB_CURVE_SERVER_KEYS_MAX) {
            snprintf (err, errlen, "--server-key names more than %d files", SB_CURVE_SERVER_KEYS_MAX);
            return 0;
        }
        p += len;
        if (!*p)
            return count;
    }
}

static size_t
s_count (const char *list)
{
    size_t count = 1;
    for (const char *c = list; *c; c++)
        count += *c == ',';
    return count;
}

int
sb_curve_server_keys_fit (const char *list, const char *endpoints, char *err, size_t errlen)
{
    size_t nkeys = sb_curve_server_key_count (list, err, errlen);
    if (!nkeys)
        return -1;
    if (nkeys > 1 && nkeys != s_count (endpoints)) {
        snprintf (err, errlen, "--server-key names %zu server keys for %zu endpoints (%s): give one per "
                  "endpoint, in the order of --connect, or one for all", nkeys, s_count (endpoints), endpoints);
        return -1;
    }
    return 0;
}

int
sb_curve_client_set (const char *cert_path, const char *server_cert_paths, char *err, size_t errlen)
{
    size_t nkeys = sb_curve_server_key_count (server_cert_paths, err, errlen);
    if (!nkeys)
        return -1;
    /* czmq loads NAME and NAME_secret from NAME: take either file's path */
    char base [4200];
    snprintf (base, sizeof base, "%s", cert_path);
    size_t len = strlen (base);
    if (len > 7 && strcmp (base + len - 7, "_secret") == 0)
        base [len - 7] = 0;
    zcert_t *cert = zcert_load (base);
    if (!cert || !zcert_secret_txt (cert) || strcmp (zcert_secret_txt (cert),
                                                      "0000000000000000000000000000000000000000") == 0) {
        snprintf (err, errlen, "cannot read the key pair %s (and %s_secret)", base, base);
        zcert_destroy (&cert);
        return -1;
    }
    const char *p = server_cert_paths;
    for (size_t k = 0; k < nkeys; k++) {
        char path [4200];
        size_t n = strcspn (p, ",");
        snprintf (path, sizeof path, "%.*s", (int) n, p);
        p += n + (p [n] == ',');
        zcert_t *server = zcert_load (path);
        if (!server) {
            snprintf (err, errlen, "cannot read the server's certificate %s", path);
            zcert_destroy (&cert);
            return -1;
        }
        snprintf (s_server_keys [k], sizeof s_server_keys [k], "%s", zcert_public_txt (server));
        zcert_destroy (&server);
    }
    s_nkeys = nkeys;
    s_neps = 0;
    zcert_destroy (&s_client_cert);
    s_client_cert = cert;
    return 0;
}

int
sb_curve_client_endpoints (const char *endpoints, char *err, size_t errlen)
{
    size_t count = s_count (endpoints);
    if (s_nkeys <= 1)
        return 0;
    if (count != s_nkeys) {
        snprintf (err, errlen, "--server-key names %zu server keys for %zu endpoints (%s): give one per "
                  "endpoint, in the order of --connect, or one for all", s_nkeys, count, endpoints);
        return -1;
    }
    const char *p = endpoints;
    for (size_t k = 0; k < count; k++) {
        size_t n = strcspn (p, ",");
        if (n > SB_BUS_ENDPOINT_MAX || s_neps == S_EP_KEYS_MAX) {
            snprintf (err, errlen, "too many endpoints, or one too long, in %s", endpoints);
            return -1;
        }
        snprintf (s_ep_keys [s_neps].endpoint, sizeof s_ep_keys [s_neps].endpoint, "%.*s", (int) n, p);
        s_ep_keys [s_neps++].key = k;
        p += n + (p [n] == ',');
    }
    return 0;
}

void
sb_curve_apply_client (zsock_t *sock, const char *endpoint)
{
    if (!s_client_cert || strncmp (endpoint, "tcp://", 6) != 0)
        return;
    size_t key = 0;
    for (size_t k = 0; k < s_neps; k++)
        if (strcmp (s_ep_keys [k].endpoint, endpoint) == 0)
            key = s_ep_keys [k].key;
    zcert_apply (s_client_cert, sock);
    zsock_set_curve_serverkey (sock, s_server_keys [key]);
}

/* ------------------------------------------------------------------ */
/*  Identities: who each allowed key is */

#include "common/log.h"
#include <dirent.h>

#define S_RELOAD_MS 1000        /* the broker looks at the folder at most this often */

typedef struct {
    char name [65];
    char role [16];
    char pools [SB_CURVE_POOLS_MAX * 65];   /* "a,b": the pools a worker key may serve ("" = default only) */
} s_id_t;

typedef struct {
    char run_id [40];
    char session_id [40];
    uint64_t fence;             /* the claim's fencing token: every append carries it */
    uint64_t expires;           /* wall ms: the lease's end, as the run actor set it */
    char ia [SB_CURVE_GRANT_IAS][40];
    size_t nia;                 /* interactions asked for; ia [nia % SB_CURVE_GRANT_IAS] is next */
} s_grant_t;

/*  A worker key's claims, and its requests the grants wait on. */
typedef struct {
    s_grant_t grant [SB_CURVE_GRANTS_MAX];
    size_t ngrants;
    size_t inflight;
} s_peer_t;

typedef enum { Q_CLAIM, Q_REGRANT, Q_HEARTBEAT, Q_COMPLETE, Q_FENCEABLE, Q_INTERACT, Q_IAGET } s_what_t;

typedef struct {
    s_peer_t *peer;
    s_what_t what;
    char run_id [40];
    uint64_t fence;             /* Q_REGRANT: the fence the heartbeat named */
    int64_t born;               /* mono ms */
} s_inflight_t;

struct sb_curve_ids {
    char dir [4300];
    zhashx_t *by_key;           /* public key (Z85) -> s_id_t */
    struct timespec mtime;      /* the folder's, when last read */
    int64_t checked;            /* mono ms of the last look at the folder */
    zhashx_t *peers;            /* public key (Z85) -> s_peer_t (worker keys) */
    zhashx_t *inflight;         /* "ROUTEHEX:ID" -> s_inflight_t */
    int64_t next_sweep;
};

static void
s_id_free (void **item)
{
    free (*item);
    *item = NULL;
}

/*  Reads every public certificate of the folder. */
static void
s_ids_load (sb_curve_ids_t *ids)
{
    zhashx_purge (ids->by_key);
    DIR *d = opendir (ids->dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir (d))) {
        size_t n = strlen (e->d_name);
        if (e->d_name [0] == '.' || (n > 7 && strcmp (e->d_name + n - 7, "_secret") == 0))
            continue;
        char path [4600];
        snprintf (path, sizeof path, "%s/%s", ids->dir, e->d_name);
        zcert_t *cert = zcert_load (path);
        if (!cert)
            continue;
        s_id_t *id = calloc (1, sizeof *id);
        if (id) {
            const char *name = zcert_meta (cert, "name");
            const char *role = zcert_meta (cert, "role");
            const char *pools = zcert_meta (cert, "pools");
            snprintf (id->name, sizeof id->name, "%s", name ? name : e->d_name);
            snprintf (id->role, sizeof id->role, "%s", role ? role : "worker");
            /* a pools list that does not fit is no list: the key keeps the
               default pool only */
            if (pools && strlen (pools) < sizeof id->pools)
                snprintf (id->pools, sizeof id->pools, "%s", pools);
            zhashx_update (ids->by_key, zcert_public_txt (cert), id);
        }
        zcert_destroy (&cert);
    }
    closedir (d);
}

/*  Reads the folder again when it changed (a key added or removed). */
static void
s_ids_refresh (sb_curve_ids_t *ids)
{
    struct stat st;
    ids->checked = sb_mono_ms ();
    if (stat (ids->dir, &st) == 0
    &&  st.st_mtim.tv_sec == ids->mtime.tv_sec && st.st_mtim.tv_nsec == ids->mtime.tv_nsec)
        return;
    if (stat (ids->dir, &st) == 0)
        ids->mtime = st.st_mtim;
    s_ids_load (ids);
}

static s_id_t *
s_ids_find (sb_curve_ids_t *ids, const char *key, bool fresh)
{
    if (fresh || sb_mono_ms () - ids->checked >= S_RELOAD_MS)
        s_ids_refresh (ids);
    s_id_t *id = zhashx_lookup (ids->by_key, key);
    if (!id && !fresh) {
        s_ids_refresh (ids);
        id = zhashx_lookup (ids->by_key, key);
    }
    return id;
}

const char *
sb_curve_ids_role (sb_curve_ids_t *ids, const char *user_id)
{
    s_id_t *id = s_ids_find (ids, user_id, true);
    return id ? id->role : NULL;
}

sb_curve_ids_t *
sb_curve_ids_new (const char *data_dir)
{
    sb_curve_ids_t *ids = calloc (1, sizeof *ids);
    if (!ids)
        return NULL;
    snprintf (ids->dir, sizeof ids->dir, "%s/certs/clients", data_dir);
    ids->by_key = zhashx_new ();
    ids->peers = zhashx_new ();
    ids->inflight = zhashx_new ();
    if (!ids->by_key || !ids->peers || !ids->inflight) {
        sb_curve_ids_destroy (&ids);
        return NULL;
    }
    zhashx_set_destructor (ids->by_key, s_id_free);
    zhashx_set_destructor (ids->peers, s_id_free);
    zhashx_set_destructor (ids->inflight, s_id_free);
    s_ids_refresh (ids);
    return ids;
}

void
sb_curve_ids_destroy (sb_curve_ids_t **ids_p)
{
    if (*ids_p) {
        zhashx_destroy (&(*ids_p)->inflight);
        zhashx_destroy (&(*ids_p)->peers);
        zhashx_destroy (&(*ids_p)->by_key);
        free (*ids_p);
        *ids_p = NULL;
    }
}

/* ------------------------------------------------------------------ */
/*  Top-level fields of a validated body, read in place: no decode, so a
    large append costs a scan of its keys, and nothing is allocated. */

/*  A msgpack str at p: its bytes and length, or NULL. */
static const uint8_t *
s_mp_str (const uint8_t *p, size_t len, size_t *n)
{
    if (len < 1)
        return NULL;
    size_t hdr, sl;
    if ((p [0] & 0xe0) == 0xa0)         { hdr = 1; sl = p [0] & 0x1f; }
    else if (p [0] == 0xd9 && len >= 2) { hdr = 2; sl = p [1]; }
    else if (p [0] == 0xda && len >= 3) { hdr = 3; sl = (size_t) p [1] << 8 | p [2]; }
    else if (p [0] == 0xdb && len >= 5) { hdr = 5; sl = (size_t) p [1] << 24 | (size_t) p [2] << 16 | (size_t) p [3] << 8 | p [4]; }
    else return NULL;
    if (sl > len - hdr)
        return NULL;
    *n = sl;
    return p + hdr;
}

/*  The value of top-level key `name` in the map `body`, or NULL. */
static const uint8_t *
s_mp_field (const uint8_t *body, size_t blen, const char *name, size_t *vlen)
{
    if (blen < 1)
        return NULL;
    size_t count, off;
    if ((body [0] & 0xf0) == 0x80)        { count = body [0] & 0x0f; off = 1; }
    else if (body [0] == 0xde && blen >= 3) { count = (size_t) body [1] << 8 | body [2]; off = 3; }
    else if (body [0] == 0xdf && blen >= 5) {
        count = (size_t) body [1] << 24 | (size_t) body [2] << 16 | (size_t) body [3] << 8 | body [4];
        off = 5;
    }
    else return NULL;
    size_t want = strlen (name);
    for (size_t k = 0; k < count && off < blen; k++) {
        size_t ks = sb_msgpack_span (body + off, blen - off);
        if (!ks)
            return NULL;
        size_t kn = 0;
        const uint8_t *kp = s_mp_str (body + off, ks, &kn);
        off += ks;
        size_t vs = off < blen ? sb_msgpack_span (body + off, blen - off) : 0;
        if (!vs)
            return NULL;
        if (kp && kn == want && memcmp (kp, name, want) == 0) {
            *vlen = vs;
            return body + off;
        }
        off += vs;
    }
    return NULL;
}

/*  A top-level str field copied into out; false when absent, not a str
    or longer than out holds. */
static bool
s_field_str (const uint8_t *body, size_t blen, const char *name, char *out, size_t outlen)
{
    size_t vlen, n;
    const uint8_t *v = s_mp_field (body, blen, name, &vlen);
    const uint8_t *s = v ? s_mp_str (v, vlen, &n) : NULL;
    if (!s || n >= outlen)
        return false;
    memcpy (out, s, n);
    out [n] = 0;
    return true;
}

/*  A top-level unsigned field, or dflt. */
static uint64_t
s_field_uint (const uint8_t *body, size_t blen, const char *name, uint64_t dflt)
{
    size_t vlen;
    const uint8_t *v = s_mp_field (body, blen, name, &vlen);
    if (!v)
        return dflt;
    if (v [0] < 0x80)
        return v [0];
    size_t n = v [0] == 0xcc ? 1 : v [0] == 0xcd ? 2 : v [0] == 0xce ? 4 : v [0] == 0xcf ? 8 : 0;
    if (!n || vlen < n + 1)
        return dflt;
    uint64_t x = 0;
    for (size_t k = 1; k <= n; k++)
        x = x << 8 | v [k];
    return x;
}

/* ------------------------------------------------------------------ */
/*  Grants */

static void
s_grant_remove (s_peer_t *peer, size_t k)
{
    peer->grant [k] = peer->grant [--peer->ngrants];
}

/*  Drops the grants whose lease lapsed. */
static void
s_grants_expire (s_peer_t *peer)
{
    uint64_t now = sb_now_ms ();
    for (size_t k = peer->ngrants; k-- > 0;)
        if (peer->grant [k].expires <= now)
            s_grant_remove (peer, k);
}

static s_grant_t *
s_grant_by_session (s_peer_t *peer, const char *sid)
{
    if (!peer)
        return NULL;
    s_grants_expire (peer);
    for (size_t k = 0; k < peer->ngrants; k++)
        if (strcmp (peer->grant [k].session_id, sid) == 0)
            return &peer->grant [k];
    return NULL;
}

static s_grant_t *
s_grant_by_run (s_peer_t *peer, const char *run_id)
{
    if (!peer)
        return NULL;
    s_grants_expire (peer);
    for (size_t k = 0; k < peer->ngrants; k++)
        if (strcmp (peer->grant [k].run_id, run_id) == 0)
            return &peer->grant [k];
    return NULL;
}

/*  A claim of the session replaces the key's older one (its fence is
    newer); past the bound the grant that lapses first goes. */
static void
s_grant_add (s_peer_t *peer, const char *run_id, const char *sid, uint64_t fence, uint64_t expires)
{
    s_grant_t *g = s_grant_by_session (peer, sid);
    if (!g && peer->ngrants == SB_CURVE_GRANTS_MAX) {
        size_t first = 0;
        for (size_t k = 1; k < peer->ngrants; k++)
            if (peer->grant [k].expires < peer->grant [first].expires)
                first = k;
        s_grant_remove (peer, first);
    }
    if (!g)
        g = &peer->grant [peer->ngrants++];
    memset (g, 0, sizeof *g);
    snprintf (g->run_id, sizeof g->run_id, "%s", run_id);
    snprintf (g->session_id, sizeof g->session_id, "%s", sid);
    g->fence = fence;
    g->expires = expires;
}

static void
s_grant_drop (s_peer_t *peer, const char *run_id)
{
    for (size_t k = 0; k < peer->ngrants; k++)
        if (strcmp (peer->grant [k].run_id, run_id) == 0) {
            s_grant_remove (peer, k);
            return;
        }
}

static bool
s_grant_has_ia (s_peer_t *peer, const char *ia)
{
    s_grants_expire (peer);
    for (size_t k = 0; k < peer->ngrants; k++)
        for (size_t j = 0; j < SB_CURVE_GRANT_IAS; j++)
            if (peer->grant [k].ia [j][0] && strcmp (peer->grant [k].ia [j], ia) == 0)
                return true;
    return false;
}

/*  Forgets requests whose reply never came (refused on the way, or the
    instance died). */
static void
s_inflight_sweep (sb_curve_ids_t *ids)
{
    int64_t now = sb_mono_ms ();
    ids->next_sweep = now + 1000;
    zlistx_t *keys = zhashx_keys (ids->inflight);
    for (const char *key = zlistx_first (keys); key; key = zlistx_next (keys)) {
        s_inflight_t *q = zhashx_lookup (ids->inflight, key);
        if (q && now - q->born > SB_CURVE_INFLIGHT_TTL_MS) {
            q->peer->inflight--;
            zhashx_delete (ids->inflight, key);
        }
    }
    zlistx_destroy (&keys);
}

static sb_err_t
s_track_fence (sb_curve_ids_t *ids, s_peer_t *peer, const char *route_hex, const sb_header_t *h, s_what_t what,
               const char *run_id, uint64_t fence, char *why, size_t whylen)
{
    char pkey [600];
    snprintf (pkey, sizeof pkey, "%s:%s", route_hex, h->id);
    /* a reused id keeps what the first request of it meant: the broker
       answers the second with conflict, and the reply is the first's */
    if (zhashx_lookup (ids->inflight, pkey))
        return SB_OK;
    if (sb_mono_ms () >= ids->next_sweep
    ||  zhashx_size (ids->inflight) >= SB_CURVE_INFLIGHT_MAX || peer->inflight >= SB_CURVE_INFLIGHT_PER_KEY)
        s_inflight_sweep (ids);
    if (zhashx_size (ids->inflight) >= SB_CURVE_INFLIGHT_MAX || peer->inflight >= SB_CURVE_INFLIGHT_PER_KEY) {
        snprintf (why, whylen, "too many worker requests in flight (at most %d per key, %d in all)",
                  SB_CURVE_INFLIGHT_PER_KEY, SB_CURVE_INFLIGHT_MAX);
        return SB_E_overloaded;
    }
    s_inflight_t *q = calloc (1, sizeof *q);
    if (!q || zhashx_insert (ids->inflight, pkey, q)) {
        free (q);
        snprintf (why, whylen, "out of memory");
        return SB_E_internal;
    }
    peer->inflight++;
    q->peer = peer;
    q->what = what;
    q->born = sb_mono_ms ();
    snprintf (q->run_id, sizeof q->run_id, "%s", run_id ? run_id : "");
    q->fence = fence;
    return SB_OK;
}

static sb_err_t
s_track (sb_curve_ids_t *ids, s_peer_t *peer, const char *route_hex, const sb_header_t *h, s_what_t what,
         const char *run_id, char *why, size_t whylen)
{
    return s_track_fence (ids, peer, route_hex, h, what, run_id, 0, why, whylen);
}

static s_peer_t *
s_peer (sb_curve_ids_t *ids, const char *user_id)
{
    s_peer_t *peer = zhashx_lookup (ids->peers, user_id);
    if (!peer) {
        peer = calloc (1, sizeof *peer);
        if (peer && zhashx_insert (ids->peers, user_id, peer)) {
            free (peer);
            peer = NULL;
        }
    }
    return peer;
}

/* ------------------------------------------------------------------ */
/*  The per-message check */

#define S_FORBID(...) do { snprintf (why, whylen, __VA_ARGS__); return SB_E_forbidden; } while (0)

/*  Whether a worker key may serve `pool`: one it was made for (`keys new
    NAME --pool P`), or, for a key made without any, the default pool
    only. */
static bool
s_pool_allowed (const s_id_t *id, const char *pool)
{
    const char *p = id->pools [0] ? id->pools : "default";
    size_t n = strlen (pool);
    while (*p) {
        const char *comma = strchrnul (p, ',');
        if ((size_t) (comma - p) == n && memcmp (p, pool, n) == 0)
            return true;
        p = *comma ? comma + 1 : comma;
    }
    return false;
}

/*  Whether a worker may append entries of `kind`: the tape kinds an
    executor writes, whose rows hold SB_SCOPE_WORKER (schemas/types.c).
    The rest are the control plane's to write. */
static bool
s_kind_allowed (const char *kind)
{
    return sb_type_in_scope (sb_schema_tape_kind (kind), SB_SCOPE_WORKER);
}

/*  A msgpack array at p: its count, and where its first element starts. */
static bool
s_mp_array (const uint8_t *p, size_t len, size_t *count, size_t *off)
{
    if (len >= 1 && (p [0] & 0xf0) == 0x90)  { *count = p [0] & 0x0f; *off = 1; return true; }
    if (len >= 3 && p [0] == 0xdc)           { *count = (size_t) p [1] << 8 | p [2]; *off = 3; return true; }
    if (len >= 5 && p [0] == 0xdd) {
        *count = (size_t) p [1] << 24 | (size_t) p [2] << 16 | (size_t) p [3] << 8 | p [4];
        *off = 5;
        return true;
    }
    return false;
}

/*  A worker's session.append: its grant's run and fence, named, and only
    the kinds an executor writes, in either form (kind, or entries). A
    fence other than the claim's is answered `fenced`, as the session
    actor would, and ends the grant: the key is not holding the claim it
    was given. */
static sb_err_t
s_check_append (const s_id_t *id, s_peer_t *peer, const s_grant_t *g, const uint8_t *body, size_t blen, char *why,
                size_t whylen)
{
    char run [40], kind [40];
    size_t vlen;
    if (!s_field_str (body, blen, "run_id", run, sizeof run) || strcmp (run, g->run_id) != 0
    ||  !s_mp_field (body, blen, "fence", &vlen))
        S_FORBID ("worker key %s appends with its claim's run_id %s and fence only", id->name, g->run_id);
    uint64_t fence = s_field_uint (body, blen, "fence", 0);
    if (fence != g->fence) {
        snprintf (why, whylen, "fence %llu is not the fence %llu of worker key %s's claim on run %s",
                  (unsigned long long) fence, (unsigned long long) g->fence, id->name, g->run_id);
        s_grant_drop (peer, g->run_id);
        return SB_E_fenced;
    }
    if (s_mp_field (body, blen, "kind", &vlen)
    &&  (!s_field_str (body, blen, "kind", kind, sizeof kind) || !s_kind_allowed (kind)))
        S_FORBID ("worker key %s may not append %.39s entries (only what an executor writes)", id->name,
                  s_field_str (body, blen, "kind", kind, sizeof kind) ? kind : "?");
    const uint8_t *entries = s_mp_field (body, blen, "entries", &vlen);
    size_t count = 0, off = 0;
    if (entries && !s_mp_array (entries, vlen, &count, &off))
        S_FORBID ("worker key %s: entries is not an array", id->name);
    for (size_t k = 0; k < count; k++) {
        size_t es = off < vlen ? sb_msgpack_span (entries + off, vlen - off) : 0;
        if (!es)
            S_FORBID ("worker key %s: entries do not parse", id->name);
        if (!s_field_str (entries + off, es, "kind", kind, sizeof kind) || !s_kind_allowed (kind))
            S_FORBID ("worker key %s may not append %.39s entries (only what an executor writes)", id->name,
                      s_field_str (entries + off, es, "kind", kind, sizeof kind) ? kind : "?");
        off += es;
    }
    return SB_OK;
}

/*  A worker key's request: the worker protocol (the types whose rows
    hold SB_SCOPE_WORKER), for itself, within its grants. */
static sb_err_t
s_check_worker (sb_curve_ids_t *ids, const s_id_t *id, const char *user_id, const char *route_hex,
                const sb_header_t *h, unsigned scope, const uint8_t *body, size_t blen, char *why, size_t whylen)
{
    const char *type = h->type;
    size_t k = 0;
    if (!(scope & SB_SCOPE_WORKER))
        S_FORBID ("worker key %s may call the worker protocol only, not %s", id->name, type);
    if (strcmp (type, "bus.heartbeat") == 0)
        return SB_OK;
    s_peer_t *peer = s_peer (ids, user_id);
    if (!peer) {
        snprintf (why, whylen, "out of memory");
        return SB_E_internal;
    }
    char wid [80], sid [40], run [40], ia [40];
    if (strcmp (type, "worker.register") == 0 || strcmp (type, "run.claim") == 0) {
        if (!s_field_str (body, blen, "worker_id", wid, sizeof wid) || strcmp (wid, id->name) != 0)
            S_FORBID ("worker key %s may act for worker_id %s only", id->name, id->name);
        /* worker.register without a pool is the default pool's */
        char pool [80] = "default";
        if ((s_mp_field (body, blen, "pool", &k) && !s_field_str (body, blen, "pool", pool, sizeof pool))
        ||  !s_pool_allowed (id, pool))
            S_FORBID ("worker key %s may serve pool%s %s only, not %.64s", id->name, strchr (id->pools, ',') ? "s" : "",
                      id->pools [0] ? id->pools : "default", pool);
        return type [0] == 'r' ? s_track (ids, peer, route_hex, h, Q_CLAIM, NULL, why, whylen) : SB_OK;
    }
    if (strncmp (type, "llm.", 4) == 0) {
        s_grants_expire (peer);
        if (!peer->ngrants)
            S_FORBID ("worker key %s holds no claim: the model is for the runs it claimed", id->name);
        return SB_OK;
    }
    /* a claim made through another node (the worker's bus failed over to
       this one): a heartbeat that names the key's own worker_id goes to
       the run actor, which answers it only if that worker holds the
       claim with that fence; its reply is the grant (Q_REGRANT) */
    if (strcmp (type, "run.heartbeat") == 0 && s_field_str (body, blen, "run_id", run, sizeof run)
    &&  !s_grant_by_run (peer, run) && s_field_str (body, blen, "worker_id", wid, sizeof wid)) {
        if (strcmp (wid, id->name) != 0)
            S_FORBID ("worker key %s may act for worker_id %s only", id->name, id->name);
        return s_track_fence (ids, peer, route_hex, h, Q_REGRANT, run, s_field_uint (body, blen, "fence", 0),
                              why, whylen);
    }
    if (strcmp (type, "run.heartbeat") == 0 || strcmp (type, "run.complete") == 0) {
        if (!s_field_str (body, blen, "run_id", run, sizeof run) || !s_grant_by_run (peer, run))
            S_FORBID ("worker key %s holds no claim on run %s", id->name, s_field_str (body, blen, "run_id", run,
                      sizeof run) ? run : "?");
        return s_track (ids, peer, route_hex, h, type [4] == 'h' ? Q_HEARTBEAT : Q_COMPLETE, run, why, whylen);
    }
    if (strcmp (type, "interact.get") == 0) {
        if (!s_field_str (body, blen, "interaction_id", ia, sizeof ia))
            S_FORBID ("worker key %s may read only the interactions its claimed runs asked for", id->name);
        if (s_grant_has_ia (peer, ia))
            return SB_OK;
        /* asked for through another node (a claim granted by Q_REGRANT):
           the reply goes to the key only if it is of a granted run */
        s_grants_expire (peer);
        if (!peer->ngrants)
            S_FORBID ("worker key %s may read only the interactions its claimed runs asked for", id->name);
        return s_track (ids, peer, route_hex, h, Q_IAGET, NULL, why, whylen);
    }
    /* session.*, interact.request: a granted session, and its run */
    s_grant_t *g = s_field_str (body, blen, "session_id", sid, sizeof sid) ? s_grant_by_session (peer, sid) : NULL;
    if (!g)
        S_FORBID ("worker key %s holds no claim on session %s", id->name, s_field_str (body, blen, "session_id", sid,
                  sizeof sid) ? sid : "?");
    bool named = s_field_str (body, blen, "run_id", run, sizeof run);
    if ((named && strcmp (run, g->run_id) != 0) || (!named && s_mp_field (body, blen, "run_id", &k)))
        S_FORBID ("worker key %s holds the claim of run %s in session %s, not another", id->name, g->run_id, sid);
    if (strcmp (type, "interact.request") == 0)
        return s_track (ids, peer, route_hex, h, Q_INTERACT, g->run_id, why, whylen);
    if (strcmp (type, "session.append") == 0) {
        sb_err_t rc = s_check_append (id, peer, g, body, blen, why, whylen);
        if (rc != SB_OK)
            return rc;
    }
    if (strcmp (type, "session.append") == 0 || strcmp (type, "session.steer.take") == 0)
        return s_track (ids, peer, route_hex, h, Q_FENCEABLE, g->run_id, why, whylen);
    return SB_OK;
}

sb_err_t
sb_curve_check (sb_curve_ids_t *ids, const char *user_id, const char *route_hex, const sb_header_t *h,
                unsigned scope, const uint8_t *body, size_t blen, char *why, size_t whylen)
{
    s_id_t *id = s_ids_find (ids, user_id, false);
    if (!id)
        S_FORBID ("the key is no longer allowed");
    if (strcmp (id->role, "actor") == 0)
        return SB_OK;
    if (strcmp (id->role, "client") == 0) {
        if (scope & SB_SCOPE_PUBLIC)
            return SB_OK;
        S_FORBID ("a client key may call the public types only, not %s", h->type);
    }
    return s_check_worker (ids, id, user_id, route_hex, h, scope, body, blen, why, whylen);
}

bool
sb_curve_reply (sb_curve_ids_t *ids, const char *pkey, const char *type, const uint8_t *body, size_t blen,
                bool final)
{
    if (!ids || !final || zhashx_size (ids->inflight) == 0)
        return false;
    s_inflight_t *q = zhashx_lookup (ids->inflight, pkey);
    if (!q)
        return false;
    bool withhold = false;
    s_peer_t *peer = q->peer;
    bool error = strcmp (type, "error") == 0;
    char code [32] = "", run [40], sid [40], ia [40];
    if (error)
        s_field_str (body, blen, "code", code, sizeof code);
    bool fenced = strcmp (code, "fenced") == 0;
    switch (q->what) {
        case Q_CLAIM:
            if (!error && s_field_str (body, blen, "run_id", run, sizeof run)
            &&  s_field_str (body, blen, "session_id", sid, sizeof sid)) {
                uint64_t expires = s_field_uint (body, blen, "lease_expires_at", 0);
                if (!expires)
                    expires = sb_now_ms () + s_field_uint (body, blen, "lease_ms", 0);
                s_grant_add (peer, run, sid, s_field_uint (body, blen, "fence", 0), expires);
            }
            break;
        case Q_REGRANT:
            if (!error && s_field_str (body, blen, "session_id", sid, sizeof sid) && !s_grant_by_run (peer, q->run_id))
                s_grant_add (peer, q->run_id, sid, q->fence, sb_now_ms () + s_field_uint (body, blen, "lease_ms", 0));
            break;
        case Q_HEARTBEAT: {
            s_grant_t *g = s_grant_by_run (peer, q->run_id);
            if (fenced)
                s_grant_drop (peer, q->run_id);
            else
            if (g && !error)
                g->expires = sb_now_ms () + s_field_uint (body, blen, "lease_ms", 0);
            break;
        }
        case Q_COMPLETE:
            if (!error || fenced)
                s_grant_drop (peer, q->run_id);
            break;
        case Q_FENCEABLE:
            if (fenced)
                s_grant_drop (peer, q->run_id);
            break;
        case Q_INTERACT: {
            s_grant_t *g = s_grant_by_run (peer, q->run_id);
            if (g && !error && s_field_str (body, blen, "interaction_id", ia, sizeof ia)) {
                snprintf (g->ia [g->nia % SB_CURVE_GRANT_IAS], sizeof g->ia [0], "%s", ia);
                g->nia++;
            }
            break;
        }
        case Q_IAGET: {
            size_t ilen = 0;
            const uint8_t *rec = error ? NULL : s_mp_field (body, blen, "interaction", &ilen);
            s_grant_t *g = rec && s_field_str (rec, ilen, "run_id", run, sizeof run) ? s_grant_by_run (peer, run) : NULL;
            if (g && s_field_str (rec, ilen, "interaction_id", ia, sizeof ia)) {
                snprintf (g->ia [g->nia % SB_CURVE_GRANT_IAS], sizeof g->ia [0], "%s", ia);
                g->nia++;
            }
            else
                withhold = !error;      /* another run's: the key learns nothing of it */
            break;
        }
    }
    peer->inflight--;
    zhashx_delete (ids->inflight, pkey);
    return withhold;
}
