/*  actors/llm/demo.c — the demo model server (see demo.h). One thread
    accepts; each connection gets a detached thread that answers one
    request and closes. */
#include "actors/llm/demo.h"
#include "schemas/vocab.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_REQUEST (32u << 20)

struct sb_demo {
    int fd;
    int wake [2];               /* a pipe that stops the accept loop */
    pthread_t thread;
    char url [64];
    int delay_ms;
    atomic_int open_conns;
};

typedef struct {
    sb_demo_t *demo;
    int fd;
    int seq;                    /* SSE sequence_number */
} conn_t;

static int
s_write_all (int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send (fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t) w;
    }
    return 0;
}

static int
s_event (conn_t *c, const char *type, json_t *data)
{
    json_object_set_new (data, "type", json_string (type));
    json_object_set_new (data, "sequence_number", json_integer (c->seq++));
    char *text = json_dumps (data, JSON_COMPACT);
    json_decref (data);
    if (!text)
        return -1;
    size_t n = strlen (text) + strlen (type) + 32;
    char *buf = malloc (n);
    int rc = -1;
    if (buf) {
        int len = snprintf (buf, n, "event: %s\ndata: %s\n\n", type, text);
        rc = s_write_all (c->fd, buf, (size_t) len);
    }
    free (buf);
    free (text);
    return rc;
}

static void
s_sleep_ms (int ms)
{
    struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000L };
    nanosleep (&ts, NULL);
}

/*  Streams one function call as output item `index`. */
static int
s_function_call (conn_t *c, int index, const char *name, const char *args)
{
    char item_id [32], call_id [48];
    static atomic_uint s_calls;
    unsigned n = atomic_fetch_add (&s_calls, 1) + 1;
    snprintf (item_id, sizeof item_id, "fc_demo%u", n);
    snprintf (call_id, sizeof call_id, "call_demo_%u_%ld", n, (long) time (NULL) % 100000);
    if (s_event (c, "response.output_item.added",
                 json_pack ("{s:i, s:{s:s, s:s, s:s, s:s, s:s, s:s}}", "output_index", index, "item",
                            "id", item_id, "type", "function_call", "status", "in_progress",
                            "arguments", "", "call_id", call_id, "name", name)))
        return -1;
    s_sleep_ms (c->demo->delay_ms);
    if (s_event (c, "response.function_call_arguments.delta",
                 json_pack ("{s:s, s:i, s:s}", "item_id", item_id, "output_index", index, "delta", args))
    ||  s_event (c, "response.function_call_arguments.done",
                 json_pack ("{s:s, s:i, s:s}", "item_id", item_id, "output_index", index, "arguments", args))
    ||  s_event (c, "response.output_item.done",
                 json_pack ("{s:i, s:{s:s, s:s, s:s, s:s, s:s, s:s}}", "output_index", index, "item",
                            "id", item_id, "type", "function_call", "status", "completed",
                            "arguments", args, "call_id", call_id, "name", name)))
        return -1;
    return 0;
}

/*  Streams `text` as a message, word by word. */
static int
s_message (conn_t *c, int index, const char *text)
{
    const char *item_id = "msg_demo";
    if (s_event (c, "response.output_item.added",
                 json_pack ("{s:i, s:{s:s, s:s, s:s, s:[], s:s}}", "output_index", index, "item",
                            "id", item_id, "type", "message", "status", "in_progress",
                            "content", "role", "assistant")))
        return -1;
    const char *p = text;
    while (*p) {
        const char *q = p;
        while (*q == ' ' || *q == '\n')
            q++;
        while (*q && *q != ' ' && *q != '\n')
            q++;
        char *delta = strndup (p, (size_t) (q - p));
        int rc = s_event (c, "response.output_text.delta",
                          json_pack ("{s:s, s:i, s:i, s:s}", "item_id", item_id, "output_index", index,
                                     "content_index", 0, "delta", delta ? delta : ""));
        free (delta);
        if (rc)
            return -1;
        s_sleep_ms (c->demo->delay_ms);
        p = q;
    }
    if (s_event (c, "response.output_text.done",
                 json_pack ("{s:s, s:i, s:i, s:s}", "item_id", item_id, "output_index", index,
                            "content_index", 0, "text", text))
    ||  s_event (c, "response.output_item.done",
                 json_pack ("{s:i, s:{s:s, s:s, s:s, s:s, s:[{s:s, s:s}]}}", "output_index", index, "item",
                            "id", item_id, "type", "message", "status", "completed", "role", "assistant",
                            "content", "type", "output_text", "text", text)))
        return -1;
    return 0;
}

