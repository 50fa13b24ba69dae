# Dump $MYSQL_DATABASE from the server behind the Service to /backup/$BACKUP_FILE (default:
# <Job name>.sql, the Job's name from $JOB_NAME), with /backup/$BACKUP_FILE.figures: the
# per-table row counts and checksums ($FIGURES_SQL) of the very snapshot the dump holds.
# With the server's binary logs archived (spec.backup.pointInTime), also
# /backup/$BACKUP_FILE.position: where that snapshot is in the binary logs, and the backup's
# lineage (MYSQL_INSTANCE, the instance's <namespace>/<name>, and MYSQL_DATABASE): a
# point-in-time restore chooses among the backups of one instance and database.
# Env: MYSQL_HOST, MYSQL_PORT, MYSQL_DATABASE, MYSQL_INSTANCE, CONNECT_TIMEOUT, FIGURES_SQL,
# BACKUP_FILE or JOB_NAME, OPERATOR_SCHEMA (default mysql_operator), LOCK_WAIT and
# LOCK_TRIES (the lock's wait a try, default 5 s, and its tries, default 60), GUARD_WAIT (the
# wait for another backup of the server, default 600 s), and MYSQL_PWD (the password travels
# in the environment only). The dump has no CREATE DATABASE/USE, so the restore loads it
# into whatever database it is given. The clients get every value as --option=value
# (--database="$MYSQL_DATABASE") and mysqldump its database after --: a name is never a word
# they could read as an option.
#
# One snapshot for both: under a lock that holds back commits to the database (take says
# which, per server), a session opens its consistent snapshot and mysqldump
# --single-transaction opens its own; once the server lists mysqldump's transaction, the
# lock is released. No write can commit between the two snapshots, so they see the same
# data. The figures are then computed in the first snapshot while the dump runs. Writes
# wait only from the lock to mysqldump's START TRANSACTION; a long query holds up neither
# the lock nor them. One backup of a server runs at a time (a named lock).
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
lock_pid='' figures_pid='' guard_pid='' dump_pid=''
# the sessions of a try (the lock's, the figures'), ended: their locks go with them
end_sessions() {
  for pid in $lock_pid $figures_pid; do kill "$pid" 2>/dev/null || true; done
  lock_pid='' figures_pid=''
  exec 3>&- 5>&-
}
cleanup() {
  end_sessions
  [ -z "$guard_pid" ] || kill "$guard_pid" 2>/dev/null || true
  exec 6>&-
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
  mysql --protocol=TCP --host="$MYSQL_HOST" --port="$MYSQL_PORT" --user=root --connect-timeout=5 "$@"
}
waited=0
until client --database="$MYSQL_DATABASE" -e 'SELECT 1' >/dev/null 2>&1; do
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

# A session fed through a FIFO, in the background: session NAME N starts a client reading
# $d/NAME.in, writing $d/NAME.out and $d/NAME.err, and $d/NAME.rc once it has ended; fd N
# writes to it, and $NAME_pid is its subshell. (set +e in the background subshells: under
# set -e a failed client would end the subshell before it wrote its exit code, and the
# script would wait for it forever.)
session() {
  mkfifo "$d/$1.in"
  (set +e; client -N -B -n --database="$MYSQL_DATABASE" < "$d/$1.in" > "$d/$1.out" 2> "$d/$1.err"; echo $? 2>/dev/null > "$d/$1.rc") &
  eval "$1_pid=\$!; exec $2> \"\$d/\$1.in\""
}
# until session $1's output has a line starting with $2, or it has ended (return 1)
await() {
  until grep -q "^$2" "$d/$1.out"; do
    [ ! -f "$d/$1.rc" ] || return 1
    ! shipping_failed || fail "the objects container failed"
    sleep 0.1
  done
}

