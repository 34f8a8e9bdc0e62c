"""8 threads defining and first-instantiating classes at once: the cold path of the
per-class annotation cache (string annotations, forward references resolved lazily
on first instantiation) must give correct instances, no errors and no warnings."""

import threading
import warnings
from typing import Optional

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

import arrayfield as af

THREADS = 8
ROUNDS = 4

# Names the string annotations below resolve against (this module's globals).
_ANNOTATION_NAMES = (Optional, Array, Float, Int, np)


def define_class(name: str, annotations: dict) -> type:
    return type(
        name,
        (af.ArrayModule,),
        {"__annotations__": annotations, "__module__": __name__},
    )


def check_instance(module, offset: int) -> None:
    assert module.x.dtype == jnp.float32 and not module.x.weak_type
    assert module.x.tolist() == [offset, offset + 0.5, offset + 1]
    assert module.n.dtype == jnp.int32 and int(module.n) == offset
    assert type(module.data) is np.ndarray and module.data.dtype == np.float64
    assert module.later.dtype == jnp.int32 and module.later.tolist() == [offset, 1]
    assert module.maybe is None
    assert module.flag is offset  # `int` annotation: untouched


def work(round_: int, thread: int, shared: type, barrier: threading.Barrier) -> None:
    alias = f"Later_{round_}_{thread}"
    child_name = f"Child_{round_}_{thread}"
    barrier.wait()  # all threads start defining at the same moment
    # `later` names an alias that does not exist yet: resolved on first use.
    Own = define_class(
        f"Own_{round_}_{thread}",
        {
            "x": "Float[Array, '3']",
            "n": "Int[Array, '']",
            "data": "np.ndarray",
            "later": alias,
            "maybe": f"Optional[{alias}]",
            "flag": "int",
        },
    )
    Parent = define_class(
        f"Parent_{round_}_{thread}", {"child": child_name, "scale": "Float[Array, '']"}
    )
    globals()[alias] = Int[Array, "2"]
    Child = define_class(child_name, {"value": "Float[Array, '']"})
    globals()[child_name] = Child

    fields = dict(x=[thread, thread + 0.5, thread + 1], n=thread, data=1.5)
    own = Own(**fields, later=[thread, True], maybe=None, flag=thread)
    check_instance(own, thread)
    from_shared = shared(**fields, later=[thread, True], maybe=None, flag=thread)
    check_instance(from_shared, thread)
    parent = Parent(child=Child(value=thread), scale=2)
    assert parent.child.value.dtype == jnp.float32 and int(parent.child.value) == thread
    assert parent.scale.dtype == jnp.float32 and float(parent.scale) == 2.0


def test_threads_define_and_first_instantiate_classes_at_once():
    for round_ in range(ROUNDS):
        # One class all threads instantiate first at the same moment; its forward
        # reference is defined only after the class, as in a real module.
        alias = f"SharedLater_{round_}"
        Shared = define_class(
            f"Shared_{round_}",
            {
                "x": "Float[Array, '3']",
                "n": "Int[Array, '']",
                "data": "np.ndarray",
                "later": alias,
                "maybe": f"Optional[{alias}]",
                "flag": "int",
            },
        )
        globals()[alias] = Int[Array, "2"]
        barrier = threading.Barrier(THREADS)
        errors: list[BaseException] = []

        def run(thread, round_=round_, shared=Shared, barrier=barrier, errors=errors):
            try:
                work(round_, thread, shared, barrier)
            except BaseException as error:  # reported below, with its thread
                errors.append(error)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            threads = [
                threading.Thread(target=run, args=(i,), name=f"definer-{i}")
                for i in range(THREADS)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
            assert not any(thread.is_alive() for thread in threads)
        assert errors == []
        assert [str(w.message) for w in caught] == []
