"""localkube's store: the uid index the garbage collector looks owners up by follows every write and a reload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localkube.store import Store

PODS = ("", "pods")
JOBS = ("batch", "jobs")


def obj(name: str, uid: str, ns: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": uid}}


def test_by_uid_follows_writes_and_removals() -> None:
    store = Store()
    store.put(PODS, obj("a", "u-a"))
    store.put(JOBS, obj("a", "u-job"))
    found = store.by_uid("u-a")
    assert found is not None and found[0] == PODS and found[1]["metadata"]["name"] == "a"
    assert store.by_uid("u-job") is not None and store.by_uid("u-job")[0] == JOBS  # type: ignore[index]
    store.put(PODS, {**obj("a", "u-a"), "status": {"phase": "Running"}})
    found = store.by_uid("u-a")
    assert found is not None and found[1]["status"] == {"phase": "Running"}
    store.remove(PODS, store.get(PODS, "default", "a") or {})
    assert store.by_uid("u-a") is None
    # The same name again is another object with another uid.
    store.put(PODS, obj("a", "u-a2"))
    assert store.by_uid("u-a") is None and store.by_uid("u-a2") is not None
    assert store.by_uid("") is None and store.by_uid("nope") is None


def test_by_uid_after_reload(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    store = Store(db_path=db)
    store.put(PODS, obj("a", "u-a", ns="x"))
    store.close()
    again = Store(db_path=db)
    found = again.by_uid("u-a")
    assert found is not None and found[0] == PODS and found[1]["metadata"]["namespace"] == "x"
    again.close()
