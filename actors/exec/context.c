/*  actors/exec/context.c — the model's context, built from a session's tape.

    Messages are held in one array in the order they are encoded. Each
    handler below checks its bounds and makes every allocation it needs
    before it changes anything, so a refused entry leaves the context as
    it was.
*/
#include "actors/exec/context.h"

#include <czmq.h>
#include <errno.h>
#include <stdbool.h>
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
};

//  What each message and call costs beyond its strings: map keys and
//  headers on the wire, and the synthetic answer a call may need.
#define S_MSG_COST   48
#define S_CALL_COST  (48 + sizeof SB_CONTEXT_INTERRUPTED)

sb_context_t *
sb_context_new (void)
{
    sb_context_t *ctx = calloc (1, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->max_bytes = SB_CONTEXT_MAX_BYTES;
    ctx->ids = zhashx_new ();
    if (!ctx->ids) {
        free (ctx);
        return NULL;
    }
    return ctx;
}

static void
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
}

void
sb_context_destroy (sb_context_t **ctx_p)
{
    if (!ctx_p || !*ctx_p)
        return;
    sb_context_t *ctx = *ctx_p;
    for (size_t k = 0; k < ctx->count; k++)
        s_msg_free (&ctx->msgs [k]);
    free (ctx->msgs);
    zhashx_destroy (&ctx->ids);
    free (ctx);
    *ctx_p = NULL;
}

void
sb_context_set_max_bytes (sb_context_t *ctx, size_t max_bytes)
{
    ctx->max_bytes = max_bytes ? max_bytes : SB_CONTEXT_MAX_BYTES;
}

uint64_t
sb_context_last_seq (const sb_context_t *ctx)
{
    return ctx->last_seq;
}

size_t
sb_context_count (const sb_context_t *ctx)
{
    return ctx->count + ctx->unanswered;
}

size_t
sb_context_bytes (const sb_context_t *ctx)
{
    return ctx->bytes;
}

bool
sb_context_has_call_id (const sb_context_t *ctx, const char *call_id)
{
    return call_id && zhashx_lookup (ctx->ids, call_id) != NULL;
}

//  ---------------------------------------------------------------------------
//  Bounds and allocation, before anything changes

//  The byte budget and the llm.stream message count, for an entry that
//  adds `bytes`, `msgs` held messages and `calls` calls that may each need
//  a synthetic answer.
static int
s_check (const sb_context_t *ctx, size_t bytes, size_t msgs, size_t calls)
{
    if (bytes > ctx->max_bytes || ctx->bytes > ctx->max_bytes - bytes
        || ctx->count + ctx->unanswered + msgs + calls > SB_CONTEXT_MAX_MESSAGES) {
        errno = E2BIG;
        return -1;
    }
    return 0;
}

//  Room for one more message; growing the array changes no message.
static int
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

static char *
s_dup (const char *s, size_t len)
{
    char *copy = malloc (len + 1);
    if (!copy) {
        errno = ENOMEM;
        return NULL;
    }
    memcpy (copy, s, len);
    copy [len] = 0;
    return copy;
}

//  The id a call is given in the context: the tape's when no other call
//  holds it, else the tape's with _2, _3... (the first free one). Some
//  local servers send call_0 at every turn, and every provider refuses a
//  conversation that repeats an id, so a repeat on the tape would fail
//  every later request of the session. Returns a new string, NULL when
//  out of memory; *renamed says whether it differs from the tape's.
static char *
s_unique_id (const sb_context_t *ctx, const char *tape_id, size_t idlen, bool *renamed)
{
    *renamed = idlen == 0 || memchr (tape_id, 0, idlen) || zhashx_lookup (ctx->ids, tape_id);
    if (!*renamed)
        return s_dup (tape_id, idlen);
    //  The base is cut so that the id stays within the tape's 128 bytes.
    const char *base = idlen && !memchr (tape_id, 0, idlen) ? tape_id : "call";
    char id [128];
    for (unsigned n = 2; ; n++) {
        snprintf (id, sizeof id, "%.100s_%u", base, n);
        if (!zhashx_lookup (ctx->ids, id))
            return s_dup (id, strlen (id));
    }
}

//  A string field with its length (msgpack strings may hold NULs).
static const char *
s_str (const sb_val_t *map, const char *key, size_t *len)
{
    const sb_val_t *v = sb_get (map, key);
    if (!v || v->type != SB_V_STR)
        return NULL;
    *len = v->len;
    return v->v.s;
}

