# syntax=docker/dockerfile:1
# The gov-gateway image: one image for every mode, its entrypoint `gov`, its arguments the mode
# (`gateway`, `sidecar`, `injector`, `migrate`...). docs/kubernetes.md, "Container image":
#   docker build -t gov-gateway:0.1.0 .
# test/image/dockerfile.test.ts lints this file; test/image/production-install.test.ts runs what its last
# stage holds.

# A patch release, so a rebuild does not move to another Node. For a reproducible build pin the digest too:
#   docker build --build-arg NODE_IMAGE=node:20.20.2-bookworm-slim@sha256:<digest> -t gov-gateway:0.1.0 .
# (`docker buildx imagetools inspect node:20.20.2-bookworm-slim` prints the digest.)
ARG NODE_IMAGE=node:20.20.2-bookworm-slim

# --- build: every dependency and the TypeScript compiler, for dist/ ---------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: our own `prepare` script compiles src/, which is not copied yet. The two packages with
# install scripts (lmdb, msgpackr-extract) load the prebuilt binaries of their optional platform packages
# without them; test/image/production-install.test.ts opens an LMDB ledger from such an install.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

# --- deps: production dependencies only ------------------------------------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts again: `prepare` would run tsc, which --omit=dev leaves out.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# --- runtime ------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
# tini is PID 1 and node its child: it forwards SIGTERM (gov drains and exits 0 within its grace period,
# tini exits with gov's code) and reaps orphans. Node as PID 1 would ignore every signal it installs no
# handler for (the kernel gives PID 1 no default actions), so SIGQUIT or SIGHUP would do nothing. npm,
# npx, corepack and yarn are removed: nothing runs them at runtime, and each is more code to patch.
RUN apt-get update \
 && apt-get install -y --no-install-recommends 'tini=0.19.0-1*' \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
           /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-* \
 && groupadd --gid 10001 gov \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin gov \
 && mkdir -p /var/lib/gov \
 && chown 10001:10001 /var/lib/gov \
 && chmod 0700 /var/lib/gov

# GOV_ENV=production: auth required, no /docs, the generated embedded token never printed (a development
# run sets GOV_ENV=development). The ledgers live on the one volume, so the root filesystem can be
# read-only; GOV_HOST stays 127.0.0.1 unless the deployment sets it (docs/kubernetes.md).
ENV NODE_ENV=production \
    GOV_ENV=production \
    GOV_EMBED_DB=/var/lib/gov/ledger \
    GOV_DB_PATH=/var/lib/gov/gateway

WORKDIR /app
# What the runtime reads: dist/, package.json (its version), the shipped policy packs and injection model
# (policies/), manifests and rate limits (manifests/), the PostgreSQL migrations (migrations/). Owned by
# root and not writable by the user the process runs as.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY policies ./policies
COPY manifests ./manifests
COPY migrations ./migrations

# Numeric, so that Kubernetes' runAsNonRoot can verify it; 10001 is the injector's GOV_INJECTOR_SIDECAR_UID.
USER 10001:10001
VOLUME ["/var/lib/gov"]
# gateway (GOV_PORT), embedded API (GOV_EMBED_PORT), sidecar proxy (GOV_PROXY_PORT), injector (GOV_INJECTOR_PORT)
EXPOSE 8000 8765 15080 8443
# No HEALTHCHECK: Kubernetes ignores it (the chart and the injector declare probes), and one command cannot
# know which mode, port and scheme a container runs.
# gov itself, not `node gov`: its shell preamble starts node with the sidecar's heap flags (src/cli/main.ts).
ENTRYPOINT ["tini", "--", "/app/dist/cli/main.js"]
CMD ["--help"]
