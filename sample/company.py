"""A deterministic synthetic company export: Jira, git, a mail archive, Slack, and hidden ground truth.

Layout written under `out`:
    <dataset>/jira/<KEY>.json          one issue per file, as `GET /rest/api/2/issue/KEY?expand=changelog`
                                       returns it (Jira Server REST API v2)
    <dataset>/jira/search-page-<i>.json  pages of `GET /rest/api/2/search?jql=project=WEB ORDER BY key
                                       &expand=changelog&startAt=50*i&maxResults=50` for the second project
    <dataset>/repo/                    a non-bare git repository, `main` checked out (see gitstream.py)
    <dataset>/mail/<list>.mbox         mod_mbox archives of the dev@ and support@ lists (see channels.py)
    <dataset>/slack/                   an unpacked Slack export: users.json, channels.json,
                                       <channel>/<YYYY-MM-DD>.json (see channels.py)
    .truth/<dataset>.json              ground truth (outside the export: the exports scanner skips dot-dirs)

Invariants:
- Only `random.Random(seed)` drives the Jira and git choices and no clock is read: the same (seed, scale,
  dataset) gives byte-identical Jira files, mail and Slack files and truth file, and identical commit SHAs.
  Mail and Slack draw from their own stream, `random.Random(f"{seed}-channels")`, after Jira and git are
  rendered, so they never change a Jira file or a SHA.
- Planted identifiers and secrets (planted.py) draw from a third stream, seeded by one draw from the main
  one once the plan is complete. They are appended to existing Jira descriptions and comments (no other
  Jira field changes), written into new mails and Slack posts, and committed in commits appended after
  every planned commit: the SHAs of the planned history are the same with or without them.
- Timelines are coherent per issue: created < triage < In Progress < fixing commits < resolutiondate;
  the buggy function an issue describes exists in the repository before the issue is filed.
- Changelog `from` values are the values as filed, so replaying the changelog from the end state
  recovers the issue as filed; triage changes only type, priority, components and assignee.
- Every planted PII item and secret is recorded with exact offsets into the string at its location; fixing commits
  name their issue key(s) and no other commit message contains anything shaped like an issue key.

Truth schema "taskmine.sample.truth/4" (a JSON object; /2 added the last six keys and the mail/Slack
locations of "pii" to /1; /3 adds the structured-identifier and secret types and the commit:<sha>:diff
location of "pii", and the commit kinds "config" and "cleanup"; /4 adds "families" and the issues' "family"):
    schema, dataset, seed, scale
    offsets      how "pii" offsets and locations are defined (the OFFSETS text below)
    people       per roster person: name, first_name, email, role, timezone, jira account, git identities,
                 handles (jira + every git identity, used or not)
    issues       per issue: key, file + JSON pointer, as filed, triage (or untriaged_reason), duplicate_of,
                 fix_version, function, fixing_commits
    commits      per commit: sha, parents, kind (initial|add|fix|test|followup|feature|merge|bump|doc, and
                 config|cleanup: a settings file with secrets committed, then deleted), fixes (keys), subject,
                 author, date
    pii          {type, value, person: Jira name | null (outsiders, secrets), file, location, [path,] start, end}
                 type: name|first_name|email|phone|username (people), ip|postal_address|url_personal|
                 credit_card|iban|us_ssn (structured identifiers), secret:<kind> with kind private_key|
                 aws_access_key_id|aws_secret_key|github_token|slack_token|google_api_key|stripe_key|jwt|
                 url_password|connection_string|password (privacy/pii.py's kinds); value is the span
                 pii.find reports: a whole profile URL but only the user name of a /home/<user>/ path, only the
                 password of a URL or connection string, the value of a password assignment, the whole
                 BEGIN..END block of a private key; it may span lines (private key, multi-line address).
                 file: for commit locations the repository folder (acme/repo); path: only for
                 commit:<sha>:diff, the file inside the repository
    sources      {"mail": [{list, address, file, messages}],
                  "slack": {dir, team_id, users, bot: {user_id, bot_id, name},
                            channels: [{id, name, messages}], messages}}
    links        every cross-source reference written in a commit message, mail subject/body or Slack text:
                 {"from": {"source": "git"|"email"|"slack", "native_id": full SHA | Message-ID without <> |
                           "<channel id>:<ts>"},
                  "to": {"kind": "jira_key"|"issue_url"|"commit"|"commit_url"|"message_id",
                         "value": issue key | full SHA | Message-ID without <>},
                  "field": "message"|"subject"|"body"|"text", "text": the literal text written}
                 One entry per (from, field, kind, value). A URL is listed once, as issue_url/commit_url,
                 although the key or SHA inside it is also visible; a "commit" text is the full SHA or a
                 7-12 digit prefix unique in the repository. A reply's quote of its parent and a reply's
                 "Re:" subject refer to what they quote, so they are links of the reply too.
    identities   [{person: Jira name | null, name, kind: "staff"|"customer",
                   handles: sorted ["jira:<name>", "git:<email lower>", "email:<addr lower>", "slack:<user id>"]}]
                 only handles that occur in the files (git: commit authors; email: From/To/Cc headers;
                 jira: account names in user fields and assignee changes); every staff member has all four kinds
    threads      {"email": [{list, file, subject, messages: [Message-ID, ...]}] (every mail in exactly one
                  thread, time order, root first), "slack": [{channel, channel_id, thread_ts,
                  messages: ["<channel id>:<ts>", ...]}] (threads with replies, parent first)}
    qa           [{source: "email"|"slack", kind: support|status|release|where|owner|tests, question, answer
                   (native ids as in links), asker, answerer (handles), in_thread, facts: [strings the answer
                   contains]}]: questions answered later by someone else
    families     [{source: "email"|"slack", native_id, family, near_dup}] for every mail and Slack post: the kind
                 of work it asks for or belongs to ("defect:<kind>" for anything about an issue, the defect
                 kind of its function; "question:<kind>", "access:password_reset", "billing:refund", ...; a
                 reply has its thread's), and near_dup, the group of requests written from one template with
                 the same slots (null when none); issues carry their "family" in "issues"
"""
from __future__ import annotations

