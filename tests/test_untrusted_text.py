"""Names from sysfs, NVML or a snapshot are data, never layout or terminal control: fed control characters,
ANSI escape sequences, newlines, tabs, NULs, bidi overrides, markup and overlong strings in every name, each
output form shows them escaped and bounded (the table, ``topo``, ``place``, ``discover`` as JSON and DOT, the
page and its SVG, ``/readyz``, text logs), while JSON gives back the original string exactly."""

from __future__ import annotations

import json
import logging
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from starlette.testclient import TestClient

import topology as t
from agent.cli import main
from agent.serve._log import _Json, _Text
from exporter import HttpConfig, MetricsCache, View, create_app, picture_dot
from exporter.kube import LabelConfig, desired_labels
from exporter.kube._desired._names import is_label_value
from tests.fakenvml import materialize, profile_path
from tests.fakenvml._profile import build_machine
from tests.serve_machines import discover_profile, full_measurements
from topology import replace

HOSTILE = (
    "\x1b[2J\x1b[31mmlx5_9\x1b[0m",  # clears the screen, paints red
    "mlx5_0\nGPU9\tNV18\tNV18\tX",  # a forged matrix row
    "a\tb\tc",
    "nul\x00byte",
    "gpu\u202eevil\u2066x\u2069",  # right-to-left override, isolates
    "ok\rFAKE\x07\x08\x7f\x9b\x85",  # carriage return, BEL, BS, DEL, C1 CSI and NEL
    "<script>alert(1)</script>\"'&amp;",
    "back\\x1bslash",  # a literal backslash sequence, not an escape: shown as \\x1b
    "n" * 3000,  # below the codec's bound on one string, above what a row shows
    "\u2028line\u2029para\ufeffzw\u200b",
)
NODE = "node\x1b]0;owned\x07\n\u202e" + "x" * 400
_BAD = re.compile(r"[^\t\n\x20-\x7e\u00a0-\u2027\u202a-\u202d\u2030-\uffff]")  # what must never be printed
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\u2028\u2029\ufeff]")


def _hostile(snap: t.Snapshot) -> t.Snapshot:
    """Every name of ``snap`` replaced with hostile text, a problem and a source detail quoting it."""
    name = lambda i: HOSTILE[i % len(HOSTILE)]  # noqa: E731
    gpus = tuple(replace(g, name=name(i)) for i, g in enumerate(snap.gpus))
    nics = tuple(replace(n, name=f"{name(i)}{i}", netdevs=(f"{name(i + 1)}if{i}",), ports=tuple(
        replace(p, state=name(i + 2), link_layer=name(i + 3)) for p in n.ports))
        for i, n in enumerate(snap.nics))
    problems = (*snap.problems, *(t.Problem(source="sysfs", subject=h, message=f"could not read {h}") for h in HOSTILE))
    sources = tuple(replace(o, detail=HOSTILE[0]) for o in snap.sources)
    return replace(snap, node=NODE, gpus=gpus, nics=nics, problems=problems, sources=sources)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[t.Snapshot, t.Snapshot]:
    clean, _ = discover_profile("hgx-h100", tmp_path_factory.mktemp("hgx"))
    return clean, _hostile(clean)


def _safe(text: str, clean: str, *, width: int = 2 * t.TEXT_LIMIT) -> None:
    """Nothing unprintable but tab and newline, as many lines as the clean output, rows as wide as theirs
    (same number of tabs), and no line longer than ``width``: each long name or message is cut."""
    assert not _BAD.findall(text) and not _BIDI.findall(text), sorted(set(_BAD.findall(text) + _BIDI.findall(text)))
    lines, want = text.splitlines(), clean.splitlines()
    assert len(lines) == len(want)
    assert [line.count("\t") for line in lines] == [line.count("\t") for line in want]
    assert max(map(len, lines), default=0) <= width
    assert "n" * (t.TEXT_LIMIT + 1) not in text


