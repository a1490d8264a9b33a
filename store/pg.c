/*  store/pg.c — the store on PostgreSQL: not there yet; a URL is refused
    at open, with one line that says so. */
#include "store/store_impl.h"

static int
s_open (sb_store_t *self, unsigned schema_version, size_t mapsize, char *err, size_t errlen)
{
    sb_store_err (err, errlen, "store: this build has no PostgreSQL store");
    return -1;
}

static void
s_destroy (sb_store_t *self)
{
}

const sb_store_ops_t sb_store_pg_ops = {
    .name       = "postgresql",
    .open       = s_open,
    .destroy    = s_destroy,
};
