# shellcheck shell=bash
# Owns the Kubernetes binaries, built once and cached by version under $BIN_DIR.
# A current version (the default) is built from the Go module proxy: a throwaway module
# requires k8s.io/kubernetes at that version and pins every staging module to the
# matching v0.Y.Z (k8s.io/kubernetes' own replace lines point at ./staging and are
# ignored in a dependency). 1.20.2, the oldest version the project claims, comes from
# Debian's full source package instead, with the two vendored libraries that break on
# Go >= 1.18 swapped, built by the tree's own Makefile.

K8S_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

binaries_cached() {
  [ -f "$BIN_DIR/.complete" ]
}

ensure_deb_src() {
  local f=/etc/apt/sources.list.d/otus-debian-src.sources
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ /etc/apt/sources.list; then
    say "adding a deb-src entry for Debian main ($f)"
    cat > "$f" <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update -qq
  fi
}

# The vendored OpenAPI validators treat a value as "null" when
# reflect.DeepEqual(reflect.Zero(T), reflect.ValueOf(v)) holds. Since Go 1.18 that is
# true for every zero value, so built with Debian's Go 1.19 the API server rejects an
# empty string in a custom resource ("spec.s in body must be of type string: null").
# Later kube-openapi checks `data == nil` only; do the same.
patch_openapi_validation() {
  local tree=$1 f
  for f in vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go vendor/github.com/go-openapi/validate/type.go; do
    sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$tree/$f"
    grep -q 'if data == nil {' "$tree/$f" || die "could not patch $f"
  done
}

build_binaries() {
  if binaries_cached; then
    say "cached: Kubernetes $K8S_VERSION binaries in $BIN_DIR"
  else
    case "$K8S_VERSION" in
      1.20.*) build_debian_binaries ;;
      *) build_module_binaries ;;
    esac
  fi
  case "$K8S_VERSION" in 1.20.*) ;; *) build_etcd ;; esac
}

# module_build_env: the Go settings of every module build (no toolchain download, go.mod
# and go.sum completed by the go command).
module_build_env() {
  export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
  command -v go >/dev/null || die "Go is needed to build Kubernetes $K8S_VERSION (go 1.24 or newer)"
}

# etcd of the version kubeadm pairs with this Kubernetes line (ETCD_VERSION), from the Go
# module proxy: Debian bookworm's 3.4 is older than a current API server supports.
build_etcd() {
  [ -x "$ETCD_BIN" ] && [ -f "$(dirname "$ETCD_BIN")/.complete" ] && return 0
  module_build_env
  local mod="$SRC_DIR/module-etcd-$ETCD_VERSION" dir tmp
  dir=$(dirname "$ETCD_BIN"); tmp="$dir.tmp"
  say "building etcd $ETCD_VERSION from the Go module proxy (first time only, about a minute)"
  mkdir -p "$mod" && rm -rf "$tmp" && mkdir -p "$tmp"
  printf 'module local/etcd-build\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" > "$mod/go.mod"
  (
    cd "$mod"
    with_progress "$SRC_DIR/build-etcd-$ETCD_VERSION.log" \
      go build -v -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
  ) || { tail -30 "$SRC_DIR/build-etcd-$ETCD_VERSION.log" >&2; die "etcd build failed (log: $SRC_DIR/build-etcd-$ETCD_VERSION.log)"; }
  touch "$tmp/.complete"
  rm -rf "$dir" && mv "$tmp" "$dir"
  say "cached etcd $ETCD_VERSION in $dir"
}

# with_progress LOG CMD...: runs CMD with its output in LOG, printing a line every 30 s.
with_progress() {
  local log=$1 pid; shift
  "$@" > "$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30
    kill -0 "$pid" 2>/dev/null || break
    say "  still building ($(grep -c . "$log") lines of log; $(tail -1 "$log" | cut -c1-100 | tr -s ' '))"
  done
  wait "$pid"
}

# The staging modules k8s.io/kubernetes replaces with ./staging/src/k8s.io/<name>.
staging_modules() {
  sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$1/go.mod"
}

