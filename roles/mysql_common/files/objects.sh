# A backup's copy in an S3-compatible bucket, run by the backup-tools image beside the
# Jobs that take and restore backups. `ship` uploads the dump that the backup container of
# the same pod (the mysql_backup role's files/backup.sh, SHIP_TO set) streams to it, with
# its .figures, and checks them there; `fetch` brings them from the bucket to /backup.
#
# Objects: $S3_PREFIX/$BACKUP_FILE.zst and $S3_PREFIX/$BACKUP_FILE.figures.zst, zstd-compressed,
# with .age after both when an age identity is mounted at /keys/identity (encrypted to its
# recipient). A copy counts as shipped only once each object, read back from the bucket,
# decrypts and decompresses to the very bytes that were sent (sha256).
#
# The dump is never stored whole on this side either: it is compressed, encrypted and
# uploaded as it comes through the FIFO /backup/.stream.<try> (rclone rcat, a multipart
# upload), to $BACKUP_FILE<ext>.partial, while its sha256, size and last line are taken from
# the same stream. Only when the backup container's verdict on that try (/backup/.try.<try>)
# is ok, the trailer is mysqldump's and the object reads back to the same sha256 does it get
# the dump's name (a copy inside the bucket). A try the backup container takes again
# ("retry") is replaced by the next one's stream; its end without an ok (/backup/.dump.ended)
# removes the partial object. /backup/.objects.ready says the bucket answered (the backup
# container takes its read lock only then); a failure here is written to
# /backup/.objects.failed, where the backup container reads it and stops its dump.
#
# A backup taken with binary logs on has a third file, $BACKUP_FILE.position ("<server>
# <binlog file> <position> <epoch>": where its snapshot is in the server's binary logs),
# shipped and fetched like the figures.
#
# `archive` (a sidecar of the server's pod, the data volume at /var/lib/mysql, read-only)
# ships every closed binary log of mysql-bin.index as
# $S3_PREFIX/binlogs/<server>/<file>-<epoch it was closed>.zst[.age], read back like a
# backup, and writes $S3_PREFIX/binlogs/<server>/reach: the time up to which every event is
# in the bucket. <server> is /archive/id, the identity of the data directory's binary logs
# (files/binlog_rotate.sh of the mysql role writes it, and closes the current log when it
# holds new events; /archive/quiet names the log it found without new events, and when).
#
# `fetch` with POINT_IN_TIME (seconds since the epoch; every event before it is wanted)
# instead of BACKUP_FILE fetches the newest backup whose position is before that time, and
# every archived binary log from its position to the log closed after it into
# /backup/binlogs, listed in order in /backup/binlogs/replay (first line: the start
# position). A missing log between them (a gap) or an archive that does not reach the time
# fails the fetch, naming what is missing.
#
# Env: MODE (ship, fetch, prune or archive), BACKUP_FILE (or JOB_NAME: <JOB_NAME>.sql; FILES
# for prune), S3_BUCKET, S3_PREFIX, and rclone's own settings of its S3 backend
# (RCLONE_S3_ENDPOINT, RCLONE_S3_REGION, RCLONE_S3_ACCESS_KEY_ID and RCLONE_S3_SECRET_ACCESS_KEY
# from the credentials Secret, RCLONE_NO_CHECK_CERTIFICATE, ...).
# The last line of output (and /dev/termination-log) is a summary; a failure's names the
# bucket and the object.
set -eu
BACKUP_FILE=${BACKUP_FILE:-${JOB_NAME:-}.sql}
identity=/keys/identity
ext=.zst
[ ! -f "$identity" ] || ext=.zst.age
remote=":s3:$S3_BUCKET/$S3_PREFIX"
where="s3://$S3_BUCKET/$S3_PREFIX"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "objects: $*" >&2
  printf '%s\n' "$*" > /dev/termination-log 2>/dev/null || true
  # the backup container streaming to this one stops its dump with these words
  [ "$MODE" != ship ] || printf '%s\n' "$*" > /backup/.objects.failed
  exit 1
}
# rclone, told not to wait long for an endpoint that does not answer; its last error line
# is kept in $work/rclone.err for the failure's message
rc() {
  rclone --config "" --retries 2 --low-level-retries 2 --contimeout 10s --timeout 60s \
    --s3-no-check-bucket -q "$@" 2> "$work/rclone.err"
}
# what rclone said: its first ERROR line (the server's error code and text), else its last
said() {
  { grep -m 1 ' ERROR : ' "$work/rclone.err" || grep -v '^[[:space:]]*$' "$work/rclone.err" | tail -n 1; } \
    | sed 's/^.* ERROR : [^:]*: //' | cut -c1-300
}
# standard input compressed and, with a key, encrypted
pack() {
  if [ -f "$identity" ]; then
    zstd -q -c | age -r "$(age-keygen -y "$identity")"
  else
    zstd -q -c
  fi
}
unpack() {
  if [ -f "$identity" ]; then age -d -i "$identity" | zstd -q -d -c; else zstd -q -d -c; fi
}
digest() { sha256sum | cut -d' ' -f1; }

