"""One reader of a path into a JSON document, for the JSON a serving process is given: the
flags of a `vllm serve` command line (probes.target.argv) and MindIE's config.json
(probes.target.serving). Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_STEP = re.compile(r"([^.\[\]#]+)((?:\[[0-9]{1,6}\])*)", re.ASCII)
_INDEX = re.compile(r"\[([0-9]{1,6})\]", re.ASCII)


def at_path(document: Any, path: str) -> Any:
    """The value at a dotted path of a JSON object (`torchair_graph_config.enabled`), lists
    indexed as `[N]` (`BackendConfig.ModelDeployConfig.ModelConfig[0].worldSize`); a path
    ending in `#count` gives the number of items of the list or object there
    (`BackendConfig.npuDeviceIds[0]#count`). None when the path leads nowhere."""
    path, counted, _ = path.partition("#count")
    node = document
    for part in path.split("."):
        step = _STEP.fullmatch(part)
        if step is None:
            return None
        node = node.get(step.group(1)) if isinstance(node, Mapping) else None
        for index in _INDEX.findall(step.group(2)):
            node = node[int(index)] if isinstance(node, list) and int(index) < len(node) \
                else None
    if counted:
        return len(node) if isinstance(node, (list, Mapping)) else None
    return node
