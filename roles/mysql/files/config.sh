# Give the running server the live options of spec.config: run STATEMENTS (SET GLOBAL ...)
# as root (ROOT_PASSWORD, in MYSQL_PWD only, never on a command line) at MYSQL_HOST:MYSQL_PORT,
# waiting up to CONNECT_TIMEOUT seconds for a login. The server's refusal, if any, is the
# last line of the log (the operator's Failure condition quotes it).
set -eu
waited=0
until MYSQL_PWD="$ROOT_PASSWORD" mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot \
    --connect-timeout=5 -e 'SELECT 1' >/dev/null 2>&1; do
  if [ "$waited" -ge "$CONNECT_TIMEOUT" ]; then
    echo "config: cannot log in to $MYSQL_HOST:$MYSQL_PORT as root after ${waited}s" >&2
    exit 1
  fi
  sleep 3
  waited=$((waited + 3))
done
printf '%s\n' "$STATEMENTS" | MYSQL_PWD="$ROOT_PASSWORD" mysql --protocol=TCP -h "$MYSQL_HOST" \
  -P "$MYSQL_PORT" -uroot
echo "config: applied"
