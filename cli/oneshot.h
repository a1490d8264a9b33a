/*  cli/oneshot.h — `switchboard run`: a session, a run and its stream in
    one command.

    It uses the server that runs on the data folder (--data, else the
    default one) when there is one, and otherwise runs the embedded server
    on that folder for the length of the run, so the printed session and
    run ids work afterwards. --ephemeral runs it on a temporary folder,
    removed at exit. The closing lines say what changed in the workspace
    (cli/changes.h), then sum the run up (cli/transcript.h). */
#ifndef SB_CLI_ONESHOT_H
#define SB_CLI_ONESHOT_H

#include <stdbool.h>
#include "cli/budget.h"
#include "cli/serve.h"

typedef struct {
    const char *goal;
    char repo [4096];           /* the workspace, a real path */
    const char *approval;
    unsigned long max_steps;    /* 0: the session's default */
    sb_cli_budget_t budget;     /* --budget-*: the run's session's budgets */
    bool json;
    bool ephemeral;
    const char *images [16];    /* --image FILE (cli/images.h) */
    int nimages;
} sb_oneshot_t;

/*  Runs the one-shot; `so` holds the embedded server's options (data,
    llm, model, ...). Returns the exit code. */
int sb_oneshot_run (sb_oneshot_t *o, sb_serve_opts_t *so);

#endif
