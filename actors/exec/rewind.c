/*  actors/exec/rewind.c — a rewind run: the work tree put back to a
    checkpoint (session.rewind, docs/checkpoints.md).

    A rewind is a run of its own kind, so the coordinator refuses it while
    another run of the session is active, and no step of another run can
    write the work tree while it is being put back. The run reads the
    tape, picks the latest checkpoint at or before the seq asked for,
    takes a checkpoint of the work tree as it is now (the undo's target),
    puts the chosen tree back through the private index
    (sb_ckpt_restore), and appends `session.rewound`: what it wrote back,
    what it removed, what it left alone, and the calls after that seq of
    tools that are not read-only, whose effects outside the workspace no
    rewind can take back. Nothing is deleted from the tape.

    The undo puts back the tree the session's last rewind found, unless a
    prompt was sent since: then the work of that prompt's run would be
    lost without a checkpoint of it being asked for. */
#include "actors/exec/agent.h"
#include "actors/exec/changes.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACTOR "exec"

#define SB_EXEC_REWIND_EFFECTS_MAX 256      /* effects listed in session.rewound */
#define S_TREE_MAX 64                       /* hex of a tree id, at most */

typedef struct {
    char call_id [129];
    char tool [65];
    uint64_t seq;
} s_effect_t;

//  What the tape says, read once from its start.
typedef struct {
    uint64_t first_ckpt;        /* seq_of of the session's first checkpoint; 0: none */
    uint64_t ckpt_seq;          /* seq_of of the chosen one */
    char tree [S_TREE_MAX + 1];
    char *keep [SB_CKPT_SKIPPED_MAX + 1];      /* its skipped files, NULL-terminated */
    size_t nkeep;
    uint64_t rewound_seq;       /* the last session.rewound; 0: none */
    char before [S_TREE_MAX + 1];              /* its tree_before */
    uint64_t prompt_after;      /* the seq of a prompt after it; 0: none */
    bool cut;                   /* it cut the conversation (and was no undo) */
    s_effect_t *effects;
    size_t neffects, effects_total;
    //  The paths the agent's steps changed after to_seq: every checkpoint
    //  after it but the first of each run, whose changes are the person's
    //  (made between runs). NULL-terminated; `all` when they cannot be
    //  told (a list cut at 256, too many): then the whole tree goes back.
    char **agent;
    size_t nagent, agent_cap;
    bool all;
    char last_run [SB_ULID_LEN + 8];            /* the run of the previous checkpoint */
} s_scan_t;

#define S_AGENT_PATHS_MAX 65536     /* paths told apart, at most: past them, the whole tree */

static void
s_scan_clear (s_scan_t *s)
{
    for (size_t k = 0; k < s->nkeep; k++)
        free (s->keep [k]);
    for (size_t k = 0; k < s->nagent; k++)
        free (s->agent [k]);
    free (s->agent);
    free (s->effects);
    memset (s, 0, sizeof *s);
}

static void
s_copy_tree (char *dst, const char *src)
{
    size_t n = src ? strlen (src) : 0;
    if (n > S_TREE_MAX || strspn (src ? src : "", "0123456789abcdef") != n)
        n = 0;
    memcpy (dst, n ? src : "", n);
    dst [n] = 0;
}

