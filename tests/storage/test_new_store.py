"""A new SQLite store is a copy of an empty one made once per MLflow version
(harness.storage.new_store): MLflow opens the copy as its own, with its Default experiment
where a store made from scratch would have it."""
import sqlite3

import pytest
from mlflow.tracking import MlflowClient

from harness.storage.new_store import seed_new_store, template_path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "cache"


def _experiments(path):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT experiment_id, name, artifact_location FROM experiments").fetchall()


def test_first_store_makes_the_template_and_the_next_copies_it(cache, tmp_path):
    first, second = tmp_path / "a" / "mlflow.db", tmp_path / "b" / "mlflow.db"
    assert seed_new_store(f"sqlite:///{first}")
    template = template_path()
    assert template.parent == cache and template.exists()
    assert _experiments(template) == []          # no Default naming the scratch folder
    made = template.stat().st_mtime_ns
    assert seed_new_store(f"sqlite:///{second}")
    assert template.stat().st_mtime_ns == made
    client = MlflowClient(tracking_uri=f"sqlite:///{second}")
    default = client.get_experiment("0")
    assert default.name == "Default" and default.artifact_location == str(tmp_path / "mlruns" / "0")
    run = client.create_run(client.create_experiment("swizzlebench"))
    client.log_metric(run.info.run_id, "speedup", 1.25)
    assert client.get_run(run.info.run_id).data.metrics == {"speedup": 1.25}


def test_an_existing_store_is_left_alone(cache, tmp_path):
    path = tmp_path / "mlflow.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{path}")
    client.create_experiment("kept")
    assert not seed_new_store(f"sqlite:///{path}")
    assert [e.name for e in MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()] == ["kept", "Default"]


@pytest.mark.parametrize("uri", ["http://127.0.0.1:5000", "sqlite:///:memory:", "file:///tmp/mlruns"])
def test_other_stores_are_not_seeded(cache, uri):
    assert not seed_new_store(uri)
    assert not cache.exists()


def test_an_unwritable_cache_only_costs_time(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("SWIZZLEBENCH_CACHE", str(blocker))
    path = tmp_path / "mlflow.db"
    assert not seed_new_store(f"sqlite:///{path}")
    assert not path.exists()
    client = MlflowClient(tracking_uri=f"sqlite:///{path}")     # MLflow makes it as usual
    assert client.get_experiment("0").name == "Default"
