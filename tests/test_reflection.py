"""The reflection gate: prompts, schema, cache keys, the store and the issued-hash rule."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
from pathlib import Path

import pytest

from llmc_mcp.errors import InvalidArgument, JustificationInvalid, NotFound, RecordExists, StoreError
from llmc_mcp.operations import get_operation
from llmc_mcp.reflection.gate import Gate, ReflectionRequired, cache_key
from llmc_mcp.reflection.prompts import PromptLibrary, PromptTemplate
from llmc_mcp.reflection.schema import MAX_JUSTIFICATION_CHARS, validate_justification
from llmc_mcp.reflection.specs import Decision
from llmc_mcp.reflection.store import JustificationStore, Record
from llmc_mcp.tokens import count_tokens

REPROJECT = get_operation("raster.reproject")
CONVERT = get_operation("raster.convert")
EXAMPLE_ARGS = {
    "justify_crs_selection": {"dst_crs": "EPSG:6933"},
    "justify_resampling_method": {"method": "bilinear", "data": "continuous", "purpose": "warping"},
    "justify_lossy_compression": {"compress": "JPEG", "driver": "COG"},
    "justify_overlap_aggregation": {"method": "mean", "data": "continuous"},
    "justify_depression_handling": {"method": "fill", "max_depth": "none"},
    "justify_flow_routing": {"routing": "d8"},
    "justify_stream_threshold": {"threshold": "5000.0", "units": "cells"},
}
SUBJECTS = {
    "justify_crs_selection": ("crs_datum", "dst_crs"),
    "justify_resampling_method": ("resampling", "method"),
    "justify_lossy_compression": ("format_selection", "compress"),
    "justify_overlap_aggregation": ("aggregation", "method"),
    "justify_depression_handling": ("hydrology", "method"),
    "justify_flow_routing": ("hydrology", "routing"),
    "justify_stream_threshold": ("hydrology", "threshold"),
}


def justification(method: str, **overrides: object) -> dict:
    data = {
        "intent": "Land cover classes must keep their codes for an area tally.",
        "alternatives": [{"method": "an alternative", "why_not": "It would not preserve what matters."}],
        "choice": {
            "method": method,
            "rationale": "It preserves what matters here.",
            "tradeoffs": "Edges may look blocky.",
        },
        "confidence": "medium",
    }
    data.update(overrides)
    return data


def reproject_args(workspace_dir: Path, dst_crs: str = "EPSG:4326", resampling: str = "nearest") -> dict:
    return REPROJECT.validate(
        {"src": "RGB.byte.tif", "dst": "out.tif", "dst_crs": dst_crs, "resampling": resampling}
    )


@pytest.fixture
def gate(workspace_dir: Path) -> Gate:
    store = JustificationStore(workspace_dir / ".preflight")
    return Gate(store, PromptLibrary.default(), next_action="persist, then retry")


def satisfy(gate: Gate, args: dict) -> None:
    for hint in gate.check(REPROJECT, args):
        gate.persist(hint.hash, hint.domain, justification(next(iter(hint.prompt_args.values()))))


# Prompts


@pytest.mark.parametrize("name", sorted(EXAMPLE_ARGS))
def test_each_prompt_renders_under_300_tokens(name: str) -> None:
    text = PromptLibrary.default().get(name).render(EXAMPLE_ARGS[name])
    assert count_tokens(text) < 300


@pytest.mark.parametrize("name", sorted(EXAMPLE_ARGS))
def test_each_prompt_example_shows_the_shape_and_cannot_be_persisted_as_it_is(name: str) -> None:
    """Guards against examples that read as true reasoning for the value decided (copied, they passed).

    The example has exactly the schema's fields, with the value being justified in choice.method,
    and every other text a placeholder that validation refuses, each one named.
    """
    template = PromptLibrary.default().get(name)
    domain, subject = SUBJECTS[name]
    decision = Decision(domain, name, EXAMPLE_ARGS[name], subject)
    example = template.example(EXAMPLE_ARGS[name])
    assert set(example) == {"intent", "alternatives", "choice", "confidence"}
    assert example["choice"]["method"] == EXAMPLE_ARGS[name][subject]
    with pytest.raises(JustificationInvalid) as refused:
        validate_justification(example, decision, template.render(EXAMPLE_ARGS[name]))
    problems = " ".join(refused.value.details["errors"])
    for field in ("intent", "choice.rationale", "choice.tradeoffs", "alternatives.0.why_not", "confidence"):
        assert field in problems, problems


@pytest.mark.parametrize("name", sorted(EXAMPLE_ARGS))
def test_each_prompt_asks_what_to_preserve_alternatives_and_tradeoffs(name: str) -> None:
    text = PromptLibrary.default().get(name).render(EXAMPLE_ARGS[name]).lower()
    for word in ("preserve" if name != "justify_lossy_compression" else "acceptable", "reject", "tradeoff"):
        assert word in text


def test_a_custom_wkt_crs_is_named_not_pasted_into_the_prompt() -> None:
    wkt = 'PROJCRS["My local grid",' + "x" * 500
    text = PromptLibrary.default().get("justify_crs_selection").render({"dst_crs": wkt})
    assert "My local grid" in text and wkt not in text


def test_rendering_with_an_unknown_argument_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="no argument"):
        arguments = {"method": "x", "data": "continuous", "purpose": "warping", "extra": 1}
        PromptLibrary.default().get("justify_resampling_method").render(arguments)


# Schema


def test_choice_method_must_equal_the_value_being_justified() -> None:
    decision = Decision("resampling", "justify_resampling_method", {"method": "cubic"}, "method")
    with pytest.raises(JustificationInvalid) as info:
        validate_justification(justification("nearest"), decision)
    assert any(e.startswith("choice.method") for e in info.value.details["errors"])


def test_crs_choice_is_compared_after_normalization() -> None:
    decision = Decision("crs_datum", "justify_crs_selection", {"dst_crs": "EPSG:4326"}, "dst_crs")
    validate_justification(justification("epsg:4326"), decision)


def test_missing_fields_are_reported_field_by_field() -> None:
    decision = Decision("resampling", "justify_resampling_method", {"method": "nearest"}, "method")
    payload = justification("nearest")
    del payload["intent"]
    payload["confidence"] = "certain"
    with pytest.raises(JustificationInvalid) as info:
        validate_justification(payload, decision)
    fields = {e.split(":")[0] for e in info.value.details["errors"]}
    assert {"intent", "confidence"} <= fields


def test_the_chosen_method_cannot_also_be_a_rejected_alternative() -> None:
    decision = Decision("resampling", "justify_resampling_method", {"method": "nearest"}, "method")
    payload = justification("nearest", alternatives=[{"method": "Nearest", "why_not": "No reason."}])
    with pytest.raises(JustificationInvalid, match="also listed"):
        validate_justification(payload, decision)


def test_an_oversized_justification_is_refused() -> None:
    decision = Decision("resampling", "justify_resampling_method", {"method": "nearest"}, "method")
    payload = justification("nearest", intent="x" * (MAX_JUSTIFICATION_CHARS + 1))
    with pytest.raises(JustificationInvalid, match="limit"):
        validate_justification(payload, decision)


# Cache keys


def test_cache_key_is_stable_and_portable() -> None:
    key = cache_key("resampling", "sha256:abc", {"method": "nearest"})
    assert key == cache_key("resampling", "sha256:abc", {"method": "nearest"})
    assert key.startswith("sha256:") and len(key) == 71


@pytest.mark.parametrize(
    "other",
    [
        ("crs_datum", "sha256:abc", {"method": "nearest"}),
        ("resampling", "sha256:abd", {"method": "nearest"}),
        ("resampling", "sha256:abc", {"method": "cubic"}),
    ],
)
def test_cache_key_changes_with_domain_prompt_hash_and_args(other: tuple) -> None:
    assert cache_key("resampling", "sha256:abc", {"method": "nearest"}) != cache_key(*other)


# Gate and store


def test_a_first_reprojection_asks_for_both_domains_at_once(gate: Gate, workspace_dir: Path) -> None:
    with pytest.raises(ReflectionRequired) as info:
        gate.require(REPROJECT, reproject_args(workspace_dir))
    hints = info.value.hints
    assert [h.domain for h in hints] == ["crs_datum", "resampling"]
    assert hints[0].prompt_args == {"dst_crs": "EPSG:4326"}
    assert all(h.prompt_text and h.hash.startswith("sha256:") for h in hints)
    assert info.value.to_dict()["next_action"] == "persist, then retry"


def test_after_persisting_both_the_same_call_passes(gate: Gate, workspace_dir: Path) -> None:
    args = reproject_args(workspace_dir)
    satisfy(gate, args)
    gate.require(REPROJECT, args)


def test_equivalent_crs_spellings_share_one_justification(gate: Gate, workspace_dir: Path) -> None:
    satisfy(gate, reproject_args(workspace_dir, dst_crs="EPSG:4326"))
    gate.require(REPROJECT, reproject_args(workspace_dir, dst_crs="epsg:4326"))


def test_a_new_method_with_a_known_crs_asks_only_about_the_method(gate: Gate, workspace_dir: Path) -> None:
    satisfy(gate, reproject_args(workspace_dir))
    hints = gate.check(REPROJECT, reproject_args(workspace_dir, resampling="bilinear"))
    expected = {"method": "bilinear", "data": "unknown", "purpose": "warping"}
    assert [(h.domain, h.prompt_args) for h in hints] == [("resampling", expected)]


def test_editing_a_prompt_invalidates_its_justifications(gate: Gate, workspace_dir: Path) -> None:
    args = reproject_args(workspace_dir)
    satisfy(gate, args)
    old = gate.prompts.get("justify_resampling_method")
    edited = PromptTemplate(old.name, old.description, old.arguments, old.text + "\nAlso say why.")
    edited_gate = Gate(gate.store, gate.prompts.replace(edited), next_action="")
    assert [h.domain for h in edited_gate.check(REPROJECT, args)] == ["resampling"]


def test_a_tampered_record_is_a_miss(gate: Gate, workspace_dir: Path) -> None:
    args = reproject_args(workspace_dir)
    satisfy(gate, args)
    path = next((workspace_dir / ".preflight/justifications/resampling").glob("*.json"))
    record = json.loads(path.read_text())
    record["justification"]["confidence"] = (
        "high" if record["justification"]["confidence"] != "high" else "low"
    )
    path.write_text(json.dumps(record))
    assert [h.domain for h in gate.check(REPROJECT, args)] == ["resampling"]


def test_a_record_forged_without_the_key_is_a_miss(gate: Gate, workspace_dir: Path) -> None:
    args = reproject_args(workspace_dir)
    satisfy(gate, args)
    path = next((workspace_dir / ".preflight/justifications/crs_datum").glob("*.json"))
    forger = JustificationStore(workspace_dir / ".preflight", secret=b"f" * 32)
    forger.put(Record.model_validate({**json.loads(path.read_text()), "digest": ""}))
    assert [h.domain for h in gate.check(REPROJECT, args)] == ["crs_datum"]


def test_a_truncated_record_is_a_miss_not_a_crash(gate: Gate, workspace_dir: Path) -> None:
    args = reproject_args(workspace_dir)
    satisfy(gate, args)
    path = next((workspace_dir / ".preflight/justifications/crs_datum").glob("*.json"))
    path.write_bytes(path.read_bytes()[:40])
    assert [h.domain for h in gate.check(REPROJECT, args)] == ["crs_datum"]


def test_records_hold_the_decision_operation_prompt_and_digest(gate: Gate, workspace_dir: Path) -> None:
    satisfy(gate, reproject_args(workspace_dir))
    record = json.loads(
        next((workspace_dir / ".preflight/justifications/crs_datum").glob("*.json")).read_text()
    )
    assert record["operation"] == "raster.reproject"
    assert record["prompt"] == "justify_crs_selection"
    assert record["prompt_args"] == {"dst_crs": "EPSG:4326"}
    assert record["prompt_hash"].startswith("sha256:") and record["digest"].startswith("hmac-sha256:")
    assert ":" not in next((workspace_dir / ".preflight/justifications/crs_datum").glob("*.json")).name


def test_a_hash_that_was_never_issued_is_refused(gate: Gate) -> None:
    with pytest.raises(NotFound, match="not issued"):
        gate.persist("sha256:" + "0" * 64, "resampling", justification("nearest"))


def test_a_hash_persisted_under_another_domain_is_refused(gate: Gate, workspace_dir: Path) -> None:
    hint = gate.check(REPROJECT, reproject_args(workspace_dir))[0]
    with pytest.raises(InvalidArgument, match="belongs to domain"):
        gate.persist(hint.hash, "resampling", justification("EPSG:4326"))


@pytest.mark.parametrize("domain", ["../../etc", "crs_datum/../../x", "", "CRS_DATUM", None])
def test_traversal_through_the_domain_is_refused(gate: Gate, domain: object) -> None:
    with pytest.raises(InvalidArgument, match="not a reflection domain"):
        gate.persist("sha256:" + "0" * 64, domain, justification("x"))


@pytest.mark.parametrize("key", ["sha256:../../../etc/passwd", "../x", "sha256:" + "g" * 64, "sha256:AB", 7])
def test_traversal_through_the_hash_is_refused(gate: Gate, key: object) -> None:
    with pytest.raises(InvalidArgument, match="not a justification hash"):
        gate.persist(key, "resampling", justification("x"))


def test_an_invalid_justification_writes_nothing(gate: Gate, workspace_dir: Path) -> None:
    hint = gate.check(REPROJECT, reproject_args(workspace_dir))[0]
    with pytest.raises(JustificationInvalid):
        gate.persist(hint.hash, hint.domain, {"intent": "x"})
    assert not list((workspace_dir / ".preflight").glob("justifications/*/*.json"))


def test_lossless_conversion_needs_no_justification(gate: Gate) -> None:
    args = CONVERT.validate({"src": "RGB.byte.tif", "dst": "c.tif", "compress": "DEFLATE"})
    assert gate.check(CONVERT, args) == []


def test_lossy_conversion_asks_for_format_selection(gate: Gate) -> None:
    args = CONVERT.validate({"src": "RGB.byte.tif", "dst": "c.tif", "compress": "JPEG"})
    assert [(h.domain, h.prompt_args["compress"]) for h in gate.check(CONVERT, args)] == [
        ("format_selection", "JPEG")
    ]


def test_building_overviews_asks_about_their_resampling(gate: Gate) -> None:
    args = CONVERT.validate(
        {"src": "RGB.byte.tif", "dst": "c.tif", "overviews": [2, 4], "overview_resampling": "average"}
    )
    assert [(h.domain, h.prompt_args) for h in gate.check(CONVERT, args, facts={"data": "continuous"})] == [
        ("resampling", {"method": "average", "data": "continuous", "purpose": "overviews"})
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_a_read_only_store_gives_a_clear_error(gate: Gate, workspace_dir: Path) -> None:
    hint = gate.check(REPROJECT, reproject_args(workspace_dir))[0]
    gate.store._key()
    (workspace_dir / ".preflight").chmod(0o500)
    try:
        with pytest.raises(StoreError, match="read-only"):
            gate.persist(hint.hash, hint.domain, justification("EPSG:4326"))
    finally:
        (workspace_dir / ".preflight").chmod(0o700)


def _persist_many(root: str, worker: int, count: int) -> None:
    gate = Gate(JustificationStore(Path(root) / ".preflight"), PromptLibrary.default(), next_action="")
    for i in range(count):
        method = ["nearest", "bilinear", "cubic", "average"][(worker + i) % 4]
        args = REPROJECT.validate(
            {
                "src": "RGB.byte.tif",
                "dst": "o.tif",
                "dst_crs": f"EPSG:{[4326, 3857, 6933][i % 3]}",
                "resampling": method,
            }
        )
        for hint in gate.check(REPROJECT, args):
            # Another process may justify the same decision first: records are write-once.
            with contextlib.suppress(RecordExists):
                gate.persist(hint.hash, hint.domain, justification(next(iter(hint.prompt_args.values()))))
        gate.require(REPROJECT, args)


def test_concurrent_processes_persisting_leave_only_valid_records(workspace_dir: Path) -> None:
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_persist_many, args=(str(workspace_dir), w, 12)) for w in range(4)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(120)
    assert [p.exitcode for p in processes] == [0, 0, 0, 0]
    files = list((workspace_dir / ".preflight/justifications").glob("*/*"))
    store = JustificationStore(workspace_dir / ".preflight")
    records = list(store.records())
    assert len(records) == len(files) == 3 + 4
    assert not [f for f in files if f.suffix != ".json"]


def test_prose_alternatives_do_not_go_through_proj(monkeypatch: pytest.MonkeyPatch) -> None:
    """PROJ spends up to a second failing to parse prose; only code-like alternatives may reach it.

    Checked by recording what reaches the CRS parser, not by timing the call: a wall-clock bound
    fails on a loaded machine and proves little on a fast one.
    """
    from llmc_mcp import crs_text

    parsed: list[str] = []
    real_parse = crs_text.parse_crs

    def recording_parse(value: str, argument: str = "crs") -> object:
        parsed.append(value)
        return real_parse(value, argument)

    monkeypatch.setattr(crs_text, "parse_crs", recording_parse)
    crs_text.clear_cache()
    decision = Decision("crs_datum", "justify_crs_selection", {"dst_crs": "EPSG:6933"}, "dst_crs")
    payload = justification(
        "EPSG:6933",
        alternatives=[
            {"method": f"a geographic CRS number {i} (degrees)", "why_not": "Not equal-area."}
            for i in range(10)
        ],
    )
    validate_justification(payload, decision)
    assert parsed == ["EPSG:6933"], "a prose alternative was handed to PROJ"


def test_a_crs_code_alternative_equal_to_the_choice_is_still_caught() -> None:
    decision = Decision("crs_datum", "justify_crs_selection", {"dst_crs": "EPSG:4326"}, "dst_crs")
    payload = justification("EPSG:4326", alternatives=[{"method": "epsg:4326", "why_not": "No reason."}])
    with pytest.raises(JustificationInvalid, match="also listed"):
        validate_justification(payload, decision)
