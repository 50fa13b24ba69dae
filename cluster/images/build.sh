#!/usr/bin/env bash
# Owns the local cluster's container images, built without Docker:
#   pause   localhost/pause:k8s-1.20.2      Kubernetes' own build/pause/linux/pause.c, static
#   mariadb localhost/mariadb:10.11-bookworm Debian bookworm's MariaDB (a MySQL-compatible
#           server) from debootstrap + security updates, with mariadb/docker-entrypoint.sh
#           (the official mysql image's MYSQL_* environment contract)
# Each is a docker-archive tarball (what `docker load` and `ctr images import` read) cached
# as $CLUSTER_CACHE/images/<name>-<key>.tar, the key hashing every input (this script,
# pack_image.py, the entrypoint, the sources and the Debian package versions), so an
# unchanged rerun is instant and an edited input rebuilds. Builds happen in a temporary
# directory and are renamed into place: a killed build never leaves a complete-looking tar.
#
# usage: build.sh pause|mariadb|all        build (or reuse) the image tarball(s)
#        build.sh path pause|mariadb       print the tarball path (whether built or not)
#        build.sh import pause|mariadb|all <containerd-address>
#                                          import into containerd's k8s.io namespace
# env:   CLUSTER_CACHE (default ~/.cache/mysql-operator-cluster), K8S_SRC (the unpacked
#        Kubernetes 1.20.2 tree), DEBIAN_MIRROR / DEBIAN_SECURITY_MIRROR (default: this
#        host's APT sources)
set -euo pipefail
shopt -s inherit_errexit

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER_CACHE=${CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mysql-operator-cluster}
IMAGE_CACHE="$CLUSTER_CACHE/images"
K8S_VERSION=1.20.2
K8S_SRC=${K8S_SRC:-$CLUSTER_CACHE/src/tree/kubernetes-$K8S_VERSION}
DEBIAN_SUITE=bookworm
MARIADB_PACKAGES=mariadb-server,mariadb-client
MYSQL_UID=999 # the official mysql/mariadb images' uid/gid, fixed so volumes keep their owner

declare -A IMAGE_REF=(
  [pause]="localhost/pause:k8s-$K8S_VERSION"
  [mariadb]="localhost/mariadb:10.11-$DEBIAN_SUITE"
)

say() { printf '>> %s\n' "$*" >&2; }
die() {
  printf 'build.sh: %s\n' "$*" >&2
  exit 1
}

usage() {
  sed -n '/^# usage:/,/^set -euo/{/^set /d; s/^# \{0,1\}//; p}' "${BASH_SOURCE[0]}" >&2
  exit 2
}

check_name() {
  [ -n "${IMAGE_REF[${1:-}]+x}" ] || die "unknown image '${1:-}' (pause or mariadb)"
}

arch() { dpkg --print-architecture; }

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

# --- cache keys ----------------------------------------------------------------------------

pause_src() { echo "$K8S_SRC/build/pause/linux/pause.c"; }

# The pause binary's version string, as build/pause/Makefile composes it: v$(TAG)-$(REV),
# REV being `git describe --contains` of the release tree, i.e. its tag.
pause_version() {
  local tag
  tag=$(sed -n 's/^TAG = //p' "$K8S_SRC/build/pause/Makefile")
  [ -n "$tag" ] || die "no TAG in $K8S_SRC/build/pause/Makefile"
  echo "v$tag-v$K8S_VERSION"
}

# "<package> <candidate version>" lines from this host's APT lists (bookworm + updates +
# security). APT's binary cache is kept under the image cache: this host's APT config
# disables it (docker-clean), and rebuilding it costs a second per run.
apt_candidates() {
  mkdir -p "$IMAGE_CACHE"
  apt-cache -o Dir::Cache::pkgcache="$IMAGE_CACHE/apt-pkgcache.bin" -o Dir::Cache::srcpkgcache= \
    policy "$@" 2>/dev/null \
    | awk '/^[^ ]/ { pkg = $1; sub(/:$/, "", pkg) } $1 == "Candidate:" { print pkg, $2 }'
}

