"""docs/design.md "What each package may import", checked on the code: every `from recommender...` import of every
module (read with ast, nothing imported) must be allowed by the table below, which is the design's table as data."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = {"errors", "redaction", "credentials", "vocabulary", "files", "hardware", "install"}  # shared by every step

# package (or root module) -> what it may import: a package, or "package.module" for one module of it
ALLOWED: dict[str, set[str]] = {
    "redaction": set(),
    "errors": {"redaction"},
    "credentials": {"errors"},
    "vocabulary": set(),
    "install": set(),
    "files": {"errors"},
    "hardware": {"errors", "install"},
    "spec": SHARED,
    "candidates": SHARED | {"spec", "metrics"},
    "search": SHARED | {"spec", "candidates", "metrics"},
    "modelrepo": SHARED | {"spec", "candidates", "load.payload"},
    "targets": SHARED | {"candidates", "modelrepo.model_source", "spec.llamacpp"},
    "correctness": SHARED | {"spec", "modelrepo", "load.payload", "load.prompts", "targets.wire"},
    "load": SHARED
    | {"spec", "metrics", "modelrepo.model_source", "targets.kserve", "targets.lifeline", "targets.invoke_target"}
    | {"targets.wire"}  # what a good answer looks like (pure: kserve.py and the standard library only)
    | {"targets.kserve_binary"},  # the binary tensor extension (standard library only)
    "metrics": {"errors", "vocabulary", "hardware"},  # plus `spec` as a type only (TYPE_CHECKING), for from_spec
    "measurement": SHARED | {"spec", "search", "targets", "load", "metrics"},
    "store": SHARED | {"spec", "candidates", "metrics"},
    "decide": SHARED | {"spec", "candidates", "correctness", "metrics", "load.shapes"},
    "doctor": SHARED
    | {"spec", "modelrepo.model_source", "targets", "store.database", "load.runner", "load.null_endpoint"},
    "job": SHARED
    | {"spec", "candidates", "search", "modelrepo", "targets", "correctness", "load", "metrics"}
    | {"measurement", "store", "decide", "review", "doctor", "tracking", "importers"},
    "review": SHARED | {"spec", "candidates", "metrics", "decide", "store"},
    "report": SHARED | {"spec", "candidates", "metrics", "modelrepo", "targets", "decide"},
    "importers": SHARED | {"spec", "candidates", "decide", "metrics"},
    "tracking": SHARED | {"spec", "candidates", "metrics", "decide", "report"},
    "dashboard": SHARED
    | {"spec", "candidates", "metrics", "decide", "review", "report", "store.database", "store.results"},
}
TYPE_ONLY = {"metrics": {"spec"}}
# the Locust child: what `load/locustfile.py` may pull in, module by module (its gevent world stays small)
CHILD_PACKAGES = ("load", "metrics", "spec", "files")  # with every module in them
CHILD_MODULES = {
    "errors",
    "redaction",
    "credentials",
    "vocabulary",
    "modelrepo",
    "modelrepo.model_source",
    "targets",
    "targets.kserve",
}
CHILD_MODULES |= {"targets.lifeline", "targets.invoke_target", "targets.wire", "targets.kserve_binary"}


def _modules() -> dict[str, Path]:
    """Dotted names (without `recommender.`; dashboard modules as `dashboard...`) of every module checked."""
    found = {}
    for top in ("recommender", "dashboard"):
        for path in (ROOT / top).rglob("*.py"):
            if "migrations" in path.parts or "templates" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[1:] if top == "recommender" else parts)
            found["" if name == "__init__" else name.removesuffix(".__init__")] = path
    return found


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module without `recommender.`, only under TYPE_CHECKING) for each recommender import; a name
    imported from a package (`from recommender.targets import kserve`) counts as the module it names."""
    tree = ast.parse(path.read_text())
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "recommender":
            module = node.module.removeprefix("recommender").lstrip(".")
            for alias in node.names:
                target = f"{module}.{alias.name}" if module and _is_module(f"{module}.{alias.name}") else module
                target = target or alias.name
                found.append((target, id(node) in type_only))
    return found


def _is_module(dotted: str) -> bool:
    base = ROOT / "recommender" / Path(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _owner(name: str) -> str:
    """The package (or root module) a module belongs to: `metrics.levels` -> metrics, `dashboard.views.x` ->
    dashboard."""
    return name.split(".")[0]


def _allowed(owner: str, target: str, type_only: bool) -> bool:
    if _owner(target) == owner:
        return True
    rules = ALLOWED[owner]
    if type_only and _owner(target) in TYPE_ONLY.get(owner, set()):
        return True
    return _owner(target) in rules or any(target == r or target.startswith(r + ".") for r in rules if "." in r)


@pytest.mark.parametrize("owner", sorted(ALLOWED))
def test_every_import_follows_the_design_table(owner: str) -> None:
    broken = [
        f"{name} imports recommender.{target}"
        for name, path in _modules().items()
        if _owner(name) == owner
        for target, type_only in _imports(path)
        if not _allowed(owner, target, type_only)
    ]
    assert broken == []


def test_every_package_is_in_the_table() -> None:
    owners = {_owner(name) for name in _modules()} - {"", "__main__", "cli"}  # the CLI may import anything
    assert owners <= set(ALLOWED), owners - set(ALLOWED)


def test_the_locust_child_reaches_only_what_it_may() -> None:
    """Everything `load/locustfile.py` imports, transitively, stays within the child's allowance."""
    modules, seen, todo = _modules(), set(), ["load.locustfile"]
    while todo:
        name = todo.pop()
        if name in seen or name not in modules:
            continue
        seen.add(name)
        todo.extend(target for target, type_only in _imports(modules[name]) if not type_only)
    outside = sorted(n for n in seen if n not in CHILD_MODULES and _owner(n) not in CHILD_PACKAGES)
    assert outside == []
    assert "targets.local" not in seen and "store.results" not in seen  # the rule has teeth: neither is reachable


def test_the_check_catches_a_forbidden_import(tmp_path: Path) -> None:
    """The checker itself: decide importing the store is reported."""
    source = tmp_path / "bad.py"
    source.write_text("from recommender.store.results import ResultStore\nfrom recommender.metrics import levels\n")
    verdicts = [_allowed("decide", target, type_only) for target, type_only in _imports(source)]
    assert verdicts == [False, True]
