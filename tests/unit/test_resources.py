"""The workflow's own files: workflow/ links into the package's assets, which an installed horizon ships."""

import pytest

from horizon.resources import ASSETS, WORKFLOW_LINKS, asset, workflow_file
from tests.helpers import REPO


@pytest.mark.parametrize("name", sorted(WORKFLOW_LINKS))
def test_each_workflow_file_is_a_link_to_a_packaged_asset(name):
    linked = REPO / "workflow" / name
    assert linked.is_symlink(), f"workflow/{name} should link to src/horizon/assets/{WORKFLOW_LINKS[name]}"
    assert linked.resolve() == (ASSETS / WORKFLOW_LINKS[name]).resolve()
    assert asset(WORKFLOW_LINKS[name]).exists()


def test_a_checkout_reads_its_workflow_folder_a_fetched_workflow_the_package():
    assert workflow_file("judge/rubric.yaml", REPO) == REPO / "workflow/judge/rubric.yaml"
    assert workflow_file("judge/rubric.yaml", None) == ASSETS / "judge/rubric.yaml"
    assert sorted(p.name for p in workflow_file("synth/prompts", None).glob("*.j2")) == sorted(
        p.name for p in (REPO / "workflow/synth/prompts").glob("*.j2")
    )
    for root in (REPO, None):
        with pytest.raises(KeyError):
            workflow_file("rules/common.smk", root)  # fetched through Snakemake's source, not packaged
