# syntax=docker/dockerfile:1
# Builds the same binary as `cargo build --release --locked` (web UI, skills and migrations are
# embedded); the runtime image is distroless and runs as a non-root user with its data on a volume.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY crates ./crates
COPY migrations ./migrations
COPY web ./web
COPY skills ./skills
RUN cargo build --release --locked

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/instantstart /usr/local/bin/instantstart
# The data directory holds the SQLite file; mount a volume here. glibc's allocator keeps up to
# eight heaps per core by default, and the threads that fill the watch caches spread a fleet's
# memory over them: with two heaps a fleet of 20 clusters (10,000 pods each) took 4–10 MiB
# less, at no measurable cost per request (scripts/bench runs the binary with this setting).
ENV INSTANTSTART_DATA_DIR=/data \
    INSTANTSTART_CLOUD=aws \
    INSTANTSTART_BIND=127.0.0.1:3099 \
    MALLOC_ARENA_MAX=2
VOLUME ["/data"]
EXPOSE 3099
# The distroless `nonroot` user, by number: a runtime that enforces non-root (Kubernetes
# runAsNonRoot) can only verify a numeric user.
USER 65532:65532
# No shell or curl in the image: the binary probes itself.
HEALTHCHECK --interval=30s --timeout=6s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/instantstart", "probe"]
ENTRYPOINT ["/usr/local/bin/instantstart"]
CMD ["serve"]
