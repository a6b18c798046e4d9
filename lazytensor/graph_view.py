"""lt.graph(): the pending DAG behind some tensors as a networkx.DiGraph, and its Graphviz DOT text."""
import networkx as nx

from .runtime.graph import walk


class LazyGraph(nx.DiGraph):
    """A networkx.DiGraph of graph nodes (keyed by node id) with op/shape/dtype/residency attributes."""

    def to_dot(self):
        """Graphviz DOT text: one box per node labelled with op, shape, dtype and residency."""
        lines = ["digraph lazytensor {", "  rankdir=TB;", "  node [shape=box, fontname=monospace];"]
        for nid, a in self.nodes(data=True):
            label = f"#{nid} {a['op']}\\n{a['shape']} {a['dtype']}\\n{a['residency']}"
            style = ', style=filled, fillcolor="#e8f0ff"' if a["residency"] != "pending" else ""
            lines.append(f'  n{nid} [label="{label}"{style}];')
        for src, dst in self.edges():
            lines.append(f"  n{src} -> n{dst};")
        lines.append("}")
        return "\n".join(lines) + "\n"


def graph(*tensors):
    """The DAG that realizing `tensors` would run: pending nodes and the realized values they read."""
    g = LazyGraph()
    for node in walk([t._node for t in tensors]):
        residency = "pending" if node.buffer is None else node.buffer.state.value
        g.add_node(node.id, op=node.op, shape=node.shape, dtype=str(node.dtype), residency=residency)
        for inp in node.inputs:
            g.add_edge(inp.id, node.id)
    return g