cache_key() {
  local name=$1
  {
    echo "image ${IMAGE_REF[$name]} $(arch)"
    sha256sum "$HERE/build.sh" "$HERE/pack_image.py" | cut -d' ' -f1
    case $name in
      pause)
        [ -f "$(pause_src)" ] || die "missing $(pause_src): unpack the Kubernetes $K8S_VERSION tree (or set K8S_SRC)"
        sha256sum "$(pause_src)" | cut -d' ' -f1
        pause_version
        gcc -dumpfullversion
        dpkg-query -W -f='${Version}\n' libc6-dev
        ;;
      mariadb)
        sha256sum "$HERE/mariadb/docker-entrypoint.sh" | cut -d' ' -f1
        echo "$DEBIAN_SUITE $(debian_mirror) $(debian_security_mirror) $MARIADB_PACKAGES"
        local candidates
        candidates=$(apt_candidates mariadb-server mariadb-client galera-4 libc6 libssl3)
        if [ "$(grep -cv '(none)' <<<"$candidates")" != 5 ]; then
          die "apt-cache lacks candidates (run apt-get update): ${candidates//$'\n'/, }"
        fi
        echo "$candidates"
        ;;
    esac
  } | sha256sum | cut -c1-12
}

image_path() {
  local key
  key=$(cache_key "$1")
  echo "$IMAGE_CACHE/$1-$key.tar"
}

# --- build helpers -----------------------------------------------------------------------------

# Creates $WORK (a fresh temporary directory for image $1 under the cache) while holding a
# per-image lock, after removing what killed builds of that image left behind.
begin_build() {
  local name=$1
  mkdir -p "$IMAGE_CACHE"
  exec {LOCK_FD}>"$IMAGE_CACHE/.lock-$name"
  flock "$LOCK_FD"
  local stale
  for stale in "$IMAGE_CACHE/.tmp-$name-"*; do
    [ -e "$stale" ] || continue
    say "removing $stale (left by an interrupted build)"
    rm -rf --one-file-system "$stale"
  done
  WORK=$(mktemp -d "$IMAGE_CACHE/.tmp-$name-XXXXXX")
  # shellcheck disable=SC2064 # expand now: WORK is reassigned by the next build
  trap "rm -rf --one-file-system '$WORK'" EXIT
}

# Removes the working directory and the tarballs of image $1 other than $2 (older keys).
end_build() {
  local name=$1 keep=$2 old
  for old in "$IMAGE_CACHE/$name"-*.tar; do
    if [ "$old" != "$keep" ] && [ -f "$old" ]; then
      say "removing the outdated $old"
      rm -f "$old" "${old%.tar}.packages" "$old".imported-*
    fi
  done
  rm -rf --one-file-system "$WORK"
  trap - EXIT
  exec {LOCK_FD}>&-
}

pack() {
  local rootfs=$1 out=$2 name=$3
  shift 3
  python3 "$HERE/pack_image.py" --rootfs "$rootfs" --out "$out" --tag "${IMAGE_REF[$name]}" \
    --arch "$(arch)" --history "cluster/images/build.sh $name ($(basename "$(image_path "$name")" .tar))" "$@"
}

# --- pause ---------------------------------------------------------------------------------------