build_module_binaries() {
  local mod="$SRC_DIR/module-$K8S_VERSION" minor=${K8S_VERSION#1.} src
  module_build_env
  say "building Kubernetes $K8S_VERSION from the Go module proxy with $(go version | cut -d' ' -f3); first time only, about 20 minutes on 2 cores"
  mkdir -p "$mod"
  go mod download "k8s.io/kubernetes@v$K8S_VERSION" || die "the Go module proxy does not serve k8s.io/kubernetes v$K8S_VERSION"
  src=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src" ] || die "no source directory for k8s.io/kubernetes v$K8S_VERSION"
  {
    echo "module local/kubernetes-build"
    echo
    echo "go $(sed -n 's/^go //p' "$src/go.mod")"
    echo
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo
    echo "replace ("
    staging_modules "$src" | while read -r m; do echo "	$m => $m v0.$minor"; done
    echo ")"
  } > "$mod/go.mod"
  local version_pkg ldflags="-s -w" key val
  for version_pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    for key in gitVersion=v$K8S_VERSION gitMajor=1 "gitMinor=${minor%%.*}" gitTreeState=clean buildDate=1970-01-01T00:00:00Z; do
      val=${key#*=}; key=${key%%=*}
      ldflags="$ldflags -X $version_pkg.$key=$val"
    done
  done
  local tmp="$BIN_DIR.tmp" pkgs=() b
  rm -rf "$tmp" && mkdir -p "$tmp"
  for b in "${K8S_BINARIES[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  (
    cd "$mod"
    with_progress "$SRC_DIR/build-$K8S_VERSION.log" \
      go build -v -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
  ) || { tail -30 "$SRC_DIR/build-$K8S_VERSION.log" >&2; die "Kubernetes build failed (log: $SRC_DIR/build-$K8S_VERSION.log)"; }
  for b in "${K8S_BINARIES[@]}"; do [ -x "$tmp/$b" ] || die "the build left no $b"; done
  touch "$tmp/.complete"
  rm -rf "$BIN_DIR" && mv "$tmp" "$BIN_DIR"
  say "cached Kubernetes binaries in $BIN_DIR"
}

build_debian_binaries() {
  ensure_deb_src
  mkdir -p "$SRC_DIR"
  local orig
  orig=$(find "$SRC_DIR" -maxdepth 1 -name "kubernetes_*really${K8S_VERSION}.orig.tar.gz" | head -1)
  if [ -z "$orig" ]; then
    say "downloading Debian's kubernetes source package (34 MB)"
    (cd "$SRC_DIR" && apt-get source --download-only kubernetes >/dev/null 2>&1) || die "apt-get source kubernetes failed"
    orig=$(find "$SRC_DIR" -maxdepth 1 -name "kubernetes_*really${K8S_VERSION}.orig.tar.gz" | head -1)
    [ -n "$orig" ] || die "Debian's kubernetes source is not version $K8S_VERSION (the only full tree)"
  fi
  local tree="$SRC_DIR/tree/kubernetes-$K8S_VERSION"
  if [ ! -f "$tree/.patched-r$BUILD_REV" ]; then
    say "unpacking $orig"
    rm -rf "$SRC_DIR/tree" && mkdir -p "$SRC_DIR/tree"
    tar -xzf "$orig" -C "$SRC_DIR/tree"
    local p
    for p in github.com/modern-go/reflect2 github.com/json-iterator/go; do
      [ -d "/usr/share/gocode/src/$p" ] || die "missing /usr/share/gocode/src/$p"
      rm -rf "${tree:?}/vendor/$p"
      cp -r "/usr/share/gocode/src/$p" "$tree/vendor/$p"
      find "$tree/vendor/$p" -name '*_test.go' -delete
    done
    patch_openapi_validation "$tree"
    touch "$tree/.patched-r$BUILD_REV"
  fi
  say "building Kubernetes $K8S_VERSION (${K8S_BINARIES[*]}); first time only, about 8-10 minutes on 2 cores"
  local what="" b
  for b in "${K8S_BINARIES[@]}"; do what="$what cmd/$b"; done
  (
    cd "$tree"
    with_progress "$SRC_DIR/build.log" make WHAT="${what# }"
  ) || { tail -30 "$SRC_DIR/build.log" >&2; die "Kubernetes build failed (log: $SRC_DIR/build.log)"; }
  local tmp="$BIN_DIR.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  for b in "${K8S_BINARIES[@]}"; do cp "$tree/_output/bin/$b" "$tmp/$b"; done
  touch "$tmp/.complete"
  rm -rf "$BIN_DIR" && mv "$tmp" "$BIN_DIR"
  say "cached Kubernetes binaries in $BIN_DIR"
}
