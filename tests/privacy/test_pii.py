"""privacy.pii (pattern recognizers, redact) and privacy.ner (optional spaCy NER).

Token-shaped test values are assembled at run time so no secret scanner mistakes this file for a leak.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privacy.ner import Ner, chunks, load_ner, ner_status
from privacy.pii import Span, default_placeholder, find, redact


def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


GH = "ghp_" + "a1B2c3D4e5F6" * 3
GH_PAT = "github_pat_" + "11ABCDEFG0" + "x" * 12 + "_" + "Yz9" * 10
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
SLACK = "xoxb-" + "123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
HOOK = "https://hooks.slack.com/services/" + "T00000000/B00000000/" + "XXXXXXXXXXXXXXXXXXXXXXXX"
GOOGLE = "AIza" + "SyA1234567890abcdefghijklmnopqrstuv"
STRIPE = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"
JWT = (_b64({"alg": "HS256", "typ": "JWT"}) + "." + _b64({"sub": "1234567890", "iat": 1516239022})
       + ".Sf1Kxw-RJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
NOT_JWT = _b64({"typ": "not-a-token"}) + "." + _b64({"a": 1, "b": "cdef"}) + ".c2lnbmF0dXJl"
KEY_BODY = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2Rt7Ma4Yf\nQ8Ws3Z5uO9kQ2yN0pJ1xL4vB8cD6eF7gH3iJ0kL9mN2o"
PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\n" + KEY_BODY + "\n-----END RSA PRIVATE KEY-----"

# (text, kind, value): find(text) must return exactly that one span.
POSITIVE = [
    ("From: perry at stsci.example.edu (Perry G)", "email", "perry at stsci.example.edu"),  # pipermail
    ("R.M.Everson at exeter.ac.uk wrote", "email", "R.M.Everson at exeter.ac.uk"),
    ("Jane Roe <jane.q.roe@gmail.\n>>> com>:", "email", "jane.q.roe@gmail.\n>>> com"),  # wrapped by a client
    ("Voice: +44 1392\n264065\n> next line", "phone", "+44 1392\n264065"),  # wrapped by a quoting client
    ("Voice: +44 1392\n>  264065\n", "phone", "+44 1392\n>  264065"),
    ("FURB\n  (047) 3321-0660\n", "phone", "(047) 3321-0660"),  # trunk code in parentheses
    ("Merge pull request #974 from octocat42/fix-chunked", "url_personal", "octocat42"),  # the login only
    ("contact jane.doe@example.com today", "email", "jane.doe@example.com"),
    ("From: Jane <jane+tag@mail.example.org>", "email", "jane+tag@mail.example.org"),
    ("write to jane [at] example [dot] com", "email", "jane [at] example [dot] com"),
    ("or bob at example dot org please", "email", "bob at example dot org"),
    ("call +1 415 555 0134 today", "phone", "+1 415 555 0134"),
    ("London: +44 20 7946 0958.", "phone", "+44 20 7946 0958"),
    ("office (415) 555-0134", "phone", "(415) 555-0134"),
    ("Berlin +49 30 901820", "phone", "+49 30 901820"),
    ("Berlin 0049 30 901820", "phone", "0049 30 901820"),
    ("UK national 020 7946 0958", "phone", "020 7946 0958"),
    ("toll free 1-800-555-0199", "phone", "1-800-555-0199"),
    ("compact +4930901820", "phone", "+4930901820"),
    ("dots 415.555.0134", "phone", "415.555.0134"),
    ("Paris +33 1 23 45 67 89", "phone", "+33 1 23 45 67 89"),
    ("US +1 (415) 555-0134", "phone", "+1 (415) 555-0134"),
    ("UK +44 (0)20 7946 0958", "phone", "+44 (0)20 7946 0958"),
    ("host 192.168.1.20 is down", "ip", "192.168.1.20"),
    ("ping 10.0.0.1.", "ip", "10.0.0.1"),
    ("link-local fe80::1 only", "ip", "fe80::1"),
    ("v6 2001:db8:85a3::8a2e:370:7334 up", "ip", "2001:db8:85a3::8a2e:370:7334"),
    ("full 2001:0db8:0000:0000:0000:ff00:0042:8329", "ip", "2001:0db8:0000:0000:0000:ff00:0042:8329"),
    ("mapped ::ffff:192.0.2.1 here", "ip", "::ffff:192.0.2.1"),
    ("Ship to 123 Main St, Springfield, IL 62704 asap", "postal_address", "123 Main St, Springfield, IL 62704"),
    ("at 1600 Pennsylvania Avenue NW, Washington, DC 20500.", "postal_address",
     "1600 Pennsylvania Avenue NW, Washington, DC 20500"),
    ("lives at 742 Evergreen Terrace\nSpringfield, OR 97403\nUSA", "postal_address",
     "742 Evergreen Terrace\nSpringfield, OR 97403"),
    ("send to PO Box 12, Austin, TX 78701-1234", "postal_address", "PO Box 12, Austin, TX 78701-1234"),
    ("No. 10 Downing Street, London SW1A 2AA", "postal_address", "10 Downing Street, London SW1A 2AA"),
    ("221B Baker Street, London NW1 6XE", "postal_address", "221B Baker Street, London NW1 6XE"),
    ("card 4111 1111 1111 1111 charged", "credit_card", "4111 1111 1111 1111"),
    ("card 5555-5555-5555-4444", "credit_card", "5555-5555-5555-4444"),
    ("amex 378282246310005", "credit_card", "378282246310005"),
    ("amex 3782 822463 10005", "credit_card", "3782 822463 10005"),
    ("discover 6011111111111117", "credit_card", "6011111111111117"),
    ("IBAN DE89 3704 0044 0532 0130 00 ok", "iban", "DE89 3704 0044 0532 0130 00"),
    ("IBAN GB82WEST12345698765432", "iban", "GB82WEST12345698765432"),
    ("IBAN GB82 WEST 1234 5698 7654 32, thanks", "iban", "GB82 WEST 1234 5698 7654 32"),
    ("IBAN FR14 2004 1010 0505 0001 3M02 606", "iban", "FR14 2004 1010 0505 0001 3M02 606"),
    ("SSN 123-45-6789 on file", "us_ssn", "123-45-6789"),
    ("see https://github.com/jdoe for more", "url_personal", "https://github.com/jdoe"),
    ("paper https://example.edu/~smith/papers/a.pdf.", "url_personal", "https://example.edu/~smith/papers/a.pdf"),
    ("cv (https://www.linkedin.com/in/jane-doe-123/)", "url_personal", "https://www.linkedin.com/in/jane-doe-123/"),
    ("bare linkedin.com/in/bob-smith here", "url_personal", "linkedin.com/in/bob-smith"),
    ("profile https://forum.example.com/users/jdoe42", "url_personal", "https://forum.example.com/users/jdoe42"),
    ("post https://medium.com/@jane/my-post", "url_personal", "https://medium.com/@jane/my-post"),
    ("open file:///home/jdoe/notes.txt", "url_personal", "file:///home/jdoe/notes.txt"),
    ('  File "/home/jdoe/src/app.py", line 3', "url_personal", "jdoe"),
    (r"saved to C:\Users\jdoe\Desktop", "url_personal", "jdoe"),
    ("cd /Users/jane.doe/Library", "url_personal", "jane.doe"),
    (f"token {GH} leaked", "secret:github_token", GH),
    (f"pat={GH_PAT}", "secret:github_token", GH_PAT),
    (f"key id {AWS_ID}", "secret:aws_access_key_id", AWS_ID),
    (f"aws_secret_access_key = {AWS_SECRET}", "secret:aws_secret_key", AWS_SECRET),
    (f'{{"SecretAccessKey": "{AWS_SECRET}"}}', "secret:aws_secret_key", AWS_SECRET),
    ("AWS_SECRET_KEY=Zq8xL2pV9mN4bR7tY1wK", "secret:generic", "Zq8xL2pV9mN4bR7tY1wK"),
    (f"bot {SLACK}", "secret:slack_token", SLACK),
    (f"post to {HOOK} now", "secret:slack_webhook", HOOK),
    (f"maps {GOOGLE}", "secret:google_api_key", GOOGLE),
    (f"stripe {STRIPE}", "secret:stripe_key", STRIPE),
    (f"session {JWT}", "secret:jwt", JWT),
    (f"key:\n{PEM}\nbye", "secret:private_key", PEM),
    ("https://bob:hunter2xyz@example.com/x", "secret:url_password", "hunter2xyz"),
    ("DATABASE_URL=postgres://app:S3cretPa55@db.example.com:5432/app", "secret:connection_string", "S3cretPa55"),
    ("mongodb+srv://u:pa55w0rd@cluster0.example.net/db", "secret:connection_string", "pa55w0rd"),
    ("redis://:s3cr3tpw@cache:6379/0", "secret:connection_string", "s3cr3tpw"),
    ("Server=db;Database=app;User Id=sa;Password=Xy7!kq2;", "secret:connection_string", "Xy7!kq2"),
    ("cb https://api.example/cb?access_token=abc123def456&x=1", "secret:url_token", "abc123def456"),
    ("Authorization: Bearer 0a1b2c3d4e5f6a7b8c9d", "secret:auth_header", "0a1b2c3d4e5f6a7b8c9d"),
    ('password = "Tr0ub4dor&3"', "secret:password", "Tr0ub4dor&3"),
    ("DB_PASSWORD=s3cr3t!x", "secret:password", "s3cr3t!x"),
    ("  TOKEN: a8f5f167f44f4964e6c998dee827110c", "secret:token", "a8f5f167f44f4964e6c998dee827110c"),
    ('{"api_key": "9f86d081884c7d659a2feaa0c55ad015"}', "secret:api_key", "9f86d081884c7d659a2feaa0c55ad015"),
    ("client_secret = 'Zq8xL2pV9mN4bR7tY1wK'", "secret:generic", "Zq8xL2pV9mN4bR7tY1wK"),
    ("connect(host, password='hunter22')", "secret:password", "hunter22"),
]

NEGATIVE = [
    "look at it.so and we met at home, then at 5.30 at cafe",  # prose around " at "
    "maven: org/arquillian/arquillian-universe/1.1.13.7/arquillian-universe-1.1.13.7.pom",  # a version path
    "Signed-off-by: x\n-- \n1.6.4.2\n",  # git's version under a format-patch signature
    "commit 3f2a9c1d4e5b6a7980a1b2c3d4e5f60718293a4b and a1b2c3d",
    "fixed in PROJ-1234, see ABC-123-456 and PROJ-415-555-0134",
    "dates 2021-03-04, 04.03.2021, 2021/03/04, 03-04-2021 and 20210304",
    "times 12:30:45, 2021-03-04T12:30:45.123Z, 12:30 and +01:00",
    "version 1.2.3.4, v1.2.3.4, build 10.0.19041.1234, Python 3.11.7, release 2.0.0.1",
    "uuids 123e4567-e89b-12d3-a456-426614174000 and 12345678-1234-1234-1234-123456789012",
    "colors #ff00aa, #123456 and #abc",
    'data = "dGhpcyBpcyBub3QgYSBqd3QgYnV0IGJhc2U2NA==" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="',
    f"token-looking but not a JWT: {NOT_JWT}",
    "card 4111 1111 1111 1112 and 1234 5678 9012 3456",
    "IBAN DE89 3704 0044 0532 0130 01 has a wrong check",
    "SSNs 000-12-3456 666-12-3456 900-12-3456 123-00-4567 123-45-0000 078-05-1120",
    "password: <redacted>",
    'password: "${DB_PASSWORD}"',
    "token: xxx\npassword = changeme\nPASSWORD: ********",
    'api_key: "<your-api-key>"',
    "secret = os.environ['APP_SECRET']\npassword = get_password()\npasswd = fallback_getpass(prompt, stream)",
    "self.password = settings.DB_PASSWORD",
    "password = [SECRET:PASSWORD] and token: [SECRET:TOKEN]",
    "max_tokens: 1024\ntokenizer: bert-base-uncased\nauthor: John Smith\nPassword: Required",
    "password_field = 'password'\nauth_backend = 'django.contrib.auth.backends.ModelBackend'",
    "token_url = 'https://auth.example.com/oauth2/token'",
    "std::vector<int> v; a[1::2]; dead::beef; Foo::Bar; MAC 00:1a:2b:3c:4d:5e",
    "loopback 127.0.0.1, any 0.0.0.0, ::1 and 255.255.255.255",
    "OID 1.3.6.1.4.1.311 and section 1.2.3.4",
    "numbers 1 234 567 890 and 123 456 789 and 10-20-30-40-50",
    "hexdump 00 11 22 33 44 55 66 77 88 99",
    "epoch 1614816000 and 1614816000123 and 1614816000123456789",
    "diffstat +1000 -200 and @@ -12,7 +12,8 @@ and file.py:123:45",
    "https://github.com/apache/kafka https://github.com/features https://example.com/users/{id}",
    "https://example.com/users/me https://example.com/home/products https://example.com/user/login",
    "/home/runner/work/app, /home/ubuntu/.ssh, /Users/Shared/file, /root/x, /home/agent/repo",
    "Springfield, IL 62704 alone; 123 Main Street alone; SW1A 1AA alone",
    "look at this dot later",
    "jdbc:postgresql://db.example.com:5432/app?user=app",
]


@pytest.mark.parametrize(("text", "kind", "value"), POSITIVE, ids=[f"{k}:{v[:24]}" for _, k, v in POSITIVE])
def test_finds_exactly_the_span(text, kind, value):
    start = text.index(value)
    assert find(text) == [Span(start, start + len(value), kind, value)]


@pytest.mark.parametrize("text", NEGATIVE, ids=[t[:30] for t in NEGATIVE])
def test_finds_nothing(text):
    assert find(text) == []


@pytest.mark.parametrize("url, person", [
    ("http://twitter.com/olamy", "olamy"), ("https://www.linkedin.com/in/jroe", "jroe"),
    ("http://www.cdc.example.gov/~jsw/index.html", "jsw"), ("https://gitlab.com/jroe", "jroe"),
    ("https://medium.com/@jroe", "jroe"), ("https://example.org/users/jroe/settings", "jroe"),
    ("http://members.home.example.net/jroe/index.html", "jroe"),  # an ISP's member pages
    ("https://gist.github.com/jane-q-roe/501c4fb3150cbde58cc1", "jane-q-roe"),  # a gist
    ("https://github.com/org/repo", None)])
def test_the_person_in_a_personal_url(url, person):
    from privacy.pii import person_in_url

    seg = person_in_url(url)
    assert (url[seg[0]:seg[1]] if seg else None) == person


def test_private_key_without_end_and_json_escaped():
    truncated = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\n" + KEY_BODY
    assert [(s.kind, s.value) for s in find(truncated + "\n\nThanks!")] == [("secret:private_key", truncated)]
    escaped = json.dumps({"key": PEM})
    [span] = find(escaped)
    assert span.kind == "secret:private_key" and span.value == PEM.replace("\n", "\\n")


def test_specific_secret_beats_the_assignment_around_it():
    text = f'export GITHUB_TOKEN="{GH}"'
    assert [(s.kind, s.value) for s in find(text)] == [("secret:github_token", GH)]


def test_connection_password_beats_the_email_lookalike():
    text = "postgres://app:S3cretPa55@db.example.com/app"
    assert [s.kind for s in find(text)] == ["secret:connection_string"]


def test_secret_inside_a_personal_url_keeps_the_url_redacted():
    text = f"see https://example.com/users/jdoe?access_token=abc123def456&x=1 and https://github.com/jdoe?t={GH}"
    assert redact(text) == ("see [URL_PERSONAL][SECRET:URL_TOKEN][URL_PERSONAL] and "
                            "[URL_PERSONAL][SECRET:GITHUB_TOKEN]")


def test_glued_urls_are_separate_urls():
    text = "postgres://a:Pw0rd123@h/db,redis://:s3cr3tpw@cache:6379/0"
    assert [(s.kind, s.value) for s in find(text)] == [("secret:connection_string", "Pw0rd123"),
                                                       ("secret:connection_string", "s3cr3tpw")]


def test_longest_wins_within_a_tier():
    # The IPv4 tail of a mapped IPv6 address and the home path inside a personal file:// URL lose.
    assert [s.value for s in find("x ::ffff:192.0.2.1 y")] == ["::ffff:192.0.2.1"]
    assert [s.value for s in find("file:///home/jdoe/a.txt")] == ["file:///home/jdoe/a.txt"]


def test_ip_and_phone_rules_at_edges():
    assert find("v 10.1.2.3") == [] and find("version: 10.1.2.3") == []
    assert [s.value for s in find("from 10.1.2.3:8080/x")] == ["10.1.2.3"]
    assert find("1.2.3.256") == []
    assert [s.kind for s in find("dial +1 415 555 0134 5 times")] == []  # glued to another digit group


def test_redact_typed_placeholders_and_offsets():
    text = f"Mail jane@example.com, call +1 415 555 0134, token {GH}, key {AWS_ID}."
    assert redact(text) == ("Mail [EMAIL], call [PHONE], token [SECRET:GITHUB_TOKEN], "
                            "key [SECRET:AWS_ACCESS_KEY_ID].")
    assert redact(text, placeholder=lambda s: f"<{s.kind}:{s.end - s.start}>") == (
        f"Mail <email:16>, call <phone:15>, token <secret:github_token:{len(GH)}>, "
        f"key <secret:aws_access_key_id:{len(AWS_ID)}>.")
    assert default_placeholder(Span(0, 1, "secret:jwt", "x")) == "[SECRET:JWT]"
    assert redact("") == "" and find("") == []


def test_redact_keeps_the_rest_of_the_text():
    text = 'db: {host: 10.0.0.5, password: "Tr0ub4dor&3", user: app}'
    assert redact(text) == 'db: {host: [IP], password: "[SECRET:PASSWORD]", user: app}'


def test_redacting_twice_changes_nothing_and_leaves_nothing():
    everything = "\n".join(t for t, _, _ in POSITIVE)
    once = redact(everything)
    assert redact(once) == once
    assert find(once) == []
    assert all(v not in once for _, _, v in POSITIVE if len(v) > 4)


def test_many_findings_in_one_text_keep_exact_offsets():
    text = "\n".join(t for t, _, _ in POSITIVE)
    spans = find(text)
    assert len(spans) == len(POSITIVE)
    assert all(text[s.start:s.end] == s.value for s in spans)
    assert [(s.kind, s.value) for s in spans] == [(k, v) for _, k, v in POSITIVE]


PATHOLOGICAL = {
    "letters": "a", "digits": "1", "digit groups": "12 ", "at signs": "ab@", "base64": "QUJDRGVmZ2g0NTY3",
    "jwt-ish": "eyJabcdefgh.", "colons": "fe80:", "assignments": "token: ", "urls": "http://a/~b ",
    "state+zip": "IL 62704 ", "key blocks": "-----BEGIN PRIVATE KEY-----\n", "dashes": "123-45-",
    "plus": "+1 ", "zeros": "00 ", "obfuscated": " dot [at] ",
}


@pytest.mark.parametrize("unit", list(PATHOLOGICAL.values()), ids=list(PATHOLOGICAL))
def test_two_megabyte_lines_complete(unit):
    line = unit * (2_000_000 // len(unit))
    spans = find(line)
    assert all(0 <= a.start < a.end <= len(line) for a in spans)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))


def test_two_megabyte_line_of_findings():
    unit = f"x@y.co 10.0.0.1 +1 415 555 0134 {GH} "
    n = 2_000_000 // len(unit)
    spans = find(unit * n)
    assert len(spans) == 4 * n


def test_fifty_megabyte_text_completes():
    clean = ("The build on worker-7 failed at 2021-03-04 12:30:45 (PROJ-1234, commit 3f2a9c1d, v2.3.1) after "
             "4031 ms; logs in /home/runner/work/app, retry with timeout=30 and max_tokens: 1024.\n")
    dirty = "Ping jane.doe@example.com or +44 20 7946 0958 from 10.0.4.7.\n"
    block = clean * 30 + dirty
    n = 50_000_000 // len(block) + 1
    spans = find(block * n)
    assert len(spans) == 3 * n
    assert {s.kind for s in spans} == {"ip", "email", "phone"}


def test_offsets_are_str_indices_also_for_non_ascii():
    # "İ".lower() is two characters long: keyword search must still report offsets into the original.
    text = "İstanbul 🙂 café — mail zoe@example.com, PASSWORD = 'Ünïcødé-9x'"
    assert [(s.kind, s.value, text[s.start:s.end]) for s in find(text)] == [
        ("email", "zoe@example.com", "zoe@example.com"), ("secret:password", "Ünïcødé-9x", "Ünïcødé-9x")]


FRAGMENTS = [t for t, _, _ in POSITIVE] + NEGATIVE + ["\n", " ", "@", ":", "-", ".", "[", "]", "\\", "://", "::"]


def _check_find_and_redact(text: str) -> None:
    spans = find(text)
    assert all(0 <= s.start < s.end <= len(text) and text[s.start:s.end] == s.value for s in spans)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))
    out = redact(text)
    placeholders = [default_placeholder(s) for s in spans]
    assert all(len(p) <= 32 for p in placeholders)
    assert len(out) == len(text) - sum(s.end - s.start for s in spans) + sum(map(len, placeholders))
    assert len(out) <= len(text) + 32 * len(spans)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_property_random_text(text):
    _check_find_and_redact(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=12).map("".join))
def test_property_near_misses(text):
    _check_find_and_redact(text)


# ------------------------------------------------------------------------------------------------ NER

class _FakeNlp:
    """Stands in for a spaCy Language: tags capitalised pairs as PERSON and a few cities as GPE."""

    max_length = 1_000_000

    def __init__(self):
        self.calls = []

    def pipe(self, items, as_tuples, batch_size, n_process):
        self.calls.append((as_tuples, batch_size, n_process))
        for text, ctx in items:
            ents = [SimpleNamespace(start_char=m.start(), end_char=m.end(), text=m.group(0),
                                    label_="GPE" if m.group(0) in ("Paris", "Lagos") else
                                    "ORG" if m.group(0) == "Acme" else "PERSON")
                    for m in re.finditer(r"Paris|Lagos|Acme|[A-Z][a-z]+ [A-Z][a-z]+", text)]
            yield SimpleNamespace(ents=ents), ctx


def test_ner_spans_keep_offsets_across_chunks_and_texts():
    texts = ["", "Alice Smith met Bob Jones in Paris.", ("filler words here " * 40 + "Carol White in Lagos. ") * 5,
             "Acme only", ""]
    nlp = _FakeNlp()
    out = list(Ner(nlp, "fake", chunk_chars=120).people_and_places(iter(texts), batch_size=7, n_process=1))
    assert len(out) == len(texts)
    assert out[0] == [] and out[3] == [] and out[4] == []
    assert [(s.kind, s.value) for s in out[1]] == [("person", "Alice Smith"), ("person", "Bob Jones"),
                                                   ("place", "Paris")]
    assert [s.value for s in out[2]].count("Carol White") == 5 and [s.value for s in out[2]].count("Lagos") == 5
    assert all(texts[i][s.start:s.end] == s.value for i, spans in enumerate(out) for s in spans)
    assert nlp.calls == [(True, 7, 1)]


def test_ner_of_no_texts_yields_nothing():
    assert list(Ner(_FakeNlp(), "fake").people_and_places([])) == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab \n\t"), max_size=400), st.integers(1, 50))
def test_chunks_cover_text_in_order(text, limit):
    pieces = list(chunks(text, limit))
    assert "".join(p for _, p in pieces) == text
    assert all(len(p) <= limit for _, p in pieces)
    assert all(text[o:o + len(p)] == p for o, p in pieces)
    assert len(pieces) >= 1


def test_load_ner_reports_a_missing_model_in_one_line():
    assert load_ner("no_such_model_xyz") is None
    status = ner_status()
    assert "\n" not in status and "not installed" in status
    assert load_ner(None) is None and "no model" in ner_status()


def test_importing_ner_loads_no_spacy():
    code = "import sys, privacy.ner, privacy.pii; print('spacy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_real_model_runs_only_ner(real_ner):
    names = real_ner.nlp.pipe_names
    assert "ner" in names and not {"parser", "tagger", "lemmatizer", "attribute_ruler"} & set(names)
    assert ner_status().startswith("NER on:")


def test_real_model_finds_people_and_places(real_ner):
    text = "Yesterday Barack Obama flew from Chicago to Paris with Angela Merkel."
    [spans] = list(real_ner.people_and_places([text]))
    found = {(s.kind, s.value) for s in spans}
    assert ("person", "Barack Obama") in found and ("place", "Paris") in found
    assert all(text[s.start:s.end] == s.value for s in spans)


def test_real_model_chunked_long_text_keeps_offsets(real_ner):
    text = "Angela Merkel visited Berlin on Monday. " * 200
    [spans] = list(Ner(real_ner.nlp, real_ner.model, chunk_chars=500).people_and_places([text], batch_size=8))
    assert sum(s.value == "Berlin" for s in spans) >= 150
    assert all(text[s.start:s.end] == s.value for s in spans)


def test_real_spacy_never_downloads(real_ner, monkeypatch):
    import spacy.cli

    monkeypatch.setattr(spacy.cli, "download", lambda *a, **k: pytest.fail("load_ner tried to download"))
    assert load_ner("en_core_web_xx_missing") is None
