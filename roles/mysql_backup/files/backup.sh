# Dump $MYSQL_DATABASE from the server behind the Service to /backup/$BACKUP_FILE (default:
# <Job name>.sql, the Job's name from $JOB_NAME), with /backup/$BACKUP_FILE.figures: the
# per-table row counts and checksums ($FIGURES_SQL) of the very snapshot the dump holds.
# With the server's binary logs archived (spec.backup.pointInTime), also
# /backup/$BACKUP_FILE.position: where that snapshot is in the binary logs.
# Env: MYSQL_HOST, MYSQL_PORT, MYSQL_DATABASE, CONNECT_TIMEOUT, FIGURES_SQL, BACKUP_FILE or
# JOB_NAME, OPERATOR_SCHEMA (default mysql_operator), and MYSQL_PWD (the password travels in the environment only). The dump has no
# CREATE DATABASE/USE, so the restore loads it into whatever database it is given.
#
# One snapshot for both: a session takes FLUSH TABLES WITH READ LOCK (writes wait) and opens
# its consistent snapshot; mysqldump --single-transaction then opens its own; once the server
# lists mysqldump's transaction (a root transaction newer than the lock), the lock is
# released. No write can commit between the two snapshots, so they see the same data. The
# figures are then computed in the first snapshot while the dump runs. Writes wait only
# from the lock to mysqldump's START TRANSACTION.
#
# A refusal the server calls transient (DDL during the dump: "Table definition has changed,
# please retry transaction"; a lock wait timeout; a deadlock) is met by taking the whole
# backup again, up to DUMP_TRIES times (default 3) RETRY_PAUSE seconds apart (default 5),
# before the backup fails.
#
# Files are written under temporary names and renamed only once mysqldump succeeded and
# wrote its completion trailer (figures first, dump last), so a file name never refers to a
# partial dump. The last line of output (and /dev/termination-log) is a summary.
#
# With SHIP_TO set (the bucket's s3:// URL: spec.backup.s3), the dump is not written to a
# file at all: it is streamed to the objects container of the same pod (mysql_common's
# files/objects.sh, MODE=ship), which compresses, encrypts and uploads it as it comes. /backup
# is then the pod's own scratch volume, shared by both containers, and holds only the
# hand-over: try <n>'s dump goes through the FIFO .stream.<n>, the verdict on it (ok or
# retry) is written to .try.<n> once mysqldump has ended, the figures and position files
# are written as without a bucket, and .dump.ended says this script has ended (whatever
# its verdicts). A failure of the objects container, written to .objects.failed, ends the
# backup with its words; the read lock is taken only once .objects.ready says that
# container reached the bucket.
set -eu
BACKUP_FILE=${BACKUP_FILE:-$JOB_NAME.sql}
SHIP_TO=${SHIP_TO:-}
work=$(mktemp -d)
tmp="/backup/.$BACKUP_FILE.partial"
figures_tmp="/backup/.$BACKUP_FILE.figures.partial"
position_tmp="/backup/.$BACKUP_FILE.position.partial"
lock_pid='' dump_pid=''
cleanup() {
  [ -z "$lock_pid" ] || kill "$lock_pid" 2>/dev/null || true
  stop_dump
  rm -f "$tmp" "$figures_tmp" "$position_tmp"
  rm -rf "$work"
  if [ -n "$SHIP_TO" ]; then
    : > /backup/.dump.ended
    # a reader that opened a stream nobody writes any more gets its end of file (an open
    # for reading and writing does not wait for a reader); the objects container reads
    # .dump.ended before it opens a stream, this second covers its check-then-open
    sleep 1
    for fifo in /backup/.stream.*; do
      if [ -p "$fifo" ]; then exec 4<> "$fifo"; exec 4>&-; fi
    done
  fi
}
trap cleanup EXIT
fail() {
  if [ -n "$SHIP_TO" ] && [ -s /backup/.objects.failed ]; then
    set -- "$(cat /backup/.objects.failed)"
  fi
  echo "backup: $*" >&2
  printf 'backup of %s failed: %s\n' "$MYSQL_DATABASE" "$*" > /dev/termination-log 2>/dev/null || true
  exit 1
}
# mysqldump of the current try, stopped (its stream then ends) for a retry or a failure
stop_dump() {
  if [ -n "$dump_pid" ]; then
    [ ! -s "$d/dump.pid" ] || kill "$(cat "$d/dump.pid")" 2>/dev/null || true
    kill "$dump_pid" 2>/dev/null || true
  fi
  dump_pid=''
}
# the objects container's failure, checked while this script waits
shipping_failed() {
  [ -n "$SHIP_TO" ] && [ -s /backup/.objects.failed ]
}
client() {
  mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot --connect-timeout=5 "$@"
}
waited=0
until client -e 'SELECT 1' "$MYSQL_DATABASE" >/dev/null 2>&1; do
  if [ "$waited" -ge "$CONNECT_TIMEOUT" ]; then
    fail "$MYSQL_HOST:$MYSQL_PORT did not accept a login to $MYSQL_DATABASE within ${waited}s"
  fi
  sleep 3
  waited=$((waited + 3))