//  Appends a blank message; s_reserve must have succeeded.
static s_msg_t *
s_push (sb_context_t *ctx, s_role_t role)
{
    s_msg_t *m = &ctx->msgs [ctx->count++];
    memset (m, 0, sizeof *m);
    m->role = role;
    m->seq = ctx->cur_seq;
    ctx->bytes += S_MSG_COST;
    return m;
}

//  The open assistant message, opening one if needed (checks done).
static s_msg_t *
s_assistant (sb_context_t *ctx)
{
    if (!ctx->open) {
        s_push (ctx, S_ASSISTANT);
        ctx->open = ctx->count;
    }
    return &ctx->msgs [ctx->open - 1];
}

static void
s_close (sb_context_t *ctx)
{
    ctx->open = 0;
    ctx->tail = 0;
}

//  ---------------------------------------------------------------------------
//  One handler per kind

static int
s_on_prompt (sb_context_t *ctx, const sb_val_t *body)
{
    size_t len = 0;
    const char *text = s_str (body, "text", &len);
    if (!text) {
        errno = EINVAL;
        return -1;
    }
    if (len > SB_CONTEXT_MAX_TEXT || s_check (ctx, S_MSG_COST + len, 1, 0)) {
        errno = E2BIG;
        return -1;
    }
    char *copy;
    if (s_reserve (ctx) || !(copy = s_dup (text, len)))
        return -1;
    s_close (ctx);
    s_msg_t *m = s_push (ctx, S_USER);
    m->content = copy;
    m->content_len = len;
    ctx->bytes += len;
    return 0;
}

//  Text of the current step. Several pieces are one text, split by the
//  executor to fit tape entries, so they are joined with nothing between.
static int
s_on_text_done (sb_context_t *ctx, const sb_val_t *body)
{
    size_t len = 0;
    const char *text = s_str (body, "text", &len);
    if (!text) {
        errno = EINVAL;
        return -1;
    }
    //  A new model call has answered: no later call joins an older step.
    ctx->tail = 0;
    //  An empty text would be an empty content block, which Anthropic
    //  refuses.
    if (len == 0)
        return 0;
    s_msg_t *cur = ctx->open ? &ctx->msgs [ctx->open - 1] : NULL;
    size_t have = cur ? cur->content_len : 0;
    if (len > SB_CONTEXT_MAX_TEXT - have
        || s_check (ctx, len + (cur ? 0 : S_MSG_COST), cur ? 0 : 1, 0)) {
        errno = E2BIG;
        return -1;
    }
    if (!cur && s_reserve (ctx))
        return -1;
    char *content = realloc (cur ? cur->content : NULL, have + len + 1);
    if (!content) {
        errno = ENOMEM;
        return -1;
    }
    memcpy (content + have, text, len);
    content [have + len] = 0;
    cur = s_assistant (ctx);
    cur->content = content;
    cur->content_len = have + len;
    ctx->bytes += len;
    return 0;
}