build_pause() {
  local out
  out=$(image_path pause)
  if [ -f "$out" ]; then
    say "cached: ${IMAGE_REF[pause]} $out"
    return 0
  fi
  begin_build pause
  local version
  version=$(pause_version)
  say "compiling $(pause_src) (static, VERSION=$version)"
  mkdir -p "$WORK/rootfs"
  # the CFLAGS of build/pause/Makefile, then strip as it does
  gcc -Os -Wall -Werror -static -DVERSION="$version" -o "$WORK/rootfs/pause" "$(pause_src)"
  strip "$WORK/rootfs/pause"
  chmod 0755 "$WORK/rootfs/pause"
  "$WORK/rootfs/pause" -v >&2
  say "packing ${IMAGE_REF[pause]}"
  pack "$WORK/rootfs" "$WORK/image.tar" pause --entrypoint '["/pause"]' \
    --label "org.opencontainers.image.title=pause" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.source=kubernetes $K8S_VERSION build/pause/linux/pause.c"
  mv "$WORK/image.tar" "$out"
  end_build pause "$out"
  say "built: ${IMAGE_REF[pause]} $out"
}

# --- mariadb -------------------------------------------------------------------------------------

# Runs a command inside the rootfs with /proc mounted, in a private mount namespace: the
# mount disappears with the command, even when the build is killed.
in_rootfs() {
  local rootfs=$1
  shift
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --mount --fork -- /bin/sh -ec '
    rootfs=$1; shift
    mount -t proc proc "$rootfs/proc"
    exec chroot "$rootfs" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@"' in_rootfs "$rootfs" "$@"
}

mariadb_debootstrap() {
  local rootfs=$1 mirror
  mirror=$(debian_mirror)
  say "debootstrap --variant=minbase --include=$MARIADB_PACKAGES $DEBIAN_SUITE from $mirror (a few minutes)"
  mkdir -p "$IMAGE_CACHE/debs"
  # its own mount namespace: debootstrap's /proc and /sys mounts vanish even if it is killed
  if ! unshare --mount --fork -- debootstrap --variant=minbase --include="$MARIADB_PACKAGES" \
    --cache-dir="$IMAGE_CACHE/debs" "$DEBIAN_SUITE" "$rootfs" "$mirror" 2>&1 \
    | tee "$WORK/debootstrap.log" \
    | awk '/^I: (Resolving|Checking component|Installing|Unpacking the|Unpacking required|Configuring the|Configuring required|Base system)/ || /^[WE]: / {
             print ">>   " $0; fflush() }' >&2
  then
    tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || tail -n 30 "$WORK/debootstrap.log" >&2
    die "debootstrap failed (log: $WORK/debootstrap.log)"
  fi
}

# Security and point-release updates, then APT's caches and lists are dropped again.
mariadb_update() {
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
  # no service may start inside an image build (nor later in the container)
  printf '#!/bin/sh\nexit 101\n' > "$rootfs/usr/sbin/policy-rc.d"
  chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
  # keep documentation out of any later installation too (like Debian's slim images)
  cat > "$rootfs/etc/dpkg/dpkg.cfg.d/container-excludes" <<'EOF'
# Written by cluster/images/build.sh: a container image needs no documentation.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
  say "applying $DEBIAN_SUITE-updates and $DEBIAN_SUITE-security"
  if ! in_rootfs "$rootfs" sh -ec 'apt-get -q update; apt-get -q -y -o Dpkg::Options::=--force-confold dist-upgrade; apt-get clean' \
    > "$WORK/apt.log" 2>&1; then
    tail -n 30 "$WORK/apt.log" >&2
    die "updating the rootfs failed (log: $WORK/apt.log)"
  fi
  grep -E '^Setting up |^[0-9]+ upgraded' "$WORK/apt.log" | sed 's/^/>>   /' >&2 || true
}

