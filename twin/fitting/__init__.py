"""Fitting the parameter sets to measurements and holding them to runs they were not fitted on: the
card path's fit (:mod:`twin.fitting.fit`), the RoCE path's (:mod:`twin.fitting.roce`), a fit from
live run folders (:mod:`twin.fitting.live`, :mod:`twin.fitting.live_runs`), the validation against
held-out runs (:mod:`twin.fitting.validate`) and the fit's report (:mod:`twin.fitting.report`). Each
simulates loops through the compile step and the engines, so it sits above the scenarios; the
parameter sets it fits stay in :mod:`twin.calibration`, below them."""
