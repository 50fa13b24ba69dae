# Load /backup/$BACKUP_FILE into $MYSQL_DATABASE on the server behind the Service. For a
# point in time, the fetch before it chose the backup (/backup/chosen) and brought the binary
# logs after it (/backup/binlogs/replay: the backup's position, then the logs in order);
# their events of $MYSQL_DATABASE from that position to STOP_DATETIME (UTC, exclusive) are
# replayed once the backup is loaded (replay_binlogs: mysql_common's files/binlog_replay.sh,
# prepended to this script).
# Env: MYSQL_HOST, MYSQL_PORT, MYSQL_DATABASE, CONNECT_TIMEOUT, BACKUP_FILE, STOP_DATETIME
# (with a point in time), TZ=UTC, and MYSQL_PWD (the password travels in the environment only).
set -eu
[ ! -f /backup/chosen ] || BACKUP_FILE=$(cat /backup/chosen)
file="/backup/$BACKUP_FILE"
if [ ! -f "$file" ]; then
  echo "restore: $file is not on the backup volume" >&2
  exit 1
fi
waited=0
until mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot --connect-timeout=5 \
    -e 'SELECT 1' "$MYSQL_DATABASE" >/dev/null 2>&1; do
  if [ "$waited" -ge "$CONNECT_TIMEOUT" ]; then
    echo "restore: $MYSQL_HOST:$MYSQL_PORT did not accept a login to $MYSQL_DATABASE within ${waited}s" >&2
    exit 1
  fi
  sleep 3
  waited=$((waited + 3))
done
echo "restore: loading $file into $MYSQL_DATABASE"
mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot "$MYSQL_DATABASE" < "$file"
if [ -f /backup/binlogs/replay ]; then
  replay_binlogs mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot "$MYSQL_DATABASE" \
    || { echo "restore: $replay_error" >&2; exit 1; }
fi
echo "restore: done"
