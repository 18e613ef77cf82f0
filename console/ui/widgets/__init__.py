"""The console's widgets. Each draws only what `show()` hands it; none runs I/O.

Import panels from their modules (`console.ui.widgets.npu`, ...): this package imports nothing,
so loading one widget does not load the others.
"""

from __future__ import annotations
