"""Every exception and warning class arrayfield raises, and the small formatters
every message shares.

The classes live together so that each floor of the package can raise any of
them without importing the floor that issues it (the diagnostics, say).
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import warnings
from typing import Any

import equinox
import jax
import jax.numpy as jnp
import numpy as np


class ConversionError(TypeError, ValueError):
    """A field value could not become the array its annotation asks for.

    Raised when the value is not array-like at all (a string, an arbitrary object, a
    ragged list) or when converting it would change it (`1.5` into an `Int` field,
    `2**40` into a 32-bit field, `1+2j` into a `Float` field, `2` into a `Bool`
    field). It subclasses both `TypeError` and `ValueError`, so existing
    `except TypeError` / `except ValueError` handlers keep working.

    The message always names `ClassName.field`, the annotation and the value.

    !!! example

        ```python
        from jaxtyping import Array, Int
        import arrayfield as af

        class Counter(af.ArrayModule):
            count: Int[Array, ""]

        try:
            Counter(count=1.5)
        except af.ConversionError as error:
            assert isinstance(error, TypeError) and isinstance(error, ValueError)
            message = str(error)
        assert message.startswith("Counter.count: cannot store 1.5 (float) in")
        assert message.endswith("converting it to int32 would change its value to 1.")
        ```
    """

    __module__ = "arrayfield"  # tracebacks and reprs show the public name


class AnnotationWarning(UserWarning):
    """An annotation could not be resolved, so its field is left unconverted.

    Typical cause: `from __future__ import annotations` together with a name that
    is only imported under `if TYPE_CHECKING:`. The warning is issued when a value
    arrives that conversion would have changed (a number, a NumPy value, a list),
    at the line that built the instance; a field such as `config: Config` whose
    type is only imported for type checkers stays silent.

    !!! example

        ```python
        from __future__ import annotations

        import warnings
        from typing import TYPE_CHECKING

        import arrayfield as af

        if TYPE_CHECKING:
            from jaxtyping import Array, Float

        class Star(af.ArrayModule):
            flux: Float[Array, ""]  # only a string at runtime, naming nothing

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            star = Star(flux=1.0)
        assert caught[0].category is af.AnnotationWarning
        assert star.flux == 1.0 and isinstance(star.flux, float)  # not converted
        ```
    """

    __module__ = "arrayfield"  # tracebacks and reprs show the public name


class ValidationError(TypeError):
    """A stored array does not match its field's annotation (with `check=True`).

    The message names `ClassName.field`, the annotation, the actual shape and
    dtype, and, when a named dimension disagrees, the field that fixed its size.

    !!! example

        ```python
        from jaxtyping import Array, Float
        import arrayfield as af

        class Segment(af.ArrayModule, check=True):
            start: Float[Array, "2"]
            end: Float[Array, "2"]

        try:
            Segment(start=[0.0, 0.0], end=[1.0, 1.0, 1.0])
        except af.ValidationError as error:
            assert str(error).startswith("Segment.end: expected Float[Array, '2']")
        else:
            raise AssertionError("expected an af.ValidationError")
        ```
    """

    __module__ = "arrayfield"  # tracebacks and reprs show the public name


class AuditError(AssertionError):
    """Raised by `af.assert_clean`; the message is the audit report.

    !!! example

        ```python
        import arrayfield as af

        try:
            af.assert_clean({"step": 1}, name="state")
        except af.AuditError as error:
            assert 'state["step"] = 1' in str(error)
        ```
    """

    __module__ = "arrayfield"  # tracebacks and reprs show the public name


class RetraceWarning(UserWarning):
    """A jitted function was traced (and compiled) again; the message says why.

    Issued by `af.explain_retraces` on every trace after a function's first one. It
    names the function and, for each argument leaf that differs from the closest
    earlier call that traced, its path, old and new value, the reason and a fix.
    Turn it into an error in tests with `pytest -W error::arrayfield.RetraceWarning`
    (plain `python -W` cannot name a warning class outside the standard library).

    !!! example

        ```python
        import warnings
        import equinox as eqx
        import jax.numpy as jnp
        import arrayfield as af

        step = af.explain_retraces(eqx.filter_jit(lambda x, n: x * n))
        with warnings.catch_warnings():
            warnings.simplefilter("error", af.RetraceWarning)
            step(jnp.ones(2), 2)
            try:
                step(jnp.ones(2), 3)  # a new Python int: traced again
            except af.RetraceWarning as warning:
                assert "n: 2 -> 3" in str(warning)
        ```
    """

    __module__ = "arrayfield"  # tracebacks and reprs show the public name


class RetraceNote(UserWarning):
    """A jitted function was traced again and nothing needs to change.

    Issued by `af.explain_retraces` where a trace compiled nothing and nothing
    the user could rewrite would have saved it: only static fields' numbers
    changed (an origin), and `af.filter_jit(..., share_numbers=True)` ran the
    program compiled for its family. Not a subclass of `RetraceWarning`, so
    `pytest -W error::arrayfield.RetraceWarning` fails on what needs a fix and
    lets these through; silence them with `-W ignore::arrayfield.RetraceNote`.

    !!! example

        ```python
        import warnings

        import equinox as eqx
        import jax.numpy as jnp

        import arrayfield as af


        class Box(eqx.Module):
            start: int = eqx.field(static=True)  # a slice start: stays an int


        @af.filter_jit(share_numbers=True)
        def window(box, x):
            return x[box.start : box.start + 2]


        x = jnp.arange(8.0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with af.explain_retraces():
                for start in (0, 1, 2):
                    window(Box(start), x)
        kinds = {type(w.message) for w in caught}
        assert kinds == {af.RetraceNote}  # shared: nothing to fix
        ```
    """

    __module__ = "arrayfield"  # tracebacks and reprs show the public name


def versions() -> str:
    """The JAX and equinox a `CompatibilityWarning` is about."""
    return f"jax {jax.__version__} with equinox {equinox.__version__}"


class CompatibilityWarning(UserWarning):
    """A capability of arrayfield's is off because this JAX or equinox moved
    something it relies on.

    Given once per capability and process, naming the JAX and equinox versions
    and what the check found. What is off falls back to what equinox does (no
    value changes): `share_numbers=True` compiles each field's program alone,
    for example. Upgrading arrayfield, or pinning the JAX named, brings it back.

    !!! example

        ```python
        import warnings

        import jax.numpy as jnp

        import arrayfield as af

        with warnings.catch_warnings():
            # A test run that should fail, not slow down, when an upgrade turns
            # a capability off:
            warnings.simplefilter("error", af.CompatibilityWarning)

            @af.filter_jit(share_numbers=True)
            def scale(x, factor):
                return x * factor

            assert scale(jnp.ones(2), 3.0).tolist() == [3.0, 3.0]
        ```
    """

    __module__ = "arrayfield"  # tracebacks and reprs show the public name


class TraceReuseWarning(RetraceWarning):
    """A call reused a trace compiled for arguments of another type.

    `1`, `1.0` and `True` compare equal and hash alike, so `eqx.filter_jit` finds
    the trace compiled for one of them when called with another: no retrace
    happens, and the computation runs with the dtypes of the earlier call. A
    subclass of `RetraceWarning`, so one warning filter covers both.

    !!! example

        ```python
        import warnings
        import equinox as eqx
        import jax.numpy as jnp
        import arrayfield as af

        step = af.explain_retraces(eqx.filter_jit(lambda x, k: x * k))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step(jnp.ones(2, dtype=jnp.int32), 1)
            out = step(jnp.ones(2, dtype=jnp.int32), 1.5 - 0.5)  # 1.0 == 1
        assert out.dtype == jnp.int32  # the int trace ran
        assert caught[0].category is af.TraceReuseWarning
        ```
    """

    __module__ = "arrayfield"  # tracebacks and reprs show the public name


_MODULE_PREFIXES = re.compile(
    r"\b(?:jaxlib\._jax|jax\.jaxlib\._jax|jaxlib\.xla_extension|jax\._src\.basearray"
    r"|jaxtyping|typing)\."
)


_NDARRAY = re.compile(r"(?:\bnumpy\.|(?<![.\w]))ndarray\b")


def format_annotation(annotation: Any) -> str:
    """`Float[Array, 'n'] | None`, not `typing.Optional[jaxtyping.Float[...]]`."""
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type) and annotation.__module__ == "builtins":
        return annotation.__qualname__
    if annotation is np.ndarray:
        return "np.ndarray"
    # Legacy code annotates with the functions; their module is the whole point.
    if annotation is np.array:
        return "np.array"
    if annotation is jnp.array:
        return "jnp.array"
    text = getattr(annotation, "__name__", None)
    if text is None or getattr(annotation, "__origin__", None) is not None:
        text = repr(annotation)
    text = _MODULE_PREFIXES.sub("", text)
    return _NDARRAY.sub("np.ndarray", text)


def did_you_mean(name: str, candidates: Any) -> str:
    """` Did you mean 'check'?`, or nothing when no candidate is close."""
    close = difflib.get_close_matches(name, sorted(candidates), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def class_name(cls: type) -> str:
    """`Outer.Inner` for messages, without the `function.<locals>.` of local classes."""
    return cls.__qualname__.rsplit("<locals>.", 1)[-1]


def short_repr(value: Any, limit: int = 60) -> str:
    """A one-line repr: arrays as `f32[3]`, everything else truncated to `limit`."""
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is not None and shape is not None and not np.isscalar(value):
        return f"{dtype_shorthand(dtype)}[{','.join(map(str, shape))}]"
    text = " ".join(repr(value).split())  # multi-line reprs (a WCS) on one line
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


# Arrays up to this many elements are shown with their values in error messages.
_SHOWN_ELEMENTS = 8


def value_repr(value: Any) -> str:
    """`short_repr`, with the values of a small concrete array: `f32[3] [0.5, 1.0,
    2.0]` (a traced array, or a larger one, shows its dtype and shape alone)."""
    text = short_repr(value)
    size = getattr(value, "size", None)
    if (
        isinstance(value, (np.ndarray, jax.Array))
        and isinstance(size, int)
        and size <= _SHOWN_ELEMENTS
    ):
        try:
            values = np.asarray(value).tolist()
        except Exception:  # a tracer, a deleted (donated) buffer, a key array
            return text
        return f"{text} {values}"
    return text


def type_label(value: Any) -> str:
    """What a value is, for messages: `JAX array` rather than JAX's private class
    name, `NumPy array`, else the type's name."""
    if isinstance(value, jax.Array):
        return "JAX array"
    if isinstance(value, np.ndarray):
        return "NumPy array"
    return type(value).__name__


