#!/usr/bin/env bash
# Owns the local cluster's container images, built without Docker:
#   pause   localhost/pause:local           Kubernetes' own build/pause/linux/pause.c, static,
#           from the source of the cluster's Kubernetes version
#   mariadb localhost/mariadb:10.11-bookworm Debian bookworm's MariaDB (a MySQL-compatible
#           server) from debootstrap + security updates, with mariadb/docker-entrypoint.sh
#           (the official mysql image's MYSQL_* environment contract)
#   mysql   localhost/mysql:9.7-debian      Oracle MySQL 9.7 from Debian sid's mysql-9.7
#           packages (mysql-server-core, mysql-client-core) and gosu, from debootstrap, set up
#           like the official mysql:9.7 image (uid 999, /etc/mysql/my.cnf, conf.d), with
#           mysql/docker-entrypoint.sh (the official entrypoint's contract AND its quirks)
#   mysqld-exporter localhost/mysqld-exporter:0.14.0  Prometheus' mysqld_exporter from Debian
#           bookworm's prometheus-mysqld-exporter: its binary (/bin/mysqld_exporter, the
#           entrypoint, :9104), the libc it links and nothing else, run as uid/gid 65534
#           (nobody); mysqld-exporter/README.md says how it takes credentials
#   backup-tools localhost/backup-tools:bookworm  what the backup Jobs' shipping and fetching
#           containers run against object storage, from Debian bookworm's packages: rclone
#           (the S3 client), zstd, age and age-keygen, busybox (sh, sha256sum, ...) and the
#           CA bundle; the binaries and the libraries they link, run as uid/gid 65534
#   seaweedfs localhost/seaweedfs:<SEAWEEDFS_VERSION>  SeaweedFS' weed (an S3-compatible object
#           store users run in production) built from the Go module proxy, static, alone in
#           the image, run as uid/gid 65534 (the local cluster's object store: cluster/object-store)
# Each is a docker-archive tarball (what `docker load` and `ctr images import` read) cached
# as $CLUSTER_CACHE/images/<name>-<key>.tar, the key hashing every input (this script,
# pack_image.py, the entrypoint, the sources and the Debian package versions), so an
# unchanged rerun is instant and an edited input rebuilds. Builds happen in a temporary
# directory and are renamed into place: a killed build never leaves a complete-looking tar.
# The mysql key cannot hold package versions (this host has no sid APT lists): a newer sid
# package arrives only when an input changes; <name>-<key>.packages lists what was installed.
# mysqld-exporter's .debs come from this host's APT sources (apt-get download), the ones its
# key reads the candidate versions from.
#
# usage: build.sh NAME|all           build (or reuse) the image tarball(s)
#        build.sh path NAME          print the tarball path (whether built or not)
#        build.sh import NAME|all <containerd-address>
#                                    import into containerd's k8s.io namespace
#        NAME: pause, mariadb, mysql, mysqld-exporter, backup-tools or seaweedfs (built by
#        build_<NAME, - as _>)
# env:   CLUSTER_CACHE (default ~/.cache/mysql-operator-cluster), K8S_VERSION (the cluster's,
#        set by cluster/lib/common.sh), K8S_SRC (its source: the Go module cache's
#        k8s.io/kubernetes, or the unpacked Debian tree of 1.20.2), DEBIAN_MIRROR / DEBIAN_SECURITY_MIRROR (default: this
#        host's APT sources; sid comes from DEBIAN_MIRROR too)
set -euo pipefail
shopt -s inherit_errexit

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER_CACHE=${CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mysql-operator-cluster}
IMAGE_CACHE="$CLUSTER_CACHE/images"
K8S_VERSION=${K8S_VERSION:?K8S_VERSION is set by cluster/lib/common.sh}
case "$K8S_VERSION" in
  1.20.*) K8S_SRC=${K8S_SRC:-$CLUSTER_CACHE/src/tree/kubernetes-$K8S_VERSION} ;;
  *) K8S_SRC=${K8S_SRC:-$(go env GOMODCACHE)/k8s.io/kubernetes@v$K8S_VERSION} ;;
