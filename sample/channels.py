"""The sample company's mailing-list archive and Slack export, coherent with its Jira and git.

Layout written under `<out>/<dataset>`:
    mail/<list>.mbox     one archive per mailing list (dev@, support@) as Apache mod_mbox serves them:
                         mboxo (RFC 4155 `From <envelope> <asctime>` separator lines, body lines that began
                         with "From " stored as ">From "), RFC 5322 headers, MIME (RFC 2045-2047)
    slack/               an unpacked Slack workspace export (the "Standard export" zip's contents):
                         users.json, channels.json, <channel name>/<YYYY-MM-DD>.json (UTC day of each `ts`),
                         JSON indented by 4 with "/" escaped as "\\/" as Slack writes it

Invariants:
- Only the `random.Random` passed in (`f"{seed}-channels"`) drives choices, and it is used after the Jira
  and git plan is rendered: adding these sources changes no Jira file and no commit SHA.
- The same people as in Jira and git: staff write from their Jira account's e-mail address (a few from the
  personal address their git identity also uses) and appear in users.json with that name and e-mail;
  customers (the roster's outsiders) write to support@ only. Times follow each writer's working hours.
- Coherent in time with Jira and git: an issue is discussed between its filing and its resolution, a fixing
  commit is announced after it is made, support replies that name a key come after the issue is filed,
  fix versions are the ones Jira records.
- SHA prefixes are 7-12 hex digits and unique in the repository (lengthened when ambiguous, as git does).
- Every issue key, SHA, issue/commit URL and Message-ID written in a subject, body or message text is a
  truth link, and every planted PII item has exact offsets (truth schema: company.py); no other text in
  these sources is shaped like an issue key or names a commit.
- The mails and posts that carry planted identifiers and secrets (planted.plant_channels) are planned after
  all the others, so adding them changes no subject, body or text of the others (only the running ezmlm
  numbers in the Return-Path of later mails move).
"""

from __future__ import annotations

import base64
import bisect
import datetime as dt
import email.utils
import html
import json
import quopri
import random
import uuid
from dataclasses import dataclass, field
from email.header import Header
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sample.planted import plant_channels
from sample.roster import DAY, HOUR, Person, Pii, Text, ascii_fold, fake_phone, mention, working_time

if TYPE_CHECKING:
    from sample.company import Issue, Plan, _Company

MINUTE = 60_000
LISTS = ("dev", "support")
CHANNELS = (("general", "Company-wide announcements and work-based matters"),
            ("dev", "Development of {pkg}: pushes, reviews, questions"),
            ("support", "Customer issues and escalations"),
            ("builds", "CI results for main"))
CUSTOMER_ZONES = (-300, 0, 60, -480, 330, 120)  # minutes east of UTC
TITLES = {"lead": "Engineering Lead", "dev": "Software Engineer", "support": "Customer Support"}
ID_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
REACTIONS = ("+1", "eyes", "white_check_mark", "tada", "pray", "raised_hands")
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

Links = list[tuple[str, str, str, str]]  # (field, kind, value, text) of one message


@dataclass(frozen=True)
class Who:
    """Someone who writes: a staff member (from one of their addresses) or a customer."""

    name: str
    first: str
    email: str
    offset: int  # minutes east of UTC
    person: Person | None = None  # None: a customer
    org: str = ""
    phone: str = ""

    def pii(self, kind: str) -> Pii:
        value = {"name": self.name, "first_name": self.first, "email": self.email, "phone": self.phone}[kind]
        return Pii(kind, value, self.person.username if self.person else None)


@dataclass(eq=False)
class Mail:
    lst: str
    t: int
    sender: Who
    subject: str
    own: Text  # what the sender wrote (what a reply quotes)
    body: Text  # own text, quote and signature: the decoded body the truth's offsets index
    to: list[str]
    cc: list[str]
    parent: Mail | None
    links: Links  # what the subject, the own text and the quote refer to
    own_links: Links  # what the own text refers to (a reply quoting it refers to the same)
    mid: str
    cte: str = ""  # "" (7bit/8bit as the text needs) | "quoted-printable" | "base64"
    html: bool = False
    attachment: tuple[str, str, bytes] | None = None  # file name, MIME type, content
    seq: int = 0
    family: str = ""  # the kind of work it asks for (truth "work_items"); replies inherit their root's
    dup: str = ""  # near-duplicate group: requests written from one template with the same slots

    @property
    def root(self) -> Mail:
        return self.parent.root if self.parent else self


@dataclass(eq=False)
class Channel:
    id: str
    name: str
    purpose: str
    members: list[Person]
    created: int


@dataclass(eq=False)
class Post:
    channel: Channel
    t: int
    user: Person | None  # None: the CI bot
    text: Text
    links: Links
    subtype: str | None = None
    parent: Post | None = None
    replies: list[Post] = field(default_factory=list)
    reactions: list[tuple[str, list[Person]]] = field(default_factory=list)
    edited: int | None = None  # ms after `t`
    file: tuple[str, str, int] | None = None  # name, MIME type, size
    seq: int = 0
    ts: str = ""  # set with `day` (the UTC date of ts, the day file) once all posts are planned
    day: str = ""
    family: str = ""  # as Mail.family; thread replies inherit their parent's
    dup: str = ""

    @property
    def native_id(self) -> str:
        return f"{self.channel.id}:{self.ts}"


def defect_family(issue: Issue) -> str:
    """The family of a request about an issue: the kind of defect ("defect:clamp" for clamp_$noun)."""
    return "defect:" + issue.fn.bug.name.replace("${noun}_", "").replace("_$noun", "")


def _local(t: int, offset: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=t + offset * MINUTE)


def _human(t: int, offset: int, style: int) -> str:
    """A date as mail clients print it in attributions (own tables: no locale may leak in)."""
    d = _local(t, offset)
    if style == 0:
        return f"{WEEKDAYS[d.weekday()]}, {d.day} {MONTHS[d.month - 1]} {d.year} at {d.hour:02d}:{d.minute:02d}"
    return f"{d.day:02d}/{d.month:02d}/{d.year} {d.hour:02d}:{d.minute:02d}"


def _org(address: str) -> str:
    """'x@customer-co.example' -> 'Customer Co'."""
    return " ".join(w.capitalize() for w in address.split("@")[1].split(".")[0].split("-"))


def _slack_json(obj: Any) -> str:
    """Slack's export style: indent 4, non-ASCII kept, "/" escaped (valid JSON: "/" only occurs in strings)."""
    return json.dumps(obj, indent=4, ensure_ascii=False).replace("/", "\\/") + "\n"