//  A checkpoint after to_seq: its changes are the agent's unless it is
//  its run's first (taken before the run's first step).
static void
s_take_changes (s_scan_t *s, const sb_val_t *body, const char *run_id)
{
    bool first_of_run = !run_id || strcmp (run_id, s->last_run) != 0;
    snprintf (s->last_run, sizeof s->last_run, "%s", run_id ? run_id : "");
    if (first_of_run || s->all)
        return;
    const sb_val_t *changed = sb_get_array (body, "changed");
    if (sb_get_bool (body, "truncated", false) || !changed) {
        s->all = true;
        return;
    }
    for (uint32_t k = 0; k < changed->len && !s->all; k++) {
        const char *p = sb_array_at (changed, k)->type == SB_V_STR ? sb_array_at (changed, k)->v.s : NULL;
        if (!p || strlen (p) > SB_CKPT_PATH_MAX)
            continue;
        if (s->nagent + 1 >= s->agent_cap) {
            size_t cap = s->agent_cap ? s->agent_cap * 2 : 256;
            char **a = cap <= S_AGENT_PATHS_MAX ? realloc (s->agent, cap * sizeof *a) : NULL;
            if (!a) {
                s->all = true;
                break;
            }
            s->agent = a;
            s->agent_cap = cap;
        }
        if (!(s->agent [s->nagent] = strdup (p)))
            s->all = true;
        else
            s->agent [++s->nagent] = NULL;
    }
}

static void
s_take_checkpoint (s_scan_t *s, const sb_val_t *body, uint64_t to_seq)
{
    uint64_t seq_of = sb_get_uint (body, "seq_of", 0);
    if (!s->first_ckpt || seq_of < s->first_ckpt)
        s->first_ckpt = seq_of;
    if (seq_of > to_seq || seq_of < s->ckpt_seq)
        return;
    s->ckpt_seq = seq_of;
    s_copy_tree (s->tree, sb_get_str (body, "tree"));
    for (size_t k = 0; k < s->nkeep; k++)
        free (s->keep [k]);
    s->nkeep = 0;
    const sb_val_t *skipped = sb_get_array (body, "skipped");
    for (uint32_t k = 0; skipped && k < skipped->len && s->nkeep < SB_CKPT_SKIPPED_MAX; k++) {
        const char *p = sb_get_str (sb_array_at (skipped, k), "path");
        if (p && strlen (p) <= SB_CKPT_PATH_MAX && (s->keep [s->nkeep] = strdup (p)))
            s->nkeep++;
    }
    s->keep [s->nkeep] = NULL;
}

//  A tool call after to_seq of a tool that is not read-only (MCP tools,
//  which the table does not know, count as writing).
static void
s_take_call (s_scan_t *s, const sb_val_t *body, uint64_t seq)
{
    const char *name = sb_get_str (body, "name"), *id = sb_get_str (body, "call_id");
    const sb_tool_def_t *def = name ? sb_tools_find (name) : NULL;
    if (!name || !id || (def && def->read_only))
        return;
    s->effects_total++;
    if (s->neffects >= SB_EXEC_REWIND_EFFECTS_MAX)
        return;
    if (!s->effects && !(s->effects = calloc (SB_EXEC_REWIND_EFFECTS_MAX, sizeof *s->effects)))
        return;
    s_effect_t *f = &s->effects [s->neffects++];
    snprintf (f->call_id, sizeof f->call_id, "%s", id);
    snprintf (f->tool, sizeof f->tool, "%s", name);
    f->seq = seq;
}

static void
s_take_entry (s_scan_t *s, const sb_val_t *ev, uint64_t to_seq)
{
    const char *kind = sb_get_str (ev, "kind");
    const sb_val_t *body = sb_get_map (ev, "body");
    uint64_t seq = sb_get_uint (ev, "seq", 0);
    if (!kind)
        return;
    if (strcmp (kind, "checkpoint") == 0) {
        s_take_checkpoint (s, body, to_seq);
        if (sb_get_uint (body, "seq_of", 0) > to_seq)
            s_take_changes (s, body, sb_get_str (body, "run_id"));
        else
            snprintf (s->last_run, sizeof s->last_run, "%s", sb_get_str (body, "run_id") ? sb_get_str (body, "run_id") : "");
    }
    else
    if (strcmp (kind, "tool.call") == 0 && seq > to_seq)
        s_take_call (s, body, seq);
    else
    if (strcmp (kind, "session.rewound") == 0) {
        s->rewound_seq = seq;
        s_copy_tree (s->before, sb_get_str (body, "tree_before"));
        s->prompt_after = 0;
        s->cut = sb_get_bool (body, "conversation", false) && !sb_get_bool (body, "undo", false);
    }
    else
    if (strcmp (kind, "prompt") == 0 && s->rewound_seq && !s->prompt_after)
        s->prompt_after = seq;
}