done

# The server's refusals that a new snapshot does not meet again: a table changed by DDL after
# the snapshot opened (ERROR 1412), a lock wait timeout (1205), a deadlock (1213).
transient() {
  grep -q -e 'Table definition has changed' -e 'Lock wait timeout exceeded' -e 'Deadlock found' "$1"
}
retry_because() {
  printf '%s\n' "$*" > "$work/retry"
}

# One try: the lock, both snapshots, the figures and the dump, in $work/try<n>. A refusal
# the server calls transient leaves $work/retry (its reason) and returns; any other fails.
take() {
  d="$work/try$1"
  mkdir "$d"
  # The session that holds the lock, then the figures' snapshot; fed through a FIFO.
  mkfifo "$d/in"
  # (set +e in the background subshells: under set -e a failed client would end the subshell
  # before it wrote its exit code, and the script would wait for it forever)
  (set +e; client -N -B -n "$MYSQL_DATABASE" < "$d/in" > "$d/out" 2> "$d/err"; echo $? > "$d/lock.rc") &
  lock_pid=$!
  exec 3> "$d/in"
  cat >&3 <<'SQL'
SET SESSION lock_wait_timeout = 60;
FLUSH TABLES WITH READ LOCK;
START TRANSACTION WITH CONSISTENT SNAPSHOT;
SELECT CONCAT('locked ', CONNECTION_ID());
SQL
  until grep -q '^locked ' "$d/out"; do
    if [ -f "$d/lock.rc" ]; then
      transient "$d/err" && { retry_because "the read lock: $(tail -n 1 "$d/err")"; return 0; }
      fail "could not take the read lock: $(tail -n 3 "$d/err")"
    fi
    sleep 0.2
  done
  lock_id=$(sed -n 's/^locked //p' "$d/out")
  # Where the snapshot is in the binary logs, read while the lock holds every commit back:
  # "<server> <log> <position> <time>", for point-in-time recovery (the server's logs are
  # archived as <server> when $OPERATOR_SCHEMA.binlog_archive names it). MySQL 8.4+ has only
  # SHOW BINARY LOG STATUS, MariaDB 10.11 SHOW MASTER STATUS.
  rm -f "$position_tmp"
  server=$(client -N -B -e "SELECT server FROM \`${OPERATOR_SCHEMA:-mysql_operator}\`.binlog_archive WHERE id = 1" 2>/dev/null || true)
  if [ -n "$server" ]; then
    status=$(client -N -B -e 'SHOW MASTER STATUS' 2>/dev/null || client -N -B -e 'SHOW BINARY LOG STATUS' 2>/dev/null || true)
    # shellcheck disable=SC2046 # the log and the position, split into two words
    set -- $(printf '%s\n' "$status" | head -n 1 | cut -f1,2)
    [ "$#" -ne 2 ] || printf '%s %s %s %s\n' "$server" "$1" "$2" "$(date +%s)" > "$position_tmp"
  fi

  set -- --single-transaction --routines --triggers
  # Oracle MySQL's mysqldump writes SET @@GLOBAL.GTID_PURGED into the dump when the server
  # has GTIDs: a restore that is retried after a partial load (the server killed mid-way)
  # then fails on it ("must not overlap with @@GLOBAL.GTID_EXECUTED"). A backup restored
  # into a new server needs no GTID state. MariaDB's mysqldump has no such option.
  if mysqldump --help 2>/dev/null | grep -q -e '--set-gtid-purged'; then
    set -- "$@" --set-gtid-purged=OFF
  fi
  out=$tmp
  if [ -n "$SHIP_TO" ]; then
    out=/backup/.stream.$try
    mkfifo "$out"
  fi
  # (mysqldump's own pid in dump.pid: a retry stops it, which ends its stream)
  (set +e; mysqldump --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot "$@" "$MYSQL_DATABASE" \
     > "$out" 2> "$d/dump.err" & echo $! > "$d/dump.pid"; wait $!; echo $? > "$d/dump.rc") &
  dump_pid=$!
  waited=0 misses=0
  while :; do
    # a failed look (a connection refused or timed out on a loaded node) is tried again; ten
    # in a row fail the backup, with the client's own words
    if started=$(client -N -B -e "SELECT COUNT(*) FROM information_schema.INNODB_TRX AS t
        JOIN information_schema.PROCESSLIST AS p ON p.ID = t.trx_mysql_thread_id
        WHERE p.USER = 'root' AND t.trx_mysql_thread_id > $lock_id
          AND t.trx_mysql_thread_id <> CONNECTION_ID()" 2> "$d/look.err"); then
      misses=0
      [ "$started" -eq 0 ] || break
    else
      misses=$((misses + 1))
      [ "$misses" -lt 10 ] || fail "could not read the server's transactions: $(tail -n 2 "$d/look.err")"
    fi
    [ ! -f "$d/dump.rc" ] || break
    ! shipping_failed || fail "the objects container failed"
    [ "$waited" -lt 600 ] || fail "mysqldump did not open its snapshot within 60s"
    sleep 0.1
    waited=$((waited + 1))
  done
  printf 'UNLOCK TABLES;\n%s\nSELECT %s;\nCOMMIT;\n' "$FIGURES_SQL" "'figures-end'" >&3
  exec 3>&-
  while [ ! -f "$d/lock.rc" ]; do sleep 0.2; done
  if [ "$(cat "$d/lock.rc")" != 0 ]; then
    transient "$d/err" && { retry_because "the figures query: $(tail -n 1 "$d/err")"; return 0; }
    fail "the figures query failed: $(tail -n 3 "$d/err")"
  fi
  lock_pid=''
  sed -n '/^locked /,/^figures-end$/p' "$d/out" | sed '1d;$d' | LC_ALL=C sort > "$d/figures"
  grep -q '^figures-end$' "$d/out" || fail "the figures query gave no result"

  while [ ! -f "$d/dump.rc" ]; do
    ! shipping_failed || fail "the objects container failed"
    sleep 0.5
  done
  dump_pid=''
  if [ "$(cat "$d/dump.rc")" != 0 ]; then
    # a stream that broke off: the objects container's reason, when it gives one
    if [ -n "$SHIP_TO" ]; then
      n=0
      while ! shipping_failed && [ "$n" -lt 25 ]; do sleep 0.2; n=$((n + 1)); done
    fi
    ! shipping_failed || fail "the objects container failed"
    transient "$d/dump.err" && { retry_because "mysqldump: $(tail -n 1 "$d/dump.err")"; return 0; }
    fail "mysqldump failed: $(tail -n 3 "$d/dump.err")"
  fi
  # (a streamed dump's trailer is checked by the objects container, which reads it)
  [ -n "$SHIP_TO" ] || case "$(tail -n 1 "$tmp")" in
    "-- Dump completed"*) ;;
    *) fail "the dump of $MYSQL_DATABASE has no completion trailer" ;;
  esac
}

