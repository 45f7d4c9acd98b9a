"""Hypothesis settings for the bad-input fuzzers.

The `ci` profile (the default) keeps the whole directory well under a minute;
`HYPOTHESIS_PROFILE=deep` runs many more examples for a local hunt. Examples
are drawn afresh each run; a failure prints the reproducing blob.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,  # file-system work has uneven timing; a hang is caught by pytest-timeout
    "print_blob": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
}
settings.register_profile("ci", max_examples=200, **_COMMON)
settings.register_profile("deep", max_examples=3000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
