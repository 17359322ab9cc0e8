"""The core: the WebAssembly module, its runtime backends, the typed binding, the instance pool.

- `runtime/`: one small protocol over a module instance, with a wasmtime and a Pyodide backend.
- `binding.py`: `Core`, one instance's exports as typed, atomic methods (the only place that
  knows export names and status codes).
- `pool.py`: `CorePool` and `CoreOptions`: how many instances, their limits, placement of new
  matchers, replacement of dead instances.
"""

from .binding import Core as Core
from .pool import CoreOptions as CoreOptions
from .pool import CorePool as CorePool
from .pool import configure as configure
from .pool import default_pool as default_pool

__all__ = ["Core", "CoreOptions", "CorePool", "configure", "default_pool"]
