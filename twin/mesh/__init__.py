"""Meshes ("from pairs to a mesh"): several control systems, link cards and consumers; routes on the
networkx graph; contention where flows share a link or a consumer (:mod:`twin.mesh.engine`)."""
