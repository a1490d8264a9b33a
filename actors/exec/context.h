/*  actors/exec/context.h — the model's context, built from a session's tape.

    The exec actor feeds tape entries (the event maps of session.events or
    session.event: {session_id, seq, ts, run_id?, kind, body}) in seq order,
    and encodes the result as the `messages` array of an llm.stream request.
    The context is incremental: a cached one is brought up to date by
    feeding only the entries after sb_context_last_seq.

    Mapping of tape kinds (everything else is not part of the model's
    context and is skipped; its seq is still noted):
      prompt {text, images?}         a user message, with its images (each
                                     image's `sent` copy when it has one)
      text.done {text}               the text of the current assistant message
      reasoning.state {provider, data}  opaque state on the current assistant
                                     message; several are given back as one
                                     JSON array "[d1,d2,...]" in tape order
      tool.call {call_id, name, arguments}  a call of the current assistant
                                     message
      tool.result {call_id, ok, output}     a tool message answering that call
                                     ("error: " before the output when !ok)
      context.compacted {through_seq, method, summary}  older messages elided
                                     or summarized (below, docs/compaction.md)

    The current assistant message is closed by tool.result, prompt,
    turn.begin and turn.end. Tool messages are always placed in the block
    right after the assistant message that made the call, whatever came in
    between on the tape, so the encoded conversation is one every provider
    accepts. A tool.result that answers no known call is dropped: a provider
    refuses an orphan tool message.

    Repairs: whatever a stored turn holds, the encoded conversation is one a
    provider accepts, so no turn can make a session unusable.
      - Call ids are unique: a call whose tape id another call already holds
        (some local servers send call_0 at every turn) is given the id with
        _2, _3... A result pairs with the unanswered call of that tape id in
        the newest step that has one, the first of them in that step.
        (The executor gives new calls unique ids when it records them; this
        repairs tapes written before, or by another executor.)
      - An output without its call (an orphan, or a second result) is
        dropped.
      - A call without an output is answered by a synthetic tool message
        (SB_CONTEXT_INTERRUPTED).
      - A call with an empty id or name gets one (call_2..., unknown_tool).

    One step may interleave its calls and results (call A, result A, call
    B, result B) as well as list them (call A, call B, result A, result B).
    Both give one assistant message with both calls: a tool.call that comes
    after the results of the previous assistant message joins it, unless a
    mark of a new model call came first (text.done, reasoning.state or
    usage), or the turn ended. Splitting a step into two assistant messages
    would lose the reasoning state of the second half, which Anthropic
    refuses.

    Several text.done entries in one assistant message are concatenated:
    the executor may split a text longer than a tape entry allows.

    Bounds: the context refuses an entry (E2BIG) that would take it past
    its byte budget or past the llm.stream schema's limits (8192 messages,
    256 calls per message, 4 MiB of text or reasoning state per message).
    The default budget, 28 MiB, leaves room for instructions and tools
    within llm.stream's 32 MiB body.

    Not thread-safe: one owner at a time (the runtime cache checks a
    context out to one run).
*/
#ifndef SB_EXEC_CONTEXT_H
#define SB_EXEC_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "schemas/codec.h"

#define SB_CONTEXT_MAX_BYTES        (28u << 20)
#define SB_CONTEXT_MAX_MESSAGES     8192    //  llm.stream messages
#define SB_CONTEXT_MAX_CALLS        256     //  llm.stream tool_calls per message
#define SB_CONTEXT_MAX_TEXT         (4u << 20)  //  llm.stream content, reasoning_state
//  The bytes of all the images a request carries (each is at most
//  SB_IMAGE_SEND_BYTES, common/blob.h): within llm.stream's 32 MiB with
//  the budget's text. A prompt past it is refused (E2BIG) like any entry
//  past the budget; compaction replaces old images by a line each.
#define SB_CONTEXT_MAX_IMAGE_BYTES  (16u << 20)

//  What a call that never got its result is answered with, so the model
//  is not handed a dangling call.
#define SB_CONTEXT_INTERRUPTED \
    "error: this tool call was interrupted (the server stopped before it finished); " \
    "it was not run again"

typedef struct sb_context sb_context_t;

//  A new, empty context (last seq 0). NULL when out of memory.
sb_context_t *sb_context_new (void);
void sb_context_destroy (sb_context_t **ctx_p);

//  Sets the byte budget (0: SB_CONTEXT_MAX_BYTES). A budget smaller than
//  what is already held refuses every further entry that grows it.
void sb_context_set_max_bytes (sb_context_t *ctx, size_t max_bytes);

//  Feeds one tape entry. Every string is copied: the entry may be freed
//  after the call. An entry whose seq is not above the last one seen is a
//  replay and is ignored (returns 0); a gap is allowed.
//  Returns 0, or -1 with errno: EINVAL for an entry without seq or kind,
//  or a kind used here without its required fields; E2BIG past a bound;
//  ENOMEM. A refused entry changes nothing, not even the last seq, so the
//  context no longer follows the tape: the caller stops using it.
int sb_context_add (sb_context_t *ctx, const sb_val_t *event);

//  The conversation's cuts (session.rewind, docs/checkpoints.md): every
//  entry whose seq is above after [k] and below before [k] (the
//  session.rewound entry that made the cut) is skipped as if it were not
//  on the tape: its seq is noted, nothing of it is held. Set on an empty
//  context only, before the first entry is fed; the session record's
//  context_cuts. Returns 0, or -1 with errno (EINVAL: not empty, or more
//  than SB_CONTEXT_CUTS_MAX).
#define SB_CONTEXT_CUTS_MAX 64
int sb_context_set_cuts (sb_context_t *ctx, const uint64_t *after, const uint64_t *before, size_t n);

