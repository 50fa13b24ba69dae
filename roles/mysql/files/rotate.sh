# Bring the root and application passwords to NEW_PASSWORD, and the operator's health
# account (HEALTH_USER, HEALTH_PASSWORD) and its table (OPERATOR_SCHEMA.credentials) to what
# /rotate/rotate.sql says. Env also: MYSQL_HOST, MYSQL_PORT, CONNECT_TIMEOUT, OLD_PASSWORD
# (the previous password, may be empty) and BOOTSTRAP_PASSWORD (the one a new server starts
# with). Passwords travel in MYSQL_PWD only, never on a command line, and the other values as
# --option=value, never as words of their own. Waits for the server to accept a login (a new
# server initialises first), logs in with the first of the new, the previous and the
# bootstrap password that works, runs the statements, and checks that the new password and
# the health account log in.
set -eu
try_login() {
  [ -n "$1" ] || return 1
  MYSQL_PWD="$1" mysql --protocol=TCP --host="$MYSQL_HOST" --port="$MYSQL_PORT" --user=root \
    --connect-timeout=5 -e 'SELECT 1' >/dev/null 2>&1
}
waited=0
while :; do
  if try_login "$NEW_PASSWORD"; then
    current=$NEW_PASSWORD
    echo "password: the new password already works"
    break
  fi
  if try_login "$OLD_PASSWORD"; then
    current=$OLD_PASSWORD
    echo "password: logged in with the previous password"
    break
  fi
  if try_login "$BOOTSTRAP_PASSWORD"; then
    current=$BOOTSTRAP_PASSWORD
    echo "password: logged in with the bootstrap password"
    break
  fi
  if [ "$waited" -ge "$CONNECT_TIMEOUT" ]; then
    echo "password: cannot log in to $MYSQL_HOST:$MYSQL_PORT as root with the new, the previous or the bootstrap password after ${waited}s" >&2
    exit 1
  fi
  sleep 3
  waited=$((waited + 3))
done
MYSQL_PWD="$current" mysql --protocol=TCP --host="$MYSQL_HOST" --port="$MYSQL_PORT" --user=root < /rotate/rotate.sql
if ! try_login "$NEW_PASSWORD"; then
  echo "password: ALTER USER ran but the new password does not log in" >&2
  exit 1
fi
if ! MYSQL_PWD="$HEALTH_PASSWORD" mysql --protocol=TCP --host="$MYSQL_HOST" --port="$MYSQL_PORT" \
    --user="$HEALTH_USER" --connect-timeout=5 -N -B \
    -e "SELECT root_version FROM \`$OPERATOR_SCHEMA\`.credentials WHERE id = 1" >/dev/null; then
  echo "password: the health account $HEALTH_USER cannot read $OPERATOR_SCHEMA.credentials" >&2
  exit 1
fi
echo "password: set; health account $HEALTH_USER set"
