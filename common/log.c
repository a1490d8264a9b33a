/*  common/log.c — the log line format and rate limiting. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
