"""``python -m twin``: the ``twin`` command (:func:`twin.commands.main`)."""
import sys

from twin.commands import main

sys.exit(main())
