# Load /backup/$BACKUP_FILE into $MYSQL_DATABASE on the server behind the Service.
# Env: MYSQL_HOST, MYSQL_PORT, MYSQL_DATABASE, CONNECT_TIMEOUT, BACKUP_FILE and
# MYSQL_PWD (the password travels in the environment only).
set -eu
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
echo "restore: done"
