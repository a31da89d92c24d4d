"""The `docker` sandbox: one container per attempt through the Docker SDK (honours DOCKER_HOST).

- `sandbox`: DockerSandbox (the protocol on a container), the graders' toolchain as an archive;
- `image`: a task's image pulled, or its Dockerfile built once per content hash (FROM mapping,
  what cannot be had here named Unsupported);
- `layer`: the container's writable layer as the integrity audit reads it, from the daemon's side;
- `storage`: the task's storage_mb, enforced by the storage driver where it can, watched everywhere;
- `baseimage`: the debootstrap base image, imported without a registry.

Imports: the sandbox protocol, integrity and overlay, tasks (the Dockerfile's FROM lines), io.
"""
