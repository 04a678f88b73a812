"""The e-mail address pattern shared by the extractors' checks and `privacy.pii`.

Invariant: anchored on non-word boundaries so it does not eat neighbouring text (`pii` holds every
other recognizer: phones, addresses, IPs, cards, IBANs, SSNs, secrets).
"""

from __future__ import annotations

import re

EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                   r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?![\w-])")
