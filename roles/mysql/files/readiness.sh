# Readiness of the server container, which proves what the Ready condition says: the server
# accepts a login as root to MYSQL_DATABASE with the credentials Secret's password. Three
# steps, over TCP, passwords in MYSQL_PWD only (never on a command line) and every other value
# as an --option=value (a database name is never a word the client could read as an option):
# 1. the operator's health account (MYSQL_HEALTH_USER, its password from its own Secret in
#    the environment, never rotated) logs in and reads the version of the root password the
#    server has ($MYSQL_OPERATOR_SCHEMA.credentials, written by the operator's password Job);
# 2. root logs in with the password of this pod's copy of the credentials Secret (a volume,
#    which kubelet updates in the running pod when the Secret changes: no restart);
# 3. if root is refused but the copy's version differs from the server's, the operator has
#    just changed the password (its Job checked the new one logs in) and kubelet has not
#    updated the copy yet: ready. Refused with the same version: the server rejects the
#    Secret's password.
# On failure it prints one line for the pod's Unhealthy event; the operator reads
# "credentials rejected" there to tell a server that runs but refuses the password from
# one that is not up yet.
copy=/etc/mysql-operator/credentials
login() {
  mysql --protocol=TCP --host=127.0.0.1 --port="$MYSQL_OPERATOR_PORT" --connect-timeout=3 -N -B "$@"
}
rejected() {
  case $1 in
    *"ERROR 1044"* | *"ERROR 1045"* | *"ERROR 1049"* | *"ERROR 1130"*) return 0 ;;
  esac
  return 1
}
if ! server_version=$(MYSQL_PWD="$MYSQL_HEALTH_PASSWORD" login --user="$MYSQL_HEALTH_USER" \
    -e "SELECT root_version FROM \`$MYSQL_OPERATOR_SCHEMA\`.credentials WHERE id = 1" 2>&1); then
  if rejected "$server_version"; then
    echo "credentials rejected: health account $MYSQL_HEALTH_USER: $server_version"
  else
    echo "no login yet: $server_version"
  fi
  exit 1
fi
if out=$(MYSQL_PWD="$(cat "$copy/password" 2>/dev/null)" login --user=root \
    --database="$MYSQL_DATABASE" -e 'SELECT 1' 2>&1 >/dev/null); then
  exit 0
fi
if rejected "$out"; then
  if [ "$server_version" != "$(cat "$copy/password-version" 2>/dev/null)" ]; then
    exit 0
  fi
  echo "credentials rejected: $out"
else
  echo "no login yet: $out"
fi
exit 1
