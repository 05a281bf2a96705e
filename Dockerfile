# modelgate's image: the ext_authz gRPC service (`modelgate serve`), no Envoy (the gateway runs it:
# Envoy Gateway, Istio, or the plain bundle). docs/kubernetes.md says what CI proves of this file:
# test/deploy/package.test.ts runs the same npm commands on the same tarball; scripts/build-image makes
# the same image without a base image (Debian packages by mmdebstrap, npm's node binary), and
# test/deploy/image.test.ts runs that one with runc.
#
#   docker build -t modelgate:0.1.0 .
#   docker run --read-only -v $PWD/modelgate.yaml:/etc/modelgate/modelgate.yaml:ro \
#     -v modelgate-state:/var/lib/modelgate -p 9191:9191 -p 9192:9192 modelgate:0.1.0

ARG NODE_IMAGE=node:20-bookworm-slim

# Build: every dependency (TypeScript included), then `npm pack`, whose prepack is a full fresh build
# of dist/; the tarball is what a team can pin (the same one `npm pack` gives in a clone).
FROM ${NODE_IMAGE} AS build
WORKDIR /src
# The workspace packages' manifests too (npm ci links packages/* into node_modules/@modelgate/).
COPY package.json package-lock.json ./
COPY packages/grpc-server/package.json packages/grpc-server/
COPY packages/json-scan/package.json packages/json-scan/
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
RUN mkdir /pkg && npm pack --pack-destination /pkg && mv /pkg/modelgate-*.tgz /pkg/modelgate.tgz

# Runtime: the production install of the tarball only (no compiler, no install script).
FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    MODELGATE_CONFIG=/etc/modelgate/modelgate.yaml \
    MODELGATE_GRPC_ADDR=0.0.0.0:9191 \
    MODELGATE_HTTP_ADDR=0.0.0.0:9192
WORKDIR /opt/modelgate
COPY --from=build /pkg/modelgate.tgz /tmp/modelgate.tgz
RUN echo '{ "name": "modelgate-install", "private": true }' > package.json \
 && npm install --omit=dev --ignore-scripts --no-audit --no-fund /tmp/modelgate.tgz \
 && rm /tmp/modelgate.tgz && npm cache clean --force \
 && mkdir -p /etc/modelgate /var/lib/modelgate && chown 1000:1000 /var/lib/modelgate
# Read-only root file system: modelgate writes nothing but the file store's meter state
# (meter.stateFile; the chart points it at /var/lib/modelgate, a volume). The config is read-only.
VOLUME ["/var/lib/modelgate"]
# The image's `node` user (uid 1000), never root.
USER 1000:1000
EXPOSE 9191 9192
# node is PID 1 (exec form, no shell): SIGTERM reaches modelgate, which drains (health NOT_SERVING,
# Checks in flight answered, the meter waits up to meter.drainSeconds for reports) and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "/opt/modelgate/node_modules/modelgate/bin/modelgate.js"]
CMD ["serve"]