//  Whether the entry at `seq` is inside one of the cuts.
bool sb_context_is_cut (const sb_context_t *ctx, uint64_t seq);

//  The seq of the last entry fed (0 for none).
uint64_t sb_context_last_seq (const sb_context_t *ctx);

//  The number of messages sb_context_encode writes: those held plus one
//  synthetic tool message per unanswered call.
size_t sb_context_count (const sb_context_t *ctx);

//  Bytes accounted against the budget.
size_t sb_context_bytes (const sb_context_t *ctx);

//  Whether a call held in the context has this id (as the model sees it,
//  after the repairs above). The executor uses it to give a new call an
//  id unique in the session.
bool sb_context_has_call_id (const sb_context_t *ctx, const char *call_id);

/*  Reads the bytes of an image blob for the request (a new buffer the
    caller frees, *len bytes), or NULL when it cannot. */
typedef uint8_t *(sb_context_blob_fn) (void *arg, const char *sha256, size_t *len);
//  Sets how sb_context_encode reads the images of user messages (prompt
//  images, docs/images.md). Without a loader, or when it fails, an image
//  is left out and its place said in the text.
void sb_context_set_blob_loader (sb_context_t *ctx, sb_context_blob_fn *fn, void *arg);

//  Writes the messages as one msgpack ARRAY value, in the shape of the
//  llm.stream `messages` field. Every call without a result is answered
//  by a synthetic tool message (SB_CONTEXT_INTERRUPTED) placed after the
//  real results of its assistant message. Call it only when about to ask
//  the model, once the current step's results are in.
void sb_context_encode (const sb_context_t *ctx, sb_enc_t *enc);

//  The calls that have no result yet, oldest first: fills up to `max`
//  entries of call_ids (as on the tape, so that a tool.result with that
//  id answers the call) and names (either may be NULL) and returns how
//  many there are in all. The strings belong to the context and stay valid
//  until the next sb_context_add or sb_context_destroy. At resume the
//  executor appends a real tool.result for each.
size_t sb_context_unanswered (const sb_context_t *ctx, const char **call_ids,
                              const char **names, size_t max);

//  ---------------------------------------------------------------------------
//  Compaction (docs/compaction.md). A context.compacted entry
//  {through_seq, method, summary} changes what the context holds from then
//  on; the tape keeps everything. Its cut is the first user or assistant
//  message whose seq is above through_seq: the messages before it are
//    elide    kept, but every tool output longer than SB_CONTEXT_ELIDE_MIN
//             is cut to its head and tail with a note between;
//    summary  replaced by one user message, SB_CONTEXT_SUMMARY_PREFIX and
//             the summary.
//  sb_context_add applies it when it is fed; an unknown method changes
//  nothing.

#define SB_CONTEXT_ELIDE_MIN   2048
#define SB_CONTEXT_ELIDE_HEAD  1024
#define SB_CONTEXT_ELIDE_TAIL  512
#define SB_CONTEXT_SUMMARY_PREFIX \
    "[The earlier part of this conversation was compacted to fit the model's context " \
    "window. Summary of it:]\n\n"

//  Applies a context.compacted body. 0, or -1 with errno (EINVAL, E2BIG,
//  ENOMEM); sb_context_add calls it.
int sb_context_compact_apply (sb_context_t *ctx, const sb_val_t *body);

typedef struct {
    uint64_t through_seq;       //  for context.compacted: the messages before `cut`
    size_t cut;                 //  index of the first message kept as it is
    size_t bytes;               //  the context now
    size_t kept_bytes;          //  of which from the cut on
    size_t elided_bytes;        //  the context once the outputs before the cut are elided
    size_t elidable;            //  bytes that eliding would save
    bool tail_fits;             //  kept_bytes <= keep_bytes
    bool summarizable;          //  there is more before the cut than an earlier summary
} sb_context_plan_t;

//  Plans a compaction that keeps the newest messages as they are: the
//  newest step (the last assistant message and its results, or the last
//  prompt) always, and older steps while what is kept stays within
//  keep_bytes. Returns 0, or -1 when nothing precedes the newest step
//  (the plan's byte counts are filled in all the same).
int sb_context_plan (const sb_context_t *ctx, size_t keep_bytes, sb_context_plan_t *plan);

//  Writes the messages [from, cut) as the `messages` of a summary request,
//  followed by one user message with `instruction`: an earlier summary
//  (the first message) is always included, reasoning state is dropped,
//  tool outputs are elided, and with clip > 0 every text longer than clip
//  bytes is cut to its head and tail, and longer call arguments replaced.
void sb_context_encode_head (const sb_context_t *ctx, size_t from, size_t cut, size_t clip,
                             const char *instruction, sb_enc_t *enc);

//  Starts an empty context from a summary compaction {through_seq,
//  summary} instead of from seq 1: the same context as replaying the
//  whole tape, once the entries after through_seq (the compaction among
//  them) are fed. Returns 0, or -1 with errno (EINVAL: not empty; E2BIG;
//  ENOMEM).
int sb_context_seed (sb_context_t *ctx, uint64_t through_seq, const char *summary, size_t len);

//  The newest prompt before message `cut` (not a summary), or NULL; the
//  text belongs to the context.
const char *sb_context_last_prompt (const sb_context_t *ctx, size_t cut, size_t *len);

#endif
