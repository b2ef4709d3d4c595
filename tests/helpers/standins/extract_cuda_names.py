"""Record what cuda-python's runtime module defines, from the installed package itself.

    pip install 'cuda-python==13.*'    # in a scratch environment; it imports without a GPU
    python tests/helpers/standins/extract_cuda_names.py \
        > tests/helpers/standins/names/cuda-bindings-13.x.y.json

Writes every `cuda*` function with its parameter names and the members of the enums the CUDA
stand-in defines. The stand-in (`cuda_runtime.py`) is checked against these lists.
"""

from __future__ import annotations

import inspect
import json
import sys

ENUMS = ("cudaError_t", "cudaMemcpyKind")


def main() -> None:
    import cuda.bindings
    from cuda.bindings import runtime

    functions = {}
    for name in dir(runtime):
        value = getattr(runtime, name)
        if name.startswith("cuda") and callable(value) and not isinstance(value, type):
            try:
                functions[name] = list(inspect.signature(value).parameters)
            except (TypeError, ValueError):
                functions[name] = []
    enums = {name: sorted(getattr(runtime, name).__members__) for name in ENUMS}
    types = sorted(
        name
        for name in dir(runtime)
        if name.startswith("cuda") and isinstance(getattr(runtime, name), type)
    )
    table = {
        "source": {"package": "cuda-bindings", "version": cuda.bindings.__version__},
        "functions": functions,
        "enums": enums,
        "types": types,
    }
    json.dump(table, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
