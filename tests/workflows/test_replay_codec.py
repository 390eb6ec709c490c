"""With the payload codec on, the histories recorded before it (plain payloads) still replay: the codec passes
unencrypted payloads through, so a worker given keys finishes the runs it started without them."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from models.codec import EncryptionCodec
from models.settings import TemporalSettings
from tests.workflows.test_replay import WORKFLOWS

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))
TEXTS = {p.stem: p.read_text() for p in HISTORIES}
KEY = base64.b64encode(bytes(range(32))).decode()


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    path = tmp_path / "codec-keys"
    path.write_text(f"k1 {KEY}\n")
    return path


@pytest.mark.parametrize("name", sorted(TEXTS))
async def test_a_history_recorded_before_the_codec_replays_with_it(name: str, keys: Path) -> None:
    converter = TemporalSettings(codec_keys_file=str(keys)).data_converter()
    assert isinstance(converter.payload_codec, EncryptionCodec)
    replayer = Replayer(workflows=WORKFLOWS, data_converter=converter)
    await replayer.replay_workflow(WorkflowHistory.from_json(name, TEXTS[name]))