_KIND_LETTER = {"f": "f", "i": "i", "u": "u", "c": "c", "b": "bool"}


def dtype_shorthand(dtype: Any) -> str:
    """`float32` -> `f32`, `bool` -> `bool`; what `eqx.tree_pformat` writes."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        return str(dtype)
    letter = _KIND_LETTER.get(dtype.kind)
    if letter is None or dtype.name == "bfloat16":
        return dtype.name
    if letter == "bool":
        return "bool"
    return f"{letter}{dtype.itemsize * 8}"


def _package_dir(module: Any) -> str:
    return os.path.dirname(module.__file__) + os.sep


EQUINOX_DIR = _package_dir(equinox)
JAX_DIR = _package_dir(jax)
LIBRARY_DIRS = (os.path.dirname(__file__) + os.sep, EQUINOX_DIR, JAX_DIR)


def warn_in_user_code(warning: Warning) -> None:
    """Issue `warning` at the innermost calling frame outside arrayfield/equinox/jax.

    Our warnings fire deep inside equinox's class machinery or a jit trace; the line
    worth showing is the user's.
    """
    frame = sys._getframe(1)
    stacklevel = 2  # 1 would be this function, 2 its caller
    while frame.f_back is not None and frame.f_code.co_filename.startswith(
        LIBRARY_DIRS
    ):
        frame = frame.f_back
        stacklevel += 1
    warnings.warn(warning, stacklevel=stacklevel)
