"""Walking the workspace by a glob, bounded: what ``files.list`` shows and where lineage looks for
provenance records.

The walk never follows a link into a folder, skips the server's own folders and temporary files, and
stops after :data:`MAX_SCANNED` directory entries, so a huge or hostile data tree costs a bounded
amount of work.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

from llmc_mcp.errors import PathRefused
from llmc_mcp.workspace import RESERVED_DIRS, check_relative_name

MAX_SCANNED = 100_000
"""Directory entries looked at per listing, matching or not: bounds a walk of a huge data tree."""

PATTERN_FIX = "Pass a glob relative to the workspace, such as '*.tif', 'data/*.tif' or 'data/**/*.tif'."


@dataclass(frozen=True)
class Glob:
    """A pattern ready to walk: the folder to start in, and the components a name must match."""

    start: tuple[str, ...]
    parts: tuple[str, ...]
    hidden: bool
    """Whether the pattern names hidden folders (a component starting with '.'), so the walk enters them."""

    def matches(self, name: str) -> bool:
        """Whether a workspace-relative name matches, component by component.

        The pattern's components are states; ``**`` may stay on a component or be skipped. Each name
        component moves every state once, so the cost is (pattern components) x (name components),
        and fnmatch keeps one component's match linear, whatever the pattern.
        """
        states = self._closure({0})
        for component in name.split("/"):
            moved = set()
            for index in states:
                if index == len(self.parts):
                    continue
                part = self.parts[index]
                if part == "**":
                    if not component.startswith("."):
                        moved.add(index)
                elif _component_matches(part, component):
                    moved.add(index + 1)
            states = self._closure(moved)
            if not states:
                return False
        return len(self.parts) in states

    def _closure(self, states: set[int]) -> set[int]:
        """``states`` plus what skipping each ``**`` (matching no folder) reaches."""
        todo, seen = [*states], set(states)
        while todo:
            index = todo.pop()
            if index < len(self.parts) and self.parts[index] == "**" and index + 1 not in seen:
                seen.add(index + 1)
                todo.append(index + 1)
        return seen


def compile_glob(pattern: str, recursive: bool) -> Glob:
    """A workspace glob (``data/**/*.tif``), checked, as the walk matches it."""
    parts = check_relative_name(pattern, "pattern").parts
    if not parts:
        raise PathRefused(f"pattern: '{pattern}' names no file.", fix=PATTERN_FIX)
    if pattern.endswith("/"):
        parts = (*parts, "**" if recursive else "*")
    elif len(parts) == 1 and recursive:
        parts = ("**", *parts)
    start: list[str] = []
    for part in parts[:-1]:
        if any(c in part for c in "*?["):
            break
        start.append(part)
    hidden = any(part.startswith(".") for part in parts)
    return Glob(tuple(start), parts, hidden)


def _component_matches(part: str, component: str) -> bool:
    """One name against one pattern component; no wildcard matches a leading '.' (hidden names are
    listed only when the pattern spells the dot)."""
    if component.startswith(".") and not part.startswith("."):
        return False
    return fnmatch.fnmatchcase(component, part)


def _is_temporary(name: str) -> bool:
    """The hidden name an output has while it is written (``.<name>.partial-<token>.tif``)."""
    return name.startswith(".") and ".partial-" in name


def walk(root: Path, start: Path, glob: Glob, recursive: bool) -> tuple[list[tuple[str, os.DirEntry]], bool]:
    """Matching regular files and links under ``start``, and whether :data:`MAX_SCANNED` stopped the walk.

    Links are never followed into folders; the server's folders and temporary outputs are never listed.
    """
    prefix = len(str(root)) + 1
    found: list[tuple[str, os.DirEntry]] = []
    scanned = 0
    folders = [start]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                children = [*entries]
        except OSError:
            continue  # unreadable, or removed meanwhile: nothing in it can be listed
        for entry in children:
            scanned += 1
            if scanned > MAX_SCANNED:
                return found, True
            if entry.is_dir(follow_symlinks=False):
                reserved = folder == root and entry.name in RESERVED_DIRS
                hidden = entry.name.startswith(".") and not glob.hidden
                if recursive and not reserved and not hidden:
                    folders.append(Path(entry.path))
                continue
            if not (entry.is_symlink() or entry.is_file(follow_symlinks=False)) or _is_temporary(entry.name):
                continue
            name = entry.path[prefix:]
            if glob.matches(name):
                found.append((name, entry))
    return found, False
