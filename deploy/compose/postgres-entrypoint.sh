#!/bin/sh
# Creates the cluster on first start (superuser and database "bnn", the
# password from $PGPASSWORD, compose's env_file postgres.env, which
# bnn-server's libpq reads too; TCP clients must give it, scram-sha-256),
# then runs the server in the foreground. bnn-server migrates its schema
# itself on first connect.
set -eu
: "${PGPASSWORD:?set PGPASSWORD in deploy/compose/postgres.env}"
PGDATA=/var/lib/bnn-postgres/15
BIN=/usr/lib/postgresql/15/bin
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$PGPASSWORD" > "$pwfile"
  "$BIN/initdb" -D "$PGDATA" -U bnn --auth-local=trust \
    --auth-host=scram-sha-256 --pwfile="$pwfile"
  rm -f "$pwfile"
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
  "$BIN/pg_ctl" -D "$PGDATA" -w \
    -o "-c listen_addresses='' -c unix_socket_directories=/tmp" start
  "$BIN/createdb" -h /tmp -U bnn bnn
  "$BIN/pg_ctl" -D "$PGDATA" -w stop
fi
exec "$BIN/postgres" -D "$PGDATA" -c listen_addresses='*' \
  -c unix_socket_directories=/tmp
