"""The facts of one file, read with `ast`: which names it binds (imports,
aliases such as `Base = eqx.Module`), each class's bases as written, and how
its methods use and assign `self.<attr>`. `_index` resolves them across files.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._bindings import bind, nested_statements, statements_in
from ._syntax import dotted_name

# Functions whose positional arguments are shapes, sizes or axes, by position
# (None: every positional argument, as for `x.reshape(2, 3)`).
_SHAPE_ARGS: dict[str, tuple[int, ...] | None] = {
    "reshape": None,
    "range": None,
    **dict.fromkeys(("zeros", "ones", "empty", "full", "identity"), (0,)),
    **dict.fromkeys(("eye", "tri"), (0, 1)),
    # The array first, then its new shape or repetitions.
    **dict.fromkeys(("broadcast_to", "tile", "resize"), (1,)),
    "arange": (0, 1, 2),
    "linspace": (2,),
    # jnp.fft: the size of the transform and its axes.
    "fftfreq": (0,),
    "rfftfreq": (0,),
    **dict.fromkeys(("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"), (1, 2)),
    **dict.fromkeys(("fft2", "ifft2", "rfft2", "irfft2"), (1, 2)),
    **dict.fromkeys(("fftn", "ifftn", "rfftn", "irfftn"), (1, 2)),
    # lax: the sizes of a slice are static, its start indices are not.
    "dynamic_slice": (2,),
    "dynamic_slice_in_dim": (2, 3),
}
# Keywords that take shapes, sizes or axes, whatever the function; and any
# keyword whose name ends so (`fft_shape=`, `kernel_size=`, `batch_axes=`).
_SHAPE_KEYWORDS = frozenset(
    {"shape", "s", "size", "num", "length", "n", "axis", "axes", "new_sizes"}
)
_SHAPE_KEYWORD_ENDINGS = ("shape", "_size", "_sizes", "_axis", "_axes", "_dims")
# Registering a class as a pytree node: its instances are flattened, not hashed.
_REGISTRATIONS = frozenset(
    {"register_pytree_node", "register_pytree_node_class", "register_dataclass"}
    | {"register_pytree_with_keys", "register_pytree_with_keys_class"}
)


# Builtins that need a concrete Python value (not `len`: a length is static).
_CONCRETE_BUILTINS = frozenset({"int", "bool", "range", "slice"})

# Kinds of use, and kinds of value assigned, recorded per attribute.
SHAPE = "shape"  # a shape, size, axis or slice bound
CONTROL = "control"  # an `if`/`while`/`assert` test, `int(...)`, `bool(...)`
PARAM = "param"  # a parameter of the method that assigns it
LAMBDA = "lambda"
PARTIAL = "partial"
SHAPE_VALUE = "shape_value"  # the result of a helper that returns a list of ints
STRING = "string"  # an f-string or a string built from parameters
OBJECT = "object"  # an instance of a class that is not a Module
BUILT = "built"  # an array the class's own code builds: `jnp.asarray(x, float)`

# Calls that make an array (for equinox, NumPy's count) of what they are given.
ARRAY_BUILDERS = frozenset(
    f"{module}.{name}"
    for module in ("jax.numpy", "numpy")
    for name in ("asarray", "array", "float32", "float64", "int32", "int64")
)


class ClassFacts:
    """What one class statement says, before bases are resolved."""

    def __init__(self, qualname: str, bases: list[str], line: int = 0) -> None:
        self.qualname = qualname  # `Outer.Inner`, as arrayfield's errors name it
        self.bases = bases  # as written (`base.Module`)
        self.line = line  # of the `class` statement
        self.has_init = False
        # An `__eq__` or a decorator (a dataclass): not hashed by identity.
        self.value_eq = False
        # Attribute -> kind (`SHAPE`, `PARAM`...) -> first line using or assigning so.
        self.uses: dict[str, dict[str, int]] = {}
        self.assigns: dict[str, dict[str, int]] = {}
        self.objects: dict[str, str] = {}  # attribute -> class instantiated into it
        # Attribute -> the function whose result is assigned to it, and the line.
        self.calls: dict[str, tuple[str, int]] = {}
        # Annotated names -> (line, column), 1-based, columns in characters.
        self.fields: dict[str, tuple[int, int]] = {}
        self.class_vars: set[str] = set()  # annotated `ClassVar`


class FileFacts:
    """What one file says: its module name, bindings and classes."""

    def __init__(self, path: str, module: str, is_package: bool) -> None:
        self.path = path
        self.module = module
        self.is_package = is_package
        # Local name -> qualified name imported, at any depth; `bindings`, the
        # same without relative imports (`ImportMap.bindings`).
        self.imports: dict[str, str] = {}
        self.bindings: dict[str, str] = {}
        self.aliases: dict[str, str] = {}  # module-level `Name = dotted.name`
        self.classes: dict[str, ClassFacts] = {}
        # First line of an `eqx.tree_at(lambda m: m.x, ...)` of an attribute, and
        # of registering a class (as written) as a pytree node.
        self.tree_at: dict[str, int] = {}
        self.registered: dict[str, int] = {}
        self.int_list_functions: set[str] = set()  # `_returns_int_list`
        # Every name written before `=` or as a string: it may give a field a value.
        self.set_names: frozenset[str] = frozenset()
        self.positional: dict[str, float] = {}  # `_positional_counts`
        self.star_imports: list[str] = []  # absolute names of modules
        # The first line that may bind module names at run time, which no
        # reading of the text resolves (`globals().update`, `__getattr__`).
        self.dynamic_export: int | None = None

    def imports_equinox(self) -> bool:
        return any(
            target == "equinox" or target.startswith("equinox.")
            for target in self.imports.values()
        )


def module_name(path: Path) -> tuple[str, bool]:
    """The dotted module name of a file, and whether it is an `__init__.py`."""
    path = resolved_path(path)
    is_package = path.name == "__init__.py"
    package = package_of(path.parent)
    parts = package if is_package else (*package, path.stem)
    return ".".join(parts) or path.stem, is_package


def resolved_path(path: Path) -> Path:
    """`path.resolve()`, resolving a directory once for all its files."""
    return path.resolve() if path.is_symlink() else _resolved(path.parent) / path.name


def forget_directories() -> None:
    """Clear what `module_name` knows: the tree or working directory may change."""
    _resolved.cache_clear()
    package_of.cache_clear()


@functools.cache
def _resolved(directory: Path) -> Path:
    return directory.resolve()


@functools.cache
def package_of(directory: Path) -> tuple[str, ...]:
    """The packages a resolved directory is in, outermost first (cached)."""
    if directory.parent == directory or not (directory / "__init__.py").is_file():
        return ()
    return (*package_of(directory.parent), directory.name)


def _self_attr(node: ast.expr, self_name: str) -> str | None:
    """`f` for `self.f`, `self.f[...]`, `tuple(self.f)`, `*self.f`."""
    if isinstance(node, ast.Starred | ast.Subscript):
        return _self_attr(node.value, self_name)
    if (
        isinstance(node, ast.Call)
        and dotted_name(node.func) in ("tuple", "list", "int")
        and len(node.args) == 1
    ):
        return _self_attr(node.args[0], self_name)
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == self_name
    ):
        return node.attr
    return None


def _bare_attrs_in(node: ast.expr, self_name: str) -> list[str]:
    """The fields whose value an expression needs as a Python value (`self.f + 1`;
    not `self.f.shape` nor `self.f is None`, static for an array too)."""
    if isinstance(node, ast.BoolOp):
        parts = node.values
    elif isinstance(node, ast.UnaryOp):
        parts = [node.operand]
    elif isinstance(node, ast.BinOp):
        parts = [node.left, node.right]
    elif isinstance(node, ast.Compare):
        identity_only = all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops)
        parts = [] if identity_only else [node.left, *node.comparators]
    else:
        attr = _self_attr(node, self_name)
        return [] if attr is None else [attr]
    return [attr for part in parts for attr in _bare_attrs_in(part, self_name)]


# Node classes whose children no reader visits (a name, a literal), and the
# fields that hold none (`Load`, `Store`, operators): a third of a method's
# nodes, never entered.
_LEAVES = frozenset({ast.Name, ast.Constant})
_NO_NODES = frozenset({"ctx", "op", "ops"})
# Node class -> its fields that may hold nodes, found once per class.
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


class _Visitor(ast.NodeVisitor):
    """`ast.NodeVisitor` looking up each visit method once per node class (it was
    a quarter of the index's time), never entering `_LEAVES`."""

    _methods: dict[type, Callable[[Any, Any], None]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._methods = {}

    def visit(self, node: ast.AST) -> None:
        method = self._methods.get(type(node))
        if method is None:
            name = "visit_" + type(node).__name__
            method = getattr(type(self), name, type(self).generic_visit)
            self._methods[type(node)] = method
        method(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        fields = _CHILD_FIELDS.get(type(node))
        if fields is None:
            fields = tuple(f for f in node._fields if f not in _NO_NODES)
            _CHILD_FIELDS[type(node)] = fields
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if type(item) not in _LEAVES and isinstance(item, ast.AST):
                        self.visit(item)
            elif type(value) not in _LEAVES and isinstance(value, ast.AST):
                self.visit(value)


class _MethodReader(_Visitor):
    """Uses and assignments of `self.<attr>` in one method."""

    def __init__(self, facts: ClassFacts, self_name: str, params: set[str]) -> None:
        self.facts = facts
        self.self_name = self_name
        self.params = params

    def _use(self, node: ast.expr, kind: str, line: int) -> None:
        attr = _self_attr(node, self.self_name)
        if attr is not None:
            self.facts.uses.setdefault(attr, {}).setdefault(kind, line)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        return  # a nested class has its own `self`

    def visit_Call(self, node: ast.Call) -> None:
        name = dotted_name(node.func) or ""
        last = name.rpartition(".")[2]
        if last in _SHAPE_ARGS:
            positions = _SHAPE_ARGS[last]
            for index, arg in enumerate(node.args):
                if positions is None or index in positions:
                    # `(self.size,)`: a shape spelled element by element.
                    elements = (
                        arg.elts if isinstance(arg, ast.Tuple | ast.List) else [arg]
                    )
                    for element in elements:
                        self._use(element, SHAPE, node.lineno)
        if name in _CONCRETE_BUILTINS and node.args:
            kind = SHAPE if name in ("range", "slice") else CONTROL
            self._use(node.args[0], kind, node.lineno)
        for keyword in node.keywords:
            if keyword.arg is not None and (
                keyword.arg in _SHAPE_KEYWORDS
                or keyword.arg.endswith(_SHAPE_KEYWORD_ENDINGS)
            ):
                self._use(keyword.value, SHAPE, node.lineno)
        self.generic_visit(node)

    def visit_Slice(self, node: ast.Slice) -> None:
        for bound in (node.lower, node.upper, node.step):
            if bound is not None:
                for attr in _bare_attrs_in(bound, self.self_name):
                    self.facts.uses.setdefault(attr, {}).setdefault(SHAPE, bound.lineno)
        self.generic_visit(node)

    def _visit_test(self, node: ast.If | ast.While | ast.IfExp | ast.Assert) -> None:
        for attr in _bare_attrs_in(node.test, self.self_name):
            self.facts.uses.setdefault(attr, {}).setdefault(CONTROL, node.test.lineno)
        self.generic_visit(node)

    visit_If = visit_While = visit_IfExp = visit_Assert = _visit_test

    def _value_kind(self, value: ast.expr, called: str | None) -> str | None:
        if isinstance(value, ast.Name) and value.id in self.params:
            return PARAM
        if isinstance(value, ast.Lambda):
            return LAMBDA
        if isinstance(value, ast.JoinedStr) or (
            isinstance(value, ast.BinOp)
            and any(
                isinstance(side, ast.Constant) and isinstance(side.value, str)
                for side in (value.left, value.right)
            )
        ):
            return STRING
        last = (called or "").rpartition(".")[2]
        if last == "partial":
            return PARTIAL
        return OBJECT if last[:1].isupper() else None

    def _assign(self, target: ast.expr, value: ast.expr, line: int) -> None:
        if not (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == self.self_name
        ):
            return
        called = dotted_name(value.func) if isinstance(value, ast.Call) else None
        kind = self._value_kind(value, called)
        if kind is not None:
            self.facts.assigns.setdefault(target.attr, {}).setdefault(kind, line)
        if kind == OBJECT and called is not None:
            self.facts.objects.setdefault(target.attr, called)
        elif kind is None and called is not None:
            self.facts.calls.setdefault(target.attr, (called, line))

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._assign(target, node.value, node.lineno)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assign(node.target, node.value, node.lineno)
        self.generic_visit(node)


def _is_int(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def _says_int_list(annotation: ast.expr | None) -> bool:
    """`list[int]`, `tuple[int, ...]`, `List[int]`, `Sequence[int]`."""
    if not isinstance(annotation, ast.Subscript):
        return False
    items = annotation.slice
    elements = items.elts if isinstance(items, ast.Tuple) else [items]
    return (
        bool(elements)
        and dotted_name(elements[0]) == "int"
        and all(
            isinstance(element, ast.Constant) or dotted_name(element) == "int"
            for element in elements
        )
    )


def _returns_int_list(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether every `return` gives a display of int literals, or of anything in
    a function whose annotation or name (`padded_size`) says it is a shape."""
    returns = [
        node.value
        for node in statements_in(function.body, into_definitions=False)
        if isinstance(node, ast.Return) and node.value is not None
    ]
    if not returns or not all(
        isinstance(value, ast.List | ast.Tuple | ast.ListComp) for value in returns
    ):
        return False
    if all(
        isinstance(value, ast.List | ast.Tuple)
        and value.elts
        and all(map(_is_int, value.elts))
        for value in returns
    ):
        return True
    named = any(word in function.name.lower() for word in ("shape", "size"))
    return named or _says_int_list(function.returns)


def _resolve_relative(module: str, is_package: bool, level: int, name: str) -> str:
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, name] if name else parts)


class _FileReader(_Visitor):
    def __init__(self, facts: FileFacts, lines: list[bytes], scan_calls: bool) -> None:
        self.facts = facts
        self.lines = lines
        self.scopes: list[str | None] = []
        # Without `tree_at` or `register_` in the file, no call matters here
        # (methods have their own reader): statements alone are walked.
        self.scan_calls = scan_calls

    def generic_visit(self, node: ast.AST) -> None:
        if self.scan_calls:
            super().generic_visit(node)
            return
        for child in nested_statements(node):
            self.visit(child)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        module = None
        if isinstance(node, ast.ImportFrom) and node.level:
            module = _resolve_relative(
                self.facts.module, self.facts.is_package, node.level, node.module or ""
            )
        bind(node, self.facts.imports, module)
        bind(node, self.facts.bindings)
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            star = module if module is not None else node.module
            if star and not self.scopes:
                self.facts.star_imports.append(star)

    visit_ImportFrom = visit_Import

    def visit_Assign(self, node: ast.Assign) -> None:
        if not self.scopes and len(node.targets) == 1:
            target, value = node.targets[0], dotted_name(node.value)
            if isinstance(target, ast.Name) and value is not None:
                self.facts.aliases[target.id] = value
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        called = dotted_name(node.func) or ""
        if called.rpartition(".")[2] in _REGISTRATIONS and node.args:
            registered = dotted_name(node.args[0])
            if registered is not None:
                self.facts.registered.setdefault(registered, node.lineno)
        if called.endswith("tree_at") and node.args:
            where = node.args[0]
            if isinstance(where, ast.Lambda) and where.args.args:
                param = where.args.args[0].arg
                for sub in ast.walk(where.body):
                    if (
                        isinstance(sub, ast.Attribute)
                        and param in (dotted_name(sub) or "").split(".")[:1]
                    ):
                        self.facts.tree_at.setdefault(sub.attr, node.lineno)
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if not self.scopes and _returns_int_list(node):
            self.facts.int_list_functions.add(node.name)
        self.scopes.append(None)
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        outer = self.scopes[-1] if self.scopes else None
        qualname = node.name if outer is None else f"{outer}.{node.name}"
        # `Parent[int]`: a generic class subscripted is still `Parent`.
        written = [b.value if isinstance(b, ast.Subscript) else b for b in node.bases]
        bases = [n for n in map(dotted_name, written) if n]
        facts = ClassFacts(qualname, bases, node.lineno)
        facts.value_eq = bool(node.decorator_list)
        self.facts.classes.setdefault(qualname, facts)
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call):
                decorator = decorator.func
            if (dotted_name(decorator) or "").rpartition(".")[2] in _REGISTRATIONS:
                self.facts.registered.setdefault(qualname, node.lineno)
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(
                statement.target, ast.Name
            ):
                self._field(facts, statement.target, statement.annotation)
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                facts.has_init |= statement.name == "__init__"
                facts.value_eq |= statement.name == "__eq__"
                arguments = statement.args
                positional = [*arguments.posonlyargs, *arguments.args]
                if positional:
                    params = {a.arg for a in [*positional[1:], *arguments.kwonlyargs]}
                    reader = _MethodReader(facts, positional[0].arg, params)
                    for inner in statement.body:
                        reader.visit(inner)
        self.scopes.append(qualname)
        self.generic_visit(node)
        self.scopes.pop()

    def _field(self, facts: ClassFacts, target: ast.Name, annotation: ast.expr) -> None:
        # ast counts columns in UTF-8 bytes; editors count characters, from 1.
        prefix = self.lines[target.lineno - 1][: target.col_offset]
        column = len(prefix.decode("utf-8", errors="replace")) + 1
        facts.fields[target.id] = (target.lineno, column)
        if isinstance(annotation, ast.Subscript):
            annotation = annotation.value
        if (dotted_name(annotation) or "").endswith("ClassVar"):
            facts.class_vars.add(target.id)


def read_file(path: str, source: bytes, tree: ast.Module) -> FileFacts:
    """The facts of one file, from its text and its parse."""
    module, is_package = module_name(Path(path))
    facts = FileFacts(path, module, is_package)
    scan_calls = b"tree_at" in source or b"register_" in source
    _FileReader(facts, source.splitlines(), scan_calls).visit(tree)
    facts.set_names = frozenset(
        [
            name[::-1].decode("ascii")
            for name in _SET_NAME_REVERSED.findall(source[::-1])
        ]
        + [
            name.decode("ascii")
            for pattern in _STRING_NAMES
            for name in pattern.findall(source)
        ]
    )
    facts.positional = _positional_counts(source)
    dynamic = _DYNAMIC_EXPORT.search(source)
    if dynamic is not None:
        facts.dynamic_export = source.count(b"\n", 0, dynamic.start()) + 1
    return facts


# Module names bound at run time: `globals().update(...)`, `globals()[name] =`,
# `setattr(sys.modules[__name__], ...)`, a module-level `__getattr__` (lazy
# exports, PEP 562: defined, or assigned as lazy_loader's `attach` does). Read
# off the bytes: only a base that the text does not resolve asks for it.
_DYNAMIC_EXPORT = re.compile(
    rb"globals\(\)\s*(?:\.\s*update\b|\[)"
    rb"|setattr\(\s*sys\.modules\b"
    rb"|^def __getattr__\("
    rb"|^__getattr__\b[^\n=]*=",  # __getattr__, __dir__, __all__ = lazy.attach(...)
    re.MULTILINE,
)


# What may give a field a value, read off the bytes (C speed, every file): a
# name before `=` or an augmented `+=` (not `==`, `<=`), or a name as a whole
# string. Too many names is safe: a field named here is never called a constant.
# Each pattern starts with one literal byte, which `re` finds at memchr speed
# (a lookbehind or a choice of bytes first tries every byte, 4x to 10x
# slower): so names before `=`, and callees before `(`, are searched for in
# the reversed source.
_SET_NAME_REVERSED = re.compile(
    rb"=(?<!==)(?:[-+*/%&|^@:]|//|\*\*|<<|>>)?\s*(\w*[A-Za-z_])(?!\w)"
)
_STRING_NAMES = (re.compile(rb'"([A-Za-z_]\w*)"'), re.compile(rb"'([A-Za-z_]\w*)'"))
INFINITE = float("inf")
# A call whose positional arguments may fill a Module's fields: a class (a
# capitalised name), `cls(...)`, `super().__init__(...)`, `type(self)(...)`.
_CALL_REVERSED = re.compile(rb"\(\s*(?:(\w*[A-Z]|slc|__tini__)(?!\w)|(\)))")
# `class ` or `def ` right before a match: a definition, not a call.
_DEFINITION = re.compile(rb"\b(?:class|def)\s+$")
_QUOTES = frozenset(b"\"'")
_PUNCTUATION = re.compile(rb"[\"'()\[\]{},]")
# The rest of a string after its opening quote (a backslash escapes a byte).
_STRING_REST = {
    quote: re.compile(rb"(?:[^%c\\]|\\.)*%c" % (quote, quote), re.DOTALL)
    for quote in b"\"'"
}
_KEYWORD = re.compile(rb"[A-Za-z_]\w*\s*=(?!=)")
_OPEN = frozenset(b"([{")
_CLOSE = frozenset(b")]}")


def _positional_counts(source: bytes) -> dict[str, float]:
    """Callee -> the most positional arguments a call passes (`INFINITE` with
    `*args`), for classes, `cls`, `__init__` and `()` (`type(self)(...)`)."""
    counts: dict[str, float] = {}
    size = len(source)
    for match in _CALL_REVERSED.finditer(source[::-1]):
        start = size - match.end()  # where the callee starts in `source`
        if _DEFINITION.search(source, max(0, start - 12), start):
            continue  # `class Name(Base):`, `def __init__(self, ...)`: no call
        name = match.group(1)
        callee = "()" if name is None else name[::-1].decode("ascii")
        count = _count_positional(source, size - match.start())
        if count > counts.get(callee, 0):
            counts[callee] = count
    return counts


def _count_positional(source: bytes, start: int) -> float:
    """Positional arguments of the call whose `(` ends at `start` (a comma in a
    string counts one more: more is safe)."""
    depth, count, argument = 0, 0.0, start
    i, search = start, _PUNCTUATION.search
    while (found := search(source, i)) is not None:
        i = found.start()
        c = source[i]
        if c in _QUOTES:
            end = _STRING_REST[c].match(source, i + 1)
            if end is None:
                break
            i = end.end()
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            if depth == 0:
                return count + _argument_count(source[argument:i])
            depth -= 1
        elif depth == 0:  # a comma between arguments
            count += _argument_count(source[argument:i])
            argument = i + 1
        i += 1
    return INFINITE  # unbalanced: count everything


def _argument_count(text: bytes) -> float:
    """0 for nothing or a keyword, 1 for a positional argument, INFINITE for `*args`."""
    text = text.strip()
    if text.startswith(b"*"):
        return INFINITE
    return 0.0 if not text or _KEYWORD.match(text) else 1.0
