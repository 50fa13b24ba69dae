# Verify /backup/$BACKUP_FILE: start a throwaway server in this pod (the instance's image,
# its own entrypoint, an empty data directory, root without a password on 127.0.0.1 only),
# load the dump into $MYSQL_DATABASE, compute the per-table figures ($FIGURES_SQL) and
# compare them with /backup/$BACKUP_FILE.figures, taken from the dump's own snapshot.
# Exit 0: verified. Exit 3: the backup is not good (the reason, naming the first table that
# differs, is the last line and the termination message). Any other exit: the verification
# itself could not run. Env: MYSQL_DATABASE, BACKUP_FILE, FIGURES_SQL, START_TIMEOUT.
set -eu
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
client() { mysql --protocol=TCP -h 127.0.0.1 -P 3306 -uroot --connect-timeout=5 "$@"; }
waited=0
until client -e 'SELECT 1' "$MYSQL_DATABASE" >/dev/null 2>&1; do
  if [ "$waited" -ge "$START_TIMEOUT" ]; then
    tail -n 20 /tmp/server.log >&2
    verdict "the throwaway server did not start within ${waited}s" 1
  fi
  sleep 2
  waited=$((waited + 2))
done
echo "verify: loading $BACKUP_FILE ($size bytes)"
client "$MYSQL_DATABASE" < "$file" 2> /tmp/load.err \
  || verdict "$BACKUP_FILE does not load: $(tail -n 2 /tmp/load.err | tr '\n' ' ')" 3
client -N -B "$MYSQL_DATABASE" -e "$FIGURES_SQL" | LC_ALL=C sort > /tmp/figures \
  || verdict "the figures query failed on the throwaway server" 1
# The first table whose row count or checksum differs, or that only one side has.
difference=$(LC_ALL=C awk -F '\t' '
  NR == FNR { want[$1] = $2 "\t" $3; next }
  { got[$1] = $2 "\t" $3 }
  END {
    for (t in want) names[t] = 1
    for (t in got) names[t] = 1
    n = 0
    for (t in names) sorted[++n] = t
    for (i = 2; i <= n; i++) { v = sorted[i]; j = i - 1
      while (j > 0 && sorted[j] > v) { sorted[j + 1] = sorted[j]; j-- }
      sorted[j + 1] = v }
    for (i = 1; i <= n; i++) { t = sorted[i]
      if (!(t in got)) { print "table `" t "` is missing after the load"; exit }
      if (!(t in want)) { print "table `" t "` is not in the snapshot the dump was taken from"; exit }
      if (want[t] != got[t]) { split(want[t], w, "\t"); split(got[t], g, "\t")
        print "table `" t "` differs: " w[1] " rows (checksum " w[2] ") in the snapshot, " \
              g[1] " rows (checksum " g[2] ") after the load"; exit } }
  }' "$file.figures" /tmp/figures)
[ -z "$difference" ] || verdict "$BACKUP_FILE: $difference" 3
tables=$(wc -l < /tmp/figures)
rows=$(awk -F '\t' '{ n += $2 } END { print n + 0 }' /tmp/figures)
verdict "verified tables=$tables rows=$rows size=$size" 0
