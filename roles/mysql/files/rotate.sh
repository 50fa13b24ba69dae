# Rotate the root and application passwords. Env: MYSQL_HOST, MYSQL_PORT,
# CONNECT_TIMEOUT, OLD_PASSWORD, NEW_PASSWORD; /rotate/rotate.sql holds the statements.
# Passwords travel in MYSQL_PWD only, never on a command line.
set -eu
try_login() {
  MYSQL_PWD="$1" mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot \
    --connect-timeout=5 -e 'SELECT 1' >/dev/null 2>&1
}
waited=0
while :; do
  if try_login "$NEW_PASSWORD"; then
    echo "rotate: the new password already works; nothing to do"
    exit 0
  fi
  if try_login "$OLD_PASSWORD"; then
    break
  fi
  if [ "$waited" -ge "$CONNECT_TIMEOUT" ]; then
    echo "rotate: cannot log in to $MYSQL_HOST:$MYSQL_PORT with the old or the new password after ${waited}s" >&2
    exit 1
  fi
  sleep 3
  waited=$((waited + 3))
done
MYSQL_PWD="$OLD_PASSWORD" mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot < /rotate/rotate.sql
if ! try_login "$NEW_PASSWORD"; then
  echo "rotate: ALTER USER ran but the new password does not log in" >&2
  exit 1
fi
echo "rotate: password rotated"
