/*  actors/exec/context.c — the model's context, built from a session's tape.

    Messages are held in one array in the order they are encoded. Each
    handler below checks its bounds and makes every allocation it needs
    before it changes anything, so a refused entry leaves the context as
    it was. Compaction (applying context.compacted, planning a cut, the
    summary request) is in actors/exec/context_compact.c; the types both
    share are in actors/exec/context_impl.h.
*/
#include "actors/exec/context_impl.h"

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
sb_context_set_blob_loader (sb_context_t *ctx, sb_context_blob_fn *fn, void *arg)
{
    ctx->load_blob = fn;
    ctx->load_arg = arg;
}

void
sb_context_set_max_bytes (sb_context_t *ctx, size_t max_bytes)
{
    ctx->max_bytes = max_bytes ? max_bytes : SB_CONTEXT_MAX_BYTES;
}

int
sb_context_set_cuts (sb_context_t *ctx, const uint64_t *after, const uint64_t *before, size_t n)
{
    if (ctx->count || ctx->last_seq || n > SB_CONTEXT_CUTS_MAX) {
        errno = EINVAL;
        return -1;
    }
    for (size_t k = 0; k < n; k++) {
        ctx->cut_after [k] = after [k];
        ctx->cut_before [k] = before [k];
    }
    ctx->ncuts = n;
    return 0;
}

