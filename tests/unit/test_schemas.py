"""Every site file's schema (perfguard/schemas/) knows exactly the settings its loader
takes, and the shipped site files pass their schemas: a key the code reads but the
schema refuses, or one the schema lets through that the code never reads, fails here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from perfguard import paths
from perfguard.errors import UsageError
from perfguard.judge import findings, rules, sweep, thresholds
from perfguard.yamlfile import SCHEMAS_DIR, dump_yaml, load_yaml, schema_problems

ROOT = Path(__file__).resolve().parents[2]


def schema(name: str) -> dict:
    return yaml.safe_load((SCHEMAS_DIR / f"{name}.schema.yaml").read_text())


def fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_each_schema_names_what_its_loader_takes() -> None:
    verdict_rules = schema("verdict_rules")["properties"]
    assert set(verdict_rules["rules"]["items"]["properties"]) == \
        set(rules.SETTINGS) | {"check", "metric"}
    assert set(verdict_rules["findings"]["properties"]) == set(findings.SETTINGS)
    assert set(rules.SETTINGS) <= fields(rules.Rule)
    assert set(findings.SETTINGS) <= fields(findings.Policy)
    assert set(schema("sweep")["$defs"]["criteria"]["properties"]) == fields(sweep.Criteria)
    entry = schema("thresholds")["properties"]["thresholds"]["items"]
    assert set(entry["properties"]) == set(thresholds._YAML_KEYS)


@pytest.mark.parametrize("name, files", [
    ("verdict_rules", ["verdict_rules.yaml"]), ("sweep", ["sweep.yaml"]),
    ("mpi_flavours", ["mpi_flavours.yaml"]), ("thresholds", ["thresholds/local.yaml"]),
    ("topology", ["systems/ndr4x4.yaml", "systems/seedfdr.yaml"])])
def test_the_shipped_files_pass_their_schemas(name: str, files: list[str]) -> None:
    for file in files:
        assert schema_problems(load_yaml(paths.DEFAULTS_DIR / file, name), name) == []


def test_a_misspelt_flavour_knob_is_named_with_the_one_meant(tmp_path: Path) -> None:
    path = tmp_path / "mpi_flavours.yaml"
    path.write_text("mine:\n  hca: {X: '{hca}'}\n  gdr_on: {}\n  gdr_of: {}\n"
                    "  device_buffers: {}\n")
    with pytest.raises(UsageError) as error:
        load_yaml(path, "MPI flavours", schema="mpi_flavours")
    assert set(str(error.value).splitlines()) == {
        f"{path}: mine.gdr_of: unknown key (did you mean 'gdr_off'?)",
        f"{path}: mine: missing 'gdr_off'"}


def test_a_number_written_with_an_exponent_is_a_number(tmp_path: Path) -> None:
    """``alpha: 1e-3`` is 0.001 in YAML 1.2 and to an admin; PyYAML's YAML 1.1 made it
    the string "1e-3" and the rules file was refused."""
    path = tmp_path / "verdict_rules.yaml"
    path.write_text("findings:\n  alpha: 1e-3\nrules:\n  - metric: '*'\n    min_change: 5E-3\n"
                    "    k: 1.5e+0\n")
    data = load_yaml(path, "verdict rules", schema="verdict_rules")
    assert data == {"findings": {"alpha": 0.001},
                    "rules": [{"metric": "*", "min_change": 0.005, "k": 1.5}]}
    path.write_text("findings:\n  alpha: 1e-3x\n")
    with pytest.raises(UsageError, match="findings.alpha: '1e-3x' is not of type 'number'"):
        load_yaml(path, "verdict rules", schema="verdict_rules")


@pytest.mark.parametrize("written", ["3e1", "30.0"])
def test_a_count_is_a_whole_number_written_as_one(tmp_path: Path, written: str) -> None:
    """JSON Schema's integer takes 30.0 (and 3e1, read as YAML 1.2): a rule's window
    reached the judge as a float and broke it (slice indices must be integers)."""
    path = tmp_path / "verdict_rules.yaml"
    path.write_text(f"rules:\n  - metric: '*'\n    window: {written}\n")
    with pytest.raises(UsageError, match=r"rules\[0\]\.window: 30\.0 is not of type 'integer'"):
        load_yaml(path, "verdict rules", schema="verdict_rules")


def test_what_perfguard_writes_reads_back_as_written(tmp_path: Path) -> None:
    """A string that YAML 1.2 reads as a number (a parameter value ``1e3``, a host
    ``1e100``) is quoted where perfguard writes YAML (a thresholds export, a detected
    topology): unquoted, the export came back as the parameter 1000.0."""
    document = {"params": {"size": "1e3", "host": "1e100"}, "reference": 1000.0, "n": 3}
    path = tmp_path / "written.yaml"
    path.write_text(dump_yaml(document))
    assert load_yaml(path, "written") == document


def test_the_verdicts_page_tables_every_setting_of_the_rule_and_fits_its_size() -> None:
    """docs/verdicts.md's settings table is every setting a site has of the verdict rule,
    no more: the line rule's and the findings' (the rules file's schema), the run's floor,
    the CPU-wait bars the checks take as variables; twelve at most, the page 30 kB at most
    (issue 67: 32 settings and a page of 129.5 kB were more than an admin could read)."""
    page = (ROOT / "docs" / "verdicts.md").read_text()
    table = page.split("## Settings", 1)[1].split("\n## ", 1)[0]
    tabled = {name for row in table.splitlines() if row.startswith("| `")
              for name in re.findall(r"`(\w+)`", row.split(" | ")[0])}
    checks = (ROOT / "reframe_tests" / "common" / "base.py").read_text()
    bars = set(re.findall(r"^\s+(max_\w*cpu_wait) = variable\(", checks, re.M))
    sets = (set(rules.SETTINGS) | set(findings.SETTINGS)
            | set(schema("verdict_rules")["properties"]["run"]["properties"]) | bars)
    assert bars == {"max_cpu_wait", "max_job_cpu_wait"}
    assert tabled == sets
    assert len(sets) <= 12
    assert len(page.encode()) <= 30_000
