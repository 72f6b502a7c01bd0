"""ReFrame run reports: load, validate and flatten them into what perfguard stores.

A report that is malformed, truncated, of an unknown data version or not what ReFrame's
own schema (``reframe/schemas/runreport.json`` of the installed ReFrame) describes raises
ReportError naming the file and the place; nothing downstream ever sees half a report. A
NaN or infinity among one test case's key figures fails that test case with the place as
its reason, that figure not stored (its other figures and curves are); one in a curve
drops that point only (named in the test case's ``dropped``); the rest of the report is
stored. perfguard's own variables (``perfguard_samples``, fingerprints, directions),
which the schema leaves open, are checked here.
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from perfguard.errors import PerfguardError

SUPPORTED_MAJOR = "4"
#: Name of the check variable in which perfguard checks list every measured point.
SAMPLES_VARIABLE = "perfguard_samples"
DIRECTIONS_VARIABLE = "perfguard_better"
#: The metrics of DIRECTIONS_VARIABLE whose direction the check's reference implies.
IMPLIED_VARIABLE = "perfguard_better_implied"
#: Name of the check variable holding the per-node environment fingerprints.
FINGERPRINT_VARIABLE = "perfguard_fingerprints"
#: Why a test case's figures are not the fabric's (reframe_tests/common/cpu_wait.py): such
#: a test case is stored with the result ``disturbed``, its figures kept but not judged.
DISTURBED_VARIABLE, DISTURBED_RESULT = "perfguard_disturbed", "disturbed"


class ReportError(PerfguardError):
    """A report that cannot be stored, with the file and the reason."""


class NonFiniteValue(ReportError):
    """A NaN or infinity among a test case's values: that value is not stored, and one
    among its key figures fails the test case with this reason; the rest of the report is
    stored (one bad row must not lose a night)."""


class Sample(NamedTuple):
    """One measured value (a tuple: reports carry hundreds of thousands of them)."""
    metric: str
    value: float
    unit: str
    point: dict[str, Any]
    reference: float | None = None
    lower: float | None = None
    upper: float | None = None


class Shape(tuple):
    """A series' points (coordinate names, columns, how many), hashed once: a report's
    12,000 curves share a few dozen, each looked up by ingestion twice (its point keys,
    its block); a tuple of 123 sizes is hashed again at every lookup. Equal to the plain
    tuple, and hashed alike."""

    def __new__(cls, points: tuple) -> Shape:
        shape = super().__new__(cls, points)
        shape.__dict__["hash"] = tuple.__hash__(shape)
        return shape

    def __hash__(self) -> int:
        return self.__dict__["hash"]


@dataclass
class Series:
    """One curve or sweep: a metric measured at points given by coordinate columns.

    In the report (check variable ``perfguard_samples``) it is written columnar, so a
    250,000-point report is lists of numbers, not 250,000 small objects::

        {"metric": "bandwidth", "unit": "MB/s",
         "coords": {"size": [1, 2, 4, ...], "nodes": 2}, "values": [0.9, 1.8, 3.7, ...]}

    A scalar coordinate applies to every point.
    """
    metric: str
    unit: str
    names: tuple[str, ...]
    columns: tuple[tuple, ...]
    values: list[float]
    #: ``signature()`` as the report's parse shared it among the series of one sweep.
    shape: Shape | None = None

    def point(self, index: int) -> dict[str, Any]:
        return {name: column[index] for name, column in zip(self.names, self.columns)}

    def signature(self) -> tuple:
        """Equal for series measured at the same points (every OMB curve of one sweep)."""
        return self.shape or (self.names, tuple(map(tuple, self.columns)), len(self.values))

    def point_keys(self) -> Iterator[tuple]:
        """A hashable key per point, in order: ((name, value), ...)."""
        names = self.names
        return (tuple(zip(names, row)) for row in zip(*self.columns)) if names else \
            iter([()] * len(self.values))


@dataclass
class TestCase:
    check: str
    unique_name: str
    hashcode: str
    params: dict[str, Any]
    system: str
    partition: str
    environ: str
    result: str
    run_index: int
    fail_phase: str | None
    fail_reason: str | None
    jobid: str | None
    nodelist: list[str]
    job_exitcode: int | None
    time_total: float | None
    started: datetime | None
    key_samples: list[Sample]
    series: list[Series]
    fingerprints: dict[str, dict[str, Any]]
    #: metric → "higher" or "lower": which way is better, as the check declares it (or
    #: its reference's one-sided bound implies it: ``implied``).
    better: dict[str, str] = field(default_factory=dict)
    implied: frozenset[str] = frozenset()
    #: A ReFrame fixture (SpackStack): set-up for the checks, no check itself.
    fixture: bool = False
    #: The curve points not stored for a value that is not finite (NaN, infinity), each
    #: named with its place, point and value; a curve of such values only, whole.
    dropped: list[str] = field(default_factory=list)

    @property
    def samples(self) -> list[Sample]:
        """Key figures and every curve point, as Sample tuples (for small consumers;
        ingestion reads `series` directly)."""
        points = [Sample(s.metric, value, s.unit, s.point(i))
                  for s in self.series for i, value in enumerate(s.values)]
        return self.key_samples + points

    def dimensions(self, seen: set[tuple]) -> tuple[set[tuple[str, str]], set[tuple]]:
        """Every (metric, unit) and every distinct point key the test case measured;
        series whose signature is in ``seen`` (updated here) add no keys again."""
        metrics = {(s.metric, s.unit) for s in self.key_samples}
        keys: set[tuple] = set()
        for series in self.series:
            metrics.add((series.metric, series.unit))
            signature = series.signature()
            if signature not in seen:
                seen.add(signature)
                keys.update(series.point_keys())
        return metrics, keys


@dataclass
class Report:
    path: Path
    session_uuid: str
    data_version: str
    started: datetime
    finished: datetime | None
    reframe_version: str
    cmdline: str
    hostname: str
    user: str
    testcases: list[TestCase]

    @property
    def dry_run(self) -> bool:
        """ReFrame generated job scripts only (``--dry-run``): nothing ran, nothing was
        measured, and its test cases say "pass"."""
        return "--dry-run" in self.cmdline.split()


@contextmanager
def no_cyclic_gc():
    """A report allocates millions of acyclic containers; each one counts towards the
    cyclic collector's thresholds, whose repeated full passes cost more than the parse."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load(path: Path) -> Report:
    path = Path(path)
    if path.is_dir():
        raise ReportError(f"{path}: is a directory, not a report file")
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ReportError(f"{path}: cannot read report ({exc.strerror})") from exc
    with no_cyclic_gc():
        try:
            raw = _parsed(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            where = (f" at line {exc.lineno}, column {exc.colno} ({exc.msg})"
                     if isinstance(exc, json.JSONDecodeError) else f" ({exc.reason})")
            raise ReportError(f"{path}: not valid JSON{where}; the report is truncated or "
                              f"malformed") from exc
        except (ValueError, RecursionError) as exc:  # 5000-digit integers, 10^5 nested lists
            raise ReportError(f"{path}: not a usable JSON document ({exc})") from exc
        return parse(raw, path)


def _parsed(text: bytes) -> Any:
    """The report's JSON: orjson's parse (20 ms of a 5.5 MB report, 40 ms by json), or,
    where orjson refuses it, json's, which takes what ReFrame writes beside strict JSON
    (``NaN``, ``Infinity``: a figure a test case fails by, not the report) and says where
    a malformed document breaks."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def parse(raw: Any, path: Path) -> Report:
    if not isinstance(raw, dict) or "session_info" not in raw or "runs" not in raw:
        raise ReportError(f"{path}: not a ReFrame run report (no session_info/runs)")
    info = _typed(raw["session_info"], dict, f"{path}: session_info")
    version = str(info.get("data_version", ""))
    if version.split(".")[0] != SUPPORTED_MAJOR:
        raise ReportError(f"{path}: unsupported report data_version {version!r} "
                          f"(perfguard reads {SUPPORTED_MAJOR}.x)")
    uuid = info.get("uuid")
    if not uuid or not isinstance(uuid, str):
        raise ReportError(f"{path}: session_info has no uuid")
    testcases = []
    shapes: dict[tuple, Shape] = {}
    for run_no, run in enumerate(_typed(raw["runs"], list, f"{path}: runs")):
        cases = _typed(_typed(run, dict, f"{path}: runs[{run_no}]").get("testcases", []),
                       list, f"{path}: runs[{run_no}].testcases")
        parsed = []
        for case_no, case in enumerate(cases):
            where = f"{path}: runs[{run_no}].testcases[{case_no}]"
            parsed.append(_testcase(_typed(case, dict, where), where, shapes))
        _skips_through_dependencies(cases, parsed)
        testcases += parsed
    _as_reframe_describes(raw, path)
    return Report(
        path=path, session_uuid=uuid, data_version=version,
        started=_time(info.get("time_start_unix"), info.get("time_start")) or _now(),
        finished=_time(info.get("time_end_unix"), info.get("time_end")),
        reframe_version=str(info.get("version", "")), cmdline=str(info.get("cmdline", "")),
        hostname=str(info.get("hostname", "")), user=str(info.get("user", "")),
        testcases=testcases,
    )


@functools.cache
def _runreport_validator() -> Callable[[Any], Any]:
    """ReFrame's schema of a run report, compiled once (fastjsonschema: 9 µs a test case
    where jsonschema took 175, 9 s of a 50,000-test-case run; benchmarks/ingest.py)."""
    import fastjsonschema

    schema = Path(importlib.util.find_spec("reframe").origin).parent / "schemas" / \
        "runreport.json"
    return fastjsonschema.compile(json.loads(schema.read_text()))


def _as_reframe_describes(raw: dict, path: Path) -> None:
    from fastjsonschema import JsonSchemaException

    try:
        _runreport_validator()(raw)
    except JsonSchemaException as exc:
        place = exc.message.replace("data.", "", 1).replace("data ", "(top level) ", 1)
        raise ReportError(f"{path}: not a run report as ReFrame's schema describes it "
                          f"(reframe/schemas/runreport.json): {place}") from None


def _typed(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind):
        raise ReportError(f"{where}: expected {'an object' if kind is dict else 'a list'}, "
                          f"found {type(value).__name__}")
    return value


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _time(unix: Any, text: Any) -> datetime | None:
    if isinstance(unix, (int, float)) and math.isfinite(unix):
        try:
            return datetime.fromtimestamp(unix, timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(text, str) and text:
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _testcase(case: dict, where: str, shapes: dict[tuple, Shape]) -> TestCase:
    try:
        return _checked_testcase(case, where, shapes)
    except KeyError as exc:
        raise ReportError(f"{where}: missing field {exc}") from exc
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise ReportError(f"{where}: a field has the wrong type ({exc})") from exc


def _checked_testcase(case: dict, where: str, shapes: dict[tuple, Shape]) -> TestCase:
    name = case["name"]
    system = case["system"]
    if not isinstance(name, str) or not isinstance(system, str):
        raise ReportError(f"{where}: name and system must be strings")
    unique = case.get("unique_name") or name
    partition = case.get("partition") or system.split(":", 1)[-1]
    # the job's own record of its allocation first (ReFrame's is a poll's)
    nodelist = case.get("perfguard_nodelist") or case.get("job_nodelist") or []
    if not isinstance(nodelist, list):
        raise ReportError(f"{where}: job_nodelist must be a list")
    exitcode = case.get("job_exitcode")
    result = str(case.get("result", "unknown"))
    fail_phase = _optional_text(case.get("fail_phase"))
    fail_reason = _optional_text(case.get("fail_reason")) or _skip_reason(case)
    dropped: list[str] = []
    not_finite: list[str] = []
    key_samples = _perf_samples(case, where, not_finite)
    series = _series(case.get(SAMPLES_VARIABLE) or [], f"{where}.{SAMPLES_VARIABLE}",
                     shapes, dropped)
    if not_finite:  # a key figure the benchmark could not measure: the test case failed
        result, fail_phase = "fail", "performance"
        kept = len(key_samples) + sum(len(one.values) for one in series)
        fail_reason = ("; ".join(not_finite) + f": not stored ({kept} other figure(s) of "
                       f"this test case are)"
                       + (f" (ReFrame: {fail_reason})" if fail_reason else ""))
    disturbed = _optional_text(case.get(DISTURBED_VARIABLE))
    if disturbed and (key_samples or series) and _measured(result, fail_phase, fail_reason):
        # a test case without figures (MPI hello's binding proof) has nothing disturbed
        result, fail_phase, fail_reason = DISTURBED_RESULT, "performance", disturbed
    return TestCase(
        check=name.split()[0].split("%")[0] if name.strip() else name,
        unique_name=str(unique),
        hashcode=str(case.get("hashcode", "")),
        params=_params(case),
        system=system.split(":")[0],
        partition=str(partition).split(":")[-1],
        environ=str(case.get("environ", "")),
        result=result,
        run_index=int(case.get("run_index", 0) or 0),
        fail_phase=fail_phase,
        fail_reason=fail_reason,
        jobid=str(case["jobid"]) if case.get("jobid") not in (None, "") else None,
        nodelist=[str(n) for n in nodelist],
        job_exitcode=int(exitcode) if exitcode is not None else None,
        time_total=_finite_or_none(case.get("time_total")),
        started=_time(case.get("job_submit_time"), None),
        key_samples=key_samples,
        series=series,
        fingerprints=_fingerprints(case, where),
        better=_directions(case, where),
        implied=frozenset(str(m) for m in case.get(IMPLIED_VARIABLE) or []),
        fixture=case.get("fixture") is True,
        dropped=[d.removeprefix(f"{where}.") for d in dropped],
    )


def _measured(result: str, fail_phase: str | None, fail_reason: str | None) -> bool:
    """Whether ReFrame measured every figure: passed, or failed only a reference (what
    repeatable/20_testcases.sql judges as passed)."""
    return result in ("pass", "success") or (
        result == "fail" and fail_phase == "performance"
        and "failed to meet reference" in (fail_reason or ""))


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _params(case: dict) -> dict[str, Any]:
    """The check's parameter values, from ReFrame's display name ``Check %p1=v1 %p2=v2``."""
    params: dict[str, Any] = {}
    display = str(case.get("display_name") or "")
    for token in display.split(" %")[1:]:
        name, _, value = token.partition("=")
        params[name.strip()] = value.strip()
    return params


def _finite(value: Any, where: str) -> float:
    if type(value) is float and math.isfinite(value):  # the common case, fast
        return value
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ReportError(f"{where}: value {value!r} is not a number") from exc
    if not math.isfinite(number):
        raise NonFiniteValue(f"{where}: value {value!r} is not finite (NaN or infinity)")
    return number


def _finite_or_none(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _optional_bound(value: Any, where: str) -> float | None:
    return None if value is None else _finite(value, where)


def _perf_samples(case: dict, where: str, not_finite: list[str]) -> list[Sample]:
    """ReFrame perf variables: ``{'part:metric': [value, ref, lower, upper, unit, …]}``;
    one whose value is NaN or infinite is left out and named in ``not_finite`` (a NaN
    took the test case's 17 finite curve points with it: issue 67)."""
    samples = []
    for key, entry in _typed(case.get("perfvalues") or {}, dict,
                             f"{where}.perfvalues").items():
        metric = key.rsplit(":", 1)[-1]
        here = f"{where}.perfvalues[{key!r}]"
        if not isinstance(entry, (list, tuple)) or len(entry) < 5:
            raise ReportError(f"{here}: expected [value, ref, lower, upper, unit, ...]")
        value, ref, lower, upper, unit = entry[:5]
        if value is None:
            continue  # a perf variable that was never evaluated (test failed earlier)
        try:
            samples.append(Sample(
                metric=metric, value=_finite(value, here), unit=str(unit or ""), point={},
                reference=_optional_bound(ref, here) if ref not in (0, None) else None,
                lower=_optional_bound(lower, here), upper=_optional_bound(upper, here),
            ))
        except NonFiniteValue as exc:  # its value or a bound of its reference
            not_finite.append(str(exc).removeprefix(f"{where}."))
    return samples


def _series(raw: Any, where: str, shapes: dict[tuple, Shape],
            dropped: list[str]) -> list[Series]:
    if not isinstance(raw, list):
        raise ReportError(f"{where}: expected a list of series")
    found = (_one_series(entry, f"{where}[{index}]", shapes, dropped)
             for index, entry in enumerate(raw))
    return [series for series in found if series is not None]


def _one_series(entry: Any, where: str, shapes: dict[tuple, Shape],
                dropped: list[str]) -> Series | None:
    """One series, its points' ``Shape`` shared with the series of ``shapes`` measured
    at the same points. A point whose value is not finite (NaN, infinity) is left out and
    named in ``dropped``; a series of such points only is None."""
    if not isinstance(entry, dict) or "metric" not in entry or "values" not in entry:
        raise ReportError(f"{where}: expected an object with metric, values and coords")
    values, coords = entry["values"], entry.get("coords") or {}
    if not isinstance(values, list) or not isinstance(coords, dict):
        raise ReportError(f"{where}: values must be a list and coords an object")
    bad = _not_finite(values, where)
    columns = []
    for name, column in coords.items():
        if not isinstance(column, list):
            column = [column] * len(values)
        elif len(column) != len(values):
            raise ReportError(f"{where}: coords[{name!r}] has {len(column)} entries for "
                              f"{len(values)} values")
        columns.append(tuple(column))
    names = tuple(map(str, coords))
    if bad:
        if len(bad) == len(values):
            dropped.append(f"{where}: every value ({len(values)}) not finite: "
                           f"{entry['metric']} dropped")
            return None
        for index in bad:
            at = ", ".join(f"{name}={column[index]}" for name, column in zip(names, columns))
            dropped.append(f"{where}.values[{index}]" + (f" ({at})" if at else "")
                           + f": {values[index]!r}")
        kept = [i for i in range(len(values)) if i not in set(bad)]
        values = [values[i] for i in kept]
        columns = [tuple(column[i] for i in kept) for column in columns]
    points = (names, tuple(columns), len(values))
    try:
        shape = shapes.get(points)
    except TypeError:
        name = next(name for name, column in zip(names, columns) if not _hashable(column))
        raise ReportError(f"{where}: coords[{name!r}] must hold numbers or strings, "
                          f"not objects or lists") from None
    if shape is None:
        shape = shapes[points] = Shape(points)
    return Series(str(entry["metric"]), str(entry.get("unit", "")), names, shape[1], values,
                  shape)


def _hashable(value: tuple) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _not_finite(values: list, where: str) -> list[int]:
    """Where ``values`` holds a NaN or an infinity (none, the common case, at the cost of
    one sum); a value that is no number is a malformed report."""
    try:
        if math.isfinite(sum(values)):  # a NaN or infinity carries through the sum
            return []
    except (TypeError, OverflowError):  # not numbers; integers whose sum no float holds
        pass
    bad = []
    for index, value in enumerate(values):
        try:
            _finite(value, f"{where}.values[{index}]")
        except NonFiniteValue:
            bad.append(index)
    return bad


def _directions(case: dict, where: str) -> dict[str, str]:
    raw = case.get(DIRECTIONS_VARIABLE) or {}
    if not isinstance(raw, dict) or not all(
            isinstance(k, str) and v in ("higher", "lower") for k, v in raw.items()):
        raise ReportError(f"{where}.{DIRECTIONS_VARIABLE}: expected {{metric: 'higher' or "
                          f"'lower'}}")
    return raw


def _fingerprints(case: dict, where: str) -> dict[str, dict[str, Any]]:
    raw = case.get(FINGERPRINT_VARIABLE) or {}
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ReportError(f"{where}.{FINGERPRINT_VARIABLE}: expected {{node: {{field: value}}}}")
    return raw


def _skip_reason(case: dict) -> str | None:
    """ReFrame's report keeps no skip message; the checks keep it in a variable
    (reframe_tests/common/skips.py)."""
    if case.get("result") != "skip":
        return None
    return _optional_text(case.get("perfguard_skip_reason")) or None


def _skips_through_dependencies(cases: list[dict], parsed: list[TestCase]) -> None:
    """A test case ReFrame skipped because a dependency was skipped or failed (Himeno's
    larger runs depend on the 1-node 1-rank run) carries no reason of its own: it gets
    the dependency's, named ("its dependency X was skipped: …")."""
    by_name = {(t.unique_name, t.partition, t.environ): t for t in parsed}
    for case, test in zip(cases, parsed):
        if test.result != "skip" or test.fail_reason:
            continue
        for dependency in case.get("dependencies_actual") or []:
            if not isinstance(dependency, (list, tuple)) or len(dependency) != 3:
                continue
            name, partition, environ = map(str, dependency)
            found = by_name.get((name, partition.split(":")[-1], environ))
            if found is not None and found.result in ("skip", "fail"):
                test.fail_reason = _dependency_reason(found)
                break


def _dependency_reason(dependency: TestCase) -> str:
    name = dependency.check + "".join(f" %{k}={v}" for k, v in sorted(dependency.params.items()))
    if dependency.result == "fail":
        return f"its dependency {name} failed"
    return f"its dependency {name} was skipped: " + (dependency.fail_reason or "no reason "
                                                      "given")


def reports_in_results_db(db_file: Path, out_dir: Path) -> list[Path]:
    """Each session of a ReFrame results database (ReFrame 4.7+ ``results.db``, its
    ``sessions`` table: one whole run report per row) written out as a report file under
    ``out_dir``, oldest first, so a site that already runs ReFrame brings its history in
    through the same ingest as any report (idempotent by session uuid)."""
    import sqlite3

    if not db_file.is_file():
        raise ReportError(f"{db_file}: no such file (ReFrame keeps it at "
                          f"~/.reframe/reports/results.db, or where RFM_SQLITE_DB_FILE says)")
    try:
        with sqlite3.connect(f"file:{db_file}?mode=ro", uri=True) as conn:
            rows = conn.execute("SELECT uuid, json_blob FROM sessions "
                                "ORDER BY session_start_unix").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ReportError(f"{db_file}: not a ReFrame results database ({exc}); it is written "
                          f"by ReFrame 4.7+ with RFM_ENABLE_RESULTS_STORAGE=1") from exc
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for uuid, blob in rows:
        path = out_dir / f"results-db-{uuid}.json"
        path.write_text(blob)
        paths.append(path)
    return paths