import datetime as dt
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sample.channels import defect_family, write_channels
from sample.codebase import Codebase, Fn, feature_files, new_fn
from sample.gitstream import GitCommit, build_repo
from sample.planted import Planter, leak_commits, plant_jira
from sample.roster import (DAY, HOUR, Outsider, Person, Pii, Text, make_outsiders, make_roster, mention,
                           working_time)

JIRA_EXPAND = "renderedFields,names,schema,operations,editmeta,changelog,versionedRepresentations"
ISSUE_TYPES = {"Bug": "1", "New Feature": "2", "Task": "3", "Improvement": "4"}
PRIORITIES = {"Blocker": "1", "Critical": "2", "Major": "3", "Minor": "4", "Trivial": "5"}
STATUSES = {"Open": ("1", 2, "new", "blue-gray", "To Do"),
            "In Progress": ("3", 4, "indeterminate", "yellow", "In Progress"),
            "Resolved": ("5", 3, "done", "green", "Done")}
RESOLUTIONS = {"Fixed": "1", "Won't Fix": "2", "Duplicate": "3", "Cannot Reproduce": "5"}
DUPLICATE = {"id": "10002", "name": "Duplicate", "inward": "is duplicated by", "outward": "duplicates"}
LABELS = ("customer", "regression", "performance", "support", "ux")
PROJECTS = (  # key, name suffix, project id, {component: nouns}; components double as module names
    ("CORE", "Core", "10000", {
        "cache": ("ttl", "entry", "shard", "eviction", "hit_rate", "bucket", "key"),
        "parser": ("token", "header", "field", "delimiter", "column", "record", "line"),
        "billing": ("invoice", "refund", "charge", "tax", "discount", "fee", "credit"),
        "auth": ("session", "role", "scope", "login", "group", "token", "permission"),
        "api": ("request", "page_size", "retry", "timeout", "endpoint", "rate", "payload")}),
    ("WEB", "Web", "10001", {
        "checkout": ("cart", "coupon", "shipping", "order", "basket", "total"),
        "search": ("query", "facet", "result", "filter", "term", "rank"),
        "ui": ("theme", "label", "column_width", "tooltip", "tab", "locale")}),
)
FEATURES = (("csv_report", "CSV report"), ("audit_log", "audit log"), ("rate_limit", "rate limit"),
            ("webhook", "webhook"), ("metrics", "metrics"), ("export", "export"))
ISSUES_PER_SCALE = {"CORE": 12, "WEB": 4}
PAGE_SIZE = 50
TRUTH_SCHEMA = "taskmine.sample.truth/4"
OFFSETS = ("start/end are Python str indices (Unicode code points) into the string at `location`; `file` is "
           "relative to the output directory. Locations: a JSON pointer into a Jira file; "
           "commit:<sha>:message = the raw commit message; commit:<sha>:diff = the content, decoded as UTF-8, of "
           "the file `path` as that commit adds it (`git show <sha>:<path>`, all of it on the + side of the "
           "commit's diff; a later commit deletes the file, so it is only in the history); "
           "mbox:<Message-ID>:body = the decoded body of that "
           "message (the first text/plain part, else the first text/html part; Content-Transfer-Encoding undone, "
           "decoded as its charset, as email.message.Message.get_content() returns it; mboxo '>From ' escapes "
           "kept as stored); slack:<channel>/<YYYY-MM-DD>.json:<ts>:text = the parsed `text` of the message "
           "with that ts in that day file")


@dataclass(frozen=True)
class SampleSummary:
    """What `write_sample` wrote, for the CLI's closing table and for tests."""

    out: Path
    dataset: str
    jira_dir: Path
    repo_dir: Path
    mail_dir: Path
    slack_dir: Path
    truth_path: Path
    people: int
    issues: int
    issue_files: int
    search_pages: int
    commits: int
    fixing_commits: int
    merges: int
    untriaged: int
    pii_items: int
    mails: int
    slack_messages: int
    links: int


def write_sample(out: Path, seed: int = 0, scale: int = 1, dataset: str = "acme") -> SampleSummary:
    """Write the sample company for `dataset` under `out` (see the module docstring for the layout)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", dataset):
        raise ValueError(f"dataset {dataset!r} must be lower-case letters, digits and '_', e.g. 'acme'")
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ValueError(f"scale must be a positive integer, got {scale!r}")
    out = Path(out)
    root, truth_path = out / dataset, out / ".truth" / f"{dataset}.json"
    for path in (root, truth_path):
        if path.exists() and (path.is_file() or any(path.iterdir())):
            raise FileExistsError(f"{path} already exists; choose an empty --out directory or delete it")
    company = _Company(random.Random(seed), scale, dataset)
    written = company.write(out)
    extra = write_channels(out, company, random.Random(f"{seed}-channels"), written["commits"])
    written["pii"] += extra.pop("pii")
    truth = {"schema": TRUTH_SCHEMA, "dataset": dataset, "seed": seed, "scale": scale, "offsets": OFFSETS,
             "people": company.people_truth(), **written, **extra}
    truth_path.parent.mkdir(parents=True, exist_ok=True)
    truth_path.write_text(_dump(truth), encoding="utf-8")
    return SampleSummary(
        out=out, dataset=dataset, jira_dir=root / "jira", repo_dir=root / "repo", mail_dir=root / "mail",
        slack_dir=root / "slack", truth_path=truth_path,
        people=len(company.people), issues=len(company.issues),
        issue_files=sum(1 for i in company.issues if i.project.key == "CORE"),
        search_pages=company.search_pages, commits=len(truth["commits"]),
        fixing_commits=sum(1 for c in truth["commits"] if c["fixes"]),
        merges=sum(1 for c in truth["commits"] if len(c["parents"]) > 1),
        untriaged=sum(1 for i in truth["issues"] if i["triage"] is None), pii_items=len(truth["pii"]),
        mails=sum(x["messages"] for x in extra["sources"]["mail"]),
        slack_messages=extra["sources"]["slack"]["messages"], links=len(extra["links"]))


def _dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def _zone(offset: int) -> str:
    return f"{'+' if offset >= 0 else '-'}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"


def _ts(t: int, person: Person) -> str:
    """Jira's timestamp format, in the zone of the person who acted: 2021-03-04T10:15:30.000+0530."""
    local = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=t + person.offset * 60_000)
    return local.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t % 1000:03d}{_zone(person.offset)}"