# The mysql account gets the fixed uid/gid MYSQL_UID; files follow.
mariadb_fix_mysql_ids() {
  local rootfs=$1 old_uid old_gid
  old_uid=$(awk -F: '$1 == "mysql" { print $3 }' "$rootfs/etc/passwd")
  old_gid=$(awk -F: '$1 == "mysql" { print $3 }' "$rootfs/etc/group")
  if [ -z "$old_uid" ] || [ -z "$old_gid" ]; then die "no mysql user/group in the rootfs"; fi
  if [ "$old_uid" != "$MYSQL_UID" ] || [ "$old_gid" != "$MYSQL_UID" ]; then
    say "mysql user: uid/gid $old_uid/$old_gid -> $MYSQL_UID/$MYSQL_UID"
    in_rootfs "$rootfs" groupmod -g "$MYSQL_UID" mysql
    in_rootfs "$rootfs" usermod -u "$MYSQL_UID" -g "$MYSQL_UID" mysql
    find "$rootfs" -xdev -uid "$old_uid" -exec chown -h "$MYSQL_UID" {} +
    find "$rootfs" -xdev -gid "$old_gid" -exec chgrp -h "$MYSQL_UID" {} +
  fi
}

# The container's own settings, read after Debian's 50-server.cnf (which binds 127.0.0.1).
mariadb_configure() {
  local rootfs=$1
  cat > "$rootfs/etc/mysql/mariadb.conf.d/99-container.cnf" <<'EOF'
# Written by cluster/images/build.sh: MariaDB in a container. Read after 50-server.cnf.
[mysqld]
bind-address = 0.0.0.0
port = 3306
# clients are pods: match accounts by IP, never wait for reverse DNS
skip-name-resolve
skip-host-cache
EOF
  # the data directory is initialised by the entrypoint (Debian's postinst made one)
  rm -rf "$rootfs/var/lib/mysql"
  mkdir -p "$rootfs/var/lib/mysql" "$rootfs/run/mysqld" "$rootfs/docker-entrypoint-initdb.d"
  chown "$MYSQL_UID:$MYSQL_UID" "$rootfs/var/lib/mysql" "$rootfs/run/mysqld"
  chmod 0755 "$rootfs/var/lib/mysql"
  # socket and pid file stay writable whatever uid the server ends up with
  chmod 1777 "$rootfs/run/mysqld"
  install -D -m 0755 "$HERE/mariadb/docker-entrypoint.sh" "$rootfs/usr/local/bin/docker-entrypoint.sh"
  # a container gets its own hosts, hostname and resolv.conf from the runtime
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$rootfs/etc/hosts"
  : > "$rootfs/etc/resolv.conf"
  : > "$rootfs/etc/hostname"
}