//  The part of a JSON text inside its outer brackets when it is an array,
//  else the whole (trimmed) text: what goes between "[" and "]" when
//  several states are joined.
static bool
s_space (char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static void
s_inner (const char *s, size_t len, const char **out, size_t *outlen)
{
    while (len && s_space (*s)) {
        s++;
        len--;
    }
    while (len && s_space (s [len - 1]))
        len--;
    if (len >= 2 && s [0] == '[' && s [len - 1] == ']') {
        s_inner (s + 1, len - 2, out, outlen);
        return;
    }
    *out = s;
    *outlen = len;
}

static int
s_on_reasoning (sb_context_t *ctx, const sb_val_t *body)
{
    size_t len = 0;
    const char *data = s_str (body, "data", &len);
    if (!data) {
        errno = EINVAL;
        return -1;
    }
    ctx->tail = 0;
    if (len == 0)
        return 0;
    s_msg_t *cur = ctx->open ? &ctx->msgs [ctx->open - 1] : NULL;

    //  One state is given back verbatim; several as one array of their
    //  objects (a state that is itself an array is spliced in).
    char *state;
    size_t state_len;
    if (!cur || cur->nstates == 0) {
        state_len = len;
        if (state_len > SB_CONTEXT_MAX_TEXT
            || s_check (ctx, state_len + (cur ? 0 : S_MSG_COST), cur ? 0 : 1, 0)) {
            errno = E2BIG;
            return -1;
        }
        if ((!cur && s_reserve (ctx)) || !(state = s_dup (data, len)))
            return -1;
    }
    else {
        const char *a, *b;
        size_t alen, blen;
        s_inner (cur->state, cur->state_len, &a, &alen);
        s_inner (data, len, &b, &blen);
        bool comma = alen && blen;
        state_len = 2 + alen + comma + blen;
        if (state_len > SB_CONTEXT_MAX_TEXT
            || (state_len > cur->state_len
                && s_check (ctx, state_len - cur->state_len, 0, 0))) {
            errno = E2BIG;
            return -1;
        }
        if (!(state = malloc (state_len + 1))) {
            errno = ENOMEM;
            return -1;
        }
        char *p = state;
        *p++ = '[';
        memcpy (p, a, alen);
        p += alen;
        if (comma)
            *p++ = ',';
        memcpy (p, b, blen);
        p += blen;
        *p++ = ']';
        *p = 0;
    }
    cur = s_assistant (ctx);
    ctx->bytes = ctx->bytes - cur->state_len + state_len;
    free (cur->state);
    cur->state = state;
    cur->state_len = state_len;
    cur->nstates++;
    return 0;
}

static int
s_on_tool_call (sb_context_t *ctx, const sb_val_t *body)
{
    size_t idlen = 0, namelen = 0, arglen = 0;
    const char *call_id = s_str (body, "call_id", &idlen);
    const char *name = s_str (body, "name", &namelen);
    const char *arguments = s_str (body, "arguments", &arglen);
    if (!call_id || !name) {
        errno = EINVAL;
        return -1;
    }
    //  A call without a name is kept, so that its result still pairs
    //  with it, under a name no tool has.
    if (!*name) {
        name = "unknown_tool";
        namelen = strlen (name);
    }
    bool renamed;
    char *unique = s_unique_id (ctx, call_id, idlen, &renamed);
    if (!unique)
        return -1;
    size_t uniqlen = strlen (unique);
    size_t target = ctx->open ? ctx->open : ctx->tail;
    s_msg_t *cur = target ? &ctx->msgs [target - 1] : NULL;
    size_t cost = S_CALL_COST + uniqlen + (renamed ? idlen : 0) + namelen + arglen;
    if ((cur && cur->ncalls >= SB_CONTEXT_MAX_CALLS)
        || s_check (ctx, cost + (cur ? 0 : S_MSG_COST), cur ? 0 : 1, 1)) {
        free (unique);
        errno = E2BIG;
        return -1;
    }
    if (!cur && s_reserve (ctx)) {
        free (unique);
        return -1;
    }
    s_call_t *calls = cur ? cur->calls : NULL;
    uint32_t ncalls = cur ? cur->ncalls : 0;
    uint32_t calls_cap = cur ? cur->calls_cap : 0;
    if (ncalls == calls_cap) {
        calls_cap = calls_cap ? calls_cap * 2 : 4;
        calls = realloc (calls, calls_cap * sizeof *calls);
        if (!calls) {
            free (unique);
            errno = ENOMEM;
            return -1;
        }
        //  The array moved but holds the same calls: keep it even if a
        //  copy below fails.
        if (cur) {
            cur->calls = calls;
            cur->calls_cap = calls_cap;
        }
    }
    s_call_t call = {
        .call_id = unique,
        .tape_id = renamed ? s_dup (call_id, idlen) : NULL,
        .name = s_dup (name, namelen),
        .arguments = arguments ? s_dup (arguments, arglen) : NULL
    };
    if (!call.name || (arguments && !call.arguments) || (renamed && !call.tape_id)
        || zhashx_insert (ctx->ids, call.call_id, (void *) 1) != 0) {
        free (call.call_id);
        free (call.tape_id);
        free (call.name);
        free (call.arguments);
        if (!cur)
            free (calls);
        errno = ENOMEM;
        return -1;
    }
    if (!cur)
        cur = s_assistant (ctx);
    cur->calls = calls;
    cur->calls_cap = calls_cap;
    cur->calls [cur->ncalls++] = call;
    ctx->unanswered++;
    ctx->bytes += cost;
    return 0;
}

static int
s_on_tool_result (sb_context_t *ctx, const sb_val_t *body)
{
    size_t idlen = 0, outlen = 0;
    const char *call_id = s_str (body, "call_id", &idlen);
    const char *output = s_str (body, "output", &outlen);
    const sb_val_t *okv = sb_get (body, "ok");
    if (!call_id || !okv || okv->type != SB_V_BOOL) {
        errno = EINVAL;
        return -1;
    }
    bool ok = okv->v.b;

    //  The unanswered call with this id on the tape in the newest step
    //  that has one, and the first of them in that step: a simple model
    //  may reuse "call_1" from one step to the next, and even within one
    //  step, whose results then come in the order of its calls.
    size_t owner = 0;
    s_call_t *call = NULL;
    for (size_t i = ctx->count; i > 0 && !call; i--) {
        s_msg_t *m = &ctx->msgs [i - 1];
        if (m->role != S_ASSISTANT)
            continue;
        for (uint32_t k = 0; k < m->ncalls; k++) {
            const s_call_t *c = &m->calls [k];
            const char *id = c->tape_id ? c->tape_id : c->call_id;
            if (!c->answered && strlen (id) == idlen && memcmp (id, call_id, idlen) == 0) {
                call = &m->calls [k];
                owner = i;
                break;
            }
        }
    }
    if (!call) {
        //  A result for no call we hold (a second result, or a tape that
        //  starts mid-step): an orphan tool message is refused by every
        //  provider, so it is left out.
        s_close (ctx);
        return 0;
    }

    static const char prefix [] = "error: ";
    size_t plen = ok ? 0 : sizeof prefix - 1;
    size_t len = plen + outlen;
    size_t cost = S_MSG_COST + len + strlen (call->call_id);
    //  The message replaces the call's synthetic answer: no new count.
    if (len > SB_CONTEXT_MAX_TEXT || s_check (ctx, cost, 0, 0)) {
        errno = E2BIG;
        return -1;
    }
    if (s_reserve (ctx))
        return -1;
    char *content = malloc (len + 1);
    char *id = s_dup (call->call_id, strlen (call->call_id));
    if (!content || !id) {
        free (content);
        free (id);
        errno = ENOMEM;
        return -1;
    }
    memcpy (content, prefix, plen);
    if (outlen)
        memcpy (content + plen, output, outlen);
    content [len] = 0;

    //  After the results already given for the same assistant message.
    size_t at = owner;
    while (at < ctx->count && ctx->msgs [at].role == S_TOOL)
        at++;
    memmove (&ctx->msgs [at + 1], &ctx->msgs [at], (ctx->count - at) * sizeof *ctx->msgs);
    s_msg_t *m = &ctx->msgs [at];
    memset (m, 0, sizeof *m);
    m->role = S_TOOL;
    m->seq = ctx->cur_seq;
    m->call_id = id;
    m->content = content;
    m->content_len = len;
    ctx->count++;
    ctx->bytes += cost;
    call->answered = true;
    ctx->unanswered--;

    s_close (ctx);
    //  A result at the end of the conversation keeps its step open to
    //  further calls (one step may interleave calls and results). A late
    //  result, placed before later messages, does not.
    if (at + 1 == ctx->count)
        ctx->tail = owner;
    return 0;
}

//  ---------------------------------------------------------------------------

int
sb_context_add (sb_context_t *ctx, const sb_val_t *event)
{
    const sb_val_t *seqv = sb_get (event, "seq");
    const char *kind = sb_get_str (event, "kind");
    if (!seqv || seqv->type != SB_V_UINT || !kind) {
        errno = EINVAL;
        return -1;
    }
    uint64_t seq = seqv->v.u;
    if (seq <= ctx->last_seq)
        return 0;
    const sb_val_t *body = sb_get_map (event, "body");
    ctx->cur_seq = seq;

    int rc = 0;
    //  A steer joins the conversation as the person's words, where it
    //  was taken (docs/queue.md).
    if (strcmp (kind, "prompt") == 0 || strcmp (kind, "prompt.steered") == 0)
        rc = s_on_prompt (ctx, body);
    else
    if (strcmp (kind, "text.done") == 0)
        rc = s_on_text_done (ctx, body);
    else
    if (strcmp (kind, "reasoning.state") == 0)
        rc = s_on_reasoning (ctx, body);
    else
    if (strcmp (kind, "tool.call") == 0)
        rc = s_on_tool_call (ctx, body);
    else
    if (strcmp (kind, "tool.result") == 0)
        rc = s_on_tool_result (ctx, body);
    else
    if (strcmp (kind, "turn.begin") == 0 || strcmp (kind, "turn.end") == 0)
        s_close (ctx);
    else
    if (strcmp (kind, "context.compacted") == 0)
        rc = sb_context_compact_apply (ctx, body);
    else
    //  Usage is appended once per model call: a call after it belongs to
    //  a new step.
    if (strcmp (kind, "usage") == 0)
        ctx->tail = 0;

    if (rc == 0)
        ctx->last_seq = seq;
    return rc;
}

//  ---------------------------------------------------------------------------

static void
s_encode_msg (const s_msg_t *m, sb_enc_t *enc)
{
    sb_enc_map_open (enc);
    switch (m->role) {
        case S_USER:
            sb_enc_kstr (enc, "role", "user");
            sb_enc_key (enc, "content");
            sb_enc_strn (enc, m->content, m->content_len);
            break;
        case S_ASSISTANT:
            sb_enc_kstr (enc, "role", "assistant");
            if (m->content) {
                sb_enc_key (enc, "content");
                sb_enc_strn (enc, m->content, m->content_len);
            }
            if (m->ncalls) {
                sb_enc_key (enc, "tool_calls");
                sb_enc_array_open (enc);
                for (uint32_t k = 0; k < m->ncalls; k++) {
                    sb_enc_map_open (enc);
                    sb_enc_kstr (enc, "call_id", m->calls [k].call_id);
                    sb_enc_kstr (enc, "name", m->calls [k].name);
                    sb_enc_kstr_opt (enc, "arguments", m->calls [k].arguments);
                    sb_enc_map_close (enc);
                }
                sb_enc_array_close (enc);
            }
            if (m->state) {
                sb_enc_key (enc, "reasoning_state");
                sb_enc_strn (enc, m->state, m->state_len);
            }
            break;
        case S_TOOL:
            sb_enc_kstr (enc, "role", "tool");
            sb_enc_kstr (enc, "call_id", m->call_id);
            sb_enc_key (enc, "content");
            sb_enc_strn (enc, m->content, m->content_len);
            break;
    }
    sb_enc_map_close (enc);
}

void
sb_context_encode (const sb_context_t *ctx, sb_enc_t *enc)
{
    sb_enc_array_open (enc);
    //  The assistant message whose block of tool messages is being
    //  written; its unanswered calls are closed at the end of the block.
    const s_msg_t *asst = NULL;
    for (size_t i = 0; i < ctx->count; i++) {
        const s_msg_t *m = &ctx->msgs [i];
        s_encode_msg (m, enc);
        if (m->role == S_ASSISTANT)
            asst = m;
        if (m->role == S_USER || !asst)
            continue;
        if (i + 1 < ctx->count && ctx->msgs [i + 1].role == S_TOOL)
            continue;
        for (uint32_t k = 0; k < asst->ncalls; k++) {
            if (asst->calls [k].answered)
                continue;
            sb_enc_map_open (enc);
            sb_enc_kstr (enc, "role", "tool");
            sb_enc_kstr (enc, "call_id", asst->calls [k].call_id);
            sb_enc_kstr (enc, "content", SB_CONTEXT_INTERRUPTED);
            sb_enc_map_close (enc);
        }
        asst = NULL;
    }
    sb_enc_array_close (enc);
}

size_t
sb_context_unanswered (const sb_context_t *ctx, const char **call_ids,
                       const char **names, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < ctx->count; i++) {
        const s_msg_t *m = &ctx->msgs [i];
        for (uint32_t k = 0; k < m->ncalls; k++) {
            if (m->calls [k].answered)
                continue;
            if (n < max) {
                if (call_ids)
                    call_ids [n] = m->calls [k].tape_id ? m->calls [k].tape_id : m->calls [k].call_id;
                if (names)
                    names [n] = m->calls [k].name;
            }
            n++;
        }
    }
    return n;
}

