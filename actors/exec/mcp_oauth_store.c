/*  actors/exec/mcp_oauth_store.c — OAuth tokens of MCP servers, encrypted
    at rest (actors/exec/mcp_oauth.h).

    DATA/mcp-oauth/key holds 32 random bytes (made 0600 on first use, with
    O_EXCL so two processes agree on one key); DATA/mcp-oauth/NAME holds
    "SBOT1", a 12-byte random nonce, then the AES-256-GCM ciphertext of
    the server's JSON document and its 16-byte tag. The associated data is
    the server's name and URL: a file copied under another name, or kept
    after the URL changed, does not open. A file is replaced whole
    (written aside, then renamed): a reader sees the old or the new one.
*/
#include "actors/exec/mcp_oauth.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_MAGIC     "SBOT1"
#define S_MAGIC_LEN 5
#define S_NONCE     12
#define S_TAG       16
#define S_KEY       32

static int
s_read_all (int fd, unsigned char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read (fd, buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t) n;
    }
    return 0;
}

static int
s_write_all (int fd, const unsigned char *buf, size_t len)
{
    size_t put = 0;
    while (put < len) {
        ssize_t n = write (fd, buf + put, len - put);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        put += (size_t) n;
    }
    return 0;
}

//  The key, made when there is none. 0 or -1.
static int
s_key (const char *data_dir, unsigned char key [S_KEY])
{
    char dir [PATH_MAX], path [PATH_MAX];
    snprintf (dir, sizeof dir, "%s/mcp-oauth", data_dir);
    if (mkdir (dir, 0700) != 0 && errno != EEXIST)
        return -1;
    snprintf (path, sizeof path, "%s/key", dir);
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        randombytes_buf (key, S_KEY);
        int rc = s_write_all (fd, key, S_KEY);
        if (close (fd) != 0)
            rc = -1;
        if (rc == 0)
            return 0;
        unlink (path);
        return -1;
    }
    if (errno != EEXIST || (fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
        return -1;
    struct stat st;
    int rc = fstat (fd, &st) == 0 && st.st_size == S_KEY && !(st.st_mode & 077) ? s_read_all (fd, key, S_KEY) : -1;
    close (fd);
    return rc;
}

static void
s_path (char *out, size_t size, const char *data_dir, const char *name)
{
    snprintf (out, size, "%s/mcp-oauth/%s", data_dir, name);
}

//  name NUL url: what a file is bound to.
static unsigned char *
s_aad (const char *name, const char *url, size_t *len)
{
    *len = strlen (name) + 1 + strlen (url);
    unsigned char *a = malloc (*len);
    if (a) {
        memcpy (a, name, strlen (name) + 1);
        memcpy (a + strlen (name) + 1, url, strlen (url));
    }
    return a;
}

int
sb_mcp_oauth_store_save (const char *data_dir, const char *name, const char *url, const char *doc)
{
    unsigned char key [S_KEY];
    size_t dl = strlen (doc), al;
    if (dl > SB_OAUTH_STORE_MAX - 64 || s_key (data_dir, key))
        return -1;
    unsigned char *aad = s_aad (name, url, &al);
    size_t total = S_MAGIC_LEN + S_NONCE + dl + S_TAG;
    unsigned char *out = malloc (total);
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new ();
    int ok = aad && out && c, n = 0;
    if (ok) {
        memcpy (out, S_MAGIC, S_MAGIC_LEN);
        unsigned char *nonce = out + S_MAGIC_LEN, *ct = nonce + S_NONCE;
        randombytes_buf (nonce, S_NONCE);
        ok = EVP_EncryptInit_ex (c, EVP_aes_256_gcm (), NULL, key, nonce) == 1
          && EVP_EncryptUpdate (c, NULL, &n, aad, (int) al) == 1
          && EVP_EncryptUpdate (c, ct, &n, (const unsigned char *) doc, (int) dl) == 1
          && EVP_EncryptFinal_ex (c, ct + n, &n) == 1
          && EVP_CIPHER_CTX_ctrl (c, EVP_CTRL_GCM_GET_TAG, S_TAG, ct + dl) == 1;
    }
    sodium_memzero (key, sizeof key);
    EVP_CIPHER_CTX_free (c);
    free (aad);
    char path [PATH_MAX], tmp [PATH_MAX + 16];
    s_path (path, sizeof path, data_dir, name);
    snprintf (tmp, sizeof tmp, "%s.%d.tmp", path, (int) getpid ());
    int fd = ok ? open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
    int rc = -1;
    if (fd >= 0) {
        rc = s_write_all (fd, out, total);
        if (close (fd) != 0)
            rc = -1;
        if (rc == 0 && rename (tmp, path) != 0)
            rc = -1;
        if (rc)
            unlink (tmp);
    }
    free (out);
    return rc;
}

char *
sb_mcp_oauth_store_load (const char *data_dir, const char *name, const char *url)
{
    char path [PATH_MAX];
    s_path (path, sizeof path, data_dir, name);
    int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    struct stat st;
    //  The size is checked before anything is allocated for it.
    if (fstat (fd, &st) != 0 || st.st_size < S_MAGIC_LEN + S_NONCE + S_TAG + 1 || st.st_size > SB_OAUTH_STORE_MAX) {
        close (fd);
        return NULL;
    }
    size_t total = (size_t) st.st_size, dl = total - S_MAGIC_LEN - S_NONCE - S_TAG, al;
    unsigned char *in = malloc (total), key [S_KEY];
    char *doc = malloc (dl + 1);
    int ok = in && doc && s_read_all (fd, in, total) == 0 && memcmp (in, S_MAGIC, S_MAGIC_LEN) == 0
          && s_key (data_dir, key) == 0;
    close (fd);
    unsigned char *aad = ok ? s_aad (name, url, &al) : NULL;
    EVP_CIPHER_CTX *c = ok && aad ? EVP_CIPHER_CTX_new () : NULL;
    int n = 0;
    if (c) {
        unsigned char *nonce = in + S_MAGIC_LEN, *ct = nonce + S_NONCE;
        ok = EVP_DecryptInit_ex (c, EVP_aes_256_gcm (), NULL, key, nonce) == 1
          && EVP_DecryptUpdate (c, NULL, &n, aad, (int) al) == 1
          && EVP_DecryptUpdate (c, (unsigned char *) doc, &n, ct, (int) dl) == 1
          && EVP_CIPHER_CTX_ctrl (c, EVP_CTRL_GCM_SET_TAG, S_TAG, ct + dl) == 1
          && EVP_DecryptFinal_ex (c, (unsigned char *) doc + n, &n) == 1;
    }
    else
        ok = 0;
    sodium_memzero (key, sizeof key);
    EVP_CIPHER_CTX_free (c);
    free (aad);
    free (in);
    if (!ok || memchr (doc, 0, dl)) {
        if (doc)
            sodium_memzero (doc, dl);
        free (doc);
        return NULL;
    }
    doc [dl] = 0;
    return doc;
}

int
sb_mcp_oauth_store_remove (const char *data_dir, const char *name)
{
    char path [PATH_MAX];
    s_path (path, sizeof path, data_dir, name);
    if (unlink (path) == 0)
        return 0;
    return errno == ENOENT ? 1 : -1;
}

bool
sb_mcp_oauth_store_exists (const char *data_dir, const char *name)
{
    char path [PATH_MAX];
    struct stat st;
    s_path (path, sizeof path, data_dir, name);
    return lstat (path, &st) == 0 || errno != ENOENT;
}
