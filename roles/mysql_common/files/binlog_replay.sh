# replay_binlogs CLIENT...: replays the archived binary logs a point-in-time fetch brought
# (mysql_common's files/objects.sh: /backup/binlogs/replay holds the backup's position, then
# the logs in order) into CLIENT (a mysql command reading statements), after the backup was
# loaded: their events of $MYSQL_DATABASE from that position to before $STOP_DATETIME (UTC;
# TZ=UTC in the container). Sets replay_count (the logs replayed); on failure returns 1 with
# replay_error saying why. Prepended by the restore Job (the mysql role's files/restore.sh) and
# the load Job (the mysql_restore role's files/load.sh), which both define the rest.
# Oracle MySQL's logs carry GTIDs: replayed into the server that wrote them (a restore in
# place), they would be skipped as already executed; without them they are new transactions.
replay_binlogs() {
  replay_list=/backup/binlogs/replay
  replay_start=$(head -n 1 "$replay_list")
  replay_logs=''
  for log in $(sed 1d "$replay_list"); do replay_logs="$replay_logs /backup/binlogs/$log"; done
  replay_count=$(sed 1d "$replay_list" | grep -c .)
  replay_skip=''
  if mysqlbinlog --help 2>/dev/null | grep -q -e '--skip-gtids'; then replay_skip=--skip-gtids; fi
  echo "replaying $replay_count binary logs from position $replay_start up to $STOP_DATETIME UTC"
  # shellcheck disable=SC2086 # the options and the logs' paths (no spaces) are words
  if ! { mysqlbinlog $replay_skip --start-position="$replay_start" --stop-datetime="$STOP_DATETIME" \
           --database="$MYSQL_DATABASE" $replay_logs 2> /tmp/binlog.err; echo $? > /tmp/binlog.rc; } \
       | "$@" 2> /tmp/replay.err; then
    replay_error="the replay stopped: $(tail -n 2 /tmp/replay.err | tr '\n' ' ')"
    return 1
  fi
  if [ "$(cat /tmp/binlog.rc 2>/dev/null)" != 0 ]; then
    replay_error="mysqlbinlog could not read the binary logs: $(grep -v '^WARNING' /tmp/binlog.err | tail -n 2 | tr '\n' ' ')"
    return 1
  fi
}
