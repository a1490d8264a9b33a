/*  actors/exec/changes.c — see diff.h. */
#include "actors/exec/changes.h"
#include "common/git.h"
#include "common/git_checkpoint.h"
#include "common/log.h"
#include "schemas/vocab.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#define ACTOR "exec"

/* ------------------------------------------------------------------ */
/*  The diff */

//  A diff is file content: its text goes out as a msgpack str, which
//  must be UTF-8. A byte that is not is shown as '?'.
static void
s_enc_text (sb_enc_t *enc, const char *key, const char *s, size_t n)
{
    if (sb_utf8_valid (s, n)) {
        sb_enc_key (enc, key);
        sb_enc_strn (enc, s, n);
        return;
    }
    char *copy = malloc (n + 1);
    if (!copy) {
        sb_enc_kstr (enc, key, "");
        return;
    }
    size_t k = 0;
    while (k < n) {
        size_t len = 1;
        unsigned char c = (unsigned char) s [k];
        if (c >= 0xF0) len = 4;
        else if (c >= 0xE0) len = 3;
        else if (c >= 0xC0) len = 2;
        if (k + len <= n && sb_utf8_valid (s + k, len)) {
            memcpy (copy + k, s + k, len);
            k += len;
        }
        else
            copy [k++] = '?';
    }
    sb_enc_key (enc, key);
    sb_enc_strn (enc, copy, n);
    free (copy);
}

//  The next "diff --git" section of `text` from *pos: its start and length.
static bool
s_next_section (const char *text, size_t *pos, const char **start, size_t *len)
{
    const char *p = text + *pos;
    if (!*p)
        return false;
    if (strncmp (p, "diff --git ", 11) != 0) {
        const char *next = strstr (p, "\ndiff --git ");
        if (!next)
            return false;
        p = next + 1;
    }
    const char *end = strstr (p + 1, "\ndiff --git ");
    end = end ? end + 1 : p + strlen (p);
    *start = p;
    *len = (size_t) (end - p);
    *pos = (size_t) (end - text);
    return true;
}

static bool
s_section_has (const char *sec, size_t len, const char *line)
{
    size_t n = strlen (line);
    for (const char *p = sec; p && p < sec + len; ) {
        if ((size_t) (sec + len - p) >= n && strncmp (p, line, n) == 0)
            return true;
        /* the header ends where the first hunk starts */
        if (strncmp (p, "@@", 2) == 0)
            return false;
        p = memchr (p, '\n', (size_t) (sec + len - p));
        p = p ? p + 1 : NULL;
    }
    return false;
}

//  The server's own files are not the session's changes: a pathspec that
//  leaves DATA out when it lies inside the workspace.
void
sb_exec_diff_exclude (const char *workspace, const char *data_dir, char *exclude, size_t n)
{
    size_t wl = strlen (workspace);
    exclude [0] = 0;
    if (data_dir && strncmp (data_dir, workspace, wl) == 0 && data_dir [wl] == '/' && data_dir [wl + 1])
        snprintf (exclude, n, ":(exclude)%s", data_dir + wl + 1);
}

void
sb_exec_diff_baseline (const char *workspace, const char *data_dir, const char *session_id)
{
    char exclude [4200];
    sb_exec_diff_exclude (workspace, data_dir, exclude, sizeof exclude);
    if (sb_git_baseline_save (workspace, exclude, session_id) != 0)
        sb_debug (ACTOR, "no baseline for session=%s (outside git or over the caps)", session_id);
}

/* ------------------------------------------------------------------ */
/*  The agent's writes */

#define S_WRITTEN_MAX (256u << 10)      /* bytes of one session's list */