def _say(rng: random.Random, text: Text, options: tuple[tuple[str, dict], ...]) -> Text:
    """Append one of `options` (template, slots) to `text`."""
    template, slots = rng.choice(options)
    return text.add(template, **slots)


def _item(fld: str, frm: str | None, frm_s: str | None, to: str | None, to_s: str | None) -> dict:
    return {"field": fld, "fieldtype": "jira", "from": frm, "fromString": frm_s, "to": to, "toString": to_s}


@dataclass(eq=False)
class Project:
    key: str
    name: str
    id: str
    components: dict[str, str]  # name -> id
    nouns: dict[str, tuple[str, ...]]
    lead: Person
    team: list[Person]
    owners: dict[str, Person]
    issues: list[Issue] = field(default_factory=list)


@dataclass
class Hist:
    t: int
    author: Person
    items: list[dict]
    id: str = ""


@dataclass
class Comment:
    t: int
    author: Person
    text: Text
    id: str = ""


@dataclass(eq=False)
class Issue:
    project: Project
    num: int
    reporter: Person
    created: int
    fn: Fn
    summary: str
    description: Text
    filed: dict[str, Any]  # type, priority, components (names), assignee (Person | None)
    labels: list[str]
    affects: str | None = None
    duplicate_of: Issue | None = None
    cur: dict[str, Any] = field(default_factory=dict)
    histories: list[Hist] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)
    status: str = "Open"
    resolution: str | None = None
    resolved: int | None = None
    resolver: Person | None = None
    triage: dict[str, Any] | None = None
    duplicated_by: list[Issue] = field(default_factory=list)
    commits: list[Plan] = field(default_factory=list)
    fix_version: tuple[str, int] | None = None
    id: str = ""

    @property
    def key(self) -> str:
        return f"{self.project.key}-{self.num}"

    def last(self) -> int:
        return max([self.created] + [h.t for h in self.histories])


@dataclass(eq=False)
class Plan:
    """A commit to be made: when, by whom, what it says and which codebase changes it carries."""

    t: int
    person: Person
    identity: tuple[str, str]
    message: Text
    kind: str
    ops: list[tuple[str, Any]] = field(default_factory=list)
    fixes: list[Issue] = field(default_factory=list)
    feature: tuple[str, str] | None = None
    seq: int = 0
    mark: int = 0


