"""ReFrame run reports: load, validate and flatten them into what perfguard stores.

A report that is malformed, truncated, of an unknown data version or carrying
non-finite numbers raises ReportError naming the file and the place; nothing
downstream ever sees half a report.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfguard.errors import PerfguardError

SUPPORTED_MAJOR = "4"
#: Name of the check variable in which perfguard checks list every measured point.
SAMPLES_VARIABLE = "perfguard_samples"
#: Name of the check variable holding the per-node environment fingerprints.
FINGERPRINT_VARIABLE = "perfguard_fingerprints"


class ReportError(PerfguardError):
    """A report that cannot be stored, with the file and the reason."""


@dataclass(frozen=True)
class Sample:
    metric: str
    value: float
    unit: str
    point: dict[str, Any] = field(default_factory=dict)
    reference: float | None = None
    lower: float | None = None
    upper: float | None = None


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
    samples: list[Sample]
    fingerprints: dict[str, dict[str, Any]]


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


def load(path: Path) -> Report:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ReportError(f"{path}: cannot read report ({exc.strerror})") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno} "
                          f"({exc.msg}); the report is truncated or malformed") from exc
    return parse(raw, Path(path))


def parse(raw: Any, path: Path) -> Report:
    if not isinstance(raw, dict) or "session_info" not in raw or "runs" not in raw:
        raise ReportError(f"{path}: not a ReFrame run report (no session_info/runs)")
    info = raw["session_info"]
    version = str(info.get("data_version", ""))
    if version.split(".")[0] != SUPPORTED_MAJOR:
        raise ReportError(f"{path}: unsupported report data_version {version!r} "
                          f"(perfguard reads {SUPPORTED_MAJOR}.x)")
    uuid = info.get("uuid")
    if not uuid:
        raise ReportError(f"{path}: session_info has no uuid")
    testcases = []
    for run_no, run in enumerate(raw["runs"]):
        for case_no, case in enumerate(run.get("testcases", [])):
            where = f"{path}: runs[{run_no}].testcases[{case_no}]"
            testcases.append(_testcase(case, where))
    return Report(
        path=path, session_uuid=str(uuid), data_version=version,
        started=_time(info.get("time_start_unix"), info.get("time_start")) or _now(),
        finished=_time(info.get("time_end_unix"), info.get("time_end")),
        reframe_version=str(info.get("version", "")), cmdline=str(info.get("cmdline", "")),
        hostname=str(info.get("hostname", "")), user=str(info.get("user", "")),
        testcases=testcases,
    )


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _time(unix: Any, text: Any) -> datetime | None:
    if isinstance(unix, (int, float)) and math.isfinite(unix):
        return datetime.fromtimestamp(unix, timezone.utc)
    if isinstance(text, str) and text:
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _testcase(case: dict, where: str) -> TestCase:
    try:
        name = case["name"]
        unique = case.get("unique_name") or name
        system = case["system"]
        partition = case.get("partition") or system.split(":", 1)[-1]
    except (KeyError, TypeError) as exc:
        raise ReportError(f"{where}: missing field {exc}") from exc
    samples = _perf_samples(case, where) + _point_samples(case, where)
    nodelist = case.get("job_nodelist") or []
    return TestCase(
        check=name.split()[0].split("%")[0],
        unique_name=str(unique),
        hashcode=str(case.get("hashcode", "")),
        params=_params(case),
        system=system.split(":")[0],
        partition=str(partition).split(":")[-1],
        environ=str(case.get("environ", "")),
        result=str(case.get("result", "unknown")),
        run_index=int(case.get("run_index", 0) or 0),
        fail_phase=case.get("fail_phase"),
        fail_reason=case.get("fail_reason"),
        jobid=str(case["jobid"]) if case.get("jobid") not in (None, "") else None,
        nodelist=[str(n) for n in nodelist],
        job_exitcode=case.get("job_exitcode"),
        time_total=_finite_or_none(case.get("time_total")),
        started=_time(case.get("job_submit_time"), None),
        samples=samples,
        fingerprints=_fingerprints(case, where),
    )


def _params(case: dict) -> dict[str, Any]:
    """The check's parameter values, from ReFrame's display name ``Check %p1=v1 %p2=v2``."""
    params: dict[str, Any] = {}
    display = str(case.get("display_name") or "")
    for token in display.split(" %")[1:]:
        name, _, value = token.partition("=")
        params[name.strip()] = value.strip()
    return params


def _finite(value: Any, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ReportError(f"{where}: value {value!r} is not a number") from exc
    if not math.isfinite(number):
        raise ReportError(f"{where}: value {value!r} is not finite (NaN or infinity)")
    return number


def _finite_or_none(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _optional_bound(value: Any, where: str) -> float | None:
    return None if value is None else _finite(value, where)


def _perf_samples(case: dict, where: str) -> list[Sample]:
    """ReFrame perf variables: ``{'part:metric': [value, ref, lower, upper, unit, …]}``."""
    samples = []
    for key, entry in (case.get("perfvalues") or {}).items():
        metric = key.rsplit(":", 1)[-1]
        here = f"{where}.perfvalues[{key!r}]"
        if not isinstance(entry, (list, tuple)) or len(entry) < 5:
            raise ReportError(f"{here}: expected [value, ref, lower, upper, unit, ...]")
        value, ref, lower, upper, unit = entry[:5]
        if value is None:
            continue  # a perf variable that was never evaluated (test failed earlier)
        samples.append(Sample(
            metric=metric, value=_finite(value, here), unit=str(unit or ""),
            reference=_optional_bound(ref, here) if ref not in (0, None) else None,
            lower=_optional_bound(lower, here), upper=_optional_bound(upper, here),
        ))
    return samples


def _point_samples(case: dict, where: str) -> list[Sample]:
    """Every measured point the check listed (an OMB curve, a scaling sweep, ...)."""
    samples = []
    for index, entry in enumerate(case.get(SAMPLES_VARIABLE) or []):
        here = f"{where}.{SAMPLES_VARIABLE}[{index}]"
        if not isinstance(entry, dict) or "metric" not in entry or "value" not in entry:
            raise ReportError(f"{here}: expected an object with metric and value")
        point = entry.get("point") or {}
        if not isinstance(point, dict):
            raise ReportError(f"{here}: point must be an object")
        samples.append(Sample(metric=str(entry["metric"]), value=_finite(entry["value"], here),
                              unit=str(entry.get("unit", "")), point=point))
    return samples


def _fingerprints(case: dict, where: str) -> dict[str, dict[str, Any]]:
    raw = case.get(FINGERPRINT_VARIABLE) or {}
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ReportError(f"{where}.{FINGERPRINT_VARIABLE}: expected {{node: {{field: value}}}}")
    return raw