//  The list of the paths the session's agent wrote: beside its baseline,
//  in the work tree's git folder. 0, or -1 outside git or for a bad id.
static int
s_written_file (const char *workspace, const char *session_id, char *out, size_t n)
{
    size_t len = session_id ? strlen (session_id) : 0;
    if (len == 0 || len > 64 || strspn (session_id, "0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghijklmnopqrstuvwxyz")
                                != len)
        return -1;
    char rel [128];
    snprintf (rel, sizeof rel, "switchboard/written-%s", session_id);
    const char *args [] = { "rev-parse", "--git-path", rel, NULL };
    char *path = NULL;
    if (sb_git_run (workspace, NULL, args, &path) != 0) {
        free (path);
        return -1;
    }
    path [strcspn (path, "\n")] = 0;
    int w = path [0] == '/' ? snprintf (out, n, "%s", path) : snprintf (out, n, "%s/%s", workspace, path);
    free (path);
    return w > 0 && (size_t) w < n ? 0 : -1;
}

//  The list's text (malloc'd, NUL-terminated; NULL when there is none).
static char *
s_written_load (const char *file)
{
    int fd = open (file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *buf = malloc (S_WRITTEN_MAX + 1);
    ssize_t n = buf ? read (fd, buf, S_WRITTEN_MAX) : -1;
    close (fd);
    if (n < 0) {
        free (buf);
        return NULL;
    }
    buf [n] = 0;
    return buf;
}

//  Whether `list` (lines) holds `path` as a line.
static bool
s_list_has (const char *list, const char *path)
{
    size_t n = strlen (path);
    for (const char *p = list; p && *p; ) {
        const char *nl = strchr (p, '\n');
        size_t len = nl ? (size_t) (nl - p) : strlen (p);
        if (len == n && memcmp (p, path, n) == 0)
            return true;
        p = nl ? nl + 1 : NULL;
    }
    return false;
}

void
sb_exec_diff_note_write (const char *workspace, const char *session_id, const char *tool, const char *args_json)
{
    if (!tool || (strcmp (tool, "write_file") != 0 && strcmp (tool, "edit_file") != 0) || !args_json)
        return;
    json_t *args = json_loads (args_json, 0, NULL);
    const char *p = json_string_value (json_object_get (args, "path"));
    char path [4200] = "";
    if (p) {
        //  as the diff names it: relative to the workspace, without "./"
        size_t wl = strlen (workspace);
        if (strncmp (p, workspace, wl) == 0 && p [wl] == '/')
            p += wl + 1;
        while (p [0] == '.' && p [1] == '/')
            p += 2;
        snprintf (path, sizeof path, "%s", p);
    }
    json_decref (args);
    char file [4400];
    if (!path [0] || strlen (path) >= 4096 || strchr (path, '\n') || path [0] == '/'
    ||  s_written_file (workspace, session_id, file, sizeof file) != 0)
        return;
    char *list = s_written_load (file);
    size_t lines = 0;
    for (const char *q = list; q && (q = strchr (q, '\n')); q++)
        lines++;
    bool skip = (list && s_list_has (list, path)) || lines >= SB_EXEC_DIFF_FILES_MAX
             || (list ? strlen (list) : 0) + strlen (path) + 1 > S_WRITTEN_MAX;
    free (list);
    if (skip)
        return;
    char *slash = strrchr (file, '/');
    *slash = 0;
    if (mkdir (file, 0700) != 0 && errno != EEXIST)
        return;
    *slash = '/';
    int fd = open (file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char line [4200];
    int n = snprintf (line, sizeof line, "%s\n", path);
    if (write (fd, line, (size_t) n) != n)
        sb_debug (ACTOR, "cannot note the write of %s for session=%s", path, session_id);
    close (fd);
}

//  Appends `written`: the agent's writes the diff does not show (the
//  file is the same as the base again, or was written back as it was).
static void
s_enc_written (const char *workspace, const char *session_id, const char *numstat, sb_enc_t *enc)
{
    char file [4400];
    char *list = s_written_file (workspace, session_id, file, sizeof file) == 0 ? s_written_load (file) : NULL;
    sb_enc_key (enc, "written");
    sb_enc_array_open (enc);
    size_t n = 0;
    for (char *p = list; p && *p && n < SB_EXEC_DIFF_FILES_MAX; ) {
        char *nl = strchr (p, '\n');
        if (nl)
            *nl = 0;
        //  numstat -z: "A\tD\tPATH\0" or "A\tD\t\0OLD\0NEW\0"
        bool shown = false;
        for (const char *q = numstat; q && *q && !shown; q += strlen (q) + 1) {
            const char *tab = strrchr (q, '\t');
            shown = strcmp (tab ? tab + 1 : q, p) == 0;
        }
        if (*p && !shown && sb_utf8_valid (p, strlen (p))) {
            sb_enc_str (enc, p);
            n++;
        }
        p = nl ? nl + 1 : NULL;
    }
    sb_enc_array_close (enc);
    free (list);
}

//  Appends `files`: one map per record of `numstat` (git diff --numstat
//  -z), with its section of `diff` (the full diff, in the same order;
//  NULL: the files without their text), bounded per file and in all.
//  Returns whether anything was left out (`truncated` in: already so).
static bool
s_enc_files (sb_enc_t *enc, char *numstat, const char *diff, bool truncated)
{
    sb_enc_key (enc, "files");
    sb_enc_array_open (enc);
    size_t files = 0, total = 0, pos = 0;
    /* numstat -z records: "A\tD\tPATH\0", or "A\tD\t\0OLD\0NEW\0" for a
       rename; the sections of the full diff come in the same order */
    for (char *p = numstat; p && *p; ) {
        char *tab1 = strchr (p, '\t'), *tab2 = tab1 ? strchr (tab1 + 1, '\t') : NULL;
        if (!tab2)
            break;
        const char *path = tab2 + 1, *old = NULL;
        char *next = (char *) path + strlen (path) + 1;
        if (!*path) {
            old = next;
            path = old + strlen (old) + 1;
            next = (char *) path + strlen (path) + 1;
        }
        if (files == SB_EXEC_DIFF_FILES_MAX) {
            truncated = true;
            break;
        }
        const char *sec = NULL;
        size_t slen = 0;
        if (diff && !s_next_section (diff, &pos, &sec, &slen))
            sec = NULL;
        bool binary = p [0] == '-';
        const char *status = old ? "renamed"
                           : sec && s_section_has (sec, slen, "new file mode") ? "added"
                           : sec && s_section_has (sec, slen, "deleted file mode") ? "deleted"
                           : sec ? "modified" : "changed";
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "path", path);
        sb_enc_kstr (enc, "status", status);
        if (old)
            sb_enc_kstr (enc, "old_path", old);
        sb_enc_kuint (enc, "additions", binary ? 0 : strtoull (p, NULL, 10));
        sb_enc_kuint (enc, "deletions", binary ? 0 : strtoull (tab1 + 1, NULL, 10));
        if (binary)
            sb_enc_kbool (enc, "binary", true);
        size_t keep = sec ? slen : 0;
        bool cut = false;
        if (keep > SB_EXEC_DIFF_FILE_MAX) {
            keep = SB_EXEC_DIFF_FILE_MAX;
            cut = true;
        }
        if (total + keep > SB_EXEC_DIFF_TOTAL_MAX) {
            keep = total < SB_EXEC_DIFF_TOTAL_MAX ? SB_EXEC_DIFF_TOTAL_MAX - total : 0;
            cut = true;
            truncated = true;
        }
        /* a cut never splits a UTF-8 sequence into '?' */
        while (cut && keep > 0 && ((unsigned char) sec [keep] & 0xC0) == 0x80)
            keep--;
        s_enc_text (enc, "diff", sec ? sec : "", keep);
        if (cut)
            sb_enc_kbool (enc, "truncated", true);
        sb_enc_map_close (enc);
        total += keep;
        files++;
        p = next;
    }
    sb_enc_array_close (enc);
    return truncated;
}

void
sb_exec_diff_encode (const char *workspace, const char *data_dir, const char *session_id, const char *want,
                     sb_enc_t *enc)
{
    char exclude [4200];
    sb_exec_diff_exclude (workspace, data_dir, exclude, sizeof exclude);
    sb_git_stage_t stage;
    char after [128], base [128] = "";
    const char *against = "head";
    char *numstat = NULL, *diff = NULL, *out = NULL;
    bool git = sb_git_stage_open (&stage, workspace, exclude) == 0
            && sb_git_stage_tree (&stage, after, sizeof after) == 0;
    bool has_session = git && session_id && sb_git_baseline_load (workspace, session_id, base, sizeof base) == 0;
    if (has_session && (!want || strcmp (want, "head") != 0))
        against = "session";
    else
    if (git) {
        static const char *head [] = { "rev-parse", "--verify", "-q", "HEAD^{tree}", NULL };
        static const char *empty [] = { "hash-object", "-t", "tree", "--stdin", NULL };
        /* no commit yet: everything is new, against the empty tree */
        if (sb_git_run (workspace, NULL, head, &out) != 0) {
            free (out);
            out = NULL;
            git = sb_git_run (workspace, NULL, empty, &out) == 0;
        }
        if (git) {
            out [strcspn (out, "\n")] = 0;
            snprintf (base, sizeof base, "%s", out);
        }
        free (out);
    }
    if (git) {
        const char *ns [] = { "diff", "--numstat", "-z", "-M", "--relative", base, after, "--", ".", NULL };
        const char *df [] = { "diff", "--no-color", "--no-ext-diff", "-M", "--relative", base, after,
                              "--", ".", NULL };
        git = sb_git_run (workspace, NULL, ns, &numstat) == 0;
        if (git && sb_git_run (workspace, NULL, df, &diff) != 0) {
            free (diff);
            diff = NULL;        /* over SB_GIT_OUT_MAX: the files without their text */
        }
    }
    sb_git_stage_close (&stage);

    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "workspace", workspace);
    sb_enc_kbool (enc, "git", git);
    if (git) {
        sb_enc_kstr (enc, "base", against);
        sb_enc_kbool (enc, "session_base", has_session);
        s_enc_written (workspace, session_id, numstat, enc);
    }
    bool truncated = s_enc_files (enc, git ? numstat : NULL, diff, git && !diff);
    sb_enc_kbool (enc, "truncated", truncated);
    sb_enc_map_close (enc);
    free (numstat);
    free (diff);
}

