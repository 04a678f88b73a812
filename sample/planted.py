"""Structured identifiers and secrets planted in the sample company, each recorded with exact offsets.

The privacy benchmark scores recall per type on these. Each one is written the way people write it (a
log excerpt, a traceback, a refund request, a committed .env file, a token pasted in chat), in a form the
recognizers of privacy/pii.py are meant to catch, and recorded with the span pii.py reports:
- ip: IPv4 in private and documentation ranges (10/8, 172.16/12, 192.168/16, 192.0.2/24, 198.51.100/24,
  203.0.113/24); IPv6 in the documentation prefix 2001:db8::/32 (`2001:db8::17`, `2001:db8:a:b::c`, 8 groups).
- postal_address: US `1600 Example Ave, Suite 200, Springfield, IL 62704` and UK `Flat 3, 12 Example Road,
  London N1 9GU`, on one line or (signatures, chat) on several; generic or fictional streets and towns.
- url_personal: a GitHub or LinkedIn profile URL (the whole URL); the user name in `/home/<user>/` and
  `/Users/<user>/` paths of a traceback (the name only: pii.py keeps the rest of the trace).
- credit_card: Luhn-valid numbers on issuers' test prefixes (411111, 424242, 555555, 222300, 378282, 601111,
  305693), 4-4-4-4 with spaces, dashes or none, Amex 4-6-5, Diners 4-6-4.
- iban: GB, DE, FR and NL account numbers with ISO 7064 mod-97 check digits, in groups of 4 or compact.
- us_ssn: AAA-GG-SSSS, area 001-899 but not 666, group 01-99, serial 0001-9999, never the advertising numbers.
- secret:<kind>, kinds as pii.py names them: private_key (the whole BEGIN..END block of random bytes),
  aws_access_key_id (AKIA + 16 base32), aws_secret_key (40 chars), github_token (ghp_ + 36), slack_token
  (xoxb-), google_api_key (AIzaSy + 33), stripe_key (sk_live_fake + 24: format-valid, visibly fake), jwt
  (HS256 header, claims, random signature), url_password (the PASS of https|smtp://user:PASS@host),
  connection_string (the password of a postgres URL or of an ADO `...;Password=...;` string), password
  (the value of `password = "..."`-style assignments in code and config).

Where, per scale unit (so every count is exactly proportional to the scale):
    Jira   three issue descriptions get a gateway log (2 IPv4, 1 IPv6, a JWT in a curl line), a traceback
           from the reporter's home directory (2 home paths) and a pip command with an index password; two
           comments (other descriptions if there are too few) get a refund note about a customer (card, IBAN,
           address, SSN) and a CI note (GitHub token, GitHub profile, Google key in a Maps URL)
    git    a commit adds deploy/staging.{env,yml,ini} (the format turns with the unit: IPv6, IPv4, postgres
           URL, AWS key id and secret, password, Slack token, Google key, Stripe key) and its message names a
           GitHub token; the next commit deletes the file and its message names the AWS key id. Each such
           commit adds exactly one file, so (file, location) still names one text, as for every location
    mail   support@: a customer's double-charge complaint (card, IBAN, address, SSN; a signature with a
           multi-line address and a LinkedIn URL), answered by support quoting it; dev@: a developer pastes
           a private key, a host IP and an ADO connection string, the lead answers without quoting
    Slack  #dev: a curl with a JWT (a reply quotes a psycopg2 call with host IP and password), a bot token
           (a reply asks to rotate it), a private key, an AWS key pair, a git remote with a password and a
           psql URL, a Stripe and a Google key; #general: a GitHub profile, a staff member's home address;
           #support: a customer's new address and client IP

Invariants:
- Every random value comes from the `Planter`'s own stream, which is seeded once the company's plan is
  complete, so planting changes no choice of the plan; formats turn in a fixed order, so every variant
  above appears at scale 1.
- No random token holds anything shaped like an issue key (`[A-Z][A-Z0-9]+-\\d+`) or an abbreviated SHA
  (a 7-40 character lower-case hex word with a letter), so the link truth stays complete.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
import re
import string
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from sample.roster import DAY, HOUR, Outsider, Person, Pii, Text, ascii_fold

if TYPE_CHECKING:
    from sample.channels import Channels
    from sample.company import Issue, _Company

ALNUM = string.ascii_letters + string.digits
BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
KEY_LIKE = re.compile(r"\b[A-Z][A-Z0-9]+-\d+\b")
SHA_LIKE = re.compile(r"\b(?=[0-9]*[a-f])[0-9a-f]{7,40}\b")  # digit-only runs are card numbers, ids
US_STREETS = ("Example", "Sample", "Maple", "Cedar", "Lakeview", "Hillcrest", "Willow", "Orchard")
US_TYPES = ("Ave", "Avenue", "Street", "St", "Road", "Blvd", "Lane", "Drive", "Way", "Court")
US_TOWNS = (("Springfield", "IL"), ("Anytown", "OH"), ("Centerville", "MA"), ("Fairview", "OR"),
            ("Riverside", "CA"), ("Greenville", "TX"), ("Franklin", "WA"))
UK_STREETS = ("Example", "Sample", "Station", "Church", "Mill", "Orchard", "Victoria")
UK_TYPES = ("Street", "Road", "Lane", "Close", "Crescent", "Gardens", "Terrace", "Mews", "Way")
UK_TOWNS = (("London", ("SW1A", "N1", "EC1A", "SE1", "E2")), ("Manchester", ("M1", "M4")),
            ("Leeds", ("LS1", "LS6")), ("Bristol", ("BS1", "BS8")), ("Cardiff", ("CF10",)), ("Glasgow", ("G1", "G12")))
POSTCODE_LETTERS = "ABDEFGHJLNPQRSTUWXYZ"  # the letters the inward code uses
CARDS = (("411111", 16), ("424242", 16), ("555555", 16), ("222300", 16), ("378282", 15), ("601111", 16),
         ("305693", 14))
IBAN_BBAN = (("GB", "LLLLDDDDDDDDDDDDDD"), ("DE", "DDDDDDDDDDDDDDDDDD"), ("FR", "DDDDDDDDDDAAAAAAAAAAADD"),
             ("NL", "LLLLDDDDDDDDDD"))  # L letter, D digit, A letter or digit
PRIVATE_KEYS = (  # PEM label, DER/OpenSSH prefix (so the base64 starts as real keys do), random bytes, line width
    ("RSA PRIVATE KEY", bytes.fromhex("308204a40201000282010100"), 1180, 64),
    ("OPENSSH PRIVATE KEY", b"openssh-key-v1\0\0\0\0\x04none\0\0\0\x04none\0\0\0\0\0\0\0\x01", 360, 70),
    ("EC PRIVATE KEY", bytes.fromhex("30770201010420"), 114, 64),
    ("PRIVATE KEY", bytes.fromhex("308204be020100300d06092a864886f70d0101010500048204a8"), 1190, 64))
WORDS = ("Harbor", "Quartz", "Orchid", "Falcon", "Copper", "Summit", "Violet", "Ember", "Willow", "Glacier")
CONFIG_FORMATS = ("env", "yml", "ini")


def luhn_digit(body: str) -> str:
    """The check digit that makes `body + digit` pass the Luhn test."""
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        if i % 2 == 0:  # doubled once the check digit is appended
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return str(-total % 10)


def iban_check(country: str, bban: str) -> str:
    """ISO 13616 check digits: 98 - (BBAN + country + "00" as base-36 digits) mod 97."""
    return f"{98 - int(''.join(str(int(c, 36)) for c in bban + country + '00')) % 97:02d}"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


class Planter:
    """Draws fake identifiers and secrets from its own stream; `turn` cycles formats in a fixed order."""

    def __init__(self, rng: random.Random, domain: str):
        self.rng, self.domain = rng, domain
        self.turns: Counter[str] = Counter()

    def turn(self, name: str, options: tuple):
        n = self.turns[name]
        self.turns[name] += 1
        return options[n % len(options)]

    def chars(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def digits(self, n: int) -> str:
        return str(self.rng.randrange(1, 10)) + self.chars(string.digits, n - 1)

    def clean(self, make: Callable[[], str]) -> str:
        """Draw until the value holds nothing a linker would read as an issue key or a SHA prefix."""
        for _ in range(1000):
            value = make()
            if not KEY_LIKE.search(value) and not SHA_LIKE.search(value):
                return value
        raise RuntimeError(f"cannot draw a value without key or SHA look-alikes, last: {value[:40]!r}")

    # -- structured identifiers -----------------------------------------------------------------

    def ipv4(self) -> Pii:
        r = self.rng
        octet = lambda: r.randrange(1, 255)  # noqa: E731
        value = self.turn("ipv4", (
            lambda: f"10.{octet()}.{octet()}.{octet()}", lambda: f"203.0.113.{octet()}",
            lambda: f"192.168.{octet()}.{octet()}", lambda: f"198.51.100.{octet()}",
            lambda: f"172.{r.randrange(16, 32)}.{octet()}.{octet()}", lambda: f"192.0.2.{octet()}"))()
        return Pii("ip", value)

    def ipv6(self) -> Pii:
        group = lambda: f"{self.rng.randrange(1, 0x10000):x}"  # noqa: E731
        value = self.turn("ipv6", (lambda: f"2001:db8::{group()}", lambda: f"2001:db8:{group()}:{group()}::{group()}",
                                   lambda: "2001:db8:" + ":".join(group() for _ in range(6))))()
        return Pii("ip", value)

    def address(self, person: str | None = None, multiline: bool = False, style: str | None = None) -> Pii:
        """A US or UK postal address (`style`, else in turn); `multiline` puts the town (and the UK postcode) on
        lines of their own."""
        r = self.rng
        if (style or self.turn("address", ("us", "uk"))) == "us":
            unit = self.turn("us_unit", ("", f", Suite {r.randrange(100, 900)}", "", f", Apt {r.randrange(1, 40)}B"))
            town, state = r.choice(US_TOWNS)
            zip_code = f"{r.randrange(10000, 99999)}" + (f"-{r.randrange(1000, 9999)}" if r.random() < 0.3 else "")
            street = f"{r.randrange(10, 9999)} {r.choice(US_STREETS)} {r.choice(US_TYPES)}{unit}"
            value = f"{street}{chr(10) if multiline else ', '}{town}, {state} {zip_code}"
        else:
            town, areas = r.choice(UK_TOWNS)
            postcode = f"{r.choice(areas)} {r.randrange(1, 10)}{self.chars(POSTCODE_LETTERS, 2)}"
            flat = f"Flat {r.randrange(1, 30)}, " if not multiline and r.random() < 0.4 else ""
            street = f"{flat}{r.randrange(1, 250)} {r.choice(UK_STREETS)} {r.choice(UK_TYPES)}"
            value = f"{street}\n{town}\n{postcode}" if multiline else f"{street}, {town} {postcode}"
        return Pii("postal_address", value, person)

    def card(self) -> Pii:
        prefix, n = self.turn("card", CARDS)
        body = prefix + self.chars(string.digits, n - len(prefix) - 1)
        number = body + luhn_digit(body)
        sep = self.turn("card_sep", (" ", "-", " ", ""))
        groups = {15: (4, 6, 5), 14: (4, 6, 4)}.get(n, (4, 4, 4, 4))
        cuts = [sum(groups[:i]) for i in range(len(groups) + 1)]
        return Pii("credit_card", sep.join(number[a:b] for a, b in zip(cuts, cuts[1:])))

    def iban(self) -> Pii:
        country, shape = self.turn("iban", IBAN_BBAN)
        pools = {"L": string.ascii_uppercase, "D": string.digits, "A": string.ascii_uppercase + string.digits}
        bban = "".join(self.rng.choice(pools[c]) for c in shape)
        compact = country + iban_check(country, bban) + bban
        grouped = self.turn("iban_form", (True, True, False))
        return Pii("iban", " ".join(compact[i:i + 4] for i in range(0, len(compact), 4)) if grouped else compact)

    def ssn(self) -> Pii:
        r = self.rng
        while True:
            area, group, serial = r.randrange(1, 900), r.randrange(1, 100), r.randrange(1, 10000)
            value = f"{area:03d}-{group:02d}-{serial:04d}"
            if area != 666 and value not in ("078-05-1120", "219-09-9999", "123-45-6789"):
                return Pii("us_ssn", value)

    @staticmethod
    def _names(who: Person | Outsider) -> tuple[str, str, str | None]:
        first, last = ascii_fold(who.name).lower().split(" ", 1)
        return first, last.replace(" ", ""), who.username if isinstance(who, Person) else None

    def github(self, who: Person | Outsider) -> Pii:
        first, last, person = self._names(who)
        login = self.turn("github", (f"{first}{last}", f"{first}-{last}", f"{first[0]}{last}-dev",
                                     f"{first}{last}{self.rng.randrange(10, 100)}"))
        return Pii("url_personal", f"https://github.com/{login}", person)

    def linkedin(self, who: Person | Outsider) -> Pii:
        first, last, person = self._names(who)
        return Pii("url_personal", f"https://www.linkedin.com/in/{first}-{last}-{self.rng.randrange(10**5, 10**6)}",
                   person)

    def home(self, who: Person | Outsider) -> tuple[str, Pii]:
        """("/home/" or "/Users/", the user name as a planted item): a Linux or a macOS home directory."""
        first, last, person = self._names(who)
        if self.turn("home", ("linux", "mac")) == "linux":
            return "/home/", Pii("url_personal", person or f"{first[0]}{last}", person)
        return "/Users/", Pii("url_personal", f"{first}.{last}", person)

    # -- secrets ----------------------------------------------------------------------------------

    def secret(self, kind: str, value: str) -> Pii:
        return Pii(f"secret:{kind}", value)

    def aws_key_id(self) -> Pii:
        return self.secret("aws_access_key_id", self.clean(lambda: "AKIA" + self.chars(BASE32, 16)))

    def aws_secret(self) -> Pii:
        return self.secret("aws_secret_key", self.clean(lambda: self.chars(ALNUM + "/+", 40)))

    def github_token(self) -> Pii:
        return self.secret("github_token", self.clean(lambda: "ghp_" + self.chars(ALNUM, 36)))

    def slack_token(self) -> Pii:
        return self.secret("slack_token", self.clean(
            lambda: f"xoxb-{self.digits(12)}-{self.digits(13)}-{self.chars(ALNUM, 24)}"))

    def google_key(self) -> Pii:
        return self.secret("google_api_key", self.clean(lambda: "AIzaSy" + self.chars(ALNUM + "-_", 33)))

    def stripe_key(self) -> Pii:
        return self.secret("stripe_key", self.clean(lambda: "sk_live_fake" + self.chars(ALNUM, 24)))

    def jwt(self, at: int) -> Pii:
        """A token issued shortly before `at` (ms since the epoch), valid for an hour."""
        def make() -> str:
            iat = at // 1000 - self.rng.randrange(60, 3000)
            claims = {"sub": str(self.rng.randrange(10**5, 10**6)), "iss": f"https://auth.{self.domain}",
                      "iat": iat, "exp": iat + 3600, "scope": self.rng.choice(("api", "api:read", "reports"))}
            parts = ({"alg": "HS256", "typ": "JWT"}, claims)
            return ".".join([*(_b64url(json.dumps(p, separators=(",", ":")).encode()) for p in parts),
                             _b64url(self.rng.randbytes(32))])
        return self.secret("jwt", self.clean(make))

    def private_key(self) -> Pii:
        label, head, size, width = self.turn("private_key", PRIVATE_KEYS)

        def make() -> str:
            body = base64.b64encode(head + self.rng.randbytes(size)).decode("ascii")
            lines = "\n".join(body[i:i + width] for i in range(0, len(body), width))
            return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----"
        return self.secret("private_key", self.clean(make))

    def password(self, url_safe: bool = False) -> str:
        """A password as people pick them (word, digits, a symbol); `url_safe` ones need no %-escaping."""
        r = self.rng
        sym = r.choice("-_~" if url_safe else "!#%*-_")
        return self.clean(lambda: self.turn("password", (
            lambda: f"{r.choice(WORDS)}{sym}{r.randrange(100, 10000)}",
            lambda: f"{r.choice(WORDS)}{r.randrange(10, 100)}{sym}{r.choice(WORDS).lower()}",
            lambda: f"{r.choice(WORDS).replace('o', '0').replace('e', '3')}{sym}{r.randrange(1000, 10000)}"))())

    def url_password(self) -> Pii:
        return self.secret("url_password", self.password(url_safe=True))

    def db_password(self, url: bool = True) -> Pii:
        return self.secret("connection_string", self.password(url_safe=url))

    def assigned_password(self) -> Pii:
        return self.secret("password", self.password())


# -- Jira -----------------------------------------------------------------------------------------


def _when(t: int) -> str:
    return dt.datetime.fromtimestamp(t // 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def plant_jira(company: _Company, p: Planter) -> None:
    """Append the Jira snippets (module docstring) to existing descriptions and comments: only their text changes."""
    rng, scale, pkg = p.rng, company.scale, company.pkg
    issues = rng.sample(company.issues, 3 * scale)
    comments = [(c.author, c.text) for i in company.issues for c in i.comments]
    texts = rng.sample(comments, min(2 * scale, len(comments)))
    spare = [i for i in company.issues if i not in issues]
    texts += [(i.reporter, i.description) for i in rng.sample(spare, 2 * scale - len(texts))]
    for n in range(scale):
        log, trace, pip = issues[3 * n:3 * n + 3]
        _gateway_log(p, log, company.domain)
        _traceback(p, trace, pkg)
        pip.description.add("\n\nTo reproduce with the released wheel: `pip install --index-url "
                            "https://deploy:{pw}@pypi.{d}/simple/ {pkg}`", pw=p.url_password(), d=company.domain,
                            pkg=pkg)
        (_, refund), (author, ci) = texts[2 * n:2 * n + 2]
        o = rng.choice(company.outsiders)
        refund.add("\n\nFor the refund: {n} wants the money on IBAN {i}, not back on the card {c}. Billing "
                   "address on file: {a}. Note the CSV export also shows their SSN ({s}) in clear text.",
                   n=Pii("name", o.name), i=p.iban(), c=p.card(), a=p.address(), s=p.ssn())
        ci.add("\n\nCI on my fork fails with 401: the workflow still has the old token {t}. Ask me for access on "
               "{g} if you need it. Unrelated: staging still loads https://maps.googleapis.com/maps/api/js?key={k}.",
               t=p.github_token(), g=p.github(author), k=p.google_key())


def _gateway_log(p: Planter, issue: Issue, domain: str) -> None:
    t = issue.created - p.rng.randrange(HOUR, DAY)
    issue.description.add(
        "\n\nGateway log from when it happened:\n{{noformat}}\n"
        "{t1} WARN  api  429 Too Many Requests client={a} via={b}\n"
        "{t2} WARN  api  upstream [{c}]:8443 reset by peer\n"
        "{t3} INFO  api  replay: curl -H \"Authorization: Bearer {j}\" https://api.{d}/v2/{m}\n{{noformat}}",
        t1=_when(t), t2=_when(t + 1700), t3=_when(t + 4100), a=p.ipv4(), b=p.ipv4(), c=p.ipv6(), j=p.jwt(t),
        d=domain, m=issue.fn.module)


def _traceback(p: Planter, issue: Issue, pkg: str) -> None:
    fn = issue.fn
    call, act = fn.sub(fn.bug.call), fn.sub(fn.bug.actual)
    error = act if "Error" in act else f"AssertionError: {call} returned {act}"
    base, user = p.home(issue.reporter)
    issue.description.add(
        "\n\nSame on my machine:\n{{code}}\nTraceback (most recent call last):\n"
        "  File \"{h}{u}/jobs/nightly.py\", line {l1}, in main\n    check()\n"
        "  File \"{h}{u2}/.venv/lib/python3.11/site-packages/{pkg}/{m}.py\", line {l2}, in {f}\n{e}\n{{code}}",
        h=base, u=user, u2=user, l1=str(p.rng.randrange(10, 90)), pkg=pkg, m=fn.module,
        l2=str(p.rng.randrange(5, 60)), f=fn.name, e=error)


# -- git --------------------------------------------------------------------------------------------


def config_file(p: Planter, fmt: str, title: str) -> Text:
    """The staging settings file a developer commits by mistake, in one of CONFIG_FORMATS."""
    slots = {"l": p.ipv6(), "h": p.ipv4(), "db": p.db_password(), "ak": p.aws_key_id(), "as": p.aws_secret(),
             "pw": p.assigned_password(), "sl": p.slack_token(), "g": p.google_key(), "st": p.stripe_key()}
    if fmt == "env":
        template = ("# {t} staging settings, read by deploy/run.sh\nAPP_ENV=staging\nLISTEN_ADDRESS={l}\n"
                    "DB_HOST={h}\nDATABASE_URL=postgres://app:{db}@db.internal:5432/app\nAWS_ACCESS_KEY_ID={ak}\n"
                    "AWS_SECRET_ACCESS_KEY={as}\nSMTP_PASSWORD=\"{pw}\"\nSLACK_BOT_TOKEN={sl}\n"
                    "GOOGLE_MAPS_API_KEY={g}\nSTRIPE_SECRET_KEY={st}\n")
    elif fmt == "yml":
        template = ("# {t} staging settings, read by deploy/run.sh\nstaging:\n  listen: \"{l}\"\n  database:\n"
                    "    host: {h}\n    url: postgresql://app:{db}@db.internal:5432/app\n  smtp:\n"
                    "    password: \"{pw}\"\n  aws:\n    access_key_id: {ak}\n    secret_access_key: {as}\n"
                    "  slack:\n    bot_token: {sl}\n  google:\n    maps_api_key: {g}\n  stripe:\n"
                    "    secret_key: {st}\n")
    else:
        template = ("; {t} staging settings, read by deploy/run.sh\n[server]\nlisten = {l}\n\n[database]\n"
                    "host = {h}\nurl = postgresql://app:{db}@db.internal:5432/app\n\n[smtp]\npassword = {pw}\n\n"
                    "[aws]\naws_access_key_id = {ak}\naws_secret_access_key = {as}\n\n[slack]\nbot_token = {sl}\n\n"
                    "[google]\nmaps_api_key = {g}\n\n[stripe]\nsecret_key = {st}\n")
    return Text().add(template, t=title, **slots)


def leak_commits(p: Planter, n: int, title: str) -> tuple[str, Text, Text, Text]:
    """(path, file, message adding it, message deleting it) for scale unit `n`."""
    fmt = CONFIG_FORMATS[n % len(CONFIG_FORMATS)]
    path = f"deploy/staging.{fmt}"
    body = config_file(p, fmt, title)
    key_id = next(x for x, _, _ in body.spans if x.type == "secret:aws_access_key_id")
    add = Text().add("Add staging deploy settings\n\nTemporary: the deploy job clones with {t} until the vault "
                     "is set up.", t=p.github_token())
    drop = Text().add("Remove staging deploy settings from the repository\n\nThey were committed by mistake. "
                      "The AWS key {k} is deactivated and the other credentials in {f} are rotated.",
                      k=key_id, f=path)
    return path, body, add, drop


# -- mail and Slack -----------------------------------------------------------------------------------


def plant_channels(ch: Channels, p: Planter) -> None:
    """Add the mail threads and Slack posts of the module docstring, once everything else is planned."""
    c, rng = ch.c, p.rng
    lo, span = c.t0 + 25 * DAY, ch.end - c.t0 - 25 * DAY
    devs = [x for x in c.people if x.role == "dev"] or c.people
    for n in range(c.scale):
        cust = ch.customers[n % len(ch.customers)]
        staff = ch.who(rng.choice(ch.support_staff))
        billing = p.address()
        own = Text().add("Hello,\n\nwe were charged twice this month on our card {c}. Please refund the second "
                         "charge to our bank account instead, IBAN {i}.\nOur billing address is {a}, in case you "
                         "need it for the credit note. For the tax form, the account owner's SSN is {s}.",
                         c=p.card(), i=p.iban(), a=billing, s=p.ssn())
        style = "us" if billing.value[-1].isdigit() else "uk"  # the office in the signature is in the same country
        sig = Text().add("\n\nBest regards,\n{n}\n{o}\n{a}\n{l}", n=cust.pii("name"), o=cust.org,
                         a=p.address(multiline=True, style=style), l=p.linkedin(c.outsiders[n % len(c.outsiders)]))
        t = ch.at(lo + int(rng.random() * span), cust)
        first = ch.mail("support", t, cust, rng.choice(("Charged twice this month", "Refund request")), own, [],
                        quote=False, sig=sig)
        first.family, first.dup = "billing:refund", "billing:refund"
        own = Text().add("Hi {f},\n\nsorry about that: the second charge is refunded to the account you gave us, it "
                         "takes three to five working days. Please do not send card numbers by e-mail; I removed "
                         "yours from our ticket.", f=cust.pii("first_name"))
        ch.mail("support", ch.at(t + ch.hours(1, 20), staff), staff, "", own, [], parent=first,
                to=[ch._addr(cust)], cc=[f"support@{ch.domain}"])

        dev, lead = ch.who(rng.choice(devs)), ch.who(ch.lead)
        own = Text().add("Hi all,\n\nuntil the vault is set up, here is the deploy key for the staging box ({h}):\n\n"
                         "{k}\n\nThe reporting job connects with Server=tcp:sql.{d},1433;Database=reports;"
                         "User Id=reporter;Password={pw};", h=p.ipv4(), k=p.private_key(), d=ch.domain,
                         pw=p.db_password(url=False))
        t = ch.at(lo + int(rng.random() * span), dev)
        root = ch.mail("dev", t, dev, rng.choice(("Staging deploy key", "Access to staging")), own, [], quote=False)
        root.family = "ops:credentials"
        own = Text().add("Please never post keys or passwords on the list. I revoked that key and changed the "
                         "password; both are in the vault now.")
        ch.mail("dev", ch.at(t + ch.hours(0.5, 6), lead), lead, "", own, [], parent=root, quote=False)
        _slack(ch, p, devs)


def _slack(ch: Channels, p: Planter, devs: list[Person]) -> None:
    c, rng = ch.c, p.rng
    lo, span = c.t0 + 25 * DAY, ch.end - c.t0 - 25 * DAY

    def when(who: Person, parent=None) -> int:
        return ch.at(parent.t + ch.hours(0.1, 4), who) if parent else ch.at(lo + int(rng.random() * span), who)

    def post(name: str, who: Person, text: Text, parent=None, t: int | None = None, family: str = "ops:credentials",
             dup: str = ""):
        # posts written from one template (once per scale) are near-copies of each other
        dup = dup or ("" if parent else f"planted:{text.parts[0][:40]}")
        return ch.post(name, t or when(who, parent), who, text, parent=parent, family=family, dup=dup)

    a, b = rng.sample(devs, 2) if len(devs) > 1 else (devs[0], c.people[0])
    t = when(a)
    q = post("dev", a, Text().add("can someone look at this 401?\n```curl -H \"Authorization: Bearer {j}\" "
                                  "https://api.{d}/v2/reports```", j=p.jwt(t), d=ch.domain), t=t,
             family="ops:auth_error", dup="ops:auth_error")
    post("dev", b, Text().add("works for me with a fresh token. fwiw the report script does `conn = psycopg2.connect("
                              "host=\"{h}\", user=\"reporting\", password=\"{pw}\")`, that should not be in the repo",
                              h=p.ipv4(), pw=p.assigned_password()), parent=q)
    q = post("dev", rng.choice(devs), Text().add("new token for the CI notifier bot: {t}", t=p.slack_token()))
    post("dev", ch.lead, Text().add("please rotate it, this channel is exported. the vault has a slot for it"),
         parent=q)
    post("dev", rng.choice(devs), Text().add("key for the build agent, in case anyone needs it:\n```\n{k}\n```",
                                             k=p.private_key()))
    post("dev", rng.choice(devs), Text().add("exporting these in the deploy shell fixed it:\n```\nexport "
                                             "AWS_ACCESS_KEY_ID={i}\nexport AWS_SECRET_ACCESS_KEY={s}\n```",
                                             i=p.aws_key_id(), s=p.aws_secret()))
    post("dev", rng.choice(devs), Text().add(
        "`git remote -v` on the CI box shows `https://ci-bot:{u}@git.{d}/{ds}/repo.git` and "
        "`psql postgres://app:{db}@db.internal:5432/app` works from there", u=p.url_password(), d=ch.domain,
        ds=c.dataset, db=p.db_password()))
    post("dev", rng.choice(c.people), Text().add("who put the live Stripe key {s} in the staging config? the maps key "
                                                 "{g} is in there too", s=p.stripe_key(), g=p.google_key()))
    who = rng.choice(c.people)
    post("general", who, Text().add("my GitHub is <{g}>, could someone add me to the org?", g=p.github(who)),
         family="it:access")
    who = rng.choice(c.people)
    post("general", who, Text().add("IT: please ship my new laptop to\n{a}\nI'm working from home next month",
                                    a=p.address(who.username, multiline=True)), family="it:hardware")
    cust = rng.choice(ch.customers)
    post("support", rng.choice(ch.support_staff), Text().add(
        "{n} from {o} moved, new billing address: {a}. their API calls now come from {h}",
        n=cust.pii("name"), o=cust.org, a=p.address(), h=p.ipv4()), family="support:handoff")
