/*  actors/exec/context_compact.c — compaction of the model's context
    (docs/compaction.md): a context.compacted entry applied (tool outputs
    elided, or older messages replaced by a summary), the plan of a cut,
    the messages of the summary request, and a context seeded from a
    summary. The context itself is built in actors/exec/context.c.
*/
#include "actors/exec/context_impl.h"
#include "schemas/vocab.h"

//  A context.compacted entry names a cut by its through_seq: the messages
//  before the first user or assistant message whose seq is above it. User
//  and assistant messages are held in tape order, and tool messages sit
//  in the block of their assistant message, so the cut never parts a call
//  from its output, and the same tape gives the same cut on every replay.

//  What a message costs against the budget, as context.c's handlers count.
static size_t
s_msg_bytes (const s_msg_t *m)
{
    size_t b = S_MSG_COST + m->content_len + m->state_len;
    for (uint32_t k = 0; k < m->nimages; k++)
        b += s_image_cost (&m->images [k]);
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

//  An old user message's images give way to one line each that says
//  what they were and keeps their sha256 (docs/images.md): the model
//  keeps the reference, and the request sheds the bytes.
static int
s_describe_images (s_msg_t *m)
{
    size_t len = m->content_len;
    for (uint32_t k = 0; k < m->nimages; k++)
        len += 1 + strlen (m->images [k].desc);
    char *text = malloc (len + 1);
    if (!text) {
        errno = ENOMEM;
        return -1;
    }
    memcpy (text, m->content, m->content_len);
    size_t at = m->content_len;
    for (uint32_t k = 0; k < m->nimages; k++) {
        size_t n = strlen (m->images [k].desc);
        text [at++] = '\n';
        memcpy (text + at, m->images [k].desc, n);
        at += n;
    }
    text [at] = 0;
    free (m->content);
    free (m->images);
    m->content = text;
    m->content_len = at;
    m->images = NULL;
    m->nimages = 0;
    return 0;
}

static int
s_apply_elide (sb_context_t *ctx, size_t cut)
{
    for (size_t i = 0; i < cut; i++) {
        s_msg_t *m = &ctx->msgs [i];
        if (m->nimages && s_describe_images (m)) {
            s_recount (ctx);
            return -1;
        }
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
    sb_compact_method_t how = sb_compact_method_from_name (method);
    if (how == SB_COMPACT_ELIDE)
        return s_apply_elide (ctx, cut);
    if (how == SB_COMPACT_SUMMARY) {
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
        if (m->nimages) {
            //  The summary model reads what the images were, not them.
            size_t dl = 0;
            for (uint32_t k = 0; k < m->nimages; k++)
                dl += 1 + strlen (m->images [k].desc);
            char *t = malloc ((content ? len : 0) + dl + 1);
            size_t at = 0;
            if (t) {
                if (content)
                    memcpy (t, content, len);
                at = content ? len : 0;
                for (uint32_t k = 0; k < m->nimages; k++)
                    at += (size_t) sprintf (t + at, "\n%s", m->images [k].desc);
            }
            sb_enc_strn (enc, t ? t : "", at);
            free (t);
        }
        else
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
        sb_context_encode_interrupted (asst, enc);
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
