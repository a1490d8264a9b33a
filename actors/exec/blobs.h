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

/*  Puts the bytes a tool read for the run's session, and writes their
    reference into the open map of the tool.result entry: "images" for
    view_image (description NULL), or "artifact" and "description" (when
    not empty) for attach_file. -1 when the store refused it (logged; the
    entry then goes without). The run's thread. */
typedef struct sb_enc sb_enc_t;
int sb_exec_blob_attach (void *run, const uint8_t *data, size_t len, const char *name, const char *description,
                         sb_enc_t *entry);

#endif
