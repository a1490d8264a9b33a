/*  cli/common.c — data folder, endpoints, connecting, error lines. */
#include "cli/cli.h"
#include "schemas/json.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool sb_cli_json_errors;

//  One error, as a line for people or, under --json, as the object
//  {"error":{"code","message"}} that scripts parse; both on stderr.
static void
s_error (const char *cmd, const char *code, const char *hint, const char *fmt, va_list ap)
{
    char msg [2048];
    vsnprintf (msg, sizeof msg, fmt, ap);
    if (sb_cli_json_errors) {
        json_t *o = json_pack ("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
        char *line = o ? json_dumps (o, JSON_COMPACT) : NULL;
        fprintf (stderr, "%s\n", line ? line : "{\"error\":{\"code\":\"internal\",\"message\":\"\"}}");
        free (line);
        json_decref (o);
    }
    else
        fprintf (stderr, "switchboard %s: %s%s\n", cmd, msg, hint ? hint : "");
}

int
sb_cli_usage (const char *cmd, const char *fmt, ...)
{
    char hint [128];
    snprintf (hint, sizeof hint, " (try 'switchboard %s --help')", cmd);
    va_list ap;
    va_start (ap, fmt);
    s_error (cmd, "usage", hint, fmt, ap);
    va_end (ap);
    return 2;
}

int
sb_cli_parse_uint (const char *cmd, const char *opt, const char *text, unsigned long long max,
                   unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull (text, &end, 10);
    if (!*text || *end || errno || text [0] == '-' || v > max)
        return sb_cli_usage (cmd, "%s takes a number from 0 to %llu, not '%s'", opt, max, text);
    *out = v;
    return 0;
}

int
sb_cli_fail (const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    s_error (cmd, "failed", NULL, fmt, ap);
    va_end (ap);
    return 1;
}

int
sb_cli_fail_code (const char *cmd, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    s_error (cmd, code, NULL, fmt, ap);
    va_end (ap);
    return 1;
}

int
sb_cli_data_dir (const char *opt, char *out, size_t n, char *err, size_t errlen)
{
    const char *env = getenv ("SWITCHBOARD_DATA");
    const char *xdg = getenv ("XDG_STATE_HOME");
    const char *home = getenv ("HOME");
    int w;
    if (opt && *opt)
        w = snprintf (out, n, "%s", opt);
    else if (env && *env)
        w = snprintf (out, n, "%s", env);
    else if (xdg && *xdg)
        w = snprintf (out, n, "%s/switchboard", xdg);
    else if (home && *home)
        w = snprintf (out, n, "%s/.local/state/switchboard", home);
    else {
        snprintf (err, errlen, "no data folder: pass --data DIR or set SWITCHBOARD_DATA");
        return -1;
    }
    if (w < 0 || (size_t) w >= n) {
        snprintf (err, errlen, "data folder path is too long");
        return -1;
    }
    /* a relative DATA would name a different folder from another cwd */
    if (out [0] != '/') {
        char cwd [4096];
        if (!getcwd (cwd, sizeof cwd)) {
            snprintf (err, errlen, "cannot read the current folder: %s", strerror (errno));
            return -1;
        }
        char tmp [4096];
        snprintf (tmp, sizeof tmp, "%s/%s", cwd, out);
        if (strlen (tmp) >= n) {
            snprintf (err, errlen, "data folder path is too long");
            return -1;
        }
        snprintf (out, n, "%s", tmp);
    }
    size_t len = strlen (out);
    while (len > 1 && out [len - 1] == '/')
        out [--len] = 0;
    /* ipc://DATA/bus-cmd must fit in sun_path */
    if (len + strlen ("/bus-cmd") > SB_IPC_PATH_MAX) {
        snprintf (err, errlen, "data folder %s is too long for ipc sockets (%zu bytes; the limit is %d)",
                  out, len + strlen ("/bus-cmd"), SB_IPC_PATH_MAX);
        return -1;
    }
    return 0;
}

/*  One endpoint of --connect (or $SWITCHBOARD_BUS), its `which` plane. */
static int
s_endpoint_one (const char *bus, const char *which, char *out, size_t n, char *err, size_t errlen)
{
    if (strncmp (bus, "tcp://", 6) == 0) {
        const char *colon = strrchr (bus, ':');
        int port = colon ? atoi (colon + 1) : 0;
        if (port <= 0) {
            snprintf (err, errlen, "bad endpoint %s (want tcp://HOST:PORT)", bus);
            return -1;
        }
        int off = strcmp (which, "pub") == 0 ? 1 : strcmp (which, "tap") == 0 ? 2 : 0;
        if (strcmp (which, "in") == 0) {
            snprintf (err, errlen, "the event plane's publishing side is not on tcp");
            return -1;
        }
        snprintf (out, n, "%.*s:%d", (int) (colon - bus), bus, port + off);
        return 0;
    }
    if (strncmp (bus, "ipc://", 6) == 0 || strncmp (bus, "inproc://", 9) == 0) {
        /* ipc://DIR/bus-cmd -> ipc://DIR/bus-<which> */
        const char *slash = strrchr (bus, '/');
        if (!slash || strncmp (slash, "/bus-", 5) != 0) {
            if (strcmp (which, "cmd") == 0) {
                snprintf (out, n, "%s", bus);
                return 0;
            }
            snprintf (err, errlen, "cannot derive the %s endpoint from %s", which, bus);
            return -1;
        }
        snprintf (out, n, "%.*s/bus-%s", (int) (slash - bus), bus, which);
        return 0;
    }
    snprintf (err, errlen, "unsupported endpoint %s (use ipc:// or tcp://)", bus);
    return -1;
}

/*  --connect (else $SWITCHBOARD_BUS) may name several nodes of a cluster,
    comma-separated: each is derived as one would be, and the list kept in
    its order (the bus connects to the first, then fails over to the next,
    bus/client.c). */
int
sb_cli_endpoint (const char *connect, const char *data, const char *which,
                 char *out, size_t n, char *err, size_t errlen)
{
    const char *bus = connect && *connect ? connect : getenv ("SWITCHBOARD_BUS");
    if (bus && *bus) {
        size_t used = 0;
        for (const char *p = bus; ; ) {
            size_t len = strcspn (p, ",");
            char one [SB_BUS_ENDPOINT_MAX + 1], derived [SB_BUS_ENDPOINT_MAX + 8];
            if (len == 0 || len > SB_BUS_ENDPOINT_MAX) {
                snprintf (err, errlen, "bad endpoint list %s (want EP or EP1,EP2,...; each at most %d bytes)",
                          bus, SB_BUS_ENDPOINT_MAX);
                return -1;
            }
            memcpy (one, p, len);
            one [len] = 0;
            if (s_endpoint_one (one, which, derived, sizeof derived, err, errlen))
                return -1;
            int w = snprintf (out + used, n - used, "%s%s", used ? "," : "", derived);
            if (w < 0 || (size_t) w >= n - used) {
                snprintf (err, errlen, "the endpoint list %s is too long", bus);
                return -1;
            }
            used += (size_t) w;
            if (!p [len])
                break;
            p += len + 1;
        }
        return 0;
    }
    char dir [4096];
    if (sb_cli_data_dir (data, dir, sizeof dir, err, errlen))
        return -1;
    snprintf (out, n, "ipc://%s/bus-%s", dir, which);
    return 0;
}

int
sb_cli_seq_arg (const char *cmd, const char *opt, const char *arg, uint64_t min, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull (arg, &end, 10);
    if (errno || !*arg || *end || arg [0] == '-' || v < min || v > (unsigned long long) SB_COUNT_MAX)
        return sb_cli_usage (cmd, "%s takes a seq (a number from %llu): %s", opt, (unsigned long long) min, arg);
    *out = v;
    return 0;
}

int
sb_cli_parse_opts (int argc, char **argv, const char *cmd, const char *usage, sb_cli_opts_t *o)
{
    static struct option longopts [] = {
        { "json", no_argument, 0, 'j' },
        { "connect", required_argument, 0, 'c' },
        { "data", required_argument, 0, 'd' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    memset (o, 0, sizeof *o);
    int c;
    optind = 1;
    while ((c = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
            case 'j': o->json = true; break;
            case 'c': o->connect = optarg; break;
            case 'd': o->data = optarg; break;
            case 'h': fputs (usage, stdout); return 0;
            default: return sb_cli_usage (cmd, "unknown option or missing value: %s", argv [optind - 1]);
        }
    }
    return -1;
}

sb_bus_t *
sb_cli_connect (const char *cmd, const char *connect, const char *data)
{
    char ep [4200], err [512];
    if (sb_cli_endpoint (connect, data, "cmd", ep, sizeof ep, err, sizeof err)) {
        sb_cli_fail (cmd, "%s", err);
        return NULL;
    }
    if (strncmp (ep, "ipc://", 6) == 0 && !strchr (ep, ',')) {
        struct stat st;
        if (stat (ep + 6, &st) != 0) {
            sb_cli_fail_code (cmd, "unavailable", "no server at %s: start one with 'switchboard serve' "
                              "(or pass --connect/--data)", ep);
            return NULL;
        }
    }
    sb_bus_t *bus = sb_bus_new (ep, "cli");
    if (!bus)
        sb_cli_fail (cmd, "cannot connect to %s", ep);
    return bus;
}

sb_msg_t *
sb_cli_call (const char *cmd, sb_bus_t *bus, const char *type, const uint8_t *body, size_t len,
             int timeout_ms)
{
    sb_msg_t *reply = sb_bus_call (bus, type, NULL, body, len, timeout_ms);
    if (!reply) {
        sb_cli_fail_code (cmd, "timeout", "no reply to %s within %d ms: is the server running?",
                          type, timeout_ms);
        return NULL;
    }
    if (sb_msg_is_error (reply)) {
        sb_cli_print_error (cmd, reply);
        sb_msg_destroy (&reply);
        return NULL;
    }
    return reply;
}

void
sb_cli_print_error (const char *cmd, const sb_msg_t *reply)
{
    const char *code = sb_msg_error_code (reply);
    if (sb_cli_json_errors)
        sb_cli_fail_code (cmd, code, "%s", sb_msg_error_message (reply));
    else
        sb_cli_fail_code (cmd, code, "%s: %s", code, sb_msg_error_message (reply));
}

uint32_t
sb_cli_page_max (const char *type)
{
    const sb_field_t *f = sb_schema_field (type, "limit");
    if (!f || !sb_field_ranged (f) || f->max_value <= 0 || f->max_value > UINT32_MAX)
        return 0;
    return (uint32_t) f->max_value;
}

void
sb_cli_print_json (const sb_val_t *v)
{
    sb_json_print (stdout, v);
    fflush (stdout);
}

void
sb_cli_time_cell (uint64_t ms, char *out, size_t n)
{
    if (ms == 0) {
        snprintf (out, n, "-");
        return;
    }
    time_t t = (time_t) (ms / 1000);
    struct tm tm;
    localtime_r (&t, &tm);
    if (strftime (out, n, "%Y-%m-%d %H:%M", &tm) == 0)
        snprintf (out, n, "-");
}

void
sb_cli_text_cell (const char *s, size_t max, char *out, size_t n)
{
    if (!s || !*s) {
        snprintf (out, n, "-");
        return;
    }
    if (max + 4 > n)
        max = n - 4;
    size_t w = 0;
    for (; s [w] && s [w] != '\n' && w < max; w++)
        out [w] = (unsigned char) s [w] < 0x20 ? ' ' : s [w];
    bool cut = s [w] && s [w] != '\n';
    //  never leave half a UTF-8 character before the ellipsis
    if (cut)
        while (w > 0 && ((unsigned char) s [w] & 0xC0) == 0x80)
            w--;
    out [w] = 0;
    if (cut)
        snprintf (out + w, n - w, "...");
}
