# Switchboard: one container; PostgreSQL beside it (compose.yaml), or embedded in /data when DATABASE_URL is unset.
FROM node:24-slim
WORKDIR /app
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 DATA_DIR=/data

# Production dependencies only, exactly as locked. (The README's `npm install` does the same plus dev tools.)
# onnxruntime-node's postinstall would fetch CUDA libraries from outside the npm registry; its CPU runtime is in
# the package (package.json's allowScripts denies the script too, for an npm that reads it).
COPY package.json package-lock.json ./
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

COPY src ./src
COPY migrations ./migrations
COPY scripts ./scripts

RUN mkdir -p /data && chown node:node /data
USER node
VOLUME /data
EXPOSE 3000

# Liveness only: a short database outage must not get the container restarted (see /health for readiness).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:' + process.env.PORT + '/health/live').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"

# What `npm start` runs (its V8 flag: docs/calls.md, "Memory"); node directly so that SIGTERM reaches the
# server, which drains and exits 0.
CMD ["node", "--max-semi-space-size=16", "src/start.js"]
