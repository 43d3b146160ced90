"""Keeping secrets out of everything a run stores or shows.

Model errors echo request details (URLs with keys, auth headers), and a model may repeat
text it was given.  Every string that reaches the runs store, a log line or the HTML
report passes through `scrub` first: the values of secret-looking environment variables
are replaced wherever they occur, and so is anything shaped like a well-known key format.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

REDACTED = "[redacted]"

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
_PATTERNS = (
    re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"),      # OpenAI / Anthropic style
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),                         # AWS access key id
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),                    # Google API key
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),                 # GitHub tokens
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),              # Slack tokens
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),                        # Hugging Face tokens
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{12,}=*"),     # Authorization headers
    re.compile(r"(?i)((?:api[_-]?key|access[_-]?token|secret|password)[\"']?\s*[:=]\s*[\"']?)"
               r"[^\s\"',;&]{8,}"),
)
_MIN_VALUE_LEN = 8
"""Shorter values ("1", "true") are not secrets and would redact innocent text."""


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names look like they hold a secret."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_VALUE_LEN}
    return sorted(values, key=len, reverse=True)


def scrub(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` with secret env values and key-shaped strings replaced by [redacted]."""
    if not text:
        return text
    for value in secret_values(environ):
        if value in text:
            text = text.replace(value, REDACTED)
    for pat in _PATTERNS:
        if pat.groups:
            text = pat.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pat.sub(REDACTED, text)
    return text


def scrub_obj(obj: object, environ: Mapping[str, str] | None = None) -> object:
    """`scrub` applied to every string inside nested dicts, lists and tuples."""
    if isinstance(obj, str):
        return scrub(obj, environ)
    if isinstance(obj, Mapping):
        return {k: scrub_obj(v, environ) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [scrub_obj(v, environ) for v in obj]
    return obj
