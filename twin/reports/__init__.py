"""What a study prints and writes: the run's tables and files (:mod:`twin.reports.run`), the decode
study's (:mod:`twin.reports.decode`, its latency figure :mod:`twin.reports.decode_figures`). Above
the studies (:mod:`twin.studies`), below the commands."""