/*  Outputs of the tool calls since the last user message, oldest first. */
static size_t
s_outputs (json_t *input, const char **out, size_t max)
{
    size_t n = 0, k;
    json_t *item;
    json_array_foreach (input, k, item) {
        const char *type = json_string_value (json_object_get (item, "type"));
        const char *role = json_string_value (json_object_get (item, "role"));
        if (sb_llm_role_from_name (role) == SB_LLM_ROLE_USER)
            n = 0;
        else
        if (type && strcmp (type, "function_call_output") == 0 && n < max) {
            const char *o = json_string_value (json_object_get (item, "output"));
            out [n++] = o ? o : "";
        }
    }
    return n;
}

/*  Picks a file to read from a list_dir output: a README first, else the
    first entry that does not look like a folder. */
static void
s_pick_file (const char *listing, char *out, size_t n)
{
    out [0] = 0;
    char first [512] = "";
    const char *p = listing;
    while (p && *p) {
        const char *nl = strchr (p, '\n');
        size_t len = nl ? (size_t) (nl - p) : strlen (p);
        char line [512];
        snprintf (line, sizeof line, "%.*s", (int) (len < 511 ? len : 511), p);
        char *s = line;
        while (*s == ' ' || *s == '-' || *s == '*')
            s++;
        size_t l = strlen (s);
        while (l > 0 && (s [l - 1] == ' ' || s [l - 1] == '\r'))
            s [--l] = 0;
        bool dir = l > 0 && s [l - 1] == '/';
        bool noise = l == 0 || strchr (s, ':') || s [0] == '.' || strchr (s, ' ');
        if (!dir && !noise) {
            if (strncasecmp (s, "readme", 6) == 0) {
                snprintf (out, n, "%s", s);
                return;
            }
            if (!first [0])
                snprintf (first, sizeof first, "%s", s);
        }
        p = nl ? nl + 1 : NULL;
    }
    snprintf (out, n, "%s", first);
}

