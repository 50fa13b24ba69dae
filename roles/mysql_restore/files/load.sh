# Replace the contents of $MYSQL_DATABASE with /backup/$BACKUP_FILE: check the file (present,
# with its mysqldump completion trailer), then drop and re-create the database (grants on it
# stay: they are kept by name) and load the file. Env: MYSQL_HOST, MYSQL_PORT,
# MYSQL_DATABASE (a name the CRD restricts to [A-Za-z0-9_$-]), CONNECT_TIMEOUT, BACKUP_FILE
# and MYSQL_PWD (the password travels in the environment only). The last line of output
# (and /dev/termination-log) is a summary.
set -eu
# a point in time: the fetch chose the backup, and brought the binary logs to replay after it
# (/backup/binlogs/replay: the backup's position, then the logs in order), whose events of
# $MYSQL_DATABASE are replayed up to STOP_DATETIME (UTC, exclusive) once the backup is loaded
# (replay_binlogs: mysql_common's files/binlog_replay.sh, prepended to this script)
[ ! -f /backup/chosen ] || BACKUP_FILE=$(cat /backup/chosen)
fail() {
  echo "load: $*" >&2
  printf 'load of %s failed: %s\n' "$BACKUP_FILE" "$*" > /dev/termination-log 2>/dev/null || true
  exit 1
}
file="/backup/$BACKUP_FILE"
[ -f "$file" ] || fail "$BACKUP_FILE is not on the backup volume"
case "$(tail -n 1 "$file")" in
  "-- Dump completed"*) ;;
  *) fail "$BACKUP_FILE has no mysqldump completion trailer (truncated?)" ;;
esac
client() {
  mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot --connect-timeout=5 "$@"
}
waited=0
until client -e 'SELECT 1' >/dev/null 2>&1; do
  [ "$waited" -lt "$CONNECT_TIMEOUT" ] || fail "$MYSQL_HOST:$MYSQL_PORT did not accept a login within ${waited}s"
  sleep 3
  waited=$((waited + 3))
done
echo "load: replacing the contents of $MYSQL_DATABASE with $BACKUP_FILE"
client -e "DROP DATABASE IF EXISTS \`$MYSQL_DATABASE\`; CREATE DATABASE \`$MYSQL_DATABASE\`" \
  || fail "could not re-create database $MYSQL_DATABASE"
client "$MYSQL_DATABASE" < "$file" 2> /tmp/load.err || fail "the load stopped: $(tail -n 2 /tmp/load.err | tr '\n' ' ')"
if [ -f /backup/binlogs/replay ]; then
  replay_binlogs client "$MYSQL_DATABASE" || fail "$replay_error"
  replayed=" binlogs=$replay_count until=$(echo "$STOP_DATETIME" | tr ' ' T)Z"
fi
tables=$(client -N -B -e "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()" "$MYSQL_DATABASE")
summary="file=$BACKUP_FILE size=$(wc -c < "$file") tables=$tables${replayed:-}"
printf '%s\n' "$summary" > /dev/termination-log 2>/dev/null || true
echo "$summary"
