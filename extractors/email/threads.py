"""Thread keys for e-mail messages read in stream order, in bounded memory.

Rules (after RFC 5256 REFERENCES and jwz's threading, simplified to one pass):
1. A message with References or In-Reply-To belongs to the thread of the first of (References[0],
   In-Reply-To, References[1:]) already seen in the stream; when none was seen (the archive starts in
   the middle of a thread), its thread key is References[0] (else In-Reply-To): the id the thread's
   root would have given itself.
2. A message with neither joins the thread of the latest message with the same normalised subject
   (`text.thread_subject`) when that one is at most `window` apart in time.
3. Otherwise it starts a thread named by its own Message-ID.

Memory: two LRU maps of at most `capacity` entries each (message id -> thread key; subject -> (thread
key, time)), about 300 bytes per entry, so the default 100 000 costs ~60 MB at most however long the
stream is. A reference to a message evicted from the map falls back to rule 1's "not seen" case, so a
thread longer-lived than the window of the map can split in two; duplicates (`seen`) are only detected
within the map as well.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict


class ThreadIndex:
    def __init__(self, capacity: int, window: dt.timedelta):
        self.capacity = capacity
        self.window = window
        self._ids: OrderedDict[str, str] = OrderedDict()
        self._subjects: OrderedDict[str, tuple[str, dt.datetime]] = OrderedDict()

    def seen(self, message_id: str) -> bool:
        return message_id in self._ids

    def assign(self, message_id: str, references: list[str], in_reply_to: str | None, subject_key: str,
               ts: dt.datetime, reply: bool = True) -> tuple[str, str]:
        """(thread key, how: "references" | "subject" | "self") of a message, and remember it. Only a reply
        (`reply`: its subject had a Re:/AW:/Fwd: prefix) joins a thread by subject: two people who both
        write "Please reset my password" start two threads."""
        chain = [*references[:1], *([in_reply_to] if in_reply_to else []), *references[1:]]
        key = how = None
        if chain:
            how = "references"
            known = next((i for i in chain if i in self._ids), None)
            if known is not None:
                self._ids.move_to_end(known)  # a thread still being answered stays in memory
            key = self._ids[known] if known is not None else chain[0]
        elif subject_key and reply:
            hit = self._subjects.get(subject_key)
            if hit is not None and abs(ts - hit[1]) <= self.window:
                key, how = hit[0], "subject"
        if key is None:
            key, how = message_id, "self"
        self._put(self._ids, message_id, key)
        if subject_key:
            self._put(self._subjects, subject_key, (key, ts))
        return key, how

    def _put(self, lru: OrderedDict, k, v) -> None:
        lru[k] = v
        lru.move_to_end(k)
        if len(lru) > self.capacity:
            lru.popitem(last=False)
