"""A weighted union-find decoder on a detector error model's matching graph: the Python reference of
the runtime's C ``qrt_fn_decode_uf_surface3`` (twin/runtime/c/qrt_functions.c on the generated
graph twin/runtime/c/qrt_uf_graph.h, :mod:`twin.qec.gen_uf`), which the compiled core, the shm
consumer and the cuda backend's persistent kernel serve as function 19 ``decode_uf_surface3``.

Algorithm (Delfosse & Nickerson, "Almost-linear time decoding algorithm for topological codes",
Quantum 5, 595 (2021), doi:10.22331/q-2021-12-02-595; weighted growth as in Huang, Newman & Brown,
"Fault-tolerant weighted union-find decoding on the toric code", Phys. Rev. A 102, 012419 (2020),
doi:10.1103/PhysRevA.102.012419), made deterministic so the C gives the same bits:

- Graph (:func:`from_dem_graph`): nodes are the D detectors and one boundary node (index D); the
  decomposed model's components (:class:`twin.qec.dem_graph.DemGraph`) between the same two nodes
  merge into one edge as independent errors, p = p1 (1 - p2) + p2 (1 - p1), which stands for its most
  likely component's observables; its length is the integer ``max(1, round(2 ln((1 - p) / p)))``
  (half-units of the log-likelihood weight). Edges are sorted by (u, v); the adjacency lists each
  node's edges in edge order.
- Growth: every detection event is an odd cluster. Each step, every node (index order) whose
  cluster is odd and does not touch the boundary adds 1 to the support of each of its edges not
  yet full (an edge between two such nodes grows by 2); then every edge that became full this step
  (edge order) joins its two clusters (parity: XOR; touching the boundary: OR; the boundary node
  touches it). Growth stops when no cluster is odd and free of the boundary (or nothing grew).
- Peeling: a spanning forest of the full edges by breadth-first search, first from the boundary
  node, then from every unvisited detector in index order that has a detection event; each node's
  full edges in adjacency order. Nodes are peeled in reverse visit order: a node holding an event
  puts its tree edge into the correction (XOR of its observables) and moves the event to its parent.

Shapes: D detectors (<= 255 here), E edges, K observables (<= 32). Units: lengths are integers
(no time). The correction is the XOR of the peeled edges' observables, observable k in bit k.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_NODES = 256  # the C keeps per-node state in uint8 indices of fixed arrays


@dataclass(frozen=True)
class UfGraph:
    """A union-find decoding graph.

    n_detectors D; n_observables K; u, v: int64 (E,) edge ends (u < v; v == D is the boundary);
    length: int64 (E,) >= 1; obs: uint32 (E,) observable mask; adj_start: int64 (D + 2,) CSR offsets
    into adj_edge: int64 (2E,), each node's edges in edge order (the boundary node D included).
    """

    n_detectors: int
    n_observables: int
    u: np.ndarray
    v: np.ndarray
    length: np.ndarray
    obs: np.ndarray
    adj_start: np.ndarray
    adj_edge: np.ndarray

    def same_as(self, other: "UfGraph") -> bool:
        """Whether ``other`` is the same graph (every field equal)."""
        return (self.n_detectors, self.n_observables) == (other.n_detectors, other.n_observables) and all(
            np.array_equal(getattr(self, k), getattr(other, k)) for k in ("u", "v", "length", "obs", "adj_start",
                                                                          "adj_edge"))

    @property
    def n_edges(self) -> int:
        """E."""
        return len(self.u)

    def decode_one(self, events: list[int] | np.ndarray) -> int:
        """The correction (observable mask, int) for the detection events (0/1 per detector, length D)."""
        D = self.n_detectors
        defect = [int(bool(x)) for x in events] + [0]
        if len(defect) != D + 1:
            raise ValueError(f"union-find graph has {D} detectors, got {len(defect) - 1} events")
        full = self._grow(defect)
        return self._peel(defect, full)

    def _grow(self, defect: list[int]) -> list[bool]:
        """Grow the clusters of ``defect`` (list of D + 1 ints): per edge, whether it is full."""
        D, u, v, L = self.n_detectors, self.u.tolist(), self.v.tolist(), self.length.tolist()
        adj_start, adj_edge = self.adj_start.tolist(), self.adj_edge.tolist()
        parent = list(range(D + 1))
        odd = defect[:]
        bnd = [0] * D + [1]
        support = [0] * len(u)

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        while True:
            active = [n for n in range(D) if odd[find(n)] and not bnd[find(n)]]
            if not active:
                break
            grown, changed = [], False
            for n in active:
                for e in adj_edge[adj_start[n]:adj_start[n + 1]]:
                    if support[e] < L[e]:
                        support[e] += 1
                        changed = True
                        if support[e] == L[e]:
                            grown.append(e)
            if not changed:
                break  # nothing left to grow (an event no edge leaves)
            for e in sorted(grown):
                a, b = find(u[e]), find(v[e])
                if a != b:
                    if b < a:
                        a, b = b, a
                    parent[b] = a
                    odd[a] ^= odd[b]
                    bnd[a] |= bnd[b]
        return [s == ln for s, ln in zip(support, L)]

    def _peel(self, defect: list[int], full: list[bool]) -> int:
        """Peel the forest of the ``full`` edges; returns the correction mask."""
        D, u, v = self.n_detectors, self.u.tolist(), self.v.tolist()
        adj_start, adj_edge, obs = self.adj_start.tolist(), self.adj_edge.tolist(), self.obs.tolist()
        seen = [False] * (D + 1)
        tree_edge = [-1] * (D + 1)
        order: list[int] = []
        for root in [D] + [n for n in range(D) if defect[n]]:
            if seen[root]:
                continue
            seen[root] = True
            order.append(root)
            head = len(order) - 1
            while head < len(order):
                n = order[head]
                head += 1
                for e in adj_edge[adj_start[n]:adj_start[n + 1]]:
                    m = v[e] if u[e] == n else u[e]
                    if full[e] and not seen[m]:
                        seen[m] = True
                        tree_edge[m] = e
                        order.append(m)
        corr = 0
        for n in reversed(order):
            e = tree_edge[n]
            if e >= 0 and defect[n]:
                corr ^= obs[e]
                defect[n] = 0
                m = v[e] if u[e] == n else u[e]
                defect[m] ^= 1
        return corr


def from_dem_graph(graph) -> UfGraph:
    """The union-find graph of a :class:`twin.qec.dem_graph.DemGraph` (module docstring). Raises
    ValueError for more than ``MAX_NODES - 1`` detectors or 32 observables."""
    D, K = graph.n_detectors, graph.n_observables
    if D + 1 > MAX_NODES or K > 32:
        raise ValueError(f"union-find: {D} detectors and {K} observables; at most {MAX_NODES - 1} and 32")
    merged: dict[tuple[int, int], tuple[float, float, int]] = {}  # (u, v) -> (p, best p, its obs)
    for (a, b), o, p in zip(graph.dets.tolist(), graph.obs, graph.p.tolist()):
        a, b = (D if a < 0 else a), (D if b < 0 else b)
        key = (min(a, b), max(a, b))
        mask = sum(1 << k for k in range(K) if o[k])
        if key not in merged:
            merged[key] = (p, p, mask)
            continue
        q, best, bm = merged[key]
        merged[key] = (q * (1 - p) + p * (1 - q), *((p, mask) if p > best else (best, bm)))
    keys = sorted(merged)
    length = [max(1, int(round(2 * np.log((1 - merged[k][0]) / merged[k][0])))) if merged[k][0] < 0.5 else 1
              for k in keys]
    u = np.array([k[0] for k in keys], np.int64)
    v = np.array([k[1] for k in keys], np.int64)
    adj: list[list[int]] = [[] for _ in range(D + 1)]
    for e, (a, b) in enumerate(keys):
        adj[a].append(e)
        adj[b].append(e)
    adj_start = np.cumsum([0] + [len(x) for x in adj]).astype(np.int64)
    adj_edge = np.array([e for x in adj for e in x], np.int64)
    return UfGraph(D, K, u, v, np.array(length, np.int64), np.array([merged[k][2] for k in keys], np.uint32),
                   adj_start, adj_edge)


def for_circuit(circuit) -> UfGraph:
    """The union-find graph of a ``stim.Circuit`` (its decomposed detector error model)."""
    from twin.qec.dem_graph import DemGraph
    return from_dem_graph(DemGraph(circuit))


STANDARD = {
    # name: (code, distance, rounds, p): the graph the runtime's C decoder is generated from
    "surface3": ("surface", 3, 3, 1e-3),
}


def standard_graph(name: str) -> UfGraph:
    """A bundled graph (``surface3``: rotated surface code memory-Z, distance 3, 3 rounds, circuit
    noise p = 1e-3), built on first use and cached. Raises KeyError for another name."""
    if name not in _CACHE:
        from twin.qec.codes import memory_circuit
        code, d, r, p = STANDARD[name]
        _CACHE[name] = for_circuit(memory_circuit(code, d, r, p))
    return _CACHE[name]


_CACHE: dict[str, UfGraph] = {}


def decode_payload(graph: UfGraph, payload: bytes) -> bytes:
    """The decoder as a served function (the contract's syndrome layout, as
    :func:`twin.qec.lookup.decode_payload`): syndrome bytes in, ceil(K/8) correction bytes out.
    Raises ValueError when the payload is shorter than the syndrome."""
    from twin.qec.lookup import syndrome_bytes
    nb = syndrome_bytes(graph.n_detectors)
    if len(payload) < nb:
        raise ValueError(f"union_find: payload of {len(payload)} bytes, the syndrome needs {nb}")
    bits = np.unpackbits(np.frombuffer(bytes(payload[:nb]), np.uint8), bitorder="little", count=graph.n_detectors)
    return graph.decode_one(bits).to_bytes(syndrome_bytes(graph.n_observables), "little")
