"""Scenario files: a runnable what-if study (YAML). The schema (:mod:`twin.scenario.schema`, pure
pydantic), the topology graph (:mod:`twin.scenario.graph`), the loader
(:mod:`twin.scenario.load`: files, parameter sets, the model registry's checks) and the compile step
(:mod:`twin.scenario.compile`: a loaded scenario -> the :class:`~twin.engine.topology.Topology` to run)."""
from twin.scenario.load import LoadedScenario, check_not_a_scenario, load_scenario
from twin.scenario.schema import (
                                  MODELS_AVAILABLE,
                                  Bridge,
                                  Flow,
                                  Link,
                                  Node,
                                  Scenario,
                                  Traffic,
                                  _duration,
                                  traffic_params,
)

__all__ = ["LoadedScenario", "check_not_a_scenario", "load_scenario", "MODELS_AVAILABLE", "Bridge", "Flow", "Link",
           "Node", "Scenario", "Traffic", "_duration", "traffic_params"]
