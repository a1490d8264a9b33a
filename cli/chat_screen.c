/*  cli/chat_screen.c — the chat's terminal: one input line edited with
    libedit at the bottom, output streaming above it (cli/chat.h).

    libedit's readline interface is used in its callback form, so one loop
    polls the keyboard, the bus and the signals together: the loop calls
    sb_screen_read when the terminal is readable, and libedit calls back
    with each line. libedit keeps its own state in globals, so there is one
    screen per process (s_current).

    Output is written into a memory FILE and printed at sb_screen_flush:
    the input line is erased, whole lines are printed, the unfinished last
    line is printed on a row of its own (cut at a space before the
    terminal's width, so that it never wraps), and the input line is drawn
    again below. The next flush moves up to that row and redraws it, with
    what arrived since: model text streams word by word and typing goes on
    underneath. The attributes (bold, dim) in force at the start of the
    unfinished line are remembered and replayed with it.

    In key mode (an approval's question) libedit lets go of the terminal:
    the screen sets it to deliver each key without echo and without
    waiting for Enter, and prints the prompt itself. */
#include "cli/chat.h"

#include <editline/readline.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/*  A line typed without a terminal is cut here (the rest is dropped). */
#define LINE_MAX_BYTES (1u << 20)

struct sb_screen {
    sb_screen_line_fn *fn;
    void *arg;
    bool tty;                   /* libedit on a terminal */
    bool cursor;                /* the terminal moves its cursor (TERM is not dumb) */
    bool color;
    bool prompt_shown;          /* the input line is on the screen */
    bool partial_shown;         /* the unfinished line is on the row above it */
    bool in_callback;           /* inside the line function */
    char *prompt;
    FILE *mem;                  /* what callers print */
    char *mem_buf;
    size_t mem_len;
    char *line;                 /* the unfinished line, from its start */
    size_t line_len, line_cap;
    char line_sgr [32];         /* attributes in force where it starts */
    char sgr [32];              /* attributes in force at its end */
    /* key mode: each key to key_fn, the terminal as it was kept */
    sb_screen_key_fn *key_fn;
    void *key_arg;
    bool keys_pending;          /* key mode asked inside the line function */
    struct termios cooked;
    bool cooked_saved;
    /* without a terminal: bytes read but not yet a line */
    char *in;
    size_t in_len;
    bool in_eof;
};

static sb_screen_t *s_current;

static void s_enter_keys (sb_screen_t *self);

/* ------------------------------------------------------------------ */
/*  Input */

static void
s_on_line (char *line)
{
    sb_screen_t *self = s_current;
    if (!self) {
        free (line);
        return;
    }
    /* libedit leaves the line on the screen and the cursor below it: the
       row above is the typed line now, not the unfinished output */
    self->prompt_shown = false;
    self->partial_shown = false;
    /* libedit still holds the accepted line until the handler is
       installed again: nothing redraws the input line meanwhile */
    self->in_callback = true;
    self->fn (line, self->arg);
    self->in_callback = false;
    free (line);
    /* the callback form takes one line per installation; installing
       draws the (perhaps new) prompt on an empty line */
    if (s_current == self && self->keys_pending) {
        self->keys_pending = false;
        s_enter_keys (self);
    }
    else
    if (s_current == self && line && !self->key_fn) {
        if (self->color)
            fputs ("\033[0m", stdout);
        fflush (stdout);
        rl_callback_handler_install (self->prompt, s_on_line);
        self->prompt_shown = true;
    }
}

int
sb_screen_fd (const sb_screen_t *self)
{
    return self->in_eof ? -1 : 0;
}

/*  Key mode's read: one key at a time, so that what follows a key that
    turns back to lines (f, '/') stays for libedit to read; an escape
    sequence (an arrow, a function key) is read and dropped whole. After a
    key taken as an answer, what was typed after it is thrown away. */
static void
s_read_keys (sb_screen_t *self)
{
    unsigned char key;
    ssize_t n = read (0, &key, 1);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        self->key_fn (4, self->key_arg);    /* the terminal went: as Ctrl-D */
        return;
    }
    if (key == 0x1b) {
        /* ESC [ or ESC O, parameters, then a final byte: all there already */
        unsigned char c = 0;
        struct pollfd p = { 0, POLLIN, 0 };
        for (int k = 0; k < 16 && poll (&p, 1, 0) == 1 && read (0, &c, 1) == 1; k++)
            if (k > 0 && c >= 0x40 && c <= 0x7e)
                break;
        return;
    }
    if (self->key_fn (key, self->key_arg))
        tcflush (0, TCIFLUSH);
}

