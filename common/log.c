/*  common/log.c — the log line format, URL redaction and rate limiting. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static sb_log_level_t s_level = SB_LOG_INFO;

void
sb_log_init (void)
{
    const char *env = getenv ("SWITCHBOARD_LOG");
    if (!env)
        return;
    if (strcmp (env, "debug") == 0) s_level = SB_LOG_DEBUG;
    else if (strcmp (env, "warn") == 0) s_level = SB_LOG_WARN;
    else if (strcmp (env, "error") == 0) s_level = SB_LOG_ERROR;
    else s_level = SB_LOG_INFO;
}

void
sb_log_set_level (sb_log_level_t level)
{
    s_level = level;
}

void
sb_log (sb_log_level_t level, const char *actor, const char *fmt, ...)
{
    static const char *names [] = { "debug", "info", "warn", "error" };
    if (level < s_level)
        return;
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r (&ts.tv_sec, &tm);
    char msg [2048];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (msg, sizeof msg, fmt, ap);
    va_end (ap);
    /* A newline inside a message would forge a second log line. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf (stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s %s\n",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             ts.tv_nsec / 1000000, names [level], actor ? actor : "-", msg);
}

//  Appends n bytes to out at *len, as many as fit before the NUL.
static void
s_put (char *out, size_t size, size_t *len, const char *src, size_t n)
{
    if (*len + 1 >= size)
        return;
    if (n > size - 1 - *len)
        n = size - 1 - *len;
    memcpy (out + *len, src, n);
    *len += n;
    out [*len] = 0;
}

//  True when a parameter of that name may carry a credential. Matching
//  words inside names errs towards hiding too much: a wrongly hidden
//  value costs a reader little, a shown key cannot be taken back.
static bool
s_secret_name (const char *name, size_t n)
{
    static const char *words [] = { "key", "token", "sig", "secret", "pass", "pwd", "auth", "credential" };
    for (size_t w = 0; w < sizeof words / sizeof words [0]; w++) {
        size_t wl = strlen (words [w]);
        for (size_t k = 0; k + wl <= n; k++)
            if (strncasecmp (name + k, words [w], wl) == 0)
                return true;
    }
    return false;
}

const char *
sb_log_redact_url (const char *url, char *out, size_t size)
{
    if (!out || size == 0)
        return out;
    out [0] = 0;
    if (!url)
        return out;
    size_t len = 0;
    const char *p = url;
    const char *sep = strstr (url, "://");
    if (sep && sep - url < 16) {
        s_put (out, size, &len, url, (size_t) (sep + 3 - url));
        p = sep + 3;
    }
    //  The authority ends at the path, query or fragment; its last '@'
    //  ends the userinfo, as a password may hold a raw '@'.
    size_t alen = strcspn (p, "/?#");
    const char *at = NULL;
    for (size_t k = 0; k < alen; k++)
        if (p [k] == '@')
            at = p + k;
    if (at) {
        alen -= (size_t) (at + 1 - p);
        p = at + 1;
    }
    s_put (out, size, &len, p, alen);
    p += alen;
    size_t plen = strcspn (p, "?#");
    s_put (out, size, &len, p, plen);
    p += plen;
    //  Query and fragment: name=value pairs after '?', '#', '&' or ';'.
    while (*p) {
        s_put (out, size, &len, p, 1);
        p++;
        size_t n = strcspn (p, "&;#");
        const char *eq = memchr (p, '=', n);
        if (eq && s_secret_name (p, (size_t) (eq - p))) {
            s_put (out, size, &len, p, (size_t) (eq + 1 - p));
            s_put (out, size, &len, "***", 3);
        }
        else
            s_put (out, size, &len, p, n);
        p += n;
    }
    return out;
}

int
sb_ratelimit_ok (sb_ratelimit_t *rl, uint32_t burst)
{
    int64_t now = sb_mono_ms ();
    if (now - rl->window_ms >= 1000) {
        rl->window_ms = now;
        rl->used = 0;
    }
    if (rl->used < burst) {
        rl->used++;
        return 1;
    }
    rl->suppressed++;
    return 0;
}

int64_t
sb_env_int (const char *actor, const char *name, int64_t min, int64_t max, int64_t dflt)
{
    const char *v = getenv (name);
    if (!v || !*v)
        return dflt;
    char *end = NULL;
    errno = 0;
    long long n = strtoll (v, &end, 10);
    if (errno || *end || n < min || n > max) {
        sb_warn (actor, "%s=%.32s is not a whole number from %lld to %lld; using %lld", name, v, (long long) min,
                 (long long) max, (long long) dflt);
        return dflt;
    }
    return n;
}

uint64_t
sb_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

int64_t
sb_mono_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
sb_mono_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int
sb_fail (char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (err, errlen, fmt, ap);
        va_end (ap);
    }
    return -1;
}