esac
DEBIAN_SUITE=bookworm
MARIADB_PACKAGES=mariadb-server,mariadb-client
# Oracle MySQL is only in sid (source mysql-9.7), on the same archive as bookworm
MYSQL_SUITE=sid
MYSQL_SERIES=9.7
# gosu as in the official image; tzdata for the time zone tables; bzip2, xz-utils and
# zstd for compressed init files (the official image installs them too)
MYSQL_PACKAGES=mysql-server-core,mysql-client-core,gosu,tzdata,bzip2,xz-utils,zstd
MYSQL_UID=999 # the official mysql/mariadb images' uid/gid, fixed so volumes keep their owner
# The exporter's tag is bookworm's upstream version: a new one fails the key (see
# exporter_candidates) until this is changed; a new Debian revision rebuilds under the same tag.
EXPORTER_VERSION=0.14.0
EXPORTER_PACKAGES=(prometheus-mysqld-exporter libc6)
# nobody/nogroup, the user of upstream's image (USER nobody), numeric: runAsNonRoot can check it
EXPORTER_UID=65534
# The backup tools' packages: the first four give the binaries, the rest what they link
TOOLS_PACKAGES=(rclone zstd age busybox-static ca-certificates libc6 zlib1g liblzma5 liblz4-1)
TOOLS_BINARIES=(/usr/bin/rclone /usr/bin/zstd /usr/bin/age /usr/bin/age-keygen /bin/busybox)
# SeaweedFS publishes no release as a Go module version; the Go module proxy serves this
# commit of its main branch (2026-11-09) as a pseudo-version, which is the image's tag.
SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6

declare -A IMAGE_REF=(
  [pause]="localhost/pause:local"
  [mariadb]="localhost/mariadb:10.11-$DEBIAN_SUITE"
  [mysql]="localhost/mysql:$MYSQL_SERIES-debian"
  [mysqld-exporter]="localhost/mysqld-exporter:$EXPORTER_VERSION"
  [backup-tools]="localhost/backup-tools:$DEBIAN_SUITE"
  [seaweedfs]="localhost/seaweedfs:${SEAWEEDFS_VERSION#v}"
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
  [ -n "${IMAGE_REF[${1:-}]+x}" ] || die "unknown image '${1:-}' (pause, mariadb, mysql, mysqld-exporter, backup-tools or seaweedfs)"
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
  tag=$(sed -n 's/^TAG ?\{0,1\}= //p' "$K8S_SRC/build/pause/Makefile")
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

# "<package> <candidate version>" of each package named; fails when one has none.
every_candidate() {
  local candidates
  candidates=$(apt_candidates "$@")
  if [ "$(grep -cv '(none)' <<<"$candidates")" != "$#" ]; then
    die "apt-cache lacks candidates (run apt-get update): ${candidates//$'\n'/, }"
  fi
  echo "$candidates"
}

# "<package> <candidate version>" of EXPORTER_PACKAGES; fails when one has none, or when
# the exporter's upstream version is not EXPORTER_VERSION (the tag would lie).
exporter_candidates() {
  local candidates version
  candidates=$(every_candidate "${EXPORTER_PACKAGES[@]}")
  version=$(awk -v pkg="${EXPORTER_PACKAGES[0]}" '$1 == pkg { print $2 }' <<<"$candidates")
  version=${version#*:}
  version=${version%-*}
  [ "$version" = "$EXPORTER_VERSION" ] ||
    die "$DEBIAN_SUITE's ${EXPORTER_PACKAGES[0]} is $version, not $EXPORTER_VERSION: change EXPORTER_VERSION (and the tag's users)"
  echo "$candidates"
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
      mysql)
        sha256sum "$HERE/mysql/docker-entrypoint.sh" | cut -d' ' -f1
        # no versions: sid's are not in this host's APT lists (see the header)
        echo "$MYSQL_SUITE $(debian_mirror) $MYSQL_PACKAGES"
        ;;
      mysqld-exporter)
        echo "$EXPORTER_UID"
        exporter_candidates
        ;;
      backup-tools)
        echo "${TOOLS_BINARIES[*]}"
        tools_candidates
        ;;
      seaweedfs)
        echo "$SEAWEEDFS_VERSION"
        go env GOVERSION 2>/dev/null || die "Go is needed to build the seaweedfs image"
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

# --- Debian root filesystems (mariadb, mysql) ------------------------------------------------

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

# rootfs_put ROOTFS PATH MODE < CONTENT: writes the file PATH of the rootfs, replacing a
# symlink there. PATH is resolved inside the chroot: a Debian rootfs is full of absolute
# symlinks (sid's /var/run -> /run, /etc/alternatives/*), and followed from the host they
# lead to the HOST's files.
rootfs_put() {
  local rootfs=$1 path=$2 mode=$3
  # shellcheck disable=SC2016 # expanded by the inner shell
  in_rootfs "$rootfs" sh -ec 'mkdir -p "$(dirname "$1")"; rm -f "$1"; cat > "$1"; chmod "$2" "$1"' \
    rootfs_put "$path" "$mode"
}