typedef struct {
    s_scan_t *scan;
    uint64_t to_seq;
} s_reader_t;

static bool
s_read_entry (const sb_val_t *ev, void *arg)
{
    s_reader_t *r = arg;
    s_take_entry (r->scan, ev, r->to_seq);
    return true;
}

//  Reads the whole tape (actors/exec/changes.h).
static int
s_scan (sb_exec_run_t *run, uint64_t to_seq, s_scan_t *s)
{
    s_reader_t r = { s, to_seq };
    sb_err_t code;
    char why [256];
    if (sb_exec_tape_read (run->bus, run->session_id, 0, SB_EXEC_CALL_MS, s_read_entry, &r, &code, why, sizeof why)
        != 0) {
        sb_exec_finish_with (run, "failed", "cannot read the tape: %s", why);
        return -1;
    }
    return 0;
}

static void
s_paths (sb_enc_t *e, const char *key, char *const *list, size_t n)
{
    sb_enc_key (e, key);
    sb_enc_array_open (e);
    for (size_t k = 0; k < n; k++)
        sb_enc_str (e, list [k]);
    sb_enc_array_close (e);
}

static void
s_encode (sb_enc_t *e, sb_exec_run_t *run, const s_scan_t *s, uint64_t to_seq, const char *before,
          const char *after, const sb_ckpt_restore_t *r, bool code, bool conversation)
{
    sb_enc_array_open (e);
    sb_exec_entry_open (e, "session.rewound");
    sb_enc_kuint (e, "to_seq", to_seq);
    if (run->undo)
        sb_enc_kbool (e, "undo", true);
    if (!code)
        sb_enc_kbool (e, "code", false);
    else {
        sb_enc_kuint (e, "checkpoint_seq", s->ckpt_seq);
        sb_enc_kstr (e, "tree_before", before);
        sb_enc_kstr (e, "tree_after", after);
    }
    if (conversation)
        sb_enc_kbool (e, "conversation", true);
    s_paths (e, "restored", r->restored, r->nrestored);
    sb_enc_kuint (e, "restored_total", r->restored_total);
    s_paths (e, "removed", r->removed, r->nremoved);
    sb_enc_kuint (e, "removed_total", r->removed_total);
    sb_enc_kbool (e, "truncated", r->restored_total > r->nrestored || r->removed_total > r->nremoved);
    sb_enc_key (e, "not_restored");
    sb_enc_array_open (e);
    size_t listed = 0;
    for (size_t k = 0; k < s->nkeep && listed < SB_CKPT_SKIPPED_MAX; k++, listed++) {
        sb_enc_map_open (e);
        sb_enc_kstr (e, "path", s->keep [k]);
        sb_enc_kstr (e, "why", "larger than max_file when the checkpoint was taken: it is in no tree");
        sb_enc_map_close (e);
    }
    for (size_t k = 0; k < r->nrefused && listed < SB_CKPT_SKIPPED_MAX; k++, listed++) {
        sb_enc_map_open (e);
        sb_enc_kstr (e, "path", r->refused [k]);
        sb_enc_kstr (e, "why", "made after the checkpoint, not removed: a symlink or `..` on its way, "
                     "or it is a folder now");
        sb_enc_map_close (e);
    }
    for (size_t k = 0; k < r->nleft && listed < SB_CKPT_SKIPPED_MAX; k++, listed++) {
        sb_enc_map_open (e);
        sb_enc_kstr (e, "path", r->left [k]);
        sb_enc_kstr (e, "why", "changed after the seq outside the agent's steps (the person's own edit): left as "
                     "it is");
        sb_enc_map_close (e);
    }
    sb_enc_array_close (e);
    sb_enc_key (e, "effects");
    sb_enc_array_open (e);
    for (size_t k = 0; k < s->neffects; k++) {
        sb_enc_map_open (e);
        sb_enc_kstr (e, "call_id", s->effects [k].call_id);
        sb_enc_kstr (e, "tool", s->effects [k].tool);
        sb_enc_kuint (e, "seq", s->effects [k].seq);
        sb_enc_map_close (e);
    }
    sb_enc_array_close (e);
    if (s->effects_total > s->neffects)
        sb_enc_kbool (e, "effects_truncated", true);
    sb_exec_entry_close (e);
    sb_enc_array_close (e);
}