def test_shown_escapes_and_bounds() -> None:
    assert t.shown("NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB HBM3"
    assert t.shown("a\tb\nc\x1b[0m\u202e\\") == "a\\tb\\nc\\x1b[0m\\u202e\\\\"
    assert t.shown("\ud800") == "\\ud800"  # a lone surrogate from JSON: printable only escaped
    cut = t.shown("\x01" * 100)
    assert len(cut) <= t.NAME_LIMIT and cut.endswith("...") and cut.startswith("\\x01")
    assert t.shown("x" * 5000, None) == "x" * 5000 and len(t.shown_text("x" * 5000)) == t.TEXT_LIMIT
    assert t.shown(b"not text") == "b'not text'"


def test_json_gives_back_every_name_exactly(pair: tuple[t.Snapshot, t.Snapshot]) -> None:
    _, bad = pair
    back = t.loads(t.dumps(bad))
    assert back.node == NODE and [g.name for g in back.gpus] == [g.name for g in bad.gpus]
    assert [n.name for n in back.nics] == [n.name for n in bad.nics] and back.problems == bad.problems
    assert t.dumps(bad).isascii()  # nothing for a terminal to act on, even when the JSON is printed


@pytest.fixture(scope="module")
def files(pair: tuple[t.Snapshot, t.Snapshot], tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("snapshots")
    (root / "clean.json").write_text(t.dumps(pair[0]))
    (root / "bad.json").write_text(t.dumps(pair[1]))
    return str(root / "clean.json"), str(root / "bad.json")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", [["topo"], ["place", "--gpus", "2"], ["place", "--gpus", "9"]])
def test_topo_and_place_from_a_snapshot(command: list[str], files: tuple[str, str],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    clean, bad = files
    code, out, err = _run([*command, "--from", bad], capsys)
    want_code, want_out, want_err = _run([*command, "--from", clean], capsys)
    assert code == want_code
    _safe(out, want_out)
    _safe(err, want_err)
    if command == ["topo"]:
        assert "n" * (t.NAME_LIMIT + 1) not in out  # a name in a row: cut at NAME_LIMIT
        assert ": mlx5_0\\nGPU9\\tNV18\\tNV18\\tX" in out and "\\x1b[2J\\x1b[31mmlx5_9\\x1b[0m" in out


def test_place_json_keeps_the_node_name(files: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["place", "--gpus", "2", "--format", "json", "--from", files[1]], capsys)
    assert code == 0 and json.loads(out)["node"] == NODE


def test_summary_and_exit_lines(pair: tuple[t.Snapshot, t.Snapshot]) -> None:
    clean, bad = pair
    text = t.summary(bad)
    clean_text = t.summary(replace(bad, **{f: getattr(clean, f) for f in ("node", "gpus", "nics")},
                                               problems=tuple(replace(p, subject="s", message="m")
                                                              for p in bad.problems)))
    _safe(text, clean_text)
    assert "could not read \\x1b[2J" in text and "Node node\\x1b]0;owned\\x07\\n\\u202e" in text


def test_dot_and_the_picture(pair: tuple[t.Snapshot, t.Snapshot]) -> None:
    clean, bad = pair
    for render in (t.to_dot, picture_dot):
        dot = render(bad)
        _safe(dot, render(clean))
        for line in dot.splitlines():  # every quoted string closed on its own line
            assert line.replace('\\\\', "").replace('\\"', "").count('"') % 2 == 0, line


def _client(view: View) -> TestClient:
    return TestClient(create_app(lambda: view, MetricsCache(lambda: view), HttpConfig()))


def test_the_page_matrix_and_readiness(pair: tuple[t.Snapshot, t.Snapshot]) -> None:
    clean, bad = pair
    c = _client(View(snapshot=bad, generation=1))
    page = c.get("/").text
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not _BAD.findall(page) and not _BIDI.findall(page)
    assert "n" * (t.NAME_LIMIT + 1) not in page.split("<h2>Problems</h2>")[0]  # names in tiles and the matrix
    matrix = c.get("/v1/topology/matrix").text
    _safe(matrix, _client(View(snapshot=clean, generation=1)).get("/v1/topology/matrix").text)
    assert t.loads(c.get("/v1/topology").text).node == NODE
    ready = _client(View(snapshot=bad, generation=1, nvml_error=HOSTILE[1], degradations=(HOSTILE[0],))).get("/readyz")
    assert ready.status_code == 503 and ready.text.count("\n") == 1 and not _BAD.findall(ready.text)
    ready = _client(View(snapshot=bad, generation=1, degradations=HOSTILE)).get("/readyz")
    assert ready.text.count("\n") == 1 + len(HOSTILE) and not _BAD.findall(ready.text)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed (scripts/test.sh installs it)")
def test_the_svg_is_well_formed_xml(pair: tuple[t.Snapshot, t.Snapshot]) -> None:
    svg = _client(View(snapshot=pair[1], generation=1)).get("/v1/topology.svg")
    assert svg.status_code == 200, svg.text[:300]
    ET.fromstring(svg.content)  # a raw control character or unescaped markup would not parse
    assert not _BAD.findall(svg.text) and not _BIDI.findall(svg.text)


def test_labels_never_carry_a_name_unchecked(pair: tuple[t.Snapshot, t.Snapshot]) -> None:
    labels = desired_labels(pair[1], LabelConfig(), {})
    assert labels and all(is_label_value(v) for v in labels.values())


def _record(message: str, **fields: object) -> logging.LogRecord:
    record = logging.LogRecord("topolink.serve", logging.INFO, __file__, 1, message, None, None)
    record.fields = fields
    return record


def test_logs() -> None:
    for h in HOSTILE:
        line = _Text().format(_record(h, node=h, error=RuntimeError(h)))
        assert "\n" not in line and not _BAD.findall(line) and not _BIDI.findall(line)
        assert len(line) < 4 * t.TEXT_LIMIT
        doc = json.loads(_Json().format(_record(h, node=h)))
        assert doc["event"] == h and doc["node"] == h  # JSON logs: the original, exactly


@pytest.fixture(scope="module")
def hostile_machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The hgx-h100 profile with a hostile GPU product name from its test NVML and a hostile RDMA NIC name in
    its sysfs tree (what a file name may hold: no NUL, no slash, at most 255 bytes)."""
    doc = yaml.safe_load(profile_path("hgx-h100").read_text())
    doc["gpu"]["name"] = "H100\x1b[31m\u202eevil\x07<b>"
    text = json.dumps(doc)  # the first NIC of the tree, whatever its nesting
    doc = json.loads(text.replace('"name": "mlx5_0"', json.dumps({"name": "mlx5_\x1b[2J\ttab\nnl"})[1:-1], 1))
    node = materialize(build_machine(doc, profile_path("hgx-h100")), tmp_path_factory.mktemp("hostile"))
    yield node.env()


@pytest.mark.parametrize("form", ["table", "json", "dot"])
def test_discover_through_the_test_nvml(form: str, hostile_machine: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    for k, v in hostile_machine.items():
        monkeypatch.setenv(k, v)
    code, out, err = _run(["discover", "--format", form, "--node-name", NODE], capsys)
    assert code == 0, err
    if form == "json":
        snap = t.loads(out)
        assert snap.node == NODE and {g.name for g in snap.gpus} == {"H100\x1b[31m\u202eevil\x07<b>"}
        assert "mlx5_\x1b[2J\ttab\nnl" in {n.name for n in snap.nics}
        return
    assert not _BAD.findall(out) and not _BIDI.findall(out)
    shown = "mlx5_\\x1b[2J\\ttab\\nnl"
    if form == "dot":  # DOT escapes the escapes' backslashes once more: the picture reads as the table does
        assert shown.replace("\\", "\\\\") in out
    else:
        assert shown in out and "H100\\x1b[31m\\u202eevil\\x07<b>" in out


def test_an_input_error_is_one_escaped_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unreadable --from file: the one line quoting its name (or a snapshot's words) stays one line."""
    code, out, err = _run(["topo", "--from", str(tmp_path / "no\x1b[2J\nsuch\u202e")], capsys)
    assert code == 3 and not out and err.count("\n") == 1 and not _BAD.findall(err) and not _BIDI.findall(err)
    assert "no\\x1b[2J\\nsuch\\u202e" in err


def test_topo_bandwidth_from_a_snapshot(pair: tuple[t.Snapshot, t.Snapshot], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The measured matrices name NICs and the snapshot's own test, direction and method words."""
    measured = full_measurements(pair[0])
    hostile = replace(measured, nics=pair[1].nics, measurements=tuple(
        replace(m, test=m.test + HOSTILE[i % len(HOSTILE)][:40], method=HOSTILE[(i + 1) % len(HOSTILE)])
        for i, m in enumerate(measured.measurements)))
    outputs = []
    for i, snap in enumerate((measured, hostile)):
        path = tmp_path / f"{i}.json"
        path.write_text(t.dumps(snap))
        code, out, _ = _run(["topo", "--bandwidth", "--from", str(path)], capsys)
        assert code == 0
        outputs.append(out)
    _safe(outputs[1], outputs[0])
