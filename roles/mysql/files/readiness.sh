# Readiness of the server container: a login as root to MYSQL_DATABASE over TCP with the
# password of the credentials Secret (MYSQL_OPERATOR_PASSWORD, given to the client in
# MYSQL_PWD, never on a command line). On failure it prints one line for the pod's
# Unhealthy event; the operator reads "credentials rejected" there to tell a server that
# runs but refuses the password from one that is not up yet.
if out=$(MYSQL_PWD="$MYSQL_OPERATOR_PASSWORD" mysql --protocol=TCP -h 127.0.0.1 -P "$MYSQL_OPERATOR_PORT" \
    -uroot --connect-timeout=3 --database="$MYSQL_DATABASE" -e 'SELECT 1' 2>&1 >/dev/null); then
  exit 0
fi
case $out in
  *"ERROR 1044"* | *"ERROR 1045"* | *"ERROR 1049"* | *"ERROR 1130"*)
    echo "credentials rejected: $out" ;;
  *) echo "no login yet: $out" ;;
esac
exit 1
