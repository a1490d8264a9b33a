/*  store/committer.c — the group committer's thread.

    See committer.h for the contract. The thread waits on a condition
    variable for a job, runs it through sb_store_write (which begins, runs,
    commits with its fsync, and grows the map and runs again when needed),
    then writes to an eventfd, which the actor polls with its sockets. The
    whole write transaction stays on this one thread: LMDB's write lock is
    a mutex, which only the thread that took it may release. */
#include "store/committer.h"
#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct _sb_committer_t {
    sb_store_t *store;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int fd;                     //  eventfd: a commit returned
    bool busy;                  //  the actor's view: started, not finished
    //  Under lock
    sb_store_write_fn *fn;      //  the job waiting for the thread; NULL: none
    void *ctx;
    bool stop;
    int rc;                     //  sb_store_write's return for the last job
};

static void *
s_run (void *arg)
{
    sb_committer_t *self = (sb_committer_t *) arg;
    pthread_mutex_lock (&self->lock);
    while (true) {
        while (!self->fn && !self->stop)
            pthread_cond_wait (&self->cond, &self->lock);
        if (!self->fn)
            break;
        sb_store_write_fn *fn = self->fn;
        void *ctx = self->ctx;
        pthread_mutex_unlock (&self->lock);
        int rc = sb_store_write (self->store, fn, ctx);
        pthread_mutex_lock (&self->lock);
        self->rc = rc;
        self->fn = NULL;
        uint64_t one = 1;
        //  An eventfd write of 1 fails only past 2^64 - 2 unread: never.
        while (write (self->fd, &one, sizeof one) < 0 && errno == EINTR)
            ;
    }
    pthread_mutex_unlock (&self->lock);
    return NULL;
}

sb_committer_t *
sb_committer_new (sb_store_t *store)
{
    sb_committer_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->store = store;
    self->fd = eventfd (0, EFD_CLOEXEC);
    if (self->fd < 0) {
        free (self);
        return NULL;
    }
    pthread_mutex_init (&self->lock, NULL);
    pthread_cond_init (&self->cond, NULL);
    if (pthread_create (&self->thread, NULL, s_run, self) != 0) {
        close (self->fd);
        pthread_mutex_destroy (&self->lock);
        pthread_cond_destroy (&self->cond);
        free (self);
        return NULL;
    }
    return self;
}

void
sb_committer_destroy (sb_committer_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sb_committer_t *self = *self_p;
    if (self->busy)
        sb_committer_finish (self);
    pthread_mutex_lock (&self->lock);
    self->stop = true;
    pthread_cond_signal (&self->cond);
    pthread_mutex_unlock (&self->lock);
    pthread_join (self->thread, NULL);
    close (self->fd);
    pthread_mutex_destroy (&self->lock);
    pthread_cond_destroy (&self->cond);
    free (self);
    *self_p = NULL;
}

int
sb_committer_fd (sb_committer_t *self)
{
    return self->fd;
}

bool
sb_committer_busy (sb_committer_t *self)
{
    return self->busy;
}

void
sb_committer_start (sb_committer_t *self, sb_store_write_fn *fn, void *ctx)
{
    pthread_mutex_lock (&self->lock);
    self->fn = fn;
    self->ctx = ctx;
    self->busy = true;
    pthread_cond_signal (&self->cond);
    pthread_mutex_unlock (&self->lock);
}

bool
sb_committer_done (sb_committer_t *self)
{
    if (!self->busy)
        return false;
    struct pollfd p = { .fd = self->fd, .events = POLLIN };
    return poll (&p, 1, 0) == 1 && (p.revents & POLLIN);
}

int
sb_committer_finish (sb_committer_t *self)
{
    if (!self->busy)
        return 0;
    uint64_t n;
    while (read (self->fd, &n, sizeof n) < 0 && errno == EINTR)
        ;
    pthread_mutex_lock (&self->lock);
    int rc = self->rc;
    pthread_mutex_unlock (&self->lock);
    self->busy = false;
    return rc;
}
