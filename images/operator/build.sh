#!/usr/bin/env bash
# Builds the operator image from the repository's Dockerfile without a Docker engine, and
# imports it into the local cluster's containerd.
#
# The Dockerfile is executed, not imitated (images/operator/dockerfile.py parses it and
# refuses what is not implemented): FROM python:3.11-slim-bookworm becomes a Debian
# bookworm rootfs from `debootstrap --variant=minbase` with python3 (3.11), python3-venv
# and ca-certificates plus bookworm-updates/-security; COPY honours .dockerignore; RUN runs
# in a chroot (the host's resolv.conf inside, /proc mounted in a private mount namespace,
# both gone afterwards); ENV, LABEL, USER, WORKDIR, EXPOSE and ENTRYPOINT become the image
# config. cluster/images/pack_image.py packs the result as a docker-archive tarball tagged
# localhost/mysql-operator:dev-<key> and localhost/mysql-operator:dev.
#
# Two caches under $CLUSTER_CACHE/images/:
#   operator-base-<base key>/  the rootfs after the Dockerfile's steps above "# build.sh: base"
#                              (OS + /opt/venv); the key hashes the Debian packages' candidate
#                              versions, those steps and the files they copy (requirements.txt,
#                              constraints.txt, install.sh) and BASE_REVISION. Minutes to build.
#   operator-<key>.tar         the image; the key adds the Dockerfile, .dockerignore, this
#                              script, dockerfile.py, pack_image.py and the copied sources
#                              (watches.yaml, roles/, playbooks/, operator/ansible_kopf).
#                              The steps below the marker write into an overlay on the
#                              cached base, so a role edit rebuilds in about ten seconds.
# Builds happen in temporary directories renamed into place, under a lock per cache. RUN
# steps get the build host's proxy variables and CA bundle (for pip behind a TLS-inspecting
# proxy), which never reach the image. Needs root, debootstrap, unshare, chroot, overlayfs.
#
# usage: build.sh [build]          build (or reuse) the image; print the tarball path
#        build.sh import [ADDRESS] build (or reuse), import into containerd's k8s.io
#                                  namespace unless already there; print the image ref
#                                  (default ADDRESS: the local cluster's containerd socket)
#        build.sh ref              print localhost/mysql-operator:dev-<key>
#        build.sh path             print the tarball path (whether built or not)
# env:   CLUSTER_CACHE (default ~/.cache/mysql-operator-cluster), DEBIAN_MIRROR /
#        DEBIAN_SECURITY_MIRROR (default: this host's APT sources)
set -euo pipefail
shopt -s inherit_errexit

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DOCKERFILE=$REPO/Dockerfile
DOCKERFILE_PY=$HERE/dockerfile.py
PACK_IMAGE=$REPO/cluster/images/pack_image.py
CLUSTER_CACHE=${CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mysql-operator-cluster}
IMAGE_CACHE="$CLUSTER_CACHE/images"
DEFAULT_CONTAINERD=/var/lib/otus-cluster/containerd/containerd.sock

REPOSITORY=localhost/mysql-operator
DEBIAN_SUITE=bookworm
# What FROM python:3.11-slim-bookworm stands for: Debian bookworm's python3 is 3.11.
OS_PACKAGES=python3,python3-venv,ca-certificates
# Their candidate versions (and the libraries Python links) are part of the base key.
KEY_PACKAGES=(python3.11 libpython3.11-stdlib python3.11-venv libc6 libssl3 ca-certificates)
# Bump when the way this script makes the base rootfs changes (its key ignores this file).
BASE_REVISION=1

# The state of the Dockerfile stage being executed (see run_stage).
DF_ROOTFS=
DF_ENV=()
DF_WORKDIR=/
BUILD_ENV=()

say() { printf '>> %s\n' "$*" >&2; }
die() {
  printf 'build.sh: %s\n' "$*" >&2
  exit 1
}

usage() {
  sed -n '/^# usage:/,/^set -euo/{/^set /d; s/^# \{0,1\}//; p}' "${BASH_SOURCE[0]}" >&2
  exit 2
}

arch() { dpkg --print-architecture; }

# --- Debian sources (as cluster/images/build.sh finds them) ------------------------------

