"""The shape of the code: one package per pipeline stage, no import cycle and no module importing
from a layer above its own, counting the imports that only name types for annotations (a reader
following an annotation must never climb), and no argparse namespace outside the parser's edge."""
import ast
import subprocess
import sys

from conftest import ROOT

# Lower layers never import higher ones; a module may import its own layer and those below. The
# configuration sits at the bottom, above only what it is made of: the modules that read it import it.
LAYERS = [
    ("utils.errors", 0), ("utils.fileio", 0), ("utils.compat", 0), ("utils.safepickle", 0), ("utils.stop", 0),
    ("utils.children", 0),
    ("utils.clock", 0), ("utils.launch", 0), ("utils.provenance", 0),
    ("utils.grad_comm", 0), ("utils.console", 0), ("models.families", 0), ("models.spec", 0), ("utils.modes", 0),
    ("utils.spellings", 0), ("utils.settings", 0),
    ("utils.config", 1),
    ("models", 2), ("utils.data", 2), ("utils.measure", 2),
    ("utils.training", 3),
    ("utils.explain", 4), ("utils.numerics", 4),
    ("utils.results", 5),
    ("utils.app", 7), ("utils.report", 7), ("utils.advice", 7),
]
STAGES = ("utils/data", "utils/training", "utils/measure", "utils/explain", "utils/numerics", "utils/results")


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules():
    return {module_name(path): path for folder in ("utils", "models") for path in (ROOT / folder).rglob("*.py")}


def annotation_only(tree):
    """The nodes under `if TYPE_CHECKING:`: they never run, so what they import only names types."""
    return {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
            and getattr(block.test, "id", getattr(block.test, "attr", None)) == "TYPE_CHECKING"
            for statement in block.body for node in ast.walk(statement)}


def imports_of(path, modules, annotations=False):
    """Project modules that `path` imports at run time anywhere in it (top level or inside a
    function), and with `annotations` also those it imports only to name types."""
    found = set()
    tree = ast.parse(path.read_text())
    skipped = set() if annotations else annotation_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            if not any(name in modules for name in names):  # `from utils import compat` imports utils.compat
                names.append(node.module)
        else:
            continue
        found |= {name for name in names if name in modules}
    return found


def layer(module):
    matches = [(prefix, number) for prefix, number in LAYERS if module == prefix or module.startswith(prefix + ".")]
    assert matches, f"{module} belongs to no layer: add it to LAYERS"
    return max(matches, key=lambda match: len(match[0]))[1]


def dependency_order(annotations=False):
    """Modules in an order where each comes after everything it imports (with `annotations`, for
    types too); fails on a cycle."""
    modules = project_modules()
    graph = {name: imports_of(path, modules, annotations) - {name} for name, path in modules.items()}
    order, done, visiting = [], set(), []

    def visit(name):
        if name in done:
            return
        assert name not in visiting, "import cycle: " + " -> ".join(visiting[visiting.index(name):] + [name])
        visiting.append(name)
        for dependency in sorted(graph[name]):
            visit(dependency)
        visiting.pop()
        done.add(name)
        order.append(name)

    for name in sorted(graph):
        visit(name)
    return order, graph


def test_no_module_imports_from_a_layer_above_it_not_even_for_a_type():
    _, graph = dependency_order(annotations=True)  # a cycle fails here, annotation-only imports counted
    upward = [f"{name} imports {dependency}" for name, dependencies in graph.items() for dependency in dependencies
              if layer(dependency) > layer(name)]
    assert not upward, upward


def test_every_module_imports_in_dependency_order_in_a_fresh_interpreter():
    order, _ = dependency_order()
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    result = subprocess.run([sys.executable, "-c", code, *order], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr


def test_no_argparse_namespace_in_the_pipeline():
    """The parser's namespace ends in utils/config.py, which turns it into typed sections."""
    offenders = [f"{path.relative_to(ROOT)}:{number}" for stage in STAGES for path in (ROOT / stage).rglob("*.py")
                 for number, line in enumerate(path.read_text().splitlines(), 1) if "args." in line]
    assert not offenders, offenders


def test_no_function_is_longer_than_fifty_lines():
    """Long functions hide what they do."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    too_long = []
    for path in (ROOT / name for name in listed):
        if not path.exists():  # deleted in the working tree
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > 50:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    assert not too_long


def unannotated(function, method):
    """The parameters of `function` (a method's self or cls aside) and its return that carry no
    annotation; __init__ may leave its return out."""
    arguments = function.args
    parameters = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
    static = any(isinstance(decorator, ast.Name) and decorator.id == "staticmethod"
                 for decorator in function.decorator_list)
    if method and not static and parameters and parameters[0].arg in ("self", "cls"):
        parameters = parameters[1:]
    parameters += [extra for extra in (arguments.vararg, arguments.kwarg) if extra]
    missing = [parameter.arg for parameter in parameters if parameter.annotation is None]
    return missing + (["return"] if function.returns is None and function.name != "__init__" else [])


def test_every_seam_says_its_types():
    """Every public function and method of the project's modules names what flows in and out,
    so that a reader of a call from another package sees its types."""
    found = []
    for path in sorted([ROOT / "main.py", *(ROOT / "utils").rglob("*.py"), *(ROOT / "models").rglob("*.py")]):
        for node in ast.parse(path.read_text()).body:
            members = []
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                members.append((node, False, node.name))
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                members += [(inner, True, f"{node.name}.{inner.name}") for inner in node.body
                            if isinstance(inner, ast.FunctionDef)
                            and (not inner.name.startswith("_") or inner.name.startswith("__"))]
            for function, method, name in members:
                missing = unannotated(function, method)
                if missing:
                    found.append(f"{path.relative_to(ROOT)}:{function.lineno} {name} ({', '.join(missing)})")
    assert not found, found