# debootstrap_rootfs ROOTFS SUITE PACKAGES: a minbase Debian SUITE plus PACKAGES (comma-
# separated) from this host's mirror, the .debs cached per suite.
debootstrap_rootfs() {
  local rootfs=$1 suite=$2 packages=$3 mirror debs="$IMAGE_CACHE/debs"
  mirror=$(debian_mirror)
  # bookworm's cache keeps its first name; other suites get their own
  [ "$suite" = "$DEBIAN_SUITE" ] || debs+="-$suite"
  say "debootstrap --variant=minbase --include=$packages $suite from $mirror (a few minutes)"
  mkdir -p "$debs"
  # its own mount namespace: debootstrap's /proc and /sys mounts vanish even if it is killed
  if ! unshare --mount --fork -- debootstrap --variant=minbase --include="$packages" \
    --cache-dir="$debs" "$suite" "$rootfs" "$mirror" 2>&1 \
    | tee "$WORK/debootstrap.log" \
    | awk '/^I: (Resolving|Checking component|Installing|Unpacking the|Unpacking required|Configuring the|Configuring required|Base system)/ || /^[WE]: / {
             print ">>   " $0; fflush() }' >&2
  then
    tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || tail -n 30 "$WORK/debootstrap.log" >&2
    die "debootstrap failed (log: $WORK/debootstrap.log)"
  fi
}

# No service may start inside an image build (nor later in the container), and a later
# installation leaves documentation out (like Debian's slim images).
container_dpkg_policy() {
  local rootfs=$1
  printf '#!/bin/sh\nexit 101\n' | rootfs_put "$rootfs" /usr/sbin/policy-rc.d 0755
  rootfs_put "$rootfs" /etc/dpkg/dpkg.cfg.d/container-excludes 0644 <<'EOF'
# Written by cluster/images/build.sh: a container image needs no documentation.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
}

# The mysql account with the fixed uid/gid MYSQL_UID (the official images' 999): created
# when the packages made none (Debian's mysql-server-core does not), else renumbered, its
# files following.
mysql_account() {
  local rootfs=$1 old_uid old_gid
  old_uid=$(awk -F: '$1 == "mysql" { print $3 }' "$rootfs/etc/passwd")
  old_gid=$(awk -F: '$1 == "mysql" { print $3 }' "$rootfs/etc/group")
  if [ -z "$old_uid" ] && [ -z "$old_gid" ]; then
    say "mysql user: creating it with uid/gid $MYSQL_UID"
    in_rootfs "$rootfs" groupadd --system --gid "$MYSQL_UID" mysql
    in_rootfs "$rootfs" useradd --system --uid "$MYSQL_UID" --gid "$MYSQL_UID" \
      --home-dir /var/lib/mysql --no-create-home --shell /usr/sbin/nologin mysql
    return 0
  fi
  if [ -z "$old_uid" ] || [ -z "$old_gid" ]; then
    die "the rootfs has half a mysql account (user uid '$old_uid', group gid '$old_gid')"
  fi
  if [ "$old_uid" != "$MYSQL_UID" ] || [ "$old_gid" != "$MYSQL_UID" ]; then
    say "mysql user: uid/gid $old_uid/$old_gid -> $MYSQL_UID/$MYSQL_UID"
    in_rootfs "$rootfs" groupmod -g "$MYSQL_UID" mysql
    in_rootfs "$rootfs" usermod -u "$MYSQL_UID" -g "$MYSQL_UID" mysql
    find "$rootfs" -xdev -uid "$old_uid" -exec chown -h "$MYSQL_UID" {} +
    find "$rootfs" -xdev -gid "$old_gid" -exec chgrp -h "$MYSQL_UID" {} +
  fi
}

# A container gets its own hosts, hostname and resolv.conf from the runtime.
container_etc() {
  local rootfs=$1
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' | rootfs_put "$rootfs" /etc/hosts 0644
  rootfs_put "$rootfs" /etc/resolv.conf 0644 </dev/null
  rootfs_put "$rootfs" /etc/hostname 0644 </dev/null
}

slim_rootfs() {
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
  # the server's messages in English only (MariaDB and MySQL share the layout)
  find "$rootfs/usr/share/mysql" -mindepth 1 -maxdepth 1 -type d \! -name english \! -name charsets \
    -exec test -f {}/errmsg.sys \; -exec rm -rf {} +
  find "$rootfs/var/log" -type f -delete
  [ ! -s "$rootfs/etc/machine-id" ] || : > "$rootfs/etc/machine-id"
}

# check_rootfs ROOTFS SERVER COMMAND...: SERVER and every COMMAND are on the rootfs' PATH;
# prints the server's version.
check_rootfs() {
  local rootfs=$1 server=$2 cmd missing=()
  shift 2
  for cmd in "$server" "$@"; do
    [ -n "$(in_rootfs "$rootfs" sh -c "command -v $cmd" 2>/dev/null)" ] || missing+=("$cmd")
  done
  [ "${#missing[@]}" -eq 0 ] || die "the rootfs lacks: ${missing[*]}"
  in_rootfs "$rootfs" "$server" --version >&2
}

