"""The workspace: the one directory every path argument must resolve inside.

Paths reach us from a model that may be confused or manipulated, so the policy
is an allowlist, checked on the string before any I/O and again on the
resolved path: a plain relative name made of portable components. Anything
GDAL would interpret rather than open (``/vsicurl/``, ``WMS:``, ``MEM:::``,
inline ``<VRTDataset>``), any ``..``, absolute path, NUL or colon is refused
with a message that says what to pass instead.
"""

from __future__ import annotations

import contextlib
import os
import stat
import unicodedata
from pathlib import Path, PurePosixPath

from llmc_mcp.errors import NotFound, PathRefused

RESERVED_DIRS = frozenset({".preflight", ".llmc"})
"""Server-owned directories: the justification store and the generated stubs."""

MAX_PATH_CHARS = 1024
MAX_PATH_DEPTH = 16
"""Components of an output path: a loop of writes into ever deeper folders stops here."""
_FIX = "Pass a relative file name inside the workspace, such as 'data/input.tif'."


class Workspace:
    """A resolved root directory and the policy that confines paths to it."""

    def __init__(self, root: str | os.PathLike[str]):
        path = Path(root).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        self.root = path.resolve(strict=True)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    @property
    def preflight_dir(self) -> Path:
        return self.root / ".preflight"

    @property
    def stubs_dir(self) -> Path:
        return self.root / ".llmc" / "stubs"

    def relative(self, path: Path) -> str:
        """The workspace-relative name of a resolved path, as shown to agents."""
        return path.relative_to(self.root).as_posix()

    def input_path(self, name: object, *, argument: str = "path") -> Path:
        """Resolve an existing regular file to read."""
        path = self._resolve(name, argument)
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            raise NotFound(
                f"{argument}: '{name}' does not exist in the workspace.",
                fix="Check the name; files.list() (classic mode: the files_list tool) shows what there is.",
            ) from None
        if not stat.S_ISREG(mode):
            raise PathRefused(f"{argument}: '{name}' is not a regular file.", fix=_FIX)
        self._check_sidecars(path, name, argument)
        return path

    def output_path(self, name: object, *, argument: str = "dst") -> Path:
        """Resolve a file to write. Nothing is created: a refused call must leave no trace, so the
        write creates missing folders (:meth:`make_dirs`) once it is granted, and removes them if it
        fails. Here the nearest existing ancestor must be a folder inside the workspace."""
        path = self._resolve(name, argument)
        depth = len(path.relative_to(self.root).parts)
        if depth > MAX_PATH_DEPTH:
            raise PathRefused(
                f"{argument}: '{name}' has {depth} path components; at most {MAX_PATH_DEPTH} are allowed.",
                fix="Write to a shallower name, such as 'out/result.tif'.",
            )
        if path.exists() and not path.is_file():
            raise PathRefused(f"{argument}: '{name}' exists and is not a regular file.", fix=_FIX)
        ancestor = path.parent
        while not ancestor.exists():
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            shown = self.relative(ancestor)
            raise PathRefused(f"{argument}: '{shown}' in '{name}' is a file, not a folder.", fix=_FIX)
        self._check_sidecars(path, name, argument)
        return path

    def missing_parents(self, path: Path) -> list[Path]:
        """The folders above ``path`` that do not exist yet, outermost first."""
        missing = []
        parent = path.parent
        while not parent.exists():
            missing.append(parent)
            parent = parent.parent
        return missing[::-1]

    def make_dirs(self, dirs: list[Path]) -> None:
        """Create ``dirs`` (outermost first, as :meth:`missing_parents` lists them) inside the workspace.

        Each is created by one ``mkdir``, which never follows a link, and checked afterwards: a link
        planted meanwhile under one of the names fails the write instead of leading it outside.
        """
        for folder in dirs:
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder)
            if not folder.resolve().is_relative_to(self.root) or not folder.is_dir():
                raise PathRefused(
                    f"'{self.relative(folder)}' resolves outside the workspace or is not a folder.", fix=_FIX
                )

    def allows(self, target: Path) -> bool:
        """Whether GDAL may read ``target``: the policy of a named input, for a name GDAL chose.

        Resolved (links followed) it must be a regular file inside the workspace and outside the
        server's folders.
        """
        try:
            resolved = target.resolve(strict=True)
            regular = stat.S_ISREG(resolved.stat().st_mode)
        except (OSError, RuntimeError):  # missing, a link loop, unreadable
            return False
        return regular and self._inside(resolved)

    def _inside(self, resolved: Path) -> bool:
        if not resolved.is_relative_to(self.root) or resolved == self.root:
            return False
        return resolved.relative_to(self.root).parts[0] not in RESERVED_DIRS

    def _check_sidecars(self, path: Path, name: object, argument: str) -> None:
        """Refuse a path whose folder holds a link that leads GDAL out of the workspace.

        GDAL opens (and writes) files beside the one it is given, by names it derives and this policy
        never sees, under patterns no list can keep up with: ``x.tif.aux.xml``, ``x.tif.ovr``,
        ``x.tif.msk``, ``x.tfw``, ``x.prj``, ``x.hdr``, and the satellite metadata readers'
        ``x_rpc.txt``, ``x_RPC.TXT``, ``<scene>_MTL.txt`` (band suffix stripped), ``x.IMD``, ``x.RPB``,
        ``DIM_*.XML``, ``METADATA.DIM``, ``summary.txt``... So the rule names no pattern: any link in the
        folder to something that is not a directory (or to nothing) must lead inside the workspace and
        outside the server's folders, or the file is refused. Links to folders are left alone.
        """
        try:
            entries = list(os.scandir(path.parent))
        except FileNotFoundError:
            return
        except OSError as exc:
            # Fail closed: a listing we cannot make hides nothing from GDAL.
            raise PathRefused(
                f"{argument}: '{name}': its directory cannot be checked ({exc.strerror}).",
                fix="Check the folder's permissions, or move the file into a readable folder.",
            ) from None
        for entry in entries:
            if entry.name == path.name or not entry.is_symlink():
                continue
            try:
                target = Path(entry.path).resolve(strict=True)
                if target.is_dir():
                    continue  # GDAL derives file names in this folder; a folder is not opened as one
            except (OSError, RuntimeError):  # dangling or a loop: where it leads may change
                target = None
            if target is None or not self._inside(target):
                raise PathRefused(
                    f"{argument}: '{name}' has a sidecar '{entry.name}' beside it that links outside the "
                    "workspace (or into a server folder, or nowhere); GDAL would follow it.",
                    fix="Remove the link, or move the raster into a folder without such links.",
                )

    def _resolve(self, name: object, argument: str) -> Path:
        relative = check_relative_name(name, argument)
        resolved = (self.root / relative).resolve(strict=False)
        if not resolved.is_relative_to(self.root) or resolved == self.root:
            raise PathRefused(
                f"{argument}: '{name}' resolves outside the workspace (through a symlink?).", fix=_FIX
            )
        first = resolved.relative_to(self.root).parts[0]
        if first in RESERVED_DIRS:
            raise PathRefused(f"{argument}: '{first}/' is reserved for the server.", fix=_FIX)
        return resolved


