/*  actors/session/queue_impl.h — what actors/session/queue.c (the queue's
    requests and what run.status means for it) and queue_store.c (its
    layout in DATA/session, its reads, starting the next prompt, startup)
    share. Not a public header; every function runs on the session actor's
    thread. docs/queue.md has the layout. */
#ifndef SB_SESSION_QUEUE_IMPL_H
#define SB_SESSION_QUEUE_IMPL_H

#include "actors/session/session_impl.h"

#define Q_BASE          ((uint64_t) 1 << 62)
//  The stored bytes of items one session.queue.list page holds at most
//  (past the first); its reply is bounded at 2 MiB, and one prompt's text
//  at 1 MiB.
#define Q_PAGE_BYTES    (768 * 1024)
#define REASON_MAX      1000
#define PROMPT_ID_MAX   40

typedef struct {
    bool paused;
    char reason [REASON_MAX + 1];
    uint64_t head, tail;        //  queue positions in use: [head, tail)
    uint64_t count;             //  prompts in the queue
    uint64_t bytes;             //  bytes of text in the queue and the steers
    uint64_t steer_next, steers;
} qmeta_t;

//  One prompt read out of the store, its strings in the drain's arena.
//  images: the references it carries (a msgpack array of the tape's
//  image references, docs/images.md), or NULL; len counts the text and
//  those bytes, as the queue's byte limit does.
typedef struct {
    const char *prompt_id, *text, *mode, *policy, *run_id;
    const uint8_t *images;
    size_t images_len;
    uint64_t created_at;
    size_t len;
} qitem_t;

//  The key of a session's queue record ('M'), or the prefix of its queue
//  ('Q') or steers ('W'): tag, then the session id.
void sb_queue_key (sb_key_t *k, char tag, const char *sid);
//  The session's queue state; an absent record is an empty, running queue.
void sb_queue_meta_load (sb_txn_t *txn, const char *sid, qmeta_t *m);
void sb_queue_meta_save (sb_txn_t *txn, const char *sid, const qmeta_t *m);
//  Writes one prompt under `tag` ('Q' or 'W') at `pos`.
void sb_queue_item_put (sb_txn_t *txn, char tag, const char *sid, uint64_t pos, const qitem_t *it);
//  A stored prompt into *it, its strings copied into the drain's arena.
bool sb_queue_item_read (self_t *self, const sb_datum_t *v, qitem_t *it);
//  Writes the prompt's images as the key "images" of the open map e
//  (nothing when it has none).
void sb_queue_item_images (sb_enc_t *e, const qitem_t *it);
//  Finds prompt `id` under `tag` and removes it: true with *out filled.
bool sb_queue_item_take (self_t *self, sb_txn_t *txn, char tag, const char *sid, const char *id, qitem_t *out);

#endif
