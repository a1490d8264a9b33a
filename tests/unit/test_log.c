/*  tests/unit/test_log.c — URL redaction (issue 9 item 5): no userinfo and
    no key-like parameter value survives sb_log_redact_url, and everything
    a reader needs to tell providers apart (scheme, host, port, path, other
    parameters) does. */
#include <criterion/criterion.h>
#include <string.h>

#include "common/log.h"

static const char *
s_redact (const char *url)
{
    static char out [1024];
    return sb_log_redact_url (url, out, sizeof out);
}

Test (log, userinfo_is_left_out)
{
    cr_assert_str_eq (s_redact ("http://u:sk-secret123@127.0.0.1:8080/v1"), "http://127.0.0.1:8080/v1");
    cr_assert_str_eq (s_redact ("https://sk-only@api.example.com"), "https://api.example.com");
    //  a raw '@' in the password: the last one ends the userinfo
    cr_assert_str_eq (s_redact ("http://u:p@ss@host/v1"), "http://host/v1");
    //  an '@' in the path is not userinfo
    cr_assert_str_eq (s_redact ("http://host/v1/@me"), "http://host/v1/@me");
    cr_assert_str_eq (s_redact ("http://host?x=a@b"), "http://host?x=a@b");
}

Test (log, key_like_parameters_are_hidden)
{
    cr_assert_str_eq (s_redact ("http://u:sk-secret123@127.0.0.1:9/v1?api_key=sk-q"),
                      "http://127.0.0.1:9/v1?api_key=***");
    cr_assert_str_eq (s_redact ("https://h/v1?model=m&key=K1&token=T&access_token=A&sig=S&x=1"),
                      "https://h/v1?model=m&key=***&token=***&access_token=***&sig=***&x=1");
    cr_assert_str_eq (s_redact ("https://b.s3.amazonaws.com/o?X-Amz-Credential=C&X-Amz-Signature=S"),
                      "https://b.s3.amazonaws.com/o?X-Amz-Credential=***&X-Amz-Signature=***");
    cr_assert_str_eq (s_redact ("https://h/cb#access_token=A&state=s"), "https://h/cb#access_token=***&state=s");
    cr_assert_str_eq (s_redact ("https://h/v1?apiKey=K;password=P"), "https://h/v1?apiKey=***;password=***");
    //  a parameter without a value, and an empty query
    cr_assert_str_eq (s_redact ("https://h/v1?key&x=1"), "https://h/v1?key&x=1");
    cr_assert_str_eq (s_redact ("https://h/v1?"), "https://h/v1?");
}

Test (log, plain_urls_are_unchanged)
{
    const char *urls [] = {
        "https://api.openai.com/v1", "http://localhost:11434/v1", "http://[::1]:8080/v1",
        "http://127.0.0.1:9/fixture=x/tag=t/v1", "https://h/v1?model=gpt&stream=1", "not a url", "",
    };
    for (size_t k = 0; k < sizeof urls / sizeof urls [0]; k++)
        cr_assert_str_eq (s_redact (urls [k]), urls [k]);
}

Test (log, the_output_is_cut_and_terminated)
{
    char out [12];
    memset (out, 'x', sizeof out);
    sb_log_redact_url ("http://u:secret@example.com/v1?key=sk-long", out, sizeof out);
    cr_assert_eq (strlen (out), sizeof out - 1);
    cr_assert_str_eq (out, "http://exam");
    cr_assert_null (strstr (out, "secret"));
    char one [1];
    sb_log_redact_url ("http://h", one, 1);
    cr_assert_str_eq (one, "");
    cr_assert_str_eq (sb_log_redact_url (NULL, out, sizeof out), "");
}
