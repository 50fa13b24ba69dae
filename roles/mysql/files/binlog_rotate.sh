# The binary-log side of point-in-time recovery, a sidecar of the server's pod (the server
# image, for its client): every ARCHIVE_SECONDS it closes the server's current binary log
# when that log holds events (FLUSH BINARY LOGS), so that the archiving sidecar (mysql_common's
# files/objects.sh, MODE=archive) can ship it; a log without new events is left open, and
# /archive/quiet says so ("<log> <time>": every event before that time is in a closed log).
#
# /archive/id is the identity of this data directory's binary logs (a UUID kept in
# $MYSQL_OPERATOR_SCHEMA.binlog_archive, made once per data directory): the archive's
# directory in the bucket, so a new server (restored or re-created, whose logs start again
# at .000001) never writes over another's logs. Backups record it beside their position.
# Logs in as root over the pod's loopback with the pod's copy of the credentials Secret
# (kubelet updates it on a rotation; a refused login is tried again on the next pass). Every
# value on a client's command line is an --option=value: never a word it could read as an
# option of its own.
set -u
copy=/etc/mysql-operator/credentials
login() {
  MYSQL_PWD="$(cat "$copy/password" 2>/dev/null)" \
    mysql --protocol=TCP --host=127.0.0.1 --port="$MYSQL_OPERATOR_PORT" --user=root --connect-timeout=3 -N -B "$@"
}
schema="\`$MYSQL_OPERATOR_SCHEMA\`"
until id=$(login -e "CREATE TABLE IF NOT EXISTS $schema.binlog_archive
                       (id TINYINT PRIMARY KEY, server CHAR(36) NOT NULL);
                     INSERT IGNORE INTO $schema.binlog_archive VALUES (1, UUID());
                     SELECT server FROM $schema.binlog_archive WHERE id = 1" 2> /tmp/rotate.err) \
      && [ -n "$id" ]; do
  sleep 5
done
printf '%s\n' "$id" > /archive/.id && mv /archive/.id /archive/id
echo "binlog: the binary logs of this data directory are archived as server $id"
while :; do
  sleep "$ARCHIVE_SECONDS"
  at=$(( $(date +%s) - 1 ))
  active=$(login -e 'SHOW MASTER STATUS' 2>/dev/null || login -e 'SHOW BINARY LOG STATUS' 2> /tmp/rotate.err) || continue
  active=$(printf '%s\n' "$active" | head -n 1 | cut -f1)
  [ -n "$active" ] || { echo "binlog: the server writes no binary log (log_bin is off)" >&2; continue; }
  # the events a log starts with (its format, the GTIDs before it) are not new events
  events=$(login -e "SHOW BINLOG EVENTS IN '$active'" 2> /tmp/rotate.err \
             | awk -F '\t' '$3 !~ /^(Format_desc|Gtid_list|Binlog_checkpoint|Previous_gtids|Start_encryption)$/' \
             | wc -l) || continue
  if [ "$events" -gt 0 ]; then
    login -e 'FLUSH BINARY LOGS' 2> /tmp/rotate.err || echo "binlog: could not close $active: $(tail -n 1 /tmp/rotate.err)" >&2
  else
    printf '%s %s\n' "$active" "$at" > /archive/.quiet && mv /archive/.quiet /archive/quiet
  fi
done