//  ---------------------------------------------------------------------------
//  Compaction (docs/compaction.md)
//
//  A context.compacted entry names a cut by its through_seq: the messages
//  before the first user or assistant message whose seq is above it. User
//  and assistant messages are held in tape order, and tool messages sit
//  in the block of their assistant message, so the cut never parts a call
//  from its output, and the same tape gives the same cut on every replay.

//  What a message costs against the budget, as the handlers above count.
static size_t
s_msg_bytes (const s_msg_t *m)
{
    size_t b = S_MSG_COST + m->content_len + m->state_len;
    if (m->role == S_TOOL && m->call_id)
        b += strlen (m->call_id);
    for (uint32_t k = 0; k < m->ncalls; k++) {
        const s_call_t *c = &m->calls [k];
        b += S_CALL_COST + strlen (c->call_id) + (c->tape_id ? strlen (c->tape_id) : 0)
           + strlen (c->name) + (c->arguments ? strlen (c->arguments) : 0);
    }
    return b;
}

static void
s_recount (sb_context_t *ctx)
{
    ctx->bytes = 0;
    ctx->unanswered = 0;
    for (size_t i = 0; i < ctx->count; i++) {
        ctx->bytes += s_msg_bytes (&ctx->msgs [i]);
        for (uint32_t k = 0; k < ctx->msgs [i].ncalls; k++)
            ctx->unanswered += !ctx->msgs [i].calls [k].answered;
    }
}