# The bucket is listed first: a store may create a missing bucket on the first write
# (SeaweedFS does), where the backups would then land unnoticed. (The archive sidecar does
# not stop for it: it tries again on each pass, and its exit would restart the server's pod.)
if [ "$MODE" != archive ] && ! rc lsf --max-depth 1 "$remote" > /dev/null; then
  grep -q 'directory not found' "$work/rclone.err" \
    && fail "bucket $S3_BUCKET does not exist at $RCLONE_S3_ENDPOINT (listing $where)"
  fail "could not list $where at $RCLONE_S3_ENDPOINT: $(said)"
fi

# the UTC time of seconds since the epoch, as RFC 3339
utc() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
# the archived logs of server $1: "<sequence> <close epoch> <object name>" lines, in order;
# the sequence without its leading zeros (the shell's arithmetic reads 000008 as octal)
archived() {
  rc lsf "$remote/binlogs/$1/" > "$work/binlogs" || return 1
  sed -n 's/^\(.*\)[.]\([0-9]\{6,\}\)-\([0-9]\{1,\}\)[.]zst\([.]age\)\{0,1\}$/\2 \3 &/p' "$work/binlogs" \
    | awk '{ $1 = $1 + 0; print }' | sort -n
}
# how far the archive of server $1 reaches, given its logs (archived's lines) in file $2: the
# later of its reach object and its newest log's close, in seconds since the epoch ('' when
# it has neither yet)
reach_of() {
  reach=$(rc cat "$remote/binlogs/$1/reach" 2>/dev/null | tr -dc 0-9)
  last=$(tail -n 1 "$2" | cut -d' ' -f2)
  [ "${last:-0}" -le "${reach:-0}" ] || reach=$last
  printf '%s\n' "$reach"
}
# what the archive of server $1 holds: "archived=<reach> gap=<first missing log or ->"; a
# server's logs start at .000001 (log-bin on, one archive per data directory), so a log
# missing before the first archived one is a gap too
archive_state() {
  archived "$1" > "$work/state" || return 1
  reach=$(reach_of "$1" "$work/state")
  gap=$(awk 'BEGIN { want = 1 } $1 > want { printf "%06d", want; exit } { want = $1 + 1 }' "$work/state")
  printf 'archived=%s gap=%s\n' "$( [ -n "$reach" ] && utc "$reach" || echo -)" "${gap:--}"
}

