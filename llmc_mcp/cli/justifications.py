"""``llmc-mcp justifications list|show|export|prune|revoke``: the decisions of a workspace, for people.

``list`` (the default) prints one line per decision; ``show KEY`` one decision in full; ``export``
a Markdown report (or JSON) of every decision with the outputs whose provenance records cite it;
``prune`` deletes decisions by age or key (the next operation that makes one asks again); ``revoke
KEY`` withdraws one decision but keeps its record, marked revoked, which the next justification of
that decision links to. Filters narrow each: ``--domain``, ``--newer-than``/``--older-than`` (days),
``--min-confidence``, and for prune ``--key``.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ACTIONS = ("list", "show", "export", "prune", "revoke")


def add_parser(commands: Any, workspace_flag: dict[str, Any]) -> None:
    """The ``justifications`` command and its actions, on the main parser's subcommands."""
    report = commands.add_parser(
        "justifications", help="List, show, export, prune or revoke a workspace's decisions."
    )
    report.add_argument("--workspace", type=Path, default=None, **workspace_flag)
    actions = report.add_subparsers(dest="action", metavar="ACTION")
    for name, text in (
        ("list", "One line per decision (the default)."),
        ("export", "Every decision with its reasoning and the outputs it is behind, as Markdown."),
        ("prune", "Delete decisions by age or filter; operations then ask again."),
    ):
        action = actions.add_parser(name, help=text)
        _add_filters(action)
        if name == "list":
            action.add_argument("--json", action="store_true", help="Print JSON instead of lines.")
        if name == "export":
            action.add_argument("--json", action="store_true", help="Export JSON instead of Markdown.")
            action.add_argument("--out", type=Path, default=None, help="Write to a file (default: stdout).")
        if name == "prune":
            action.add_argument("--dry-run", action="store_true", help="Say what would go; delete nothing.")
            action.add_argument("--key", action="append", default=None, help="Only this key (repeatable).")
    show = actions.add_parser("show", help="One decision in full, by its key (sha256:...).")
    show.add_argument("key", help="The decision's key, as list prints it.")
    revoke = actions.add_parser(
        "revoke", help="Withdraw one decision (kept, marked revoked); its operation asks again."
    )
    revoke.add_argument("key", help="The decision's key, as list prints it.")


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--domain", default=None, help="Only this domain (crs_datum, resampling...).")
    parser.add_argument("--newer-than", type=float, default=None, metavar="DAYS", help="Only younger ones.")
    parser.add_argument("--older-than", type=float, default=None, metavar="DAYS", help="Only older ones.")
    parser.add_argument(
        "--min-confidence", choices=("low", "medium", "high"), default=None, help="Only this sure or surer."
    )


def run(args: argparse.Namespace, workspace_root: Path) -> int:
    from llmc_mcp.outputs import OutputLedger
    from llmc_mcp.provenance.report import Selection, decisions, every_record, to_markdown
    from llmc_mcp.reflection.store import JustificationStore
    from llmc_mcp.workspace import Workspace

    workspace = Workspace(workspace_root)
    store = JustificationStore(workspace.preflight_dir)
    action = args.action or "list"
    selection = Selection(
        domain=getattr(args, "domain", None),
        newer_than_days=getattr(args, "newer_than", None),
        older_than_days=getattr(args, "older_than", None),
        min_confidence=getattr(args, "min_confidence", None),
        keys=getattr(args, "key", None) if action == "prune" else None,
    )
    if action == "revoke":
        return _revoke(store, args.key)
    if action == "prune":
        return _prune(store, selection, dry_run=args.dry_run)
    ledger = OutputLedger(workspace)
    entries = decisions(every_record(store), workspace, ledger, selection)
    if action == "show":
        found = [e for e in decisions(every_record(store), workspace, ledger) if e.hash == args.key]
        if not found:
            print(f"llmc-mcp: error: no decision {args.key!r}; list shows the keys.", file=sys.stderr)
            return 1
        # The current justification when there is one; superseded ones are in export and list.
        found.sort(key=lambda entry: (entry.status != "current", entry.created_at))
        print(json.dumps(found[0].model_dump(), indent=1, ensure_ascii=False))
        return 0
    if action == "export":
        text = (
            json.dumps([e.model_dump() for e in entries], indent=1, ensure_ascii=False) + "\n"
            if args.json
            else to_markdown(entries, workspace)
        )
        if args.out is None:
            sys.stdout.write(text)
        else:
            args.out.write_text(text, encoding="utf-8")
            print(f"{len(entries)} decision(s) written to {args.out}")
        return 0
    if getattr(args, "json", False):
        print(json.dumps([e.model_dump() for e in entries], indent=1, ensure_ascii=False))
        return 0
    if not entries:
        print(f"no justifications in {workspace.preflight_dir}")
    for e in entries:
        print(
            f"{e.created_at}  {e.domain:<17} {json.dumps(e.decision)[:56]:<56} {e.confidence:<6} "
            f"{e.operation}  {e.hash[:19]}  outputs: {len(e.outputs)}"
            + ("" if e.status == "current" else f"  [{e.status}]")
        )
    return 0


def _revoke(store: Any, key: str) -> int:
    from llmc_mcp.errors import LlmcError
    from llmc_mcp.reflection.specs import DOMAINS

    try:
        withdrawn = [
            record
            for domain in sorted(DOMAINS)
            if (record := store.revoke(domain, key, by="the workspace's owner")) is not None
        ]
    except LlmcError as exc:
        print(f"llmc-mcp: error: {exc}", file=sys.stderr)
        return 2
    if not withdrawn:
        print(f"llmc-mcp: error: no decision {key!r}; list shows the keys.", file=sys.stderr)
        return 1
    for record in withdrawn:
        print(
            f"revoked {record.domain} {record.key} ({record.created_at}); kept as superseded, and the next "
            f"{record.operation} making this decision asks again."
        )
    return 0


def _prune(store: Any, selection: Any, *, dry_run: bool) -> int:
    if selection == type(selection)():
        print("llmc-mcp: error: prune needs a filter (e.g. --older-than 90).", file=sys.stderr)
        return 2
    now = datetime.now(UTC)
    if dry_run:
        chosen = [r for r in store.records() if selection.keeps(r, now)]
    else:
        chosen = store.prune(lambda r: selection.keeps(r, now))
    verb = "would delete" if dry_run else "deleted"
    for record in chosen:
        print(f"{verb} {record.domain} {record.key} ({record.created_at})")
    print(f"{len(chosen)} decision(s) {verb}.")
    return 0