//  What the rewind does, from the tape: *code, the tree to put back (the
//  chosen checkpoint's, or the undo's), and *conversation, whether the
//  model's context is cut at to_seq (an undo: whether the cut of the
//  rewind it undoes is lifted). False after the run was finished with
//  the reason.
static bool
s_plan (sb_exec_run_t *run, s_scan_t *s, uint64_t *to_seq, const char **tree, bool *conversation)
{
    *tree = NULL;
    *conversation = false;
    if (run->undo) {
        if (!s->rewound_seq || (!s->before [0] && !s->cut)) {
            sb_exec_finish_with (run, "failed", "invalid: the session has no rewind to undo");
            return false;
        }
        if (s->prompt_after) {
            sb_exec_finish_with (run, "failed", "conflict: a prompt was sent after the rewind at seq %" PRIu64
                                 " (at seq %" PRIu64 "); rewind to a checkpoint instead", s->rewound_seq,
                                 s->prompt_after);
            return false;
        }
        /* what the undone rewind found, with nothing of the checkpoint's
           skipped files to keep: the undo names a tree, not a checkpoint */
        for (size_t k = 0; k < s->nkeep; k++)
            free (s->keep [k]);
        s->nkeep = 0;
        s->keep [0] = NULL;
        s->neffects = s->effects_total = 0;
        s->ckpt_seq = s->rewound_seq;
        *to_seq = s->rewound_seq;
        *tree = s->before [0] ? s->before : NULL;
        *conversation = s->cut;
        return true;
    }
    *conversation = !run->no_conversation;
    if (run->no_code)
        return true;
    if (!s->first_ckpt) {
        sb_exec_finish_with (run, "failed", "invalid: the session has no checkpoint to rewind to");
        return false;
    }
    if (!s->ckpt_seq || !s->tree [0]) {
        sb_exec_finish_with (run, "failed", "invalid: seq %" PRIu64 " is before the session's first checkpoint; "
                             "the first valid seq is %" PRIu64, *to_seq, s->first_ckpt);
        return false;
    }
    *tree = s->tree;
    return true;
}

