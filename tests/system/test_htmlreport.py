"""`perfguard report`: the HTML file opened in a real browser (Debian's headless Chromium,
driven by Playwright), the Markdown summary, and the demo's last step."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import psycopg
import pytest

from perfguard.present import htmlreport
from tests.conftest import CHECKOUT_TEST_ROOT, TEST_STATE, perfguard
from tests.system.test_history_verdicts import store_nights

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Kept after the run (CI uploads it): the report and its screenshot (one place, whichever
#: xdist worker ran the test).
ARTIFACTS = CHECKOUT_TEST_ROOT / "artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture()
def regressed_run(migrated_dsn: str, demo_report: Path, tmp_path: Path) -> list[int]:
    """Twenty nights of the real demo report, then three 6 % slower from 64 KiB up: the key
    figures and curves regress; the kernel changed on the night of the step."""
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 20 + [0.94] * 3,
                        curve_factors=[1.0] * 20 + [0.94] * 3, from_size=65536,
                        kernel_from=20, slower=True)
    return runs


def test_report_opens_in_chromium_with_verdict_plots_and_no_errors(
        migrated_dsn: str, regressed_run: list[int]) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed: run ./install.sh")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    html, summary = ARTIFACTS / "report.html", ARTIFACTS / "report.md"
    before_step, run = regressed_run[19], regressed_run[-1]
    result = perfguard("report", str(run), "--baseline", str(before_step), "--dsn",
                       migrated_dsn, "-o", str(html), "--markdown", str(summary),
                       state=TEST_STATE)
    assert result.returncode == 1, result.stderr  # exits by the run's outcome, as verdict
    assert f"run {run}: FAIL (" in result.stdout and f"report: {html}" in result.stdout
    # nothing to fetch: it opens air-gapped (the browser below also fails on any request)
    assert not re.search(r"""(src|href)=["']?https?:|url\(https?:""", html.read_text())
    errors: list[str] = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("requestfailed", lambda req: errors.append(f"request {req.url}"))
        page.goto(html.as_uri())
        assert page.inner_text("#status") == "FAIL"
        assert "regression" in page.inner_text("#counts")
        first = page.locator("#top tbody tr").first
        assert first.get_attribute("data-state") == "regression"
        assert "UcxPerftestCheck" in first.inner_text()
        assert re.search(r"\t-[4-8]\.\d%\t", first.inner_text())  # the 6 % step, in noise
        assert first.locator("svg[data-plot=sparkline]").count() == 1
        # where: the nodes as a hostlist and the HCA; plain numbers with separators
        assert re.fullmatch(r"node(\d|\[[\d,-]+\]) · HCA lo",
                            first.locator("td.where").inner_text()), first.inner_text()
        assert re.search(r"\d,\d{3} MiB/s", first.inner_text()), first.inner_text()
        assert "e+0" not in page.inner_text("#top")
        # every curve's text is at least 11 px on screen (glyphs of mathtext labels sit in
        # their first tspan; rotated labels scale by the matrix's magnitude, not its cosine)
        smallest = page.evaluate("""Math.min(...Array.from(
            document.querySelectorAll('#curves svg text')).filter(t => t.textContent.trim())
            .map(t => { const glyphs = t.querySelector('tspan') || t, m = t.getScreenCTM();
                        return parseFloat(getComputedStyle(glyphs).fontSize)
                               * Math.hypot(m.a, m.b); }))""")
        assert smallest >= 11, smallest
        assert "1e7" not in page.inner_text("#curves") and "1e6" not in page.inner_text("#curves")
        curves = page.locator("#curves svg[data-plot=curve]")
        assert curves.count() >= 2
        flagged = page.locator("#curves figure[data-flagged=true] svg")
        assert flagged.count() >= 1
        # this run, previous run, history band: three series, each drawn as paths
        assert flagged.first.get_attribute("data-series") == "3"
        assert flagged.first.bounding_box()["width"] > 200  # really rendered
        assert page.locator("#nodes svg[data-plot=heatmap]").count() == 1
        environment = page.inner_text("#environment")
        assert f"since run {before_step}" in environment and "6.1.0-99-amd64" in environment
        # the nodes as a hostlist (whichever the demo ran on), not "node1, node2"
        assert re.search(r"\tnode(\d+|\[[\d,-]+\])\s*$", environment), environment
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        browser.close()
    assert errors == []
    text = summary.read_text()
    assert text.startswith(f"## perfguard run {run} on local: FAIL")
    assert re.search(r"\| `UcxPerftestCheck [^`]*bandwidth` \| \S+ MiB/s \| \S+ \| "
                     r"regression: -\d", text), text