case "$MODE" in
  archive)
    # runs for the life of the server's pod; a failed upload is tried again on the next pass
    data=/var/lib/mysql
    echo "objects: archiving the binary logs of $data to $where/binlogs every ${ARCHIVE_SECONDS}s"
    while [ ! -s /archive/id ]; do sleep 1; done
    id=$(cat /archive/id)
    touch "$work/shipped"
    rc lsf "$remote/binlogs/$id/" > "$work/shipped" 2>/dev/null || true
    reached=0
    while :; do
      index=$data/mysql-bin.index
      if [ -f "$index" ]; then
        sed 's,^.*/,,' "$index" > "$work/index"
        active=$(tail -n 1 "$work/index")
        pending=0
        while IFS= read -r f; do
          [ "$f" != "$active" ] || continue
          grep -q "^$f-[0-9]*$ext\$" "$work/shipped" && continue
          if [ ! -f "$data/$f" ]; then
            echo "objects: $f is in the index but not in $data (removed before it was archived: a gap)" >&2
            continue
          fi
          closed=$(stat -c %Y "$data/$f") || continue
          object="binlogs/$id/$f-$closed$ext"
          if pack < "$data/$f" > "$work/object" && rc copyto "$work/object" "$remote/$object" \
              && rc cat "$remote/$object" > "$work/back" \
              && [ "$(unpack < "$work/back" | digest)" = "$(digest < "$data/$f")" ]; then
            echo "$f-$closed$ext" >> "$work/shipped"
            echo "objects: archived $f to $where/$object"
          else
            echo "objects: could not archive $f to $where/$object: $(said); trying again" >&2
            pending=1
          fi
          rm -f "$work/object" "$work/back"
        done < "$work/index"
        # every event up to the moment the rotation found the current log without new
        # events is archived once every log before it is
        quiet=$(cat /archive/quiet 2>/dev/null || true)
        if [ "$pending" = 0 ] && [ "${quiet%% *}" = "$active" ]; then
          at=${quiet##* }
          if [ "$at" -ge $((reached + ARCHIVE_SECONDS)) ] && printf '%s\n' "$at" > "$work/reach" \
              && rc copyto "$work/reach" "$remote/binlogs/$id/reach"; then
            reached=$at
          fi
        fi
      fi
      sleep 2
    done
    ;;
  ship)
    partial="$BACKUP_FILE$ext.partial"
    # every end that is not a shipped backup: the backup container is told, the partial
    # object removed
    trap 'rm -rf "$work"; [ -n "${shipped:-}" ] || rc deletefile "$remote/$partial" 2>/dev/null || true' EXIT
    # the bucket answered: the backup container takes its read lock and starts its dump
    : > /backup/.objects.ready
    try=1
    while :; do
      stream=/backup/.stream.$try verdict=/backup/.try.$try
      # the stream of this try, unless the try was given up before its dump started or the
      # backup container ended without one
      until [ -p "$stream" ] || [ -f "$verdict" ] || [ -f /backup/.dump.ended ]; do sleep 0.2; done
      if [ "$(cat "$verdict" 2>/dev/null)" = retry ]; then try=$((try + 1)); continue; fi
      [ -p "$stream" ] || fail "the backup of $BACKUP_FILE ended before its dump: nothing was shipped to $where"
      for tap in sum last size; do rm -f "$work/$tap"; mkfifo "$work/$tap"; done
      digest < "$work/sum" > "$work/sent" &
      tail -n 1 < "$work/last" > "$work/trailer" &
      wc -c < "$work/size" > "$work/bytes" &
      uploaded=1
      tee "$work/sum" "$work/last" "$work/size" < "$stream" | pack | rc rcat "$remote/$partial" || uploaded=0
      wait
      [ "$uploaded" = 1 ] || fail "could not write $where/$partial: $(said)"
      until [ -f "$verdict" ] || [ -f /backup/.dump.ended ]; do sleep 0.2; done
      case "$(cat "$verdict" 2>/dev/null)" in
        ok) break ;;
        retry) echo "objects: try $try of the dump is taken again; its stream is dropped"; try=$((try + 1)) ;;
        *) fail "the backup of $BACKUP_FILE failed: nothing was shipped to $where" ;;
      esac
    done
    case "$(cat "$work/trailer")" in
      "-- Dump completed"*) ;;
      *) fail "the dump of $BACKUP_FILE streamed to $where has no mysqldump completion trailer" ;;
    esac
    rc cat "$remote/$partial" > "$work/back" || fail "could not read $where/$partial back: $(said)"
    [ "$(unpack < "$work/back" | digest)" = "$(cat "$work/sent")" ] \
      || fail "$where/$partial does not read back as the dump that was streamed to it"
    rm -f "$work/back"
    f=$BACKUP_FILE.figures
    pack < "/backup/$f" > "$work/object" || fail "could not compress or encrypt $f"
    rc copyto "$work/object" "$remote/$f$ext" || fail "could not write $where/$f$ext: $(said)"
    rc cat "$remote/$f$ext" > "$work/back" || fail "could not read $where/$f$ext back: $(said)"
    [ "$(unpack < "$work/back" | digest)" = "$(digest < "/backup/$f")" ] \
      || fail "$where/$f$ext does not read back as the figures it was written from"
    rc moveto "$remote/$partial" "$remote/$BACKUP_FILE$ext" \
      || fail "could not name $where/$BACKUP_FILE$ext: $(said)"
    shipped=1
    stored=$(rc lsf --format s "$remote/$BACKUP_FILE$ext") || fail "could not list $where/$BACKUP_FILE$ext: $(said)"
    size=$(tr -dc 0-9 < "$work/bytes")
    tables=$(wc -l < "/backup/$BACKUP_FILE.figures")
    rows=$(awk -F '\t' '{ n += $2 } END { print n + 0 }' "/backup/$BACKUP_FILE.figures")
    summary="file=$BACKUP_FILE size=$size tables=$tables rows=$rows object=$where/$BACKUP_FILE$ext stored=$stored"
    if [ -f "/backup/$BACKUP_FILE.position" ]; then
      f=$BACKUP_FILE.position
      pack < "/backup/$f" > "$work/object" || fail "could not compress or encrypt $f"
      rc copyto "$work/object" "$remote/$f$ext" || fail "could not write $where/$f$ext: $(said)"
      read -r id _ < "/backup/$f"
      state=$(archive_state "$id") || fail "could not list $where/binlogs/$id: $(said)"
      summary="$summary position=$(cut -d' ' -f2,3 "/backup/$f" | tr ' ' :) $state"
    fi
    ;;
  fetch)
    if [ -n "${POINT_IN_TIME:-}" ]; then
      at=$(utc "$POINT_IN_TIME")
      # the positions of the backups in the bucket: the newest taken before the time
      rc lsf "$remote" > "$work/list" || fail "could not list $where: $(said)"
      : > "$work/positions"
      grep "[.]sql[.]position$ext\$" "$work/list" | while IFS= read -r object; do
        if rc cat "$remote/$object" > "$work/object" && unpack < "$work/object" > "$work/position"; then
          printf '%s %s\n' "$(cat "$work/position")" "${object%.position$ext}" >> "$work/positions"
        fi
      done
      chosen=$(awk -v t="$POINT_IN_TIME" 'NF == 5 && $4 < t' "$work/positions" | sort -k4,4n | tail -n 1)
      [ -n "$chosen" ] || fail "no backup in $where was taken before $at with binary logs on (spec.backup.pointInTime)"
      set -- $chosen
      id=$1 start=$2 position=$3 taken=$4 BACKUP_FILE=$5
      echo "objects: $BACKUP_FILE (taken $(utc "$taken"), at $start:$position of server $id) is the newest backup before $at"
      archived "$id" > "$work/archived" || fail "could not list $where/binlogs/$id: $(said)"
      first=$(printf '%s' "$start" | sed 's/^.*[.]0*\([0-9]\)/\1/')
      mkdir -p /backup/binlogs
      echo "$position" > /backup/binlogs/replay.partial
      want=$first covered=''
      while [ -z "$covered" ]; do
        line=$(awk -v n="$want" '$1 == n' "$work/archived")
        if [ -z "$line" ]; then
          name=$(printf '%s.%06d' "${start%.*}" "$want")
          if awk -v n="$want" '$1 > n' "$work/archived" | grep -q .; then
            fail "gap in the binary logs archived in $where/binlogs/$id: $name is missing; the events from $(utc "$taken") to before $at cannot all be replayed"
          fi
          reach=$(reach_of "$id" "$work/archived")
          if [ -n "$reach" ] && [ "$reach" -ge "$POINT_IN_TIME" ]; then break; fi
          fail "the binary logs archived in $where/binlogs/$id reach $( [ -n "$reach" ] && utc "$reach" || echo 'no time yet'), not $at (every event before it)"
        fi
        set -- $line
        rc cat "$remote/binlogs/$id/$3" > "$work/object" || fail "could not read $where/binlogs/$id/$3: $(said)"
        log=$(printf '%s.%06d' "${start%.*}" "$1")
        unpack < "$work/object" > "/backup/binlogs/$log" || fail "$where/binlogs/$id/$3 does not decrypt and decompress"
        echo "$log" >> /backup/binlogs/replay.partial
        [ "$2" -lt "$POINT_IN_TIME" ] || covered=1
        want=$(( $1 + 1 ))
      done
      mv /backup/binlogs/replay.partial /backup/binlogs/replay
      echo "objects: $(( $(wc -l < /backup/binlogs/replay) - 1 )) binary logs to replay up to $at"
    fi
    for f in "$BACKUP_FILE" "$BACKUP_FILE.figures"; do
      found=$(rc lsf "$remote/$f$ext") || fail "could not list $where/$f$ext: $(said)"
      if [ -z "$found" ]; then
        other=.zst.age
        [ ! -f "$identity" ] || other=.zst
        if [ -n "$(rc lsf "$remote/$f$other" 2>/dev/null)" ]; then
          [ "$other" = .zst ] && fail "$where/$f$other is not encrypted, but a key is given (spec.backup.encryptionSecret)"
          fail "$where/$f$other is encrypted: spec.backup.encryptionSecret names no key to read it"
        fi
        fail "$where/$f$ext is not in the bucket"
      fi
      rc cat "$remote/$f$ext" > "$work/object" || fail "could not read $where/$f$ext: $(said)"
      unpack < "$work/object" > "/backup/.$f.partial" \
        || fail "$where/$f$ext does not decrypt and decompress (a wrong key?)"
      mv "/backup/.$f.partial" "/backup/$f"
    done
    summary="file=$BACKUP_FILE size=$(wc -c < "/backup/$BACKUP_FILE") object=$where/$BACKUP_FILE$ext"
    # the restore reads the backup's name from here when the fetch chose it
    printf '%s\n' "$BACKUP_FILE" > /backup/chosen
    ;;
  prune)
    # both spellings: the key may have been set or removed since a backup was shipped
    printf '%s\n' "$FILES" | while IFS= read -r f; do
      case "$f" in ''|*/*|.*) continue ;; esac
      for object in "$f.zst" "$f.zst.age" "$f.figures.zst" "$f.figures.zst.age" \
          "$f.position.zst" "$f.position.zst.age" "$f.zst.partial" "$f.zst.age.partial"; do
        if rc lsf "$remote/$object" > "$work/found" && grep -q . "$work/found"; then
          rc deletefile "$remote/$object" || fail "could not remove $where/$object: $(said)"
          echo "objects: removed $where/$object"
        fi
      done
    done
    summary="pruned $(printf '%s\n' "$FILES" | grep -c .) backups from $where"
    ;;
  *) fail "MODE is ship, fetch, prune or archive, not '$MODE'" ;;
esac
printf '%s\n' "$summary" > /dev/termination-log 2>/dev/null || true
echo "$summary"
