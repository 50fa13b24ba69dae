# Replace the contents of $MYSQL_DATABASE on the server behind the Service with a backup,
# never leaving the database worse than it was: run by the restore Job of a new instance
# (the mysql role) and by the load Job of a MySQLRestore (the mysql_restore role), in the
# instance's server image.
#
# 1. The backup: /backup/$BACKUP_FILE (for a point in time, the one the fetch chose,
#    /backup/chosen), present and ending with mysqldump's completion trailer.
# 2. A point in time (/backup/binlogs/replay: the backup's position, then the archived
#    binary logs the fetch brought): a throwaway server in this pod (this image, its own
#    entrypoint, an empty data directory, 127.0.0.1 only) loads the backup, and its
#    replication SQL thread applies the logs as relay logs, filtered by
#    replicate-wild-do-table=<database>.%: every event that touches the database's tables,
#    whatever the session's default database (an ALTER TABLE db.t run while another database
#    was selected), and nothing of another database (a DROP TABLE other.x run while db was
#    selected). The logs end before the first transaction with an event at or after
#    $STOP_DATETIME (UTC, whole seconds: the second before it is included). A transaction the
#    throwaway server cannot apply fails the restore here, naming the event, before the live
#    database is touched. Its result, dumped again, is what is loaded.
# 3. A safety copy of the live database (mysqldump, checked for its trailer), then the
#    database dropped, re-created with its character set and collation, and loaded. A load
#    that fails puts the safety copy back, and the failure says whether that worked.
#
# Env: MYSQL_HOST, MYSQL_PORT, MYSQL_DATABASE (a name the CRD restricts to [A-Za-z0-9_$-], not
# starting with '-'), CONNECT_TIMEOUT, BACKUP_FILE, START_TIMEOUT (the throwaway server's
# start), STOP_DATETIME and TZ=UTC (a point in time), MYSQL_PWD (the live server's root
# password: it travels in the environment only, never to the throwaway server). The last line of output (and
# /dev/termination-log) is a summary; a failure's says what happened to the live database.
# The clients get every value as --option=value (--database="$MYSQL_DATABASE") and mysqldump
# its database after --: a name is never a word they could read as an option.
set -eu
[ ! -f /backup/chosen ] || BACKUP_FILE=$(cat /backup/chosen)
work=$(mktemp -d)
scratch_pid=''
trap 'stop_scratch; rm -rf "$work"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
fail() {
  echo "restore: $*" >&2
  printf 'restore of %s failed: %s\n' "$BACKUP_FILE" "$*" > /dev/termination-log 2>/dev/null || true
  exit 1
}
live() {
  mysql --protocol=TCP --host="$MYSQL_HOST" --port="$MYSQL_PORT" --user=root --connect-timeout=5 "$@"
}
scratch() {
  env -u MYSQL_PWD mysql --protocol=TCP --host=127.0.0.1 --port=3306 --user=root --connect-timeout=5 "$@"
}
stop_scratch() {
  [ -z "$scratch_pid" ] || kill "$scratch_pid" 2>/dev/null || true
  scratch_pid=''
}
trailer_ok() {
  case "$(tail -n 1 "$1")" in "-- Dump completed"*) return 0 ;; *) return 1 ;; esac
}
# until "$@" logs in (SELECT 1), at most $1 seconds
wait_login() {
  limit=$1
  shift
  waited=0
  until "$@" -e 'SELECT 1' >/dev/null 2>&1; do
    [ "$waited" -lt "$limit" ] || return 1
    sleep 2
    waited=$((waited + 2))
  done
}
# mysqldump's options: one consistent snapshot, routines and triggers, and no GTID state
# (Oracle MySQL's would clash with the GTIDs of the server it is loaded into)
dump_options='--single-transaction --routines --triggers'
if mysqldump --help 2>/dev/null | grep -q -e '--set-gtid-purged'; then
  dump_options="$dump_options --set-gtid-purged=OFF"
