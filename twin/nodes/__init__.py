"""The node interface: node kinds declare their parameters, ports and statistics, and each
(kind, model) pair registers one factory in the model registry (:mod:`twin.nodes.registry`)."""
