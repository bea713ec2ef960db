"""The CLI fuzzer: hypothesis argument lists for every ``twin`` subcommand (tests/cli_fuzz.py) never
end in a traceback; each exits 0-3, a failure's last stderr line is twin's one-line error or
argparse's usage error, and each finishes in under 10 s (after one untimed warm-up run that pays for
the imports and compilation every later run shares).

The CI budget is small: ``TWIN_FUZZ_EXAMPLES`` examples (default 60). A longer run, each example in
its own process: ``python benchmarks/fuzz_cli.py`` (BENCHMARKS.md).
"""
from __future__ import annotations

import os

from cli_fuzz import arguments, problem, run_one, sandbox, warm_up
from hypothesis import HealthCheck, given, settings

EXAMPLES = int(os.environ.get("TWIN_FUZZ_EXAMPLES", "60"))


def test_no_argument_list_ends_in_a_traceback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outputs, copies and refits land here, never in the checkout
    where = sandbox(tmp_path)
    warm_up()  # the first run imports and compiles what every later one uses: untimed

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(arguments(where))
    def one(argv):
        rc, out, err, seconds = run_one(argv)
        what = problem(rc, out, err, seconds)
        assert what is None, f"twin {argv!r}: {what} (exit {rc})\n{err[-3000:]}"

    one()
