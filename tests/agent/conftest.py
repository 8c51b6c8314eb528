"""Make ``import agent`` mean the package, not this test folder.

Under pytest's default ``prepend`` import mode ``tests/`` lands on ``sys.path``, and
``tests/agent`` (no ``__init__.py``) then shadows the editable-installed ``agent``
package as a namespace package. Put the repository root first and drop any shadow
imports. (The project-wide fix is ``pythonpath = ["."]`` in the pytest settings.)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if sys.path[:1] != [ROOT]:
    sys.path.insert(0, ROOT)
for _name in ("agent", "chain", "judge", "wallet"):
    _mod = sys.modules.get(_name)
    if _mod is not None and getattr(_mod, "__file__", None) is None:
        for _key in [k for k in sys.modules if k == _name or k.startswith(_name + ".")]:
            del sys.modules[_key]
