/*  actors/exec/changes.h — exec.diff: the changes in a session's workspace,
    for the UI's changes panel (docs/gateway.md); and exec.checkpoint_diff:
    the diff between two of the session's checkpoints, whose trees are in
    the workspace's object store or the shadow repository in DATA
    (docs/checkpoints.md); and exec.checkpoints, their list from the tape.
    All three are answered by the same jobs.

    git runs off the actor thread: each request gets a short-lived thread
    with its own bus socket (it asks session.get for the workspace), and
    hands its encoded answer back through a queue whose eventfd the actor
    polls; the actor thread sends the reply, as the broker wants it from
    the instance the request went to. */
#ifndef SB_EXEC_CHANGES_H
#define SB_EXEC_CHANGES_H

#include "bus/client.h"

#define SB_EXEC_DIFF_FILES_MAX   1000            /* files in one answer */
#define SB_EXEC_DIFF_FILE_MAX    (512u << 10)    /* diff bytes of one file */
#define SB_EXEC_DIFF_TOTAL_MAX   (4u << 20)      /* diff bytes of one answer */
#define SB_EXEC_DIFF_JOBS_MAX    8               /* diffs computed at once */
#define SB_EXEC_CKPT_LIST_MAX    1000            /* checkpoints in one exec.checkpoints answer */
#define SB_EXEC_CKPT_LIST_BYTES  (4u << 20)      /* and their bytes, past which the page ends */

typedef struct sb_exec_diffs sb_exec_diffs_t;

/*  endpoint: the command plane, for session.get; data_dir: left out of
    the diff when it lies inside a workspace (may be NULL). */
sb_exec_diffs_t *sb_exec_diffs_new (const char *endpoint, const char *data_dir);
/*  Waits for running jobs, drops unsent answers. */
void sb_exec_diffs_destroy (sb_exec_diffs_t **self_p);
/*  The data folder given to sb_exec_diffs_new, or NULL. */
const char *sb_exec_diffs_data_dir (sb_exec_diffs_t *self);
/*  Readable when answers are ready. */
int sb_exec_diffs_fd (sb_exec_diffs_t *self);
/*  Actor thread: starts a job for the request (copied), or answers
    `overloaded` when SB_EXEC_DIFF_JOBS_MAX are running. */
void sb_exec_diffs_start (sb_exec_diffs_t *self, sb_bus_t *bus, const sb_msg_t *req);
/*  Actor thread: sends every ready answer. */
void sb_exec_diffs_answer (sb_exec_diffs_t *self, sb_bus_t *bus);

/*  The exec.diff.ok body for `workspace`, appended to enc: the work tree,
    untracked files included, against `base`: "session" (the work tree as
    the session's first run found it), "head" (git HEAD), or NULL: the
    session's when it has one, else HEAD. The answer says which it used
    (`base`) and whether the session has one (`session_base`), and lists
    the files the session's agent wrote that show no change against it
    (`written`): a write is never hidden. Used by the jobs and the tests. */
void sb_exec_diff_encode (const char *workspace, const char *data_dir, const char *session_id, const char *base,
                          sb_enc_t *enc);

/*  Run thread, after a tool call succeeded: when it wrote a file
    (write_file, edit_file), notes its path among the session's writes,
    beside its baseline (at most SB_EXEC_DIFF_FILES_MAX paths). */
void sb_exec_diff_note_write (const char *workspace, const char *session_id, const char *tool,
                              const char *args_json);

/*  Run thread, as a run starts: saves the session's baseline unless it
    has one (common/git.h), so that the changes panel shows what the
    session's runs changed, not edits that were there before it. */
/*  The pathspec that leaves the server's DATA out of the workspace's
    files when it lies inside it (":(exclude)REL"), or "" in exclude. */
void sb_exec_diff_exclude (const char *workspace, const char *data_dir, char *exclude, size_t n);
void sb_exec_diff_baseline (const char *workspace, const char *data_dir, const char *session_id);

/*  Reads session `sid`'s tape after seq `after` over `bus` (session.events,
    a page of 5000 at a time, each call waiting at most timeout_ms) and
    gives each entry to fn, in seq order, until fn returns false or the
    tape ends. Returns 0, or -1 with the error in *code and why (n bytes):
    the error reply's, or unavailable when nothing answered. For
    exec.checkpoints, exec.checkpoint_diff and the rewind run. */
typedef bool (sb_exec_tape_fn) (const sb_val_t *ev, void *arg);
int sb_exec_tape_read (sb_bus_t *bus, const char *sid, uint64_t after, int timeout_ms, sb_exec_tape_fn *fn, void *arg,
                       sb_err_t *code, char *why, size_t n);

#endif
