"""The `apptainer` sandbox for clusters.

- `sandbox`: ApptainerSandbox: `apptainer instance start / exec / instance stop` on a .sif or docker:// image.

Imports: the sandbox protocol.
"""
