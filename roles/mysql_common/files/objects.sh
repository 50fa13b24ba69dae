# shellcheck shell=sh
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
# /backup/.objects.failed, where the backup container reads it and stops its dump. A TERM
# (the Job's deadline) or an INT ends the script through the same cleanup as any other end:
# a running upload is stopped first (rclone aborts its multipart upload when signalled),
# then the partial object is removed.
#
# A backup taken with binary logs on has a third file, $BACKUP_FILE.position ("<server>
# <binlog file> <position> <epoch> <namespace>/<name> <database>": where its snapshot is in
# the server's binary logs, and its lineage: the instance that took it and the database it
# holds), shipped, read back and fetched like the figures. A position of the first four fields
# alone is read too, its lineage unknown.
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
# instead of BACKUP_FILE fetches the newest backup of one lineage whose position is before
# that time, and every archived binary log from its position to the log closed after it into
# /backup/binlogs, listed in order in /backup/binlogs/replay (first line: the start
# position). A missing log between them (a gap) or an archive that does not reach the time
# fails the fetch, naming what is missing.
# The lineage: instances that share a prefix (a disaster-recovery copy given the original's)
# each write their own backups there, and a point in time is restored from one instance's
# backups and logs only. Only backups of the restore's database (MYSQL_DATABASE) count; among
# them the restoring instance's own (MYSQL_INSTANCE, <namespace>/<name>); if it has none
# before the time (a new copy), those of the one other instance that has; backups of several
# other instances are refused, naming them. Positions of unknown lineage (four fields) are
# chosen from only when no backup of a known lineage qualifies. A position that does not
# decrypt is counted, and named as the reason when nothing could be chosen.
#
# What the bucket holds is read as data, never as words of the shell: an object name or a
# position that is not of the expected form (names of letters, digits, '.', '_' and '-',
# numbers of digits) is skipped with a message on stderr. Every number is read without its
# leading zeros: busybox's sh, awk and printf read 000010 as octal (8).
#
# Env: MODE (ship, fetch, prune or archive), BACKUP_FILE (or JOB_NAME: <JOB_NAME>.sql; FILES
# for prune; POINT_IN_TIME, MYSQL_DATABASE and MYSQL_INSTANCE for a fetch to a point in
# time), S3_BUCKET, S3_PREFIX, and rclone's own settings of its S3 backend
# (RCLONE_S3_ENDPOINT, RCLONE_S3_REGION, RCLONE_S3_ACCESS_KEY_ID and RCLONE_S3_SECRET_ACCESS_KEY
# from the credentials Secret, RCLONE_NO_CHECK_CERTIFICATE, ...). The directories are the
# images' mounts unless set (the unit tests run the script elsewhere): BACKUP_DIR (/backup),
# KEYS_DIR (/keys), ARCHIVE_DIR (/archive), DATA_DIR (/var/lib/mysql) and TERMINATION_LOG
# (/dev/termination-log).
# The last line of output (and the termination log) is a summary; a failure's names the
# bucket and the object.
set -eu
BACKUP_DIR=${BACKUP_DIR:-/backup}
KEYS_DIR=${KEYS_DIR:-/keys}
ARCHIVE_DIR=${ARCHIVE_DIR:-/archive}
DATA_DIR=${DATA_DIR:-/var/lib/mysql}
TERMINATION_LOG=${TERMINATION_LOG:-/dev/termination-log}
BACKUP_FILE=${BACKUP_FILE:-${JOB_NAME:-}.sql}
identity=$KEYS_DIR/identity
ext=.zst
[ ! -f "$identity" ] || ext=.zst.age
remote=":s3:$S3_BUCKET/$S3_PREFIX"
where="s3://$S3_BUCKET/$S3_PREFIX"
work=$(mktemp -d)
# the rclone of a running upload (its pid), the partial object it writes, and whether the
# dump got its name
upload='' partial='' shipped=''