def check_relative_name(name: object, argument: str = "path") -> PurePosixPath:
    """Check a path string against the policy without touching the file system."""
    if not isinstance(name, str):
        raise PathRefused(f"{argument} must be a string, got {type(name).__name__}.", fix=_FIX)
    if not name or not name.strip():
        raise PathRefused(f"{argument} is empty.", fix=_FIX)
    if len(name) > MAX_PATH_CHARS:
        raise PathRefused(f"{argument} is longer than {MAX_PATH_CHARS} characters.", fix=_FIX)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise PathRefused(
            f"{argument} contains characters that are not valid Unicode (lone surrogates).", fix=_FIX
        ) from None
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise PathRefused(f"{argument} contains a control character (NUL, newline...).", fix=_FIX)
    if unicodedata.normalize("NFKC", name) != name:
        raise PathRefused(
            f"{argument}: '{name}' contains look-alike Unicode characters (not NFKC-normalized).", fix=_FIX
        )
    if name.lstrip().startswith("<"):
        raise PathRefused(f"{argument}: inline XML or VRT documents are not accepted.", fix=_FIX)
    if ":" in name:
        raise PathRefused(
            f"{argument}: '{name}' contains ':'; URLs, drive letters and GDAL connection strings "
            "(WMS:, MEM:::, ...) are not accepted.",
            fix=_FIX,
        )
    if "\\" in name:
        raise PathRefused(f"{argument}: use '/' as the separator, not '\\'.", fix=_FIX)
    if name.startswith(("/", "~")):
        raise PathRefused(
            f"{argument}: '{name}' is absolute or home-relative; GDAL virtual file systems "
            "(/vsicurl/, /vsizip/, ...) and files outside the workspace are not accepted.",
            fix=_FIX,
        )
    path = PurePosixPath(name)
    if ".." in path.parts:
        raise PathRefused(f"{argument}: '..' is not allowed in paths.", fix=_FIX)
    if path.parts and path.parts[0] in RESERVED_DIRS:
        raise PathRefused(f"{argument}: '{path.parts[0]}/' is reserved for the server.", fix=_FIX)
    return path