# --- mariadb -------------------------------------------------------------------------------------

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
  container_dpkg_policy "$rootfs"
  say "applying $DEBIAN_SUITE-updates and $DEBIAN_SUITE-security"
  if ! in_rootfs "$rootfs" sh -ec 'apt-get -q update; apt-get -q -y -o Dpkg::Options::=--force-confold dist-upgrade; apt-get clean' \
    > "$WORK/apt.log" 2>&1; then
    tail -n 30 "$WORK/apt.log" >&2
    die "updating the rootfs failed (log: $WORK/apt.log)"
  fi
  grep -E '^Setting up |^[0-9]+ upgraded' "$WORK/apt.log" | sed 's/^/>>   /' >&2 || true
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
  container_etc "$rootfs"
}

# begin_rootfs_build NAME TARBALL: returns 1 when TARBALL is already cached; otherwise
# checks what a debootstrap build needs and begins the build of image NAME ($WORK).
begin_rootfs_build() {
  local name=$1 out=$2
  if [ -f "$out" ]; then
    say "cached: ${IMAGE_REF[$name]} $out"
    return 1
  fi
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
  [ "$(id -u)" = 0 ] || die "building the $name image needs root (debootstrap, chroot, chown)"
  begin_build "$name"
}

build_mariadb() {
  local out
  out=$(image_path mariadb)
  begin_rootfs_build mariadb "$out" || return 0
  local rootfs="$WORK/rootfs" started=$SECONDS
  debootstrap_rootfs "$rootfs" "$DEBIAN_SUITE" "$MARIADB_PACKAGES"
  mariadb_update "$rootfs"
  mysql_account "$rootfs"
  mariadb_configure "$rootfs"
  slim_rootfs "$rootfs"
  check_rootfs "$rootfs" mariadbd mariadb mariadb-install-db mariadb-tzinfo-to-sql mysql mysqldump \
    mysqladmin sh bash setpriv docker-entrypoint.sh
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

# --- mysql ---------------------------------------------------------------------------------------

# Configuration, directories and entrypoint as the official image has them (its Dockerfile
# and the my.cnf of Oracle's minimal server package), all written inside the chroot: in sid
# /var/run is an absolute symlink to /run (see rootfs_put).
mysql_configure() {
  local rootfs=$1
  # Debian's mysql-server-core ships no configuration; mysqld reads /etc/my.cnf (absent),
  # this file, then ~/.my.cnf
  rootfs_put "$rootfs" /etc/mysql/my.cnf 0644 <<'EOF'
# Written by cluster/images/build.sh: Oracle MySQL in a container, set up like the
# official mysql image. Add settings in /etc/mysql/conf.d/*.cnf.
[mysqld]
user = mysql
datadir = /var/lib/mysql
socket = /var/run/mysqld/mysqld.sock
pid-file = /var/run/mysqld/mysqld.pid
mysqlx-socket = /var/run/mysqld/mysqlx.sock
secure-file-priv = /var/lib/mysql-files
# clients are other pods: every address, the usual port
bind-address = *
port = 3306
# match accounts by IP, never wait for reverse DNS, no host cache (skip-host-cache was
# removed in 8.3: 9.x refuses it as an unknown option)
skip-name-resolve
host-cache-size = 0

[client]
socket = /var/run/mysqld/mysqld.sock

!includedir /etc/mysql/conf.d/
EOF
  # shellcheck disable=SC2016 # run by the rootfs' shell
  in_rootfs "$rootfs" sh -ec '
    mkdir -p /etc/mysql/conf.d /var/lib/mysql /var/lib/mysql-files /var/run/mysqld /docker-entrypoint-initdb.d
    chown mysql:mysql /var/lib/mysql /var/lib/mysql-files /var/run/mysqld
    # data, socket and pid file writable whatever uid the server ends up with (as upstream)
    chmod 1777 /var/lib/mysql /var/run/mysqld
    chmod 0750 /var/lib/mysql-files'
  rootfs_put "$rootfs" /usr/local/bin/docker-entrypoint.sh 0755 < "$HERE/mysql/docker-entrypoint.sh"
  container_etc "$rootfs"
}

# The tools the entrypoint and an operator use are there, gosu can switch to mysql, and the
# server accepts its configuration: an unknown option in my.cnf fails here, not in a pod.
# (--validate-config, not --verbose --help: 9.7's help exits 0 despite unknown options.)
mysql_check_rootfs() {
  local rootfs=$1
  check_rootfs "$rootfs" mysqld mysql mysqldump mysqladmin mysql_tzinfo_to_sql gosu sh bash \
    docker-entrypoint.sh base64 find awk gunzip bunzip2 xzcat zstd
  in_rootfs "$rootfs" gosu mysql true || die "gosu cannot switch to the mysql user"
  local errors
  if ! errors=$(in_rootfs "$rootfs" gosu mysql mysqld --validate-config 2>&1); then
    die "mysqld rejects its configuration: $errors"
  fi
}

build_mysql() {
  local out
  out=$(image_path mysql)
  begin_rootfs_build mysql "$out" || return 0
  local rootfs="$WORK/rootfs" started=$SECONDS
  debootstrap_rootfs "$rootfs" "$MYSQL_SUITE" "$MYSQL_PACKAGES"
  container_dpkg_policy "$rootfs"
  mysql_account "$rootfs"
  mysql_configure "$rootfs"
  slim_rootfs "$rootfs"
  mysql_check_rootfs "$rootfs"
  local version series
  version=$(dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f='${Version}' mysql-server-core)
  series=${version%%-*}
  series=${series%.*}
  [ "$series" = "$MYSQL_SERIES" ] || die "$MYSQL_SUITE's mysql-server-core is $version, not $MYSQL_SERIES.x: change MYSQL_SERIES (and the tag's users)"
  dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f='${Package} ${Version}\n' > "$WORK/packages"
  say "installed: $(grep -E '^(mysql-server-core|mysql-client-core|gosu|libc6|libssl3t64|tzdata) ' "$WORK/packages" | paste -sd, - | sed 's/,/, /g')"
  say "packing ${IMAGE_REF[mysql]} (MySQL $version, $(du -sm "$rootfs" | cut -f1) MiB rootfs)"
  pack "$rootfs" "$WORK/image.tar" mysql \
    --entrypoint '["docker-entrypoint.sh"]' --cmd '["mysqld"]' \
    --env "MYSQL_MAJOR=$MYSQL_SERIES" --env "MYSQL_VERSION=$version" \
    --expose 3306/tcp --expose 33060/tcp --volume /var/lib/mysql \
    --label "org.opencontainers.image.title=mysql" \
    --label "org.opencontainers.image.description=Oracle MySQL server from Debian $MYSQL_SUITE (mysql-$MYSQL_SERIES)" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.base.name=debian:$MYSQL_SUITE"
  mv "$WORK/packages" "${out%.tar}.packages"
  mv "$WORK/image.tar" "$out"
  end_build mysql "$out"
  say "built: ${IMAGE_REF[mysql]} $out in $((SECONDS - started)) s"
}

# --- mysqld-exporter -----------------------------------------------------------------------------

# exporter_copy TREE PATH ROOTFS: copies PATH of the unpacked package TREE into ROOTFS, with
# the symlinks on the way to the file (a target is resolved inside TREE, never on the host)
exporter_copy() {
  local tree=$1 path=$2 rootfs=$3 target hops=0
  while [ -L "$tree$path" ]; do
    install -d -m 0755 "$rootfs$(dirname "$path")"
    cp -P "$tree$path" "$rootfs$path"
    target=$(readlink "$tree$path")
    case $target in
      /*) path=$target ;;
      *) path=$(realpath -m -s "$(dirname "$path")/$target") ;;
    esac
    hops=$((hops + 1))
    [ "$hops" -le 8 ] || die "$path: too many symlinks in $tree"
  done
  [ -f "$tree$path" ] || die "$path is not in $tree"
  install -d -m 0755 "$rootfs$(dirname "$path")"
  cp -p "$tree$path" "$rootfs$path"
}

# rootfs_etc ROOTFS HOME: the /etc a single-user image needs: root and nobody (uid/gid
# EXPORTER_UID, home HOME) in passwd and group, hosts, and the files kubelet mounts over
# (resolv.conf, hostname), all 0644.
rootfs_etc() {
  local rootfs=$1 home=$2
  printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:%s:%s:nobody:%s:/usr/sbin/nologin\n' \
    "$EXPORTER_UID" "$EXPORTER_UID" "$home" > "$rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:%s:\n' "$EXPORTER_UID" > "$rootfs/etc/group"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$rootfs/etc/hosts"
  : > "$rootfs/etc/resolv.conf"
  : > "$rootfs/etc/hostname"
  chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group" "$rootfs/etc/hosts" "$rootfs/etc/resolv.conf" \
    "$rootfs/etc/hostname"
}

# The binary, the interpreter and libraries it links (readelf: what ldd would load) from
# libc6, the packages' copyright files, and the /etc a container needs: nobody's account,
# and hosts/resolv.conf/hostname for the runtime to mount over.
exporter_rootfs() {
  local rootfs=$1 bin=$2 exporter=$WORK/pkg/${EXPORTER_PACKAGES[0]} libc=$WORK/pkg/libc6
  local interp lib path pkg needed=()
  install -d -m 0755 "$rootfs" "$rootfs/bin" "$rootfs/etc" "$rootfs/dev" "$rootfs/proc" "$rootfs/sys"
  install -m 0755 "$exporter/usr/bin/prometheus-mysqld-exporter" "$rootfs$bin"
  interp=$(readelf -l "$rootfs$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]$/\1/p')
  mapfile -t needed < <(readelf -d "$rootfs$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
  say "$bin links ${needed[*]:-nothing} (interpreter ${interp:-none}): copying them from libc6"
  [ -z "$interp" ] || exporter_copy "$libc" "$interp" "$rootfs"
  for lib in "${needed[@]}"; do
    path=$(cd "$libc" && find . -name "$lib" \( -type f -o -type l \) | head -n1)
    [ -n "$path" ] || die "$bin needs $lib, which libc6 does not ship: add its package to EXPORTER_PACKAGES"
    exporter_copy "$libc" "${path#.}" "$rootfs"
  done
  for pkg in "${EXPORTER_PACKAGES[@]}"; do
    install -D -m 0644 "$WORK/pkg/$pkg/usr/share/doc/$pkg/copyright" "$rootfs/usr/share/doc/$pkg/copyright"
  done
  rootfs_etc "$rootfs" /nonexistent
}

# begin_packed_build NAME: false (and says so) when image NAME's tarball is cached; else
# checks what a build from unpacked .debs needs (root, readelf) and begins it (begin_build),
# with umask 022: what the build writes must be readable by uid EXPORTER_UID.
begin_packed_build() {
  local name=$1 out
  out=$(image_path "$name")
  if [ -f "$out" ]; then
    say "cached: ${IMAGE_REF[$name]} $out"
    return 1
  fi
  [ "$(id -u)" = 0 ] || die "building the $name image needs root (root-owned files, chroot to run it as $EXPORTER_UID)"
  command -v readelf >/dev/null || die "readelf is not installed (apt-get install binutils)"
  begin_build "$name"
  umask 022
}

build_mysqld_exporter() {
  local name=mysqld-exporter out
  out=$(image_path "$name")
  begin_packed_build "$name" || return 0
  local rootfs="$WORK/rootfs" started=$SECONDS bin=/bin/mysqld_exporter candidates pkg version
  local text
  candidates=$(exporter_candidates)
  unpack_debs "$candidates"
  exporter_rootfs "$rootfs" "$bin"
  # it must start as the image's user with nothing but the rootfs: a missing library fails here
  if ! text=$(chroot --userspec="$EXPORTER_UID:$EXPORTER_UID" "$rootfs" "$bin" --version 2>&1); then
    die "$bin does not run as $EXPORTER_UID in the rootfs: $text"
  fi
  say "runs as $EXPORTER_UID: ${text%%$'\n'*}"
  version=$(awk -v pkg="${EXPORTER_PACKAGES[0]}" '$1 == pkg { print $2 }' "$WORK/packages")
  say "packing ${IMAGE_REF[$name]} ($(paste -sd, "$WORK/packages" | sed 's/,/, /g'); $(du -sm "$rootfs" | cut -f1) MiB rootfs)"
  pack "$rootfs" "$WORK/image.tar" "$name" \
    --entrypoint "[\"$bin\"]" --user "$EXPORTER_UID:$EXPORTER_UID" --expose 9104/tcp \
    --label "org.opencontainers.image.title=mysqld-exporter" \
    --label "org.opencontainers.image.description=Prometheus mysqld_exporter from Debian $DEBIAN_SUITE's ${EXPORTER_PACKAGES[0]}" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.url=https://github.com/prometheus/mysqld_exporter"
  mv "$WORK/packages" "${out%.tar}.packages"
  mv "$WORK/image.tar" "$out"
  end_build "$name" "$out"
  say "built: ${IMAGE_REF[$name]} $out in $((SECONDS - started)) s"
}

# unpack_debs CANDIDATES: downloads the "<package> <version>" lines of CANDIDATES with
# apt-get (this host's APT sources) into $WORK/debs, unpacks each into $WORK/pkg/<package>
# and lists "<package> <version>" in $WORK/packages.
unpack_debs() {
  local specs=() debs=() pkg version
  while read -r pkg version; do specs+=("$pkg=$version"); done <<<"$1"
  say "downloading ${specs[*]} with apt-get (this host's APT sources)"
  mkdir -p "$WORK/debs" "$WORK/pkg"
  if ! (cd "$WORK/debs" && apt-get -q -o APT::Sandbox::User=root \
    -o Dir::Cache::pkgcache="$IMAGE_CACHE/apt-pkgcache.bin" -o Dir::Cache::srcpkgcache= \
    download "${specs[@]}") > "$WORK/apt.log" 2>&1; then
    tail -n 20 "$WORK/apt.log" >&2
    die "apt-get download failed (log: $WORK/apt.log)"
  fi
  while read -r pkg version; do
    debs=("$WORK/debs/${pkg}_"*.deb)
    if [ "${#debs[@]}" != 1 ] || [ ! -f "${debs[0]}" ]; then die "no single $pkg .deb in $WORK/debs"; fi
    dpkg-deb -x "${debs[0]}" "$WORK/pkg/$pkg"
    # shellcheck disable=SC2016 # dpkg-deb's format, not the shell's
    dpkg-deb -W --showformat='${Package} ${Version}\n' "${debs[0]}" >> "$WORK/packages"
  done <<<"$1"
}

# runs_in_rootfs ROOTFS CMD...: runs CMD as EXPORTER_UID chrooted into ROOTFS, with /proc and
# /dev as a container has them (rclone's splice support opens both as it starts), in a mount
# namespace of its own, so nothing stays mounted; its output, and its exit status.
runs_in_rootfs() {
  local rootfs=$1
  shift
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --mount --pid --fork sh -c 'mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" &&
    rootfs=$1 user=$2 && shift 2 && exec chroot --userspec="$user" "$rootfs" "$@"' \
    _ "$rootfs" "$EXPORTER_UID:$EXPORTER_UID" "$@" 2>&1
}

# --- backup-tools ------------------------------------------------------------------------------

# "<package> <candidate version>" of TOOLS_PACKAGES; fails when one has none.
tools_candidates() {
  every_candidate "${TOOLS_PACKAGES[@]}"
}

# tools_lib LIB ROOTFS: copies shared library LIB from whichever unpacked package has it.
tools_lib() {
  local lib=$1 rootfs=$2 pkg path
  for pkg in "${TOOLS_PACKAGES[@]}"; do
    path=$(cd "$WORK/pkg/$pkg" && find . -name "$lib" \( -type f -o -type l \) | head -n1)
    if [ -n "$path" ]; then
      exporter_copy "$WORK/pkg/$pkg" "${path#.}" "$rootfs"
      return 0
    fi
  done
  die "$lib is in none of ${TOOLS_PACKAGES[*]}: add its package to TOOLS_PACKAGES"
}

build_backup_tools() {
  local name=backup-tools out
  out=$(image_path "$name")
  begin_packed_build "$name" || return 0
  local rootfs="$WORK/rootfs" started=$SECONDS candidates pkg version bin tree interp lib text
  local needed=()
  candidates=$(tools_candidates)
  unpack_debs "$candidates"
  install -d -m 0755 "$rootfs" "$rootfs/bin" "$rootfs/usr/bin" "$rootfs/etc/ssl/certs" "$rootfs/dev" \
    "$rootfs/proc" "$rootfs/sys"
  install -d -m 1777 "$rootfs/tmp"
  for bin in "${TOOLS_BINARIES[@]}"; do
    tree=''
    for pkg in "${TOOLS_PACKAGES[@]}"; do
      if [ -f "$WORK/pkg/$pkg$bin" ]; then tree="$WORK/pkg/$pkg"; break; fi
    done
    [ -n "$tree" ] || die "$bin is in none of ${TOOLS_PACKAGES[*]}"
    install -m 0755 "$tree$bin" "$rootfs$bin"
    interp=$(readelf -l "$rootfs$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]$/\1/p')
    mapfile -t needed < <(readelf -d "$rootfs$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
    [ -z "$interp" ] || exporter_copy "$WORK/pkg/libc6" "$interp" "$rootfs"
    for lib in "${needed[@]}"; do tools_lib "$lib" "$rootfs"; done
  done
  # busybox's applets the scripts use, as links (sh first: the Jobs run /bin/sh -c)
  for bin in sh awk cat cut date echo env grep head ls mkdir mktemp mv printf rm sed sha256sum sleep sort tail tee test tr wc; do
    ln -s busybox "$rootfs/bin/$bin"
  done
  # the CA bundle, as ca-certificates' postinst (update-ca-certificates) would write it
  find "$WORK/pkg/ca-certificates/usr/share/ca-certificates" -name '*.crt' -print0 | sort -z \
    | xargs -0 cat > "$rootfs/etc/ssl/certs/ca-certificates.crt"
  for pkg in "${TOOLS_PACKAGES[@]}"; do
    install -D -m 0644 "$WORK/pkg/$pkg/usr/share/doc/$pkg/copyright" "$rootfs/usr/share/doc/$pkg/copyright"
  done
  rootfs_etc "$rootfs" /tmp
  # each must start as the image's user with nothing but the rootfs: a missing library fails here
  for bin in "/usr/bin/rclone version" "/usr/bin/zstd --version" "/usr/bin/age --version" "/bin/sh -c true"; do
    # shellcheck disable=SC2086 # a command and its argument
    text=$(runs_in_rootfs "$rootfs" $bin) || die "$bin does not run as $EXPORTER_UID in the rootfs: $text"
  done
  say "packing ${IMAGE_REF[$name]} ($(paste -sd, "$WORK/packages" | sed 's/,/, /g'); $(du -sm "$rootfs" | cut -f1) MiB rootfs)"
  pack "$rootfs" "$WORK/image.tar" "$name" \
    --entrypoint '["/bin/sh"]' --user "$EXPORTER_UID:$EXPORTER_UID" \
    --label "org.opencontainers.image.title=backup-tools" \
    --label "org.opencontainers.image.description=rclone, zstd, age and busybox from Debian $DEBIAN_SUITE (the operator's backup shipping and fetching)"
  mv "$WORK/packages" "${out%.tar}.packages"
  mv "$WORK/image.tar" "$out"
  end_build "$name" "$out"
  say "built: ${IMAGE_REF[$name]} $out in $((SECONDS - started)) s"
}

# --- seaweedfs ---------------------------------------------------------------------------------

# SeaweedFS' weed from the Go module proxy: a throwaway module requires it at
# SEAWEEDFS_VERSION and `go build` (CGO off: one static binary) puts it alone in the image.
# The Go build cache and module cache are the caller's (a rebuild after a key change is quick).
build_seaweedfs() {
  local name=seaweedfs out
  out=$(image_path "$name")
  if [ -f "$out" ]; then
    say "cached: ${IMAGE_REF[$name]} $out"
    return 0
  fi
  command -v go >/dev/null || die "Go is needed to build the $name image"
  begin_build "$name"
  umask 022
  local rootfs="$WORK/rootfs" started=$SECONDS mod="$WORK/module" pid text
  mkdir -p "$mod"
  printf 'module local/seaweedfs-build\n\ngo 1.24\n\nrequire github.com/seaweedfs/seaweedfs %s\n' \
    "$SEAWEEDFS_VERSION" > "$mod/go.mod"
  say "building SeaweedFS $SEAWEEDFS_VERSION from the Go module proxy (first time only, several minutes)"
  (
    cd "$mod"
    export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
    go build -v -trimpath -ldflags "-s -w" -o "$WORK/weed" github.com/seaweedfs/seaweedfs/weed \
      > "$WORK/build.log" 2>&1
  ) &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30
    kill -0 "$pid" 2>/dev/null || break
    say "  still building SeaweedFS ($(grep -c . "$WORK/build.log") packages so far)"
  done
  if ! wait "$pid"; then
    tail -n 30 "$WORK/build.log" >&2
    die "the SeaweedFS build failed"
  fi
  install -d -m 0755 "$rootfs" "$rootfs/usr/bin" "$rootfs/etc" "$rootfs/dev" "$rootfs/proc" "$rootfs/sys" \
    "$rootfs/data"
  install -d -m 1777 "$rootfs/tmp"
  install -m 0755 "$WORK/weed" "$rootfs/usr/bin/weed"
  rootfs_etc "$rootfs" /data
  text=$(runs_in_rootfs "$rootfs" /usr/bin/weed version) || die "weed does not run as $EXPORTER_UID in the rootfs: $text"
  say "runs as $EXPORTER_UID: $(tr -s ' \n' ' ' <<<"$text" | cut -c1-100)"
  pack "$rootfs" "$WORK/image.tar" "$name" \
    --entrypoint '["/usr/bin/weed"]' --user "$EXPORTER_UID:$EXPORTER_UID" --expose 8333/tcp \
    --label "org.opencontainers.image.title=seaweedfs" \
    --label "org.opencontainers.image.description=SeaweedFS weed (S3 gateway, filer, master, volume) built from the Go module proxy" \
    --label "org.opencontainers.image.version=$SEAWEEDFS_VERSION" \
    --label "org.opencontainers.image.url=https://github.com/seaweedfs/seaweedfs"
  mv "$WORK/image.tar" "$out"
  end_build "$name" "$out"
  say "built: ${IMAGE_REF[$name]} $out in $((SECONDS - started)) s"
}

# --- import ------------------------------------------------------------------------------------

# Imports image $1 into the containerd at $2 (namespace k8s.io), unless the image there is
# the one this tarball produced last time (its digest is remembered next to the tarball).
import_image() {
  local name=$1 address=$2 tar ref stamp current digest
  tar=$(image_path "$name")
  [ -f "$tar" ] || "build_${name//-/_}"
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
  if [ "$1" = all ]; then echo pause mariadb mysql mysqld-exporter backup-tools seaweedfs; else echo "$1"; fi
}

main() {
  local cmd=${1:-} name
  case $cmd in
    pause | mariadb | mysql | mysqld-exporter | backup-tools | seaweedfs | all)
      for name in $(names_for "$cmd"); do "build_${name//-/_}"; done
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
