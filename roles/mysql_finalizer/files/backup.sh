# Dump $MYSQL_DATABASE from the server behind the Service to /backup/$BACKUP_FILE.
# Env: MYSQL_HOST, MYSQL_PORT, MYSQL_DATABASE, CONNECT_TIMEOUT, BACKUP_FILE and
# MYSQL_PWD (the password travels in the environment only). The dump has no
# CREATE DATABASE/USE, so the restore loads it into whatever database it is given.
# It is written to a temporary file and renamed only once mysqldump succeeded and
# wrote its completion trailer, so the file name never refers to a partial dump.
set -eu
tmp="/backup/.$BACKUP_FILE.partial"
trap 'rm -f "$tmp"' EXIT
waited=0
until mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot --connect-timeout=5 \
    -e 'SELECT 1' "$MYSQL_DATABASE" >/dev/null 2>&1; do
  if [ "$waited" -ge "$CONNECT_TIMEOUT" ]; then
    echo "backup: $MYSQL_HOST:$MYSQL_PORT did not accept a login to $MYSQL_DATABASE within ${waited}s" >&2
    exit 1
  fi
  sleep 3
  waited=$((waited + 3))
done
set -- --single-transaction --routines --triggers
# Oracle MySQL's mysqldump writes SET @@GLOBAL.GTID_PURGED into the dump when the server
# has GTIDs: a restore that is retried after a partial load (the server killed mid-way)
# then fails on it ("must not overlap with @@GLOBAL.GTID_EXECUTED"). A backup restored
# into a new server needs no GTID state. MariaDB's mysqldump has no such option.
if mysqldump --help 2>/dev/null | grep -q -e '--set-gtid-purged'; then
  set -- "$@" --set-gtid-purged=OFF
fi
mysqldump --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot "$@" "$MYSQL_DATABASE" > "$tmp"
case "$(tail -n 1 "$tmp")" in
  "-- Dump completed"*) ;;
  *) echo "backup: the dump of $MYSQL_DATABASE has no completion trailer" >&2; exit 1 ;;
esac
mv "$tmp" "/backup/$BACKUP_FILE"
trap - EXIT
echo "backup: wrote /backup/$BACKUP_FILE ($(wc -c < "/backup/$BACKUP_FILE") bytes)"
