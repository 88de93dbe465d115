# placementd container image: CPU backend (PLACEMENT_WITH_CUDA=OFF), Debian 12 packages only.
#
#   docker build -t placementd .
#   docker run --rm -p 50051:50051 -p 9464:9464 placementd
#
# Stopping: `docker stop` / `podman stop` send SIGTERM (STOPSIGNAL below) and SIGKILL after 10 s
# unless told otherwise; the default command drains for at most 8 s (--drain_timeout=8s) so the
# drain fits. For a longer drain raise both, e.g.
#   docker run --stop-timeout 45 ... placementd --listen=0.0.0.0:50051 --allow_insecure --drain_timeout=30s
# (Kubernetes: terminationGracePeriodSeconds in deploy/kubernetes/daemonset.yaml.)
#
# tests/ops/container_test.py lints this file with hadolint, checks that the runtime packages
# below provide every library placementd links, and runs this stage's command, user and ports
# in an image made from the built binaries.
#
# CUDA variant: build FROM an nvidia/cuda "-devel" image and run FROM the matching
# "-runtime" image (both ship the toolkit under /usr/local/cuda, where CMake looks, and
# NCCL), configure with -DPLACEMENT_WITH_CUDA=ON so a missing toolkit or NCCL fails the
# build instead of silently dropping the backend, and start the container with GPUs
# (`docker run --gpus all`, NVIDIA Container Toolkit), which injects the driver's
# libcuda. NVIDIA publishes those images for Ubuntu rather than Debian, so the package
# lists below change with the distribution (pick a release that packages gRPC, Protobuf,
# Abseil and Gloo, and check each runtime library name with `apt-cache policy`).

# ---------------------------------------------------------------------------------------
FROM debian:12 AS build

# Debian stable's package versions are fixed apart from security updates, which we want.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev libgloo-dev libsystemd-dev prometheus-cpp-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .

RUN cmake -S . -B build -G Ninja \
      -DCMAKE_BUILD_TYPE=Release \
      -DPLACEMENT_WITH_CUDA=OFF \
      -DPLACEMENT_BUILD_TESTS=OFF \
      -DPLACEMENT_BUILD_BENCH=OFF \
 && cmake --build build --target placementd placectl \
 && cmake --install build --prefix /opt/placement --component daemon

# ---------------------------------------------------------------------------------------
FROM debian:12-slim

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Runtime shared libraries only; their own dependencies (libgrpc29, libre2, libssl3,
# libcares2, libibverbs1, libhiredis, libcivetweb1, ...) come in through apt.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 libgloo0 libsystemd0 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# Fixed uid/gid 10001, matching runAsUser in deploy/kubernetes/daemonset.yaml.
RUN groupadd --gid 10001 placementd \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin placementd \
 && install -d -o 10001 -g 10001 -m 0750 /run/placementd

COPY --from=build /opt/placement/bin/placementd /opt/placement/bin/placectl /opt/placement/bin/

# Fail the build here, not at first start, if a shared library is missing from the image.
RUN if ldd /opt/placement/bin/placementd /opt/placement/bin/placectl | grep 'not found'; then \
      exit 1; \
    fi

USER 10001
EXPOSE 50051 9464
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/placement/bin/placementd"]
# Plaintext off loopback is explicit (--allow_insecure); docs/security.md shows the TLS flags.
CMD ["--listen=0.0.0.0:50051", "--metrics_listen=0.0.0.0:9464", "--allow_insecure", "--drain_timeout=8s"]
