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
# CUDA variant (the GPU DaemonSet, deploy/kubernetes/overlays/gpu): the stages build-cuda
# and runtime-cuda below, on NVIDIA's CUDA images for Ubuntu 24.04 (CUDA_VERSION picks the
# toolkit; the -devel image has nvcc and NCCL's headers, the -runtime one CUDA's and NCCL's
# libraries). Ubuntu 24.04 packages the same gRPC 1.51, Protobuf 3.21, Abseil 20220623,
# Gloo and prometheus-cpp as Debian 12, under its 64-bit-time_t names (libgrpc++1.51t64, ...).
#   docker build --target runtime-cuda --build-arg CUDA_VERSION=12.6.3 -t placementd:cuda .
#   docker run --rm --gpus all -p 50051:50051 placementd:cuda
# -DPLACEMENT_WITH_CUDA=ON makes a missing toolkit or NCCL fail the build instead of
# silently dropping the backend; `--gpus all` (NVIDIA Container Toolkit) injects libcuda.
# The CPU image stays the default target: its stages come last.

ARG CUDA_VERSION=12.6.3

# ---------------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS build-cuda

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
      -DPLACEMENT_WITH_CUDA=ON \
      -DPLACEMENT_BUILD_TESTS=OFF \
      -DPLACEMENT_BUILD_BENCH=OFF \
      -DPLACEMENT_UNITY=ON \
 && cmake --build build --target placementd placectl \
 && cmake --install build --prefix /opt/placement --component daemon

# ---------------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04 AS runtime-cuda

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51t64 libprotobuf32t64 libabsl20220623t64 libgloo0 libsystemd0 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 ca-certificates \
 && rm -rf /var/lib/apt/lists/*

RUN groupadd --gid 10001 placementd \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin placementd \
 && install -d -o 10001 -g 10001 -m 0750 /run/placementd

COPY --from=build-cuda /opt/placement/bin/placementd /opt/placement/bin/placectl /opt/placement/bin/

# libcuda comes from the host driver at run time (--gpus / the device plugin): ignore it here.
RUN if ldd /opt/placement/bin/placementd /opt/placement/bin/placectl | grep 'not found' \
      | grep -v 'libcuda\.so'; then \
      exit 1; \
    fi

USER 10001
EXPOSE 50051 9464
STOPSIGNAL SIGTERM
ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
ENTRYPOINT ["/opt/placement/bin/placementd"]
CMD ["--listen=0.0.0.0:50051", "--metrics_listen=0.0.0.0:9464", "--allow_insecure", "--backend=cuda", "--drain_timeout=8s"]

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
      -DPLACEMENT_UNITY=ON \
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