/* ------------------------------------------------------------------ */
/*  Jobs */

typedef struct job {
    struct job *next;
    sb_exec_diffs_t *owner;
    sb_header_t h;
    uint8_t *route;
    size_t route_len;
    char sid [64];
    char base [16];             /* "session", "head" or "" (the session's when it has one) */
    enum { S_DIFF, S_CKPT_DIFF, S_CKPT_LIST } kind;     /* exec.diff, .checkpoint_diff, .checkpoints */
    uint64_t from_seq, to_seq;  /* exec.checkpoint_diff */
    uint64_t after_seq, limit;  /* exec.checkpoints */
    uint8_t *body;              /* the exec.diff.ok body, or NULL after an error */
    size_t len;
    sb_err_t code;
    char message [256];
} job_t;

struct sb_exec_diffs {
    char endpoint [4200];
    char data_dir [4200];
    int fd;
    pthread_mutex_t lock;
    job_t *done;
    atomic_int running;
};

static void
s_job_free (job_t *job)
{
    if (job) {
        free (job->route);
        free (job->body);
        free (job);
    }
}

/* ------------------------------------------------------------------ */
/*  Reading a tape */

int
sb_exec_tape_read (sb_bus_t *bus, const char *sid, uint64_t after, int timeout_ms, sb_exec_tape_fn *fn, void *arg,
                   sb_err_t *code, char *why, size_t n)
{
    sb_enc_t *e = sb_enc_new ();
    while (e) {
        sb_enc_reset (e);
        sb_enc_map_open (e);
        sb_enc_kstr (e, "session_id", sid);
        sb_enc_kuint (e, "after_seq", after);
        sb_enc_kuint (e, "limit", 5000);
        sb_enc_map_close (e);
        size_t len;
        const uint8_t *b = sb_enc_data (e, &len);
        sb_msg_t *reply = sb_bus_call (bus, "session.events", sid, b, len, timeout_ms);
        if (!reply || sb_msg_is_error (reply)) {
            *code = reply ? sb_err_from_name (sb_msg_error_code (reply)) : SB_E_unavailable;
            snprintf (why, n, "%s", reply ? sb_msg_error_message (reply) : "the session actor did not answer");
            sb_msg_destroy (&reply);
            sb_enc_destroy (&e);
            return -1;
        }
        const sb_val_t *events = sb_get_array (reply->body, "events");
        bool go = true;
        for (uint32_t k = 0; go && events && k < events->len; k++) {
            const sb_val_t *ev = sb_array_at (events, k);
            uint64_t seq = sb_get_uint (ev, "seq", 0);
            if (seq > after)
                after = seq;
            go = fn (ev, arg);
        }
        bool more = go && sb_get_bool (reply->body, "more", false) && events && events->len;
        sb_msg_destroy (&reply);
        if (!more) {
            sb_enc_destroy (&e);
            return 0;
        }
    }
    *code = SB_E_internal;
    snprintf (why, n, "out of memory");
    return -1;
}

