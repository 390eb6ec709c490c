"""The chart tells the API's console where the Temporal UI is (`api.temporalUiUrl`), and refuses what is no URL."""

from __future__ import annotations

from collections.abc import Iterator

import helm_python as helm
import pytest

from api.settings import ApiSettings
from tests.deploy.test_chart import CHART, component_env, rendered


@pytest.fixture(scope="module")
def chart() -> Iterator[helm.Chart]:
    c = helm.Chart.load(str(CHART))
    yield c
    c.close()


def test_the_temporal_ui_url_reaches_the_api(chart: helm.Chart) -> None:
    assert component_env(rendered(chart, {}), "api")["AGENTRUN_TEMPORAL_UI_URL"]["value"] == ""
    docs = rendered(chart, {"api": {"temporalUiUrl": "https://temporal.example.com/ui"}})
    url = component_env(docs, "api")["AGENTRUN_TEMPORAL_UI_URL"]["value"]
    assert url == "https://temporal.example.com/ui"
    assert ApiSettings(temporal_ui_url=url + "/").temporal_ui_url == url


@pytest.mark.parametrize("url", ["temporal.example.com", "javascript:alert(1)", "https://"])
def test_what_is_no_url_is_refused(chart: helm.Chart, url: str) -> None:
    with pytest.raises(helm.HelmError, match="temporalUiUrl"):
        rendered(chart, {"api": {"temporalUiUrl": url}})
    with pytest.raises(ValueError, match="AGENTRUN_TEMPORAL_UI_URL"):
        ApiSettings(temporal_ui_url=url)
