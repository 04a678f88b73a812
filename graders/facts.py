"""Grounded facts of a reply: the concrete things it states that a grader can look for in another reply.

A communication task (e-mail reply, chat answer, resolution note) is graded by many small checks, one per
fact of the real reply: an issue key, a version, a file, a command, a URL, a number, a date, a commit or a
named code artifact (an identifier). A fact is gradable only when the world at the task's cutoff supports it
(the agent could have found it there), and not when the request itself states it (echoing the request back
must earn nothing).

Invariants:
- Extraction is a pure function of the text: the same reply always gives the same facts, in order of first
  appearance, without duplicates (compared case-folded); placeholders the anonymizer left (`[PERSON]`,
  `[SECRET:...]`) are never facts, and neither is a URL or path cut short by one.
- A span belongs to one fact: the digits of a version, a URL or a file path are not numbers of their own.
- A Message-ID a reply points to (`<id@host>`) is a fact of kind "message" (the world supports it when it
  holds that mail at the cutoff); its hex part is not a commit.
- `mentions` is the one matcher both the checks and the builders use: case-insensitive, on word boundaries
  (`3.0.0` does not match inside `13.0.0` or `3.0.0.1`, `ALOY-12` not inside `ALOY-123`), URLs without
  scheme and trailing slash, whitespace collapsed, thousands separators ignored.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

KINDS = ("issue_key", "commit", "url", "message", "file", "command", "identifier", "version", "ref", "person", "date",
         "number")
MAX_FACTS = 12

PLACEHOLDER = re.compile(r"\[[A-Z][A-Z_]{1,30}(?::[A-Z0-9_]{1,40})?\]")
_KEY = re.compile(r"(?<![A-Za-z0-9_-])([A-Z][A-Z0-9_]{0,19}-[1-9][0-9]{0,8})(?![A-Za-z0-9_]|-[0-9])")
_URL = re.compile(r"https?://[^\s<>\"'`\[\]{}|\\^()]+(?:\([^\s()]*\)[^\s<>\"'`\[\]{}|\\^()]*)*", re.I)
_BACKTICK = re.compile(r"`([^`\n]{2,120})`")
_MONO = re.compile(r"\{\{([^{}\n]{2,120})\}\}")          # Jira's {{monospace}}
_PROMPT = re.compile(r"(?m)^[ \t]*[$#>] ((?:[\w./-]+)(?: [^\n]{0,118})?)$")
_EXT = (r"(?:py|pyx|pyi|c|h|cc|cpp|hpp|cxx|java|kt|scala|js|jsx|ts|tsx|mjs|json|xml|ya?ml|toml|ini|cfg|conf|md|rst|"
        r"txt|sh|bash|bat|ps1|rb|go|rs|php|pl|r|rd|html?|css|scss|sql|gradle|pom|properties|lock|mk|cmake|vm|"
        r"jar|war|zip|gz|tgz|csv|log|patch|diff|proto|swift|m|mm|cs|vb|lua|ex|exs|erl|hs|clj|el|vim|dockerfile)")
_PATH = re.compile(r"(?<![\w/.~:@-])(?:~?/)?(?:[\w.-]+/)+[\w.-]*\w\.[A-Za-z][A-Za-z0-9]{0,9}(?![\w/])")
_FILE = re.compile(r"(?<![\w/.@-])[\w-]+(?:\.[\w-]+)*\." + _EXT + r"(?![\w/.-]*\w)", re.I)
_VERSION = re.compile(r"(?<![\w.-])v?\d+\.\d+(?:\.\d+){0,3}(?:-(?:alpha|beta|rc|m|snapshot|final|ga|dev|master|"
                      r"preview|pre|post)[.-]?\d*(?:\.\d+)*)?(?![\w-]|\.\w)", re.I)
_REF = re.compile(r"(?<![\w&#/])(?:([\w.-]+/[\w.-]+))?#(\d{1,6})(?!\w)")
_SHA = re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w@-])")
# a Message-ID, not an address in angle brackets: its left part carries a run of digits (hex ids, timestamps)
# (or the anonymizer's own form, `<hex@message-id.invalid>`, whatever digits its salted hash happens to hold)
_MESSAGE_ID = re.compile(r"<((?=[^<>@\s]*\d{3})[^<>@\s]{6,200}@(?![^<>@\s]*redacted)[^<>@\s]{2,200}"
                         r"|[0-9a-f]{16,64}@message-id\.invalid)>")
_SNAKE = re.compile(r"(?<![\w.$-])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?:\(\))?(?![\w-])")
_CAMEL = re.compile(r"(?<![\w.$-])(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*){2,}|[A-Z][a-z0-9]{2,}[A-Z][a-z0-9]{2,}"
                    r"|[a-z]{2,}(?:[A-Z][a-z0-9]+)+)(?:\(\))?(?![\w-])")
_DOTTED = re.compile(r"(?<![\w.$/-])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\(\)|(?<![\w.$/-])[A-Z]\w*(?:\.[A-Za-z_]\w*){1,4}"
                     r"(?![\w(/-])")
_CALL = re.compile(r"(?<![\w.$])[A-Za-z_]\w{2,}\(\)")
_MONTHS = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
           r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_DATE = re.compile(r"(?<![\w-])(?:\d{4}-\d{2}-\d{2}|" + _MONTHS + r"\.? \d{1,2}(?:st|nd|rd|th)?(?:,? \d{4})?|"
                   r"\d{1,2}(?:st|nd|rd|th)? (?:of )?" + _MONTHS + r"(?:,? \d{4})?)(?![\w-])", re.I)
_NUMBER = re.compile(r"(?<![\w.,/#:$-])(?:\$\s?\d{1,3}(?:,\d{3})+(?:\.\d+)?|\$\s?\d+(?:\.\d+)?|"
                     r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?\s?"
                     r"(?:%|ms|s|sec|secs|seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|kb|mb|gb|tb|k|x)|"
                     r"\d{3,}(?:\.\d+)?)(?![\w.,]*\w)", re.I)
_YEAR = re.compile(r"^(?:19|20)\d\d$")
# CamelCase words that are product names, not artifacts of a company's own work
_BRANDS = frozenset("""github gitlab bitbucket javascript typescript coffeescript postgresql mysql sqlite mongodb
linkedin youtube facebook powerpoint wordpress stackoverflow openssl openssh macos ios iphone ipad ipod
freebsd openbsd netbsd virtualbox vmware jetbrains intellij pycharm webstorm visualstudio sourceforge
graphql nodejs npmjs dockerhub openjdk mariadb redhat ubuntu devops""".split())
_REDACTED_HOST = re.compile(r"^[^/]*\bredacted\.", re.I)     # a host the anonymizer replaced: nothing to find


@dataclass(frozen=True)
class Fact:
    """One fact: its kind, the text as the reply states it, and other spellings a grader accepts."""

    kind: str
    text: str
    variants: tuple[str, ...] = field(default=())

    def spellings(self) -> tuple[str, ...]:
        return (self.text, *self.variants)

    def to_json(self) -> dict:
        return {"kind": self.kind, "text": self.text, "variants": list(self.variants)}


def _clean_url(url: str) -> str | None:
    url = url.rstrip(".,;:!?'\"")
    while url.endswith(")") and url.count("(") < url.count(")"):
        url = url[:-1]
    host_path = re.sub(r"^https?://", "", url, flags=re.I)
    if "/" not in host_path.strip("/") and "?" not in host_path:
        return None        # a bare host is not a fact of its own
    return url


def _url_variants(url: str) -> tuple[str, ...]:
    bare = re.sub(r"^https?://", "", url, flags=re.I).rstrip("/")
    return (bare,) if bare != url else ()


def extract(text: str | None, *, limit: int = MAX_FACTS) -> list[Fact]:
    """The facts `text` states, most specific kinds first, at most `limit` (see the module docstring)."""
    if not text:
        return []
    masked = list(text)
    found: list[tuple[int, Fact]] = []

    def take(m: re.Match, kind: str, value: str | None = None, variants: tuple[str, ...] = (),
             group: int = 0) -> None:
        start, end = m.span(group)
        value = (value if value is not None else m.group(group)).strip()
        if not value or "\0" in "".join(masked[start:end]):
            return
        after, before = text[end:end + 1], text[start - 1:start] if start else ""
        if PLACEHOLDER.search(value) or (kind in ("url", "file", "identifier", "version") and "[" in after + before) \
                or before == "]":
            return                       # cut short by a placeholder: not what the reply said
        found.append((start, Fact(kind, value, variants)))
        masked[start:end] = "\0" * (end - start)

    def scan(pattern: re.Pattern, kind: str, **kw) -> None:
        for m in pattern.finditer("".join(masked)):
            take(m, kind, **kw)

    for m in _URL.finditer(text):
        url = _clean_url(m.group(0))
        if url and not _REDACTED_HOST.match(re.sub(r"^https?://", "", url, flags=re.I)):
            end = m.start() + len(url)
            if text[end:end + 1] != "[":
                found.append((m.start(), Fact("url", url, _url_variants(url))))
            masked[m.start():m.end()] = "\0" * (m.end() - m.start())
    for m in _MESSAGE_ID.finditer("".join(masked)):
        take(m, "message", group=1)
    for pattern in (_BACKTICK, _MONO):
        for m in pattern.finditer("".join(masked)):
            inner = " ".join(m.group(1).split())
            if len(inner) < 4:
                continue                 # `-g`, `x`: too short to say anything by itself
            kind = "command" if " " in inner or inner.startswith(("-", "./")) else _code_kind(inner)
            if kind:
                take(m, kind, inner, group=1)
    for m in _PROMPT.finditer("".join(masked)):
        take(m, "command", " ".join(m.group(1).split()), group=1)
    for m in _KEY.finditer("".join(masked)):
        take(m, "issue_key", group=1)
    for m in _PATH.finditer("".join(masked)):
        base = m.group(0).rsplit("/", 1)[-1]
        take(m, "file", variants=(base,) if len(base) >= 8 and base != m.group(0) else ())
    scan(_FILE, "file")
    scan(_SHA, "commit")
    scan(_VERSION, "version")
    for m in _REF.finditer("".join(masked)):
        take(m, "ref")
    for pattern in (_DOTTED, _SNAKE, _CAMEL, _CALL):
        for m in pattern.finditer("".join(masked)):
            name = m.group(0)
            if name.rstrip("()").casefold() not in _BRANDS and not _YEAR.match(name):
                bare = name[:-2] if name.endswith("()") else ""
                # `cache_hit_ratio` names the call too; `port` alone is an everyday word
                distinctive = bool(bare) and ("_" in bare or "." in bare or re.search(r"[a-z][A-Z]", bare)
                                               or len(bare) >= 8)
                take(m, "identifier", variants=(bare,) if distinctive else ())
    scan(_DATE, "date")
    for m in _NUMBER.finditer("".join(masked)):
        if not _YEAR.match(m.group(0)):
            take(m, "number")
    commits = re.findall(r"[0-9a-f]{8,40}", text.casefold())   # a short SHA of digits only is a commit too
    found = [(at, Fact("commit", f.text) if f.kind == "number" and len(f.text) >= 7 and any(
        c.startswith(f.text) and c != f.text for c in commits) else f) for at, f in found]
    out: dict[str, Fact] = {}
    for _, fact in sorted(found, key=lambda x: x[0]):
        out.setdefault(fact.text.casefold(), fact)
    facts = list(out.values())
    facts.sort(key=lambda f: KINDS.index(f.kind))     # stable: by kind, then order of appearance
    return facts[:limit]


def _code_kind(inner: str) -> str | None:
    if _KEY.fullmatch(inner):
        return "issue_key"
    if _VERSION.fullmatch(inner):
        return "version"
    if "/" in inner or _FILE.fullmatch(inner):
        return "file"
    if re.fullmatch(r"[\w.:()<>-]{3,}", inner):
        return "identifier"
    return None


# --- matching -----------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    text = " ".join(text.casefold().split())
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)


def mentions(text: str | None, fact: Fact | dict) -> bool:
    """Does `text` state `fact` (any of its spellings)? See the module docstring."""
    if not text:
        return False
    if isinstance(fact, dict):
        fact = Fact(fact["kind"], fact["text"], tuple(fact.get("variants") or ()))
    hay = _norm(text)
    if fact.kind == "url":
        hay = re.sub(r"https?://", "", hay)
    for spelling in fact.spellings():
        needle = _norm(spelling)
        if fact.kind == "url":
            needle = re.sub(r"^https?://", "", needle).rstrip("/")
        if fact.kind == "ref":
            needle = needle.split("#", 1)[-1]
            if re.search(rf"#{re.escape(needle)}(?!\w)", hay):
                return True
            continue
        if not needle:
            continue
        tail = r"(?![\w])(?!\.\d)" if fact.kind in ("version", "number") else r"(?![\w])"
        head = r"(?<![\w])" if needle[0].isalnum() or needle[0] == "_" else ""
        if re.search(head + re.escape(needle) + (tail if needle[-1].isalnum() or needle[-1] in "_)" else ""), hay):
            return True
    return False


# The shapes of the kinds a reply lists, found as `mentions` finds a fact: on the normalized text, any non-word
# character a boundary. The extractor's own boundaries are stricter (a version after a dash, a key after a word and
# a dash, a path after a colon, a value inside a link are no facts of it), so a list of values written that way
# was invisible to the precision check (graders.communication.others) while `mentions` credited the one it held.
_SHAPES = {
    "version": re.compile(r"(?<![\w])v?\d+\.\d+(?:\.\d+){0,3}(?:-(?:alpha|beta|rc|m|snapshot|final|ga|dev|master|"
                          r"preview|pre|post)[.-]?\d*(?:\.\d+)*)?(?![\w])(?!\.\d)"),
    "issue_key": re.compile(r"(?<![\w])[a-z][a-z0-9_]{0,19}-[1-9][0-9]{0,8}(?![\w])(?!-[0-9])"),
    "commit": re.compile(r"(?<![\w])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w])"),
    "file": re.compile(r"(?<![\w])(?:(?:[\w.-]+/)+[\w.-]*\w\.[a-z][a-z0-9]{0,9}|[\w-]+(?:\.[\w-]+)*\."
                       + _EXT + r")(?![\w])"),
}
SHAPED = tuple(_SHAPES)


def values_named(text: str | None, kind: str) -> set[str]:
    """The values of `kind` (`key_of`) the text names wherever `mentions` would find one: the extractor's facts of
    that kind and, for versions, issue keys, commits and files, every span of the kind's shape on the matcher's
    boundaries (inside a link or a path, after a dash or a colon, across spaced-out text). What a precision check
    counts must be at least what the matcher credits."""
    if not text:
        return set()
    return set(_values_named(text, kind))


_JOINER = re.compile(r"(?<=[^\w\s./])(?=\w)")     # after a dash, colon, equals sign... before a word character


@functools.lru_cache(maxsize=256)
def _values_named(text: str, kind: str) -> frozenset[str]:
    # the extractor on the text and on every part of a token that follows a joining character (`release-foo_bar`
    # names `foo_bar` to the matcher), then the kind's shape on the matcher's boundaries
    parts = [w[m.start():] for w in text.split() if _JOINER.search(w) for m in _JOINER.finditer(w)]
    out = {key_of(f.kind, f.text) for f in extract(text + "\n" + "\n".join(parts), limit=10**6) if f.kind == kind}
    shape = _SHAPES.get(kind)
    if shape is not None:
        out |= {key_of(kind, m.group(0)) for m in shape.finditer(_norm(text))}
    return frozenset(out)


def stated_in(facts: Iterable[Fact], *texts: str | None) -> list[Fact]:
    """The facts any of `texts` states."""
    return [f for f in facts if any(mentions(t, f) for t in texts if t)]


def supported(view, fact: Fact) -> bool:
    """Does the world at the view's cutoff hold the fact (an issue that exists then, the text in a document
    reachable then, or for a person, a document they wrote by then)? The agent could have found it. Only
    content counts (a message, a ticket, a comment; the families add commits and files): a notice a machine
    wrote (a channel join, a bot's post: `automated`) is no evidence that anyone knew the fact."""
    if view is None:
        return False
    if fact.kind == "issue_key" and view.issue(fact.text) is not None:
        return True
    if fact.kind == "message":
        return view.mail(fact.text) is not None
    if fact.kind == "ref":
        repo, _, number = fact.text.rpartition("#")
        keys = [f"{repo}#{number}"] if repo else []
        if any(view.issue(k) is not None for k in keys):
            return True
        return bool(view.token_hits(f"#{number}"))
    if fact.kind == "person" and any(view.authored(s, content=True) for s in fact.spellings() if " " in s.strip()):
        return True      # by the full name of someone who wrote in the world by then (a sender, a commenter)
    # only what people wrote is evidence: a channel-join notice or a bot's post names a person, it says nothing
    return any(view.token_hits(s, content=True) for s in fact.spellings() if len(s) >= 2)


def key_of(kind: str, text: str) -> str:
    """The value a spelling counts under: case-folded; a URL without its scheme and trailing slash, a version
    without its leading `v`."""
    k = " ".join(text.casefold().split())
    if kind == "url":
        k = re.sub(r"^https?://", "", k).rstrip("/")
    elif kind == "version":
        k = k.lstrip("v")
    return k