static size_t
s_cut_index (const sb_context_t *ctx, uint64_t through_seq)
{
    for (size_t i = 0; i < ctx->count; i++)
        if (ctx->msgs [i].role != S_TOOL && ctx->msgs [i].seq > through_seq)
            return i;
    return ctx->count;
}

//  Bytes to keep of a UTF-8 text's head (n at most) and tail (n at most),
//  each cut on a sequence boundary.
static size_t
s_utf8_head (const char *s, size_t len, size_t n)
{
    if (n >= len)
        return len;
    while (n > 0 && ((unsigned char) s [n] & 0xC0) == 0x80)
        n--;
    return n;
}

static size_t
s_utf8_tail (const char *s, size_t len, size_t n)
{
    if (n >= len)
        return len;
    size_t at = len - n;
    while (at < len && ((unsigned char) s [at] & 0xC0) == 0x80)
        at++;
    return len - at;
}

//  The text cut to its head and tail with a note of what went between, in
//  a new string (NULL when out of memory); *outlen its length. The text
//  must be longer than head + tail.
static char *
s_clip (const char *text, size_t len, size_t head, size_t tail, size_t *outlen)
{
    size_t h = s_utf8_head (text, len, head);
    size_t t = s_utf8_tail (text, len, tail);
    char note [160];
    int n = snprintf (note, sizeof note, "\n[... %zu bytes elided to fit the model's context window ...]\n",
                      len - h - t);
    char *out = malloc (h + (size_t) n + t + 1);
    if (!out)
        return NULL;
    memcpy (out, text, h);
    memcpy (out + h, note, (size_t) n);
    memcpy (out + h + n, text + len - t, t);
    *outlen = h + (size_t) n + t;
    out [*outlen] = 0;
    return out;
}

