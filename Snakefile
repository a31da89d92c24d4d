# horizon: the whole study, from the teacher corpus to the reliability table.
#
#   snakemake -n                                   # the paper grid (config.yaml), dry-run
#   snakemake --profile slurm                      # ... on a Slurm GPU cluster
#   snakemake --configfile demo/config.yaml --profile demo/profile -c2   # the study in miniature (make demo)
from snakemake.utils import min_version

min_version("9.0")


# config.yaml is the default; a --configfile replaces it instead of being merged into it
# (merging the demo into the paper grid would mix their benchmarks and horizons).
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/synth.smk"
include: "workflow/rules/corpus.smk"
include: "workflow/rules/filters.smk"
include: "workflow/rules/tokens.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/rollout.smk"
include: "workflow/rules/dmpo.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets(),
