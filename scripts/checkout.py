"""hermes_lcm for the scripts in this folder: the installed package, else this checkout loaded as
the package (its modules use relative imports, so it cannot be imported from a path directly)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_package() -> ModuleType:
    try:
        import hermes_lcm

        return hermes_lcm
    except ImportError:
        root = Path(__file__).resolve().parents[1]
        spec = importlib.util.spec_from_file_location(
            "hermes_lcm", root / "__init__.py", submodule_search_locations=[str(root)]
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["hermes_lcm"] = module
        spec.loader.exec_module(module)
        return module