class Channels:
    """Plans mails and Slack posts in the constructor (only draws from `rng`), renders them in `write`."""

    def __init__(self, company: _Company, rng: random.Random):
        c = self.c = company
        self.rng, self.scale, self.domain = rng, company.scale, company.domain
        self.commit_base = f"https://git.{c.domain}/{c.dataset}/repo/commit/"
        self.all_shas = sorted(c.shas.values())
        self.lead = c.people[0]
        self.mails: list[Mail] = []
        self.posts: list[Post] = []
        self.qa: list[dict] = []
        self.phones = {p.username: fake_phone(rng) for p in c.people}
        self.customers = [Who(o.name, o.name.split()[0], o.email, rng.choice(CUSTOMER_ZONES), None,
                              _org(o.email), o.phone) for o in c.outsiders]
        taken: set[str] = set()
        self.team = self._slack_id("T", taken)
        self.uid = {p.username: self._slack_id("U", taken) for p in c.people}
        self.bot_uid, self.bot_id = self._slack_id("U", taken), self._slack_id("B", taken)
        self.display = {p.username: rng.choice((p.first, p.username, "")) for p in c.people}
        support = [p for p in c.people if p.role == "support"]
        members = {"general": c.people, "dev": c.people,
                   "support": support + c.people[:2], "builds": c.people[:2]}
        self.channels = {name: Channel(self._slack_id("C", taken), name, purpose.format(pkg=c.pkg),
                                       members[name], c.t0 + n * MINUTE)
                         for n, (name, purpose) in enumerate(CHANNELS)}
        self.support_staff = support
        self.support_threads: list[tuple[Mail, Mail, Issue, Who, Who]] = []
        self.envelope = {lst: rng.randrange(1000, 90000) for lst in LISTS}  # ezmlm message numbers
        self.fixed = [i for i in c.issues if i.commits]
        self.intro = {p.ops[0][1].name: p for p in c.plans if p.kind == "add"}
        self.end = max(v[1] for v in c.versions)
        self._support_threads()
        self._dev_threads()
        self._announcements()
        self._out_of_office()
        self._joins()
        self._issue_posts()
        self._support_posts()
        self._knowledge()
        self._builds()
        self._chatter()
        self._reactions()
        plant_channels(self, c.planter)  # last: the posts and mails above stay as they are
        self._password_resets(random.Random(rng.random()))  # after everything: changes nothing above

    # -- helpers --------------------------------------------------------------------------------

    def _slack_id(self, prefix: str, taken: set[str]) -> str:
        while True:
            value = prefix + "0" + "".join(self.rng.choice(ID_CHARS) for _ in range(8))
            if value not in taken:
                taken.add(value)
                return value

    def hours(self, lo: float, hi: float) -> int:
        return int(self.rng.uniform(lo, hi) * HOUR)

    def at(self, t: int, who: Who | Person) -> int:
        return working_time(self.rng, t, who.offset)

    def within(self, lo: int, hi: int, who: Who | Person) -> int:
        """A moment in [lo, hi), inside `who`'s working hours when that still lands before `hi`."""
        t = lo + int(self.rng.random() * max(hi - lo, 1))
        snapped = self.at(t, who)
        return snapped if snapped < hi else t

    def who(self, p: Person, personal: bool = False) -> Who:
        email = p.git[-1][1] if personal and len(p.git) > 1 else p.email
        return Who(p.name, p.first, email, p.offset, p, "", self.phones[p.username])

    def sha_of(self, plan: Plan) -> str:
        return self.c.shas[plan.mark]

    def prefix(self, sha: str, lo: int = 7, hi: int = 12) -> str:
        """A prefix of 7-12 hex digits that names no other commit of the repository."""
        n = self.rng.randint(lo, hi)
        i = bisect.bisect_left(self.all_shas, sha)
        neighbours = [s for s in self.all_shas[max(i - 1, 0):i + 2] if s != sha]
        while any(s.startswith(sha[:n]) for s in neighbours):
            n += 1
        return sha[:n]

    # Each reference helper records a link and returns the text to write.
    def key(self, links: Links, issue: Issue, fld: str) -> str:
        links.append((fld, "jira_key", issue.key, issue.key))
        return issue.key

    def issue_url(self, links: Links, issue: Issue, fld: str) -> str:
        url = f"{self.c.base}/browse/{issue.key}"
        links.append((fld, "issue_url", issue.key, url))
        return url

    def sha(self, links: Links, sha: str, fld: str, full: bool = False, short: bool = False) -> str:
        text = sha if full else self.prefix(sha, hi=7 if short else 12)
        links.append((fld, "commit", sha, text))
        return text

    def commit_url(self, links: Links, sha: str, fld: str) -> str:
        url = self.commit_base + sha
        links.append((fld, "commit_url", sha, url))
        return url

    def slack_issue(self, links: Links, issue: Issue) -> str:
        """An issue as people paste it in Slack: bare key, or a link labelled with the key."""
        if self.rng.random() < 0.6:
            return self.key(links, issue, "text")
        return f"<{self.issue_url(links, issue, 'text')}|{self.key(links, issue, 'text')}>"

    # -- mail -----------------------------------------------------------------------------------

    def _message_id(self, who: Who) -> str:
        rng = self.rng
        if who.person is not None:
            return f"{uuid.UUID(int=rng.getrandbits(128), version=4)}@{who.email.split('@')[1]}"
        local = "".join(rng.choice(ID_CHARS) for _ in range(24))
        return f"{local}.{rng.randrange(10**6)}@mail.{who.email.split('@')[1]}"

    def signature(self, who: Who) -> Text:
        if who.person is None:
            if self.rng.random() < 0.5:
                return Text().add("\n\nBest regards,\n{n}\n{o}\nPhone: {p}", n=who.pii("name"), o=who.org,
                                  p=who.pii("phone"))
            return Text().add("\n\n-- \n{n} | {o}\n{p}", n=who.pii("name"), o=who.org, p=who.pii("phone"))
        return Text().add("\n\n-- \n{n}\n{t}, {c}", n=who.pii("name"), t=TITLES[who.person.role], c=self.c.title)

    def mail(self, lst: str, t: int, sender: Who, subject: str, own: Text, links: Links, *,
             parent: Mail | None = None, quote: bool = True, to: list[str] | None = None,
             cc: list[str] | None = None, sig: bool | Text = True, **kw: Any) -> Mail:
        """Assemble the body (own text, quote of the parent with an attribution line, signature: the sender's
        usual one, or `sig` when it is a Text) and plan it."""
        body, own_links = Text(), [link for link in links if link[0] == "body"]
        if parent is not None and quote:
            links = links + parent.own_links
            p, style = parent.sender, self.rng.randrange(2)
            when = _human(parent.t, sender.offset, style)
            if style == 0:
                attribution = Text().add("On {d}, {n} <{e}> wrote:", d=when, n=p.pii("name"), e=p.pii("email"))
            else:
                attribution = Text().add("On {d}, {n} wrote:", d=when, n=p.pii("name"))
            if self.rng.random() < 0.5:  # top-posted reply
                body.extend(own).add("\n\n").extend(attribution).add("\n").extend(parent.own, "> ")
            else:
                body.extend(attribution).add("\n").extend(parent.own, "> ").add("\n\n").extend(own)
        else:
            body.extend(own)
        if sig:
            body.extend(sig if isinstance(sig, Text) else self.signature(sender))
        body.add("\n")
        if parent is not None:  # "Re: " + the thread's subject, and so the keys that subject names
            subject = f"Re: {parent.root.subject}"
            links = links + [link for link in parent.root.links if link[0] == "subject"]
        mail = Mail(lst, t, sender, subject, own, body, to or [f"{lst}@{self.domain}"], cc or [], parent, links,
                    own_links, self._message_id(sender), seq=len(self.mails), **kw)
        self.mails.append(mail)
        return mail

    def _support_threads(self) -> None:
        """Customers write to support@; a support person files the issue and answers with its key."""
        rng, c = self.rng, self.c
        pool = [i for i in c.issues if i.reporter.role == "support"]
        pool += [i for i in c.issues if i.reporter.role != "support"]
        chosen = sorted(rng.sample(pool[:8 * self.scale], 4 * self.scale), key=lambda i: (i.created, i.key))
        for k, issue in enumerate(chosen):
            cust = self.customers[k % len(self.customers)]
            staff = self.who(issue.reporter if issue.reporter.role == "support" else rng.choice(self.support_staff))
            fn = issue.fn
            call, exp, act = (fn.sub(s) for s in (fn.bug.call, fn.bug.expected, fn.bug.actual))
            if k == 1 or (k > 2 and rng.random() < 0.08):  # RFC 2047 encoded subjects
                subject, hello = rng.choice(((f"Problème avec {fn.name}", "Bonjour,"),
                                             (f"Rückfrage zu {fn.name}", "Hallo,"),
                                             (f"Fehler in {fn.name} – bitte um Hilfe", "Hallo,")))
            else:
                subject = rng.choice((f"Problem with {fn.name}", f"{fn.name} returns wrong results",
                                      f"Urgent: {fn.module} errors since the update", f"Question about {fn.name}"))
                hello = rng.choice(("Hello,", "Hi support team,", "Dear support,"))
            own = Text().add(hello)
            if "Error" in act:
                own.add("\n\nour nightly job calls `{c}` and since yesterday it fails with `{a}`. It used to work.",
                        c=call, a=act)
            else:
                own.add("\n\n`{c}` gives us `{a}`, but we expected `{e}`. Is this a known problem?",
                        c=call, a=act, e=exp)
            if rng.random() < 0.4:
                other = rng.choice([x for x in self.customers if x is not cust] or self.customers)
                own.add("\n\n{n} ({e}) at {o} sees the same on their side.", n=other.pii("name"),
                        e=other.pii("email"), o=other.org)
            attach = k == 2 or (k > 2 and rng.random() < 0.1)
            if attach:
                own.add("\n\nI attached a screenshot of the error.")
            t0 = issue.created - self.hours(2, 40)
            first = self.mail("support", t0, cust, subject, own, [], quote=False,
                              cte="base64" if k == 0 or rng.random() < 0.1 else "",
                              attachment=("export-error.png", "image/png",
                                          b"\x89PNG\r\n\x1a\n" + rng.randbytes(rng.randrange(200, 900)))
                              if attach else None)
            links: Links = []
            own = Text().add("Hi {f},\n\nthanks for the report. I could reproduce it and ", f=cust.pii("first_name"))
            own.add("filed {k} for our developers: {u}" if issue.reporter is staff.person else
                    "our developers already track it as {k}: {u}", k=self.key(links, issue, "body"),
                    u=self.issue_url(links, issue, "body"))
            own.add("\nWe will get back to you as soon as it is fixed.")
            if k == 0 or rng.random() < 0.3:
                own.add(" If it is urgent, call me on {p}.", p=staff.pii("phone"))
            t1 = self.at(issue.created + self.hours(0.1, 3), staff)
            reply = self.mail("support", t1, staff, "", own, links, parent=first, to=[self._addr(cust)],
                              cc=[f"support@{self.domain}"], cte="quoted-printable" if k == 0 or rng.random() < 0.25
                              else "")
            first.family = defect_family(issue)
            self.qa.append({"source": "email", "kind": "support", "question": first, "answer": reply,
                            "facts": [issue.key]})
            self.support_threads.append((first, reply, issue, staff, cust))
            if issue.fix_version:
                version, vt = issue.fix_version
                links = []
                own = Text().add("Hi {f},\n\ngood news: the fix for {k} is released in {p} {v}. After upgrading, "
                                 "`{c}` returns `{e}`.", f=cust.pii("first_name"), k=self.key(links, issue, "body"),
                                 p=c.pkg, v=version, c=call, e=exp)
                done = self.mail("support", self.at(max(vt, t1) + self.hours(1, 30), staff), staff, "", own, links,
                                 parent=reply, quote=False, to=[self._addr(cust)], cc=[f"support@{self.domain}"])
                if rng.random() < 0.6:
                    own = Text().add("Thank you, {f}! It works for us now.", f=staff.pii("first_name"))
                    self.mail("support", self.at(done.t + self.hours(1, 48), cust), cust, "", own, [], parent=done)
            elif rng.random() < 0.5:
                links = []
                own = Text().add("Any news on {k}? We still see it every night.", k=self.key(links, issue, "body"))
                self.mail("support", self.at(t1 + self.hours(5 * 24, 10 * 24), cust), cust, "", own, links,
                          parent=reply)

    def _addr(self, who: Who) -> str:
        return email.utils.formataddr((who.name, who.email))

    def _dev_threads(self) -> None:
        """Threads on dev@ about issues being fixed: question, "I'll take it", "fixed in <sha>", thanks."""
        rng, c = self.rng, self.c
        forced = [i for i in self.fixed if i.key == "CORE-12"]
        rest = [i for i in self.fixed if i.key != "CORE-12"]
        chosen = forced + rng.sample(rest, min(len(rest), max(0, round(0.4 * len(self.fixed)) - len(forced))))
        chosen.sort(key=lambda i: (i.created, i.key))
        roots: list[Mail] = []
        for n, issue in enumerate(chosen):
            commit = issue.commits[0]  # the first fixing commit (commits are planned in time order)
            author = commit.person
            asker_p = issue.reporter if issue.reporter is not author else issue.project.lead
            if asker_p is author:
                asker_p = next(p for p in c.people if p is not author)
            asker, dev = self.who(asker_p), self.who(author)
            start = issue.triage["at"] if issue.triage else issue.created
            window = commit.t - start
            fn = issue.fn
            call, exp, act = (fn.sub(s) for s in (fn.bug.call, fn.bug.expected, fn.bug.actual))
            links: Links = []
            style = rng.randrange(3)
            if style == 0:
                subject = f"[{self.key(links, issue, 'subject')}] {issue.summary}"
                own = Text().add("Hi all,\n\n{s}: {u}", s=issue.summary, u=self.issue_url(links, issue, "body"))
            elif style == 1:
                subject = f"{self.key(links, issue, 'subject')}: {issue.summary}"
                own = Text().add("Hi all,\n\nhas anyone looked at {k} yet?", k=self.key(links, issue, "body"))
            else:
                subject = f"Question about {fn.name}"
                own = Text().add("Hi all,\n\n{k} ({u}) is hurting customers.", k=self.key(links, issue, "body"),
                                 u=self.issue_url(links, issue, "body"))
            if "Error" in act:
                own.add("\n`{c}` raises `{a}`.", c=call, a=act)
            else:
                own.add("\n`{c}` returns `{a}` instead of `{e}`.", c=call, a=act, e=exp)
            if rng.random() < 0.5:
                o = rng.choice(self.customers)
                mate = rng.choice([p for p in c.people if p is not asker_p])
                if rng.random() < 0.5:
                    own.add("\n{n} from {o} hit this too; their contact is {e}.", n=o.pii("name"), o=o.org,
                            e=o.pii("email"))
                else:
                    own.add("\n{f} saw it during the release check.", f=mention(mate, "first_name"))
            own.add("\nCould someone who knows `{m}` take a look?", m=fn.module)
            t1 = self.within(start + window // 20, start + window // 3, asker)
            root = self.mail("dev", t1, asker, subject, own, links, quote=False)
            root.family = defect_family(issue)
            links = []
            own = Text().add("Hi {f},\n\nI'll take {k}. The bug is in `{p}/{m}.py`.", f=asker.pii("first_name"),
                             k=self.key(links, issue, "body"), p=c.pkg, m=fn.module)
            if n == 0:  # an mboxo-escaped line: the writer typed "From ..." at the start of a line
                own.add("\n>From a first look, `{f}` never handled this case; I'll add a regression test.",
                        f=fn.name)
            t2 = max(self.within(t1 + 10 * MINUTE, start + window * 4 // 5, dev), t1 + 10 * MINUTE)
            earlier = [r for r in roots if r.t < t2]
            if earlier and (len(roots) == 1 or rng.random() < 0.25):
                other = rng.choice(earlier)
                links.append(("body", "message_id", other.mid, other.mid))
                own.add("\nIt may be the same root cause as the thread in <{i}>, see there.", i=other.mid)
            reply = self.mail("dev", t2, dev, "", own, links, parent=root,
                              cc=[asker.email] if rng.random() < 0.3 else None)
            links = []
            sha = self.sha_of(commit)
            form = rng.randrange(3)
            if form == 0:
                own = Text().add("Fixed in {s} ({u}).", s=self.sha(links, sha, "body"),
                                 u=self.commit_url(links, sha, "body"))
            elif form == 1:
                own = Text().add("Pushed {s} to main.", s=self.sha(links, sha, "body", full=True))
            else:
                own = Text().add("The fix is in:\n{u}\n", u=self.commit_url(links, sha, "body"))
            if issue.fix_version:
                own.add("\nIt will ship with {v}.", v=issue.fix_version[0])
            done = self.mail("dev", self.at(commit.t + self.hours(0.1, 4), dev), dev, "", own, links, parent=reply,
                             quote=rng.random() < 0.5)
            if rng.random() < 0.5:
                own = Text().add("Thanks {f}, verified on main.", f=dev.pii("first_name"))
                self.mail("dev", self.at(done.t + self.hours(0.5, 24), asker), asker, "", own, [], parent=done,
                          quote=False)
            roots.append(root)

    def _announcements(self) -> None:
        """The lead announces each release that fixed something on dev@; the first one is HTML only."""
        c, lead = self.c, self.who(self.lead)
        fixed: dict[str, list[Issue]] = {}
        for issue in c.issues:
            if issue.fix_version:
                fixed.setdefault(issue.fix_version[0], []).append(issue)
        self.releases: list[tuple[str, int, list[Issue]]] = []
        for version, vt in c.versions:
            if version not in fixed:
                continue
            issues = sorted(fixed[version], key=lambda i: (i.project.key, i.num))
            links: Links = []
            subject = f"[ANNOUNCE] {c.pkg} {version} released"
            first = not self.releases
            if first:
                own = Text().add("<html><body>\n<p>Hi all,</p>\n<p>{p} {v} is out. Fixed in this release:</p>\n<ul>",
                                 p=c.pkg, v=version)
            else:
                own = Text().add("Hi all,\n\n{p} {v} is out. Fixed in this release:\n", p=c.pkg, v=version)
            for i in issues:
                url, key = self.issue_url(links, i, "body"), self.key(links, i, "body")
                sha = self.sha_of(i.commits[0]) if i.commits else None
                if first:
                    own.add('\n<li><a href="{u}">{k}</a>: {s}', u=url, k=key, s=html.escape(i.summary))
                    if sha:
                        own.add(' (commit <a href="{u}">{h}</a>)', u=self.commit_url(links, sha, "body"),
                                h=self.sha(links, sha, "body", short=True))
                    own.add("</li>")
                else:
                    own.add("\n- {k}: {s} ({u})", k=key, s=i.summary, u=url)
                    if sha:
                        own.add("\n  commit {h}", h=self.sha(links, sha, "body"))
            if first:
                own.add("\n</ul>\n<p>Thanks to everyone who reported and fixed these.</p>\n"
                        '<div class="moz-signature">-- <br>{n}<br>{t}, {c}</div>\n</body></html>',
                        n=lead.pii("name"), t=TITLES["lead"], c=c.title)
            else:
                own.add("\n\nThanks to everyone who reported and fixed these.")
            mail = self.mail("dev", self.at(vt + self.hours(0.5, 6), lead), lead, subject, own, links, sig=not first,
                             html=first, cte="quoted-printable" if first else "")
            mail.family = "announce:release"
            self.releases.append((version, mail.t, issues))

    def _out_of_office(self) -> None:
        """Everyone who has not written yet sends an out-of-office note (from a personal address if they
        commit with one), so every person has an e-mail handle."""
        rng, c = self.rng, self.c
        wrote = {m.sender.person.username for m in self.mails if m.sender.person}
        for p in c.people:
            if p.username in wrote:
                continue
            who = self.who(p, personal=rng.random() < 0.7)
            t = self.at(c.t0 + 25 * DAY + int(rng.random() * (self.end - c.t0 - 25 * DAY)), who)
            d1, d2 = _local(t + 2 * DAY, p.offset), _local(t + 6 * DAY, p.offset)
            span = f"{d1.day} {MONTHS[d1.month - 1]} to {d2.day} {MONTHS[d2.month - 1]}"
            mate = rng.choice([x for x in c.people if x is not p])
            own = Text().add("Hi all,\n\nI'm out of office from {s}. {f} covers my reviews; for anything urgent "
                             "call me on {p}.", s=span, f=mention(mate, "first_name"), p=who.pii("phone"))
            self.mail("dev", t, who, f"Out of office {span}", own, []).family = "auto:out_of_office"

    # -- Slack ----------------------------------------------------------------------------------

    def post(self, name: str, t: int, user: Person | None, text: Text, links: Links | None = None,
             parent: Post | None = None, **kw: Any) -> Post:
        p = Post(self.channels[name], t, user, text, links or [], parent=parent, seq=len(self.posts), **kw)
        self.posts.append(p)
        if parent is not None:
            parent.replies.append(p)
        return p

    def at_mention(self, p: Person) -> str:
        return f"<@{self.uid[p.username]}>"

    def _joins(self) -> None:
        for ch in self.channels.values():
            t = ch.created
            for p in ch.members:
                self.post(ch.name, t, p, Text().add("{m} has joined the channel", m=self.at_mention(p)),
                          subtype="channel_join", family="auto:join")
                t += self.hours(0.05, 20)

    def _issue_posts(self) -> None:
        """Per first fixing commit: "any update on KEY?" answered in a thread after the push, or a push note."""
        rng, c = self.rng, self.c
        edited = False
        plans = sorted({i.commits[0].seq: i.commits[0] for i in self.fixed}.values(), key=lambda p: (p.t, p.seq))
        for commit in plans:
            issue, author, sha = commit.fixes[0], commit.person, self.sha_of(commit)
            r = rng.random()  # the first push note not about CORE-12 is always written, edited, with the full SHA
            if any(i.key == "CORE-12" for i in commit.fixes) or (edited and r < 0.35):
                asker = issue.reporter if issue.reporter is not author else issue.project.lead
                if asker is author:
                    asker = next(p for p in c.people if p is not author)
                start = issue.triage["at"] if issue.triage else issue.created
                links: Links = []
                if rng.random() < 0.5:
                    text = Text().add("{m} any update on {k}?", m=self.at_mention(author),
                                      k=self.slack_issue(links, issue))
                else:  # the customer who wrote to support@ about it, if one did
                    cust = next((x[4] for x in self.support_threads if x[2] in commit.fixes), None)
                    cust = cust or rng.choice(self.customers)
                    text = Text().add("any update on {k}? {f} from {o} keeps asking",
                                      k=self.slack_issue(links, issue), f=cust.pii("first_name"), o=cust.org)
                q = self.post("dev", self.within(start + (commit.t - start) // 5, commit.t - 10 * MINUTE, asker),
                              asker, text, links, family="question:status")
                links = []
                if rng.random() < 0.5:
                    fact = self.sha(links, sha, "text")
                    text = Text().add("pushed {s} for {k}", s=fact, k=self.key(links, issue, "text"))
                else:
                    fact = self.sha(links, sha, "text", short=True)
                    text = Text().add("fixed in <{u}|{s}>", u=self.commit_url(links, sha, "text"), s=fact)
                    if issue.fix_version:
                        text.add(", it'll be in {v}", v=issue.fix_version[0])
                a = self.post("dev", self.at(commit.t + self.hours(0.05, 2), author), author, text, links, parent=q)
                self.qa.append({"source": "slack", "kind": "status", "question": q, "answer": a, "facts": [fact]})
            elif r < 0.85 or not edited:
                links = []
                keys = " and ".join(self.key(links, i, "text") for i in commit.fixes)
                form = rng.randrange(3) if edited else 2
                if form == 0:
                    text = Text().add("pushed {s} for {k}", s=self.sha(links, sha, "text"), k=keys)
                elif form == 1:
                    text = Text().add("fix for {k} is on main: <{u}|{s}>", k=keys,
                                      u=self.commit_url(links, sha, "text"), s=self.sha(links, sha, "text", short=True))
                else:
                    text = Text().add("merged {s} ({k})", s=self.sha(links, sha, "text", full=True), k=keys)
                self.post("dev", self.at(commit.t + self.hours(0.05, 2), author), author, text, links,
                          edited=None if edited else self.hours(0.02, 0.2), family="announce:push")
                edited = True

    def _support_posts(self) -> None:
        """Support staff tell #support about the customers who wrote in, with their contact details."""
        rng = self.rng
        for n, (_first, reply, issue, staff, cust) in enumerate(self.support_threads):
            if n and rng.random() < 0.4:
                continue
            links: Links = []
            text = Text().add("{n} from {o} (<mailto:{e}|{e2}>, {p}) wrote to support@ about {k}",
                              n=cust.pii("name"), o=cust.org, e=cust.pii("email"), e2=cust.pii("email"),
                              p=cust.pii("phone"), k=self.slack_issue(links, issue))
            if n == 0 or rng.random() < 0.3:
                text.add("; devs, details in <#{c}|dev>", c=self.channels["dev"].id)
            file = None
            if n == 0 or rng.random() < 0.1:
                file = ("customer-trace.log", "text/plain", rng.randrange(2_000, 40_000))
                text.add(". Trace from {f} attached", f=cust.pii("first_name"))
            self.post("support", self.at(reply.t + self.hours(0.1, 3), staff), staff.person, text, links, file=file,
                      family="support:handoff")

    def _knowledge(self) -> None:
        """Questions answered later by someone else (the knowledge-answer family), with the answer's facts."""
        rng, c = self.rng, self.c
        start = {"release": self.releases[0][1] + HOUR if self.releases else None,
                 "where": min((p.t for p in self.intro.values()), default=None),
                 "owner": c.t0 + 25 * DAY, "tests": c.t0 + 25 * DAY}
        kinds = [k for k in ("release", "where", "owner", "tests") if start[k] is not None]
        for n in range(4 * self.scale):
            kind = kinds[n % len(kinds)]
            asker = rng.choice(c.people)
            t = self.at(start[kind] + int(rng.random() * (self.end - start[kind])), asker)
            others = [p for p in c.people if p is not asker]
            links: Links = []
            links_a: Links = []
            if kind == "release":
                issue = rng.choice([i for _, vt, issues in self.releases if vt < t for i in issues])
                question = Text().add("which release has the fix for {k}?", k=self.slack_issue(links, issue))
                answerer, fact = rng.choice(others), issue.fix_version[0]
                answer = Text().add("{v}, it went out with the other fixes of that week", v=fact)
            elif kind == "where":
                plan = self.intro[rng.choice([name for name, p in self.intro.items() if p.t < t])]
                fn = plan.ops[0][1]
                question = Text().add("where does `{f}` live?", f=fn.name)
                answerer = plan.person if plan.person is not asker else rng.choice(others)
                fact = f"{c.pkg}/{fn.module}.py"
                answer = Text().add("`{p}`, it came in with {s}", p=fact,
                                    s=self.sha(links_a, self.sha_of(plan), "text"))
            elif kind == "owner":
                project = rng.choice(c.projects)
                comp = rng.choice(sorted(project.owners))
                owner = project.owners[comp]
                question = Text().add("who owns the {c} component?", c=comp)
                answerer = rng.choice([p for p in others if p is not owner] or others)
                fact = self.at_mention(owner)
                answer = Text().add("{m} does, {f} reviews most {c} changes", m=fact,
                                    f=mention(owner, "first_name"), c=comp)
            else:
                question = Text().add("how do I run the {p} tests locally?", p=c.pkg)
                answerer, fact = rng.choice(others), "python -m unittest discover -s tests -t ."
                answer = Text().add("from the repo root: `{f}` (pytest works too)", f=fact)
            q = self.post(rng.choice(("dev", "general")), t, asker, question, links, family=f"question:{kind}",
                          dup=f"question:{question}")
            when = self.at(t + self.hours(0.2, 8), answerer)
            if rng.random() < 0.75:
                a = self.post(q.channel.name, when, answerer, answer, links_a, parent=q)
            else:  # answered later in the channel, not in a thread
                prefixed = Text().add("{m} re your question: ", m=self.at_mention(asker)).extend(answer)
                a = self.post(q.channel.name, when, answerer, prefixed, links_a)
            self.qa.append({"source": "slack", "kind": kind, "question": q, "answer": a, "facts": [fact]})

    def _builds(self) -> None:
        """The CI bot reports every push of a fix, test, follow-up, release bump or merge to main, linking
        the commit; the commit's subject names the keys it fixes."""
        number = self.rng.randrange(100, 400)
        for plan in sorted(self.c.plans, key=lambda p: (p.t, p.seq)):
            if plan.kind not in ("fix", "test", "followup", "bump", "merge"):
                continue
            sha, links = self.sha_of(plan), []
            number += self.rng.randint(1, 3)
            subject = str(plan.message).split("\n")[0]
            links += [("text", "jira_key", i.key, i.key) for i in plan.fixes if i.key in subject]
            text = Text().add("Build #{n} passed on main: <{u}|{s}> {m}", n=str(number),
                              u=self.commit_url(links, sha, "text"), s=self.sha(links, sha, "text", short=True),
                              m=subject)
            self.post("builds", plan.t + self.hours(0.03, 0.3), None, text, links, subtype="bot_message",
                      family="auto:build")
        for version, t, issues in self.releases:
            links = []
            keys = ", ".join(self.slack_issue(links, i) for i in issues)
            text = Text().add("{p} {v} is out :tada: fixes {k}. Notes on dev@", p=self.c.pkg, v=version, k=keys)
            self.post("general", self.at(t + self.hours(0.1, 1), self.lead), self.lead, text, links,
                      family="announce:release")

    def _chatter(self) -> None:
        rng, c = self.rng, self.c
        lo = c.t0 + 25 * DAY
        for n in range(3 * self.scale):
            p = rng.choice(c.people)
            mate = rng.choice([x for x in c.people if x is not p])
            t = self.at(lo + int(rng.random() * (self.end - lo)), p)
            kind = n % 3
            if kind == 0:
                text = Text().add("{f} is out tomorrow, ping me on {p} if main breaks",
                                  f=mention(mate, "first_name"), p=self.who(p).pii("phone"))
            elif kind == 1:
                text = Text().add("heads-up: {m} ({n}) now also looks after {c}", m=self.at_mention(mate),
                                  n=mention(mate, "name"), c=rng.choice(sorted(c.projects[0].owners)))
            else:
                cust = rng.choice(self.customers)
                text = Text().add("lunch with {n} from {o} moved to Thursday, {f} can you book a table?",
                                  n=cust.pii("name"), o=cust.org, f=mention(mate, "first_name"))
            self.post("general", t, p, text, family=("chatter:away", "chatter:ownership", "chatter:lunch")[kind])

    def _password_resets(self, rng: random.Random) -> None:
        """A batch of near-identical support requests (the same template, only the customer differs):
        "please reset my password", each answered by support. One near-duplicate group in the truth."""
        c = self.c
        lo, span = c.t0 + 25 * DAY, self.end - c.t0 - 25 * DAY
        for n in range(6 * self.scale):
            cust = self.customers[n % len(self.customers)]
            staff = self.who(rng.choice(self.support_staff))
            own = Text().add("Hello,\n\nI cannot log in to the {p} customer portal since this morning, it says my "
                             "password has expired. Could you please reset my password? The account is {e}.\n\n"
                             "Thank you,\n{f}", p=c.pkg, e=cust.pii("email"), f=cust.pii("first_name"))
            t = self.at(lo + int(rng.random() * span), cust)
            first = self.mail("support", t, cust, "Please reset my password", own, [], quote=False, sig=False)
            first.family, first.dup = "access:password_reset", "access:password_reset"
            own = Text().add("Hi {f},\n\nI have reset your password; you will get an e-mail with a link to set a "
                             "new one. The link is valid for 24 hours.", f=cust.pii("first_name"))
            self.mail("support", self.at(t + self.hours(0.2, 6), staff), staff, "", own, [], parent=first,
                      to=[self._addr(cust)], cc=[f"support@{self.domain}"])

    def _reactions(self) -> None:
        rng = self.rng
        for post in self.posts:
            if post.user is None or post.subtype or rng.random() >= 0.25:
                continue
            others = [p for p in post.channel.members if p is not post.user]
            for name in rng.sample(REACTIONS, rng.choice((1, 1, 2))):
                post.reactions.append((name, rng.sample(others, min(len(others), rng.randint(1, 3)))))

    # -- rendering ------------------------------------------------------------------------------

    def write(self, out: Path, commits: list[dict]) -> dict[str, Any]:
        """Write mail/ and slack/ under `out/<dataset>` and return the truth additions (see `truth`)."""
        root = out / self.c.dataset
        (root / "mail").mkdir(parents=True)
        files = {}
        for lst in LISTS:
            path = root / "mail" / f"{lst}.mbox"
            files[lst] = path.relative_to(out).as_posix()
            mails = sorted((m for m in self.mails if m.lst == lst), key=lambda m: (m.t, m.seq))
            with open(path, "wb") as f:
                for n, m in enumerate(mails):
                    f.write(self._render_mail(m, self.envelope[lst] + n) + b"\n")
        self._assign_ts()
        slack = root / "slack"
        slack.mkdir()
        (slack / "users.json").write_text(_slack_json(self._users()), encoding="utf-8")
        (slack / "channels.json").write_text(_slack_json(self._channels()), encoding="utf-8")
        days: dict[tuple[str, str], list[Post]] = {}
        for p in sorted(self.posts, key=lambda p: p.ts):
            days.setdefault((p.channel.name, p.day), []).append(p)
        for (name, day), posts in sorted(days.items()):
            (slack / name).mkdir(exist_ok=True)
            (slack / name / f"{day}.json").write_text(_slack_json([self._message(p) for p in posts]), encoding="utf-8")
        return self.truth(out, files, commits)

    # -- mail rendering ---------------------------------------------------------------------------

    def _render_mail(self, m: Mail, number: int) -> bytes:
        """One mboxo entry: separator line, ezmlm list headers, RFC 5322 headers, MIME body."""
        lst, d = m.lst, self.domain
        envelope = f"{lst}-return-{number}-apmail-{self.c.dataset}-{lst}-archive={d}@{d}"
        sec = m.t // 1000
        zone = dt.timezone(dt.timedelta(minutes=m.sender.offset))
        heads = [("Return-Path", f"<{envelope}>"), ("Mailing-List", f"contact {lst}-help@{d}; run by ezmlm"),
                 ("Precedence", "bulk"), ("List-Help", f"<mailto:{lst}-help@{d}>"),
                 ("List-Unsubscribe", f"<mailto:{lst}-unsubscribe@{d}>"), ("List-Post", f"<mailto:{lst}@{d}>"),
                 ("List-Id", f"<{lst}.{d}>"), ("Delivered-To", f"mailing list {lst}@{d}"),
                 ("Message-ID", f"<{m.mid}>"),
                 ("Date", email.utils.format_datetime(dt.datetime.fromtimestamp(sec, zone))),
                 ("From", self._addr(m.sender)), ("To", ", ".join(m.to))]
        if m.cc:
            heads.append(("Cc", ", ".join(m.cc)))
        heads.append(("Subject", m.subject if m.subject.isascii()
                      else Header(m.subject, "utf-8", header_name="Subject").encode()))
        if m.parent is not None:
            chain, p = [], m.parent
            while p is not None:
                chain.insert(0, f"<{p.mid}>")
                p = p.parent
            heads += [("In-Reply-To", f"<{m.parent.mid}>"), ("References", "\n ".join(chain))]
        heads.append(("MIME-Version", "1.0"))
        part, payload = _encode(str(m.body), "html" if m.html else "plain", m.cte)
        if m.attachment is None:
            heads += part
        else:  # the newline before a boundary belongs to the boundary (RFC 2046 5.1.1), hence the extra "\n"
            boundary = f"----=_Part_{m.seq}_{sec}"
            name, mime, data = m.attachment
            heads.append(("Content-Type", f'multipart/mixed; boundary="{boundary}"'))
            payload = "".join((
                "This is a multi-part message in MIME format.\n", f"--{boundary}\n",
                *(f"{k}: {v}\n" for k, v in part), "\n", payload, "\n", f"--{boundary}\n",
                f'Content-Type: {mime}; name="{name}"\n', f'Content-Disposition: attachment; filename="{name}"\n',
                "Content-Transfer-Encoding: base64\n\n", base64.encodebytes(data).decode("ascii"),
                f"--{boundary}--\n"))
        asctime = dt.datetime.fromtimestamp(sec, dt.UTC).ctime()
        return "".join((f"From {envelope} {asctime}\n", *(f"{k}: {v}\n" for k, v in heads), "\n",
                        payload)).encode("utf-8")

    # -- Slack rendering --------------------------------------------------------------------------

    def _assign_ts(self) -> None:
        """`ts` = the post's time with microseconds, bumped by 1 us on a clash so it stays unique."""
        used: set[tuple[int, int]] = set()
        for p in sorted(self.posts, key=lambda p: (p.t, p.seq)):
            sec, micro = p.t // 1000, p.t % 1000 * 1000
            while (sec, micro) in used:
                micro += 1
            used.add((sec, micro))
            p.ts, p.day = f"{sec}.{micro:06d}", dt.datetime.fromtimestamp(sec, dt.UTC).strftime("%Y-%m-%d")

    def _profile(self, p: Person) -> dict:
        return {"avatar_hash": "g" + uuid.uuid5(uuid.NAMESPACE_DNS, f"{p.username}.{self.domain}").hex[:11],
                "first_name": p.first, "real_name": p.name, "display_name": self.display[p.username],
                "team": self.team, "name": p.username, "is_restricted": False, "is_ultra_restricted": False}

    def _users(self) -> list[dict]:
        updated = self.c.t0 // 1000
        users = []
        for n, p in enumerate(self.c.people):
            disp = self.display[p.username]
            users.append({
                "id": self.uid[p.username], "team_id": self.team, "name": p.username, "deleted": False,
                "color": f"{(n * 2654435761) % 0xFFFFFF:06x}", "real_name": p.name, "tz": p.timezone,
                "tz_offset": p.offset * 60,
                "profile": {"title": TITLES[p.role], "phone": "", "skype": "", "real_name": p.name,
                            "real_name_normalized": ascii_fold(p.name), "display_name": disp,
                            "display_name_normalized": ascii_fold(disp), "fields": None, "status_text": "",
                            "status_emoji": "", "avatar_hash": self._profile(p)["avatar_hash"],
                            "email": p.email, "first_name": p.first, "last_name": p.name.split(" ", 1)[1],
                            "team": self.team},
                "is_admin": p.role == "lead", "is_owner": n == 0, "is_primary_owner": n == 0,
                "is_restricted": False, "is_ultra_restricted": False, "is_bot": False, "is_app_user": False,
                "updated": updated})
        users.append({"id": self.bot_uid, "team_id": self.team, "name": "ci-bot", "deleted": False,
                      "real_name": "CI", "profile": {"real_name": "CI", "display_name": "", "bot_id": self.bot_id,
                                                     "always_active": True, "team": self.team},
                      "is_bot": True, "is_app_user": False, "updated": updated})
        return users

    def _channels(self) -> list[dict]:
        lead = self.uid[self.lead.username]
        return [{"id": ch.id, "name": ch.name, "created": ch.created // 1000, "creator": lead, "is_archived": False,
                 "is_general": ch.name == "general", "members": [self.uid[p.username] for p in ch.members],
                 "topic": {"value": "", "creator": "", "last_set": 0},
                 "purpose": {"value": ch.purpose, "creator": lead, "last_set": ch.created // 1000}}
                for ch in self.channels.values()]

    def _message(self, p: Post) -> dict:
        """One message as the export's day files hold it (thread parents carry the reply list)."""
        text = str(p.text)
        if p.user is None:
            return {"type": "message", "subtype": "bot_message", "text": text, "ts": p.ts, "username": "ci-bot",
                    "bot_id": self.bot_id, "icons": {"emoji": ":robot_face:"}}
        uid = self.uid[p.user.username]
        if p.subtype == "channel_join":
            return {"type": "message", "subtype": "channel_join", "ts": p.ts, "user": uid, "text": text}
        msg: dict[str, Any] = {
            "client_msg_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.team}/{p.native_id}")),
            "type": "message", "text": text, "user": uid, "ts": p.ts, "team": self.team, "user_team": self.team,
            "source_team": self.team, "user_profile": self._profile(p.user)}
        if p.edited:
            msg["edited"] = {"user": uid, "ts": f"{(p.t + p.edited) // 1000}.000000"}
        if p.file:
            name, mime, size = p.file
            fid = "F" + p.native_id.replace(".", "")[-9:]
            msg["files"] = [{"id": fid, "created": p.t // 1000, "timestamp": p.t // 1000, "name": name, "title": name,
                             "mimetype": mime, "filetype": "text", "pretty_type": "Plain Text", "user": uid,
                             "editable": True, "size": size, "mode": "snippet", "is_external": False,
                             "external_type": "", "is_public": True, "public_url_shared": False,
                             "display_as_bot": False, "username": "",
                             "url_private": f"https://files.slack.com/files-pri/{self.team}-{fid}/{name}",
                             "url_private_download": f"https://files.slack.com/files-pri/{self.team}-{fid}/download/{name}"}]
            msg["upload"] = True
            msg["display_as_bot"] = False
        if p.replies:
            replies = sorted(p.replies, key=lambda r: r.ts)
            users = list(dict.fromkeys(self.uid[r.user.username] for r in replies))
            msg.update({"thread_ts": p.ts, "reply_count": len(replies), "reply_users_count": len(users),
                        "latest_reply": replies[-1].ts, "reply_users": users,
                        "replies": [{"user": self.uid[r.user.username], "ts": r.ts} for r in replies],
                        "is_locked": False, "subscribed": False})
        if p.parent is not None:
            msg.update({"thread_ts": p.parent.ts, "parent_user_id": self.uid[p.parent.user.username]})
        if p.reactions:
            msg["reactions"] = [{"name": name, "users": [self.uid[u.username] for u in who], "count": len(who)}
                                for name, who in p.reactions]
        return msg

    # -- truth ------------------------------------------------------------------------------------

    def truth(self, out: Path, files: dict[str, str], commits: list[dict]) -> dict[str, Any]:
        """Truth additions: sources, pii (mail and Slack), links, identities, threads, qa (schema in company.py)."""
        c = self.c
        slack_dir = (out / c.dataset / "slack").relative_to(out).as_posix()
        pii: list[dict] = []
        for m in self.mails:
            pii += m.body.truth(files[m.lst], f"mbox:{m.mid}:body")
        for p in self.posts:
            pii += p.text.truth(f"{slack_dir}/{p.channel.name}/{p.day}.json",
                                f"slack:{p.channel.name}/{p.day}.json:{p.ts}:text")
        raw = [("git", x["sha"], "message", "jira_key", key, key) for x in commits for key in x["fixes"]]
        raw += [("email", m.mid, *link) for m in sorted(self.mails, key=lambda m: (m.t, m.seq)) for link in m.links]
        raw += [("slack", p.native_id, *link) for p in sorted(self.posts, key=lambda p: p.ts) for link in p.links]
        links, seen = [], set()
        for source, native, fld, kind, value, text in raw:
            if (source, native, fld, kind, value) not in seen:
                seen.add((source, native, fld, kind, value))
                links.append({"from": {"source": source, "native_id": native}, "to": {"kind": kind, "value": value},
                              "field": fld, "text": text})
        threads: dict[str, list[Mail]] = {}
        for m in sorted(self.mails, key=lambda m: (m.t, m.seq)):
            threads.setdefault(m.root.mid, []).append(m)
        mail_threads = [{"list": ms[0].lst, "file": files[ms[0].lst], "subject": ms[0].subject,
                         "messages": [m.mid for m in ms]} for ms in threads.values()]
        slack_threads = [{"channel": p.channel.name, "channel_id": p.channel.id, "thread_ts": p.ts,
                          "messages": [p.native_id] + [r.native_id for r in sorted(p.replies, key=lambda r: r.ts)]}
                         for p in sorted(self.posts, key=lambda p: p.ts) if p.replies]
        qa = []
        for q in self.qa:
            ask, ans = q["question"], q["answer"]
            if q["source"] == "email":
                ids = (ask.mid, ans.mid)
                handles = (f"email:{ask.sender.email.lower()}", f"email:{ans.sender.email.lower()}")
            else:
                ids = (ask.native_id, ans.native_id)
                handles = (f"slack:{self.uid[ask.user.username]}", f"slack:{self.uid[ans.user.username]}")
            qa.append({"source": q["source"], "kind": q["kind"], "question": ids[0], "answer": ids[1],
                       "asker": handles[0], "answerer": handles[1], "in_thread": ans.parent is ask,
                       "facts": q["facts"]})
        work = [{"source": "email", "native_id": m.mid, "family": m.family or m.root.family, "near_dup": m.dup or None}
                for m in sorted(self.mails, key=lambda m: (m.t, m.seq))]
        work += [{"source": "slack", "native_id": p.native_id,
                  "family": p.family or (p.parent.family if p.parent else ""), "near_dup": p.dup or None}
                 for p in sorted(self.posts, key=lambda p: p.ts)]
        per_list = {lst: sum(1 for m in self.mails if m.lst == lst) for lst in LISTS}
        per_channel = {name: sum(1 for p in self.posts if p.channel.name == name) for name in self.channels}
        return {
            "sources": {
                "mail": [{"list": lst, "address": f"{lst}@{self.domain}", "file": files[lst], "messages": per_list[lst]}
                         for lst in LISTS],
                "slack": {"dir": slack_dir, "team_id": self.team, "users": len(c.people) + 1,
                          "bot": {"user_id": self.bot_uid, "bot_id": self.bot_id, "name": "ci-bot"},
                          "channels": [{"id": ch.id, "name": ch.name, "messages": per_channel[ch.name]}
                                       for ch in self.channels.values()],
                          "messages": len(self.posts)}},
            "pii": pii, "links": links, "identities": self._identities(commits),
            "threads": {"email": mail_threads, "slack": slack_threads}, "qa": qa, "families": work}

    def _identities(self, commits: list[dict]) -> list[dict]:
        """Every handle each person has in the four sources; customers only have e-mail addresses."""
        c = self.c
        handles: dict[str, set[str]] = {p.username: {f"slack:{self.uid[p.username]}"} for p in c.people}
        for i in c.issues:
            names = [i.reporter, i.cur["assignee"], i.filed["assignee"], *(h.author for h in i.histories),
                     *(cm.author for cm in i.comments)]
            for p in names:
                if p is not None:
                    handles[p.username].add(f"jira:{p.username}")
            for item in (item for h in i.histories for item in h.items if item["field"] == "assignee"):
                for u in filter(None, (item["from"], item["to"])):
                    handles[u].add(f"jira:{u}")
        for x in commits:
            handles[x["author"]["person"]].add(f"git:{x['author']['email'].lower()}")
        by_addr = {p.email.lower(): p.username for p in c.people}
        by_addr.update({e.lower(): p.username for p in c.people for _, e in p.git})
        customers: set[str] = set()
        for m in self.mails:
            for rcpt in (m.sender.email, *m.to, *m.cc):  # "Name <addr>" or "addr", as `mail` wrote them
                addr = (rcpt[rcpt.rindex("<") + 1:-1] if rcpt.endswith(">") else rcpt).lower()
                if addr in by_addr:
                    handles[by_addr[addr]].add(f"email:{addr}")
                elif not addr.endswith(f"@{self.domain}"):  # the lists' own addresses aside
                    customers.add(addr)
        out = [{"person": p.username, "name": p.name, "kind": "staff", "handles": sorted(handles[p.username])}
               for p in c.people]
        names = {w.email.lower(): w.name for w in self.customers}
        return out + [{"person": None, "name": names[a], "kind": "customer", "handles": [f"email:{a}"]}
                      for a in sorted(customers)]


def _encode(text: str, subtype: str, cte: str) -> tuple[list[tuple[str, str]], str]:
    """Content headers and encoded payload of one text part. A body line starting with "From " would
    split the mbox: the planner writes those lines already escaped (">From "), and quoted-printable
    spells the "F" as "=46", which decodes back to the same text."""
    raw = text.encode("utf-8")
    if cte == "base64":
        payload = base64.encodebytes(raw).decode("ascii")
    elif cte == "quoted-printable":
        payload = "\n".join("=46" + line[1:] if line.startswith("From ") else line
                            for line in quopri.encodestring(raw).decode("ascii").split("\n"))
    else:
        cte, payload = ("7bit" if text.isascii() else "8bit"), text
        if any(line.startswith("From ") for line in text.split("\n")):
            raise ValueError("a body line starts with 'From '; write it as '>From ' (mboxo)")
    charset = "us-ascii" if cte == "7bit" else "utf-8"
    return [("Content-Type", f"text/{subtype}; charset={charset}"), ("Content-Transfer-Encoding", cte)], payload


def write_channels(out: Path, company: _Company, rng: random.Random, commits: list[dict]) -> dict[str, Any]:
    """Plan and write the mail archive and the Slack export; return the truth additions."""
    return Channels(company, rng).write(out, commits)
