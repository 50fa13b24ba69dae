# Verify /backup/$BACKUP_FILE: start a throwaway server in this pod (the instance's image,
# its own entrypoint, an empty data directory, root without a password on 127.0.0.1 only),
# load the dump into $MYSQL_DATABASE, compute the per-table figures ($FIGURES_SQL) and
# compare them with /backup/$BACKUP_FILE.figures, taken from the dump's own snapshot.
# Exit 0: verified. Exit 3: the backup is not good (the reason, naming the first table that
# differs, is the last line and the termination message). Any other exit: the verification
# itself could not run to its verdict (the throwaway server did not start, went away, or
# a query failed on it): the backup is kept, and verified again. Env: MYSQL_DATABASE,
# BACKUP_FILE, FIGURES_SQL, START_TIMEOUT. Run by bash (pipefail). The client gets every value
# as --option=value (--database="$MYSQL_DATABASE"), never as a word it could read as an option.
set -euo pipefail
unset MYSQL_PWD MYSQL_HOST || true
verdict() {
  printf '%s\n' "$1" > /dev/termination-log 2>/dev/null || true
  echo "verify: $1"
  exit "$2"
}
file="/backup/$BACKUP_FILE"
[ -f "$file" ] || verdict "$BACKUP_FILE is not on the backup volume" 3
[ -f "$file.figures" ] || verdict "$BACKUP_FILE has no figures file ($BACKUP_FILE.figures) to compare with" 3
size=$(wc -c < "$file")
case "$(tail -n 1 "$file")" in
  "-- Dump completed"*) ;;
  *) verdict "$BACKUP_FILE ($size bytes) has no mysqldump completion trailer: it is truncated or not a dump" 3 ;;
esac
server=mysqld
command -v mariadbd >/dev/null 2>&1 && server=mariadbd
echo "verify: starting a throwaway $server"
MYSQL_ALLOW_EMPTY_PASSWORD=yes MYSQL_DATABASE="$MYSQL_DATABASE" \
  docker-entrypoint.sh "$server" --bind-address=127.0.0.1 > /tmp/server.log 2>&1 &
client() { mysql --protocol=TCP --host=127.0.0.1 --port=3306 --user=root --connect-timeout=5 "$@"; }
waited=0
until client --database="$MYSQL_DATABASE" -e 'SELECT 1' >/dev/null 2>&1; do
  if [ "$waited" -ge "$START_TIMEOUT" ]; then
    tail -n 20 /tmp/server.log >&2
    verdict "the throwaway server did not start within ${waited}s" 1
  fi
  sleep 2
  waited=$((waited + 2))
done
echo "verify: loading $BACKUP_FILE ($size bytes)"
# a refusal is the backup's fault only while the throwaway server still answers: one that
# went away (killed, out of memory) could not verify anything
alive() { client -e 'SELECT 1' >/dev/null 2>&1; }
if ! client --database="$MYSQL_DATABASE" < "$file" 2> /tmp/load.err; then
  alive || verdict "the throwaway server went away while $BACKUP_FILE was loading: $(tail -n 1 /tmp/load.err)" 1
  verdict "$BACKUP_FILE does not load: $(tail -n 2 /tmp/load.err | tr '\n' ' ')" 3
fi
if ! client -N -B --database="$MYSQL_DATABASE" --execute="$FIGURES_SQL" > /tmp/figures.raw 2> /tmp/figures.err; then
  alive || verdict "the throwaway server went away during the figures query: $(tail -n 1 /tmp/figures.err)" 1
  verdict "the figures query failed on the throwaway server: $(tail -n 1 /tmp/figures.err)" 1
fi
LC_ALL=C sort /tmp/figures.raw > /tmp/figures
LC_ALL=C sort "$file.figures" > /tmp/wanted
# The first table (in name order) whose row count or checksum differs, or that one side
# lacks: the two lists joined on the table's name ("-" for a side without it).
difference=$(LC_ALL=C join -t "$(printf '\t')" -a 1 -a 2 -e - -o 0,1.2,1.3,2.2,2.3 /tmp/wanted /tmp/figures | awk -F '\t' '
  $4 == "-" && $5 == "-" { print "table `" $1 "` is missing after the load"; exit }
  $2 == "-" && $3 == "-" { print "table `" $1 "` is not in the snapshot the dump was taken from"; exit }
  $2 != $4 || $3 != $5 {
    print "table `" $1 "` differs: " $2 " rows (checksum " $3 ") in the snapshot, " $4 " rows (checksum " $5 ") after the load"
    exit
  }')
[ -z "$difference" ] || verdict "$BACKUP_FILE: $difference" 3
tables=$(wc -l < /tmp/figures)
rows=$(awk -F '\t' '{ n += $2 } END { print n + 0 }' /tmp/figures)
verdict "verified tables=$tables rows=$rows size=$size" 0
