/*  actors/llm/demo.h — the built-in demo model: a tiny loopback HTTP server
    that speaks the OpenAI Responses SSE format, so that `--llm demo` runs the
    real client code path with no key.

    It is deterministic and rule-based. Given the conversation so far, it:
      1. lists the workspace (list_dir);
      2. reads a file it saw (read_file, README first);
      3. proposes one read-only shell command (git status, or ls);
      4. writes a short final answer that summarizes what it saw,
    streaming token by token with small delays, and says it is the demo. */
#ifndef SB_LLM_DEMO_H
#define SB_LLM_DEMO_H

typedef struct sb_demo sb_demo_t;

/*  Starts the server on 127.0.0.1 with an ephemeral port. delay_ms is the
    pause between streamed tokens. NULL on failure. */
sb_demo_t *sb_demo_new (int delay_ms);
/*  The base URL to configure: http://127.0.0.1:PORT/v1 */
const char *sb_demo_url (sb_demo_t *demo);
/*  Stops accepting, waits for open streams to end, and frees. */
void sb_demo_destroy (sb_demo_t **demo_p);

#endif