# The URIs of this host's APT source for SUITE (deb822 or one-line format).
apt_mirror_for() {
  local suite=$1 f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$suite" '
      /^[[:space:]]*$/ { if (uri != "" && hit && deb) { print uri; done = 1; exit } uri = ""; hit = 0; deb = 0; next }
      /^URIs:/ { uri = $2 }
      /^Types:/ { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) hit = 1 }
      END { if (!done && uri != "" && hit && deb) print uri }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v suite="$suite" '$1 == "deb" { u = ($2 ~ /^\[/) ? $3 : $2; s = ($2 ~ /^\[/) ? $4 : $3; if (s == suite) print u }' "$f"
  done
}

debian_mirror() {
  local m=${DEBIAN_MIRROR:-$(apt_mirror_for "$DEBIAN_SUITE" | head -n1)}
  echo "${m:-http://deb.debian.org/debian}"
}

debian_security_mirror() {
  local m=${DEBIAN_SECURITY_MIRROR:-$(apt_mirror_for "$DEBIAN_SUITE-security" | head -n1)}
  echo "${m:-http://deb.debian.org/debian-security}"
}

# "<package> <candidate version>" lines from this host's APT lists, in one apt-cache run.
apt_candidates() {
  apt-cache policy "$@" 2>/dev/null \
    | awk '/^[^ ]/ { pkg = $1; sub(/:$/, "", pkg) } $1 == "Candidate:" { print pkg, $2 }'
}

# --- cache keys ----------------------------------------------------------------------------

sha() { sha256sum "$@" | cut -d' ' -f1; }

# Computed once by main (apt-cache takes a second; the key must not change during a build).
BASE_KEY=
base_key() {
  [ -n "$BASE_KEY" ] || BASE_KEY=$(compute_base_key)
  echo "$BASE_KEY"
}

compute_base_key() {
  local candidates
  candidates=$(apt_candidates "${KEY_PACKAGES[@]}")
  if [ "$(grep -cv '(none)' <<<"$candidates")" != "${#KEY_PACKAGES[@]}" ]; then
    die "apt-cache lacks candidates (run apt-get update): ${candidates//$'\n'/, }"
  fi
  {
    echo "operator-base $BASE_REVISION $(arch) $DEBIAN_SUITE $(debian_mirror) $(debian_security_mirror) $OS_PACKAGES"
    echo "$candidates"
    python3 "$DOCKERFILE_PY" script "$DOCKERFILE" base
    python3 "$DOCKERFILE_PY" hash --context "$REPO" "$DOCKERFILE" base
  } | sha256sum | cut -c1-12
}

image_key() {
  {
    echo "operator $(base_key)"
    sha "$DOCKERFILE" "$REPO/.dockerignore" "$HERE/build.sh" "$DOCKERFILE_PY" "$PACK_IMAGE" \
      "$REPO/requirements.txt" "$REPO/constraints.txt"
    python3 "$DOCKERFILE_PY" hash --context "$REPO" "$DOCKERFILE" app
  } | sha256sum | cut -c1-12
}

base_dir() { echo "$IMAGE_CACHE/operator-base-$(base_key)"; }
image_ref() { echo "$REPOSITORY:dev-$(image_key)"; }
image_path() { echo "$IMAGE_CACHE/operator-$(image_key).tar"; }

# --- build helpers -----------------------------------------------------------------------------

# Creates $WORK, a fresh temporary directory for cache $1, holding the cache's lock, after
# removing what killed builds left behind. The caller re-checks the cache afterwards.
begin_build() {
  local name=$1 stale
  mkdir -p "$IMAGE_CACHE"
  exec {LOCK_FD}>"$IMAGE_CACHE/.lock-$name"
  flock "$LOCK_FD"
  for stale in "$IMAGE_CACHE/.tmp-$name-"*; do
    [ -e "$stale" ] || continue
    say "removing $stale (left by an interrupted build)"
    rm -rf --one-file-system "$stale"
  done
  WORK=$(mktemp -d "$IMAGE_CACHE/.tmp-$name-XXXXXX")
  # shellcheck disable=SC2064 # expand now: WORK is reassigned by the next build
  trap "rm -rf --one-file-system '$WORK'" EXIT
}

end_build() {
  rm -rf --one-file-system "$WORK"
  trap - EXIT
  exec {LOCK_FD}>&-
}

# Runs a shell command inside the rootfs as root, like a Dockerfile RUN: a clean
# environment (defaults, then the Dockerfile's ENV so far), the WORKDIR so far, /proc
# mounted in a private mount namespace that disappears with the command.
in_rootfs() {
  local rootfs=$1 command=$2
  # shellcheck disable=SC2016 # expanded by the inner shells
  unshare --mount --fork -- /bin/sh -ec '
    rootfs=$1; workdir=$2; command=$3; shift 3
    mount -t proc proc "$rootfs/proc"
    exec chroot "$rootfs" /usr/bin/env -i \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive "$@" \
      /bin/sh -c "cd \"\$0\" && exec /bin/sh -c \"\$1\"" "$workdir" "$command"' \
    in_rootfs "$rootfs" "$DF_WORKDIR" "$command" "${BUILD_ENV[@]}" "${DF_ENV[@]}"
}

