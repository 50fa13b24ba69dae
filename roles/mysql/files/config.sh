# Give the running server the live options of spec.config: run STATEMENTS (SET GLOBAL ...)
# as root (ROOT_PASSWORD, in MYSQL_PWD only, never on a command line) at MYSQL_HOST:MYSQL_PORT,
# waiting up to CONNECT_TIMEOUT seconds for a login. The server's refusal, if any, is the
# last line of the log (the operator's Failure condition quotes it). Values reach the client
# as --option=value only, never as words of their own.
set -eu
waited=0
until MYSQL_PWD="$ROOT_PASSWORD" mysql --protocol=TCP --host="$MYSQL_HOST" --port="$MYSQL_PORT" \
    --user=root --connect-timeout=5 -e 'SELECT 1' >/dev/null 2>&1; do
  if [ "$waited" -ge "$CONNECT_TIMEOUT" ]; then
    echo "config: cannot log in to $MYSQL_HOST:$MYSQL_PORT as root after ${waited}s" >&2
    exit 1
  fi
  sleep 3
  waited=$((waited + 3))
done
printf '%s\n' "$STATEMENTS" | MYSQL_PWD="$ROOT_PASSWORD" mysql --protocol=TCP --host="$MYSQL_HOST" \
  --port="$MYSQL_PORT" --user=root
echo "config: applied"