fi
# the database (after --: a name is never read as an option) to file $2, from either server
# shellcheck disable=SC2086 # the options are words
live_dump() {
  mysqldump --protocol=TCP --host="$MYSQL_HOST" --port="$MYSQL_PORT" --user=root $dump_options -- "$MYSQL_DATABASE" > "$1"
}
# shellcheck disable=SC2086 # the options are words
scratch_dump() {
  env -u MYSQL_PWD mysqldump --protocol=TCP --host=127.0.0.1 --port=3306 --user=root $dump_options -- "$MYSQL_DATABASE" > "$1"
}
# a field of the replication status in $work/status (MariaDB's or MySQL's name of it)
field() {
  sed -n "s/^ *$1: //p" "$work/status" | head -n 1
}

file=/backup/$BACKUP_FILE
[ -f "$file" ] || fail "$BACKUP_FILE is not on the backup volume; the database was not touched"
trailer_ok "$file" || fail "$BACKUP_FILE has no mysqldump completion trailer (truncated?); the database was not touched"
wait_login "$CONNECT_TIMEOUT" live \
  || fail "$MYSQL_HOST:$MYSQL_PORT did not accept a login within ${CONNECT_TIMEOUT}s; the database was not touched"

load=$file replayed=''
logs=''
[ ! -f /backup/binlogs/replay ] || logs=$(sed 1d /backup/binlogs/replay | grep -c . || true)
if [ -n "$logs" ] && [ "$logs" -gt 0 ]; then
  start=$(head -n 1 /backup/binlogs/replay)
  case "$start" in ''|*[!0-9]*) fail "the replay list's start position '$start' is not a number; the database was not touched" ;; esac
  # the throwaway server's data directory is the image's own (/var/lib/mysql, empty in this
  # pod), as its entrypoint wants; the relay logs go there too
  server=mysqld
  command -v mariadbd >/dev/null 2>&1 && server=mariadbd
  pattern=$(printf '%s' "$MYSQL_DATABASE" | sed 's/[_%\\]/\\&/g').%
  echo "restore: a throwaway $server replays the binary logs into $MYSQL_DATABASE"
  env -u MYSQL_PWD -u MYSQL_HOST -u MYSQL_PORT MYSQL_ALLOW_EMPTY_PASSWORD=yes MYSQL_DATABASE="$MYSQL_DATABASE" \
    docker-entrypoint.sh "$server" --bind-address=127.0.0.1 --skip-log-bin --server-id=4242 \
      --replicate-same-server-id=1 --relay-log=/var/lib/mysql/relay "--replicate-wild-do-table=$pattern" \
      > "$work/server.log" 2>&1 &
  scratch_pid=$!
  if ! wait_login "${START_TIMEOUT:-300}" scratch --database="$MYSQL_DATABASE"; then
    tail -n 20 "$work/server.log" >&2
    fail "the throwaway server did not start within ${START_TIMEOUT:-300}s; the database was not touched"
  fi
  scratch --database="$MYSQL_DATABASE" < "$file" 2> "$work/load.err" \
    || fail "$BACKUP_FILE does not load into the throwaway server: $(tail -n 2 "$work/load.err" | tr '\n' ' ')"
  # The logs become the throwaway server's relay logs, in order; the one holding the first
  # transaction with an event at or after the stop time is cut before that transaction,
  # and the later ones are left out. mysqlbinlog's header lines give each event's position
  # ("# at N") and time ("#YYMMDD HH:MM:SS ... <type> ..."); a transaction starts at its GTID
  # event (MariaDB's and MySQL's alike); the logs' own bookkeeping events are not data.
  stop=$(printf '%s' "$STOP_DATETIME" | sed 's/^..\(..\)-\(..\)-\(..\) /\1\2\3 /')
  # (and the GTID of the last transaction before the cut: the replay is done only once the
  # throwaway server has applied it, or a damaged log could end it early without an error)
  : > "$work/relay.index"
  n=0 cut='' last=''
  sed 1d /backup/binlogs/replay > "$work/logs"
  while IFS= read -r log; do
    case "$log" in ''|*[!A-Za-z0-9._-]*|.*) fail "the replay list names '$log', not a binary log; the database was not touched" ;; esac
    n=$((n + 1))
    relay=$(printf 'relay.%06d' "$n")
    from=4
    [ "$n" -gt 1 ] || from=$start
    mysqlbinlog --start-position="$from" "/backup/binlogs/$log" 2> "$work/scan.err" | awk -v stop="$stop" '
      /^# at [0-9]+$/ { pos = $3; next }
      /^SET @@SESSION.GTID_NEXT= \047/ {
        g = $0; sub(/^SET @@SESSION.GTID_NEXT= \047/, "", g); sub(/\047.*$/, "", g)
        if (intrx && g != "ANONYMOUS" && g != "AUTOMATIC") gtid = g
        next
      }
      /^#[0-9][0-9][0-9][0-9][0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] / {
        if ($0 ~ /(Rotate|Format_desc|Start: binlog|Previous-GTIDs|Previous_gtids|Gtid_list|Binlog_checkpoint|Stop)/) next
        if ($0 ~ /[ \t](GTID|Gtid|Anonymous_GTID)([ \t]|$)/) {
          if (intrx) done = gtid
          intrx = 1; trx = pos; gtid = ""
          if (match($0, / GTID [0-9]+-[0-9]+-[0-9]+/)) gtid = substr($0, RSTART + 6, RLENGTH - 6)
        }
        if (substr($1, 2) " " $2 >= stop) { print "cut " (trx != "" ? trx : pos); cut = 1; exit }
      }
      END {
        if (!cut && intrx) done = gtid
        if (done != "") print "last " done
      }' > "$work/scan" || fail "could not read $log: $(tail -n 2 "$work/scan.err" | tr '\n' ' '); the database was not touched"
    # (mysqlbinlog's own exit is lost in the pipe: what it says is read instead)
    ! grep -q -e '^ERROR' "$work/scan.err" \
      || fail "mysqlbinlog could not read $log: $(grep -m 1 '^ERROR' "$work/scan.err"); the database was not touched"
    at=$(sed -n 's/^cut //p' "$work/scan")
    found=$(sed -n 's/^last //p' "$work/scan")
    [ -z "$found" ] || last=$found
    if [ -n "$at" ]; then
      head -c "$at" "/backup/binlogs/$log" > "/var/lib/mysql/$relay"
      cut="$log:$at"
    else
      cp "/backup/binlogs/$log" "/var/lib/mysql/$relay"
    fi
    echo "/var/lib/mysql/$relay" >> "$work/relay.index"
    [ -z "$at" ] || break
  done < "$work/logs"
  cp "$work/relay.index" /var/lib/mysql/relay.index
  echo "restore: applying $n binary logs from position $start${cut:+, cut at $cut (the first transaction at or after $STOP_DATETIME UTC)}"
  if scratch -N -B -e 'SELECT @@version' | grep -qi mariadb; then
    scratch -e "CHANGE MASTER TO MASTER_HOST='replay.invalid', MASTER_USE_GTID=no, RELAY_LOG_FILE='relay.000001', RELAY_LOG_POS=$start; START SLAVE SQL_THREAD" \
      2> "$work/replay.err" || fail "the replay did not start: $(tail -n 2 "$work/replay.err" | tr '\n' ' '); the database was not touched"
    status='SHOW SLAVE STATUS'
  else
    scratch -e "CHANGE REPLICATION SOURCE TO SOURCE_HOST='replay.invalid', SOURCE_AUTO_POSITION=0, RELAY_LOG_FILE='relay.000001', RELAY_LOG_POS=$start; START REPLICA SQL_THREAD" \
      2> "$work/replay.err" || fail "the replay did not start: $(tail -n 2 "$work/replay.err" | tr '\n' ' '); the database was not touched"
    status='SHOW REPLICA STATUS'
  fi
  # done: the SQL thread has read all the relay logs (and says so twice, a second apart,
  # at the same place); failed: it stopped with an error, which names the event
  previous=''
  while :; do
    scratch -E --execute="$status" > "$work/status" 2> "$work/status.err" || fail "could not read the replay's state: $(tail -n 1 "$work/status.err")"
    errno=$(field 'Last_SQL_Errno')
    if [ -n "$errno" ] && [ "$errno" != 0 ]; then
      fail "the replay of the binary logs stopped at $(field 'Relay_Master_Log_File')$(field 'Relay_Source_Log_File'):$(field 'Exec_Master_Log_Pos')$(field 'Exec_Source_Log_Pos'): $(field 'Last_SQL_Error'); the database was not touched"
    fi
    state=$(field 'Slave_SQL_Running_State')$(field 'Replica_SQL_Running_State')
    now="$(field 'Relay_Log_File') $(field 'Relay_Log_Pos')"
    case "$state" in
      *"has read all relay log"*) [ "$now" = "$previous" ] && break ;;
    esac
    previous=$now
    sleep 1
  done
  case "$last" in
    '') applied=1 ;;
    *[!0-9-]*)
      case "$last" in *[!0-9A-Fa-f:-]*) fail "the logs name the transaction '$last', not a GTID; the database was not touched" ;; esac
      applied=$(scratch -N -B --execute="SELECT GTID_SUBSET('$last', @@GLOBAL.gtid_executed)") ;;
    *) applied=$(scratch -N -B --execute="SELECT FIND_IN_SET('$last', REPLACE(@@GLOBAL.gtid_slave_pos, ' ', '')) > 0") ;;
  esac
  [ "$applied" = 1 ] || fail "the replay ended before transaction $last, the last one before $STOP_DATETIME UTC (a log is damaged?); the database was not touched"
  scratch_dump "$work/replayed.sql" 2> "$work/dump.err" \
    || fail "could not dump the replayed database: $(tail -n 2 "$work/dump.err" | tr '\n' ' '); the database was not touched"
  trailer_ok "$work/replayed.sql" || fail "the dump of the replayed database has no completion trailer; the database was not touched"
  stop_scratch
  load=$work/replayed.sql
  replayed=" binlogs=$n until=$(printf '%s' "$STOP_DATETIME" | tr ' ' T)Z"