# Every end: a running upload is stopped (rclone, signalled, aborts its multipart upload;
# waited for, so that it has aborted before the object is removed), a partial object that
# did not get the dump's name is removed, the scratch directory last (rclone's errors go
# there).
cleanup() {
  if [ -n "$upload" ]; then
    kill -TERM "$upload" 2>/dev/null || true
    wait "$upload" 2>/dev/null || true
    upload=''
  fi
  if [ -n "$partial" ] && [ -z "$shipped" ]; then
    rc deletefile "$remote/$partial" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
# busybox sh runs the EXIT trap on exit, not when a signal ends it (and as a container's
# PID 1 it is not even ended by a TERM it has no trap for): the signals exit, through it
trap 'exit 143' TERM
trap 'exit 130' INT

fail() {
  echo "objects: $*" >&2
  printf '%s\n' "$*" > "$TERMINATION_LOG" 2>/dev/null || true
  # the backup container streaming to this one stops its dump with these words
  [ "$MODE" != ship ] || printf '%s\n' "$*" > "$BACKUP_DIR/.objects.failed"
  exit 1
}
warn() { printf 'objects: %s\n' "$*" >&2; }
# rclone, told not to wait long for an endpoint that does not answer; its last error line
# is kept in $work/rclone.err for the failure's message. With rc_exec set (in a job of its
# own put in the background), that job's process becomes rclone itself: $! is rclone's pid.
rc_exec=''
rc() {
  ${rc_exec:+exec} rclone --config "" --retries 2 --low-level-retries 2 --contimeout 10s \
    --timeout 60s --s3-no-check-bucket -q "$@" 2> "$work/rclone.err"
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
# object file $1 unpacked into file $2, each step checked: returns 2 when it does not decrypt
# with the key (a pipeline's status would be zstd's alone), 1 when it does not decompress
unpack_to() {
  if [ -f "$identity" ]; then
    age -d -i "$identity" < "$1" > "$work/decrypted" 2> /dev/null || return 2
    zstd -q -d -c < "$work/decrypted" > "$2" 2> /dev/null || return 1
  else
    zstd -q -d -c < "$1" > "$2" 2> /dev/null || return 1
  fi
}
digest() { sha256sum | cut -d' ' -f1; }
# local file $1 as object $2 (packed), read back: fails the script when it cannot be
# written or read, returns 1 when it does not decrypt and decompress to the file's bytes
put() {
  pack < "$1" > "$work/object" || fail "could not compress or encrypt ${1##*/}"
  rc copyto "$work/object" "$remote/$2" || fail "could not write $where/$2: $(said)"
  rc cat "$remote/$2" > "$work/back" || fail "could not read $where/$2 back: $(said)"
  [ "$(unpack < "$work/back" | digest)" = "$(digest < "$1")" ]
}

# whether $1 is a name of letters, digits, '.', '_' and '-' that starts with neither '.' nor
# '-' (no option, no glob, no '..', no space)
is_name() {
  case $1 in ''|[!A-Za-z0-9_]*|*[!A-Za-z0-9._-]*) return 1 ;; esac
}
# whether $1 is a binary log's name: <name>.<6 digits or more>
is_log() {
  is_name "$1" || return 1
  set -- "$1" "${1##*.}"
  case $2 in ''|*[!0-9]*) return 1 ;; esac
  [ "$1" != "$2" ] && [ "${#2}" -ge 6 ]
}
# $1 (a name: see is_name) as a basic regular expression that matches only itself
literal() { printf '%s' "$1" | sed 's/[.]/[.]/g'; }
# $1, digits only, without its leading zeros (busybox's sh, awk and printf read 000010 as
# octal 8, 0x10 as hex): what may go into arithmetic and comparisons; fails for anything
# that is not a number of at most 18 digits
decimal() {
  case $1 in ''|*[!0-9]*) return 1 ;; esac
  set -- "$(printf '%s\n' "$1" | sed 's/^0*\([0-9]\)/\1/')"
  [ "${#1}" -le 18 ] && printf '%s\n' "$1"
}
# whether $1 is an instance's <namespace>/<name>: two DNS labels (lowercase letters, digits
# and inner '-')
is_lineage() {
  case $1 in */*/*|-*|*/-*|*-/*|*-|*[!a-z0-9/-]*) return 1 ;; [a-z0-9]*/[a-z0-9]*) ;; *) return 1 ;; esac
  [ "${#1}" -le 127 ]
}
# whether $1 is a database's name as spec.database admits it: 1 to 64 letters, digits, '_',
# '-' or '$', not starting with '-'
is_database() {
  case $1 in ''|-*|*[!A-Za-z0-9_\$-]*) return 1 ;; esac
  [ "${#1}" -le 64 ]
}
POSITION_FORM="'<server> <binlog file> <position> <epoch> [<namespace>/<name> <database>]'"
# reads the position file $1 into pos_server, pos_log, pos_offset and pos_taken (the numbers
# without their leading zeros), pos_lineage and pos_database: one line of exactly "<server>
# <binlog file> <position> <epoch> <namespace>/<name> <database>", or of its first four
# fields (pos_lineage is then "unknown", which no <namespace>/<name> is, and pos_database
# "-"), each field checked; fails for anything else
read_position() {
  [ "$(grep -c '' "$1")" = 1 ] || return 1
  pos_rest='' pos_lineage='' pos_database=''
  IFS=' ' read -r pos_server pos_log pos_offset pos_taken pos_lineage pos_database pos_rest < "$1" \
    || [ -n "${pos_server:-}" ] || return 1
  [ -z "$pos_rest" ] && is_name "$pos_server" && is_log "$pos_log" || return 1
  if [ -n "$pos_lineage" ]; then
    is_lineage "$pos_lineage" && is_database "$pos_database" || return 1
  else
    pos_lineage=unknown pos_database=-
  fi
  pos_offset=$(decimal "$pos_offset") && pos_taken=$(decimal "$pos_taken")
}