class _Company:
    """Plans the whole company in the constructor (only rng draws), then renders files on request."""

    def __init__(self, rng: random.Random, scale: int, dataset: str, plant: bool = True):
        """`plant=False` leaves out the planted identifiers and secrets (tests compare the two)."""
        self.rng, self.scale, self.dataset = rng, scale, dataset
        self.title = f"{dataset.replace('_', ' ').title()} Corp"
        self.domain = f"{dataset.replace('_', '-')}-corp.example"
        self.base = f"https://jira.{self.domain}"
        self.pkg = f"{dataset}kit"
        self.people = make_roster(rng, 6 + 2 * scale, self.domain)
        self.outsiders: list[Outsider] = make_outsiders(rng, 4 + scale)
        self.plans: list[Plan] = []
        self.by_mark: dict[int, Plan] = {}
        self.initial_fns: list[Fn] = []
        self.intro: dict[str, int] = {}  # function name -> time it entered main
        self.taken: set[str] = set()
        epoch = dt.datetime(2020, 1, 6, tzinfo=dt.UTC).timestamp()
        self.t0 = self.snap(int(epoch) * 1000 + rng.randrange(300) * DAY, self.people[0])
        self.span = (30 + 12 * scale) * DAY
        self.projects = self._projects()
        self.issues: list[Issue] = []
        for project in self.projects:
            self._plan_project(project)
        self.issues.sort(key=lambda i: (i.created, i.project.key, i.num))
        for n, issue in enumerate(self.issues):
            issue.id = str(10001 + n)
        self._plan_features()
        self.versions = self._plan_bumps()
        self._plan_docs()
        self.search_pages = 0
        self.shas: dict[int, str] = {}  # commit mark -> SHA, once `write` built the repository
        # Planted identifiers and secrets (planted.py) come last, from their own stream: the plan above is final.
        self.planter = Planter(random.Random(rng.getrandbits(64)), self.domain)
        if plant:
            plant_jira(self, self.planter)
            self._plan_leaks()

    # -- helpers --------------------------------------------------------------------------------

    def hours(self, lo: float, hi: float) -> int:
        return int(self.rng.uniform(lo, hi) * HOUR)

    def snap(self, t: int, person: Person) -> int:
        return working_time(self.rng, t, person.offset)

    def pick(self, people: list[Person], avoid: Person | None = None) -> Person:
        return self.rng.choice([p for p in people if p is not avoid] or people)

    def _projects(self) -> list[Project]:
        leads = self.people[:2]
        devs = [p for p in self.people if p.role == "dev"]
        out = []
        for j, (key, suffix, pid, comps) in enumerate(PROJECTS):
            team = devs[j::2] or devs
            owners = {c: team[n % len(team)] for n, c in enumerate(comps)}
            ids = {c: str(10100 + 100 * j + n) for n, c in enumerate(comps)}
            out.append(Project(key, f"{self.title.split()[0]} {suffix}", pid, ids, comps, leads[j], team, owners))
        return out

    # -- issues ---------------------------------------------------------------------------------

    def _plan_project(self, p: Project) -> None:
        rng, n = self.rng, ISSUES_PER_SCALE[p.key] * self.scale
        # CORE-1, CORE-10, CORE-12 and CORE-123 get fixing commits (keys that are prefixes of others),
        # CORE-11 is a duplicate when an open original exists, and the newest WEB issue is still open.
        forced = ({1: "fixed", 10: "fixed", 11: "Duplicate", 12: "fixed", 123: "fixed"} if p.key == "CORE"
                  else {n: "Open"})
        untriaged = set(rng.sample([k for k in range(1, n + 1) if k not in forced], round(0.2 * n)))
        pairs: set[int] = set()
        if p.key == "CORE":
            cands = [k for k in range(2, n) if {k, k + 1}.isdisjoint(untriaged | set(forced))]
            for k in rng.sample(cands, len(cands)):
                if len(pairs) < self.scale and {k - 1, k, k + 1}.isdisjoint(pairs):
                    pairs.add(k)
        t, k = self.t0 + 25 * DAY, 1
        while k <= n:
            t += int(self.span / n * rng.uniform(0.4, 1.6))
            if k in pairs:
                a = self._new_issue(p, k, t)
                self._triage(a)
                b = self._new_issue(p, k + 1, a.created + self.hours(2, 20))
                self._triage(b, assignee=a.cur["assignee"])
                self._work([a, b], n_commits=1)
                self._comments(a)
                self._comments(b)
                t, k = b.created, k + 2
                continue
            triaged = k not in untriaged
            outcome = forced.get(k) or rng.choices(
                ("fixed", "Won't Fix", "Cannot Reproduce", "Duplicate", "In Progress", "Open"),
                (64, 6, 4, 6, 10, 10) if triaged else (20, 15, 10, 0, 0, 55))[0]
            orig = None
            if outcome == "Duplicate":
                cands = [i for i in p.issues if i.duplicate_of is None and (i.resolved is None or i.resolved > t + DAY)]
                orig = rng.choice(cands) if cands else None
                outcome = "Duplicate" if orig else "Won't Fix"
            issue = self._new_issue(p, k, t, orig)
            if triaged:
                self._triage(issue)
            if outcome == "fixed" and k in forced:  # always committed, so the prefix keys appear in git
                self._work([issue], n_commits=2 if k == 1 else 1, with_test=True)
            elif outcome == "fixed":
                self._work([issue])
            elif outcome == "In Progress" and issue.cur["assignee"]:
                self._transition(issue, issue.last() + self.hours(2, 48), issue.cur["assignee"], "In Progress")
            elif outcome in ("Won't Fix", "Cannot Reproduce"):
                self._resolve(issue, issue.last() + self.hours(24, 240), p.lead, outcome)
            elif outcome == "Duplicate":
                self._mark_duplicate(issue, orig)
            self._comments(issue)
            k += 1

    def _new_issue(self, p: Project, k: int, t: int, orig: Issue | None = None) -> Issue:
        rng = self.rng
        reporter = rng.choices(self.people, [4 if x.role == "support" else 1 for x in self.people])[0]
        created = self.snap(t, reporter)
        if orig is None:
            comp = rng.choice(list(p.components))
            fn = new_fn(rng, comp, rng.choice(p.nouns[comp]), self.taken)
            self._plan_intro(fn, created)
            summary = fn.sub(rng.choice(fn.bug.summaries))
        else:  # the same defect reported again, in other words
            fn = orig.fn
            summary = next(s for s in map(fn.sub, fn.bug.summaries) if s != orig.summary)
        filed = {
            "type": rng.choices(("Task", "Bug", "Improvement"), (5, 4, 1))[0],
            "priority": "Major" if rng.random() < 0.85 else rng.choice(list(PRIORITIES)),
            "components": [] if rng.random() < 0.85 else [rng.choice(list(p.components))],
            "assignee": reporter if reporter.role != "support" and rng.random() < 0.1 else None,
        }
        issue = Issue(p, k, reporter, created, fn, summary, self._describe(fn, reporter), filed,
                      sorted(rng.sample(LABELS, rng.choice((0, 0, 1, 2)))), duplicate_of=orig)
        issue.cur = dict(filed)
        p.issues.append(issue)
        self.issues.append(issue)
        return issue

    def _describe(self, fn: Fn, reporter: Person) -> Text:
        rng = self.rng
        call, exp, act = (fn.sub(s) for s in (fn.bug.call, fn.bug.expected, fn.bug.actual))
        text = Text()
        if "Error" in act:
            text.add("Calling `{c}` raises `{a}`.", c=call, a=act)
        else:
            text.add("Calling `{c}` returns `{a}` instead of `{e}`.", c=call, a=act, e=exp)
        text.add("\n\nSteps to reproduce:\n1. Import `{f}` from `{m}`.\n2. Call `{c}`.\n\n"
                 "Expected: `{e}`\nActual: `{a}`", f=fn.name, m=f"{self.pkg}.{fn.module}", c=call, e=exp, a=act)
        if rng.random() < 0.75:
            text.add("\n\n")
            self._pii_line(text, reporter)
        return text

    def _pii_line(self, text: Text, author: Person) -> None:
        """One sentence naming a customer or a colleague, the way people write them in tickets."""
        rng = self.rng
        o = rng.choice(self.outsiders)
        name, email, phone = Pii("name", o.name), Pii("email", o.email), Pii("phone", o.phone)
        mate = self.pick(self.people, avoid=author)
        _say(rng, text, (
            ("Reported by {n} ({e}) via support; call back on {p}.", {"n": name, "e": email, "p": phone}),
            ("Customer contact: {n}, {p}, {e}.", {"n": name, "p": phone, "e": email}),
            ("Originally raised by {n} <{e}> on the support line.", {"n": name, "e": email}),
            ("{f} saw this during the release check; cc [~{u}].",
             {"f": mention(mate, "first_name"), "u": mention(mate, "username")}),
            ("Found while pairing with {n} ({e}).", {"n": mention(mate, "name"), "e": mention(mate, "email")}),
        ))

    def _triage(self, issue: Issue, assignee: Person | None = None) -> None:
        """Within hours the lead sets type, priority, components, assignee; `from` values are as filed."""
        rng, p = self.rng, issue.project
        t = self.snap(issue.created + self.hours(0.3, 5), p.lead)
        if assignee is None:
            assignee = p.owners[issue.fn.module] if rng.random() < 0.65 else self.pick(p.team + [p.lead])
        comps = [issue.fn.module] + ([rng.choice(list(p.components))] if rng.random() < 0.1 else [])
        target = {"type": issue.fn.bug.kind, "priority": rng.choices(list(PRIORITIES), (5, 15, 45, 30, 5))[0],
                  "components": sorted(set(comps)), "assignee": assignee}
        if issue.duplicate_of is not None or rng.random() < 0.1:
            target["assignee"] = issue.filed["assignee"]  # duplicates, and a few left for later
        if target == issue.filed:
            target["priority"] = "Minor" if target["priority"] == "Major" else "Major"
        f, items = issue.filed, []
        if f["type"] != target["type"]:
            items.append(_item("issuetype", ISSUE_TYPES[f["type"]], f["type"],
                               ISSUE_TYPES[target["type"]], target["type"]))
        if f["priority"] != target["priority"]:
            items.append(_item("priority", PRIORITIES[f["priority"]], f["priority"],
                               PRIORITIES[target["priority"]], target["priority"]))
        for c in f["components"]:
            if c not in target["components"]:
                items.append(_item("Component", p.components[c], c, None, None))
        for c in target["components"]:
            if c not in f["components"]:
                items.append(_item("Component", None, None, p.components[c], c))
        issue.histories.append(Hist(t, p.lead, items))
        old, new = f["assignee"], target["assignee"]
        if old is not new:
            item = _item("assignee", old and old.username, old and old.name, new and new.username, new and new.name)
            if items and new is not None and rng.random() < 0.4:  # a second step: "assign to me"
                who = new if rng.random() < 0.5 else p.lead
                issue.histories.append(Hist(self.snap(t + self.hours(0.2, 1.5), who), who, [item]))
            else:
                items.append(item)
        issue.cur = target
        issue.triage = {"at": issue.histories[-1].t, "by": p.lead, "duplicate_of": None, **target}

    def _transition(self, issue: Issue, t: int, who: Person, to: str, resolution: str | None = None) -> int:
        t = self.snap(t, who)
        frm = issue.status
        items = [_item("status", STATUSES[frm][0], frm, STATUSES[to][0], to)]
        if resolution:
            items.append(_item("resolution", None, None, RESOLUTIONS[resolution], resolution))
            issue.resolution, issue.resolved, issue.resolver = resolution, t, who
        issue.histories.append(Hist(t, who, items))
        issue.status = to
        return t

    def _resolve(self, issue: Issue, t: int, who: Person, resolution: str) -> int:
        return self._transition(issue, t, who, "Resolved", resolution)

    def _mark_duplicate(self, dup: Issue, orig: Issue) -> None:
        """The lead links the duplicate (a Link item on both issues) and resolves it as Duplicate."""
        orig.duplicated_by.append(dup)
        lead = dup.project.lead
        t = self.snap(dup.last() + self.hours(0.1, 2), lead)
        dup.histories.append(Hist(t, lead, [_item("Link", None, None, orig.key, f"This issue duplicates {orig.key}")]))
        orig.histories.append(Hist(t, lead, [_item("Link", None, None, dup.key,
                                                   f"This issue is duplicated by {dup.key}")]))
        if dup.triage is not None:
            dup.triage["duplicate_of"] = orig.key
        self._resolve(dup, t + self.hours(0.05, 0.5), lead, "Duplicate")

    def _work(self, issues: list[Issue], n_commits: int | None = None, with_test: bool | None = None) -> None:
        """In Progress, 1-2 fixing commits naming the key(s), then Resolved/Fixed after the last commit."""
        rng, first, p = self.rng, issues[0], issues[0].project
        dev = first.cur["assignee"] or self.pick(p.team)
        author = dev if rng.random() < 0.85 else self.pick(p.team + [p.lead], avoid=dev)
        start = max(self._transition(i, i.last() + self.hours(1, 36), i.cur["assignee"] or author, "In Progress")
                    for i in issues)
        if n_commits is None:
            n_commits = rng.choices((0, 1, 2), (6, 62, 32))[0]
        with_test = rng.random() < 0.8 if with_test is None else with_test
        t = start
        if n_commits:
            t = self.snap(start + self.hours(1, 30), author)
            ops = [("fix", i.fn) for i in issues]
            split_test = n_commits == 2 and rng.random() < 0.4  # variant: fix first, regression test next
            if with_test and not split_test:
                ops += [("test", i.fn) for i in issues]
            self._fix_commit(issues, t, author, ops, "fix")
        if n_commits == 2:
            t = self.snap(t + self.hours(2, 30), author)
            kind = "test" if split_test else "followup"
            self._fix_commit(issues, t, author, [({"test": "test", "followup": "polish"}[kind], first.fn)], kind)
        resolver = author if rng.random() < 0.7 else p.lead
        for i in issues:
            self._resolve(i, t + self.hours(0.5, 20), resolver, "Fixed")
            if i.reporter is not resolver and rng.random() < 0.5:
                text = Text().add("Fixed on main in {m}, {f} please verify.", m=f"{self.pkg}/{i.fn.module}.py",
                                  f=mention(i.reporter, "first_name"))
                i.comments.append(Comment(self.snap(i.resolved + self.hours(0.02, 1), resolver), resolver, text))

    def _fix_commit(self, issues: list[Issue], t: int, author: Person, ops: list, kind: str) -> None:
        rng, keys = self.rng, [i.key for i in issues]
        key, phrase = keys[0], issues[0].fn.sub(rng.choice(issues[0].fn.bug.fixes))
        cap = phrase[0].upper() + phrase[1:]
        msg = Text()
        if len(issues) > 1:
            msg.add("Fixes {a} and {b}\n\n", a=keys[0], b=keys[1])
            msg.add("{b}", b="\n".join(f"- {i.fn.sub(rng.choice(i.fn.bug.fixes))}" for i in issues))
        elif kind == "fix":
            form = rng.choice(("{k}: {p}", "{c} ({k})", "[{k}] {c}", "{k} {p}", "{c}\n\nFixes {k}"))
            msg.add(form, k=key, p=phrase, c=cap)
        elif kind == "test":
            msg.add(rng.choice(("Add regression test for {k}", "{k}: add regression test")), k=key)
        else:
            msg.add(rng.choice(("{k}: address review comments", "Follow-up for {k}: document edge cases")), k=key)
        if rng.random() < 0.35:
            mate = self.pick(issues[0].project.team + [issues[0].project.lead], avoid=author)
            o = rng.choice(self.outsiders)
            full = {"n": mention(mate, "name"), "e": mention(mate, "email")}
            _say(rng, msg, (
                ("\n\nReported by {n} <{e}>.", {"n": Pii("name", o.name), "e": Pii("email", o.email)}),
                ("\n\nThanks {f} for the review.", {"f": mention(mate, "first_name")}),
                ("\n\nCo-authored-by: {n} <{e}>", full),
                ("\n\nReviewed-by: {n} <{e}>", full),
            ))
        plan = self._plan(t, author, msg, kind, ops)
        plan.fixes = list(issues)
        for i in issues:
            i.commits.append(plan)

    def _comments(self, issue: Issue) -> None:
        """0-3 discussion comments between filing and resolution, authored by people on the ticket."""
        rng, p = self.rng, issue.project
        end = issue.resolved or issue.last() + 5 * DAY
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            author = rng.choice([issue.reporter, issue.cur["assignee"] or p.lead, p.lead, self.pick(self.people)])
            o, other = rng.choice(self.outsiders), self.pick([issue.reporter, p.lead], avoid=author)
            text = _say(rng, Text(), (
                ("Thanks {f}, I can reproduce this on main.", {"f": mention(other, "first_name")}),
                ("{n} called again about this ({p}). Please prioritise.",
                 {"n": Pii("name", o.name), "p": Pii("phone", o.phone)}),
                ("[~{u}] can you take a look?", {"u": mention(other, "username")}),
                ("Customer {n} ({e}) confirmed the workaround helps.",
                 {"n": Pii("name", o.name), "e": Pii("email", o.email)}),
                ("Talked to {n}; we ship it with the next release.", {"n": mention(other, "name")}),
                ("Still happens on the latest build.", {}),
            ))
            t = self.snap(issue.created + int(rng.uniform(0.05, 1) * (end - issue.created)), author)
            issue.comments.append(Comment(t, author, text))

    # -- commits --------------------------------------------------------------------------------

    def _plan(self, t: int, person: Person, message: Text, kind: str, ops: list, feature=None,
              rng: random.Random | None = None) -> Plan:
        plan = Plan(t, person, person.git_identity(rng or self.rng), message, kind, ops, feature=feature,
                    seq=len(self.plans))
        self.plans.append(plan)
        return plan

    def _plan_intro(self, fn: Fn, created: int) -> None:
        """The function an issue is about lands on main 3.5-20 days before the issue is filed."""
        t = created - self.hours(3.5 * 24, 20 * 24)
        if t < self.t0 + HOUR:
            self.initial_fns.append(fn)
            self.intro[fn.name] = self.t0
            return
        p = next(x for x in self.projects if fn.module in x.components)
        author = p.owners[fn.module] if self.rng.random() < 0.6 else self.pick(p.team + [p.lead])
        msg = Text().add(self.rng.choice(("Add {f}", "Add {f} helper", "{m}: add {f}")), f=fn.name, m=fn.module)
        plan = self._plan(self.snap(t, author), author, msg, "add", [("add", fn)])
        self.intro[fn.name] = plan.t

    def _plan_features(self) -> None:
        """One short side branch per scale unit, each adding a new module, merged with --no-ff."""
        devs = [p for p in self.people if p.role == "dev"]
        for n in range(self.scale):
            slug, title = FEATURES[n % len(FEATURES)]
            if n >= len(FEATURES):
                slug = f"{slug}_{n // len(FEATURES) + 1}"
            dev, lead = self.rng.choice(devs), self.people[0]
            t1 = self.snap(self.t0 + 25 * DAY + int((n + 0.5) * self.span / self.scale), dev)
            t2 = self.snap(t1 + self.hours(3, 30), dev)
            feat = (slug, title)
            self._plan(t1 - 1, dev, Text(), "branch", [], feat)
            self._plan(t1, dev, Text().add("Add {t} module", t=title), "feature", [("feature", 0)], feat)
            self._plan(t2, dev, Text().add("Add tests for the {t} module", t=title), "feature", [("feature", 1)], feat)
            merge = Text().add("Merge branch 'feature/{s}'", s=slug)
            self._plan(self.snap(t2 + self.hours(2, 48), lead), lead, merge, "merge", [], feat)

    def _plan_leaks(self) -> None:
        """Per scale unit a developer commits a settings file full of secrets and deletes it in the next commit.

        Both come after every other commit, so the SHAs of the planned history stay what they are without
        them; the file is then only in the history (truth location commit:<sha>:diff)."""
        p = self.planter
        devs = [x for x in self.people if x.role == "dev"] or self.people
        t = max(plan.t for plan in self.plans)
        for n in range(self.scale):
            path, body, add, drop = leak_commits(p, n, self.title)
            dev = p.rng.choice(devs)
            t = working_time(p.rng, t + int(p.rng.uniform(2, 48) * HOUR), dev.offset)
            self._plan(t, dev, add, "config", [("put", (path, body))], rng=p.rng)
            t = working_time(p.rng, t + int(p.rng.uniform(0.2, 3) * HOUR), dev.offset)
            self._plan(t, dev, drop, "cleanup", [("drop", path)], rng=p.rng)

    def _plan_bumps(self) -> list[tuple[str, int]]:
        """A release every ~2 weeks until after the last resolution; fixed issues get the next one."""
        lead, minor, out = self.people[0], 2, []
        t, end = self.t0 + self.hours(7 * 24, 14 * 24), max(i.resolved or i.last() for i in self.issues)
        while True:
            t = self.snap(t, lead)
            version = f"0.{minor}.0"
            self._plan(t, lead, Text().add("Bump version to {v}", v=version), "bump", [("bump", version)])
            out.append((version, t))
            if t > end:
                break
            t, minor = t + self.hours(10 * 24, 18 * 24), minor + 1
        for issue in self.issues:
            if issue.resolution == "Fixed":
                issue.fix_version = next((v, vt) for v, vt in out if vt >= issue.resolved)
                name = issue.fix_version[0]
                issue.histories[-1].items.append(
                    _item("Fix Version", None, None, self._version_id(issue.project, name), name))
            if issue.fn.bug.kind == "Bug" and self.rng.random() < 0.5:
                prior = [v for v, vt in out if vt < issue.created]
                issue.affects = prior[-1] if prior else None
        return out

    def _version_id(self, p: Project, name: str) -> str:
        return str(10500 + 500 * self.projects.index(p) + int(name.split(".")[1]))

    def _plan_docs(self) -> None:
        """README updates; authored first by people with no commit yet, so everyone appears in git."""
        counts = {p.username: 0 for p in self.people}
        for plan in self.plans:
            counts[plan.person.username] += plan.kind != "branch"
        fns = sorted((t, name) for name, t in self.intro.items())
        by_name = {i.fn.name: i.fn for i in self.issues}
        lo, end = max(self.t0 + DAY, fns[0][0] + HOUR), max(v[1] for v in self.versions)
        for _ in range(max(2, len(self.issues) // 8)):
            idle = [p for p in self.people if not counts[p.username]]
            author = idle[0] if idle else self.pick(self.people)
            t = self.snap(lo + int(self.rng.random() * (end - lo)), author)
            fn = by_name[self.rng.choice([name for ft, name in fns if ft < t])]
            msg = Text().add(self.rng.choice(("Document {f} in README", "README: describe {f}")), f=fn.name)
            self._plan(t, author, msg, "doc", [("doc", fn)])
            counts[author.username] += 1

    def _git_commits(self) -> list[GitCommit]:
        """Replay the plans in time order against the codebase model (once: it flips functions to fixed).

        Main is linear in commit-date order; a side branch forks from the main tip at its first commit's
        date and its commits are emitted just before the --no-ff merge that joins them.
        """
        code = Codebase(self.pkg, self.title, {m: [] for p in self.projects for m in p.components})
        for fn in self.initial_fns:
            code.apply("add", fn)
        commits: list[GitCommit] = []
        base: dict[str, int] = {}
        branch_plans: dict[str, list[Plan]] = {}
        for plan in self.plans:
            if plan.kind == "feature":
                branch_plans.setdefault(plan.feature[0], []).append(plan)

        def emit(plan: Plan, ref: str, parent: int | None, files: dict[str, str], merge: int | None = None) -> int:
            name, email = plan.identity
            sig = (name, email, plan.t // 1000, _zone(plan.person.offset))
            plan.mark = len(commits) + 1
            self.by_mark[plan.mark] = plan
            commits.append(GitCommit(plan.mark, ref, sig, sig, str(plan.message) + "\n", parent, merge, files))
            return plan.mark

        lead = self.people[0]
        init = Plan(self.t0, lead, lead.git[0], Text().add("Initial commit"), "initial")
        tip = emit(init, "refs/heads/main", None, {p: code.render(p) for p in code.paths()})
        for plan in sorted(self.plans, key=lambda x: (x.t, x.seq)):
            slug = plan.feature[0] if plan.feature else ""
            if plan.kind == "branch":
                base[slug] = tip
            elif plan.kind == "merge":
                parent, files = base[slug], {}
                for step, bp in enumerate(branch_plans[slug]):
                    files = feature_files(self.pkg, slug, plan.feature[1], step)
                    parent = emit(bp, f"refs/heads/feature/{slug}", parent, files)
                tip = emit(plan, "refs/heads/main", tip, files, merge=parent)
            elif plan.kind != "feature":
                changed = set().union(*(code.apply(op, arg) for op, arg in plan.ops))
                tip = emit(plan, "refs/heads/main", tip, {p: code.render(p) for p in sorted(changed)})
        return commits

    # -- rendering ------------------------------------------------------------------------------

    def write(self, out: Path) -> dict[str, Any]:
        """Build the repository, write the Jira files, and return the ground truth."""
        root = out / self.dataset
        commits = self._git_commits()
        self.shas = shas = build_repo(root / "repo", commits)
        self._assign_ids()
        jira = root / "jira"
        jira.mkdir(parents=True)
        issues, pii = [], []

        def record(issue: Issue, file: Path, prefix: str) -> None:
            rel = file.relative_to(out).as_posix()
            issues.append(self._issue_truth(issue, rel, prefix, shas))
            texts = [("/fields/description", issue.description)]
            texts += [(f"/fields/comment/comments/{j}/body", c.text) for j, c in enumerate(issue.comments)]
            pii.extend(text.truth(rel, prefix + pointer) for pointer, text in texts)

        by_project = {p.key: sorted(p.issues, key=lambda i: i.num) for p in self.projects}
        for issue in by_project["CORE"]:
            path = jira / f"{issue.key}.json"
            path.write_text(_dump(self._issue_json(issue)), encoding="utf-8")
            record(issue, path, "")
        web = by_project["WEB"]
        pages = [web[n:n + PAGE_SIZE] for n in range(0, len(web), PAGE_SIZE)]
        for n, page in enumerate(pages):
            path = jira / f"search-page-{n}.json"
            doc = {"expand": "schema,names", "startAt": n * PAGE_SIZE, "maxResults": PAGE_SIZE,
                   "total": len(web), "issues": [self._issue_json(i) for i in page]}
            path.write_text(_dump(doc), encoding="utf-8")
            for j, issue in enumerate(page):
                record(issue, path, f"/issues/{j}")
        self.search_pages = len(pages)
        repo = (root / "repo").relative_to(out).as_posix()
        commit_truth = []
        for c in commits:
            plan, sha = self.by_mark[c.mark], shas[c.mark]
            pii.append(plan.message.truth(repo, f"commit:{sha}:message"))
            pii += [arg[1].truth(repo, f"commit:{sha}:diff", path=arg[0]) for op, arg in plan.ops if op == "put"]
            commit_truth.append({
                "sha": sha, "parents": [shas[m] for m in (c.parent, c.merge) if m is not None],
                "kind": plan.kind, "fixes": [i.key for i in plan.fixes], "subject": c.message.split("\n")[0],
                "author": {"name": c.author[0], "email": c.author[1], "person": plan.person.username},
                "date": _ts(plan.t, plan.person)[:19] + _zone(plan.person.offset)})
        return {"issues": issues, "commits": commit_truth, "pii": [x for group in pii for x in group]}

    def _assign_ids(self) -> None:
        """Histories and comments sorted by time per issue; ids grow with time across the instance."""
        hists, comments = [], []
        for issue in self.issues:
            issue.histories.sort(key=lambda h: h.t)
            issue.comments.sort(key=lambda c: c.t)
            hists += [(h.t, issue.id, n, h) for n, h in enumerate(issue.histories)]
            comments += [(c.t, issue.id, n, c) for n, c in enumerate(issue.comments)]
        for start, items in ((100001, hists), (200001, comments)):
            for n, (*_, obj) in enumerate(sorted(items, key=lambda x: x[:3])):
                obj.id = str(start + n)

    def _user(self, p: Person | None) -> dict | None:
        if p is None:
            return None
        return {"self": f"{self.base}/rest/api/2/user?username={p.username}", "name": p.username,
                "key": p.username, "emailAddress": p.email, "displayName": p.name, "active": True,
                "timeZone": p.timezone}

    def _status(self, name: str) -> dict:
        sid, cid, ckey, color, cname = STATUSES[name]
        return {"self": f"{self.base}/rest/api/2/status/{sid}", "description": "", "name": name, "id": sid,
                "statusCategory": {"self": f"{self.base}/rest/api/2/statuscategory/{cid}", "id": cid,
                                   "key": ckey, "colorName": color, "name": cname}}

    def _named(self, kind: str, ids: dict[str, str], name: str) -> dict:
        return {"self": f"{self.base}/rest/api/2/{kind}/{ids[name]}", "id": ids[name], "name": name}

    def _version(self, p: Project, name: str) -> dict:
        vid = self._version_id(p, name)
        return {"self": f"{self.base}/rest/api/2/version/{vid}", "id": vid, "name": name, "archived": False,
                "released": True, "releaseDate": _ts(dict(self.versions)[name], self.people[0])[:10]}

    def _link(self, dup: Issue, inward: bool) -> dict:
        """The Duplicate link as both ends show it: the duplicate has outwardIssue, the original inwardIssue."""
        other = dup if inward else dup.duplicate_of
        lid = str(int(dup.id) + 90000)
        return {"id": lid, "self": f"{self.base}/rest/api/2/issueLink/{lid}",
                "type": {**DUPLICATE, "self": f"{self.base}/rest/api/2/issueLinkType/{DUPLICATE['id']}"},
                "inwardIssue" if inward else "outwardIssue": {
                    "id": other.id, "key": other.key, "self": f"{self.base}/rest/api/2/issue/{other.id}",
                    "fields": {"summary": other.summary, "status": self._status(other.status),
                               "priority": self._named("priority", PRIORITIES, other.cur["priority"]),
                               "issuetype": {**self._named("issuetype", ISSUE_TYPES, other.cur["type"]),
                                             "subtask": False}}}}

    def _issue_json(self, i: Issue) -> dict:
        """The issue as `GET /rest/api/2/issue/{key}?expand=changelog` returns it (Jira Server 8, API v2)."""
        p, cur = i.project, i.cur
        acts = [(i.created, i.reporter), *((h.t, h.author) for h in i.histories),
                *((c.t, c.author) for c in i.comments)]
        updated = max(acts, key=lambda a: a[0])
        comments = [{"self": f"{self.base}/rest/api/2/issue/{i.id}/comment/{c.id}", "id": c.id,
                     "author": self._user(c.author), "body": str(c.text), "updateAuthor": self._user(c.author),
                     "created": _ts(c.t, c.author), "updated": _ts(c.t, c.author)} for c in i.comments]
        histories = [{"id": h.id, "author": self._user(h.author), "created": _ts(h.t, h.author), "items": h.items}
                     for h in i.histories]
        links = ([self._link(i, inward=False)] if i.duplicate_of else []) + [self._link(d, inward=True)
                                                                             for d in i.duplicated_by]
        fields = {
            "summary": i.summary,
            "issuetype": {**self._named("issuetype", ISSUE_TYPES, cur["type"]), "description": "", "subtask": False},
            "project": {"self": f"{self.base}/rest/api/2/project/{p.id}", "id": p.id, "key": p.key,
                        "name": p.name, "projectTypeKey": "software"},
            "fixVersions": [self._version(p, i.fix_version[0])] if i.fix_version else [],
            "versions": [self._version(p, i.affects)] if i.affects else [],
            "resolution": {**self._named("resolution", RESOLUTIONS, i.resolution), "description": ""}
            if i.resolution else None,
            "resolutiondate": _ts(i.resolved, i.resolver) if i.resolved else None,
            "created": _ts(i.created, i.reporter),
            "updated": _ts(*updated),
            "priority": self._named("priority", PRIORITIES, cur["priority"]),
            "labels": i.labels,
            "issuelinks": links,
            "assignee": self._user(cur["assignee"]),
            "status": self._status(i.status),
            "components": [self._named("component", p.components, c) for c in cur["components"]],
            "creator": self._user(i.reporter),
            "reporter": self._user(i.reporter),
            "description": str(i.description),
            "comment": {"comments": comments, "maxResults": len(comments), "total": len(comments), "startAt": 0},
        }
        return {"expand": JIRA_EXPAND, "id": i.id, "self": f"{self.base}/rest/api/2/issue/{i.id}", "key": i.key,
                "fields": fields,
                "changelog": {"startAt": 0, "maxResults": len(histories), "total": len(histories),
                              "histories": histories}}

    def _issue_truth(self, i: Issue, file: str, pointer: str, shas: dict[int, str]) -> dict:
        def who(p: Person | None) -> dict | None:
            return p and {"display_name": p.name, "handle": f"jira:{p.username}"}

        def values(d: dict) -> dict:
            return {"type": d["type"], "priority": d["priority"], "components": list(d["components"]),
                    "assignee": who(d["assignee"])}

        tri = i.triage
        status = i.status + (f", {i.resolution}" if i.resolution else "")
        return {
            "key": i.key, "id": i.id, "project": i.project.key, "file": file, "pointer": pointer,
            "created": _ts(i.created, i.reporter), "reporter": who(i.reporter),
            "status": i.status, "resolution": i.resolution,
            "resolutiondate": _ts(i.resolved, i.resolver) if i.resolved else None,
            "as_filed": values(i.filed),
            "triage": tri and {**values(tri), "at": _ts(tri["at"], tri["by"]), "by": f"jira:{tri['by'].username}",
                               "duplicate_of": tri["duplicate_of"]},
            "untriaged_reason": None if tri else
            f"no change to type, priority, components or assignee in the changelog (status: {status})",
            "duplicate_of": i.duplicate_of.key if i.duplicate_of else None,
            "fix_version": i.fix_version[0] if i.fix_version else None,
            "function": f"{self.pkg}.{i.fn.module}.{i.fn.name}",
            "family": defect_family(i),
            "fixing_commits": [shas[c.mark] for c in i.commits],
        }

    def people_truth(self) -> list[dict]:
        return [{"name": p.name, "first_name": p.first, "email": p.email, "role": p.role, "timezone": p.timezone,
                 "jira": {"name": p.username, "key": p.username, "displayName": p.name, "emailAddress": p.email},
                 "git": [{"name": n, "email": e} for n, e in p.git],
                 "handles": [f"jira:{p.username}"] + sorted({f"git:{e.lower()}" for _, e in p.git})}
                for p in self.people]