/* ------------------------------------------------------------------ */
/*  Between two checkpoints (exec.checkpoint_diff) */

#define S_TREE_MAX 64
#define S_TAPE_MS 10000                 /* one page of the tape, at most */

//  One side of the comparison: the latest checkpoint at or before `want`.
typedef struct {
    uint64_t want, seq_of;
    char tree [S_TREE_MAX + 1];
    bool shadow;
} s_side_t;

static void
s_side_take (s_side_t *side, const sb_val_t *body)
{
    uint64_t seq_of = sb_get_uint (body, "seq_of", 0);
    const char *tree = sb_get_str (body, "tree"), *store = sb_get_str (body, "store");
    size_t n = tree ? strlen (tree) : 0;
    if (seq_of > side->want || (side->tree [0] && seq_of < side->seq_of) || n == 0 || n > S_TREE_MAX
    ||  strspn (tree, "0123456789abcdef") != n)
        return;
    side->seq_of = seq_of;
    memcpy (side->tree, tree, n + 1);
    side->shadow = store && strcmp (store, sb_ckpt_store_name (SB_CKPT_SHADOW)) == 0;
}

//  Keeps the two checkpoints and the session's first one from each entry.
typedef struct {
    s_side_t *from, *to;
    uint64_t first;             /* seq_of of the session's first checkpoint; 0: none */
} s_scan_t;