# The bucket is listed first: a store may create a missing bucket on the first write
# (SeaweedFS does), where the backups would then land unnoticed. (The archive sidecar does
# not stop for it: it tries again on each pass, and its exit would restart the server's pod.)
if [ "$MODE" != archive ] && ! rc lsf --max-depth 1 "$remote" > /dev/null; then
  grep -q 'directory not found' "$work/rclone.err" \
    && fail "bucket $S3_BUCKET does not exist at $RCLONE_S3_ENDPOINT (listing $where)"
  fail "could not list $where at $RCLONE_S3_ENDPOINT: $(said)"
fi

# the UTC time of seconds since the epoch (without leading zeros), as RFC 3339
utc() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
# the archived logs of server $1: "<sequence> <close epoch> <object name>" lines, in order;
# both numbers without their leading zeros. An object of another form is skipped (a message
# on stderr); so the three fields are words without spaces.
archived() {
  rc lsf "$remote/binlogs/$1/" > "$work/binlogs" || return 1
  set -- "$1" '^[A-Za-z0-9_][A-Za-z0-9._-]*[.]\([0-9]\{6,18\}\)-\([0-9]\{1,18\}\)[.]zst\([.]age\)\{0,1\}$'
  sed -n "/$2/!p" "$work/binlogs" | grep -v -x -e reach | while IFS= read -r odd; do
    warn "skipping $where/binlogs/$1/$odd: not <binlog file>-<epoch>.zst[.age]"
  done
  sed -n "s/$2/\\1 \\2 &/p" "$work/binlogs" | sed 's/^0*\([0-9]\)/\1/; s/ 0*\([0-9]\)/ \1/' \
    | sort -k1,1n -k2,2n
}
# how far the archive of server $1 reaches, given its logs (archived's lines) in file $2: the
# later of its reach object and its newest log's close, in seconds since the epoch ('' when
# it has neither yet)
reach_of() {
  reach=$(rc cat "$remote/binlogs/$1/reach" | head -n 1) || reach=''
  if [ -n "$reach" ] && ! reach=$(decimal "$reach"); then
    warn "$where/binlogs/$1/reach is not seconds since the epoch: ignored"
    reach=''
  fi
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
    data=$DATA_DIR
    seconds=$(decimal "$ARCHIVE_SECONDS") || fail "ARCHIVE_SECONDS is a number of seconds, not '$ARCHIVE_SECONDS'"
    echo "objects: archiving the binary logs of $data to $where/binlogs every ${seconds}s"
    while [ ! -s "$ARCHIVE_DIR/id" ]; do sleep 1; done
    id=$(cat "$ARCHIVE_DIR/id")
    is_name "$id" || fail "$ARCHIVE_DIR/id is not a name of letters, digits, '.', '_' and '-': '$id'"
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
          if ! is_log "$f"; then
            warn "$f in $index is not a binary log's name: not archived"
            continue
          fi
          grep -q "^$(literal "$f")-[0-9]*$(literal "$ext")\$" "$work/shipped" && continue
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
        quiet=$(cat "$ARCHIVE_DIR/quiet" 2>/dev/null || true)
        if [ "$pending" = 0 ] && [ "${quiet%% *}" = "$active" ] && at=$(decimal "${quiet##* }"); then
          # the reach, read back: a reach that does not is written again on the next pass
          if [ "$at" -ge $((reached + seconds)) ] && printf '%s\n' "$at" > "$work/reach" \
              && rc copyto "$work/reach" "$remote/binlogs/$id/reach" \
              && [ "$(rc cat "$remote/binlogs/$id/reach")" = "$at" ]; then
            reached=$at
          fi
        fi
      fi
      sleep 2
    done
    ;;
  ship)
    # every end that is not a shipped backup removes this object (cleanup)
    partial="$BACKUP_FILE$ext.partial"
    # the bucket answered: the backup container takes its read lock and starts its dump
    : > "$BACKUP_DIR/.objects.ready"
    try=1
    while :; do
      stream=$BACKUP_DIR/.stream.$try verdict=$BACKUP_DIR/.try.$try
      # the stream of this try, unless the try was given up before its dump started or the
      # backup container ended without one
      until [ -p "$stream" ] || [ -f "$verdict" ] || [ -f "$BACKUP_DIR/.dump.ended" ]; do sleep 0.2; done
      if [ "$(cat "$verdict" 2>/dev/null)" = retry ]; then try=$((try + 1)); continue; fi
      [ -p "$stream" ] || fail "the backup of $BACKUP_FILE ended before its dump: nothing was shipped to $where"
      for tap in sum last size packed; do rm -f "$work/$tap"; mkfifo "$work/$tap"; done
      digest < "$work/sum" > "$work/sent" &
      tail -n 1 < "$work/last" > "$work/trailer" &
      wc -c < "$work/size" > "$work/bytes" &
      # The upload is a job of its own, in the background and waited for, so that a TERM is
      # taken at once (the shell runs a trap only after its foreground command) and cleanup
      # can stop rclone and wait for it alone ($! is rclone itself): the wait for a pipeline
      # would last until its first command, reading the stream, ends too.
      { rc_exec=1; rc rcat "$remote/$partial"; } < "$work/packed" &
      upload=$!
      tee "$work/sum" "$work/last" "$work/size" < "$stream" | pack > "$work/packed" &
      uploaded=1
      wait "$upload" || uploaded=0
      upload=''
      wait
      [ "$uploaded" = 1 ] || fail "could not write $where/$partial: $(said)"
      until [ -f "$verdict" ] || [ -f "$BACKUP_DIR/.dump.ended" ]; do sleep 0.2; done
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
    put "$BACKUP_DIR/$f" "$f$ext" || fail "$where/$f$ext does not read back as the figures it was written from"
    rc moveto "$remote/$partial" "$remote/$BACKUP_FILE$ext" \
      || fail "could not name $where/$BACKUP_FILE$ext: $(said)"
    shipped=1
    stored=$(rc lsf --format s "$remote/$BACKUP_FILE$ext") || fail "could not list $where/$BACKUP_FILE$ext: $(said)"
    size=$(tr -dc 0-9 < "$work/bytes")
    tables=$(wc -l < "$BACKUP_DIR/$BACKUP_FILE.figures")
    # the counts without their leading zeros (busybox's awk reads 010 as octal)
    rows=$(awk -F '\t' '{ v = $2; sub(/^0+/, "", v); n += v } END { print n + 0 }' "$BACKUP_DIR/$BACKUP_FILE.figures")
    summary="file=$BACKUP_FILE size=$size tables=$tables rows=$rows object=$where/$BACKUP_FILE$ext stored=$stored"
    if [ -f "$BACKUP_DIR/$BACKUP_FILE.position" ]; then
      f=$BACKUP_FILE.position
      read_position "$BACKUP_DIR/$f" \
        || fail "$BACKUP_DIR/$f is not one line $POSITION_FORM: nothing of it was shipped to $where"
      # a position that does not read back is not left for a point-in-time fetch to choose
      if ! put "$BACKUP_DIR/$f" "$f$ext"; then
        rc deletefile "$remote/$f$ext" || true
        fail "$where/$f$ext does not read back as the position it was written from"
      fi
      state=$(archive_state "$pos_server") || fail "could not list $where/binlogs/$pos_server: $(said)"
      summary="$summary position=$pos_log:$pos_offset $state"
    fi
    ;;
  fetch)
    if [ -n "${POINT_IN_TIME:-}" ]; then
      before=$(decimal "$POINT_IN_TIME") || fail "POINT_IN_TIME is seconds since the epoch, not '$POINT_IN_TIME'"
      at=$(utc "$before")
      database=${MYSQL_DATABASE:-} instance=${MYSQL_INSTANCE:-}
      is_database "$database" \
        || fail "MYSQL_DATABASE is the database restored to a point in time (letters, digits, '_', '-' or '\$', not starting with '-'), not '$database'"
      is_lineage "$instance" \
        || fail "MYSQL_INSTANCE is the <namespace>/<name> of the instance restored to a point in time, not '$instance'"
      # the objects of the other kind (encrypted without a key given, or not encrypted with one)
      other=.zst.age
      [ ! -f "$identity" ] || other=.zst
      # the positions of the backups in the bucket, checked field by field, as "<server> <log>
      # <offset> <epoch> <file> <lineage> <database>" lines; those that cannot be read, do not
      # decrypt or are of the other kind are counted for the message when none is chosen
      rc lsf "$remote" > "$work/list" || fail "could not list $where: $(said)"
      : > "$work/positions"
      unread=0 undecrypted=0 undecompressed=0 otherkind=0
      while IFS= read -r object; do
        case $object in
          *".sql.position$ext") ;;
          *".sql.position$other") otherkind=$((otherkind + 1)); continue ;;
          *) continue ;;
        esac
        name=${object%".position$ext"}
        if ! is_name "$name"; then
          warn "skipping $where/$object: a backup's name is letters, digits, '.', '_' and '-'"
          continue
        fi
        if ! rc cat "$remote/$object" > "$work/object"; then
          warn "skipping $where/$object: it could not be read: $(said)"
          unread=$((unread + 1))
          continue
        fi
        unpacked=0
        unpack_to "$work/object" "$work/position" || unpacked=$?
        case $unpacked in
          2) warn "skipping $where/$object: it does not decrypt with the key of spec.backup.encryptionSecret"
             undecrypted=$((undecrypted + 1)); continue ;;
          1) warn "skipping $where/$object: it does not decompress"
             undecompressed=$((undecompressed + 1)); continue ;;
        esac
        if ! read_position "$work/position"; then
          warn "skipping $where/$object: not one line $POSITION_FORM"
          continue
        fi
        printf '%s %s %s %s %s %s %s\n' "$pos_server" "$pos_log" "$pos_offset" "$pos_taken" "$name" \
          "$pos_lineage" "$pos_database" >> "$work/positions"
      done < "$work/list"
      # The lineage: the restore's database only; this instance's backups, else those of the
      # one other instance that has backups before the time, else those of unknown lineage.
      # (Every field is a checked word without spaces; awk -v reads no backslash in them.)
      awk -v t="$before" '$4 < t' "$work/positions" > "$work/before"
      awk -v db="$database" '$6 != "unknown" && $7 == db' "$work/before" > "$work/database"
      awk -v me="$instance" '$6 == me' "$work/database" > "$work/candidates"
      lineage=$instance
      if [ ! -s "$work/candidates" ]; then
        # each other instance with its newest backup before the time
        sort -k4,4n "$work/database" | awk '{ newest[$6] = $5 } END { for (l in newest) print l, newest[l] }' \
          | sort > "$work/lineages"
        case $(grep -c '' "$work/lineages") in
          0) awk '$6 == "unknown"' "$work/before" > "$work/candidates"; lineage=unknown ;;
          1) cp "$work/database" "$work/candidates"; lineage=$(cut -d' ' -f1 "$work/lineages") ;;
          *) fail "backups of database '$database' in $where were taken before $at by several instances that share this prefix, and $instance itself has none before it: $(awk '{ printf "%s%s (newest %s)", (NR > 1 ? ", " : ""), $1, $2 }' "$work/lineages"); a point in time is restored from the backups and binary logs of one instance only: restore one of these backups by its file name instead (spec.restore_from: <file>.sql; no binary logs are replayed), or from a prefix that one instance alone writes to" ;;
        esac
      fi
      sort -k4,4n "$work/candidates" | tail -n 1 > "$work/chosen"
      if [ ! -s "$work/chosen" ]; then
        why="no backup of database '$database' in $where was taken before $at with binary logs on (spec.backup.pointInTime)"
        [ "$undecrypted" = 0 ] \
          || why="no backup in $where before $at could be chosen: $undecrypted of its position objects do not decrypt with the age key of spec.backup.encryptionSecret (not the key the backups were encrypted to?)"
        if [ "$otherkind" != 0 ]; then
          if [ "$other" = .zst.age ]; then
            why="$why; $otherkind position objects there are encrypted (.age) and spec.backup.encryptionSecret names no key to read them"
          else
            why="$why; $otherkind position objects there are not encrypted (taken before spec.backup.encryptionSecret was set) and are not read with a key"
          fi
        fi
        [ "$undecompressed" = 0 ] || why="$why; $undecompressed position objects do not decompress"
        [ "$unread" = 0 ] || why="$why; $unread position objects could not be read"
        others=$(awk -v db="$database" '$6 != "unknown" && $7 != db { print $7 }' "$work/before" | sort -u \
          | awk '{ printf "%s%s", (NR > 1 ? ", " : ""), $1 }')
        [ -z "$others" ] || why="$why; backups of other databases were taken before it ($others): a point in time restores the database of the same name"
        fail "$why"
      fi
      # seven words without spaces, each checked above
      IFS=' ' read -r id start position taken BACKUP_FILE lineage_chosen _ < "$work/chosen"
      case $lineage in
        "$instance") whose="of this instance ($instance)" ;;
        unknown) whose="whose position names no instance or database (its lineage unknown)" ;;
        *) whose="of instance $lineage_chosen (this instance, $instance, has none before it)" ;;
      esac
      echo "objects: $BACKUP_FILE (taken $(utc "$taken"), at $start:$position of server $id) is the newest backup of database '$database' $whose before $at"
      [ "$undecrypted" = 0 ] \
        || warn "$undecrypted position objects in $where do not decrypt with the key: none of them was considered"
      archived "$id" > "$work/archived" || fail "could not list $where/binlogs/$id: $(said)"
      mkdir -p "$BACKUP_DIR/binlogs"
      echo "$position" > "$BACKUP_DIR/binlogs/replay.partial"
      want=$(decimal "${start##*.}") covered=''
      while [ -z "$covered" ]; do
        # the object of log $want: the one of this key's kind when there are two (a log
        # archived again after a key was set or removed)
        line=$(awk -v n="$want" -v e="$ext" '$1 == n {
            if (substr($3, length($3) - length(e) + 1) == e) { print; found = 1; exit }
            if (other == "") other = $0
          } END { if (!found && other != "") print other }' "$work/archived")
        if [ -z "$line" ]; then
          name=$(printf '%s.%06d' "${start%.*}" "$want")
          if awk -v n="$want" '$1 > n' "$work/archived" | grep -q .; then
            fail "gap in the binary logs archived in $where/binlogs/$id: $name is missing; the events from $(utc "$taken") to before $at cannot all be replayed"
          fi
          reach=$(reach_of "$id" "$work/archived")
          if [ -n "$reach" ] && [ "$reach" -ge "$before" ]; then break; fi
          fail "the binary logs archived in $where/binlogs/$id reach $( [ -n "$reach" ] && utc "$reach" || echo 'no time yet'), not $at (every event before it)"
        fi
        # "<sequence> <close epoch> <object>", words without spaces (archived)
        seq=${line%% *} object=${line##* } closed=${line#* }
        closed=${closed%% *}
        rc cat "$remote/binlogs/$id/$object" > "$work/object" || fail "could not read $where/binlogs/$id/$object: $(said)"
        # <binlog file>-<epoch>.zst[.age]: the log's own name
        log=${object%-*}
        unpack < "$work/object" > "$BACKUP_DIR/binlogs/$log" || fail "$where/binlogs/$id/$object does not decrypt and decompress"
        echo "$log" >> "$BACKUP_DIR/binlogs/replay.partial"
        [ "$closed" -lt "$before" ] || covered=1
        want=$((seq + 1))
      done
      mv "$BACKUP_DIR/binlogs/replay.partial" "$BACKUP_DIR/binlogs/replay"
      echo "objects: $(( $(wc -l < "$BACKUP_DIR/binlogs/replay") - 1 )) binary logs to replay up to $at"
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
      unpack < "$work/object" > "$BACKUP_DIR/.$f.partial" \
        || fail "$where/$f$ext does not decrypt and decompress (a wrong key?)"
      mv "$BACKUP_DIR/.$f.partial" "$BACKUP_DIR/$f"
    done
    summary="file=$BACKUP_FILE size=$(wc -c < "$BACKUP_DIR/$BACKUP_FILE") object=$where/$BACKUP_FILE$ext"
    # the restore reads the backup's name from here when the fetch chose it
    printf '%s\n' "$BACKUP_FILE" > "$BACKUP_DIR/chosen"
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
printf '%s\n' "$summary" > "$TERMINATION_LOG" 2>/dev/null || true
echo "$summary"