fi

# the safety copy: the live database as it is, with its character set and collation
exists=$(live -N -B -e "SELECT CONCAT(DEFAULT_CHARACTER_SET_NAME, ' ', DEFAULT_COLLATION_NAME) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '$MYSQL_DATABASE'" 2> "$work/live.err") \
  || fail "could not read database $MYSQL_DATABASE: $(tail -n 1 "$work/live.err"); the database was not touched"
create="CREATE DATABASE \`$MYSQL_DATABASE\`"
if [ -n "$exists" ]; then
  create="$create CHARACTER SET ${exists%% *} COLLATE ${exists#* }"
  live_dump "$work/safety.sql" 2> "$work/safety.err" \
    || fail "could not take a safety copy of $MYSQL_DATABASE: $(tail -n 2 "$work/safety.err" | tr '\n' ' '); the database was not touched"
  trailer_ok "$work/safety.sql" || fail "the safety copy of $MYSQL_DATABASE has no completion trailer; the database was not touched"
fi
replace() {
  live -e "DROP DATABASE IF EXISTS \`$MYSQL_DATABASE\`; $create" 2> "$work/replace.err" \
    && live --database="$MYSQL_DATABASE" < "$1" 2>> "$work/replace.err"
}
echo "restore: replacing the contents of $MYSQL_DATABASE with $BACKUP_FILE${replayed:+ and the binary logs after it}"
if ! replace "$load"; then
  reason=$(tail -n 2 "$work/replace.err" | tr '\n' ' ')
  if [ -z "$exists" ]; then
    live -e "DROP DATABASE IF EXISTS \`$MYSQL_DATABASE\`" 2>/dev/null \
      && fail "the load stopped: $reason; the database did not exist before and was removed again"
    fail "the load stopped: $reason; the database did not exist before, and could not be removed again (it holds a partial load)"
  fi
  if wait_login "$CONNECT_TIMEOUT" live && replace "$work/safety.sql"; then
    fail "the load stopped: $reason; the database was put back as it was before the restore (its safety copy)"
  fi
  fail "the load stopped: $reason; putting the safety copy back failed too ($(tail -n 2 "$work/replace.err" | tr '\n' ' ')): the database may hold a partial load"
fi
tables=$(live -N -B --database="$MYSQL_DATABASE" -e "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")
summary="file=$BACKUP_FILE size=$(wc -c < "$file") tables=$tables$replayed"
printf '%s\n' "$summary" > /dev/termination-log 2>/dev/null || true
echo "$summary"
