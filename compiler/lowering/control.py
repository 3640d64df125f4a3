"""Static lowering of If, Loop and Scan into device-side control tasks.

(What static mode can lower; the rest runs in dynamic mode.)
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..passes.control_flow import CONTROL_FLOW_OPS


def static_control_flow_problem(graph: Graph) -> str | None:
    """Why static mode cannot lower this graph's control flow, or None if it can."""
    for node in graph.walk():
        if node.op in CONTROL_FLOW_OPS and not node.domain:
            return f"node '{node.name}' ({node.op}): static lowering of control flow is not available"
    return None