//  Puts the work tree back to `target`: the checkpoints before and after
//  in *before and *after, what was done in *r. 0, or -1 after the run was
//  finished with the reason.
static int
s_restore (sb_exec_run_t *run, s_scan_t *scan, uint64_t to_seq, const char *target, char *before, char *after,
           sb_ckpt_restore_t *r)
{
    char message [160], err [256] = "", dir [4200] = "", first [S_TREE_MAX + 1] = "", cur [S_TREE_MAX + 1];
    if (run->data_dir)
        snprintf (dir, sizeof dir, "%s/checkpoints", run->data_dir);
    snprintf (message, sizeof message, "before the rewind to seq %" PRIu64 " (run %s)", to_seq, run->run_id);
    //  A rewind started again after a crash (recovery queues it again:
    //  actors/run/lease.c) finds the work tree half put back; the tree its
    //  first attempt found is what an undo must give back.
    sb_ckpt_find (run->runtime->workspace, dir [0] ? dir : NULL, run->session_id, message, first, sizeof first);
    sb_ckpt_t now;
    int rc = sb_exec_checkpoint_take (run, message, &now, err, sizeof err);
    snprintf (cur, sizeof cur, "%s", now.tree);
    snprintf (before, S_TREE_MAX + 1, "%s", first [0] ? first : now.tree);
    sb_ckpt_clear (&now);
    if (rc != 0) {
        sb_exec_finish_with (run, "failed", "cannot take a checkpoint of the work tree first: %s", err);
        return -1;
    }
    if (first [0])
        sb_info (ACTOR, "rewind run=%s started again: the work tree before it was tree %s", run->run_id, first);
    //  Only what the agent's steps changed after to_seq goes back (an
    //  undo: the whole tree as the rewind found it); with no agent's
    //  change there is nothing to write, and the empty list says so.
    static const char *none [] = { NULL };
    const char **only = run->undo || scan->all ? NULL : scan->agent ? (const char **) scan->agent : none;
    rc = sb_ckpt_restore (run->runtime->workspace, dir [0] ? dir : NULL, run->session_id, target, cur,
                          (const char *const *) scan->keep, only, r, err, sizeof err);
    if (rc == 0) {
        snprintf (message, sizeof message, "after the rewind to seq %" PRIu64 " (run %s)", to_seq, run->run_id);
        sb_ckpt_t done;
        rc = sb_exec_checkpoint_take (run, message, &done, err, sizeof err);
        snprintf (after, S_TREE_MAX + 1, "%s", done.tree);
        sb_ckpt_clear (&done);
    }
    if (rc != 0)
        sb_exec_finish_with (run, "failed", "the rewind to seq %" PRIu64 " failed: %s (the work tree before it "
                             "is tree %s)", to_seq, err, before);
    return rc;
}

void
sb_exec_rewind_run (sb_exec_run_t *run)
{
    uint64_t to_seq = run->rewind_to;
    s_scan_t scan;
    memset (&scan, 0, sizeof scan);
    const char *target = NULL;
    bool conversation = false;
    if (s_scan (run, run->undo ? UINT64_MAX : to_seq, &scan) != 0
    || !s_plan (run, &scan, &to_seq, &target, &conversation)) {
        s_scan_clear (&scan);
        return;
    }
    char before [S_TREE_MAX + 1] = "", after [S_TREE_MAX + 1] = "";
    sb_ckpt_restore_t r;
    memset (&r, 0, sizeof r);
    int rc = target ? s_restore (run, &scan, to_seq, target, before, after, &r) : 0;
    if (rc == 0) {
        sb_enc_t *e = sb_enc_new ();
        if (e) {
            s_encode (e, run, &scan, to_seq, before, after, &r, target != NULL, conversation);
            rc = sb_exec_append (run, e);
        }
        sb_enc_destroy (&e);
        if (!run->status [0] && run->undo)
            sb_exec_finish_with (run, "completed", "rewind undone:%s%s", target ? " the work tree put back" : "",
                                 conversation ? (target ? ", the conversation's cut lifted" : " the conversation's "
                                                 "cut lifted") : "");
        else
        if (!run->status [0] && target)
            sb_exec_finish_with (run, "completed", "rewound to the checkpoint after seq %" PRIu64 ": %zu restored, "
                                 "%zu removed%s", scan.ckpt_seq, r.restored_total, r.removed_total,
                                 conversation ? "; the conversation ends at that seq too" : "");
        else
        if (!run->status [0])
            sb_exec_finish_with (run, "completed", "the conversation rewound to seq %" PRIu64 ": the next run's "
                                 "context ends there; the work tree is untouched", to_seq);
        sb_info (ACTOR, "rewind run=%s session=%s to=%" PRIu64 " tree=%s conversation=%d", run->run_id,
                 run->session_id, to_seq, target ? target : "-", conversation);
    }
    sb_ckpt_restore_clear (&r);
    s_scan_clear (&scan);
}