bool
sb_context_is_cut (const sb_context_t *ctx, uint64_t seq)
{
    for (size_t k = 0; k < ctx->ncuts; k++)
        if (seq > ctx->cut_after [k] && seq < ctx->cut_before [k])
            return true;
    return false;
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

//  ---------------------------------------------------------------------------
//  One handler per kind

//  The images of an entry (prompt, or view_image's tool.result): what
//  models are sent, the downscaled copy when there is one. Their cost
//  counts against the budget (s_image_cost), their bytes against
//  SB_CONTEXT_MAX_IMAGE_BYTES. -1 with errno when refused.
static int
s_images (const sb_context_t *ctx, const sb_val_t *body, s_image_t images [16], uint32_t *n, size_t *cost)
{
    const sb_val_t *iv = sb_get (body, "images");
    uint32_t nimages = iv && iv->type == SB_V_ARRAY ? iv->len : 0;
    *n = 0;
    *cost = 0;
    if (nimages > 16) {
        errno = E2BIG;
        return -1;
    }
    uint64_t held_bytes = 0;
    for (uint32_t k = 0; k < nimages; k++) {
        const sb_val_t *im = &iv->v.a [k];
        const sb_val_t *sent = sb_get (im, "sent");
        const sb_val_t *use = sent && sent->type == SB_V_MAP ? sent : im;
        const char *sha = sb_get_str (use, "sha256");
        const char *mime = sb_get_str (use, "mime");
        if (!sha || !mime) {
            errno = EINVAL;
            return -1;
        }
        snprintf (images [k].sha256, sizeof images [k].sha256, "%s", sha);
        snprintf (images [k].mime, sizeof images [k].mime, "%s", mime);
        images [k].bytes = sb_get_uint (use, "bytes", 0);
        images [k].width = sb_get_uint (use, "width", 0);
        images [k].height = sb_get_uint (use, "height", 0);
        const char *name = sb_get_str (im, "name");
        snprintf (images [k].desc, sizeof images [k].desc, "[image %.64s: %s %llux%llu, %llu bytes, sha256 %.64s]",
                  name ? name : "(no name)", sb_get_str (im, "mime") ? sb_get_str (im, "mime") : mime,
                  (unsigned long long) sb_get_uint (im, "width", 0), (unsigned long long) sb_get_uint (im, "height", 0),
                  (unsigned long long) sb_get_uint (im, "bytes", 0), sb_get_str (im, "sha256") ? sb_get_str (im, "sha256") : sha);
        if (images [k].bytes > (4u << 20)) {
            errno = E2BIG;
            return -1;
        }
        *cost += s_image_cost (&images [k]);
        held_bytes += images [k].bytes;
    }
    if (nimages && s_image_bytes (ctx) + held_bytes > SB_CONTEXT_MAX_IMAGE_BYTES) {
        errno = E2BIG;
        return -1;
    }
    *n = nimages;
    return 0;
}

//  A copy of n images for a message (NULL for none); -1 when out of memory.
static int
s_images_dup (const s_image_t *images, uint32_t n, s_image_t **out)
{
    *out = NULL;
    if (!n)
        return 0;
    if (!(*out = malloc (n * sizeof **out))) {
        errno = ENOMEM;
        return -1;
    }
    memcpy (*out, images, n * sizeof **out);
    return 0;
}

static int
s_on_prompt (sb_context_t *ctx, const sb_val_t *body)
{
    size_t len = 0;
    const char *text = s_str (body, "text", &len);
    if (!text) {
        errno = EINVAL;
        return -1;
    }
    s_image_t images [16];
    uint32_t nimages;
    size_t image_bytes;
    if (s_images (ctx, body, images, &nimages, &image_bytes))
        return -1;
    if (len > SB_CONTEXT_MAX_TEXT || s_check (ctx, S_MSG_COST + len + image_bytes, 1, 0)) {
        errno = E2BIG;
        return -1;
    }
    char *copy;
    if (s_reserve (ctx) || !(copy = s_dup (text, len)))
        return -1;
    s_image_t *held;
    if (s_images_dup (images, nimages, &held)) {
        free (copy);
        return -1;
    }
    s_close (ctx);
    s_msg_t *m = s_push (ctx, S_USER);
    m->content = copy;
    m->content_len = len;
    m->images = held;
    m->nimages = nimages;
    ctx->bytes += len + image_bytes;
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
    //  view_image's image: shown after the step's results (s_encode_images)
    s_image_t images [16];
    uint32_t nimages;
    size_t image_cost;
    if (s_images (ctx, body, images, &nimages, &image_cost))
        return -1;
    size_t cost = S_MSG_COST + len + strlen (call->call_id) + image_cost;
    //  The message replaces the call's synthetic answer: no new count.
    if (len > SB_CONTEXT_MAX_TEXT || s_check (ctx, cost, 0, 0)) {
        errno = E2BIG;
        return -1;
    }
    if (s_reserve (ctx))
        return -1;
    char *content = malloc (len + 1);
    char *id = s_dup (call->call_id, strlen (call->call_id));
    s_image_t *held = NULL;
    if (!content || !id || s_images_dup (images, nimages, &held)) {
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
    m->images = held;
    m->nimages = nimages;
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
    //  Rewound away: the model never sees it again (its seq is noted, so
    //  the context still follows the tape).
    if (sb_context_is_cut (ctx, seq)) {
        ctx->last_seq = seq;
        return 0;
    }
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

//  The images of a user message, read through the context's loader. One
//  that cannot be read is left out, and the text says so: the model is
//  told rather than shown nothing.
static void
s_encode_images (const sb_context_t *ctx, const s_msg_t *m, sb_enc_t *enc)
{
    uint8_t *data [16];
    size_t lens [16];
    uint32_t n = 0, missing = 0;
    for (uint32_t k = 0; k < m->nimages && k < 16; k++) {
        data [k] = ctx->load_blob ? ctx->load_blob (ctx->load_arg, m->images [k].sha256, &lens [k]) : NULL;
        if (data [k])
            n++;
        else
            missing++;
    }
    sb_enc_key (enc, "content");
    if (missing) {
        char *text = malloc (m->content_len + 160);
        if (text) {
            int t = snprintf (text, m->content_len + 160, "%.*s\n[%u image(s) given with this message could not "
                              "be read from the blob store]", (int) m->content_len, m->content, missing);
            sb_enc_strn (enc, text, (size_t) t);
            free (text);
        }
        else
            sb_enc_strn (enc, m->content, m->content_len);
    }
    else
        sb_enc_strn (enc, m->content, m->content_len);
    if (n) {
        sb_enc_key (enc, "images");
        sb_enc_array_open (enc);
        for (uint32_t k = 0; k < m->nimages && k < 16; k++) {
            if (!data [k])
                continue;
            sb_enc_map_open (enc);
            sb_enc_kstr (enc, "mime", m->images [k].mime);
            sb_enc_key (enc, "data");
            sb_enc_bin (enc, data [k], lens [k]);
            sb_enc_kstr (enc, "sha256", m->images [k].sha256);
            sb_enc_map_close (enc);
        }
        sb_enc_array_close (enc);
    }
    for (uint32_t k = 0; k < m->nimages && k < 16; k++)
        free (data [k]);
}

static void
s_encode_msg (const sb_context_t *ctx, const s_msg_t *m, sb_enc_t *enc)
{
    sb_enc_map_open (enc);
    switch (m->role) {
        case S_USER:
            sb_enc_kstr (enc, "role", "user");
            if (m->nimages)
                s_encode_images (ctx, m, enc);
            else {
                sb_enc_key (enc, "content");
                sb_enc_strn (enc, m->content, m->content_len);
            }
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

//  The synthetic tool message of each call of `asst` that no result
//  answered (SB_CONTEXT_INTERRUPTED), written at the end of its block of
//  tool messages (context_impl.h).
void
sb_context_encode_interrupted (const s_msg_t *asst, sb_enc_t *enc)
{
    for (uint32_t k = 0; k < asst->ncalls; k++) {
        if (asst->calls [k].answered)
            continue;
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, "role", "tool");
        sb_enc_kstr (enc, "call_id", asst->calls [k].call_id);
        sb_enc_kstr (enc, "content", SB_CONTEXT_INTERRUPTED);
        sb_enc_map_close (enc);
    }
}

void
sb_context_encode (const sb_context_t *ctx, sb_enc_t *enc)
{
    sb_enc_array_open (enc);
    //  The assistant message whose block of tool messages is being
    //  written; its unanswered calls are closed at the end of the block.
    const s_msg_t *asst = NULL;
    size_t block = 0;           //  the index of asst's first tool message
    for (size_t i = 0; i < ctx->count; i++) {
        const s_msg_t *m = &ctx->msgs [i];
        s_encode_msg (ctx, m, enc);
        if (m->role == S_ASSISTANT) {
            asst = m;
            block = i + 1;
        }
        if (m->role == S_USER || !asst)
            continue;
        if (i + 1 < ctx->count && ctx->msgs [i + 1].role == S_TOOL)
            continue;
        sb_context_encode_interrupted (asst, enc);
        asst = NULL;
        //  The images view_image read, each as a user message after the
        //  block: no provider takes an image in a tool message, and every
        //  one takes a user message there.
        for (size_t t = block; t <= i; t++)
            if (ctx->msgs [t].nimages) {
                char text [160];
                snprintf (text, sizeof text, "The image view_image read (call %.100s):", ctx->msgs [t].call_id);
                s_msg_t shown = { .role = S_USER, .content = text, .content_len = strlen (text),
                                  .images = ctx->msgs [t].images, .nimages = ctx->msgs [t].nimages };
                s_encode_msg (ctx, &shown, enc);
            }
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
