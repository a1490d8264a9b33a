/*  actors/exec/context_impl.h — what the files of the context share.

    Not a public header: only actors/exec/context*.c include it.
      context.c          the context and its handlers, one per tape kind,
                         and the llm.stream encoding
      context_compact.c  compaction: applying context.compacted, planning
                         a cut, the summary request's messages, seeding
    The public interface is actors/exec/context.h.
*/
#ifndef SB_EXEC_CONTEXT_IMPL_H
#define SB_EXEC_CONTEXT_IMPL_H

#include "actors/exec/context.h"

#include <czmq.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef enum { S_USER, S_ASSISTANT, S_TOOL } s_role_t;

typedef struct {
    char *call_id;              //  unique in the context: what the model sees
    char *tape_id;              //  the id on the tape when it was not, else NULL
    char *name;
    char *arguments;            //  NULL: none (the provider sends {})
    bool answered;
} s_call_t;

//  An image of a user message: its blob, read when the request is
//  encoded (sb_context_set_blob_loader), never held here.
typedef struct {
    char sha256 [65];
    char mime [32];
    uint64_t bytes;
    uint64_t width, height;
    char desc [200];            //  the line compaction leaves in its place
} s_image_t;

typedef struct {
    s_role_t role;
    uint64_t seq;               //  the tape entry that made it (a tool message: its result)
    char *content;              //  NULL: none
    size_t content_len;
    s_call_t *calls;            //  assistant
    uint32_t ncalls, calls_cap;
    char *call_id;              //  tool: the call it answers
    char *state;                //  assistant: reasoning state, joined
    size_t state_len;
    uint32_t nstates;
    bool summary;               //  user: the summary of a compaction
    s_image_t *images;          //  user: the prompt's images (what models are sent)
    uint32_t nimages;
} s_msg_t;

struct sb_context {
    s_msg_t *msgs;
    size_t count, cap;
    //  Both are an index + 1, 0 for none. `open` is the assistant message
    //  that takes the current step's text, state and calls. `tail` is the
    //  last assistant message, closed by a result, that may still take
    //  calls of the same step (see the header).
    size_t open;
    size_t tail;
    size_t unanswered;
    uint64_t last_seq;
    uint64_t cur_seq;           //  the entry being fed
    size_t bytes;
    size_t max_bytes;
    zhashx_t *ids;              //  every call_id held, for uniqueness
    //  The conversation's cuts (sb_context_set_cuts): entries after
    //  cut_after [k] and before cut_before [k] are skipped.
    uint64_t cut_after [SB_CONTEXT_CUTS_MAX], cut_before [SB_CONTEXT_CUTS_MAX];
    size_t ncuts;
    sb_context_blob_fn *load_blob;
    void *load_arg;
};

//  What each message and call costs beyond its strings: map keys and
//  headers on the wire, and the synthetic answer a call may need.
#define S_MSG_COST   48
#define S_CALL_COST  (48 + sizeof SB_CONTEXT_INTERRUPTED)

//  What an image costs against the budget, which stands for tokens
//  (bytes / 4): a provider counts an image by its pixels, about one token
//  for 750 of them (Anthropic's rule; OpenAI's tiles come near), not by
//  its bytes. Its bytes are held apart (SB_CONTEXT_MAX_IMAGE_BYTES).
static inline size_t
s_image_cost (const s_image_t *im)
{
    uint64_t tokens = im->width * im->height / 750;
    return 48 + 4 * (size_t) (tokens < 85 ? 85 : tokens);
}

//  The image bytes a context holds, all messages together.
static inline uint64_t
s_image_bytes (const sb_context_t *ctx)
{
    uint64_t n = 0;
    for (size_t i = 0; i < ctx->count; i++)
        for (uint32_t k = 0; k < ctx->msgs [i].nimages; k++)
            n += ctx->msgs [i].images [k].bytes;
    return n;
}

//  Frees what a message holds (not the message itself).
static inline void
s_msg_free (s_msg_t *m)
{
    for (uint32_t k = 0; k < m->ncalls; k++) {
        free (m->calls [k].call_id);
        free (m->calls [k].tape_id);
        free (m->calls [k].name);
        free (m->calls [k].arguments);
    }
    free (m->calls);
    free (m->content);
    free (m->call_id);
    free (m->state);
    free (m->images);
}

//  Room for one more message; growing the array changes no message.
static inline int
s_reserve (sb_context_t *ctx)
{
    if (ctx->count < ctx->cap)
        return 0;
    size_t cap = ctx->cap ? ctx->cap * 2 : 16;
    s_msg_t *msgs = realloc (ctx->msgs, cap * sizeof *msgs);
    if (!msgs) {
        errno = ENOMEM;
        return -1;
    }
    ctx->msgs = msgs;
    ctx->cap = cap;
    return 0;
}

//  A string field with its length (msgpack strings may hold NULs).
static inline const char *
s_str (const sb_val_t *map, const char *key, size_t *len)
{
    const sb_val_t *v = sb_get (map, key);
    if (!v || v->type != SB_V_STR)
        return NULL;
    *len = v->len;
    return v->v.s;
}

//  Closes the current step: no later text, state or call joins it.
static inline void
s_close (sb_context_t *ctx)
{
    ctx->open = 0;
    ctx->tail = 0;
}

//  Writes a tool message for each call of the assistant message `asst`
//  that no result answered (context.c; the whole context and a head
//  range alike close their blocks so).
void sb_context_encode_interrupted (const s_msg_t *asst, sb_enc_t *enc);

#endif
