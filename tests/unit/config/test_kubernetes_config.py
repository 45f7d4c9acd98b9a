"""The Kubernetes keys of the sandbox: block: checked at load, one line naming the file, the field and the fix."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from agent_eval_sandbox.cli import cli
from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.errors import ConfigError

GOOD = """
sandbox:
  backend: kubernetes
  image: registry.example/agent-eval-sandbox:2.1.332-abc
  namespace: agent-eval
  runtime_class: gvisor
  node_selector: {pool: sandboxes}
  tolerations: [{key: sandboxes, operator: Exists, effect: NoSchedule}]
  image_pull_secrets: [registry-credentials]
  controller: {host: agent-eval-controller, port: 8470}
"""


def test_a_full_kubernetes_block_loads(write_eval):
    sandbox = load_eval_config(write_eval(GOOD)).config.sandbox
    assert sandbox.backend == "kubernetes" and sandbox.namespace == "agent-eval"
    assert sandbox.tolerations[0].manifest() == {"key": "sandboxes", "operator": "Exists", "effect": "NoSchedule"}
    assert sandbox.controller.host == "agent-eval-controller" and sandbox.controller.port == 8470


@pytest.mark.parametrize(("block", "match"), [
    ("{backend: kubernetes, image: i, namespace: Agent_Eval}", "sandbox.namespace 'Agent_Eval' is not a valid"),
    ("{backend: kubernetes, image: i, runtime_class: 'g visor'}", "sandbox.runtime_class"),
    ("{backend: kubernetes, image: i, node_selector: {'bad key!': x}}", "not a valid label key"),
    ("{backend: kubernetes, image: i, tolerations: [{operator: Sometimes}]}", "operator"),
    ("{backend: kubernetes, image: i, tolerations: [{key: k, colour: red}]}", "colour"),
    ("{backend: kubernetes, image: i, image_pull_secrets: [Bad_Secret]}", "not a valid Secret name"),
    ("{backend: kubernetes, image: i, controller: {port: 0}}", "port"),
    ("{backend: kubernetes}", "sandbox.image is required with sandbox.backend: kubernetes"),
    ("{backend: kubernetes, image: i, runtime: runsc-nonet}", "use sandbox.runtime_class"),
    ("{backend: kubernetes, image: i, user: '0:0'}", "sandbox.user '0:0' runs the agent as root"),
    ("{backend: kubernetes, image: i, user: '00'}", "set a non-zero uid"),
    ("{namespace: evals}", "sandbox.namespace is a Kubernetes setting, but sandbox.backend is 'docker'"),
])
def test_bad_kubernetes_settings_are_one_clear_line(write_eval, block, match):
    path = write_eval(f"sandbox: {block}\n")
    with pytest.raises(ConfigError, match=match) as caught:
        load_eval_config(path)
    assert str(path) in caught.value.render() and "\n" not in caught.value.render()


def test_run_takes_allow_unenforced_network_and_gc_checks_its_namespace():
    runner = CliRunner()
    assert "--allow-unenforced-network" in runner.invoke(cli, ["run", "--help"]).output
    result = runner.invoke(cli, ["gc", "--namespace", "evals"])
    assert result.exit_code == 2 and "--backend kubernetes" in result.output
    result = runner.invoke(cli, ["gc", "--backend", "kubernetes", "--namespace", "Not_Valid"])
    assert result.exit_code == 2 and "--namespace 'Not_Valid' is not a valid namespace name" in result.output
