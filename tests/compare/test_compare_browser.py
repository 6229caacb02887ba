"""compare.html in headless Chromium: it loads with no console error, and its tables and
plots are in the rendered DOM (slow: run with ``pytest -m slow``)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists()
                                        else None)
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                 "(apt-get install -y chromium; .ci/run installs it)")]
# the pages have no script, so any console message at all is a failure
CONSOLE_ERROR = re.compile(r"Uncaught|:CONSOLE[:(]")


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
         *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    d = tmp_path_factory.mktemp("browser")
    write_jsonl(d / "corpus.jsonl", TINY_CORPUS)
    write_jsonl(d / "cases.jsonl", TINY_CASES)
    ds = [f"dataset.corpus={d / 'corpus.jsonl'}", f"dataset.cases={d / 'cases.jsonl'}",
          "tracking=none"]
    for name, k in (("k1", 1), ("k3", 3)):
        assert run_cli("run", *ds, f"k={k}", f"hydra.run.dir={name}", cwd=d).returncode == 0
    res = run_cli("compare", "k1", "k3", "--out", "pair", cwd=d)
    assert res.returncode == 0, res.stderr
    res = run_cli("run", "-m", *ds, "hydra.sweep.dir=sw", "k=1,3", "chunker.size=64,128", cwd=d)
    assert res.returncode == 0, res.stderr
    res = run_cli("compare", "sw", "--baseline", "0", "--out", "sweep", cwd=d)
    assert res.returncode == 0, res.stderr
    return d


@pytest.mark.parametrize("which, plots, tables", [("pair", 2, 5), ("sweep", 4, 5)])
def test_compare_html_in_chromium(pages, tmp_path, which, plots, tables):
    page = pages / which / "compare.html"
    url = page.resolve().as_uri()
    shot = tmp_path / f"{which}.png"
    res = _chromium(tmp_path, "--window-size=1280,2000", f"--screenshot={shot}", url)
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 10_000
    assert not CONSOLE_ERROR.search(res.stderr), res.stderr[-3000:]
    dom = _chromium(tmp_path, "--dump-dom", url)
    assert dom.returncode == 0 and not CONSOLE_ERROR.search(dom.stderr), dom.stderr[-3000:]
    html = dom.stdout
    assert html.count("<table") >= tables
    imgs = re.findall(r'<img class="plot" alt="[^"]*" src="data:image/png;base64,[A-Za-z0-9+/=]+"',
                      html)
    assert len(imgs) >= plots
    assert "final.evidence_recall" in html
    # nothing outside the file: no script, no stylesheet or image fetched from elsewhere
    assert "<script" not in html
    assert not re.search(r'(src|href)="(?!data:)', html)


def test_console_errors_are_detected(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFn()</script></body></html>")
    res = _chromium(tmp_path, "--dump-dom", bad.as_uri())
    assert CONSOLE_ERROR.search(res.stderr), res.stderr[-2000:]
