/*  cli/keys.c — `switchboard keys new NAME`: a client key pair for the
    bus's CURVE TCP endpoints (bus/curve.h, docs/workers.md). */
#include "cli/cli.h"
#include "bus/curve.h"

#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <sys/stat.h>

static const char *s_usage =
    "usage: switchboard keys new NAME [--pool P]... [--client | --actor] [--data DIR]\n"
    "\n"
    "Makes a client key pair for the bus's TCP endpoints (serve --bus): the\n"
    "public certificate DATA/certs/clients/NAME, which allows the key, and its\n"
    "secret DATA/certs/clients/NAME_secret (mode 0600). The server's own pair\n"
    "(DATA/certs/server, server_secret) is made too when missing, and DATA\n"
    "itself (mode 0700), so keys may come before the first serve. The last line\n"
    "printed is the secret file's path: give it to the worker with\n"
    "  switchboard worker --connect tcp://HOST:PORT --cert PATH --server-key DATA/certs/server\n"
    "A running server sees a new key at once. Remove both files to revoke it.\n"
    "\n"
    "What the key may do is checked on every message. By default it is a\n"
    "worker's: the worker protocol only, for worker_id NAME, in the pools it\n"
    "was made for (a key made without --pool serves the pool 'default' only).\n"
    "  --pool P          a pool the worker key may register and claim in\n"
    "                    (repeatable, at most 16; worker keys only)\n"
    "  --client          the public types (what a person's client calls)\n"
    "  --actor           everything: a remote 'switchboard actor exec|llm'\n"
    "  --data DIR        the server's data folder\n"
    "  -h, --help        this help\n";

static bool
s_name_ok (const char *s)
{
    size_t n = strlen (s);
    if (n < 1 || n > 64 || s [0] == '.')
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')
              || *s == '.' || *s == '_' || *s == '-'))
            return false;
    return true;
}

/*  Whether `pool` is in the comma-separated list already. */
static bool
s_has_pool (const char *list, const char *pool)
{
    size_t n = strlen (pool);
    for (const char *p = list; *p; ) {
        const char *comma = strchrnul (p, ',');
        if ((size_t) (comma - p) == n && memcmp (p, pool, n) == 0)
            return true;
        p = *comma ? comma + 1 : comma;
    }
    return false;
}

int
sb_cmd_keys (int argc, char **argv)
{
    static struct option longopts [] = {
        { "data", required_argument, 0, 'd' },
        { "client", no_argument, 0, 'c' },
        { "actor", no_argument, 0, 'a' },
        { "pool", required_argument, 0, 'p' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    const char *data = NULL, *role = "worker";
    char pools [SB_CURVE_POOLS_MAX * 65] = "";
    int npools = 0;
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'd': data = optarg; break;
            case 'c': role = "client"; break;
            case 'a': role = "actor"; break;
            case 'p':
                if (!s_name_ok (optarg))
                    return sb_cli_usage ("keys", "a pool is 1 to 64 bytes of [A-Za-z0-9._-], not starting with '.'");
                if (s_has_pool (pools, optarg))
                    break;
                if (npools++ == SB_CURVE_POOLS_MAX)
                    return sb_cli_usage ("keys", "at most %d --pool", SB_CURVE_POOLS_MAX);
                if (pools [0])
                    strcat (pools, ",");
                strcat (pools, optarg);
                break;
            case 'h': fputs (s_usage, stdout); return 0;
            default: return sb_cli_usage ("keys", "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    if (npools && strcmp (role, "worker") != 0)
        return sb_cli_usage ("keys", "--pool is for worker keys (a %s key is not bound to pools)", role);
    if (optind >= argc || strcmp (argv [optind], "new") != 0)
        return sb_cli_usage ("keys", "the subcommand is new (keys new NAME)");
    if (optind + 1 >= argc)
        return sb_cli_usage ("keys", "keys new needs a NAME");
    const char *name = argv [optind + 1];
    if (optind + 2 < argc)
        return sb_cli_usage ("keys", "unexpected argument '%s'", argv [optind + 2]);
    if (!s_name_ok (name))
        return sb_cli_usage ("keys", "NAME is 1 to 64 bytes of [A-Za-z0-9._-], not starting with '.'");
    char dir [4200], err [512], secret [4400];
    if (sb_cli_data_dir (data, dir, sizeof dir, err, sizeof err))
        return sb_cli_fail ("keys", "%s", err);
    /* keys may come before the first serve: DATA is made as serve makes it */
    struct stat st;
    if (stat (dir, &st) != 0 && (zsys_dir_create ("%s", dir) != 0 || chmod (dir, 0700) != 0))
        return sb_cli_fail ("keys", "cannot create %s: %s", dir, strerror (errno));
    if (sb_curve_client_new (dir, name, role, pools, secret, sizeof secret, err, sizeof err))
        return sb_cli_fail ("keys", "%s", err);
    printf ("public key  %s/certs/clients/%s (allowed by the server, role %s)\n", dir, name, role);
    if (strcmp (role, "worker") == 0)
        printf ("pools       %s\n", pools [0] ? pools : "default");
    printf ("server key  %s/certs/server\n", dir);
    printf ("%s\n", secret);
    return 0;
}