# The functions `dockerfile.py script` output calls (one per instruction).
df_from() { say "FROM $1: Debian $DEBIAN_SUITE rootfs ($OS_PACKAGES)"; }
df_env() { DF_ENV+=("$1=$2"); }
df_workdir() {
  DF_WORKDIR=$1
  install -d -m 0755 -o 0 -g 0 "$DF_ROOTFS$1"
}
df_copy() {
  local dest=$1
  shift
  python3 "$DOCKERFILE_PY" copy --context "$REPO" --rootfs "$DF_ROOTFS" "$dest" "$@"
}
df_run() {
  say "RUN $1"
  local log="$WORK/run.log" status=0
  build_env_on "$DF_ROOTFS"
  in_rootfs "$DF_ROOTFS" "$1" > >(tee "$log" | grep --line-buffered '^>> ' | sed -u 's/^>> />>   /' >&2) 2>&1 \
    || status=$?
  build_env_off "$DF_ROOTFS"
  if [ "$status" != 0 ]; then
    sleep 0.2 # let the tee finish
    tail -n 40 "$log" >&2
    die "RUN failed ($status): $1"
  fi
}

# What a RUN gets from the build host, like Docker's predefined proxy build arguments, and
# never left in the image: the proxy variables, and the host's CA bundle for pip (a
# TLS-inspecting proxy's CA is in the host's bundle, not in the image's).
build_env_on() {
  local rootfs=$1 name
  BUILD_ENV=()
  for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    if [ -n "${!name:-}" ]; then BUILD_ENV+=("$name=${!name}"); fi
  done
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    install -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/run/build-host-ca.crt"
    BUILD_ENV+=(PIP_CERT=/run/build-host-ca.crt)
  fi
}
build_env_off() {
  rm -f "$1/run/build-host-ca.crt"
  BUILD_ENV=()
}

# Executes stage $2 (base|app) of the Dockerfile into rootfs $1.
run_stage() {
  DF_ROOTFS=$1
  DF_ENV=()
  DF_WORKDIR=/
  local steps
  steps=$(python3 "$DOCKERFILE_PY" script "$DOCKERFILE" "$2")
  eval "$steps"
}

# --- base rootfs -------------------------------------------------------------------------------

debootstrap_rootfs() {
  local rootfs=$1 mirror
  mirror=$(debian_mirror)
  say "debootstrap --variant=minbase --include=$OS_PACKAGES $DEBIAN_SUITE from $mirror (a few minutes)"
  mkdir -p "$IMAGE_CACHE/debs"
  if ! unshare --mount --fork -- debootstrap --variant=minbase --include="$OS_PACKAGES" \
    --cache-dir="$IMAGE_CACHE/debs" "$DEBIAN_SUITE" "$rootfs" "$mirror" 2>&1 \
    | tee "$WORK/debootstrap.log" \
    | awk '/^I: (Resolving|Installing|Unpacking the|Configuring the|Base system)/ || /^[WE]: / {
             print ">>   " $0; fflush() }' >&2; then
    tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || tail -n 30 "$WORK/debootstrap.log" >&2
    die "debootstrap failed (log: $WORK/debootstrap.log)"
  fi
}

# bookworm-updates and -security (the python image's base is rebuilt with them), no docs.
update_rootfs() {
  local rootfs=$1
  rm -f "$rootfs/etc/apt/sources.list"
  cat > "$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $(debian_mirror)
Suites: $DEBIAN_SUITE $DEBIAN_SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $(debian_security_mirror)
Suites: $DEBIAN_SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  printf '#!/bin/sh\nexit 101\n' > "$rootfs/usr/sbin/policy-rc.d"
  chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
  cat > "$rootfs/etc/dpkg/dpkg.cfg.d/container-excludes" <<'EOF'
# Written by images/operator/build.sh: a container image needs no documentation.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
  say "applying $DEBIAN_SUITE-updates and $DEBIAN_SUITE-security"
  if ! in_rootfs "$rootfs" 'apt-get -q update; apt-get -q -y -o Dpkg::Options::=--force-confold dist-upgrade; apt-get clean' \
    > "$WORK/apt.log" 2>&1; then
    tail -n 30 "$WORK/apt.log" >&2
    die "updating the rootfs failed (log: $WORK/apt.log)"
  fi
  grep -E '^Setting up |^[0-9]+ upgraded' "$WORK/apt.log" | sed 's/^/>>   /' >&2 || true
}