static bool
s_scan_entry (const sb_val_t *ev, void *arg)
{
    s_scan_t *scan = arg;
    const char *kind = sb_get_str (ev, "kind");
    if (!kind || strcmp (kind, "checkpoint") != 0)
        return true;
    const sb_val_t *body = sb_get_map (ev, "body");
    uint64_t seq_of = sb_get_uint (body, "seq_of", 0);
    if (!scan->first || seq_of < scan->first)
        scan->first = seq_of;
    s_side_take (scan->from, body);
    s_side_take (scan->to, body);
    return true;
}

static void
s_enc_side (sb_enc_t *enc, const char *key, const s_side_t *side)
{
    sb_enc_key (enc, key);
    sb_enc_map_open (enc);
    sb_enc_kuint (enc, "seq_of", side->seq_of);
    sb_enc_kstr (enc, "tree", side->tree);
    sb_enc_map_close (enc);
}

//  The exec.checkpoint_diff.ok body in enc: 0, or -1 with the job's error
//  set (invalid: a seq before the first checkpoint; not_found: a tree the
//  store no longer has).
static int
s_checkpoint_diff (sb_bus_t *bus, job_t *job, const char *ws, const char *data_dir, sb_enc_t *enc)
{
    s_side_t from = { .want = job->from_seq }, to = { .want = job->to_seq };
    s_scan_t scan = { &from, &to, 0 };
    char why [200];
    if (sb_exec_tape_read (bus, job->sid, 0, S_TAPE_MS, s_scan_entry, &scan, &job->code, why, sizeof why) != 0) {
        snprintf (job->message, sizeof job->message, "cannot read the tape: %s", why);
        return -1;
    }
    uint64_t first = scan.first;
    if (!first) {
        job->code = SB_E_not_found;
        snprintf (job->message, sizeof job->message, "the session has no checkpoint");
        return -1;
    }
    if (!from.tree [0] || !to.tree [0]) {
        job->code = SB_E_invalid;
        snprintf (job->message, sizeof job->message, "seq %" PRIu64 " is before the session's first checkpoint; "
                  "the first valid seq is %" PRIu64, !from.tree [0] ? job->from_seq : job->to_seq, first);
        return -1;
    }
    if (from.shadow != to.shadow) {
        job->code = SB_E_invalid;
        snprintf (job->message, sizeof job->message, "the checkpoints after seq %" PRIu64 " and %" PRIu64
                  " are in different stores (the workspace became or stopped being a git work tree)",
                  from.seq_of, to.seq_of);
        return -1;
    }
    char dir [4300] = "", err [256] = "";
    if (data_dir)
        snprintf (dir, sizeof dir, "%s/checkpoints", data_dir);
    char *numstat = NULL, *diff = NULL;
    int rc = sb_ckpt_diff (ws, dir [0] ? dir : NULL, job->sid, from.shadow, from.tree, to.tree, &numstat, &diff,
                           err, sizeof err);
    if (rc != 0) {
        job->code = rc == -2 ? SB_E_not_found : SB_E_internal;
        snprintf (job->message, sizeof job->message, "%s", err);
        return -1;
    }
    sb_enc_map_open (enc);
    s_enc_side (enc, "from", &from);
    s_enc_side (enc, "to", &to);
    sb_enc_kstr (enc, "store", sb_ckpt_store_name (from.shadow ? SB_CKPT_SHADOW : SB_CKPT_REPOSITORY));
    bool truncated = s_enc_files (enc, numstat, diff, !diff);
    sb_enc_kbool (enc, "truncated", truncated);
    sb_enc_map_close (enc);
    free (numstat);
    free (diff);
    return 0;
}