static int
s_count_lines (const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

static void
s_first_line (const char *s, char *out, size_t n)
{
    const char *nl = s ? strchr (s, '\n') : NULL;
    size_t len = s ? (nl ? (size_t) (nl - s) : strlen (s)) : 0;
    if (len > 80)
        len = 80;
    snprintf (out, n, "%.*s", (int) len, s ? s : "");
}

static void
s_respond (conn_t *c, json_t *req)
{
    const char *hdr = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      "Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
    if (s_write_all (c->fd, hdr, strlen (hdr)))
        return;
    const char *model = json_string_value (json_object_get (req, "model"));
    if (s_event (c, "response.created",
                 json_pack ("{s:{s:s, s:s, s:s}}", "response", "id", "resp_demo", "status", "in_progress",
                            "model", model ? model : "demo")))
        return;
    const char *outs [8];
    size_t n = s_outputs (json_object_get (req, "input"), outs, 8);
    char file [512] = "";
    if (n >= 1)
        s_pick_file (outs [0], file, sizeof file);
    int rc = 0;
    const char *stop_type = "completed";
    if (n == 0)
        rc = s_function_call (c, 0, "list_dir", "{\"path\":\".\"}");
    else
    if (n == 1 && file [0]) {
        json_t *args = json_pack ("{s:s}", "path", file);
        char *a = json_dumps (args, JSON_COMPACT);
        rc = s_function_call (c, 0, "read_file", a ? a : "{}");
        free (a);
        json_decref (args);
    }
    else
    if (n <= 2)
        //  a read-only tool: the demo runs under the default policy (auto)
        //  without waiting for anyone's approval (docs/approvals.md)
        rc = s_function_call (c, 0, "git_status", "{}");
    else {
        char text [4096], first [96], status [96], read [256];
        s_first_line (n >= 2 ? outs [1] : "", first, sizeof first);
        s_first_line (outs [n - 1], status, sizeof status);
        if (file [0] && first [0])
            snprintf (read, sizeof read, "I read %s, which begins with \"%s\"", file, first);
        else
        if (file [0])
            snprintf (read, sizeof read, "I read %s, which is empty", file);
        else
            snprintf (read, sizeof read, "there was no file to read");
        snprintf (text, sizeof text,
                  "I am the switchboard demo model, a rule-based stand-in that needs no API key. "
                  "Here is what I saw: the workspace listing has %d lines; %s; and `git status` "
                  "answered \"%s\". To use a real model, start switchboard with "
                  "--llm responses|chat|anthropic --model NAME and set the provider's API key.",
                  s_count_lines (outs [0]) + 1, read, status);
        rc = s_message (c, 0, text);
    }
    if (rc)
        return;
    s_event (c, "response.completed",
             json_pack ("{s:{s:s, s:s, s:s, s:{s:i, s:i, s:i}}}", "response", "id", "resp_demo",
                        "status", stop_type, "model", model ? model : "demo", "usage",
                        "input_tokens", 100 + 50 * (int) n, "output_tokens", 20, "total_tokens",
                        120 + 50 * (int) n));
}

static void *
s_conn_thread (void *arg)
{
    conn_t *c = arg;
    size_t cap = 65536, len = 0;
    char *buf = malloc (cap + 1);
    long content_length = -1;
    char *body = NULL;
    while (buf) {
        struct pollfd pfd = { c->fd, POLLIN, 0 };
        if (poll (&pfd, 1, 10000) <= 0)
            break;
        if (len == cap) {
            if (cap >= MAX_REQUEST)
                break;
            char *nb = realloc (buf, cap * 2 + 1);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = recv (c->fd, buf + len, cap - len, 0);
        if (r <= 0)
            break;
        len += (size_t) r;
        buf [len] = 0;
        char *end = strstr (buf, "\r\n\r\n");
        if (!end)
            continue;
        if (content_length < 0) {
            char *cl = strcasestr (buf, "\r\ncontent-length:");
            content_length = cl && cl < end ? atol (cl + 17) : 0;
            if (content_length < 0 || content_length > (long) MAX_REQUEST)
                break;
        }
        if ((long) (len - (size_t) (end + 4 - buf)) >= content_length) {
            body = end + 4;
            break;
        }
    }
    if (body) {
        json_t *req = json_loadb (body, (size_t) content_length, 0, NULL);
        if (req && strncmp (buf, "POST ", 5) == 0 && strstr (buf, "/responses "))
            s_respond (c, req);
        else
        if (strncmp (buf, "GET ", 4) == 0 && strstr (buf, "/models ")) {
            const char *r = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 38\r\n"
                            "Connection: close\r\n\r\n{\"data\":[{\"id\":\"demo\",\"object\":\"model\"}]}";
            s_write_all (c->fd, r, strlen (r));
        }
        else {
            const char *r = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            s_write_all (c->fd, r, strlen (r));
        }
        json_decref (req);
    }
    free (buf);
    close (c->fd);
    atomic_fetch_sub (&c->demo->open_conns, 1);
    free (c);
    return NULL;
}

static void *
s_accept_thread (void *arg)
{
    sb_demo_t *demo = arg;
    while (true) {
        struct pollfd pfd [2] = { { demo->fd, POLLIN, 0 }, { demo->wake [0], POLLIN, 0 } };
        if (poll (pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pfd [1].revents)
            break;
        int fd = accept4 (demo->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        conn_t *c = calloc (1, sizeof *c);
        if (!c) {
            close (fd);
            continue;
        }
        c->demo = demo;
        c->fd = fd;
        atomic_fetch_add (&demo->open_conns, 1);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init (&attr);
        pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create (&t, &attr, s_conn_thread, c) != 0) {
            atomic_fetch_sub (&demo->open_conns, 1);
            close (fd);
            free (c);
        }
        pthread_attr_destroy (&attr);
    }
    return NULL;
}

sb_demo_t *
sb_demo_new (int delay_ms)
{
    sb_demo_t *demo = calloc (1, sizeof *demo);
    if (!demo)
        return NULL;
    demo->delay_ms = delay_ms;
    demo->fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = 0 };
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    if (demo->fd < 0 || pipe2 (demo->wake, O_CLOEXEC) != 0
    ||  bind (demo->fd, (struct sockaddr *) &addr, sizeof addr) != 0
    ||  listen (demo->fd, 128) != 0
    ||  getsockname (demo->fd, (struct sockaddr *) &addr, &alen) != 0) {
        if (demo->fd >= 0)
            close (demo->fd);
        free (demo);
        return NULL;
    }
    snprintf (demo->url, sizeof demo->url, "http://127.0.0.1:%d/v1", ntohs (addr.sin_port));
    if (pthread_create (&demo->thread, NULL, s_accept_thread, demo) != 0) {
        close (demo->fd);
        close (demo->wake [0]);
        close (demo->wake [1]);
        free (demo);
        return NULL;
    }
    return demo;
}

const char *
sb_demo_url (sb_demo_t *demo)
{
    return demo->url;
}

void
sb_demo_destroy (sb_demo_t **demo_p)
{
    sb_demo_t *demo = *demo_p;
    if (!demo)
        return;
    if (write (demo->wake [1], "x", 1) < 0) {
        /* the accept thread also stops when the pipe is closed */
    }
    pthread_join (demo->thread, NULL);
    close (demo->fd);
    close (demo->wake [0]);
    close (demo->wake [1]);
    /* connection threads hold the struct: wait for them, bounded */
    for (int k = 0; k < 500 && atomic_load (&demo->open_conns) > 0; k++)
        s_sleep_ms (10);
    if (atomic_load (&demo->open_conns) == 0)
        free (demo);
    *demo_p = NULL;
}
