"""ArrayModule on JAX's own distribution: 8 simulated CPU devices, NamedSharding.

The scenario runs in a fresh Python process (tests/sharding_scenario.py): the
device-count flag must be in the environment before JAX initialises.
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from helpers import python

SCENARIO = Path(__file__).with_name("sharding_scenario.py")


@pytest.fixture(scope="module")
def report() -> dict:
    flags = " ".join(
        [os.environ.get("XLA_FLAGS", ""), "--xla_force_host_platform_device_count=8"]
    ).strip()
    result = python(SCENARIO, env={"XLA_FLAGS": flags})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_scenario_sees_eight_devices(report):
    assert report["device_count"] == 8


def test_arrays_converted_from_scalars_are_strong_and_uncommitted(report):
    assert report["converted_dtypes"] == ["float32", "float32", "float32"]
    assert report["converted_weak"] == [False, False, False]
    assert report["committed_before_placement"] == [False, False, False]


def test_device_put_places_parameters_replicated_and_data_batch_sharded(report):
    assert report["placed_committed"] == [True, True, True]
    assert report["data_devices"] == 8
    assert report["data_shard_shapes"] == [[8, 3]]  # 64 rows over 8 devices
    assert report["trained_replicated"] == [True, True, True]


def test_sharded_training_traces_once(report):
    assert report["sharded_traces"] == 1
    assert report["single_traces"] == 1


def test_sharded_training_matches_the_single_device_run(report):
    single, sharded = report["single_losses"], report["sharded_losses"]
    assert len(single) == len(sharded) == 5
    assert single[-1] < single[0]  # it trained
    np.testing.assert_allclose(sharded, single, rtol=1e-5, atol=1e-6)
    for mine, reference in zip(
        report["sharded_leaves"], report["single_leaves"], strict=True
    ):
        np.testing.assert_allclose(mine, reference, rtol=1e-5, atol=1e-6)