//  The length a tool output has once elided.
static size_t
s_elided_len (size_t len)
{
    return len > SB_CONTEXT_ELIDE_MIN ? SB_CONTEXT_ELIDE_HEAD + SB_CONTEXT_ELIDE_TAIL + 72 : len;
}

static int
s_apply_elide (sb_context_t *ctx, size_t cut)
{
    for (size_t i = 0; i < cut; i++) {
        s_msg_t *m = &ctx->msgs [i];
        if (m->role != S_TOOL || m->content_len <= SB_CONTEXT_ELIDE_MIN)
            continue;
        size_t len;
        char *clipped = s_clip (m->content, m->content_len, SB_CONTEXT_ELIDE_HEAD,
                                SB_CONTEXT_ELIDE_TAIL, &len);
        if (!clipped) {
            errno = ENOMEM;
            return -1;          //  what is elided so far stays elided: still a valid context
        }
        free (m->content);
        m->content = clipped;
        m->content_len = len;
    }
    s_recount (ctx);
    return 0;
}

static int
s_apply_summary (sb_context_t *ctx, size_t cut, uint64_t through_seq, const char *summary, size_t slen)
{
    static const char prefix [] = SB_CONTEXT_SUMMARY_PREFIX;
    size_t len = sizeof prefix - 1 + slen;
    if (len > SB_CONTEXT_MAX_TEXT) {
        errno = E2BIG;
        return -1;
    }
    //  The summary takes the place of one removed message, or needs one more.
    if (cut == 0 && s_reserve (ctx))
        return -1;
    char *content = malloc (len + 1);
    if (!content) {
        errno = ENOMEM;
        return -1;
    }
    memcpy (content, prefix, sizeof prefix - 1);
    memcpy (content + sizeof prefix - 1, summary, slen);
    content [len] = 0;
    for (size_t i = 0; i < cut; i++)
        s_msg_free (&ctx->msgs [i]);
    size_t keep = ctx->count - cut;
    memmove (&ctx->msgs [1], &ctx->msgs [cut], keep * sizeof *ctx->msgs);
    ctx->count = keep + 1;
    s_msg_t *m = &ctx->msgs [0];
    memset (m, 0, sizeof *m);
    m->role = S_USER;
    m->seq = through_seq;
    m->summary = true;
    m->content = content;
    m->content_len = len;
    s_close (ctx);
    s_recount (ctx);
    return 0;
}

