"""``python -m twin``: the ``twin`` command (:func:`twin.launch.main`: SIGINT and SIGTERM handled from
its first instruction, then :func:`twin.commands.main`)."""
import sys

from twin.launch import main

sys.exit(main())