# One try: the lock, both snapshots, the position, the figures and the dump, in
# $work/try<n>. A refusal the server calls transient leaves $work/retry (its reason) and
# returns; any other fails.
#
# The lock blocks commits to the database, not reads, and never waits for a long query:
# MariaDB's BACKUP STAGE up to BLOCK_COMMIT (DDL and commits wait; a running SELECT does
# not hold it up), Oracle MySQL's LOCK INSTANCE FOR BACKUP (DDL waits) and LOCK TABLES ...
# READ of the database's tables (their writers wait; readers do not, and other databases
# go on). FLUSH TABLES WITH READ LOCK is not used: behind a long query it makes every
# statement on that query's tables wait for it, its own timeout or not. Under the lock the
# figures' session opens its snapshot and mysqldump opens its own (found by its connection:
# from this pod, newer than the figures' session); then the lock is let go. The position
# in the binary logs is that of the figures' snapshot: MariaDB says it
# (binlog_snapshot_file/position); on Oracle MySQL the position read under the lock is it.
# A lock not had within LOCK_WAIT seconds (a DDL statement runs) is tried again, up to
# LOCK_TRIES times, the writers meanwhile waiting at most LOCK_WAIT seconds each time.
take() {
  d="$work/try$1"
  mkdir "$d"
  lock_tries=0
  while :; do
    rm -f "$d"/lock.*
    session lock 3
    printf 'SET SESSION lock_wait_timeout = %s;\n' "${LOCK_WAIT:-5}" >&3
    if [ "$flavour" = mariadb ]; then
      printf '%s\n' 'BACKUP STAGE START;' 'BACKUP STAGE FLUSH;' 'BACKUP STAGE BLOCK_DDL;' 'BACKUP STAGE BLOCK_COMMIT;' >&3
    else
      printf '%s\n' 'LOCK INSTANCE FOR BACKUP;' "SELECT 'instance-locked';" >&3
      if await lock instance-locked; then
        # the tables, listed once DDL waits: none can appear before the lock is had
        tables=$(client -N -B --database="$MYSQL_DATABASE" -e "SELECT GROUP_CONCAT(CONCAT('\`',
          REPLACE(TABLE_SCHEMA, '\`', '\`\`'), '\`.\`', REPLACE(TABLE_NAME, '\`', '\`\`'), '\` READ')
          SEPARATOR ', ') FROM information_schema.TABLES
          WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'") \
          || fail "could not list the tables of $MYSQL_DATABASE"
        [ "$tables" = NULL ] || [ -z "$tables" ] || printf 'LOCK TABLES %s;\n' "$tables" >&3
      fi
    fi
    printf '%s\n' "SELECT CONCAT('locked ', SUBSTRING_INDEX(HOST, ':', 1)) FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID();" >&3
    await lock locked && break
    end_sessions
    lock_tries=$((lock_tries + 1))
    if ! grep -q 'Lock wait timeout exceeded' "$d/lock.err" || [ "$lock_tries" -ge "${LOCK_TRIES:-60}" ]; then
      transient "$d/lock.err" && { retry_because "the lock: $(tail -n 1 "$d/lock.err")"; return 0; }
      fail "could not take the lock: $(tail -n 3 "$d/lock.err")"
    fi
    echo "backup: the lock waited ${LOCK_WAIT:-5}s (try $lock_tries: DDL or a long write runs); trying again" >&2
    sleep 2
  done
  here=$(sed -n 's/^locked //p' "$d/lock.out")
  # the figures' session: its snapshot, and for MariaDB the snapshot's own position
  session figures 5
  printf '%s\n' 'START TRANSACTION WITH CONSISTENT SNAPSHOT;' "SELECT CONCAT('snapshot ', CONNECTION_ID());" >&5
  [ "$flavour" != mariadb ] || printf '%s\n' "SHOW STATUS LIKE 'binlog_snapshot_%';" >&5
  await figures snapshot || {
    transient "$d/figures.err" && { retry_because "the snapshot: $(tail -n 1 "$d/figures.err")"; return 0; }
    fail "could not open the snapshot: $(tail -n 3 "$d/figures.err")"
  }
  snapshot_id=$(sed -n 's/^snapshot //p' "$d/figures.out")
  # Where the snapshot is in the binary logs: "<server> <log> <position> <time> <namespace>/<name>
  # <database>", for point-in-time recovery (the server's logs are archived as <server> when
  # $OPERATOR_SCHEMA.binlog_archive names it); without MYSQL_INSTANCE the first four fields
  # alone (lineage unknown). MySQL 8.4+ has only SHOW BINARY LOG STATUS.
  rm -f "$position_tmp"
  server=$(client -N -B -e "SELECT server FROM \`${OPERATOR_SCHEMA:-mysql_operator}\`.binlog_archive WHERE id = 1" 2>/dev/null || true)
  if [ -n "$server" ]; then
    if [ "$flavour" = mariadb ]; then
      await figures Binlog_snapshot_position || true
      log=$(sed -n 's/^Binlog_snapshot_file\t//p' "$d/figures.out")
      at=$(sed -n 's/^Binlog_snapshot_position\t//p' "$d/figures.out")
    else
      status=$(client -N -B -e 'SHOW BINARY LOG STATUS' 2>/dev/null || true)
      log=$(printf '%s\n' "$status" | head -n 1 | cut -f1)
      at=$(printf '%s\n' "$status" | head -n 1 | cut -f2)
    fi
    lineage=''
    [ -z "${MYSQL_INSTANCE:-}" ] || lineage=" $MYSQL_INSTANCE $MYSQL_DATABASE"
    [ -z "$log" ] || [ -z "$at" ] || printf '%s %s %s %s%s\n' "$server" "$log" "$at" "$(date +%s)" "$lineage" > "$position_tmp"
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
  # (mysqldump's own pid in dump.pid: a retry stops it, which ends its stream; the name
  # after --: never read as an option)
  (set +e; mysqldump --protocol=TCP --host="$MYSQL_HOST" --port="$MYSQL_PORT" --user=root "$@" -- "$MYSQL_DATABASE" \
     > "$out" 2> "$d/dump.err" & echo $! > "$d/dump.pid"; wait $!; echo $? > "$d/dump.rc") &
  dump_pid=$!
  waited=0 misses=0
  while :; do
    # mysqldump's snapshot: a transaction of a connection from this pod, newer than the
    # figures' session, that is not a single autocommitted SELECT (mysqldump's own reads
    # before its START TRANSACTION: on Oracle MySQL the information_schema views it reads
    # are InnoDB tables, and such a read is listed for a moment; released then, the lock
    # would let a write in before the snapshot). A failed look (a connection refused or
    # timed out on a loaded node) is tried again; ten in a row fail the backup, with the
    # client's own words.
    if started=$(client -N -B -e "SELECT COUNT(*) FROM information_schema.INNODB_TRX AS t
        JOIN information_schema.PROCESSLIST AS p ON p.ID = t.trx_mysql_thread_id
        WHERE SUBSTRING_INDEX(p.HOST, ':', 1) = '$here' AND t.trx_mysql_thread_id > $snapshot_id
          AND t.trx_mysql_thread_id <> CONNECTION_ID() AND t.trx_autocommit_non_locking = 0" \
        2> "$d/look.err"); then
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
  if [ "$flavour" = mariadb ]; then echo 'BACKUP STAGE END;' >&3; else printf '%s\n' 'UNLOCK TABLES;' 'UNLOCK INSTANCE;' >&3; fi
  exec 3>&-
  lock_pid=''
  printf '%s\nSELECT %s;\nCOMMIT;\n' "$FIGURES_SQL" "'figures-end'" >&5
  exec 5>&-
  while [ ! -f "$d/figures.rc" ]; do sleep 0.2; done
  figures_pid=''
  if [ "$(cat "$d/figures.rc")" != 0 ]; then
    transient "$d/figures.err" && { retry_because "the figures query: $(tail -n 1 "$d/figures.err")"; return 0; }
    fail "the figures query failed: $(tail -n 3 "$d/figures.err")"
  fi
  sed -n '/^snapshot /,/^figures-end$/p' "$d/figures.out" | sed '1d;$d' | grep -v '^Binlog_snapshot_' \
    | LC_ALL=C sort > "$d/figures"
  grep -q '^figures-end$' "$d/figures.out" || fail "the figures query gave no result"

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

# MariaDB or Oracle MySQL: their locks differ (take)
flavour=mysql
case "$(client -N -B -e 'SELECT VERSION()' 2>/dev/null)" in *MariaDB*) flavour=mariadb ;; esac
# One backup of an instance at a time: a session of this script holds the server's named
# lock mysql_operator.backup until the script ends; another backup waits for it (at most
# GUARD_WAIT seconds), so two never take their locks and snapshots at once.
d=$work
session guard 6
echo "SELECT CONCAT('guard ', IFNULL(GET_LOCK('mysql_operator.backup', ${GUARD_WAIT:-600}), 'error'));" >&6
await guard 'guard ' || fail "could not take the lock that keeps backups of $MYSQL_DATABASE apart: $(tail -n 2 "$d/guard.err")"
case "$(sed -n 's/^guard //p' "$d/guard.out")" in
  1) ;;
  0) fail "another backup of this server ran for over ${GUARD_WAIT:-600}s; this one was not taken" ;;
  *) fail "could not take the lock that keeps backups of $MYSQL_DATABASE apart" ;;
esac

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
  end_sessions
  stop_dump
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
