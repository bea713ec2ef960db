"""A machine of many logical qubits: patches on a layout, a program over them, decoder pools.

One QEC loop (the rest of the twin) is one patch's syndrome stream through a link card to a
decoder. A machine is hundreds to thousands of patches, each streaming a syndrome round every QEC
cycle; lattice-surgery merges that join two neighbouring patches into one decoding problem for
``d`` rounds; T-type gates whose next operation waits for the correction (the reaction time); and
decoders that are a shared, scheduled resource. The layers, top down:

- :mod:`twin.machine.schema`: the scenario's ``machine:`` section (pydantic, one-line refusals);
- :mod:`twin.machine.study`: a run of a machine scenario (the results document, the sweep over
  decoder counts);
- :mod:`twin.machine.engine`: the discrete-event model (integer picoseconds): window jobs, their
  dependencies and boundary exchanges, the pools, the program's timing;
- :mod:`twin.machine.pool`: decoders and their scheduling policies (static, least loaded,
  earliest deadline first), back-pressure, ensembles;
- :mod:`twin.machine.windows`: which jobs a patch's stream makes (streaming or parallel windows
  in time, spatial seams of merged patches), their sizes in detectors and bytes;
- :mod:`twin.machine.program`: the logical program over the layout (:mod:`twin.machine.layout`);
- :mod:`twin.machine.cost`: a job's decoding time, drawn from the measured per-call distribution;
- :mod:`twin.machine.ler`: the logical error rate of a step with the stalls as idle noise,
  decoded for real on a sample;
- :mod:`twin.machine.report`: the table and the figure.
"""
