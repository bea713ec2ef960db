"""The studies: what runs a scenario and collects its results, on the engine, the scenario and the
output layers (never imported by them; the commands import the studies).

- :mod:`twin.studies.run`: ``twin run`` on a loop scenario, every consumer's loop with the engine
  check and the comparison to measurements;
- :mod:`twin.studies.mesh`: a mesh scenario ("from pairs to a mesh": several control systems, link
  cards and consumers; routes on the networkx graph; contention where flows share a link or a
  consumer) as one topology on the event engine;
- :mod:`twin.studies.decode`: ``twin decode``, a decoder study from a scenario with a ``decode:`` block;
- :mod:`twin.studies.sweep`: ``twin sweep``, a what-if grid over scenario keys.

Each flow's entry in results.json is a record of :mod:`twin.output.summary`.
"""