void
sb_screen_read (sb_screen_t *self)
{
    if (self->tty && self->key_fn) {
        s_read_keys (self);
        return;
    }
    if (self->tty) {
        rl_callback_read_char ();
        return;
    }
    if (self->in_eof)
        return;
    char buf [4096];
    ssize_t n = read (0, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        self->in_eof = true;
        if (self->in_len) {
            self->in [self->in_len] = 0;
            self->in_len = 0;
            self->fn (self->in, self->arg);
        }
        self->fn (NULL, self->arg);
        return;
    }
    for (ssize_t k = 0; k < n; k++) {
        if (buf [k] == '\n') {
            self->in [self->in_len] = 0;
            self->in_len = 0;
            self->fn (self->in, self->arg);
            continue;
        }
        if (self->in_len < LINE_MAX_BYTES)
            self->in [self->in_len++] = buf [k];
    }
}

void
sb_screen_history (sb_screen_t *self, const char *line)
{
    if (self->tty && line && *line)
        add_history (line);
}

/* ------------------------------------------------------------------ */
/*  Output */

static int
s_columns (void)
{
    struct winsize ws;
    if (ioctl (1, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
        return ws.ws_col;
    return 80;
}

static void
s_hide_input (sb_screen_t *self)
{
    if (!self->cursor)
        return;
    if (self->prompt_shown)
        fputs ("\r\033[K", stdout);
    if (self->partial_shown)
        fputs ("\033[A\r\033[K", stdout);
    self->prompt_shown = self->partial_shown = false;
}

static void
s_show_input (sb_screen_t *self)
{
    if (!self->tty || self->in_callback)
        return;
    if (self->color)
        fputs ("\033[0m", stdout);
    if (self->key_fn)
        fputs (self->prompt, stdout);   /* key mode: libedit is not drawing */
    fflush (stdout);
    if (!self->key_fn)
        rl_forced_update_display ();
    self->prompt_shown = true;
}

/*  Notes an escape sequence: SGR ones ("ESC [ ... m") set the attributes
    in force. Returns its length (0 when s does not start one). */
static size_t
s_escape (sb_screen_t *self, const char *s, size_t n)
{
    if (n < 2 || s [0] != '\033' || s [1] != '[')
        return 0;
    size_t k = 2;
    while (k < n && ((s [k] >= '0' && s [k] <= '9') || s [k] == ';'))
        k++;
    if (k >= n)
        return n;
    k++;
    if (s [k - 1] == 'm') {
        bool reset = k == 3 || (k == 4 && s [2] == '0');
        if (reset)
            self->sgr [0] = 0;
        else
        if (strlen (self->sgr) + k < sizeof self->sgr)
            strncat (self->sgr, s, k);
    }
    return k;
}

static void
s_keep (sb_screen_t *self, const char *p, size_t n)
{
    if (self->line_len + n + 1 > self->line_cap) {
        size_t cap = (self->line_len + n + 1) * 2;
        char *grown = realloc (self->line, cap);
        if (!grown)
            return;
        self->line = grown;
        self->line_cap = cap;
    }
    memcpy (self->line + self->line_len, p, n);
    self->line_len += n;
}

/*  Prints the whole lines of line, keeps the unfinished rest, and cuts
    the rest at a space (or hard) while it is wider than the terminal. */
static void
s_print_lines (sb_screen_t *self)
{
    int cols = s_columns () - 1;
    size_t start = 0, col = 0, last_space = 0;
    char sgr_at_space [32] = "", sgr_at_start [32];
    snprintf (sgr_at_start, sizeof sgr_at_start, "%s", self->line_sgr);
    snprintf (self->sgr, sizeof self->sgr, "%s", self->line_sgr);
    for (size_t k = 0; k < self->line_len; ) {
        size_t esc = s_escape (self, self->line + k, self->line_len - k);
        if (esc) {
            k += esc;
            continue;
        }
        char c = self->line [k];
        if (c == '\n') {
            fwrite (self->line + start, 1, k + 1 - start, stdout);
            start = k + 1;
            col = last_space = 0;
            snprintf (sgr_at_start, sizeof sgr_at_start, "%s", self->sgr);
            k++;
            continue;
        }
        if (((unsigned char) c & 0xc0) != 0x80)
            col++;
        if (c == ' ') {
            last_space = k;
            snprintf (sgr_at_space, sizeof sgr_at_space, "%s", self->sgr);
        }
        if (self->cursor && (int) col > cols) {
            /* too wide for one row: end the row at the last space (or
               here) and go on with the rest as a new line, with the
               attributes in force where it starts */
            bool at_space = last_space > start;
            size_t cut = at_space ? last_space : k;
            fwrite (self->line + start, 1, cut - start, stdout);
            fputs (self->color ? "\033[0m\n" : "\n", stdout);
            start = at_space ? cut + 1 : cut;
            snprintf (sgr_at_start, sizeof sgr_at_start, "%s", at_space ? sgr_at_space : self->sgr);
            snprintf (self->sgr, sizeof self->sgr, "%s", sgr_at_start);
            fputs (sgr_at_start, stdout);
            col = last_space = 0;
            k = start;
            continue;
        }
        k++;
    }
    memmove (self->line, self->line + start, self->line_len - start);
    self->line_len -= start;
    snprintf (self->line_sgr, sizeof self->line_sgr, "%s", sgr_at_start);
}

void
sb_screen_flush (sb_screen_t *self)
{
    fflush (self->mem);
    size_t n = self->mem_len;
    if (n == 0)
        return;
    if (!self->cursor) {
        /* no cursor to move: write it as it comes */
        fwrite (self->mem_buf, 1, n, stdout);
        fseeko (self->mem, 0, SEEK_SET);
        fflush (stdout);
        return;
    }
    s_hide_input (self);
    /* the unfinished line is printed again from its start, with what came */
    fputs (self->line_sgr, stdout);
    s_keep (self, self->mem_buf, n);
    fseeko (self->mem, 0, SEEK_SET);
    s_print_lines (self);
    if (self->line_len) {
        fwrite (self->line, 1, self->line_len, stdout);
        fputs (self->color ? "\033[0m\n" : "\n", stdout);
        self->partial_shown = true;
    }
    s_show_input (self);
}

void
sb_screen_newline (sb_screen_t *self)
{
    sb_screen_flush (self);
    if (!self->line_len)
        return;
    fputc ('\n', self->mem);
    sb_screen_flush (self);
}

FILE *
sb_screen_out (sb_screen_t *self)
{
    return self->mem;
}

void
sb_screen_prompt (sb_screen_t *self, const char *prompt)
{
    if (!strcmp (self->prompt, prompt))
        return;
    char *p = strdup (prompt);
    if (!p)
        return;
    free (self->prompt);
    self->prompt = p;
    if (!self->tty || self->in_callback)
        return;
    rl_set_prompt (self->prompt);
    s_hide_input (self);
    if (self->line_len) {
        fputs (self->line_sgr, stdout);
        fwrite (self->line, 1, self->line_len, stdout);
        fputs (self->color ? "\033[0m\n" : "\n", stdout);
        self->partial_shown = true;
    }
    s_show_input (self);
}

void
sb_screen_clear_input (sb_screen_t *self)
{
    if (!self->tty || self->in_callback)
        return;
    if (!self->key_fn)
        rl_replace_line ("", 0);
    s_hide_input (self);
    if (self->line_len) {
        fputs (self->line_sgr, stdout);
        fwrite (self->line, 1, self->line_len, stdout);
        fputs (self->color ? "\033[0m\n" : "\n", stdout);
        self->partial_shown = true;
    }
    s_show_input (self);
}

/*  The unfinished output line again, on its row above the input line
    (after s_hide_input took both away). */
static void
s_show_partial (sb_screen_t *self)
{
    if (!self->cursor || !self->line_len)
        return;
    fputs (self->line_sgr, stdout);
    fwrite (self->line, 1, self->line_len, stdout);
    fputs (self->color ? "\033[0m\n" : "\n", stdout);
    self->partial_shown = true;
}

/*  Takes the terminal from libedit: keys one by one, no echo, signals
    kept (Ctrl-C is the chat's), and the prompt drawn by the screen. */
static void
s_enter_keys (sb_screen_t *self)
{
    rl_callback_handler_remove ();      /* libedit gives the terminal back */
    s_hide_input (self);
    s_show_partial (self);
    if (tcgetattr (0, &self->cooked) == 0) {
        self->cooked_saved = true;
        struct termios raw = self->cooked;
        raw.c_lflag &= ~(tcflag_t) (ICANON | ECHO);
        raw.c_cc [VMIN] = 1;
        raw.c_cc [VTIME] = 0;
        tcsetattr (0, TCSANOW, &raw);
    }
    s_show_input (self);
}

void
sb_screen_keys (sb_screen_t *self, sb_screen_key_fn *fn, void *arg)
{
    if (!self->tty || !fn)
        return;
    bool was = self->key_fn != NULL;
    self->key_fn = fn;
    self->key_arg = arg;
    if (was)
        return;
    if (self->in_callback)
        self->keys_pending = true;      /* s_on_line does it on return */
    else
        s_enter_keys (self);
}

void
sb_screen_lines (sb_screen_t *self, const char *typed)
{
    if (!self->tty)
        return;
    if (!self->key_fn)
        return;
    self->key_fn = NULL;
    self->key_arg = NULL;
    if (self->keys_pending) {
        /* asked and taken back inside one line function: nothing changed */
        self->keys_pending = false;
        return;
    }
    if (self->cooked_saved)
        tcsetattr (0, TCSANOW, &self->cooked);
    s_hide_input (self);
    s_show_partial (self);
    if (self->color)
        fputs ("\033[0m", stdout);
    fflush (stdout);
    rl_callback_handler_install (self->prompt, s_on_line);
    if (typed && *typed) {
        rl_insert_text (typed);
        /* drawn again from the row's start (not rl_redisplay: libedit's
           pushes a ^R, a history search) */
        fputs ("\r\033[K", stdout);
        fflush (stdout);
        rl_forced_update_display ();
    }
    self->prompt_shown = true;
}

bool
sb_screen_tty (const sb_screen_t *self)
{
    return self->tty;
}

bool
sb_screen_color (const sb_screen_t *self)
{
    return self->color;
}

/* ------------------------------------------------------------------ */

sb_screen_t *
sb_screen_new (const char *prompt, sb_screen_line_fn *fn, void *arg)
{
    sb_screen_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->fn = fn;
    self->arg = arg;
    self->prompt = strdup (prompt);
    self->mem = open_memstream (&self->mem_buf, &self->mem_len);
    self->in = malloc (LINE_MAX_BYTES + 1);
    if (!self->prompt || !self->mem || !self->in) {
        sb_screen_destroy (&self);
        return NULL;
    }
    const char *term = getenv ("TERM");
    const char *no_color = getenv ("NO_COLOR");
    self->tty = isatty (0) && isatty (1);
    self->cursor = self->tty && !(term && strcmp (term, "dumb") == 0);
    self->color = self->cursor && !(no_color && *no_color);
    s_current = self;
    if (self->tty) {
        /* the chat takes SIGINT itself (a signalfd): libedit must not */
        rl_catch_signals = 0;
        rl_callback_handler_install (self->prompt, s_on_line);
        self->prompt_shown = true;
    }
    return self;
}

void
sb_screen_destroy (sb_screen_t **self_p)
{
    sb_screen_t *self = *self_p;
    if (!self)
        return;
    if (self->tty && s_current == self) {
        s_hide_input (self);
        if (self->line_len) {
            fputs (self->line_sgr, stdout);
            fwrite (self->line, 1, self->line_len, stdout);
            fputs (self->color ? "\033[0m\n" : "\n", stdout);
        }
        rl_callback_handler_remove ();
        if (self->key_fn && self->cooked_saved)
            tcsetattr (0, TCSANOW, &self->cooked);
        fflush (stdout);
    }
    if (s_current == self)
        s_current = NULL;
    if (self->mem)
        fclose (self->mem);
    free (self->mem_buf);
    free (self->line);
    free (self->prompt);
    free (self->in);
    free (self);
    *self_p = NULL;
}
