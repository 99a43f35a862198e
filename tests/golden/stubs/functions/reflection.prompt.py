from typing import Any
def prompt(name: str, **args: Any) -> str:
    """Render a reflection prompt's text, e.g. reflection.prompt("justify_resampling_method", method='bilinear', data='continuous', purpose='warping')."""
    ...
