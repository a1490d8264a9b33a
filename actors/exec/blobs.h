/*  actors/exec/blobs.h — the images a run sends to the model, read by
    hash: from DATA/blobs when the run is on the control plane's host,
    else with blob.get over the bus (a worker: docs/images.md). */
#ifndef SB_EXEC_BLOBS_H
#define SB_EXEC_BLOBS_H

#include <stddef.h>
#include <stdint.h>

//  A sb_context_blob_fn (actors/exec/context.h) with arg the
//  sb_exec_run_t: the run's thread, its own bus socket.
uint8_t *sb_exec_blob_load (void *run, const char *sha256, size_t *len);

/*  Puts an image a tool read (view_image) for the run's session, and
    writes the key "images" with its reference into the open map of the
    tool.result entry. -1 when the store refused it (logged; the entry
    then goes without). The run's thread. */
typedef struct sb_enc sb_enc_t;
int sb_exec_blob_attach (void *run, const uint8_t *data, size_t len, const char *name, sb_enc_t *entry);

#endif