if [ -n "$SHIP_TO" ]; then
  # the read lock is taken only once the objects container is there to read the stream
  waited=0
  until [ -f /backup/.objects.ready ]; do
    ! shipping_failed || fail "the objects container failed"
    [ "$waited" -lt 1500 ] || fail "the objects container did not start within 300s"
    sleep 0.2
    waited=$((waited + 1))
  done
fi
tries=${DUMP_TRIES:-3} try=1
while :; do
  rm -f "$work/retry"
  take "$try"
  [ -f "$work/retry" ] || break
  reason=$(cat "$work/retry")
  [ "$try" -lt "$tries" ] || fail "$reason (transient, but still after $tries tries)"
  echo "backup: try $try of $tries: $reason; trying again in ${RETRY_PAUSE:-5}s" >&2
  [ -z "$SHIP_TO" ] || echo retry > "/backup/.try.$try"
  [ -z "$lock_pid" ] || kill "$lock_pid" 2>/dev/null || true
  stop_dump
  lock_pid=''
  exec 3>&-
  rm -f "$tmp" "$figures_tmp"
  sleep "${RETRY_PAUSE:-5}"
  # a reader still waiting to open the dropped try's stream gets its end of file
  if [ -p "/backup/.stream.$try" ]; then exec 4<> "/backup/.stream.$try"; exec 4>&-; fi
  try=$((try + 1))
done
cp "$work/try$try/figures" "$figures_tmp"
mv "$figures_tmp" "/backup/$BACKUP_FILE.figures"
if [ -f "$position_tmp" ]; then mv "$position_tmp" "/backup/$BACKUP_FILE.position"; else rm -f "/backup/$BACKUP_FILE.position"; fi
tables=$(wc -l < "/backup/$BACKUP_FILE.figures")
rows=$(awk -F '\t' '{ n += $2 } END { print n + 0 }' "/backup/$BACKUP_FILE.figures")
if [ -n "$SHIP_TO" ]; then
  echo ok > "/backup/.try.$try"
  echo "backup: streamed $BACKUP_FILE ($tables tables, $rows rows) to the objects container for $SHIP_TO"
  exit 0
fi
mv "$tmp" "/backup/$BACKUP_FILE"
trap - EXIT
rm -rf "$work"
size=$(wc -c < "/backup/$BACKUP_FILE")
summary="file=$BACKUP_FILE size=$size tables=$tables rows=$rows"
printf '%s\n' "$summary" > /dev/termination-log 2>/dev/null || true
echo "backup: wrote /backup/$BACKUP_FILE ($size bytes)"
echo "$summary"