mariadb_slim() {
  local rootfs=$1
  say "trimming the rootfs (APT lists, docs, man pages, locales, logs)"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
    "$rootfs"/var/lib/dpkg/*-old "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/run/adduser \
    "$rootfs"/usr/share/lintian "$rootfs"/usr/share/linda "$rootfs"/tmp/* "$rootfs"/var/tmp/* \
    "$rootfs"/debootstrap
  find "$rootfs/usr/share/doc" -mindepth 1 \! -type d \! -name copyright -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 \! -name locale.alias -exec rm -rf {} +
  # only the C locale (C.utf8) remains in /usr/lib/locale
  find "$rootfs/usr/lib/locale" -mindepth 1 -maxdepth 1 \! -name 'C.*' -exec rm -rf {} +
  # the server's messages in English only
  find "$rootfs/usr/share/mysql" -mindepth 1 -maxdepth 1 -type d \! -name english \! -name charsets \
    -exec test -f {}/errmsg.sys \; -exec rm -rf {} +
  find "$rootfs/var/log" -type f -delete
  [ ! -s "$rootfs/etc/machine-id" ] || : > "$rootfs/etc/machine-id"
}

mariadb_check_rootfs() {
  local rootfs=$1 cmd missing=()
  for cmd in mariadbd mariadb mariadb-install-db mariadb-tzinfo-to-sql mysql mysqldump mysqladmin \
    sh bash setpriv docker-entrypoint.sh; do
    [ -n "$(in_rootfs "$rootfs" sh -c "command -v $cmd" 2>/dev/null)" ] || missing+=("$cmd")
  done
  [ "${#missing[@]}" -eq 0 ] || die "the rootfs lacks: ${missing[*]}"
  in_rootfs "$rootfs" mariadbd --version >&2
}

build_mariadb() {
  local out
  out=$(image_path mariadb)
  if [ -f "$out" ]; then
    say "cached: ${IMAGE_REF[mariadb]} $out"
    return 0
  fi
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
  [ "$(id -u)" = 0 ] || die "building the mariadb image needs root (debootstrap, chroot, chown)"
  begin_build mariadb
  local rootfs="$WORK/rootfs" started=$SECONDS
  mariadb_debootstrap "$rootfs"
  mariadb_update "$rootfs"
  mariadb_fix_mysql_ids "$rootfs"
  mariadb_configure "$rootfs"
  mariadb_slim "$rootfs"
  mariadb_check_rootfs "$rootfs"
  local version
  version=$(dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f='${Version}' mariadb-server)
  dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f='${Package} ${Version}\n' > "$WORK/packages"
  say "packing ${IMAGE_REF[mariadb]} (MariaDB $version, $(du -sm "$rootfs" | cut -f1) MiB rootfs)"
  pack "$rootfs" "$WORK/image.tar" mariadb \
    --entrypoint '["docker-entrypoint.sh"]' --cmd '["mariadbd"]' \
    --expose 3306/tcp --volume /var/lib/mysql \
    --label "org.opencontainers.image.title=mariadb" \
    --label "org.opencontainers.image.description=MariaDB (MySQL-compatible) server from Debian $DEBIAN_SUITE" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.base.name=debian:$DEBIAN_SUITE"
  mv "$WORK/packages" "${out%.tar}.packages"
  mv "$WORK/image.tar" "$out"
  end_build mariadb "$out"
  say "built: ${IMAGE_REF[mariadb]} $out in $((SECONDS - started)) s"
}

# --- import ------------------------------------------------------------------------------------

# Imports image $1 into the containerd at $2 (namespace k8s.io), unless the image there is
# the one this tarball produced last time (its digest is remembered next to the tarball).
import_image() {
  local name=$1 address=$2 tar ref stamp current digest
  tar=$(image_path "$name")
  [ -f "$tar" ] || "build_$name"
  ref=${IMAGE_REF[$name]}
  stamp="$tar.imported-$(printf '%s' "$address" | sha256sum | cut -c1-8)"
  ctr_k8s() { ctr --address "$address" --namespace k8s.io "$@"; }
  current=$(ctr_k8s images ls "name==$ref" | awk 'NR > 1 { print $3 }')
  if [ -n "$current" ] && [ -f "$stamp" ] && [ "$current" = "$(cat "$stamp")" ]; then
    say "already imported: $ref $current"
    echo "$ref"
    return 0
  fi
  say "importing $tar into $address (namespace k8s.io)"
  ctr_k8s images import --platform "linux/$(arch)" "$tar" >&2
  digest=$(ctr_k8s images ls "name==$ref" | awk 'NR > 1 { print $3 }')
  [ -n "$digest" ] || die "$ref is not in containerd after the import"
  echo "$digest" > "$stamp"
  say "imported: $ref $digest"
  echo "$ref"
}

# --- main --------------------------------------------------------------------------------------

# the image names an argument stands for (validated: a failure inside $(...) in a for list
# would go unnoticed)
names_for() {
  if [ "$1" = all ]; then echo pause mariadb; else echo "$1"; fi
}

main() {
  local cmd=${1:-} name
  case $cmd in
    pause | mariadb | all)
      for name in $(names_for "$cmd"); do "build_$name"; done
      ;;
    path)
      check_name "${2:-}"
      image_path "$2"
      ;;
    import)
      [ -n "${3:-}" ] || usage
      [ "$2" = all ] || check_name "$2"
      command -v ctr >/dev/null || die "ctr (containerd's client) is not installed"
      for name in $(names_for "${2:-}"); do import_image "$name" "$3"; done
      ;;
    *) usage ;;
  esac
}

main "$@"
