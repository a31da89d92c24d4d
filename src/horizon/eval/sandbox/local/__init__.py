"""The `local` sandbox: bubblewrap, no daemon, no image; the agent in it is hostile by assumption.

- `sandbox`: LocalSandbox: namespaces, mounts, the init at pid 1, the protocol's operations;
- `hostexec`: host-side commands and the init's channel, bounded in size and time;
- `hostfs`: the sandbox's uid, its host directory, the host tools it needs, sweeping what killed runs left;
- `imagebuild`: the task's Dockerfile replayed before the agent starts (the host's userland as FROM);
- `syslayer`: the build's copy-on-write layer over the host's system directories (its RUN steps may
  write anywhere, the host's /usr and /etc never change; read-only for the agent);
- `precheck`: what the replay cannot do, found from the task's files before anything runs (check-tasks);
- `limits`: a cgroup per sandbox (memory, processes, CPU), or rlimits where none can be made;
- `netns`: a network of its own behind slirp4netns for tasks with `allow_internet`;
- `audit`: the writable directories that decide a grade (a PATH directory, a site directory the
  Dockerfile made), scanned after the build and after the agent, and the sandbox's files read from
  the host (View), for the integrity audit.

Imports: the sandbox protocol, programs (its init), tasks (the Dockerfile's steps).
"""
