/*  actors/run/run_impl.h — what the run actor's files share.

    Not a public header: only actors/run.c and the files of actors/run/ include it.
    The actor is split along its seams:
      run.c          the actor: its loop, its dispatch table, the requests
      run/record.c   the run record: encoding, decoding, reads of DATA/run
      run/outbox.c   writes: one transaction per change with its outbox
                     entry, the outbox flush, and the session's fence
      run/lease.c    claims, leases, expiry and recovery at startup
    Every function here runs on the actor's thread. */
#ifndef SB_RUN_IMPL_H
#define SB_RUN_IMPL_H

#include "actors/actor.h"
#include "actors/store.h"
#include "bus/client.h"
#include "common/log.h"
#include "schemas/errors.h"
#include "schemas/run_status.h"

#include <string.h>

#define ACTOR "run"
#define LEASE_MS 30000
#define CALL_MS 5000
#define DEFAULT_MAX_STEPS 50
#define DEFAULT_TIMEOUT_S 3600

/*  The dbis of DATA/run, in the order given to sb_store_open. */
enum { DBI_RUNS, DBI_ACTIVE, DBI_BYSESSION, DBI_OUTBOX, DBI_FENCES, DBI_COMMANDS };

typedef struct {
    char run_id [33];
    char session_id [33];
    sb_run_status_t status;
    char phase [32];
    char reason [1024];
    char resume_from [33];
    char owner [129];
    char approval_policy [16];
    char executor [16];
    char pool [64];
    char waiting_for [256];
    char kind [16];             /* "": a prompt's run; "compact": compaction only */
    char *input;
    uint64_t fence, created_at, updated_at, started_at, ended_at;
    uint64_t steps, input_tokens, output_tokens;
    uint64_t max_steps, timeout_s, max_output_tokens;
    bool cancel_requested;
} run_t;

typedef struct {
    int64_t expires;            /* mono ms */
    char phase [32];
    uint64_t steps, input_tokens, output_tokens;
} lease_t;

typedef struct {
    zsock_t *pipe;
    sb_bus_t *bus;
    sb_store_t *store;
    sb_enc_t *enc;
    char instance [129];
    zhashx_t *leases;           /* run_id -> lease_t */
    uint64_t outbox_next;
    int64_t next_tick;
    bool terminated;
} self_t;

static inline void
s_copy (char *dst, size_t n, const char *src)
{
    snprintf (dst, n, "%s", src ? src : "");
}

/*  run/record.c */
void sb_run_record_free (run_t *r);
/*  Encodes `limits` and the run's limits map (in the record and in
    exec.start alike). */
void sb_run_limits_encode (const run_t *r, sb_enc_t *e);
/*  Encodes the record as the wire shows it; a live lease gives the phase,
    the counters and lease_expires_at. */
void sb_run_record_encode (const run_t *r, const lease_t *lease, sb_enc_t *e);
/*  Reads run `run_id` into *r; 0, or -1 when absent or unreadable. The
    caller frees r with sb_run_record_free. */
int sb_run_record_load (self_t *self, const char *run_id, run_t *r);
/*  The ids of every unfinished run (one per session at most). The caller
    destroys the list. */
zlistx_t *sb_run_active_ids (self_t *self);
/*  The session's unfinished run into out [33]; 0, or -1 when it has none. */
int sb_run_active_run (self_t *self, const char *session_id, char *out);

/*  run/outbox.c */
/*  Persists a run change (and its tape entry when the status changed),
    then flushes the outbox. Returns 0 or a store error. */
int sb_run_save (self_t *self, run_t *r, bool is_new, bool status_changed, const char *prompt);
/*  Gives the run its session's next fence, persisted with it. */
int sb_run_save_new_fence (self_t *self, run_t *r);
/*  Moves the run to `status` in memory when the transition table
    (schemas/run_status.h) has the move; otherwise logs it, changes
    nothing and returns SB_E_conflict, so the caller writes nothing. */
sb_err_t sb_run_set_status (run_t *r, sb_run_status_t status, const char *reason);
/*  Sends pending tape appends in order. */
void sb_run_outbox_flush (self_t *self);
/*  Tells the session actor the run's fence; 0 once it has it. */
int sb_run_fence_session (self_t *self, run_t *r);

/*  run/lease.c */
/*  Hands a queued run to an executor (exec.start), or notes what it waits for. */
void sb_run_start (self_t *self, run_t *r);
/*  The same for every queued run. */
void sb_run_start_queued (self_t *self);
/*  Pushes exec.cancel to the instance that owns the run. */
void sb_run_push_cancel (self_t *self, const run_t *r);
void sb_run_expire_leases (self_t *self);
void sb_run_recover (self_t *self);

#endif