/* ------------------------------------------------------------------ */
/*  The list of a session's checkpoints (exec.checkpoints) */

typedef struct {
    sb_enc_t *enc;
    uint64_t limit, n, last;
    bool more;
} s_list_t;

//  Each checkpoint entry as {seq, ts, run_id, checkpoint}, until the
//  limit or SB_EXEC_CKPT_LIST_BYTES are reached (then `more`).
static bool
s_list_entry (const sb_val_t *ev, void *arg)
{
    s_list_t *l = arg;
    const char *kind = sb_get_str (ev, "kind");
    const sb_val_t *body = sb_get_map (ev, "body");
    if (!kind || strcmp (kind, "checkpoint") != 0 || !body)
        return true;
    size_t len;
    sb_enc_data (l->enc, &len);
    if (l->n == l->limit || len > SB_EXEC_CKPT_LIST_BYTES) {
        l->more = true;
        return false;
    }
    l->last = sb_get_uint (ev, "seq", 0);
    sb_enc_map_open (l->enc);
    sb_enc_kuint (l->enc, "seq", l->last);
    sb_enc_kuint (l->enc, "ts", sb_get_uint (ev, "ts", 0));
    sb_enc_kstr_opt (l->enc, "run_id", sb_get_str (ev, "run_id"));
    sb_enc_key (l->enc, "checkpoint");
    sb_enc_val (l->enc, body);
    sb_enc_map_close (l->enc);
    l->n++;
    return true;
}

