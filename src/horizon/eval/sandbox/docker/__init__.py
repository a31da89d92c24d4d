"""The `docker` sandbox: one container per attempt through the Docker SDK (honours DOCKER_HOST).

- `sandbox`: DockerSandbox (the protocol on a container), the graders' toolchain as an archive;
- `image`: a task's image pulled, or its Dockerfile built once per content hash (FROM mapping,
  what cannot be had here named Unsupported).

Imports: the sandbox protocol, tasks (the Dockerfile's FROM lines), io.
"""