slim_rootfs() {
  local rootfs=$1
  say "trimming the rootfs (APT lists, docs, man pages, locales, logs, caches)"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
    "$rootfs"/var/lib/dpkg/*-old "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/usr/share/lintian "$rootfs"/usr/share/linda "$rootfs"/tmp/* "$rootfs"/var/tmp/* \
    "$rootfs"/root/.cache "$rootfs"/debootstrap
  find "$rootfs/usr/share/doc" -mindepth 1 \! -type d \! -name copyright -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 \! -name locale.alias -exec rm -rf {} +
  find "$rootfs/usr/lib/locale" -mindepth 1 -maxdepth 1 \! -name 'C.*' -exec rm -rf {} +
  find "$rootfs/var/log" -type f -delete
  [ ! -s "$rootfs/etc/machine-id" ] || : > "$rootfs/etc/machine-id"
  # a container gets its own hosts, hostname and resolv.conf from the runtime
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$rootfs/etc/hosts"
  : > "$rootfs/etc/resolv.conf"
  : > "$rootfs/etc/hostname"
}

build_base() {
  local dir
  dir=$(base_dir)
  if [ -f "$dir/.complete" ]; then
    say "cached base rootfs: $dir"
    return 0
  fi
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
  [ "$(id -u)" = 0 ] || die "building the base rootfs needs root (debootstrap, chroot)"
  begin_build operator-base
  if [ -f "$dir/.complete" ]; then # built by a concurrent run while we waited for the lock
    end_build
    return 0
  fi
  local rootfs="$WORK/rootfs" started=$SECONDS old
  debootstrap_rootfs "$rootfs"
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf" # RUN steps download from PyPI
  update_rootfs "$rootfs"
  run_stage "$rootfs" base
  slim_rootfs "$rootfs"
  dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f='${Package} ${Version}\n' > "$WORK/packages"
  mkdir -p "$WORK/base"
  mv "$rootfs" "$WORK/base/rootfs"
  mv "$WORK/packages" "$WORK/base/packages"
  touch "$WORK/base/.complete"
  rm -rf --one-file-system "$dir"
  mv "$WORK/base" "$dir"
  for old in "$IMAGE_CACHE"/operator-base-*; do
    if [ "$old" != "$dir" ] && [ -d "$old" ]; then
      say "removing the outdated $old"
      rm -rf --one-file-system "$old"
    fi
  done
  end_build
  say "built base rootfs $dir ($(du -sm "$dir/rootfs" | cut -f1) MiB) in $((SECONDS - started)) s"
}

# --- image -------------------------------------------------------------------------------------

# Adds TAG to the RepoTags of the docker-archive $1 (pack_image.py writes one tag): its
# manifest.json is the last member, so it is rewritten in place, whatever the layer's size.
add_tag() {
  python3 - "$1" "$2" <<'PY'
import json, sys, tarfile
path, tag = sys.argv[1], sys.argv[2]
with tarfile.open(path) as archive:
    last = archive.getmembers()[-1]
    if last.name != 'manifest.json':
        sys.exit(f"add_tag: {path} does not end with manifest.json")
    manifest = json.load(archive.extractfile(last))
manifest[0]['RepoTags'].append(tag)
raw = json.dumps(manifest).encode()
info = tarfile.TarInfo('manifest.json')
info.size, info.mode, info.mtime = len(raw), last.mode, last.mtime
with open(path, 'r+b') as fh:
    fh.truncate(last.offset)
    fh.seek(last.offset)
    fh.write(info.tobuf(format=tarfile.PAX_FORMAT))
    fh.write(raw + bytes(-len(raw) % tarfile.BLOCKSIZE))
    fh.write(bytes(2 * tarfile.BLOCKSIZE))  # end of archive
PY
}

build_image() {
  local key out ref
  key=$(image_key) # once: the sources may change while the build runs
  out="$IMAGE_CACHE/operator-$key.tar"
  ref="$REPOSITORY:dev-$key"
  if [ -f "$out" ]; then
    say "cached: $ref $out"
    echo "$out"
    return 0
  fi
  local started=$SECONDS
  build_base
  begin_build operator
  if [ -f "$out" ]; then
    end_build
    echo "$out"
    return 0
  fi
  local old
  mkdir -p "$WORK/rootfs" "$WORK/upper" "$WORK/overlay-work"
  say "overlaying the app stage on the base rootfs"
  unshare --mount --fork -- "${BASH_SOURCE[0]}" _app "$(base_dir)/rootfs" "$WORK" "$ref" "$key" \
    || die "the app stage failed"
  add_tag "$WORK/image.tar" "$REPOSITORY:dev"
  mv "$WORK/image.tar" "$out"
  for old in "$IMAGE_CACHE"/operator-*.tar; do
    if [ "$old" != "$out" ] && [ -f "$old" ]; then
      say "removing the outdated $old"
      rm -f "$old" "$old".imported-*
    fi
  done
  end_build
  say "built: $ref ($REPOSITORY:dev) $out, $(du -m "$out" | cut -f1) MiB, in $((SECONDS - started)) s"
  echo "$out"
}

# The app stage, in the private mount namespace build_image made: the Dockerfile's steps
# below "# build.sh: base" write into an overlay on the cached base rootfs (which stays
# untouched, and nothing has to be copied), then the merged tree is packed.
app_stage() {
  local base=$1 key=$4
  WORK=$2
  local ref=$3 rootfs="$WORK/rootfs"
  mount -t overlay overlay -o "lowerdir=$base,upperdir=$WORK/upper,workdir=$WORK/overlay-work" "$rootfs"
  run_stage "$rootfs" app
  local pack_args=()
  mapfile -d '' pack_args < <(python3 "$DOCKERFILE_PY" pack-args "$DOCKERFILE")
  say "packing $ref ($(du -sm "$rootfs" | cut -f1) MiB rootfs)"
  python3 "$PACK_IMAGE" --rootfs "$rootfs" --out "$WORK/image.tar" --tag "$ref" --arch "$(arch)" \
    --history "images/operator/build.sh: Dockerfile, key $key" "${pack_args[@]}"
}

# --- import ------------------------------------------------------------------------------------

# Imports the image into the containerd at $1 (namespace k8s.io) unless both its tags
# there already name the digest this tarball produced; drops older dev-<key> tags.
import_image() {
  local address=$1 tar ref stamp digest dev name
  tar=$(build_image)
  ref="$REPOSITORY:dev-$(basename "$tar" .tar | sed 's/^operator-//')"
  command -v ctr >/dev/null || die "ctr (containerd's client) is not installed"
  [ -S "$address" ] || die "no containerd socket at $address (is the cluster up?)"
  ctr_k8s() { ctr --address "$address" --namespace k8s.io "$@"; }
  digest_of() { ctr_k8s images ls "name==$1" | awk 'NR > 1 { print $3 }'; }
  stamp="$tar.imported-$(printf '%s' "$address" | sha256sum | cut -c1-8)"
  digest=$(digest_of "$ref")
  dev=$(digest_of "$REPOSITORY:dev")
  if [ -n "$digest" ] && [ "$digest" = "$dev" ] && [ -f "$stamp" ] && [ "$digest" = "$(cat "$stamp")" ]; then
    say "already imported: $ref = $REPOSITORY:dev $digest"
  else
    say "importing $tar into $address (namespace k8s.io)"
    ctr_k8s images import --platform "linux/$(arch)" "$tar" >&2
    digest=$(digest_of "$ref")
    [ -n "$digest" ] || die "$ref is not in containerd after the import"
    [ "$(digest_of "$REPOSITORY:dev")" = "$digest" ] || die "$REPOSITORY:dev does not name $digest after the import"
    echo "$digest" > "$stamp"
    say "imported: $ref = $REPOSITORY:dev $digest"
  fi
  for name in $(ctr_k8s images ls -q | grep -E "^$REPOSITORY:dev-" || true); do
    if [ "$name" != "$ref" ]; then
      say "removing the outdated $name from containerd"
      ctr_k8s images rm "$name" >/dev/null
    fi
  done
  echo "$ref"
}

# --- main --------------------------------------------------------------------------------------

main() {
  local cmd=${1:-build}
  case $cmd in
    build | import | ref | path) BASE_KEY=$(compute_base_key) ;;
  esac
  case $cmd in
    build) build_image ;;
    import) import_image "${2:-$DEFAULT_CONTAINERD}" ;;
    ref) image_ref ;;
    path) image_path ;;
    _app) app_stage "${@:2}" ;; # internal: see build_image
    *) usage ;;
  esac
}

main "$@"