//  The exec.checkpoints.ok body in enc: 0, or -1 with the job's error set.
static int
s_checkpoint_list (sb_bus_t *bus, job_t *job, sb_enc_t *enc)
{
    s_list_t l = { .enc = enc, .limit = job->limit };
    char why [200];
    sb_enc_map_open (enc);
    sb_enc_key (enc, "checkpoints");
    sb_enc_array_open (enc);
    if (sb_exec_tape_read (bus, job->sid, job->after_seq, S_TAPE_MS, s_list_entry, &l, &job->code, why, sizeof why)
        != 0) {
        snprintf (job->message, sizeof job->message, "cannot read the tape: %s", why);
        return -1;
    }
    sb_enc_array_close (enc);
    sb_enc_kbool (enc, "more", l.more);
    if (l.more)
        sb_enc_kuint (enc, "next_after", l.last);
    sb_enc_map_close (enc);
    return 0;
}

static void *
s_job_main (void *arg)
{
    job_t *job = arg;
    sb_exec_diffs_t *self = job->owner;
    char name [64];
    snprintf (name, sizeof name, "exec-diff-%d", (int) getpid ());
    sb_bus_t *bus = sb_bus_new (self->endpoint, name);
    sb_enc_t *enc = sb_enc_new ();
    sb_msg_t *reply = NULL;
    if (bus && enc) {
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "session_id", job->sid);
        sb_enc_map_close (enc);
        size_t len;
        const uint8_t *b = sb_enc_data (enc, &len);
        reply = sb_bus_call (bus, "session.get", job->sid, b, len, 10000);
    }
    const char *ws = reply && !sb_msg_is_error (reply)
                   ? sb_get_str (sb_get_map (reply->body, "session"), "workspace") : NULL;
    if (ws && job->kind != S_DIFF) {
        sb_enc_reset (enc);
        int rc = job->kind == S_CKPT_LIST ? s_checkpoint_list (bus, job, enc)
               : s_checkpoint_diff (bus, job, ws, self->data_dir [0] ? self->data_dir : NULL, enc);
        if (rc == 0 && !(job->body = sb_enc_release (enc, &job->len))) {
            job->code = SB_E_internal;
            snprintf (job->message, sizeof job->message, "out of memory");
        }
    }
    else
    if (ws) {
        sb_enc_reset (enc);
        sb_exec_diff_encode (ws, self->data_dir [0] ? self->data_dir : NULL, job->sid, job->base [0] ? job->base : NULL,
                             enc);
        job->body = sb_enc_release (enc, &job->len);
        if (!job->body) {
            job->code = SB_E_internal;
            snprintf (job->message, sizeof job->message, "out of memory");
        }
    }
    else
    if (reply) {
        job->code = sb_err_from_name (sb_msg_error_code (reply));
        snprintf (job->message, sizeof job->message, "%s", sb_msg_error_message (reply));
    }
    else {
        job->code = SB_E_unavailable;
        snprintf (job->message, sizeof job->message, "the session actor did not answer");
    }
    sb_msg_destroy (&reply);
    sb_enc_destroy (&enc);
    sb_bus_destroy (&bus);
    pthread_mutex_lock (&self->lock);
    job->next = self->done;
    self->done = job;
    pthread_mutex_unlock (&self->lock);
    eventfd_write (self->fd, 1);
    atomic_fetch_sub (&self->running, 1);
    return NULL;
}

sb_exec_diffs_t *
sb_exec_diffs_new (const char *endpoint, const char *data_dir)
{
    sb_exec_diffs_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    snprintf (self->endpoint, sizeof self->endpoint, "%s", endpoint);
    snprintf (self->data_dir, sizeof self->data_dir, "%s", data_dir ? data_dir : "");
    pthread_mutex_init (&self->lock, NULL);
    atomic_init (&self->running, 0);
    self->fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (self->fd < 0) {
        free (self);
        return NULL;
    }
    return self;
}