int
sb_context_compact_apply (sb_context_t *ctx, const sb_val_t *body)
{
    const sb_val_t *tv = sb_get (body, "through_seq");
    const char *method = sb_get_str (body, "method");
    if (!tv || tv->type != SB_V_UINT || !method) {
        errno = EINVAL;
        return -1;
    }
    size_t cut = s_cut_index (ctx, tv->v.u);
    if (strcmp (method, "elide") == 0)
        return s_apply_elide (ctx, cut);
    if (strcmp (method, "summary") == 0) {
        size_t slen = 0;
        const char *summary = s_str (body, "summary", &slen);
        if (!summary) {
            errno = EINVAL;
            return -1;
        }
        return s_apply_summary (ctx, cut, tv->v.u, summary, slen);
    }
    //  A method this build does not know changes nothing: the context
    //  stays whole, which a later compaction will fix if it must.
    return 0;
}

int
sb_context_plan (const sb_context_t *ctx, size_t keep_bytes, sb_context_plan_t *plan)
{
    memset (plan, 0, sizeof *plan);
    plan->bytes = ctx->bytes;
    //  The newest step (or prompt) is always kept; older ones while the
    //  kept part stays within keep_bytes.
    size_t cut = ctx->count, kept = 0, tail = 0;
    bool have_min = false;
    for (size_t i = ctx->count; i > 0; i--) {
        kept += s_msg_bytes (&ctx->msgs [i - 1]);
        if (ctx->msgs [i - 1].role == S_TOOL)
            continue;
        if (!have_min) {
            have_min = true;
            cut = i - 1;
            tail = kept;
            continue;
        }
        if (kept > keep_bytes)
            break;
        cut = i - 1;
        tail = kept;
    }
    plan->cut = cut;
    plan->kept_bytes = tail;
    plan->tail_fits = tail <= keep_bytes;
    //  What eliding before the cut would leave.
    size_t saved = 0;
    for (size_t i = 0; i < cut; i++) {
        const s_msg_t *m = &ctx->msgs [i];
        if (m->role == S_TOOL && m->content_len > SB_CONTEXT_ELIDE_MIN)
            saved += m->content_len - s_elided_len (m->content_len);
    }
    plan->elided_bytes = ctx->bytes - saved;
    plan->elidable = saved;
    if (cut == 0 || cut >= ctx->count)
        return -1;              //  nothing before the newest step
    //  The seq just before the first kept message: s_cut_index finds the
    //  same cut from it.
    plan->through_seq = ctx->msgs [cut].seq - 1;
    //  A summary alone, of nothing but an earlier summary, gains nothing.
    plan->summarizable = !(cut == 1 && ctx->msgs [0].summary);
    return 0;
}

