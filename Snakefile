# horizon: the whole study, from the teacher corpus to the reliability table.
#
#   snakemake -n                                   # the paper grid (config.yaml), dry-run
#   snakemake --profile slurm                      # ... on a Slurm GPU cluster
#   snakemake --configfile demo/config.yaml --profile demo/profile -c2   # the study in miniature (make demo)
#
# As a module of your own Snakefile (the workflow finds its own files from where it is; results/ and
# the config's relative paths are your working directory's; `prefix:` is refused: set `results`):
#   configfile: "config.yaml"
#   module horizon:
#       snakefile: "../horizon/Snakefile"      # this checkout, from your study's folder; or
#       snakefile: github("<owner>/horizon", path="Snakefile", tag="v<version>")   # with that horizon installed
#       config: config
#   use rule * from horizon as horizon_*
from snakemake.utils import min_version

min_version("9.0")


# config.yaml (of the working directory) is the default; a --configfile replaces it instead of being
# merged into it (merging the demo into the paper grid would mix their benchmarks and horizons). A
# module given `config:` skips this directive.
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
