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

#endif