def test_a_curve_draws_its_key_figure_limit_at_the_key_size() -> None:
    """A threshold judges one point (the key figure), so it is drawn at that size, on the
    side the metric must not cross: an upper limit for latency, a lower one for bandwidth."""
    from perfguard.judge import verdict as vd
    from perfguard.present import plots

    def line(metric: str, better: str, low: float | None, high: float | None) -> vd.Line:
        found = vd.Line("OsuPt2PtCheck", {"benchmark": "osu_bw"}, "ib", "gnu", metric, 1.0,
                        "MB/s", {}, 10.0, low, high, "pass", "", better=better)
        found.key_point = {"size": 4 << 20}
        return found

    limits = htmlreport._key_limits([line("bandwidth", "higher", 9000.0, None),
                                     line("latency", "lower", None, 2.5),
                                     line("message_rate", "higher", None, None)])
    key = ("OsuPt2PtCheck", vd.frozen({"benchmark": "osu_bw"}), "ib", "gnu")
    assert limits == {(*key, "bandwidth"): (4 << 20, 9000.0, False),
                      (*key, "latency"): (4 << 20, 2.5, True)}
    svg = plots.curve("osu_bw bandwidth", "MB/s", [1 << 20, 4 << 20], [9500.0, 9800.0],
                      None, None, {}, limits[(*key, "bandwidth")])
    assert "lower limit at 4M" in svg and 'data-series="2"' in svg
    assert "limit at" not in plots.curve("osu_bw bandwidth", "MB/s", [1 << 20], [9500.0],
                                         None, None, {})


def test_report_of_a_clean_run_says_so(migrated_dsn: str, demo_report: Path,
                                       tmp_path: Path) -> None:
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0] * 14, cv=0.0)
    with psycopg.connect(migrated_dsn) as conn:
        report = htmlreport.write(conn, runs[-1], tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert not report.failed and '<span class="badge pass" id="status">PASS</span>' in page
    assert "Nothing failed, regressed or changed beyond its noise." in page


def test_report_of_a_first_run_says_nothing_was_judged_yet(migrated_dsn: str,
                                                          demo_report: Path,
                                                          tmp_path: Path) -> None:
    """Two nights (both among the last 3 the judge judges): no figure has a baseline, so
    the report does not claim that nothing changed beyond its noise, and says which lines
    are not yet judged."""
    runs = store_nights(migrated_dsn, demo_report, tmp_path, [1.0, 1.9], cv=0.0)
    with psycopg.connect(migrated_dsn) as conn:
        htmlreport.write(conn, runs[-1], tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert "changed beyond its noise" not in page
    assert "no figure could be judged against its history yet" in page
    assert re.search(r"Not yet judged: \d+ of \d+ lines</b>\s+have history 0 of 8 runs", page)
    assert not list(tmp_path.glob(".r.html.partial"))


def test_gitlab_example_publishes_report_summary_and_junit_from_the_project() -> None:
    """GitLab uploads only paths inside the project: the example copies the report there,
    declares the JUnit report, and its `perfguard report` line is one our CLI accepts."""
    import shlex

    import yaml

    from perfguard.cli import build_parser
    from perfguard.paths import CHECKOUT as REPO_ROOT

    pipeline = yaml.safe_load((REPO_ROOT / "ci" / "gitlab-ci.yml").read_text())
    for job in ("nightly", "upgrade-check"):
        artifacts = pipeline[job]["artifacts"]
        assert artifacts["paths"] == ["perfguard-report/"] and artifacts["when"] == "always"
        assert artifacts["reports"]["junit"] == "perfguard-report/junit.xml"
        [command] = pipeline[job]["after_script"]
        argv = shlex.split(command.replace('"${PERFGUARD_REPORT_RUN:-latest}"', "latest")
                           .split(" ${PERFGUARD_REPORT_BASELINE")[0])
        args = build_parser().parse_args(argv[1:])
        assert (str(args.output), str(args.markdown), str(args.junit)) == (
            "perfguard-report/report.html", "perfguard-report/summary.md",
            "perfguard-report/junit.xml")
    assert pipeline["upgrade-check"]["variables"]["PERFGUARD_REPORT_BASELINE"] == "pre-upgrade"


def test_a_report_to_a_path_it_cannot_write_is_said_plainly(
        migrated_dsn: str, demo_report: Path, tmp_path: Path) -> None:
    """`report -o` where no file can be: the path, the system's reason and the fix, exit
    2; it was an "internal error … please report it" and left nothing to act on."""
    [run] = store_nights(migrated_dsn, demo_report, tmp_path, [1.0], cv=0.0)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    target = blocker / "reports" / "run.html"  # below a file (root may write anywhere)
    result = perfguard("report", str(run), "--dsn", migrated_dsn, "-o", str(target),
                       state=TEST_STATE)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"perfguard: error: cannot write the report to {target}: "
                                    f"Not a directory (choose a writable path with -o"), \
        result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
