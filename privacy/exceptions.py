"""What looks like personal data and is not: the one list the anonymizer and the leak audit share.

Why: the audit refused 200+ "e-mail addresses" of a real Jira + git export that were image file names in the
commits' file lists (`Default@2x.png`), which the anonymizer left alone. Two rule sets disagree sooner or later;
so every recognizer both of them call asks this module, and neither replaces nor refuses what it excuses
(convention 20: the stage before a check must be able to fix what the check refuses).

What is excused (each a shape, never a list of strings):
- asset names: a file name with a scale or resolution suffix after "@" (`icon@2x.png`, `logo@3x~ipad.png`,
  `appicon-72@2x.png`), or whose "domain" ends with a file extension that is no top-level domain
  (`sprite@hover.svg`, `shadow@dark.css`);
- package scopes: "@scope/package" (npm, Maven-like coordinates): the word after "@" is a namespace, not a
  mention, when "/name" follows;
- version specifiers: "name@1.2.3", "name@^2", "name@latest" (npm, pip's `pkg @ url` aside): the word before
  "@" is a package, not a mailbox;
- Message-IDs: an address-shaped id inside angle brackets on a Message-ID/In-Reply-To/References line, or one
  whose local part is machine-made (8+ digits split by separators: `<20010614123456.ABC12@host>`); a person's
  address there is a person's all the same if the identity graph knows it (the known strings still count);
- our own output (pseudonyms, placeholders, the fake domains) is the dataset's, not this module's: see
  `privacy.audit.Rules._ours`, which the anonymizer's last pass calls too.

Invariant: every function here reads only the text around a span (a line at most): cheap, deterministic.
"""

from __future__ import annotations

import re

# File extensions that are no top-level domain (none of them is delegated in the root zone): a "domain" ending
# in one is a file name. Extensions that are also TLDs (.zip, .mov, .py, .md, .sh, .pl, .rs, .ai, .so) are not
# here: an address at such a domain stays an address.
FILE_EXTENSIONS = frozenset("""
    png jpg jpeg gif svg svgz webp ico icns bmp tif tiff psd xcf heic avif pdf eps mp3 wav ogg oga m4a aac flac
    mp4 m4v webm avi mkv ttf otf woff woff2 eot json jsonl xml plist xib nib storyboard strings css scss sass less
    js mjs cjs jsx tsx html htm xhtml txt csv tsv yml yaml ini cfg conf toml lock gz tgz bz2 xz jar war class dll
    exe bin dat obj lib dylib rb java kt swift gradle properties tmpl erb ejs hbs vue php asp aspx jsp
""".split())
# "@2x", "@3x", "@1.5x", "@2x~ipad", "@2x-dark": the scale suffix of an image asset (Apple, Android, the web)
_SCALE = re.compile(r"@\d(?:\.\d)?x(?=[~._-]|$)", re.I)
_VERSION = re.compile(r"@(?:[~^<>=]{0,2}v?\d+(?:\.[\dx*]+){0,3}(?:[-+][\w.]+)?|latest|next|beta|canary|"
                      r"stable|lts)(?![\w@])", re.I)
_SCOPE_AFTER = re.compile(r"/[a-z0-9][\w.-]{0,213}", re.I)
_ID_KEYS = re.compile(r"(?i)(?:message-id|in-reply-to|references|msg-id|content-id)\s*:")


def asset_name(value: str) -> bool:
    """Whether an address-shaped `value` ("local@domain") is a file name: a scale suffix after "@"
    (`Default@2x.png`) or a "domain" whose last label is a file extension that is no TLD."""
    local, at, domain = value.rpartition("@")
    if not at or not local:
        return False
    if _SCALE.match("@" + domain):
        return True
    return domain.rsplit(".", 1)[-1].casefold() in FILE_EXTENSIONS


def package_scope(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]`, right after an "@", is a package scope ("@babel/core"): "/name" follows."""
    return start > 0 and text[start - 1] == "@" and _SCOPE_AFTER.match(text, end) is not None


def version_spec(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` is a package name with a version after "@" ("lodash@4.17.21", "react@^18")."""
    return _VERSION.match(text, end) is not None


def message_id(text: str, start: int, end: int) -> bool:
    """Whether the address-shaped `text[start:end]` is a Message-ID: inside "<...>" on a Message-ID,
    In-Reply-To or References line, or inside "<...>" with a machine-made local part."""
    if not (start > 0 and text[start - 1] == "<" and text[end:end + 1] == ">"):
        return False
    line_start = text.rfind("\n", 0, start) + 1
    if _ID_KEYS.search(text, line_start, start):
        return True
    local = text[start:end].rpartition("@")[0]
    parts = [p for p in re.split(r"[.$=_-]", local) if p]
    digits = sum(c.isdigit() for c in local)
    return digits >= 8 and len(parts) >= 2 and any(c.isalpha() for c in local)


def email_excused(text: str, start: int, end: int) -> str | None:
    """Why the address-shaped `text[start:end]` is no person's address (see the module docstring), or None."""
    value = text[start:end]
    if asset_name(value):
        return "asset name"
    if message_id(text, start, end):
        return "message id"
    return None


def handle_excused(text: str, start: int, end: int) -> str | None:
    """Why the "@"-cue around the word `text[start:end]` is no user name's ("@scope/pkg", "pkg@1.2.3",
    "icon@2x.png"), or None."""
    if package_scope(text, start, end):
        return "package scope"
    if text[end:end + 1] == "@":
        if version_spec(text, start, end):
            return "version specifier"
        token = _TOKEN.match(text, start)
        if token and asset_name(token.group(0)):
            return "asset name"
    return None


_TOKEN = re.compile(r"[^\s\"'<>()\[\],;]{1,200}")
