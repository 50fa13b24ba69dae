# A backup's copy in an S3-compatible bucket, run by the backup-tools image beside the
# Jobs that take and restore backups. `ship` sends /backup/$BACKUP_FILE and its .figures to
# the bucket and checks them there; `fetch` brings them from the bucket to /backup.
#
# Objects: $S3_PREFIX/$BACKUP_FILE.zst and $S3_PREFIX/$BACKUP_FILE.figures.zst, zstd-compressed,
# with .age after both when an age identity is mounted at /keys/identity (encrypted to its
# recipient). A copy counts as shipped only once each object, read back from the bucket,
# decrypts and decompresses to the very bytes of the local file (sha256).
#
# Env: MODE (ship, fetch or prune), BACKUP_FILE (or JOB_NAME: <JOB_NAME>.sql; FILES for
# prune), S3_BUCKET, S3_PREFIX, and rclone's own settings of its S3 backend
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
pack() {
  if [ -f "$identity" ]; then
    zstd -q -c -- "$1" | age -r "$(age-keygen -y "$identity")"
  else
    zstd -q -c -- "$1"
  fi
}
unpack() {
  if [ -f "$identity" ]; then age -d -i "$identity" | zstd -q -d -c; else zstd -q -d -c; fi
}
digest() { sha256sum | cut -d' ' -f1; }

# The bucket is listed first: a store may create a missing bucket on the first write
# (SeaweedFS does), where the backups would then land unnoticed.
if ! rc lsf --max-depth 1 "$remote" > /dev/null; then
  grep -q 'directory not found' "$work/rclone.err" \
    && fail "bucket $S3_BUCKET does not exist at $RCLONE_S3_ENDPOINT (listing $where)"
  fail "could not list $where at $RCLONE_S3_ENDPOINT: $(said)"
fi

case "$MODE" in
  ship)
    for f in "$BACKUP_FILE.figures" "$BACKUP_FILE"; do
      [ -f "/backup/$f" ] || fail "/backup/$f is not there to ship to $where"
      pack "/backup/$f" > "$work/object" || fail "could not compress or encrypt $f"
      rc copyto "$work/object" "$remote/$f$ext" \
        || fail "could not write $where/$f$ext: $(said)"
      rc cat "$remote/$f$ext" > "$work/back" || fail "could not read $where/$f$ext back: $(said)"
      [ "$(unpack < "$work/back" | digest)" = "$(digest < "/backup/$f")" ] \
        || fail "$where/$f$ext does not read back as the backup it was written from"
      rm -f "$work/object" "$work/back"
    done
    stored=$(rc lsf --format s "$remote/$BACKUP_FILE$ext") || fail "could not list $where/$BACKUP_FILE$ext: $(said)"
    size=$(wc -c < "/backup/$BACKUP_FILE")
    tables=$(wc -l < "/backup/$BACKUP_FILE.figures")
    rows=$(awk -F '\t' '{ n += $2 } END { print n + 0 }' "/backup/$BACKUP_FILE.figures")
    summary="file=$BACKUP_FILE size=$size tables=$tables rows=$rows object=$where/$BACKUP_FILE$ext stored=$stored"
    ;;
  fetch)
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
    ;;
  prune)
    # both spellings: the key may have been set or removed since a backup was shipped
    printf '%s\n' "$FILES" | while IFS= read -r f; do
      case "$f" in ''|*/*|.*) continue ;; esac
      for object in "$f.zst" "$f.zst.age" "$f.figures.zst" "$f.figures.zst.age"; do
        if rc lsf "$remote/$object" > "$work/found" && grep -q . "$work/found"; then
          rc deletefile "$remote/$object" || fail "could not remove $where/$object: $(said)"
          echo "objects: removed $where/$object"
        fi
      done
    done
    summary="pruned $(printf '%s\n' "$FILES" | grep -c .) backups from $where"
    ;;
  *) fail "MODE is ship, fetch or prune, not '$MODE'" ;;
esac
printf '%s\n' "$summary" > /dev/termination-log 2>/dev/null || true
echo "$summary"