void
sb_exec_diffs_destroy (sb_exec_diffs_t **self_p)
{
    sb_exec_diffs_t *self = *self_p;
    if (!self)
        return;
    /* a job ends within its session.get timeout and one git run */
    while (atomic_load (&self->running) > 0)
        usleep (10000);
    for (job_t *job = self->done; job; ) {
        job_t *next = job->next;
        s_job_free (job);
        job = next;
    }
    close (self->fd);
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

const char *
sb_exec_diffs_data_dir (sb_exec_diffs_t *self)
{
    return self->data_dir [0] ? self->data_dir : NULL;
}

int
sb_exec_diffs_fd (sb_exec_diffs_t *self)
{
    return self->fd;
}

void
sb_exec_diffs_start (sb_exec_diffs_t *self, sb_bus_t *bus, const sb_msg_t *req)
{
    if (atomic_load (&self->running) >= SB_EXEC_DIFF_JOBS_MAX) {
        sb_bus_error (bus, req, SB_E_overloaded, "%d diffs are being computed; ask again", SB_EXEC_DIFF_JOBS_MAX);
        return;
    }
    job_t *job = calloc (1, sizeof *job);
    const char *sid = sb_get_str (req->body, "session_id");
    if (!job || !sid || !(job->route = malloc (req->route_len ? req->route_len : 1))) {
        s_job_free (job);
        sb_bus_error (bus, req, SB_E_internal, "out of memory");
        return;
    }
    memcpy (job->route, req->route, req->route_len);
    job->route_len = req->route_len;
    job->h = req->h;
    job->owner = self;
    snprintf (job->sid, sizeof job->sid, "%s", sid);
    job->kind = strcmp (req->h.type, "exec.checkpoint_diff") == 0 ? S_CKPT_DIFF
              : strcmp (req->h.type, "exec.checkpoints") == 0 ? S_CKPT_LIST : S_DIFF;
    job->from_seq = sb_get_uint (req->body, "from_seq", 0);
    job->to_seq = sb_get_uint (req->body, "to_seq", 0);
    job->after_seq = sb_get_uint (req->body, "after_seq", 0);
    job->limit = sb_get_uint (req->body, "limit", SB_EXEC_CKPT_LIST_MAX);
    if (job->limit == 0 || job->limit > SB_EXEC_CKPT_LIST_MAX)
        job->limit = SB_EXEC_CKPT_LIST_MAX;
    const char *base = sb_get_str (req->body, "base");
    snprintf (job->base, sizeof job->base, "%s", base && strcmp (base, "head") == 0 ? "head"
                                                 : base && strcmp (base, "session") == 0 ? "session" : "");
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init (&attr);
    pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add (&self->running, 1);
    if (pthread_create (&t, &attr, s_job_main, job) != 0) {
        atomic_fetch_sub (&self->running, 1);
        s_job_free (job);
        sb_bus_error (bus, req, SB_E_internal, "cannot start a thread for the diff");
    }
    pthread_attr_destroy (&attr);
}

void
sb_exec_diffs_answer (sb_exec_diffs_t *self, sb_bus_t *bus)
{
    eventfd_t n;
    eventfd_read (self->fd, &n);
    pthread_mutex_lock (&self->lock);
    job_t *list = self->done;
    self->done = NULL;
    pthread_mutex_unlock (&self->lock);
    for (job_t *job = list; job; ) {
        job_t *next = job->next;
        sb_msg_t req = { .h = job->h, .route = job->route, .route_len = job->route_len };
        if (job->body)
            sb_bus_reply (bus, &req, job->body, job->len);
        else
            sb_bus_error (bus, &req, job->code, "%s", job->message);
        s_job_free (job);
        job = next;
    }
}
