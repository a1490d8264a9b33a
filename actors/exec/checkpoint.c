/*  actors/exec/checkpoint.c — the work tree recorded at step boundaries.

    Before a run's first step, and after each step that ran a tool that is
    not read-only (the shell included: whatever it changed is in the next
    tree, as it is in what a write_file wrote), the executor records the
    workspace as a git tree (common/git_checkpoint.h) and appends a
    `checkpoint` entry that names the tree, the step's last seq and the
    paths that changed since the previous one. The git work runs on the
    run's thread, between steps, where the run waits on nothing else.

    A checkpoint that cannot be taken (no git, a work tree too big, a
    full disk) is a warning, never a failed run: the agent's work matters
    more than the record of it. */
#include "actors/exec/agent.h"
#include "actors/exec/changes.h"
#include "common/git_checkpoint.h"
#include "common/log.h"
#include "schemas/vocab.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACTOR "exec"

int64_t
sb_exec_checkpoint_max_file (void)
{
    return sb_env_int (ACTOR, "SWITCHBOARD_CHECKPOINT_MAX_FILE", SB_CKPT_MAX_FILE_MIN, SB_CKPT_MAX_FILE_MAX,
                       SB_CKPT_MAX_FILE_DEFAULT);
}

static void
s_encode (sb_enc_t *e, const sb_exec_run_t *run, const sb_ckpt_t *c, int64_t ms)
{
    sb_enc_array_open (e);
    sb_exec_entry_open (e, "checkpoint");
    sb_enc_kuint (e, "seq_of", run->last_seq);
    sb_enc_kstr (e, "run_id", run->run_id);
    sb_enc_kstr (e, "tree", c->tree);
    sb_enc_kstr (e, "commit", c->commit);
    sb_enc_kstr (e, "store", sb_ckpt_store_name (c->shadow ? SB_CKPT_SHADOW : SB_CKPT_REPOSITORY));
    sb_enc_kbool (e, "first", c->first);
    sb_enc_key (e, "changed");
    sb_enc_array_open (e);
    for (size_t k = 0; k < c->nchanged; k++)
        sb_enc_str (e, c->changed [k]);
    sb_enc_array_close (e);
    sb_enc_kuint (e, "files", c->changed_total);
    sb_enc_kbool (e, "truncated", c->changed_total > c->nchanged);
    sb_enc_key (e, "skipped");
    sb_enc_array_open (e);
    for (size_t k = 0; k < c->nskipped; k++) {
        sb_enc_map_open (e);
        sb_enc_kstr (e, "path", c->skipped [k].path);
        sb_enc_kuint (e, "size", (uint64_t) c->skipped [k].size);
        if (c->skipped [k].hash [0])
            sb_enc_kstr (e, "blake2b", c->skipped [k].hash);
        sb_enc_map_close (e);
    }
    sb_enc_array_close (e);
    if (c->skipped_total > c->nskipped)
        sb_enc_kbool (e, "skipped_truncated", true);
    sb_enc_kuint (e, "max_file", (uint64_t) run->ckpt_max_file);
    sb_enc_kuint (e, "duration_ms", (uint64_t) (ms > 0 ? ms : 0));
    sb_exec_entry_close (e);
    sb_enc_array_close (e);
}

int
sb_exec_checkpoint_take (sb_exec_run_t *run, const char *message, sb_ckpt_t *c, char *err, size_t errlen)
{
    memset (c, 0, sizeof *c);
    const char *ws = run->runtime ? run->runtime->workspace : NULL;
    if (!ws) {
        snprintf (err, errlen, "the run has no workspace");
        return -1;
    }
    if (!run->ckpt_max_file)
        run->ckpt_max_file = sb_exec_checkpoint_max_file ();
    char dir [4200] = "", exclude [4300];
    if (run->data_dir)
        snprintf (dir, sizeof dir, "%s/checkpoints", run->data_dir);
    sb_exec_diff_exclude (ws, run->data_dir, exclude, sizeof exclude);
    return sb_ckpt_take (ws, dir [0] ? dir : NULL, run->session_id, exclude, run->ckpt_max_file, message,
                         c, err, errlen);
}

void
sb_exec_checkpoint (sb_exec_run_t *run)
{
    run->touched = false;
    const char *ws = run->runtime ? run->runtime->workspace : NULL;
    if (!ws || atomic_load (&run->lost) || atomic_load (&run->shutdown))
        return;
    char message [160], err [256] = "";
    snprintf (message, sizeof message, "checkpoint after seq %" PRIu64 " of run %s", run->last_seq, run->run_id);
    int64_t t0 = sb_mono_ms ();
    sb_ckpt_t c;
    int rc = sb_exec_checkpoint_take (run, message, &c, err, sizeof err);
    int64_t ms = sb_mono_ms () - t0;
    if (rc != 0)
        sb_warn (ACTOR, "no checkpoint run=%s session=%s: %s", run->run_id, run->session_id, err);
    else {
        sb_enc_t *e = sb_enc_new ();
        if (e) {
            s_encode (e, run, &c, ms);
            sb_exec_append (run, e);
        }
        sb_enc_destroy (&e);
        sb_debug (ACTOR, "checkpoint run=%s tree=%s files=%zu ms=%" PRId64, run->run_id, c.tree,
                  c.changed_total, ms);
    }
    sb_ckpt_clear (&c);
}
