"""Settings from initializationOptions and workspace/configuration: applied, re-read on
change, and reported (never fatal) when invalid."""

from __future__ import annotations

import pytest
from lsp_support import (
    GEMM,
    ROOT,
    RecordingClient,
    editor_client,
    new_uri,
    open_doc,
    published_until,
)
from lsprotocol import types as lsp

from cake_lsp.guard import TEST_PASSES_ENV

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]

INIT_OPTIONS = {"cake": {"arch": "sm_999", "bogus": 1, "simulateOnSave": "yes",
                         "plugins": {"disabled": ["tests.lsp.passes:crash"]}}}


client = editor_client("visual-studio-code", env={TEST_PASSES_ENV: "tests.lsp.passes:crash"},
                       settings={"arch": "sm_80"}, init_options=INIT_OPTIONS)


def codes(diags: list[lsp.Diagnostic]) -> set[str]:
    return {str(d.code) for d in diags}


async def test_invalid_initialization_options_are_reported(client: RecordingClient) -> None:
    [message] = [m for m in client.messages if "initializationOptions" in m.message]
    assert message.type == lsp.MessageType.Warning
    for word in ("sm_999", "cake.bogus", "cake.simulateOnSave"):
        assert word in message.message


async def test_configuration_overrides_the_arch_and_follows_changes(client: RecordingClient):
    uri = new_uri()
    open_doc(client, uri, GEMM)
    # workspace/configuration says sm_80: TMA and wgmma do not exist there
    await published_until(client, uri, lambda d: "CK108" in codes(d))
    mark = len(client.published)
    client.set_configuration(None, section="cake.arch")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    # back to the kernel's own sm_90a; the crashing pass is disabled by the settings
    assert await published_until(client, uri, lambda d: "CK108" not in codes(d),
                                 after=mark) == []


async def test_an_invalid_changed_setting_is_reported_and_ignored(client: RecordingClient):
    shown = client.protocol.wait_for_notification_async(lsp.WINDOW_SHOW_MESSAGE)
    client.set_configuration(42, section="cake.nvccPath")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    message = await shown
    assert "cake.nvccPath must be a path" in message.message
    report = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="cake.check", arguments=[(ROOT / "tests/lsp/data/gemm.cake").as_uri()]))
    assert report["diagnostics"] == []