//  Writes one message of the summary request: reasoning state dropped (it
//  belongs to the provider's own turn, and the request ends with a user
//  message), tool outputs elided, and every text longer than clip cut.
static void
s_encode_clipped (const s_msg_t *m, size_t clip, sb_enc_t *enc)
{
    const char *content = m->content;
    size_t len = m->content_len;
    char *clipped = NULL;
    size_t limit = m->role == S_TOOL && (!clip || clip > SB_CONTEXT_ELIDE_MIN) ? SB_CONTEXT_ELIDE_MIN : clip;
    if (content && limit && len > limit) {
        size_t head = limit * 2 / 3, tail = limit / 3;
        if (m->role == S_TOOL && limit == SB_CONTEXT_ELIDE_MIN) {
            head = SB_CONTEXT_ELIDE_HEAD;
            tail = SB_CONTEXT_ELIDE_TAIL;
        }
        clipped = s_clip (content, len, head, tail, &len);
        if (clipped)
            content = clipped;
        else
            len = 0;
    }
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "role", m->role == S_USER ? "user" : m->role == S_TOOL ? "tool" : "assistant");
    if (m->role == S_TOOL)
        sb_enc_kstr (enc, "call_id", m->call_id);
    if (content || m->role != S_ASSISTANT) {
        sb_enc_key (enc, "content");
        sb_enc_strn (enc, content ? content : "", content ? len : 0);
    }
    if (m->ncalls) {
        sb_enc_key (enc, "tool_calls");
        sb_enc_array_open (enc);
        for (uint32_t k = 0; k < m->ncalls; k++) {
            const s_call_t *c = &m->calls [k];
            sb_enc_map_open (enc);
            sb_enc_kstr (enc, "call_id", c->call_id);
            sb_enc_kstr (enc, "name", c->name);
            //  Arguments must stay JSON (Anthropic parses them): a long
            //  one is replaced, not cut.
            size_t alen = c->arguments ? strlen (c->arguments) : 0;
            if (clip && alen > clip) {
                char note [96];
                snprintf (note, sizeof note, "{\"elided\":\"%zu bytes of arguments\"}", alen);
                sb_enc_kstr (enc, "arguments", note);
            }
            else
                sb_enc_kstr_opt (enc, "arguments", c->arguments);
            sb_enc_map_close (enc);
        }
        sb_enc_array_close (enc);
    }
    sb_enc_map_close (enc);
    free (clipped);
}

void
sb_context_encode_head (const sb_context_t *ctx, size_t from, size_t cut, size_t clip,
                        const char *instruction, sb_enc_t *enc)
{
    if (cut > ctx->count)
        cut = ctx->count;
    //  A range starts at a user or assistant message, so that no tool
    //  message comes without its call.
    while (from < cut && ctx->msgs [from].role == S_TOOL)
        from++;
    sb_enc_array_open (enc);
    //  An earlier summary is the oldest history: it is kept whatever the range.
    if (from > 0 && ctx->count && ctx->msgs [0].summary)
        s_encode_clipped (&ctx->msgs [0], clip, enc);
    const s_msg_t *asst = NULL;
    for (size_t i = from; i < cut; i++) {
        const s_msg_t *m = &ctx->msgs [i];
        s_encode_clipped (m, clip, enc);
        if (m->role == S_ASSISTANT)
            asst = m;
        if (m->role == S_USER || !asst)
            continue;
        if (i + 1 < cut && ctx->msgs [i + 1].role == S_TOOL)
            continue;
        for (uint32_t k = 0; k < asst->ncalls; k++) {
            if (asst->calls [k].answered)
                continue;
            sb_enc_map_open (enc);
            sb_enc_kstr (enc, "role", "tool");
            sb_enc_kstr (enc, "call_id", asst->calls [k].call_id);
            sb_enc_kstr (enc, "content", SB_CONTEXT_INTERRUPTED);
            sb_enc_map_close (enc);
        }
        asst = NULL;
    }
    sb_enc_map_open (enc);
    sb_enc_kstr (enc, "role", "user");
    sb_enc_kstr (enc, "content", instruction);
    sb_enc_map_close (enc);
    sb_enc_array_close (enc);
}

const char *
sb_context_last_prompt (const sb_context_t *ctx, size_t cut, size_t *len)
{
    for (size_t i = cut < ctx->count ? cut : ctx->count; i > 0; i--) {
        const s_msg_t *m = &ctx->msgs [i - 1];
        if (m->role == S_USER && !m->summary) {
            *len = m->content_len;
            return m->content;
        }
    }
    return NULL;
}

int
sb_context_seed (sb_context_t *ctx, uint64_t through_seq, const char *summary, size_t len)
{
    if (ctx->count || ctx->last_seq) {
        errno = EINVAL;
        return -1;
    }
    if (s_apply_summary (ctx, 0, through_seq, summary, len))
        return -1;
    ctx->last_seq = through_seq;
    return 0;
}
