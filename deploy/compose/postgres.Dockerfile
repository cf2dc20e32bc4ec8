# PostgreSQL 15 from Debian's package, for deploy/compose/compose.yaml: the
# shared metadata store of bnn-server (--metadata=postgres://...). Built from
# Debian packages like the stack's other images, so it comes up without an
# image registry. On first start it creates the cluster in the volume with
# the password $PGPASSWORD (deploy/compose/postgres.env) for the role "bnn"
# (scram-sha-256 over TCP; the port stays on the stack's network).
FROM debian:bookworm
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o postgres -g postgres /var/lib/bnn-postgres
COPY --chmod=0755 postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
USER postgres
VOLUME /var/lib/bnn-postgres
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
